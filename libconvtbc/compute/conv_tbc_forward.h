/*
 * The compute layer's interface for the forward op, aclnnConvTbc:
 *
 *   out[t, b, o] = bias[o] + sum_{k < K} sum_{c < C_in} xp[t + k, b, c] * w[k, c, o]
 *
 * with xp[u] = self[u - pad] inside self and 0 in the padding. As for the
 * backward op, the API layer fills a problem in phase 1 and calls
 * ctbc_forward_plan_init, which picks an implementation and books scratch;
 * phase 2 calls ctbc_forward_execute, which only reads the plan and gives
 * the same bits for any thread count.
 */
#ifndef CONVTBC_COMPUTE_CONV_TBC_FORWARD_H
#define CONVTBC_COMPUTE_CONV_TBC_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compute/conv_tbc_compute.h"

/* self [t, b, c_in], weight [k, c_in, c_out], bias [c_out] (stride[0]),
 * out [t_out, b, c_out], t_out = t + 2*pad + 1 - k >= 0, k >= 1. Any of
 * t, b, c_in, c_out may be 0. */
typedef struct {
    int64_t t, b, c_in, k, c_out, pad, t_out;
    ctbc_layout self, weight, bias, out;
    /* CANN's numerics: operands are rounded to compute_dtype (FLOAT ones to
     * HF32 instead when hf32 is set), products summed in float32, bias
     * rounded to bias_dtype and added, the sum rounded to compute_dtype and
     * then stored in out's dtype. */
    ctbc_dtype compute_dtype;
    bool hf32;
    ctbc_dtype bias_dtype;
} ctbc_forward_problem;

typedef struct {
    ctbc_forward_problem problem;
    int implementation;     /* index into the list in conv_tbc_forward.c */
    int threads;            /* OpenMP threads phase 2 may use */
    bool parallel;          /* worth a team at all */
    int isa;                /* the kernel (ctbc_isa) the plan was made for */
    int64_t t_lo, t_hi;     /* output steps that read self; the others are bias alone */
    int64_t block_tiles;    /* micro-tiles per block of outputs (the kernel context's mc) */
    int64_t chunk;          /* reduction values per chunk (its kc) */
    int64_t panel_group;    /* most weight panels one pass over a chunk covers (its nc) */
    int64_t unpacked_reuse_tiles; /* most tiles reading a weight panel in place (its own) */
    double pair_tile_speedup; /* the bfloat16 pair tile's speed (its own) */
    size_t workspace_bytes; /* scratch phase 2 needs */
} ctbc_forward_plan;

/* Picks the implementation (the cheapest, or one forced by name where it
 * applies) and books scratch. */
void ctbc_forward_plan_init(ctbc_forward_plan *plan, const ctbc_forward_problem *problem);

/* The implementations' names, in list order, NULL-terminated (forcing by
 * name reads them). */
const char *const *ctbc_forward_implementation_names(void);

/* The index of the forward implementation forced by name
 * (CONVTBC_FORCE_IMPL or ctbc_force_implementations, impls.c), or -1. */
int ctbc_forward_forced(void);

/* The chosen implementation's name, for logs and `convtbc info --plan`. */
const char *ctbc_forward_implementation_name(const ctbc_forward_plan *plan);

/* Computes out; pointers are element [0,0,0] of each view, workspace holds
 * plan->workspace_bytes bytes (may be NULL when that is 0). */
void ctbc_forward_execute(const ctbc_forward_plan *plan, const void *self, const void *weight, const void *bias,
                          void *out, void *workspace);

#endif /* CONVTBC_COMPUTE_CONV_TBC_FORWARD_H */
