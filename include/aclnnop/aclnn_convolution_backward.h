/*
 * convtbc: aclnnConvTbcBackward, the backward pass of the TBC 1-D
 * convolution. Prototypes follow CANN's aclnnop/aclnn_convolution_backward.h.
 */
#ifndef CONVTBC_ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H
#define CONVTBC_ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnConvTbcBackwardGetWorkspaceSize(
    const aclTensor *self, const aclTensor *input, const aclTensor *weight, const aclTensor *bias, int64_t pad,
    int8_t cubeMathType, aclTensor *gradInput, aclTensor *gradWeight, aclTensor *gradBias, uint64_t *workspaceSize,
    aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnConvTbcBackward(void *workspace, uint64_t workspaceSize,
                                                     aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* CONVTBC_ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H */
