/*
 * What the API layer's other files need from aclnnConvTbc beyond its
 * public header.
 */
#ifndef CONVTBC_API_CONV_TBC_FORWARD_H
#define CONVTBC_API_CONV_TBC_FORWARD_H

#include "aclnn/acl_meta.h"

/* Phase 2 on the calling thread, for an executor whose tensors all view
 * host memory the caller owns (see ctbc_conv_tbc_backward_run_host). */
aclnnStatus ctbc_conv_tbc_run_host(aclOpExecutor *executor, void *workspace);

#endif /* CONVTBC_API_CONV_TBC_FORWARD_H */
