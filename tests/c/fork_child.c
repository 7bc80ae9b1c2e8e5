/*
 * fork() from a process that uses convtbc, as multiprocessing's default
 * start method and data-loader workers do on Linux.
 *
 * 1. A child of an initialised process has none of its runtime: the
 *    streams' worker threads are not in it. CANN does not support using an
 *    inherited runtime either. Every runtime call of the child fails at once
 *    with ACL_ERROR_UNINITIALIZE (aclFinalize: ACL_ERROR_REPEAT_FINALIZE)
 *    and a message that names the parent and says to call aclInit; nothing
 *    waits for the parent's queued work (a stream held by a blocking host
 *    callback, an event not reached yet). The child may then aclInit a
 *    runtime of its own, in which the parent's handles and device pointers
 *    are refused and everything else works. The parent goes on unharmed.
 * 2. The op on host arrays, large enough for the parallel region in the
 *    parent, runs in the child too (libgomp's threads are not inherited)
 *    and gives the parent's bytes.
 * 3. Forks while other threads of the parent are inside the runtime: a
 *    child's own runtime still works (no lock is left held by a thread the
 *    child does not have).
 *
 * Every child runs under alarm(), so a hang ends it by SIGALRM, which the
 * parent reports. Prints "fork_child: OK" when every check passes.
 */
#define _GNU_SOURCE /* MAP_FIXED_NOREPLACE */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_common.h"

#include "convtbc/convtbc_ext.h"

enum { N = 256, CHILD_SECONDS = 20, STRESS_FORKS = 24, HAMMERS = 2 };

#define OK(x) EXPECT_EQ((x), 0, #x)
#define CODE(x, want) EXPECT_EQ((x), (want), #x)

static bool all_bytes(const unsigned char *a, size_t n, unsigned char value)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != value)
            return false;
    return true;
}

/* The message of the failure just returned names the parent and the way out. */
static void expect_parent_named(const char *call)
{
    const char *why = recent_msg();
    EXPECT(strstr(why, "parent process") && strstr(why, "aclInit"), "%s: the message names the parent and aclInit: %s",
           call, why);
}

/* Runs `body` in a child under alarm(); the parent waits and counts a
 * failure unless the child exits 0. */
static void in_child(const char *what, void (*body)(void *), void *arg)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        EXPECT(false, "fork for %s failed", what);
        return;
    }
    if (pid == 0) {
        alarm(CHILD_SECONDS);
        body(arg);
        fflush(stderr);
        _exit(g_failures ? 1 : 0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        ;
    if (WIFSIGNALED(status))
        EXPECT(false, "%s: the child died of signal %d%s", what, WTERMSIG(status),
               WTERMSIG(status) == SIGALRM ? " (it hung)" : "");
    else
        EXPECT(WEXITSTATUS(status) == 0, "%s: the child failed (exit %d)", what, WEXITSTATUS(status));
}

/* ---- 1. the runtime in a child ---------------------------------------------- */

static bool mapped_here(const void *address)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    return msync((void *)((uintptr_t)address & ~(page - 1)), 1, MS_ASYNC) == 0;
}

typedef struct {
    aclrtStream stream;
    aclrtEvent event;
    void *device;
    unsigned char expected[N];
} inherited;

static atomic_int callbacks_run;

static void count_callback(void *user_data)
{
    (void)user_data;
    atomic_fetch_add(&callbacks_run, 1);
}

static void host_function(void *arg) { atomic_store((atomic_int *)arg, 1); }

static void child_without_runtime(void *arg)
{
    const inherited *from = arg;
    unsigned char host[N];
    int32_t device_id = -1;

    /* The parent's stream is held by a blocking callback and has a copy and
     * an event recording queued behind it: none of that may be waited for. */
    CODE(aclrtSynchronizeStream(from->stream), ACL_ERROR_UNINITIALIZE);
    expect_parent_named("aclrtSynchronizeStream of an inherited stream");
    CODE(aclrtSynchronizeStream(NULL), ACL_ERROR_UNINITIALIZE);
    expect_parent_named("aclrtSynchronizeStream of the default stream");
    CODE(aclrtSynchronizeStreamWithTimeout(from->stream, 100), ACL_ERROR_UNINITIALIZE);
    CODE(aclrtSynchronizeDevice(), ACL_ERROR_UNINITIALIZE);
    CODE(aclrtSynchronizeEvent(from->event), ACL_ERROR_UNINITIALIZE);
    expect_parent_named("aclrtSynchronizeEvent");
    CODE(aclrtRecordEvent(from->event, from->stream), ACL_ERROR_UNINITIALIZE);
    CODE(aclrtMemcpyAsync(from->device, N, from->expected, N, ACL_MEMCPY_HOST_TO_DEVICE, from->stream),
         ACL_ERROR_UNINITIALIZE);
    CODE(aclrtMemcpy(host, N, from->device, N, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_UNINITIALIZE);
    CODE(aclrtFree(from->device), ACL_ERROR_UNINITIALIZE);
    CODE(aclrtDestroyStream(from->stream), ACL_ERROR_UNINITIALIZE);
    CODE(aclrtGetDevice(&device_id), ACL_ERROR_UNINITIALIZE);
    /* The calling thread subscribed the stream in the parent; the child's
     * thread (same pthread_self) has no subscription and runs nothing. */
    CODE(aclrtProcessReport(1000), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    EXPECT(atomic_load(&callbacks_run) == 0, "the child ran the parent's callback");
    CODE(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    expect_parent_named("aclFinalize");

    /* A runtime of its own. */
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    CODE(aclrtSynchronizeStream(from->stream), ACL_ERROR_INVALID_PARAM);
    CODE(aclrtDestroyStream(from->stream), ACL_ERROR_INVALID_PARAM);
    CODE(aclrtSynchronizeEvent(from->event), ACL_ERROR_INVALID_PARAM);
    recent_msg();
    CODE(aclrtMemcpy(host, N, from->device, N, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_RT_PARAM_INVALID);
    expect_parent_named("aclrtMemcpy from the parent's device memory");
    /* Guarded, the parent's block is not mapped here (unless the child has
     * mapped memory of its own there since, which it may then use):
     * DEFAULT takes the pointer for the device memory it was, and refuses
     * it. */
    const char *guard = getenv("CONVTBC_GUARD_DEVICE_MEMORY");
#if defined(__SANITIZE_ADDRESS__)
    /* Under ASan the premise cannot be held: its allocator maps memory
     * wherever the parent's block was, and may do so while the library
     * reads /proc/self/maps, after this check; the child then owns memory
     * there, which the copy may use. */
    guard = "0";
#endif
    if ((!guard || strcmp(guard, "0") != 0) && !mapped_here(from->device)) {
        CODE(aclrtMemcpy(host, N, from->device, N, ACL_MEMCPY_DEFAULT), ACL_ERROR_RT_PARAM_INVALID);
        expect_parent_named("aclrtMemcpy DEFAULT from the parent's device memory");
    }
    CODE(aclrtFree(from->device), ACL_ERROR_INVALID_PARAM);
    recent_msg();
    /* Where the child maps memory of its own at the parent's address, DEFAULT
     * copies use it as host memory if they may, and refuse it (no fault in
     * the library) where it has no access. */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *own = mmap(from->device, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (own == from->device) {
        CODE(aclrtMemcpy(host, N, own, N, ACL_MEMCPY_DEFAULT), ACL_ERROR_RT_PARAM_INVALID);
        recent_msg();
        OK(mprotect(own, page, PROT_READ | PROT_WRITE));
        memset(own, 0x33, N);
        memset(host, 0, N);
        OK(aclrtMemcpy(host, N, own, N, ACL_MEMCPY_DEFAULT));
        EXPECT(all_bytes(host, N, 0x33), "a DEFAULT copy out of the child's own memory at a parent's address");
        munmap(own, page);
    } else if (own != MAP_FAILED) {
        munmap(own, page); /* no MAP_FIXED_NOREPLACE: the address was a hint */
    }

    void *mine = NULL;
    aclrtStream stream = NULL;
    aclrtEvent event = NULL;
    atomic_int ran = 0;
    OK(aclrtMalloc(&mine, N, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtCreateStream(&stream));
    OK(aclrtCreateEvent(&event));
    OK(aclrtMemcpyAsync(mine, N, from->expected, N, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    OK(aclrtLaunchHostFunc(stream, host_function, &ran));
    OK(aclrtRecordEvent(event, stream));
    OK(aclrtSynchronizeEvent(event));
    OK(aclrtSynchronizeStream(stream));
    memset(host, 0, N);
    OK(aclrtMemcpy(host, N, mine, N, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(memcmp(host, from->expected, N) == 0, "the child's own runtime copies");
    EXPECT(atomic_load(&ran) == 1, "the child's own stream ran a host function");
    OK(aclrtDestroyEvent(event));
    OK(aclrtDestroyStream(stream));
    OK(aclrtFree(mine));
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
}

static void test_runtime_in_child(void)
{
    inherited from;
    for (int i = 0; i < N; i++)
        from.expected[i] = (unsigned char)(3 * i + 1);
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    OK(aclrtCreateStream(&from.stream));
    OK(aclrtCreateEvent(&from.event));
    OK(aclrtMalloc(&from.device, N, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtSubscribeReport((uint64_t)pthread_self(), from.stream));
    /* Work the parent keeps queued across the fork: the stream waits for
     * this thread to run a blocking callback, with a copy and an event
     * recording behind it. */
    OK(aclrtLaunchCallback(count_callback, NULL, ACL_CALLBACK_BLOCK, from.stream));
    OK(aclrtMemcpyAsync(from.device, N, from.expected, N, ACL_MEMCPY_HOST_TO_DEVICE, from.stream));
    OK(aclrtRecordEvent(from.event, from.stream));

    in_child("the runtime in a child", child_without_runtime, &from);

    /* The parent's runtime is untouched. */
    OK(aclrtProcessReport(10000));
    EXPECT(atomic_load(&callbacks_run) == 1, "the parent ran its callback");
    OK(aclrtSynchronizeEvent(from.event));
    OK(aclrtSynchronizeStream(from.stream));
    unsigned char host[N];
    OK(aclrtMemcpy(host, N, from.device, N, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(memcmp(host, from.expected, N) == 0, "the parent's queued copy ran");
    OK(aclrtUnSubscribeReport((uint64_t)pthread_self(), from.stream));
    OK(aclrtFree(from.device));
    OK(aclrtDestroyEvent(from.event));
    OK(aclrtDestroyStream(from.stream));
}

/* ---- 2. the op in a child ----------------------------------------------------- */

enum { T = 48, B = 8, CI = 48, CO = 48, K = 3, PAD = 1, T_OUT = T + 2 * PAD + 1 - K };

typedef struct {
    float self[T_OUT * B * CO], input[T * B * CI], weight[K * CI * CO], bias[CO];
    float grad_input[T * B * CI], grad_weight[K * CI * CO], grad_bias[CO];
} problem;

static convtbcHostTensor host_tensor(float *data, int64_t d0, int64_t d1, int64_t d2, uint64_t rank)
{
    convtbcHostTensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = ACL_FLOAT;
    t.rank = rank;
    int64_t dims[3] = {d0, d1, d2};
    int64_t elements = 1;
    for (uint64_t i = rank; i-- > 0;) {
        t.dims[i] = dims[i];
        t.strides[i] = elements;
        elements *= dims[i];
    }
    t.storage_elements = elements;
    return t;
}

static int run_op(problem *p)
{
    convtbcHostTensor self = host_tensor(p->self, T_OUT, B, CO, 3), input = host_tensor(p->input, T, B, CI, 3),
                      weight = host_tensor(p->weight, K, CI, CO, 3), bias = host_tensor(p->bias, CO, 0, 0, 1),
                      gi = host_tensor(p->grad_input, T, B, CI, 3), gw = host_tensor(p->grad_weight, K, CI, CO, 3),
                      gb = host_tensor(p->grad_bias, CO, 0, 0, 1);
    return convtbcConvTbcBackwardOnHost(&self, &input, &weight, &bias, PAD, 0, &gi, &gw, &gb);
}

typedef struct {
    problem *work;
    const problem *parents;
} op_in_child;

static void child_runs_op(void *arg)
{
    op_in_child *job = arg;
    memset(job->work->grad_input, 0, sizeof job->work->grad_input);
    memset(job->work->grad_weight, 0, sizeof job->work->grad_weight);
    memset(job->work->grad_bias, 0, sizeof job->work->grad_bias);
    OK(run_op(job->work));
    EXPECT(memcmp(job->work->grad_input, job->parents->grad_input, sizeof job->work->grad_input) == 0 &&
               memcmp(job->work->grad_weight, job->parents->grad_weight, sizeof job->work->grad_weight) == 0 &&
               memcmp(job->work->grad_bias, job->parents->grad_bias, sizeof job->work->grad_bias) == 0,
           "the child's gradients are the parent's, bit for bit");
}

static void test_op_in_child(void)
{
    problem *p = calloc(1, sizeof *p), *parents = calloc(1, sizeof *parents);
    EXPECT(p && parents, "out of memory");
    if (!p || !parents) {
        free(p);
        free(parents);
        return;
    }
    uint32_t state = 12345;
    float *fill[] = {p->self, p->input, p->weight, p->bias};
    size_t counts[] = {T_OUT * B * CO, T * B * CI, K * CI * CO, CO};
    for (int a = 0; a < 4; a++)
        for (size_t i = 0; i < counts[a]; i++) {
            state = state * 1664525u + 1013904223u;
            fill[a][i] = (float)((int)(state >> 24) - 128) / 64.0f;
        }
    OK(run_op(p)); /* in the parent: a parallel region when there are threads */
    memcpy(parents, p, sizeof *p);
    op_in_child job = {p, parents};
    in_child("the op in a child", child_runs_op, &job);
    OK(run_op(p)); /* and the parent's OpenMP still works */
    EXPECT(memcmp(p, parents, sizeof *p) == 0, "the parent computes the same after the fork");
    free(p);
    free(parents);
}

/* ---- 3. forks while other threads are inside the runtime -------------------------- */

static atomic_int stop_hammers;

static void *hammer(void *arg)
{
    (void)arg;
    unsigned char host[N], back[N];
    memset(host, 7, N);
    OK(aclrtSetDevice(0));
    aclrtStream stream = NULL;
    OK(aclrtCreateStream(&stream));
    while (!atomic_load(&stop_hammers)) {
        void *a = NULL, *b = NULL;
        aclrtEvent event = NULL;
        OK(aclrtMalloc(&a, N, ACL_MEM_MALLOC_HUGE_FIRST));
        OK(aclrtMalloc(&b, N, ACL_MEM_MALLOC_HUGE_FIRST));
        OK(aclrtCreateEvent(&event));
        OK(aclrtMemcpy(a, N, host, N, ACL_MEMCPY_HOST_TO_DEVICE));
        OK(aclrtMemcpyAsync(b, N, a, N, ACL_MEMCPY_DEVICE_TO_DEVICE, stream));
        OK(aclrtRecordEvent(event, stream));
        OK(aclrtMemcpyAsync(back, N, b, N, ACL_MEMCPY_DEVICE_TO_HOST, stream));
        OK(aclrtSynchronizeEvent(event));
        OK(aclrtSynchronizeStream(stream));
        OK(aclrtDestroyEvent(event));
        OK(aclrtFree(a));
        OK(aclrtFree(b));
    }
    OK(aclrtDestroyStream(stream));
    return NULL;
}

static void child_starts_over(void *arg)
{
    (void)arg;
    unsigned char host[N], back[N];
    memset(host, 9, N);
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    void *a = NULL;
    aclrtStream stream = NULL;
    OK(aclrtMalloc(&a, N, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtCreateStream(&stream));
    OK(aclrtMemcpyAsync(a, N, host, N, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    OK(aclrtSynchronizeStream(stream));
    OK(aclrtMemcpy(back, N, a, N, ACL_MEMCPY_DEFAULT));
    EXPECT(memcmp(back, host, N) == 0, "the child's copy");
    OK(aclrtFree(a));
    OK(aclrtDestroyStream(stream));
    OK(aclFinalize());
}

static void test_forks_amid_threads(void)
{
    pthread_t threads[HAMMERS];
    for (int i = 0; i < HAMMERS; i++)
        EXPECT(pthread_create(&threads[i], NULL, hammer, NULL) == 0, "pthread_create");
    for (int i = 0; i < STRESS_FORKS && !g_failures; i++) {
        nanosleep(&(struct timespec){0, 3000000L}, NULL);
        in_child("a fork amid runtime threads", child_starts_over, NULL);
    }
    atomic_store(&stop_hammers, 1);
    for (int i = 0; i < HAMMERS; i++)
        pthread_join(threads[i], NULL);
}

int main(void)
{
    test_runtime_in_child();
    test_op_in_child();
    test_forks_amid_threads();
    OK(aclFinalize());
    return finish("fork_child");
}
