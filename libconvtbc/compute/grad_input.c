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
#include <string.h>

#include "compute/driver.h"

/* Micro-tile rows of a window whose time steps are computed once */
#define T_CACHE 64

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

int64_t ctbc_grad_input_tiles(const ctbc_run *run)
{
    const gi_shape s = shape_of(run);
    return s.tiles_m * s.tiles_n;
}

/* No Inf or NaN among x[0..n): an all-ones exponent carries into the sign
 * bit when 2^23 is added to it. Eight independent lanes (the compiler
 * turns them into one vector), no early exit. */
static int panel_finite(const float *x, int64_t n)
{
    uint32_t acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint32_t u[8];
        memcpy(u, x + i, sizeof u);
        for (int l = 0; l < 8; l++)
            acc[l] |= (u[l] & 0x7f800000u) + 0x00800000u;
    }
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        acc[0] |= (u & 0x7f800000u) + 0x00800000u;
    }
    uint32_t all = 0;
    for (int l = 0; l < 8; l++)
        all |= acc[l];
    return !(all & 0x80000000u);
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

    /* packed: window row w is grad_output row g_first + w; tile row m and
     * tap k read window row (m - m0) + (k1 - 1 - k)*b_size */
    const int64_t g_first = m0 + (pad - (k1 - 1)) * b_size;
    const int64_t ld = no;
    if (!direct)
        ctbc_pack_rows(window_buf, ld, mbp + (nk - 1) * b_size, &run->grad_output, b_size,
                       g_first, 0, g_rows, rb->o0, no);
    const int64_t b_strip = nk * no * nr;

    /* time steps of the first and last row of each micro-tile (the same for
     * every strip: two divisions per micro-tile, not per kernel call) */
    int64_t t_cache[T_CACHE][2];
    for (int64_t is = 0; is < mbp / mr && is < T_CACHE; is++) {
        const int64_t row0 = m0 + is * mr, valid = ctbc_min(mr, m0 + mb - row0);
        t_cache[is][0] = row0 / b_size;
        t_cache[is][1] = (row0 + valid - 1) / b_size;
    }

    /* jr/ir order as in BLIS: one nr-wide weight micro-panel stays in L1
     * while the (smaller) mr-row slices of the window stream from L2. But
     * when the whole weight panel fits in L1 anyway and the results go
     * straight to grad_input, rows outer: each of the mr output rows is
     * then written front to back, which the store prefetchers follow,
     * instead of one 64-byte piece per row per strip. */
    const int64_t strips_m = mbp / mr;
    const int rows_outer = out->in_place && strips_n * b_strip * (int64_t)sizeof(float) <= L1_PANEL_BYTES;
    const int64_t n_outer = rows_outer ? strips_m : strips_n, n_inner = rows_outer ? strips_n : strips_m;
    for (int64_t u = 0; u < n_outer; u++) {
        for (int64_t v = 0; v < n_inner; v++) {
            const int64_t js = rows_outer ? v : u, is = rows_outer ? u : v;
            const float *b_js = rb->weight_panel + js * b_strip;
            const int64_t row0 = m0 + is * mr;
            const int64_t valid = ctbc_min(mr, m0 + mb - row0);
            int64_t t_lo, t_hi;
            if (is < T_CACHE) {
                t_lo = t_cache[is][0];
                t_hi = t_cache[is][1];
            } else {
                t_lo = row0 / b_size;
                t_hi = (row0 + valid - 1) / b_size;
            }
            /* taps valid for every row, and for at least one row */
            int64_t kf_lo = ctbc_max(k0, t_hi + pad - t_out + 1);
            int64_t kf_hi = ctbc_min(k1, t_lo + pad + 1);
            const int64_t ka_lo = ctbc_max(k0, t_lo + pad - t_out + 1);
            const int64_t ka_hi = ctbc_min(k1, t_hi + pad + 1);
            if (merged) {
                kf_lo = ka_lo;
                kf_hi = ka_hi;
            }
            /* In a fresh accumulator (or in place) a micro-tile that one
             * kernel call covers is written by it (overwrite); any other is
             * cleared first, in place through a zeroed scratch tile whose
             * valid part is copied out, so nothing outside the view is
             * touched. */
            float *c_tile = out->c + is * mr * ldc + js * nr;
            const int64_t cols = ctbc_min(nr, out->nb - js * nr);
            const int64_t edge_taps = (ka_hi - ka_lo) - ctbc_max(0, kf_hi - kf_lo);
            const int single_call = kf_lo < kf_hi && edge_taps == 0;
            const int via_scratch = out->in_place && (valid < mr || cols < nr || !single_call);
            float scratch_tile[CTBC_MR_MAX * CTBC_NR_MAX];
            float *c_call = c_tile;
            int64_t ldc_call = ldc;
            if (via_scratch) {
                memset(scratch_tile, 0, sizeof(float) * (size_t)(mr * nr));
                c_call = scratch_tile;
                ldc_call = nr;
            } else if (out->fresh && !single_call) {
                for (int64_t i = 0; i < mr; i++)
                    memset(c_tile + i * ldc, 0, sizeof(float) * (size_t)nr);
            }
            const int64_t overwrite = out->fresh && single_call && !via_scratch;
            if (kf_lo < kf_hi) {
                /* row 0 of tap kf_lo in row-major rows a_row apart; the next
                 * tap is b_size rows earlier */
                const int64_t nk = kf_hi - kf_lo;
                const float *a;
                int64_t a_row;
                if (direct && valid < mr) {
                    /* the rows past the tile's end may lie past grad_output's:
                     * pack this micro-tile's window, zero where there are no
                     * rows (only rows past `valid` can read those) */
                    ctbc_pack_rows(window_buf, no, mr + (nk - 1) * b_size, &run->grad_output, b_size,
                                   row0 + (pad - kf_hi + 1) * b_size, 0, g_rows, rb->o0, no);
                    a_row = no;
                    a = window_buf + (nk - 1) * b_size * no;
                } else if (direct) {
                    a_row = g_rs;
                    a = g_direct + (row0 + (pad - kf_lo) * b_size) * g_rs;
                } else {
                    a_row = ld;
                    a = window_buf + (is * mr + (k1 - 1 - kf_lo) * b_size) * ld;
                }
                const ctbc_ukr_args args = {nk, no, a_row, 1, -b_size * a_row, nr, no * nr, overwrite};
                kern->ukr(&args, a, b_js + (kf_lo - k0) * no * nr, c_call, ldc_call);
            }
            for (int64_t k = ka_lo; k < ka_hi; k++) {
                if (k >= kf_lo && k < kf_hi)
                    continue;
                unsigned char row_ok[CTBC_MR_MAX] = {0};
                for (int64_t i = 0; i < valid; i++) {
                    const int64_t tg = (row0 + i) / b_size + pad - k;
                    row_ok[i] = tg >= 0 && tg < t_out;
                }
                const float *a = window_buf + (is * mr + (k1 - 1 - k) * b_size) * ld;
                if (direct) {
                    /* copy the rows this tap reaches; zeros elsewhere */
                    for (int64_t i = 0; i < mr; i++) {
                        float *dst = window_buf + i * no;
                        if (row_ok[i])
                            memcpy(dst, g_direct + (row0 + i + (pad - k) * b_size) * g_rs,
                                   (size_t)no * sizeof(float));
                        else
                            memset(dst, 0, (size_t)no * sizeof(float));
                    }
                    a = window_buf;
                }
                const ctbc_ukr_args args = {1, no, ld, 1, 0, nr, 0, 0};
                ctbc_edge_rows(kern, &args, a, b_js + (k - k0) * no * nr, c_call, ldc_call,
                               row_ok);
            }
            if (via_scratch)
                for (int64_t i = 0; i < valid; i++)
                    memcpy(c_tile + i * ldc, scratch_tile + i * nr, sizeof(float) * (size_t)cols);
        }
    }
}

void ctbc_grad_input_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    const ctbc_problem *p = run->problem;
    const ctbc_blocking *bl = &run->blocking;
    const int64_t mr = run->kernel->mr, nr = run->kernel->nr;
    const gi_shape s = shape_of(run);
    const int64_t b_size = p->b, pad = p->pad, t_out = p->t_out;

    const int64_t mi = tile % s.tiles_m, ni = tile / s.tiles_m;
    const int64_t m0 = mi * bl->gi_chunk, mb = ctbc_min(bl->gi_chunk, s.m_size - m0);
    const int64_t c0 = ni * bl->gi_bn, nb = ctbc_min(bl->gi_bn, p->c_in - c0);
    const int64_t nbp = ctbc_round_up(nb, nr), strips_n = nbp / nr;
    const int64_t mbp = ctbc_round_up(mb, mr);

    /* taps that touch any row of the tile: 0 <= t + pad - k < t_out */
    const int64_t t_first = m0 / b_size, t_last = (m0 + mb - 1) / b_size;
    const int64_t k_any_lo = ctbc_max(0, t_first + pad - t_out + 1);
    const int64_t k_any_hi = ctbc_min(p->k, t_last + pad + 1);

    /* A tile whose reduction is one block is finished in one visit per
     * micro-tile: when grad_input is float32 with evenly spaced rows it is
     * written in place, without an accumulator to clear and copy out. */
    const ctbc_layout *lay = &p->grad_input;
    const int one_block =
        k_any_lo < k_any_hi && k_any_hi - k_any_lo <= bl->gi_kg && 0 < p->c_out && p->c_out <= bl->gi_ko;
    const int in_place = one_block && run->grad_input_direct;
    tile_out out = {scratch->cbuf, nbp, 0, one_block, nb};
    if (in_place)
        out = (tile_out){(float *)run->grad_input + m0 * run->grad_input_row_stride + c0,
                         run->grad_input_row_stride, 1, 1, nb};
    else if (!one_block)
        memset(out.c, 0, (size_t)(mbp * nbp) * sizeof(float));

    /* small problems: merge partial taps (see window_step) */
    const double macs =
        (double)p->t * (double)p->b * (double)p->c_in * (double)p->k * (double)p->c_out;
    const int merge = (p->k > 1 || pad > 0) && macs < GI_MERGE_MACS;
    for (int64_t k0 = k_any_lo; k0 < k_any_hi; k0 += bl->gi_kg) {
        const int64_t k1 = ctbc_min(k_any_hi, k0 + bl->gi_kg);
        for (int64_t o0 = 0; o0 < p->c_out; o0 += bl->gi_ko) {
            const int64_t no = ctbc_min(bl->gi_ko, p->c_out - o0);
            ctbc_pack_weight(scratch->bbuf, (int)nr, &run->weight, k0, k1 - k0, o0, no, c0, nb);
            const int64_t panel = strips_n * (k1 - k0) * no * nr;
            int finite = merge && panel_finite(scratch->bbuf, panel);
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
    ctbc_store_tile(ctbc_element_ptr(run->grad_input, lay->dtype, c0 * lay->stride[2]), lay->dtype,
                    out.c, nbp, mb, nb, m0, b_size, lay->stride[0], lay->stride[1], lay->stride[2],
                    ctbc_store16_for(run->kernel, lay->dtype), run->kernel->transpose);
}
