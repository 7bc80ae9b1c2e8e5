/*
 * grad_weight[k, c, o] = sum_{t, b} xp[t+k, b, c] * grad_output[t, b, o]
 *
 * Per tap k this is a GEMM [c_in x c_out] reducing over the rows
 * r = t*b_size + b of grad_output; the input rows it pairs with are the same
 * rows shifted by (k - pad)*b_size. So one packed window of input rows,
 * kc + (kg-1)*b_size long, serves kg taps by pointer offset, instead of
 * packing an im2col matrix per tap.
 *
 * Padding rows of xp are never read: for tap k only the reduction rows whose
 * input row exists are summed (the padded terms are zero by definition,
 * and multiplying them would turn an Inf in grad_output into NaN).
 *
 * Tile = (tap group, block of the mr side, block of the nr side); with
 * gw_o_on_m the mr side is c_out (grad_output strips) and the nr side c_in
 * (window strips), else the reverse. With few output channels (gw_taps)
 * the mr side is (tap, channel) pairs instead: see taps_tile.
 */
#include <string.h>

#include "compute/driver.h"

typedef struct {
    int64_t m_size, n_size, tiles_m, tiles_n;
} gw_shape;

static gw_shape shape_of(const ctbc_run *run)
{
    /* (with gw_taps: one mr-side tile, of (tap, channel) pairs) */
    const ctbc_problem *p = run->problem;
    const ctbc_blocking *bl = &run->blocking;
    gw_shape s;
    s.m_size = bl->gw_o_on_m ? p->c_out : p->c_in;
    s.n_size = bl->gw_o_on_m ? p->c_in : p->c_out;
    s.tiles_m = bl->gw_taps ? 1 : ctbc_ceil_div(s.m_size, bl->gw_chunk);
    s.tiles_n = ctbc_ceil_div(s.n_size, bl->gw_bn);
    return s;
}

int64_t ctbc_gw_tiles(const ctbc_run *run)
{
    const gw_shape s = shape_of(run);
    return s.tiles_m * s.tiles_n * ctbc_ceil_div(run->problem->k, run->blocking.gw_kg);
}

/* Reduction rows [lo, hi) of tap k: the rows of its grad_output steps. */
static void tap_rows(const ctbc_problem *p, int64_t k, int64_t *lo, int64_t *hi)
{
    const ctbc_range s = ctbc_tap_steps(p, k);
    *lo = s.lo * p->b;
    *hi = s.hi * p->b;
}

/*
 * One side of the per-tap GEMM for the current row block: strips of
 * `width` columns of grad_output rows or input-window rows, read by the
 * kernel in one of three ways:
 *  - in place, when the operand is float32 with evenly spaced rows
 *    (ctbc_operand_direct) and few kernel calls reuse each strip;
 *  - widened: other operands in a small block are converted once into a
 *    row-major copy (one bulk conversion for contiguous rows), which the
 *    kernel reads like an operand in place;
 *  - packed into contiguous strips (the trailing partial strip of an
 *    operand read in place always is: its padding columns must exist).
 */
/* Strips reused by at most this many kernel calls are read in place: more
 * for the nr side (each row is a whole 64-byte line) than for the mr side
 * (a few floats per row, one page per row when rows are far apart). */
#define DIRECT_REUSE_M 2
#define DIRECT_REUSE_N 4
/* grad_output on the mr side is read in place only in blocks of at most
 * this many channels, else copied row by row first. An mr-wide strip of a
 * long row is a fraction of a line, and every strip walks all the rows
 * again: T1 B3841 Ci14 K7 Co362 p7 float32 (gw_o_on_m_narrow, one strip
 * of c_in, 362-float rows) took 0.62x the time with the copy, T64 B1 Ci32
 * K4 Co257 0.91x (EMR, alternating processes). The input on the mr side
 * (gw_c_on_m) keeps its in-place reads at any width: its window rows are
 * shared by a group of taps, and copying its long rows took 1.07-1.21x the
 * time on 6 of 13 such shapes (T64 B1 Ci896 K16 Co16 0.48 -> 0.58 ms). */
#define DIRECT_GRAD_OUTPUT_COLS_M 64
/* In the pairs layout the input strips are read once per pair micro-tile,
 * over rows that every tap of the tile shares: measured faster in place up
 * to 16 micro-tiles (T15 B257 Ci832 K5 Co7: 4.4-5.0 ms against 5.8-6.9 ms
 * packed, one thread). */
#define DIRECT_REUSE_PAIRS 16
/* A widened copy with rows at most this long is as compact as strips */
#define WIDEN_ROW_FLOATS 32

typedef struct {
    const float *direct; /* operand row direct_first, column 0 of the side; NULL: none */
    int64_t direct_first;
    int64_t row_stride;  /* of direct */
    int64_t direct_strips;
    const float *packed; /* strip s >= direct_strips at (s - direct_strips)*rows*width */
    int64_t first;       /* operand row of packed row 0 */
    int64_t rows;
    int64_t width;
} side;

/* Pointer to operand row `row` of strip `strip`, and the kernel's step per row. */
static const float *side_at(const side *sd, int64_t strip, int64_t row, int64_t *step)
{
    if (strip < sd->direct_strips) {
        *step = sd->row_stride;
        return sd->direct + (row - sd->direct_first) * sd->row_stride + strip * sd->width;
    }
    *step = sd->width;
    return sd->packed + ((strip - sd->direct_strips) * sd->rows + row - sd->first) * sd->width;
}

/* An operand as the sides read it: rows g = t*b_size + b, rows_total of them. */
typedef struct {
    const ctbc_operand *op;
    int64_t b_size, rows_total;
} operand_rows;

/* A block of an operand: rows [first, first + rows) (rows outside
 * [row_lo, row_hi) are never read), columns [col0, col0 + ncols). */
typedef struct {
    int64_t first, rows, row_lo, row_hi, col0, ncols;
} row_block;

/* Prepares a side of strips `width` wide over a block, in `buf` of
 * rows * round_up(ncols, width) floats; each strip is read by `reuse`
 * kernel calls, in place when that is at most `max_reuse` and the block
 * is at most `max_cols` wide. */
static side side_make(const operand_rows *src, const row_block *blk, int64_t width, float *buf, int64_t reuse,
                      int64_t max_reuse, int64_t max_cols)
{
    const ctbc_operand *op = src->op;
    const int64_t b_size = src->b_size, first = blk->first, rows = blk->rows, col0 = blk->col0;
    const int64_t ncols = blk->ncols, row_lo = blk->row_lo, row_hi = blk->row_hi;
    side sd = {NULL, 0, 0, 0, buf, first, rows, width};
    int64_t rs;
    /* In place only when few kernel calls reuse each strip: a packed strip
     * is contiguous (no TLB walk per row), which pays for the copy once
     * several calls read it. */
    const int few_reads = reuse <= max_reuse;
    if (few_reads && ncols <= max_cols && ctbc_operand_direct(op, b_size, src->rows_total, &rs)) {
        sd.direct_strips = ncols / width;
        sd.row_stride = rs;
        sd.direct = (const float *)op->data + col0;
    } else if (few_reads || ncols <= WIDEN_ROW_FLOATS) {
        /* every strip, the partial one too: its columns past ncols read
         * the next row (results dropped) or, after the last row, zeros */
        const int64_t over = ctbc_round_up(ncols, width) - ncols;
        ctbc_pack_rows(buf, ncols, rows, op, b_size, first, row_lo, row_hi, col0, ncols);
        memset(buf + rows * ncols, 0, (size_t)over * sizeof(float));
        sd.direct_strips = ctbc_ceil_div(ncols, width);
        sd.row_stride = ncols;
        sd.direct = buf;
        sd.direct_first = first;
        return sd;
    }
    const int64_t packed_col0 = col0 + sd.direct_strips * width;
    if (packed_col0 < col0 + ncols)
        ctbc_pack_strips(buf, rows, (int)width, op, b_size, first, row_lo, row_hi, packed_col0,
                         col0 + ncols - packed_col0);
    return sd;
}

/* dst[i] = column `col` of operand row first + i for i < n, zero where the
 * row lies outside [0, rows_total). */
static void pack_column(float *dst, const ctbc_operand *op, int64_t b_size, int64_t rows_total,
                        int64_t first, int64_t n, int64_t col)
{
    const int64_t lo = ctbc_clamp(-first, 0, n), hi = ctbc_clamp(rows_total - first, lo, n);
    for (int64_t i = 0; i < lo; i++)
        dst[i] = 0.0f;
    for (int64_t i = hi; i < n; i++)
        dst[i] = 0.0f;
    if (lo >= hi)
        return;
    const int64_t g = first + lo;
    int64_t step;
    if (ctbc_rows_evenly_spaced(op->s0, op->s1, b_size, g, first + hi - 1, &step) && step >= 0)
        ctbc_convert_run(dst + lo, op, (g / b_size) * op->s0 + (g % b_size) * op->s1 + col * op->s2,
                         step, hi - lo);
    else
        ctbc_pack_rows(dst + lo, 1, hi - lo, op, b_size, g, g, first + hi, col, 1);
}

/* A run of reduction rows [sa, sb) of a pair micro-tile and the rows of
 * the micro-tile that have all of it. */
typedef struct {
    int64_t sa, sb;
    int all_rows;
    unsigned char row_ok[CTBC_MR_MAX];
} pair_segment;

typedef struct {
    int n_seg;
    pair_segment seg[2 * CTBC_MR_MAX + 1];
} pair_tile;

/* Pair micro-tiles planned at a time */
#define PAIR_TILES 16

/* Cuts [x0, x1) wherever one of the n_real rows' ranges [lo, hi) starts or
 * stops, keeping the segments some row has. */
static void plan_pair_tile(pair_tile *pt, int64_t n_real, const int64_t *lo, const int64_t *hi,
                           int64_t x0, int64_t x1)
{
    int64_t cut[2 * CTBC_MR_MAX + 2];
    int n_cut = 0;
    cut[n_cut++] = x0;
    cut[n_cut++] = x1;
    for (int64_t i = 0; i < n_real; i++) {
        if (lo[i] > x0 && lo[i] < x1)
            cut[n_cut++] = lo[i];
        if (hi[i] > x0 && hi[i] < x1)
            cut[n_cut++] = hi[i];
    }
    for (int a = 1; a < n_cut; a++) /* insertion sort, <= 14 values */
        for (int c = a; c > 0 && cut[c - 1] > cut[c]; c--) {
            const int64_t t = cut[c];
            cut[c] = cut[c - 1];
            cut[c - 1] = t;
        }
    pt->n_seg = 0;
    for (int sgi = 0; sgi + 1 < n_cut; sgi++) {
        pair_segment *seg = &pt->seg[pt->n_seg];
        seg->sa = cut[sgi];
        seg->sb = cut[sgi + 1];
        if (seg->sa >= seg->sb)
            continue;
        int n_ok = 0;
        memset(seg->row_ok, 0, sizeof seg->row_ok);
        for (int64_t i = 0; i < n_real; i++) {
            seg->row_ok[i] = lo[i] <= seg->sa && seg->sb <= hi[i];
            n_ok += seg->row_ok[i];
        }
        if (!n_ok)
            continue;
        seg->all_rows = n_ok == n_real;
        pt->n_seg++;
    }
}

/*
 * Small c_out (gw_taps): the tile is taps [k0, k1) x c_in block
 * [n0, n0 + nb), and its rows are the (tap, output channel) pairs,
 * r = (k - k0)*c_out + o, reducing over input rows X. Tap k pairs input row
 * X with grad_output row X - (k - pad)*b_size, so with grad_output column o
 * packed once per pair (rows of the block shifted by that tap), the pairs
 * are rows of the kernel's A and one input row serves all of them: the
 * micro-tiles are full whatever c_out is, and the input is packed once for
 * every tap of the tile instead of once per tap. Input rows where only some
 * pairs of a micro-tile have a grad_output row go through a scratch tile
 * that keeps those rows.
 */
static void taps_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    const ctbc_problem *p = run->problem;
    const ctbc_blocking *bl = &run->blocking;
    const ctbc_kernel *kern = run->kernel;
    const int64_t mr = kern->mr, nr = kern->nr, b_size = p->b, pad = p->pad, c_out = p->c_out;
    const int64_t tiles_n = ctbc_ceil_div(p->c_in, bl->gw_bn);
    const int64_t ni = tile % tiles_n, gi = tile / tiles_n;
    const int64_t n0 = ni * bl->gw_bn, nb = ctbc_min(bl->gw_bn, p->c_in - n0);
    const int64_t k0 = gi * bl->gw_kg, k1 = ctbc_min(p->k, k0 + bl->gw_kg);
    const int64_t nbp = ctbc_round_up(nb, nr), strips_n = nbp / nr;
    const int64_t pairs = (k1 - k0) * c_out, pairs_p = ctbc_round_up(pairs, mr);
    const int64_t input_rows = p->t * b_size, g_rows = p->t_out * b_size;

    float *cbuf = scratch->cbuf;
    memset(cbuf, 0, (size_t)(pairs_p * nbp) * sizeof(float));

    /* input rows tap k reaches: [lo(k), hi(k)), both increasing in k */
    const int64_t x_lo = ctbc_tap_input_steps(p, k0).lo * b_size;
    const int64_t x_hi = ctbc_tap_input_steps(p, k1 - 1).hi * b_size;
    const int64_t n_blocks = x_hi > x_lo ? ctbc_ceil_div(x_hi - x_lo, bl->gw_kc) : 0;
    const int64_t block_rows = n_blocks ? ctbc_ceil_div(x_hi - x_lo, n_blocks) : 0;
    for (int64_t x0 = x_lo; x0 < x_hi; x0 += block_rows) {
        const int64_t x1 = ctbc_min(x_hi, x0 + block_rows);
        /* grad_output column per pair: gcol[r*len + w] = grad_output row
         * x0 + w - (k - pad)*b_size, column o (zero where there is none;
         * those products are never kept); padding pairs are zero */
        const int64_t len = x1 - x0;
        float *gcol = scratch->abuf;
        for (int64_t r = 0; r < pairs; r++)
            pack_column(gcol + r * len, &run->grad_output, b_size, g_rows,
                        x0 - (k0 + r / c_out - pad) * b_size, len, r % c_out);
        memset(gcol + pairs * len, 0, (size_t)((pairs_p - pairs) * len) * sizeof(float));
        const operand_rows in_rows = {&run->input, b_size, input_rows};
        const row_block blk = {x0, x1 - x0, x0, x1, n0, nb};
        const side nside = side_make(&in_rows, &blk, nr, scratch->bbuf, pairs_p / mr, DIRECT_REUSE_PAIRS, INT64_MAX);
        for (int64_t g0 = 0; g0 < pairs; g0 += PAIR_TILES * mr) {
            /* the segments of each micro-tile, the same for every strip */
            pair_tile plans[PAIR_TILES];
            const int64_t n_plans = ctbc_min(PAIR_TILES, ctbc_ceil_div(pairs - g0, mr));
            for (int64_t q = 0; q < n_plans; q++) {
                const int64_t r0 = g0 + q * mr;
                const int64_t n_real = ctbc_min(mr, pairs - r0);
                int64_t lo[CTBC_MR_MAX], hi[CTBC_MR_MAX];
                for (int64_t i = 0; i < n_real; i++) {
                    const int64_t k = k0 + (r0 + i) / c_out;
                    const ctbc_range x = ctbc_tap_input_steps(p, k);
                    lo[i] = x.lo * b_size;
                    hi[i] = x.hi * b_size;
                }
                plan_pair_tile(&plans[q], n_real, lo, hi, x0, x1);
            }
            for (int64_t js = 0; js < strips_n; js++) {
                for (int64_t q = 0; q < n_plans; q++) {
                    const int64_t r0 = g0 + q * mr;
                    float *c_tile = cbuf + r0 * nbp + js * nr;
                    for (int sg = 0; sg < plans[q].n_seg; sg++) {
                        const pair_segment *seg = &plans[q].seg[sg];
                        int64_t b_step;
                        const float *bp = side_at(&nside, js, seg->sa, &b_step);
                        const float *ap = gcol + r0 * len + (seg->sa - x0);
                        const ctbc_ukr_args args = {1, seg->sb - seg->sa, len, 1, 0, b_step, 0, 0};
                        if (seg->all_rows) /* rows past n_real are padding rows of cbuf */
                            kern->ukr(&args, ap, bp, c_tile, nbp);
                        else
                            ctbc_edge_rows(kern, &args, ap, bp, c_tile, nbp, seg->row_ok);
                    }
                }
            }
        }
    }

    /* per tap: a [c_out x nb] tile of grad_weight[k] (stored transposed) */
    const ctbc_layout *gw = &p->grad_weight;
    for (int64_t k = k0; k < k1; k++)
        ctbc_write_tile(&run->gw_o_rows, k * gw->stride[0] + n0 * gw->stride[1],
                        cbuf + (k - k0) * c_out * nbp, nbp, c_out, nb, 0);
}

/* C row 0 (y) += the mr side's column 0 against every strip of the nr side
 * over `rows` rows from operand rows m_row and n_row: one GEMV call for the
 * strips read in place (adjacent columns of one operand) and one per packed
 * strip. */
static void gemv_row(const ctbc_kernel *kern, const side *mside, const side *nside, int64_t m_row,
                     int64_t n_row, int64_t rows, int64_t strips_n, float *y)
{
    const int64_t nr = kern->nr;
    int64_t a_step, b_step;
    const float *a = side_at(mside, 0, m_row, &a_step);
    int64_t js = 0;
    if (nside->direct_strips > 0) {
        const float *b = side_at(nside, 0, n_row, &b_step);
        kern->gemv(rows, nside->direct_strips * nr, a, a_step, b, b_step, y);
        js = nside->direct_strips;
    }
    for (; js < strips_n; js++) {
        const float *b = side_at(nside, js, n_row, &b_step);
        kern->gemv(rows, nr, a, a_step, b, b_step, y + js * nr);
    }
}

/* The rows of a row block's input window that taps [k0, k1) read, over
 * reduction rows [r0, r1): window row w = r - r0 + (k - k0)*b_size for tap
 * k. Where taps overlap little (few input steps, a large pad) most of the
 * window lies outside them: T1 B3841 Ci14 K7 Co362 p7 reads one tap per
 * block, 1/23 of its window, which would otherwise be zero-filled. */
static ctbc_range window_rows_read(const ctbc_problem *p, int64_t k0, int64_t k1, int64_t r0, int64_t r1)
{
    ctbc_range w = {0, 0};
    int any = 0;
    for (int64_t k = k0; k < k1; k++) {
        int64_t lo, hi;
        tap_rows(p, k, &lo, &hi);
        lo = ctbc_max(lo, r0);
        hi = ctbc_min(hi, r1);
        if (lo >= hi)
            continue;
        const int64_t shift = (k - k0) * p->b - r0;
        w.lo = any ? ctbc_min(w.lo, lo + shift) : lo + shift;
        w.hi = any ? ctbc_max(w.hi, hi + shift) : hi + shift;
        any = 1;
    }
    return w;
}

int ctbc_gw_sums_grad_bias(const ctbc_problem *p, const ctbc_blocking *bl)
{
    const ctbc_impl *impl = ctbc_impl_at(CTBC_GRAD_WEIGHT, bl->impl[CTBC_GRAD_WEIGHT]);
    const int gemm = impl == &ctbc_impl_gw_c_on_m || impl == &ctbc_impl_gw_c_on_m_narrow || impl == &ctbc_impl_gw_gemv;
    /* grad_output on the nr side; the tiles of the first tap group and c_in
     * block cover every output channel */
    return gemm && !bl->gw_o_on_m && !bl->gw_taps && p->c_in >= 1 && p->k >= 1;
}

static int run_sums_grad_bias(const ctbc_run *run)
{
    return ctbc_impl_at(CTBC_GRAD_BIAS, run->blocking.impl[CTBC_GRAD_BIAS]) == &ctbc_impl_gb_in_gw;
}

/* Adds the row block [r0, r0 + rows) of grad_output's nr side (every column
 * of the tile) to grad_bias's sums, from where the kernel reads it: the
 * columns read in place (or widened) side by side in one call, a call per
 * packed strip. */
static void add_block_to_bias(const ctbc_run *run, ctbc_gb_sums *bias, const side *go, int64_t r0, int64_t rows,
                              int64_t strips, int64_t nb)
{
    const int64_t nr = go->width;
    ctbc_gb_sums_from_memory(run, bias, r0);
    int64_t step;
    const int64_t direct_cols = ctbc_min(nb, go->direct_strips * nr);
    if (direct_cols > 0) {
        const float *columns = side_at(go, 0, r0, &step);
        ctbc_gb_sums_add(run, bias, columns, step, rows, 0, direct_cols);
    }
    for (int64_t js = go->direct_strips; js < strips; js++) {
        const float *strip = side_at(go, js, r0, &step);
        ctbc_gb_sums_add(run, bias, strip, step, rows, js * nr, ctbc_min(nr, nb - js * nr));
    }
    ctbc_gb_sums_advance(bias, rows);
}

static void gemm_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    const ctbc_problem *p = run->problem;
    const ctbc_blocking *bl = &run->blocking;
    const ctbc_kernel *kern = run->kernel;
    const int64_t mr = kern->mr, nr = kern->nr;
    const int o_on_m = bl->gw_o_on_m;
    const gw_shape s = shape_of(run);

    const int64_t mi = tile % s.tiles_m, ni = (tile / s.tiles_m) % s.tiles_n;
    const int64_t gi = tile / (s.tiles_m * s.tiles_n);
    const int64_t m0 = mi * bl->gw_chunk, mb = ctbc_min(bl->gw_chunk, s.m_size - m0);
    const int64_t n0 = ni * bl->gw_bn, nb = ctbc_min(bl->gw_bn, s.n_size - n0);
    const int64_t k0 = gi * bl->gw_kg, k1 = ctbc_min(p->k, k0 + bl->gw_kg);
    const int64_t mbp = ctbc_round_up(mb, mr), nbp = ctbc_round_up(nb, nr);
    const int64_t strips_n = nbp / nr;
    const int64_t b_size = p->b, kc = bl->gw_kc;

    /* a single output channel on the mr side: one row of C, a GEMV */
    const int one_row = bl->gw_gemv;

    /* Rows any tap of the group needs: tap k1-1 starts lowest, k0 ends highest. */
    int64_t u_lo, u_hi, unused;
    tap_rows(p, k1 - 1, &u_lo, &unused);
    tap_rows(p, k0, &unused, &u_hi);
    const int64_t input_rows = p->t * b_size, g_rows = p->t_out * b_size;
    const operand_rows in_rows = {&run->input, b_size, input_rows}, go_rows = {&run->grad_output, b_size, g_rows};

    /* equal row blocks of at most kc: no short tail block whose kernel
     * calls would be all overhead */
    const int64_t n_blocks = ctbc_ceil_div(u_hi - u_lo, kc);
    const int64_t block_rows = n_blocks ? ctbc_ceil_div(u_hi - u_lo, n_blocks) : 0;

    /* With one row block every micro-tile of a tap is written by one kernel
     * call (overwrite) or cleared below: no need to clear the whole
     * accumulator first, and each tap's block is final once computed. It
     * is then written out at once from one slot of the accumulator, which
     * stays in L2: all taps' blocks of a tile did not (T8 B8 Ci976 K6
     * Co255, 4.7 MB for 24 reduction rows a tap, its copy out a seventh of
     * the samples). */
    float *cbuf = scratch->cbuf;
    const int fresh = n_blocks == 1;
    if (!fresh)
        memset(cbuf, 0, (size_t)((k1 - k0) * mbp * nbp) * sizeof(float));
    const ctbc_layout *gw = &p->grad_weight;
    /* rows of the tile are c (or o), columns o (or c) */
    const ctbc_writer *out = o_on_m ? &run->gw_o_rows : &run->gw_c_rows;
    /* grad_bias's sums of the tile's channels, by the tiles of the first
     * tap group and c_in block: its row blocks are grad_output's rows in
     * order, as gb_rows adds them */
    ctbc_gb_sums bias;
    const int sums_bias = run_sums_grad_bias(run) && mi == 0 && gi == 0;
    if (sums_bias)
        ctbc_gb_sums_start(&bias, cbuf + ctbc_gw_gemm_cbuf(bl), ctbc_gb_in_gw_lane_stride(bl), n0, nb);
    for (int64_t r0 = u_lo; r0 < u_hi; r0 += block_rows) {
        const int64_t r1 = ctbc_min(u_hi, r0 + block_rows), rows = r1 - r0;
        /* input window: the window rows some tap reads, input rows
         * [x_first, x_first + window); tap k pairs reduction row r with
         * input row r + (k - pad)*b_size */
        const ctbc_range read = window_rows_read(p, k0, k1, r0, r1);
        const int64_t window = read.hi - read.lo;
        const int64_t x_first = r0 + (k0 - p->pad) * b_size + read.lo;

        /* the nr side once per row block ... */
        const int64_t reuse_n = ctbc_ceil_div(ctbc_min(mb, bl->gw_bm), mr);
        const row_block x_n = {x_first, window, 0, input_rows, n0, nb}, g_n = {r0, rows, r0, r1, n0, nb};
        side nside = side_make(o_on_m ? &in_rows : &go_rows, o_on_m ? &x_n : &g_n, nr, scratch->bbuf, reuse_n,
                               DIRECT_REUSE_N, INT64_MAX);
        if (sums_bias)
            add_block_to_bias(run, &bias, &nside, r0, rows, strips_n, nb);

        /* ... and the mr side per block of the tile */
        for (int64_t w0 = 0; w0 < mb; w0 += bl->gw_bm) {
            const int64_t wb = ctbc_min(bl->gw_bm, mb - w0), strips_m = ctbc_ceil_div(wb, mr);
            const row_block x_m = {x_first, window, 0, input_rows, m0 + w0, wb};
            const row_block g_m = {r0, rows, r0, r1, m0 + w0, wb};
            side mside = side_make(o_on_m ? &go_rows : &in_rows, o_on_m ? &g_m : &x_m, mr, scratch->abuf, strips_n,
                                   DIRECT_REUSE_M, o_on_m ? DIRECT_GRAD_OUTPUT_COLS_M : INT64_MAX);

            for (int64_t k = k0; k < k1; k++) {
                int64_t lo, hi;
                tap_rows(p, k, &lo, &hi);
                lo = ctbc_max(lo, r0);
                hi = ctbc_min(hi, r1);
                float *ck = fresh ? cbuf : cbuf + ((k - k0) * mbp + w0) * nbp;
                /* operand rows of grad_output and of the input */
                const int64_t g_row = lo, x_row = lo + (k - p->pad) * b_size;
                const int64_t m_row = o_on_m ? g_row : x_row, n_row = o_on_m ? x_row : g_row;
                if (lo >= hi) {
                    if (fresh)
                        memset(ck, 0, sizeof(float) * (size_t)(strips_m * mr * nbp));
                } else if (one_row) {
                    if (fresh) /* the GEMV adds to its row */
                        memset(ck, 0, sizeof(float) * (size_t)nbp);
                    gemv_row(kern, &mside, &nside, m_row, n_row, hi - lo, strips_n, ck);
                } else {
                    /* jr/ir order: the nr-wide micro-panel stays in L1 */
                    for (int64_t js = 0; js < strips_n; js++) {
                        int64_t b_step;
                        const float *bp = side_at(&nside, js, n_row, &b_step);
                        for (int64_t is = 0; is < strips_m; is++) {
                            int64_t a_step;
                            const float *ap = side_at(&mside, is, m_row, &a_step);
                            const ctbc_ukr_args args = {1, hi - lo, 1, a_step, 0, b_step, 0, fresh};
                            kern->ukr(&args, ap, bp, ck + is * mr * nbp + js * nr, nbp);
                        }
                    }
                }
                if (fresh)
                    ctbc_write_tile(out, k * gw->stride[0] + n0 * out->cs, ck, nbp, wb, nb, m0 + w0);
            }
        }
    }

    if (!fresh)
        for (int64_t k = k0; k < k1; k++)
            ctbc_write_tile(out, k * gw->stride[0] + n0 * out->cs, cbuf + (k - k0) * mbp * nbp, nbp, mb, nb, m0);
    if (sums_bias)
        ctbc_gb_sums_finish(run, &bias);
}

/* The implementations (see driver.h). Cost: the time per multiply-add goes
 * as 1 / (share of the micro-tile the problem fills, both sides). */

double ctbc_cost_gw_gemm(const ctbc_problem *p, const ctbc_context *ctx, int o_on_m)
{
    const int64_t m_size = ctbc_max(o_on_m ? p->c_out : p->c_in, 1), n_size = ctbc_max(o_on_m ? p->c_in : p->c_out, 1);
    return 1.0 / (ctbc_fill(m_size, ctx->kernel->mr) * ctbc_fill(n_size, ctx->kernel->nr));
}

/* Storing a grad_weight element costs about GW_STORE_DIRECT multiply-adds
 * of a full tile where the tile's columns are c_out (grad_weight's unit
 * stride), GW_STORE_TRANSPOSED where they are c_in (a transposed store);
 * spread over the reduction rows of a tap, it counts only for short ones.
 * Zen 4, two threads, gw_o_on_m(_bf16) -> gw_c_on_m(_bf16): T3 B1 Ci416 K7
 * Co2332 bfloat16 7.6-8.0 -> 6.4-6.9 ms, T44 B4 Ci374 K19 Co340 bfloat16
 * 6.7-7.0 -> 6.5 ms, T36 B27 Ci524 K17 Co555 float16 94-97 -> 92-93 ms;
 * with the transposed store at 16, T1 B9 Ci1568 K1 Co17 float32 went the
 * other way, 0.040 -> 0.050 ms. */
#define GW_STORE_DIRECT 1.0
#define GW_STORE_TRANSPOSED 3.0

double ctbc_cost_gw_store(const ctbc_problem *p, int o_on_m)
{
    const double rows = (double)ctbc_max(ctbc_min(p->t, p->t_out) * p->b, 1);
    return (o_on_m ? GW_STORE_TRANSPOSED : GW_STORE_DIRECT) / rows;
}

static double cost_c_on_m(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctbc_cost_gw_gemm(p, ctx, 0) + ctbc_cost_gw_store(p, 0);
}

static double cost_o_on_m(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctbc_cost_gw_gemm(p, ctx, 1) + ctbc_cost_gw_store(p, 1);
}

static int applies_pairs(const ctbc_problem *p, const ctbc_context *ctx)
{
    (void)ctx;
    return p->c_out >= 1;
}

static int applies_gemv(const ctbc_problem *p, const ctbc_context *ctx)
{
    (void)ctx;
    return p->c_out == 1 || p->c_in == 1;
}

/* The channel that is 1 on the mr side, the other along the row. */
static int gemv_o_on_m(const ctbc_problem *p) { return p->c_out == 1; }

/* With c_out 1, the cost of the GEMM it replaces (measured against
 * gw_pairs at that); with c_in 1, a GEMV streams one operand row per
 * multiply-add: about half a full tile's speed, where the GEMM would fill
 * one row of mr. */
#define GEMV_SLOWDOWN 2.0

static double cost_gemv(const ctbc_problem *p, const ctbc_context *ctx)
{
    if (gemv_o_on_m(p))
        return cost_o_on_m(p, ctx);
    return GEMV_SLOWDOWN / ctbc_fill(ctbc_max(p->c_out, 1), ctx->kernel->nr) + ctbc_cost_gw_store(p, 0);
}

static void plan_c_on_m(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    ctbc_plan_gw_gemm(p, ctx, 0, bl);
    ctbc_cut_gw_for_balance(p, ctx, bl);
}

static void plan_o_on_m(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    ctbc_plan_gw_gemm(p, ctx, 1, bl);
    ctbc_cut_gw_for_balance(p, ctx, bl);
}

static void plan_gemv(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    ctbc_plan_gw_gemm(p, ctx, gemv_o_on_m(p), bl);
    ctbc_cut_gw_for_balance(p, ctx, bl);
    bl->gw_gemv = 1;
}

double ctbc_cost_gw_pairs(const ctbc_problem *p, const ctbc_context *ctx);

/* few output channels: (tap, channel) pairs on the mr side */
const ctbc_impl ctbc_impl_gw_pairs = {"gw_pairs", applies_pairs, ctbc_cost_gw_pairs, ctbc_plan_gw_pairs,
                                      ctbc_scratch_gw_pairs, ctbc_gw_tiles, taps_tile, 0};
/* per-tap GEMM, c_in on the mr side */
const ctbc_impl ctbc_impl_gw_c_on_m = {"gw_c_on_m", ctbc_applies_always, cost_c_on_m, plan_c_on_m,
                                       ctbc_scratch_gw_gemm, ctbc_gw_tiles, gemm_tile, 0};
/* c_out or c_in 1: one row of C per tap, GEMV calls */
const ctbc_impl ctbc_impl_gw_gemv = {"gw_gemv", applies_gemv, cost_gemv, plan_gemv,
                                     ctbc_scratch_gw_gemm, ctbc_gw_tiles, gemm_tile, 0};
/* per-tap GEMM, c_out on the mr side */
const ctbc_impl ctbc_impl_gw_o_on_m = {"gw_o_on_m", ctbc_applies_always, cost_o_on_m, plan_o_on_m,
                                       ctbc_scratch_gw_gemm, ctbc_gw_tiles, gemm_tile, 0};
/* The per-tap GEMMs on the narrow tile, for few channels along the tile's
 * columns. */
CTBC_NARROW_IMPL(ctbc_impl_gw_c_on_m_narrow, "gw_c_on_m_narrow", ctbc_impl_gw_c_on_m, narrow_gw_tile_cost);
CTBC_NARROW_IMPL(ctbc_impl_gw_o_on_m_narrow, "gw_o_on_m_narrow", ctbc_impl_gw_o_on_m, narrow_gw_tile_cost);
