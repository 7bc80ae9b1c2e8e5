#include "compute/team.h"

#include <pthread.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* libgomp keeps its team's threads for the next region, and fork() copies
 * only the calling thread: a child of a process that ran a region would
 * wait in its next one for threads that do not exist. The first process to
 * start a team owns OpenMP here; in any other (a fork()ed child, however
 * deep) the work runs on the calling thread, with the same results, since
 * they do not depend on the thread count. The work-item team below follows
 * the same rule. */
static pid_t team_owner; /* atomic; 0 until a team is started */

bool ctbc_may_start_team(void)
{
    const pid_t me = getpid();
    pid_t owner = 0;
    if (__atomic_compare_exchange_n(&team_owner, &owner, me, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return true;
    return owner == me;
}

/*
 * The work-item team. An OpenMP region ends in a barrier that waits for
 * every thread of the team, started or not: measured on a 2-core Zen 4 VM,
 * a 0.05 ms backward call took 6-8 ms after 50-100 ms idle (the second
 * vCPU woke late while the caller spun at the barrier) and 7 ms right after
 * numpy's sgemm. Here the caller waits only for items already claimed.
 *
 * Protocol (all atomics sequentially consistent): the caller publishes a
 * job (function, context, counts), opens it (closed = 0) and bumps the
 * generation; a worker that sees a new generation counts itself in
 * (active += 1) and only then reads `closed`: open, it claims items; closed,
 * it counts itself out without touching the job. The caller claims items
 * too, then closes the job and waits for active == 0. Either the caller
 * sees a worker's count, and waits for it, or the worker sees the job
 * closed: a late worker never reads a job whose context has gone.
 */
#define TEAM_MAX 256
/* How long an idle worker watches for the next job before it sleeps, so
 * that back-to-back calls find it awake (libgomp's default is several
 * milliseconds). At 0.1 ms a bench process interleaving torch and sgemm
 * left the worker asleep for some calls: T17 B7 Ci480 K17 Co17 float32
 * 0.09 -> 0.20 ms in one run of five shapes; at 2 ms, 0.084-0.110 ms
 * against OpenMP's 0.092-0.118. */
#define WATCH_NS 2000000

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int started;          /* workers created (ids 1..started) */
    unsigned generation;  /* atomic */
    int busy;             /* atomic: a call owns the team */
    int closed;           /* atomic */
    int active;           /* atomic: workers inside the current job */
    int64_t next_item;    /* atomic */
    int64_t n_items;
    int threads;
    ctbc_item_fn fn;
    void *context;
} team = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0};

/* One step of a busy wait, easy on the core's other hardware thread. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void claim_items(int worker)
{
    const int64_t n = team.n_items;
    for (;;) {
        const int64_t item = __atomic_fetch_add(&team.next_item, 1, __ATOMIC_SEQ_CST);
        if (item >= n)
            return;
        team.fn(team.context, item, worker);
    }
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static unsigned next_generation(unsigned seen)
{
    const int64_t until = now_ns() + WATCH_NS;
    for (int spins = 0;; spins++) {
        const unsigned g = __atomic_load_n(&team.generation, __ATOMIC_SEQ_CST);
        if (g != seen)
            return g;
        if ((spins & 63) == 63 && now_ns() > until)
            break;
        cpu_relax();
    }
    pthread_mutex_lock(&team.lock);
    unsigned g;
    while ((g = __atomic_load_n(&team.generation, __ATOMIC_SEQ_CST)) == seen)
        pthread_cond_wait(&team.wake, &team.lock);
    pthread_mutex_unlock(&team.lock);
    return g;
}

static void *worker_main(void *arg)
{
    const int worker = (int)(intptr_t)arg;
    unsigned seen = 0;
    for (;;) {
        seen = next_generation(seen);
        __atomic_fetch_add(&team.active, 1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&team.closed, __ATOMIC_SEQ_CST) && worker < team.threads)
            claim_items(worker);
        __atomic_fetch_sub(&team.active, 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

/* Workers 1..threads-1 exist (as many as could be created). */
static int grow(int threads)
{
    while (team.started < threads - 1) {
        pthread_attr_t attr;
        pthread_t thread;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        const int failed = pthread_create(&thread, &attr, worker_main, (void *)(intptr_t)(team.started + 1));
        pthread_attr_destroy(&attr);
        if (failed)
            break;
        team.started++;
    }
    return team.started + 1;
}

static void run_alone(int64_t n_items, ctbc_item_fn fn, void *context)
{
    for (int64_t item = 0; item < n_items; item++)
        fn(context, item, 0);
}

void ctbc_team_run(int threads, int64_t n_items, ctbc_item_fn fn, void *context)
{
    if (threads > TEAM_MAX)
        threads = TEAM_MAX;
    if (threads < 2 || n_items < 2 || !ctbc_may_start_team() ||
        __atomic_exchange_n(&team.busy, 1, __ATOMIC_ACQUIRE)) {
        run_alone(n_items, fn, context);
        return;
    }
    threads = grow(threads);
    /* the job, then open it: no worker reads these while it is closed */
    team.fn = fn;
    team.context = context;
    team.n_items = n_items;
    team.threads = threads;
    __atomic_store_n(&team.next_item, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&team.closed, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&team.lock);
    __atomic_add_fetch(&team.generation, 1, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&team.wake);
    pthread_mutex_unlock(&team.lock);

    claim_items(0);
    __atomic_store_n(&team.closed, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&team.active, __ATOMIC_SEQ_CST) != 0)
        cpu_relax();
    __atomic_store_n(&team.busy, 0, __ATOMIC_RELEASE);
}
