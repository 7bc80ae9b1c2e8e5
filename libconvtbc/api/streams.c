#include "api/streams.h"

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

typedef struct task {
    struct task *next;
    ctbc_task_fn run;
    max_align_t payload[];
} task;

struct ctbc_stream {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* work queued, work done, or stopping */
    task *head, *tail;
    uint64_t submitted, completed;
    bool stopping;
    aclError failure;       /* first failure since the last synchronisation */
    char failure_message[1024];
    pthread_t worker;
};

/* Streams made by aclrtCreateStream (the handles callers may pass), and all
 * streams including the contexts' default ones (what the device runs). */
static ctbc_registry created_streams = CTBC_REGISTRY_INIT;
static ctbc_registry all_streams = CTBC_REGISTRY_INIT;
/* aclrtSynchronizeDevice holds it for reading while it waits on streams, so
 * no stream is freed under it; deleting a stream takes it for writing. */
static pthread_rwlock_t streams_in_sync = PTHREAD_RWLOCK_INITIALIZER;

static long queued_delay_ms;
static pthread_once_t delay_once = PTHREAD_ONCE_INIT;

static void read_delay(void)
{
    const char *text = getenv("CONVTBC_STREAM_DELAY_MS");
    long value = text ? strtol(text, NULL, 10) : 0;
    queued_delay_ms = value > 0 ? value : 0;
}

static void *work(void *arg)
{
    ctbc_stream *stream = arg;
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
        pthread_mutex_unlock(&stream->lock);

        long delay = queued_delay_ms;
        if (delay > 0)
            nanosleep(&(struct timespec){delay / 1000, (delay % 1000) * 1000000L}, NULL);
        aclError status = next->run(next->payload);
        const char *message = status != ACL_SUCCESS ? aclGetRecentErrMsg() : NULL;
        free(next);

        pthread_mutex_lock(&stream->lock);
        if (status != ACL_SUCCESS && stream->failure == ACL_SUCCESS) {
            stream->failure = status;
            snprintf(stream->failure_message, sizeof stream->failure_message, "%s",
                     message ? message : "(no message)");
        }
        stream->completed++;
        pthread_cond_broadcast(&stream->changed);
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
    pthread_cond_init(&stream->changed, NULL);
    if (pthread_create(&stream->worker, NULL, work, stream) != 0) {
        pthread_cond_destroy(&stream->changed);
        pthread_mutex_destroy(&stream->lock);
        free(stream);
        return NULL;
    }
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
    pthread_cond_destroy(&stream->changed);
    pthread_mutex_destroy(&stream->lock);
    free(stream);
}

bool ctbc_stream_is_live(aclrtStream stream)
{
    return !stream || ctbc_registry_contains(&created_streams, stream);
}

aclError ctbc_check_stream(const char *api, aclrtStream stream)
{
    if (!ctbc_stream_is_live(stream))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "stream %p is not a live stream (NULL is the default stream)", stream);
    return ACL_SUCCESS;
}

aclError ctbc_stream_submit(const char *api, aclrtStream handle, ctbc_task_fn fn, const void *payload,
                            size_t payload_bytes)
{
    ctbc_stream *stream = handle;
    if (!stream) {
        ctbc_context *ctx = ctbc_current_context();
        if (!ctx)
            return fn((void *)payload); /* no device: nothing to queue on */
        stream = ctbc_context_default_stream(ctx);
    }
    task *job = malloc(sizeof *job + payload_bytes);
    if (!job)
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, api, "out of memory queueing work");
    job->next = NULL;
    job->run = fn;
    memcpy(job->payload, payload, payload_bytes);

    pthread_mutex_lock(&stream->lock);
    if (stream->tail)
        stream->tail->next = job;
    else
        stream->head = job;
    stream->tail = job;
    stream->submitted++;
    pthread_cond_broadcast(&stream->changed);
    pthread_mutex_unlock(&stream->lock);
    CTBC_LOG(CTBC_LOG_DEBUG, "%s: queued on stream %p", api, (void *)stream);
    return ACL_SUCCESS;
}

aclError ctbc_stream_synchronize(const char *api, ctbc_stream *stream)
{
    pthread_mutex_lock(&stream->lock);
    uint64_t target = stream->submitted;
    while (stream->completed < target)
        pthread_cond_wait(&stream->changed, &stream->lock);
    aclError failure = stream->failure;
    char message[sizeof stream->failure_message];
    memcpy(message, stream->failure_message, sizeof message);
    stream->failure = ACL_SUCCESS;
    pthread_mutex_unlock(&stream->lock);
    if (failure != ACL_SUCCESS)
        return ctbc_fail(failure, CTBC_EE_RUNTIME, api, "work queued on stream %p failed: %s", (void *)stream,
                         message);
    return ACL_SUCCESS;
}

/* ---- the public stream calls ------------------------------------------- */

aclError aclrtCreateStream(aclrtStream *out)
{
    if (!out)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtCreateStream", "stream must not be NULL");
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context("aclrtCreateStream", &ctx));
    ctbc_stream *stream = ctbc_stream_new();
    if (!stream || !ctbc_registry_add(&created_streams, stream, sizeof *stream)) {
        ctbc_stream_delete(stream);
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, "aclrtCreateStream", "cannot start a stream");
    }
    *out = stream;
    CTBC_LOG(CTBC_LOG_INFO, "aclrtCreateStream: stream %p", (void *)stream);
    return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtDestroyStream"));
    if (!stream || !ctbc_registry_remove(&created_streams, stream))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtDestroyStream",
                         "stream %p is not live (never created, or already destroyed)", stream);
    ctbc_stream_delete(stream);
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtSynchronizeStream"));
    CTBC_RETURN_IF_FAILED(ctbc_check_stream("aclrtSynchronizeStream", stream));
    if (!stream) {
        ctbc_context *ctx = ctbc_current_context();
        if (!ctx)
            return ACL_SUCCESS; /* no default stream: nothing was queued */
        stream = ctbc_context_default_stream(ctx);
    }
    return ctbc_stream_synchronize("aclrtSynchronizeStream", stream);
}

aclError convtbcSynchronizeCurrent(void)
{
    ctbc_context *ctx = ctbc_current_context();
    return ctx ? ctbc_stream_synchronize("convtbcSynchronizeCurrent", ctbc_context_default_stream(ctx))
               : ACL_SUCCESS;
}

aclError aclrtSynchronizeDevice(void)
{
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context("aclrtSynchronizeDevice", &ctx));
    aclError first_failure = ACL_SUCCESS;
    pthread_rwlock_rdlock(&streams_in_sync);
    size_t count;
    ctbc_registry_entry *streams = ctbc_registry_snapshot(&all_streams, &count);
    for (size_t i = 0; i < count; i++) {
        aclError status = ctbc_stream_synchronize("aclrtSynchronizeDevice", (ctbc_stream *)streams[i].handle);
        if (first_failure == ACL_SUCCESS)
            first_failure = status;
    }
    pthread_rwlock_unlock(&streams_in_sync);
    free(streams);
    return first_failure;
}

static void delete_stream(const void *handle) { ctbc_stream_delete((ctbc_stream *)handle); }

void ctbc_streams_shutdown(void) { ctbc_registry_clear(&created_streams, delete_stream); }
