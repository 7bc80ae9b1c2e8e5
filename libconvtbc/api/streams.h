/*
 * Streams: each has a worker thread that runs the stream's queued work in
 * submission order, so that work submitted with phase 2, aclrtMemcpyAsync or
 * aclrtMemsetAsync returns at once, as on the NPU, and a program that reads
 * results before synchronising sees stale data. CONVTBC_STREAM_DELAY_MS
 * (a test knob) makes every queued task wait that long before it runs.
 *
 * A failure inside queued work is kept by its stream and reported by the
 * next synchronisation of that stream (or of the device).
 */
#ifndef CONVTBC_API_STREAMS_H
#define CONVTBC_API_STREAMS_H

#include <stdbool.h>
#include <stddef.h>

#include "acl/acl_rt.h"

typedef struct ctbc_stream ctbc_stream;

/* Queued work: returns ACL_SUCCESS, or a status after recording a message
 * with ctbc_fail (the stream hands both to the next synchroniser). */
typedef aclError (*ctbc_task_fn)(void *payload);

/* A new stream with its worker running; NULL when threads or memory ran out. */
ctbc_stream *ctbc_stream_new(void);
/* Runs what is queued, stops the worker and frees the stream. */
void ctbc_stream_delete(ctbc_stream *stream);

/* NULL (the default stream) or a stream made by aclrtCreateStream and not
 * yet destroyed. */
bool ctbc_stream_is_live(aclrtStream stream);

/* ACL_SUCCESS when `stream` is NULL or a live stream, else
 * ACL_ERROR_INVALID_PARAM with a message for `api`. */
aclError ctbc_check_stream(const char *api, aclrtStream stream);

/* Queues fn on `stream` with a copy of `payload`. The NULL stream is the
 * current context's default stream; on a thread with no current context
 * (no aclInit/aclrtSetDevice: only the op allows that) fn runs at once and
 * its status is returned. The stream must have passed ctbc_check_stream. */
aclError ctbc_stream_submit(const char *api, aclrtStream stream, ctbc_task_fn fn, const void *payload,
                            size_t payload_bytes);

/* Waits until the work queued on `stream` so far is done; reports the first
 * failure of that work once. */
aclError ctbc_stream_synchronize(const char *api, ctbc_stream *stream);

/* aclFinalize: deletes every stream made by aclrtCreateStream (running what
 * they hold), then every event. */
void ctbc_streams_shutdown(void);
void ctbc_events_shutdown(void);

#endif /* CONVTBC_API_STREAMS_H */
