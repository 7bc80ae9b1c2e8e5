#include "api/memory.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl_rt.h"
#include "convtbc/convtbc_ext.h"
#include "api/errors.h"
#include "api/log.h"
#include "api/registry.h"
#include "api/runtime.h"

static ctbc_registry device_blocks = CTBC_REGISTRY_INIT;
static ctbc_registry host_blocks = CTBC_REGISTRY_INIT;
static ctbc_registry declared_host = CTBC_REGISTRY_INIT;

/* ---- checking on or off ---------------------------------------------------- */

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

/* ---- the quarantine of freed blocks -------------------------------------- */

/* Oldest first; a block leaves (and is really freed) when the quarantine
 * holds more blocks or bytes than this. */
enum { QUARANTINE_BLOCKS = 1024 };
static const size_t QUARANTINE_BYTES = (size_t)256 << 20;

static struct {
    pthread_mutex_t lock;
    ctbc_registry_entry blocks[QUARANTINE_BLOCKS];
    size_t first, count, bytes;
} quarantine = {PTHREAD_MUTEX_INITIALIZER, {{0}}, 0, 0, 0};

static void quarantine_block(void *block, size_t size)
{
    memset(block, 0xFF, size);
    pthread_mutex_lock(&quarantine.lock);
    while (quarantine.count > 0 &&
           (quarantine.count == QUARANTINE_BLOCKS || quarantine.bytes + size > QUARANTINE_BYTES)) {
        ctbc_registry_entry *oldest = &quarantine.blocks[quarantine.first];
        free((void *)oldest->handle);
        quarantine.bytes -= oldest->size;
        quarantine.first = (quarantine.first + 1) % QUARANTINE_BLOCKS;
        quarantine.count--;
    }
    quarantine.blocks[(quarantine.first + quarantine.count) % QUARANTINE_BLOCKS] =
        (ctbc_registry_entry){block, size};
    quarantine.count++;
    quarantine.bytes += size;
    pthread_mutex_unlock(&quarantine.lock);
}

static bool find_freed(const void *address, ctbc_registry_entry *found)
{
    uintptr_t at = (uintptr_t)address;
    bool hit = false;
    pthread_mutex_lock(&quarantine.lock);
    for (size_t i = 0; i < quarantine.count && !hit; i++) {
        const ctbc_registry_entry *block = &quarantine.blocks[(quarantine.first + i) % QUARANTINE_BLOCKS];
        if (at >= (uintptr_t)block->handle && at - (uintptr_t)block->handle < block->size) {
            *found = *block;
            hit = true;
        }
    }
    pthread_mutex_unlock(&quarantine.lock);
    return hit;
}

void ctbc_memory_shutdown(void)
{
    pthread_mutex_lock(&quarantine.lock);
    for (size_t i = 0; i < quarantine.count; i++)
        free((void *)quarantine.blocks[(quarantine.first + i) % QUARANTINE_BLOCKS].handle);
    quarantine.first = quarantine.count = quarantine.bytes = 0;
    pthread_mutex_unlock(&quarantine.lock);
}

/* ---- queued work against aclrtFree ---------------------------------------- */

static pthread_rwlock_t in_use = PTHREAD_RWLOCK_INITIALIZER;

void ctbc_memory_use_begin(void) { pthread_rwlock_rdlock(&in_use); }

void ctbc_memory_use_end(void) { pthread_rwlock_unlock(&in_use); }

/* ---- range checks ----------------------------------------------------------- */

bool ctbc_is_device_memory(const void *address, size_t bytes)
{
    ctbc_registry_entry block;
    const char *first = address;
    return bytes > 0 && (ctbc_registry_find_containing(&device_blocks, first, &block) ||
                         ctbc_registry_find_containing(&device_blocks, first + bytes - 1, &block));
}

int ctbc_check_device_range(const char *api, const char *what, const void *address, size_t bytes, int status)
{
    if (bytes == 0 || !checking_on())
        return ACL_SUCCESS;
    ctbc_registry_entry block;
    uintptr_t start = (uintptr_t)address;
    if (ctbc_registry_find_containing(&device_blocks, address, &block) ||
        ctbc_registry_find_containing(&declared_host, address, &block)) {
        uintptr_t block_start = (uintptr_t)block.handle;
        if (bytes <= block.size - (start - block_start))
            return ACL_SUCCESS;
        return ctbc_fail(status, CTBC_EE_RUNTIME, api,
                         "%s: %zu bytes at %p run past the end of the device allocation %p of %zu bytes "
                         "(by %zu bytes)",
                         what, bytes, address, block.handle, block.size,
                         bytes - (block.size - (size_t)(start - block_start)));
    }
    if (find_freed(address, &block))
        return ctbc_fail(status, CTBC_EE_RUNTIME, api,
                         "%s: %p is inside the device allocation %p of %zu bytes, which aclrtFree already "
                         "released (use after free)",
                         what, address, block.handle, block.size);
    return ctbc_fail(status, CTBC_EE_RUNTIME, api,
                     "%s: %p is not device memory; give it memory from aclrtMalloc (host memory reaches the device "
                     "only through aclrtMemcpy)",
                     what, address);
}

/* Host side of a copy: must not be device memory. */
static int check_host_range(const char *api, const char *what, const void *address, size_t bytes)
{
    ctbc_registry_entry block;
    if (!checking_on() || !ctbc_is_device_memory(address, bytes))
        return ACL_SUCCESS;
    ctbc_registry_find_containing(&device_blocks, address, &block);
    return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, api,
                     "%s: %p is device memory, but the copy's kind says host memory", what, address);
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

/* ---- allocation ---------------------------------------------------------- */

/* Device memory is host memory here. Blocks are 64-byte aligned (CANN
 * guarantees 32) and padded by 32 bytes as CANN pads its allocations. */
static aclError allocate(const char *api, ctbc_registry *registry, void **out, size_t size)
{
    if (!out)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "the pointer to receive the address must not be NULL");
    if (size == 0)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "size must be > 0");
    void *block = NULL;
    size_t padded = size + 32 + (32 - size % 32) % 32;
    if (padded < size || posix_memalign(&block, 64, padded) != 0)
        return ctbc_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, CTBC_EE_RUNTIME, api, "cannot allocate %zu bytes", size);
    if (!ctbc_registry_add(registry, block, size)) {
        free(block);
        return ctbc_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, CTBC_EE_RUNTIME, api, "out of memory");
    }
    *out = block;
    CTBC_LOG(CTBC_LOG_DEBUG, "%s: %zu bytes at %p", api, size, block);
    return ACL_SUCCESS;
}

static aclError release(const char *api, ctbc_registry *registry, void *block, const char *allocator,
                        bool quarantine_it)
{
    ctbc_registry_entry entry;
    pthread_rwlock_wrlock(&in_use);
    bool live = block && ctbc_registry_find_containing(registry, block, &entry) && entry.handle == block &&
                ctbc_registry_remove(registry, block);
    if (live) {
        if (quarantine_it && checking_on())
            quarantine_block(block, entry.size);
        else
            free(block);
    }
    pthread_rwlock_unlock(&in_use);
    if (live)
        return ACL_SUCCESS;
    if (block && quarantine_it && find_freed(block, &entry) && entry.handle == block)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "%p (%zu bytes) was already freed (double free)", block, entry.size);
    return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                     "%p was not returned by %s, or was already freed", block, allocator);
}

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    (void)policy; /* huge pages and bandwidth classes mean nothing on the host */
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context("aclrtMalloc", &ctx));
    return allocate("aclrtMalloc", &device_blocks, devPtr, size);
}

aclError aclrtFree(void *devPtr)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtFree"));
    return release("aclrtFree", &device_blocks, devPtr, "aclrtMalloc", true);
}

aclError aclrtMallocHost(void **hostPtr, size_t size)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtMallocHost"));
    return allocate("aclrtMallocHost", &host_blocks, hostPtr, size);
}

aclError aclrtFreeHost(void *hostPtr)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtFreeHost"));
    return release("aclrtFreeHost", &host_blocks, hostPtr, "aclrtMallocHost", false);
}

/* ---- copies and fills ------------------------------------------------------ */

typedef struct {
    const char *api;
    void *dst;
    const void *src;
    size_t count;
    int value;
    bool fill;
    bool dst_device, src_device; /* the sides that must still be live device memory when it runs */
} transfer;

static aclError run_transfer(void *payload)
{
    const transfer *job = payload;
    aclError status = ACL_SUCCESS;
    ctbc_memory_use_begin();
    /* Memory freed between submission and now is a fault of the queued work,
     * reported at the next synchronisation. */
    if (job->dst_device)
        status = ctbc_check_device_range(job->api, "dst", job->dst, job->count, ACL_ERROR_RT_INTERNAL_ERROR);
    if (status == ACL_SUCCESS && job->src_device)
        status = ctbc_check_device_range(job->api, "src", job->src, job->count, ACL_ERROR_RT_INTERNAL_ERROR);
    if (status == ACL_SUCCESS && job->fill)
        memset(job->dst, job->value, job->count);
    else if (status == ACL_SUCCESS)
        memmove(job->dst, job->src, job->count);
    ctbc_memory_use_end();
    return status;
}

static const char *const KIND_NAMES[] = {"ACL_MEMCPY_HOST_TO_HOST", "ACL_MEMCPY_HOST_TO_DEVICE",
                                         "ACL_MEMCPY_DEVICE_TO_HOST", "ACL_MEMCPY_DEVICE_TO_DEVICE",
                                         "ACL_MEMCPY_DEFAULT"};

/* The checks every copy makes before it runs or is queued. */
static aclError check_copy(const char *api, void *dst, size_t destMax, const void *src, size_t count,
                           aclrtMemcpyKind kind)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init(api));
    if ((int)kind < ACL_MEMCPY_HOST_TO_HOST || (int)kind > ACL_MEMCPY_DEFAULT)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "kind %d is invalid: expected an aclrtMemcpyKind from 0 to 4", (int)kind);
    if (count > destMax)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "count %zu is larger than destMax %zu",
                         count, destMax);
    if (count > 0 && (!dst || !src))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "dst and src must not be NULL");
    if (count == 0 || kind == ACL_MEMCPY_DEFAULT)
        return ACL_SUCCESS;
    bool dst_device = kind == ACL_MEMCPY_HOST_TO_DEVICE || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    bool src_device = kind == ACL_MEMCPY_DEVICE_TO_HOST || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    char what[64];
    snprintf(what, sizeof what, "dst of %s", KIND_NAMES[kind]);
    CTBC_RETURN_IF_FAILED(dst_device ? ctbc_check_device_range(api, what, dst, count, ACL_ERROR_RT_PARAM_INVALID)
                                     : check_host_range(api, what, dst, count));
    snprintf(what, sizeof what, "src of %s", KIND_NAMES[kind]);
    return src_device ? ctbc_check_device_range(api, what, src, count, ACL_ERROR_RT_PARAM_INVALID)
                      : check_host_range(api, what, src, count);
}

static aclError check_fill(const char *api, void *devPtr, size_t maxCount, size_t count)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init(api));
    if (count > 0 && !devPtr)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "devPtr must not be NULL");
    if (count > maxCount)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "count %zu is larger than maxCount %zu",
                         count, maxCount);
    return ctbc_check_device_range(api, "devPtr", devPtr, count, ACL_ERROR_RT_PARAM_INVALID);
}

/* A copy that runs now was checked a moment ago; a queued one checks its
 * device sides again when it runs. */
static transfer copy_job(const char *api, void *dst, const void *src, size_t count, aclrtMemcpyKind kind,
                         bool queued)
{
    return (transfer){api, dst, src, count, 0, false,
                      queued && (kind == ACL_MEMCPY_HOST_TO_DEVICE || kind == ACL_MEMCPY_DEVICE_TO_DEVICE),
                      queued && (kind == ACL_MEMCPY_DEVICE_TO_HOST || kind == ACL_MEMCPY_DEVICE_TO_DEVICE)};
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind)
{
    CTBC_RETURN_IF_FAILED(check_copy("aclrtMemcpy", dst, destMax, src, count, kind));
    transfer job = copy_job("aclrtMemcpy", dst, src, count, kind, false);
    return run_transfer(&job);
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream)
{
    CTBC_RETURN_IF_FAILED(check_copy("aclrtMemcpyAsync", dst, destMax, src, count, kind));
    CTBC_RETURN_IF_FAILED(ctbc_check_stream("aclrtMemcpyAsync", stream));
    transfer job = copy_job("aclrtMemcpyAsync", dst, src, count, kind, true);
    return ctbc_stream_submit("aclrtMemcpyAsync", stream, run_transfer, &job, sizeof job);
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
    CTBC_RETURN_IF_FAILED(check_fill("aclrtMemset", devPtr, maxCount, count));
    transfer job = {"aclrtMemset", devPtr, NULL, count, value, true, false, false};
    return run_transfer(&job);
}

aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream)
{
    CTBC_RETURN_IF_FAILED(check_fill("aclrtMemsetAsync", devPtr, maxCount, count));
    CTBC_RETURN_IF_FAILED(ctbc_check_stream("aclrtMemsetAsync", stream));
    transfer job = {"aclrtMemsetAsync", devPtr, NULL, count, value, true, true, false};
    return ctbc_stream_submit("aclrtMemsetAsync", stream, run_transfer, &job, sizeof job);
}
