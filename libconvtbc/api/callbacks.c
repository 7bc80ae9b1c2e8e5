/*
 * Host callbacks, as CANN runs them.
 *
 * aclrtSubscribeReport binds a stream to a thread of the caller's (named by
 * its pthread_self value, as CANN names it). aclrtLaunchCallback queues a
 * task on the stream; when the stream's worker reaches it, it posts a report
 * for the bound thread, which runs the callback inside aclrtProcessReport.
 * With ACL_CALLBACK_BLOCK the task waits until the callback has returned, so
 * later work on the stream waits too; with ACL_CALLBACK_NO_BLOCK the stream
 * goes on at once.
 *
 * aclrtLaunchHostFunc needs no thread of the caller's: CANN runs the
 * function on a thread of its own and always blocks the stream; here that
 * thread is the stream's worker. A stream serves one of the two mechanisms,
 * as in CANN (mixing them gets ACL_ERROR_RT_STREAM_SUBSCRIBE).
 *
 * Reports whose stream loses its subscriber (aclrtUnSubscribeReport, the
 * stream destroyed or aborted, aclFinalize) before they were taken are
 * dropped: nobody is left to run them, and a blocked stream goes on.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "acl/acl_rt.h"
#include "api/errors.h"
#include "api/log.h"
#include "api/runtime.h"
#include "api/streams.h"

typedef enum { BY_USER_THREAD, BY_HOST_FUNC } subscriber_kind;

typedef struct {
    const ctbc_stream *stream;
    uint64_t thread;       /* BY_USER_THREAD: the pthread_self value of the processing thread */
    subscriber_kind kind;
} subscription;

typedef enum { QUEUED, RUNNING, DONE } report_state;

typedef struct report {
    struct report *next;
    const ctbc_stream *stream;
    uint64_t thread;
    aclrtCallback fn;
    void *user_data;
    bool blocking;         /* lives in the waiting task's frame; else malloc'd, freed by whoever ends it */
    report_state state;
} report;

static pthread_mutex_t callbacks_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t callbacks_changed; /* a report posted or ended, a subscription changed */
static pthread_once_t callbacks_once = PTHREAD_ONCE_INIT;
static subscription *subscriptions;
static size_t subscription_count, subscription_capacity;
static report *queue_head, *queue_tail; /* QUEUED reports, oldest first */
/* The stream of the callback this thread is running. */
static _Thread_local const ctbc_stream *running_for;

const ctbc_stream *ctbc_callbacks_running_for(void) { return running_for; }

static void init_condition(void) { ctbc_cond_init_monotonic(&callbacks_changed); }

static void lock(void)
{
    pthread_once(&callbacks_once, init_condition);
    pthread_mutex_lock(&callbacks_lock);
}

static void unlock(void) { pthread_mutex_unlock(&callbacks_lock); }

static subscription *find_locked(const ctbc_stream *stream)
{
    for (size_t i = 0; i < subscription_count; i++)
        if (subscriptions[i].stream == stream)
            return &subscriptions[i];
    return NULL;
}

static bool thread_subscribed_locked(uint64_t thread)
{
    for (size_t i = 0; i < subscription_count; i++)
        if (subscriptions[i].kind == BY_USER_THREAD && subscriptions[i].thread == thread)
            return true;
    return false;
}

static bool add_locked(const ctbc_stream *stream, uint64_t thread, subscriber_kind kind)
{
    if (subscription_count == subscription_capacity) {
        size_t capacity = subscription_capacity ? 2 * subscription_capacity : 8;
        subscription *grown = realloc(subscriptions, capacity * sizeof *grown);
        if (!grown)
            return false;
        subscriptions = grown;
        subscription_capacity = capacity;
    }
    subscriptions[subscription_count++] = (subscription){stream, thread, kind};
    return true;
}

static void unlink_locked(report *r)
{
    report **link = &queue_head;
    report *previous = NULL;
    while (*link && *link != r) {
        previous = *link;
        link = &(*link)->next;
    }
    if (!*link)
        return;
    *link = r->next;
    if (queue_tail == r)
        queue_tail = previous;
    r->next = NULL;
}

/* Ends a report nobody will run: a blocked task goes on, a detached report
 * is freed. */
static void end_unrun_locked(report *r)
{
    if (r->blocking)
        r->state = DONE;
    else
        free(r);
}

/* Drops the queued reports of `stream` (every stream for NULL). */
static void drop_reports_locked(const ctbc_stream *stream)
{
    report *r = queue_head;
    while (r) {
        report *next = r->next;
        if (!stream || r->stream == stream) {
            CTBC_LOG(CTBC_LOG_WARNING, "callback %p of stream %p dropped: the stream has no subscriber any more",
                     (void *)(uintptr_t)r->fn, (const void *)r->stream);
            unlink_locked(r);
            end_unrun_locked(r);
        }
        r = next;
    }
    pthread_cond_broadcast(&callbacks_changed);
}

static void remove_locked(subscription *s)
{
    *s = subscriptions[--subscription_count];
}

void ctbc_callbacks_forget_stream(const ctbc_stream *stream)
{
    lock();
    subscription *s = find_locked(stream);
    if (s)
        remove_locked(s);
    drop_reports_locked(stream);
    unlock();
}

void ctbc_callbacks_wake_waiters(void)
{
    lock();
    pthread_cond_broadcast(&callbacks_changed);
    unlock();
}

void ctbc_callbacks_shutdown(void)
{
    lock();
    subscription_count = 0;
    drop_reports_locked(NULL);
    unlock();
}

void ctbc_callbacks_after_fork(void)
{
    pthread_mutex_init(&callbacks_lock, NULL);
    init_condition();
    /* The reports are left where they are: a blocking one lives in the
     * frame of a worker thread the child does not have. */
    subscription_count = 0;
    queue_head = queue_tail = NULL;
}

/* The stream behind a checked handle; NULL needs a current context. */
static aclError stream_of(const char *api, aclrtStream handle, ctbc_stream **out)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init(api));
    CTBC_RETURN_IF_FAILED(ctbc_check_stream(api, handle));
    *out = ctbc_stream_resolve(handle);
    if (!*out)
        return ctbc_fail(ACL_ERROR_RT_CONTEXT_NULL, CTBC_EE_RUNTIME, api,
                         "stream is NULL (the default stream) but this thread has no current context: call "
                         "aclrtSetDevice or aclrtSetCurrentContext first");
    return ACL_SUCCESS;
}

/* ---- subscribing ------------------------------------------------------------ */

aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream handle)
{
    static const char API[] = "aclrtSubscribeReport";
    ctbc_stream *stream;
    CTBC_RETURN_IF_FAILED(stream_of(API, handle, &stream));
    lock();
    const subscription *s = find_locked(stream);
    subscription existing = s ? *s : (subscription){NULL, 0, BY_USER_THREAD};
    bool added = !s && add_locked(stream, threadId, BY_USER_THREAD);
    unlock();
    if (s && existing.kind == BY_HOST_FUNC)
        return ctbc_fail(ACL_ERROR_RT_STREAM_SUBSCRIBE, CTBC_EE_RUNTIME, API,
                         "stream %p runs host functions queued by aclrtLaunchHostFunc; it cannot also take "
                         "aclrtLaunchCallback callbacks",
                         (void *)stream);
    if (s)
        return ctbc_fail(ACL_ERROR_RT_STREAM_SUBSCRIBE, CTBC_EE_RUNTIME, API,
                         "stream %p is already subscribed by thread %llu; a stream has one callback thread",
                         (void *)stream, (unsigned long long)existing.thread);
    if (!added)
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, API, "out of memory");
    return ACL_SUCCESS;
}

aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream handle)
{
    static const char API[] = "aclrtUnSubscribeReport";
    ctbc_stream *stream;
    CTBC_RETURN_IF_FAILED(stream_of(API, handle, &stream));
    lock();
    subscription *s = find_locked(stream);
    bool by_user = s && s->kind == BY_USER_THREAD;
    uint64_t owner = by_user ? s->thread : 0;
    if (by_user && owner == threadId) {
        remove_locked(s);
        drop_reports_locked(stream);
    }
    unlock();
    if (!by_user)
        return ctbc_fail(ACL_ERROR_RT_STREAM_SUBSCRIBE, CTBC_EE_RUNTIME, API,
                         "stream %p is not subscribed by any thread (see aclrtSubscribeReport)", (void *)stream);
    if (owner != threadId)
        return ctbc_fail(ACL_ERROR_RT_THREAD_SUBSCRIBE, CTBC_EE_RUNTIME, API,
                         "stream %p is subscribed by thread %llu, not by thread %llu", (void *)stream,
                         (unsigned long long)owner, (unsigned long long)threadId);
    return ACL_SUCCESS;
}

/* ---- launching -------------------------------------------------------------- */

typedef struct {
    const ctbc_stream *stream;
    aclrtCallback fn;
    void *user_data;
    bool blocking;
} callback_task;

/* On the stream's worker: hands the callback to the stream's thread. */
static aclError post(void *payload)
{
    const callback_task *job = payload;
    report on_stack = {NULL, job->stream, 0, job->fn, job->user_data, true, QUEUED};
    report *r = job->blocking ? &on_stack : malloc(sizeof *r);
    if (!r)
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, "aclrtLaunchCallback",
                         "out of memory posting a callback");
    *r = on_stack;
    r->blocking = job->blocking;
    lock();
    const subscription *s = find_locked(job->stream);
    if (!s || s->kind != BY_USER_THREAD) {
        unlock();
        CTBC_LOG(CTBC_LOG_WARNING, "callback %p of stream %p dropped: the stream has no subscriber any more",
                 (void *)(uintptr_t)job->fn, (const void *)job->stream);
        if (r != &on_stack)
            free(r);
        return ACL_SUCCESS;
    }
    r->thread = s->thread;
    if (queue_tail)
        queue_tail->next = r;
    else
        queue_head = r;
    queue_tail = r;
    pthread_cond_broadcast(&callbacks_changed);
    if (r == &on_stack) {
        /* Blocking: wait for the callback to return. A stream being aborted
         * takes back a report not yet taken; one already running must end. */
        while (on_stack.state != DONE && !(on_stack.state == QUEUED && ctbc_task_cancelled()))
            pthread_cond_wait(&callbacks_changed, &callbacks_lock);
        if (on_stack.state == QUEUED)
            unlink_locked(&on_stack);
    }
    unlock();
    return ACL_SUCCESS;
}

aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType blockType, aclrtStream handle)
{
    static const char API[] = "aclrtLaunchCallback";
    if (blockType != ACL_CALLBACK_NO_BLOCK && blockType != ACL_CALLBACK_BLOCK)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API,
                         "blockType %d is invalid: expected ACL_CALLBACK_NO_BLOCK (0) or ACL_CALLBACK_BLOCK (1)",
                         (int)blockType);
    if (!fn)
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API, "fn must not be NULL");
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context(API, &ctx));
    ctbc_stream *stream;
    CTBC_RETURN_IF_FAILED(stream_of(API, handle, &stream));
    lock();
    const subscription *s = find_locked(stream);
    subscriber_kind kind = s ? s->kind : BY_USER_THREAD;
    unlock();
    if (!s)
        return ctbc_fail(ACL_ERROR_RT_STREAM_NO_CB_REG, CTBC_EE_RUNTIME, API,
                         "stream %p is not bound to any thread: call aclrtSubscribeReport first", (void *)stream);
    if (kind == BY_HOST_FUNC)
        return ctbc_fail(ACL_ERROR_RT_STREAM_SUBSCRIBE, CTBC_EE_RUNTIME, API,
                         "stream %p runs host functions queued by aclrtLaunchHostFunc; it cannot also take "
                         "aclrtLaunchCallback callbacks",
                         (void *)stream);
    callback_task job = {stream, fn, userData, blockType == ACL_CALLBACK_BLOCK};
    return ctbc_stream_submit(API, stream, post, &job, sizeof job);
}

/* ---- processing ------------------------------------------------------------- */

aclError aclrtProcessReport(int32_t timeout)
{
    static const char API[] = "aclrtProcessReport";
    if (timeout < -1 || timeout == 0)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API,
                         "timeout %d is invalid: expected -1 (wait for ever) or a positive number of milliseconds",
                         (int)timeout);
    const uint64_t me = (uint64_t)pthread_self();
    struct timespec deadline;
    if (timeout > 0)
        ctbc_deadline_after_ms(&deadline, timeout);
    report *mine = NULL, **mine_tail = &mine;
    bool subscribed = true, in_time = true;
    lock();
    for (;;) {
        subscribed = thread_subscribed_locked(me);
        if (!subscribed)
            break;
        /* Take every report for this thread, in the order they came. */
        for (report *r = queue_head, *next; r; r = next) {
            next = r->next;
            if (r->thread != me)
                continue;
            unlink_locked(r);
            r->state = RUNNING;
            *mine_tail = r;
            mine_tail = &r->next;
        }
        if (mine || !in_time)
            break;
        if (timeout > 0)
            in_time = pthread_cond_timedwait(&callbacks_changed, &callbacks_lock, &deadline) == 0;
        else
            pthread_cond_wait(&callbacks_changed, &callbacks_lock);
    }
    unlock();
    if (!subscribed && !mine)
        return ctbc_fail(ACL_ERROR_RT_THREAD_SUBSCRIBE, CTBC_EE_RUNTIME, API,
                         "thread %llu is not subscribed to any stream (see aclrtSubscribeReport)",
                         (unsigned long long)me);
    if (!mine)
        return ctbc_fail(ACL_ERROR_RT_REPORT_TIMEOUT, CTBC_EE_RUNTIME, API,
                         "no callback came within %d ms", (int)timeout);
    while (mine) {
        report *r = mine;
        mine = r->next; /* read first: a blocking report's frame goes once it is DONE */
        running_for = r->stream;
        r->fn(r->user_data);
        running_for = NULL;
        if (!r->blocking) {
            free(r);
            continue;
        }
        lock();
        r->state = DONE;
        pthread_cond_broadcast(&callbacks_changed);
        unlock();
    }
    return ACL_SUCCESS;
}

/* ---- host functions --------------------------------------------------------- */

typedef struct {
    aclrtHostFunc fn;
    void *args;
} host_func_task;

static aclError run_host_func(void *payload)
{
    const host_func_task *job = payload;
    job->fn(job->args);
    return ACL_SUCCESS;
}

aclError aclrtLaunchHostFunc(aclrtStream handle, aclrtHostFunc fn, void *args)
{
    static const char API[] = "aclrtLaunchHostFunc";
    if (!fn)
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API, "fn must not be NULL");
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context(API, &ctx));
    ctbc_stream *stream;
    CTBC_RETURN_IF_FAILED(stream_of(API, handle, &stream));
    lock();
    const subscription *s = find_locked(stream);
    bool taken_by_user = s && s->kind == BY_USER_THREAD;
    bool ok = s || add_locked(stream, 0, BY_HOST_FUNC);
    unlock();
    if (taken_by_user)
        return ctbc_fail(ACL_ERROR_RT_STREAM_SUBSCRIBE, CTBC_EE_RUNTIME, API,
                         "stream %p is subscribed by a thread for aclrtLaunchCallback callbacks; it cannot also run "
                         "aclrtLaunchHostFunc host functions",
                         (void *)stream);
    if (!ok)
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, API, "out of memory");
    host_func_task job = {fn, args};
    return ctbc_stream_submit(API, stream, run_host_func, &job, sizeof job);
}
