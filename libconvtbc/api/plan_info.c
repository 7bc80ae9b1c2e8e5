/*
 * convtbcPlanImplementations: which implementation phase 1 would pick for
 * each gradient of a problem, and for the forward op's output (what
 * `convtbc info --plan` prints), without
 * building tensors or an executor; convtbcForceImplementations: forcing
 * one (tests run every implementation on the same problems).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "aclnn/opdev/op_errno.h"
#include "api/errors.h"
#include "compute/conv_tbc_compute.h"
#include "compute/conv_tbc_forward.h"
#include "convtbc/convtbc_ext.h"

static const char API[] = "convtbcPlanImplementations";

/* Contiguous [d0, d1, d2] strides. */
static ctbc_layout contiguous(ctbc_dtype dtype, int64_t d1, int64_t d2)
{
    return (ctbc_layout){dtype, {d1 * d2, d2, 1}};
}

aclnnStatus convtbcPlanImplementations(int64_t t, int64_t b, int64_t cIn, int64_t k, int64_t cOut, int64_t pad,
                                       aclDataType dataType, char *names, size_t namesSize)
{
    if (!names)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, API, "names is NULL: expected a buffer");
    ctbc_dtype dtype;
    switch (dataType) {
    case ACL_FLOAT: dtype = CTBC_F32; break;
    case ACL_FLOAT16: dtype = CTBC_F16; break;
    case ACL_BF16: dtype = CTBC_BF16; break;
    default:
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, API,
                         "dataType is %d: expected ACL_FLOAT, ACL_FLOAT16 or ACL_BF16", (int)dataType);
    }
    /* sizes far below overflow: t_out and the strides stay exact */
    const int64_t limit = INT64_C(1) << 24;
    const int64_t sizes[] = {t, b, cIn, k, cOut, pad};
    static const char *const size_names[] = {"T", "B", "C_in", "K", "C_out", "pad"};
    for (int i = 0; i < 6; i++)
        if (sizes[i] < 0 || sizes[i] > limit)
            return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, API, "%s is %lld: expected 0..%lld",
                             size_names[i], (long long)sizes[i], (long long)limit);
    const int64_t t_out = t + 2 * pad + 1 - k;
    if (t_out < 1)
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, API,
                         "T + 2*pad + 1 - K is %lld: expected at least 1", (long long)t_out);

    ctbc_problem problem;
    memset(&problem, 0, sizeof problem);
    problem.t = t;
    problem.b = b;
    problem.c_in = cIn;
    problem.k = k;
    problem.c_out = cOut;
    problem.pad = pad;
    problem.t_out = t_out;
    problem.grad_output = contiguous(dtype, b, cOut);
    problem.input = problem.grad_input = contiguous(dtype, b, cIn);
    problem.weight = problem.grad_weight = contiguous(dtype, cIn, cOut);
    problem.grad_bias = (ctbc_layout){dtype, {1, 0, 0}};
    problem.rounding = CTBC_ROUND_NONE;
    ctbc_plan plan;
    ctbc_plan_init(&plan, &problem);

    /* The forward op on the same sizes: self is input, out is grad_output. */
    ctbc_forward_problem forward;
    memset(&forward, 0, sizeof forward);
    forward.t = t, forward.b = b, forward.c_in = cIn, forward.k = k, forward.c_out = cOut, forward.pad = pad;
    forward.t_out = t_out;
    forward.self = problem.input;
    forward.weight = problem.weight;
    forward.bias = problem.grad_bias;
    forward.out = problem.grad_output;
    forward.compute_dtype = forward.bias_dtype = dtype;
    ctbc_forward_plan forward_plan;
    ctbc_forward_plan_init(&forward_plan, &forward);

    char text[160];
    const int n = snprintf(text, sizeof text, "%s %s %s %s", ctbc_plan_impl_name(&plan, CTBC_GRAD_INPUT),
                           ctbc_plan_impl_name(&plan, CTBC_GRAD_WEIGHT), ctbc_plan_impl_name(&plan, CTBC_GRAD_BIAS),
                           ctbc_forward_implementation_name(&forward_plan));
    if ((size_t)n >= namesSize)
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, API, "namesSize is %zu: expected at least %d",
                         namesSize, n + 1);
    memcpy(names, text, (size_t)n + 1);
    return ACLNN_SUCCESS;
}

aclnnStatus convtbcForceImplementations(const char *names)
{
    if (ctbc_force_implementations(names) != 0)
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, "convtbcForceImplementations",
                         "names is '%s': expected comma-separated implementation names (convtbc info --plan "
                         "shows those in use)",
                         names);
    return ACLNN_SUCCESS;
}
