/*
 * Mistake: frees a pointer twice.
 *   twice  aclrtFree on the same device pointer a second time
 *   never  aclrtFree on a pointer aclrtMalloc never returned (a malloc'd one)
 * --fixed: frees each device pointer once and the host one with free().
 * The op runs first, so the corrected program also shows correct results.
 */
#include "buggy_common.h"

int main(int argc, char **argv)
{
    int fixed = has_flag(argc, argv, "--fixed");
    const char *how = variant(argc, argv, "twice");
    Client c;
    client_setup(&c, 4, 2, 3, 1, 2, 0);

    uint64_t ws_size = 0;
    aclOpExecutor *executor = NULL;
    if (report("aclnnConvTbcBackwardGetWorkspaceSize", client_phase1(&c, &ws_size, &executor)) != 0)
        return 1;
    void *ws = NULL;
    SETUP(aclrtMalloc(&ws, ws_size, ACL_MEM_MALLOC_HUGE_FIRST));
    report("aclnnConvTbcBackward", aclnnConvTbcBackward(ws, ws_size, executor, c.stream));
    report("aclrtSynchronizeStream", aclrtSynchronizeStream(c.stream));
    client_read(&c, "READ");

    report("aclrtFree", aclrtFree(ws));
    if (!fixed && strcmp(how, "twice") == 0)
        report("aclrtFree", aclrtFree(ws)); /* the mistake */
    if (strcmp(how, "never") == 0) {
        void *scratch = malloc(256);
        if (!fixed)
            report("aclrtFree", aclrtFree(scratch)); /* the mistake: not aclrtMalloc's */
        free(scratch);
    }
    client_finish(&c);
    return 0;
}
