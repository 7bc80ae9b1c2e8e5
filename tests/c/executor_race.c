/*
 * One executor, two threads at once (issue 11, defect 6). CANN documents
 * that an executor which is not repeatable is consumed by its phase 2; when
 * two threads race for one, exactly one may take it and the other must get
 * the consumed-executor error (161002), never a second run nor a read of the
 * executor the winner already freed. Each trial releases the two threads
 * from a barrier:
 *  - run / run on a non-repeatable executor: one 0, one 161002;
 *  - run / aclDestroyAclOpExecutor: one of the two succeeds, the other
 *    gets 161002 (running or destroying what is gone);
 *  - destroy / destroy: one 0, one 161002;
 *  - run / destroy on a repeatable executor: the destroy always succeeds,
 *    the run either ran (0) or found it destroyed (161002);
 * and after every trial the stream is synchronised and, when a run won,
 * gradBias holds the sum of self. Tensors live in aclrtMalloc memory with
 * the checks on; the program also runs under ASan+UBSan (freed executors
 * read are reported there) and ThreadSanitizer. Argument: trials per race
 * (default 2000). Prints "executor_race: OK" when every check passes.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "test_common.h"

enum { NT = 7 };
enum { CO = 3 };

typedef struct {
    void *dev[NT];
    aclTensor *t[NT];
    void *workspace;
    uint64_t workspace_bytes;
    aclrtStream stream;
} Problem;

/* T 4, B 2, C_in 3, K 2, C_out 3, pad 1: small enough that a trial costs
 * little, and self is all ones so that gradBias is B * T_out per channel. */
static void problem_init(Problem *p)
{
    const int64_t T = 4, B = 2, CI = 3, K = 2, PAD = 1, TO = T + 2 * PAD + 1 - K;
    const int64_t dims[NT][3] = {{TO, B, CO}, {T, B, CI}, {K, CI, CO}, {CO}, {T, B, CI}, {K, CI, CO}, {CO}};
    memset(p, 0, sizeof *p);
    EXPECT_EQ(aclrtCreateStream(&p->stream), ACL_SUCCESS, "aclrtCreateStream");
    for (int i = 0; i < NT; i++) {
        int rank = i == 3 || i == 6 ? 1 : 3;
        int64_t count = 1, strides[3];
        for (int d = 0; d < rank; d++)
            count *= dims[i][d];
        contiguous_strides(dims[i], rank, strides);
        size_t bytes = (size_t)count * sizeof(float);
        EXPECT_EQ(aclrtMalloc(&p->dev[i], bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS, "aclrtMalloc");
        float host[64];
        for (int64_t e = 0; e < count; e++)
            host[e] = i == 0 ? 1.0f : (float)(e % 3);
        EXPECT_EQ(aclrtMemcpy(p->dev[i], bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS, "upload");
        p->t[i] = make_tensor(dims[i], (uint64_t)rank, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, count, p->dev[i]);
    }
}

static void problem_free(Problem *p)
{
    for (int i = 0; i < NT; i++) {
        aclDestroyTensor(p->t[i]);
        aclrtFree(p->dev[i]);
    }
    if (p->workspace)
        aclrtFree(p->workspace);
    aclrtDestroyStream(p->stream);
}

static aclOpExecutor *phase1(Problem *p, int repeatable)
{
    uint64_t bytes = 0;
    aclOpExecutor *ex = NULL;
    aclTensor **t = p->t;
    aclnnStatus st = aclnnConvTbcBackwardGetWorkspaceSize(t[0], t[1], t[2], t[3], 1, 0, t[4], t[5], t[6], &bytes,
                                                          &ex);
    EXPECT(st == 0 && ex, "phase 1 gave %d: %s", st, recent_msg());
    if (bytes > p->workspace_bytes) {
        if (p->workspace)
            aclrtFree(p->workspace);
        EXPECT_EQ(aclrtMalloc(&p->workspace, (size_t)bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS, "workspace");
        p->workspace_bytes = bytes;
    }
    if (repeatable && ex)
        EXPECT_EQ(aclSetAclOpExecutorRepeatable(ex), 0, "aclSetAclOpExecutorRepeatable");
    return ex;
}

typedef enum { RUN, DESTROY } Action;

typedef struct {
    Problem *problem;
    aclOpExecutor *executor;
    pthread_barrier_t *start;
    Action action;
    aclnnStatus status;
    char message[1024];
} Racer;

static void *race(void *arg)
{
    Racer *r = (Racer *)arg;
    pthread_barrier_wait(r->start);
    if (r->action == RUN)
        r->status = aclnnConvTbcBackward(r->problem->workspace, r->problem->workspace_bytes, r->executor,
                                         r->problem->stream);
    else
        r->status = aclDestroyAclOpExecutor(r->executor);
    /* aclGetRecentErrMsg is per thread; test_common.h's recent_msg() shares
     * one buffer between threads */
    const char *m = r->status ? aclGetRecentErrMsg() : NULL;
    snprintf(r->message, sizeof r->message, "%.1000s", m ? m : "");
    return NULL;
}

/* gradBias after a run: B * T_out = 10 in every channel. */
static int grad_bias_right(Problem *p)
{
    float gb[CO];
    EXPECT_EQ(aclrtMemcpy(gb, sizeof gb, p->dev[6], sizeof gb, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS, "download");
    return gb[0] == 10.0f && gb[1] == 10.0f && gb[2] == 10.0f;
}

static void clear_grad_bias(Problem *p)
{
    EXPECT_EQ(aclrtMemset(p->dev[6], CO * sizeof(float), 0, CO * sizeof(float)), ACL_SUCCESS, "aclrtMemset");
}

/* The refusal of the loser: 161002 and the consumed-executor message. */
static void expect_loser(const Racer *r, const char *what, int trial)
{
    EXPECT(r->status == ACLNN_ERR_PARAM_INVALID, "%s trial %d: the loser (%s) gave %d: %s", what, trial,
           r->action == RUN ? "run" : "destroy", r->status, r->message);
    EXPECT(strstr(r->message, "not live") != NULL, "%s trial %d: the loser's message: '%s'", what, trial,
           r->message);
}

static void trials(Problem *p, Action a, Action b, int repeatable, int count, const char *what)
{
    int wins[2] = {0, 0};
    for (int trial = 0; trial < count && g_failures < 20; trial++) {
        clear_grad_bias(p);
        aclOpExecutor *ex = phase1(p, repeatable);
        if (!ex)
            return;
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, 2);
        Racer racers[2] = {{p, ex, &start, a, -1, ""}, {p, ex, &start, b, -1, ""}};
        pthread_t threads[2];
        for (int i = 0; i < 2; i++)
            pthread_create(&threads[i], NULL, race, &racers[i]);
        for (int i = 0; i < 2; i++)
            pthread_join(threads[i], NULL);
        pthread_barrier_destroy(&start);
        EXPECT_EQ(aclrtSynchronizeStream(p->stream), ACL_SUCCESS, "aclrtSynchronizeStream");

        int ok0 = racers[0].status == 0, ok1 = racers[1].status == 0;
        int ran = (a == RUN && ok0) || (b == RUN && ok1);
        if (!repeatable) {
            EXPECT(ok0 + ok1 == 1, "%s trial %d: %d calls succeeded (%d '%s', %d '%s'); exactly one may", what,
                   trial, ok0 + ok1, racers[0].status, racers[0].message, racers[1].status, racers[1].message);
            if (ok0 + ok1 == 1)
                expect_loser(&racers[ok0 ? 1 : 0], what, trial);
            wins[ok0 ? 0 : 1]++;
        } else {
            /* run (a) and destroy (b): the destroy wins always */
            EXPECT(ok1, "%s trial %d: the destroy gave %d: %s", what, trial, racers[1].status, racers[1].message);
            if (!ok0)
                expect_loser(&racers[0], what, trial);
            wins[ok0 ? 0 : 1]++;
        }
        if (ran)
            EXPECT(grad_bias_right(p), "%s trial %d: the run that won did not compute gradBias", what, trial);
    }
    printf("%s: first %d, second %d of %d\n", what, wins[0], wins[1], count);
}

int main(int argc, char **argv)
{
    int count = argc > 1 ? atoi(argv[1]) : 2000;
    EXPECT_EQ(aclInit(NULL), ACL_SUCCESS, "aclInit");
    EXPECT_EQ(aclrtSetDevice(0), ACL_SUCCESS, "aclrtSetDevice");
    Problem p;
    problem_init(&p);
    trials(&p, RUN, RUN, 0, count, "run/run");
    trials(&p, RUN, DESTROY, 0, count, "run/destroy");
    trials(&p, DESTROY, DESTROY, 0, count, "destroy/destroy");
    trials(&p, RUN, DESTROY, 1, count, "repeatable run/destroy");
    problem_free(&p);
    EXPECT_EQ(aclrtResetDevice(0), ACL_SUCCESS, "aclrtResetDevice");
    EXPECT_EQ(aclFinalize(), ACL_SUCCESS, "aclFinalize");
    return finish("executor_race");
}
