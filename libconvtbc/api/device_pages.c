#include "api/device_pages.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

/* ---- what the fault handler knows ---------------------------------------- */

/* A signal handler may not lock, allocate or follow memory that can be
 * freed, so the handler's records live in chunks that are never freed or
 * moved, and every field it reads is written with atomic stores. A record
 * is published by storing its base last and retired by clearing its base
 * first; `taken` is the writers' bookkeeping, under records_lock. */
struct ctbc_fault_record {
    uintptr_t base; /* the caller's address; 0 while the record is unused */
    size_t size;    /* bytes asked for */
    size_t mapped;  /* bytes mapped */
    const char *allocator;
    const char *releaser; /* NULL while the block is live */
    bool taken;
};

enum { RECORDS_PER_CHUNK = 512, MAX_CHUNKS = 512 };

static ctbc_fault_record first_chunk[RECORDS_PER_CHUNK];
static ctbc_fault_record *chunks[MAX_CHUNKS] = {first_chunk};
static size_t chunk_count = 1;
static size_t next_free; /* where the search for an untaken record starts */
static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;

#define STORE(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELAXED)
#define LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

static ctbc_fault_record *take_record(void)
{
    ctbc_fault_record *found = NULL;
    pthread_mutex_lock(&records_lock);
    size_t total = chunk_count * RECORDS_PER_CHUNK;
    for (size_t step = 0; step < total && !found; step++) {
        size_t at = (next_free + step) % total;
        ctbc_fault_record *record = &chunks[at / RECORDS_PER_CHUNK][at % RECORDS_PER_CHUNK];
        if (!record->taken) {
            found = record;
            next_free = at + 1;
        }
    }
    if (!found && chunk_count < MAX_CHUNKS) {
        ctbc_fault_record *chunk = calloc(RECORDS_PER_CHUNK, sizeof *chunk);
        if (chunk) {
            __atomic_store_n(&chunks[chunk_count], chunk, __ATOMIC_RELEASE);
            __atomic_store_n(&chunk_count, chunk_count + 1, __ATOMIC_RELEASE);
            found = chunk;
            next_free = (chunk_count - 1) * RECORDS_PER_CHUNK + 1;
        }
    }
    if (found)
        found->taken = true;
    pthread_mutex_unlock(&records_lock);
    return found;
}

static void publish(ctbc_fault_record *record, const ctbc_pages *pages, size_t size, const char *allocator)
{
    STORE(record->size, size);
    STORE(record->mapped, pages->mapped);
    STORE(record->allocator, allocator);
    STORE(record->releaser, (const char *)NULL);
    __atomic_store_n(&record->base, (uintptr_t)pages->device, __ATOMIC_RELEASE);
}

static void retire(ctbc_fault_record *record)
{
    __atomic_store_n(&record->base, (uintptr_t)0, __ATOMIC_RELEASE);
    pthread_mutex_lock(&records_lock);
    record->taken = false;
    pthread_mutex_unlock(&records_lock);
}

typedef struct {
    uintptr_t base;
    size_t size;
    const char *allocator, *releaser;
} fault_block;

/* Async-signal-safe: atomic loads of memory that is never freed. */
static bool find_block(uintptr_t address, fault_block *out)
{
    size_t count = __atomic_load_n(&chunk_count, __ATOMIC_ACQUIRE);
    for (size_t c = 0; c < count; c++) {
        ctbc_fault_record *chunk = __atomic_load_n(&chunks[c], __ATOMIC_ACQUIRE);
        for (size_t i = 0; chunk && i < RECORDS_PER_CHUNK; i++) {
            uintptr_t base = __atomic_load_n(&chunk[i].base, __ATOMIC_ACQUIRE);
            if (base && address >= base && address - base < LOAD(chunk[i].mapped)) {
                *out = (fault_block){base, LOAD(chunk[i].size), LOAD(chunk[i].allocator), LOAD(chunk[i].releaser)};
                return true;
            }
        }
    }
    return false;
}

/* ---- the message, without stdio or malloc ---------------------------------- */

typedef struct {
    char text[768];
    size_t used;
} message;

static void put(message *m, const char *s)
{
    while (s && *s && m->used < sizeof m->text)
        m->text[m->used++] = *s++;
}

static void put_number(message *m, uintmax_t value, unsigned base)
{
    char digits[32];
    size_t n = 0;
    do {
        digits[n++] = "0123456789abcdef"[value % base];
        value /= base;
    } while (value);
    if (base == 16)
        put(m, "0x");
    while (n > 0 && m->used < sizeof m->text)
        m->text[m->used++] = digits[--n];
}

static void write_all(const char *text, size_t bytes)
{
    while (bytes > 0) {
        ssize_t done = write(STDERR_FILENO, text, bytes);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return;
        text += done;
        bytes -= (size_t)done;
    }
}

/* "load", "store", or "load or store" where the CPU does not say. */
static const char *access_kind(const void *context)
{
#if defined(__x86_64__)
    /* The page-fault error code: bit 1 is set for a write. */
    const ucontext_t *uc = context;
    return uc ? ((uc->uc_mcontext.gregs[REG_ERR] & 2) ? "store" : "load") : "load or store";
#else
    (void)context;
    return "load or store";
#endif
}

static void report(const fault_block *block, uintptr_t address, const char *kind)
{
    message m = {.used = 0};
    size_t offset = (size_t)(address - block->base);
    put(&m, "convtbc: host ");
    put(&m, kind);
    put(&m, " of device memory at ");
    put_number(&m, address, 16);
    put(&m, ": offset ");
    put_number(&m, offset, 10);
    put(&m, " into the ");
    put(&m, block->allocator);
    put(&m, " allocation at ");
    put_number(&m, block->base, 16);
    put(&m, " of ");
    put_number(&m, block->size, 10);
    put(&m, " bytes");
    if (offset >= block->size)
        put(&m, " (past its end)");
    if (block->releaser) {
        put(&m, ", which ");
        put(&m, block->releaser);
        put(&m, " already released (use after free)");
    }
    put(&m, ".\nconvtbc: on the NPU the host cannot load or store device memory; copy it with aclrtMemcpy. "
            "CONVTBC_GUARD_DEVICE_MEMORY=0 turns this guard off.\n");
    write_all(m.text, m.used);
}

/* ---- the handler ------------------------------------------------------------- */

static struct sigaction before_segv, before_bus;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
/* 0: no fault in device memory yet; 1: one is being reported; 2: reported. */
static int reporting;

/* Ends the process by `sig` with the default action: a fault the kernel
 * raised happens again when the handler returns; a sent signal is sent
 * again (it stays blocked until the handler returns). */
static void die_by_default(int sig, const siginfo_t *info)
{
    struct sigaction plain;
    memset(&plain, 0, sizeof plain);
    plain.sa_handler = SIG_DFL;
    sigemptyset(&plain.sa_mask);
    sigaction(sig, &plain, NULL);
    if (!info || info->si_code <= 0)
        raise(sig);
}

static void pass_on(int sig, siginfo_t *info, void *context)
{
    const struct sigaction *before = sig == SIGBUS ? &before_bus : &before_segv;
    if (before->sa_flags & SA_SIGINFO) {
        before->sa_sigaction(sig, info, context);
    } else if (before->sa_handler == SIG_IGN) {
        if (!info || info->si_code <= 0)
            return; /* a sent signal the program chose to ignore */
        die_by_default(sig, info); /* a real fault cannot be ignored */
    } else if (before->sa_handler == SIG_DFL) {
        die_by_default(sig, info);
    } else {
        before->sa_handler(sig);
    }
}

static void on_fault(int sig, siginfo_t *info, void *context)
{
    int saved_errno = errno;
    fault_block block;
    if (info && info->si_code > 0 && find_block((uintptr_t)info->si_addr, &block)) {
        int expected = 0;
        if (__atomic_compare_exchange_n(&reporting, &expected, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            report(&block, (uintptr_t)info->si_addr, access_kind(context));
            __atomic_store_n(&reporting, 2, __ATOMIC_RELEASE);
        } else {
            /* Another thread is writing its report: let it finish first. */
            for (int i = 0; i < 2000 && __atomic_load_n(&reporting, __ATOMIC_ACQUIRE) == 1; i++)
                nanosleep(&(struct timespec){0, 1000000L}, NULL);
        }
        die_by_default(sig, info);
    } else {
        pass_on(sig, info, context);
    }
    errno = saved_errno;
}

static void install(void)
{
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_fault;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    sigaction(SIGSEGV, &ours, &before_segv);
    sigaction(SIGBUS, &ours, &before_bus);
}

/* ---- the mappings ------------------------------------------------------------ */

static size_t page_bytes(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (size_t)page : 4096;
}

bool ctbc_pages_map(size_t size, const char *allocator, bool guarded, ctbc_pages *out)
{
    size_t page = page_bytes();
    if (size == 0 || size > SIZE_MAX - page)
        return false;
    size_t mapped = (size + page - 1) / page * page;
    ctbc_fault_record *record = take_record();
    if (!record)
        return false;
    /* A shared mapping, so that mremap with old size 0 gives a second view
     * of the same pages rather than a copy. */
    void *device = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    void *host = device == MAP_FAILED ? MAP_FAILED : mremap(device, 0, mapped, MREMAP_MAYMOVE);
    if (host == MAP_FAILED || (guarded && mprotect(device, mapped, PROT_NONE) != 0)) {
        if (device != MAP_FAILED)
            munmap(device, mapped);
        if (host != MAP_FAILED)
            munmap(host, mapped);
        retire(record);
        return false;
    }
    /* A forked child would share these pages with its parent, each seeing
     * the other's writes; it gets none of them instead, so that a child
     * using its parent's device memory fails loudly. */
    madvise(device, mapped, MADV_DONTFORK);
    madvise(host, mapped, MADV_DONTFORK);
    pthread_once(&install_once, install);
    *out = (ctbc_pages){device, host, mapped, record};
    publish(record, out, size, allocator);
    return true;
}

void ctbc_pages_protect(const ctbc_pages *pages, bool guarded)
{
    if (guarded)
        pthread_once(&install_once, install);
    mprotect(pages->device, pages->mapped, guarded ? PROT_NONE : PROT_READ | PROT_WRITE);
}

void ctbc_pages_mark_freed(const ctbc_pages *pages, const char *releaser)
{
    STORE(pages->record->releaser, releaser);
}

void ctbc_pages_unmap(const ctbc_pages *pages)
{
    retire(pages->record);
    munmap(pages->device, pages->mapped);
    munmap(pages->host, pages->mapped);
}

void ctbc_pages_after_fork(void)
{
    size_t count = __atomic_load_n(&chunk_count, __ATOMIC_ACQUIRE);
    for (size_t c = 0; c < count; c++) {
        ctbc_fault_record *chunk = chunks[c];
        for (size_t i = 0; chunk && i < RECORDS_PER_CHUNK; i++) {
            __atomic_store_n(&chunk[i].base, (uintptr_t)0, __ATOMIC_RELEASE);
            chunk[i].taken = false;
        }
    }
    next_free = 0;
    __atomic_store_n(&reporting, 0, __ATOMIC_RELEASE);
    pthread_mutex_init(&records_lock, NULL);
}
