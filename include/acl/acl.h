/*
 * convtbc: the ACL entry header. `#include "acl/acl.h"` plus an operator
 * header is all a host program needs, as with CANN; like CANN's, it only
 * gathers the runtime, operator and model headers.
 */
#ifndef CONVTBC_ACL_ACL_H
#define CONVTBC_ACL_ACL_H

#include "acl_rt.h"
#include "acl_op.h"
#include "acl_mdl.h"

#endif /* CONVTBC_ACL_ACL_H */
