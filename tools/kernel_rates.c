/*
 * Multiply-adds per nanosecond of the AVX512_BF16 entry's kernels on this
 * CPU, one thread, operands in L1: the float32 tile (ukr) against the
 * bfloat16 pair tile (ukr_bf16) and the AMX tile (ukr_amx, where the CPU
 * has it), and the float32 dot against the pair dot. The tiles' ratios
 * are the kernel context's pair_tile_speedup and amx_tile_speedup
 * (libconvtbc/compute/context.c). A busy neighbour on the core (another
 * VM's hyperthread) slows every rate; the best round is the core's own.
 * From the repository root:
 *
 *   cc -O3 -Ilibconvtbc -mavx512f -mavx512bw -mavx512vl -mfma -mf16c -mavx512bf16 \
 *       tools/kernel_rates.c -o /tmp/kernel_rates && /tmp/kernel_rates
 *
 * (-O3: the optimization meson-python's release build compiles the kernels
 * with.) It builds the kernel source itself, so it measures the code of the
 * checkout, not of an installed library.
 */
#include "compute/kernels/kernel_amx.c"
#include "compute/kernels/kernel_avx512_bf16.c"

#include <stdio.h>
#include <time.h>

#define KC 192         /* the context's kc with a 48 KiB L1d */
#define DOT_LENGTH 2048
#define ROUNDS 5

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float a_floats[8 * KC], b_floats[KC * 32], c[CTBC_AMX_TILE * CTBC_AMX_TILE]; /* (the largest tile timed) */
static uint32_t a_pairs[CTBC_AMX_TILE * KC / 2], b_pairs[KC / 2 * 32];
static float dot_a[CTBC_DOT_ROWS * DOT_LENGTH], dot_b[4 * DOT_LENGTH];
static uint16_t dot_a_halves[CTBC_DOT_ROWS * DOT_LENGTH], dot_b_halves[4 * DOT_LENGTH];

int main(void)
{
    const ctbc_kernel *k = &ctbc_kernel_avx512_bf16;
    if (!k->ukr || !k->ukr_bf16) {
        puts("this compiler built no AVX512_BF16 kernels");
        return 1;
    }
    /* Small normal values: no subnormal ever reaches the flushing kernels. */
    for (int i = 0; i < 8 * KC; i++)
        a_floats[i] = 1e-3f * (float)(i % 7);
    for (int i = 0; i < KC * 32; i++)
        b_floats[i] = 1.0f;
    for (int i = 0; i < CTBC_AMX_TILE * KC / 2; i++)
        a_pairs[i] = 0x3c003c00u; /* 2^-7 twice */
    for (int i = 0; i < KC / 2 * 32; i++)
        b_pairs[i] = 0x3f803f80u; /* 1.0 twice */
    for (int i = 0; i < CTBC_DOT_ROWS * DOT_LENGTH; i++)
        dot_a[i] = 1e-3f, dot_a_halves[i] = 0x3c00u;
    for (int i = 0; i < 4 * DOT_LENGTH; i++)
        dot_b[i] = 1.0f, dot_b_halves[i] = 0x3f80u;

    const int mr = k->mr, nr = k->nr;
    const ctbc_ukr_args floats = {.n_outer = 1, .n_inner = KC, .a_row = 1, .a_inner = mr, .b_inner = nr};
    const ctbc_ukr_args pairs = {.n_outer = 1, .n_inner = KC / 2, .a_row = 1, .a_inner = mr, .b_inner = nr};
    /* the AMX tile reads A's 32 rows along the reduction, KC values a row */
    const ctbc_ukr_args tiles = {.n_outer = 1, .n_inner = KC / 2, .a_row = KC, .b_inner = nr};
    const int amx = ctbc_ukr_amx_tiles && ctbc_amx_request_permission();
    if (amx)
        ctbc_amx_begin();
    const ctbc_dot_args dot = {.n = 4, .n_outer = 1, .n_inner = DOT_LENGTH, .a_row = DOT_LENGTH,
                               .b_col = DOT_LENGTH};
    const long tile_calls = 200000, dot_calls = 100000;
    printf("tile %d x %d, kc %d; dot %d rows x 4 columns, %d values\n", mr, nr, KC, CTBC_DOT_ROWS, DOT_LENGTH);
    for (int round = 0; round < ROUNDS; round++) {
        double t0 = seconds();
        for (long i = 0; i < tile_calls; i++)
            k->ukr(&floats, a_floats, b_floats, c, nr);
        double t1 = seconds();
        for (long i = 0; i < tile_calls; i++)
            k->ukr_bf16(&pairs, a_pairs, b_pairs, c, nr);
        double t2 = seconds();
        for (long i = 0; i < dot_calls; i++)
            k->dot(&dot, dot_a, dot_b, c, 4);
        double t3 = seconds();
        for (long i = 0; i < dot_calls; i++)
            k->dot_bf16(&dot, dot_a_halves, dot_b_halves, c, 4);
        double t4 = seconds();
        for (long i = 0; amx && i < tile_calls / 8; i++)
            ctbc_ukr_amx_tiles(&tiles, (const uint16_t *)a_pairs, b_pairs, c, CTBC_AMX_TILE);
        double t5 = seconds();
        const double tile_macs = (double)tile_calls * mr * nr * KC;
        const double dot_macs = (double)dot_calls * CTBC_DOT_ROWS * 4 * DOT_LENGTH;
        printf("ukr %5.1f  ukr_bf16 %5.1f  (pair tile %.2fx)   dot %5.1f  dot_bf16 %5.1f  (pair dot %.2fx)"
               "  multiply-adds/ns\n",
               tile_macs / (t1 - t0) * 1e-9, tile_macs / (t2 - t1) * 1e-9, (t1 - t0) / (t2 - t1),
               dot_macs / (t3 - t2) * 1e-9, dot_macs / (t4 - t3) * 1e-9, (t3 - t2) / (t4 - t3));
        if (amx) {
            const double amx_macs = (double)(tile_calls / 8) * CTBC_AMX_TILE * CTBC_AMX_TILE * KC;
            printf("    ukr_amx %6.1f (AMX tile %.2fx ukr)\n", amx_macs / (t5 - t4) * 1e-9,
                   amx_macs / (t5 - t4) / (tile_macs / (t1 - t0)));
        }
    }
    return c[0] == 12345.0f; /* keep the results live */
}
