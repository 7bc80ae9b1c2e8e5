/*
 * Block sizes and scratch layout, fixed at plan time from the problem shape
 * and the kernel's tile (never from the thread count, so results do not
 * depend on it).
 */
#include <string.h>

#include "compute/driver.h"

/* Per-thread scratch budgets, in floats. 256 Ki floats (1 MiB) keeps each
 * packed block within L2 + a slice of L3, and the workspace bounded
 * whatever the problem size. */
#ifndef CTBC_BUDGET_FLOATS /* tests shrink it to exercise block splitting */
#define CTBC_BUDGET_FLOATS (256 * 1024)
#endif
/* a packed window is rewritten for every row block: keep it inside L2
 * (256 KiB of 512) or the packing stores miss all the way to L3 */
#define WINDOW_FLOATS (CTBC_BUDGET_FLOATS / 4)
#define CBUF_FLOATS (2 * CTBC_BUDGET_FLOATS)
#define WEIGHT_FLOATS CTBC_BUDGET_FLOATS

/* Cache blocking in micro-tiles: mc = 24 mr rows of A (a 144 x 256 float
 * block = 144 KiB sits in a 512 KiB L2), nc = 16 nr columns, kc = 256
 * reduction steps (a 256 x 16 B micro-panel = 16 KiB sits in L1). */
#ifndef CTBC_MC_TILES /* tests shrink these to exercise block edges */
#define CTBC_MC_TILES 24
#define CTBC_NC_TILES 16
#define CTBC_KC 256
#endif
#define MC_TILES CTBC_MC_TILES
#define NC_TILES CTBC_NC_TILES
#define KC CTBC_KC
/* grad_input reduces over (tap, c_out) pairs; aim for this many per block */
#define GI_REDUCTION 384
#define GB_CHUNK 256
/* (tap, channel) pairs per grad_weight tile when they lie on the mr side */
#define GW_PAIRS_MAX 48
/* ... chosen (c_out > 1) when they fill micro-tiles this much better, every
 * tap reaches at least this many time steps, and c_in is wide enough to
 * pay for gathering a grad_output column per pair */
#define GW_TAPS_GAIN 1.15
#define GW_TAPS_MIN_T_OUT 4
#define GW_TAPS_MIN_C_IN 128
#ifndef CTBC_GW_TAPS_MIN_B /* tests lower it to exercise the taps layout */
#define CTBC_GW_TAPS_MIN_B 8
#endif

_Static_assert(sizeof(ctbc_blocking) <= sizeof(((ctbc_plan *)0)->block),
               "blocking must fit in ctbc_plan.block");

/* Largest tap group g in [1, k] with base + (g - 1)*step <= limit. */
static int64_t taps_within(int64_t k, int64_t base, int64_t step, int64_t limit)
{
    int64_t g = k;
    if (step > 0 && base + (g - 1) * step > limit)
        g = (limit - base) / step + 1;
    return ctbc_clamp(g, 1, ctbc_max(k, 1));
}

void ctbc_blocking_choose(const ctbc_problem *p, ctbc_isa isa, ctbc_blocking *bl)
{
    const ctbc_kernel *kern = ctbc_kernel_for_isa(isa);
    const int64_t mr = kern->mr, nr = kern->nr;
    memset(bl, 0, sizeof(*bl));
    bl->isa = (int32_t)isa;

    /* grad_weight: put c_out on the side of the micro-tile it fills better
     * (c_out is often 1..32 while c_in is hundreds). */
    const int64_t c_out = ctbc_max(p->c_out, 1), c_in = ctbc_max(p->c_in, 1);
    const double fill_m = (double)c_out / (double)ctbc_round_up(c_out, mr);
    const double fill_n = (double)c_out / (double)ctbc_round_up(c_out, nr);
    bl->gw_o_on_m = fill_m > fill_n;
    const int64_t gw_m = bl->gw_o_on_m ? c_out : c_in;
    const int64_t gw_n = bl->gw_o_on_m ? c_in : c_out;
    bl->gw_bm = (int32_t)ctbc_min(ctbc_round_up(gw_m, mr), MC_TILES * mr);
    bl->gw_bn = (int32_t)ctbc_min(ctbc_round_up(gw_n, nr), NC_TILES * nr);
    bl->gw_kc = KC;
    /* the input window (kc + (kg-1)*b rows) lies along c's side */
    const int64_t window_width = bl->gw_o_on_m ? bl->gw_bn : bl->gw_bm;
    int64_t kg = taps_within(p->k, KC, p->b, WINDOW_FLOATS / window_width);
    kg = ctbc_min(kg, ctbc_max(1, CBUF_FLOATS / ((int64_t)bl->gw_bm * bl->gw_bn)));
    bl->gw_kg = (int32_t)kg;
    const int64_t gw_blocks = ctbc_max(1, CBUF_FLOATS / (kg * bl->gw_bm * bl->gw_bn));
    bl->gw_chunk = (int32_t)ctbc_min(ctbc_round_up(gw_m, bl->gw_bm), gw_blocks * bl->gw_bm);

    /* Few output channels fill few rows of mr (or columns of nr): put
     * (tap, channel) pairs on the mr side instead (each grad_output row
     * then pairs with input rows b_size apart per tap), reducing over
     * input rows. Rows where only some taps of a micro-tile reach
     * grad_output come in runs of b_size rows, each run one more kernel
     * call: not worth it for small batches. */
    const int64_t t_out = ctbc_max(p->t_out, 0);
    const double fill_plain = fill_m > fill_n ? fill_m : fill_n;
    const double fill_pairs = (double)(p->k * c_out) / (double)ctbc_round_up(p->k * c_out, mr);
    const int pairs_fill_better =
        p->c_out == 1 || (t_out >= GW_TAPS_MIN_T_OUT && p->c_in >= GW_TAPS_MIN_C_IN &&
                          fill_pairs >= GW_TAPS_GAIN * fill_plain);
    if (p->c_out >= 1 && p->k >= 2 && mr >= 2 && p->b >= CTBC_GW_TAPS_MIN_B && pairs_fill_better) {
        bl->gw_taps = 1;
        bl->gw_o_on_m = 1;
        bl->gw_bm = (int32_t)mr;
        bl->gw_chunk = (int32_t)mr;
        bl->gw_bn = (int32_t)ctbc_min(ctbc_round_up(c_in, nr), NC_TILES * nr);
        bl->gw_kc = KC;
        /* taps per tile: up to GW_PAIRS_MAX pairs, a whole number of
         * micro-tiles when a group not much smaller allows it */
        const int64_t kg_max = ctbc_clamp(GW_PAIRS_MAX / c_out, 1, p->k);
        kg = kg_max;
        for (int64_t g = kg_max; 2 * g >= kg_max; g--)
            if ((g * c_out) % mr == 0) {
                kg = g;
                break;
            }
        bl->gw_kg = (int32_t)kg;
    }

    /* grad_input: rows (t, b), columns c_in, reduction (k, o) */
    bl->gi_bm = (int32_t)ctbc_min(ctbc_round_up(ctbc_max(p->t * p->b, 1), mr), MC_TILES * mr);
    bl->gi_bn = (int32_t)ctbc_min(ctbc_round_up(c_in, nr), NC_TILES * nr);
    bl->gi_ko = (int32_t)ctbc_min(c_out, 256);
    kg = ctbc_clamp(GI_REDUCTION / bl->gi_ko, 1, ctbc_max(p->k, 1));
    kg = ctbc_min(kg, taps_within(p->k, bl->gi_bm, p->b, WINDOW_FLOATS / bl->gi_ko));
    kg = ctbc_clamp(kg, 1, ctbc_max(1, WEIGHT_FLOATS / ((int64_t)bl->gi_bn * bl->gi_ko)));
    bl->gi_kg = (int32_t)kg;

    /* rows per tile: as many windows as the accumulator budget allows, so
     * that one weight panel serves them all */
    const int64_t gi_rows = ctbc_round_up(ctbc_max(p->t * p->b, 1), bl->gi_bm);
    const int64_t windows = ctbc_max(1, CBUF_FLOATS / ((int64_t)bl->gi_bm * bl->gi_bn));
    bl->gi_chunk = (int32_t)ctbc_min(gi_rows, windows * bl->gi_bm);

    bl->gb_chunk = GB_CHUNK;

    /* An OpenMP region costs a few microseconds: not worth it for tiny
     * problems (flops counts both GEMMs). Nor is it below ~2e6 flops when
     * another thread pool (numpy's OpenBLAS, torch) has just run: its
     * spinning workers hold the other core and the region's closing
     * barrier waits milliseconds for ours (measured: a 1.7e6-flop shape at
     * 0.33 ms alone took 2 ms, worst 15 ms, right after an sgemm). */
    const double flops = 4.0 * (double)p->t_out * (double)p->b * (double)p->c_in *
                         (double)p->c_out * (double)p->k;
    bl->parallel = flops >= 2e6;
}

static int64_t floats64(int64_t n) { return ctbc_round_up(ctbc_max(n, 1), 16); }

/* Buffer sizes of absurd problems (a batch near 2^60 with broadcast views)
 * would overflow int64_t. They stop at a ceiling no allocation can meet, low
 * enough that the sums and round-ups below stay defined; phase 1 then asks
 * for a workspace nobody can allocate instead of computing garbage. */
#define WS_CEILING (INT64_MAX / 8) /* three of them, rounded up, still fit */
static int64_t ws_mul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) || r > WS_CEILING ? WS_CEILING : r;
}
static int64_t ws_add(int64_t a, int64_t b) { return a + b > WS_CEILING ? WS_CEILING : a + b; }

void ctbc_ws_layout_of(const ctbc_problem *p, const ctbc_blocking *bl, ctbc_ws_layout *ws)
{
    const int64_t b = p->b;
    /* grad_weight */
    const int64_t gw_window = ws_add(bl->gw_kc, ws_mul(bl->gw_kg - 1, b));
    const int64_t gw_pairs = ctbc_round_up(ws_mul(bl->gw_kg, ctbc_max(p->c_out, 1)), bl->gw_bm);
    const int64_t gw_c = bl->gw_taps ? ws_mul(gw_pairs, bl->gw_bn) : ws_mul((int64_t)bl->gw_kg * bl->gw_chunk, bl->gw_bn);
    const int64_t gw_a = ws_mul(bl->gw_o_on_m ? bl->gw_kc : gw_window, bl->gw_bm);
    int64_t gw_b = ws_mul(bl->gw_o_on_m ? gw_window : bl->gw_kc, bl->gw_bn);
    int64_t gw_a_taps = 0;
    if (bl->gw_taps) {
        gw_b = ws_mul(bl->gw_kc, bl->gw_bn);
        gw_a_taps = ws_mul(bl->gw_kc, gw_pairs);
    }
    /* grad_input */
    const int64_t gi_c = ws_mul(bl->gi_chunk, bl->gi_bn);
    const int64_t gi_a = ws_mul(ws_add(bl->gi_bm, ws_mul(bl->gi_kg - 1, b)), bl->gi_ko);
    const int64_t gi_b = ws_mul((int64_t)bl->gi_bn * bl->gi_kg, bl->gi_ko);

    ws->cbuf = floats64(ctbc_max(gw_c, gi_c));
    ws->abuf = floats64(ctbc_max(ctbc_max(gw_a, gw_a_taps), gi_a));
    ws->bbuf = floats64(ctbc_max(gw_b, gi_b));
    ws->per_thread = ws->cbuf + ws->abuf + ws->bbuf;
}

void ctbc_blocking_store(ctbc_plan *plan, const ctbc_blocking *blocking)
{
    memset(plan->block, 0, sizeof(plan->block));
    memcpy(plan->block, blocking, sizeof(*blocking));
}

void ctbc_blocking_load(const ctbc_plan *plan, ctbc_blocking *blocking)
{
    memcpy(blocking, plan->block, sizeof(*blocking));
}
