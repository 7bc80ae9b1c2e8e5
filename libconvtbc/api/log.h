/*
 * CANN-style logs. Off unless ASCEND_GLOBAL_LOG_LEVEL or
 * ASCEND_SLOG_PRINT_TO_STDOUT is set: then lines of CANN's plog shape
 *   [ERROR] ASCENDCL(4711,train):2026-03-02-14:21:45.118.302 [memory.c:210]text
 * at and above the level (0 DEBUG, 1 INFO, 2 WARNING, 3 ERROR (default),
 * 4 none) go to stdout when ASCEND_SLOG_PRINT_TO_STDOUT=1, else to
 * $ASCEND_PROCESS_LOG_PATH/plog/plog-<pid>_<timestamp>.log (default
 * $HOME/ascend/log).
 */
#ifndef CONVTBC_API_LOG_H
#define CONVTBC_API_LOG_H

#include <string.h>

#include "api/errors.h"

typedef enum { CTBC_LOG_DEBUG = 0, CTBC_LOG_INFO = 1, CTBC_LOG_WARNING = 2, CTBC_LOG_ERROR = 3 } ctbc_log_level;

/* Whether lines of `level` are written (cheap: use before costly formatting). */
int ctbc_log_enabled(ctbc_log_level level);

/* `module` is CANN's: "ASCENDCL" for runtime calls, "OP" for the op, "APP"
 * for the application's own lines (aclAppLog). */
void ctbc_log_write(ctbc_log_level level, const char *module, const char *file, int line, const char *fmt, ...)
    CTBC_PRINTF(5, 6);

/* A line from the runtime, or from the op's own source file. */
#define CTBC_LOG(level, ...)                                                                                  \
    do {                                                                                                      \
        if (ctbc_log_enabled(level))                                                                          \
            ctbc_log_write(level, strstr(__FILE__, "conv_tbc") ? "OP" : "ASCENDCL", __FILE__, __LINE__,      \
                           __VA_ARGS__);                                                                      \
    } while (0)

#endif /* CONVTBC_API_LOG_H */
