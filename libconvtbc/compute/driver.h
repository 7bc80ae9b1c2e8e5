/*
 * Internal interface between the entry points (conv_tbc_compute.c), the
 * blocking choice (blocking.c) and the three gradient drivers.
 *
 * Work is cut into independent output tiles; each tile is computed start to
 * finish by one thread with blocking fixed by the plan, so which thread runs
 * it never changes a bit of the result.
 */
#ifndef CONVTBC_COMPUTE_DRIVER_H
#define CONVTBC_COMPUTE_DRIVER_H

#include <math.h>

#include "compute/conv_tbc_compute.h"
#include "compute/cpu_features.h"
#include "compute/pack.h"

/* The 8-lane float32 dot kernel's cost per multiply-add against the tile's
 * and the channels per reread of its rows (grad_input_dot.c, fitted on a
 * Zen 4): a context's dot_cost and dot_reread_channels where the kernel's
 * dot is that one, and the base of the pair dot's and gi_dot_f16's. */
#define CTBC_DOT8_COST 1.4
#define CTBC_DOT8_REREAD_CHANNELS 24.0

/* What phase 1 sizes blocks from: the ISA's micro-kernel and its cache
 * blocking, derived once from the CPU's cache sizes (context.c; BLIS's
 * context: the framework reads sizes from here, never from the ISA's
 * name). */
typedef struct {
    ctbc_isa isa;
    const ctbc_kernel *kernel;
    int64_t mc_tiles;      /* mr-side cache block, in micro-tiles */
    int64_t nc_tiles;      /* nr-side cache block, in micro-tiles */
    int64_t kc;            /* reduction steps per packed block */
    int64_t budget_floats; /* per-thread scratch budget unit */
    /* Most micro-tiles that may read one operand panel unpacked (in place,
     * rows a tensor row apart) before packing it pays: unpacked, a panel's
     * rows share few cache sets and leave L1 between the tiles reading it. */
    int64_t unpacked_reuse_tiles;
    /* What each thread past the first adds to a team's speed, as a
     * fraction of one thread's: the threads share the packed panels across
     * cores and wait for the slowest item. */
    double team_efficiency;
    /* Tile multiply-adds (the plan's cost) below which a team of threads
     * costs more to start and join than it saves. */
    double team_min_work;
    /* The backward op's: it starts a team from this many multiply-adds (of
     * both gradients), or from this many elements of its operands (of
     * input, grad_input, grad_output, weight and grad_weight), whichever
     * comes first: a call that streams a large input and does little with
     * it is as long as one of many more multiply-adds. */
    double backward_team_min_work;
    double backward_team_min_elements;
    /* Fewest tiles a gradient is cut into where each still holds
     * balance_min_work multiply-adds (blocking.c, split_for_balance): a
     * team claims tiles one at a time, and the last of a few big ones runs
     * alone; smaller tiles pay their packing more times than they save. */
    int64_t balance_tiles;
    double balance_min_work;
    /* Cost of the narrow tile's multiply-add (ctbc_context_narrow) against
     * the wide one's at equal fill, for each gradient's implementations on
     * it (CTBC_NARROW_IMPL's COST). */
    double narrow_gi_tile_cost, narrow_gw_tile_cost;
    /* Multiply-adds per second of the bfloat16 pair tile (ukr_bf16)
     * against the float32 one (ukr) on this CPU: each VDPBF16PS does twice
     * an FMA's products, but how many issue per cycle, and how long each
     * takes, depends on the core (context.c). */
    double pair_tile_speedup;
    /* The float32 dot kernel's cost per multiply-add against the tile's,
     * the channels of a problem per extra read of its operands (the
     * kernel's rows are read again for every few channels), and the
     * elements of a partial chunk of the reduction computed whole (0: its
     * partial chunk is summed apart; gi_dot's cost). */
    double dot_cost;
    double dot_reread_channels;
    int64_t dot_chunk;
    /* The grad_output one time step's rows of gi_dot read over their taps
     * that the next steps' rows still find in L2 (grad_input_dot.c,
     * runs_cost). */
    int64_t dot_window_bytes;
    /* The same for the pair dot (dot_bf16 against dot), on whole problems,
     * where it reads bfloat16 as it lies and the float32 dot a widened copy. */
    double pair_dot_speedup;
    /* The same for the AMX tile (ukr_amx) against ukr, on long reductions;
     * 0 where the entry has none. */
    double amx_tile_speedup;
    /* What one ukr_amx call costs besides its reduction, in its steps of
     * CTBC_AMX_PAIRS pairs (loading and storing C's four quarters), and
     * the multiply-adds of a gradient below which the AMX drivers' tiles
     * (configuring the unit, packing) cost more than they save. */
    double amx_call_steps;
    double amx_min_work;
    /* What packing a value of the transposed input window costs, in
     * grad_output pair values packed (gw_c_on_m_amx's balance cut). */
    double amx_window_repack;
    /* The share of grad_output's rows grad_weight's first tap group must
     * read for gb_in_gw to pay (grad_bias.c), and the most multiply-adds
     * grad_weight may do per grad_output value (c_in x K). */
    double gb_in_gw_min_rows;
    int64_t gb_in_gw_max_macs;
    /* The fewest output channels each of the two grad_weight tiles gets
     * where gb_in_gw cuts c_out in two for them to share the sums. */
    int64_t gb_in_gw_cut_channels;
    /* The gradients planned so far (ctbc_blocking_choose plans grad_input,
     * grad_weight, grad_bias in turn); NULL outside a plan. gb_in_gw applies
     * only after a grad_weight plan that reads grad_output its way. */
    const struct ctbc_blocking *planned;
} ctbc_context;

void ctbc_context_for_isa(ctbc_isa isa, ctbc_context *context);
/* The same on the ISA's narrow tile (ctbc_narrow_kernel_for_isa), its
 * blocks sized for that tile; 0 where the ISA has none. */
int ctbc_context_narrow(ctbc_isa isa, ctbc_context *context);
/* The same on the ISA's AMX tile (ctbc_amx_kernel_for_isa). */
int ctbc_context_amx(ctbc_isa isa, ctbc_context *context);

/* Blocking chosen at plan time, stored in ctbc_plan.block[]. */
typedef struct ctbc_blocking {
    int32_t isa;        /* ctbc_isa of the kernels the plan was sized for */
    int32_t parallel;   /* 1: enough work to open an OpenMP region */
    /* the implementation of each gradient: index in ctbc_impl_list(g) */
    int32_t impl[CTBC_GRADIENTS];
    /* grad_weight = per tap k, a [c_in x c_out] GEMM reducing over (t, b) */
    int32_t gw_o_on_m;  /* 1: c_out on the micro-tile's mr side (small c_out) */
    int32_t gw_gemv;    /* 1: c_out (or c_in) is 1 on the mr side: one row, GEMV calls */
    int32_t gw_taps;    /* 1 (few c_out): (tap, channel) pairs on the mr side,
                           c_in on the nr side, reducing over input rows;
                           gw_kg taps a tile */
    int32_t gw_bm;      /* block along the mr side (multiple of mr) */
    int32_t gw_chunk;   /* mr-side extent of a tile (multiple of gw_bm): the
                           nr-side block is packed once for all of it */
    int32_t gw_bn;      /* block along the nr side (multiple of nr) */
    int32_t gw_kc;      /* (t, b) rows reduced per packed block */
    int32_t gw_kg;      /* taps sharing one packed input window */
    /* grad_input = [(t, b) x c_in] reducing over (k, o) */
    int32_t gi_merge;   /* 1: partial taps merged when the weights are finite */
    int32_t gi_in_place;/* 1: tiles reduced in one block written into grad_input */
    int32_t gi_bm;      /* (t, b) rows per packed window (multiple of mr) */
    int32_t gi_chunk;   /* (t, b) rows per tile (multiple of gi_bm): the
                           weight panel is packed once per tile */
    int32_t gi_bn;      /* c_in per block (multiple of nr; of mr for gi_c_on_m,
                           whose tiles are gi_bn channels by gi_chunk rows) */
    int32_t gi_ko;      /* c_out per reduction block */
    int32_t gi_kg;      /* taps per reduction block */
    int32_t gb_chunk;   /* c_out per grad_bias work item */
    int32_t gi_dot_steps; /* gi_dot's tiles: this many time steps of one
                           batch entry, a kernel call taking CTBC_DOT_ROWS
                           steps; 0: runs of consecutive (t, b) rows */
} ctbc_blocking;

/* Per-thread scratch, in floats (each part a multiple of 16 floats so every
 * part stays 64-byte aligned). */
typedef struct {
    int64_t cbuf, abuf, bbuf, per_thread;
} ctbc_ws_layout;

void ctbc_blocking_choose(const ctbc_problem *problem, ctbc_isa isa, uint32_t forced,
                          ctbc_blocking *blocking);
void ctbc_ws_layout_of(const ctbc_problem *problem, const ctbc_blocking *blocking,
                       ctbc_ws_layout *layout);
void ctbc_blocking_store(ctbc_plan *plan, const ctbc_blocking *blocking);
void ctbc_blocking_load(const ctbc_plan *plan, ctbc_blocking *blocking);

/* Everything one run reads. */
typedef struct {
    const ctbc_problem *problem;
    ctbc_blocking blocking;
    const ctbc_kernel *kernel;
    ctbc_operand grad_output, input, weight;
    void *grad_input, *grad_weight, *grad_bias;
    /* the outputs' writers: grad_input by (t, b) rows; grad_weight[k] with
     * c_in or c_out along the tile's rows; grad_bias as one row */
    ctbc_writer gi_out, gw_c_rows, gw_o_rows, gb_out;
    /* grad_input's row stride when it is float32 with unit column stride
     * and evenly spaced rows (needed by gi_in_place) */
    int64_t grad_input_row_stride;
} ctbc_run;

typedef struct {
    float *cbuf, *abuf, *bbuf;
} ctbc_scratch;

/* Which view of the ISA's kernel entry an implementation runs on. */
typedef enum {
    CTBC_TILE_WIDE = 0, /* the entry itself (mr x nr) */
    CTBC_TILE_NARROW,   /* ctbc_narrow_kernel_for_isa */
    CTBC_TILE_AMX       /* ctbc_amx_kernel_for_isa */
} ctbc_tile;

/*
 * One way of computing one gradient (oneDNN's implementation list): the
 * plan picks, per gradient, the cheapest implementation that applies;
 * ties go to the one listed first, and the reference (plain loops, float32
 * sums in a fixed order) is listed last and always applies.
 */
typedef struct ctbc_impl {
    const char *name;
    /* 1: computes this problem exactly as documented with this context */
    int (*applies)(const ctbc_problem *problem, const ctbc_context *context);
    /* estimated time per multiply-add, relative to the other
     * implementations of the gradient; INFINITY: measured not to pay,
     * taken only when forced */
    double (*cost)(const ctbc_problem *problem, const ctbc_context *context);
    /* fills the gradient's part of the blocking */
    void (*plan)(const ctbc_problem *problem, const ctbc_context *context, ctbc_blocking *blocking);
    /* raises `need` to the scratch a tile uses */
    void (*scratch)(const ctbc_problem *problem, const ctbc_blocking *blocking, ctbc_ws_layout *need);
    int64_t (*tiles)(const ctbc_run *run);
    /* (NULL where tiles is always 0: another gradient's tiles do the work) */
    void (*run_tile)(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch);
    /* the tile tiles and run_tile get in their run's kernel (set once per
     * call by ctbc_execute) */
    ctbc_tile tile;
} ctbc_impl;

/*
 * BASE on the ISA's narrow tile (ctbc_context_narrow), as the
 * implementation NAME: BASE's plan sized for that tile and its tiles run
 * with that kernel (tile CTBC_TILE_NARROW), whose bits are the wide one's. For
 * problems whose channels fill a fraction of the wide tile's nr (16 of
 * AVX-512's 32 take the same instructions as 32). Applies where the ISA
 * has a narrow tile and BASE applies on it; costs the context's field
 * COST times BASE's cost there, with the wide tile's rows:
 * only its columns count to its credit. (Its 8 rows fit 8 channels better
 * than 6, but at equal columns it was slower: Zen 4, T1 B256 Ci1088 K1 Co8
 * bfloat16, gw_o_on_m 0.13 ms, on the narrow tile 0.16 ms.)
 */
#define CTBC_NARROW_IMPL(IDENT, NAME, BASE, COST)                                                            \
    static int IDENT##_applies(const ctbc_problem *p, const ctbc_context *ctx)                               \
    {                                                                                                        \
        ctbc_context narrow;                                                                                 \
        return ctbc_context_narrow(ctx->isa, &narrow) && (BASE).applies(p, &narrow);                         \
    }                                                                                                        \
    static double IDENT##_cost(const ctbc_problem *p, const ctbc_context *ctx)                               \
    {                                                                                                        \
        ctbc_context narrow;                                                                                 \
        if (!ctbc_context_narrow(ctx->isa, &narrow))                                                         \
            return INFINITY;                                                                                 \
        ctbc_kernel wide_rows = *narrow.kernel;                                                              \
        wide_rows.mr = ctx->kernel->mr;                                                                      \
        narrow.kernel = &wide_rows;                                                                          \
        return ctx->COST * (BASE).cost(p, &narrow);                                                          \
    }                                                                                                        \
    static void IDENT##_plan(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl)              \
    {                                                                                                        \
        ctbc_context narrow;                                                                                 \
        if (ctbc_context_narrow(ctx->isa, &narrow)) /* (else never chosen: it does not apply) */             \
            (BASE).plan(p, &narrow, bl);                                                                     \
    }                                                                                                        \
    static void IDENT##_scratch(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need)        \
    {                                                                                                        \
        (BASE).scratch(p, bl, need);                                                                         \
    }                                                                                                        \
    static int64_t IDENT##_tiles(const ctbc_run *run) { return (BASE).tiles(run); }                          \
    static void IDENT##_run_tile(const ctbc_run *run, int64_t tile, const ctbc_scratch *scratch)             \
    {                                                                                                        \
        (BASE).run_tile(run, tile, scratch);                                                                 \
    }                                                                                                        \
    const ctbc_impl IDENT = {NAME,          IDENT##_applies, IDENT##_cost,    IDENT##_plan, IDENT##_scratch, \
                             IDENT##_tiles, IDENT##_run_tile, .tile = CTBC_TILE_NARROW}

/* The implementations of a gradient, best first, NULL-terminated. */
const ctbc_impl *const *ctbc_impl_list(ctbc_gradient gradient);
/* The one at `index` of that list. */
const ctbc_impl *ctbc_impl_at(ctbc_gradient gradient, int index);
/* Implementations forced by name (CONVTBC_FORCE_IMPL, read at the first
 * plan, or ctbc_force_implementations): 4 bits per gradient g at 4*g,
 * 0 for none, else 1 + the index in its list. */
uint32_t ctbc_impl_forced(void);
/* Index of the implementation a plan uses: the forced one when it
 * applies, else the cheapest that applies. */
int ctbc_impl_choose(ctbc_gradient gradient, const ctbc_problem *problem, const ctbc_context *context,
                     uint32_t forced);

extern const ctbc_impl ctbc_impl_gw_pairs, ctbc_impl_gw_c_on_m, ctbc_impl_gw_gemv, ctbc_impl_gw_o_on_m,
    ctbc_impl_gw_c_on_m_bf16, ctbc_impl_gw_o_on_m_bf16, ctbc_impl_gw_c_on_m_narrow, ctbc_impl_gw_o_on_m_narrow,
    ctbc_impl_gw_c_on_m_bf16_narrow, ctbc_impl_gw_o_on_m_bf16_narrow, ctbc_impl_gw_c_on_m_amx, ctbc_impl_gw_reference;
extern const ctbc_impl ctbc_impl_gi_merged_in_place, ctbc_impl_gi_merged, ctbc_impl_gi_in_place,
    ctbc_impl_gi_window, ctbc_impl_gi_c_on_m, ctbc_impl_gi_c_on_m_bf16, ctbc_impl_gi_dot, ctbc_impl_gi_dot_steps,
    ctbc_impl_gi_dot_bf16, ctbc_impl_gi_dot_bf16_steps,
    ctbc_impl_gi_dot_f16, ctbc_impl_gi_merged_in_place_narrow, ctbc_impl_gi_merged_narrow, ctbc_impl_gi_in_place_narrow,
    ctbc_impl_gi_window_narrow, ctbc_impl_gi_c_on_m_amx, ctbc_impl_gi_reference;
extern const ctbc_impl ctbc_impl_gb_rows, ctbc_impl_gb_in_gw;

/*
 * grad_bias's sums over channels [o0, o0 + no), carried by a grad_weight
 * tile that reads grad_output's rows in order (gb_in_gw, grad_bias.c):
 * rows it does not read come from grad_output itself, so every row is
 * added once, to the lane and in the order gb_rows adds it.
 */
typedef struct {
    float *lanes; /* CTBC_ROW_SUM_LANES lanes of lane_stride floats */
    int64_t lane_stride, o0, no;
    int64_t next_row; /* rows [0, next_row) are added */
    int lane;         /* the lane of row next_row */
} ctbc_gb_sums;

void ctbc_gb_sums_start(ctbc_gb_sums *s, float *lanes, int64_t lane_stride, int64_t o0, int64_t no);
/* adds rows [next_row, row_end) from grad_output */
void ctbc_gb_sums_from_memory(const ctbc_run *run, ctbc_gb_sums *s, int64_t row_end);
/* adds rows [next_row, next_row + n_rows) of channels o0 + [col, col + n)
 * from a float32 copy of them, `row_stride` apart; several calls cover the
 * channels, then ctbc_gb_sums_advance moves past the rows */
void ctbc_gb_sums_add(const ctbc_run *run, const ctbc_gb_sums *s, const float *rows, int64_t row_stride,
                      int64_t n_rows, int64_t col, int64_t n);
void ctbc_gb_sums_advance(ctbc_gb_sums *s, int64_t n_rows);
/* adds the rows left and writes grad_bias's channels */
void ctbc_gb_sums_finish(const ctbc_run *run, ctbc_gb_sums *s);
/* 1: grad_weight's plan carries grad_bias's sums (grad_weight.c) */
int ctbc_gw_sums_grad_bias(const ctbc_problem *p, const ctbc_blocking *bl);

/* The AMX tile's speed against ukr (the context's amx_tile_speedup) with
 * `pairs` pairs reduced per call: padded to whole steps, and paying the
 * call's own cost (amx_call_steps); 0 where it has none. */
double ctbc_amx_speed(const ctbc_context *ctx, int64_t pairs);
/* 1: the ISA has an AMX tile, and it may take grad_output against
 * `operand` (ukr_bf16's rule: both bfloat16, a compute dtype that keeps
 * them). */
int ctbc_applies_amx(const ctbc_problem *p, const ctbc_context *ctx, const ctbc_layout *operand);
/* The ISA's AMX context in *amx where the problem has the context's
 * amx_min_work (a cost is then worth reckoning); 0 otherwise. */
int ctbc_amx_worth(const ctbc_problem *p, const ctbc_context *ctx, ctbc_context *amx);

/* Plans and scratch shared by implementations (blocking.c). */
void ctbc_plan_gw_gemm(const ctbc_problem *p, const ctbc_context *ctx, int o_on_m, ctbc_blocking *bl);
/* Cuts a grad_weight GEMM plan's output blocks so that a team balances
 * (blocking.c, split_for_balance), its reduction blocking as planned: the
 * last step of a plan, after everything sized from its blocks. */
void ctbc_cut_gw_for_balance(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl);
/* The same for a driver that packs the input window whole per tile (c_in on
 * the mr side, gw_o_on_m 0, cut at any micro-tile), each of its values costing
 * `window_repack` grad_output values packed. */
void ctbc_cut_gw_window_for_balance(const ctbc_problem *p, const ctbc_context *ctx, double window_repack,
                                    ctbc_blocking *bl);
/* grad_weight.c's per-tap GEMM: its tiles, and its cost per multiply-add
 * with c_out (o_on_m) or c_in on the micro-tile's rows */
int64_t ctbc_gw_tiles(const ctbc_run *run);
double ctbc_cost_gw_gemm(const ctbc_problem *p, const ctbc_context *ctx, int o_on_m);
/* what storing the tiles adds to that, per multiply-add */
double ctbc_cost_gw_store(const ctbc_problem *p, int o_on_m);
void ctbc_plan_gw_pairs(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl);
/* The most input rows a block of kc reduction rows reads with kg taps a
 * group (its window): the taps' rows lie b apart, kc + (kg - 1)*b, but
 * at one time step of grad_output only the taps that reach the input read
 * (at most t of them), and a block spans ceil((kc - 1)/b) + 1 steps at
 * most. Short inputs with many taps read far less: T1 B3841 K7 p7, whose
 * blocks of 192 rows read at most 2 taps. */
int64_t ctbc_gw_window_rows(const ctbc_problem *p, int64_t kc, int64_t kg);
/* Whether a tap group of kg keeps a per-tap GEMM plan's window and its
 * tiles' accumulators (kg blocks of gw_chunk x gw_bn) within budget. */
int ctbc_gw_group_fits(const ctbc_problem *p, const ctbc_context *ctx, const ctbc_blocking *bl, int64_t kg);
/* Elements a per-tap grad_weight GEMM packs per tap and reduction row,
 * with row blocks of kc rows and kg taps a group: the grad_output block
 * (o_cols wide) once per group, the input window (ctbc_gw_window_rows,
 * c_cols wide) once per group, or twice with an odd batch when
 * `odd_phase` (pairs of rows); each row also costs a few elements. */
double ctbc_gw_packed_per_tap_row(const ctbc_problem *p, int64_t kc, int64_t kg, int64_t o_cols, int64_t c_cols,
                                  int odd_phase);
/* The tap group in [1, kg_max] that packs least per tap. */
int64_t ctbc_gw_taps_packing_least(const ctbc_problem *p, int64_t kc, int64_t kg_max, int64_t o_cols,
                                   int64_t c_cols, int odd_phase);
void ctbc_plan_gi_window(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl);
void ctbc_scratch_gw_gemm(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need);
/* The accumulator a per-tap grad_weight GEMM tile uses in cbuf; gb_in_gw's
 * lanes follow it, this many floats apart. */
int64_t ctbc_gw_gemm_cbuf(const ctbc_blocking *bl);
int64_t ctbc_gb_in_gw_lane_stride(const ctbc_blocking *bl);
void ctbc_scratch_gb_in_gw(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need);
void ctbc_scratch_gw_pairs(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need);
void ctbc_scratch_gw_bf16(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need);
void ctbc_scratch_gi_window(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need);
void ctbc_plan_gi_c_on_m(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl);
void ctbc_scratch_gi_c_on_m(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need);
void ctbc_scratch_none(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *need);
/* for implementations whose tiles need no blocking */
void ctbc_plan_nothing(const ctbc_problem *p, const ctbc_context *ctx, ctbc_blocking *bl);
int ctbc_applies_always(const ctbc_problem *p, const ctbc_context *ctx);
/* 1: grad_input is float32 with unit column stride and evenly spaced rows */
int ctbc_grad_input_direct(const ctbc_problem *p, int64_t *row_stride);
/* grad_input's multiply-adds, as the costs count them (every tap of every
 * input step) */
static inline double ctbc_grad_input_macs(const ctbc_problem *p)
{
    return (double)p->t * (double)p->b * (double)p->c_in * (double)p->k * (double)p->c_out;
}
/* the share of a micro-tile side of `size` that n real rows fill */
double ctbc_fill(int64_t n, int64_t size);

/* Computes the full micro-tile of one kernel call into scratch and adds only
 * the rows whose row_ok flag is set to c. */
void ctbc_edge_rows(const ctbc_kernel *kern, const ctbc_ukr_args *args, const float *a,
                    const float *b, float *c, int64_t ldc, const unsigned char *row_ok);
/* c[i*ldc + j] += tile[i*nr + j] for the rows and columns whose flags are
 * set (NULL flags: all): the last step of an edge tile. */
void ctbc_add_tile(float *c, int64_t ldc, const float *tile, int64_t mr, int64_t nr, const unsigned char *row_ok,
                   const unsigned char *column_ok);

/* 1: no Inf or NaN among x[0..n) (a weight panel whose zero-padded taps
 * may then be multiplied: 0 * w adds an exact zero). */
int ctbc_all_finite(const float *x, int64_t n);

static inline int64_t ctbc_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t ctbc_round_up(int64_t a, int64_t b) { return ctbc_ceil_div(a, b) * b; }
static inline int64_t ctbc_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t ctbc_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t ctbc_clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/*
 * Tap k pairs input step t with grad_output step s = t + pad - k; the term
 * exists only when 0 <= s < t_out (and 0 <= t < t_in). Every driver asks
 * this one relation in one of two forms.
 */
typedef struct {
    int64_t lo, hi; /* [lo, hi), empty when lo >= hi */
} ctbc_range;

/* 1: tap k pairs input step t with a grad_output step. */
static inline int ctbc_tap_reaches(const ctbc_problem *p, int64_t t, int64_t k)
{
    return (uint64_t)(t + p->pad - k) < (uint64_t)p->t_out;
}

/* The taps in [k0, k1) with s < t_out for input step t_a and s >= 0 for
 * t_b: (t_first, t_last) gives the taps reaching grad_output from some step
 * of [t_first, t_last], (t_last, t_first) those reaching it from all. */
static inline ctbc_range ctbc_taps_between(const ctbc_problem *p, int64_t t_a, int64_t t_b, int64_t k0,
                                           int64_t k1)
{
    const int64_t lo = t_a + p->pad - p->t_out + 1, hi = t_b + p->pad + 1;
    return (ctbc_range){lo > k0 ? lo : k0, hi < k1 ? hi : k1};
}

/* The grad_output steps s of tap k whose input step s + k - pad exists. */
static inline ctbc_range ctbc_tap_steps(const ctbc_problem *p, int64_t k)
{
    const int64_t lo = ctbc_clamp(p->pad - k, 0, p->t_out);
    return (ctbc_range){lo, ctbc_clamp(p->pad + p->t - k, lo, p->t_out)};
}

/* The same, as input steps t (clamped to [0, t_in], also when empty). */
static inline ctbc_range ctbc_tap_input_steps(const ctbc_problem *p, int64_t k)
{
    const ctbc_range s = ctbc_tap_steps(p, k);
    return (ctbc_range){ctbc_clamp(s.lo + k - p->pad, 0, p->t), ctbc_clamp(s.hi + k - p->pad, 0, p->t)};
}

#endif /* CONVTBC_COMPUTE_DRIVER_H */
