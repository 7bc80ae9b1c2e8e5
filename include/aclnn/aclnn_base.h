/*
 * convtbc: aclnn library set-up, with CANN's prototypes (aclnn/aclnn_base.h).
 * Operator headers include this one.
 */
#ifndef CONVTBC_ACLNN_ACLNN_BASE_H
#define CONVTBC_ACLNN_ACLNN_BASE_H

#include <stdint.h>
#include <stdlib.h>

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Optional: operators work without aclnnInit (configPath may be NULL). */
ACL_FUNC_VISIBILITY aclnnStatus aclnnInit(const char *configPath);
ACL_FUNC_VISIBILITY aclnnStatus aclnnFinalize(void);

#ifdef __cplusplus
}
#endif

#endif /* CONVTBC_ACLNN_ACLNN_BASE_H */
