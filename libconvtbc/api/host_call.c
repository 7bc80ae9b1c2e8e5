/*
 * convtbcConvTbcBackwardOnHost: the whole two-phase call for host arrays,
 * in C, so that a binding crosses into the library once per call instead
 * of a dozen times (tensors, phase 1, workspace, phase 2, cleanup).
 */
#include <stdlib.h>

#include "aclnnop/aclnn_convolution_backward.h"
#include "api/conv_tbc_backward.h"
#include "api/errors.h"
#include "api/executor.h"
#include "api/soc_profile.h"
#include "convtbc/convtbc_ext.h"

enum { OPERANDS = 7 };

static const char API[] = "convtbcConvTbcBackwardOnHost";

/* NULL for a NULL operand; otherwise the tensor, or NULL with
 * *refused set when it or aclCreateTensor refuses the description. */
static aclTensor *tensor_of(const convtbcHostTensor *operand, bool *refused)
{
    if (!operand)
        return NULL;
    /* aclCreateTensor takes more dims than this struct holds. */
    const size_t capacity = sizeof operand->dims / sizeof *operand->dims;
    if (operand->rank > capacity) {
        ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, API, "a convtbcHostTensor has at most %zu dims, got %llu",
                  capacity, (unsigned long long)operand->rank);
        *refused = true;
        return NULL;
    }
    const int64_t storage = operand->storage_elements;
    aclTensor *tensor = aclCreateTensor(operand->dims, operand->rank, operand->dtype, operand->strides,
                                        operand->offset, ACL_FORMAT_ND, &storage, 1, operand->data);
    *refused = !tensor;
    return tensor;
}

static aclnnStatus run_both_phases(aclTensor *const *t, int64_t pad, int8_t cube_math_type)
{
    uint64_t workspace_bytes = 0;
    aclOpExecutor *executor = NULL;
    CTBC_RETURN_IF_FAILED(aclnnConvTbcBackwardGetWorkspaceSize(t[0], t[1], t[2], t[3], pad, cube_math_type,
                                                               t[4], t[5], t[6], &workspace_bytes, &executor));
    void *workspace = NULL;
    if (workspace_bytes > 0 && posix_memalign(&workspace, 64, (size_t)workspace_bytes) != 0) {
        ctbc_executor_discard(executor);
        return ctbc_fail(ACLNN_ERR_INNER, CTBC_EE_INNER, API, "cannot allocate a workspace of %llu bytes",
                         (unsigned long long)workspace_bytes);
    }
    aclnnStatus status = ctbc_conv_tbc_backward_run_host(executor, workspace);
    ctbc_executor_discard(executor);
    free(workspace);
    return status;
}

aclnnStatus convtbcConvTbcBackwardOnHost(const convtbcHostTensor *self, const convtbcHostTensor *input,
                                         const convtbcHostTensor *weight, const convtbcHostTensor *bias,
                                         int64_t pad, int8_t cubeMathType, const convtbcHostTensor *gradInput,
                                         const convtbcHostTensor *gradWeight, const convtbcHostTensor *gradBias)
{
    const convtbcHostTensor *const operands[OPERANDS] = {self,      input,      weight,  bias,
                                                         gradInput, gradWeight, gradBias};
    aclTensor *tensors[OPERANDS] = {NULL};
    /* This call stands in for aclInit too: it refuses what aclInit would. */
    aclnnStatus status = ctbc_soc_check_environment(API);
    for (int i = 0; i < OPERANDS && status == ACLNN_SUCCESS; i++) {
        bool refused = false;
        tensors[i] = tensor_of(operands[i], &refused);
        if (refused)
            status = ACLNN_ERR_PARAM_INVALID; /* aclCreateTensor recorded why */
    }
    if (status == ACLNN_SUCCESS)
        status = run_both_phases(tensors, pad, cubeMathType);
    for (int i = 0; i < OPERANDS; i++)
        if (tensors[i])
            aclDestroyTensor(tensors[i]);
    return status;
}
