/*
 * convtbc: aclnn library initialisation. Declarations follow CANN's
 * aclnn/aclnn_base.h.
 */
#ifndef CONVTBC_ACLNN_ACLNN_BASE_H
#define CONVTBC_ACLNN_ACLNN_BASE_H

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnInit(const char *configPath);
ACL_FUNC_VISIBILITY aclnnStatus aclnnFinalize(void);

#ifdef __cplusplus
}
#endif

#endif /* CONVTBC_ACLNN_ACLNN_BASE_H */
