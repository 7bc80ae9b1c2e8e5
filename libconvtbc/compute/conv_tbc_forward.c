/*
 * The forward op's implementations, in order of preference; the plan takes
 * the first that applies (or the one CONVTBC_FORCE_IMPL names), and the
 * plain reference comes last and always applies.
 *
 *   forward_gemm       one GEMM over the micro-kernel: rows are the (t, b)
 *                      output positions, columns the output channels, the
 *                      reduction (tap, input channel). self is copied once
 *                      into a float32 sequence with min(pad, K-1) zero steps at each
 *                      end, so every row reads the same taps and the rows
 *                      are evenly spaced (a tile may span time steps);
 *                      weight is packed into panels of nr output channels.
 *   forward_gemm_narrow
 *                      the same on the kernel's narrow tile (16 columns),
 *                      for few output channels, where it has one.
 *   forward_gemm_bf16  the same on bfloat16 pairs through VDPBF16PS, where
 *                      the kernel has it.
 *   forward_gemm_positions
 *                      the same GEMM transposed: output channels on the
 *                      micro-tile's mr rows, positions along its nr columns
 *                      (self copied channel-major), for few output channels,
 *                      which would fill an nr-wide tile poorly.
 *   forward_dot        few output channels: a dot product per output
 *                      element over (tap, input channel), the channels
 *                      contiguous on both sides (self read in place where
 *                      it is unrounded float32).
 *   forward_dot_bf16   the same on bfloat16 operands through VDPBF16PS,
 *                      where the kernel has it.
 *   forward_reference  plain loops, one output element at a time.
 *
 * The plan takes the implementation whose tiles waste the least work.
 *
 * Both sum the products of one output element in float32 in a fixed order,
 * then add the rounded bias and round the result, so their bits do not
 * depend on the thread count.
 */
#include "compute/conv_tbc_forward.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "compute/cpu_features.h"
#include "compute/driver.h"
#include "compute/float_convert.h"
#include "compute/team.h"

/* The workspace base is only promised to be 16-byte aligned. */
#define WS_ALIGN 64
/* Most micro-tiles in a block of output rows (forward_gemm_positions keeps
 * their float32 sums on the stack). (The block and the reduction chunk come
 * from the kernel context: its mc micro-tiles and kc.) */
#define FORWARD_MAX_BLOCK_TILES 32
/* The team size the plan weighs the implementations for (see
 * ctbc_forward_plan_init): the machines the costs were measured on. */
#define CHOICE_TEAM 2

typedef struct {
    const ctbc_forward_plan *plan;
    const ctbc_forward_problem *p;
    const ctbc_kernel *kernel;
    const void *self, *weight, *bias;
    void *out;
    float *bias_rounded; /* c_out values, bias as CANN adds it */
    /* c_out values: what the taps of an output step that reads only padding
     * sum to, 0 * weight over every tap and channel: +0, or NaN where the
     * weight column holds an Inf or NaN (IEEE, as the formula has it). */
    float *padding_term;
} forward_run;

typedef struct {
    const char *name;
    /* Scratch in floats (besides the rounded bias and the padding term);
     * SIZE_MAX: too large. */
    size_t (*scratch_floats)(const ctbc_forward_plan *plan, const ctbc_kernel *kernel);
    /* Multiply-adds the micro-kernel performs, padding of its tiles
     * included, plus copies (the plan takes the cheapest); HUGE_VAL: does
     * not apply to the problem. */
    double (*cost)(const ctbc_forward_plan *plan, const ctbc_kernel *kernel);
    /* Work items its tiles are shared out in: the plan divides the cost by
     * what the threads that get one add up to (the kernel context's
     * team_efficiency). */
    int64_t (*items)(const ctbc_forward_plan *plan, const ctbc_kernel *kernel);
    /* Fills out; called by every thread of the team (or by one). */
    void (*run)(const forward_run *run, float *scratch);
} forward_implementation;

/* ---- numerics ------------------------------------------------------------ */

static float load(const void *base, ctbc_dtype dtype, int64_t index)
{
    switch (dtype) {
    case CTBC_F16: return ctbc_f16_to_f32(((const uint16_t *)base)[index]);
    case CTBC_BF16: return ctbc_bf16_to_f32(((const uint16_t *)base)[index]);
    default: return ((const float *)base)[index];
    }
}

static float round_to(float v, ctbc_dtype dtype)
{
    switch (dtype) {
    case CTBC_F16: return ctbc_round_fp16(v);
    case CTBC_BF16: return ctbc_bf16_to_f32(ctbc_f32_to_bf16(v));
    default: return v;
    }
}

/* An operand as the cube unit multiplies it. */
static float operand(const ctbc_forward_problem *p, const void *base, ctbc_dtype dtype, int64_t index)
{
    const float v = load(base, dtype, index);
    if (p->hf32)
        return ctbc_round_hf32(v);
    return dtype == p->compute_dtype ? v : round_to(v, p->compute_dtype);
}

/* The sum rounded to the compute dtype, then stored in out's. */
/* v in out's dtype (round to nearest even). */
static void put(const ctbc_forward_problem *p, void *out, int64_t index, float v)
{
    switch (p->out.dtype) {
    case CTBC_F16: ((uint16_t *)out)[index] = ctbc_f32_to_f16(v); break;
    case CTBC_BF16: ((uint16_t *)out)[index] = ctbc_f32_to_bf16(v); break;
    default: ((float *)out)[index] = v;
    }
}

static void store(const ctbc_forward_problem *p, void *out, int64_t index, float sum)
{
    put(p, out, index, round_to(sum, p->compute_dtype));
}

/* n operands base[start + i*stride] into dst as the cube multiplies them:
 * widened with the kernel's bulk conversions where they are adjacent,
 * then rounded (the same values as operand()). */
static void load_operands(const forward_run *run, float *dst, const void *base, ctbc_dtype dtype, int64_t start,
                          int64_t stride, int64_t n)
{
    const ctbc_forward_problem *p = run->p;
    if (stride == 1 || n == 1) {
        switch (dtype) {
        case CTBC_F16: run->kernel->f16_load(dst, (const uint16_t *)base + start, n); break;
        case CTBC_BF16: run->kernel->bf16_load(dst, (const uint16_t *)base + start, n); break;
        default: memcpy(dst, (const float *)base + start, (size_t)n * sizeof *dst);
        }
    } else {
        for (int64_t i = 0; i < n; i++)
            dst[i] = load(base, dtype, start + i * stride);
    }
    if (p->hf32)
        for (int64_t i = 0; i < n; i++)
            dst[i] = ctbc_round_hf32(dst[i]);
    else if (dtype != p->compute_dtype)
        for (int64_t i = 0; i < n; i++)
            dst[i] = round_to(dst[i], p->compute_dtype);
}

/* Whether an operand is used as it lies: float32 that nothing rounds. */
static bool unrounded_float32(const ctbc_forward_problem *p, ctbc_dtype dtype)
{
    return dtype == CTBC_F32 && p->compute_dtype == CTBC_F32 && !p->hf32;
}

/* dst[i] = src[i * stride], i < n. */
static void gather(float *dst, const float *src, int64_t stride, int64_t n)
{
    if (stride == 1) {
        memcpy(dst, src, (size_t)n * sizeof *dst);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        dst[i] = src[i * stride];
}

/* The weight as the implementations read it: float32 values as the cube
 * multiplies them, element (k, c, o) at base[k*tap + c*channel + o*column]. */
typedef struct {
    const float *base;
    int64_t tap, channel, column;
} float_weight;

/* Whether the weight is read as it lies: float32 that nothing rounds.
 * Otherwise it is widened (and rounded) once, in bulk, into a float32 copy
 * [k][c_in][c_out]: converting it a panel row at a time, as the packing
 * loops would, costs a call per few values. */
static bool weight_read_in_place(const ctbc_forward_problem *p) { return unrounded_float32(p, p->weight.dtype); }

/* Floats of the widened copy (0 when the weight is read in place). */
static size_t widened_weight_floats(const ctbc_forward_problem *p)
{
    size_t floats = 0;
    if (!weight_read_in_place(p) && (__builtin_mul_overflow((size_t)p->k, (size_t)p->c_in, &floats) ||
                                     __builtin_mul_overflow(floats, (size_t)p->c_out, &floats)))
        return SIZE_MAX;
    return floats;
}

/* Values widened per work item of the copy when the weight's elements are
 * adjacent in (k, c_in, c_out) order. */
enum { WIDEN_BLOCK = 4096 };

/* Where the implementations read the weight: `weight` itself with its
 * strides, or the widened copy at `room`. */
static float_weight weight_layout(const ctbc_forward_problem *p, const void *weight, float *room)
{
    const int64_t *stride = p->weight.stride;
    if (weight_read_in_place(p))
        return (float_weight){weight, stride[0], stride[1], stride[2]};
    return (float_weight){room, p->c_in * p->c_out, p->c_out, 1};
}

/* The weight as float32 (in place, or widened into `room`, which holds
 * widened_weight_floats values). Called by every thread of the team: the
 * copy is complete when it returns. */
static float_weight weight_floats(const forward_run *run, float *room)
{
    const ctbc_forward_problem *p = run->p;
    const int64_t *stride = p->weight.stride;
    if (weight_read_in_place(p))
        return weight_layout(p, run->weight, room);
    const int64_t c_in = p->c_in, c_out = p->c_out, rows = p->k * c_in;
    const bool adjacent = (c_out == 1 || stride[2] == 1) && (c_in == 1 || stride[1] == c_out) &&
                          (p->k == 1 || stride[0] == c_in * c_out);
    if (adjacent) {
        const int64_t total = rows * c_out, blocks = (total + WIDEN_BLOCK - 1) / WIDEN_BLOCK;
#pragma omp for schedule(static)
        for (int64_t block = 0; block < blocks; block++) {
            const int64_t start = block * WIDEN_BLOCK;
            load_operands(run, room + start, run->weight, p->weight.dtype, start, 1,
                          total - start < WIDEN_BLOCK ? total - start : WIDEN_BLOCK);
        }
    } else {
#pragma omp for schedule(static)
        for (int64_t row = 0; row < rows; row++)
            load_operands(run, room + row * c_out, run->weight, p->weight.dtype,
                          row / c_in * stride[0] + row % c_in * stride[1], stride[2], c_out);
    }
    return weight_layout(p, run->weight, room);
}

/* Most outputs one store_outputs call writes (a tile row or column). */
enum { STORE_MAX = CTBC_NR_MAX > CTBC_MR_MAX ? CTBC_NR_MAX : CTBC_MR_MAX };

/* out[start + i*stride] = sums[i*sum_step] + bias[i] for i < n (n <=
 * STORE_MAX), each rounded as store() does; adjacent outputs go through
 * the kernel's bulk conversions. */
static void store_outputs(const forward_run *run, int64_t start, int64_t stride, const float *sums,
                          int64_t sum_step, const float *bias, int64_t n)
{
    const ctbc_forward_problem *p = run->p;
    float v[STORE_MAX];
    /* Rounding to the compute dtype and then to out's is rounding once
     * when they are the same dtype: the store rounds. */
    const ctbc_dtype round_first = p->compute_dtype == p->out.dtype ? CTBC_F32 : p->compute_dtype;
    for (int64_t i = 0; i < n; i++)
        v[i] = round_to(sums[i * sum_step] + bias[i], round_first);
    if (stride == 1) {
        switch (p->out.dtype) {
        case CTBC_F16: run->kernel->f16_store((uint16_t *)run->out + start, v, n); return;
        case CTBC_BF16: run->kernel->bf16_store((uint16_t *)run->out + start, v, n); return;
        default: memcpy((float *)run->out + start, v, (size_t)n * sizeof *v); return;
        }
    }
    for (int64_t i = 0; i < n; i++)
        put(p, run->out, start + i * stride, v[i]);
}

/* The padding's share of a sum: a step that reads padding adds 0 * w for
 * each weight w of its taps, in order, from +0. A finite w gives a zero and
 * +0 plus a zero stays +0; an Inf or NaN gives NaN, which every later add
 * keeps. So the share is +0 or the first non-finite product, found by a
 * scan with no chain of dependent adds (with the chain, forward_dot took
 * 0.033 ms for T64 B1 Ci416 K26 Co1, 0.028 without). FINITE(x) tells a finite
 * element; PRODUCT(x) is 0 * x in float32. */
#define ZERO_PRODUCTS(NAME, ELEM, FINITE, PRODUCT)                                                             \
    static float NAME(const ELEM *w, int64_t n)                                                                \
    {                                                                                                          \
        unsigned any = 0;                                                                                      \
        for (int64_t c = 0; c < n; c++)                                                                        \
            any |= !FINITE(w[c]);                                                                              \
        for (int64_t c = 0; any && c < n; c++)                                                                 \
            if (!FINITE(w[c]))                                                                                 \
                return PRODUCT(w[c]);                                                                          \
        return 0.0f;                                                                                           \
    }

static bool finite_f32(float x) { return (ctbc_f32_bits(x) & 0x7f800000u) != 0x7f800000u; }
static bool finite_bf16(uint16_t x) { return (x & 0x7f80u) != 0x7f80u; }
static float zero_times_f32(float x) { return 0.0f * x; }
static float zero_times_bf16(uint16_t x) { return 0.0f * ctbc_bf16_to_f32(x); }
ZERO_PRODUCTS(zero_products_f32, float, finite_f32, zero_times_f32)
ZERO_PRODUCTS(zero_products_bf16, uint16_t, finite_bf16, zero_times_bf16)

static int64_t out_index(const ctbc_forward_problem *p, int64_t t, int64_t b, int64_t o)
{
    return t * p->out.stride[0] + b * p->out.stride[1] + o * p->out.stride[2];
}

/* Output steps that read only padding: their sum is the padding term. */
static void padding_only_steps(const forward_run *run, int64_t t_begin, int64_t t_end)
{
    const ctbc_forward_problem *p = run->p;
#pragma omp for schedule(static)
    for (int64_t t = t_begin; t < t_end; t++)
        for (int64_t b = 0; b < p->b; b++)
            for (int64_t o = 0; o < p->c_out; o++)
                store(p, run->out, out_index(p, t, b, o), run->padding_term[o] + run->bias_rounded[o]);
}

/* An empty self or weight: CANN copies bias, cast to out's dtype. */
static void copy_bias(const ctbc_forward_problem *p, const void *bias, void *out)
{
    for (int64_t t = 0; t < p->t_out; t++)
        for (int64_t b = 0; b < p->b; b++)
            for (int64_t o = 0; o < p->c_out; o++)
                put(p, out, out_index(p, t, b, o), load(bias, p->bias.dtype, o * p->bias.stride[0]));
}

/* ---- forward_gemm ------------------------------------------------------- */

static int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

/* The GEMMs' reduction (tap, channel) in chunks of about kc (the plan's
 * chunk) values: whole taps while a tap is short, else one tap in channel
 * slices; a chunk of the weight then stays in cache across a block's
 * tiles. c_in > 0. */
static int64_t chunk_taps(const ctbc_forward_plan *plan, int64_t c_in)
{
    return c_in >= plan->chunk ? 1 : plan->chunk / c_in;
}

static int64_t chunk_channels(const ctbc_forward_plan *plan, int64_t c_in)
{
    return c_in >= plan->chunk ? plan->chunk : c_in;
}

/* Zero steps the float32 copy of self needs at each end: the GEMM rows'
 * taps reach min(pad, K-1) steps past self (none without padding). */
static int64_t zero_steps(const ctbc_forward_problem *p) { return p->pad < p->k - 1 ? p->pad : p->k - 1; }

/* The costs count a copy of self as if self were contiguous: which
 * implementation computes a problem, and so its bits, must not depend on
 * the strides of the views (an implementation gives the same bits read in
 * place or from its copy). */
static bool self_in_place_if_contiguous(const ctbc_forward_problem *p)
{
    return unrounded_float32(p, p->self.dtype);
}

/* self read in place as the GEMM's rows: no padding to add, channels
 * adjacent and the (t, b) rows evenly spaced. Only a last, partial row
 * tile is copied (it would read past self). */
static bool gemm_self_in_place(const ctbc_forward_problem *p)
{
    return unrounded_float32(p, p->self.dtype) && zero_steps(p) == 0 && (p->self.stride[2] == 1 || p->c_in == 1) &&
           p->self.stride[0] == p->b * p->self.stride[1];
}

/* Output steps t whose taps t + k - pad (k < K) meet self, [*t_lo,
 * *t_hi); the others read only padding. */
static void self_steps(const ctbc_forward_problem *p, int64_t *t_lo, int64_t *t_hi)
{
    int64_t lo = p->pad - (p->k - 1), hi = p->t + p->pad;
    lo = lo < 0 ? 0 : lo > p->t_out ? p->t_out : lo;
    hi = hi > p->t_out ? p->t_out : hi < lo ? lo : hi;
    *t_lo = lo, *t_hi = hi;
}

/* The GEMM's rows: the (t, b) positions whose taps read self. */
static int64_t gemm_rows(const ctbc_forward_problem *p)
{
    int64_t t_lo, t_hi;
    self_steps(p, &t_lo, &t_hi);
    return (t_hi - t_lo) * p->b;
}

/* weight read in place as nr-wide panels: output channels adjacent, at
 * least nr of them (a last, partial panel is read shifted left, overlapping
 * the one before it), and either exactly nr of them (the panel is then
 * packed already) or few row tiles reading each panel (the kernel
 * context's unpacked_reuse_tiles). */
static bool weight_in_place_with(const ctbc_forward_plan *plan, const ctbc_kernel *kernel, float_weight read)
{
    const ctbc_forward_problem *p = &plan->problem;
    return (read.column == 1 || p->c_out == 1) && p->c_out >= kernel->nr &&
           ((p->c_out == kernel->nr && read.channel == kernel->nr) ||
            gemm_rows(p) <= plan->unpacked_reuse_tiles * kernel->mr);
}

static bool gemm_weight_in_place(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    return weight_in_place_with(plan, kernel, weight_layout(&plan->problem, NULL, NULL)); /* (only its strides) */
}

/* What the costs and the work items count on, for the reason
 * self_in_place_if_contiguous gives: the weight's floats [tap][channel]
 * [column] without gaps. */
static bool gemm_weight_in_place_if_contiguous(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    const float_weight contiguous = {.column = 1, .channel = plan->problem.c_out};
    return weight_in_place_with(plan, kernel, contiguous);
}

/* How forward_gemm shares out its tiles: blocks of block_tiles row tiles
 * against groups of `group` weight panels; the work items are (block,
 * group) pairs. A block computes each chunk of the reduction against every
 * panel of its group before the next chunk, so the chunk of its rows is
 * read from memory once and then from cache for each panel. Groups hold
 * more than one panel with a long reduction (more than one chunk) and
 * enough full blocks for every thread: T15 B257 Ci1440 K14 Co256 (4
 * blocks) took 8% less time, while shrinking the one block of T15 B16
 * Ci1504 K8 Co64 and T17 B15 Ci1552 K14 Co116 to make items for both
 * threads took 13-30% more (AVX2, Zen 3, 2 threads). (The bits depend on
 * neither: each output sums its chunks in the same order.) */
typedef struct {
    int64_t block_tiles, group, row_blocks, groups;
} gemm_blocking;

/* weight_packed: the panels are written on every call (else read in
 * place). */
static gemm_blocking gemm_blocking_of(const ctbc_forward_plan *plan, const ctbc_kernel *kernel, bool weight_packed)
{
    const ctbc_forward_problem *p = &plan->problem;
    const int64_t tiles = (gemm_rows(p) + kernel->mr - 1) / kernel->mr;
    const int64_t panel_count = round_up(p->c_out, kernel->nr) / kernel->nr;
    gemm_blocking g = {.block_tiles = plan->block_tiles, .group = 1};
    if (p->k * p->c_in > plan->chunk && panel_count > 1) {
        const int64_t group = panel_count < plan->panel_group ? panel_count : plan->panel_group;
        const int64_t groups = (panel_count + group - 1) / group;
        const int64_t blocks_wanted = plan->parallel ? (plan->threads + groups - 1) / groups : 1;
        if (tiles >= blocks_wanted * g.block_tiles)
            g.group = group;
    }
    g.row_blocks = tiles == 0 ? 0 : (tiles + g.block_tiles - 1) / g.block_tiles;
    g.groups = (panel_count + g.group - 1) / g.group;
    /* Items shared evenly: as many row blocks (of fewer tiles) as make
     * their count a multiple of the team's. 86 tiles in 3 blocks of 32 gave
     * one of two threads twice the other's rows (T15 B257 Ci1440 K14
     * Co256); in 4 they share them. One item is split only where the
     * weight is read in place, into blocks of two tiles or more: packed
     * panels would be read on the other core just after this one wrote
     * them. Measured on a Zen 4, forward_gemm_narrow, medians of 7: one
     * block split in two took 0.65-0.85 of one thread's time with the
     * weight in place (T8 B17 Ci240 K3 Co16, T17 B16 Ci64 K9 Co16, T1 B24
     * Ci1520 K1 Co17), and from 0.65 to 3 times with packed panels,
     * bimodal between processes (T1 B64 Ci1520 K1 Co7: 1.2-3x). */
    const int64_t items = g.row_blocks * g.groups;
    const bool split_one = items == 1 && tiles >= 2 * plan->threads && !weight_packed;
    if (plan->parallel && (items > 1 || split_one) && items % plan->threads != 0) {
        const int64_t balanced = (items + plan->threads - 1) / plan->threads * plan->threads;
        const int64_t blocks = (balanced + g.groups - 1) / g.groups;
        g.block_tiles = (tiles + blocks - 1) / blocks;
        g.row_blocks = (tiles + g.block_tiles - 1) / g.block_tiles;
    }
    return g;
}

static int64_t blocking_items(const ctbc_forward_plan *plan, const ctbc_kernel *kernel, bool weight_packed)
{
    const gemm_blocking g = gemm_blocking_of(plan, kernel, weight_packed);
    return g.row_blocks * g.groups;
}

static int64_t gemm_items(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    return blocking_items(plan, kernel, !gemm_weight_in_place_if_contiguous(plan, kernel));
}

/* Per thread: the sums of one block against one group, then the shifted
 * tile's for each panel of the group. */
static int64_t gemm_sums_floats(const gemm_blocking *g, const ctbc_kernel *kernel)
{
    return (g->block_tiles + 1) * kernel->mr * g->group * kernel->nr;
}

typedef struct {
    size_t sequence, tail, panels, widened, sums; /* floats of each part of the scratch */
    bool weight_in_place;                   /* (or its widened copy); else every panel is packed */
    /* self in place with fewer rows than one tile: their taps are copied
     * into the tail (with more, the last tile is read shifted up) */
    bool copied_tile;
} gemm_scratch_layout;

/* Sizes come from tensors that exist, but the products may still not fit
 * size_t for absurd shapes: false then (no workspace can be allocated). */
static bool gemm_layout(const ctbc_forward_plan *plan, const ctbc_kernel *kernel, gemm_scratch_layout *l)
{
    const ctbc_forward_problem *p = &plan->problem;
    const int64_t nr = kernel->nr, panel_count = round_up(p->c_out, nr) / nr;
    *l = (gemm_scratch_layout){0};
    l->weight_in_place = gemm_weight_in_place(plan, kernel);
    l->copied_tile = gemm_self_in_place(p) && gemm_rows(p) < kernel->mr;
    l->widened = widened_weight_floats(p);
    const gemm_blocking blocking = gemm_blocking_of(plan, kernel, !l->weight_in_place);
    if (__builtin_mul_overflow((size_t)gemm_sums_floats(&blocking, kernel), (size_t)plan->threads, &l->sums))
        return false;
    const size_t rows = gemm_self_in_place(p) ? 0 : (size_t)((p->t + 2 * zero_steps(p)) * p->b + kernel->mr);
    if (l->copied_tile && (__builtin_mul_overflow((size_t)p->k * (size_t)kernel->mr, (size_t)p->c_in, &l->tail)))
        return false;
    return l->widened != SIZE_MAX && !__builtin_mul_overflow(rows, (size_t)p->c_in, &l->sequence) &&
           !__builtin_mul_overflow((size_t)(l->weight_in_place ? 0 : panel_count) * (size_t)nr, (size_t)p->k,
                                   &l->panels) &&
           !__builtin_mul_overflow(l->panels, (size_t)p->c_in, &l->panels);
}

static size_t gemm_scratch(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    gemm_scratch_layout l;
    size_t total;
    if (!gemm_layout(plan, kernel, &l) || __builtin_add_overflow(l.sequence, l.tail, &total) ||
        __builtin_add_overflow(total, l.panels, &total) || __builtin_add_overflow(total, l.widened, &total) ||
        __builtin_add_overflow(total, l.sums, &total))
        return SIZE_MAX;
    return total;
}

/* The output channel a panel's first column holds: its own first one,
 * except that a last, partial panel read in place is shifted left to end
 * at c_out (rows (tap, channel) weight strides apart), overlapping the one
 * before it. */
static int64_t panel_first_column(bool weight_in_place, const ctbc_forward_problem *p, int64_t nr, int64_t panel)
{
    const int64_t o0 = panel * nr;
    return weight_in_place && p->c_out - o0 < nr ? p->c_out - nr : o0;
}

/* What the GEMMs' shared tile loop reads, in 4-byte elements: floats for
 * forward_gemm, bfloat16 pairs for forward_gemm_bf16 (the loop only moves
 * pointers; the kernel call reads them). Row r of the GEMM, tap k, element
 * e of the tap's reduction: a[r*a_row + k*a_tap + e]; weight column j of a
 * panel, tap k, element e: panel(j) + k*w_tap + e*w_channel + j. */
typedef struct {
    const float *a;
    int64_t a_row, a_tap;
    int64_t width; /* elements of one tap's reduction: c_in, or its pairs */
    /* self in place: the last partial tile read shifted up to end at the
     * last row (shifted_tile), or, with fewer rows than a tile, their taps
     * copied into `tail` [tap][mr][width] (copied_tile) */
    const float *tail;
    bool copied_tile, shifted_tile;
    const float *w;
    int64_t w_tap, w_channel;
    bool weight_in_place;  /* w is the weight's own float32 */
    int64_t w_column;      /* in place: a column's stride */
    void (*ukr)(const ctbc_kernel *kernel, const ctbc_ukr_args *args, const float *a, const float *b, float *c,
                int64_t ldc);
} gemm_operands;

static const float *gemm_panel(const gemm_operands *ops, const ctbc_forward_problem *p, int64_t nr, int64_t panel)
{
    if (ops->weight_in_place)
        return ops->w + panel_first_column(true, p, nr, panel) * ops->w_column;
    return ops->w + panel * p->k * ops->width * nr;
}

/* The GEMM's tiles, blocked as gemm_blocking_of says, and their outputs;
 * sums holds gemm_sums_floats floats for each thread of the team. */
static void gemm_tiles(const forward_run *run, const gemm_operands *ops, float *sums_of_threads)
{
    const ctbc_forward_problem *p = run->p;
    const ctbc_kernel *kernel = run->kernel;
    const int64_t mr = kernel->mr, nr = kernel->nr, width = ops->width, b_count = p->b, k_count = p->k;
    const gemm_blocking blocking = gemm_blocking_of(run->plan, kernel, !ops->weight_in_place);
    float *const thread_sums =
        sums_of_threads + (size_t)omp_get_thread_num() * (size_t)gemm_sums_floats(&blocking, kernel);
    const int64_t panel_count = round_up(p->c_out, nr) / nr;
    const int64_t t_lo = run->plan->t_lo, rows = (run->plan->t_hi - t_lo) * b_count;
    const int64_t tail_row0 = rows / mr * mr;
    const int64_t block_rows = blocking.block_tiles * mr, group = blocking.group;
    const int64_t taps_per_chunk = chunk_taps(run->plan, width), channels_per_chunk = chunk_channels(run->plan, width);
    /* sums [panel of the group][block_rows][nr], then the shifted tile's
     * (rows rows - mr .. rows - 1) [panel of the group][mr][nr] */
    float *const shifted_sums = thread_sums + group * block_rows * nr;
    /* Row-block-major, so a thread's run of items reuses one block of self
     * across the groups of weight panels. */
#pragma omp for schedule(static)
    for (int64_t item = 0; item < blocking.row_blocks * blocking.groups; item++) {
        const int64_t block = item / blocking.groups, panel_begin = item % blocking.groups * group;
        const int64_t panel_end = panel_begin + group < panel_count ? panel_begin + group : panel_count;
        const int64_t row_begin = block * block_rows;
        const int64_t row_end = row_begin + block_rows < rows ? row_begin + block_rows : rows;
        bool first = true;
        for (int64_t k0 = 0; k0 < k_count; k0 += taps_per_chunk)
            for (int64_t c0 = 0; c0 < width; c0 += channels_per_chunk) {
                const int64_t taps = k_count - k0 < taps_per_chunk ? k_count - k0 : taps_per_chunk;
                const int64_t channels = width - c0 < channels_per_chunk ? width - c0 : channels_per_chunk;
                for (int64_t panel = panel_begin; panel < panel_end; panel++) {
                    const float *w = gemm_panel(ops, p, nr, panel) + k0 * ops->w_tap + c0 * ops->w_channel;
                    float *sums = thread_sums + (panel - panel_begin) * block_rows * nr;
                    float *shifted = shifted_sums + (panel - panel_begin) * mr * nr;
                    ctbc_ukr_args args = {.n_outer = taps,
                                          .n_inner = channels,
                                          .a_row = ops->a_row,
                                          .a_inner = 1,
                                          .a_outer = ops->a_tap,
                                          .b_inner = ops->w_channel,
                                          .b_outer = ops->w_tap,
                                          .overwrite = first};
                    for (int64_t row0 = row_begin; row0 < row_end; row0 += mr) {
                        if (ops->copied_tile) {
                            ctbc_ukr_args copied = args;
                            copied.a_row = width, copied.a_outer = mr * width;
                            ops->ukr(kernel, &copied, ops->tail + k0 * mr * width + c0, w, sums, nr);
                        } else if (ops->shifted_tile && row0 == tail_row0) {
                            ops->ukr(kernel, &args, ops->a + (rows - mr) * ops->a_row + k0 * ops->a_tap + c0, w,
                                     shifted, nr);
                        } else {
                            ops->ukr(kernel, &args, ops->a + row0 * ops->a_row + k0 * ops->a_tap + c0, w,
                                     sums + (row0 - row_begin) * nr, nr);
                        }
                    }
                }
                first = false;
            }
        for (int64_t panel = panel_begin; panel < panel_end; panel++) {
            const int64_t o0 = panel * nr, n = p->c_out - o0 < nr ? p->c_out - o0 : nr;
            const int64_t panel_o0 = panel_first_column(ops->weight_in_place, p, nr, panel);
            const float *sums = thread_sums + (panel - panel_begin) * block_rows * nr;
            const float *shifted = shifted_sums + (panel - panel_begin) * mr * nr;
            for (int64_t r = row_begin; r < row_end; r++) {
                const int64_t t = t_lo + r / b_count, b = r % b_count;
                const float *row_sums = ops->shifted_tile && r >= tail_row0 ? shifted + (r - (rows - mr)) * nr
                                                                            : sums + (r - row_begin) * nr;
                store_outputs(run, out_index(p, t, b, o0), p->out.stride[2], row_sums + (o0 - panel_o0), 1,
                              run->bias_rounded + o0, n);
            }
        }
    }
}

static void ukr_f32(const ctbc_kernel *kernel, const ctbc_ukr_args *args, const float *a, const float *b, float *c,
                    int64_t ldc)
{
    kernel->ukr(args, a, b, c, ldc);
}

static void gemm_run(const forward_run *run, float *scratch)
{
    const ctbc_forward_problem *p = run->p;
    const ctbc_kernel *kernel = run->kernel;
    const int64_t mr = kernel->mr, nr = kernel->nr, c_in = p->c_in, b_count = p->b, k_count = p->k;
    const int64_t zeros = zero_steps(p), steps = p->t + 2 * zeros;
    const bool self_in_place = gemm_self_in_place(p);
    gemm_scratch_layout layout;
    gemm_layout(run->plan, kernel, &layout); /* it fit when the plan was made */
    float *sequence = scratch, *tail = scratch + layout.sequence, *panels = tail + layout.tail;
    const float_weight weight = weight_floats(run, panels + layout.panels);
    const int64_t panel_count = round_up(p->c_out, nr) / nr;
    const int64_t t_lo = run->plan->t_lo, rows = (run->plan->t_hi - t_lo) * b_count;
    gemm_operands ops = {.width = c_in, .tail = tail, .copied_tile = layout.copied_tile,
                         .weight_in_place = layout.weight_in_place, .ukr = ukr_f32};

    /* The GEMM's rows: row r is output step t_lo + r / B, batch r % B; its
     * tap k reads self step t - pad + k, through `a` (in place or the copy). */
    if (self_in_place) {
        ops.a = (const float *)run->self + (t_lo - p->pad) * p->self.stride[0];
        ops.a_row = p->self.stride[1], ops.a_tap = p->self.stride[0];
    } else {
        /* self, rounded and widened, with min(pad, K-1) zero steps on
         * either side and a zero tail the last tile may read. */
#pragma omp for schedule(static)
        for (int64_t r = 0; r < steps * b_count + mr; r++) { /* (the tail: one tile's overhang) */
            float *row = sequence + r * c_in;
            const int64_t t = r / b_count - zeros, b = r % b_count;
            if (r >= steps * b_count || t < 0 || t >= p->t) {
                memset(row, 0, (size_t)c_in * sizeof *row);
                continue;
            }
            load_operands(run, row, run->self, p->self.dtype, t * p->self.stride[0] + b * p->self.stride[1],
                          p->self.stride[2], c_in);
        }
        ops.a = sequence + (t_lo - p->pad + zeros) * b_count * c_in;
        ops.a_row = c_in, ops.a_tap = b_count * c_in;
    }
    /* A last, partial row tile of in-place rows is read shifted up to end
     * at the last row (its first rows are computed twice, the same bits both
     * times), unless there are fewer rows than one tile: then their taps
     * are copied [tap][row][channel] with zero rows past the end. */
    ops.shifted_tile = self_in_place && !layout.copied_tile && rows / mr * mr < rows;
    if (layout.copied_tile) {
#pragma omp for schedule(static)
        for (int64_t k = 0; k < k_count; k++)
            for (int64_t i = 0; i < mr; i++) {
                float *dst = tail + (k * mr + i) * c_in;
                if (i < rows)
                    memcpy(dst, ops.a + i * ops.a_row + k * ops.a_tap, (size_t)c_in * sizeof *dst);
                else
                    memset(dst, 0, (size_t)c_in * sizeof *dst);
            }
    }
    /* weight, rounded, in panels [panel][tap][c_in][nr], zero past c_out,
     * unless it is read in place. */
    if (layout.weight_in_place) {
        ops.w = weight.base, ops.w_tap = weight.tap, ops.w_channel = weight.channel, ops.w_column = weight.column;
    } else {
#pragma omp for schedule(static)
        for (int64_t item = 0; item < panel_count * k_count; item++) {
            const int64_t panel = item / k_count, k = item % k_count;
            float *dst = panels + item * c_in * nr;
            const int64_t o0 = panel * nr, n = p->c_out - o0 < nr ? p->c_out - o0 : nr;
            for (int64_t c = 0; c < c_in; c++) {
                gather(dst + c * nr, weight.base + k * weight.tap + c * weight.channel + o0 * weight.column,
                       weight.column, n);
                memset(dst + c * nr + n, 0, (size_t)(nr - n) * sizeof *dst);
            }
        }
        ops.w = panels, ops.w_tap = c_in * nr, ops.w_channel = nr;
    }
    /* (implicit barrier: the tiles read the copies) */
    gemm_tiles(run, &ops, panels + layout.panels + layout.widened);
}

/* Copying self (zero-extended) into float32, or the weight into panels,
 * in tile multiply-adds: a copied element costs about COPY_FACTOR of them. */
#define COPY_FACTOR 8.0

static double copy_cost(const ctbc_forward_problem *p, int64_t steps)
{
    return COPY_FACTOR * (double)steps * (double)p->b * (double)p->c_in;
}

static double gemm_cost(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    const ctbc_forward_problem *p = &plan->problem;
    const int64_t rows = gemm_rows(p);
    const double panels = (double)round_up(p->c_out, kernel->nr) * (double)p->k * (double)p->c_in;
    return (double)round_up(rows, kernel->mr) * panels +
           (self_in_place_if_contiguous(p) && zero_steps(p) == 0 ? 0.0 : copy_cost(p, p->t + 2 * zero_steps(p))) +
           (gemm_weight_in_place_if_contiguous(plan, kernel) ? 0.0 : COPY_FACTOR * panels);
}

/* ---- forward_gemm_narrow ------------------------------------------------- */

/* forward_gemm on the kernel's narrow tile (mr_narrow x CTBC_NR_NARROW),
 * where it has one: few output channels fill an nr-wide tile with padding
 * columns (16 of AVX-512's 32 take the same instructions as 32). The
 * narrow tiles keep the wide ones' bits, so the outputs are forward_gemm's
 * (and forward_gemm_bf16_narrow's forward_gemm_bf16's; the narrowed
 * kernel's ukr_bf16 is NULL where the bfloat16 one does not apply). */

/* Both tiles take 16 multiply-adds per FMA instruction, but the narrow
 * one loads a broadcast for every 16 of them, not every 32: on a Zen 4 it
 * was 15% slower on GEMMs of hundreds of channels (T15 B257 Ci1440 K14
 * Co256: 37.6 ms against 32.8), and twice as fast at 15-16 channels. (The
 * backward op's narrow implementations take it from their context.) */
#define NARROW_FACTOR 1.15

/* The implementation NAME: BASE's functions on the narrow view of the
 * kernel. */
#define NARROW_IMPLEMENTATION(NAME, BASE)                                                                     \
    static size_t NAME##_scratch(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)                     \
    {                                                                                                          \
        ctbc_kernel narrow;                                                                                    \
        return ctbc_kernel_narrowed(kernel, &narrow) ? BASE##_scratch(plan, &narrow) : SIZE_MAX;               \
    }                                                                                                          \
    static double NAME##_cost(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)                        \
    {                                                                                                          \
        ctbc_kernel narrow;                                                                                    \
        return ctbc_kernel_narrowed(kernel, &narrow) ? NARROW_FACTOR * BASE##_cost(plan, &narrow) : HUGE_VAL;  \
    }                                                                                                          \
    static int64_t NAME##_items(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)                      \
    {                                                                                                          \
        ctbc_kernel narrow;                                                                                    \
        return ctbc_kernel_narrowed(kernel, &narrow) ? BASE##_items(plan, &narrow) : 1;                        \
    }                                                                                                          \
    static void NAME##_run(const forward_run *run, float *scratch)                                             \
    {                                                                                                          \
        ctbc_kernel narrow;                                                                                    \
        ctbc_kernel_narrowed(run->kernel, &narrow); /* (the plan checked it) */                                \
        forward_run on_narrow = *run;                                                                          \
        on_narrow.kernel = &narrow;                                                                            \
        BASE##_run(&on_narrow, scratch);                                                                       \
    }

NARROW_IMPLEMENTATION(gemm_narrow, gemm)

/* ---- forward_gemm_bf16 --------------------------------------------------- */

/* forward_gemm on bfloat16 self and weight that the compute dtype keeps,
 * where the kernel has VDPBF16PS (the rule of forward_dot_bf16): the same
 * tiles and blocking over bfloat16 pairs along the input channels, two
 * products per float32 lane and instruction. self is copied as it is, with
 * its zero steps and, for an odd c_in, a zero channel that completes the
 * last pair; the weight is packed as pairs [panel][tap][pair][nr]. The
 * instruction flushes subnormals (ctbc_ukr_bf16_fn): outputs differ from
 * forward_gemm's only there. */
static bool bf16_pairs_apply(const ctbc_forward_problem *p, const ctbc_kernel *kernel)
{
    return kernel->ukr_bf16 && p->self.dtype == CTBC_BF16 && p->weight.dtype == CTBC_BF16 &&
           p->compute_dtype == CTBC_BF16 && !p->hf32;
}

static int64_t pairs(int64_t n) { return (n + 1) / 2; }

/* Pairs (4-byte elements) of the copy of self, of the packed weight and
 * of every thread's sums; false on overflow. */
static bool gemm_bf16_layout(const ctbc_forward_plan *plan, const ctbc_kernel *kernel, size_t *sequence,
                             size_t *panels, size_t *sums)
{
    const ctbc_forward_problem *p = &plan->problem;
    const size_t width = (size_t)pairs(p->c_in);
    const size_t rows = (size_t)((p->t + 2 * zero_steps(p)) * p->b + kernel->mr);
    const size_t columns = (size_t)round_up(p->c_out, kernel->nr);
    const gemm_blocking blocking = gemm_blocking_of(plan, kernel, true);
    return !__builtin_mul_overflow(rows, width, sequence) && !__builtin_mul_overflow(columns, (size_t)p->k, panels) &&
           !__builtin_mul_overflow(*panels, width, panels) &&
           !__builtin_mul_overflow((size_t)gemm_sums_floats(&blocking, kernel), (size_t)plan->threads, sums);
}

static size_t gemm_bf16_scratch(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    size_t sequence, panels, sums, total;
    if (!gemm_bf16_layout(plan, kernel, &sequence, &panels, &sums) ||
        __builtin_add_overflow(sequence, panels, &total) || __builtin_add_overflow(total, sums, &total))
        return SIZE_MAX;
    return total;
}

/* (its panels are always packed) */
static int64_t gemm_bf16_items(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    return blocking_items(plan, kernel, true);
}

/* forward_gemm's tiles at half the steps (each step of the pair tile at
 * the context's speed against the float32 tile, twice as fast on the Zen 4
 * this was fitted on), and a copy of self at half the bytes. (Its panels
 * are packed too, but the fit of forward_dot_bf16's cost against it left
 * that out.) */
static double gemm_bf16_cost(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    const ctbc_forward_problem *p = &plan->problem;
    const int64_t rows = gemm_rows(p);
    if (!bf16_pairs_apply(p, kernel))
        return HUGE_VAL;
    return (double)round_up(rows, kernel->mr) * (double)round_up(p->c_out, kernel->nr) * (double)p->k *
               (double)pairs(p->c_in) * (2.0 / plan->pair_tile_speedup) +
           copy_cost(p, p->t + 2 * zero_steps(p)) / 2.0;
}

static void ukr_bf16(const ctbc_kernel *kernel, const ctbc_ukr_args *args, const float *a, const float *b, float *c,
                     int64_t ldc)
{
    kernel->ukr_bf16(args, (const uint32_t *)(const void *)a, (const uint32_t *)(const void *)b, c, ldc);
}

static void gemm_bf16_run(const forward_run *run, float *scratch)
{
    const ctbc_forward_problem *p = run->p;
    const ctbc_kernel *kernel = run->kernel;
    const int64_t mr = kernel->mr, nr = kernel->nr, c_in = p->c_in, b_count = p->b, k_count = p->k;
    const int64_t width = pairs(c_in), zeros = zero_steps(p), steps = p->t + 2 * zeros;
    const int64_t *self_stride = p->self.stride, *weight_stride = p->weight.stride;
    const uint16_t *self = run->self, *weight = run->weight;
    size_t sequence_pairs = 0, panel_pairs = 0, sums = 0;
    gemm_bf16_layout(run->plan, kernel, &sequence_pairs, &panel_pairs, &sums); /* it fit when the plan was made */
    uint32_t *sequence = (uint32_t *)scratch, *panels = sequence + sequence_pairs;
    const int64_t panel_count = round_up(p->c_out, nr) / nr;

    /* self as bfloat16 rows of `width` pairs, with min(pad, K-1) zero steps
     * on either side and a zero tail the last tile may read. */
#pragma omp for schedule(static)
    for (int64_t r = 0; r < steps * b_count + mr; r++) {
        uint16_t *row = (uint16_t *)(sequence + r * width);
        const int64_t t = r / b_count - zeros, b = r % b_count;
        row[2 * width - 1] = 0; /* (the odd channel's partner, if any) */
        if (r >= steps * b_count || t < 0 || t >= p->t) {
            memset(row, 0, (size_t)width * sizeof(uint32_t));
            continue;
        }
        const uint16_t *src = self + t * self_stride[0] + b * self_stride[1];
        if (self_stride[2] == 1)
            memcpy(row, src, (size_t)c_in * sizeof *row);
        else
            for (int64_t c = 0; c < c_in; c++)
                row[c] = src[c * self_stride[2]];
    }
    /* weight in pairs of channels (2i low, 2i + 1 high), zero past c_out
     * and past c_in. */
#pragma omp for schedule(static)
    for (int64_t item = 0; item < panel_count * k_count; item++) {
        const int64_t panel = item / k_count, k = item % k_count;
        uint32_t *dst = panels + item * width * nr;
        const int64_t o0 = panel * nr, n = p->c_out - o0 < nr ? p->c_out - o0 : nr;
        const uint16_t *tap = weight + k * weight_stride[0] + o0 * weight_stride[2];
        for (int64_t i = 0; i < width; i++)
            for (int64_t j = 0; j < nr; j++) {
                const uint32_t low = j < n ? tap[2 * i * weight_stride[1] + j * weight_stride[2]] : 0;
                const uint32_t high = j < n && 2 * i + 1 < c_in
                                          ? tap[(2 * i + 1) * weight_stride[1] + j * weight_stride[2]] : 0;
                dst[i * nr + j] = low | high << 16;
            }
    }
    /* (implicit barrier: the tiles read both copies) */
    const gemm_operands ops = {.a = (const float *)(const void *)(sequence +
                                                                   (run->plan->t_lo - p->pad + zeros) * b_count * width),
                               .a_row = width,
                               .a_tap = b_count * width,
                               .width = width,
                               .w = (const float *)(const void *)panels,
                               .w_tap = width * nr,
                               .w_channel = nr,
                               .ukr = ukr_bf16};
    gemm_tiles(run, &ops, (float *)(void *)(panels + panel_pairs));
}

/* ---- forward_gemm_bf16_narrow ------------------------------------------- */

NARROW_IMPLEMENTATION(gemm_bf16_narrow, gemm_bf16)

/* ---- forward_gemm_positions --------------------------------------------- */

/* Columns of the channel-major copy: the zero-extended steps' positions
 * plus one tile's overhang. */
static int64_t position_columns(const ctbc_forward_problem *p, const ctbc_kernel *kernel)
{
    return (p->t + 2 * zero_steps(p)) * p->b + kernel->nr;
}

static size_t positions_scratch(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    const ctbc_forward_problem *p = &plan->problem;
    size_t sequence, panels, total;
    const size_t widened = widened_weight_floats(p);
    if (widened == SIZE_MAX || __builtin_mul_overflow((size_t)position_columns(p, kernel), (size_t)p->c_in, &sequence) ||
        __builtin_mul_overflow((size_t)round_up(p->c_out, kernel->mr), (size_t)p->k, &panels) ||
        __builtin_mul_overflow(panels, (size_t)p->c_in, &panels) || __builtin_add_overflow(sequence, panels, &total) ||
        __builtin_add_overflow(total, widened, &total))
        return SIZE_MAX;
    return total;
}

/* Its tiles read B a channel row apart for each reduction step, and its
 * copy spreads each row of self across the channel-major buffer: measured
 * on AVX2 (T15 B257 Ci832 K5 Co7 and four more shared shapes), each of its
 * tile multiply-adds and copied elements costs about POSITIONS_FACTOR of
 * forward_gemm's. */
#define POSITIONS_FACTOR 4.0

static double positions_cost(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    const ctbc_forward_problem *p = &plan->problem;
    const int64_t rows = gemm_rows(p);
    return POSITIONS_FACTOR * ((double)round_up(rows, kernel->nr) * (double)round_up(p->c_out, kernel->mr) *
                                   (double)p->k * (double)p->c_in +
                               copy_cost(p, p->t + 2 * zero_steps(p)));
}

static int64_t positions_items(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    const int64_t block_columns = plan->block_tiles * kernel->nr;
    return (gemm_rows(&plan->problem) + block_columns - 1) / block_columns *
           (round_up(plan->problem.c_out, kernel->mr) / kernel->mr);
}

/* Channels of one (step, batch) row of self loaded at a time before they
 * are spread across the channel-major copy. */
enum { POSITIONS_ROW = 256 };

static void positions_run(const forward_run *run, float *scratch)
{
    const ctbc_forward_problem *p = run->p;
    const ctbc_kernel *kernel = run->kernel;
    const int64_t mr = kernel->mr, nr = kernel->nr, c_in = p->c_in, b_count = p->b, k_count = p->k;
    const int64_t zeros = zero_steps(p), steps = p->t + 2 * zeros, columns = position_columns(p, kernel);
    float *sequence = scratch; /* [c_in][columns] */
    float *panels = scratch + columns * c_in;
    const int64_t panel_count = round_up(p->c_out, mr) / mr;
    const float_weight weight = weight_floats(run, panels + panel_count * mr * k_count * c_in);

    /* self, rounded and widened, channel-major, with min(pad, K-1) zero steps on
     * either side and a zero tail the last tile may read. */
#pragma omp for schedule(static)
    for (int64_t column = 0; column < columns; column++) { /* (the last nr: one tile's overhang) */
        const int64_t t = column / b_count - zeros, b = column % b_count;
        const bool inside = column < steps * b_count && t >= 0 && t < p->t;
        float row[POSITIONS_ROW];
        for (int64_t c0 = 0; c0 < c_in; c0 += POSITIONS_ROW) {
            const int64_t n = c_in - c0 < POSITIONS_ROW ? c_in - c0 : POSITIONS_ROW;
            if (inside)
                load_operands(run, row, run->self, p->self.dtype,
                              t * p->self.stride[0] + b * p->self.stride[1] + c0 * p->self.stride[2],
                              p->self.stride[2], n);
            for (int64_t c = 0; c < n; c++)
                sequence[(c0 + c) * columns + column] = inside ? row[c] : 0.0f;
        }
    }
    /* weight, rounded, in panels [panel][tap][c_in][mr], zero past c_out. */
#pragma omp for schedule(static)
    for (int64_t item = 0; item < panel_count * k_count; item++) {
        const int64_t panel = item / k_count, k = item % k_count;
        float *dst = panels + item * c_in * mr;
        const int64_t o0 = panel * mr, m = p->c_out - o0 < mr ? p->c_out - o0 : mr;
        for (int64_t c = 0; c < c_in; c++) {
            gather(dst + c * mr, weight.base + k * weight.tap + c * weight.channel + o0 * weight.column,
                   weight.column, m);
            memset(dst + c * mr + m, 0, (size_t)(mr - m) * sizeof *dst);
        }
    }
    /* (implicit barrier: the tiles read both copies) */

    const int64_t t_lo = run->plan->t_lo, positions = (run->plan->t_hi - t_lo) * b_count;
    const int64_t block_columns = run->plan->block_tiles * nr;
    const int64_t column_blocks = (positions + block_columns - 1) / block_columns;
    /* Output step t reads sequence steps t - pad + zeros + k, k < K. */
    const float *first_column = sequence + (t_lo - p->pad + zeros) * b_count;
    const int64_t taps_per_chunk = chunk_taps(run->plan, c_in), channels_per_chunk = chunk_channels(run->plan, c_in);
#pragma omp for schedule(static)
    for (int64_t item = 0; item < column_blocks * panel_count; item++) {
        const int64_t block = item / panel_count, panel = item % panel_count;
        const int64_t column_begin = block * block_columns;
        const int64_t column_end = column_begin + block_columns < positions ? column_begin + block_columns : positions;
        const float *weight_panel = panels + panel * k_count * c_in * mr;
        float sums[CTBC_MR_MAX * FORWARD_MAX_BLOCK_TILES * CTBC_NR_MAX]; /* [mr][block_columns] */
        bool first = true;
        for (int64_t k0 = 0; k0 < k_count; k0 += taps_per_chunk)
            for (int64_t c0 = 0; c0 < c_in; c0 += channels_per_chunk) {
                const int64_t taps = k_count - k0 < taps_per_chunk ? k_count - k0 : taps_per_chunk;
                const int64_t channels = c_in - c0 < channels_per_chunk ? c_in - c0 : channels_per_chunk;
                const ctbc_ukr_args args = {.n_outer = taps,
                                            .n_inner = channels,
                                            .a_row = 1,
                                            .a_inner = mr,
                                            .a_outer = c_in * mr,
                                            .b_inner = columns,
                                            .b_outer = b_count,
                                            .overwrite = first};
                const float *w = weight_panel + (k0 * c_in + c0) * mr;
                const float *x = first_column + c0 * columns + k0 * b_count;
                for (int64_t column0 = column_begin; column0 < column_end; column0 += nr)
                    kernel->ukr(&args, w, x + column0, sums + (column0 - column_begin), block_columns);
                first = false;
            }
        const int64_t o0 = panel * mr, m = p->c_out - o0 < mr ? p->c_out - o0 : mr;
        for (int64_t column = column_begin; column < column_end; column++) {
            const int64_t t = t_lo + column / b_count, b = column % b_count;
            store_outputs(run, out_index(p, t, b, o0), p->out.stride[2], sums + (column - column_begin),
                          block_columns, run->bias_rounded + o0, m);
        }
    }
}

/* ---- forward_dot -------------------------------------------------------- */

/* Few output channels: each output element is a dot product over (tap,
 * input channel), read with the input channel contiguous on both sides:
 * self in place when it is float32 that nothing rounds and its channels are
 * adjacent (no copy at all), else from a float32 copy [t][b][c_in]; weight
 * packed as [c_out][k][c_in]. Each output step sums only its taps inside
 * self and adds what its padding taps give (0, or NaN for a non-finite
 * weight: the per-tap padding terms). */
enum { DOT_BLOCK_ROWS = 64, DOT_MAX_COLUMNS = 16 };

static bool dot_reads_self_in_place(const ctbc_forward_problem *p)
{
    return p->self.dtype == CTBC_F32 && p->compute_dtype == CTBC_F32 && !p->hf32 &&
           (p->self.stride[2] == 1 || p->c_in == 1);
}

/* Elements of a dot implementation's scratch parts: the copy of self
 * (none when self is read in place), the packed weight and the padding
 * terms; false on overflow. */
static bool dot_scratch_elements(const ctbc_forward_problem *p, bool self_in_place, size_t *copy, size_t *packed,
                                 size_t *terms)
{
    *copy = 0;
    return !((!self_in_place && (__builtin_mul_overflow((size_t)p->t, (size_t)p->b, copy) ||
                                 __builtin_mul_overflow(*copy, (size_t)p->c_in, copy))) ||
             __builtin_mul_overflow((size_t)p->c_out, (size_t)p->k, packed) ||
             __builtin_mul_overflow(*packed, (size_t)p->c_in, packed) ||
             __builtin_mul_overflow((size_t)p->k, (size_t)p->c_out, terms));
}

static size_t dot_scratch(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    const ctbc_forward_problem *p = &plan->problem;
    (void)kernel;
    size_t copy, packed, terms, total;
    const size_t widened = widened_weight_floats(p);
    if (widened == SIZE_MAX || !dot_scratch_elements(p, dot_reads_self_in_place(p), &copy, &packed, &terms) ||
        __builtin_add_overflow(copy, packed, &total) || __builtin_add_overflow(total, terms, &total) ||
        __builtin_add_overflow(total, widened, &total))
        return SIZE_MAX;
    return total;
}

/* The dot kernel keeps no tile padding, but sums without FMAs and reads
 * both operands as vectors: counted at DOT_FACTOR tile multiply-adds each. */
#define DOT_FACTOR 3.0

static double dot_products_cost(const ctbc_forward_problem *p, int64_t rows)
{
    return (double)rows * (double)p->c_out * (double)p->k * (double)p->c_in * DOT_FACTOR;
}

static double dot_cost(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    const ctbc_forward_problem *p = &plan->problem;
    const int64_t rows = gemm_rows(p);
    (void)kernel;
    if (p->c_out > DOT_MAX_COLUMNS)
        return HUGE_VAL; /* many columns: the tiled GEMMs do better */
    const double copy = self_in_place_if_contiguous(p) ? 0.0 : copy_cost(p, p->t);
    return dot_products_cost(p, rows) + copy;
}

/* About dot_blocks' count (which also depends on the strides, and the
 * choice must not). */
static int64_t dot_items(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    (void)kernel;
    return (gemm_rows(&plan->problem) + DOT_BLOCK_ROWS - 1) / DOT_BLOCK_ROWS;
}

/* What the shared block loop of the dot implementations reads: self (in
 * place or a copy) with its step and row strides and the weight packed as
 * [c_out][k][c_in], in elements of element_bytes; the padding terms
 * [k][c_out]; and the kernel call for that element type. */
typedef struct {
    const void *self, *packed;
    int64_t step_stride, row_stride, element_bytes;
    const float *terms;
    void (*dot)(const ctbc_kernel *kernel, const ctbc_dot_args *args, const void *a, const void *b, float *c,
                int64_t ldc);
} dot_operands;

/* The output rows of the plan's steps, computed by ops->dot in blocks. */
static void dot_blocks(const forward_run *run, const dot_operands *ops)
{
    const ctbc_forward_problem *p = run->p;
    const int64_t c_in = p->c_in, b_count = p->b, k_count = p->k, c_out = p->c_out;
    const int64_t step_stride = ops->step_stride, row_stride = ops->row_stride;
    const char *self = ops->self, *packed = ops->packed;
    const float *terms = ops->terms;
    /* Work items: blocks of up to DOT_BLOCK_ROWS output rows (t, b) that
     * read the same taps. Each step is a run of rows of its own, its blocks
     * taken batch-block-major, so that a thread's next item reads the rows
     * of self its last one read, shifted by one step (from cache, where
     * self is larger than it). With fewer batch rows than a block, the
     * steps whose taps all read self form one run instead, in (t, b) order,
     * when its rows are evenly spaced (the copy, or self with stride[0] =
     * B stride[1]), so that a block spans steps and the kernel's
     * CTBC_DOT_ROWS rows fill even with one batch row. Each output's sum
     * does not depend on the rows computed beside it. */
    const int64_t t_lo = run->plan->t_lo, t_hi = run->plan->t_hi;
    int64_t full_lo = p->pad > t_lo ? p->pad : t_lo, full_hi = p->t + p->pad - k_count + 1;
    full_hi = full_hi < t_hi ? full_hi : t_hi;
    if (full_hi <= full_lo || step_stride != b_count * row_stride || b_count >= DOT_BLOCK_ROWS)
        full_lo = full_hi = t_hi; /* no shared run */
    const int64_t step_blocks = (b_count + DOT_BLOCK_ROWS - 1) / DOT_BLOCK_ROWS;
    const int64_t own_steps = t_hi - t_lo - (full_hi - full_lo), own_items = own_steps * step_blocks;
    const int64_t shared_rows = (full_hi - full_lo) * b_count;
    const int64_t items = own_items + (shared_rows + DOT_BLOCK_ROWS - 1) / DOT_BLOCK_ROWS;
#pragma omp for schedule(static)
    for (int64_t item = 0; item < items; item++) {
        /* the item's rows: flattened (t, b) indices [row, row_end) of a
         * run [run_begin, run_end) */
        int64_t row, row_end, run_begin, run_end;
        if (item < own_items) {
            const int64_t step = item % own_steps;
            const int64_t t = t_lo + step < full_lo ? t_lo + step : t_lo + step - full_lo + full_hi;
            run_begin = t * b_count, run_end = run_begin + b_count;
            row = run_begin + item / own_steps * DOT_BLOCK_ROWS;
        } else {
            run_begin = full_lo * b_count, run_end = run_begin + shared_rows;
            row = run_begin + (item - own_items) * DOT_BLOCK_ROWS;
        }
        row_end = row + DOT_BLOCK_ROWS < run_end ? row + DOT_BLOCK_ROWS : run_end;
        /* the taps of the run's steps that read self: 0 <= t + k - pad < T */
        const int64_t t_run = run_begin / b_count;
        const int64_t k_lo = p->pad - t_run > 0 ? p->pad - t_run : 0;
        const int64_t k_hi = p->t + p->pad - t_run < k_count ? p->t + p->pad - t_run : k_count;
        float padding[DOT_MAX_COLUMNS];
        for (int64_t o = 0; o < c_out; o++) {
            float sum = 0.0f;
            for (int64_t k = 0; k < k_count; k++)
                if (k < k_lo || k >= k_hi)
                    sum += terms[k * c_out + o];
            padding[o] = sum;
        }
        /* row r of the run reads self at step r / B + k_lo - pad, batch r % B */
        const int64_t first = (t_run + k_lo - p->pad) * step_stride;
        for (; row < row_end; row += CTBC_DOT_ROWS) {
            /* fewer than CTBC_DOT_ROWS rows left: the group is shifted back
             * to end at the last (its first rows computed twice, the same
             * bits), or, in a run that short, the kernel reads one row
             * again (a_row 0) rather than past self */
            int64_t group = row, rows = CTBC_DOT_ROWS;
            if (row_end - row < CTBC_DOT_ROWS) {
                if (run_end - run_begin >= CTBC_DOT_ROWS)
                    group = row_end - CTBC_DOT_ROWS > run_begin ? row_end - CTBC_DOT_ROWS : run_begin;
                else
                    rows = 1;
            }
            const ctbc_dot_args args = {.n = c_out,
                                        .n_outer = k_hi - k_lo,
                                        .n_inner = c_in,
                                        .a_row = rows == 1 ? 0 : row_stride,
                                        .a_outer = step_stride,
                                        .b_col = k_count * c_in,
                                        .b_outer = c_in};
            float sums[CTBC_DOT_ROWS * DOT_MAX_COLUMNS];
            ops->dot(run->kernel, &args, self + (first + (group - run_begin) * row_stride) * ops->element_bytes,
                     packed + k_lo * c_in * ops->element_bytes, sums, c_out);
            const int64_t done_to = rows == 1 ? row + 1 : group + CTBC_DOT_ROWS;
            for (int64_t r = row; r < done_to; r++) {
                float with_padding[DOT_MAX_COLUMNS];
                for (int64_t o = 0; o < c_out; o++)
                    with_padding[o] = sums[(r - group) * c_out + o] + padding[o];
                store_outputs(run, out_index(p, r / b_count, r % b_count, 0), p->out.stride[2], with_padding, 1,
                              run->bias_rounded, c_out);
            }
            if (rows == 1)
                row += 1 - CTBC_DOT_ROWS; /* one row done */
        }
    }
}

static void dot_f32(const ctbc_kernel *kernel, const ctbc_dot_args *args, const void *a, const void *b, float *c,
                    int64_t ldc)
{
    kernel->dot(args, a, b, c, ldc);
}

static void dot_run(const forward_run *run, float *scratch)
{
    const ctbc_forward_problem *p = run->p;
    const int64_t c_in = p->c_in, b_count = p->b, k_count = p->k, c_out = p->c_out;
    const bool in_place = dot_reads_self_in_place(p);
    float *packed = scratch;
    float *terms = packed + c_out * k_count * c_in; /* [k][c_out] */
    float *copy = terms + k_count * c_out;
    const float_weight weight = weight_floats(run, copy + (in_place ? 0 : p->t * b_count * c_in));
    dot_operands ops = {.self = run->self, .packed = packed, .step_stride = p->self.stride[0],
                        .row_stride = p->self.stride[1], .element_bytes = (int64_t)sizeof(float), .terms = terms,
                        .dot = dot_f32};

    if (!in_place) {
#pragma omp for schedule(static)
        for (int64_t r = 0; r < p->t * b_count; r++)
            load_operands(run, copy + r * c_in, run->self, p->self.dtype,
                          r / b_count * p->self.stride[0] + r % b_count * p->self.stride[1], p->self.stride[2], c_in);
        ops.self = copy, ops.step_stride = b_count * c_in, ops.row_stride = c_in;
    }
#pragma omp for schedule(static)
    for (int64_t item = 0; item < c_out * k_count; item++) {
        const int64_t o = item / k_count, k = item % k_count;
        float *w = packed + item * c_in;
        gather(w, weight.base + k * weight.tap + o * weight.column, weight.channel, c_in);
        terms[k * c_out + o] = zero_products_f32(w, c_in);
    }
    /* (implicit barrier: the dots read both) */
    dot_blocks(run, &ops);
}

/* ---- forward_dot_bf16 --------------------------------------------------- */

/* forward_dot on bfloat16 self and weight that the compute dtype keeps
 * (every cubeMathType but USE_FP16), where the kernel has VDPBF16PS: the
 * dot products read both as they are, two products per float32 lane, with
 * no widened copy of self. The instruction flushes subnormals, as stated
 * at ctbc_dot_bf16_fn; outputs differ from forward_dot's only there and in
 * the order of the sum. self is read in place when its channels are
 * adjacent, else from a bfloat16 copy [t][b][c_in]; the weight is packed
 * as bfloat16 [c_out][k][c_in]. */
static bool dot_bf16_applies(const ctbc_forward_problem *p, const ctbc_kernel *kernel)
{
    return bf16_pairs_apply(p, kernel) && kernel->dot_bf16 && p->c_out <= DOT_MAX_COLUMNS;
}

static bool dot_bf16_reads_self_in_place(const ctbc_forward_problem *p)
{
    return p->self.stride[2] == 1 || p->c_in == 1;
}

/* bfloat16 values as floats of scratch, rounded up. */
static size_t halves(size_t n) { return n / 2 + n % 2; }

static size_t dot_bf16_scratch(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    const ctbc_forward_problem *p = &plan->problem;
    (void)kernel;
    size_t copy, packed, terms, total;
    if (!dot_scratch_elements(p, dot_bf16_reads_self_in_place(p), &copy, &packed, &terms) ||
        __builtin_add_overflow(terms, halves(packed), &total) || __builtin_add_overflow(total, halves(copy), &total))
        return SIZE_MAX;
    return total;
}

/* Half of forward_dot's: two products per lane and instruction, self
 * never copied where it is contiguous; but where forward_dot counts its
 * products against float32 tiles, these are counted against the bfloat16
 * pair tiles, which do twice as many per instruction too. Fitted on a Zen 4
 * (AVX512_BF16, 2 threads) over the 45 bfloat16 shapes of CANN's system
 * tests with at most 32 output channels, each implementation forced: the
 * narrow pair tile took 0.4-0.9 of this one's time from 9 to 16 channels
 * (T218 B17 Ci656 K124 Co15 11.0 ms against 27.3), this one 0.1-0.5 of
 * the tiles' at 1 channel, and they were within 20% either way at 7-8
 * and at 17-32. */
static double dot_bf16_cost(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    const ctbc_forward_problem *p = &plan->problem;
    const int64_t rows = gemm_rows(p);
    if (!dot_bf16_applies(p, kernel))
        return HUGE_VAL;
    return dot_products_cost(p, rows) / 2.0;
}

static void dot_bf16(const ctbc_kernel *kernel, const ctbc_dot_args *args, const void *a, const void *b, float *c,
                     int64_t ldc)
{
    kernel->dot_bf16(args, a, b, c, ldc);
}

static void dot_bf16_run(const forward_run *run, float *scratch)
{
    const ctbc_forward_problem *p = run->p;
    const int64_t c_in = p->c_in, b_count = p->b, k_count = p->k, c_out = p->c_out;
    const int64_t *self_stride = p->self.stride, *weight_stride = p->weight.stride;
    const uint16_t *self = run->self, *weight = run->weight;
    float *terms = scratch; /* [k][c_out] */
    uint16_t *packed = (uint16_t *)(terms + k_count * c_out);
    uint16_t *copy = packed + c_out * k_count * c_in;
    dot_operands ops = {.self = self, .packed = packed, .step_stride = self_stride[0],
                        .row_stride = self_stride[1], .element_bytes = (int64_t)sizeof(uint16_t), .terms = terms,
                        .dot = dot_bf16};

    if (!dot_bf16_reads_self_in_place(p)) {
#pragma omp for schedule(static)
        for (int64_t r = 0; r < p->t * b_count; r++)
            for (int64_t c = 0; c < c_in; c++)
                copy[r * c_in + c] = self[r / b_count * self_stride[0] + r % b_count * self_stride[1] + c * self_stride[2]];
        ops.self = copy, ops.step_stride = b_count * c_in, ops.row_stride = c_in;
    }
#pragma omp for schedule(static)
    for (int64_t item = 0; item < c_out * k_count; item++) {
        const int64_t o = item / k_count, k = item % k_count;
        uint16_t *w = packed + item * c_in;
        for (int64_t c = 0; c < c_in; c++)
            w[c] = weight[k * weight_stride[0] + c * weight_stride[1] + o * weight_stride[2]];
        terms[k * c_out + o] = zero_products_bf16(w, c_in);
    }
    /* (implicit barrier: the dots read both) */
    dot_blocks(run, &ops);
}

/* ---- forward_gemm_tail ---------------------------------------------------- */

/* A few output channels past a multiple of the tile's width would take a
 * whole panel of tiles: forward_gemm_tail computes the multiple with
 * forward_gemm's tiles (the narrow ones where the kernel has them) and the
 * TAIL_MAX_COLUMNS or fewer left over as forward_dot's dot products, one
 * after the other in the same team and scratch. Each output is one
 * implementation's sum, the same bits at any thread count. On a Zen 4,
 * float32, medians of 7, against forward_gemm_narrow: T1 B9 Ci1568 K1
 * Co17 0.019 ms against 0.024, T17 B7 Ci480 K17 Co17 0.047 against
 * 0.055-0.116, T16 B256 Ci1456 K13 Co17 4.5 ms against 6.7; T32 B7 Ci624
 * K7 Co17 0.316 against 0.290. */
enum { TAIL_MAX_COLUMNS = 4 };

/* The two parts: the GEMM on output channels [0, first) with the head
 * tile (the narrow view where the kernel has one), the dot products on
 * [first, c_out); each plan is the whole one on its channels alone (the
 * problem's strides stay: the run's pointers move). */
typedef struct {
    ctbc_kernel narrow;
    const ctbc_kernel *head; /* &narrow, or the kernel itself */
    int64_t first;
    ctbc_forward_plan head_plan, tail_plan;
} tail_parts;

/* false where it does not apply: no 1 to TAIL_MAX_COLUMNS channels past
 * a multiple of the head tile's width, or a self other than float32 read
 * as it is (other dtypes would be widened by both parts: float16 T17 B7
 * Ci480 K17 Co17 took 0.145 ms against forward_gemm_narrow's 0.085). */
static bool tail_parts_of(const ctbc_forward_plan *plan, const ctbc_kernel *kernel, tail_parts *parts)
{
    const ctbc_forward_problem *p = &plan->problem;
    parts->head = ctbc_kernel_narrowed(kernel, &parts->narrow) ? &parts->narrow : kernel;
    const int64_t tail = p->c_out > parts->head->nr ? p->c_out % parts->head->nr : 0;
    if (tail < 1 || tail > TAIL_MAX_COLUMNS || !unrounded_float32(p, p->self.dtype))
        return false;
    parts->first = p->c_out - tail;
    parts->head_plan = *plan, parts->tail_plan = *plan;
    parts->head_plan.problem.c_out = parts->first, parts->tail_plan.problem.c_out = tail;
    return true;
}

static size_t gemm_tail_scratch(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    tail_parts parts;
    if (!tail_parts_of(plan, kernel, &parts))
        return SIZE_MAX;
    const size_t gemm = gemm_scratch(&parts.head_plan, parts.head), dot = dot_scratch(&parts.tail_plan, kernel);
    return gemm > dot ? gemm : dot; /* (one after the other) */
}

static double gemm_tail_cost(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    tail_parts parts;
    if (!tail_parts_of(plan, kernel, &parts))
        return HUGE_VAL;
    return (parts.head == kernel ? 1.0 : NARROW_FACTOR) * gemm_cost(&parts.head_plan, parts.head) +
           dot_cost(&parts.tail_plan, kernel);
}

static int64_t gemm_tail_items(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    tail_parts parts;
    return tail_parts_of(plan, kernel, &parts) ? gemm_items(&parts.head_plan, parts.head) : 1;
}

static void gemm_tail_run(const forward_run *run, float *scratch)
{
    const ctbc_forward_problem *p = run->p;
    tail_parts parts;
    tail_parts_of(run->plan, run->kernel, &parts); /* (the plan checked it) */
    forward_run part = *run;
    part.plan = &parts.head_plan, part.p = &parts.head_plan.problem, part.kernel = parts.head;
    gemm_run(&part, scratch); /* (its tiles end in a barrier: the dots may take the scratch) */
    const int64_t first = parts.first;
    part.plan = &parts.tail_plan, part.p = &parts.tail_plan.problem, part.kernel = run->kernel;
    part.weight = ctbc_element_ptr((void *)run->weight, p->weight.dtype, first * p->weight.stride[2]); /* (read only) */
    part.out = ctbc_element_ptr(run->out, p->out.dtype, first * p->out.stride[2]);
    part.bias_rounded = run->bias_rounded + first, part.padding_term = run->padding_term + first;
    dot_run(&part, scratch);
}

/* ---- forward_reference ---------------------------------------------------- */

static size_t reference_scratch(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    (void)plan, (void)kernel;
    return 0;
}

/* Applies always; chosen only when forced (it is the slowest). */
static double reference_cost(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    (void)plan, (void)kernel;
    return DBL_MAX;
}

static int64_t reference_items(const ctbc_forward_plan *plan, const ctbc_kernel *kernel)
{
    (void)kernel;
    return plan->t_hi - plan->t_lo;
}

static void reference_run(const forward_run *run, float *scratch)
{
    (void)scratch;
    const ctbc_forward_problem *p = run->p;
#pragma omp for schedule(static)
    for (int64_t t = run->plan->t_lo; t < run->plan->t_hi; t++)
        for (int64_t b = 0; b < p->b; b++)
            for (int64_t o = 0; o < p->c_out; o++) {
                float sum = 0.0f;
                for (int64_t k = 0; k < p->k; k++) {
                    /* a tap in the padding multiplies a zero, as in the formula */
                    const int64_t u = t + k - p->pad;
                    const bool inside = u >= 0 && u < p->t;
                    for (int64_t c = 0; c < p->c_in; c++) {
                        const float x = inside ? operand(p, run->self, p->self.dtype,
                                                         u * p->self.stride[0] + b * p->self.stride[1] +
                                                             c * p->self.stride[2])
                                               : 0.0f;
                        sum += x * operand(p, run->weight, p->weight.dtype,
                                           k * p->weight.stride[0] + c * p->weight.stride[1] + o * p->weight.stride[2]);
                    }
                }
                store(p, run->out, out_index(p, t, b, o), sum + run->bias_rounded[o]);
            }
}

static const forward_implementation IMPLEMENTATIONS[] = {
    {"forward_gemm", gemm_scratch, gemm_cost, gemm_items, gemm_run},
    {"forward_gemm_narrow", gemm_narrow_scratch, gemm_narrow_cost, gemm_narrow_items, gemm_narrow_run},
    {"forward_gemm_bf16", gemm_bf16_scratch, gemm_bf16_cost, gemm_bf16_items, gemm_bf16_run},
    {"forward_gemm_bf16_narrow", gemm_bf16_narrow_scratch, gemm_bf16_narrow_cost, gemm_bf16_narrow_items,
     gemm_bf16_narrow_run},
    {"forward_gemm_positions", positions_scratch, positions_cost, positions_items, positions_run},
    {"forward_dot", dot_scratch, dot_cost, dot_items, dot_run},
    {"forward_dot_bf16", dot_bf16_scratch, dot_bf16_cost, dot_items, dot_bf16_run},
    {"forward_gemm_tail", gemm_tail_scratch, gemm_tail_cost, gemm_tail_items, gemm_tail_run},
    {"forward_reference", reference_scratch, reference_cost, reference_items, reference_run},
};
enum { IMPLEMENTATION_COUNT = sizeof IMPLEMENTATIONS / sizeof *IMPLEMENTATIONS };

/* ---- plan and execute ----------------------------------------------------- */

static const char *implementation_names[IMPLEMENTATION_COUNT + 1]; /* NULL-terminated */
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void name_implementations(void)
{
    for (int i = 0; i < IMPLEMENTATION_COUNT; i++)
        implementation_names[i] = IMPLEMENTATIONS[i].name;
}

const char *const *ctbc_forward_implementation_names(void)
{
    pthread_once(&names_once, name_implementations);
    return implementation_names;
}

void ctbc_forward_plan_init(ctbc_forward_plan *plan, const ctbc_forward_problem *problem)
{
    memset(plan, 0, sizeof *plan);
    plan->problem = *problem;
    plan->isa = (int)ctbc_isa_select();
    self_steps(problem, &plan->t_lo, &plan->t_hi);
    ctbc_context context;
    ctbc_context_for_isa((ctbc_isa)plan->isa, &context);
    const ctbc_kernel *kernel = context.kernel;
    plan->block_tiles = context.mc_tiles < FORWARD_MAX_BLOCK_TILES ? context.mc_tiles : FORWARD_MAX_BLOCK_TILES;
    plan->chunk = context.kc;
    plan->panel_group = context.nc_tiles;
    plan->unpacked_reuse_tiles = context.unpacked_reuse_tiles;
    plan->pair_tile_speedup = context.pair_tile_speedup;
    /* The cheapest per thread (its cost over what the threads its work
     * items keep busy add up to: one block of rows leaves the others
     * idle), or the forced one where it applies; reckoned for a team of
     * CHOICE_TEAM whatever the real one, since two implementations sum in
     * different orders and the bits must not depend on the thread count. */
    plan->threads = CHOICE_TEAM;
    plan->parallel = true; /* (for the work items while choosing) */
    const int forced = ctbc_forward_forced();
    double best = HUGE_VAL, best_per_thread = HUGE_VAL;
    int64_t best_items = 1;
    for (int i = 0; i < IMPLEMENTATION_COUNT; i++) {
        const double cost = IMPLEMENTATIONS[i].cost(plan, kernel);
        const int64_t items = IMPLEMENTATIONS[i].items(plan, kernel);
        const int64_t busy = items < 1 ? 1 : items < plan->threads ? items : plan->threads;
        const double per_thread = cost / (1.0 + context.team_efficiency * (double)(busy - 1));
        if (per_thread < best_per_thread || (i == forced && cost < HUGE_VAL)) {
            plan->implementation = i, best = cost, best_per_thread = per_thread, best_items = items;
            if (i == forced)
                break;
        }
    }
    /* The work a team would share: the tile multiply-adds and copies the
     * cost counts (padding of the tiles included), or the products for
     * the reference, whose cost is not a count. One work item runs on one
     * thread, its copies included: split between two, they left the item
     * reading the other core's writes (a Zen 4, forward_gemm_bf16_narrow on
     * T8 B32 Ci1472 K5 Co15: 0.22 ms on one thread, 0.44 on two). */
    plan->threads = omp_get_max_threads() > 1 ? omp_get_max_threads() : 1;
    const double products = (double)problem->t_out * (double)problem->b * (double)problem->c_in *
                            (double)problem->c_out * (double)problem->k;
    plan->parallel = best_items > 1 && (best < DBL_MAX ? best : products) >= context.team_min_work;

    size_t floats = IMPLEMENTATIONS[plan->implementation].scratch_floats(plan, kernel), bytes;
    if (floats == SIZE_MAX || __builtin_add_overflow(floats, 2 * (size_t)problem->c_out, &floats) ||
        __builtin_mul_overflow(floats, sizeof(float), &bytes) || __builtin_add_overflow(bytes, (size_t)WS_ALIGN, &bytes))
        bytes = SIZE_MAX;
    plan->workspace_bytes = bytes;
}

const char *ctbc_forward_implementation_name(const ctbc_forward_plan *plan)
{
    return IMPLEMENTATIONS[plan->implementation].name;
}

static void run_all(const forward_run *run, float *scratch)
{
    const ctbc_forward_plan *plan = run->plan;
    IMPLEMENTATIONS[plan->implementation].run(run, scratch);
    padding_only_steps(run, 0, plan->t_lo);
    padding_only_steps(run, plan->t_hi, plan->problem.t_out);
}

/* Each output channel's padding share (ZERO_PRODUCTS) over its weights in
 * (tap, channel) order, as the cube multiplies them (rounding can make a
 * finite weight Inf). Walked along the weight's rows, output channels
 * innermost; float32 weights read as they are are first checked in one
 * pass, which finds nothing to do for finite weights. */
static void padding_terms(const ctbc_forward_problem *p, const void *weight, float *term)
{
    const int64_t *stride = p->weight.stride;
    for (int64_t o = 0; o < p->c_out; o++)
        term[o] = 0.0f;
    if (unrounded_float32(p, p->weight.dtype)) {
        unsigned any = 0;
        for (int64_t k = 0; k < p->k; k++)
            for (int64_t c = 0; c < p->c_in; c++) {
                const float *row = (const float *)weight + k * stride[0] + c * stride[1];
                for (int64_t o = 0; o < p->c_out; o++)
                    any |= !finite_f32(row[o * stride[2]]);
            }
        if (!any)
            return;
    }
    for (int64_t k = 0; k < p->k; k++)
        for (int64_t c = 0; c < p->c_in; c++)
            for (int64_t o = 0; o < p->c_out; o++) {
                const float v = operand(p, weight, p->weight.dtype, k * stride[0] + c * stride[1] + o * stride[2]);
                if (!finite_f32(v) && term[o] == 0.0f) /* (a NaN share stays) */
                    term[o] = 0.0f * v;
            }
}

void ctbc_forward_execute(const ctbc_forward_plan *plan, const void *self, const void *weight, const void *bias,
                          void *out, void *workspace)
{
    const ctbc_forward_problem *p = &plan->problem;
    if (p->t_out == 0 || p->b == 0 || p->c_out == 0)
        return; /* out has no elements */
    if (p->t == 0 || p->c_in == 0) {
        copy_bias(p, bias, out);
        return;
    }
    float *base = (float *)(((uintptr_t)workspace + (WS_ALIGN - 1)) & ~(uintptr_t)(WS_ALIGN - 1));
    forward_run run = {plan, p, ctbc_kernel_for_isa((ctbc_isa)plan->isa), self, weight, bias, out, base,
                       base + p->c_out};
    for (int64_t o = 0; o < p->c_out; o++)
        base[o] = round_to(load(bias, p->bias.dtype, o * p->bias.stride[0]), p->bias_dtype);
    if (plan->t_lo > 0 || plan->t_hi < p->t_out)
        padding_terms(p, weight, run.padding_term);
    float *scratch = base + 2 * p->c_out;
    if (!plan->parallel || plan->threads < 2 || !ctbc_may_start_team()) {
        if (omp_in_parallel()) {
            /* Called by a thread of the caller's own team: an orphaned `omp
             * for` would bind to that team and share our loops with threads
             * that are running other calls. A team of one of our own. */
#pragma omp parallel num_threads(1)
            run_all(&run, scratch);
            return;
        }
        /* orphaned `omp for`s run on this thread alone */
        run_all(&run, scratch);
        return;
    }
#pragma omp parallel num_threads(plan->threads)
    run_all(&run, scratch);
}
