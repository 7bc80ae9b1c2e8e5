/*
 * convtbc: the ACL entry header. `#include "acl/acl.h"` plus an operator
 * header is all a host program needs, as with CANN.
 */
#ifndef CONVTBC_ACL_ACL_H
#define CONVTBC_ACL_ACL_H

#include "acl/acl_base.h"
#include "acl/acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclError aclInit(const char *configPath);
ACL_FUNC_VISIBILITY aclError aclFinalize(void);
ACL_FUNC_VISIBILITY const char *aclGetRecentErrMsg(void);

#ifdef __cplusplus
}
#endif

#endif /* CONVTBC_ACL_ACL_H */
