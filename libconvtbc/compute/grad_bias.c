/*
 * grad_bias[o] = sum_{t, b} grad_output[t, b, o], summed in float32 over
 * CTBC_ROW_SUM_LANES lanes by the kernel's row_sums: lane l adds the rows
 * g = t*b_size + b with g % CTBC_ROW_SUM_LANES == l in order, then the
 * lanes are added in order 0, 1, ... (one chain of dependent adds per
 * channel ran at one add per FP latency: with few channels and many rows,
 * the longest item of the run). Every ISA's row_sums gives the same bits.
 * cubeMathType does not apply: there are no products.
 *
 * Two implementations add the same rows to the same lanes in the same
 * order, so they give the same bits:
 *  - gb_rows: its own tiles, one pass over grad_output per chunk of
 *    channels;
 *  - gb_in_gw: grad_weight's per-tap GEMM tiles, as they read grad_output
 *    (ctbc_gb_sums): grad_output is the largest operand, and where the op
 *    streams it from memory one pass less shows. The 58 plans of 774 that
 *    take it (the shared list x 3 dtypes, 15 seeded draws of 40), half of
 *    them with grad_weight's c_out block cut in two for it (plan_in_gw),
 *    took 0.88x the time in the geomean (EMR, alternating processes, 3
 *    rounds: T201 B357 Ci2 K2 Co1516 p22 float32 116 -> 68 ms, T126 B696
 *    Ci8 K1 Co2149 p5 float16 246 -> 172 ms; T412 B15 Ci30 K7 Co825 p13
 *    float32 1.02-1.03x, T16 B31 Ci13 K18 Co276 p5 float16 1.02x).
 */
#include "compute/driver.h"

#define CHUNK_MAX 256
/* 16-bit rows are widened this many at a time, then summed in one call */
#define GB_ROWS_CONVERTED 8

/* Adds n_rows rows of grad_output's channels [o0, o0 + no), `step` apart
 * from row offset `first`, to the lanes (channel o0 at lanes[0], lane l at
 * lanes + l*lane_stride) from `lane` on; returns the next lane. float32
 * channels side by side are added where they lie (a copy first would
 * double the reads of the largest operand), others widened a few rows at a
 * time; a single channel is one strided run. */
static int sum_rows(ctbc_row_sums_fn row_sums, const ctbc_operand *g, float *lanes, int64_t lane_stride, int lane,
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
                lanes[lane * lane_stride] += column[r];
                lane = lane + 1 == CTBC_ROW_SUM_LANES ? 0 : lane + 1;
            }
        }
        return lane;
    }
    if (g->dtype == CTBC_F32 && g->s2 == 1)
        return row_sums(lanes, lane_stride, lane, (const float *)g->data + offset, step, n_rows, no);
    int next = lane;
    for (int64_t c0 = 0; c0 < no; c0 += CHUNK_MAX) {
        const int64_t nc = ctbc_min(CHUNK_MAX, no - c0);
        next = lane;
        for (int64_t r0 = 0; r0 < n_rows; r0 += GB_ROWS_CONVERTED) {
            const int64_t n = ctbc_min(GB_ROWS_CONVERTED, n_rows - r0);
            for (int64_t r = 0; r < n; r++)
                ctbc_convert_run(rows[r], g, offset + (r0 + r) * step + c0 * g->s2, g->s2, nc);
            next = row_sums(lanes + c0, lane_stride, next, rows[0], CHUNK_MAX, n, nc);
        }
    }
    return next;
}

/* The same over rows [g0, g1) (g = t*b_size + b) of grad_output as it lies:
 * one run where they are evenly spaced (grad_output contiguous, or sliced
 * along o), else a run per time step. Calls of a few rows each took most
 * of grad_bias's time (T2910 B2 Ci6 K1 Co31 p27, 5928 rows of 31 channels
 * in 2964 calls). */
static int sum_row_range(const ctbc_run *run, float *lanes, int64_t lane_stride, int lane, int64_t g0, int64_t g1,
                         int64_t o0, int64_t no)
{
    const int64_t b_size = run->problem->b;
    ctbc_operand g = run->grad_output;
    g.rounding = CTBC_ROUND_NONE;
    if (g0 >= g1)
        return lane;
    int64_t step;
    if (ctbc_rows_evenly_spaced(g.s0, g.s1, b_size, g0, g1 - 1, &step))
        return sum_rows(run->kernel->row_sums, &g, lanes, lane_stride, lane, (g0 / b_size) * g.s0 + (g0 % b_size) * g.s1,
                        step, g1 - g0, o0, no);
    for (int64_t r = g0; r < g1;) {
        const int64_t t = r / b_size, end = ctbc_min(g1, (t + 1) * b_size);
        lane = sum_rows(run->kernel->row_sums, &g, lanes, lane_stride, lane, t * g.s0 + (r - t * b_size) * g.s1, g.s1,
                        end - r, o0, no);
        r = end;
    }
    return lane;
}

/* Adds the lanes in order into lane 0 and writes channels [o0, o0 + no). */
static void write_sums(const ctbc_run *run, float *lanes, int64_t lane_stride, int64_t o0, int64_t no)
{
    for (int l = 1; l < CTBC_ROW_SUM_LANES; l++)
        for (int64_t o = 0; o < no; o++)
            lanes[o] += lanes[l * lane_stride + o];
    ctbc_write_tile(&run->gb_out, o0 * run->problem->grad_bias.stride[0], lanes, no, 1, no, 0);
}

static void zero_lanes(float *lanes, int64_t lane_stride, int64_t no)
{
    for (int l = 0; l < CTBC_ROW_SUM_LANES; l++)
        for (int64_t o = 0; o < no; o++)
            lanes[l * lane_stride + o] = 0.0f;
}

/* gb_rows */

static int64_t gb_tiles(const ctbc_run *run)
{
    return ctbc_ceil_div(run->problem->c_out, run->blocking.gb_chunk);
}

static void gb_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    (void)scratch;
    const ctbc_problem *p = run->problem;
    const int64_t chunk = ctbc_min(run->blocking.gb_chunk, CHUNK_MAX);
    const int64_t o0 = tile * chunk, no = ctbc_min(chunk, p->c_out - o0);
    float lanes[CTBC_ROW_SUM_LANES][CHUNK_MAX];
    zero_lanes(lanes[0], CHUNK_MAX, no);
    sum_row_range(run, lanes[0], CHUNK_MAX, 0, 0, p->t_out * p->b, o0, no);
    write_sums(run, lanes[0], CHUNK_MAX, o0, no);
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

/* gb_in_gw: the sums as grad_weight's tiles go (ctbc_gb_sums in driver.h) */

void ctbc_gb_sums_start(ctbc_gb_sums *s, float *lanes, int64_t lane_stride, int64_t o0, int64_t no)
{
    *s = (ctbc_gb_sums){lanes, lane_stride, o0, no, 0, 0};
    zero_lanes(lanes, lane_stride, no);
}

void ctbc_gb_sums_from_memory(const ctbc_run *run, ctbc_gb_sums *s, int64_t row_end)
{
    s->lane = sum_row_range(run, s->lanes, s->lane_stride, s->lane, s->next_row, row_end, s->o0, s->no);
    s->next_row = ctbc_max(s->next_row, row_end);
}

void ctbc_gb_sums_add(const ctbc_run *run, const ctbc_gb_sums *s, const float *rows, int64_t row_stride,
                      int64_t n_rows, int64_t col, int64_t n)
{
    run->kernel->row_sums(s->lanes + col, s->lane_stride, s->lane, rows, row_stride, n_rows, n);
}

void ctbc_gb_sums_advance(ctbc_gb_sums *s, int64_t n_rows)
{
    s->lane = (int)((s->lane + n_rows) % CTBC_ROW_SUM_LANES);
    s->next_row += n_rows;
}

void ctbc_gb_sums_finish(const ctbc_run *run, ctbc_gb_sums *s)
{
    ctbc_gb_sums_from_memory(run, s, run->problem->t_out * run->problem->b);
    write_sums(run, s->lanes, s->lane_stride, s->o0, s->no);
}

/* Where grad_weight's tiles read grad_output's rows as float32 values of
 * their own (the values gb_rows adds), and the float32 operand is not
 * rounded for the products. */
static int applies_in_gw(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctx->planned && ctbc_gw_sums_grad_bias(p, ctx->planned) &&
           (p->grad_output.dtype != CTBC_F32 || p->rounding == CTBC_ROUND_NONE);
}

/* grad_weight's c_out block as gb_in_gw plans it: where it is the whole of
 * c_out, cut in two (whole micro-tiles) if each half keeps the context's
 * gb_in_gw_cut_channels, so that two tiles share the sums. How c_out is
 * blocked changes no sum of grad_weight. */
static int64_t c_out_block(const ctbc_problem *p, const ctbc_context *ctx, const ctbc_blocking *gw)
{
    if (p->c_out <= gw->gw_bn && p->c_out >= 2 * ctx->gb_in_gw_cut_channels)
        return ctbc_round_up(ctbc_ceil_div(p->c_out, 2), ctx->kernel->nr);
    return gw->gw_bn;
}

/* grad_weight's tap group as gb_in_gw plans it: every tap where their
 * window and accumulators fit (ctbc_gw_group_fits), so that the first
 * group reads every row some tap reads. grad_weight plans its groups from
 * kc + (kg-1)*b window rows, which a short input with many taps never
 * reads (T1 B3841 Ci14 K7 Co362 p7: 4 taps a group, whose first read 4 of
 * its 9 steps; 7 read 7). Grouping the taps otherwise changes the row
 * blocks of grad_weight's sums, not their rows. */
static int64_t tap_group(const ctbc_problem *p, const ctbc_context *ctx, const ctbc_blocking *gw)
{
    ctbc_blocking cut = *gw;
    cut.gw_bn = (int32_t)c_out_block(p, ctx, gw);
    return ctbc_gw_group_fits(p, ctx, &cut, p->k) ? p->k : gw->gw_kg;
}

/* No pass of its own where the op streams grad_output (few multiply-adds
 * per value: the context's gb_in_gw_max_macs), grad_weight's tiles read
 * most of it (gb_in_gw_min_rows) and at least two of them share the
 * sums. On one tile they lengthen the longest item of the run (grad_weight's
 * single tile, where gb_rows ran beside it): T252 B159 Ci1 K21 Co199 took
 * 1.11x the time, T1 B3841 Ci14 K7 Co362 p7 1.06x (EMR, alternating
 * processes, 3 rounds). */
static double cost_in_gw(const ctbc_problem *p, const ctbc_context *ctx)
{
    const ctbc_blocking *gw = ctx->planned;
    const int64_t tiles = ctbc_ceil_div(ctbc_max(p->c_out, 1), c_out_block(p, ctx, gw));
    /* the steps the first tap group reads: tap kg-1 starts lowest, 0 ends highest */
    const int64_t last = ctbc_min(tap_group(p, ctx, gw), p->k) - 1;
    const int64_t steps = ctbc_tap_steps(p, 0).hi - ctbc_tap_steps(p, last).lo;
    const int streams = p->c_in <= ctx->gb_in_gw_max_macs / ctbc_max(p->k, 1);
    const int pays = streams && tiles >= 2 && (double)steps >= ctx->gb_in_gw_min_rows * (double)p->t_out;
    return pays ? 0.0 : INFINITY;
}

static void plan_in_gw(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    const int64_t kg = tap_group(p, ctx, bl);
    bl->gw_bn = (int32_t)c_out_block(p, ctx, bl);
    bl->gw_kg = (int32_t)kg;
}

static int64_t no_tiles(const ctbc_run *run)
{
    (void)run;
    return 0;
}

const ctbc_impl ctbc_impl_gb_in_gw = {"gb_in_gw", applies_in_gw, cost_in_gw, plan_in_gw, ctbc_scratch_gb_in_gw,
                                      no_tiles, NULL, 0};
