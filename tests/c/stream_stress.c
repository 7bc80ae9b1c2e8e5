/*
 * Streams under load. 4 host threads, each with 4 streams of its own, queue
 * 200 ops each: 100 producer/consumer pairs on small random shapes. For pair
 * j of a thread, on its stream j%4 (the producer stream):
 *     upload self/input/weight/bias (aclrtMemcpyAsync), sentinel into the
 *     outputs (aclrtMemsetAsync), the op P, aclrtRecordEvent(event j%4),
 *     download P's outputs (aclrtMemcpyAsync)
 * and on its stream (j+1)%4 (the consumer stream):
 *     upload input/weight/bias, sentinel into the outputs,
 *     aclrtStreamWaitEvent(event j%4), copy P's gradInput into Q's self
 *     (aclrtMemcpyAsync device to device), the op Q, download Q's outputs.
 * The events are reused (each wait is for the recording just before it), so
 * Q sees P's gradInput only if the event orders the streams.
 *
 * Then every pair runs again one call at a time on one stream, synchronising
 * after each, with synchronous copies; every output must match the
 * concurrent run bit for bit, and a plain-loop float64 reference (exactly
 * for pairs with small-integer data, within 1e-5 of sum |terms| for pairs
 * with random data).
 *
 * Usage: stream_stress [--pairs N] [--no-events]
 *   --pairs N     pairs per thread (default 100: 200 ops)
 *   --no-events   skip the record/wait (a broken program: shows the
 *                 comparison notices missing ordering)
 * Prints "mismatch_sequential <n>" and "mismatch_reference <n>"; returns 0
 * only if every call succeeded and (unless --no-events) nothing mismatched.
 */
#include <pthread.h>

#include "test_common.h"

enum { THREADS = 4, STREAMS = 4, SENTINEL_BYTE = 0x7F };

/* Tensors of one op in CANN's order. */
enum { SELF, INPUT, WEIGHT, BIAS, GRAD_INPUT, GRAD_WEIGHT, GRAD_BIAS, NT };

typedef struct {
    int64_t T, B, Ci, K, Co, pad, To;
    int64_t dims[NT][3];
    int rank[NT];
    size_t bytes[NT];
    float *host[NT];    /* inputs (the producer's self too; the consumer's self comes from the producer) */
    float *conc[NT];    /* outputs of the concurrent run */
    float *seq[NT];     /* outputs of the one-by-one run */
    void *dev[NT];
    void *ws;
    aclTensor *tensor[NT];
} Op;

typedef struct {
    Op p, q;
    int integer_data;
} Pair;

static int g_calls_failed = 0;
static pthread_mutex_t g_print = PTHREAD_MUTEX_INITIALIZER;

static int ok(int status, const char *what)
{
    if (status != 0) {
        const char *m = aclGetRecentErrMsg();
        pthread_mutex_lock(&g_print);
        fprintf(stderr, "FAIL %s -> %d: %s\n", what, status, m ? m : "(no message)");
        g_calls_failed++;
        pthread_mutex_unlock(&g_print);
    }
    return status == 0;
}

#define CALL(x) ok((x), #x)

/* ---- the problems ---------------------------------------------------------- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static uint32_t next_u32(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}

static int64_t rand_in(int64_t lo, int64_t hi) { return lo + (int64_t)(next_u32() % (uint32_t)(hi - lo + 1)); }

static void op_shape(Op *op, int64_t T, int64_t B, int64_t Ci, int64_t K, int64_t Co, int64_t pad)
{
    op->T = T; op->B = B; op->Ci = Ci; op->K = K; op->Co = Co; op->pad = pad;
    op->To = T + 2 * pad + 1 - K;
    int64_t d[NT][3] = {{op->To, B, Co}, {T, B, Ci}, {K, Ci, Co}, {Co, 1, 1}, {T, B, Ci}, {K, Ci, Co}, {Co, 1, 1}};
    for (int i = 0; i < NT; i++) {
        op->rank[i] = (i == BIAS || i == GRAD_BIAS) ? 1 : 3;
        int64_t n = 1;
        for (int k = 0; k < 3; k++) {
            op->dims[i][k] = d[i][k];
            if (k < op->rank[i])
                n *= d[i][k];
        }
        op->bytes[i] = (size_t)n * sizeof(float);
        op->host[i] = (float *)calloc((size_t)n, sizeof(float));
        op->conc[i] = (float *)calloc((size_t)n, sizeof(float));
        op->seq[i] = (float *)calloc((size_t)n, sizeof(float));
    }
}

static void fill(float *a, size_t bytes, int integer_data)
{
    for (size_t i = 0; i < bytes / sizeof(float); i++)
        a[i] = integer_data ? (float)rand_in(-3, 3) : (float)((double)next_u32() / 2147483648.0 - 1.0);
}

static void make_pair(Pair *pr, int integer_data)
{
    pr->integer_data = integer_data;
    int64_t T = rand_in(1, 8), B = rand_in(1, 3), C = rand_in(1, 6);
    int64_t pad1 = rand_in(0, 2), Co1 = rand_in(1, 6);
    int64_t K1 = rand_in(1, T + 2 * pad1 < 4 ? T + 2 * pad1 : 4); /* T_out >= 1 */
    op_shape(&pr->p, T, B, C, K1, Co1, pad1);
    /* Q's self is P's gradInput [T, B, C]: T_out(Q) = T, C_out(Q) = C. */
    int64_t pad2 = rand_in(0, 2), K2 = rand_in(1, 4), Ci2 = rand_in(1, 6);
    int64_t T2 = T + K2 - 1 - 2 * pad2;
    if (T2 < 1) { /* keep Q's input non-empty (aclrtMalloc takes no size 0) */
        pad2 = 0;
        T2 = T + K2 - 1;
    }
    op_shape(&pr->q, T2, B, Ci2, K2, C, pad2);
    for (int i = SELF; i <= BIAS; i++) {
        if (i != SELF)
            fill(pr->q.host[i], pr->q.bytes[i], integer_data);
        fill(pr->p.host[i], pr->p.bytes[i], integer_data);
    }
}

/* ---- running one op -------------------------------------------------------- */

static void op_alloc(Op *op)
{
    for (int i = 0; i < NT; i++)
        CALL(aclrtMalloc(&op->dev[i], op->bytes[i], ACL_MEM_MALLOC_HUGE_FIRST));
    for (int i = 0; i < NT; i++) {
        int64_t st[3];
        contiguous_strides(op->dims[i], op->rank[i], st);
        op->tensor[i] = aclCreateTensor(op->dims[i], (uint64_t)op->rank[i], ACL_FLOAT, st, 0, ACL_FORMAT_ND,
                                        op->dims[i], (uint64_t)op->rank[i], op->dev[i]);
        if (!op->tensor[i])
            ok(-1, "aclCreateTensor");
    }
}

static void op_release(Op *op)
{
    for (int i = 0; i < NT; i++) {
        aclDestroyTensor(op->tensor[i]);
        CALL(aclrtFree(op->dev[i]));
        op->tensor[i] = NULL;
        op->dev[i] = NULL;
    }
    if (op->ws)
        CALL(aclrtFree(op->ws));
    op->ws = NULL;
}

/* Phase 1, a workspace, phase 2 on `stream`. */
static void op_submit(Op *op, aclrtStream stream)
{
    uint64_t ws_size = 0;
    aclOpExecutor *executor = NULL;
    if (!CALL(aclnnConvTbcBackwardGetWorkspaceSize(op->tensor[SELF], op->tensor[INPUT], op->tensor[WEIGHT],
                                                   op->tensor[BIAS], op->pad, 0, op->tensor[GRAD_INPUT],
                                                   op->tensor[GRAD_WEIGHT], op->tensor[GRAD_BIAS], &ws_size,
                                                   &executor)))
        return;
    if (ws_size > 0)
        CALL(aclrtMalloc(&op->ws, ws_size, ACL_MEM_MALLOC_HUGE_FIRST));
    CALL(aclnnConvTbcBackward(op->ws, ws_size, executor, stream));
}

/* Async: inputs up (from `first`), sentinel into the outputs. */
static void op_prepare_async(Op *op, int first, aclrtStream s)
{
    for (int i = first; i <= BIAS; i++)
        CALL(aclrtMemcpyAsync(op->dev[i], op->bytes[i], op->host[i], op->bytes[i], ACL_MEMCPY_HOST_TO_DEVICE, s));
    for (int i = GRAD_INPUT; i < NT; i++)
        CALL(aclrtMemsetAsync(op->dev[i], op->bytes[i], SENTINEL_BYTE, op->bytes[i], s));
}

static void op_download_async(Op *op, aclrtStream s)
{
    for (int i = GRAD_INPUT; i < NT; i++)
        CALL(aclrtMemcpyAsync(op->conc[i], op->bytes[i], op->dev[i], op->bytes[i], ACL_MEMCPY_DEVICE_TO_HOST, s));
}

/* ---- the concurrent run ----------------------------------------------------- */

typedef struct {
    Pair *pairs;
    int count;
    int use_events;
} Job;

static void *thread_main(void *arg)
{
    Job *job = (Job *)arg;
    aclrtStream streams[STREAMS];
    aclrtEvent events[STREAMS];
    CALL(aclrtSetDevice(0));
    for (int s = 0; s < STREAMS; s++) {
        CALL(aclrtCreateStream(&streams[s]));
        CALL(aclrtCreateEvent(&events[s]));
    }
    for (int j = 0; j < job->count; j++) {
        Pair *pr = &job->pairs[j];
        aclrtStream sp = streams[j % STREAMS], sq = streams[(j + 1) % STREAMS];
        aclrtEvent ev = events[j % STREAMS];
        op_alloc(&pr->p);
        op_alloc(&pr->q);

        op_prepare_async(&pr->p, SELF, sp);
        op_submit(&pr->p, sp);
        if (job->use_events)
            CALL(aclrtRecordEvent(ev, sp));
        op_download_async(&pr->p, sp);

        op_prepare_async(&pr->q, INPUT, sq);
        if (job->use_events)
            CALL(aclrtStreamWaitEvent(sq, ev));
        CALL(aclrtMemcpyAsync(pr->q.dev[SELF], pr->q.bytes[SELF], pr->p.dev[GRAD_INPUT], pr->p.bytes[GRAD_INPUT],
                              ACL_MEMCPY_DEVICE_TO_DEVICE, sq));
        op_submit(&pr->q, sq);
        op_download_async(&pr->q, sq);
    }
    for (int s = 0; s < STREAMS; s++)
        CALL(aclrtSynchronizeStream(streams[s]));
    for (int j = 0; j < job->count; j++) {
        op_release(&job->pairs[j].p);
        op_release(&job->pairs[j].q);
    }
    for (int s = 0; s < STREAMS; s++) {
        CALL(aclrtDestroyEvent(events[s]));
        CALL(aclrtDestroyStream(streams[s]));
    }
    CALL(aclrtResetDevice(0));
    return NULL;
}

/* ---- one by one --------------------------------------------------------------- */

static void run_sync(Op *op, aclrtStream s)
{
    op_submit(op, s);
    CALL(aclrtSynchronizeStream(s));
    for (int i = GRAD_INPUT; i < NT; i++)
        CALL(aclrtMemcpy(op->seq[i], op->bytes[i], op->dev[i], op->bytes[i], ACL_MEMCPY_DEVICE_TO_HOST));
}

static void sequential(Pair *pr, aclrtStream s)
{
    op_alloc(&pr->p);
    op_alloc(&pr->q);
    for (int i = SELF; i <= BIAS; i++)
        CALL(aclrtMemcpy(pr->p.dev[i], pr->p.bytes[i], pr->p.host[i], pr->p.bytes[i], ACL_MEMCPY_HOST_TO_DEVICE));
    run_sync(&pr->p, s);
    for (int i = INPUT; i <= BIAS; i++)
        CALL(aclrtMemcpy(pr->q.dev[i], pr->q.bytes[i], pr->q.host[i], pr->q.bytes[i], ACL_MEMCPY_HOST_TO_DEVICE));
    CALL(aclrtMemcpy(pr->q.dev[SELF], pr->q.bytes[SELF], pr->p.dev[GRAD_INPUT], pr->p.bytes[GRAD_INPUT],
                     ACL_MEMCPY_DEVICE_TO_DEVICE));
    run_sync(&pr->q, s);
    op_release(&pr->p);
    op_release(&pr->q);
}

/* ---- checks ----------------------------------------------------------------- */

static int same_bits(const Op *op)
{
    for (int i = GRAD_INPUT; i < NT; i++)
        if (memcmp(op->conc[i], op->seq[i], op->bytes[i]) != 0)
            return 0;
    return 1;
}

static double *to_double(const float *a, size_t bytes, int absolute)
{
    size_t n = bytes / sizeof(float);
    double *d = (double *)malloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++)
        d[i] = absolute ? fabs((double)a[i]) : (double)a[i];
    return d;
}

/* The one-by-one outputs of `op` against the plain loops, for inputs
 * `self` (Q: P's gradInput as computed) and the op's own input/weight. */
static int matches_reference(const Op *op, const float *self, int exact)
{
    double *in[3], *absin[3], *ref[3], *bound[3];
    const float *src[3] = {self, op->host[INPUT], op->host[WEIGHT]};
    for (int i = 0; i < 3; i++) {
        in[i] = to_double(src[i], op->bytes[i], 0);
        absin[i] = to_double(src[i], op->bytes[i], 1);
        ref[i] = (double *)malloc(op->bytes[GRAD_INPUT + i] / sizeof(float) * sizeof(double) + sizeof(double));
        bound[i] = (double *)malloc(op->bytes[GRAD_INPUT + i] / sizeof(float) * sizeof(double) + sizeof(double));
    }
    reference(in[0], in[1], in[2], op->T, op->B, op->Ci, op->K, op->Co, op->pad, ref[0], ref[1], ref[2]);
    reference(absin[0], absin[1], absin[2], op->T, op->B, op->Ci, op->K, op->Co, op->pad, bound[0], bound[1],
              bound[2]);
    int good = 1;
    for (int i = 0; i < 3; i++) {
        const float *got = op->seq[GRAD_INPUT + i];
        for (size_t k = 0; k < op->bytes[GRAD_INPUT + i] / sizeof(float); k++) {
            double err = fabs((double)got[k] - ref[i][k]);
            if (exact ? err != 0 : !(err <= 1e-5 * bound[i][k] + 1e-30))
                good = 0;
        }
        free(in[i]); free(absin[i]); free(ref[i]); free(bound[i]);
    }
    return good;
}

int main(int argc, char **argv)
{
    int pairs_per_thread = 100, use_events = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--pairs") == 0 && i + 1 < argc)
            pairs_per_thread = atoi(argv[++i]);
        else if (strcmp(argv[i], "--no-events") == 0)
            use_events = 0;
    }
    int total = THREADS * pairs_per_thread;
    Pair *pairs = (Pair *)calloc((size_t)total, sizeof(Pair));
    for (int j = 0; j < total; j++)
        make_pair(&pairs[j], j % 2 == 0);

    if (!CALL(aclInit(NULL)) || !CALL(aclrtSetDevice(0)))
        return 2;

    pthread_t threads[THREADS];
    Job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (Job){pairs + t * pairs_per_thread, pairs_per_thread, use_events};
        if (pthread_create(&threads[t], NULL, thread_main, &jobs[t]) != 0)
            return 2;
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    CALL(aclrtSynchronizeDevice());

    aclrtStream s;
    CALL(aclrtCreateStream(&s));
    for (int j = 0; j < total; j++)
        sequential(&pairs[j], s);
    CALL(aclrtDestroyStream(s));

    int mismatch_seq = 0, mismatch_ref = 0;
    for (int j = 0; j < total; j++) {
        Pair *pr = &pairs[j];
        if (!same_bits(&pr->p) || !same_bits(&pr->q))
            mismatch_seq++;
        if (!matches_reference(&pr->p, pr->p.host[SELF], pr->integer_data) ||
            !matches_reference(&pr->q, pr->p.seq[GRAD_INPUT], pr->integer_data))
            mismatch_ref++;
    }
    printf("threads %d streams_per_thread %d ops %d\n", THREADS, STREAMS, 2 * total);
    printf("mismatch_sequential %d\nmismatch_reference %d\ncalls_failed %d\n", mismatch_seq, mismatch_ref,
           g_calls_failed);

    for (int j = 0; j < total; j++)
        for (int i = 0; i < NT; i++) {
            Op *ops[2] = {&pairs[j].p, &pairs[j].q};
            for (int k = 0; k < 2; k++) {
                free(ops[k]->host[i]); free(ops[k]->conc[i]); free(ops[k]->seq[i]);
            }
        }
    free(pairs);
    CALL(aclrtResetDevice(0));
    CALL(aclFinalize());
    if (g_calls_failed || (use_events && (mismatch_seq || mismatch_ref)))
        return 1;
    if (use_events)
        printf("OK\n");
    return 0;
}
