/*
 * aclAppLog from an application: one line at each level through CANN's
 * ACL_APP_LOG macro (which passes the caller's function, file and line), a
 * line too long for CANN's 1024-byte limit, and calls CANN drops silently
 * (NULL format, function or file; a level outside 0..3). The lines are
 * checked by tests/test_app_log.py; the markers "@line:<name>" name the
 * source lines the log must point at.
 */
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"

static void log_each_level(void)
{
    ACL_APP_LOG(ACL_DEBUG, "debug line %d", 0); /* @line:debug */
    ACL_APP_LOG(ACL_INFO, "info line %d", 1); /* @line:info */
    ACL_APP_LOG(ACL_WARNING, "warning line %s", "two"); /* @line:warning */
    ACL_APP_LOG(ACL_ERROR, "error line %.1f", 3.0); /* @line:error */
}

int main(void)
{
    log_each_level();

    char long_text[3000];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    aclAppLog(ACL_ERROR, "main", "long.c", 7, "%s", long_text);

    aclAppLog(ACL_ERROR, "main", "dropped.c", 1, NULL);
    aclAppLog(ACL_ERROR, NULL, "dropped.c", 2, "no function");
    aclAppLog(ACL_ERROR, "main", NULL, 3, "no file");
    aclAppLog((aclLogLevel)4, "main", "dropped.c", 4, "level 4");
    aclAppLog((aclLogLevel)-1, "main", "dropped.c", 5, "level -1");
    fflush(stdout);
    printf("DONE\n");
    return 0;
}
