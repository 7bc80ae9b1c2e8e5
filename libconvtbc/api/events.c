/*
 * Events mark a point in a stream's queue. aclrtRecordEvent queues the
 * marking; aclrtStreamWaitEvent queues a wait for the latest recording at the
 * time of the call; aclrtSynchronizeEvent waits for it on the host.
 *
 * An event counts its recordings and the recordings reached; queued work
 * holds a reference, so destroying an event with work still queued is safe.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "acl/acl_rt.h"
#include "api/errors.h"
#include "api/registry.h"
#include "api/runtime.h"

typedef struct {
    uint64_t recorded; /* recordings queued */
    uint64_t reached;  /* recordings their streams have got to */
    int references;    /* the handle, plus each queued task */
} event;

static ctbc_registry live_events = CTBC_REGISTRY_INIT;
/* One lock and condition for all events: waits are rare and short. */
static pthread_mutex_t events_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t events_changed = PTHREAD_COND_INITIALIZER;

typedef struct {
    event *target;
    uint64_t generation;
} event_task;

static void release(event *e)
{
    bool last = --e->references == 0;
    if (last)
        free(e);
}

static aclError reach(void *payload)
{
    event_task *job = payload;
    pthread_mutex_lock(&events_lock);
    if (job->target->reached < job->generation)
        job->target->reached = job->generation;
    pthread_cond_broadcast(&events_changed);
    release(job->target);
    pthread_mutex_unlock(&events_lock);
    return ACL_SUCCESS;
}

static aclError wait_for(void *payload)
{
    event_task *job = payload;
    pthread_mutex_lock(&events_lock);
    while (job->target->reached < job->generation)
        pthread_cond_wait(&events_changed, &events_lock);
    release(job->target);
    pthread_mutex_unlock(&events_lock);
    return ACL_SUCCESS;
}

static aclError check_event(const char *api, aclrtEvent e)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init(api));
    if (!e || !ctbc_registry_contains(&live_events, e))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "event %p is not a live event", e);
    return ACL_SUCCESS;
}

aclError aclrtCreateEvent(aclrtEvent *out)
{
    if (!out)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtCreateEvent", "event must not be NULL");
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context("aclrtCreateEvent", &ctx));
    event *e = calloc(1, sizeof *e);
    if (!e || !ctbc_registry_add(&live_events, e, sizeof *e)) {
        free(e);
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, "aclrtCreateEvent", "out of memory");
    }
    e->references = 1;
    *out = e;
    return ACL_SUCCESS;
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

/* Queues `fn` for the event's latest recording (after counting a new one
 * when `record`). */
static aclError queue_event_task(const char *api, event *e, aclrtStream stream, bool record, ctbc_task_fn fn)
{
    pthread_mutex_lock(&events_lock);
    if (record)
        e->recorded++;
    event_task job = {e, e->recorded};
    e->references++;
    pthread_mutex_unlock(&events_lock);
    aclError status = ctbc_stream_submit(api, stream, fn, &job, sizeof job);
    if (status != ACL_SUCCESS) {
        pthread_mutex_lock(&events_lock);
        release(e);
        pthread_mutex_unlock(&events_lock);
    }
    return status;
}

aclError aclrtRecordEvent(aclrtEvent e, aclrtStream stream)
{
    CTBC_RETURN_IF_FAILED(check_event("aclrtRecordEvent", e));
    CTBC_RETURN_IF_FAILED(ctbc_check_stream("aclrtRecordEvent", stream));
    return queue_event_task("aclrtRecordEvent", e, stream, true, reach);
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent e)
{
    CTBC_RETURN_IF_FAILED(check_event("aclrtStreamWaitEvent", e));
    CTBC_RETURN_IF_FAILED(ctbc_check_stream("aclrtStreamWaitEvent", stream));
    return queue_event_task("aclrtStreamWaitEvent", e, stream, false, wait_for);
}

aclError aclrtSynchronizeEvent(aclrtEvent handle)
{
    CTBC_RETURN_IF_FAILED(check_event("aclrtSynchronizeEvent", handle));
    event *e = handle;
    pthread_mutex_lock(&events_lock);
    uint64_t target = e->recorded;
    while (e->reached < target)
        pthread_cond_wait(&events_changed, &events_lock);
    pthread_mutex_unlock(&events_lock);
    return ACL_SUCCESS;
}

static void release_handle(const void *handle)
{
    pthread_mutex_lock(&events_lock);
    release((event *)handle);
    pthread_mutex_unlock(&events_lock);
}

void ctbc_events_shutdown(void) { ctbc_registry_clear(&live_events, release_handle); }
