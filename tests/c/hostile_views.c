/*
 * Views built to overflow the arithmetic behind the memory checks (issue
 * 11, defect 1, and T = INT64_MAX). Every tensor lives in aclrtMalloc
 * memory with the checks on, beside bystander blocks filled with a
 * pattern; after each refusal every block is read back through aclrtMemcpy
 * and must be unchanged. Refusals are 161002 with a message that names the
 * tensor (or argument) and says what overflowed:
 *  - the gradWeight [1,2,2], strides {1, 2^62 - d, d + 100},
 *    storage 2^62 + 101, and self [2,1,2], strides {2^61, 1, 2^61 + 1000}:
 *    element offsets fit in int64_t, their byte counts do not;
 *  - a storage whose byte size passes 2^63 (2^62 floats, or dims whose
 *    product does) under a small, well-placed view: phase 1, although the
 *    view itself lies inside its block;
 *  - a view whose offset carries it from its own block into another block
 *    (its storage dims claim the bytes in between): phase 2's memory check
 *    measures from the storage's start and refuses it;
 *  - T = INT64_MAX with pad 1: T_out = T + 2*pad + 1 - K overflows;
 *  - and what is valid however large: C_in = 0 with T = K = INT64_MAX, or
 *    T = 0, K = INT64_MAX, pad = 2^62 (2*pad alone passes INT64_MAX), both
 *    T_out = 1 or 2: they run, gradBias is the sum of self (the compute
 *    never sees the huge T and K; UBSan watches).
 * Prints "hostile_views: OK" when every check passes.
 */
#include "device_blocks.h"

static const int64_t TWO62 = INT64_C(1) << 62, TWO61 = INT64_C(1) << 61;

static void expect_refused(aclTensor *const *t, int64_t pad, const char *what, const char *name,
                           const char *overflowed)
{
    uint64_t ws = 0;
    aclOpExecutor *ex = NULL;
    aclnnStatus st = phase1_of(t, pad, &ws, &ex);
    const char *msg = recent_msg();
    EXPECT(st == ACLNN_ERR_PARAM_INVALID, "%s: phase 1 gave %d (%s)", what, st, msg);
    EXPECT(strstr(msg, name) != NULL, "%s: the message does not name %s: '%s'", what, name, msg);
    EXPECT(strstr(msg, overflowed) != NULL, "%s: the message does not say '%s': '%s'", what, overflowed, msg);
    EXPECT(strstr(msg, "aclnnConvTbcBackwardGetWorkspaceSize") != NULL, "%s: names the API: '%s'", what, msg);
    if (st == 0) {
        st = phase2_of(ex, ws, NULL);
        fprintf(stderr, "%s: phase 2 then gave %d: %s\n", what, st, recent_msg());
    }
    EXPECT(blocks_unchanged(what), "%s: a block changed", what);
}

static aclTensor *strided(const Problem *p, int i, const int64_t *strides, int64_t offset, int64_t storage,
                          void *dev)
{
    return make_tensor(p->dims[i], (uint64_t)p->rank[i], ACL_FLOAT, strides, offset, ACL_FORMAT_ND, storage, dev);
}

/* The two views, and storage sizes past 2^63 bytes. */
static void byte_overflows(void)
{
    Problem p; /* weight [1, 2, 2]; self [2, 1, 2] */
    problem_init(&p, 2, 1, 2, 1, 2, 0);
    for (int i = 0; i < 8; i++)
        block_new(4096, (unsigned char)(0xA0 + i));
    aclTensor *t[NT];
    memcpy(t, p.t, sizeof t);

    const int64_t d = 12345;
    const int64_t gw_strides[3] = {1, TWO62 - d, d + 100};
    t[GRAD_WEIGHT] = strided(&p, GRAD_WEIGHT, gw_strides, 0, TWO62 + 101, p.dev[GRAD_WEIGHT]);
    expect_refused(t, p.pad, "gradWeight strides {1, 2^62 - d, d + 100}", "gradWeight", "overflow");
    aclDestroyTensor(t[GRAD_WEIGHT]);
    t[GRAD_WEIGHT] = p.t[GRAD_WEIGHT];

    const int64_t self_strides[3] = {TWO61, 1, TWO61 + 1000};
    t[SELF] = strided(&p, SELF, self_strides, 0, TWO62 + 1001, p.dev[SELF]);
    expect_refused(t, p.pad, "self strides {2^61, 1, 2^61 + 1000}", "self", "overflow");
    aclDestroyTensor(t[SELF]);
    t[SELF] = p.t[SELF];

    /* a small dense view whose storage claims 2^62 floats (2^64 bytes) */
    for (int i = 0; i < NT; i++) {
        int64_t strides[3];
        contiguous_strides(p.dims[i], p.rank[i], strides);
        t[i] = strided(&p, i, strides, 0, TWO62, p.dev[i]);
        char what[96];
        snprintf(what, sizeof what, "%s's storage of 2^62 floats", NAMES[i]);
        expect_refused(t, p.pad, what, NAMES[i], "overflow");
        aclDestroyTensor(t[i]);
        /* storage dims whose product fits, whose bytes do not */
        const int64_t sd[2] = {INT64_C(1) << 31, INT64_C(1) << 31};
        t[i] = aclCreateTensor(p.dims[i], (uint64_t)p.rank[i], ACL_FLOAT, strides, 0, ACL_FORMAT_ND, sd, 2, p.dev[i]);
        snprintf(what, sizeof what, "%s's storage [2^31, 2^31]", NAMES[i]);
        expect_refused(t, p.pad, what, NAMES[i], "overflow");
        aclDestroyTensor(t[i]);
        t[i] = p.t[i];
    }

    /* the valid problem runs, and only its outputs change */
    uint64_t ws = 0;
    aclOpExecutor *ex = NULL;
    EXPECT(phase1_of(p.t, p.pad, &ws, &ex) == 0, "the valid problem: %s", recent_msg());
    EXPECT(phase2_of(ex, ws, NULL) == 0, "the valid problem's phase 2: %s", recent_msg());
    for (int i = GRAD_INPUT; i < NT; i++)
        block_accept(p.dev[i]);
    EXPECT(blocks_unchanged("after the valid run"), "the valid run changed a block beside its outputs");
    problem_free(&p);
    blocks_free();
}

/* An offset from one block into another passes a check of the view's own
 * bytes; measured from the storage's start it cannot. */
static void offset_into_another_block(void)
{
    /* blocks made first usually lie above those made later */
    void *others[8];
    for (int i = 0; i < 8; i++)
        others[i] = block_new(1 << 16, (unsigned char)(0xB0 + i));
    Problem p;
    problem_init(&p, 3, 2, 2, 2, 3, 1);
    for (int out = GRAD_INPUT; out < NT; out++) {
        /* a bystander above the output's own block */
        char *own = (char *)p.dev[out], *target = NULL;
        for (int i = 0; i < 8; i++)
            if ((char *)others[i] > own && (!target || (char *)others[i] < target))
                target = (char *)others[i];
        if (!target) {
            fprintf(stderr, "%s: no block above its own; skipped\n", NAMES[out]);
            continue;
        }
        int64_t offset = (int64_t)((uintptr_t)target - (uintptr_t)own) / 4, strides[3];
        contiguous_strides(p.dims[out], p.rank[out], strides);
        aclTensor *t[NT];
        memcpy(t, p.t, sizeof t);
        t[out] = strided(&p, out, strides, offset, offset + p.count[out], own);
        uint64_t ws = 0;
        aclOpExecutor *ex = NULL;
        char what[96];
        snprintf(what, sizeof what, "%s offset into another block", NAMES[out]);
        aclnnStatus st = phase1_of(t, p.pad, &ws, &ex);
        EXPECT(st == 0, "%s: phase 1 cannot know the blocks, yet gave %d: %s", what, st, recent_msg());
        if (st == 0) {
            st = phase2_of(ex, ws, NULL);
            const char *msg = recent_msg();
            EXPECT(st == ACLNN_ERR_PARAM_INVALID, "%s: phase 2 gave %d (%s)", what, st, msg);
            EXPECT(strstr(msg, NAMES[out]) != NULL && strstr(msg, "run past the end") != NULL,
                   "%s: the message: '%s'", what, msg);
            if (st == ACLNN_ERR_PARAM_INVALID)
                EXPECT_EQ(aclDestroyAclOpExecutor(ex), 0, "the refused executor is still live");
        }
        EXPECT(blocks_unchanged(what), "%s: a block changed", what);
        aclDestroyTensor(t[out]);
    }
    problem_free(&p);
    blocks_free();
}

/* T_out = T + 2*pad + 1 - K at the edges of int64_t. */
static void shape_arithmetic(void)
{
    /* T = INT64_MAX with pad 1: the sum passes INT64_MAX. The tensors are
     * never run; no memory behind them is needed. */
    const int64_t huge_dims[NT][3] = {{INT64_MAX, 1, 2}, {INT64_MAX, 1, 2}, {1, 2, 2}, {2},
                                      {INT64_MAX, 1, 2}, {1, 2, 2},        {2}};
    const int64_t huge_strides[NT][3] = {{2, 2, 1}, {2, 2, 1}, {4, 2, 1}, {1}, {2, 2, 1}, {4, 2, 1}, {1}};
    aclTensor *t[NT];
    for (int i = 0; i < NT; i++)
        t[i] = make_tensor(huge_dims[i], i == BIAS || i == GRAD_BIAS ? 1 : 3, ACL_FLOAT, huge_strides[i], 0,
                           ACL_FORMAT_ND, 1, NULL);
    uint64_t ws = 0;
    aclOpExecutor *ex = NULL;
    aclnnStatus st = phase1_of(t, 1, &ws, &ex);
    const char *msg = recent_msg();
    EXPECT(st == ACLNN_ERR_PARAM_INVALID, "T = INT64_MAX, pad 1: phase 1 gave %d (%s)", st, msg);
    EXPECT(strstr(msg, "T_out") && strstr(msg, "overflows int64_t") && strstr(msg, "pad 1") &&
               strstr(msg, "9223372036854775807"),
           "T = INT64_MAX, pad 1: the message: '%s'", msg);
    for (int i = 0; i < NT; i++)
        aclDestroyTensor(t[i]);

    /* Valid, with only self, bias and gradBias non-empty (C_in = 0). */
    const struct {
        int64_t T, K, pad, To;
    } cases[] = {{INT64_MAX, INT64_MAX, 0, 1}, {INT64_MAX, INT64_MAX - 1, 0, 2}, {0, INT64_MAX, TWO62, 2},
                 {INT64_MAX, INT64_MAX, 1, 3}, {TWO62, TWO62, 0, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        Problem p;
        problem_shapes(&p, 0, 2, 0, 0, 3, 0);
        p.dims[SELF][0] = p.To = cases[c].To;
        p.dims[INPUT][0] = p.dims[GRAD_INPUT][0] = cases[c].T;
        p.dims[WEIGHT][0] = p.dims[GRAD_WEIGHT][0] = cases[c].K;
        p.count[SELF] = cases[c].To * 2 * 3;
        char what[160];
        snprintf(what, sizeof what, "C_in 0, T %lld, K %lld, pad %lld", (long long)cases[c].T, (long long)cases[c].K,
                 (long long)cases[c].pad);
        void *dev[NT];
        float self[18], gb[3] = {0, 0, 0};
        for (int i = 0; i < NT; i++) {
            /* the empty ones' strides do not matter (and dense ones would
             * overflow) */
            int64_t strides[3] = {0, 0, 0};
            if (i == SELF || i == BIAS || i == GRAD_BIAS)
                contiguous_strides(p.dims[i], p.rank[i], strides);
            size_t bytes = (size_t)(i == SELF ? p.count[SELF] : 3) * sizeof(float);
            dev[i] = block_new(bytes, 0x5A);
            t[i] = make_tensor(p.dims[i], (uint64_t)p.rank[i], ACL_FLOAT, strides, 0, ACL_FORMAT_ND,
                               i == SELF ? p.count[SELF] : i == BIAS || i == GRAD_BIAS ? 3 : 0, dev[i]);
        }
        for (int64_t e = 0; e < p.count[SELF]; e++)
            self[e] = (float)(e % 5);
        block_write(dev[SELF], 0, self, (size_t)p.count[SELF] * sizeof(float));
        st = phase1_of(t, cases[c].pad, &ws, &ex);
        EXPECT(st == 0, "%s: phase 1 gave %d: %s", what, st, recent_msg());
        if (st == 0) {
            st = phase2_of(ex, ws, NULL);
            EXPECT(st == 0, "%s: phase 2 gave %d: %s", what, st, recent_msg());
            block_read(dev[GRAD_BIAS], 0, gb, sizeof gb);
            for (int o = 0; o < 3; o++) {
                float want = 0;
                for (int64_t r = 0; r < cases[c].To * 2; r++)
                    want += self[r * 3 + o];
                EXPECT(gb[o] == want, "%s: gradBias[%d] = %g, want %g", what, o, gb[o], want);
            }
            block_accept(dev[GRAD_BIAS]);
        }
        EXPECT(blocks_unchanged(what), "%s: a block other than gradBias changed", what);
        for (int i = 0; i < NT; i++)
            aclDestroyTensor(t[i]);
        blocks_free();
    }
}

int main(void)
{
    EXPECT_EQ(aclInit(NULL), ACL_SUCCESS, "aclInit");
    EXPECT_EQ(aclrtSetDevice(0), ACL_SUCCESS, "aclrtSetDevice");
    byte_overflows();
    offset_into_another_block();
    shape_arithmetic();
    EXPECT_EQ(aclrtResetDevice(0), ACL_SUCCESS, "aclrtResetDevice");
    EXPECT_EQ(aclFinalize(), ACL_SUCCESS, "aclFinalize");
    return finish("hostile_views");
}
