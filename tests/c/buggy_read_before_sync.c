/*
 * Mistake: reads the outputs right after queueing the op, before
 * aclrtSynchronizeStream. Phase 2 only queues the work on the stream, so the
 * early read sees whatever the outputs held before (the sentinel) when the
 * stream has not got to it yet (CONVTBC_STREAM_DELAY_MS makes sure of that).
 * --fixed: synchronises the stream first, then reads.
 * Prints EARLY <what> for the read before synchronising (buggy only) and
 * READ <what> for the read after it (see buggy_common.h).
 */
#include "buggy_common.h"

int main(int argc, char **argv)
{
    int fixed = has_flag(argc, argv, "--fixed");
    Client c;
    client_setup(&c, 6, 2, 3, 3, 4, 1);

    uint64_t ws_size = 0;
    aclOpExecutor *executor = NULL;
    if (report("aclnnConvTbcBackwardGetWorkspaceSize", client_phase1(&c, &ws_size, &executor)) != 0)
        return 1;
    void *ws = NULL;
    if (ws_size > 0)
        SETUP(aclrtMalloc(&ws, ws_size, ACL_MEM_MALLOC_HUGE_FIRST));
    report("aclnnConvTbcBackward", aclnnConvTbcBackward(ws, ws_size, executor, c.stream));

    if (!fixed)
        client_read(&c, "EARLY"); /* the mistake: the op may not have run yet */
    report("aclrtSynchronizeStream", aclrtSynchronizeStream(c.stream));
    client_read(&c, "READ");

    aclrtFree(ws);
    client_finish(&c);
    return 0;
}
