/*
 * Outputs that share memory with an input the op reads, or with another
 * output (issue 11, defect 5): the op would read what it already wrote, or
 * write an element twice, and give wrong gradients without a word. Phase 1
 * refuses them with 161002 and a message naming both tensors; phase 2 does
 * the same when aclSet*TensorAddr moved a tensor onto another. Nothing is
 * written: every aclrtMalloc block is read back through aclrtMemcpy. The
 * decision follows the elements of the views, so these run, with exact
 * results:
 *  - gradInput on the even, gradWeight on the odd elements of one block;
 *  - input and gradInput as the two channel halves of one [T, B, 2 C_in]
 *    buffer;
 *  - an empty output (K = 0) whose storage is an input's;
 *  - inputs sharing memory (input and weight one view: only read);
 *  - gradBias on bias's memory (bias is not read by the backward pass).
 * And 3000 random strided pairs of weight and gradWeight in one buffer:
 * phase 1 refuses exactly those that share a byte (by brute force).
 * Prints "aliased_outputs: OK" when every check passes.
 */
#include "device_blocks.h"

static aclrtStream g_stream;

/* Phase 1 with `t` must fail, naming `a` and `b`; no block changes. */
static void expect_refused(aclTensor *const *t, int64_t pad, const char *what, const char *a, const char *b)
{
    uint64_t ws = 0;
    aclOpExecutor *ex = NULL;
    aclnnStatus st = phase1_of(t, pad, &ws, &ex);
    char msg[4096];
    snprintf(msg, sizeof msg, "%s", recent_msg());
    EXPECT(st == ACLNN_ERR_PARAM_INVALID, "%s: phase 1 gave %d (%s)", what, st, msg);
    char first[64], second[64];
    snprintf(first, sizeof first, "%s overlaps %s", a, b);
    snprintf(second, sizeof second, "%s overlaps %s", b, a);
    EXPECT(strstr(msg, first) || strstr(msg, second), "%s: the message does not name %s and %s: '%s'", what, a, b,
           msg);
    if (st == 0) {
        st = phase2_of(ex, ws, g_stream);
        fprintf(stderr, "%s: phase 2 then gave %d\n", what, st);
    }
    EXPECT(blocks_unchanged(what), "%s: a block changed", what);
}

/* Both phases; then every output element, read through `strides` and
 * `offset` of its view, against the reference. */
static void expect_runs(const Problem *p, aclTensor *const *t, const char *what, const int64_t (*strides)[3],
                        const int64_t *offsets, void *const *dev)
{
    uint64_t ws = 0;
    aclOpExecutor *ex = NULL;
    aclnnStatus st = phase1_of(t, p->pad, &ws, &ex);
    EXPECT(st == 0, "%s: phase 1 gave %d: %s", what, st, recent_msg());
    if (st != 0)
        return;
    st = phase2_of(ex, ws, g_stream);
    EXPECT(st == 0, "%s: phase 2 gave %d: %s", what, st, recent_msg());
    double *want[NT];
    problem_reference(p, want);
    for (int i = GRAD_INPUT; i < NT; i++) {
        for (int64_t e = 0; e < p->count[i]; e++) {
            int64_t idx[3] = {0, 0, 0}, rest = e, at = offsets[i];
            for (int d = p->rank[i]; d-- > 0;) {
                idx[d] = rest % p->dims[i][d];
                rest /= p->dims[i][d];
            }
            for (int d = 0; d < p->rank[i]; d++)
                at += idx[d] * strides[i][d];
            float got;
            block_read(dev[i], (size_t)at * sizeof(float), &got, sizeof got);
            if ((double)got != want[i][e]) {
                EXPECT(0, "%s: %s[%lld] = %g, want %g", what, NAMES[i], (long long)e, got, want[i][e]);
                break;
            }
        }
        free(want[i]);
    }
}

static aclTensor *view_of(const Problem *p, int i, const int64_t *strides, int64_t offset, int64_t storage,
                          void *dev)
{
    return make_tensor(p->dims[i], (uint64_t)p->rank[i], ACL_FLOAT, strides, offset, ACL_FORMAT_ND, storage, dev);
}

/* Each output on each input it reads, and on each other output. */
static void refused_pairs(void)
{
    Problem p;
    problem_init(&p, 5, 2, 3, 2, 4, 1);
    for (int i = 0; i < 4; i++)
        block_new(4096, (unsigned char)(0xC0 + i)); /* bystanders */
    static const int outs[] = {GRAD_INPUT, GRAD_WEIGHT, GRAD_BIAS};
    static const int others[] = {SELF, INPUT, WEIGHT, GRAD_INPUT, GRAD_WEIGHT, GRAD_BIAS};
    for (int o = 0; o < 3; o++)
        for (int k = 0; k < 6; k++) {
            int out = outs[o], other = others[k];
            if (out == other)
                continue;
            aclTensor *t[NT];
            memcpy(t, p.t, sizeof t);
            /* the output's view laid over the start of the other's storage */
            t[out] = dense_tensor(&p, out, p.dev[other]);
            char what[96];
            snprintf(what, sizeof what, "%s on %s's memory", NAMES[out], NAMES[other]);
            expect_refused(t, p.pad, what, NAMES[out], NAMES[other]);
            aclDestroyTensor(t[out]);
        }

    /* gradWeight overlapping gradInput by one element of one block */
    int64_t n_gi = p.count[GRAD_INPUT], n_gw = p.count[GRAD_WEIGHT];
    void *shared = block_new((size_t)(n_gi + n_gw - 1) * sizeof(float), 0x11);
    aclTensor *t[NT];
    memcpy(t, p.t, sizeof t);
    int64_t st_gi[3], st_gw[3];
    contiguous_strides(p.dims[GRAD_INPUT], 3, st_gi);
    contiguous_strides(p.dims[GRAD_WEIGHT], 3, st_gw);
    t[GRAD_INPUT] = view_of(&p, GRAD_INPUT, st_gi, 0, n_gi + n_gw - 1, shared);
    t[GRAD_WEIGHT] = view_of(&p, GRAD_WEIGHT, st_gw, n_gi - 1, n_gi + n_gw - 1, shared);
    expect_refused(t, p.pad, "gradWeight's first element is gradInput's last", "gradInput", "gradWeight");
    aclDestroyTensor(t[GRAD_WEIGHT]);
    aclDestroyTensor(t[GRAD_INPUT]);

    /* one element further they touch nothing in common, and run */
    void *adjacent = block_new((size_t)(n_gi + n_gw) * sizeof(float), 0x12);
    t[GRAD_INPUT] = view_of(&p, GRAD_INPUT, st_gi, 0, n_gi + n_gw, adjacent);
    t[GRAD_WEIGHT] = view_of(&p, GRAD_WEIGHT, st_gw, n_gi, n_gi + n_gw, adjacent);
    int64_t strides[NT][3], offsets[NT] = {0};
    for (int i = 0; i < NT; i++)
        contiguous_strides(p.dims[i], p.rank[i], strides[i]);
    offsets[GRAD_WEIGHT] = n_gi;
    void *dev[NT];
    memcpy(dev, p.dev, sizeof dev);
    dev[GRAD_INPUT] = dev[GRAD_WEIGHT] = adjacent;
    expect_runs(&p, t, "gradWeight right after gradInput", (const int64_t(*)[3])strides, offsets, dev);
    aclDestroyTensor(t[GRAD_WEIGHT]);
    aclDestroyTensor(t[GRAD_INPUT]);
    problem_free(&p);
    blocks_free();
}

/* input and weight of one shape: one tensor can be passed for both
 * outputs, and input and weight can share their memory. */
static void one_tensor_twice(void)
{
    Problem p;
    problem_init(&p, 2, 2, 2, 2, 2, 0); /* input [2,2,2] = weight [2,2,2] */
    aclTensor *t[NT];
    memcpy(t, p.t, sizeof t);
    t[GRAD_WEIGHT] = t[GRAD_INPUT];
    expect_refused(t, p.pad, "one tensor as gradInput and gradWeight", "gradInput", "gradWeight");

    /* inputs may share memory: weight is input's very view */
    memcpy(t, p.t, sizeof t);
    t[WEIGHT] = t[INPUT];
    float *weight = p.host[WEIGHT];
    p.host[WEIGHT] = p.host[INPUT];
    int64_t strides[NT][3], offsets[NT] = {0};
    for (int i = 0; i < NT; i++)
        contiguous_strides(p.dims[i], p.rank[i], strides[i]);
    expect_runs(&p, t, "weight on input's memory", (const int64_t(*)[3])strides, offsets, p.dev);
    p.host[WEIGHT] = weight;

    /* gradBias on bias's memory: bias is not read */
    memcpy(t, p.t, sizeof t);
    t[GRAD_BIAS] = dense_tensor(&p, GRAD_BIAS, p.dev[BIAS]);
    void *dev[NT];
    memcpy(dev, p.dev, sizeof dev);
    dev[GRAD_BIAS] = p.dev[BIAS];
    expect_runs(&p, t, "gradBias on bias's memory", (const int64_t(*)[3])strides, offsets, dev);
    aclDestroyTensor(t[GRAD_BIAS]);
    problem_free(&p);
    blocks_free();
}

/* Views that interleave without sharing a byte run. */
static void interleaved(void)
{
    Problem p;
    problem_init(&p, 5, 2, 3, 2, 4, 1);
    int64_t strides[NT][3], offsets[NT] = {0};
    for (int i = 0; i < NT; i++)
        contiguous_strides(p.dims[i], p.rank[i], strides[i]);
    void *dev[NT];
    memcpy(dev, p.dev, sizeof dev);
    aclTensor *t[NT];
    memcpy(t, p.t, sizeof t);

    /* gradInput on the even elements, gradWeight on the odd ones */
    int64_t n = p.count[GRAD_INPUT] > p.count[GRAD_WEIGHT] ? p.count[GRAD_INPUT] : p.count[GRAD_WEIGHT];
    void *both = block_new((size_t)(2 * n) * sizeof(float), 0x22);
    for (int i = GRAD_INPUT; i <= GRAD_WEIGHT; i++) {
        for (int d = 0; d < 3; d++)
            strides[i][d] *= 2;
        offsets[i] = i == GRAD_WEIGHT;
        dev[i] = both;
        t[i] = view_of(&p, i, strides[i], offsets[i], 2 * n, both);
    }
    expect_runs(&p, t, "gradInput even, gradWeight odd elements", (const int64_t(*)[3])strides, offsets, dev);
    for (int i = GRAD_INPUT; i <= GRAD_WEIGHT; i++) {
        aclDestroyTensor(t[i]);
        t[i] = p.t[i];
        contiguous_strides(p.dims[i], 3, strides[i]);
        offsets[i] = 0;
        dev[i] = p.dev[i];
    }

    /* input: channels [C_in, 2 C_in), gradInput: [0, C_in) of one buffer */
    const int64_t T = p.T, B = p.B, C = p.Ci;
    void *halves = block_new((size_t)(T * B * 2 * C) * sizeof(float), 0x33);
    for (int64_t r = 0; r < T * B; r++)
        block_write(halves, (size_t)(r * 2 * C + C) * sizeof(float), p.host[INPUT] + r * C, (size_t)C * sizeof(float));
    const int64_t half_strides[3] = {B * 2 * C, 2 * C, 1};
    t[INPUT] = view_of(&p, INPUT, half_strides, C, T * B * 2 * C, halves);
    t[GRAD_INPUT] = view_of(&p, GRAD_INPUT, half_strides, 0, T * B * 2 * C, halves);
    memcpy(strides[GRAD_INPUT], half_strides, sizeof half_strides);
    dev[GRAD_INPUT] = halves;
    expect_runs(&p, t, "input and gradInput as channel halves", (const int64_t(*)[3])strides, offsets, dev);
    aclDestroyTensor(t[INPUT]);
    aclDestroyTensor(t[GRAD_INPUT]);
    problem_free(&p);
    blocks_free();

    /* an empty output overlaps nothing: gradWeight [0, C_in, C_out] on
     * input's memory */
    problem_init(&p, 4, 2, 3, 0, 2, 1);
    memcpy(t, p.t, sizeof t);
    memcpy(dev, p.dev, sizeof dev);
    for (int i = 0; i < NT; i++)
        contiguous_strides(p.dims[i], p.rank[i], strides[i]);
    t[GRAD_WEIGHT] = dense_tensor(&p, GRAD_WEIGHT, p.dev[INPUT]);
    expect_runs(&p, t, "an empty gradWeight on input's memory", (const int64_t(*)[3])strides, offsets, dev);
    aclDestroyTensor(t[GRAD_WEIGHT]);
    problem_free(&p);
    blocks_free();
}

/* A repeatable executor whose addresses move: phase 2 checks again. */
static void moved_by_setters(void)
{
    Problem p;
    problem_init(&p, 5, 2, 3, 2, 4, 1);
    uint64_t ws = 0;
    aclOpExecutor *ex = NULL;
    EXPECT(phase1_of(p.t, p.pad, &ws, &ex) == 0, "phase 1: %s", recent_msg());
    if (!ex)
        return;
    EXPECT_EQ(aclSetAclOpExecutorRepeatable(ex), 0, "aclSetAclOpExecutorRepeatable");
    EXPECT(phase2_of(ex, ws, g_stream) == 0, "first run: %s", recent_msg());
    for (int i = GRAD_INPUT; i < NT; i++)
        block_accept(p.dev[i]);

    /* gradWeight (output 1) moved onto weight's memory */
    EXPECT_EQ(aclSetOutputTensorAddr(ex, 1, p.t[GRAD_WEIGHT], p.dev[WEIGHT]), 0, "aclSetOutputTensorAddr");
    aclnnStatus st = phase2_of(ex, ws, g_stream);
    const char *msg = recent_msg();
    EXPECT(st == ACLNN_ERR_PARAM_INVALID && strstr(msg, "gradWeight overlaps weight") &&
               strstr(msg, "aclnnConvTbcBackward:"),
           "gradWeight moved onto weight: %d '%s'", st, msg);
    EXPECT(blocks_unchanged("gradWeight moved onto weight"), "a block changed");

    /* input (input 1) moved onto gradInput's memory */
    EXPECT_EQ(aclSetOutputTensorAddr(ex, 1, p.t[GRAD_WEIGHT], p.dev[GRAD_WEIGHT]), 0, "aclSetOutputTensorAddr");
    EXPECT_EQ(aclSetInputTensorAddr(ex, 1, p.t[INPUT], p.dev[GRAD_INPUT]), 0, "aclSetInputTensorAddr");
    st = phase2_of(ex, ws, g_stream);
    msg = recent_msg();
    EXPECT(st == ACLNN_ERR_PARAM_INVALID && strstr(msg, "gradInput overlaps input"),
           "input moved onto gradInput: %d '%s'", st, msg);
    EXPECT(blocks_unchanged("input moved onto gradInput"), "a block changed");

    /* back where they were: it runs */
    EXPECT_EQ(aclSetInputTensorAddr(ex, 1, p.t[INPUT], p.dev[INPUT]), 0, "aclSetInputTensorAddr");
    EXPECT(phase2_of(ex, ws, g_stream) == 0, "moved back: %s", recent_msg());
    EXPECT_EQ(aclDestroyAclOpExecutor(ex), 0, "aclDestroyAclOpExecutor");
    problem_free(&p);
    blocks_free();

    /* tensors without addresses in phase 1 (set before the run) */
    problem_init(&p, 5, 2, 3, 2, 4, 1);
    aclTensor *t[NT];
    for (int i = 0; i < NT; i++)
        t[i] = dense_tensor(&p, i, NULL);
    EXPECT(phase1_of(t, p.pad, &ws, &ex) == 0, "no addresses yet: %s", recent_msg());
    if (ex) {
        EXPECT_EQ(aclSetAclOpExecutorRepeatable(ex), 0, "aclSetAclOpExecutorRepeatable");
        for (int i = 0; i < NT; i++)
            EXPECT_EQ(aclSetTensorAddr(ex, (size_t)i, t[i], i == GRAD_BIAS ? p.dev[SELF] : p.dev[i]), 0,
                      "aclSetTensorAddr");
        st = phase2_of(ex, ws, g_stream);
        msg = recent_msg();
        EXPECT(st == ACLNN_ERR_PARAM_INVALID && strstr(msg, "gradBias overlaps self"),
               "gradBias set onto self: %d '%s'", st, msg);
        EXPECT(blocks_unchanged("gradBias set onto self"), "a block changed");
        EXPECT_EQ(aclSetTensorAddr(ex, GRAD_BIAS, t[GRAD_BIAS], p.dev[GRAD_BIAS]), 0, "aclSetTensorAddr");
        EXPECT(phase2_of(ex, ws, g_stream) == 0, "addresses of their own: %s", recent_msg());
        EXPECT_EQ(aclDestroyAclOpExecutor(ex), 0, "aclDestroyAclOpExecutor");
    }
    for (int i = 0; i < NT; i++)
        aclDestroyTensor(t[i]);
    problem_free(&p);
    blocks_free();
}

/* weight and gradWeight [2, 2, 3] over one arena with random strides and
 * offsets, the other tensors apart: phase 1 (never run) refuses the pair
 * exactly when an element of one shares a byte with an element of the
 * other. */
static void random_pairs(void)
{
    enum { ARENA_FLOATS = 1024 };
    static float arena[ARENA_FLOATS], apart[NT][16];
    const int64_t dims[NT][3] = {{1, 2, 3}, {2, 2, 2}, {2, 2, 3}, {3}, {2, 2, 2}, {2, 2, 3}, {3}};
    aclTensor *t[NT];
    for (int i = 0; i < NT; i++) {
        int64_t strides[3];
        int rank = i == BIAS || i == GRAD_BIAS ? 1 : 3;
        contiguous_strides(dims[i], rank, strides);
        t[i] = make_tensor(dims[i], (uint64_t)rank, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, 16, apart[i]);
    }
    aclTensor *keep_w = t[WEIGHT], *keep_gw = t[GRAD_WEIGHT];
    unsigned seed = 12345;
    int tried = 0, overlapping = 0, undecided = 0;
    for (int trial = 0; trial < 3000 && g_failures < 10; trial++) {
        /* weight: any strides (an input may overlap itself); gradWeight:
         * nested ones, in a random order of its dims, with random gaps */
        int64_t st[2][3], off[2];
        unsigned r[8];
        for (int k = 0; k < 8; k++) {
            seed = seed * 1103515245u + 12345u;
            r[k] = seed >> 16;
        }
        for (int d = 0; d < 3; d++)
            st[0][d] = r[d] % 13;
        const int order[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
        const int *o = order[r[3] % 6];
        int64_t step = 1 + r[4] % 2;
        for (int k = 2; k >= 0; k--) {
            st[1][o[k]] = step;
            step = step * dims[GRAD_WEIGHT][o[k]] + (int64_t)(r[5 + k % 2] >> (4 * k)) % 3;
        }
        off[0] = r[6] % 48;
        off[1] = r[7] % 48;
        t[WEIGHT] = make_tensor(dims[WEIGHT], 3, ACL_FLOAT, st[0], off[0], ACL_FORMAT_ND, ARENA_FLOATS, arena);
        t[GRAD_WEIGHT] = make_tensor(dims[GRAD_WEIGHT], 3, ACL_FLOAT, st[1], off[1], ACL_FORMAT_ND, ARENA_FLOATS,
                                     arena);
        /* brute force: every element of one against every element of the other */
        int shared = 0;
        for (int a = 0; a < 12 && !shared; a++)
            for (int b = 0; b < 12 && !shared; b++) {
                int64_t ea = off[0] + (a / 6) * st[0][0] + (a / 3 % 2) * st[0][1] + (a % 3) * st[0][2];
                int64_t eb = off[1] + (b / 6) * st[1][0] + (b / 3 % 2) * st[1][1] + (b % 3) * st[1][2];
                shared = ea == eb;
            }
        uint64_t ws = 0;
        aclOpExecutor *ex = NULL;
        aclnnStatus st1 = phase1_of(t, 0, &ws, &ex);
        const char *msg = recent_msg();
        if (st1 == ACLNN_ERR_PARAM_INVALID && strstr(msg, "share an address")) {
            /* gradWeight overlaps itself: refused before this check */
        } else {
            tried++;
            overlapping += shared;
            undecided += strstr(msg, "may overlap") != NULL;
            if (shared)
                EXPECT(st1 == ACLNN_ERR_PARAM_INVALID && strstr(msg, "gradWeight overlaps weight"),
                       "strides %lld %lld %lld offset %lld / %lld %lld %lld offset %lld share an element: %d '%s'",
                       (long long)st[0][0], (long long)st[0][1], (long long)st[0][2], (long long)off[0],
                       (long long)st[1][0], (long long)st[1][1], (long long)st[1][2], (long long)off[1], st1, msg);
            else
                EXPECT(st1 == 0, "strides %lld %lld %lld offset %lld / %lld %lld %lld offset %lld share nothing: %d '%s'",
                       (long long)st[0][0], (long long)st[0][1], (long long)st[0][2], (long long)off[0],
                       (long long)st[1][0], (long long)st[1][1], (long long)st[1][2], (long long)off[1], st1, msg);
        }
        if (st1 == 0)
            aclDestroyAclOpExecutor(ex);
        aclDestroyTensor(t[WEIGHT]);
        aclDestroyTensor(t[GRAD_WEIGHT]);
    }
    EXPECT(tried > 1000 && overlapping > 100 && tried - overlapping > 100,
           "random pairs: %d tried, %d overlapping: too few of either", tried, overlapping);
    EXPECT_EQ(undecided, 0, "random pairs the exact test gave up on");
    printf("random pairs: %d tried, %d overlapping\n", tried, overlapping);
    t[WEIGHT] = keep_w, t[GRAD_WEIGHT] = keep_gw;
    for (int i = 0; i < NT; i++)
        aclDestroyTensor(t[i]);
}

int main(void)
{
    EXPECT_EQ(aclInit(NULL), ACL_SUCCESS, "aclInit");
    EXPECT_EQ(aclrtSetDevice(0), ACL_SUCCESS, "aclrtSetDevice");
    EXPECT_EQ(aclrtCreateStream(&g_stream), ACL_SUCCESS, "aclrtCreateStream");
    refused_pairs();
    one_tensor_twice();
    interleaved();
    moved_by_setters();
    random_pairs();
    EXPECT_EQ(aclrtDestroyStream(g_stream), ACL_SUCCESS, "aclrtDestroyStream");
    EXPECT_EQ(aclrtResetDevice(0), ACL_SUCCESS, "aclrtResetDevice");
    EXPECT_EQ(aclFinalize(), ACL_SUCCESS, "aclFinalize");
    return finish("aliased_outputs");
}
