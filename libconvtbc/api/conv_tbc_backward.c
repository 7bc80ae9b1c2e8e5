/*
 * aclnnConvTbcBackward: phase 1 checks the arguments in CANN's order (the
 * first failure wins, with CANN's status code and a message naming the
 * argument), then plans the computation; phase 2 runs the plan.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "aclnnop/aclnn_convolution_backward.h"
#include "api/conv_tbc_backward.h"
#include "api/errors.h"
#include "api/executor.h"
#include "api/log.h"
#include "api/op_frame.h"
#include "api/soc_profile.h"
#include "api/tensor.h"
#include "compute/conv_tbc_compute.h"

static const char PHASE1[] = "aclnnConvTbcBackwardGetWorkspaceSize";
static const char PHASE2[] = "aclnnConvTbcBackward";

/* The op's tensors, in the order CANN checks them. The executor's address
 * slots follow CANN's indices: inputs self 0, input 1, weight 2, bias 3;
 * outputs gradInput 0, gradWeight 1, gradBias 2. */
enum { SELF, INPUT, WEIGHT, BIAS, GRAD_INPUT, GRAD_WEIGHT, GRAD_BIAS, TENSOR_COUNT };
enum { INPUT_COUNT = 4, OUTPUT_COUNT = 3 };
static const char *const TENSOR_NAMES[TENSOR_COUNT] = {"self", "input", "weight", "bias",
                                                       "gradInput", "gradWeight", "gradBias"};
/* Outputs must not share memory with what the op reads (bias is not read)
 * nor with each other. */
static const unsigned char OVERLAP_PAIRS[][2] = {
    {GRAD_INPUT, SELF},       {GRAD_INPUT, INPUT},       {GRAD_INPUT, WEIGHT},  {GRAD_WEIGHT, SELF},
    {GRAD_WEIGHT, INPUT},     {GRAD_WEIGHT, WEIGHT},     {GRAD_BIAS, SELF},     {GRAD_BIAS, INPUT},
    {GRAD_BIAS, WEIGHT},      {GRAD_INPUT, GRAD_WEIGHT}, {GRAD_INPUT, GRAD_BIAS}, {GRAD_WEIGHT, GRAD_BIAS},
};

static void compute(const void *compute_plan, void *const *views, void *workspace)
{
    const ctbc_buffers buffers = {views[SELF],       views[INPUT],       views[WEIGHT],
                                  views[GRAD_INPUT], views[GRAD_WEIGHT], views[GRAD_BIAS]};
    ctbc_execute(compute_plan, &buffers, workspace);
}

static const ctbc_op CONV_TBC_BACKWARD = {
    .phase1 = PHASE1,
    .phase2 = PHASE2,
    .input_count = INPUT_COUNT,
    .output_count = OUTPUT_COUNT,
    .names = TENSOR_NAMES,
    .overlap_pairs = OVERLAP_PAIRS,
    .overlap_pair_count = sizeof OVERLAP_PAIRS / sizeof *OVERLAP_PAIRS,
    .unused = 1u << BIAS, /* the backward pass never reads bias */
    .compute_plan_bytes = sizeof(ctbc_plan),
    .compute = compute,
};

/* cubeMathType values (CANN's names). */
enum { KEEP_DTYPE = 0, ALLOW_FP32_DOWN_PRECISION = 1, USE_FP16 = 2, USE_HF32 = 3 };
static const char *const CUBE_MATH_NAMES[] = {"KEEP_DTYPE", "ALLOW_FP32_DOWN_PRECISION", "USE_FP16", "USE_HF32"};

#define INVALID(...) ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, PHASE1, __VA_ARGS__)

/* ---- the checks, one function per step of CANN's order ------------------- */

/* Every tensor but bias takes the SoC's list; CANN checks bias against
 * FLOAT, FLOAT16, BFLOAT16 on every SoC, the training series included. */
static aclnnStatus check_dtypes(const aclTensor *const *tensors, ctbc_soc_family soc)
{
    for (int i = 0; i < TENSOR_COUNT; i++) {
        aclDataType dtype = tensors[i]->dtype;
        bool bf16 = i == BIAS || soc != CTBC_SOC_TRAINING;
        if (dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || (bf16 && dtype == ACL_BF16))
            continue;
        return INVALID("tensor %s not implemented for %s, should be in dtype support list %s on %s.",
                       TENSOR_NAMES[i], ctbc_dtype_name(dtype),
                       bf16 ? "[DT_FLOAT, DT_FLOAT16, DT_BF16]" : "[DT_FLOAT, DT_FLOAT16]", ctbc_soc()->name);
    }
    return ACLNN_SUCCESS;
}

static aclnnStatus check_formats(const aclTensor *const *tensors)
{
    for (int i = 0; i < TENSOR_COUNT; i++) {
        aclFormat format = tensors[i]->format;
        bool one_dim = i == BIAS || i == GRAD_BIAS;
        bool ok = format == ACL_FORMAT_ND || (!one_dim && format == ACL_FORMAT_NCL);
        if (!ok)
            return INVALID("the format of %s should be %s, got %s.", TENSOR_NAMES[i], one_dim ? "ND" : "ND or NCL",
                           ctbc_format_name(format));
    }
    return ACLNN_SUCCESS;
}

static aclnnStatus check_ranks(const aclTensor *const *tensors)
{
    for (int i = 0; i < TENSOR_COUNT; i++) {
        uint64_t want = (i == BIAS || i == GRAD_BIAS) ? 1 : 3;
        if (tensors[i]->rank != want)
            return INVALID("%s should be %llu-dimensional, got %llu dims.", TENSOR_NAMES[i],
                           (unsigned long long)want, (unsigned long long)tensors[i]->rank);
    }
    return ACLNN_SUCCESS;
}

/* Beyond CANN's checker, which compares dims without looking at their
 * sign: a negative dim describes no tensor (creation records it as given). */
static aclnnStatus check_dims_non_negative(const aclTensor *const *tensors)
{
    char shape[96];
    for (int i = 0; i < TENSOR_COUNT; i++)
        for (uint64_t d = 0; d < tensors[i]->rank; d++)
            if (tensors[i]->view_dims[d] < 0)
                return INVALID("%s's dim %llu is %lld; dims should be >= 0, got shape %s.", TENSOR_NAMES[i],
                               (unsigned long long)d, (long long)tensors[i]->view_dims[d],
                               ctbc_shape_text(tensors[i], shape, sizeof shape));
    return ACLNN_SUCCESS;
}

static bool same_shape(const aclTensor *a, const aclTensor *b)
{
    return a->rank == b->rank && memcmp(a->view_dims, b->view_dims, a->rank * sizeof(int64_t)) == 0;
}

/* Step 6: the shapes must describe one convolution; fills *t_out. */
static aclnnStatus check_problem_shape(const aclTensor *const *tensors, int64_t pad, int64_t *t_out)
{
    const int64_t *x = tensors[INPUT]->view_dims, *w = tensors[WEIGHT]->view_dims;
    const int64_t *dy = tensors[SELF]->view_dims;
    char a[96], b[96];
    if (x[2] != w[1])
        return INVALID("input's channel dim (dim 2) %lld should equal weight's dim 1 %lld (C_in); input %s, weight %s.",
                       (long long)x[2], (long long)w[1], ctbc_shape_text(tensors[INPUT], a, sizeof a),
                       ctbc_shape_text(tensors[WEIGHT], b, sizeof b));
    if (tensors[BIAS]->view_dims[0] != w[2])
        return INVALID("bias's dim 0 %lld should equal weight's dim 2 %lld (C_out).",
                       (long long)tensors[BIAS]->view_dims[0], (long long)w[2]);
    if (pad < 0)
        return INVALID("pad should be >= 0, got %lld.", (long long)pad);
    /* Exact in 128 bits: 2*pad, or T + 2*pad, may pass INT64_MAX while the
     * whole stays within int64_t (a K as large). */
    const __int128 wide_len = (__int128)x[0] + 2 * (__int128)pad + 1 - w[0];
    if (wide_len > INT64_MAX)
        return INVALID("T_out = T + 2*pad + 1 - K overflows int64_t (T %lld is input's dim 0, pad %lld, K %lld is "
                       "weight's dim 0); expected a T_out that self's dim 0 can hold.",
                       (long long)x[0], (long long)pad, (long long)w[0]);
    const int64_t len = (int64_t)wide_len; /* >= 0 - INT64_MAX + 1: fits */
    if (len < 0)
        return INVALID("T + 2*pad + 1 - K should be >= 0, got %lld (T %lld, pad %lld, K %lld).", (long long)len,
                       (long long)x[0], (long long)pad, (long long)w[0]);
    if (dy[0] != len || dy[1] != x[1] || dy[2] != w[2])
        return INVALID("self's shape should be [T_out, B, C_out] = [%lld, %lld, %lld], got %s.", (long long)len,
                       (long long)x[1], (long long)w[2], ctbc_shape_text(tensors[SELF], a, sizeof a));
    *t_out = len;
    return ACLNN_SUCCESS;
}

static aclnnStatus check_output_shapes(const aclTensor *const *tensors)
{
    static const int pairs[][2] = {{GRAD_INPUT, INPUT}, {GRAD_WEIGHT, WEIGHT}, {GRAD_BIAS, BIAS}};
    char a[96], b[96];
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        const aclTensor *out = tensors[pairs[i][0]], *in = tensors[pairs[i][1]];
        if (!same_shape(out, in))
            return INVALID("%s's shape should equal %s's shape %s, got %s.", TENSOR_NAMES[pairs[i][0]],
                           TENSOR_NAMES[pairs[i][1]], ctbc_shape_text(in, a, sizeof a), ctbc_shape_text(out, b, sizeof b));
    }
    return ACLNN_SUCCESS;
}

/* The dtype the products run in: one input dtype, or FLOAT for a mix. */
static aclDataType promoted_dtype(const aclTensor *const *tensors)
{
    aclDataType d = tensors[SELF]->dtype;
    if (tensors[INPUT]->dtype != d || tensors[WEIGHT]->dtype != d)
        return ACL_FLOAT;
    return d;
}

static aclnnStatus check_cube_math_type(const aclTensor *const *tensors, int8_t cube_math_type, ctbc_soc_family soc)
{
    if (cube_math_type < KEEP_DTYPE || cube_math_type > USE_HF32)
        return INVALID("cubeMathType should be in [0, 3] (KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION, USE_FP16, "
                       "USE_HF32), got %d.", (int)cube_math_type);
    if (soc != CTBC_SOC_TRAINING)
        return ACLNN_SUCCESS;
    /* The training series computes FLOAT16 on the cube unit; only the modes
     * that allow rounding FLOAT down take FLOAT, and none takes BFLOAT16. */
    aclDataType d = promoted_dtype(tensors);
    bool fp32_down = cube_math_type == ALLOW_FP32_DOWN_PRECISION || cube_math_type == USE_FP16;
    if (d == ACL_BF16 || (d == ACL_FLOAT && !fp32_down))
        return INVALID("cubeMathType %d (%s) does not support compute dtype %s on %s.", (int)cube_math_type,
                       CUBE_MATH_NAMES[cube_math_type], ctbc_dtype_name(d), ctbc_soc()->name);
    return ACLNN_SUCCESS;
}

static aclnnStatus check_output_dtypes_equal(const aclTensor *const *tensors)
{
    static const int pairs[][2] = {{GRAD_INPUT, INPUT}, {GRAD_WEIGHT, WEIGHT}, {GRAD_BIAS, BIAS}};
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        const aclTensor *out = tensors[pairs[i][0]], *in = tensors[pairs[i][1]];
        if (out->dtype != in->dtype)
            return INVALID("%s's dtype should equal %s's dtype %s on %s, got %s.", TENSOR_NAMES[pairs[i][0]],
                           TENSOR_NAMES[pairs[i][1]], ctbc_dtype_name(in->dtype), ctbc_soc()->name,
                           ctbc_dtype_name(out->dtype));
    }
    return ACLNN_SUCCESS;
}

/* ---- the plan -------------------------------------------------------------- */

static ctbc_rounding rounding_for(int8_t cube_math_type, ctbc_soc_family soc)
{
    switch (cube_math_type) {
    case ALLOW_FP32_DOWN_PRECISION:
        /* A2/A3 round FLOAT down to HF32; the training series has no HF32
         * and goes down to FLOAT16. */
        return soc == CTBC_SOC_TRAINING ? CTBC_ROUND_FP16 : CTBC_ROUND_HF32;
    case USE_HF32: return CTBC_ROUND_HF32;
    case USE_FP16: return CTBC_ROUND_FP16;
    default: return CTBC_ROUND_NONE;
    }
}

static void make_problem(ctbc_problem *p, const aclTensor *const *tensors, const ctbc_view_geometry *views, int64_t pad,
                         int64_t t_out,
                         ctbc_rounding rounding)
{
    memset(p, 0, sizeof *p);
    p->t = tensors[INPUT]->view_dims[0];
    p->b = tensors[INPUT]->view_dims[1];
    p->c_in = tensors[INPUT]->view_dims[2];
    p->k = tensors[WEIGHT]->view_dims[0];
    p->c_out = tensors[WEIGHT]->view_dims[2];
    p->pad = pad;
    p->t_out = t_out;
    p->grad_output = ctbc_op_layout(tensors[SELF], &views[SELF]);
    p->input = ctbc_op_layout(tensors[INPUT], &views[INPUT]);
    p->weight = ctbc_op_layout(tensors[WEIGHT], &views[WEIGHT]);
    p->grad_input = ctbc_op_layout(tensors[GRAD_INPUT], &views[GRAD_INPUT]);
    p->grad_weight = ctbc_op_layout(tensors[GRAD_WEIGHT], &views[GRAD_WEIGHT]);
    p->grad_bias = ctbc_op_layout(tensors[GRAD_BIAS], &views[GRAD_BIAS]);
    p->rounding = rounding;
    /* With C_in = 0, input, weight and both their gradients are empty and
     * gradBias, the sum of self, is all there is to compute; T, K and pad
     * then only fix T_out, and nothing bounds them (T = INT64_MAX with
     * K = INT64_MAX is a T_out of 1). The compute's blocking multiplies and
     * rounds them up, so it gets the same T_out from the smallest ones. */
    if (p->c_in == 0) {
        p->t = t_out - 1;
        p->k = 0;
        p->pad = 0;
    }
}

aclnnStatus aclnnConvTbcBackwardGetWorkspaceSize(const aclTensor *self, const aclTensor *input,
                                                 const aclTensor *weight, const aclTensor *bias, int64_t pad,
                                                 int8_t cubeMathType, aclTensor *gradInput, aclTensor *gradWeight,
                                                 aclTensor *gradBias, uint64_t *workspaceSize,
                                                 aclOpExecutor **executor)
{
    const aclTensor *const tensors[TENSOR_COUNT] = {self, input, weight, bias, gradInput, gradWeight, gradBias};
    for (int i = 0; i < TENSOR_COUNT; i++)
        if (!tensors[i])
            return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, PHASE1,
                             "Expected a proper Tensor but got null for argument %s.", TENSOR_NAMES[i]);
    if (!workspaceSize || !executor)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, PHASE1,
                         "Expected a proper pointer but got null for argument %s.",
                         workspaceSize ? "executor" : "workspaceSize");

    ctbc_soc_family soc = ctbc_soc()->family;
    int64_t t_out = 0;
    ctbc_view_geometry views[TENSOR_COUNT];
    aclnnStatus status = check_dtypes(tensors, soc);
    if (status == ACLNN_SUCCESS)
        status = check_formats(tensors);
    if (status == ACLNN_SUCCESS && ctbc_tensor_numel(self) == 0) {
        char shape[96];
        status = INVALID("self should not be empty, got shape %s.", ctbc_shape_text(self, shape, sizeof shape));
    }
    if (status == ACLNN_SUCCESS)
        status = check_ranks(tensors);
    if (status == ACLNN_SUCCESS)
        status = check_dims_non_negative(tensors);
    if (status == ACLNN_SUCCESS)
        status = check_problem_shape(tensors, pad, &t_out);
    if (status == ACLNN_SUCCESS)
        status = check_output_shapes(tensors);
    if (status == ACLNN_SUCCESS)
        status = check_cube_math_type(tensors, cubeMathType, soc);
    if (status == ACLNN_SUCCESS && soc == CTBC_SOC_ASCEND950)
        status = check_output_dtypes_equal(tensors);
    if (status == ACLNN_SUCCESS)
        status = ctbc_op_check_views(&CONV_TBC_BACKWARD, tensors, views);
    aclOpExecutor *made = NULL;
    if (status == ACLNN_SUCCESS)
        status = ctbc_op_make_executor(&CONV_TBC_BACKWARD, tensors, views, &made);
    if (status != ACLNN_SUCCESS)
        return status;

    ctbc_plan *plan = ctbc_op_compute_plan(made);
    ctbc_problem problem;
    make_problem(&problem, tensors, views, pad, t_out, rounding_for(cubeMathType, soc));
    ctbc_plan_init(plan, &problem);
    made->workspace_bytes = plan->workspace_bytes;

    const int64_t *x = input->view_dims, *w = weight->view_dims;
    CTBC_LOG(CTBC_LOG_INFO,
             "%s: T %lld, B %lld, C_in %lld, K %lld, C_out %lld, pad %lld, T_out %lld; dtypes self %s, input %s, "
             "weight %s, gradInput %s, gradWeight %s, gradBias %s; cubeMathType %d; workspace %llu bytes; "
             "%d threads; implementations gradInput %s, gradWeight %s, gradBias %s",
             PHASE1, (long long)x[0], (long long)x[1], (long long)x[2], (long long)w[0], (long long)w[2],
             (long long)pad, (long long)t_out, ctbc_dtype_name(self->dtype), ctbc_dtype_name(input->dtype),
             ctbc_dtype_name(weight->dtype), ctbc_dtype_name(gradInput->dtype), ctbc_dtype_name(gradWeight->dtype),
             ctbc_dtype_name(gradBias->dtype), (int)cubeMathType, (unsigned long long)made->workspace_bytes,
             plan->threads, ctbc_plan_impl_name(plan, CTBC_GRAD_INPUT),
             ctbc_plan_impl_name(plan, CTBC_GRAD_WEIGHT), ctbc_plan_impl_name(plan, CTBC_GRAD_BIAS));
    *workspaceSize = made->workspace_bytes;
    *executor = made;
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnConvTbcBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                 aclrtStream stream)
{
    return ctbc_op_run(&CONV_TBC_BACKWARD, workspace, workspaceSize, executor, stream);
}

aclnnStatus ctbc_conv_tbc_backward_run_host(aclOpExecutor *executor, void *workspace)
{
    return ctbc_op_run_host(&CONV_TBC_BACKWARD, executor, workspace);
}
