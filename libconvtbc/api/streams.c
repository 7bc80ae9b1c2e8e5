#include "api/streams.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acl/acl.h"
#include "api/errors.h"
#include "convtbc/convtbc_ext.h"
#include "api/log.h"
#include "api/registry.h"
#include "api/runtime.h"
#include "api/soc_profile.h"

typedef struct task {
    struct task *next;
    ctbc_task_fn run;
    ctbc_task_drop_fn drop;
    max_align_t payload[];
} task;

struct ctbc_stream {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* work queued, work done, worker idle, or stopping */
    task *head, *tail;
    uint64_t submitted, completed;
    bool stopping;
    bool busy;              /* the worker is inside a task */
    int cancelling;         /* atomic: queued work is being dropped (abort, forced destruction) */
    uint64_t aborts;        /* synchronisers that see it move return ACL_ERROR_RT_STREAM_ABORT */
    aclError failure;       /* first failure since the last synchronisation */
    char failure_message[1024];
    aclError stopped_by;    /* ACL_STOP_ON_FAILURE: the failure that stopped the stream */
    pthread_t worker;
    /* Set at creation or by aclrtSetStream*; read under `lock`. */
    int32_t id;
    uint32_t priority, flags;
    uint64_t failure_mode;
    uint32_t overflow_switch, user_tag, cache_op_info;
    /* atomic: one for the stream's own life (held by the registry, then by
     * the graveyard) plus one per call using it; the last release frees.
     * Calls take theirs under the registry's lock, so none is taken on a
     * stream already removed. */
    uint32_t refs;
};

/* Destroyed streams stay here (their memory neither freed nor reused) for
 * the next GRAVEYARD_SIZE destructions, so that a stale handle is recognised
 * as destroyed instead of naming a newer stream at the same address. */
enum { GRAVEYARD_SIZE = 256 };
static pthread_mutex_t graveyard_lock = PTHREAD_MUTEX_INITIALIZER;
static ctbc_stream *graveyard[GRAVEYARD_SIZE];
static size_t graveyard_next;

/* Streams made by aclrtCreateStream* (the handles callers may pass), and all
 * streams including the contexts' default ones (what the device runs). */
static ctbc_registry created_streams = CTBC_REGISTRY_INIT;
static ctbc_registry all_streams = CTBC_REGISTRY_INIT;
/* aclrtSynchronizeDevice holds it for reading while it waits on streams, so
 * no stream is freed under it; deleting a stream takes it for writing. */
static pthread_rwlock_t streams_in_sync = PTHREAD_RWLOCK_INITIALIZER;

static int32_t next_stream_id;  /* atomic */
static uint32_t live_stream_count; /* atomic, default streams included */

/* The stream whose worker is the calling thread. */
static _Thread_local ctbc_stream *worker_of;

static void take_ref(const void *handle, void *arg)
{
    (void)arg;
    __atomic_fetch_add(&((ctbc_stream *)handle)->refs, 1, __ATOMIC_RELAXED);
}

static void release(ctbc_stream *stream)
{
    if (__atomic_sub_fetch(&stream->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    pthread_cond_destroy(&stream->changed);
    pthread_mutex_destroy(&stream->lock);
    free(stream);
}

/* A reference to the live stream `stream` names (not NULL), or NULL. */
static ctbc_stream *acquire(ctbc_stream *stream)
{
    return ctbc_registry_visit(&all_streams, stream, take_ref, NULL) ? stream : NULL;
}

static bool buried(const void *handle)
{
    pthread_mutex_lock(&graveyard_lock);
    bool found = false;
    for (size_t i = 0; i < GRAVEYARD_SIZE && !found; i++)
        found = handle && graveyard[i] == handle;
    pthread_mutex_unlock(&graveyard_lock);
    return found;
}

static void bury(ctbc_stream *stream)
{
    pthread_mutex_lock(&graveyard_lock);
    ctbc_stream *evicted = graveyard[graveyard_next];
    graveyard[graveyard_next] = stream;
    graveyard_next = (graveyard_next + 1) % GRAVEYARD_SIZE;
    pthread_mutex_unlock(&graveyard_lock);
    if (evicted)
        release(evicted);
}

/* The message for a handle that failed the liveness check. */
static aclError not_live(const char *api, const void *handle)
{
    if (buried(handle))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "stream %p is not a live stream: it was already destroyed", handle);
    return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                     "stream %p is not a live stream (NULL is the default stream)", handle);
}

static long queued_delay_ms;
static pthread_once_t delay_once = PTHREAD_ONCE_INIT;

/* CANN's stream priorities: 0 is the greatest, 7 the least; values outside
 * are clamped, as CANN does. */
enum { GREATEST_PRIORITY = 0, LEAST_PRIORITY = 7 };

static const uint32_t KNOWN_STREAM_FLAGS = ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC | ACL_STREAM_PERSISTENT |
                                           ACL_STREAM_HUGE | ACL_STREAM_CPU_SCHEDULE | ACL_STREAM_DEVICE_USE_ONLY;
/* CANN documents that synchronising or querying a stream made with these
 * flags does nothing and succeeds: its tasks belong to a model or to the
 * device. */
static const uint32_t NO_HOST_SYNC_FLAGS = ACL_STREAM_PERSISTENT | ACL_STREAM_CPU_SCHEDULE | ACL_STREAM_DEVICE_USE_ONLY;

static void read_delay(void)
{
    const char *text = getenv("CONVTBC_STREAM_DELAY_MS");
    long value = text ? strtol(text, NULL, 10) : 0;
    queued_delay_ms = value > 0 ? value : 0;
}

/* ---- clocks ----------------------------------------------------------------- */

void ctbc_cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

void ctbc_deadline_after_ms(struct timespec *deadline, int64_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, deadline);
    deadline->tv_sec += (time_t)(ms / 1000);
    deadline->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (deadline->tv_nsec >= 1000000000L) {
        deadline->tv_sec++;
        deadline->tv_nsec -= 1000000000L;
    }
}

/* Waits on `cond` until `deadline` (NULL: a plain wait); false on timeout. */
static bool wait_until(pthread_cond_t *cond, pthread_mutex_t *lock, const struct timespec *deadline)
{
    if (!deadline) {
        pthread_cond_wait(cond, lock);
        return true;
    }
    return pthread_cond_timedwait(cond, lock, deadline) != ETIMEDOUT;
}

/* ---- the worker ------------------------------------------------------------- */

bool ctbc_task_cancelled(void)
{
    ctbc_stream *stream = worker_of;
    return stream && __atomic_load_n(&stream->cancelling, __ATOMIC_ACQUIRE);
}

/* Detaches the queue, counting its tasks as done; the caller drops them
 * after unlocking (a drop may take other locks). */
static task *take_queue_locked(ctbc_stream *stream)
{
    task *list = stream->head;
    for (task *t = list; t; t = t->next)
        stream->completed++;
    stream->head = stream->tail = NULL;
    pthread_cond_broadcast(&stream->changed);
    return list;
}

static void drop_tasks(task *list)
{
    while (list) {
        task *next = list->next;
        if (list->drop)
            list->drop(list->payload);
        free(list);
        list = next;
    }
}

static void *work(void *arg)
{
    ctbc_stream *stream = arg;
    worker_of = stream;
    pthread_mutex_lock(&stream->lock);
    for (;;) {
        while (!stream->head && !stream->stopping)
            pthread_cond_wait(&stream->changed, &stream->lock);
        task *next = stream->head;
        if (!next)
            break; /* stopping, and nothing left to run */
        stream->head = next->next;
        if (!stream->head)
            stream->tail = NULL;
        stream->busy = true;
        pthread_mutex_unlock(&stream->lock);

        long delay = queued_delay_ms;
        if (delay > 0)
            nanosleep(&(struct timespec){delay / 1000, (delay % 1000) * 1000000L}, NULL);
        aclError status = next->run(next->payload);
        const char *message = status != ACL_SUCCESS ? aclGetRecentErrMsg() : NULL;
        free(next);

        pthread_mutex_lock(&stream->lock);
        task *dropped = NULL;
        if (status != ACL_SUCCESS) {
            if (stream->failure == ACL_SUCCESS) {
                stream->failure = status;
                snprintf(stream->failure_message, sizeof stream->failure_message, "%s",
                         message ? message : "(no message)");
            }
            if (stream->failure_mode == ACL_STOP_ON_FAILURE && stream->stopped_by == ACL_SUCCESS) {
                stream->stopped_by = status;
                dropped = take_queue_locked(stream);
            }
        }
        stream->busy = false;
        stream->completed++;
        pthread_cond_broadcast(&stream->changed);
        if (dropped) {
            pthread_mutex_unlock(&stream->lock);
            drop_tasks(dropped);
            pthread_mutex_lock(&stream->lock);
        }
    }
    pthread_mutex_unlock(&stream->lock);
    return NULL;
}

ctbc_stream *ctbc_stream_new(void)
{
    pthread_once(&delay_once, read_delay);
    ctbc_stream *stream = calloc(1, sizeof *stream);
    if (!stream)
        return NULL;
    pthread_mutex_init(&stream->lock, NULL);
    ctbc_cond_init_monotonic(&stream->changed);
    stream->id = __atomic_fetch_add(&next_stream_id, 1, __ATOMIC_RELAXED);
    stream->priority = GREATEST_PRIORITY; /* CANN: a stream made without a priority has the greatest */
    stream->refs = 1;
    if (pthread_create(&stream->worker, NULL, work, stream) != 0) {
        pthread_cond_destroy(&stream->changed);
        pthread_mutex_destroy(&stream->lock);
        free(stream);
        return NULL;
    }
    __atomic_fetch_add(&live_stream_count, 1, __ATOMIC_RELAXED);
    if (!ctbc_registry_add(&all_streams, stream, sizeof *stream)) {
        ctbc_stream_delete(stream);
        return NULL;
    }
    return stream;
}

void ctbc_stream_delete(ctbc_stream *stream)
{
    if (!stream)
        return;
    pthread_rwlock_wrlock(&streams_in_sync);
    ctbc_registry_remove(&all_streams, stream);
    pthread_rwlock_unlock(&streams_in_sync);
    pthread_mutex_lock(&stream->lock);
    stream->stopping = true;
    pthread_cond_broadcast(&stream->changed);
    pthread_mutex_unlock(&stream->lock);
    pthread_join(stream->worker, NULL);
    /* Its address may be reused by the next stream: no subscription may
     * outlive it. */
    ctbc_callbacks_forget_stream(stream);
    __atomic_fetch_sub(&live_stream_count, 1, __ATOMIC_RELAXED);
    /* Calls that took a reference before the removal may still be using it;
     * they find it stopping (no new work) and drained. */
    bury(stream);
}

bool ctbc_stream_is_live(aclrtStream stream)
{
    return !stream || ctbc_registry_contains(&created_streams, stream) || ctbc_registry_contains(&all_streams, stream);
}

aclError ctbc_check_stream(const char *api, aclrtStream stream)
{
    if (!ctbc_stream_is_live(stream))
        return not_live(api, stream);
    return ACL_SUCCESS;
}

ctbc_stream *ctbc_stream_resolve(aclrtStream handle)
{
    if (handle)
        return handle;
    ctbc_context *ctx = ctbc_current_context();
    return ctx ? ctbc_context_default_stream(ctx) : NULL;
}

aclError ctbc_stream_submit_droppable(const char *api, aclrtStream handle, ctbc_task_fn fn, ctbc_task_drop_fn drop,
                                      const void *payload, size_t payload_bytes)
{
    ctbc_stream *resolved = ctbc_stream_resolve(handle);
    if (!resolved)
        return fn((void *)payload); /* no device: nothing to queue on */
    /* The caller checked the handle, but another thread may have destroyed
     * the stream since: only a reference keeps it. */
    ctbc_stream *stream = acquire(resolved);
    if (!stream)
        return not_live(api, resolved);
    task *job = malloc(sizeof *job + payload_bytes);
    if (!job) {
        release(stream);
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, api, "out of memory queueing work");
    }
    job->next = NULL;
    job->run = fn;
    job->drop = drop;
    memcpy(job->payload, payload, payload_bytes);

    pthread_mutex_lock(&stream->lock);
    if (stream->stopping) {
        pthread_mutex_unlock(&stream->lock);
        free(job);
        release(stream);
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "stream %p is not a live stream: it is being destroyed", (void *)stream);
    }
    aclError stopped_by = stream->stopped_by;
    if (stopped_by != ACL_SUCCESS) {
        pthread_mutex_unlock(&stream->lock);
        free(job);
        release(stream);
        return ctbc_fail(stopped_by, CTBC_EE_RUNTIME, api,
                         "stream %p is in ACL_STOP_ON_FAILURE mode and stopped at a failed task (status %d): it "
                         "takes no more work",
                         (void *)stream, stopped_by);
    }
    if (__atomic_load_n(&stream->cancelling, __ATOMIC_ACQUIRE)) {
        /* CANN: work submitted while a stream is being aborted has no effect. */
        stream->submitted++;
        stream->completed++;
        pthread_mutex_unlock(&stream->lock);
        drop_tasks(job);
        release(stream);
        return ACL_SUCCESS;
    }
    if (stream->tail)
        stream->tail->next = job;
    else
        stream->head = job;
    stream->tail = job;
    stream->submitted++;
    pthread_cond_broadcast(&stream->changed);
    pthread_mutex_unlock(&stream->lock);
    CTBC_LOG(CTBC_LOG_DEBUG, "%s: queued on stream %p", api, (void *)stream);
    release(stream);
    return ACL_SUCCESS;
}

aclError ctbc_stream_submit(const char *api, aclrtStream stream, ctbc_task_fn fn, const void *payload,
                            size_t payload_bytes)
{
    return ctbc_stream_submit_droppable(api, stream, fn, NULL, payload, payload_bytes);
}

aclError ctbc_stream_synchronize_until(const char *api, ctbc_stream *stream, const struct timespec *deadline,
                                       aclError timeout_status)
{
    pthread_mutex_lock(&stream->lock);
    uint64_t target = stream->submitted, aborts = stream->aborts;
    bool in_time = true;
    while (stream->completed < target && stream->aborts == aborts && in_time)
        in_time = wait_until(&stream->changed, &stream->lock, deadline);
    bool aborted = stream->aborts != aborts, done = stream->completed >= target;
    aclError failure = stream->failure;
    char message[sizeof stream->failure_message];
    if (!aborted && done) {
        memcpy(message, stream->failure_message, sizeof message);
        stream->failure = ACL_SUCCESS;
    }
    pthread_mutex_unlock(&stream->lock);
    if (aborted)
        return ctbc_fail(ACL_ERROR_RT_STREAM_ABORT, CTBC_EE_RUNTIME, api,
                         "stream %p was aborted while this call waited for it", (void *)stream);
    if (!done)
        return ctbc_fail(timeout_status, CTBC_EE_RUNTIME, api,
                         "the work queued on stream %p did not finish within the timeout", (void *)stream);
    if (failure != ACL_SUCCESS)
        return ctbc_fail(failure, CTBC_EE_RUNTIME, api, "work queued on stream %p failed: %s", (void *)stream,
                         message);
    return ACL_SUCCESS;
}

aclError ctbc_stream_synchronize(const char *api, ctbc_stream *stream)
{
    return ctbc_stream_synchronize_until(api, stream, NULL, ACL_SUCCESS);
}

/* Drops what `stream` holds, wakes its blocked task and waits until its
 * worker is idle. Synchronisers waiting meanwhile get
 * ACL_ERROR_RT_STREAM_ABORT; work submitted meanwhile is dropped. */
static void abort_stream(ctbc_stream *stream)
{
    pthread_mutex_lock(&stream->lock);
    __atomic_store_n(&stream->cancelling, 1, __ATOMIC_RELEASE);
    stream->aborts++;
    task *dropped = take_queue_locked(stream);
    pthread_mutex_unlock(&stream->lock);
    ctbc_events_wake_waiters();
    ctbc_callbacks_wake_waiters();
    drop_tasks(dropped);
    pthread_mutex_lock(&stream->lock);
    while (stream->busy)
        pthread_cond_wait(&stream->changed, &stream->lock);
    __atomic_store_n(&stream->cancelling, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&stream->lock);
}

/* ---- limits of the emulated device ------------------------------------------ */

/* CANN's documented stream limits (default streams included). */
static uint32_t max_streams(void)
{
    return ctbc_soc()->family == CTBC_SOC_TRAINING ? 2048u : 1984u;
}

/* ---- creating and destroying streams ---------------------------------------- */

static uint32_t clamp_priority(uint64_t priority)
{
    return priority > LEAST_PRIORITY ? LEAST_PRIORITY : (uint32_t)priority;
}

static aclError create_stream(const char *api, aclrtStream *out, uint32_t priority, uint32_t flags)
{
    if (!out)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "stream must not be NULL");
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context(api, &ctx));
    if (__atomic_load_n(&live_stream_count, __ATOMIC_RELAXED) >= max_streams())
        return ctbc_fail(ACL_ERROR_RT_NO_STREAM_RESOURCE, CTBC_EE_RUNTIME, api,
                         "the device has no stream left: %s allows %u streams, default streams included",
                         ctbc_soc()->name, max_streams());
    ctbc_stream *stream = ctbc_stream_new();
    if (!stream)
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, api, "cannot start a stream");
    pthread_mutex_lock(&stream->lock);
    stream->priority = priority;
    stream->flags = flags;
    pthread_mutex_unlock(&stream->lock);
    if (!ctbc_registry_add(&created_streams, stream, sizeof *stream)) {
        ctbc_stream_delete(stream);
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, api, "cannot start a stream");
    }
    *out = stream;
    CTBC_LOG(CTBC_LOG_INFO, "%s: stream %p, priority %u, flags 0x%x", api, (void *)stream, priority, flags);
    return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream *out)
{
    return create_stream("aclrtCreateStream", out, GREATEST_PRIORITY, 0);
}

aclError aclrtCreateStreamWithConfig(aclrtStream *out, uint32_t priority, uint32_t flag)
{
    /* CANN keeps the flags it knows; any other value makes a plain stream. */
    return create_stream("aclrtCreateStreamWithConfig", out, clamp_priority(priority), flag & KNOWN_STREAM_FLAGS);
}

aclError aclrtCreateStreamV2(aclrtStream *out, const aclrtStreamConfigHandle *handle)
{
    uint32_t priority = handle ? clamp_priority(handle->priority) : GREATEST_PRIORITY;
    uint32_t flags = handle ? (uint32_t)(handle->flag & KNOWN_STREAM_FLAGS) : 0;
    return create_stream("aclrtCreateStreamV2", out, priority, flags);
}

/* aclFinalize ends the process's use of the runtime: the graveyard's streams
 * are given back (a call still holding one keeps it until it returns). */
static void empty_graveyard(void)
{
    pthread_mutex_lock(&graveyard_lock);
    ctbc_stream *held[GRAVEYARD_SIZE];
    memcpy(held, graveyard, sizeof held);
    memset(graveyard, 0, sizeof graveyard);
    graveyard_next = 0;
    pthread_mutex_unlock(&graveyard_lock);
    for (size_t i = 0; i < GRAVEYARD_SIZE; i++)
        if (held[i])
            release(held[i]);
}

/* A stream's worker waits for the task it runs (a host function, or a
 * blocking callback run by a subscribed thread), so that task destroying the
 * stream would wait for itself for ever. */
static aclError check_not_own_task(const char *api, aclrtStream stream)
{
    if (stream && (worker_of == (ctbc_stream *)stream || ctbc_callbacks_running_for() == stream))
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, api,
                         "stream %p cannot be destroyed from its own task (a host function or callback running "
                         "on it): destroy it from another thread after the task returns",
                         stream);
    return ACL_SUCCESS;
}

static aclError destroy_refused(const char *api, aclrtStream stream)
{
    if (buried(stream))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "stream %p was already destroyed", stream);
    return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                     "stream %p is not live (never created, or already destroyed)", stream);
}

aclError aclrtDestroyStream(aclrtStream stream)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtDestroyStream"));
    CTBC_RETURN_IF_FAILED(check_not_own_task("aclrtDestroyStream", stream));
    if (!stream || !ctbc_registry_remove(&created_streams, stream))
        return destroy_refused("aclrtDestroyStream", stream);
    ctbc_stream_delete(stream);
    return ACL_SUCCESS;
}

aclError aclrtDestroyStreamForce(aclrtStream stream)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtDestroyStreamForce"));
    CTBC_RETURN_IF_FAILED(check_not_own_task("aclrtDestroyStreamForce", stream));
    if (!stream || !ctbc_registry_remove(&created_streams, stream))
        return destroy_refused("aclrtDestroyStreamForce", stream);
    /* Work not started is dropped; a task already running cannot be
     * interrupted on a CPU and is let finish. */
    abort_stream(stream);
    ctbc_stream_delete(stream);
    return ACL_SUCCESS;
}

/* ---- stream config handles -------------------------------------------------- */

/* Handles made by aclrtCreateStreamConfigHandle: only those are freed. The
 * struct is public, so the other calls take any caller-owned one. */
static ctbc_registry config_handles = CTBC_REGISTRY_INIT;

aclrtStreamConfigHandle *aclrtCreateStreamConfigHandle(void)
{
    aclrtStreamConfigHandle *handle = calloc(1, sizeof *handle);
    if (handle && !ctbc_registry_add(&config_handles, handle, sizeof *handle)) {
        free(handle);
        handle = NULL;
    }
    if (!handle)
        ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, "aclrtCreateStreamConfigHandle", "out of memory");
    return handle;
}

aclError aclrtDestroyStreamConfigHandle(aclrtStreamConfigHandle *handle)
{
    if (!handle || !ctbc_registry_remove(&config_handles, handle))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtDestroyStreamConfigHandle",
                         "handle %p was not made by aclrtCreateStreamConfigHandle, or is already destroyed",
                         (void *)handle);
    free(handle);
    return ACL_SUCCESS;
}

aclError aclrtSetStreamConfigOpt(aclrtStreamConfigHandle *handle, aclrtStreamConfigAttr attr, const void *attrValue,
                                 size_t valueSize)
{
    static const char API[] = "aclrtSetStreamConfigOpt";
    if (!handle || !attrValue)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API, "%s must not be NULL",
                         handle ? "attrValue" : "handle");
    size_t expected;
    switch (attr) {
    case ACL_RT_STREAM_WORK_ADDR_PTR: expected = sizeof(void *); break;
    case ACL_RT_STREAM_WORK_SIZE:
    case ACL_RT_STREAM_FLAG: expected = sizeof(size_t); break;
    case ACL_RT_STREAM_PRIORITY: expected = sizeof(uint32_t); break;
    default:
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API,
                         "attr %d is invalid: expected ACL_RT_STREAM_WORK_ADDR_PTR (0) to ACL_RT_STREAM_PRIORITY (3)",
                         (int)attr);
    }
    if (valueSize != expected)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API,
                         "valueSize %zu is invalid for attr %d: expected %zu", valueSize, (int)attr, expected);
    switch (attr) {
    case ACL_RT_STREAM_WORK_ADDR_PTR: memcpy(&handle->workptr, attrValue, expected); break;
    case ACL_RT_STREAM_WORK_SIZE: memcpy(&handle->workSize, attrValue, expected); break;
    case ACL_RT_STREAM_FLAG: memcpy(&handle->flag, attrValue, expected); break;
    default: {
        uint32_t priority;
        memcpy(&priority, attrValue, sizeof priority);
        if (priority > LEAST_PRIORITY)
            return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API,
                             "priority %u is invalid: expected [%d, %d]", priority, GREATEST_PRIORITY,
                             LEAST_PRIORITY);
        handle->priority = priority;
    }
    }
    return ACL_SUCCESS;
}

/* ---- synchronising and querying --------------------------------------------- */

/* The checked stream behind `handle` for calls that need the device: NULL is
 * the current context's default stream. */
static aclError stream_for(const char *api, aclrtStream handle, ctbc_stream **out)
{
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context(api, &ctx));
    CTBC_RETURN_IF_FAILED(ctbc_check_stream(api, handle));
    ctbc_stream *named = handle ? (ctbc_stream *)handle : ctbc_context_default_stream(ctx);
    *out = acquire(named);
    if (!*out)
        return not_live(api, named); /* destroyed by another thread since the check */
    return ACL_SUCCESS;
}

/* A stream reference that a scope gives back when it ends, however it ends. */
static void release_at_exit(ctbc_stream **stream)
{
    if (*stream)
        release(*stream);
}
#define SCOPED_STREAM __attribute__((cleanup(release_at_exit)))

static bool runs_without_host_sync(ctbc_stream *stream)
{
    pthread_mutex_lock(&stream->lock);
    bool yes = (stream->flags & NO_HOST_SYNC_FLAGS) != 0;
    pthread_mutex_unlock(&stream->lock);
    return yes;
}

/* CANN's timeouts: -1 waits for ever, a positive value is milliseconds. */
static aclError check_timeout_ms(const char *api, int32_t timeout)
{
    if (timeout < -1 || timeout == 0)
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, api,
                         "timeout %d is invalid: expected -1 (wait for ever) or a positive number of milliseconds",
                         (int)timeout);
    return ACL_SUCCESS;
}

static aclError synchronize_stream(const char *api, aclrtStream handle, int32_t timeout)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init(api));
    CTBC_RETURN_IF_FAILED(ctbc_check_stream(api, handle));
    ctbc_stream *resolved = ctbc_stream_resolve(handle);
    if (!resolved)
        return ACL_SUCCESS; /* no default stream: nothing was queued */
    ctbc_stream *stream SCOPED_STREAM = acquire(resolved);
    if (!stream)
        return not_live(api, resolved); /* destroyed by another thread since the check */
    if (runs_without_host_sync(stream))
        return ACL_SUCCESS;
    struct timespec deadline;
    if (timeout > 0)
        ctbc_deadline_after_ms(&deadline, timeout);
    return ctbc_stream_synchronize_until(api, stream, timeout > 0 ? &deadline : NULL,
                                         ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
}

aclError aclrtSynchronizeStream(aclrtStream stream)
{
    return synchronize_stream("aclrtSynchronizeStream", stream, -1);
}

aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)
{
    CTBC_RETURN_IF_FAILED(check_timeout_ms("aclrtSynchronizeStreamWithTimeout", timeout));
    return synchronize_stream("aclrtSynchronizeStreamWithTimeout", stream, timeout);
}

aclError convtbcSynchronizeCurrent(void)
{
    ctbc_context *ctx = ctbc_current_context();
    return ctx ? ctbc_stream_synchronize("convtbcSynchronizeCurrent", ctbc_context_default_stream(ctx))
               : ACL_SUCCESS;
}

static aclError synchronize_device(const char *api, int32_t timeout)
{
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context(api, &ctx));
    struct timespec deadline;
    if (timeout > 0)
        ctbc_deadline_after_ms(&deadline, timeout);
    aclError first_failure = ACL_SUCCESS;
    pthread_rwlock_rdlock(&streams_in_sync);
    size_t count;
    ctbc_registry_entry *streams = ctbc_registry_snapshot(&all_streams, &count);
    for (size_t i = 0; i < count; i++) {
        aclError status = ctbc_stream_synchronize_until(api, (ctbc_stream *)streams[i].handle,
                                                        timeout > 0 ? &deadline : NULL,
                                                        ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
        if (first_failure == ACL_SUCCESS)
            first_failure = status;
    }
    pthread_rwlock_unlock(&streams_in_sync);
    free(streams);
    return first_failure;
}

aclError aclrtSynchronizeDevice(void) { return synchronize_device("aclrtSynchronizeDevice", -1); }

aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout)
{
    CTBC_RETURN_IF_FAILED(check_timeout_ms("aclrtSynchronizeDeviceWithTimeout", timeout));
    return synchronize_device("aclrtSynchronizeDeviceWithTimeout", timeout);
}

aclError aclrtStreamQuery(aclrtStream handle, aclrtStreamStatus *status)
{
    static const char API[] = "aclrtStreamQuery";
    if (!status)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API, "status must not be NULL");
    ctbc_stream *stream SCOPED_STREAM = NULL;
    CTBC_RETURN_IF_FAILED(stream_for(API, handle, &stream));
    pthread_mutex_lock(&stream->lock);
    bool done = stream->completed == stream->submitted || (stream->flags & NO_HOST_SYNC_FLAGS);
    pthread_mutex_unlock(&stream->lock);
    *status = done ? ACL_STREAM_STATUS_COMPLETE : ACL_STREAM_STATUS_NOT_READY;
    return ACL_SUCCESS;
}

aclError aclrtStreamAbort(aclrtStream stream)
{
    static const char API[] = "aclrtStreamAbort";
    CTBC_RETURN_IF_FAILED(ctbc_require_init(API));
    if (!stream)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API,
                         "stream must not be NULL: the default stream cannot be aborted");
    CTBC_RETURN_IF_FAILED(ctbc_check_stream(API, stream));
    ctbc_stream *held SCOPED_STREAM = acquire(stream);
    if (!held)
        return not_live(API, stream);
    abort_stream(held);
    return ACL_SUCCESS;
}

/* ---- what a stream was made with -------------------------------------------- */

aclError aclrtStreamGetPriority(aclrtStream handle, uint32_t *priority)
{
    static const char API[] = "aclrtStreamGetPriority";
    if (!priority)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API, "priority must not be NULL");
    ctbc_stream *stream SCOPED_STREAM = NULL;
    CTBC_RETURN_IF_FAILED(stream_for(API, handle, &stream));
    pthread_mutex_lock(&stream->lock);
    *priority = stream->priority;
    pthread_mutex_unlock(&stream->lock);
    return ACL_SUCCESS;
}

aclError aclrtStreamGetFlags(aclrtStream handle, uint32_t *flags)
{
    static const char API[] = "aclrtStreamGetFlags";
    if (!flags)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API, "flags must not be NULL");
    ctbc_stream *stream SCOPED_STREAM = NULL;
    CTBC_RETURN_IF_FAILED(stream_for(API, handle, &stream));
    pthread_mutex_lock(&stream->lock);
    *flags = stream->flags;
    pthread_mutex_unlock(&stream->lock);
    return ACL_SUCCESS;
}

aclError aclrtStreamGetId(aclrtStream handle, int32_t *streamId)
{
    static const char API[] = "aclrtStreamGetId";
    if (!streamId)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API, "streamId must not be NULL");
    ctbc_stream *stream SCOPED_STREAM = NULL;
    CTBC_RETURN_IF_FAILED(stream_for(API, handle, &stream));
    *streamId = stream->id; /* fixed at creation */
    return ACL_SUCCESS;
}

aclError aclrtDeviceGetStreamPriorityRange(int32_t *leastPriority, int32_t *greatestPriority)
{
    /* CANN fills whichever of the two it is given. */
    if (leastPriority)
        *leastPriority = LEAST_PRIORITY;
    if (greatestPriority)
        *greatestPriority = GREATEST_PRIORITY;
    return ACL_SUCCESS;
}

aclError aclrtGetStreamAvailableNum(uint32_t *streamCount)
{
    static const char API[] = "aclrtGetStreamAvailableNum";
    if (!streamCount)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API, "streamCount must not be NULL");
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context(API, &ctx));
    uint32_t live = __atomic_load_n(&live_stream_count, __ATOMIC_RELAXED);
    *streamCount = live < max_streams() ? max_streams() - live : 0;
    return ACL_SUCCESS;
}

/* ---- stream attributes ------------------------------------------------------ */

static aclError set_failure_mode(const char *api, aclrtStream handle, uint64_t requested)
{
    ctbc_stream *stream SCOPED_STREAM = NULL;
    CTBC_RETURN_IF_FAILED(stream_for(api, handle, &stream));
    if (!handle)
        return ctbc_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, CTBC_EE_RUNTIME, api,
                         "the failure mode of the default stream cannot be set; pass a stream made by "
                         "aclrtCreateStream");
    uint64_t mode = requested & ACL_STOP_ON_FAILURE; /* CANN reads the lowest bit */
    pthread_mutex_lock(&stream->lock);
    bool backwards = stream->failure_mode == ACL_STOP_ON_FAILURE && mode == ACL_CONTINUE_ON_FAILURE;
    if (!backwards)
        stream->failure_mode = mode;
    pthread_mutex_unlock(&stream->lock);
    if (backwards)
        return ctbc_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, CTBC_EE_RUNTIME, api,
                         "stream %p is in ACL_STOP_ON_FAILURE mode, which cannot be changed back to "
                         "ACL_CONTINUE_ON_FAILURE",
                         (void *)stream);
    return ACL_SUCCESS;
}

aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode)
{
    return set_failure_mode("aclrtSetStreamFailureMode", stream, mode);
}

aclError aclrtSetStreamOverflowSwitch(aclrtStream handle, uint32_t flag)
{
    static const char API[] = "aclrtSetStreamOverflowSwitch";
    if (flag > 1)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API, "flag %u is invalid: expected 0 or 1", flag);
    ctbc_stream *stream SCOPED_STREAM = NULL;
    CTBC_RETURN_IF_FAILED(stream_for(API, handle, &stream));
    pthread_mutex_lock(&stream->lock);
    stream->overflow_switch = flag;
    pthread_mutex_unlock(&stream->lock);
    return ACL_SUCCESS;
}

aclError aclrtGetStreamOverflowSwitch(aclrtStream handle, uint32_t *flag)
{
    static const char API[] = "aclrtGetStreamOverflowSwitch";
    if (!flag)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API, "flag must not be NULL");
    ctbc_stream *stream SCOPED_STREAM = NULL;
    CTBC_RETURN_IF_FAILED(stream_for(API, handle, &stream));
    pthread_mutex_lock(&stream->lock);
    *flag = stream->overflow_switch;
    pthread_mutex_unlock(&stream->lock);
    return ACL_SUCCESS;
}

static aclError bad_attribute(const char *api, aclrtStreamAttr attr)
{
    return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, api,
                     "stmAttrType %d is invalid: expected ACL_STREAM_ATTR_FAILURE_MODE (1) to "
                     "ACL_STREAM_ATTR_PRIORITY (5)",
                     (int)attr);
}

aclError aclrtSetStreamAttribute(aclrtStream handle, aclrtStreamAttr stmAttrType, aclrtStreamAttrValue *value)
{
    static const char API[] = "aclrtSetStreamAttribute";
    if (!value)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API, "value must not be NULL");
    if (stmAttrType == ACL_STREAM_ATTR_FAILURE_MODE)
        return set_failure_mode(API, handle, value->failureMode);
    if (stmAttrType == ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK && value->overflowSwitch > 1)
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API,
                         "overflowSwitch %u is invalid: expected 0 or 1", value->overflowSwitch);
    ctbc_stream *stream SCOPED_STREAM = NULL;
    CTBC_RETURN_IF_FAILED(stream_for(API, handle, &stream));
    aclError status = ACL_SUCCESS;
    pthread_mutex_lock(&stream->lock);
    switch (stmAttrType) {
    case ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK: stream->overflow_switch = value->overflowSwitch; break;
    case ACL_STREAM_ATTR_USER_CUSTOM_TAG: stream->user_tag = value->userCustomTag; break;
    case ACL_STREAM_ATTR_CACHE_OP_INFO: stream->cache_op_info = value->cacheOpInfoSwitch; break;
    case ACL_STREAM_ATTR_PRIORITY: stream->priority = clamp_priority(value->streamPriority); break;
    default: status = ACL_ERROR_RT_PARAM_INVALID;
    }
    pthread_mutex_unlock(&stream->lock);
    return status == ACL_SUCCESS ? ACL_SUCCESS : bad_attribute(API, stmAttrType);
}

aclError aclrtGetStreamAttribute(aclrtStream handle, aclrtStreamAttr stmAttrType, aclrtStreamAttrValue *value)
{
    static const char API[] = "aclrtGetStreamAttribute";
    if (!value)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API, "value must not be NULL");
    ctbc_stream *stream SCOPED_STREAM = NULL;
    CTBC_RETURN_IF_FAILED(stream_for(API, handle, &stream));
    aclError status = ACL_SUCCESS;
    pthread_mutex_lock(&stream->lock);
    switch (stmAttrType) {
    case ACL_STREAM_ATTR_FAILURE_MODE: value->failureMode = stream->failure_mode; break;
    case ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK: value->overflowSwitch = stream->overflow_switch; break;
    case ACL_STREAM_ATTR_USER_CUSTOM_TAG: value->userCustomTag = stream->user_tag; break;
    case ACL_STREAM_ATTR_CACHE_OP_INFO: value->cacheOpInfoSwitch = stream->cache_op_info; break;
    case ACL_STREAM_ATTR_PRIORITY: value->streamPriority = stream->priority; break;
    default: status = ACL_ERROR_RT_PARAM_INVALID;
    }
    pthread_mutex_unlock(&stream->lock);
    return status == ACL_SUCCESS ? ACL_SUCCESS : bad_attribute(API, stmAttrType);
}

/* ---- aclFinalize ------------------------------------------------------------ */

static void delete_stream(const void *handle) { ctbc_stream_delete((ctbc_stream *)handle); }

void ctbc_streams_shutdown(void)
{
    ctbc_callbacks_shutdown();
    ctbc_registry_clear(&created_streams, delete_stream);
    empty_graveyard();
}

void ctbc_streams_after_fork(void)
{
    ctbc_registry_after_fork(&created_streams, false);
    ctbc_registry_after_fork(&all_streams, false);
    /* Config handles are the caller's plain structs, not the device's. */
    ctbc_registry_after_fork(&config_handles, true);
    pthread_rwlock_init(&streams_in_sync, NULL);
    __atomic_store_n(&live_stream_count, 0, __ATOMIC_RELAXED);
    worker_of = NULL;
    /* The graveyard's streams stay: they are plain memory, and no thread of
     * the child holds one. */
    pthread_mutex_init(&graveyard_lock, NULL);
}
