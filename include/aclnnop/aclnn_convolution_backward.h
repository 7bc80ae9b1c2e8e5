/*
 * convtbc: the convolution backward operators, with CANN's prototypes
 * (aclnnop/aclnn_convolution_backward.h). Each runs in two phases: the
 * GetWorkspaceSize call checks the operands and plans the work into an
 * executor, the second runs that executor on a stream.
 *
 * convtbc computes aclnnConvTbcBackward only; the convolution and deformable
 * convolution entry points are declared because CANN's header declares them,
 * and refuse every call.
 */
#ifndef CONVTBC_ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H
#define CONVTBC_ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnConvolutionBackwardGetWorkspaceSize(
    const aclTensor *gradOutput, const aclTensor *input, const aclTensor *weight, const aclIntArray *biasSizes,
    const aclIntArray *stride, const aclIntArray *padding, const aclIntArray *dilation, bool transposed,
    const aclIntArray *outputPadding, int groups, const aclBoolArray *outputMask, int8_t cubeMathType,
    aclTensor *gradInput, aclTensor *gradWeight, aclTensor *gradBias, uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Gradients of the time-batch-channel 1-D convolution: self is the output
 * gradient (T_out, B, C_out), input (T, B, C_in), weight (K, C_in, C_out),
 * bias (C_out). */
ACLNN_API aclnnStatus aclnnConvTbcBackwardGetWorkspaceSize(
    const aclTensor *self, const aclTensor *input, const aclTensor *weight, const aclTensor *bias, int64_t pad,
    int8_t cubeMathType, aclTensor *gradInput, aclTensor *gradWeight, aclTensor *gradBias, uint64_t *workspaceSize,
    aclOpExecutor **executor);

ACLNN_API aclnnStatus aclnnDeformableConv2dBackwardGetWorkspaceSize(
    const aclTensor *input, const aclTensor *gradOutput, const aclTensor *offsetOut, const aclTensor *weight,
    const aclTensor *offset, const aclIntArray *kernelSize, const aclIntArray *stride, const aclIntArray *padding,
    const aclIntArray *dilation, int64_t groups, int64_t deformableGroups, bool modulated, aclTensor *gradInput,
    aclTensor *gradWeight, aclTensor *gradOffset, aclTensor *gradBias, uint64_t *workspaceSize,
    aclOpExecutor **executor);

ACLNN_API aclnnStatus aclnnConvolutionBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                               const aclrtStream stream);

ACLNN_API aclnnStatus aclnnConvTbcBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                           const aclrtStream stream);

ACLNN_API aclnnStatus aclnnDeformableConv2dBackward(void *workspace, uint64_t workspaceSize,
                                                    aclOpExecutor *executor, const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* CONVTBC_ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H */
