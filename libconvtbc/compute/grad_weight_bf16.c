/*
 * grad_weight on bfloat16 pairs of (t, b) rows through VDPBF16PS: the
 * per-tap GEMM of grad_weight.c,
 *
 *   grad_weight[k] [c_in x c_out] = sum over rows r of input row r + (k - pad)*b_size
 *                                   times grad_output row r,
 *
 * with the reduction over rows taken two rows at a time: both operands are
 * packed as strips of pairs (ctbc_pack_strips_bf16), rows 2q and 2q + 1 of
 * a row block in one 4-byte element, and each kernel step multiplies two
 * rows in one instruction (ctbc_ukr_bf16_fn).
 *
 * Per row block, grad_output is packed once for every tap of the tile, and
 * so is a window of input rows, read by tap k from (k - k0)*b_size rows on
 * (grad_weight.c's window); an odd shift would split every pair, so with
 * an odd batch a second window starts one row later. Rows where a tap has
 * no input row are padding, zero in the window; the grad_output half
 * beside them then adds 0 * finite = 0, so when the grad_output block holds
 * an Inf or NaN it is packed per tap with those rows zero too (the
 * instruction's contract: padding is zero on both sides). Likewise the
 * zero grad_output half that completes an odd block meets a real input
 * row: with an Inf or NaN in the windows, each tap packs its own rows.
 *
 * Two implementations share the driver, as the float32 GEMMs do: c_in
 * (gw_c_on_m_bf16) or c_out (gw_o_on_m_bf16) on the micro-tile's rows;
 * both also on the narrow tile (*_narrow, CTBC_NARROW_IMPL). A third,
 * gw_c_on_m_amx, has a driver of its own below (AMX tiles read their A
 * along the reduction: the input window is packed transposed).
 * Both apply where grad_output and input are bfloat16 tensors and the
 * compute dtype keeps them (gi_c_on_m_bf16's rule); outputs differ from the
 * float32 GEMMs only on subnormals, which the instruction flushes, and in
 * the order of the sum.
 */
#include <string.h>

#include "compute/driver.h"

static void pairs_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    const ctbc_problem *p = run->problem;
    const ctbc_blocking *bl = &run->blocking;
    const ctbc_kernel *kern = run->kernel;
    const int64_t mr = kern->mr, nr = kern->nr, b_size = p->b;
    const int o_on_m = bl->gw_o_on_m;

    const int64_t m_size = o_on_m ? p->c_out : p->c_in, n_size = o_on_m ? p->c_in : p->c_out;
    const int64_t tiles_m = ctbc_ceil_div(m_size, bl->gw_chunk), tiles_n = ctbc_ceil_div(n_size, bl->gw_bn);
    const int64_t mi = tile % tiles_m, ni = (tile / tiles_m) % tiles_n, gi = tile / (tiles_m * tiles_n);
    const int64_t m0 = mi * bl->gw_chunk, mb = ctbc_min(bl->gw_chunk, m_size - m0);
    const int64_t n0 = ni * bl->gw_bn, nb = ctbc_min(bl->gw_bn, n_size - n0);
    const int64_t k0 = gi * bl->gw_kg, k1 = ctbc_min(p->k, k0 + bl->gw_kg);
    const int64_t mbp = ctbc_round_up(mb, mr), nbp = ctbc_round_up(nb, nr);

    /* the grad_output side and the input side of the tile */
    const int64_t o_width = o_on_m ? mr : nr, o_first = o_on_m ? m0 : n0, o_count = o_on_m ? mb : nb;
    const int64_t c_width = o_on_m ? nr : mr, c_first = o_on_m ? n0 : m0, c_count = o_on_m ? nb : mb;
    uint32_t *o_pairs = (uint32_t *)(void *)(o_on_m ? scratch->abuf : scratch->bbuf);
    uint32_t *c_pairs = (uint32_t *)(void *)(o_on_m ? scratch->bbuf : scratch->abuf);

    /* grad_output rows any tap of the group reads: tap k1-1 starts lowest,
     * k0 ends highest; cut into equal blocks of at most gw_kc rows */
    const int64_t u_lo = ctbc_tap_steps(p, k1 - 1).lo * b_size, u_hi = ctbc_tap_steps(p, k0).hi * b_size;
    const int64_t n_blocks = ctbc_ceil_div(u_hi - u_lo, bl->gw_kc);
    const int64_t block_rows = n_blocks ? ctbc_ceil_div(u_hi - u_lo, n_blocks) : 0;

    /* the input window's pairs per phase: rows of the block and the
     * group's shifts past the first, and one row for phase 1 */
    const int64_t window_pairs = ctbc_ceil_div(block_rows, 2) + (k1 - k0 - 1) * b_size / 2 + 1;
    const int64_t c_window = window_pairs * c_width; /* one strip of a window */
    const int64_t c_phase = ctbc_ceil_div(c_count, c_width) * c_window;
    const int odd_shifts = (b_size & 1) && k1 - k0 > 1;

    float *cbuf = scratch->cbuf;
    memset(cbuf, 0, (size_t)((k1 - k0) * mbp * nbp) * sizeof(float));
    for (int64_t r0 = u_lo; r0 < u_hi; r0 += block_rows) {
        const int64_t r1 = ctbc_min(u_hi, r0 + block_rows), pairs = ctbc_ceil_div(r1 - r0, 2);
        const int finite = ctbc_pack_strips_bf16(o_pairs, pairs, (int)o_width, &run->grad_output, b_size, r0, r0,
                                                 r1, o_first, o_count);
        int64_t packed_lo = r0, packed_hi = r1; /* grad_output rows in o_pairs */
        /* input row x_first + h + 2q in pair q of the window of phase h;
         * rows without an input row (padding) are zero */
        const int64_t x_first = r0 + (k0 - p->pad) * b_size;
        int windows_finite = 1;
        for (int h = 0; h <= odd_shifts; h++)
            windows_finite &= ctbc_pack_strips_bf16(c_pairs + h * c_phase, window_pairs, (int)c_width, &run->input,
                                                    b_size, x_first + h, 0, p->t * b_size, c_first, c_count);
        for (int64_t k = k0; k < k1; k++) {
            const ctbc_range steps = ctbc_tap_steps(p, k);
            const int64_t lo = ctbc_max(steps.lo * b_size, r0), hi = ctbc_min(steps.hi * b_size, r1);
            if (lo >= hi)
                continue;
            if (!finite && (lo != packed_lo || hi != packed_hi)) {
                ctbc_pack_strips_bf16(o_pairs, pairs, (int)o_width, &run->grad_output, b_size, r0, lo, hi, o_first,
                                      o_count);
                packed_lo = lo;
                packed_hi = hi;
            }
            /* pairs [pa, pb) of the block hold this tap's rows; grad_output
             * pair q meets input pair q + shift / 2 of the window of the
             * shift's phase */
            const int64_t pa = (lo - r0) / 2, pb = ctbc_ceil_div(hi - r0, 2);
            const int64_t shift = (k - k0) * b_size, phase = shift & 1;
            const uint32_t *o_at = o_pairs + pa * o_width;
            const uint32_t *c_at = c_pairs + phase * c_phase + ((shift - phase) / 2 + pa) * c_width;
            if (!windows_finite) {
                /* an Inf or NaN may meet a grad_output row the tap lacks
                 * (the last pair of an odd block): the tap's own rows only,
                 * over the windows, which the next block packs again */
                ctbc_pack_strips_bf16(c_pairs, window_pairs, (int)c_width, &run->input, b_size, x_first + shift,
                                      lo + (k - p->pad) * b_size, hi + (k - p->pad) * b_size, c_first, c_count);
                c_at = c_pairs + pa * c_width;
            }
            const uint32_t *a = o_on_m ? o_at : c_at, *b = o_on_m ? c_at : o_at;
            const int64_t o_strip = pairs * o_width;
            const int64_t a_strip = o_on_m ? o_strip : c_window, b_strip = o_on_m ? c_window : o_strip;
            const ctbc_ukr_args args = {1, pb - pa, 1, mr, 0, nr, 0, 0};
            float *ck = cbuf + (k - k0) * mbp * nbp;
            /* jr/ir order: the nr-wide micro-panel stays in L1 */
            for (int64_t js = 0; js < nbp / nr; js++)
                for (int64_t is = 0; is < mbp / mr; is++)
                    kern->ukr_bf16(&args, a + is * a_strip, b + js * b_strip, ck + is * mr * nbp + js * nr, nbp);
        }
    }

    const ctbc_layout *gw = &p->grad_weight;
    /* rows of the tile are c (or o), columns o (or c) */
    const ctbc_writer *out = o_on_m ? &run->gw_o_rows : &run->gw_c_rows;
    for (int64_t k = k0; k < k1; k++)
        ctbc_write_tile(out, k * gw->stride[0] + n0 * out->cs, cbuf + (k - k0) * mbp * nbp, nbp, mb, nb, m0);
}

static int applies_pairs(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctx->kernel->ukr_bf16 && p->grad_output.dtype == CTBC_BF16 && p->input.dtype == CTBC_BF16 &&
           p->rounding != CTBC_ROUND_FP16;
}

/* The columns of the tile's grad_output and input sides. */
static int64_t o_cols_of(const ctbc_problem *p, const ctbc_blocking *bl)
{
    return ctbc_min(p->c_out, bl->gw_o_on_m ? bl->gw_chunk : bl->gw_bn);
}

static int64_t c_cols_of(const ctbc_problem *p, const ctbc_blocking *bl)
{
    return ctbc_min(p->c_in, bl->gw_o_on_m ? bl->gw_bn : bl->gw_chunk);
}

/* grad_weight.c's blocking, with a tile one mr-side block wide (its side
 * is packed whole), and the tap group within it that packs least per tap:
 * large where the grad_output block is the wide side, 1 where the input
 * window is (few output channels). */
static void plan_with(const ctbc_problem *p, const ctbc_context *ctx, int o_on_m, ctbc_blocking *bl)
{
    ctbc_plan_gw_gemm(p, ctx, o_on_m, bl);
    bl->gw_chunk = bl->gw_bm;
    bl->gw_kg = (int32_t)ctbc_gw_taps_packing_least(p, bl->gw_kc, bl->gw_kg, o_cols_of(p, bl), c_cols_of(p, bl), 1);
}

/* The pair tile's speed (the context's), plus the packing: each pair
 * element packed costs about GW_BF16_PACK multiply-adds of a full tile.
 * Zen 4, one thread, whole op, medians of 3, the float32 implementation
 * against this one: T8 B32 Ci1472 K5 Co15 gw_pairs 0.78, gw_o_on_m_bf16
 * 0.71 ms; T3164 B59 Ci402 K10 Co3 gw_pairs 134, gw_o_on_m_bf16 354 ms;
 * T205 B1235 Ci12 K6 Co13 gw_c_on_m 33.8, gw_c_on_m_bf16 40.6 ms;
 * T6 B334 Ci2 K8 Co4 gw_c_on_m 0.32, gw_c_on_m_bf16 0.51 ms. */
#define GW_BF16_PACK 8.0

static double cost_with(const ctbc_problem *p, const ctbc_context *ctx, int o_on_m)
{
    ctbc_blocking bl = {0};
    plan_with(p, ctx, o_on_m, &bl);
    const int64_t o_cols = o_cols_of(p, &bl), c_cols = c_cols_of(p, &bl);
    const double packed = ctbc_gw_packed_per_tap_row(p, bl.gw_kc, bl.gw_kg, o_cols, c_cols, 1);
    return ctbc_cost_gw_gemm(p, ctx, o_on_m) / ctx->pair_tile_speedup +
           GW_BF16_PACK * packed / (double)ctbc_max(o_cols * c_cols, 1) + ctbc_cost_gw_store(p, o_on_m);
}

static double cost_c_on_m(const ctbc_problem *p, const ctbc_context *ctx) { return cost_with(p, ctx, 0); }

static double cost_o_on_m(const ctbc_problem *p, const ctbc_context *ctx) { return cost_with(p, ctx, 1); }

/* (the cost reads plan_with's blocks uncut) */
static void plan_c_on_m(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    plan_with(p, ctx, 0, bl);
    ctbc_cut_gw_for_balance(p, ctx, bl);
}

static void plan_o_on_m(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    plan_with(p, ctx, 1, bl);
    ctbc_cut_gw_for_balance(p, ctx, bl);
}

const ctbc_impl ctbc_impl_gw_c_on_m_bf16 = {"gw_c_on_m_bf16", applies_pairs, cost_c_on_m, plan_c_on_m,
                                            ctbc_scratch_gw_bf16, ctbc_gw_tiles, pairs_tile, 0};
const ctbc_impl ctbc_impl_gw_o_on_m_bf16 = {"gw_o_on_m_bf16", applies_pairs, cost_o_on_m, plan_o_on_m,
                                            ctbc_scratch_gw_bf16, ctbc_gw_tiles, pairs_tile, 0};
/* ---- gw_c_on_m_amx: AMX tiles ----------------------------------------------
 *
 * The same GEMM per tap with c_in on the AMX tile's rows: the tile reads
 * its A along the reduction, so the input window is packed transposed,
 * channel by channel along its rows (ctbc_pack_rows_transposed_h16), and
 * tap k reads it from (k - k0)*b_size rows on, at any shift (no pairs to
 * split, no second phase); grad_output is the B side, strips of pairs of
 * rows as above. Row blocks are padded to whole steps of CTBC_AMX_PAIRS
 * pairs with zero rows on both sides; a tap's rows are taken in whole
 * steps, the rows past them zero in the grad_output strips, or (with an
 * Inf or NaN) packed per tap as above.
 */
static void tiles_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    const ctbc_problem *p = run->problem;
    const ctbc_blocking *bl = &run->blocking;
    const ctbc_kernel *kern = run->kernel;
    const int64_t size = CTBC_AMX_TILE, b_size = p->b;

    const int64_t tiles_m = ctbc_ceil_div(p->c_in, bl->gw_chunk), tiles_n = ctbc_ceil_div(p->c_out, bl->gw_bn);
    const int64_t mi = tile % tiles_m, ni = (tile / tiles_m) % tiles_n, gi = tile / (tiles_m * tiles_n);
    const int64_t m0 = mi * bl->gw_chunk, mb = ctbc_min(bl->gw_chunk, p->c_in - m0);
    const int64_t n0 = ni * bl->gw_bn, nb = ctbc_min(bl->gw_bn, p->c_out - n0);
    const int64_t k0 = gi * bl->gw_kg, k1 = ctbc_min(p->k, k0 + bl->gw_kg);
    const int64_t mbp = ctbc_round_up(mb, size), nbp = ctbc_round_up(nb, size);
    uint32_t *o_pairs = (uint32_t *)(void *)scratch->bbuf;
    uint16_t *window = (uint16_t *)(void *)scratch->abuf;

    const int64_t u_lo = ctbc_tap_steps(p, k1 - 1).lo * b_size, u_hi = ctbc_tap_steps(p, k0).hi * b_size;
    const int64_t n_blocks = ctbc_ceil_div(u_hi - u_lo, bl->gw_kc);
    const int64_t block_rows = n_blocks ? ctbc_ceil_div(u_hi - u_lo, n_blocks) : 0;
    const int64_t ld = ctbc_round_up(2 * ctbc_round_up(ctbc_ceil_div(block_rows, 2), CTBC_AMX_PAIRS) +
                                         (k1 - k0 - 1) * b_size, 16);

    kern->amx_begin();
    float *cbuf = scratch->cbuf;
    memset(cbuf, 0, (size_t)((k1 - k0) * mbp * nbp) * sizeof(float));
    for (int64_t r0 = u_lo; r0 < u_hi; r0 += block_rows) {
        const int64_t r1 = ctbc_min(u_hi, r0 + block_rows);
        const int64_t steps = ctbc_round_up(ctbc_ceil_div(r1 - r0, 2), CTBC_AMX_PAIRS);
        const int finite = ctbc_pack_strips_bf16(o_pairs, steps, (int)size, &run->grad_output, b_size, r0, r0, r1, n0, nb);
        int64_t packed_lo = r0, packed_hi = r1;
        /* input row x_first + w in column w of each channel's row */
        const int64_t x_first = r0 + (k0 - p->pad) * b_size, columns = 2 * steps + (k1 - k0 - 1) * b_size;
        const int windows_finite = ctbc_pack_rows_transposed_h16(window, ld, columns, &run->input, b_size, x_first, 0,
                                                                 p->t * b_size, m0, mb, mbp);
        for (int64_t k = k0; k < k1; k++) {
            const ctbc_range tap = ctbc_tap_steps(p, k);
            const int64_t lo = ctbc_max(tap.lo * b_size, r0), hi = ctbc_min(tap.hi * b_size, r1);
            if (lo >= hi)
                continue;
            if (!finite && (lo != packed_lo || hi != packed_hi)) {
                ctbc_pack_strips_bf16(o_pairs, steps, (int)size, &run->grad_output, b_size, r0, lo, hi, n0, nb);
                packed_lo = lo;
                packed_hi = hi;
            }
            const int64_t shift = (k - k0) * b_size, x_shift = (k - p->pad) * b_size;
            const uint16_t *a = window + shift;
            if (!windows_finite) {
                /* the tap's own rows only (see pairs_tile) */
                ctbc_pack_rows_transposed_h16(window, ld, 2 * steps, &run->input, b_size, x_first + shift,
                                              lo + x_shift, hi + x_shift, m0, mb, mbp);
                a = window;
            }
            /* the steps holding the tap's rows */
            const int64_t pa = (lo - r0) / 2 / CTBC_AMX_PAIRS * CTBC_AMX_PAIRS;
            const int64_t pb = ctbc_round_up(ctbc_ceil_div(hi - r0, 2), CTBC_AMX_PAIRS);
            const ctbc_ukr_args args = {1, pb - pa, ld, 0, 0, size, 0, 0};
            float *ck = cbuf + (k - k0) * mbp * nbp;
            for (int64_t js = 0; js < nbp / size; js++)
                for (int64_t is = 0; is < mbp / size; is++)
                    kern->ukr_amx(&args, a + is * size * ld + 2 * pa, o_pairs + (js * steps + pa) * size,
                                  ck + is * size * nbp + js * size, nbp);
        }
    }
    for (int64_t k = k0; k < k1; k++)
        ctbc_write_tile(&run->gw_c_rows, k * p->grad_weight.stride[0] + n0 * run->gw_c_rows.cs,
                        cbuf + (k - k0) * mbp * nbp, nbp, mb, nb, m0);
}

static int applies_tiles(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctbc_applies_amx(p, ctx, &p->input);
}

/* plan_with's blocking on the AMX tile, its tap group packing least with
 * one window (no phases). */
static void plan_tiles_uncut(const ctbc_problem *p, const ctbc_context *amx, ctbc_blocking *bl)
{
    ctbc_plan_gw_gemm(p, amx, 0, bl);
    bl->gw_chunk = bl->gw_bm;
    bl->gw_kg = (int32_t)ctbc_gw_taps_packing_least(p, bl->gw_kc, bl->gw_kg, o_cols_of(p, bl), c_cols_of(p, bl), 0);
}

static void plan_tiles(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    ctbc_context amx;
    if (!ctbc_context_amx(ctx->isa, &amx)) /* (never chosen then: it does not apply) */
        return;
    plan_tiles_uncut(p, &amx, bl);
    ctbc_cut_gw_window_for_balance(p, &amx, amx.amx_window_repack, bl);
}

/* The AMX tile's speed (the context's), a call reducing a tap's rows of
 * one row block, plus the packing, as cost_with. */
static double cost_tiles(const ctbc_problem *p, const ctbc_context *ctx)
{
    ctbc_context amx;
    if (!ctbc_amx_worth(p, ctx, &amx))
        return INFINITY;
    ctbc_blocking bl = {0};
    plan_tiles_uncut(p, &amx, &bl);
    const int64_t o_cols = o_cols_of(p, &bl), c_cols = c_cols_of(p, &bl);
    const int64_t tap_rows = ctbc_max(ctbc_min(p->t, p->t_out) * p->b, 1);
    const double packed = ctbc_gw_packed_per_tap_row(p, bl.gw_kc, bl.gw_kg, o_cols, c_cols, 0);
    return ctbc_cost_gw_gemm(p, &amx, 0) / ctbc_amx_speed(&amx, ctbc_ceil_div(ctbc_min(tap_rows, bl.gw_kc), 2)) +
           GW_BF16_PACK * packed / (double)ctbc_max(o_cols * c_cols, 1) + ctbc_cost_gw_store(p, 0);
}

/* The pairs' scratch with the row block padded to whole tile steps (the
 * window, of 16-bit values, takes half the pairs' room). */
static void scratch_tiles(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)
{
    ctbc_blocking padded = *bl;
    padded.gw_kc = (int32_t)ctbc_round_up(bl->gw_kc, 2 * CTBC_AMX_PAIRS);
    ctbc_scratch_gw_bf16(p, &padded, need);
}

const ctbc_impl ctbc_impl_gw_c_on_m_amx = {"gw_c_on_m_amx", applies_tiles, cost_tiles,    plan_tiles,
                                           scratch_tiles,   ctbc_gw_tiles, tiles_tile, CTBC_TILE_AMX};

/* The same on the narrow tile (where the kernel has a narrow VDPBF16PS one). */
CTBC_NARROW_IMPL(ctbc_impl_gw_c_on_m_bf16_narrow, "gw_c_on_m_bf16_narrow",
                 ctbc_impl_gw_c_on_m_bf16, narrow_gw_tile_cost);
CTBC_NARROW_IMPL(ctbc_impl_gw_o_on_m_bf16_narrow, "gw_o_on_m_bf16_narrow",
                 ctbc_impl_gw_o_on_m_bf16, narrow_gw_tile_cost);
