/*
 * Block sizes and scratch layout, fixed at plan time from the problem shape
 * and the kernel's tile (never from the thread count, so results do not
 * depend on it).
 */
#include <math.h>
#include <string.h>

#include "compute/driver.h"

/* Per-thread scratch, in units of the context's budget (see context.c):
 * a packed window is rewritten for every row block, so it stays in half
 * of L2 (or the packing stores miss all the way to L3); accumulators and
 * weight panels take a budget or two. */
#define WINDOW_FLOATS(ctx) ((ctx)->budget_floats / 4)
#define CBUF_FLOATS(ctx) (2 * (ctx)->budget_floats)
#define WEIGHT_FLOATS(ctx) ((ctx)->budget_floats)

/* grad_input reduces over (tap, c_out) pairs; aim for this many per block */
#define GI_REDUCTION 384
/* (tap, channel) pairs per grad_weight tile when they lie on the mr side */
#define GW_PAIRS_MAX 48
/* ... chosen (c_out > 1) when they fill micro-tiles this much better, every
 * tap reaches at least this many time steps, and c_in is wide enough to
 * pay for gathering a grad_output column per pair */
#define GW_TAPS_GAIN 1.15
/* each packed row of an operand costs about this many elements more
 * (finding the row) */
#define GW_PACK_ROW_ELEMENTS 16
#define GW_TAPS_MIN_T_OUT 4
#define GW_TAPS_MIN_C_IN 128
#ifndef CTBC_GW_TAPS_MIN_B /* tests lower it to exercise the taps layout */
#define CTBC_GW_TAPS_MIN_B 8
#endif

_Static_assert(sizeof(ctbc_blocking) <= sizeof(((ctbc_plan *)0)->block),
               "blocking must fit in ctbc_plan.block");

/* Largest tap group g in [1, k] with base + (g - 1)*step <= limit. */
static int64_t taps_within(int64_t k, int64_t base, int64_t step, int64_t limit)
{
    int64_t g = k;
    if (step > 0 && base + (g - 1) * step > limit)
        g = (limit - base) / step + 1;
    return ctbc_clamp(g, 1, ctbc_max(k, 1));
}

double ctbc_fill(int64_t n, int64_t size) { return (double)n / (double)ctbc_round_up(n, size); }

double ctbc_amx_speed(const ctbc_context *ctx, int64_t pairs)
{
    const double steps = (double)ctbc_ceil_div(ctbc_max(pairs, 1), CTBC_AMX_PAIRS);
    return ctx->amx_tile_speedup * ctbc_fill(ctbc_max(pairs, 1), CTBC_AMX_PAIRS) * steps /
           (steps + ctx->amx_call_steps);
}

int ctbc_amx_worth(const ctbc_problem *p, const ctbc_context *ctx, ctbc_context *amx)
{
    return ctbc_context_amx(ctx->isa, amx) && ctbc_grad_input_macs(p) >= amx->amx_min_work;
}

int ctbc_applies_amx(const ctbc_problem *p, const ctbc_context *ctx, const ctbc_layout *operand)
{
    ctbc_context amx;
    return ctbc_context_amx(ctx->isa, &amx) && p->grad_output.dtype == CTBC_BF16 && operand->dtype == CTBC_BF16 &&
           p->rounding != CTBC_ROUND_FP16;
}

int ctbc_applies_always(const ctbc_problem *p, const ctbc_context *ctx)
{
    (void)p;
    (void)ctx;
    return 1;
}

/* One output extent of a gradient's tiles: `total` values in tiles of
 * *tile (a whole number of `step`). This side's panel holds about `repack`
 * values per value of *tile; halving the OTHER extent packs it again, which
 * pays only while *tile is at least `wide`. */
typedef struct {
    int64_t total, step;
    int32_t *tile;
    double repack;
    int64_t wide;
} tile_extent;

/*
 * Halves the tiles' output extents until a gradient of `macs` multiply-adds
 * (as the costs count them: every tap of every step, which the tiles
 * compute) has the context's balance_tiles tiles (`depth` of them behind
 * each output block), while each keeps balance_min_work: a team claims
 * tiles one at a time, and where a gradient is one or two big tiles the
 * other threads wait for the last (EMR, two threads: T7 B565 Ci432 K7
 * Co785 float16, whose grad_input was one tile, 48 -> 32 ms; T15 B24
 * Ci768 K14 Co256 float16 7.8 -> 5.0 ms). An extent is halved only while
 * the other one's tile is wide (two micro-tiles): a narrower panel packed
 * again for every half costs more than the kernel work it feeds (T125
 * B1010 Ci3 K20 Co86 float32, three channels against 86: 70 -> 233 ms when
 * its grad_weight was cut by c_out). Of two extents that may halve, the one
 * whose halving packs the smaller panel again is. Only output extents are
 * cut, after the reduction's blocking is fixed: every value's sum is the
 * same kernel calls in the same order, so the bits do not change.
 */
static void split_for_balance(const ctbc_context *ctx, double macs, int64_t depth, tile_extent a, tile_extent b)
{
    for (;;) {
        const int64_t tiles = ctbc_ceil_div(a.total, *a.tile) * ctbc_ceil_div(b.total, *b.tile) * depth;
        const int a_halves = *a.tile > a.step && ctbc_min(*b.tile, b.total) >= b.wide;
        const int b_halves = *b.tile > b.step && ctbc_min(*a.tile, a.total) >= a.wide;
        if (tiles >= ctx->balance_tiles || macs / (double)(2 * tiles) < ctx->balance_min_work ||
            !(a_halves || b_halves))
            return;
        tile_extent *e = !b_halves || (a_halves && (double)*a.tile * a.repack >= (double)*b.tile * b.repack)
                             ? &a
                             : &b;
        *e->tile = (int32_t)ctbc_round_up(ctbc_ceil_div(*e->tile, 2), e->step);
    }
}

double ctbc_gw_packed_per_tap_row(const ctbc_problem *p, int64_t kc, int64_t kg, int64_t o_cols, int64_t c_cols,
                                  int odd_phase)
{
    const int64_t phases = odd_phase && (p->b & 1) && kg > 1 ? 2 : 1;
    const double window = (double)kc + (double)(kg - 1) * (double)p->b;
    return ((double)kc * (double)(o_cols + GW_PACK_ROW_ELEMENTS) +
            window * (double)(c_cols + GW_PACK_ROW_ELEMENTS) * (double)phases) /
           ((double)kg * (double)kc);
}

int64_t ctbc_gw_taps_packing_least(const ctbc_problem *p, int64_t kc, int64_t kg_max, int64_t o_cols,
                                   int64_t c_cols, int odd_phase)
{
    int64_t best = 1;
    for (int64_t kg = 2; kg <= kg_max; kg++)
        if (ctbc_gw_packed_per_tap_row(p, kc, kg, o_cols, c_cols, odd_phase) <
            ctbc_gw_packed_per_tap_row(p, kc, best, o_cols, c_cols, odd_phase))
            best = kg;
    return best;
}

/* Taps a group of grad_weight's GEMM tiles holds where its input window
 * is window_width wide and a tap's block of the tile tile_floats. */
static int64_t gw_window_taps(const ctbc_problem *p, const ctbc_context *ctx, int64_t window_width,
                              int64_t tile_floats)
{
    const int64_t kg = taps_within(p->k, ctx->kc, p->b, WINDOW_FLOATS(ctx) / window_width);
    return ctbc_min(kg, ctbc_max(1, CBUF_FLOATS(ctx) / tile_floats));
}

/* With the input window on the nr side (gw_o_on_m), a tile as wide as
 * c_in leaves the window budget room for few taps, and every group of taps
 * reads the input again: T257 B24 Ci1136 K29 Co16 float32 had 2 taps a
 * group, 15 reads of its input. A narrower tile holds more taps, but packs
 * grad_output's block once more, and each block of kc reduction rows reads
 * a window of kc + (kg-1)*b input rows: the width, in micro-tiles and the
 * widest on a tie, at which the windows read and grad_output packed add up
 * least. Only widths whose taps' accumulators stay within the window
 * budget (in L2) compete with the widest: T841 B1 Ci1568 K255 Co9 took
 * 1.23x the time with all 255 taps' accumulators, 7 MB, in one tile. */
static int64_t gw_window_width_reading_least(const ctbc_problem *p, const ctbc_context *ctx, int64_t bm,
                                             int64_t width_max)
{
    const int64_t nr = ctx->kernel->nr, taps = ctbc_max(p->k, 1);
    const double input_values = (double)ctbc_max(p->t, 1) * (double)p->b * (double)ctbc_max(p->c_in, 1);
    const double grad_output_values = (double)ctbc_max(p->t_out, 1) * (double)p->b * (double)ctbc_max(p->c_out, 1);
    int64_t best = width_max;
    double least = INFINITY;
    for (int64_t width = width_max; width >= nr; width -= nr) {
        const int64_t kg = gw_window_taps(p, ctx, width, bm * width);
        if (width < width_max && kg * bm * width > WINDOW_FLOATS(ctx))
            continue;
        const double window_rows = 1.0 + (double)(kg - 1) * (double)p->b / (double)ctx->kc;
        const double values = (double)ctbc_ceil_div(taps, kg) * window_rows * input_values +
                              (double)ctbc_ceil_div(ctbc_max(p->c_in, 1), width) * grad_output_values;
        if (values < least) {
            best = width;
            least = values;
        }
    }
    return best;
}

/* grad_weight as per-tap GEMMs, c_out on the mr side (o_on_m) or c_in. */
void ctbc_plan_gw_gemm(const ctbc_problem *p, const ctbc_context *ctx, int o_on_m, ctbc_blocking *bl)
{
    const int64_t mr = ctx->kernel->mr, nr = ctx->kernel->nr;
    const int64_t c_out = ctbc_max(p->c_out, 1), c_in = ctbc_max(p->c_in, 1);
    bl->gw_o_on_m = o_on_m;
    const int64_t gw_m = o_on_m ? c_out : c_in;
    const int64_t gw_n = o_on_m ? c_in : c_out;
    bl->gw_bm = (int32_t)ctbc_min(ctbc_round_up(gw_m, mr), ctx->mc_tiles * mr);
    bl->gw_bn = (int32_t)ctbc_min(ctbc_round_up(gw_n, nr), ctx->nc_tiles * nr);
    bl->gw_kc = (int32_t)ctx->kc;
    /* With a batch of kc rows or more, most of a window is the group's
     * shifts, packed again for every block of kc rows: where the window is
     * converted or packed into strips (not copied in one run, as a float32
     * input with c_in on the mr side is), the group that packs least per
     * tap then is small (1 where the input side is the wider). Zen 4, two
     * threads: T14 B1334 Ci12 K25 Co4 float32 2.0-2.5 -> 0.8-0.9 ms,
     * T205 B1235 Ci12 K6 Co13 bfloat16 20.5-20.8 -> 16.6-17.5 ms; not
     * T125 B1010 Ci3 K20 Co86 float32, 50-52 -> 73-79 ms that way. */
    const int window_copied = p->input.dtype == CTBC_F32 && p->rounding == CTBC_ROUND_NONE &&
                              !(o_on_m && c_in < nr);
    const int taps_packing_least = p->b >= ctx->kc && !window_copied;
    if (o_on_m && !taps_packing_least)
        bl->gw_bn = (int32_t)gw_window_width_reading_least(p, ctx, bl->gw_bm, bl->gw_bn);
    /* the input window (kc + (kg-1)*b rows) lies along c's side */
    int64_t kg = gw_window_taps(p, ctx, o_on_m ? bl->gw_bn : bl->gw_bm, (int64_t)bl->gw_bm * bl->gw_bn);
    if (taps_packing_least)
        kg = ctbc_gw_taps_packing_least(p, ctx->kc, kg, ctbc_min(c_out, o_on_m ? bl->gw_bm : bl->gw_bn),
                                        ctbc_min(c_in, o_on_m ? bl->gw_bn : bl->gw_bm), 0);
    bl->gw_kg = (int32_t)kg;
    const int64_t gw_blocks = ctbc_max(1, CBUF_FLOATS(ctx) / (kg * bl->gw_bm * bl->gw_bn));
    bl->gw_chunk = (int32_t)ctbc_min(ctbc_round_up(gw_m, bl->gw_bm), gw_blocks * bl->gw_bm);
}

/* grad_weight's cut: either half packs the other side's panel again, over
 * the same rows; the mr side (gw_chunk) is cut at chunk_step, and its panel
 * holds chunk_repack values per channel. */
static void cut_gw(const ctbc_problem *p, const ctbc_context *ctx, int64_t chunk_step, double chunk_repack,
                   ctbc_blocking *bl)
{
    const int64_t mr = ctx->kernel->mr, nr = ctx->kernel->nr;
    const int64_t c_out = ctbc_max(p->c_out, 1), c_in = ctbc_max(p->c_in, 1);
    split_for_balance(ctx, ctbc_grad_input_macs(p), ctbc_ceil_div(ctbc_max(p->k, 1), bl->gw_kg),
                      (tile_extent){bl->gw_o_on_m ? c_out : c_in, chunk_step, &bl->gw_chunk, chunk_repack, 2 * mr},
                      (tile_extent){bl->gw_o_on_m ? c_in : c_out, nr, &bl->gw_bn, 1, 2 * nr});
}

void ctbc_cut_gw_for_balance(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    cut_gw(p, ctx, bl->gw_bm, 1.0, bl);
}

void ctbc_cut_gw_window_for_balance(const ctbc_problem *p, const ctbc_context *ctx, double window_repack,
                                    ctbc_blocking *bl)
{
    const int64_t mr = ctx->kernel->mr;
    /* c_in is cut at micro-tiles where it holds two or more (44 channels
     * in 32 and 12 would pack grad_output twice for little balance) */
    const int64_t c_in_step = p->c_in >= 2 * mr ? mr : bl->gw_chunk;
    /* per kc grad_output rows of a block, kc + (kg-1)*b window rows */
    const double window_rows = 1.0 + (double)(bl->gw_kg - 1) * (double)p->b / (double)bl->gw_kc;
    cut_gw(p, ctx, c_in_step, window_rows * window_repack, bl);
}

/* grad_weight with (tap, channel) pairs on the mr side (see taps_tile). */
void ctbc_plan_gw_pairs(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    const int64_t mr = ctx->kernel->mr, nr = ctx->kernel->nr;
    const int64_t c_out = ctbc_max(p->c_out, 1), c_in = ctbc_max(p->c_in, 1);
    bl->gw_taps = 1;
    bl->gw_o_on_m = 1;
    bl->gw_bm = (int32_t)mr;
    bl->gw_chunk = (int32_t)mr;
    bl->gw_bn = (int32_t)ctbc_min(ctbc_round_up(c_in, nr), ctx->nc_tiles * nr);
    bl->gw_kc = (int32_t)ctx->kc;
    /* taps per tile: up to GW_PAIRS_MAX pairs, a whole number of
     * micro-tiles when a group not much smaller allows it */
    const int64_t kg_max = ctbc_clamp(GW_PAIRS_MAX / c_out, 1, ctbc_max(p->k, 1));
    int64_t kg = kg_max;
    for (int64_t g = kg_max; 2 * g >= kg_max; g--)
        if ((g * c_out) % mr == 0) {
            kg = g;
            break;
        }
    bl->gw_kg = (int32_t)kg;
}

/* grad_input: rows (t, b), columns c_in, reduction (k, o) */
void ctbc_plan_gi_window(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    const int64_t mr = ctx->kernel->mr, nr = ctx->kernel->nr;
    const int64_t c_out = ctbc_max(p->c_out, 1), c_in = ctbc_max(p->c_in, 1);
    bl->gi_bm = (int32_t)ctbc_min(ctbc_round_up(ctbc_max(p->t * p->b, 1), mr), ctx->mc_tiles * mr);
    bl->gi_bn = (int32_t)ctbc_min(ctbc_round_up(c_in, nr), ctx->nc_tiles * nr);
    bl->gi_ko = (int32_t)ctbc_min(c_out, 256);
    int64_t kg = ctbc_clamp(GI_REDUCTION / bl->gi_ko, 1, ctbc_max(p->k, 1));
    kg = ctbc_min(kg, taps_within(p->k, bl->gi_bm, p->b, WINDOW_FLOATS(ctx) / bl->gi_ko));
    kg = ctbc_clamp(kg, 1, ctbc_max(1, WEIGHT_FLOATS(ctx) / ((int64_t)bl->gi_bn * bl->gi_ko)));
    bl->gi_kg = (int32_t)kg;

    /* rows per tile: as many windows as the accumulator budget allows, so
     * that one weight panel serves them all */
    const int64_t gi_rows = ctbc_round_up(ctbc_max(p->t * p->b, 1), bl->gi_bm);
    const int64_t windows = ctbc_max(1, CBUF_FLOATS(ctx) / ((int64_t)bl->gi_bm * bl->gi_bn));
    bl->gi_chunk = (int32_t)ctbc_min(gi_rows, windows * bl->gi_bm);
    /* half the rows packs the weight panel again (k values a channel), half
     * the channels the window (about one a row). The rows halve also where
     * the channels are fewer than two micro-tiles: the weight panel packed
     * again is k x c_out values a channel against the half's hundreds of
     * rows of products (T1 B3841 Ci14 K7 Co362 p7: grad_input was one tile,
     * which one thread computed while the other waited). */
    split_for_balance(ctx, ctbc_grad_input_macs(p), 1,
                      (tile_extent){ctbc_max(p->t * p->b, 1), bl->gi_bm, &bl->gi_chunk, 1, 2 * mr},
                      (tile_extent){c_in, nr, &bl->gi_bn, ctbc_max(p->k, 1), 1});
}

/* grad_input with channels on the mr side (grad_input_c_on_m.c): a tile is
 * gi_bn channels by gi_chunk (t, b) rows, reducing over gi_kg taps by gi_ko
 * output channels per packed window, which keeps to the window budget. */
void ctbc_plan_gi_c_on_m(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    const int64_t mr = ctx->kernel->mr, nr = ctx->kernel->nr;
    const int64_t c_out = ctbc_max(p->c_out, 1), c_in = ctbc_max(p->c_in, 1);
    const int64_t rows = ctbc_max(p->t * p->b, 1);
    bl->gi_bn = (int32_t)ctbc_min(ctbc_round_up(c_in, mr), ctx->mc_tiles * mr);
    bl->gi_ko = (int32_t)ctbc_min(c_out, 256);
    /* rows per tile: the window's width, and at least four tiles where the
     * rows allow (fixed by the problem, never by the thread count) */
    const int64_t window_rows = ctbc_max(nr, WINDOW_FLOATS(ctx) / bl->gi_ko / nr * nr);
    const int64_t quarter = ctbc_round_up(ctbc_ceil_div(rows, 4), nr);
    bl->gi_chunk = (int32_t)ctbc_clamp(quarter, nr, ctbc_min(window_rows, ctx->nc_tiles * nr));
    int64_t kg = ctbc_clamp(GI_REDUCTION / bl->gi_ko, 1, ctbc_max(p->k, 1));
    kg = ctbc_min(kg, taps_within(p->k, bl->gi_chunk, p->b, WINDOW_FLOATS(ctx) / bl->gi_ko));
    kg = ctbc_clamp(kg, 1, ctbc_max(1, WEIGHT_FLOATS(ctx) / ((int64_t)bl->gi_bn * bl->gi_ko)));
    bl->gi_kg = (int32_t)kg;
}

/* The relative cost of grad_weight with (tap, channel) pairs: a micro-tile
 * fills as the pairs do, but gathering a grad_output column per pair costs
 * about GW_TAPS_GAIN; measured not to pay below the gates. Exported for the
 * implementation list. */
double ctbc_cost_gw_pairs(const ctbc_problem *p, const ctbc_context *ctx);
double ctbc_cost_gw_pairs(const ctbc_problem *p, const ctbc_context *ctx)
{
    const int64_t mr = ctx->kernel->mr;
    const int64_t t_out = ctbc_max(p->t_out, 0);
    /* Rows where only some taps of a micro-tile reach grad_output come in
     * runs of b_size rows, each run one more kernel call: not worth it for
     * small batches; nor for short or narrow problems, unless c_out is 1 */
    const int gates = p->c_out == 1 || (t_out >= GW_TAPS_MIN_T_OUT && p->c_in >= GW_TAPS_MIN_C_IN);
    if (!(p->c_out >= 1 && p->k >= 2 && mr >= 2 && p->b >= CTBC_GW_TAPS_MIN_B && gates))
        return INFINITY;
    return GW_TAPS_GAIN / (ctbc_fill(p->k * p->c_out, mr) * ctbc_fill(ctbc_max(p->c_in, 1), ctx->kernel->nr)) +
           ctbc_cost_gw_store(p, 1);
}

static void choose_parallel(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    const double macs = 2.0 * (double)p->t_out * (double)p->b * (double)p->c_in * (double)p->c_out * (double)p->k;
    const double elements = 2.0 * (double)p->t * (double)p->b * (double)p->c_in +
                            (double)p->t_out * (double)p->b * (double)p->c_out +
                            2.0 * (double)p->k * (double)p->c_in * (double)p->c_out;
    bl->parallel = macs >= ctx->backward_team_min_work || elements >= ctx->backward_team_min_elements;
}

void ctbc_blocking_choose(const ctbc_problem *p, ctbc_isa isa, uint32_t forced, ctbc_blocking *bl)
{
    ctbc_context ctx;
    ctbc_context_for_isa(isa, &ctx);
    memset(bl, 0, sizeof(*bl));
    bl->isa = (int32_t)isa;
    ctx.planned = bl;
    for (int g = 0; g < CTBC_GRADIENTS; g++) {
        bl->impl[g] = ctbc_impl_choose((ctbc_gradient)g, p, &ctx, forced);
        ctbc_impl_at((ctbc_gradient)g, bl->impl[g])->plan(p, &ctx, bl);
    }
    choose_parallel(p, &ctx, bl);
}

static int64_t floats64(int64_t n) { return ctbc_round_up(ctbc_max(n, 1), 16); }

/* Buffer sizes of absurd problems (a batch near 2^60 with broadcast views)
 * would overflow int64_t. They stop at a ceiling no allocation can meet, low
 * enough that the sums and round-ups below stay defined; phase 1 then asks
 * for a workspace nobody can allocate instead of computing garbage. */
#define WS_CEILING (INT64_MAX / 8) /* three of them, rounded up, still fit */
static int64_t ws_mul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) || r > WS_CEILING ? WS_CEILING : r;
}
static int64_t ws_add(int64_t a, int64_t b) { return a + b > WS_CEILING ? WS_CEILING : a + b; }

/* (sizes saturate at WS_CEILING, which no budget admits) */
int64_t ctbc_gw_window_rows(const ctbc_problem *p, int64_t kc, int64_t kg)
{
    const int64_t b = ctbc_max(p->b, 1);
    const int64_t reading = ctbc_min(kg, ws_add(ctbc_max(p->t, 1), ctbc_ceil_div(kc - 1, b)));
    return ws_add(kc, ws_mul(ctbc_max(reading, 1) - 1, b));
}

int ctbc_gw_group_fits(const ctbc_problem *p, const ctbc_context *ctx, const ctbc_blocking *bl, int64_t kg)
{
    const int64_t window_width = bl->gw_o_on_m ? bl->gw_bn : bl->gw_bm;
    return ctbc_gw_window_rows(p, bl->gw_kc, kg) <= WINDOW_FLOATS(ctx) / window_width &&
           ws_mul(ws_mul(kg, bl->gw_chunk), bl->gw_bn) <= CBUF_FLOATS(ctx);
}

static void need_at_least(ctbc_ws_layout *need, int64_t cbuf, int64_t abuf, int64_t bbuf)
{
    need->cbuf = ctbc_max(need->cbuf, cbuf);
    need->abuf = ctbc_max(need->abuf, abuf);
    need->bbuf = ctbc_max(need->bbuf, bbuf);
}

void ctbc_plan_nothing(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    (void)p;
    (void)ctx;
    (void)bl;
}

void ctbc_scratch_none(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)
{
    (void)p;
    (void)bl;
    (void)need;
}

int64_t ctbc_gw_gemm_cbuf(const ctbc_blocking *bl)
{
    return floats64(ws_mul((int64_t)bl->gw_kg * bl->gw_chunk, bl->gw_bn));
}

void ctbc_scratch_gw_gemm(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)
{
    const int64_t gw_window = ctbc_gw_window_rows(p, bl->gw_kc, bl->gw_kg);
    const int64_t gw_c = ctbc_gw_gemm_cbuf(bl);
    const int64_t gw_a = ws_mul(bl->gw_o_on_m ? bl->gw_kc : gw_window, bl->gw_bm);
    const int64_t gw_b = ws_mul(bl->gw_o_on_m ? gw_window : bl->gw_kc, bl->gw_bn);
    need_at_least(need, gw_c, gw_a, gw_b);
}

int64_t ctbc_gb_in_gw_lane_stride(const ctbc_blocking *bl)
{
    return floats64(bl->gw_bn);
}

/* The lanes of one tile's channels after the GEMM's accumulator */
void ctbc_scratch_gb_in_gw(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)
{
    (void)p;
    const int64_t lanes = ws_mul(CTBC_ROW_SUM_LANES, ctbc_gb_in_gw_lane_stride(bl));
    need_at_least(need, ws_add(ctbc_gw_gemm_cbuf(bl), lanes), 0, 0);
}

/* Pairs of rows (grad_weight_bf16.c): the grad_output block, and two
 * windows of input pairs (one per phase of the taps' row shifts). */
void ctbc_scratch_gw_bf16(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)
{
    const int64_t block_pairs = ctbc_ceil_div(bl->gw_kc, 2);
    const int64_t window_pairs = ws_add(block_pairs, ws_add(ws_mul(bl->gw_kg - 1, p->b) / 2, 1));
    const int64_t go_side = ws_mul(block_pairs, bl->gw_o_on_m ? bl->gw_bm : bl->gw_bn);
    const int64_t input_side = ws_mul(2 * window_pairs, bl->gw_o_on_m ? bl->gw_bn : bl->gw_bm);
    need_at_least(need, ws_mul((int64_t)bl->gw_kg * bl->gw_chunk, bl->gw_bn), bl->gw_o_on_m ? go_side : input_side,
                  bl->gw_o_on_m ? input_side : go_side);
}

void ctbc_scratch_gw_pairs(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)
{
    const int64_t gw_pairs = ctbc_round_up(ws_mul(bl->gw_kg, ctbc_max(p->c_out, 1)), bl->gw_bm);
    need_at_least(need, ws_mul(gw_pairs, bl->gw_bn), ws_mul(bl->gw_kc, gw_pairs), ws_mul(bl->gw_kc, bl->gw_bn));
}

void ctbc_scratch_gi_window(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)
{
    const int64_t gi_c = ws_mul(bl->gi_chunk, bl->gi_bn);
    const int64_t gi_a = ws_mul(ws_add(bl->gi_bm, ws_mul(bl->gi_kg - 1, p->b)), bl->gi_ko);
    const int64_t gi_b = ws_mul((int64_t)bl->gi_bn * bl->gi_kg, bl->gi_ko);
    need_at_least(need, gi_c, gi_a, gi_b);
}

void ctbc_scratch_gi_c_on_m(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)
{
    /* the accumulator [channel][row] and its transpose [row][channel] */
    const int64_t gi_c = ws_mul(2 * (int64_t)bl->gi_bn, bl->gi_chunk);
    const int64_t window = ctbc_round_up(ws_add(bl->gi_chunk, ws_mul(bl->gi_kg - 1, p->b)), 16);
    need_at_least(need, gi_c, ws_mul(window, bl->gi_ko), ws_mul((int64_t)bl->gi_bn * bl->gi_kg, bl->gi_ko));
}

void ctbc_ws_layout_of(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *ws)
{
    ctbc_ws_layout need = {0, 0, 0, 0};
    for (int g = 0; g < CTBC_GRADIENTS; g++)
        ctbc_impl_at((ctbc_gradient)g, bl->impl[g])->scratch(p, bl, &need);
    ws->cbuf = floats64(need.cbuf);
    ws->abuf = floats64(need.abuf);
    ws->bbuf = floats64(need.bbuf);
    ws->per_thread = ws->cbuf + ws->abuf + ws->bbuf;
}

void ctbc_blocking_store(ctbc_plan *plan, const ctbc_blocking *blocking)
{
    memset(plan->block, 0, sizeof(plan->block));
    memcpy(plan->block, blocking, sizeof(*blocking));
}

void ctbc_blocking_load(const ctbc_plan *plan, ctbc_blocking *blocking)
{
    memcpy(blocking, plan->block, sizeof(*blocking));
}

int ctbc_grad_input_direct(const ctbc_problem *p, int64_t *row_stride)
{
    const int64_t *s = p->grad_input.stride;
    return p->grad_input.dtype == CTBC_F32 && s[2] == 1 &&
           ctbc_rows_evenly_spaced(s[0], s[1], p->b, 0, p->t * p->b - 1, row_stride);
}
