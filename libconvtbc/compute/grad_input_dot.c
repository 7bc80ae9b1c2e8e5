/*
 * grad_input as dot products, for few input channels over long reductions:
 *
 *   grad_input[t, b, c] = sum_k sum_o grad_output[t + pad - k, b, o] * weight[k, c, o]
 *
 * With c_in channels on the micro-tile (grad_input.c, grad_input_c_on_m.c)
 * one or two channels fill a sixth or a thirty-second of it, and
 * grad_output is packed (transposed, for gi_c_on_m) before every use. Here
 * the dot kernel (ctbc_dot_fn) reads grad_output rows and weight[k, c, :]
 * where they lie, both contiguous along o: CTBC_DOT_ROWS (t, b) rows
 * against every channel, reducing over (tap, o), with nothing packed.
 *
 * Terms with t + pad - k outside [0, t_out) do not exist: a group of rows
 * takes the taps valid for all its rows in one call, and each row the taps
 * valid for it alone in calls of its own (a_row 0: the kernel's rows all
 * read that row), added after, in tap order.
 *
 * Five implementations share the driver: gi_dot on float32 operands that
 * nothing rounds, gi_dot_bf16 on bfloat16 operands through VDPBF16PS
 * (ctbc_dot_bf16_fn; the rule of gi_c_on_m_bf16), and gi_dot_f16 on
 * float16 operands, which each tile first widens into float32 copies (its
 * grad_output steps and weight channels) that the float32 kernel reads.
 * Their tiles are runs of consecutive (t, b) rows, a kernel call taking
 * CTBC_DOT_ROWS batch entries of a step; gi_dot_steps and
 * gi_dot_bf16_steps take one batch entry's steps instead (see dot_tile).
 */
#include <math.h>
#include <string.h>

#include "compute/driver.h"

/* (t, b) rows a tile */
#define DOT_TILE_ROWS 64
/* With fewer row tiles than DOT_MIN_TILES, tiles also split the channels,
 * DOT_TILE_CHANNELS a tile, so that a problem of a few rows still shares
 * its weight panel among the threads. (Each channel's sum is the same
 * whichever tile holds it.) */
#define DOT_MIN_TILES 8
#define DOT_TILE_CHANNELS 32

typedef struct {
    int64_t element_bytes;
    void (*dot)(const ctbc_kernel *kern, const ctbc_dot_args *args, const void *a, const void *b, float *c,
                int64_t ldc);
} dot_kind;

/* a * b, or a ceiling far past any real problem where the product
 * overflows: the plan costs absurd problems (a batch of broadcast rows)
 * too, and refuses them only by the workspace they ask for */
static int64_t product_or_ceiling(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) || r > (INT64_C(1) << 52) ? INT64_C(1) << 52 : r;
}

/* The (t, b) rows grad_input has. */
static int64_t total_rows(const ctbc_problem *p) { return product_or_ceiling(p->t, p->b); }

/* How a problem's (t, b) rows and channels are cut into tiles: runs of
 * `rows` consecutive rows, or with `steps`, runs of that many time steps
 * of one batch entry, the entries one after another (see dot_tile). */
typedef struct {
    int64_t rows, channels; /* a tile's, at most */
    int64_t steps;          /* 0: runs of rows */
    int64_t row_tiles, tiles;
} dot_tiling;

static dot_tiling tiling_with(const ctbc_problem *p, int64_t rows, int64_t steps)
{
    dot_tiling tl = {rows, ctbc_max(p->c_in, 1), steps, ctbc_ceil_div(total_rows(p), rows), 0};
    if (steps)
        tl.row_tiles = product_or_ceiling(p->b, ctbc_ceil_div(p->t, steps));
    if (tl.row_tiles < DOT_MIN_TILES)
        tl.channels = DOT_TILE_CHANNELS;
    tl.tiles = tl.row_tiles * ctbc_ceil_div(p->c_in, tl.channels);
    return tl;
}

static dot_tiling tiling_in_place(const ctbc_problem *p, const ctbc_blocking *bl)
{
    return tiling_with(p, DOT_TILE_ROWS, bl->gi_dot_steps);
}

static int64_t dot_tiles(const ctbc_run *run) { return tiling_in_place(run->problem, &run->blocking).tiles; }

/* Where the kernel reads grad_output and the weight: the operands where
 * they lie, or (gi_dot_f16) float32 copies of the steps from `g_first` on
 * and of the channels from `w_first` on; strides in elements. */
typedef struct {
    const char *g;
    int64_t g_s0, g_s1, g_first;
    const char *w;
    int64_t w_s0, w_s1, w_first;
} dot_source;

static dot_source source_in_place(const ctbc_run *run)
{
    const ctbc_operand *g = &run->grad_output, *w = &run->weight;
    return (dot_source){g->data, g->s0, g->s1, 0, w->data, w->s0, w->s1, 0};
}

static const char *g_at(const dot_source *src, const dot_kind *kind, int64_t step, int64_t b)
{
    return src->g + ((step - src->g_first) * src->g_s0 + b * src->g_s1) * kind->element_bytes;
}

static const char *w_at(const dot_source *src, const dot_kind *kind, int64_t k, int64_t c)
{
    return src->w + (k * src->w_s0 + (c - src->w_first) * src->w_s1) * kind->element_bytes;
}

/* Adds to sums[0..nc) the taps [k0, k1) of (t, b) row `row` and channels
 * [c0, c0 + nc), one call a tap. */
static void row_taps(const ctbc_run *run, const dot_kind *kind, const dot_source *src, int64_t row, int64_t c0,
                     int64_t nc, int64_t k0, int64_t k1, float *sums, float *one)
{
    const ctbc_problem *p = run->problem;
    const int64_t t = row / p->b, b = row % p->b;
    for (int64_t k = k0; k < k1; k++) {
        if (!ctbc_tap_reaches(p, t, k))
            continue;
        const ctbc_dot_args args = {nc, 1, p->c_out, 0, 0, src->w_s1, 0};
        kind->dot(run->kernel, &args, g_at(src, kind, t + p->pad - k, b), w_at(src, kind, k, c0), one, nc);
        for (int64_t c = 0; c < nc; c++)
            sums[c] += one[c];
    }
}

/* A tile: channels [c0, c0 + nc) of the rows at positions [pos0, pos1) of
 * a line of `length` rows, row line_first + pos * stride at position pos:
 * a line of every (t, b) row (stride 1), or of one batch entry's time
 * steps (stride b_size). */
typedef struct {
    int64_t line_first, length, stride, pos0, pos1, c0, nc;
} dot_tile_part;

static dot_tile_part part_of(const ctbc_problem *p, const dot_tiling *tl, int64_t tile)
{
    const int64_t row_tile = tile % tl->row_tiles, c0 = tile / tl->row_tiles * tl->channels;
    const int64_t nc = ctbc_min(tl->channels, p->c_in - c0);
    if (tl->steps) {
        const int64_t runs = ctbc_ceil_div(p->t, tl->steps), t0 = row_tile % runs * tl->steps;
        return (dot_tile_part){row_tile / runs, p->t, p->b, t0, ctbc_min(p->t, t0 + tl->steps), c0, nc};
    }
    const int64_t r0 = row_tile * tl->rows, rows_total = total_rows(p);
    return (dot_tile_part){0, rows_total, 1, r0, ctbc_min(rows_total, r0 + tl->rows), c0, nc};
}

/*
 * Each kernel call takes CTBC_DOT_ROWS rows next to each other on the line
 * and the taps valid for all of them, reading the grad_output rows of
 * tap q for row i at i*step - q*s0. Along a batch entry's time steps
 * (step s0) the rows of tap q + 1 are those of tap q one row on, which the
 * call has just read: one new grad_output row from beyond L1 per tap
 * where four consecutive entries of one step read four. (T252 B159 Ci1
 * K21 Co199 float32: a step's rows read 2.7 MB over their taps, which
 * left L2 before the next step's rows read them again.)
 */
static void dot_tile(const ctbc_run *run, const dot_kind *kind, const dot_source *src, dot_tile_part part,
                     float *sums)
{
    const ctbc_problem *p = run->problem;
    const int64_t b_size = p->b, c0 = part.c0, nc = part.nc, stride = part.stride;
    float *one = sums + CTBC_DOT_ROWS * nc;         /* sums, one: [CTBC_DOT_ROWS][nc] */
    for (int64_t pos = part.pos0; pos < part.pos1; pos += CTBC_DOT_ROWS) {
        /* the kernel's rows: this group, shifted back to end at the line's
         * last row where fewer are left (its first rows computed again,
         * their sums dropped); where the line has fewer rows, the group
         * runs past the last one, into grad_output rows that exist for the
         * taps taken together (their sums are dropped too) */
        const int64_t g_pos = part.length >= CTBC_DOT_ROWS ? ctbc_min(pos, part.length - CTBC_DOT_ROWS) : pos;
        const int64_t group = part.line_first + g_pos * stride, last = group + (CTBC_DOT_ROWS - 1) * stride;
        const int64_t done_to = ctbc_min(part.pos1, g_pos + CTBC_DOT_ROWS);
        const int64_t t_first = group / b_size, t_last = last / b_size;
        int64_t step = src->g_s0;
        ctbc_range all = {0, 0};
        if (stride != 1 || ctbc_rows_evenly_spaced(src->g_s0, src->g_s1, b_size, group, last, &step))
            all = ctbc_taps_between(p, t_last, t_first, 0, p->k);
        if (all.lo < all.hi) {
            const ctbc_dot_args args = {nc, all.hi - all.lo, p->c_out, step, -src->g_s0, src->w_s1, src->w_s0};
            kind->dot(run->kernel, &args, g_at(src, kind, t_first + p->pad - all.lo, group % b_size),
                      w_at(src, kind, all.lo, c0), sums, nc);
        } else {
            all.lo = all.hi = 0;
            memset(sums, 0, sizeof(float) * (size_t)(CTBC_DOT_ROWS * nc));
        }
        for (int64_t at = pos; at < done_to; at++) {
            float *s = sums + (at - g_pos) * nc;
            const int64_t row = part.line_first + at * stride;
            row_taps(run, kind, src, row, c0, nc, 0, all.lo, s, one);
            row_taps(run, kind, src, row, c0, nc, all.hi, p->k, s, one);
            if (stride != 1)
                ctbc_write_tile(&run->gi_out, c0 * run->gi_out.cs, s, nc, 1, nc, row);
        }
        if (stride == 1)
            ctbc_write_tile(&run->gi_out, c0 * run->gi_out.cs, sums + (pos - g_pos) * nc, nc, done_to - pos, nc,
                            part.line_first + pos);
    }
}

static void tile_in_place(const ctbc_run *run, const dot_kind *kind, int64_t tile, const ctbc_scratch *scratch)
{
    const dot_source src = source_in_place(run);
    const dot_tiling tl = tiling_in_place(run->problem, &run->blocking);
    dot_tile(run, kind, &src, part_of(run->problem, &tl, tile), scratch->cbuf);
}

/* ---- gi_dot: float32 ------------------------------------------------------- */

static void dot_floats(const ctbc_kernel *kern, const ctbc_dot_args *args, const void *a, const void *b, float *c,
                       int64_t ldc)
{
    kern->dot(args, a, b, c, ldc);
}

static const dot_kind FLOATS = {4, dot_floats};

static void floats_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    tile_in_place(run, &FLOATS, tile, scratch);
}

/* Both operands are read along o where they lie. */
static int along_o(const ctbc_problem *p)
{
    return (p->grad_output.stride[2] == 1 && p->weight.stride[2] == 1) || p->c_out == 1;
}

static int applies_floats(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctx->kernel->dot && p->grad_output.dtype == CTBC_F32 && p->weight.dtype == CTBC_F32 &&
           p->rounding == CTBC_ROUND_NONE && along_o(p);
}

/* ---- gi_dot_bf16: bfloat16 pairs ------------------------------------------ */

static void dot_pairs(const ctbc_kernel *kern, const ctbc_dot_args *args, const void *a, const void *b, float *c,
                      int64_t ldc)
{
    kern->dot_bf16(args, a, b, c, ldc);
}

static const dot_kind PAIRS = {2, dot_pairs};

static void pairs_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    tile_in_place(run, &PAIRS, tile, scratch);
}

static int applies_pairs(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctx->kernel->dot_bf16 && p->grad_output.dtype == CTBC_BF16 && p->weight.dtype == CTBC_BF16 &&
           p->rounding != CTBC_ROUND_FP16 && along_o(p);
}

/* ---- gi_dot_f16: float16, widened a tile at a time ------------------------ */

/* The grad_output steps the kernel groups of a tile's rows read, and their
 * float32 copy's size at most: the tile's rows, a group shifted back into
 * it, and the taps of both ends. (gi_dot_f16's tiles are runs of rows, so
 * a position on the tile's line is its (t, b) row.) */
static ctbc_range window_steps(const ctbc_problem *p, dot_tile_part part)
{
    const int64_t rows_total = total_rows(p);
    const int64_t g_lo = rows_total >= CTBC_DOT_ROWS ? ctbc_min(part.pos0, rows_total - CTBC_DOT_ROWS) : part.pos0;
    const int64_t g_hi = ctbc_max(part.pos1, g_lo + CTBC_DOT_ROWS);
    const int64_t lo = ctbc_max(0, g_lo / p->b + p->pad - (p->k - 1));
    return (ctbc_range){lo, ctbc_max(lo, ctbc_min(p->t_out, (g_hi - 1) / p->b + p->pad + 1))};
}

/* Tiles of at least as many steps as taps: each widens at most about twice
 * the grad_output rows it reads per tap. */
static dot_tiling tiling_halves(const ctbc_problem *p)
{
    return tiling_with(p, ctbc_max(DOT_TILE_ROWS, ctbc_round_up(product_or_ceiling(p->k - 1, p->b), DOT_TILE_ROWS)),
                       0);
}

static int64_t halves_tiles(const ctbc_run *run) { return tiling_halves(run->problem).tiles; }

/* (in double: the plan asks absurd problems too; exact where they fit the
 * scratch budget) */
static double window_floats(const ctbc_problem *p)
{
    const int64_t steps = (tiling_halves(p).rows + CTBC_DOT_ROWS - 1) / ctbc_max(p->b, 1) + 2 + p->k - 1;
    return (double)ctbc_min(steps, p->t_out) * (double)p->b * (double)p->c_out;
}

static double weight_floats(const ctbc_problem *p)
{
    return (double)p->k * (double)ctbc_min(tiling_halves(p).channels, p->c_in) * (double)p->c_out;
}

static void halves_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)
{
    const ctbc_problem *p = run->problem;
    const dot_tiling tl = tiling_halves(p);
    const dot_tile_part part = part_of(p, &tl, tile);
    const ctbc_range steps = window_steps(p, part);
    float *window = scratch->abuf, *weight = scratch->bbuf;
    ctbc_pack_rows(window, p->c_out, (steps.hi - steps.lo) * p->b, &run->grad_output, p->b, steps.lo * p->b, 0,
                   p->t_out * p->b, 0, p->c_out);
    for (int64_t k = 0; k < p->k; k++)
        ctbc_pack_rows(weight + k * part.nc * p->c_out, p->c_out, part.nc, &run->weight, p->c_in,
                       k * p->c_in + part.c0, 0, p->k * p->c_in, 0, p->c_out);
    const dot_source src = {(const char *)window, p->b * p->c_out, p->c_out, steps.lo,
                            (const char *)weight, part.nc * p->c_out, p->c_out, part.c0};
    dot_tile(run, &FLOATS, &src, part, scratch->cbuf);
}

static int applies_halves(const ctbc_problem *p, const ctbc_context *ctx)
{
    return ctx->kernel->dot && p->grad_output.dtype == CTBC_F16 && p->weight.dtype == CTBC_F16 &&
           window_floats(p) + weight_floats(p) <= (double)ctx->budget_floats;
}

/* ---- plans and costs ------------------------------------------------------- */

static void scratch_dot(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)
{
    (void)bl;
    need->cbuf = ctbc_max(need->cbuf, 2 * CTBC_DOT_ROWS * ctbc_round_up(ctbc_max(p->c_in, 1), 16));
}

static void scratch_halves(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)
{
    scratch_dot(p, bl, need);
    need->abuf = ctbc_max(need->abuf, ctbc_round_up((int64_t)window_floats(p), 16));
    need->bbuf = ctbc_max(need->bbuf, ctbc_round_up((int64_t)weight_floats(p), 16));
}

/*
 * The dot kernel fills no tile and packs nothing, but the 8-lane one
 * (dot_rows.h) sums without FMAs and reads the weight panel again for
 * every CTBC_DOT_ROWS rows: about CTBC_DOT8_COST tile multiply-adds each
 * (through VDPBF16PS, that over the context's pair_dot_speedup), growing
 * with the channels read per row (a reread every
 * CTBC_DOT8_REREAD_CHANNELS), and reductions (c_out) shorter than
 * DOT_MIN_C_OUT are mostly its scalar tail. (The context gives the float32
 * kernel's own: the 16-lane AVX-512 one's, context.c.) Zen 4, one thread,
 * whole op, medians of 3,
 * plan without and with the dot: T125 B1010 Ci3 K20 Co86 float32 131 ->
 * 99 ms, T30 B64 Ci8 K5 Co64 float32 0.37 -> 0.43 ms, T100 B32 Ci14 K3
 * Co200 float32 1.83 -> 1.99 ms; T124 B93 Ci6 K128 Co932 bfloat16 149 ->
 * 119 ms, T195 B16 Ci22 K14 Co221 bfloat16 5.8 -> 8.6 ms. A problem of
 * one group of rows reads its panel once: T3 B1 Ci416 K7 Co2332 bfloat16
 * 7.5 (gi_c_on_m_bf16) -> 2.4-2.8 ms, two threads, with tiles of 32
 * channels (before, one tile took all of it on one thread).
 */
#define DOT_MIN_C_OUT 16
/* Each output element also ends in a sum across the lanes and a tail
 * shorter than a vector: about DOT_ELEMENT multiply-adds of a full tile,
 * spread over its reduction (taps x c_out). EMR, two threads, whole op,
 * T2910 B2 Ci6 K1 with gi_dot against gi_in_place_narrow: 0.35 against
 * 0.20 ms at Co31, 0.28 against 0.15 at Co64, 0.61 against 0.58 at Co128,
 * 1.06 against 0.99 at Co256. At 250 it also took problems where the dot
 * won (T3 B1 Ci267 K1 Co1207 bfloat16, three rows: 0.19 -> 0.27 ms; T156
 * B24 Ci4 K1 Co637 float32 1.21 -> 1.47 ms); at 100 five plans of 278
 * changed, geomean 0.75x the time in alternating processes (T2910 B2 Ci6
 * K1 Co31 float32 0.32 -> 0.14 ms, T1137 B136 Ci4 K1 Co81 float32 15.0 ->
 * 9.6 ms; T3 B13 Ci2 K2 Co70 float16 0.023 -> 0.024 ms). */
#define DOT_ELEMENT 100.0

/* `factor` per multiply-add, the rows read again every `reread_channels`
 * channels, a partial chunk of `chunk` elements computed whole (0: no such
 * chunk). Each tap's row also costs about DOT_TAP_CHUNKS chunks more (its
 * pointers, its partial chunk in a pass of its own, loads across lines):
 * EMR, two threads, with gi_dot at 31 outputs T756 B7 Ci14 K178 Co31 took
 * 1.73x gi_in_place_narrow's time, T31 B232 Ci9 K9 Co31 1.20x gi_c_on_m's,
 * while at 127 to 2848 gi_dot took 0.49-0.86x gi_c_on_m's. */
#define DOT_TAP_CHUNKS 2
static double cost_with(const ctbc_problem *p, double factor, double reread_channels, int64_t chunk)
{
    if (p->c_out < DOT_MIN_C_OUT)
        return INFINITY;
    /* A problem of fewer rows than the kernel's computes the missing ones
     * too; one of a single group of them reads its weight panel once. */
    const int64_t rows = total_rows(p);
    const double wasted = (double)CTBC_DOT_ROWS / (double)ctbc_clamp(rows, 1, CTBC_DOT_ROWS);
    const double rereads = rows > CTBC_DOT_ROWS ? (double)p->c_in / reread_channels : 0.0;
    const double filled =
        chunk ? (double)p->c_out / (double)(ctbc_round_up(p->c_out, chunk) + DOT_TAP_CHUNKS * chunk) : 1.0;
    return factor * (wasted + rereads) / filled + DOT_ELEMENT / (double)(ctbc_max(p->k, 1) * p->c_out);
}

static double cost_floats(const ctbc_problem *p, const ctbc_context *ctx)
{
    return cost_with(p, ctx->dot_cost, ctx->dot_reread_channels, ctx->dot_chunk);
}

static double cost_pairs(const ctbc_problem *p, const ctbc_context *ctx)
{
    return cost_with(p, CTBC_DOT8_COST / ctx->pair_dot_speedup, CTBC_DOT8_REREAD_CHANNELS, 0);
}

/* gi_dot_steps and gi_dot_bf16_steps: tiles along a batch entry's time
 * steps (dot_tile), where steps follow one another and share taps
 * (T >= CTBC_DOT_ROWS, K > 1, B > 1: with one entry the runs of rows are
 * its steps already), and few steps lie near either end, where a tap
 * reaches grad_output for some of a group's rows only: those taps take a
 * kernel call per row (T6 B428 Ci11 K28 Co89 p14, every step such: 2.9x
 * the time of runs). */
#define DOT_EDGE_SHARE 4 /* at most a quarter of the steps near the ends */

static int steps_apply(const ctbc_problem *p)
{
    const int64_t edge_steps = 2 * ctbc_max(0, p->k - 1 - p->pad);
    return p->t >= CTBC_DOT_ROWS && p->k >= 2 && p->b >= 2 && edge_steps * DOT_EDGE_SHARE <= p->t;
}

static int applies_floats_steps(const ctbc_problem *p, const ctbc_context *ctx)
{
    return applies_floats(p, ctx) && steps_apply(p);
}

static int applies_pairs_steps(const ctbc_problem *p, const ctbc_context *ctx)
{
    return applies_pairs(p, ctx) && steps_apply(p);
}

/* A whole entry a tile where there are enough entries to share out, else
 * runs long against the taps: the rows a group reads anew at a tile's
 * start are repaid by the rows after. */
#define DOT_STEPS_PER_TAP 8

static void plan_steps(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)
{
    (void)ctx;
    if (p->b >= DOT_MIN_TILES)
        bl->gi_dot_steps = (int32_t)p->t;
    else
        bl->gi_dot_steps = (int32_t)ctbc_min(p->t, ctbc_round_up(ctbc_max(DOT_TILE_ROWS, DOT_STEPS_PER_TAP * p->k),
                                                                 CTBC_DOT_ROWS));
}

/*
 * Runs of rows read a step's grad_output rows over their taps, and the
 * next K - 1 steps' rows read them again: from L2 while they are at most
 * the context's dot_window_bytes, else from further out, which adds about
 * DOT_FAR_READS of the cost for all but the first read. Along an entry's
 * steps they are read once, but the steps lie a page or more apart and
 * each group's output is written row by row: about DOT_ROW_WRITE tile
 * multiply-adds a row, spread over its reduction (taps x c_out). EMR, two
 * threads, against the plans before: T252 B159 Ci1 K21 Co199 float32
 * 0.61x the time, T109 B2176 Ci1 K12 Co345 0.60x, T35 B2726 Ci1 K25
 * Co556 bfloat16 0.68x (each with the 16-lane dot); with the two taps of
 * T7 B3290 Ci1 K2 Co251, 1.10x before the reads were counted per tap.
 */
#define DOT_FAR_READS 0.2
#define DOT_ROW_WRITE 100.0

/* The steps whose rows read one grad_output step: as many as taps reach
 * it, and no more than the input has (T1 B3841 Ci14 K7 Co362 p7: one). */
static double reads_of_a_step(const ctbc_problem *p)
{
    return (double)ctbc_clamp(ctbc_min(ctbc_min(p->k, p->t_out), p->t), 1, INT32_MAX);
}

static double runs_cost(const ctbc_problem *p, const ctbc_context *ctx, double cost, int64_t element_bytes)
{
    const double reads = reads_of_a_step(p);
    const double step_window = (double)p->b * reads * (double)p->c_out * (double)element_bytes;
    if (step_window <= (double)ctx->dot_window_bytes)
        return cost;
    return cost * (1.0 + DOT_FAR_READS * (reads - 1.0) / reads);
}

/* (a line of steps not a multiple of the kernel's rows ends in a group
 * shifted back over rows already computed: T5 B1681 Ci3 K2 Co680 computes
 * 8 rows for each entry's 5 and took 1.21x the time of runs) */
static double steps_cost(const ctbc_problem *p, double cost)
{
    const double steps = (double)ctbc_max(p->t, 1);
    const double computed = (double)ctbc_round_up(ctbc_max(p->t, 1), CTBC_DOT_ROWS);
    return cost * computed / steps + DOT_ROW_WRITE / (double)(ctbc_max(p->k, 1) * ctbc_max(p->c_out, 1));
}

static double cost_floats_runs(const ctbc_problem *p, const ctbc_context *ctx)
{
    return runs_cost(p, ctx, cost_floats(p, ctx), 4);
}

static double cost_floats_steps(const ctbc_problem *p, const ctbc_context *ctx)
{
    return steps_cost(p, cost_floats(p, ctx));
}

static double cost_pairs_runs(const ctbc_problem *p, const ctbc_context *ctx)
{
    return runs_cost(p, ctx, cost_pairs(p, ctx), 2);
}

static double cost_pairs_steps(const ctbc_problem *p, const ctbc_context *ctx)
{
    return steps_cost(p, cost_pairs(p, ctx));
}

/* Widening an element costs about HALVES_WIDEN multiply-adds of the dot;
 * a tile widens its window of grad_output and its weight panel, which the
 * dot kernel then reads once for every pair of channels (dot_rows.h), from
 * L2, not L1. Zen 4, two threads, gi_c_on_m (or gi_merged_narrow) -> this:
 * T1067 B8 Ci1 K55 Co472 float16 46 -> 11.9 ms, T1774 B21 Ci1 K141 Co71
 * 42 -> 30-33 ms, T2208 B93 Ci2 K5 Co99 32 -> 23-28 ms; before counting
 * the pairs, T599 B6 Ci3 K1 Co28 0.14 -> 0.16 ms, T110 B26 Ci7 K11 Co119
 * 1.11 -> 1.34 ms. */
#define HALVES_WIDEN 4.0

static double cost_halves(const ctbc_problem *p, const ctbc_context *ctx)
{
    (void)ctx;
    const dot_tiling tl = tiling_halves(p);
    const double macs = (double)ctbc_min(tl.rows, total_rows(p)) * (double)p->k *
                        (double)ctbc_min(tl.channels, p->c_in) * (double)p->c_out;
    const double channel_pairs = (double)ctbc_ceil_div(ctbc_min(tl.channels, p->c_in), 2);
    return cost_with(p, CTBC_DOT8_COST, CTBC_DOT8_REREAD_CHANNELS, 0) * channel_pairs +
           HALVES_WIDEN * (window_floats(p) + weight_floats(p)) / fmax(macs, 1.0);
}

const ctbc_impl ctbc_impl_gi_dot = {"gi_dot", applies_floats, cost_floats_runs, ctbc_plan_nothing,
                                    scratch_dot, dot_tiles, floats_tile, 0};
const ctbc_impl ctbc_impl_gi_dot_steps = {"gi_dot_steps", applies_floats_steps, cost_floats_steps, plan_steps,
                                          scratch_dot, dot_tiles, floats_tile, 0};
const ctbc_impl ctbc_impl_gi_dot_bf16 = {"gi_dot_bf16", applies_pairs, cost_pairs_runs, ctbc_plan_nothing,
                                         scratch_dot, dot_tiles, pairs_tile, 0};
const ctbc_impl ctbc_impl_gi_dot_bf16_steps = {"gi_dot_bf16_steps", applies_pairs_steps, cost_pairs_steps,
                                               plan_steps, scratch_dot, dot_tiles, pairs_tile, 0};
const ctbc_impl ctbc_impl_gi_dot_f16 = {"gi_dot_f16", applies_halves, cost_halves, ctbc_plan_nothing,
                                        scratch_halves, halves_tiles, halves_tile, 0};
