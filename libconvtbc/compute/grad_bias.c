/*
 * grad_bias[o] = sum_{t, b} grad_output[t, b, o], summed in float32 over
 * CTBC_ROW_SUM_LANES lanes by the kernel's row_sums: lane l adds the rows
 * g = t*b_size + b with g % CTBC_ROW_SUM_LANES == l in order, then the
 * lanes are added in order 0, 1, ... (one chain of dependent adds per
 * channel ran at one add per FP latency: with few channels and many rows,
 * the longest item of the run). One pass over grad_output per chunk of
 * channels; every ISA's row_sums gives the same bits. cubeMathType does
 * not apply: there are no products.
 */
#include "compute/driver.h"

#define CHUNK_MAX 256
/* 16-bit rows are widened this many at a time, then summed in one call */
#define GB_ROWS_CONVERTED 8

static int64_t gb_tiles(const ctbc_run *run)
{
    return ctbc_ceil_div(run->problem->c_out, run->blocking.gb_chunk);
}

/* Adds n_rows rows of grad_output's channels [o0, o0 + no), `step` apart
 * from row offset `first`, to the lanes from `lane` on; returns the next
 * lane. float32 channels side by side are added where they lie (a copy
 * first would double the reads of the largest operand), others widened a
 * few rows at a time; a single channel is one strided run. */
static int sum_rows(ctbc_row_sums_fn row_sums, const ctbc_operand *g, float (*lanes)[CHUNK_MAX], int lane,
                    int64_t first, int64_t step, int64_t n_rows, int64_t o0, int64_t no)
{
    const int64_t offset = first + o0 * g->s2;
    float rows[GB_ROWS_CONVERTED][CHUNK_MAX];
    if (no == 1) {
        /* read a buffer at a time and added lane by lane here: a conversion
         * call and a row_sums row per value took T2578 B181 Ci1 K2 Co1
         * float16 7.4 ms */
        const int64_t run = GB_ROWS_CONVERTED * CHUNK_MAX;
        float *column = rows[0];
        for (int64_t r0 = 0; r0 < n_rows; r0 += run) {
            const int64_t n = ctbc_min(run, n_rows - r0);
            ctbc_convert_run(column, g, offset + r0 * step, step, n);
            for (int64_t r = 0; r < n; r++) {
                lanes[lane][0] += column[r];
                lane = lane + 1 == CTBC_ROW_SUM_LANES ? 0 : lane + 1;
            }
        }
        return lane;
    }
    if (g->dtype == CTBC_F32 && g->s2 == 1)
        return row_sums(lanes[0], CHUNK_MAX, lane, (const float *)g->data + offset, step, n_rows, no);
    for (int64_t r0 = 0; r0 < n_rows; r0 += GB_ROWS_CONVERTED) {
        const int64_t n = ctbc_min(GB_ROWS_CONVERTED, n_rows - r0);
        for (int64_t r = 0; r < n; r++)
            ctbc_convert_run(rows[r], g, offset + (r0 + r) * step, g->s2, no);
        lane = row_sums(lanes[0], CHUNK_MAX, lane, rows[0], CHUNK_MAX, n, no);
    }
    return lane;
}

static void gb_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    (void)scratch;
    const ctbc_problem *p = run->problem;
    const int64_t chunk = ctbc_min(run->blocking.gb_chunk, CHUNK_MAX);
    const int64_t o0 = tile * chunk, no = ctbc_min(chunk, p->c_out - o0);
    ctbc_operand g = run->grad_output;
    g.rounding = CTBC_ROUND_NONE;

    float acc[CTBC_ROW_SUM_LANES][CHUNK_MAX];
    for (int l = 0; l < CTBC_ROW_SUM_LANES; l++)
        for (int64_t o = 0; o < no; o++)
            acc[l][o] = 0.0f;
    const ctbc_row_sums_fn row_sums = run->kernel->row_sums;
    /* Rows evenly spaced (grad_output contiguous, or sliced along o) are
     * one run of t_out*b rows, in the lanes and order of time step by time
     * step: calls of a few rows each took most of grad_bias's time (T2910
     * B2 Ci6 K1 Co31 p27, 5928 rows of 31 channels in 2964 calls). */
    int64_t row_step;
    if (ctbc_rows_evenly_spaced(g.s0, g.s1, p->b, 0, p->t_out * p->b - 1, &row_step)) {
        sum_rows(row_sums, &g, acc, 0, 0, row_step, p->t_out * p->b, o0, no);
    } else {
        int lane = 0;
        for (int64_t t = 0; t < p->t_out; t++)
            lane = sum_rows(row_sums, &g, acc, lane, t * g.s0, g.s1, p->b, o0, no);
    }
    for (int l = 1; l < CTBC_ROW_SUM_LANES; l++)
        for (int64_t o = 0; o < no; o++)
            acc[0][o] += acc[l][o];
    ctbc_write_tile(&run->gb_out, o0 * p->grad_bias.stride[0], acc[0], no, 1, no, 0);
}

static double cost_rows(const ctbc_problem *p, const ctbc_context *ctx)
{
    (void)p;
    (void)ctx;
    return 1.0;
}

/* Equal chunks of whole cache lines: two threads read grad_output at once,
 * each its own lines, where 256 + 106 channels (T1 B3841 Ci14 K7 Co362 p7)
 * left one thread reading most of it alone. */
static void plan_rows(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    (void)ctx;
    const int64_t c_out = ctbc_max(p->c_out, 1), tiles = ctbc_ceil_div(c_out, CHUNK_MAX);
    bl->gb_chunk = (int32_t)ctbc_min(CHUNK_MAX, ctbc_round_up(ctbc_ceil_div(c_out, tiles), 16));
}

/* plain sums already (the same bits on every ISA): the reference too */
const ctbc_impl ctbc_impl_gb_rows = {"gb_rows", ctbc_applies_always, cost_rows, plan_rows, ctbc_scratch_none,
                                     gb_tiles, gb_tile, 0};
