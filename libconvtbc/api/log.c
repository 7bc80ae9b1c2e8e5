#include "api/log.h"

#include "acl/acl_base.h"

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum { LOG_OFF = 4 };

static int threshold = LOG_OFF;
static FILE *sink;
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;

static void make_dirs(char *path)
{
    for (char *slash = strchr(path + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return;
        *slash = '/';
    }
}

static FILE *open_plog(void)
{
    const char *dir = getenv("ASCEND_PROCESS_LOG_PATH");
    char base[3072], path[4096];
    if (dir && *dir)
        snprintf(base, sizeof base, "%s", dir);
    else
        snprintf(base, sizeof base, "%s/ascend/log", getenv("HOME") ? getenv("HOME") : "/tmp");
    time_t now = time(NULL);
    struct tm parts;
    localtime_r(&now, &parts);
    snprintf(path, sizeof path, "%s/plog/plog-%ld_%04d%02d%02d%02d%02d%02d.log", base, (long)getpid(),
             parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec);
    make_dirs(path);
    return fopen(path, "a");
}

static void setup(void)
{
    const char *level = getenv("ASCEND_GLOBAL_LOG_LEVEL");
    const char *to_stdout = getenv("ASCEND_SLOG_PRINT_TO_STDOUT");
    bool screen = to_stdout && strcmp(to_stdout, "1") == 0;
    if (!screen && !(level && *level))
        return; /* convtbc logs nothing unless asked to */
    /* CANN: unset, empty or illegal means the default, ERROR. */
    int value = CTBC_LOG_ERROR;
    if (level && level[0] >= '0' && level[0] <= '4' && level[1] == '\0')
        value = level[0] - '0';
    if (value == LOG_OFF)
        return;
    sink = screen ? stdout : open_plog();
    if (sink)
        threshold = value;
}

int ctbc_log_enabled(ctbc_log_level level)
{
    pthread_once(&setup_once, setup);
    return (int)level >= threshold;
}

void ctbc_log_write(ctbc_log_level level, const char *module, const char *file, int line, const char *fmt, ...)
{
    static const char *const NAMES[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    struct timeval now;
    struct tm parts;
    gettimeofday(&now, NULL);
    localtime_r(&now.tv_sec, &parts);

    char text[2048];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);

    pthread_mutex_lock(&write_lock);
    fprintf(sink, "[%s] %s(%ld,%s):%04d-%02d-%02d-%02d:%02d:%02d.%03ld.%03ld [%s:%d]%s\n", NAMES[level], module,
            (long)getpid(), program_invocation_short_name, parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
            parts.tm_hour, parts.tm_min, parts.tm_sec, (long)(now.tv_usec / 1000), (long)(now.tv_usec % 1000),
            base, line, text);
    fflush(sink);
    pthread_mutex_unlock(&write_lock);
}

/* CANN caps an application line at 1024 bytes with its terminating NUL, and
 * marks a cut one at its end. */
enum { APP_LINE_BYTES = 1024 };
static const char TRUNCATED[] = "...[truncated]";

void aclAppLog(aclLogLevel logLevel, const char *func, const char *file, uint32_t line, const char *fmt, ...)
{
    if (!fmt || !func || !file || (int)logLevel < CTBC_LOG_DEBUG || (int)logLevel > CTBC_LOG_ERROR)
        return; /* CANN drops such a line without a word */
    if (!ctbc_log_enabled((ctbc_log_level)logLevel))
        return;
    char body[APP_LINE_BYTES];
    va_list args;
    va_start(args, fmt);
    int body_len = vsnprintf(body, sizeof body, fmt, args);
    va_end(args);
    if (body_len < 0)
        return;
    /* CANN's text: "<thread id> <function>:<file>:<line>: "<message>"". */
    char text[APP_LINE_BYTES];
    int text_len = snprintf(text, sizeof text, "%ld %s:%s:%u: \"%s\"", (long)syscall(SYS_gettid), func, file,
                            (unsigned)line, body);
    if (body_len >= APP_LINE_BYTES - 1 || text_len >= APP_LINE_BYTES - 1)
        memcpy(text + sizeof text - sizeof TRUNCATED, TRUNCATED, sizeof TRUNCATED);
    ctbc_log_write((ctbc_log_level)logLevel, "APP", file, (int)line, "%s", text);
}
