/*
 * Mistake: runs an executor a second time. An executor is consumed by
 * phase 2 unless aclSetAclOpExecutorRepeatable was called on it (on CANN the
 * second run touches freed memory); the second run must be refused, naming
 * the executor as already run, and write nothing.
 * --fixed: calls phase 1 again for a new executor before the second run.
 * The outputs are reset to the sentinel between the runs, so READ tells
 * whether the second run happened.
 */
#include "buggy_common.h"

static void run(Client *c, aclOpExecutor *executor, uint64_t ws_size, void *ws)
{
    report("aclnnConvTbcBackward", aclnnConvTbcBackward(ws, ws_size, executor, c->stream));
    report("aclrtSynchronizeStream", aclrtSynchronizeStream(c->stream));
}

int main(int argc, char **argv)
{
    int fixed = has_flag(argc, argv, "--fixed");
    Client c;
    client_setup(&c, 7, 1, 2, 3, 2, 2);

    uint64_t ws_size = 0;
    aclOpExecutor *executor = NULL;
    if (report("aclnnConvTbcBackwardGetWorkspaceSize", client_phase1(&c, &ws_size, &executor)) != 0)
        return 1;
    void *ws = NULL;
    SETUP(aclrtMalloc(&ws, ws_size, ACL_MEM_MALLOC_HUGE_FIRST));
    run(&c, executor, ws_size, ws);
    client_read(&c, "FIRST");

    for (int i = GRAD_INPUT; i < NTENSORS; i++)
        SETUP(aclrtMemset(c.dev[i], c.bytes[i], SENTINEL_BYTE, c.bytes[i]));
    if (fixed) {
        uint64_t again = 0;
        report("aclnnConvTbcBackwardGetWorkspaceSize", client_phase1(&c, &again, &executor));
        if (again > ws_size)
            return 1;
    }
    run(&c, executor, ws_size, ws); /* buggy: the executor the first run consumed */
    client_read(&c, "READ");

    aclrtFree(ws);
    client_finish(&c);
    return 0;
}
