/*
 * Mistake: uses device memory after aclrtFree.
 *   op      frees the weight's memory, then runs the op on it -> phase 2 refuses
 *   copy    frees gradBias's memory, then downloads it -> aclrtMemcpy refuses
 *   queued  frees the weight's memory after queueing the op but before the
 *           stream ran it -> the next aclrtSynchronizeStream reports the fault
 *   queued-copy  queues a copy of gradBias into a scratch device buffer
 *           (aclrtMemcpyAsync) and frees the scratch buffer before the stream
 *           ran the copy -> the next aclrtSynchronizeStream reports the fault
 * --fixed: frees only after the last use (after synchronising and downloading).
 */
#include "buggy_common.h"

int main(int argc, char **argv)
{
    int fixed = has_flag(argc, argv, "--fixed");
    const char *how = variant(argc, argv, "op");
    Client c;
    client_setup(&c, 6, 3, 2, 2, 3, 0);

    uint64_t ws_size = 0;
    aclOpExecutor *executor = NULL;
    if (report("aclnnConvTbcBackwardGetWorkspaceSize", client_phase1(&c, &ws_size, &executor)) != 0)
        return 1;
    void *ws = NULL;
    SETUP(aclrtMalloc(&ws, ws_size, ACL_MEM_MALLOC_HUGE_FIRST));

    int early_free_of = -1; /* the buffer the buggy program frees too early */
    if (!fixed && strcmp(how, "op") == 0)
        early_free_of = WEIGHT;
    if (early_free_of >= 0)
        report("aclrtFree", aclrtFree(c.dev[early_free_of]));
    int st = report("aclnnConvTbcBackward", aclnnConvTbcBackward(ws, ws_size, executor, c.stream));
    if (st != 0)
        aclDestroyAclOpExecutor(executor);
    if (!fixed && strcmp(how, "queued") == 0) {
        early_free_of = WEIGHT; /* the op is queued, not run yet */
        report("aclrtFree", aclrtFree(c.dev[WEIGHT]));
    }
    report("aclrtSynchronizeStream", aclrtSynchronizeStream(c.stream));
    if (!fixed && strcmp(how, "copy") == 0) {
        early_free_of = GRAD_BIAS;
        report("aclrtFree", aclrtFree(c.dev[GRAD_BIAS]));
        memset(c.host[GRAD_BIAS], SENTINEL_BYTE, c.bytes[GRAD_BIAS]);
        report("aclrtMemcpy", aclrtMemcpy(c.host[GRAD_BIAS], c.bytes[GRAD_BIAS], c.dev[GRAD_BIAS],
                                          c.bytes[GRAD_BIAS], ACL_MEMCPY_DEVICE_TO_HOST));
        /* what the refused download left in the host buffer */
        printf("HOSTBIAS %s\n", ((unsigned char *)c.host[GRAD_BIAS])[0] == SENTINEL_BYTE ? "untouched" : "written");
    } else {
        client_read(&c, "READ");
    }
    if (strcmp(how, "queued-copy") == 0) {
        void *scratch = NULL;
        SETUP(aclrtMalloc(&scratch, c.bytes[GRAD_BIAS], ACL_MEM_MALLOC_HUGE_FIRST));
        report("aclrtMemcpyAsync", aclrtMemcpyAsync(scratch, c.bytes[GRAD_BIAS], c.dev[GRAD_BIAS],
                                                    c.bytes[GRAD_BIAS], ACL_MEMCPY_DEVICE_TO_DEVICE, c.stream));
        if (!fixed)
            report("aclrtFree", aclrtFree(scratch)); /* the mistake: the copy has not run yet */
        report("aclrtSynchronizeStream", aclrtSynchronizeStream(c.stream));
        if (fixed)
            report("aclrtFree", aclrtFree(scratch));
    }

    if (early_free_of >= 0)
        c.dev[early_free_of] = NULL; /* already freed */
    aclrtFree(ws);
    client_finish(&c);
    return 0;
}
