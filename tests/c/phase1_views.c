/*
 * Phase 1 where it now follows CANN's checker, run under the sanitizers.
 *
 * 1. What phase 1 lets through runs without touching a byte outside the
 *    views: every buffer is malloc'd with its exact size (memory checking
 *    off), so AddressSanitizer reports any stray access. On every SoC
 *    profile, an empty weight (K = 0, or C_in = 0) and an empty input
 *    (T = 0) take the empty path: sums with no terms are 0 and gradBias is
 *    the sum of self. Ascend950 has no K range check (K = 0, 256, 300).
 * 2. What aclCreateTensor now records as given is refused by phase 1 with
 *    161002 and a message naming the tensor, and nothing is written: a view
 *    past its storage, a negative offset, negative dims or storage dims,
 *    strides whose element offsets wrap int64_t (to exactly 0, where a
 *    wrapping sum would pass) or whose byte span does.
 * 3. A view inside its storage dims but past its aclrtMalloc block passes
 *    phase 1 and is refused by phase 2 (checked memory) with 161002 naming
 *    the tensor and the allocation; nothing is written, and the executor,
 *    still live, is destroyed.
 * Prints FAIL lines and returns non-zero on any failure.
 */
#include "convtbc/convtbc_ext.h"
#include "test_common.h"

enum { SELF, INPUT, WEIGHT, BIAS, GRAD_INPUT, GRAD_WEIGHT, GRAD_BIAS, NT };
static const char *const NAMES[NT] = {"self", "input", "weight", "bias", "gradInput", "gradWeight", "gradBias"};
static const char *const PROFILES[] = {"Ascend910B1", "Ascend910_9391", "Ascend910A", "Ascend950"};
enum { NPROFILES = sizeof PROFILES / sizeof PROFILES[0] };

/* One problem's tensors over exact-size host buffers (NULL when empty). */
typedef struct {
    int64_t T, B, Ci, K, Co, pad, To;
    aclDataType dt;
    int64_t dims[NT][3];
    int rank[NT];
    int64_t count[NT];
    void *buf[NT];
    aclTensor *t[NT];
} Problem;

static void problem_init(Problem *p, int64_t T, int64_t B, int64_t Ci, int64_t K, int64_t Co, int64_t pad,
                         aclDataType dt)
{
    memset(p, 0, sizeof *p);
    p->T = T, p->B = B, p->Ci = Ci, p->K = K, p->Co = Co, p->pad = pad, p->To = T + 2 * pad + 1 - K;
    p->dt = dt;
    const int64_t shapes[NT][3] = {{p->To, B, Co}, {T, B, Ci}, {K, Ci, Co}, {Co}, {T, B, Ci}, {K, Ci, Co}, {Co}};
    for (int i = 0; i < NT; i++) {
        p->rank[i] = i == BIAS || i == GRAD_BIAS ? 1 : 3;
        p->count[i] = 1;
        for (int d = 0; d < p->rank[i]; d++) {
            p->dims[i][d] = shapes[i][d];
            p->count[i] *= shapes[i][d];
        }
        if (p->count[i] > 0) {
            p->buf[i] = malloc((size_t)p->count[i] * elem_size(dt));
            EXPECT(p->buf[i] != NULL, "out of memory");
        }
        for (int64_t e = 0; e < p->count[i]; e++) /* small integers: every sum is exact */
            store_elem(p->buf[i], e, dt, i >= GRAD_INPUT ? -7.0f : (float)((e * 7 + i * 3) % 5 - 2));
        int64_t strides[3];
        contiguous_strides(p->dims[i], p->rank[i], strides);
        p->t[i] = make_tensor(p->dims[i], (uint64_t)p->rank[i], dt, strides, 0, ACL_FORMAT_ND, p->count[i],
                              p->buf[i]);
        EXPECT(p->t[i] != NULL, "aclCreateTensor refused %s", NAMES[i]);
    }
}

static void problem_free(Problem *p)
{
    for (int i = 0; i < NT; i++) {
        if (p->t[i])
            aclDestroyTensor(p->t[i]);
        free(p->buf[i]);
    }
}

/* cubeMathType 1 (ALLOW_FP32_DOWN_PRECISION) takes FLOAT and FLOAT16 on
 * every profile and leaves small integers exact. */
static aclnnStatus phase1(Problem *p, aclTensor *const *t, uint64_t *ws, aclOpExecutor **ex)
{
    recent_msg();
    return aclnnConvTbcBackwardGetWorkspaceSize(t[SELF], t[INPUT], t[WEIGHT], t[BIAS], p->pad, 1, t[GRAD_INPUT],
                                                t[GRAD_WEIGHT], t[GRAD_BIAS], ws, ex);
}

/* Both phases on host memory, then every output element against the
 * plain-loop reference, exactly. */
static void run_and_compare(const char *profile, aclDataType dt, int64_t T, int64_t B, int64_t Ci, int64_t K,
                            int64_t Co, int64_t pad)
{
    char what[160];
    snprintf(what, sizeof what, "%s dtype %d T=%lld B=%lld C_in=%lld K=%lld C_out=%lld pad=%lld", profile, (int)dt,
             (long long)T, (long long)B, (long long)Ci, (long long)K, (long long)Co, (long long)pad);
    Problem p;
    problem_init(&p, T, B, Ci, K, Co, pad, dt);
    uint64_t ws = 0;
    aclOpExecutor *ex = NULL;
    aclnnStatus st = phase1(&p, p.t, &ws, &ex);
    EXPECT(st == 0, "%s: phase 1 gave %d: %s", what, st, recent_msg());
    if (st == 0) {
        void *workspace = ws ? malloc((size_t)ws) : NULL;
        st = aclnnConvTbcBackward(workspace, ws, ex, NULL);
        EXPECT(st == 0, "%s: phase 2 gave %d: %s", what, st, recent_msg());
        free(workspace);
        double *dense[NT] = {NULL};
        for (int i = 0; i < NT; i++) {
            dense[i] = (double *)calloc((size_t)(p.count[i] > 0 ? p.count[i] : 1), sizeof(double));
            for (int64_t e = 0; e < p.count[i] && i < GRAD_INPUT; e++)
                dense[i][e] = load_elem(p.buf[i], e, p.dt);
        }
        reference(dense[SELF], dense[INPUT], dense[WEIGHT], T, B, Ci, K, Co, pad, dense[GRAD_INPUT],
                  dense[GRAD_WEIGHT], dense[GRAD_BIAS]);
        for (int i = GRAD_INPUT; i < NT; i++)
            for (int64_t e = 0; e < p.count[i]; e++) {
                double got = load_elem(p.buf[i], e, p.dt);
                if (got != dense[i][e]) {
                    EXPECT(0, "%s: %s[%lld] = %g, want %g", what, NAMES[i], (long long)e, got, dense[i][e]);
                    break;
                }
            }
        for (int i = 0; i < NT; i++)
            free(dense[i]);
    }
    problem_free(&p);
}

/* Snapshot of every buffer, to show a refused call changed nothing. */
typedef struct {
    void *copy[NT];
} Snapshot;

static void snapshot(const Problem *p, Snapshot *s)
{
    for (int i = 0; i < NT; i++) {
        size_t bytes = (size_t)p->count[i] * elem_size(p->dt);
        s->copy[i] = bytes ? malloc(bytes) : NULL;
        if (bytes)
            memcpy(s->copy[i], p->buf[i], bytes);
    }
}

static int unchanged(const Problem *p, Snapshot *s)
{
    int same = 1;
    for (int i = 0; i < NT; i++) {
        size_t bytes = (size_t)p->count[i] * elem_size(p->dt);
        same &= !bytes || memcmp(s->copy[i], p->buf[i], bytes) == 0;
        free(s->copy[i]);
    }
    return same;
}

/* Phase 1 with tensor `which` replaced by `bad` (same buffer): 161002 with
 * a message naming it, and no buffer changed. */
static void expect_refused(const char *profile, Problem *p, int which, aclTensor *bad, const char *what)
{
    EXPECT(bad != NULL, "%s %s %s: aclCreateTensor refused it (CANN records it as given)", profile, NAMES[which],
           what);
    if (!bad)
        return;
    aclTensor *t[NT];
    memcpy(t, p->t, sizeof t);
    t[which] = bad;
    Snapshot s;
    snapshot(p, &s);
    uint64_t ws = 0;
    aclOpExecutor *ex = NULL;
    aclnnStatus st = phase1(p, t, &ws, &ex);
    const char *msg = recent_msg();
    EXPECT(st == ACLNN_ERR_PARAM_INVALID, "%s %s %s: phase 1 gave %d (%s)", profile, NAMES[which], what, st, msg);
    EXPECT(strstr(msg, NAMES[which]) != NULL, "%s %s %s: message does not name it: '%s'", profile, NAMES[which],
           what, msg);
    EXPECT(unchanged(p, &s), "%s %s %s: a buffer changed", profile, NAMES[which], what);
    if (st == 0)
        aclDestroyAclOpExecutor(ex);
    aclDestroyTensor(bad);
}

static aclTensor *view(const Problem *p, int i, const int64_t *dims, const int64_t *strides, int64_t offset,
                       const int64_t *storage_dims, uint64_t storage_rank, void *data)
{
    return aclCreateTensor(dims ? dims : p->dims[i], (uint64_t)p->rank[i], p->dt, strides, offset, ACL_FORMAT_ND,
                           storage_dims, storage_rank, data);
}

static void refusals(const char *profile)
{
    /* Every tensor has a dim of 5, whose stride can be made to wrap. */
    Problem p;
    problem_init(&p, 5, 2, 5, 1, 5, 0, ACL_FLOAT16);
    for (int i = 0; i < NT; i++) {
        const int rank = p.rank[i];
        const int five = rank == 1 ? 0 : i == WEIGHT || i == GRAD_WEIGHT ? 1 : 0; /* a dim of length 5 */
        int64_t st[3], count = p.count[i];
        contiguous_strides(p.dims[i], rank, st);

        /* one element past the storage */
        expect_refused(profile, &p, i, view(&p, i, NULL, st, 1, &count, 1, p.buf[i]), "offset 1");
        /* starts before its storage (the memory before it is the caller's) */
        expect_refused(profile, &p, i,
                       view(&p, i, NULL, st, -1, &count, 1, (char *)p.buf[i] + elem_size(p.dt)), "offset -1");
        /* storage dims that cannot hold it, or are negative */
        int64_t small[2] = {count / 5, 4}, negative[1] = {-count};
        expect_refused(profile, &p, i, view(&p, i, NULL, st, 0, small, 2, p.buf[i]), "storageDims too small");
        expect_refused(profile, &p, i, view(&p, i, NULL, st, 0, negative, 1, p.buf[i]), "negative storageDims");
        /* a negative dim (the others unchanged) */
        int64_t dims[3];
        memcpy(dims, p.dims[i], sizeof dims);
        dims[rank - 1] = -dims[rank - 1];
        expect_refused(profile, &p, i, view(&p, i, dims, st, 0, &count, 1, p.buf[i]), "negative dim");
        /* 4 * 2^62 wraps to exactly 0: a wrapping sum would put the last
         * element on the first and pass */
        int64_t wrap[3];
        memcpy(wrap, st, sizeof wrap);
        wrap[five] = INT64_C(1) << 62;
        expect_refused(profile, &p, i, view(&p, i, NULL, wrap, 0, &count, 1, p.buf[i]), "stride 2^62");
        /* element offsets fit (4 * 2^60) but their bytes do not */
        int64_t bytes[3], huge = (INT64_C(1) << 62) + 64;
        memcpy(bytes, st, sizeof bytes);
        bytes[five] = INT64_C(1) << 60;
        expect_refused(profile, &p, i, view(&p, i, NULL, bytes, 0, &huge, 1, p.buf[i]), "stride 2^60");
    }
    /* The set itself is fine: it runs. */
    uint64_t ws = 0;
    aclOpExecutor *ex = NULL;
    EXPECT(phase1(&p, p.t, &ws, &ex) == 0, "%s: the valid problem was refused: %s", profile, recent_msg());
    void *workspace = ws ? malloc((size_t)ws) : NULL;
    EXPECT(aclnnConvTbcBackward(workspace, ws, ex, NULL) == 0, "%s: phase 2: %s", profile, recent_msg());
    free(workspace);
    problem_free(&p);
}

/* Views inside their storage dims but past their aclrtMalloc block. */
static void past_the_allocation(void)
{
    EXPECT_EQ(aclInit(NULL), ACL_SUCCESS, "aclInit");
    EXPECT_EQ(aclrtSetDevice(0), ACL_SUCCESS, "aclrtSetDevice");
    int was = convtbcSetMemoryChecking(1);
    aclrtStream stream = NULL;
    EXPECT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS, "aclrtCreateStream");

    Problem p; /* host side: the data to upload, and the shapes */
    problem_init(&p, 5, 2, 3, 2, 4, 1, ACL_FLOAT);
    void *dev[NT];
    aclTensor *t[NT];
    for (int i = 0; i < NT; i++) {
        size_t bytes = (size_t)p.count[i] * 4;
        EXPECT_EQ(aclrtMalloc(&dev[i], bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS, "aclrtMalloc");
        EXPECT_EQ(aclrtMemcpy(dev[i], bytes, p.buf[i], bytes, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS, "upload");
        int64_t st[3];
        contiguous_strides(p.dims[i], p.rank[i], st);
        t[i] = make_tensor(p.dims[i], (uint64_t)p.rank[i], ACL_FLOAT, st, 0, ACL_FORMAT_ND, p.count[i], dev[i]);
    }
    for (int i = 0; i < NT; i++) {
        /* storage dims claim 3 more elements than were allocated, and the
         * view starts 3 elements in: its last 12 bytes are past the block */
        int64_t st[3], claimed = p.count[i] + 3;
        contiguous_strides(p.dims[i], p.rank[i], st);
        aclTensor *bad = make_tensor(p.dims[i], (uint64_t)p.rank[i], ACL_FLOAT, st, 3, ACL_FORMAT_ND, claimed,
                                     dev[i]);
        EXPECT(bad != NULL, "%s: aclCreateTensor refused a view past its allocation", NAMES[i]);
        aclTensor *use[NT];
        memcpy(use, t, sizeof use);
        use[i] = bad;
        uint64_t ws = 0;
        aclOpExecutor *ex = NULL;
        aclnnStatus st1 = phase1(&p, use, &ws, &ex);
        EXPECT(st1 == 0, "%s past its allocation: phase 1 gave %d, want 0 (inside its storage dims): %s", NAMES[i],
               st1, recent_msg());
        if (st1 != 0) {
            aclDestroyTensor(bad);
            continue;
        }
        void *workspace = NULL;
        if (ws)
            EXPECT_EQ(aclrtMalloc(&workspace, (size_t)ws, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS, "workspace");
        aclnnStatus st2 = aclnnConvTbcBackward(workspace, ws, ex, stream);
        const char *msg = recent_msg();
        EXPECT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS, "synchronize");
        char name[32];
        snprintf(name, sizeof name, "tensor %s", NAMES[i]);
        if (i == BIAS) {
            /* bias is not read by the backward pass: nothing to fault */
            EXPECT(st2 == 0, "bias past its allocation: phase 2 gave %d (%s)", st2, msg);
            for (int o = GRAD_INPUT; o < NT; o++) /* the sentinels back, for the next cases */
                aclrtMemcpy(dev[o], (size_t)p.count[o] * 4, p.buf[o], (size_t)p.count[o] * 4,
                            ACL_MEMCPY_HOST_TO_DEVICE);
        } else {
            EXPECT(st2 == ACLNN_ERR_PARAM_INVALID, "%s past its allocation: phase 2 gave %d (%s)", NAMES[i], st2,
                   msg);
            EXPECT(strstr(msg, name) && strstr(msg, "allocation"), "%s: message does not name it: '%s'", NAMES[i],
                   msg);
            EXPECT_EQ(aclDestroyAclOpExecutor(ex), ACLNN_SUCCESS, "the refused executor is still live");
            for (int o = GRAD_INPUT; o < NT; o++) {
                float *back = (float *)malloc((size_t)p.count[o] * 4);
                aclrtMemcpy(back, (size_t)p.count[o] * 4, dev[o], (size_t)p.count[o] * 4,
                            ACL_MEMCPY_DEVICE_TO_HOST);
                for (int64_t e = 0; e < p.count[o]; e++)
                    if (back[e] != -7.0f) {
                        EXPECT(0, "%s past its allocation: %s was written", NAMES[i], NAMES[o]);
                        break;
                    }
                free(back);
            }
        }
        if (workspace)
            aclrtFree(workspace);
        aclDestroyTensor(bad);
    }
    for (int i = 0; i < NT; i++) {
        aclDestroyTensor(t[i]);
        aclrtFree(dev[i]);
    }
    problem_free(&p);
    aclrtDestroyStream(stream);
    convtbcSetMemoryChecking(was);
    aclrtResetDevice(0);
    aclFinalize();
}

int main(void)
{
    int was = convtbcSetMemoryChecking(0); /* host buffers, exact sizes: ASan watches them */
    for (int i = 0; i < NPROFILES; i++) {
        const char *profile = PROFILES[i];
        EXPECT_EQ(convtbcSetSocVersion(profile), ACL_SUCCESS, profile);
        /* the training series has no BFLOAT16; its sums stay exact below 256 */
        const aclDataType dtypes[] = {ACL_FLOAT16, ACL_FLOAT, ACL_BF16};
        for (int d = 0; d < (strcmp(profile, "Ascend910A") == 0 ? 2 : 3); d++) {
            aclDataType dt = dtypes[d];
            run_and_compare(profile, dt, 5, 2, 3, 0, 4, 0);       /* K = 0: weight empty */
            run_and_compare(profile, dt, 5, 2, 3, 0, 4, 2);       /* K = 0, padded */
            run_and_compare(profile, dt, 5, 2, 0, 2, 4, 1);       /* C_in = 0: input and weight empty */
            run_and_compare(profile, dt, 0, 2, 3, 1, 4, 1);       /* T = 0: input empty */
            run_and_compare(profile, dt, 0, 2, 3, 0, 4, 0);       /* T = 0 and K = 0 */
            run_and_compare(profile, dt, 260, 1, 2, 256, 3, 2);   /* K past 255 */
            run_and_compare(profile, dt, 300, 1, 2, 300, 3, 0);
            run_and_compare(profile, dt, 6, 3, 4, 3, 5, 1);       /* an ordinary problem */
        }
        /* larger empty problems, past the blocking of small ones */
        run_and_compare(profile, ACL_FLOAT, 64, 8, 32, 0, 48, 0);
        run_and_compare(profile, ACL_FLOAT16, 64, 8, 0, 5, 48, 2);
        run_and_compare(profile, ACL_FLOAT, 0, 8, 32, 5, 48, 3);
        refusals(profile);
    }
    convtbcSetMemoryChecking(was);
    EXPECT_EQ(convtbcSetSocVersion("Ascend910B1"), ACL_SUCCESS, "back to the default profile");
    past_the_allocation();
    return finish("phase1_views");
}
