/*
 * aclOpExecutor: what phase 1 hands to phase 2. It holds the op's plan (made
 * and checked in phase 1, only read in phase 2) and the device addresses of
 * the op's tensors, which the aclSet*TensorAddr calls may change between
 * runs.
 *
 * Live executors are registered; phase 2 refuses any other pointer, so that
 * running a consumed (freed) executor again is an error and not a crash.
 * Threads may race for one executor (two runs, a run and a destroy): every
 * call that touches it first acquires it (a count of users, taken while the
 * registry still lists it), and whoever consumes it (a run of a
 * non-repeatable executor, a destroy) marks it dying with a compare-and-swap,
 * which exactly one thread wins. The memory is freed by the last user to let
 * go, so no thread reads an executor another has freed.
 */
#ifndef CONVTBC_API_EXECUTOR_H
#define CONVTBC_API_EXECUTOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aclnn/acl_meta.h"

enum { CTBC_MAX_OP_INPUTS = 4, CTBC_MAX_OP_OUTPUTS = 3 };

struct aclOpExecutor {
    const char *op_name;       /* the phase-2 API, for messages */
    atomic_bool repeatable;
    /* users holding it (low bits) and CTBC_EXECUTOR_DYING once consumed */
    atomic_uint_least32_t state;
    uint64_t workspace_bytes;  /* what phase 1 asked for */
    size_t input_count, output_count;
    void *inputs[CTBC_MAX_OP_INPUTS];   /* storage start of each tensor */
    void *outputs[CTBC_MAX_OP_OUTPUTS];
    /* The tensors phase 1 was given, for recognising them in a tensor list
     * (aclSetDynamic*TensorAddr). Compared, never dereferenced: the caller
     * may destroy a tensor once phase 1 has returned. */
    const aclTensor *input_tensors[CTBC_MAX_OP_INPUTS];
    const aclTensor *output_tensors[CTBC_MAX_OP_OUTPUTS];
    max_align_t plan[];        /* the op's own plan follows */
};

/* A registered executor with `plan_bytes` of zeroed room for the op's plan;
 * NULL (message recorded) when out of memory. */
aclOpExecutor *ctbc_executor_create(const char *op_name, size_t plan_bytes, size_t input_count,
                                    size_t output_count);

/* Phase 1: the op's input (or output) `index` is `tensor`, whose storage
 * starts at its current data address. */
void ctbc_executor_bind(aclOpExecutor *executor, size_t index, const aclTensor *tensor, bool input);

/* Frees an executor that phase 1 made but has not returned (no other
 * thread knows it). */
void ctbc_executor_discard(aclOpExecutor *executor);

/* Phase 2's start: takes the executor for this run (a non-repeatable one
 * for this run alone: a racing run or destroy gets the consumed-executor
 * error) and checks the run's other arguments: a live stream and a
 * workspace of at least the size phase 1 asked for. On success the caller
 * must end the run with ctbc_executor_end_run; on failure the executor is
 * as it was. */
aclnnStatus ctbc_executor_begin_run(aclOpExecutor *executor, void *workspace, uint64_t workspace_size,
                                    aclrtStream stream, const char *api);

/* Phase 2's end: after a run that was submitted (`ran`), a non-repeatable
 * executor is consumed (freed); after a refused one it stays live. The
 * executor must not be touched afterwards. */
void ctbc_executor_end_run(aclOpExecutor *executor, bool ran);

#endif /* CONVTBC_API_EXECUTOR_H */
