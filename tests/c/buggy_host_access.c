/*
 * Mistake: host code loads or stores aclrtMalloc'd memory directly. On an NPU
 * device memory is not host-addressable and the access faults; here too the
 * program must die at the access (SIGSEGV), with a message on stderr that
 * names device memory and the allocation: its address, its size and the
 * offset touched.
 *   store (default): overwrites one element of `input` on the device before
 *                    the op, through the device pointer;
 *   load:            reads one element of `gradBias` after the op, through
 *                    the device pointer.
 * Before the access it prints ACCESS <variant> <allocation> <bytes> <offset>.
 * --fixed: moves the same element with aclrtMemcpy instead, and the results
 * are right.
 */
#include "buggy_common.h"

enum { ELEMENT = 1 };

int main(int argc, char **argv)
{
    int fixed = has_flag(argc, argv, "--fixed");
    const char *how = variant(argc, argv, "store");
    int load = strcmp(how, "load") == 0;
    Client c;
    client_setup(&c, 5, 2, 3, 2, 3, 0);
    size_t offset = ELEMENT * sizeof(float);

    if (!load) {
        float value = c.host[INPUT][ELEMENT]; /* the same value again: results stay checkable */
        if (fixed) {
            report("aclrtMemcpy", aclrtMemcpy((char *)c.dev[INPUT] + offset, c.bytes[INPUT] - offset, &value,
                                              sizeof value, ACL_MEMCPY_HOST_TO_DEVICE));
        } else {
            printf("ACCESS store %p %zu %zu\n", c.dev[INPUT], c.bytes[INPUT], offset);
            fflush(stdout);
            ((volatile float *)c.dev[INPUT])[ELEMENT] = value; /* the mistake */
        }
    }

    uint64_t ws_size = 0;
    aclOpExecutor *executor = NULL;
    if (report("aclnnConvTbcBackwardGetWorkspaceSize", client_phase1(&c, &ws_size, &executor)) != 0)
        return 1;
    void *ws = NULL;
    if (ws_size > 0)
        SETUP(aclrtMalloc(&ws, ws_size, ACL_MEM_MALLOC_HUGE_FIRST));
    report("aclnnConvTbcBackward", aclnnConvTbcBackward(ws, ws_size, executor, c.stream));
    report("aclrtSynchronizeStream", aclrtSynchronizeStream(c.stream));
    client_read(&c, "READ");

    if (load) {
        float got = 0.0f;
        if (fixed) {
            report("aclrtMemcpy", aclrtMemcpy(&got, sizeof got, (char *)c.dev[GRAD_BIAS] + offset,
                                              sizeof got, ACL_MEMCPY_DEVICE_TO_HOST));
        } else {
            printf("ACCESS load %p %zu %zu\n", c.dev[GRAD_BIAS], c.bytes[GRAD_BIAS], offset);
            fflush(stdout);
            got = ((volatile float *)c.dev[GRAD_BIAS])[ELEMENT]; /* the mistake */
        }
        printf("VALUE %s\n", (double)got == c.ref[GRAD_BIAS][ELEMENT] ? "correct" : "wrong");
    }

    aclrtFree(ws);
    client_finish(&c);
    return 0;
}
