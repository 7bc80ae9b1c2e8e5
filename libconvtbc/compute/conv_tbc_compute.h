/*
 * The compute layer's whole interface to the API layer.
 *
 * The API layer (phase 1) validates the arguments, fills a ctbc_problem and
 * calls ctbc_plan_init, which fixes the blocking and threading and books the
 * scratch memory the run needs (plan.workspace_bytes). Phase 2 calls
 * ctbc_execute with the tensors' current addresses and a workspace of at
 * least that size. ctbc_execute only reads the plan: it never allocates, and
 * its results are bit-identical for any thread count.
 *
 * Nothing here knows about aclTensor, executors or status codes.
 */
#ifndef CONVTBC_COMPUTE_CONV_TBC_COMPUTE_H
#define CONVTBC_COMPUTE_CONV_TBC_COMPUTE_H

#include <stddef.h>
#include <stdint.h>

/* Element types the op computes with (values are not aclDataType's). */
typedef enum {
    CTBC_F32 = 0,
    CTBC_F16 = 1,
    CTBC_BF16 = 2
} ctbc_dtype;

/* How FLOAT (float32) operands are rounded before the products
 * (cubeMathType). FLOAT16 and BFLOAT16 operands are never changed, and
 * gradBias (a plain sum of self) is never rounded. */
typedef enum {
    CTBC_ROUND_NONE = 0, /* KEEP_DTYPE */
    CTBC_ROUND_HF32 = 1, /* ALLOW_FP32_DOWN_PRECISION, USE_HF32 */
    CTBC_ROUND_FP16 = 2  /* USE_FP16 */
} ctbc_rounding;

/* The layout of one operand: element type and strides in elements
 * (any sign is not allowed; 0 is allowed on inputs). For the 1-D gradBias
 * only stride[0] is used. */
typedef struct {
    ctbc_dtype dtype;
    int64_t stride[3];
} ctbc_layout;

/* The validated problem, in the op's own words.
 *   grad_output (CANN's `self`) [t_out, b, c_out]
 *   input                       [t, b, c_in]
 *   weight                      [k, c_in, c_out]
 *   grad_input                  [t, b, c_in]
 *   grad_weight                 [k, c_in, c_out]
 *   grad_bias                   [c_out]
 * with t_out = t + 2*pad + 1 - k >= 1 (phase 1 guarantees t_out >= 1, since
 * CANN rejects an empty self). Any of t, b, c_in, k, c_out may be 0. */
typedef struct {
    int64_t t, b, c_in, k, c_out, pad, t_out;
    ctbc_layout grad_output, input, weight;
    ctbc_layout grad_input, grad_weight, grad_bias;
    ctbc_rounding rounding;
} ctbc_problem;

/* The three gradients, in the order of CANN's outputs. */
typedef enum {
    CTBC_GRAD_INPUT = 0,
    CTBC_GRAD_WEIGHT = 1,
    CTBC_GRAD_BIAS = 2,
    CTBC_GRADIENTS = 3
} ctbc_gradient;

/* Filled by ctbc_plan_init; opaque to the API layer except workspace_bytes. */
typedef struct {
    ctbc_problem problem;
    int threads;            /* OpenMP threads phase 2 uses */
    size_t workspace_bytes; /* scratch phase 2 needs, 64-byte aligned base */
    /* Blocking chosen in phase 1 (used only by the compute layer). */
    int64_t block[12];
    /* Per-thread scratch layout in floats (used only by the compute layer). */
    int64_t scratch_floats[4];
} ctbc_plan;

/* Addresses of element [0,0,0] of each view (the view offset applied). */
typedef struct {
    const void *grad_output, *input, *weight;
    void *grad_input, *grad_weight, *grad_bias;
} ctbc_buffers;

/* Fixes blocking and thread count for `problem` and books scratch. */
void ctbc_plan_init(ctbc_plan *plan, const ctbc_problem *problem);

/* Name of the implementation the plan computes `gradient` with (see
 * driver.h). */
const char *ctbc_plan_impl_name(const ctbc_plan *plan, ctbc_gradient gradient);

/* Forces the implementations named in `names` (comma-separated) where they
 * apply, for the plans made from now on; NULL or "" lifts the forcing.
 * Until the first call, CONVTBC_FORCE_IMPL (read at the first plan) does.
 * Returns 0, or -1 for an unknown name (then nothing changes). */
int ctbc_force_implementations(const char *names);

/* Computes grad_input, grad_weight and grad_bias. `workspace` holds at least
 * plan->workspace_bytes bytes (may be NULL when that is 0). */
void ctbc_execute(const ctbc_plan *plan, const ctbc_buffers *buffers, void *workspace);

#endif /* CONVTBC_COMPUTE_CONV_TBC_COMPUTE_H */
