/*
 * convtbc: the ACL base header. Like CANN's, it only gathers the base types
 * of the runtime and the model API and the status code tables.
 */
#ifndef CONVTBC_ACL_ACL_BASE_H
#define CONVTBC_ACL_ACL_BASE_H

#include "acl/acl_base_rt.h"
#include "acl/acl_base_mdl.h"
#include "error_codes/rt_error_codes.h"
#include "error_codes/ge_error_codes.h"

#endif /* CONVTBC_ACL_ACL_BASE_H */
