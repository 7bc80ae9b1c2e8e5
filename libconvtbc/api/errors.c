#include "api/errors.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl.h"
#include "api/log.h"

/* A thread keeps its last few messages; aclGetRecentErrMsg hands them out
 * newest first and starts afresh. Fixed buffers: nothing to free at thread
 * exit, and a failing call can always record its message. */
enum { LOG_SLOTS = 8, MSG_BYTES = 1024 };

typedef struct {
    char messages[LOG_SLOTS][MSG_BYTES];
    int count; /* messages recorded since the last read, capped */
    int newest;
    char returned[LOG_SLOTS * (MSG_BYTES + 1)];
} error_log;

static _Thread_local error_log thread_log;

/* The thread's last runtime error code (aclrtGetLastError): the
 * ACL_ERROR_RT_* families, 107xxx, 207xxx and 507xxx, which CANN's runtime
 * layer records; parameter errors caught before it (100000, ...) are not. */
static _Thread_local aclError last_runtime_error;

static bool is_runtime_code(int status)
{
    int family = status / 1000;
    return family == 107 || family == 207 || family == 507;
}

static void format_time(char *out, size_t size)
{
    struct timeval now;
    struct tm parts;
    gettimeofday(&now, NULL);
    localtime_r(&now.tv_sec, &parts);
    /* CANN's stamp: yyyy-mm-dd-hh:mm:ss.mmm.uuu */
    snprintf(out, size, "%04d-%02d-%02d-%02d:%02d:%02d.%03ld.%03ld", parts.tm_year + 1900, parts.tm_mon + 1,
             parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, (long)(now.tv_usec / 1000),
             (long)(now.tv_usec % 1000));
}

int ctbc_fail_at(const char *file, int line, int status, const char *error_id, const char *api, const char *fmt, ...)
{
    if (is_runtime_code(status))
        last_runtime_error = status;
    error_log *log = &thread_log;
    log->newest = (log->newest + 1) % LOG_SLOTS;
    if (log->count < LOG_SLOTS)
        log->count++;
    char *slot = log->messages[log->newest];

    char stamp[96];
    format_time(stamp, sizeof stamp);
    int used = snprintf(slot, MSG_BYTES, "%s: [PID: %ld] %s %s: ", error_id, (long)getpid(), stamp, api);
    if (used < 0 || used >= MSG_BYTES)
        used = 0;
    va_list args;
    va_start(args, fmt);
    vsnprintf(slot + used, (size_t)(MSG_BYTES - used), fmt, args);
    va_end(args);
    if (ctbc_log_enabled(CTBC_LOG_ERROR))
        ctbc_log_write(CTBC_LOG_ERROR, strncmp(api, "aclnn", 5) == 0 ? "OP" : "ASCENDCL", file, line,
                       "%s (status %d)", slot, status);
    return status;
}

const char *aclGetRecentErrMsg(void)
{
    error_log *log = &thread_log;
    if (log->count == 0)
        return NULL;
    size_t used = 0;
    for (int i = 0; i < log->count; i++) {
        const char *msg = log->messages[(log->newest - i + LOG_SLOTS) % LOG_SLOTS];
        size_t len = strlen(msg);
        if (i > 0)
            log->returned[used++] = '\n';
        memcpy(log->returned + used, msg, len);
        used += len;
    }
    log->returned[used] = '\0';
    log->count = 0;
    return log->returned;
}

void ctbc_errors_clear(void) { thread_log.count = 0; }

static aclError check_level(const char *api, aclrtLastErrLevel level)
{
    if (level != ACL_RT_THREAD_LEVEL)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "level %d is invalid: only ACL_RT_THREAD_LEVEL (0) exists", (int)level);
    return ACL_SUCCESS;
}

aclError aclrtPeekAtLastError(aclrtLastErrLevel level)
{
    CTBC_RETURN_IF_FAILED(check_level("aclrtPeekAtLastError", level));
    return last_runtime_error;
}

aclError aclrtGetLastError(aclrtLastErrLevel level)
{
    CTBC_RETURN_IF_FAILED(check_level("aclrtGetLastError", level));
    aclError last = last_runtime_error;
    last_runtime_error = ACL_SUCCESS;
    return last;
}
