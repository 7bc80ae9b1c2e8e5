/*
 * Bad input through the C API: NULL tensors and out-parameters, NULL dims
 * in aclCreateTensor (the only descriptions it refuses), unsupported
 * dtypes/formats/ranks/shapes, negative strides, self-overlapping outputs,
 * bad cubeMathType. Each refusal
 * must come with the documented status and a message naming the argument,
 * and must leave the outputs untouched.
 * Prints FAIL lines and returns non-zero on any failure.
 */
#include "convtbc/convtbc_ext.h"
#include "test_common.h"

enum { T = 5, B = 2, CI = 3, K = 2, CO = 4, PAD = 1, TO = T + 2 * PAD + 1 - K };

static float go_buf[TO * B * CO], x_buf[T * B * CI], w_buf[K * CI * CO], b_buf[CO];
static float gi_buf[T * B * CI], gw_buf[K * CI * CO], gb_buf[CO];
static double d64[256];

typedef struct {
    aclTensor *t[7]; /* self input weight bias gradInput gradWeight gradBias */
} Set;

static const char *NAMES[7] = {"self", "input", "weight", "bias", "gradInput", "gradWeight", "gradBias"};

static void fill_outputs(void)
{
    for (size_t i = 0; i < sizeof gi_buf / 4; ++i) gi_buf[i] = -5.0f;
    for (size_t i = 0; i < sizeof gw_buf / 4; ++i) gw_buf[i] = -5.0f;
    for (size_t i = 0; i < sizeof gb_buf / 4; ++i) gb_buf[i] = -5.0f;
}

static int outputs_untouched(void)
{
    for (size_t i = 0; i < sizeof gi_buf / 4; ++i) if (gi_buf[i] != -5.0f) return 0;
    for (size_t i = 0; i < sizeof gw_buf / 4; ++i) if (gw_buf[i] != -5.0f) return 0;
    for (size_t i = 0; i < sizeof gb_buf / 4; ++i) if (gb_buf[i] != -5.0f) return 0;
    return 1;
}

static aclTensor *dense(const int64_t *dims, int n, aclDataType dt, aclFormat fmt, void *data)
{
    int64_t st[8];
    int64_t count = 1;
    contiguous_strides(dims, n, st);
    for (int i = 0; i < n; ++i) count *= dims[i];
    return make_tensor(dims, (uint64_t)n, dt, st, 0, fmt, count, data);
}

static const int64_t D_SELF[3] = {TO, B, CO}, D_IN[3] = {T, B, CI}, D_W[3] = {K, CI, CO}, D_B[1] = {CO};

static void make_set(Set *s)
{
    s->t[0] = dense(D_SELF, 3, ACL_FLOAT, ACL_FORMAT_ND, go_buf);
    s->t[1] = dense(D_IN, 3, ACL_FLOAT, ACL_FORMAT_NCL, x_buf);
    s->t[2] = dense(D_W, 3, ACL_FLOAT, ACL_FORMAT_ND, w_buf);
    s->t[3] = dense(D_B, 1, ACL_FLOAT, ACL_FORMAT_ND, b_buf);
    s->t[4] = dense(D_IN, 3, ACL_FLOAT, ACL_FORMAT_ND, gi_buf);
    s->t[5] = dense(D_W, 3, ACL_FLOAT, ACL_FORMAT_NCL, gw_buf);
    s->t[6] = dense(D_B, 1, ACL_FLOAT, ACL_FORMAT_ND, gb_buf);
    for (int i = 0; i < 7; ++i) EXPECT(s->t[i] != NULL, "make_set: tensor %d not created", i);
}

static void free_set(Set *s)
{
    for (int i = 0; i < 7; ++i)
        if (s->t[i]) aclDestroyTensor(s->t[i]);
}

/* Phase 1 on the set, with tensor `replace_idx` replaced by `repl` (which
 * may be NULL) when replace_idx >= 0. */
static aclnnStatus phase1(Set *s, int replace_idx, aclTensor *repl, int64_t pad, int8_t cube, const char **msg)
{
    aclTensor *t[7];
    for (int i = 0; i < 7; ++i) t[i] = s->t[i];
    if (replace_idx >= 0) t[replace_idx] = repl;
    uint64_t ws = 0;
    aclOpExecutor *ex = NULL;
    recent_msg();
    fill_outputs();
    aclnnStatus st = aclnnConvTbcBackwardGetWorkspaceSize(t[0], t[1], t[2], t[3], pad, cube, t[4], t[5], t[6], &ws,
                                                          &ex);
    *msg = recent_msg();
    if (st == 0) {
        /* run it so the executor is not leaked */
        void *wsp = ws ? aligned_alloc(64, (size_t)((ws + 63) / 64 * 64)) : NULL;
        aclnnStatus st2 = aclnnConvTbcBackward(wsp, ws, ex, NULL);
        EXPECT(st2 == 0, "phase 2 of a valid call: %d %s", st2, recent_msg());
        free(wsp);
    }
    return st;
}

static void expect_refused(Set *s, int idx, aclTensor *repl, int64_t pad, int8_t cube, aclnnStatus want,
                           const char *name, const char *what)
{
    const char *msg;
    aclnnStatus st = phase1(s, idx, repl, pad, cube, &msg);
    EXPECT(st == want, "%s: status %d, want %d (%s)", what, st, want, msg);
    EXPECT(strncmp(msg, "EZ1001", 6) == 0, "%s: message does not start with EZ1001: '%s'", what, msg);
    EXPECT(name == NULL || strstr(msg, name) != NULL, "%s: message does not name %s: '%s'", what, name, msg);
    EXPECT(outputs_untouched(), "%s: outputs written by a refused call", what);
}

int main(void)
{
    Set s;
    for (int i = 0; i < TO * B * CO; ++i) go_buf[i] = (float)(i % 3);
    for (int i = 0; i < T * B * CI; ++i) x_buf[i] = (float)(i % 4) - 1;
    for (int i = 0; i < K * CI * CO; ++i) w_buf[i] = (float)(i % 5) - 2;
    make_set(&s);
    const char *msg;

    /* baseline succeeds */
    EXPECT_EQ(phase1(&s, -1, NULL, PAD, 0, &msg), 0, "valid call");
    EXPECT(!outputs_untouched(), "valid call wrote nothing");

    /* NULL tensors, each */
    for (int i = 0; i < 7; ++i) {
        char what[64];
        snprintf(what, sizeof what, "NULL %s", NAMES[i]);
        expect_refused(&s, i, NULL, PAD, 0, ACLNN_ERR_PARAM_NULLPTR, NAMES[i], what);
    }
    /* NULL out-parameters */
    {
        uint64_t ws;
        aclOpExecutor *ex;
        recent_msg();
        EXPECT_EQ(aclnnConvTbcBackwardGetWorkspaceSize(s.t[0], s.t[1], s.t[2], s.t[3], PAD, 0, s.t[4], s.t[5], s.t[6],
                                                       NULL, &ex), ACLNN_ERR_PARAM_NULLPTR, "NULL workspaceSize");
        EXPECT(strstr(recent_msg(), "workspaceSize") != NULL, "NULL workspaceSize: message");
        EXPECT_EQ(aclnnConvTbcBackwardGetWorkspaceSize(s.t[0], s.t[1], s.t[2], s.t[3], PAD, 0, s.t[4], s.t[5], s.t[6],
                                                       &ws, NULL), ACLNN_ERR_PARAM_NULLPTR, "NULL executor");
        EXPECT(strstr(recent_msg(), "executor") != NULL, "NULL executor: message");
    }

    /* dtypes */
    {
        const aclDataType bad[] = {ACL_DOUBLE, ACL_INT32, ACL_COMPLEX64, ACL_COMPLEX128, ACL_DT_UNDEFINED, ACL_INT8,
                                   ACL_HIFLOAT8, ACL_FLOAT8_E4M3FN};
        const int64_t *dims[7] = {D_SELF, D_IN, D_W, D_B, D_IN, D_W, D_B};
        for (size_t j = 0; j < sizeof bad / sizeof bad[0]; ++j)
            for (int i = 0; i < 7; ++i) {
                aclTensor *t = dense(dims[i], i == 3 || i == 6 ? 1 : 3, bad[j], ACL_FORMAT_ND, d64);
                EXPECT(t != NULL, "dtype %d tensor not created", bad[j]);
                char what[64];
                snprintf(what, sizeof what, "dtype %d on %s", bad[j], NAMES[i]);
                expect_refused(&s, i, t, PAD, 0, ACLNN_ERR_PARAM_INVALID, NAMES[i], what);
                aclDestroyTensor(t);
            }
        /* NULL wins over a bad dtype */
        aclTensor *t = dense(D_SELF, 3, ACL_DOUBLE, ACL_FORMAT_ND, d64);
        aclTensor *keep = s.t[0];
        s.t[0] = t;
        expect_refused(&s, 6, NULL, PAD, 0, ACLNN_ERR_PARAM_NULLPTR, "gradBias", "NULL gradBias + DOUBLE self");
        s.t[0] = keep;
        aclDestroyTensor(t);
    }

    /* formats */
    {
        aclTensor *t = dense(D_IN, 3, ACL_FLOAT, ACL_FORMAT_NCHW, x_buf);
        expect_refused(&s, 1, t, PAD, 0, ACLNN_ERR_PARAM_INVALID, "input", "NCHW input");
        aclDestroyTensor(t);
        t = dense(D_B, 1, ACL_FLOAT, ACL_FORMAT_NCL, b_buf);
        expect_refused(&s, 3, t, PAD, 0, ACLNN_ERR_PARAM_INVALID, "bias", "NCL bias");
        aclDestroyTensor(t);
        t = dense(D_B, 1, ACL_FLOAT, ACL_FORMAT_NCL, gb_buf);
        expect_refused(&s, 6, t, PAD, 0, ACLNN_ERR_PARAM_INVALID, "gradBias", "NCL gradBias");
        aclDestroyTensor(t);
        t = dense(D_W, 3, ACL_FLOAT, ACL_FORMAT_FRACTAL_NZ, gw_buf);
        expect_refused(&s, 5, t, PAD, 0, ACLNN_ERR_PARAM_INVALID, "gradWeight", "FRACTAL_NZ gradWeight");
        aclDestroyTensor(t);
    }

    /* ranks and shapes */
    {
        const int64_t d2[2] = {T, CI}, bad_self[3] = {TO + 1, B, CO}, bad_gi[3] = {T, B, CI + 1}, bad_b[1] = {CO + 1};
        aclTensor *t = dense(d2, 2, ACL_FLOAT, ACL_FORMAT_ND, x_buf);
        expect_refused(&s, 1, t, PAD, 0, ACLNN_ERR_PARAM_INVALID, "input", "2-D input");
        aclDestroyTensor(t);
        t = dense(bad_self, 3, ACL_FLOAT, ACL_FORMAT_ND, d64);
        expect_refused(&s, 0, t, PAD, 0, ACLNN_ERR_PARAM_INVALID, "self", "self T_out+1");
        aclDestroyTensor(t);
        t = dense(bad_gi, 3, ACL_FLOAT, ACL_FORMAT_ND, d64);
        expect_refused(&s, 4, t, PAD, 0, ACLNN_ERR_PARAM_INVALID, "gradInput", "gradInput C_in+1");
        aclDestroyTensor(t);
        t = dense(bad_b, 1, ACL_FLOAT, ACL_FORMAT_ND, d64);
        expect_refused(&s, 6, t, PAD, 0, ACLNN_ERR_PARAM_INVALID, "gradBias", "gradBias C_out+1");
        aclDestroyTensor(t);
        const int64_t empty_self[3] = {0, B, CO};
        t = dense(empty_self, 3, ACL_FLOAT, ACL_FORMAT_ND, d64);
        expect_refused(&s, 0, t, PAD, 0, ACLNN_ERR_PARAM_INVALID, "self", "empty self");
        aclDestroyTensor(t);
        expect_refused(&s, -1, NULL, -1, 0, ACLNN_ERR_PARAM_INVALID, "pad", "pad -1");
    }

    /* cubeMathType */
    expect_refused(&s, -1, NULL, PAD, 4, ACLNN_ERR_PARAM_INVALID, "cubeMathType", "cubeMathType 4");
    expect_refused(&s, -1, NULL, PAD, -1, ACLNN_ERR_PARAM_INVALID, "cubeMathType", "cubeMathType -1");

    /* negative strides (inside the storage) */
    {
        int64_t st[3] = {-B * CI, CI, 1};
        aclTensor *t = make_tensor(D_IN, 3, ACL_FLOAT, st, (T - 1) * B * CI, ACL_FORMAT_ND, T * B * CI, x_buf);
        EXPECT(t != NULL, "negative-stride tensor not created");
        expect_refused(&s, 1, t, PAD, 0, ACLNN_ERR_PARAM_INVALID, "input", "negative stride input");
        aclDestroyTensor(t);
        t = make_tensor(D_IN, 3, ACL_FLOAT, st, (T - 1) * B * CI, ACL_FORMAT_ND, T * B * CI, gi_buf);
        expect_refused(&s, 4, t, PAD, 0, ACLNN_ERR_PARAM_INVALID, "gradInput", "negative stride gradInput");
        aclDestroyTensor(t);
    }

    /* outputs overlapping themselves */
    {
        int64_t st[3] = {CI, 0, 1}; /* B = 2 rows on the same memory */
        aclTensor *t = make_tensor(D_IN, 3, ACL_FLOAT, st, 0, ACL_FORMAT_ND, T * CI, gi_buf);
        expect_refused(&s, 4, t, PAD, 0, ACLNN_ERR_PARAM_INVALID, "gradInput", "stride-0 gradInput");
        aclDestroyTensor(t);
        int64_t sb[1] = {0};
        t = make_tensor(D_B, 1, ACL_FLOAT, sb, 0, ACL_FORMAT_ND, 1, gb_buf);
        expect_refused(&s, 6, t, PAD, 0, ACLNN_ERR_PARAM_INVALID, "gradBias", "stride-0 gradBias");
        aclDestroyTensor(t);
    }

    /* aclCreateTensor refuses only NULL dims with a non-zero count (and,
     * as CANN cannot represent them, more than 25 dims); everything else is
     * recorded as given and refused when used (tests/c/phase1_views.c). */
    {
        const int64_t d[2] = {2, 3}, st[2] = {3, 1}, sd[1] = {6}, neg[2] = {2, -3}, back[2] = {-3, 1};
        int64_t many[26];
        for (int i = 0; i < 26; ++i) many[i] = 1;
        recent_msg();
        EXPECT(aclCreateTensor(NULL, 2, ACL_FLOAT, st, 0, ACL_FORMAT_ND, sd, 1, d64) == NULL, "NULL viewDims");
        EXPECT(strstr(recent_msg(), "viewDims") != NULL, "no message naming viewDims for NULL viewDims");
        EXPECT(aclCreateTensor(d, 2, ACL_FLOAT, st, 0, ACL_FORMAT_ND, NULL, 1, d64) == NULL, "NULL storageDims");
        EXPECT(strstr(recent_msg(), "storageDims") != NULL, "no message naming storageDims for NULL storageDims");
        EXPECT(aclCreateTensor(many, 26, ACL_FLOAT, many, 0, ACL_FORMAT_ND, sd, 1, d64) == NULL, "26 dims");
        EXPECT(recent_msg()[0] != 0, "no message for 26 dims");
        struct {
            const char *what;
            const int64_t *dims, *strides;
            uint64_t rank;
            int64_t offset;
        } accepted[] = {
            {"a view outside its storage", d, st, 2, 1},
            {"a negative dim", neg, st, 2, 0},
            {"a negative offset", d, st, 2, -4},
            {"a negative stride", d, back, 2, 0},
            {"25 dims", many, many, 25, 0},
            {"NULL dims with a count of 0", NULL, NULL, 0, 0},
        };
        for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; ++i) {
            aclTensor *t = aclCreateTensor(accepted[i].dims, accepted[i].rank, ACL_FLOAT, accepted[i].strides,
                                           accepted[i].offset, ACL_FORMAT_ND, sd, 1, d64);
            EXPECT(t != NULL, "aclCreateTensor refused %s: %s", accepted[i].what, recent_msg());
            if (t) aclDestroyTensor(t);
        }
    }

    /* The largest problems convtbcPlanImplementations takes (every size
     * 2^24): each implementation's applies and cost are asked about them,
     * whose size arithmetic must not overflow (UBSan watches) */
    {
        const int64_t m = INT64_C(1) << 24;
        const aclDataType dtypes[3] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
        char names[256];
        for (int j = 0; j < 3; ++j) {
            EXPECT_EQ(convtbcPlanImplementations(m, m, m, m, m, m, dtypes[j], names, sizeof names), 0,
                      "plan of the largest sizes");
            EXPECT_EQ(convtbcPlanImplementations(m, m, 2, m, m, m, dtypes[j], names, sizeof names), 0,
                      "plan of the largest sizes, two input channels");
        }
    }

    /* phase 2 NULL executor */
    EXPECT_EQ(aclnnConvTbcBackward(NULL, 0, NULL, NULL), ACLNN_ERR_PARAM_NULLPTR, "phase 2 NULL executor");
    recent_msg();

    free_set(&s);
    return finish("bad_inputs");
}
