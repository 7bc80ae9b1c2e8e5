/*
 * Internal interface between the entry points (conv_tbc_compute.c), the
 * blocking choice (blocking.c) and the three gradient drivers.
 *
 * Work is cut into independent output tiles; each tile is computed start to
 * finish by one thread with blocking fixed by the plan, so which thread runs
 * it never changes a bit of the result.
 */
#ifndef CONVTBC_COMPUTE_DRIVER_H
#define CONVTBC_COMPUTE_DRIVER_H

#include "compute/conv_tbc_compute.h"
#include "compute/cpu_features.h"
#include "compute/pack.h"

/* Blocking chosen at plan time, stored in ctbc_plan.block[]. */
typedef struct {
    int32_t isa;        /* ctbc_isa of the kernels the plan was sized for */
    int32_t parallel;   /* 1: enough work to open an OpenMP region */
    /* grad_weight = per tap k, a [c_in x c_out] GEMM reducing over (t, b) */
    int32_t gw_o_on_m;  /* 1: c_out on the micro-tile's mr side (small c_out) */
    int32_t gw_taps;    /* 1 (few c_out): (tap, channel) pairs on the mr side,
                           c_in on the nr side, reducing over input rows;
                           gw_kg taps a tile */
    int32_t gw_bm;      /* block along the mr side (multiple of mr) */
    int32_t gw_chunk;   /* mr-side extent of a tile (multiple of gw_bm): the
                           nr-side block is packed once for all of it */
    int32_t gw_bn;      /* block along the nr side (multiple of nr) */
    int32_t gw_kc;      /* (t, b) rows reduced per packed block */
    int32_t gw_kg;      /* taps sharing one packed input window */
    /* grad_input = [(t, b) x c_in] reducing over (k, o) */
    int32_t gi_bm;      /* (t, b) rows per packed window (multiple of mr) */
    int32_t gi_chunk;   /* (t, b) rows per tile (multiple of gi_bm): the
                           weight panel is packed once per tile */
    int32_t gi_bn;      /* c_in per block (multiple of nr) */
    int32_t gi_ko;      /* c_out per reduction block */
    int32_t gi_kg;      /* taps per reduction block */
    int32_t gb_chunk;   /* c_out per grad_bias work item */
} ctbc_blocking;

/* Per-thread scratch, in floats (each part a multiple of 16 floats so every
 * part stays 64-byte aligned). */
typedef struct {
    int64_t cbuf, abuf, bbuf, per_thread;
} ctbc_ws_layout;

void ctbc_blocking_choose(const ctbc_problem *problem, ctbc_isa isa, ctbc_blocking *blocking);
void ctbc_ws_layout_of(const ctbc_problem *problem, const ctbc_blocking *blocking,
                       ctbc_ws_layout *layout);
void ctbc_blocking_store(ctbc_plan *plan, const ctbc_blocking *blocking);
void ctbc_blocking_load(const ctbc_plan *plan, ctbc_blocking *blocking);

/* Everything one run reads. */
typedef struct {
    const ctbc_problem *problem;
    ctbc_blocking blocking;
    const ctbc_kernel *kernel;
    ctbc_operand grad_output, input, weight;
    void *grad_input, *grad_weight, *grad_bias;
    /* 1: grad_input is float32 with unit column stride and evenly spaced
     * rows (grad_input_row_stride apart), so tiles may be written in place */
    int grad_input_direct;
    int64_t grad_input_row_stride;
} ctbc_run;

typedef struct {
    float *cbuf, *abuf, *bbuf;
} ctbc_scratch;

/* Computes the full micro-tile of one kernel call into scratch and adds only
 * the rows whose row_ok flag is set to c. */
void ctbc_edge_rows(const ctbc_kernel *kern, const ctbc_ukr_args *args, const float *a,
                    const float *b, float *c, int64_t ldc, const unsigned char *row_ok);

int64_t ctbc_grad_weight_tiles(const ctbc_run *run);
void ctbc_grad_weight_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch);

int64_t ctbc_grad_input_tiles(const ctbc_run *run);
void ctbc_grad_input_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch);

int64_t ctbc_grad_bias_tiles(const ctbc_run *run);
void ctbc_grad_bias_tile(const ctbc_run *run, int64_t tile);

static inline int64_t ctbc_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t ctbc_round_up(int64_t a, int64_t b) { return ctbc_ceil_div(a, b) * b; }
static inline int64_t ctbc_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t ctbc_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t ctbc_clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

#endif /* CONVTBC_COMPUTE_DRIVER_H */
