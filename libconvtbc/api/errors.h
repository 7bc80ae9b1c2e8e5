/*
 * The per-thread error log behind aclGetRecentErrMsg (and the thread's last
 * runtime error code behind aclrtGetLastError / aclrtPeekAtLastError), and
 * the one place that formats messages. Every failing API call leaves
 * exactly one message that names the API, the argument and what was
 * expected.
 */
#ifndef CONVTBC_API_ERRORS_H
#define CONVTBC_API_ERRORS_H

#include "acl/acl_base.h"

/* CANN's error id for aclnn parameter errors (AclNN_Parameter_Error). */
#define CTBC_EZ_PARAM "EZ1001"
/* convtbc's ids for runtime misuse and internal failures (CANN's runtime
 * uses the EE/EH families for these). */
#define CTBC_EE_RUNTIME "EH0001"
#define CTBC_EE_INNER "EZ9999"

#if defined(__GNUC__)
#define CTBC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CTBC_PRINTF(a, b)
#endif

/* Records "<id>: [PID: n] <time> <api>: <text>" for the calling thread (and
 * an ERROR log line located at the caller) and returns `status`, so that
 * checks read `return ctbc_fail(...)`. */
#define ctbc_fail(...) ctbc_fail_at(__FILE__, __LINE__, __VA_ARGS__)
int ctbc_fail_at(const char *file, int line, int status, const char *error_id, const char *api, const char *fmt, ...)
    CTBC_PRINTF(6, 7);

/* Drops the calling thread's pending messages, as reading them would. */
void ctbc_errors_clear(void);

/* Returns from the calling function when `expr` is not 0 (success). */
#define CTBC_RETURN_IF_FAILED(expr)                                                                          \
    do {                                                                                                      \
        int failed_status_ = (expr);                                                                          \
        if (failed_status_ != 0)                                                                              \
            return failed_status_;                                                                            \
    } while (0)

#endif /* CONVTBC_API_ERRORS_H */
