/*
 * Mistake: copies with the wrong aclrtMemcpyKind.
 *   upload    uploads self with ACL_MEMCPY_DEVICE_TO_HOST (dst is device memory)
 *   download  downloads gradWeight with ACL_MEMCPY_HOST_TO_DEVICE (dst is host memory)
 * Each refused copy must leave its destination unchanged.
 * --fixed: ACL_MEMCPY_HOST_TO_DEVICE up, ACL_MEMCPY_DEVICE_TO_HOST down.
 */
#include "buggy_common.h"

int main(int argc, char **argv)
{
    int fixed = has_flag(argc, argv, "--fixed");
    const char *how = variant(argc, argv, "upload");
    Client c;
    client_setup(&c, 5, 2, 2, 2, 2, 1);

    if (strcmp(how, "upload") == 0) {
        /* self's device memory is reset to the sentinel, then uploaded again */
        SETUP(aclrtMemset(c.dev[SELF], c.bytes[SELF], SENTINEL_BYTE, c.bytes[SELF]));
        aclrtMemcpyKind kind = fixed ? ACL_MEMCPY_HOST_TO_DEVICE : ACL_MEMCPY_DEVICE_TO_HOST;
        report("aclrtMemcpy", aclrtMemcpy(c.dev[SELF], c.bytes[SELF], c.host[SELF], c.bytes[SELF], kind));
        unsigned char first = 0;
        SETUP(aclrtMemcpy(&first, 1, c.dev[SELF], 1, ACL_MEMCPY_DEVICE_TO_HOST));
        printf("DEVSELF %s\n", first == SENTINEL_BYTE ? "untouched" : "written");
    }

    uint64_t ws_size = 0;
    aclOpExecutor *executor = NULL;
    if (report("aclnnConvTbcBackwardGetWorkspaceSize", client_phase1(&c, &ws_size, &executor)) != 0)
        return 1;
    void *ws = NULL;
    SETUP(aclrtMalloc(&ws, ws_size, ACL_MEM_MALLOC_HUGE_FIRST));
    report("aclnnConvTbcBackward", aclnnConvTbcBackward(ws, ws_size, executor, c.stream));
    report("aclrtSynchronizeStream", aclrtSynchronizeStream(c.stream));

    if (strcmp(how, "download") == 0) {
        memset(c.host[GRAD_WEIGHT], SENTINEL_BYTE, c.bytes[GRAD_WEIGHT]);
        aclrtMemcpyKind kind = fixed ? ACL_MEMCPY_DEVICE_TO_HOST : ACL_MEMCPY_HOST_TO_DEVICE;
        report("aclrtMemcpy", aclrtMemcpy(c.host[GRAD_WEIGHT], c.bytes[GRAD_WEIGHT], c.dev[GRAD_WEIGHT],
                                          c.bytes[GRAD_WEIGHT], kind));
        printf("HOSTWEIGHT %s\n",
               ((unsigned char *)c.host[GRAD_WEIGHT])[0] == SENTINEL_BYTE ? "untouched" : "written");
    }
    client_read(&c, "READ");

    aclrtFree(ws);
    client_finish(&c);
    return 0;
}
