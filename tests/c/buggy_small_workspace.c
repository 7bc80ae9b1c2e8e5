/*
 * Mistake: gives phase 2 less workspace than phase 1 asked for.
 *   size   passes (and allocates) half of workspaceSize -> phase 2 refuses it
 *   alloc  passes workspaceSize but allocates only half of it -> phase 2
 *          refuses the workspace as running past its allocation
 * --fixed: allocates and passes exactly what phase 1 asked for.
 */
#include "buggy_common.h"

int main(int argc, char **argv)
{
    int fixed = has_flag(argc, argv, "--fixed");
    const char *how = variant(argc, argv, "size");
    Client c;
    client_setup(&c, 8, 2, 4, 3, 3, 1);

    uint64_t ws_size = 0;
    aclOpExecutor *executor = NULL;
    if (report("aclnnConvTbcBackwardGetWorkspaceSize", client_phase1(&c, &ws_size, &executor)) != 0)
        return 1;
    printf("WORKSPACE %llu\n", (unsigned long long)ws_size);
    uint64_t allocated = ws_size, passed = ws_size;
    if (!fixed && strcmp(how, "size") == 0)
        allocated = passed = ws_size / 2;
    else if (!fixed)
        allocated = ws_size / 2;
    void *ws = NULL;
    if (allocated > 0)
        SETUP(aclrtMalloc(&ws, allocated, ACL_MEM_MALLOC_HUGE_FIRST));
    int st = report("aclnnConvTbcBackward", aclnnConvTbcBackward(ws, passed, executor, c.stream));
    if (st != 0)
        aclDestroyAclOpExecutor(executor);
    report("aclrtSynchronizeStream", aclrtSynchronizeStream(c.stream));
    client_read(&c, "READ");

    aclrtFree(ws);
    client_finish(&c);
    return 0;
}
