/*
 * aclnnConvTbc through the C API on host buffers (the suite runs it with
 * CONVTBC_CHECK_MEMORY=0, and under ASan+UBSan): every implementation
 * forced in turn on float32 problems with padding, a strided view and empty
 * sizes, against a plain double reference of the forward formula; phase-1
 * refusals that must not touch out; an executor run twice (repeatable).
 */
#include "test_common.h"

#include "aclnnop/aclnn_convolution.h"
#include "convtbc/convtbc_ext.h"

static const char *const IMPLEMENTATIONS[] = {"forward_gemm", "forward_gemm_positions", "forward_dot",
                                              "forward_reference"};

typedef struct {
    int64_t t, b, c_in, k, c_out, pad;
} sizes;

static float value(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*state >> 40) % 2001) / 1000.0f - 1.0f;
}

/* One problem; x_strided: self is every other channel of a wider buffer. */
static void check_problem(const sizes *s, int x_strided, const char *implementation)
{
    const int64_t t_out = s->t + 2 * s->pad + 1 - s->k;
    const int64_t x_width = x_strided ? 2 * s->c_in : s->c_in;
    const int64_t x_count = s->t * s->b * x_width, w_count = s->k * s->c_in * s->c_out;
    const int64_t y_count = t_out * s->b * s->c_out;
    float *x = malloc((size_t)(x_count + 1) * sizeof *x), *w = malloc((size_t)(w_count + 1) * sizeof *w);
    float *bias = malloc((size_t)(s->c_out + 1) * sizeof *bias), *y = malloc((size_t)(y_count + 1) * sizeof *y);
    uint64_t state = (uint64_t)(s->t * 131 + s->c_in * 7 + s->c_out);
    for (int64_t i = 0; i < x_count; i++)
        x[i] = value(&state);
    for (int64_t i = 0; i < w_count; i++)
        w[i] = value(&state);
    for (int64_t i = 0; i < s->c_out; i++)
        bias[i] = value(&state);
    for (int64_t i = 0; i < y_count; i++)
        y[i] = NAN;

    const int64_t x_dims[] = {s->t, s->b, s->c_in}, x_strides[] = {s->b * x_width, x_width, x_strided ? 2 : 1};
    const int64_t x_storage[] = {x_count > 0 ? x_count : 1};
    const int64_t w_dims[] = {s->k, s->c_in, s->c_out}, w_strides[] = {s->c_in * s->c_out, s->c_out, 1};
    const int64_t b_dims[] = {s->c_out}, b_strides[] = {1};
    const int64_t y_dims[] = {t_out, s->b, s->c_out}, y_strides[] = {s->b * s->c_out, s->c_out, 1};
    aclTensor *tx = aclCreateTensor(x_dims, 3, ACL_FLOAT, x_strides, 0, ACL_FORMAT_ND, x_storage, 1, x);
    aclTensor *tw = aclCreateTensor(w_dims, 3, ACL_FLOAT, w_strides, 0, ACL_FORMAT_ND, w_dims, 3, w);
    aclTensor *tb = aclCreateTensor(b_dims, 1, ACL_FLOAT, b_strides, 0, ACL_FORMAT_ND, b_dims, 1, bias);
    aclTensor *ty = aclCreateTensor(y_dims, 3, ACL_FLOAT, y_strides, 0, ACL_FORMAT_ND, y_dims, 3, y);

    EXPECT_EQ(convtbcForceImplementations(implementation), 0, "convtbcForceImplementations");
    uint64_t workspace_size = 0;
    aclOpExecutor *executor = NULL;
    aclnnStatus status = aclnnConvTbcGetWorkspaceSize(tx, tw, tb, s->pad, ty, 0, &workspace_size, &executor);
    EXPECT(status == 0, "%s T%lld B%lld Ci%lld K%lld Co%lld p%lld: phase 1 %d: %s", implementation, (long long)s->t,
           (long long)s->b, (long long)s->c_in, (long long)s->k, (long long)s->c_out, (long long)s->pad, status,
           recent_msg());
    if (status == 0) {
        void *workspace = workspace_size ? malloc((size_t)workspace_size) : NULL;
        EXPECT_EQ(aclSetAclOpExecutorRepeatable(executor), 0, "repeatable");
        for (int run = 0; run < 2; run++) { /* a repeatable executor runs again, the same */
            EXPECT_EQ(aclnnConvTbc(workspace, workspace_size, executor, NULL), 0, "phase 2");
            double worst = 0, scale = 1e-30;
            for (int64_t t = 0; t < t_out; t++)
                for (int64_t b = 0; b < s->b; b++)
                    for (int64_t o = 0; o < s->c_out; o++) {
                        const double want = forward_reference(s->t, s->c_in, s->k, s->c_out, s->pad, x, x_strides, w, bias, t, b, o);
                        const double got = y[(t * s->b + b) * s->c_out + o];
                        worst = fmax(worst, isnan(got) ? INFINITY : fabs(got - want));
                        scale = fmax(scale, fabs(want));
                    }
            EXPECT(worst <= 1e-4 * scale, "%s T%lld B%lld Ci%lld K%lld Co%lld p%lld strided %d: error %g of %g",
                   implementation, (long long)s->t, (long long)s->b, (long long)s->c_in, (long long)s->k,
                   (long long)s->c_out, (long long)s->pad, x_strided, worst, scale);
        }
        EXPECT_EQ(aclDestroyAclOpExecutor(executor), 0, "destroy");
        free(workspace);
    }
    convtbcForceImplementations("");
    aclDestroyTensor(tx), aclDestroyTensor(tw), aclDestroyTensor(tb), aclDestroyTensor(ty);
    free(x), free(w), free(bias), free(y);
}

/* Refused calls leave out as it was. */
static void check_refusals(void)
{
    float x[12], w[36], bias[4], y[16];
    for (int i = 0; i < 16; i++)
        y[i] = 5.0f;
    for (int i = 0; i < 12; i++)
        x[i] = 1.0f;
    for (int i = 0; i < 36; i++)
        w[i] = 1.0f;
    for (int i = 0; i < 4; i++)
        bias[i] = 1.0f;
    const int64_t xd[] = {2, 2, 3}, wd[] = {3, 3, 4}, bd[] = {4}, yd[] = {2, 2, 4}, wrong_yd[] = {3, 2, 4};
    aclTensor *tx = aclCreateTensor(xd, 3, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCL, xd, 3, x);
    aclTensor *tw = aclCreateTensor(wd, 3, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCL, wd, 3, w);
    aclTensor *tb = aclCreateTensor(bd, 1, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, bd, 1, bias);
    aclTensor *ty = aclCreateTensor(yd, 3, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCL, yd, 3, y);
    aclTensor *wrong = aclCreateTensor(wrong_yd, 3, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCL, wrong_yd, 3, y);
    uint64_t size = 0;
    aclOpExecutor *executor = NULL;
    EXPECT_EQ(aclnnConvTbcGetWorkspaceSize(NULL, tw, tb, 1, ty, 1, &size, &executor), 161001, "NULL self");
    EXPECT_EQ(aclnnConvTbcGetWorkspaceSize(tx, tw, tb, 1, ty, 1, NULL, &executor), 161001, "NULL workspaceSize");
    EXPECT_EQ(aclnnConvTbcGetWorkspaceSize(tx, tw, tb, 1, wrong, 1, &size, &executor), 161002, "out's shape");
    EXPECT_EQ(aclnnConvTbcGetWorkspaceSize(tx, tw, tb, -1, ty, 1, &size, &executor), 161002, "pad < 0");
    EXPECT_EQ(aclnnConvTbcGetWorkspaceSize(tx, tw, tb, 1, ty, 5, &size, &executor), 161002, "cubeMathType 5");
    EXPECT_EQ(aclnnConvTbcGetWorkspaceSize(tx, tw, tb, 1, tx, 1, &size, &executor), 161002, "out is self");
    for (int i = 0; i < 16; i++)
        EXPECT(y[i] == 5.0f, "out[%d] written by a refused call", i);
    /* CANN's documented case: every output 7 */
    EXPECT_EQ(aclnnConvTbcGetWorkspaceSize(tx, tw, tb, 1, ty, 1, &size, &executor), 0, "documented case");
    void *workspace = size ? malloc((size_t)size) : NULL;
    EXPECT_EQ(aclnnConvTbc(workspace, size, executor, NULL), 0, "documented case, phase 2");
    for (int i = 0; i < 16; i++)
        EXPECT(y[i] == 7.0f, "documented case: out[%d] = %g, want 7", i, y[i]);
    free(workspace);
    aclDestroyTensor(tx), aclDestroyTensor(tw), aclDestroyTensor(tb), aclDestroyTensor(ty), aclDestroyTensor(wrong);
}

int main(void)
{
    static const sizes problems[] = {
        {9, 3, 5, 3, 4, 1}, {17, 5, 33, 4, 19, 2}, {6, 7, 2, 1, 40, 0}, {12, 2, 300, 2, 3, 3},
        {5, 2, 3, 3, 4, 9}, /* leading and trailing steps read only padding */
        {0, 2, 3, 2, 4, 2}, /* empty self: out is bias */
        {5, 2, 0, 3, 4, 1}, /* no input channels: out is bias */
        {5, 0, 3, 3, 4, 1}, /* no batch: out is empty */
    };
    for (size_t i = 0; i < sizeof problems / sizeof *problems; i++)
        for (size_t m = 0; m < sizeof IMPLEMENTATIONS / sizeof *IMPLEMENTATIONS; m++)
            for (int strided = 0; strided <= 1; strided++)
                check_problem(&problems[i], strided, IMPLEMENTATIONS[m]);
    check_refusals();
    return finish("forward_op");
}
