/*
 * Streams: each has a worker thread that runs the stream's queued work in
 * submission order, so that work submitted with phase 2, aclrtMemcpyAsync or
 * aclrtMemsetAsync returns at once, as on the NPU, and a program that reads
 * results before synchronising sees stale data. CONVTBC_STREAM_DELAY_MS
 * (a test knob) makes every queued task wait that long before it runs.
 *
 * A failure inside queued work is kept by its stream and reported by the
 * next synchronisation of that stream (or of the device). A stream in
 * ACL_STOP_ON_FAILURE mode also drops the rest of its queue and refuses new
 * work with that failure.
 *
 * Work still queued can be dropped unrun (aclrtStreamAbort,
 * aclrtDestroyStreamForce, stop on failure); tasks that hold something say
 * how to release it, and tasks that block (event waits, blocking host
 * callbacks) give up once ctbc_task_cancelled() says so.
 */
#ifndef CONVTBC_API_STREAMS_H
#define CONVTBC_API_STREAMS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "acl/acl_rt.h"

typedef struct ctbc_stream ctbc_stream;

/* Queued work: returns ACL_SUCCESS, or a status after recording a message
 * with ctbc_fail (the stream hands both to the next synchroniser). */
typedef aclError (*ctbc_task_fn)(void *payload);
/* Releases what a payload holds when its task is dropped unrun. */
typedef void (*ctbc_task_drop_fn)(void *payload);

/* A new stream with its worker running; NULL when threads or memory ran out. */
ctbc_stream *ctbc_stream_new(void);
/* Runs what is queued, stops the worker and frees the stream. */
void ctbc_stream_delete(ctbc_stream *stream);

/* NULL (the default stream), a stream made by aclrtCreateStream* and not yet
 * destroyed, or a context's default stream named by its handle. */
bool ctbc_stream_is_live(aclrtStream stream);

/* ACL_SUCCESS when `stream` is NULL or a live stream, else
 * ACL_ERROR_INVALID_PARAM with a message for `api`. */
aclError ctbc_check_stream(const char *api, aclrtStream stream);

/* The stream a checked handle stands for: itself, or for NULL the current
 * context's default stream (NULL when the thread has no current context). */
ctbc_stream *ctbc_stream_resolve(aclrtStream stream);

/* Queues fn on `stream` with a copy of `payload`. The NULL stream is the
 * current context's default stream; on a thread with no current context
 * (no aclInit/aclrtSetDevice: only the op allows that) fn runs at once and
 * its status is returned. The stream must have passed ctbc_check_stream. */
aclError ctbc_stream_submit(const char *api, aclrtStream stream, ctbc_task_fn fn, const void *payload,
                            size_t payload_bytes);
/* The same, with `drop` (may be NULL) called on the payload's copy if the
 * task is dropped unrun. If queueing itself fails, drop is not called: the
 * caller still owns what the payload names. */
aclError ctbc_stream_submit_droppable(const char *api, aclrtStream stream, ctbc_task_fn fn, ctbc_task_drop_fn drop,
                                      const void *payload, size_t payload_bytes);

/* Waits until the work queued on `stream` so far is done; reports the first
 * failure of that work once. */
aclError ctbc_stream_synchronize(const char *api, ctbc_stream *stream);
/* The same, giving up at `deadline` (CLOCK_MONOTONIC; NULL: never) with
 * `timeout_status` and a message. */
aclError ctbc_stream_synchronize_until(const char *api, ctbc_stream *stream, const struct timespec *deadline,
                                       aclError timeout_status);

/* True inside a queued task whose stream is dropping its work (abort, forced
 * destruction): a task that blocks must then stop waiting. */
bool ctbc_task_cancelled(void);

/* Condition variables whose timed waits count CLOCK_MONOTONIC, and the
 * deadline `ms` milliseconds from now on that clock. */
void ctbc_cond_init_monotonic(pthread_cond_t *cond);
void ctbc_deadline_after_ms(struct timespec *deadline, int64_t ms);

/* aclFinalize: deletes every stream made by aclrtCreateStream* (running what
 * they hold, after the host-callback subscriptions are gone so that nothing
 * waits for a callback thread), then every event. */
void ctbc_streams_shutdown(void);
void ctbc_events_shutdown(void);

/* Kept by events.c and callbacks.c, called by streams.c. Wake their blocked
 * tasks so they notice a cancellation; forget a stream that is going. */
void ctbc_events_wake_waiters(void);
void ctbc_callbacks_wake_waiters(void);
void ctbc_callbacks_forget_stream(const ctbc_stream *stream);
void ctbc_callbacks_shutdown(void);
/* The stream whose callback the calling thread is running in
 * aclrtProcessReport, or NULL. */
const ctbc_stream *ctbc_callbacks_running_for(void);

/* In a fork()ed child, on its only thread (called by the runtime's fork
 * handler): the parent's streams, events, subscriptions and queued reports
 * are forgotten, never run or released, since the threads that would run
 * them are not in the child; the locks are made new. */
void ctbc_streams_after_fork(void);
void ctbc_events_after_fork(void);
void ctbc_callbacks_after_fork(void);

#endif /* CONVTBC_API_STREAMS_H */
