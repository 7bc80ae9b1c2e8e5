/*
 * Worker threads for ctbc_pool_run (see thread_pool.h for why not an
 * OpenMP region). All shared state is under one mutex except the item
 * counter (claimed with an atomic add) and `posted`, which spinning threads
 * read without the lock to notice a new job quickly.
 */
#include "compute/thread_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

/* Pool threads besides the caller. */
#define POOL_MAX_THREADS 63
/* How long an idle pool thread watches for the next job before it sleeps:
 * long enough to bridge back-to-back calls from Python, short enough not
 * to hold a core the next library needs. */
#define POOL_SPIN_NS (100 * 1000)

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* a job was posted, or the pool is shutting down */
    pthread_cond_t done; /* the last pool thread working on the job left it */
    pthread_t threads[POOL_MAX_THREADS];
    int n_threads;
    bool busy;     /* a caller owns the current job */
    bool open;     /* pool threads may still join it */
    bool quit;
    int active;    /* pool threads inside the job */
    uint64_t job;  /* number of jobs posted so far */
    _Atomic uint64_t posted; /* == job, for lock-free watching */
    /* the current job */
    ctbc_item_fn fn;
    void *context;
    int64_t n_items;
    int workers;
    _Atomic int64_t next_item;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

static void claim_items(ctbc_item_fn fn, void *context, int64_t n_items, int worker)
{
    for (int64_t item = atomic_fetch_add(&pool.next_item, 1); item < n_items;
         item = atomic_fetch_add(&pool.next_item, 1))
        fn(context, item, worker);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Returns when a job after `seen` is posted or the spin time is up. */
static void watch_for_job(uint64_t seen)
{
    const uint64_t deadline = now_ns() + POOL_SPIN_NS;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(&pool.posted, memory_order_acquire) != seen)
            return;
        if (i % 64 == 0 && now_ns() > deadline)
            return;
        cpu_relax();
    }
}

static void *pool_thread(void *arg)
{
    const int worker = (int)(intptr_t)arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool.lock);
    while (!pool.quit) {
        if (pool.job != seen) {
            seen = pool.job;
            /* a job already closed (or wanting fewer workers) is left alone */
            if (pool.open && worker < pool.workers) {
                const ctbc_item_fn fn = pool.fn;
                void *const context = pool.context;
                const int64_t n_items = pool.n_items;
                pool.active++;
                pthread_mutex_unlock(&pool.lock);
                claim_items(fn, context, n_items, worker);
                pthread_mutex_lock(&pool.lock);
                if (--pool.active == 0)
                    pthread_cond_signal(&pool.done);
            }
            continue;
        }
        pthread_mutex_unlock(&pool.lock);
        watch_for_job(seen);
        pthread_mutex_lock(&pool.lock);
        if (pool.job == seen && !pool.quit)
            pthread_cond_wait(&pool.wake, &pool.lock);
    }
    pthread_mutex_unlock(&pool.lock);
    return NULL;
}

/* A forked child has none of the parent's threads: start over. */
static void reset_in_child(void)
{
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.n_threads = 0;
    pool.busy = pool.open = false;
    pool.active = 0;
}

static void register_fork_handler(void) { pthread_atfork(NULL, NULL, reset_in_child); }

/* Caller holds the lock. Fewer threads than asked if creation fails. */
static void start_threads(int wanted)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_fork_handler);
    if (wanted > POOL_MAX_THREADS)
        wanted = POOL_MAX_THREADS;
    while (pool.n_threads < wanted) {
        const intptr_t worker = pool.n_threads + 1;
        if (pthread_create(&pool.threads[pool.n_threads], NULL, pool_thread, (void *)worker) != 0)
            break;
        pool.n_threads++;
    }
}

void ctbc_pool_run(int workers, int64_t n_items, ctbc_item_fn fn, void *context)
{
    bool shared = workers > 1 && n_items > 1;
    if (shared) {
        pthread_mutex_lock(&pool.lock);
        shared = !pool.busy && !pool.quit;
        if (shared) {
            start_threads(workers - 1);
            pool.busy = true;
            pool.fn = fn;
            pool.context = context;
            pool.n_items = n_items;
            pool.workers = workers;
            atomic_store(&pool.next_item, 0);
            pool.open = true;
            pool.job++;
            atomic_store_explicit(&pool.posted, pool.job, memory_order_release);
            pthread_cond_broadcast(&pool.wake);
        }
        pthread_mutex_unlock(&pool.lock);
    }
    if (!shared) {
        for (int64_t item = 0; item < n_items; item++)
            fn(context, item, 0);
        return;
    }
    claim_items(fn, context, n_items, 0);
    /* Only pool threads that joined are waited for; they are running. */
    pthread_mutex_lock(&pool.lock);
    pool.open = false;
    while (pool.active > 0)
        pthread_cond_wait(&pool.done, &pool.lock);
    pool.busy = false;
    pthread_mutex_unlock(&pool.lock);
}

/* At unload (or exit): let the threads finish and join them, so that none
 * runs code that is about to be unmapped. */
__attribute__((destructor)) static void stop_threads(void)
{
    pthread_mutex_lock(&pool.lock);
    pool.quit = true;
    pthread_cond_broadcast(&pool.wake);
    const int n = pool.n_threads;
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < n; i++)
        pthread_join(pool.threads[i], NULL);
    pool.n_threads = 0;
}
