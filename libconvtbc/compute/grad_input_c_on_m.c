/*
 * grad_input with c_in on the micro-tile's rows: the transposed GEMM
 *
 *   grad_input^T [c_in x (t, b)] = sum_k weight[k]^T [c_in x c_out] * grad_output^T shifted by tap k
 *
 * grad_input.c puts (t, b) rows on the micro-tile's rows and c_in on its
 * nr-wide vector side, which c_in / nr of each tile fills: a quarter for
 * 8 channels on a 32-wide AVX-512 tile. Here channels fill the mr rows and
 * the many (t, b) rows the vector side.
 *
 * grad_output is packed transposed, [o][column], one column per grad_output
 * row: column w of a tile's window is grad_output row g_first + w, and tap k
 * of tile row m reads column (m - r0) + (k1 - 1 - k) * b_size, the window
 * of grad_input.c laid along the vector side. Columns with no grad_output
 * row are zero.
 *
 * Terms with t+pad-k outside [0, t_out) do not exist (weight may hold Inf):
 * a strip of nr rows takes the taps valid for all its rows in one kernel
 * call; taps valid for only some rows join that call when the weight panel
 * is finite (a zero column then adds an exact zero), else each goes through
 * a call of its own that keeps only the rows it reaches.
 *
 * Three implementations share the driver: gi_c_on_m on float32 values,
 * gi_c_on_m_bf16 on bfloat16 pairs of output channels through VDPBF16PS
 * (the rule of forward_gemm_bf16: bfloat16 grad_output and weight, a
 * compute dtype that keeps them; outputs differ from gi_c_on_m's only on
 * subnormals, which the instruction flushes, and in the order of the sum),
 * and gi_c_on_m_amx, the same pairs on AMX tiles (32 x 32, whose A is read
 * along the reduction: the weight packed channel by channel along c_out).
 * All pack 4-byte elements: a float32, or a pair.
 */
#include <math.h>
#include <string.h>

#include "compute/driver.h"

/* How a kind packs one reduction block and multiplies it. */
typedef struct {
    int64_t per_element; /* output channels per packed element: 1, or 2 (a pair) */
    int64_t steps_multiple; /* the kernel's reduction step: packed elements per tap come in multiples */
    /* packs the weight strips [strip][k - k0][element][mr] and the window
     * [element][column] (ld apart); 1 when the weight panel is finite */
    int (*pack)(const ctbc_run *run, int64_t k0, int64_t nk, int64_t o0, int64_t no, int64_t c0, int64_t nc,
                int64_t g_first, int64_t columns, int64_t ld, const ctbc_scratch *scratch);
    void (*ukr)(const ctbc_kernel *kern, const ctbc_ukr_args *args, const float *a, const float *b, float *c,
                int64_t ldc);
} c_on_m_kind;

typedef struct {
    int64_t rows, tiles_r, tiles_c;
} c_on_m_shape;

static c_on_m_shape shape_of(const ctbc_run *run)
{
    const ctbc_problem *p = run->problem;
    c_on_m_shape s;
    s.rows = p->t * p->b;
    s.tiles_r = ctbc_ceil_div(s.rows, run->blocking.gi_chunk);
    s.tiles_c = ctbc_ceil_div(p->c_in, run->blocking.gi_bn);
    return s;
}

static int64_t c_on_m_tiles(const ctbc_run *run)
{
    const c_on_m_shape s = shape_of(run);
    return s.tiles_r * s.tiles_c;
}

/* One (tap group, c_out block) of a tile, packed: `steps` elements of the
 * reduction per tap. */
typedef struct {
    int64_t k0, k1, steps, ld;
    const float *weight_panel, *window;
    int finite; /* 1: no Inf or NaN in the weight panel */
} reduction_block;

/* The full micro-tile of one call into scratch; only the columns whose
 * flag is set are added to c. */
static void edge_columns(const c_on_m_kind *kind, const ctbc_kernel *kern, const ctbc_ukr_args *args,
                         const float *a, const float *b, float *c, int64_t ldc, const unsigned char *column_ok)
{
    float tile[CTBC_AMX_TILE * CTBC_NR_MAX]; /* (the largest of its kinds' tiles) */
    const int64_t mr = kern->mr, nr = kern->nr;
    memset(tile, 0, sizeof(float) * (size_t)(mr * nr));
    kind->ukr(kern, args, a, b, tile, nr);
    ctbc_add_tile(c, ldc, tile, mr, nr, NULL, column_ok);
}

/* Rows [r0, r0 + rb) of the tile against one reduction block, added to the
 * accumulator acc[channel][row - r0] (rows ldc apart, channels strips of mr). */
static void reduce_block(const ctbc_run *run, const c_on_m_kind *kind, const reduction_block *block, int64_t r0,
                         int64_t rb, int64_t channel_strips, float *acc, int64_t ldc)
{
    const ctbc_problem *p = run->problem;
    const ctbc_kernel *kern = run->kernel;
    const int64_t mr = kern->mr, nr = kern->nr, b_size = p->b;
    const int64_t k0 = block->k0, k1 = block->k1, steps = block->steps;
    const int64_t strip_elements = (k1 - k0) * steps * mr;
    for (int64_t js = 0; js * nr < rb; js++) {
        const int64_t row0 = r0 + js * nr, valid = ctbc_min(nr, rb - js * nr);
        const int64_t t_lo = row0 / b_size, t_hi = (row0 + valid - 1) / b_size;
        const ctbc_range any = ctbc_taps_between(p, t_lo, t_hi, k0, k1);
        const ctbc_range all = block->finite ? any : ctbc_taps_between(p, t_hi, t_lo, k0, k1);
        /* window column of this strip's row 0 at tap k1 - 1 */
        const float *b_js = block->window + js * nr;
        unsigned char column_ok[CTBC_NR_MAX];
        for (int64_t is = 0; is < channel_strips; is++) {
            const float *a_is = block->weight_panel + is * strip_elements;
            float *c_tile = acc + is * mr * ldc + js * nr;
            if (all.lo < all.hi) {
                const ctbc_ukr_args args = {all.hi - all.lo, steps, 1, mr, steps * mr, block->ld, -b_size, 0};
                kind->ukr(kern, &args, a_is + (all.lo - k0) * steps * mr, b_js + (k1 - 1 - all.lo) * b_size,
                          c_tile, ldc);
            }
            for (int64_t k = any.lo; k < any.hi; k++) {
                if (k >= all.lo && k < all.hi)
                    continue;
                for (int64_t j = 0; j < nr; j++)
                    column_ok[j] = ctbc_tap_reaches(p, (row0 + j) / b_size, k);
                const ctbc_ukr_args args = {1, steps, 1, mr, 0, block->ld, 0, 0};
                edge_columns(kind, kern, &args, a_is + (k - k0) * steps * mr, b_js + (k1 - 1 - k) * b_size,
                             c_tile, ldc, column_ok);
            }
        }
    }
}

static void c_on_m_tile(const ctbc_run *run, const c_on_m_kind *kind, int64_t tile, const ctbc_scratch *scratch)
{
    const ctbc_problem *p = run->problem;
    const ctbc_blocking *bl = &run->blocking;
    const ctbc_kernel *kern = run->kernel;
    const int64_t mr = kern->mr, nr = kern->nr, b_size = p->b;
    const c_on_m_shape s = shape_of(run);

    const int64_t ri = tile % s.tiles_r, ci = tile / s.tiles_r;
    const int64_t r0 = ri * bl->gi_chunk, rb = ctbc_min(bl->gi_chunk, s.rows - r0);
    const int64_t c0 = ci * bl->gi_bn, nc = ctbc_min(bl->gi_bn, p->c_in - c0);
    const int64_t rbp = ctbc_round_up(rb, nr), ncp = ctbc_round_up(nc, mr);

    float *acc = scratch->cbuf; /* [channel][row], rbp apart */
    memset(acc, 0, sizeof(float) * (size_t)(ncp * rbp));
    const ctbc_range taps = ctbc_taps_between(p, r0 / b_size, (r0 + rb - 1) / b_size, 0, p->k);
    for (int64_t k0 = taps.lo; k0 < taps.hi; k0 += bl->gi_kg) {
        const int64_t k1 = ctbc_min(taps.hi, k0 + bl->gi_kg), nk = k1 - k0;
        const int64_t columns = rbp + (nk - 1) * b_size;
        const int64_t ld = ctbc_round_up(columns, 16);
        for (int64_t o0 = 0; o0 < p->c_out; o0 += bl->gi_ko) {
            const int64_t no = ctbc_min(bl->gi_ko, p->c_out - o0);
            const int finite = kind->pack(run, k0, nk, o0, no, c0, nc, r0 + (p->pad - (k1 - 1)) * b_size, columns,
                                          ld, scratch);
            const int64_t steps = ctbc_round_up(ctbc_ceil_div(no, kind->per_element), kind->steps_multiple);
            const reduction_block block = {k0, k1, steps, ld, scratch->bbuf, scratch->abuf, finite};
            reduce_block(run, kind, &block, r0, rb, ncp / mr, acc, rbp);
        }
    }
    /* back to (t, b) rows for grad_input's writer */
    float *by_rows = acc + ncp * rbp;
    kern->transpose(by_rows, ncp, acc, rbp, nc, rb);
    ctbc_write_tile(&run->gi_out, c0 * p->grad_input.stride[2], by_rows, ncp, rb, nc, r0);
}

/* ---- gi_c_on_m: float32 values -------------------------------------------- */

static int pack_floats(const ctbc_run *run, int64_t k0, int64_t nk, int64_t o0, int64_t no, int64_t c0, int64_t nc,
                       int64_t g_first, int64_t columns, int64_t ld, const ctbc_scratch *scratch)
{
    const ctbc_problem *p = run->problem;
    const int64_t mr = run->kernel->mr;
    ctbc_pack_weight(scratch->bbuf, (int)mr, &run->weight, k0, nk, o0, no, c0, nc);
    ctbc_pack_rows_transposed(scratch->abuf, ld, columns, &run->grad_output, p->b, g_first, 0, p->t_out * p->b, o0,
                              no);
    return ctbc_all_finite(scratch->bbuf, ctbc_round_up(nc, mr) * nk * no);
}

static void ukr_floats(const ctbc_kernel *kern, const ctbc_ukr_args *args, const float *a, const float *b, float *c,
                       int64_t ldc)
{
    kern->ukr(args, a, b, c, ldc);
}

static const c_on_m_kind FLOATS = {1, 1, pack_floats, ukr_floats};

static void floats_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    c_on_m_tile(run, &FLOATS, tile, scratch);
}

/* ---- gi_c_on_m_bf16: bfloat16 pairs --------------------------------------- */

/* 1: no bfloat16 half of x[0..n) is Inf or NaN (all-ones exponent). */
static int pairs_finite(const uint32_t *x, int64_t n)
{
    uint32_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad |= ((x[i] & 0x7f80u) == 0x7f80u) | ((x[i] & 0x7f800000u) == 0x7f800000u);
    return !bad;
}

static int pack_pairs(const ctbc_run *run, int64_t k0, int64_t nk, int64_t o0, int64_t no, int64_t c0, int64_t nc,
                      int64_t g_first, int64_t columns, int64_t ld, const ctbc_scratch *scratch)
{
    const ctbc_problem *p = run->problem;
    const int64_t mr = run->kernel->mr;
    uint32_t *weight_panel = (uint32_t *)(void *)scratch->bbuf;
    ctbc_pack_weight_bf16(weight_panel, (int)mr, ctbc_ceil_div(no, 2), 0, &run->weight, k0, nk, o0, no, c0, nc);
    ctbc_pack_rows_transposed_bf16((uint32_t *)(void *)scratch->abuf, ld, columns, &run->grad_output, p->b, g_first,
                                   0, p->t_out * p->b, o0, no);
    return pairs_finite(weight_panel, ctbc_round_up(nc, mr) * nk * ctbc_ceil_div(no, 2));
}

static void ukr_pairs(const ctbc_kernel *kern, const ctbc_ukr_args *args, const float *a, const float *b, float *c,
                      int64_t ldc)
{
    kern->ukr_bf16(args, (const uint32_t *)(const void *)a, (const uint32_t *)(const void *)b, c, ldc);
}

static const c_on_m_kind PAIRS = {2, 1, pack_pairs, ukr_pairs};

static void pairs_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    c_on_m_tile(run, &PAIRS, tile, scratch);
}

static int applies_pairs(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctx->kernel->ukr_bf16 && p->grad_output.dtype == CTBC_BF16 && p->weight.dtype == CTBC_BF16 &&
           p->rounding != CTBC_ROUND_FP16;
}

/* ---- gi_c_on_m_amx: bfloat16 pairs on AMX tiles ------------------------- */

/* The weight as the tile's A, each channel's pairs along its row, and the
 * window as its B (gi_c_on_m_bf16's), both zero from ceil(no / 2) pairs to
 * the multiple of CTBC_AMX_PAIRS the tile reduces by. */
static int pack_tiles(const ctbc_run *run, int64_t k0, int64_t nk, int64_t o0, int64_t no, int64_t c0, int64_t nc,
                      int64_t g_first, int64_t columns, int64_t ld, const ctbc_scratch *scratch)
{
    const ctbc_problem *p = run->problem;
    const int64_t mr = run->kernel->mr, pairs = ctbc_ceil_div(no, 2);
    const int64_t steps = ctbc_round_up(pairs, CTBC_AMX_PAIRS);
    uint32_t *weight_panel = (uint32_t *)(void *)scratch->bbuf, *window = (uint32_t *)(void *)scratch->abuf;
    ctbc_pack_weight_bf16(weight_panel, (int)mr, steps, 1, &run->weight, k0, nk, o0, no, c0, nc);
    ctbc_pack_rows_transposed_bf16(window, ld, columns, &run->grad_output, p->b, g_first, 0, p->t_out * p->b, o0, no);
    memset(window + pairs * ld, 0, sizeof(uint32_t) * (size_t)((steps - pairs) * ld));
    return pairs_finite(weight_panel, ctbc_round_up(nc, mr) * nk * steps);
}

/* The driver's strides count pairs of a [step][channel] strip; the tile's
 * A is [channel][step], in bfloat16 elements. */
static void ukr_tiles(const ctbc_kernel *kern, const ctbc_ukr_args *args, const float *a, const float *b, float *c,
                      int64_t ldc)
{
    ctbc_ukr_args tile_args = *args;
    tile_args.a_row = 2 * args->n_inner;
    tile_args.a_outer = 2 * args->a_outer;
    kern->ukr_amx(&tile_args, (const uint16_t *)(const void *)a, (const uint32_t *)(const void *)b, c, ldc);
}

static const c_on_m_kind TILES = {2, CTBC_AMX_PAIRS, pack_tiles, ukr_tiles};

static void tiles_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    run->kernel->amx_begin();
    c_on_m_tile(run, &TILES, tile, scratch);
}

static int applies_tiles(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctbc_applies_amx(p, ctx, &p->weight);
}

static void plan_tiles(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    ctbc_context amx;
    if (ctbc_context_amx(ctx->isa, &amx)) /* (else never chosen: it does not apply) */
        ctbc_plan_gi_c_on_m(p, &amx, bl);
}

/* gi_c_on_m's scratch with the reduction block padded to whole tile steps. */
static void scratch_tiles(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)
{
    ctbc_blocking padded = *bl;
    padded.gi_ko = (int32_t)ctbc_round_up(bl->gi_ko, 2 * CTBC_AMX_PAIRS);
    ctbc_scratch_gi_c_on_m(p, &padded, need);
}

/* ---- costs ----------------------------------------------------------------- */

/* Fills micro-tiles as channels fill mr rows, against grad_input.c's
 * channels on nr columns; the transposed packing of grad_output and the
 * transposed store cost about GI_C_ON_M_OVERHEAD more per multiply-add,
 * and are not repaid by reductions (taps x c_out) shorter than
 * GI_C_ON_M_MIN_REDUCTION. Measured on a Zen 4 (AVX-512, 6 x 32 tile), medians
 * of 5: T124 B93 Ci6 K128 Co932 bfloat16 530 -> 125 ms, T1067 B8 Ci1 K55
 * Co472 float16 184 -> 52 ms, T30 B64 Ci48 K5 Co64 float32 0.72 -> 0.59 ms;
 * 4-40% slower at reductions of 3 to 48 (T6 B334 Ci2 K8 Co4 bfloat16
 * 0.17 -> 0.24 ms, T9 B16 Ci48 K6 Co8 bfloat16 0.027 -> 0.030 ms). */
#define GI_C_ON_M_OVERHEAD 1.2
#define GI_C_ON_M_MIN_REDUCTION 64

static double cost_floats(const ctbc_problem *p, const ctbc_context *ctx)
{
    if (p->k * p->c_out < GI_C_ON_M_MIN_REDUCTION)
        return INFINITY;
    return GI_C_ON_M_OVERHEAD / ctbc_fill(ctbc_max(p->c_in, 1), ctx->kernel->mr);
}

/* The pair tile's speed (the context's), on problems of at least
 * GI_C_ON_M_BF16_MIN_MACS multiply-adds; below, packing pairs one by one
 * costs what the instruction saves (Zen 4, medians of 5: T64 B1 Ci896 K16
 * Co16 0.33 -> 0.38 ms at 1.5e7; T8 B32 Ci1472 K5 Co15 0.57 -> 0.50 ms at
 * 2.8e7, T9 B257 Ci224 K3 Co64 2.13 -> 1.42 ms). */
#define GI_C_ON_M_BF16_MIN_MACS 2e7

static double cost_pairs(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctbc_grad_input_macs(p) < GI_C_ON_M_BF16_MIN_MACS ? cost_floats(p, ctx)
                                                            : cost_floats(p, ctx) / ctx->pair_tile_speedup;
}

/* The AMX tile's speed (the context's) at the fill of its 32 channel rows
 * and 32 (t, b) columns, with a tile's taps and a block of c_out reduced
 * per call; plus what the tile unit does not speed up: the transposed
 * store, GI_AMX_STORE per multiply-add of a full float32 tile, the
 * weight panel, packed once per tile in runs of a channel's c_out block
 * (GI_AMX_WEIGHT_RUN a run, GI_AMX_PACK_PAIR a pair), and the window,
 * packed once per tap group (whole rows copied and transposed 16 x 16,
 * GI_AMX_PACK_PAIR a pair).
 * EMR, alternating: T64 B1 Ci896 K16 Co16, 32-row tiles each packing the
 * whole weight in runs of 8 pairs, 0.58 ms against 0.52 with gi_merged;
 * T195 B16 Ci22 K14 Co221, 22 channels a window, 2.9 against 6.3 with
 * gi_c_on_m. */
#define GI_AMX_STORE 0.2
#define GI_AMX_WEIGHT_RUN 400.0
#define GI_AMX_PACK_PAIR 5.0

static double cost_tiles(const ctbc_problem *p, const ctbc_context *ctx)
{
    ctbc_context amx;
    if (!ctbc_amx_worth(p, ctx, &amx))
        return INFINITY;
    ctbc_blocking bl = {0};
    ctbc_plan_gi_c_on_m(p, &amx, &bl);
    const int64_t pairs = ctbc_ceil_div(bl.gi_ko, 2), steps = ctbc_round_up(pairs, CTBC_AMX_PAIRS);
    const int64_t taps = ctbc_min(bl.gi_kg, ctbc_max(p->k, 1)), rows = ctbc_min(bl.gi_chunk, p->t * p->b);
    const double fill = ctbc_fill(ctbc_max(p->c_in, 1), CTBC_AMX_TILE) *
                        ctbc_fill(ctbc_max(p->t * p->b, 1), CTBC_AMX_TILE) * ctbc_fill(pairs, CTBC_AMX_PAIRS);
    /* pairs packed per multiply-add: the weight's steps per (channel, tap)
     * against a tile's rows x c_out block; the window's columns per tap
     * group against its rows x channels x taps x c_out */
    const double macs_per_weight_run = (double)ctbc_max(rows, 1) * (double)bl.gi_ko;
    const double window_pairs = (double)(rows + (taps - 1) * p->b) * (double)steps /
                                (macs_per_weight_run * (double)taps * (double)ctbc_min(bl.gi_bn, ctbc_max(p->c_in, 1)));
    return 1.0 / (fill * ctbc_amx_speed(&amx, steps * taps)) + GI_AMX_STORE +
           (GI_AMX_WEIGHT_RUN + GI_AMX_PACK_PAIR * (double)steps) / macs_per_weight_run +
           GI_AMX_PACK_PAIR * window_pairs;
}

const ctbc_impl ctbc_impl_gi_c_on_m = {"gi_c_on_m", ctbc_applies_always, cost_floats, ctbc_plan_gi_c_on_m,
                                       ctbc_scratch_gi_c_on_m, c_on_m_tiles, floats_tile, 0};
const ctbc_impl ctbc_impl_gi_c_on_m_bf16 = {"gi_c_on_m_bf16", applies_pairs, cost_pairs, ctbc_plan_gi_c_on_m,
                                            ctbc_scratch_gi_c_on_m, c_on_m_tiles, pairs_tile, 0};
const ctbc_impl ctbc_impl_gi_c_on_m_amx = {"gi_c_on_m_amx", applies_tiles, cost_tiles,      plan_tiles,
                                           scratch_tiles,   c_on_m_tiles,  tiles_tile, CTBC_TILE_AMX};
