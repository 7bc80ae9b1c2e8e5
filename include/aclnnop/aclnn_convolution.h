/*
 * convtbc: the convolution forward operators, with CANN's prototypes
 * (aclnnop/aclnn_convolution.h). Each runs in two phases: the
 * GetWorkspaceSize call checks the operands and plans the work into an
 * executor, the second runs that executor on a stream.
 *
 * convtbc computes aclnnConvTbc only; the general and depthwise convolution
 * entry points are declared because CANN's header declares them, and refuse
 * every call.
 */
#ifndef CONVTBC_ACLNNOP_ACLNN_CONVOLUTION_H
#define CONVTBC_ACLNNOP_ACLNN_CONVOLUTION_H

#include <stdbool.h>
#include <stdint.h>

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnConvolutionGetWorkspaceSize(
    const aclTensor *input, const aclTensor *weight, const aclTensor *bias, const aclIntArray *stride,
    const aclIntArray *padding, const aclIntArray *dilation, bool transposed, const aclIntArray *outputPadding,
    const int64_t groups, aclTensor *output, int8_t cubeMathType, uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* The time-batch-channel 1-D convolution: self (T, B, C_in), weight
 * (K, C_in, C_out), bias (C_out), pad zeros at both ends of T; output
 * (T + 2*pad - K + 1, B, C_out). */
ACLNN_API aclnnStatus aclnnConvTbcGetWorkspaceSize(const aclTensor *self, const aclTensor *weight,
                                                   const aclTensor *bias, const int64_t pad, aclTensor *output,
                                                   int8_t cubeMathType, uint64_t *workspaceSize,
                                                   aclOpExecutor **executor);

ACLNN_API aclnnStatus aclnnConvDepthwise2dGetWorkspaceSize(
    const aclTensor *self, const aclTensor *weight, const aclIntArray *kernelSize, const aclTensor *bias,
    const aclIntArray *stride, const aclIntArray *padding, const aclIntArray *dilation, aclTensor *out,
    int8_t cubeMathType, uint64_t *workspaceSize, aclOpExecutor **executor);

ACLNN_API aclnnStatus aclnnConvolution(void *workspace, const uint64_t workspaceSize, aclOpExecutor *executor,
                                       aclrtStream stream);

ACLNN_API aclnnStatus aclnnConvTbc(void *workspace, const uint64_t workspaceSize, aclOpExecutor *executor,
                                   aclrtStream stream);

ACLNN_API aclnnStatus aclnnConvDepthwise2d(void *workspace, const uint64_t workspaceSize,
                                           aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* CONVTBC_ACLNNOP_ACLNN_CONVOLUTION_H */
