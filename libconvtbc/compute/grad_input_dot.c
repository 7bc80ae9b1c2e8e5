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
 * Three implementations share the driver: gi_dot on float32 operands that
 * nothing rounds, gi_dot_bf16 on bfloat16 operands through VDPBF16PS
 * (ctbc_dot_bf16_fn; the rule of gi_c_on_m_bf16), and gi_dot_f16 on
 * float16 operands, which each tile first widens into float32 copies (its
 * grad_output steps and weight channels) that the float32 kernel reads.
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

/* a * b, or a ceiling far past any real problem where the product
 * overflows: the plan costs absurd problems (a batch of broadcast rows)
 * too, and refuses them only by the workspace they ask for */
static int64_t product_or_ceiling(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) || r > (INT64_C(1) << 52) ? INT64_C(1) << 52 : r;
}

/* The (t, b) rows grad_input has. */
static int64_t total_rows(const ctbc_problem *p) { return product_or_ceiling(p->t, p->b); }

/* How a problem's (t, b) rows and channels are cut into tiles. */
typedef struct {
    int64_t rows, channels; /* a tile's, at most */
    int64_t row_tiles, tiles;
} dot_tiling;

static dot_tiling tiling_with(const ctbc_problem *p, int64_t rows)
{
    dot_tiling tl = {rows, ctbc_max(p->c_in, 1), ctbc_ceil_div(total_rows(p), rows), 0};
    if (tl.row_tiles < DOT_MIN_TILES)
        tl.channels = DOT_TILE_CHANNELS;
    tl.tiles = tl.row_tiles * ctbc_ceil_div(p->c_in, tl.channels);
    return tl;
}

static dot_tiling tiling_in_place(const ctbc_problem *p) { return tiling_with(p, DOT_TILE_ROWS); }

static int64_t dot_tiles(const ctbc_run *run) { return tiling_in_place(run->problem).tiles; }

/* Where the kernel reads grad_output and the weight: the operands where
 * they lie, or (gi_dot_f16) float32 copies of the steps from `g_first` on
 * and of the channels from `w_first` on; strides in elements. */
typedef struct {
    const char *g;
    int64_t g_s0, g_s1, g_first;
    const char *w;
    int64_t w_s0, w_s1, w_first;
} dot_source;

static dot_source source_in_place(const ctbc_run *run)
{
    const ctbc_operand *g = &run->grad_output, *w = &run->weight;
    return (dot_source){g->data, g->s0, g->s1, 0, w->data, w->s0, w->s1, 0};
}

static const char *g_at(const dot_source *src, const dot_kind *kind, int64_t step, int64_t b)
{
    return src->g + ((step - src->g_first) * src->g_s0 + b * src->g_s1) * kind->element_bytes;
}

static const char *w_at(const dot_source *src, const dot_kind *kind, int64_t k, int64_t c)
{
    return src->w + (k * src->w_s0 + (c - src->w_first) * src->w_s1) * kind->element_bytes;
}

/* Adds to sums[0..nc) the taps [k0, k1) of (t, b) row `row` and channels
 * [c0, c0 + nc), one call a tap. */
static void row_taps(const ctbc_run *run, const dot_kind *kind, const dot_source *src, int64_t row, int64_t c0,
                     int64_t nc, int64_t k0, int64_t k1, float *sums, float *one)
{
    const ctbc_problem *p = run->problem;
    const int64_t t = row / p->b, b = row % p->b;
    for (int64_t k = k0; k < k1; k++) {
        if (!ctbc_tap_reaches(p, t, k))
            continue;
        const ctbc_dot_args args = {nc, 1, p->c_out, 0, 0, src->w_s1, 0};
        kind->dot(run->kernel, &args, g_at(src, kind, t + p->pad - k, b), w_at(src, kind, k, c0), one, nc);
        for (int64_t c = 0; c < nc; c++)
            sums[c] += one[c];
    }
}

/* The tile's rows [r0, r1) and channels [c0, c0 + nc), read from src. */
typedef struct {
    int64_t r0, r1, c0, nc;
} dot_tile_part;

static dot_tile_part part_of(const ctbc_problem *p, const dot_tiling *tl, int64_t tile)
{
    const int64_t r0 = tile % tl->row_tiles * tl->rows, c0 = tile / tl->row_tiles * tl->channels;
    return (dot_tile_part){r0, ctbc_min(total_rows(p), r0 + tl->rows), c0, ctbc_min(tl->channels, p->c_in - c0)};
}

static void dot_tile(const ctbc_run *run, const dot_kind *kind, const dot_source *src, dot_tile_part part,
                     float *sums)
{
    const ctbc_problem *p = run->problem;
    const int64_t rows_total = total_rows(p), b_size = p->b, c0 = part.c0, nc = part.nc;
    float *one = sums + CTBC_DOT_ROWS * nc;         /* sums, one: [CTBC_DOT_ROWS][nc] */
    for (int64_t row = part.r0; row < part.r1; row += CTBC_DOT_ROWS) {
        /* the kernel's rows: this group, shifted back to end at the last
         * row where fewer are left (its first rows computed again, the
         * same bits); where the problem has fewer rows, the group runs
         * past the last one, into grad_output rows that exist for the taps
         * taken together (their sums are dropped) */
        const int64_t group = rows_total >= CTBC_DOT_ROWS ? ctbc_min(row, rows_total - CTBC_DOT_ROWS) : row;
        const int64_t done_to = ctbc_min(part.r1, group + CTBC_DOT_ROWS);
        const int64_t t_first = group / b_size, t_last = (group + CTBC_DOT_ROWS - 1) / b_size;
        int64_t step;
        ctbc_range all = {0, 0};
        if (ctbc_rows_evenly_spaced(src->g_s0, src->g_s1, b_size, group, group + CTBC_DOT_ROWS - 1, &step))
            all = ctbc_taps_between(p, t_last, t_first, 0, p->k);
        if (all.lo < all.hi) {
            const ctbc_dot_args args = {nc, all.hi - all.lo, p->c_out, step, -src->g_s0, src->w_s1, src->w_s0};
            kind->dot(run->kernel, &args, g_at(src, kind, t_first + p->pad - all.lo, group % b_size),
                      w_at(src, kind, all.lo, c0), sums, nc);
        } else {
            all.lo = all.hi = 0;
            memset(sums, 0, sizeof(float) * (size_t)(CTBC_DOT_ROWS * nc));
        }
        for (int64_t r = row; r < done_to; r++) {
            float *s = sums + (r - group) * nc;
            row_taps(run, kind, src, r, c0, nc, 0, all.lo, s, one);
            row_taps(run, kind, src, r, c0, nc, all.hi, p->k, s, one);
        }
        ctbc_write_tile(&run->gi_out, c0 * run->gi_out.cs, sums + (row - group) * nc, nc, done_to - row, nc, row);
    }
}

static void tile_in_place(const ctbc_run *run, const dot_kind *kind, int64_t tile, const ctbc_scratch *scratch)
{
    const dot_source src = source_in_place(run);
    const dot_tiling tl = tiling_in_place(run->problem);
    dot_tile(run, kind, &src, part_of(run->problem, &tl, tile), scratch->cbuf);
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
    tile_in_place(run, &FLOATS, tile, scratch);
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
    tile_in_place(run, &PAIRS, tile, scratch);
}

static int applies_pairs(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctx->kernel->dot_bf16 && p->grad_output.dtype == CTBC_BF16 && p->weight.dtype == CTBC_BF16 &&
           p->rounding != CTBC_ROUND_FP16 && along_o(p);
}

/* ---- gi_dot_f16: float16, widened a tile at a time ------------------------ */

/* The grad_output steps the kernel groups of a tile's rows read, and their
 * float32 copy's size at most: the tile's rows, a group shifted back into
 * it, and the taps of both ends. */
static ctbc_range window_steps(const ctbc_problem *p, dot_tile_part part)
{
    const int64_t rows_total = total_rows(p);
    const int64_t g_lo = rows_total >= CTBC_DOT_ROWS ? ctbc_min(part.r0, rows_total - CTBC_DOT_ROWS) : part.r0;
    const int64_t g_hi = ctbc_max(part.r1, g_lo + CTBC_DOT_ROWS);
    const int64_t lo = ctbc_max(0, g_lo / p->b + p->pad - (p->k - 1));
    return (ctbc_range){lo, ctbc_max(lo, ctbc_min(p->t_out, (g_hi - 1) / p->b + p->pad + 1))};
}

/* Tiles of at least as many steps as taps: each widens at most about twice
 * the grad_output rows it reads per tap. */
static dot_tiling tiling_halves(const ctbc_problem *p)
{
    return tiling_with(p, ctbc_max(DOT_TILE_ROWS, ctbc_round_up(product_or_ceiling(p->k - 1, p->b), DOT_TILE_ROWS)));
}

static int64_t halves_tiles(const ctbc_run *run) { return tiling_halves(run->problem).tiles; }

/* (in double: the plan asks absurd problems too; exact where they fit the
 * scratch budget) */
static double window_floats(const ctbc_problem *p)
{
    const int64_t steps = (tiling_halves(p).rows + CTBC_DOT_ROWS - 1) / ctbc_max(p->b, 1) + 2 + p->k - 1;
    return (double)ctbc_min(steps, p->t_out) * (double)p->b * (double)p->c_out;
}

static double weight_floats(const ctbc_problem *p)
{
    return (double)p->k * (double)ctbc_min(tiling_halves(p).channels, p->c_in) * (double)p->c_out;
}

static void halves_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    const ctbc_problem *p = run->problem;
    const dot_tiling tl = tiling_halves(p);
    const dot_tile_part part = part_of(p, &tl, tile);
    const ctbc_range steps = window_steps(p, part);
    float *window = scratch->abuf, *weight = scratch->bbuf;
    ctbc_pack_rows(window, p->c_out, (steps.hi - steps.lo) * p->b, &run->grad_output, p->b, steps.lo * p->b, 0,
                   p->t_out * p->b, 0, p->c_out);
    for (int64_t k = 0; k < p->k; k++)
        ctbc_pack_rows(weight + k * part.nc * p->c_out, p->c_out, part.nc, &run->weight, p->c_in,
                       k * p->c_in + part.c0, 0, p->k * p->c_in, 0, p->c_out);
    const dot_source src = {(const char *)window, p->b * p->c_out, p->c_out, steps.lo,
                            (const char *)weight, part.nc * p->c_out, p->c_out, part.c0};
    dot_tile(run, &FLOATS, &src, part, scratch->cbuf);
}

static int applies_halves(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctx->kernel->dot && p->grad_output.dtype == CTBC_F16 && p->weight.dtype == CTBC_F16 &&
           window_floats(p) + weight_floats(p) <= (double)ctx->budget_floats;
}

/* ---- plans and costs ------------------------------------------------------- */

static void scratch_dot(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)
{
    (void)bl;
    need->cbuf = ctbc_max(need->cbuf, 2 * CTBC_DOT_ROWS * ctbc_round_up(ctbc_max(p->c_in, 1), 16));
}

static void scratch_halves(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)
{
    scratch_dot(p, bl, need);
    need->abuf = ctbc_max(need->abuf, ctbc_round_up((int64_t)window_floats(p), 16));
    need->bbuf = ctbc_max(need->bbuf, ctbc_round_up((int64_t)weight_floats(p), 16));
}

/*
 * The dot kernel fills no tile and packs nothing, but sums on 8 lanes
 * without FMAs and reads the weight panel again for every CTBC_DOT_ROWS
 * rows: about DOT_FACTOR tile multiply-adds each (through VDPBF16PS, that
 * over the context's pair_dot_speedup), growing with the channels read per
 * row, and reductions (c_out) shorter than DOT_MIN_C_OUT are mostly its
 * scalar tail. Zen 4, one thread, whole op, medians of 3,
 * plan without and with the dot: T125 B1010 Ci3 K20 Co86 float32 131 ->
 * 99 ms, T30 B64 Ci8 K5 Co64 float32 0.37 -> 0.43 ms, T100 B32 Ci14 K3
 * Co200 float32 1.83 -> 1.99 ms; T124 B93 Ci6 K128 Co932 bfloat16 149 ->
 * 119 ms, T195 B16 Ci22 K14 Co221 bfloat16 5.8 -> 8.6 ms. A problem of
 * one group of rows reads its panel once: T3 B1 Ci416 K7 Co2332 bfloat16
 * 7.5 (gi_c_on_m_bf16) -> 2.4-2.8 ms, two threads, with tiles of 32
 * channels (before, one tile took all of it on one thread).
 */
#define DOT_FACTOR 1.4
#define DOT_CHANNELS 24.0
#define DOT_MIN_C_OUT 16
/* Each output element also ends in a sum across the lanes and a tail
 * shorter than a vector: about DOT_ELEMENT multiply-adds of a full tile,
 * spread over its reduction (taps x c_out). EMR, two threads, whole op,
 * T2910 B2 Ci6 K1 with gi_dot against gi_in_place_narrow: 0.35 against
 * 0.20 ms at Co31, 0.28 against 0.15 at Co64, 0.61 against 0.58 at Co128,
 * 1.06 against 0.99 at Co256. At 250 it also took problems where the dot
 * won (T3 B1 Ci267 K1 Co1207 bfloat16, three rows: 0.19 -> 0.27 ms; T156
 * B24 Ci4 K1 Co637 float32 1.21 -> 1.47 ms); at 100 five plans of 278
 * changed, geomean 0.75x the time in alternating processes (T2910 B2 Ci6
 * K1 Co31 float32 0.32 -> 0.14 ms, T1137 B136 Ci4 K1 Co81 float32 15.0 ->
 * 9.6 ms; T3 B13 Ci2 K2 Co70 float16 0.023 -> 0.024 ms). */
#define DOT_ELEMENT 100.0

static double cost_with(const ctbc_problem *p, double factor)
{
    if (p->c_out < DOT_MIN_C_OUT)
        return INFINITY;
    /* A problem of fewer rows than the kernel's computes the missing ones
     * too; one of a single group of them reads its weight panel once. */
    const int64_t rows = total_rows(p);
    const double wasted = (double)CTBC_DOT_ROWS / (double)ctbc_clamp(rows, 1, CTBC_DOT_ROWS);
    const double rereads = rows > CTBC_DOT_ROWS ? (double)p->c_in / DOT_CHANNELS : 0.0;
    return factor * (wasted + rereads) + DOT_ELEMENT / (double)(ctbc_max(p->k, 1) * p->c_out);
}

static double cost_floats(const ctbc_problem *p, const ctbc_context *ctx)
{
    (void)ctx;
    return cost_with(p, DOT_FACTOR);
}

static double cost_pairs(const ctbc_problem *p, const ctbc_context *ctx)
{
    return cost_with(p, DOT_FACTOR / ctx->pair_dot_speedup);
}

/* Widening an element costs about HALVES_WIDEN multiply-adds of the dot;
 * a tile widens its window of grad_output and its weight panel, which the
 * dot kernel then reads once for every pair of channels (dot_rows.h), from
 * L2, not L1. Zen 4, two threads, gi_c_on_m (or gi_merged_narrow) -> this:
 * T1067 B8 Ci1 K55 Co472 float16 46 -> 11.9 ms, T1774 B21 Ci1 K141 Co71
 * 42 -> 30-33 ms, T2208 B93 Ci2 K5 Co99 32 -> 23-28 ms; before counting
 * the pairs, T599 B6 Ci3 K1 Co28 0.14 -> 0.16 ms, T110 B26 Ci7 K11 Co119
 * 1.11 -> 1.34 ms. */
#define HALVES_WIDEN 4.0

static double cost_halves(const ctbc_problem *p, const ctbc_context *ctx)
{
    (void)ctx;
    const dot_tiling tl = tiling_halves(p);
    const double macs = (double)ctbc_min(tl.rows, total_rows(p)) * (double)p->k *
                        (double)ctbc_min(tl.channels, p->c_in) * (double)p->c_out;
    const double channel_pairs = (double)ctbc_ceil_div(ctbc_min(tl.channels, p->c_in), 2);
    return cost_with(p, DOT_FACTOR) * channel_pairs +
           HALVES_WIDEN * (window_floats(p) + weight_floats(p)) / fmax(macs, 1.0);
}

const ctbc_impl ctbc_impl_gi_dot = {"gi_dot", applies_floats, cost_floats, ctbc_plan_nothing,
                                    scratch_dot, dot_tiles, floats_tile, 0};
const ctbc_impl ctbc_impl_gi_dot_bf16 = {"gi_dot_bf16", applies_pairs, cost_pairs, ctbc_plan_nothing,
                                         scratch_dot, dot_tiles, pairs_tile, 0};
const ctbc_impl ctbc_impl_gi_dot_f16 = {"gi_dot_f16", applies_halves, cost_halves, ctbc_plan_nothing,
                                        scratch_halves, halves_tiles, halves_tile, 0};
