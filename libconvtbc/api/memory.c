/*
 * Device and host memory from the runtime: allocation and release, the
 * device's memory budget (aclrtGetMemInfo), pointer attributes, and the
 * checks and views the op and the copies use (api/memory.h). Copies and
 * fills are in memory_copy.c, the guarded mappings in device_pages.c.
 */
#include "api/memory.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl.h"
#include "convtbc/convtbc_ext.h"
#include "api/device_pages.h"
#include "api/errors.h"
#include "api/log.h"
#include "api/registry.h"
#include "api/runtime.h"
#include "api/soc_profile.h"

/* One block from aclrtMalloc or a variant. */
typedef struct {
    char *device;        /* the address handed out */
    char *host;          /* where the library reads and writes it (== device for a plain block) */
    size_t size;         /* bytes asked for: what the checks allow */
    size_t reach;        /* bytes addressable from `device`: the pages, or all of a plain block, padding included */
    size_t charge;       /* bytes it takes from the device's memory */
    uint32_t page_size;  /* the device page size its policy gives */
    bool guarded;        /* the caller's address is inaccessible right now */
    ctbc_pages pages;    /* pages.device is NULL for a plain block (posix_memalign) */
} device_block;

/* What lookups copy out of a live block: enough to check a range and find
 * its view. */
typedef struct {
    char *device, *host;
    size_t size, reach;
    uint32_t page_size;
} located;

/* Oldest first; a block leaves the quarantine (and is really freed) when it
 * holds more blocks or bytes than this. */
enum { QUARANTINE_BLOCKS = 1024 };
static const size_t QUARANTINE_BYTES = (size_t)256 << 20;

/* The live blocks and the quarantine, under one lock. Lookups scan the live
 * blocks' address ranges (`spans`, parallel to `live`, small so that the
 * scan stays in a few cache lines) newest first: live blocks are few, and
 * the scan keeps phase 2 within a few hundred nanoseconds. */
typedef struct {
    uintptr_t start;
    size_t reach;
} span;

static struct {
    pthread_mutex_t lock;
    device_block *live;
    span *spans;
    size_t count, capacity;
    size_t charged; /* sum of the live blocks' charges */
    device_block quarantined[QUARANTINE_BLOCKS];
    size_t first, held, held_bytes;
} blocks = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0, 0, 0, {{0}}, 0, 0, 0};

static ctbc_registry host_blocks = CTBC_REGISTRY_INIT;
static ctbc_registry declared_host = CTBC_REGISTRY_INIT;

/* In a fork()ed child: the blocks its parent had, live or quarantined. The
 * child does not have them (guarded pages are not inherited, and plain ones
 * belong to the parent's runtime); they are kept only so that a pointer into
 * one is refused with a message that says so (blocks.lock). */
typedef struct {
    uintptr_t start;
    size_t size, reach;
} inherited_block;

static struct {
    inherited_block *items;
    size_t count;
} inherited;

/* ---- the two switches ---------------------------------------------------------- */

static int checking = 1;
static pthread_once_t checking_once = PTHREAD_ONCE_INIT;

static void read_checking(void)
{
    const char *text = getenv("CONVTBC_CHECK_MEMORY");
    if (text && strcmp(text, "0") == 0)
        checking = 0;
}

static bool checking_on(void)
{
    pthread_once(&checking_once, read_checking);
    return __atomic_load_n(&checking, __ATOMIC_RELAXED) != 0;
}

int convtbcSetMemoryChecking(int enabled)
{
    pthread_once(&checking_once, read_checking);
    return __atomic_exchange_n(&checking, enabled ? 1 : 0, __ATOMIC_RELAXED);
}

/* The guard (blocks.lock for writes). Switched off by the environment,
 * blocks are plain host memory as they always were; switched off at run
 * time, they stay mapped twice so that switching it on again guards them. */
static bool guard = true;
static bool guard_off_by_environment;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

static void read_guard(void)
{
    const char *text = getenv("CONVTBC_GUARD_DEVICE_MEMORY");
    if (text && strcmp(text, "0") == 0)
        guard = false, guard_off_by_environment = true;
}

static void protect_all(bool guarded)
{
    for (size_t i = 0; i < blocks.count + blocks.held; i++) {
        device_block *b = i < blocks.count ? &blocks.live[i]
                                           : &blocks.quarantined[(blocks.first + i - blocks.count) % QUARANTINE_BLOCKS];
        if (b->pages.device && b->guarded != guarded) {
            ctbc_pages_protect(&b->pages, guarded);
            b->guarded = guarded;
        }
    }
}

int convtbcSetDeviceMemoryGuard(int enabled)
{
    pthread_once(&guard_once, read_guard);
    pthread_mutex_lock(&blocks.lock);
    int previous = guard;
    guard = enabled != 0;
    protect_all(guard);
    pthread_mutex_unlock(&blocks.lock);
    return previous;
}

/* ---- lookups ---------------------------------------------------------------------- */

/* Index of the live block whose reach holds `address`, or -1 (lock held). */
static ptrdiff_t find_live(const void *address)
{
    uintptr_t at = (uintptr_t)address;
    for (size_t i = blocks.count; i-- > 0;)
        if (at - blocks.spans[i].start < blocks.spans[i].reach)
            return (ptrdiff_t)i;
    return -1;
}

static bool lookup_live(const void *address, located *found)
{
    pthread_mutex_lock(&blocks.lock);
    ptrdiff_t at = address ? find_live(address) : -1;
    if (at >= 0) {
        const device_block *b = &blocks.live[at];
        *found = (located){b->device, b->host, b->size, b->reach, b->page_size};
    }
    pthread_mutex_unlock(&blocks.lock);
    return at >= 0;
}

/* Whether [at, at + bytes) and [start, start + reach) share a byte. */
static bool overlaps(uintptr_t at, size_t bytes, uintptr_t start, size_t reach)
{
    return at < start ? start - at < bytes : at - start < reach;
}

/* The quarantined block that [address, address + bytes) touches (bytes >= 1). */
static bool lookup_freed_range(const void *address, size_t bytes, device_block *found)
{
    uintptr_t at = (uintptr_t)address;
    bool hit = false;
    pthread_mutex_lock(&blocks.lock);
    for (size_t i = 0; i < blocks.held && !hit; i++) {
        const device_block *b = &blocks.quarantined[(blocks.first + i) % QUARANTINE_BLOCKS];
        if (overlaps(at, bytes, (uintptr_t)b->device, b->reach)) {
            *found = *b;
            hit = true;
        }
    }
    pthread_mutex_unlock(&blocks.lock);
    return hit;
}

static bool lookup_freed(const void *address, device_block *found) { return lookup_freed_range(address, 1, found); }

/* The parent's block that `address` lies in, in a fork()ed child. */
static bool lookup_inherited(const void *address, inherited_block *found)
{
    uintptr_t at = (uintptr_t)address;
    bool hit = false;
    pthread_mutex_lock(&blocks.lock);
    for (size_t i = 0; i < inherited.count && !hit; i++) {
        if (at - inherited.items[i].start < inherited.items[i].reach) {
            *found = inherited.items[i];
            hit = true;
        }
    }
    pthread_mutex_unlock(&blocks.lock);
    return hit;
}

/* Whether this process has `address` mapped with read access, and write
 * access too when `written`: the child's own memory, mapped since the fork
 * where a parent's block was. Read from /proc/self/maps, which tells the
 * protection too (a reservation made PROT_NONE is not usable memory); only
 * stale pointers get here, so the cost does not matter. */
static bool usable_here(const void *address, bool written)
{
    FILE *maps = fopen("/proc/self/maps", "re");
    if (!maps)
        return false;
    uintptr_t at = (uintptr_t)address;
    bool usable = false;
    char line[512];
    while (fgets(line, sizeof line, maps)) {
        unsigned long long start, end;
        char perms[5];
        if (sscanf(line, "%llx-%llx %4s", &start, &end, perms) != 3 || at < start || at >= end)
            continue;
        usable = perms[0] == 'r' && (!written || perms[1] == 'w');
        break;
    }
    fclose(maps);
    return usable;
}

static void *view_of(const located *b, const void *address)
{
    return b->host + ((const char *)address - b->device);
}

void *ctbc_device_view(const void *address)
{
    located b;
    return lookup_live(address, &b) ? view_of(&b, address) : (void *)address;
}

bool ctbc_is_device_memory(const void *address, size_t bytes)
{
    if (bytes == 0)
        return false;
    bool hit = false;
    pthread_mutex_lock(&blocks.lock);
    for (size_t i = blocks.count; i-- > 0 && !hit;)
        hit = overlaps((uintptr_t)address, bytes, blocks.spans[i].start, blocks.spans[i].reach);
    pthread_mutex_unlock(&blocks.lock);
    return hit;
}

bool ctbc_is_device_address(const void *address, bool written)
{
    located live;
    device_block freed;
    inherited_block parents;
    if (!address)
        return false;
    if (lookup_live(address, &live) || lookup_freed(address, &freed))
        return true;
    /* A parent's block, whose pages this child does not have: a stale
     * device pointer, refused as device memory, unless the child has since
     * mapped memory of its own there that the copy may use. */
    return lookup_inherited(address, &parents) && !usable_here(address, written);
}

static bool inside(const void *address, size_t bytes, const void *start, size_t size)
{
    size_t offset = (size_t)((uintptr_t)address - (uintptr_t)start);
    return (uintptr_t)address >= (uintptr_t)start && offset <= size && bytes <= size - offset;
}

bool ctbc_is_acl_host_memory(const void *address, size_t bytes)
{
    ctbc_registry_entry block;
    return address && ctbc_registry_find_containing(&host_blocks, address, &block) &&
           inside(address, bytes, block.handle, block.size);
}

/* ---- range checks ---------------------------------------------------------------- */

/* The check proper; `live` is the live block `address` falls in, if any. */
static int check_range(const char *api, const char *what, const void *address, size_t bytes, int status,
                       const located *live)
{
    if (live) {
        if (inside(address, bytes, live->device, live->size))
            return ACL_SUCCESS;
        size_t offset = (size_t)((const char *)address - live->device);
        return ctbc_fail(status, CTBC_EE_RUNTIME, api,
                         "%s: %zu bytes at %p run past the end of the device allocation %p of %zu bytes "
                         "(by %zu bytes)",
                         what, bytes, address, (void *)live->device, live->size, offset + bytes - live->size);
    }
    ctbc_registry_entry declared;
    if (ctbc_registry_find_containing(&declared_host, address, &declared)) {
        if (inside(address, bytes, declared.handle, declared.size))
            return ACL_SUCCESS;
        size_t offset = (size_t)((uintptr_t)address - (uintptr_t)declared.handle);
        return ctbc_fail(status, CTBC_EE_RUNTIME, api,
                         "%s: %zu bytes at %p run past the end of the declared host memory %p of %zu bytes "
                         "(by %zu bytes)",
                         what, bytes, address, declared.handle, declared.size, offset + bytes - declared.size);
    }
    device_block freed;
    if (lookup_freed(address, &freed))
        return ctbc_fail(status, CTBC_EE_RUNTIME, api,
                         "%s: %p is inside the device allocation %p of %zu bytes, which aclrtFree already "
                         "released (use after free)",
                         what, address, (void *)freed.device, freed.size);
    inherited_block parents;
    if (lookup_inherited(address, &parents))
        return ctbc_fail(status, CTBC_EE_RUNTIME, api,
                         "%s: %p is inside the device allocation %p of %zu bytes that the parent process made "
                         "before fork(); a child process does not inherit device memory: allocate its own after "
                         "its own aclInit",
                         what, address, (void *)parents.start, parents.size);
    return ctbc_fail(status, CTBC_EE_RUNTIME, api,
                     "%s: %p is not device memory; give it memory from aclrtMalloc (host memory reaches the device "
                     "only through aclrtMemcpy)",
                     what, address);
}

int ctbc_check_device_range(const char *api, const char *what, const void *address, size_t bytes, int status)
{
    if (bytes == 0 || !checking_on())
        return ACL_SUCCESS;
    located b;
    return check_range(api, what, address, bytes, status, lookup_live(address, &b) ? &b : NULL);
}

int ctbc_use_device_range(const char *api, const char *what, const void *address, size_t bytes, int status,
                          void **view)
{
    located b;
    bool live = lookup_live(address, &b);
    *view = live ? view_of(&b, address) : (void *)address;
    if (bytes == 0)
        return ACL_SUCCESS;
    if (checking_on())
        return check_range(api, what, address, bytes, status, live ? &b : NULL);
    /* Unchecked, a range may run past the bytes asked for, but its view
     * cannot run past the pages behind it. */
    if (live && !inside(address, bytes, b.device, b.reach))
        return ctbc_fail(status, CTBC_EE_RUNTIME, api,
                         "%s: %zu bytes at %p run past the pages of the device allocation %p of %zu bytes", what,
                         bytes, address, (void *)b.device, b.size);
    return ACL_SUCCESS;
}

int ctbc_check_host_range(const char *api, const char *what, const void *address, size_t bytes, int status)
{
    if (bytes == 0 || !checking_on())
        return ACL_SUCCESS;
    if (ctbc_is_device_memory(address, bytes))
        return ctbc_fail(status, CTBC_EE_RUNTIME, api,
                         "%s: %zu bytes at %p are (or run into) device memory, but the copy's kind says host memory",
                         what, bytes, address);
    /* A released block is still device memory, and its pages may have no
     * access: the host side of a copy must not reach into one either. */
    device_block freed;
    if (lookup_freed_range(address, bytes, &freed))
        return ctbc_fail(status, CTBC_EE_RUNTIME, api,
                         "%s: %zu bytes at %p reach into the device allocation %p of %zu bytes, which aclrtFree "
                         "already released (use after free)",
                         what, bytes, address, (void *)freed.device, freed.size);
    return ACL_SUCCESS;
}

aclError convtbcDeclareHostMemory(const void *ptr, size_t size)
{
    if (!ptr || size == 0)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "convtbcDeclareHostMemory",
                         "ptr must not be NULL and size must be > 0");
    if (!ctbc_registry_add(&declared_host, ptr, size))
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, "convtbcDeclareHostMemory", "out of memory");
    return ACL_SUCCESS;
}

aclError convtbcForgetHostMemory(const void *ptr)
{
    if (!ptr || !ctbc_registry_remove(&declared_host, ptr))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "convtbcForgetHostMemory",
                         "%p was not declared with convtbcDeclareHostMemory", ptr);
    return ACL_SUCCESS;
}

/* ---- queued work against aclrtFree -------------------------------------------- */

static pthread_rwlock_t in_use = PTHREAD_RWLOCK_INITIALIZER;

void ctbc_memory_use_begin(void) { pthread_rwlock_rdlock(&in_use); }

void ctbc_memory_use_end(void) { pthread_rwlock_unlock(&in_use); }

/* ---- the device's memory ---------------------------------------------------------- */

enum { NORMAL_PAGE = 4 << 10, HUGE_PAGE = 2 << 20, HUGE1G_PAGE = 1 << 30 };

static int base_policy(aclrtMemMallocPolicy policy)
{
    /* aclrtMallocWithCfg may OR a bandwidth class or read-only access into
     * the policy; the page rule is in the low byte. */
    return (int)((unsigned)policy & 0xFFu);
}

/* The device page size CANN documents for `policy`: huge pages (2 MiB) for
 * HUGE_ONLY, and for HUGE_FIRST above 1 MiB; 1 GiB pages for HUGE1G; normal
 * pages otherwise, and for an unknown policy below 2 MiB. */
static uint32_t page_size_for(aclrtMemMallocPolicy policy, size_t size)
{
    switch (base_policy(policy)) {
    case ACL_MEM_MALLOC_HUGE_FIRST:
    case ACL_MEM_MALLOC_HUGE_FIRST_P2P: return size > ((size_t)1 << 20) ? HUGE_PAGE : NORMAL_PAGE;
    case ACL_MEM_MALLOC_HUGE_ONLY:
    case ACL_MEM_MALLOC_HUGE_ONLY_P2P: return HUGE_PAGE;
    case ACL_MEM_MALLOC_NORMAL_ONLY:
    case ACL_MEM_MALLOC_NORMAL_ONLY_P2P: return NORMAL_PAGE;
    case ACL_MEM_MALLOC_HUGE1G_ONLY:
    case ACL_MEM_MALLOC_HUGE1G_ONLY_P2P: return HUGE1G_PAGE;
    default: return size >= HUGE_PAGE ? HUGE_PAGE : NORMAL_PAGE;
    }
}

/* What a block takes from the device, as CANN sizes it: the size rounded up
 * to 32 bytes, plus 32 bytes of padding where `padded` (aclrtMalloc, not
 * aclrtMallocAlign32; no padding on Ascend950 or with 1 GiB pages), then up
 * to whole huge pages where huge pages are used. false on overflow. */
static bool charge_for(size_t size, bool padded, uint32_t page_size, size_t *charge)
{
    padded = padded && page_size != HUGE1G_PAGE && ctbc_soc()->family != CTBC_SOC_ASCEND950;
    size_t append = 31 + (padded ? 32 : 0);
    if (size > SIZE_MAX - append - page_size)
        return false;
    size_t bytes = (size + append) / 32 * 32;
    if (page_size != NORMAL_PAGE)
        bytes = (bytes + page_size - 1) / page_size * page_size;
    *charge = bytes;
    return true;
}

static size_t free_bytes(void)
{
    uint64_t total = ctbc_soc()->hw.memory_bytes;
    return total > blocks.charged ? (size_t)(total - blocks.charged) : 0;
}

static bool add_live(const device_block *b)
{
    if (blocks.count == blocks.capacity) {
        size_t capacity = blocks.capacity ? 2 * blocks.capacity : 64;
        device_block *grown = realloc(blocks.live, capacity * sizeof *grown);
        if (grown)
            blocks.live = grown;
        span *spans = grown ? realloc(blocks.spans, capacity * sizeof *spans) : NULL;
        if (!spans)
            return false;
        blocks.spans = spans;
        blocks.capacity = capacity;
    }
    blocks.spans[blocks.count] = (span){(uintptr_t)b->device, b->reach};
    blocks.live[blocks.count++] = *b;
    return true;
}

static void discard(const device_block *b)
{
    if (b->pages.device)
        ctbc_pages_unmap(&b->pages);
    else
        free(b->device);
}

/* ---- allocation ------------------------------------------------------------------- */

/* A plain block, for when the guard is off by the environment or the system
 * refuses more mappings: 64-byte aligned (CANN guarantees 64 for aclrtMalloc)
 * and padded by 32 bytes as CANN pads its allocations. */
static char *plain_block(size_t size, size_t *allocated)
{
    void *block = NULL;
    size_t padded = size + 32 + (32 - size % 32) % 32;
    if (padded < size || posix_memalign(&block, 64, padded) != 0)
        return NULL;
    if (allocated)
        *allocated = padded;
    return block;
}

static aclError allocate_device(const char *api, void **out, size_t size, aclrtMemMallocPolicy policy, bool padded)
{
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context(api, &ctx));
    if (!out)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "the pointer to receive the address must not be NULL");
    if (size == 0)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "size must be > 0");
    device_block b;
    memset(&b, 0, sizeof b);
    b.size = size;
    b.page_size = page_size_for(policy, size);
    if (!charge_for(size, padded, b.page_size, &b.charge))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "size %zu is too large", size);
    pthread_once(&guard_once, read_guard);

    /* Book the bytes first, so that threads allocating at once cannot
     * overdraw the device together. */
    pthread_mutex_lock(&blocks.lock);
    size_t available = free_bytes();
    bool fits = b.charge <= available;
    if (fits)
        blocks.charged += b.charge;
    bool guarded = guard, map = guard || !guard_off_by_environment;
    pthread_mutex_unlock(&blocks.lock);
    if (!fits)
        return ctbc_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, CTBC_EE_RUNTIME, api,
                         "out of device memory: %zu bytes asked for (%zu as the device counts them), %zu of %llu "
                         "bytes free on %s",
                         size, b.charge, available, (unsigned long long)ctbc_soc()->hw.memory_bytes, ctbc_soc()->name);

    if (map && ctbc_pages_map(size, api, guarded, &b.pages)) {
        b.device = b.pages.device;
        b.host = b.pages.host;
        b.reach = b.pages.mapped;
        b.guarded = guarded;
    } else {
        if (map)
            CTBC_LOG(CTBC_LOG_WARNING, "%s: cannot map %zu bytes twice; this block is plain host memory, not guarded",
                     api, size);
        /* Its reach is all it holds, padding included, so that an address
         * past its end but inside it is still known as this block's. */
        b.device = b.host = plain_block(size, &b.reach);
    }

    pthread_mutex_lock(&blocks.lock);
    bool added = b.device && add_live(&b);
    if (added && b.pages.device && b.guarded != guard) {
        ctbc_pages_protect(&b.pages, guard); /* the guard was switched meanwhile */
        blocks.live[blocks.count - 1].guarded = guard;
    }
    if (!added)
        blocks.charged -= b.charge;
    pthread_mutex_unlock(&blocks.lock);
    if (!added) {
        if (b.device)
            discard(&b);
        return ctbc_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, CTBC_EE_RUNTIME, api, "cannot allocate %zu bytes", size);
    }
    *out = b.device;
    CTBC_LOG(CTBC_LOG_DEBUG, "%s: %zu bytes at %p", api, size, (void *)b.device);
    return ACL_SUCCESS;
}

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    return allocate_device("aclrtMalloc", devPtr, size, policy, true);
}

aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    return allocate_device("aclrtMallocAlign32", devPtr, size, policy, false);
}

aclError aclrtMallocCached(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    /* Host and device caches need no care here: aclrtMalloc's memory. */
    return allocate_device("aclrtMallocCached", devPtr, size, policy, true);
}

/* The checks CANN makes of an aclrtMallocConfig. */
static aclError check_config(const char *api, const aclrtMallocConfig *cfg)
{
    if (!cfg)
        return ACL_SUCCESS;
    if (cfg->numAttrs != 0 && !cfg->attrs)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "cfg->attrs must not be NULL when cfg->numAttrs is %zu", cfg->numAttrs);
    for (size_t i = 0; i < cfg->numAttrs; i++) {
        const aclrtMallocAttribute *a = &cfg->attrs[i];
        if ((int)a->attr < ACL_RT_MEM_ATTR_RSV || (int)a->attr > ACL_RT_MEM_ATTR_VA_FLAG)
            return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                             "cfg->attrs[%zu].attr %d is not an aclrtMallocAttrType (0 to 3)", i, (int)a->attr);
        if (a->attr == ACL_RT_MEM_ATTR_DEVICE_ID && a->value.deviceId != 0)
            return ctbc_fail(ACL_ERROR_RT_INVALID_DEVICEID, CTBC_EE_RUNTIME, api,
                             "cfg->attrs[%zu]: device %u does not exist; convtbc has device 0 only", i,
                             (unsigned)a->value.deviceId);
    }
    return ACL_SUCCESS;
}

aclError aclrtMallocWithCfg(void **devPtr, size_t size, aclrtMemMallocPolicy policy, aclrtMallocConfig *cfg)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtMallocWithCfg"));
    if (!devPtr)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtMallocWithCfg",
                         "the pointer to receive the address must not be NULL");
    CTBC_RETURN_IF_FAILED(check_config("aclrtMallocWithCfg", cfg));
    return allocate_device("aclrtMallocWithCfg", devPtr, size, policy, true);
}

static aclError allocate_host(const char *api, void **out, uint64_t size)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init(api));
    if (!out)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "the pointer to receive the address must not be NULL");
    if (size == 0)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "size must be > 0");
    char *block = size <= SIZE_MAX ? plain_block((size_t)size, NULL) : NULL;
    if (!block || !ctbc_registry_add(&host_blocks, block, (size_t)size)) {
        free(block);
        return ctbc_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, CTBC_EE_RUNTIME, api, "cannot allocate %llu bytes",
                         (unsigned long long)size);
    }
    *out = block;
    CTBC_LOG(CTBC_LOG_DEBUG, "%s: %llu bytes at %p", api, (unsigned long long)size, (void *)block);
    return ACL_SUCCESS;
}

aclError aclrtMallocHost(void **hostPtr, size_t size) { return allocate_host("aclrtMallocHost", hostPtr, size); }

aclError aclrtMallocHostWithCfg(void **ptr, uint64_t size, aclrtMallocConfig *cfg)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtMallocHostWithCfg"));
    if (!ptr)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtMallocHostWithCfg",
                         "the pointer to receive the address must not be NULL");
    CTBC_RETURN_IF_FAILED(check_config("aclrtMallocHostWithCfg", cfg));
    return allocate_host("aclrtMallocHostWithCfg", ptr, size);
}

/* ---- release ------------------------------------------------------------------------- */

/* Poisons a released block and keeps it aside, evicting (really freeing)
 * the oldest while the quarantine is over its limits. */
static void quarantine(device_block *b, const char *api)
{
    memset(b->host, 0xFF, b->size);
    if (b->pages.device)
        ctbc_pages_mark_freed(&b->pages, api);
    pthread_mutex_lock(&blocks.lock);
    while (blocks.held > 0 &&
           (blocks.held == QUARANTINE_BLOCKS || blocks.held_bytes + b->size > QUARANTINE_BYTES)) {
        device_block *oldest = &blocks.quarantined[blocks.first];
        discard(oldest);
        blocks.held_bytes -= oldest->size;
        blocks.first = (blocks.first + 1) % QUARANTINE_BLOCKS;
        blocks.held--;
    }
    if (b->pages.device && b->guarded != guard) {
        ctbc_pages_protect(&b->pages, guard); /* as the guard stands now */
        b->guarded = guard;
    }
    blocks.quarantined[(blocks.first + blocks.held) % QUARANTINE_BLOCKS] = *b;
    blocks.held++;
    blocks.held_bytes += b->size;
    pthread_mutex_unlock(&blocks.lock);
}

/* The child's memory starts empty: the parent's guarded pages are not
 * inherited (MADV_DONTFORK) and its plain blocks belong to its runtime, so
 * every block the parent had, live or quarantined, is only remembered as
 * the parent's. Its locks are made new: a thread of the parent may have
 * held one at fork(), and that thread does not exist here. */
void ctbc_memory_after_fork(void)
{
    size_t total = inherited.count + blocks.count + blocks.held;
    inherited_block *items = total > inherited.count ? realloc(inherited.items, total * sizeof *items) : NULL;
    if (items) {
        size_t n = inherited.count;
        for (size_t i = 0; i < blocks.count + blocks.held; i++) {
            const device_block *b =
                i < blocks.count ? &blocks.live[i]
                                 : &blocks.quarantined[(blocks.first + i - blocks.count) % QUARANTINE_BLOCKS];
            items[n++] = (inherited_block){(uintptr_t)b->device, b->size, b->reach};
        }
        inherited.items = items;
        inherited.count = n;
    }
    free(blocks.live);
    free(blocks.spans);
    blocks.live = NULL;
    blocks.spans = NULL;
    blocks.count = blocks.capacity = blocks.charged = 0;
    blocks.first = blocks.held = blocks.held_bytes = 0;
    pthread_mutex_init(&blocks.lock, NULL);
    pthread_rwlock_init(&in_use, NULL);
    ctbc_registry_after_fork(&host_blocks, false);
    ctbc_registry_after_fork(&declared_host, true);
    ctbc_pages_after_fork();
}

void ctbc_memory_shutdown(void)
{
    pthread_mutex_lock(&blocks.lock);
    for (size_t i = 0; i < blocks.held; i++)
        discard(&blocks.quarantined[(blocks.first + i) % QUARANTINE_BLOCKS]);
    blocks.first = blocks.held = blocks.held_bytes = 0;
    pthread_mutex_unlock(&blocks.lock);
}

static aclError release_device(const char *api, void *address)
{
    device_block gone;
    pthread_rwlock_wrlock(&in_use); /* queued work using memory finishes first */
    pthread_mutex_lock(&blocks.lock);
    ptrdiff_t at = address ? find_live(address) : -1;
    bool live = at >= 0 && blocks.live[at].device == address;
    if (live) {
        gone = blocks.live[at];
        blocks.count--;
        blocks.live[at] = blocks.live[blocks.count];
        blocks.spans[at] = blocks.spans[blocks.count];
        blocks.charged -= gone.charge;
    }
    pthread_mutex_unlock(&blocks.lock);
    if (live) {
        if (checking_on())
            quarantine(&gone, api);
        else
            discard(&gone);
    }
    pthread_rwlock_unlock(&in_use);
    if (live)
        return ACL_SUCCESS;
    device_block freed;
    if (address && lookup_freed(address, &freed) && freed.device == address)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "%p (%zu bytes) was already freed (double free)", address, freed.size);
    return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                     "%p was not returned by aclrtMalloc (or its variants), or was already freed", address);
}

aclError aclrtFree(void *devPtr)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtFree"));
    return release_device("aclrtFree", devPtr);
}

static aclError release_host(const char *api, void *address)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init(api));
    if (!address || !ctbc_registry_remove(&host_blocks, address))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "%p was not returned by aclrtMallocHost (or aclrtMallocHostWithCfg), or was already freed",
                         address);
    free(address);
    return ACL_SUCCESS;
}

aclError aclrtFreeHost(void *hostPtr) { return release_host("aclrtFreeHost", hostPtr); }

/* The "WithDevSync" frees wait for the device first. A failure of queued
 * work that the wait finds is reported here (it is not reported again by
 * the next synchronisation), after the memory is freed. */
static aclError synchronize_before_free(const char *api)
{
    if (!ctbc_current_context())
        return ACL_SUCCESS; /* no device on this thread: nothing queued to wait for */
    aclError status = aclrtSynchronizeDevice();
    if (status == ACL_SUCCESS)
        return ACL_SUCCESS;
    const char *why = aclGetRecentErrMsg();
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", why ? why : "(no message)");
    return ctbc_fail(status, CTBC_EE_RUNTIME, api, "the device synchronisation before the free failed: %s", copy);
}

aclError aclrtFreeWithDevSync(void *devPtr)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtFreeWithDevSync"));
    if (!devPtr)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtFreeWithDevSync", "devPtr must not be NULL");
    aclError synced = synchronize_before_free("aclrtFreeWithDevSync");
    CTBC_RETURN_IF_FAILED(release_device("aclrtFreeWithDevSync", devPtr));
    return synced;
}

aclError aclrtFreeHostWithDevSync(void *hostPtr)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtFreeHostWithDevSync"));
    if (!hostPtr)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtFreeHostWithDevSync",
                         "hostPtr must not be NULL");
    aclError synced = synchronize_before_free("aclrtFreeHostWithDevSync");
    CTBC_RETURN_IF_FAILED(release_host("aclrtFreeHostWithDevSync", hostPtr));
    return synced;
}

/* ---- queries --------------------------------------------------------------------------- */

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *freeBytes, size_t *totalBytes)
{
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context("aclrtGetMemInfo", &ctx));
    if (!freeBytes || !totalBytes)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtGetMemInfo",
                         "%s must not be NULL", freeBytes ? "total" : "free");
    if ((int)attr < ACL_DDR_MEM || (int)attr > ACL_MEM_P2P_HUGE1G)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtGetMemInfo",
                         "attr %d is not an aclrtMemAttr (0 to %d)", (int)attr, (int)ACL_MEM_P2P_HUGE1G);
    /* Every emulated SoC has HBM and no device DDR: the DDR kinds are
     * memory this hardware does not have, which CANN reports as 0 and 0. */
    bool ddr = attr == ACL_DDR_MEM || attr == ACL_DDR_MEM_HUGE || attr == ACL_DDR_MEM_NORMAL ||
               attr == ACL_DDR_MEM_P2P_HUGE || attr == ACL_DDR_MEM_P2P_NORMAL;
    pthread_mutex_lock(&blocks.lock);
    *freeBytes = ddr ? 0 : free_bytes();
    *totalBytes = ddr ? 0 : (size_t)ctbc_soc()->hw.memory_bytes;
    pthread_mutex_unlock(&blocks.lock);
    return ACL_SUCCESS;
}

aclError aclrtPointerGetAttributes(const void *ptr, aclrtPtrAttributes *attributes)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtPointerGetAttributes"));
    if (!ptr || !attributes)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtPointerGetAttributes",
                         "%s must not be NULL", ptr ? "attributes" : "ptr");
    memset(attributes, 0, sizeof *attributes);
    located b;
    if (lookup_live(ptr, &b) && (size_t)((const char *)ptr - b.device) < b.size) {
        attributes->location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
        attributes->location.id = 0;
        attributes->pageSize = b.page_size;
        return ACL_SUCCESS;
    }
    long page = sysconf(_SC_PAGESIZE);
    attributes->location.type =
        ctbc_is_acl_host_memory(ptr, 1) ? ACL_MEM_LOCATION_TYPE_HOST : ACL_MEM_LOCATION_TYPE_UNREGISTERED;
    attributes->pageSize = page > 0 ? (uint32_t)page : NORMAL_PAGE;
    return ACL_SUCCESS;
}
