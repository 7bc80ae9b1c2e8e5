/*
 * convtbc: the visibility macro of operator headers (aclnnop/aclnn_util.h in
 * CANN). Operator entry points are exported like the runtime's.
 */
#ifndef CONVTBC_ACLNNOP_ACLNN_UTIL_H
#define CONVTBC_ACLNNOP_ACLNN_UTIL_H

#ifndef ACLNN_API
#if defined(__GNUC__)
#define ACLNN_API __attribute__((visibility("default")))
#else
#define ACLNN_API
#endif
#endif

#endif /* CONVTBC_ACLNNOP_ACLNN_UTIL_H */
