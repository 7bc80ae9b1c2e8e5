/*
 * CANN's stream, event and host-callback calls from C, with CANN's codes,
 * then the same calls from several threads at once (for the sanitizers:
 * ASan/UBSan in test_sanitizers.py, ThreadSanitizer in test_streams.py).
 *
 * Every queued task is held back 20 ms (CONVTBC_STREAM_DELAY_MS, set here
 * before the first stream exists), so that queries and timed waits see work
 * still queued. A callback thread of the program's own serves the host
 * callbacks, as in CANN's samples.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "test_common.h"

/* CANN's header marks aclrtQueryEvent deprecated; it is still part of the API. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

enum { N = 64, WORKERS = 4, ROUNDS = 40 };

#define OK(x) EXPECT_EQ((x), 0, #x)
#define CODE(x, want) EXPECT_EQ((x), (want), #x)

static uint64_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t); /* the clock of the event stamps */
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static void sleep_ms(long ms) { nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL); }

static int read_byte(void *dev)
{
    unsigned char host[N];
    OK(aclrtMemcpy(host, N, dev, N, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 1; i < N; i++)
        if (host[i] != host[0])
            return -1;
    return host[0];
}

/* ---- the callback thread ---------------------------------------------------- */

static atomic_int g_serving = 1;
static atomic_int g_unexpected_code = 0;

static void *serve_callbacks(void *arg)
{
    (void)arg;
    while (atomic_load(&g_serving)) {
        aclError st = aclrtProcessReport(10);
        /* processed, nothing within 10 ms, or not subscribed yet/any more */
        if (st != 0 && st != 507012 && st != 107012)
            atomic_store(&g_unexpected_code, st);
    }
    return NULL;
}

typedef struct {
    atomic_int runs;
    atomic_ullong thread; /* the pthread_self value of the last run */
    atomic_ullong end_us;
    int sleep_ms;
} probe;

static void probe_callback(void *user)
{
    probe *p = user;
    if (p->sleep_ms)
        sleep_ms(p->sleep_ms);
    atomic_store(&p->thread, (unsigned long long)pthread_self());
    atomic_store(&p->end_us, now_us());
    atomic_fetch_add(&p->runs, 1);
}

static uint64_t stamp(aclrtEvent e)
{
    uint64_t t = 0;
    OK(aclrtEventGetTimestamp(e, &t));
    return t;
}

/* ---- one thread's facts ----------------------------------------------------- */

static void streams_and_config(void)
{
    aclrtStream s = NULL, v2 = NULL;
    uint32_t u = 0;
    int32_t least = -1, greatest = -1, id1 = -1, id2 = -1;
    OK(aclrtCreateStreamWithConfig(&s, 4, ACL_STREAM_FAST_LAUNCH));
    OK(aclrtStreamGetPriority(s, &u));
    EXPECT_EQ(u, 4, "priority");
    OK(aclrtStreamGetFlags(s, &u));
    EXPECT_EQ(u, ACL_STREAM_FAST_LAUNCH, "flags");
    OK(aclrtDeviceGetStreamPriorityRange(&least, &greatest));
    EXPECT(least == 7 && greatest == 0, "priority range %d..%d", least, greatest);

    aclrtStreamConfigHandle *h = aclrtCreateStreamConfigHandle();
    EXPECT(h != NULL, "config handle");
    uint32_t prio = 2;
    OK(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, &prio, sizeof prio));
    CODE(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, &prio, 1), 100000);
    OK(aclrtCreateStreamV2(&v2, h));
    OK(aclrtStreamGetPriority(v2, &u));
    EXPECT_EQ(u, 2, "V2 priority");
    OK(aclrtDestroyStreamConfigHandle(h));
    OK(aclrtStreamGetId(s, &id1));
    OK(aclrtStreamGetId(v2, &id2));
    EXPECT(id1 != id2, "stream ids %d %d", id1, id2);
    OK(aclrtGetStreamAvailableNum(&u));
    EXPECT(u > 0 && u < 1984, "available streams %u", u);

    aclrtStreamAttrValue value;
    memset(&value, 0, sizeof value);
    value.userCustomTag = 77;
    OK(aclrtSetStreamAttribute(s, ACL_STREAM_ATTR_USER_CUSTOM_TAG, &value));
    value.userCustomTag = 0;
    OK(aclrtGetStreamAttribute(s, ACL_STREAM_ATTR_USER_CUSTOM_TAG, &value));
    EXPECT_EQ(value.userCustomTag, 77, "tag");
    CODE(aclrtSetStreamAttribute(s, (aclrtStreamAttr)42, &value), 107000);

    /* query and timed synchronisation over work held back */
    void *a = NULL;
    OK(aclrtMalloc(&a, N, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtMemset(a, N, 0, N));
    aclrtStreamStatus status = ACL_STREAM_STATUS_RESERVED;
    for (int i = 1; i <= 5; i++)
        OK(aclrtMemsetAsync(a, N, i, N, s));
    OK(aclrtStreamQuery(s, &status));
    EXPECT_EQ(status, ACL_STREAM_STATUS_NOT_READY, "query with work queued");
    CODE(aclrtSynchronizeStreamWithTimeout(s, 5), 507046);
    CODE(aclrtSynchronizeStreamWithTimeout(s, 0), 107000);
    OK(aclrtSynchronizeStreamWithTimeout(s, -1));
    OK(aclrtStreamQuery(s, &status));
    EXPECT_EQ(status, ACL_STREAM_STATUS_COMPLETE, "query when done");
    EXPECT_EQ(read_byte(a), 5, "queued work done");
    OK(aclrtMemsetAsync(a, N, 9, N, v2));
    CODE(aclrtSynchronizeDeviceWithTimeout(1), 507046);
    OK(aclrtSynchronizeDeviceWithTimeout(10000));

    /* abort, forced destruction */
    for (int i = 1; i <= 5; i++)
        OK(aclrtMemsetAsync(a, N, 20 + i, N, s));
    OK(aclrtStreamAbort(s));
    OK(aclrtSynchronizeStream(s));
    EXPECT(read_byte(a) == 9 || read_byte(a) == 21, "work after the abort ran: %d", read_byte(a));
    for (int i = 1; i <= 5; i++)
        OK(aclrtMemsetAsync(a, N, 30 + i, N, v2));
    OK(aclrtDestroyStreamForce(v2));
    CODE(aclrtDestroyStreamForce(v2), 100000);
    CODE(aclrtStreamQuery(v2, &status), 100000);
    CODE(aclrtStreamAbort(NULL), 100000);
    OK(aclrtDestroyStream(s));
    CODE(aclrtStreamGetPriority(s, &u), 100000);
    OK(aclrtFree(a));
}

static void events(void)
{
    aclrtStream s = NULL;
    aclrtEvent start = NULL, end = NULL, ex = NULL, sync_only = NULL;
    OK(aclrtCreateStream(&s));
    OK(aclrtCreateEvent(&start));
    OK(aclrtCreateEventWithFlag(&end, ACL_EVENT_TIME_LINE | ACL_EVENT_SYNC));
    OK(aclrtCreateEventExWithFlag(&ex, ACL_EVENT_SYNC));
    OK(aclrtCreateEventWithFlag(&sync_only, ACL_EVENT_SYNC));
    aclrtEventRecordedStatus rs = ACL_EVENT_RECORDED_STATUS_COMPLETE;
    OK(aclrtQueryEventStatus(start, &rs));
    EXPECT_EQ(rs, ACL_EVENT_RECORDED_STATUS_NOT_READY, "never recorded");
    OK(aclrtQueryEventStatus(ex, &rs));
    EXPECT_EQ(rs, ACL_EVENT_RECORDED_STATUS_COMPLETE, "Ex, never recorded");
    float ms = -1;
    CODE(aclrtEventElapsedTime(&ms, start, end), 507000);

    void *a = NULL;
    OK(aclrtMalloc(&a, N, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtRecordEvent(start, s));
    for (int i = 0; i < 4; i++)
        OK(aclrtMemsetAsync(a, N, i, N, s));
    OK(aclrtRecordEvent(end, s));
    OK(aclrtRecordEvent(ex, s));
    OK(aclrtRecordEvent(sync_only, s));
    CODE(aclrtEventElapsedTime(&ms, start, end), 107006);
    CODE(aclrtSynchronizeEventWithTimeout(end, 5), 507047);
    OK(aclrtSynchronizeEventWithTimeout(end, 10000));
    OK(aclrtQueryEventStatus(end, &rs));
    EXPECT_EQ(rs, ACL_EVENT_RECORDED_STATUS_COMPLETE, "reached");
    OK(aclrtEventElapsedTime(&ms, start, end));
    EXPECT(ms >= 4 * 20 * 0.9 && ms < 5000, "5 tasks of 20 ms took %f ms", (double)ms);
    EXPECT(stamp(start) <= stamp(end) && stamp(end) <= now_us(), "stamps out of order");
    OK(aclrtSynchronizeStream(s));
    CODE(aclrtEventElapsedTime(&ms, start, sync_only), 107006);
    aclrtEventStatus es = ACL_EVENT_STATUS_RESERVED;
    CODE(aclrtQueryEvent(ex, &es), 207000);
    OK(aclrtQueryEvent(start, &es));
    EXPECT_EQ(es, ACL_EVENT_STATUS_COMPLETE, "deprecated query");
    uint32_t id1 = 0, id2 = 0, avail = 0;
    OK(aclrtGetEventId(start, &id1));
    OK(aclrtGetEventId(end, &id2));
    EXPECT(id1 != id2, "event ids");
    OK(aclrtGetEventAvailNum(&avail));
    EXPECT(avail > 0 && avail < 65536, "available events %u", avail);
    CODE(aclrtCreateEventWithFlag(&sync_only, 0), 107000);
    CODE(aclrtEventElapsedTime(NULL, start, end), 100000);

    /* a reset event: a wait queued after it waits for the next recording */
    aclrtStream t = NULL;
    OK(aclrtCreateStream(&t));
    OK(aclrtResetEvent(sync_only, s));
    OK(aclrtSynchronizeStream(s));
    OK(aclrtStreamWaitEventWithTimeout(t, sync_only, 0));
    OK(aclrtMemsetAsync(a, N, 42, N, t));
    aclrtEventWaitStatus ws = ACL_EVENT_WAIT_STATUS_RESERVED;
    OK(aclrtQueryEventWaitStatus(sync_only, &ws));
    EXPECT_EQ(ws, ACL_EVENT_WAIT_STATUS_NOT_READY, "wait pending");
    CODE(aclrtSynchronizeStreamWithTimeout(t, 150), 507046);
    OK(aclrtRecordEvent(sync_only, s));
    OK(aclrtSynchronizeStream(t));
    EXPECT_EQ(read_byte(a), 42, "released by the recording");
    OK(aclrtQueryEventWaitStatus(sync_only, &ws));
    EXPECT_EQ(ws, ACL_EVENT_WAIT_STATUS_COMPLETE, "wait done");

    /* destroying an event with work still queued on it is safe */
    OK(aclrtRecordEvent(start, s));
    OK(aclrtStreamWaitEvent(t, start));
    OK(aclrtDestroyEvent(start));
    OK(aclrtSynchronizeDevice());
    OK(aclrtDestroyEvent(end));
    OK(aclrtDestroyEvent(ex));
    OK(aclrtDestroyEvent(sync_only));
    OK(aclrtDestroyStream(s));
    OK(aclrtDestroyStream(t));
    OK(aclrtFree(a));
}

static void callbacks(pthread_t server)
{
    aclrtStream s = NULL, idle_stream = NULL, hf = NULL;
    aclrtEvent after = NULL;
    OK(aclrtCreateStream(&s));
    OK(aclrtCreateEvent(&after));
    probe slow = {0}, quick = {0};
    slow.sleep_ms = 100;
    CODE(aclrtLaunchCallback(probe_callback, &quick, ACL_CALLBACK_BLOCK, s), 107015);
    OK(aclrtSubscribeReport((uint64_t)server, s));
    CODE(aclrtSubscribeReport((uint64_t)server, s), 107011);

    OK(aclrtLaunchCallback(probe_callback, &slow, ACL_CALLBACK_BLOCK, s));
    OK(aclrtRecordEvent(after, s));
    OK(aclrtSynchronizeStream(s));
    EXPECT_EQ(atomic_load(&slow.runs), 1, "blocking callback ran");
    EXPECT(atomic_load(&slow.thread) == (unsigned long long)server, "callback not on the subscribed thread");
    EXPECT(stamp(after) >= atomic_load(&slow.end_us), "the stream did not wait for the blocking callback");

    atomic_store(&slow.runs, 0);
    OK(aclrtLaunchCallback(probe_callback, &slow, ACL_CALLBACK_NO_BLOCK, s));
    OK(aclrtRecordEvent(after, s));
    OK(aclrtSynchronizeStream(s));
    uint64_t recorded_at = stamp(after);
    while (atomic_load(&slow.runs) == 0)
        sleep_ms(5);
    EXPECT(recorded_at + 50000 < atomic_load(&slow.end_us), "the stream waited for a non-blocking callback");

    for (int i = 0; i < 10; i++)
        OK(aclrtLaunchCallback(probe_callback, &quick, i % 2 ? ACL_CALLBACK_BLOCK : ACL_CALLBACK_NO_BLOCK, s));
    OK(aclrtSynchronizeStream(s));
    while (atomic_load(&quick.runs) < 10)
        sleep_ms(5);
    CODE(aclrtUnSubscribeReport((uint64_t)server + 1, s), 107012);
    OK(aclrtUnSubscribeReport((uint64_t)server, s));
    CODE(aclrtUnSubscribeReport((uint64_t)server, s), 107011);
    CODE(aclrtLaunchCallback(probe_callback, &quick, 2, s), 100000);
    CODE(aclrtLaunchCallback(NULL, &quick, ACL_CALLBACK_BLOCK, s), 107000);
    CODE(aclrtProcessReport(50), 107012);
    CODE(aclrtProcessReport(0), 100000);

    /* a callback for a thread that never serves holds its stream until the
     * subscription goes */
    void *a = NULL;
    OK(aclrtMalloc(&a, N, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtMemset(a, N, 0, N));
    OK(aclrtCreateStream(&idle_stream));
    OK(aclrtSubscribeReport(777, idle_stream));
    probe never = {0};
    OK(aclrtLaunchCallback(probe_callback, &never, ACL_CALLBACK_BLOCK, idle_stream));
    OK(aclrtMemsetAsync(a, N, 3, N, idle_stream));
    CODE(aclrtSynchronizeStreamWithTimeout(idle_stream, 100), 507046);
    OK(aclrtUnSubscribeReport(777, idle_stream));
    OK(aclrtSynchronizeStream(idle_stream));
    EXPECT_EQ(read_byte(a), 3, "the stream went on");
    EXPECT_EQ(atomic_load(&never.runs), 0, "a dropped callback ran");
    OK(aclrtDestroyStream(idle_stream));

    /* host functions: on a thread of the library's, blocking the stream */
    OK(aclrtCreateStream(&hf));
    probe host = {0};
    host.sleep_ms = 50;
    OK(aclrtLaunchHostFunc(hf, probe_callback, &host));
    OK(aclrtRecordEvent(after, hf));
    OK(aclrtSynchronizeStream(hf));
    EXPECT_EQ(atomic_load(&host.runs), 1, "host function ran");
    EXPECT(atomic_load(&host.thread) != (unsigned long long)pthread_self(), "host function on the caller");
    EXPECT(stamp(after) >= atomic_load(&host.end_us), "the stream did not wait for the host function");
    CODE(aclrtSubscribeReport((uint64_t)server, hf), 107011);
    CODE(aclrtLaunchHostFunc(hf, NULL, NULL), 107000);

    OK(aclrtDestroyStream(hf));
    OK(aclrtDestroyStream(s));
    OK(aclrtDestroyEvent(after));
    OK(aclrtFree(a));
}

/* ---- the same calls from several threads at once ---------------------------- */

typedef struct {
    int index;
    pthread_t server;
    aclrtStream shared;     /* aborted by one thread while others queue on it */
    void *shared_buffer;
    atomic_int *callbacks_run;
    int callbacks_launched;
} worker;

static void count_callback(void *user) { atomic_fetch_add((atomic_int *)user, 1); }

static void *work(void *arg)
{
    worker *w = arg;
    OK(aclrtSetDevice(0));
    void *a = NULL;
    OK(aclrtMalloc(&a, N, ACL_MEM_MALLOC_HUGE_FIRST));
    for (int round = 0; round < ROUNDS; round++) {
        aclrtStream s = NULL;
        aclrtEvent e1 = NULL, e2 = NULL;
        OK(aclrtCreateStreamWithConfig(&s, (uint32_t)(round % 8), ACL_STREAM_FAST_SYNC));
        OK(aclrtCreateEvent(&e1));
        OK(aclrtCreateEventExWithFlag(&e2, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE));
        OK(aclrtSubscribeReport((uint64_t)w->server, s));
        OK(aclrtRecordEvent(e1, s));
        OK(aclrtLaunchCallback(count_callback, w->callbacks_run, ACL_CALLBACK_NO_BLOCK, s));
        OK(aclrtMemsetAsync(a, N, round, N, s));
        OK(aclrtLaunchCallback(count_callback, w->callbacks_run, ACL_CALLBACK_BLOCK, s));
        w->callbacks_launched += 2;
        OK(aclrtRecordEvent(e2, s));
        OK(aclrtMemsetAsync(w->shared_buffer, N, w->index, N, w->shared));
        aclrtStreamStatus status;
        OK(aclrtStreamQuery(s, &status));
        aclrtEventRecordedStatus rs;
        OK(aclrtQueryEventStatus(e2, &rs));
        OK(aclrtSynchronizeEventWithTimeout(e2, 30000));
        float ms = -1;
        OK(aclrtEventElapsedTime(&ms, e1, e2));
        EXPECT(ms >= 0, "elapsed %f", (double)ms);
        if (w->index == 0 && round % 4 == 0)
            OK(aclrtStreamAbort(w->shared));
        OK(aclrtUnSubscribeReport((uint64_t)w->server, s));
        OK(aclrtDestroyEvent(e1));
        OK(aclrtDestroyEvent(e2));
        if (round % 2)
            OK(aclrtDestroyStreamForce(s));
        else
            OK(aclrtDestroyStream(s));
    }
    OK(aclrtFree(a));
    return NULL;
}

static void concurrently(pthread_t server)
{
    aclrtStream shared = NULL;
    void *buffer = NULL;
    OK(aclrtCreateStream(&shared));
    OK(aclrtMalloc(&buffer, N, ACL_MEM_MALLOC_HUGE_FIRST));
    atomic_int run = 0;
    worker workers[WORKERS];
    pthread_t threads[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        workers[i] = (worker){i, server, shared, buffer, &run, 0};
        if (pthread_create(&threads[i], NULL, work, &workers[i]) != 0) {
            EXPECT(0, "pthread_create");
            return;
        }
    }
    int launched = 0;
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(threads[i], NULL);
        launched += workers[i].callbacks_launched;
    }
    /* every callback was posted before its stream was synchronised, so the
     * serving thread has them all */
    for (int spins = 0; atomic_load(&run) < launched && spins < 2000; spins++)
        sleep_ms(5);
    EXPECT_EQ(atomic_load(&run), launched, "callbacks run");
    OK(aclrtSynchronizeStream(shared));
    OK(aclrtDestroyStream(shared));
    OK(aclrtFree(buffer));
}

int main(void)
{
    setenv("CONVTBC_STREAM_DELAY_MS", "20", 1);
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    pthread_t server;
    if (pthread_create(&server, NULL, serve_callbacks, NULL) != 0) {
        fprintf(stderr, "cannot start the callback thread\n");
        return 1;
    }
    streams_and_config();
    events();
    callbacks(server);
    concurrently(server);

    /* aclFinalize does not wait for a callback nobody serves */
    aclrtStream held = NULL;
    probe never = {0};
    OK(aclrtCreateStream(&held));
    OK(aclrtSubscribeReport(4242, held));
    OK(aclrtLaunchCallback(probe_callback, &never, ACL_CALLBACK_BLOCK, held));
    atomic_store(&g_serving, 0);
    pthread_join(server, NULL);
    EXPECT_EQ(atomic_load(&g_unexpected_code), 0, "aclrtProcessReport status");
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
    EXPECT_EQ(atomic_load(&never.runs), 0, "a callback nobody served ran");
    return finish("stream_api");
}
