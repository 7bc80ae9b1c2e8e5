/*
 * Stream handles used wrongly: a stale handle after destruction (CANN:
 * ACL_ERROR_INVALID_PARAM, never another stream's), a stream destroyed from
 * its own host function or callback (an error, never a hang), and a stream
 * destroyed by one thread while another queries and synchronises it (each
 * use succeeds or gets ACL_ERROR_INVALID_PARAM; the sanitizer builds see no
 * use of freed memory). alarm() bounds the run: a hang fails it.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "test_common.h"

#define OK(x) EXPECT_EQ((x), 0, #x)

enum { ROUNDS = 600 };

static void stale_handle_is_not_reused(void)
{
    aclrtStream s = NULL, s2 = NULL;
    OK(aclrtCreateStream(&s));
    OK(aclrtDestroyStream(s));
    OK(aclrtCreateStream(&s2));
    EXPECT(s2 != s, "a new stream got the address of one just destroyed (%p)", s);
    /* The buggy second destruction must not reach s2. */
    EXPECT_EQ(aclrtDestroyStream(s), ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream(stale)");
    EXPECT(strstr(recent_msg(), "already destroyed") != NULL, "message should say 'already destroyed'");
    aclrtStreamStatus st;
    EXPECT_EQ(aclrtStreamQuery(s, &st), ACL_ERROR_INVALID_PARAM, "aclrtStreamQuery(stale)");
    OK(aclrtStreamQuery(s2, &st));
    OK(aclrtDestroyStream(s2));
}

typedef struct {
    aclrtStream stream;
    atomic_int status;
    atomic_int ran;
} self_destroy;

static void destroy_own_stream(void *arg)
{
    self_destroy *d = arg;
    atomic_store(&d->status, (int)aclrtDestroyStream(d->stream));
    (void)aclGetRecentErrMsg(); /* the message belongs to this thread */
    atomic_store(&d->ran, 1);
}

static atomic_int serving = 1;

static void *serve_reports(void *arg)
{
    (void)arg;
    while (atomic_load(&serving))
        (void)aclrtProcessReport(50);
    return NULL;
}

static void destroy_from_own_task(void)
{
    self_destroy d = {NULL, -1, 0};
    OK(aclrtCreateStream(&d.stream));
    OK(aclrtLaunchHostFunc(d.stream, destroy_own_stream, &d));
    OK(aclrtSynchronizeStream(d.stream));
    EXPECT_EQ(atomic_load(&d.ran), 1, "host function ran");
    EXPECT_EQ(atomic_load(&d.status), ACL_ERROR_RT_PARAM_INVALID, "aclrtDestroyStream from its host function");
    OK(aclrtDestroyStream(d.stream));

    self_destroy c = {NULL, -1, 0};
    OK(aclrtCreateStream(&c.stream));
    pthread_t server;
    aclrtContext ctx;
    OK(aclrtGetCurrentContext(&ctx));
    pthread_create(&server, NULL, serve_reports, NULL);
    uint64_t tid = (uint64_t)server;
    OK(aclrtSubscribeReport(tid, c.stream));
    OK(aclrtLaunchCallback(destroy_own_stream, &c, ACL_CALLBACK_BLOCK, c.stream));
    OK(aclrtSynchronizeStream(c.stream));
    EXPECT_EQ(atomic_load(&c.ran), 1, "callback ran");
    EXPECT_EQ(atomic_load(&c.status), ACL_ERROR_RT_PARAM_INVALID, "aclrtDestroyStream from its callback");
    OK(aclrtUnSubscribeReport(tid, c.stream));
    atomic_store(&serving, 0);
    pthread_join(server, NULL);
    OK(aclrtDestroyStream(c.stream));
}

static _Atomic(aclrtStream) published;
static atomic_int racing = 1;
static atomic_int unexpected;

static void *use_published(void *arg)
{
    (void)arg;
    if (aclrtSetDevice(0) != 0)
        atomic_fetch_add(&unexpected, 1);
    unsigned n = 0;
    while (atomic_load(&racing)) {
        aclrtStream s = atomic_load(&published);
        aclrtStreamStatus st;
        aclError a = (n++ & 1) ? aclrtStreamQuery(s, &st) : aclrtSynchronizeStream(s);
        if (a != ACL_SUCCESS && a != ACL_ERROR_INVALID_PARAM) {
            fprintf(stderr, "racing use returned %d: %s\n", (int)a, aclGetRecentErrMsg());
            atomic_fetch_add(&unexpected, 1);
        }
        (void)aclGetRecentErrMsg();
    }
    (void)aclrtResetDevice(0);
    return NULL;
}

static void destroy_racing_use(void)
{
    aclrtStream s = NULL;
    OK(aclrtCreateStream(&s));
    atomic_store(&published, s);
    pthread_t user;
    pthread_create(&user, NULL, use_published, NULL);
    for (int i = 0; i < ROUNDS; i++) {
        aclrtStream next = NULL;
        OK(aclrtCreateStream(&next));
        aclrtStream old = atomic_exchange(&published, next);
        OK(aclrtDestroyStream(old));
        nanosleep(&(struct timespec){0, 2000000L}, NULL);
    }
    atomic_store(&racing, 0);
    pthread_join(user, NULL);
    OK(aclrtDestroyStream(atomic_load(&published)));
    EXPECT_EQ(atomic_load(&unexpected), 0, "racing uses with a code other than 0 or ACL_ERROR_INVALID_PARAM");
}

int main(void)
{
    alarm(240);
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    stale_handle_is_not_reused();
    destroy_from_own_task();
    destroy_racing_use();
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
    return finish("stream_handles");
}
