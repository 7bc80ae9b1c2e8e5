/*
 * Events mark a point in a stream's queue. aclrtRecordEvent queues the
 * marking; aclrtStreamWaitEvent queues a wait for the latest recording at the
 * time of the call; aclrtSynchronizeEvent waits for it on the host. When a
 * stream reaches a recording it stamps the time (CLOCK_MONOTONIC), which
 * aclrtEventElapsedTime and aclrtEventGetTimestamp read.
 *
 * An event counts its recordings and the recordings reached; queued work
 * holds a reference, so destroying an event with work still queued is safe.
 * A recording dropped unrun (stream aborted) counts as reached, so that
 * nothing waits for it for ever, but leaves no time stamp.
 *
 * aclrtResetEvent turns an event back into one never recorded: once the
 * reset has run, queries see no recording, and waits queued after the reset
 * (and before the next recording) wait for that next recording, as a wait on
 * a cleared flag does on the NPU.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "acl/acl_rt.h"
#include "api/errors.h"
#include "api/registry.h"
#include "api/runtime.h"
#include "api/soc_profile.h"

/* CANN's internal event flag for "a second ordering flag" accepted by its
 * checks (no ACL macro names it). */
enum { EVENT_DDSYNC = 0x04u };

typedef struct {
    uint32_t flags;          /* as given; aclrtCreateEvent's events have none */
    uint32_t id;
    bool ex;                 /* made by aclrtCreateEventExWithFlag */
    bool waitable;           /* streams may wait for it (and reset it) */
    bool timed;              /* its recordings are time-stamped */
    uint64_t recorded;       /* recordings queued */
    uint64_t reached;        /* recordings their streams have got to */
    uint64_t stamped;        /* the recording stamp_ns belongs to (0: none) */
    uint64_t stamp_ns;
    bool has_record;         /* recorded since creation or since the last reset ran */
    bool wait_for_next;      /* a reset was queued after the latest recording */
    uint64_t waits_queued, waits_done;
    int references;          /* the handle, plus each queued task */
} event;

static ctbc_registry live_events = CTBC_REGISTRY_INIT;
static uint32_t live_event_count, next_event_id; /* under events_lock */
/* One lock and condition for all events: waits are rare and short. */
static pthread_mutex_t events_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t events_changed;
static pthread_once_t events_once = PTHREAD_ONCE_INIT;

static void init_condition(void) { ctbc_cond_init_monotonic(&events_changed); }

typedef struct {
    event *target;
    uint64_t generation;
    int32_t timeout_s;  /* waits: 0 waits for ever */
} event_task;

static void release(event *e)
{
    bool last = --e->references == 0;
    if (last) {
        live_event_count--;
        free(e);
    }
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* ---- the queued tasks ------------------------------------------------------- */

static void reach_locked(event *e, uint64_t generation, bool stamp)
{
    if (e->reached < generation)
        e->reached = generation;
    if (stamp && e->timed && generation >= e->stamped) {
        e->stamped = generation;
        e->stamp_ns = now_ns();
    }
    pthread_cond_broadcast(&events_changed);
}

static aclError reach(void *payload)
{
    event_task *job = payload;
    pthread_mutex_lock(&events_lock);
    reach_locked(job->target, job->generation, true);
    release(job->target);
    pthread_mutex_unlock(&events_lock);
    return ACL_SUCCESS;
}

static void drop_reach(void *payload)
{
    event_task *job = payload;
    pthread_mutex_lock(&events_lock);
    reach_locked(job->target, job->generation, false);
    release(job->target);
    pthread_mutex_unlock(&events_lock);
}

static aclError wait_for(void *payload)
{
    event_task *job = payload;
    struct timespec deadline;
    if (job->timeout_s > 0)
        ctbc_deadline_after_ms(&deadline, (int64_t)job->timeout_s * 1000);
    bool in_time = true;
    pthread_mutex_lock(&events_lock);
    while (job->target->reached < job->generation && in_time && !ctbc_task_cancelled()) {
        if (job->timeout_s > 0)
            in_time = pthread_cond_timedwait(&events_changed, &events_lock, &deadline) == 0 ||
                      job->target->reached >= job->generation;
        else
            pthread_cond_wait(&events_changed, &events_lock);
    }
    job->target->waits_done++;
    event *e = job->target;
    void *handle = e;
    release(e);
    pthread_mutex_unlock(&events_lock);
    if (!in_time)
        return ctbc_fail(ACL_ERROR_RT_TASK_TIMEOUT, CTBC_EE_RUNTIME, "aclrtStreamWaitEventWithTimeout",
                         "the stream waited %d s for event %p and gave up", (int)job->timeout_s, handle);
    return ACL_SUCCESS;
}

static void drop_wait(void *payload)
{
    event_task *job = payload;
    pthread_mutex_lock(&events_lock);
    job->target->waits_done++;
    pthread_cond_broadcast(&events_changed);
    release(job->target);
    pthread_mutex_unlock(&events_lock);
}

static aclError reset(void *payload)
{
    event_task *job = payload;
    pthread_mutex_lock(&events_lock);
    if (job->target->recorded == job->generation) /* no recording queued since the reset */
        job->target->has_record = false;
    release(job->target);
    pthread_mutex_unlock(&events_lock);
    return ACL_SUCCESS;
}

static void drop_reset(void *payload)
{
    event_task *job = payload;
    pthread_mutex_lock(&events_lock);
    release(job->target);
    pthread_mutex_unlock(&events_lock);
}

void ctbc_events_wake_waiters(void)
{
    pthread_once(&events_once, init_condition);
    pthread_mutex_lock(&events_lock);
    pthread_cond_broadcast(&events_changed);
    pthread_mutex_unlock(&events_lock);
}

/* ---- checks ----------------------------------------------------------------- */

static aclError check_event(const char *api, aclrtEvent e)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init(api));
    if (!e || !ctbc_registry_contains(&live_events, e))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "event %p is not a live event", e);
    return ACL_SUCCESS;
}

static aclError check_out(const char *api, const void *out, const char *name)
{
    if (!out)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "%s must not be NULL", name);
    return ACL_SUCCESS;
}

/* The flag fixed at creation (read without the lock: never written again). */
static aclError refuse_flag(const char *api, const event *e, uint32_t flag, aclError status, const char *why)
{
    if ((e->flags & flag) != 0)
        return ctbc_fail(status, CTBC_EE_RUNTIME, api, "event %p: %s", (const void *)e, why);
    return ACL_SUCCESS;
}

static aclError refuse_ex(const char *api, const event *e)
{
    if (e->ex)
        return ctbc_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, CTBC_EE_RUNTIME, api,
                         "event %p was made by aclrtCreateEventExWithFlag, which this call does not take",
                         (const void *)e);
    return ACL_SUCCESS;
}

static aclError refuse_device_only(const char *api, const event *e)
{
    return refuse_flag(api, e, ACL_EVENT_DEVICE_USE_ONLY, ACL_ERROR_RT_PARAM_INVALID,
                       "an ACL_EVENT_DEVICE_USE_ONLY event can be used on the device only");
}

static aclError refuse_external(const char *api, const event *e)
{
    return refuse_flag(api, e, ACL_EVENT_EXTERNAL, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                       "an ACL_EVENT_EXTERNAL event serves graph capture, which convtbc does not emulate");
}

static aclError require_waitable(const char *api, const event *e)
{
    if (!e->waitable)
        return ctbc_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, CTBC_EE_RUNTIME, api,
                         "event %p was made without ACL_EVENT_SYNC (flags 0x%x): streams cannot wait for it",
                         (const void *)e, e->flags);
    return ACL_SUCCESS;
}

/* ---- creating and destroying ------------------------------------------------ */

static void release_handle(const void *handle)
{
    pthread_mutex_lock(&events_lock);
    release((event *)handle);
    pthread_mutex_unlock(&events_lock);
}

static aclError create(const char *api, aclrtEvent *out, uint32_t flags, bool ex, bool waitable, bool timed)
{
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context(api, &ctx));
    pthread_once(&events_once, init_condition);
    event *e = calloc(1, sizeof *e);
    if (!e)
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, api, "out of memory");
    e->flags = flags;
    e->ex = ex;
    e->waitable = waitable;
    e->timed = timed;
    e->references = 1;
    pthread_mutex_lock(&events_lock);
    e->id = next_event_id++;
    live_event_count++;
    pthread_mutex_unlock(&events_lock);
    if (!ctbc_registry_add(&live_events, e, sizeof *e)) {
        release_handle(e);
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, api, "out of memory");
    }
    *out = e;
    return ACL_SUCCESS;
}

aclError aclrtCreateEvent(aclrtEvent *out)
{
    CTBC_RETURN_IF_FAILED(check_out("aclrtCreateEvent", out, "event"));
    /* CANN's plain events both order streams and keep time. */
    return create("aclrtCreateEvent", out, 0, false, true, true);
}

aclError aclrtCreateEventWithFlag(aclrtEvent *out, uint32_t flag)
{
    static const char API[] = "aclrtCreateEventWithFlag";
    CTBC_RETURN_IF_FAILED(check_out(API, out, "event"));
    const uint32_t any = ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS | EVENT_DDSYNC | ACL_EVENT_TIME_LINE |
                         ACL_EVENT_DEVICE_USE_ONLY | ACL_EVENT_EXTERNAL;
    const uint32_t alone = ACL_EVENT_DEVICE_USE_ONLY | ACL_EVENT_EXTERNAL;
    if ((flag & any) == 0 || (flag & ~any) != 0 || ((flag & alone) != 0 && (flag & ~alone) != 0) ||
        flag == alone)
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API,
                         "flag 0x%x is invalid: expected an OR of ACL_EVENT_SYNC, ACL_EVENT_CAPTURE_STREAM_PROGRESS "
                         "and ACL_EVENT_TIME_LINE, or ACL_EVENT_DEVICE_USE_ONLY or ACL_EVENT_EXTERNAL alone",
                         flag);
    bool waitable = (flag & (ACL_EVENT_SYNC | EVENT_DDSYNC | ACL_EVENT_EXTERNAL)) != 0;
    return create(API, out, flag, false, waitable, (flag & ACL_EVENT_TIME_LINE) != 0);
}

aclError aclrtCreateEventExWithFlag(aclrtEvent *out, uint32_t flag)
{
    static const char API[] = "aclrtCreateEventExWithFlag";
    CTBC_RETURN_IF_FAILED(check_out(API, out, "event"));
    const uint32_t any =
        ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS | EVENT_DDSYNC | ACL_EVENT_TIME_LINE | ACL_EVENT_IPC;
    if ((flag & any) == 0 || (flag & ~any) != 0 || ((flag & ACL_EVENT_IPC) != 0 && flag != ACL_EVENT_IPC))
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API,
                         "flag 0x%x is invalid: expected an OR of ACL_EVENT_SYNC, ACL_EVENT_CAPTURE_STREAM_PROGRESS "
                         "and ACL_EVENT_TIME_LINE, or ACL_EVENT_IPC alone",
                         flag);
    if (flag == ACL_EVENT_IPC)
        return ctbc_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, CTBC_EE_RUNTIME, API,
                         "ACL_EVENT_IPC events are shared between processes, which convtbc does not emulate");
    bool waitable = (flag & (ACL_EVENT_SYNC | EVENT_DDSYNC)) != 0;
    return create(API, out, flag, true, waitable, (flag & ACL_EVENT_TIME_LINE) != 0);
}

aclError aclrtDestroyEvent(aclrtEvent handle)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtDestroyEvent"));
    if (!handle || !ctbc_registry_remove(&live_events, handle))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtDestroyEvent",
                         "event %p is not live (never created, or already destroyed)", handle);
    pthread_mutex_lock(&events_lock);
    release(handle);
    pthread_mutex_unlock(&events_lock);
    return ACL_SUCCESS;
}

/* ---- recording, resetting, waiting ------------------------------------------ */

typedef enum { RECORD, WAIT, RESET } event_op;

/* Queues the task of `op` for `e` on `stream`; a recording counts a new
 * generation, a wait waits for the latest one (or, after a reset, the next). */
static aclError queue_event_task(const char *api, event *e, aclrtStream stream, event_op op, int32_t timeout_s)
{
    static const ctbc_task_fn run[] = {reach, wait_for, reset};
    static const ctbc_task_drop_fn drop[] = {drop_reach, drop_wait, drop_reset};
    pthread_mutex_lock(&events_lock);
    event_task job = {e, e->recorded, timeout_s};
    switch (op) {
    case RECORD:
        job.generation = ++e->recorded;
        e->has_record = true;
        e->wait_for_next = false;
        break;
    case WAIT:
        if (e->wait_for_next)
            job.generation = e->recorded + 1;
        e->waits_queued++;
        break;
    case RESET: e->wait_for_next = true; break;
    }
    e->references++;
    pthread_mutex_unlock(&events_lock);
    aclError status = ctbc_stream_submit_droppable(api, stream, run[op], drop[op], &job, sizeof job);
    if (status != ACL_SUCCESS) {
        pthread_mutex_lock(&events_lock);
        if (op == WAIT)
            e->waits_done++;
        release(e);
        pthread_mutex_unlock(&events_lock);
    }
    return status;
}

static aclError record(const char *api, aclrtEvent handle, aclrtStream stream)
{
    CTBC_RETURN_IF_FAILED(check_event(api, handle));
    CTBC_RETURN_IF_FAILED(refuse_device_only(api, handle));
    CTBC_RETURN_IF_FAILED(ctbc_check_stream(api, stream));
    return queue_event_task(api, handle, stream, RECORD, 0);
}

aclError aclrtRecordEvent(aclrtEvent e, aclrtStream stream) { return record("aclrtRecordEvent", e, stream); }

aclError aclrtRecordEventWithFlag(aclrtEvent e, aclrtStream stream, uint32_t flag)
{
    static const char API[] = "aclrtRecordEventWithFlag";
    if (!e)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API, "event must not be NULL");
    if (flag != ACL_EVENT_RECORD_DEFAULT && flag != ACL_EVENT_RECORD_EXTERNAL)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API,
                         "flag %u is invalid: expected ACL_EVENT_RECORD_DEFAULT or ACL_EVENT_RECORD_EXTERNAL", flag);
    if (flag == ACL_EVENT_RECORD_EXTERNAL) {
        CTBC_RETURN_IF_FAILED(check_event(API, e));
        return ctbc_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, CTBC_EE_RUNTIME, API,
                         "ACL_EVENT_RECORD_EXTERNAL records into a stream being captured as a graph, which convtbc "
                         "does not emulate");
    }
    return record(API, e, stream);
}

static aclError wait_event(const char *api, aclrtStream stream, aclrtEvent handle, int32_t timeout_s)
{
    CTBC_RETURN_IF_FAILED(check_event(api, handle));
    CTBC_RETURN_IF_FAILED(refuse_device_only(api, handle));
    CTBC_RETURN_IF_FAILED(require_waitable(api, handle));
    CTBC_RETURN_IF_FAILED(ctbc_check_stream(api, stream));
    return queue_event_task(api, handle, stream, WAIT, timeout_s);
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent e)
{
    return wait_event("aclrtStreamWaitEvent", stream, e, 0);
}

aclError aclrtStreamWaitEventWithTimeout(aclrtStream stream, aclrtEvent e, int32_t timeout)
{
    static const char API[] = "aclrtStreamWaitEventWithTimeout";
    if (timeout < 0)
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API,
                         "timeout %d is invalid: expected seconds in [0, INT_MAX], 0 waiting for ever", (int)timeout);
    return wait_event(API, stream, e, timeout);
}

aclError aclrtStreamWaitEventWithFlag(aclrtStream stream, aclrtEvent e, uint32_t timeout, uint32_t flag)
{
    static const char API[] = "aclrtStreamWaitEventWithFlag";
    if (!e)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API, "event must not be NULL");
    if (flag != ACL_EVENT_WAIT_DEFAULT && flag != ACL_EVENT_WAIT_EXTERNAL)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API,
                         "flag %u is invalid: expected ACL_EVENT_WAIT_DEFAULT or ACL_EVENT_WAIT_EXTERNAL", flag);
    if (flag == ACL_EVENT_WAIT_EXTERNAL) {
        if (timeout != 0)
            return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API,
                             "timeout %u is invalid: ACL_EVENT_WAIT_EXTERNAL takes only 0", timeout);
        CTBC_RETURN_IF_FAILED(check_event(API, e));
        return ctbc_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, CTBC_EE_RUNTIME, API,
                         "ACL_EVENT_WAIT_EXTERNAL waits inside a stream being captured as a graph, which convtbc "
                         "does not emulate");
    }
    /* Seconds; beyond INT32_MAX s (68 years) is as good as for ever. */
    return wait_event(API, stream, e, timeout > INT32_MAX ? 0 : (int32_t)timeout);
}

aclError aclrtResetEvent(aclrtEvent handle, aclrtStream stream)
{
    static const char API[] = "aclrtResetEvent";
    CTBC_RETURN_IF_FAILED(check_event(API, handle));
    CTBC_RETURN_IF_FAILED(refuse_ex(API, handle));
    CTBC_RETURN_IF_FAILED(refuse_device_only(API, handle));
    CTBC_RETURN_IF_FAILED(require_waitable(API, handle));
    CTBC_RETURN_IF_FAILED(ctbc_check_stream(API, stream));
    return queue_event_task(API, handle, stream, RESET, 0);
}

/* ---- the host side ---------------------------------------------------------- */

static aclError synchronize(const char *api, aclrtEvent handle, int32_t timeout)
{
    CTBC_RETURN_IF_FAILED(check_event(api, handle));
    CTBC_RETURN_IF_FAILED(refuse_external(api, handle));
    event *e = handle;
    struct timespec deadline;
    if (timeout > 0)
        ctbc_deadline_after_ms(&deadline, timeout);
    bool in_time = true;
    pthread_mutex_lock(&events_lock);
    uint64_t target = e->has_record ? e->recorded : 0; /* never recorded: nothing to wait for */
    while (e->reached < target && in_time) {
        if (timeout > 0)
            in_time = pthread_cond_timedwait(&events_changed, &events_lock, &deadline) == 0 || e->reached >= target;
        else
            pthread_cond_wait(&events_changed, &events_lock);
    }
    pthread_mutex_unlock(&events_lock);
    if (!in_time)
        return ctbc_fail(ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, CTBC_EE_RUNTIME, api,
                         "event %p was not reached within %d ms", handle, (int)timeout);
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeEvent(aclrtEvent handle) { return synchronize("aclrtSynchronizeEvent", handle, -1); }

aclError aclrtSynchronizeEventWithTimeout(aclrtEvent handle, int32_t timeout)
{
    static const char API[] = "aclrtSynchronizeEventWithTimeout";
    if (timeout < -1 || timeout == 0)
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API,
                         "timeout %d is invalid: expected -1 (wait for ever) or a positive number of milliseconds",
                         (int)timeout);
    return synchronize(API, handle, timeout);
}

aclError aclrtQueryEvent(aclrtEvent handle, aclrtEventStatus *status)
{
    static const char API[] = "aclrtQueryEvent";
    CTBC_RETURN_IF_FAILED(check_out(API, handle, "event"));
    CTBC_RETURN_IF_FAILED(check_out(API, status, "status"));
    CTBC_RETURN_IF_FAILED(check_event(API, handle));
    CTBC_RETURN_IF_FAILED(refuse_ex(API, handle));
    CTBC_RETURN_IF_FAILED(refuse_external(API, handle));
    event *e = handle;
    pthread_mutex_lock(&events_lock);
    bool pending = e->has_record && e->reached < e->recorded;
    pthread_mutex_unlock(&events_lock);
    *status = pending ? ACL_EVENT_STATUS_NOT_READY : ACL_EVENT_STATUS_COMPLETE;
    return ACL_SUCCESS;
}

aclError aclrtQueryEventStatus(aclrtEvent handle, aclrtEventRecordedStatus *status)
{
    static const char API[] = "aclrtQueryEventStatus";
    CTBC_RETURN_IF_FAILED(check_out(API, handle, "event"));
    CTBC_RETURN_IF_FAILED(check_out(API, status, "status"));
    CTBC_RETURN_IF_FAILED(check_event(API, handle));
    CTBC_RETURN_IF_FAILED(refuse_external(API, handle));
    event *e = handle;
    pthread_mutex_lock(&events_lock);
    /* Before any recording CANN answers COMPLETE for the Ex events only. */
    bool complete = e->has_record ? e->reached >= e->recorded : e->ex;
    pthread_mutex_unlock(&events_lock);
    *status = complete ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    return ACL_SUCCESS;
}

aclError aclrtQueryEventWaitStatus(aclrtEvent handle, aclrtEventWaitStatus *status)
{
    static const char API[] = "aclrtQueryEventWaitStatus";
    CTBC_RETURN_IF_FAILED(check_out(API, handle, "event"));
    CTBC_RETURN_IF_FAILED(check_out(API, status, "status"));
    CTBC_RETURN_IF_FAILED(check_event(API, handle));
    CTBC_RETURN_IF_FAILED(refuse_ex(API, handle));
    CTBC_RETURN_IF_FAILED(refuse_external(API, handle));
    event *e = handle;
    pthread_mutex_lock(&events_lock);
    bool done = e->waits_done == e->waits_queued;
    pthread_mutex_unlock(&events_lock);
    *status = done ? ACL_EVENT_WAIT_STATUS_COMPLETE : ACL_EVENT_WAIT_STATUS_NOT_READY;
    return ACL_SUCCESS;
}

static aclError require_record(const char *api, const event *e)
{
    if (!e->has_record)
        return ctbc_fail(ACL_ERROR_RT_INTERNAL_ERROR, CTBC_EE_RUNTIME, api,
                         "event %p has not been recorded (call aclrtRecordEvent first)", (const void *)e);
    return ACL_SUCCESS;
}

/* The time stamp of the latest recording of `e` (recorded), with CANN's code
 * when there is none: not reached yet, or not keeping time. */
static aclError stamp_of(const char *api, const event *e, uint64_t *ns)
{
    if (!e->timed)
        return ctbc_fail(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, CTBC_EE_RUNTIME, api,
                         "event %p keeps no time: it was made without ACL_EVENT_TIME_LINE (flags 0x%x)",
                         (const void *)e, e->flags);
    if (e->stamped != e->recorded)
        return ctbc_fail(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, CTBC_EE_RUNTIME, api,
                         "the latest recording of event %p has not completed (synchronise its stream first)",
                         (const void *)e);
    *ns = e->stamp_ns;
    return ACL_SUCCESS;
}

aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent)
{
    static const char API[] = "aclrtEventElapsedTime";
    CTBC_RETURN_IF_FAILED(check_out(API, ms, "ms"));
    CTBC_RETURN_IF_FAILED(check_out(API, startEvent, "startEvent"));
    CTBC_RETURN_IF_FAILED(check_out(API, endEvent, "endEvent"));
    CTBC_RETURN_IF_FAILED(check_event(API, startEvent));
    CTBC_RETURN_IF_FAILED(check_event(API, endEvent));
    CTBC_RETURN_IF_FAILED(refuse_external(API, startEvent));
    CTBC_RETURN_IF_FAILED(refuse_external(API, endEvent));
    uint64_t start = 0, end = 0;
    pthread_mutex_lock(&events_lock);
    /* CANN's order: both recorded, then both stamped. */
    aclError status = require_record(API, endEvent);
    if (status == ACL_SUCCESS)
        status = require_record(API, startEvent);
    if (status == ACL_SUCCESS)
        status = stamp_of(API, endEvent, &end);
    if (status == ACL_SUCCESS)
        status = stamp_of(API, startEvent, &start);
    pthread_mutex_unlock(&events_lock);
    if (status == ACL_SUCCESS)
        *ms = (float)(((double)end - (double)start) / 1e6);
    return status;
}

aclError aclrtEventGetTimestamp(aclrtEvent handle, uint64_t *timestamp)
{
    static const char API[] = "aclrtEventGetTimestamp";
    CTBC_RETURN_IF_FAILED(check_out(API, timestamp, "timestamp"));
    CTBC_RETURN_IF_FAILED(check_out(API, handle, "event"));
    CTBC_RETURN_IF_FAILED(check_event(API, handle));
    CTBC_RETURN_IF_FAILED(refuse_external(API, handle));
    uint64_t ns = 0;
    pthread_mutex_lock(&events_lock);
    aclError status = require_record(API, handle);
    if (status == ACL_SUCCESS)
        status = stamp_of(API, handle, &ns);
    pthread_mutex_unlock(&events_lock);
    if (status == ACL_SUCCESS)
        *timestamp = ns / 1000; /* CANN: microseconds since the system started */
    return status;
}

aclError aclrtGetEventId(aclrtEvent handle, uint32_t *eventId)
{
    static const char API[] = "aclrtGetEventId";
    CTBC_RETURN_IF_FAILED(check_out(API, handle, "event"));
    CTBC_RETURN_IF_FAILED(check_out(API, eventId, "eventId"));
    CTBC_RETURN_IF_FAILED(check_event(API, handle));
    pthread_mutex_lock(&events_lock);
    *eventId = ((const event *)handle)->id;
    pthread_mutex_unlock(&events_lock);
    return ACL_SUCCESS;
}

/* CANN's documented per-device event limits. */
static uint32_t max_events(void)
{
    return ctbc_soc()->family == CTBC_SOC_TRAINING ? 65535u : 65536u;
}

aclError aclrtGetEventAvailNum(uint32_t *eventCount)
{
    static const char API[] = "aclrtGetEventAvailNum";
    CTBC_RETURN_IF_FAILED(check_out(API, eventCount, "eventCount"));
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context(API, &ctx));
    pthread_mutex_lock(&events_lock);
    uint32_t live = live_event_count;
    pthread_mutex_unlock(&events_lock);
    *eventCount = live < max_events() ? max_events() - live : 0;
    return ACL_SUCCESS;
}

void ctbc_events_shutdown(void) { ctbc_registry_clear(&live_events, release_handle); }

void ctbc_events_after_fork(void)
{
    ctbc_registry_after_fork(&live_events, false);
    live_event_count = 0;
    pthread_mutex_init(&events_lock, NULL);
    /* Waiters of the parent's may be counted in it: made new as well. */
    init_condition();
}
