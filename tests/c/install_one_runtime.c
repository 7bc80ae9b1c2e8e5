/*
 * Built against the installed tree (by every route: CANN's library names,
 * pkg-config, find_package). Prints one `key value` line per fact:
 *
 *   convtbc_objects N   loaded objects whose file name contains "libconvtbc"
 *   init / init_again   aclInit's status, twice (0, then 100002
 *                       ACL_ERROR_REPEAT_INITIALIZE: one runtime state)
 *   aclnn_success       ACLNN_SUCCESS, from aclnn_base.h
 *
 * `#include "aclnn_base.h"` needs include/aclnn on the include path, as CANN's
 * sample builds have it.
 */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnn_base.h"

static int count_convtbc(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libconvtbc"))
        ++*(int *)data;
    return 0;
}

int main(void)
{
    int objects = 0;
    dl_iterate_phdr(count_convtbc, &objects);
    printf("convtbc_objects %d\n", objects);
    printf("init %d\n", (int)aclInit(NULL));
    printf("init_again %d\n", (int)aclInit(NULL));
    aclnnStatus success = ACLNN_SUCCESS;
    printf("aclnn_success %d\n", (int)success);
    aclFinalize();
    return 0;
}
