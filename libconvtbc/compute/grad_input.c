/*
 * grad_input[t, b, c] = sum_k sum_o grad_output[t+pad-k, b, o] * weight[k, c, o]
 *
 * A GEMM [(t, b) x c_in] reducing over (k, o). For a row m = t*b_size + b
 * and tap k the grad_output row is m + (pad - k)*b_size: consecutive rows of
 * the tile read consecutive grad_output rows, and the next tap reads b_size
 * rows earlier. So one row-major window of grad_output rows (block rows plus
 * (kg-1)*b_size) serves a whole tap group, and the micro-kernel walks taps
 * with a negative outer stride.
 *
 * Terms with t+pad-k outside [0, t_out) do not exist; they are not
 * multiplied (weight may hold Inf, and 0*Inf would be NaN). For each micro-
 * tile the taps valid for all its rows go through the kernel directly; taps
 * valid for only some rows go through edge_rows (full tile into scratch,
 * keep the valid rows).
 */
#include <math.h>
#include <string.h>

#include "compute/driver.h"

/* A weight panel this small stays in L1 whatever the loop order */
#define L1_PANEL_BYTES (16 * 1024)

/* Multiply-adds below which partial taps are merged when the weights allow */
#define GI_MERGE_MACS 5e7

typedef struct {
    int64_t m_size, tiles_m, tiles_n;
} gi_shape;

static gi_shape shape_of(const ctbc_run *run)
{
    const ctbc_problem *p = run->problem;
    gi_shape s;
    s.m_size = p->t * p->b;
    s.tiles_m = ctbc_ceil_div(s.m_size, run->blocking.gi_chunk);
    s.tiles_n = ctbc_ceil_div(p->c_in, run->blocking.gi_bn);
    return s;
}

static int64_t gi_tiles(const ctbc_run *run)
{
    const gi_shape s = shape_of(run);
    return s.tiles_m * s.tiles_n;
}

/* What one (tap group, c_out block) step of a tile works on. */
typedef struct {
    int64_t k0, k1, o0, no;
    const float *weight_panel; /* [strip][k - k0][o][nr] */
    int finite;                /* 1: no Inf or NaN in the panel */
    int merge;                 /* 1: merge partial taps when finite */
} reduction_block;

/* Where a window's results go: row m0 of the tile's accumulator, or (in
 * place) of grad_input itself. */
typedef struct {
    float *c;
    int64_t ldc;
    int in_place; /* 1: c is grad_input; only its nb valid columns exist */
    int fresh;    /* 1: c is not cleared; each micro-tile is visited once
                     (the tile reduces in one block) and written whole */
    int64_t nb;
} tile_out;

/* The taps of one mr-row micro-tile of a window, the same for every strip
 * of columns: worked out once per window, not once per kernel call. */
typedef struct {
    int64_t row0, valid;
    int64_t kf_lo, kf_hi; /* taps through one kernel call (valid for every row) */
    int64_t ka_lo, ka_hi; /* taps valid for at least one row */
    int single_call;      /* 1: the one call covers every tap of the micro-tile */
    const float *window;  /* packed window at the micro-tile's row 0 */
    /* the call's A operand and arguments (overwrite set by the caller) */
    const float *a;
    ctbc_ukr_args args;
} strip_plan;

/* Where a window's grad_output rows are read: in place (direct, rows g_rs
 * apart from g_direct) or from the packed window in buf (rows ld apart);
 * with direct, buf is free for small copies. */
typedef struct {
    int direct;
    const float *g_direct;
    int64_t g_rs, ld;
    float *buf;
} window_source;

/* Micro-tile plans computed at a time (a window has at most MC_TILES) */
#define PLAN_GROUP 32

/* Any micro-tile other than the common one (see window_step): partial rows
 * or columns, taps valid for only some rows, or written in place through a
 * scratch tile. */
static void micro_tile(const ctbc_run *run, const reduction_block *rb, const window_source *src,
                       const strip_plan *sp, const float *b_js, float *c_tile, int64_t js,
                       const tile_out *out)
{
    const ctbc_problem *p = run->problem;
    const ctbc_kernel *kern = run->kernel;
    const int64_t mr = kern->mr, nr = kern->nr, ldc = out->ldc;
    const int64_t b_size = p->b, pad = p->pad, t_out = p->t_out, g_rows = t_out * b_size;
    const int64_t k0 = rb->k0, k1 = rb->k1, no = rb->no;
    const int64_t row0 = sp->row0, valid = sp->valid;
    const int64_t cols = ctbc_min(nr, out->nb - js * nr);
    float *window_buf = src->buf;

    /* In a fresh accumulator (or in place) a micro-tile that one kernel
     * call covers is written by it (overwrite); any other is cleared first,
     * in place through a zeroed scratch tile whose valid part is copied
     * out, so nothing outside the view is touched. */
    const int via_scratch = out->in_place && (valid < mr || cols < nr || !sp->single_call);
    float scratch_tile[CTBC_MR_MAX * CTBC_NR_MAX];
    float *c_call = c_tile;
    int64_t ldc_call = ldc;
    if (via_scratch) {
        memset(scratch_tile, 0, sizeof(float) * (size_t)(mr * nr));
        c_call = scratch_tile;
        ldc_call = nr;
    } else if (out->fresh && !sp->single_call) {
        for (int64_t i = 0; i < mr; i++)
            memset(c_tile + i * ldc, 0, sizeof(float) * (size_t)nr);
    }
    if (sp->kf_lo < sp->kf_hi) {
        ctbc_ukr_args args = sp->args;
        const float *a = sp->a;
        if (src->direct && valid < mr) {
            /* the rows past the tile's end may lie past grad_output's:
             * pack this micro-tile's window, zero where there are no rows
             * (only rows past `valid` can read those) */
            const int64_t nk = sp->kf_hi - sp->kf_lo;
            ctbc_pack_rows(window_buf, no, mr + (nk - 1) * b_size, &run->grad_output, b_size,
                           row0 + (pad - sp->kf_hi + 1) * b_size, 0, g_rows, rb->o0, no);
            args = (ctbc_ukr_args){nk, no, no, 1, -b_size * no, nr, no * nr, 0};
            a = window_buf + (nk - 1) * b_size * no;
        }
        args.overwrite = out->fresh && sp->single_call && !via_scratch;
        kern->ukr(&args, a, b_js + (sp->kf_lo - k0) * no * nr, c_call, ldc_call);
    }
    for (int64_t k = sp->ka_lo; k < sp->ka_hi; k++) {
        if (k >= sp->kf_lo && k < sp->kf_hi)
            continue;
        unsigned char row_ok[CTBC_MR_MAX] = {0};
        for (int64_t i = 0; i < valid; i++)
            row_ok[i] = ctbc_tap_reaches(p, (row0 + i) / b_size, k);
        const float *a = sp->window + (k1 - 1 - k) * b_size * src->ld;
        if (src->direct) {
            /* copy the rows this tap reaches; zeros elsewhere */
            for (int64_t i = 0; i < mr; i++) {
                float *dst = window_buf + i * no;
                if (row_ok[i])
                    memcpy(dst, src->g_direct + (row0 + i + (pad - k) * b_size) * src->g_rs,
                           (size_t)no * sizeof(float));
                else
                    memset(dst, 0, (size_t)no * sizeof(float));
            }
            a = window_buf;
        }
        const ctbc_ukr_args args = {1, no, src->ld, 1, 0, nr, 0, 0};
        ctbc_edge_rows(kern, &args, a, b_js + (k - k0) * no * nr, c_call, ldc_call, row_ok);
    }
    if (via_scratch)
        for (int64_t i = 0; i < valid; i++)
            memcpy(c_tile + i * ldc, scratch_tile + i * nr, sizeof(float) * (size_t)cols);
}

/* Rows [m0, m0 + mb) of the tile (one window) against one reduction block.
 *
 * grad_output that the kernel can read in place (float32, unit column
 * stride, evenly spaced rows) is not copied: full micro-tiles read it
 * directly, a partial one (the tile's last) packs its own small window,
 * and edge taps copy just their mr rows (zeros for rows the tap does not
 * reach) into `window_buf`. Otherwise the whole window is packed,
 * with zero rows where grad_output has none. */
static void window_step(const ctbc_run *run, const reduction_block *rb, int64_t m0, int64_t mb,
                        int64_t strips_n, const tile_out *out, float *window_buf)
{
    const int64_t ldc = out->ldc;
    const ctbc_problem *p = run->problem;
    const ctbc_kernel *kern = run->kernel;
    const int64_t mr = kern->mr, nr = kern->nr;
    const int64_t b_size = p->b, pad = p->pad, t_out = p->t_out;
    const int64_t k0 = rb->k0, k1 = rb->k1, nk = k1 - k0, no = rb->no;
    const int64_t mbp = ctbc_round_up(mb, mr);
    const int64_t g_rows = t_out * b_size;

    int64_t g_rs = 0;
    /* in place only when its rows are close together (a window's worth of
     * rows then spans few pages, as a packed window would) */
    /* With a finite weight panel, the zero rows of a packed window may be
     * multiplied (0 * w adds an exact zero, and the sums never hold -0), so
     * every tap a micro-tile touches goes through one kernel call. Small
     * problems, where partial micro-tiles are many, take that path. */
    const int merged = rb->finite && rb->merge;
    const int direct = !merged && ctbc_operand_direct(&run->grad_output, b_size, g_rows, &g_rs) &&
                       g_rs <= 1024;
    const float *g_direct = (const float *)run->grad_output.data + rb->o0;
    const window_source src = {direct, g_direct, g_rs, no, window_buf};

    /* packed: window row w is grad_output row g_first + w; tile row m and
     * tap k read window row (m - m0) + (k1 - 1 - k)*b_size */
    const int64_t g_first = m0 + (pad - (k1 - 1)) * b_size;
    const int64_t ld = no;
    if (!direct)
        ctbc_pack_rows(window_buf, ld, mbp + (nk - 1) * b_size, &run->grad_output, b_size,
                       g_first, 0, g_rows, rb->o0, no);
    const int64_t b_strip = nk * no * nr;

    /* jr/ir order as in BLIS: one nr-wide weight micro-panel stays in L1
     * while the (smaller) mr-row slices of the window stream from L2. But
     * when the whole weight panel fits in L1 anyway and the results go
     * straight to grad_input, rows outer: each of the mr output rows is
     * then written front to back, which the store prefetchers follow,
     * instead of one 64-byte piece per row per strip. */
    const int64_t strips_m = mbp / mr;
    const int rows_outer = out->in_place && strips_n * b_strip * (int64_t)sizeof(float) <= L1_PANEL_BYTES;
    /* strips whose every column exists */
    const int64_t full_n = out->nb / nr;

    for (int64_t is0 = 0; is0 < strips_m; is0 += PLAN_GROUP) {
        const int64_t n_plans = ctbc_min(PLAN_GROUP, strips_m - is0);
        strip_plan plans[PLAN_GROUP];
        for (int64_t q = 0; q < n_plans; q++) {
            strip_plan *sp = &plans[q];
            const int64_t is = is0 + q;
            sp->row0 = m0 + is * mr;
            sp->valid = ctbc_min(mr, m0 + mb - sp->row0);
            const int64_t t_lo = sp->row0 / b_size, t_hi = (sp->row0 + sp->valid - 1) / b_size;
            /* taps valid for every row, and for at least one row */
            const ctbc_range any = ctbc_taps_between(p, t_lo, t_hi, k0, k1);
            const ctbc_range all = merged ? any : ctbc_taps_between(p, t_hi, t_lo, k0, k1);
            sp->ka_lo = any.lo;
            sp->ka_hi = any.hi;
            sp->kf_lo = all.lo;
            sp->kf_hi = all.hi;
            const int64_t edge_taps =
                (sp->ka_hi - sp->ka_lo) - ctbc_max(0, sp->kf_hi - sp->kf_lo);
            sp->single_call = sp->kf_lo < sp->kf_hi && edge_taps == 0;
            sp->window = window_buf + is * mr * ld;
            sp->a = NULL;
            if (sp->kf_lo >= sp->kf_hi || (direct && sp->valid < mr))
                continue; /* no call, or one that packs its own window */
            /* row 0 of tap kf_lo in row-major rows a_row apart; the next
             * tap is b_size rows earlier */
            int64_t a_row;
            if (direct) {
                a_row = g_rs;
                sp->a = g_direct + (sp->row0 + (pad - sp->kf_lo) * b_size) * g_rs;
            } else {
                a_row = ld;
                sp->a = sp->window + (k1 - 1 - sp->kf_lo) * b_size * ld;
            }
            sp->args = (ctbc_ukr_args){sp->kf_hi - sp->kf_lo, no, a_row, 1, -b_size * a_row,
                                       nr, no * nr, out->fresh};
        }

        const int64_t n_outer = rows_outer ? n_plans : strips_n;
        const int64_t n_inner = rows_outer ? strips_n : n_plans;
        for (int64_t u = 0; u < n_outer; u++) {
            for (int64_t v = 0; v < n_inner; v++) {
                const int64_t js = rows_outer ? v : u, q = rows_outer ? u : v;
                const strip_plan *sp = &plans[q];
                const float *b_js = rb->weight_panel + js * b_strip;
                float *c_tile = out->c + (is0 + q) * mr * ldc + js * nr;
                /* the common micro-tile: whole, and one call writes it */
                if (sp->single_call && sp->valid == mr && js < full_n) {
                    kern->ukr(&sp->args, sp->a, b_js + (sp->kf_lo - k0) * no * nr, c_tile, ldc);
                    continue;
                }
                micro_tile(run, rb, &src, sp, b_js, c_tile, js, out);
            }
        }
    }
}

static void window_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    const ctbc_problem *p = run->problem;
    const ctbc_blocking *bl = &run->blocking;
    const int64_t mr = run->kernel->mr, nr = run->kernel->nr;
    const gi_shape s = shape_of(run);
    const int64_t b_size = p->b;

    const int64_t mi = tile % s.tiles_m, ni = tile / s.tiles_m;
    const int64_t m0 = mi * bl->gi_chunk, mb = ctbc_min(bl->gi_chunk, s.m_size - m0);
    const int64_t c0 = ni * bl->gi_bn, nb = ctbc_min(bl->gi_bn, p->c_in - c0);
    const int64_t nbp = ctbc_round_up(nb, nr), strips_n = nbp / nr;
    const int64_t mbp = ctbc_round_up(mb, mr);

    /* taps that touch any row of the tile */
    const ctbc_range taps = ctbc_taps_between(p, m0 / b_size, (m0 + mb - 1) / b_size, 0, p->k);
    const int64_t k_any_lo = taps.lo, k_any_hi = taps.hi;

    /* A tile whose reduction is one block is finished in one visit per
     * micro-tile: when grad_input is float32 with evenly spaced rows it is
     * written in place, without an accumulator to clear and copy out. */
    const ctbc_layout *lay = &p->grad_input;
    const int one_block =
        k_any_lo < k_any_hi && k_any_hi - k_any_lo <= bl->gi_kg && 0 < p->c_out && p->c_out <= bl->gi_ko;
    const int in_place = one_block && bl->gi_in_place;
    tile_out out = {scratch->cbuf, nbp, 0, one_block, nb};
    if (in_place)
        out = (tile_out){(float *)run->grad_input + m0 * run->grad_input_row_stride + c0,
                         run->grad_input_row_stride, 1, 1, nb};
    else if (!one_block)
        memset(out.c, 0, (size_t)(mbp * nbp) * sizeof(float));

    const int merge = bl->gi_merge;
    for (int64_t k0 = k_any_lo; k0 < k_any_hi; k0 += bl->gi_kg) {
        const int64_t k1 = ctbc_min(k_any_hi, k0 + bl->gi_kg);
        for (int64_t o0 = 0; o0 < p->c_out; o0 += bl->gi_ko) {
            const int64_t no = ctbc_min(bl->gi_ko, p->c_out - o0);
            ctbc_pack_weight(scratch->bbuf, (int)nr, &run->weight, k0, k1 - k0, o0, no, c0, nb);
            const int64_t panel = strips_n * (k1 - k0) * no * nr;
            int finite = merge && ctbc_all_finite(scratch->bbuf, panel);
            const reduction_block rb = {k0, k1, o0, no, scratch->bbuf, finite, merge};
            for (int64_t w0 = 0; w0 < mb; w0 += bl->gi_bm) {
                const int64_t wb = ctbc_min(bl->gi_bm, mb - w0);
                const tile_out window_out = {out.c + w0 * out.ldc, out.ldc, out.in_place, out.fresh, nb};
                window_step(run, &rb, m0 + w0, wb, strips_n, &window_out, scratch->abuf);
            }
        }
    }
    if (in_place)
        return;
    ctbc_write_tile(&run->gi_out, c0 * lay->stride[2], out.c, nbp, mb, nb, m0);
}

/* The implementations (see driver.h): one driver, whose partial taps are
 * merged (small problems, where partial micro-tiles are many) or not, and
 * whose tiles are written in place or through the accumulator. */

static int applies_in_place(const ctbc_problem *p, const ctbc_context *ctx)
{
    (void)ctx;
    int64_t row_stride;
    return ctbc_grad_input_direct(p, &row_stride);
}

/* Channels fill the nr-wide side of each micro-tile. */
static double cost_window(const ctbc_problem *p, const ctbc_context *ctx)
{
    return 1.0 / ctbc_fill(ctbc_max(p->c_in, 1), ctx->kernel->nr);
}

/* Merging costs a finiteness check of every weight panel and multiplies
 * the zero rows of partial taps; measured to pay below GI_MERGE_MACS
 * multiply-adds, and only where partial taps exist (k > 1 or padding). */
static double cost_merged(const ctbc_problem *p, const ctbc_context *ctx)
{
    return (p->k > 1 || p->pad > 0) && ctbc_grad_input_macs(p) < GI_MERGE_MACS ? cost_window(p, ctx) : INFINITY;
}

static void plan_with(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl, int merge,
                      int in_place)
{
    ctbc_plan_gi_window(p, ctx, bl);
    bl->gi_merge = merge;
    bl->gi_in_place = in_place;
}

static void plan_merged_in_place(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    plan_with(p, ctx, bl, 1, 1);
}

static void plan_merged(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    plan_with(p, ctx, bl, 1, 0);
}

static void plan_in_place(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    plan_with(p, ctx, bl, 0, 1);
}

static void plan_window(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    plan_with(p, ctx, bl, 0, 0);
}

const ctbc_impl ctbc_impl_gi_merged_in_place = {"gi_merged_in_place", applies_in_place, cost_merged,
                                                plan_merged_in_place, ctbc_scratch_gi_window, gi_tiles,
                                                window_tile, 0};
const ctbc_impl ctbc_impl_gi_merged = {"gi_merged", ctbc_applies_always, cost_merged, plan_merged,
                                       ctbc_scratch_gi_window, gi_tiles, window_tile, 0};
const ctbc_impl ctbc_impl_gi_in_place = {"gi_in_place", applies_in_place, cost_window, plan_in_place,
                                         ctbc_scratch_gi_window, gi_tiles, window_tile, 0};
const ctbc_impl ctbc_impl_gi_window = {"gi_window", ctbc_applies_always, cost_window, plan_window,
                                       ctbc_scratch_gi_window, gi_tiles, window_tile, 0};

/* The same on the narrow tile, for few input channels. */
CTBC_NARROW_IMPL(ctbc_impl_gi_merged_in_place_narrow, "gi_merged_in_place_narrow",
                 ctbc_impl_gi_merged_in_place, narrow_gi_tile_cost);
CTBC_NARROW_IMPL(ctbc_impl_gi_merged_narrow, "gi_merged_narrow", ctbc_impl_gi_merged, narrow_gi_tile_cost);
CTBC_NARROW_IMPL(ctbc_impl_gi_in_place_narrow, "gi_in_place_narrow",
                 ctbc_impl_gi_in_place, narrow_gi_tile_cost);
CTBC_NARROW_IMPL(ctbc_impl_gi_window_narrow, "gi_window_narrow", ctbc_impl_gi_window, narrow_gi_tile_cost);
