/*
 * What every operator of this library does the same way around its own
 * checks and computation (oneDNN would call it the primitive framework):
 *
 *   phase 1   the op checks its arguments in CANN's order, then
 *             ctbc_op_check_views refuses views no address can be derived
 *             from, ctbc_op_make_executor records the views, refuses
 *             outputs that share memory with what the op reads or writes,
 *             and binds the tensors to the executor's address slots; the op
 *             fills its compute plan (ctbc_op_compute_plan) and workspace.
 *   phase 2   ctbc_op_run takes the executor, checks the run's addresses
 *             (device memory, overlaps again if they moved) and queues the
 *             op's compute function on the stream.
 *
 * An op is described by a ctbc_op: its APIs' names, its tensors (inputs,
 * then outputs, in CANN's address-slot order), the pairs of tensors that
 * must not overlap, and its compute function.
 */
#ifndef CONVTBC_API_OP_FRAME_H
#define CONVTBC_API_OP_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aclnn/acl_meta.h"
#include "compute/conv_tbc_compute.h"

enum { CTBC_OP_MAX_TENSORS = 7 };

typedef struct {
    const char *phase1, *phase2;
    size_t input_count, output_count;
    /* CANN's argument name of each tensor, inputs then outputs. */
    const char *const *names;
    /* (output, other) pairs whose views must not share an element. */
    const unsigned char (*overlap_pairs)[2];
    size_t overlap_pair_count;
    /* Bit i set: tensor i is never read or written (it needs no address). */
    uint32_t unused;
    size_t compute_plan_bytes;
    /* Phase 2's work: `views` holds element [0,0,0] of each tensor (inputs,
     * then outputs); `workspace` the bytes phase 1 asked for. */
    void (*compute)(const void *compute_plan, void *const *views, void *workspace);
} ctbc_op;

/* One of an op's views as phase 1 checked it, in bytes from its storage's
 * start: where element [0,0,0] lies (the lowest, strides being >= 0) and
 * where the last element ends; end 0: no elements. */
typedef struct {
    int64_t dims[3], strides[3];
    uint64_t rank;
    int64_t item;
    uint64_t offset_bytes, end_bytes;
} ctbc_view_geometry;

/* "[5, 1, 2]" for messages (cut short if it does not fit in `size`). */
const char *ctbc_list_text(const int64_t *values, uint64_t count, char *buf, size_t size);
const char *ctbc_shape_text(const aclTensor *tensor, char *buf, size_t size);

/* Bytes per element of FLOAT, FLOAT16 and BFLOAT16 (the dtypes ops take). */
int64_t ctbc_item_bytes(const aclTensor *tensor);

/* Beyond CANN's checkers, after an op's own checks (ranks 1 or 3 and
 * dtypes already checked): strides >= 0, dims and storage that describe
 * memory, the view inside its storage, no output element sharing an
 * address with another. Fills each tensor's geometry. */
aclnnStatus ctbc_op_check_views(const ctbc_op *op, const aclTensor *const *tensors, ctbc_view_geometry *views);

/* The compute layer's layout of a checked view (an empty view gets zero
 * strides: they were never checked). */
ctbc_layout ctbc_op_layout(const aclTensor *tensor, const ctbc_view_geometry *view);

/* Makes the executor: records the views and the addresses the tensors hold,
 * refuses overlapping outputs (161002), binds the address slots. On
 * success the op fills ctbc_op_compute_plan(*made) and (*made)->workspace_bytes. */
aclnnStatus ctbc_op_make_executor(const ctbc_op *op, const aclTensor *const *tensors,
                                  const ctbc_view_geometry *views, aclOpExecutor **made);

void *ctbc_op_compute_plan(aclOpExecutor *executor);

/* Phase 2 of `op`: runs `executor` (made by op's phase 1) on `stream`. */
aclnnStatus ctbc_op_run(const ctbc_op *op, void *workspace, uint64_t workspace_size, aclOpExecutor *executor,
                        aclrtStream stream);

/* Phase 2 on the calling thread, for an executor whose tensors all view
 * host memory the caller owns: no device-memory checks, no stream. */
aclnnStatus ctbc_op_run_host(const ctbc_op *op, aclOpExecutor *executor, void *workspace);

#endif /* CONVTBC_API_OP_FRAME_H */
