/*
 * Kernel contexts (see driver.h): each ISA's micro-kernel with its cache
 * blocking, derived once per process from the data cache sizes the CPU
 * reports (CPUID, cpu_probe.c), as BLIS sizes MC/NC/KC from the caches:
 *
 *   kc: a kc x nr micro-panel of B fills half of L1d;
 *   mc: an mc x kc block of A fills 9/32 of L2 (the rest holds the
 *       streaming B panel and C);
 *   nc: a kc x nc block of B fills half of L2;
 *   budget (per-thread scratch unit): L2 / 2 floats.
 *
 * With 32 KiB L1d and 512 KiB L2 (the AMD EPYC the constants were measured
 * on) this gives the AVX2 kernel's kc 256, mc 24 and nc 16 micro-tiles and
 * a 256 Ki-float budget, the values it had as constants. A CPU that reports
 * nothing gets those caches.
 */
#include <pthread.h>
#include <string.h>

#include "compute/cpu_probe.h"
#include "compute/driver.h"

#define DEFAULT_L1D (32 * 1024)
#define DEFAULT_L2 (512 * 1024)

static ctbc_context contexts[CTBC_ISA_COUNT];
/* kernel NULL: none */
static ctbc_context narrow_contexts[CTBC_ISA_COUNT], amx_contexts[CTBC_ISA_COUNT];
static pthread_once_t contexts_once = PTHREAD_ONCE_INIT;

/*
 * The bfloat16 pair kernels' speed against float32's, per core design
 * (tools/kernel_rates.c: the 6 x 32 tiles over kc 192, in L1). On a Zen 4
 * the pair tile ran about twice the float32 one, and the pair dot three
 * times on whole problems (the ratios the costs were first fitted with).
 * On Intel's cores (an Emerald Rapids Xeon) VDPBF16PS issues once a cycle
 * where FMAs issue twice, and its latency leaves the tile's 12
 * accumulators waiting: the pair tile made 44 multiply-adds a nanosecond
 * against ukr's 88 (the best of 10 rounds; the ratio stayed within
 * 0.46-0.61 while a neighbour slowed both). No CPUID bit tells these
 * apart, so the vendor does; a timing at start-up would make plans, and so
 * bits, differ from run to run. The pair dot gained 1.0-1.5x in L1 there;
 * on whole problems, where it reads bfloat16 as it lies, 2 kept it where
 * it won and dropped it where it lost (EMR, two threads, medians of
 * alternating runs: T3 B1 Ci416 K7 Co2332 3.1 ms with it against
 * 18.6 with gi_merged; T464 B12 Ci6 K3 Co1361 8.9 against 14.1 with
 * gi_c_on_m; T411 B7 Ci24 K26 Co33 3.9 against 2.0 with gi_c_on_m).
 */
static void pair_speedups(ctbc_context *ctx)
{
    const bool intel = strcmp(ctbc_cpu_probe()->vendor, "GenuineIntel") == 0;
    ctx->pair_tile_speedup = intel ? 0.5 : 2.0;
    ctx->pair_dot_speedup = intel ? 2.0 : 1.4 / 0.45; /* the Zen 4 fit: 0.45 where the float32 dot costs 1.4 */
}

/*
 * The float32 dot kernels (see gi_dot's cost in grad_input_dot.c). The
 * 8-lane one (dot_rows.h) multiplies and adds apart, two channels a call.
 * The 16-lane one (AVX-512) takes fused multiply-adds, up to four channels
 * a call, and computes a partial chunk whole. EMR, two threads, gi_dot
 * forced against the plan's choice on float32 problems: its time per
 * multiply-add came to 0.7-1.0 of the chosen implementation's cost where
 * c_out filled its chunks and c_in was at most 23 (T126 B4084 Ci5 K6 Co230
 * 168 against gi_c_on_m's 255 ms, T107 B1 Ci23 K3 Co2848 0.52 against
 * 0.68 ms), more from 25 channels (T412 B15 Ci30 K7 Co825 1.39x
 * gi_in_place's time, T4 B509 Ci45 K5 Co743 1.11x). The 34 plans of 774
 * drawn and listed shapes that these values changed took 0.87x the time
 * at 192 channels a reread, with the losses above; at 48, the 16 left
 * were all at most 1.02x.
 */
static void dot_costs(ctbc_context *ctx)
{
    const bool lanes16 = ctx->kernel->dot_lanes == 16;
    ctx->dot_cost = lanes16 ? 0.8 : CTBC_DOT8_COST;
    ctx->dot_reread_channels = lanes16 ? 48.0 : CTBC_DOT8_REREAD_CHANNELS;
    ctx->dot_chunk = lanes16 ? 16 : 0;
}

/* Half of L2: EMR, two threads, gi_dot along the time steps against runs
 * of rows (medians of 3 alternating processes): T252 B159 Ci1 K21 Co199
 * float32 (2.7 MB a step) 12.7 against 15.6 ms, T125 B1010 Ci3 K20 Co86
 * (6.9 MB) 29.8 against 31.5 ms, but T3273 B1243 Ci1 K12 Co26 bfloat16
 * (0.8 MB) 316 against 241 ms and T139 B1561 Ci3 K4 Co36 bfloat16
 * (0.45 MB) 11.6 against 9.1 ms: the rows of a step that L2 holds are
 * read again from there either way, while one entry's steps lie a page
 * or more apart and each group's output is written row by row. */
static int64_t dot_window(int64_t l2) { return l2 / 2; }

/* The AMX tile's multiply-adds per second against ukr's. On the EMR
 * (tools/kernel_rates.c, operands in L1) it made 9.5-10x ukr's on an idle
 * core and about 5x while a neighbour used the core; in the drivers about
 * half its L1 rate (T257 B32 Ci1024 K3 Co1024 bfloat16: 425 a nanosecond a
 * thread, from perf's share of ukr_amx). The emulation is only for tests:
 * a twentieth of ukr, so that no plan takes it unforced. */
static double amx_speedup(const ctbc_kernel *kernel)
{
    return kernel->ukr_amx == ctbc_ukr_amx_tiles ? 6.0 : 0.05;
}

/* (The AMX tile's blocks hold bfloat16 values, half a float each, yet
 * are sized as floats: a kc of 384 rows, its L1 half, left the windows of
 * grad_weight room for one tap where 192 leaves twelve. EMR, T218 B17
 * Ci656 K124 Co15, gw_c_on_m_amx against gw_pairs in one process: 61
 * against 42 ms with kc 384, 24 against 33 with 192.) */
static void context_from_caches(ctbc_isa isa, const ctbc_kernel *kernel, int64_t l1d, int64_t l2,
                                ctbc_context *ctx)
{
    ctx->isa = isa;
    ctx->kernel = kernel;
    const int64_t mr = ctx->kernel->mr, nr = ctx->kernel->nr, f = (int64_t)sizeof(float);
    ctx->kc = ctbc_clamp(l1d / 2 / (nr * f) / 16 * 16, 64, 1024);
    ctx->mc_tiles = ctbc_clamp(l2 * 9 / 32 / (ctx->kc * f) / mr, 4, 64);
    ctx->nc_tiles = ctbc_clamp(l2 / 2 / (ctx->kc * f) / nr, 4, 64);
    ctx->budget_floats = ctbc_clamp(l2 / 2, 64 * 1024, 4 * 1024 * 1024);
    /* Measured on AVX2 (Zen 3) with the forward op's weight panels, one
     * thread: packed won by 1.3-1.5x at 86 row tiles (T15 B257 Ci1440 K14
     * Co256), in place and packed were within 5% from 12 to 22 tiles, and
     * in place won by 25-50% at 1 to 4 tiles (K = 1 shapes of a few rows),
     * where packing is not repaid. */
    ctx->unpacked_reuse_tiles = 16;
    /* Starting and joining an OpenMP team costs a few microseconds, the
     * time of about 1e5 multiply-adds; from 1e6 the second thread's half
     * repays it many times over. */
    ctx->team_min_work = 1e6;
    /* The work-item team (team.c) is woken in a few microseconds, and a
     * worker that wakes late finds no item left rather than holding the
     * call up. EMR, two threads, alternating processes: the 22 listed
     * shapes under 2e6 flops with 3e4 elements or more took 0.78x the time
     * on two threads (T16 B9 Ci1600 K1 Co1 float32, grad_input an outer
     * product, 0.103 -> 0.083 ms; T599 B6 Ci3 K1 Co28 float16 0.143 ->
     * 0.082 ms), the others 0.95x, 0.81-0.97x each from 5e5 flops and
     * 0.7-1.8x (noise around 0.02 ms) below. */
    ctx->backward_team_min_work = 2.5e5; /* 5e5 flops */
    ctx->backward_team_min_elements = 3e4;
    /* Measured on a Zen 4 (AVX-512, 2 threads), forward GEMMs of 14-35
     * row tiles: two items on two threads took 0.6-0.75 of one thread's
     * time, not half. */
    ctx->team_efficiency = 0.6;
    /* Four tiles a thread of two: the last tile then keeps one thread
     * alone for at most an eighth of the work. Below about half a
     * millisecond a tile (EMR, two threads), cutting cost more than the
     * wait: T3 B12 Ci14 K48 Co365 float32, 1.2e7 multiply-adds a gradient,
     * took 1.43x the time in eight tiles; T32 B54 Ci304 K1 Co21 1.39x. */
    ctx->balance_tiles = 8;
    ctx->balance_min_work = 4e7;
    /* Both AVX-512 tiles take 16 multiply-adds per FMA instruction, but the
     * narrow one loads a broadcast for every 16, not every 32 (the forward
     * op's NARROW_FACTOR, measured there). grad_weight's GEMMs pay more:
     * the 22 plans of 774 that 1.2 changes, mostly narrow -> wide, took
     * 0.94x the time (EMR, alternating processes, 3 rounds: T1 B3841 Ci14
     * K7 Co362 p7 float32 7.0 -> 6.4 ms, T191 B159 Ci17 K34 Co75 34 -> 29
     * ms); slower: T1177 B87 Ci71 K70 Co3 float16 1.08-1.10x, T880 B64
     * Ci80 K255 Co24 float16 1.05-1.07x (0.92x in float32), T64 B1 Ci896
     * K16 Co16 1.03-1.05x. */
    ctx->narrow_gi_tile_cost = 1.15;
    ctx->narrow_gw_tile_cost = 1.2;
    dot_costs(ctx);
    ctx->dot_window_bytes = dot_window(l2);
    pair_speedups(ctx);
    ctx->amx_tile_speedup = kernel->ukr_amx ? amx_speedup(kernel) : 0.0;
    /* EMR, one thread, operands in L1 (A 32 x 32 steps + 1 apart): calls
     * of 1, 2, 4 and 8 steps made 148, 225, 286 and 324 multiply-adds a
     * nanosecond (a busy neighbour that run; the steps / (steps + 1) of
     * this cost). Problems under 2e6 multiply-adds a gradient took 1.2-1.6x
     * the time of the plans before (alternating processes: T9 B16 Ci48 K6
     * Co8 0.030 -> 0.044 ms, T2 B7 Ci910 K2 Co15 0.048 -> 0.061 ms). */
    ctx->amx_call_steps = 1.0;
    ctx->amx_min_work = 2e6;
    /* A value of the transposed input window costs about as much to pack
     * as two of grad_output's pair values (gw_c_on_m_amx's balance cut).
     * The tiles used to be cut along c_out only, each packing the whole
     * window again: with c_in cut too, at this weight, the 9 changed plans
     * of the shared list and seeds 1-3 and the two square ones took 0.85x
     * the time (EMR, alternating processes, 3 rounds; T15 B24 Ci768 K14
     * Co256 2.78 -> 1.61 ms, T15 B255 Ci784 K1 Co256 9.1 -> 6.1 ms; T1197
     * B26 Ci742 K2 Co76 1.08x, 8 tiles each packing its grad_output again
     * where 3 did); at 1 and at 3, 0.89x and 0.88x. */
    ctx->amx_window_repack = 2.0;
    /* gb_in_gw: grad_weight's tiles of the first tap group must read this
     * share of grad_output's rows at least; each of them reads the rest from
     * memory alone, on fewer and larger tiles than gb_rows's. Over 48
     * problems with two or more such tiles (EMR, alternating processes, 3
     * rounds), those above 0.7 took 0.94x the time in the geomean (T201
     * B357 Ci2 K2 Co1516 p22, 0.83 of the rows, 0.57x); below it, T4 B171
     * Ci14 K1 Co1464 p23 (0.08) 1.38x, T55 B8 Ci280 K1 Co2937 p22 float16
     * (0.56) 1.09x. */
    ctx->gb_in_gw_min_rows = 0.7;
    /* ... and grad_weight must do at most this many multiply-adds per
     * grad_output value (c_in x K): only where the op streams grad_output
     * does the pass it saves show. Of those 48 problems, the wins were all
     * at most 180 (T1 B494 Ci3 K30 Co1810 p25 0.75x); above 256 they took
     * 0.94-1.13x, noise-level, and the square T257 B32 Ci1024 K3 Co1024 p1
     * (3072) 1.03-1.07x (375 -> 400 ms). */
    ctx->gb_in_gw_max_macs = 256;
    /* Where grad_weight's plan is one tile along c_out, gb_in_gw cuts it in
     * two if each half keeps this many channels. Of 32 problems so cut
     * (EMR, alternating processes, 3 rounds), all slower ones had c_out <
     * 280 (T1444 B11 Ci1 K44 Co39 bfloat16 2.0x, 2.2x in 5 rounds alone,
     * T223 B377 Ci1 K117 Co132 1.4x; not profiled); from 256 on:
     * 0.74-0.95x, T3379 B37 Ci5 K5 Co703 p18 135 -> 101 ms. */
    ctx->gb_in_gw_cut_channels = 128;
}

static void make_contexts(void)
{
    int64_t l1d = ctbc_cpu_probe()->l1d_bytes, l2 = ctbc_cpu_probe()->l2_bytes;
    if (l1d < 4096 || l2 < 64 * 1024) { /* nothing sensible reported */
        l1d = DEFAULT_L1D;
        l2 = DEFAULT_L2;
    }
    for (int isa = CTBC_ISA_PORTABLE; isa < CTBC_ISA_COUNT; isa++) {
        context_from_caches((ctbc_isa)isa, ctbc_kernel_for_isa((ctbc_isa)isa), l1d, l2, &contexts[isa]);
        const ctbc_kernel *narrow = ctbc_narrow_kernel_for_isa((ctbc_isa)isa);
        if (narrow)
            context_from_caches((ctbc_isa)isa, narrow, l1d, l2, &narrow_contexts[isa]);
        const ctbc_kernel *amx = ctbc_amx_kernel_for_isa((ctbc_isa)isa);
        if (amx)
            context_from_caches((ctbc_isa)isa, amx, l1d, l2, &amx_contexts[isa]);
    }
}

void ctbc_context_for_isa(ctbc_isa isa, ctbc_context *ctx)
{
    pthread_once(&contexts_once, make_contexts);
    *ctx = contexts[isa];
}

int ctbc_context_narrow(ctbc_isa isa, ctbc_context *ctx)
{
    pthread_once(&contexts_once, make_contexts);
    if (!narrow_contexts[isa].kernel)
        return 0;
    *ctx = narrow_contexts[isa];
    return 1;
}

int ctbc_context_amx(ctbc_isa isa, ctbc_context *ctx)
{
    pthread_once(&contexts_once, make_contexts);
    if (!amx_contexts[isa].kernel)
        return 0;
    *ctx = amx_contexts[isa];
    return 1;
}
