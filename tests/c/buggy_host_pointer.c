/*
 * Mistake: hands a host buffer from malloc to aclCreateTensor as the data of
 * `self` (on an NPU the device cannot reach host memory). Phase 2 must refuse
 * it, naming the tensor, and write nothing.
 * --fixed: copies the data into aclrtMalloc'd memory with aclrtMemcpy.
 */
#include "buggy_common.h"

int main(int argc, char **argv)
{
    int fixed = has_flag(argc, argv, "--fixed");
    Client c;
    client_start(&c);
    client_problem(&c, 5, 2, 3, 2, 3, 0);
    for (int i = 0; i < NTENSORS; i++) {
        if (i == SELF && !fixed)
            c.dev[i] = c.host[i]; /* the mistake: host memory as tensor data */
        else
            client_device_buffer(&c, i);
    }
    client_make_tensors(&c);

    uint64_t ws_size = 0;
    aclOpExecutor *executor = NULL;
    if (report("aclnnConvTbcBackwardGetWorkspaceSize", client_phase1(&c, &ws_size, &executor)) != 0)
        return 1;
    void *ws = NULL;
    if (ws_size > 0)
        SETUP(aclrtMalloc(&ws, ws_size, ACL_MEM_MALLOC_HUGE_FIRST));
    int st = report("aclnnConvTbcBackward", aclnnConvTbcBackward(ws, ws_size, executor, c.stream));
    if (st != 0)
        aclDestroyAclOpExecutor(executor); /* a refused run leaves the executor live */
    report("aclrtSynchronizeStream", aclrtSynchronizeStream(c.stream));
    client_read(&c, "READ");

    if (!fixed)
        c.dev[SELF] = NULL; /* not ours to aclrtFree: client_finish frees the host buffer */
    aclrtFree(ws);
    client_finish(&c);
    return 0;
}
