/*
 * grad_bias[o] = sum_{t, b} grad_output[t, b, o], summed in float32 in (t, b)
 * order, one pass over grad_output per chunk of channels. cubeMathType does
 * not apply: there are no products.
 */
#include "compute/driver.h"

#define CHUNK_MAX 256

int64_t ctbc_grad_bias_tiles(const ctbc_run *run)
{
    return ctbc_ceil_div(run->problem->c_out, run->blocking.gb_chunk);
}

void ctbc_grad_bias_tile(const ctbc_run *run, int64_t tile)
{
    const ctbc_problem *p = run->problem;
    const int64_t chunk = ctbc_min(run->blocking.gb_chunk, CHUNK_MAX);
    const int64_t o0 = tile * chunk, no = ctbc_min(chunk, p->c_out - o0);
    ctbc_operand g = run->grad_output;
    g.rounding = CTBC_ROUND_NONE;

    float acc[CHUNK_MAX], row[CHUNK_MAX];
    for (int64_t o = 0; o < no; o++)
        acc[o] = 0.0f;
    for (int64_t t = 0; t < p->t_out; t++)
        for (int64_t b = 0; b < p->b; b++) {
            ctbc_convert_run(row, &g, t * g.s0 + b * g.s1 + o0 * g.s2, g.s2, no);
            for (int64_t o = 0; o < no; o++)
                acc[o] += row[o];
        }
    const ctbc_layout *lay = &p->grad_bias;
    ctbc_store_tile(ctbc_element_ptr(run->grad_bias, lay->dtype, o0 * lay->stride[0]), lay->dtype,
                    acc, no, 1, no, 0, 1, 0, 0, lay->stride[0],
                    ctbc_store16_for(run->kernel, lay->dtype), run->kernel->transpose);
}
