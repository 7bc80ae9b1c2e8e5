/*
 * grad_input as dot products, for few input channels over long reductions:
 *
 *   grad_input[t, b, c] = sum_k sum_o grad_output[t + pad - k, b, o] * weight[k, c, o]
 *
 * With c_in channels on the micro-tile (grad_input.c, grad_input_c_on_m.c)
 * one or two channels fill a sixth or a thirty-second of it, and
 * grad_output is packed (transposed, for gi_c_on_m) before every use. Here
 * the dot kernel (ctbc_dot_fn) reads grad_output rows and weight[k, c, :]
 * where they lie, both contiguous along o: CTBC_DOT_ROWS (t, b) rows
 * against every channel, reducing over (tap, o), with nothing packed.
 *
 * Terms with t + pad - k outside [0, t_out) do not exist: a group of rows
 * takes the taps valid for all its rows in one call, and each row the taps
 * valid for it alone in calls of its own (a_row 0: the kernel's rows all
 * read that row), added after, in tap order.
 *
 * Two implementations share the driver: gi_dot on float32 operands that
 * nothing rounds, and gi_dot_bf16 on bfloat16 operands through VDPBF16PS
 * (ctbc_dot_bf16_fn; the rule of gi_c_on_m_bf16).
 */
#include <math.h>
#include <string.h>

#include "compute/driver.h"

/* (t, b) rows a tile */
#define DOT_TILE_ROWS 64
/* With fewer row tiles than DOT_MIN_TILES, tiles also split the channels,
 * DOT_TILE_CHANNELS a tile, so that a problem of a few rows still shares
 * its weight panel among the threads. (Each channel's sum is the same
 * whichever tile holds it.) */
#define DOT_MIN_TILES 8
#define DOT_TILE_CHANNELS 32

typedef struct {
    int64_t element_bytes;
    void (*dot)(const ctbc_kernel *kern, const ctbc_dot_args *args, const void *a, const void *b, float *c,
                int64_t ldc);
} dot_kind;

static int64_t row_tiles(const ctbc_problem *p) { return ctbc_ceil_div(p->t * p->b, DOT_TILE_ROWS); }

static int64_t channels_a_tile(const ctbc_problem *p)
{
    return row_tiles(p) < DOT_MIN_TILES ? DOT_TILE_CHANNELS : ctbc_max(p->c_in, 1);
}

static int64_t dot_tiles(const ctbc_run *run)
{
    const ctbc_problem *p = run->problem;
    return row_tiles(p) * ctbc_ceil_div(p->c_in, channels_a_tile(p));
}

/* Adds to sums[0..nc) the taps [k0, k1) of (t, b) row `row` and channels
 * [c0, c0 + nc), one call a tap. */
static void row_taps(const ctbc_run *run, const dot_kind *kind, int64_t row, int64_t c0, int64_t nc, int64_t k0,
                     int64_t k1, float *sums, float *one)
{
    const ctbc_problem *p = run->problem;
    const ctbc_operand *g = &run->grad_output, *w = &run->weight;
    const int64_t t = row / p->b, b = row % p->b;
    for (int64_t k = k0; k < k1; k++) {
        if (!ctbc_tap_reaches(p, t, k))
            continue;
        const ctbc_dot_args args = {nc, 1, p->c_out, 0, 0, w->s1, 0};
        const char *a = (const char *)g->data + ((t + p->pad - k) * g->s0 + b * g->s1) * kind->element_bytes;
        const char *bw = (const char *)w->data + (k * w->s0 + c0 * w->s1) * kind->element_bytes;
        kind->dot(run->kernel, &args, a, bw, one, nc);
        for (int64_t c = 0; c < nc; c++)
            sums[c] += one[c];
    }
}

static void dot_tile(const ctbc_run *run, const dot_kind *kind, int64_t tile, const ctbc_scratch *scratch)
{
    const ctbc_problem *p = run->problem;
    const ctbc_operand *g = &run->grad_output, *w = &run->weight;
    const int64_t rows_total = p->t * p->b, b_size = p->b, per_tile = channels_a_tile(p);
    const int64_t ri = tile % row_tiles(p), c0 = tile / row_tiles(p) * per_tile;
    const int64_t nc = ctbc_min(per_tile, p->c_in - c0);
    const int64_t r0 = ri * DOT_TILE_ROWS, r1 = ctbc_min(rows_total, r0 + DOT_TILE_ROWS);
    float *sums = scratch->cbuf;                    /* [CTBC_DOT_ROWS][nc] */
    float *one = sums + CTBC_DOT_ROWS * nc;         /* [CTBC_DOT_ROWS][nc] */
    for (int64_t row = r0; row < r1; row += CTBC_DOT_ROWS) {
        /* the kernel's rows: this group, shifted back to end at the last
         * row where fewer are left (its first rows computed again, the
         * same bits); where the problem has fewer rows, the group runs
         * past the last one, into grad_output rows that exist for the taps
         * taken together (their sums are dropped) */
        const int64_t group = rows_total >= CTBC_DOT_ROWS ? ctbc_min(row, rows_total - CTBC_DOT_ROWS) : row;
        const int64_t done_to = ctbc_min(r1, group + CTBC_DOT_ROWS);
        const int64_t t_first = group / b_size, t_last = (group + CTBC_DOT_ROWS - 1) / b_size;
        int64_t step;
        ctbc_range all = {0, 0};
        if (ctbc_rows_evenly_spaced(g->s0, g->s1, b_size, group, group + CTBC_DOT_ROWS - 1, &step))
            all = ctbc_taps_between(p, t_last, t_first, 0, p->k);
        if (all.lo < all.hi) {
            const ctbc_dot_args args = {nc, all.hi - all.lo, p->c_out, step, -g->s0, w->s1, w->s0};
            const int64_t a_offset = (t_first + p->pad - all.lo) * g->s0 + (group % b_size) * g->s1;
            kind->dot(run->kernel, &args, (const char *)g->data + a_offset * kind->element_bytes,
                      (const char *)w->data + (all.lo * w->s0 + c0 * w->s1) * kind->element_bytes, sums, nc);
        } else {
            all.lo = all.hi = 0;
            memset(sums, 0, sizeof(float) * (size_t)(CTBC_DOT_ROWS * nc));
        }
        for (int64_t r = row; r < done_to; r++) {
            float *s = sums + (r - group) * nc;
            row_taps(run, kind, r, c0, nc, 0, all.lo, s, one);
            row_taps(run, kind, r, c0, nc, all.hi, p->k, s, one);
        }
        ctbc_write_tile(&run->gi_out, c0 * run->gi_out.cs, sums + (row - group) * nc, nc, done_to - row, nc, row);
    }
}

/* ---- gi_dot: float32 ------------------------------------------------------- */

static void dot_floats(const ctbc_kernel *kern, const ctbc_dot_args *args, const void *a, const void *b, float *c,
                       int64_t ldc)
{
    kern->dot(args, a, b, c, ldc);
}

static const dot_kind FLOATS = {4, dot_floats};

static void floats_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    dot_tile(run, &FLOATS, tile, scratch);
}

/* Both operands are read along o where they lie. */
static int along_o(const ctbc_problem *p)
{
    return (p->grad_output.stride[2] == 1 && p->weight.stride[2] == 1) || p->c_out == 1;
}

static int applies_floats(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctx->kernel->dot && p->grad_output.dtype == CTBC_F32 && p->weight.dtype == CTBC_F32 &&
           p->rounding == CTBC_ROUND_NONE && along_o(p);
}

/* ---- gi_dot_bf16: bfloat16 pairs ------------------------------------------ */

static void dot_pairs(const ctbc_kernel *kern, const ctbc_dot_args *args, const void *a, const void *b, float *c,
                      int64_t ldc)
{
    kern->dot_bf16(args, a, b, c, ldc);
}

static const dot_kind PAIRS = {2, dot_pairs};

static void pairs_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    dot_tile(run, &PAIRS, tile, scratch);
}

static int applies_pairs(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctx->kernel->dot_bf16 && p->grad_output.dtype == CTBC_BF16 && p->weight.dtype == CTBC_BF16 &&
           p->rounding != CTBC_ROUND_FP16 && along_o(p);
}

/* ---- plans and costs ------------------------------------------------------- */

static void scratch_dot(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)
{
    (void)bl;
    need->cbuf = ctbc_max(need->cbuf, 2 * CTBC_DOT_ROWS * ctbc_round_up(ctbc_max(p->c_in, 1), 16));
}

/*
 * The dot kernel fills no tile and packs nothing, but sums on 8 lanes
 * without FMAs and reads the weight panel again for every CTBC_DOT_ROWS
 * rows: about DOT_FACTOR tile multiply-adds each (DOT_FACTOR_BF16 through
 * VDPBF16PS, whose bfloat16 pairs are read as they lie), growing with the
 * channels read per row, and reductions (c_out) shorter than DOT_MIN_C_OUT
 * are mostly its scalar tail. Zen 4, one thread, whole op, medians of 3,
 * plan without and with the dot: T125 B1010 Ci3 K20 Co86 float32 131 ->
 * 99 ms, T30 B64 Ci8 K5 Co64 float32 0.37 -> 0.43 ms, T100 B32 Ci14 K3
 * Co200 float32 1.83 -> 1.99 ms; T124 B93 Ci6 K128 Co932 bfloat16 149 ->
 * 119 ms, T195 B16 Ci22 K14 Co221 bfloat16 5.8 -> 8.6 ms. A problem of
 * one group of rows reads its panel once: T3 B1 Ci416 K7 Co2332 bfloat16
 * 7.5 (gi_c_on_m_bf16) -> 2.4-2.8 ms, two threads, with tiles of 32
 * channels (before, one tile took all of it on one thread).
 */
#define DOT_FACTOR 1.4
#define DOT_FACTOR_BF16 0.45
#define DOT_CHANNELS 24.0
#define DOT_MIN_C_OUT 16

static double cost_with(const ctbc_problem *p, double factor)
{
    if (p->c_out < DOT_MIN_C_OUT)
        return INFINITY;
    /* A problem of fewer rows than the kernel's computes the missing ones
     * too; one of a single group of them reads its weight panel once. */
    const int64_t rows = p->t * p->b;
    const double wasted = (double)CTBC_DOT_ROWS / (double)ctbc_clamp(rows, 1, CTBC_DOT_ROWS);
    const double rereads = rows > CTBC_DOT_ROWS ? (double)p->c_in / DOT_CHANNELS : 0.0;
    return factor * (wasted + rereads);
}

static double cost_floats(const ctbc_problem *p, const ctbc_context *ctx)
{
    (void)ctx;
    return cost_with(p, DOT_FACTOR);
}

static double cost_pairs(const ctbc_problem *p, const ctbc_context *ctx)
{
    (void)ctx;
    return cost_with(p, DOT_FACTOR_BF16);
}

const ctbc_impl ctbc_impl_gi_dot = {"gi_dot", applies_floats, cost_floats, ctbc_plan_nothing,
                                    scratch_dot, dot_tiles, floats_tile};
const ctbc_impl ctbc_impl_gi_dot_bf16 = {"gi_dot_bf16", applies_pairs, cost_pairs, ctbc_plan_nothing,
                                         scratch_dot, dot_tiles, pairs_tile};
