/*
 * The reference implementations: the sums of the op's definition in plain
 * loops, float32 products added in a fixed order, terms whose grad_output
 * step does not exist never formed. Listed last for every gradient and
 * always applicable: the plan falls back to them, and tests force them to
 * check the fast implementations on the same problems.
 */
#include <math.h>

#include "compute/driver.h"

/* output values one tile keeps on the stack */
#define REF_CHUNK 256

/* grad_weight[k, c, o] = sum_{s, b} input[s + k - pad, b, c] * grad_output[s, b, o]:
 * a tile is one (k, c), summed over (s, b) in order. */
static int64_t gw_tiles(const ctbc_run *run)
{
    return run->problem->k * run->problem->c_in;
}

static void gw_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    (void)scratch;
    const ctbc_problem *p = run->problem;
    const int64_t k = tile / p->c_in, c = tile % p->c_in;
    const ctbc_range steps = ctbc_tap_steps(p, k);
    const ctbc_operand *g = &run->grad_output, *x = &run->input;
    for (int64_t o0 = 0; o0 < p->c_out; o0 += REF_CHUNK) {
        const int64_t no = ctbc_min(REF_CHUNK, p->c_out - o0);
        float acc[REF_CHUNK] = {0}, row[REF_CHUNK];
        for (int64_t s = steps.lo; s < steps.hi; s++)
            for (int64_t b = 0; b < p->b; b++) {
                float xv;
                ctbc_convert_run(&xv, x, (s + k - p->pad) * x->s0 + b * x->s1 + c * x->s2, 1, 1);
                ctbc_convert_run(row, g, s * g->s0 + b * g->s1 + o0 * g->s2, g->s2, no);
                for (int64_t o = 0; o < no; o++)
                    acc[o] += xv * row[o];
            }
        ctbc_write_tile(&run->gw_c_rows, k * p->grad_weight.stride[0] + o0 * p->grad_weight.stride[2], acc, no,
                        1, no, c);
    }
}

/* grad_input[t, b, c] = sum_{k, o} grad_output[t + pad - k, b, o] * weight[k, c, o]:
 * a tile is one (t, b) row and a chunk of channels, summed over (k, o) in
 * order. */
static int64_t gi_tiles(const ctbc_run *run)
{
    const ctbc_problem *p = run->problem;
    return p->t * p->b * ctbc_ceil_div(p->c_in, REF_CHUNK);
}

static void gi_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    (void)scratch;
    const ctbc_problem *p = run->problem;
    const int64_t chunks = ctbc_ceil_div(p->c_in, REF_CHUNK);
    const int64_t row = tile / chunks, c0 = tile % chunks * REF_CHUNK;
    const int64_t nc = ctbc_min(REF_CHUNK, p->c_in - c0);
    const int64_t t = row / p->b, b = row % p->b;
    const ctbc_operand *g = &run->grad_output, *w = &run->weight;
    const ctbc_range taps = ctbc_taps_between(p, t, t, 0, p->k);
    float acc[REF_CHUNK] = {0}, column[REF_CHUNK];
    for (int64_t k = taps.lo; k < taps.hi; k++)
        for (int64_t o = 0; o < p->c_out; o++) {
            float gv;
            ctbc_convert_run(&gv, g, (t + p->pad - k) * g->s0 + b * g->s1 + o * g->s2, 1, 1);
            ctbc_convert_run(column, w, k * w->s0 + c0 * w->s1 + o * w->s2, w->s1, nc);
            for (int64_t c = 0; c < nc; c++)
                acc[c] += gv * column[c];
        }
    ctbc_write_tile(&run->gi_out, c0 * p->grad_input.stride[2], acc, nc, 1, nc, row);
}

static double cost_never(const ctbc_problem *p, const ctbc_context *ctx)
{
    (void)p;
    (void)ctx;
    return INFINITY;
}

const ctbc_impl ctbc_impl_gw_reference = {"gw_reference", ctbc_applies_always, cost_never, ctbc_plan_nothing,
                                          ctbc_scratch_none, gw_tiles, gw_tile, 0};
const ctbc_impl ctbc_impl_gi_reference = {"gi_reference", ctbc_applies_always, cost_never, ctbc_plan_nothing,
                                          ctbc_scratch_none, gi_tiles, gi_tile, 0};
