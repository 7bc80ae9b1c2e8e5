/*
 * aclnnConvTbc, the forward op: phase 1 checks the arguments in CANN's
 * order (the first failure wins, with CANN's status code and a message
 * naming the argument and the expected value), then plans the computation;
 * phase 2 runs the plan (op_frame.c).
 *
 * Where CANN's checker rejects calls a correct convolution would accept
 * (the one-sided pad check, K = 0), convtbc rejects them too: a test double
 * must fail where the NPU fails.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "aclnnop/aclnn_convolution.h"
#include "api/conv_tbc_forward.h"
#include "api/errors.h"
#include "api/executor.h"
#include "api/log.h"
#include "api/op_frame.h"
#include "api/soc_profile.h"
#include "api/tensor.h"
#include "compute/conv_tbc_forward.h"

static const char PHASE1[] = "aclnnConvTbcGetWorkspaceSize";
static const char PHASE2[] = "aclnnConvTbc";

/* The op's tensors in CANN's address-slot order: inputs self 0, weight 1,
 * bias 2; output out 0. */
enum { SELF, WEIGHT, BIAS, OUT, TENSOR_COUNT };
enum { INPUT_COUNT = 3, OUTPUT_COUNT = 1 };
static const char *const TENSOR_NAMES[TENSOR_COUNT] = {"self", "weight", "bias", "out"};

/* out is written; everything else is only read. */
static const unsigned char OVERLAP_PAIRS[][2] = {{OUT, SELF}, {OUT, WEIGHT}, {OUT, BIAS}};

static void compute(const void *compute_plan, void *const *views, void *workspace)
{
    ctbc_forward_execute(compute_plan, views[SELF], views[WEIGHT], views[BIAS], views[OUT], workspace);
}

static const ctbc_op CONV_TBC = {
    .phase1 = PHASE1,
    .phase2 = PHASE2,
    .input_count = INPUT_COUNT,
    .output_count = OUTPUT_COUNT,
    .names = TENSOR_NAMES,
    .overlap_pairs = OVERLAP_PAIRS,
    .overlap_pair_count = sizeof OVERLAP_PAIRS / sizeof *OVERLAP_PAIRS,
    .unused = 0,
    .compute_plan_bytes = sizeof(ctbc_forward_plan),
    .compute = compute,
};

/* cubeMathType values (CANN's names); the forward op also takes
 * USE_FP32_ADD, which the backward op does not. */
enum { KEEP_DTYPE = 0, ALLOW_FP32_DOWN_PRECISION = 1, USE_FP16 = 2, USE_HF32 = 3, USE_FP32_ADD = 4 };
static const char *const CUBE_MATH_NAMES[] = {"KEEP_DTYPE", "ALLOW_FP32_DOWN_PRECISION", "USE_FP16", "USE_HF32",
                                              "USE_FP32_ADD"};

#define INVALID(...) ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, PHASE1, __VA_ARGS__)

static bool in_list(aclDataType dtype, bool bf16)
{
    return dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || (bf16 && dtype == ACL_BF16);
}

static const char *list_name(bool bf16)
{
    return bf16 ? "[DT_FLOAT, DT_FLOAT16, DT_BF16]" : "[DT_FLOAT, DT_FLOAT16]";
}

/* Step 2, Ascend950 only, before every other check: out and bias alone. */
static aclnnStatus check_950_output_and_bias(const aclTensor *bias, const aclTensor *out)
{
    char a[96];
    if (out->rank != 3)
        return INVALID("out should be 3-dimensional on Ascend950, got %llu dims.", (unsigned long long)out->rank);
    for (int d = 0; d < 3; d++)
        if (out->view_dims[d] < 0)
            return INVALID("out's dims should be >= 0, got shape %s.", ctbc_shape_text(out, a, sizeof a));
    if (bias->rank != 1)
        return INVALID("bias should be 1-dimensional, got %llu dims.", (unsigned long long)bias->rank);
    if (bias->view_dims[0] != out->view_dims[2])
        return INVALID("bias's dim 0 %lld should equal out's dim 2 %lld (C_out) on Ascend950.",
                       (long long)bias->view_dims[0], (long long)out->view_dims[2]);
    if (!in_list(out->dtype, true))
        return INVALID("tensor out not implemented for %s, should be in dtype support list %s on Ascend950.",
                       ctbc_dtype_name(out->dtype), list_name(true));
    if (!in_list(bias->dtype, true))
        return INVALID("tensor bias not implemented for %s, should be in dtype support list %s on Ascend950.",
                       ctbc_dtype_name(bias->dtype), list_name(true));
    if (out->format != ACL_FORMAT_ND && out->format != ACL_FORMAT_NCL)
        return INVALID("the format of out should be ND or NCL, got %s.", ctbc_format_name(out->format));
    if (bias->format != ACL_FORMAT_ND)
        return INVALID("the format of bias should be ND on Ascend950, got %s.", ctbc_format_name(bias->format));
    return ACLNN_SUCCESS;
}

/* Step 3: bias from its own list (FLOAT, FLOAT16, BFLOAT16 on every SoC);
 * self from the SoC's; weight and out equal to self. */
static aclnnStatus check_dtypes(const aclTensor *const *tensors, ctbc_soc_family soc)
{
    const aclTensor *self = tensors[SELF], *weight = tensors[WEIGHT], *out = tensors[OUT];
    const bool bf16 = soc != CTBC_SOC_TRAINING;
    if (!in_list(tensors[BIAS]->dtype, true))
        return INVALID("tensor bias not implemented for %s, should be in dtype support list %s.",
                       ctbc_dtype_name(tensors[BIAS]->dtype), list_name(true));
    if (!in_list(self->dtype, bf16))
        return INVALID("tensor self not implemented for %s, should be in dtype support list %s on %s.",
                       ctbc_dtype_name(self->dtype), list_name(bf16), ctbc_soc()->name);
    if (weight->dtype != self->dtype)
        return INVALID("weight's dtype should equal self's dtype %s, got %s.", ctbc_dtype_name(self->dtype),
                       ctbc_dtype_name(weight->dtype));
    if (out->dtype != weight->dtype)
        return INVALID("out's dtype should equal weight's dtype %s, got %s.", ctbc_dtype_name(weight->dtype),
                       ctbc_dtype_name(out->dtype));
    return ACLNN_SUCCESS;
}

static aclnnStatus check_ranks(const aclTensor *const *tensors)
{
    for (int i = 0; i < TENSOR_COUNT; i++) {
        uint64_t want = i == BIAS ? 1 : 3;
        if (tensors[i]->rank != want)
            return INVALID("%s should be %llu-dimensional, got %llu dims.", TENSOR_NAMES[i],
                           (unsigned long long)want, (unsigned long long)tensors[i]->rank);
    }
    return ACLNN_SUCCESS;
}

/* Step 5: bias's format is not checked (except on Ascend950, step 2). */
static aclnnStatus check_formats(const aclTensor *const *tensors)
{
    for (int i = 0; i < TENSOR_COUNT; i++) {
        aclFormat format = tensors[i]->format;
        if (i != BIAS && format != ACL_FORMAT_ND && format != ACL_FORMAT_NCL)
            return INVALID("the format of %s should be ND or NCL, got %s.", TENSOR_NAMES[i],
                           ctbc_format_name(format));
    }
    return ACLNN_SUCCESS;
}

/* Steps 6 and 7: the values, in CANN's order, then out's shape; fills
 * *t_out. */
static aclnnStatus check_shapes(const aclTensor *const *tensors, int64_t pad, int64_t *t_out)
{
    const int64_t *x = tensors[SELF]->view_dims, *w = tensors[WEIGHT]->view_dims;
    char a[96], b[96];
    for (int i = 0; i < TENSOR_COUNT; i++)
        for (uint64_t d = 0; d < tensors[i]->rank; d++)
            if (tensors[i]->view_dims[d] < 0)
                return INVALID("%s's dim %llu is %lld; dims should be >= 0, got shape %s.", TENSOR_NAMES[i],
                               (unsigned long long)d, (long long)tensors[i]->view_dims[d],
                               ctbc_shape_text(tensors[i], a, sizeof a));
    if (tensors[BIAS]->view_dims[0] != w[2])
        return INVALID("bias's dim 0 %lld should equal weight's dim 2 %lld (C_out).",
                       (long long)tensors[BIAS]->view_dims[0], (long long)w[2]);
    if (w[0] <= 0)
        return INVALID("weight's dim 0 (K) should be > 0, got %lld.", (long long)w[0]);
    if (pad < 0)
        return INVALID("pad should be >= 0, got %lld.", (long long)pad);
    /* CANN checks T + pad >= K with the pad of one side only, so it refuses
     * some valid calls (1 <= T_out <= pad); convtbc refuses them too. In
     * 128 bits: T + pad may pass INT64_MAX. */
    if (ctbc_tensor_numel(tensors[SELF]) != 0 && (__int128)x[0] + pad - w[0] < 0)
        return INVALID("T + pad - K should be >= 0 (CANN checks the padding of one side), got T %lld, pad %lld, "
                       "K %lld.",
                       (long long)x[0], (long long)pad, (long long)w[0]);
    if (x[2] != w[1])
        return INVALID("self's dim 2 %lld should equal weight's dim 1 %lld (C_in); self %s, weight %s.",
                       (long long)x[2], (long long)w[1], ctbc_shape_text(tensors[SELF], a, sizeof a),
                       ctbc_shape_text(tensors[WEIGHT], b, sizeof b));
    const __int128 wide_len = (__int128)x[0] + 2 * (__int128)pad + 1 - w[0];
    const int64_t *y = tensors[OUT]->view_dims;
    if (wide_len < 0 || wide_len > INT64_MAX || y[0] != wide_len || y[1] != x[1] || y[2] != w[2])
        return INVALID("out's shape should be [T + 2*pad - K + 1, B, C_out] = [%lld, %lld, %lld] (T %lld, pad %lld, "
                       "K %lld), got %s.",
                       (long long)wide_len, (long long)x[1], (long long)w[2], (long long)x[0], (long long)pad,
                       (long long)w[0], ctbc_shape_text(tensors[OUT], a, sizeof a));
    *t_out = (int64_t)wide_len;
    return ACLNN_SUCCESS;
}

/* Step 8: any of the five modes for every dtype, except where the cube unit
 * has no FLOAT (the training series): FLOAT only with the modes that allow
 * rounding it down. */
static aclnnStatus check_cube_math_type(const aclTensor *self, int8_t cube_math_type, ctbc_soc_family soc)
{
    if (cube_math_type < KEEP_DTYPE || cube_math_type > USE_FP32_ADD)
        return INVALID("cubeMathType should be in [0, 4] (KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION, USE_FP16, "
                       "USE_HF32, USE_FP32_ADD), got %d.",
                       (int)cube_math_type);
    bool fp32_down = cube_math_type == ALLOW_FP32_DOWN_PRECISION || cube_math_type == USE_FP16;
    if (soc == CTBC_SOC_TRAINING && self->dtype == ACL_FLOAT && !fp32_down)
        return INVALID("cubeMathType %d (%s) does not support dtype %s on %s: it needs ALLOW_FP32_DOWN_PRECISION "
                       "(1) or USE_FP16 (2).",
                       (int)cube_math_type, CUBE_MATH_NAMES[cube_math_type], ctbc_dtype_name(self->dtype),
                       ctbc_soc()->name);
    return ACLNN_SUCCESS;
}

/* CANN's numerics: the dtype the products run in, how FLOAT operands are
 * rounded on the way, and how bias enters. */
static void numerics_for(ctbc_forward_problem *p, aclDataType dtype, int8_t cube_math_type, ctbc_soc_family soc)
{
    if (cube_math_type == USE_FP16 || soc == CTBC_SOC_TRAINING)
        p->compute_dtype = CTBC_F16;
    else
        p->compute_dtype = dtype == ACL_FLOAT16 ? CTBC_F16 : dtype == ACL_BF16 ? CTBC_BF16 : CTBC_F32;
    const bool hf32 = cube_math_type == ALLOW_FP32_DOWN_PRECISION || cube_math_type == USE_HF32;
    p->hf32 = p->compute_dtype == CTBC_F32 && hf32;
    /* BFLOAT16 on the A2/A3 cube takes a FLOAT bias; elsewhere bias is cast
     * to the compute dtype. */
    p->bias_dtype = p->compute_dtype == CTBC_BF16 && soc != CTBC_SOC_ASCEND950 ? CTBC_F32 : p->compute_dtype;
}

aclnnStatus aclnnConvTbcGetWorkspaceSize(const aclTensor *self, const aclTensor *weight, const aclTensor *bias,
                                         const int64_t pad, aclTensor *output, int8_t cubeMathType,
                                         uint64_t *workspaceSize, aclOpExecutor **executor)
{
    if (!workspaceSize || !executor)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, PHASE1,
                         "Expected a proper pointer but got null for argument %s.",
                         workspaceSize ? "executor" : "workspaceSize");
    const aclTensor *const tensors[TENSOR_COUNT] = {self, weight, bias, output};
    for (int i = 0; i < TENSOR_COUNT; i++)
        if (!tensors[i])
            return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, PHASE1,
                             "Expected a proper Tensor but got null for argument %s.", TENSOR_NAMES[i]);

    const ctbc_soc_family soc = ctbc_soc()->family;
    int64_t t_out = 0;
    ctbc_view_geometry views[TENSOR_COUNT];
    aclnnStatus status = ACLNN_SUCCESS;
    if (soc == CTBC_SOC_ASCEND950)
        status = check_950_output_and_bias(bias, output);
    if (status == ACLNN_SUCCESS)
        status = check_dtypes(tensors, soc);
    if (status == ACLNN_SUCCESS)
        status = check_ranks(tensors);
    if (status == ACLNN_SUCCESS)
        status = check_formats(tensors);
    if (status == ACLNN_SUCCESS)
        status = check_shapes(tensors, pad, &t_out);
    if (status == ACLNN_SUCCESS)
        status = check_cube_math_type(self, cubeMathType, soc);
    if (status == ACLNN_SUCCESS)
        status = ctbc_op_check_views(&CONV_TBC, tensors, views);
    aclOpExecutor *made = NULL;
    if (status == ACLNN_SUCCESS)
        status = ctbc_op_make_executor(&CONV_TBC, tensors, views, &made);
    if (status != ACLNN_SUCCESS)
        return status;

    ctbc_forward_problem problem;
    memset(&problem, 0, sizeof problem);
    problem.t = self->view_dims[0];
    problem.b = self->view_dims[1];
    problem.c_in = self->view_dims[2];
    problem.k = weight->view_dims[0];
    problem.c_out = weight->view_dims[2];
    problem.pad = pad;
    problem.t_out = t_out;
    problem.self = ctbc_op_layout(self, &views[SELF]);
    problem.weight = ctbc_op_layout(weight, &views[WEIGHT]);
    problem.bias = ctbc_op_layout(bias, &views[BIAS]);
    problem.out = ctbc_op_layout(output, &views[OUT]);
    numerics_for(&problem, self->dtype, cubeMathType, soc);
    ctbc_forward_plan *plan = ctbc_op_compute_plan(made);
    ctbc_forward_plan_init(plan, &problem);
    made->workspace_bytes = plan->workspace_bytes;

    CTBC_LOG(CTBC_LOG_INFO,
             "%s: T %lld, B %lld, C_in %lld, K %lld, C_out %lld, pad %lld, T_out %lld; dtypes self %s, weight %s, "
             "bias %s, out %s; cubeMathType %d; implementation %s; workspace %llu bytes; %d threads",
             PHASE1, (long long)problem.t, (long long)problem.b, (long long)problem.c_in, (long long)problem.k,
             (long long)problem.c_out, (long long)pad, (long long)t_out, ctbc_dtype_name(self->dtype),
             ctbc_dtype_name(weight->dtype), ctbc_dtype_name(bias->dtype), ctbc_dtype_name(output->dtype),
             (int)cubeMathType, ctbc_forward_implementation_name(plan), (unsigned long long)made->workspace_bytes,
             plan->threads);
    *workspaceSize = made->workspace_bytes;
    *executor = made;
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnConvTbc(void *workspace, const uint64_t workspaceSize, aclOpExecutor *executor,
                         aclrtStream stream)
{
    return ctbc_op_run(&CONV_TBC, workspace, workspaceSize, executor, stream);
}

aclnnStatus ctbc_conv_tbc_run_host(aclOpExecutor *executor, void *workspace)
{
    return ctbc_op_run_host(&CONV_TBC, executor, workspace);
}
