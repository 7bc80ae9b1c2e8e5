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
 * (window strips), else the reverse.
 */
#include <string.h>

#include "compute/driver.h"

typedef struct {
    int64_t m_size, n_size, tiles_m, tiles_n;
} gw_shape;

static gw_shape shape_of(const ctbc_run *run)
{
    const ctbc_problem *p = run->problem;
    const ctbc_blocking *bl = &run->blocking;
    gw_shape s;
    s.m_size = bl->gw_o_on_m ? p->c_out : p->c_in;
    s.n_size = bl->gw_o_on_m ? p->c_in : p->c_out;
    s.tiles_m = ctbc_ceil_div(s.m_size, bl->gw_chunk);
    s.tiles_n = ctbc_ceil_div(s.n_size, bl->gw_bn);
    return s;
}

int64_t ctbc_grad_weight_tiles(const ctbc_run *run)
{
    const gw_shape s = shape_of(run);
    return s.tiles_m * s.tiles_n * ctbc_ceil_div(run->problem->k, run->blocking.gw_kg);
}

/* Reduction rows [lo, hi) of tap k: those t with pad <= t + k < pad + t_in. */
static void tap_rows(const ctbc_problem *p, int64_t k, int64_t *lo, int64_t *hi)
{
    const int64_t t_lo = ctbc_clamp(p->pad - k, 0, p->t_out);
    const int64_t t_hi = ctbc_clamp(p->pad + p->t - k, t_lo, p->t_out);
    *lo = t_lo * p->b;
    *hi = t_hi * p->b;
}

void ctbc_grad_weight_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
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

    float *cbuf = scratch->cbuf;
    memset(cbuf, 0, (size_t)((k1 - k0) * mbp * nbp) * sizeof(float));

    /* Rows any tap of the group needs: tap k1-1 starts lowest, k0 ends highest. */
    int64_t u_lo, u_hi, unused;
    tap_rows(p, k1 - 1, &u_lo, &unused);
    tap_rows(p, k0, &unused, &u_hi);
    const int64_t input_rows = p->t * b_size;

    for (int64_t r0 = u_lo; r0 < u_hi; r0 += kc) {
        const int64_t r1 = ctbc_min(u_hi, r0 + kc), rows = r1 - r0;
        /* input window: row w is input row x_first + w, paired with
         * reduction row r0 + w - (k - k0)*b_size for tap k */
        const int64_t window = rows + (k1 - k0 - 1) * b_size;
        const int64_t x_first = r0 + (k0 - p->pad) * b_size;
        const int64_t a_rows = o_on_m ? rows : window, b_rows = o_on_m ? window : rows;

        /* the nr side once per row block ... */
        if (o_on_m)
            ctbc_pack_strips(scratch->bbuf, window, (int)nr, &run->input, b_size, x_first, 0,
                             input_rows, n0, nb);
        else
            ctbc_pack_strips(scratch->bbuf, rows, (int)nr, &run->grad_output, b_size, r0, r0, r1,
                             n0, nb);

        /* ... and the mr side per block of the tile */
        for (int64_t w0 = 0; w0 < mb; w0 += bl->gw_bm) {
            const int64_t wb = ctbc_min(bl->gw_bm, mb - w0), strips_m = ctbc_ceil_div(wb, mr);
            if (o_on_m)
                ctbc_pack_strips(scratch->abuf, rows, (int)mr, &run->grad_output, b_size, r0, r0,
                                 r1, m0 + w0, wb);
            else
                ctbc_pack_strips(scratch->abuf, window, (int)mr, &run->input, b_size, x_first, 0,
                                 input_rows, m0 + w0, wb);

            for (int64_t k = k0; k < k1; k++) {
                int64_t lo, hi;
                tap_rows(p, k, &lo, &hi);
                lo = ctbc_max(lo, r0);
                hi = ctbc_min(hi, r1);
                if (lo >= hi)
                    continue;
                const int64_t g_row = lo - r0, x_row = lo - r0 + (k - k0) * b_size;
                const float *a_base = scratch->abuf + (o_on_m ? g_row : x_row) * mr;
                const float *b_base = scratch->bbuf + (o_on_m ? x_row : g_row) * nr;
                const ctbc_ukr_args args = {1, hi - lo, 1, mr, 0, nr, 0};
                float *ck = cbuf + ((k - k0) * mbp + w0) * nbp;
                /* jr/ir order: the nr-wide micro-panel stays in L1 */
                for (int64_t js = 0; js < strips_n; js++)
                    for (int64_t is = 0; is < strips_m; is++)
                        kern->ukr(&args, a_base + is * a_rows * mr, b_base + js * b_rows * nr,
                                  ck + is * mr * nbp + js * nr, nbp);
            }
        }
    }

    const ctbc_layout *gw = &p->grad_weight;
    for (int64_t k = k0; k < k1; k++) {
        const float *ck = cbuf + (k - k0) * mbp * nbp;
        /* rows of the tile are c (or o), a one-level row index */
        const int64_t rs = o_on_m ? gw->stride[2] : gw->stride[1];
        const int64_t cs = o_on_m ? gw->stride[1] : gw->stride[2];
        void *out = ctbc_element_ptr(run->grad_weight, gw->dtype, k * gw->stride[0] + n0 * cs);
        ctbc_store_tile(out, gw->dtype, ck, nbp, mb, nb, m0, INT64_MAX, 0, rs, cs);
    }
}
