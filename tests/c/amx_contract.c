/*
 * The AMX tile kernel's contract (libconvtbc/compute/kernels/ukernel.h,
 * ctbc_ukr_amx_fn), checked for its emulation in plain C (always) and for
 * the tile unit itself (where the CPU has AMX-BF16 and Linux grants the
 * tile data). tests/test_ukernel_contract.py compiles kernel_amx.c into
 * this program with the flags meson gives it.
 *
 * The order in which the tile unit sums is its own, so the bits are held
 * only where every order gives the same: small integers, whose products
 * and sums are exact in float32. Those calls check the indexing (strides
 * of every kind, negative ones included, n_outer, the 32 x 32 tile, C's
 * rows ldc apart and nothing written outside them), accumulating into C
 * and overwriting it. Then flushing (a subnormal operand reads as zero),
 * Inf and NaN, and random values against a float64 sum within the error
 * bound of any float32 order of summation.
 *
 * Usage: amx_contract [tiles]   ("tiles": the tile unit too; the driver
 * passes it where /proc/cpuinfo lists amx_bf16 and amx_tile).
 * Prints OK and returns 0 when every check passes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "compute/float_convert.h"
#include "compute/kernels/ukernel.h"

#include "contract_checks.h"

enum { TILE = CTBC_AMX_TILE, ARENA = 1 << 17, CENTER = ARENA / 2, LDC = TILE + 5 };

static uint16_t arena_a[ARENA];
static uint32_t arena_b[ARENA];
static float c_rows[(TILE + 2) * LDC];

/* How the operands lie: A's rows and tap step in bfloat16 values, B's
 * pair rows and tap step in pairs (the drivers' layouts, and negative
 * steps as grad_input's window takes them). */
typedef struct {
    int64_t a_row, a_outer, b_inner, b_outer;
} layout;

static const layout LAYOUTS[] = {
    {96, 3 * 96 * TILE, 32, 0},      /* packed, as gi_c_on_m_amx */
    {100, -7, 40, 3},                /* rows of a window, taps moving both ways */
    {64, 2 * 64 * TILE, 33, -5},     /* B rows an odd count apart, tap steps back */
    {150, 1, 32, 32 * 48},           /* gw_c_on_m_amx: a shifted window */
};

static float bf16_value(uint16_t h) { return ctbc_bf16_to_f32(h); }

/* The sum the contract states, in float64 with subnormal operands read as
 * zero; *magnitude gets the sum of the products' magnitudes. */
static double exact_sum(const ctbc_ukr_args *s, const uint16_t *a, const uint32_t *b, int i, int j, double *magnitude)
{
    double sum = 0.0, mag = 0.0;
    for (int64_t q = 0; q < s->n_outer; q++)
        for (int64_t p = 0; p < s->n_inner; p++)
            for (int h = 0; h < 2; h++) {
                const uint16_t x = a[i * s->a_row + q * s->a_outer + 2 * p + h];
                const uint16_t y = (uint16_t)(b[q * s->b_outer + p * s->b_inner + j] >> (16 * h));
                const double xv = (x & 0x7f80u) ? bf16_value(x) : 0.0, yv = (y & 0x7f80u) ? bf16_value(y) : 0.0;
                sum += xv * yv;
                mag += fabs(xv * yv);
            }
    *magnitude = mag;
    return sum;
}

/* A small integer as bfloat16 (exact: |v| <= 8). */
static uint16_t small_integer(void) { return ctbc_f32_to_bf16((float)((int)(next_u32() % 17u) - 8)); }

/* A value of varied exponent, rounded to bfloat16. */
static uint16_t random_bf16(void) { return ctbc_f32_to_bf16(random_value()); }

/* Fills the operands one call reads (arena elsewhere NaN: any stray read
 * shows), runs it, and checks every element of C. */
static void check_call(const char *name, ctbc_ukr_amx_fn ukr, const layout *l, int64_t n_outer, int64_t n_inner,
                       int overwrite, int integers)
{
    const ctbc_ukr_args args = {n_outer, n_inner, l->a_row, 0, l->a_outer, l->b_inner, l->b_outer, overwrite};
    for (int64_t i = 0; i < ARENA; i++)
        arena_a[i] = 0x7fc1u, arena_b[i] = 0x7fc17fc1u;
    uint16_t *a = arena_a + CENTER;
    uint32_t *b = arena_b + CENTER;
    for (int64_t q = 0; q < n_outer; q++) {
        for (int i = 0; i < TILE; i++)
            for (int64_t e = 0; e < 2 * n_inner; e++)
                a[i * l->a_row + q * l->a_outer + e] = integers ? small_integer() : random_bf16();
        for (int64_t p = 0; p < n_inner; p++)
            for (int j = 0; j < TILE; j++)
                b[q * l->b_outer + p * l->b_inner + j] =
                    integers ? (uint32_t)small_integer() | (uint32_t)small_integer() << 16
                             : (uint32_t)random_bf16() | (uint32_t)random_bf16() << 16;
    }
    const float guard = -12345.0f;
    for (int i = 0; i < (TILE + 2) * LDC; i++)
        c_rows[i] = guard;
    float *c = c_rows + LDC; /* one guard row above */
    float before[TILE * TILE];
    for (int i = 0; i < TILE; i++)
        for (int j = 0; j < TILE; j++)
            c[i * LDC + j] = before[i * TILE + j] = integers ? (float)(i - j) : (float)(i + 1) / (float)(j + 3);
    ukr(&args, a, b, c, LDC);
    for (int i = -1; i <= TILE; i++)
        for (int j = 0; j < LDC; j++) {
            const float got = c[i * LDC + j];
            if (i < 0 || i == TILE || j >= TILE) {
                CHECK(got == guard, "%s: wrote outside the tile at (%d, %d)", name, i, j);
                continue;
            }
            double magnitude;
            const double start = overwrite ? 0.0 : before[i * TILE + j];
            const double want = start + exact_sum(&args, a, b, i, j, &magnitude);
            /* n + 1 float32 roundings of partial sums at most |start| +
             * magnitude each: any order's error */
            const double bound = integers ? 0.0 : (double)(2 * n_outer * n_inner + 1) * 0x1p-24 * (fabs(start) + magnitude);
            CHECK(fabs((double)got - want) <= bound,
                  "%s: layout a_row %lld b_inner %lld, outer %lld inner %lld overwrite %d (%d, %d): %a, want %a", name,
                  (long long)l->a_row, (long long)l->b_inner, (long long)n_outer, (long long)n_inner, overwrite, i, j,
                  got, want);
        }
}

/* One element of A subnormal against a large B: the product would be a
 * normal float32, but the operand reads as zero; an Inf meets a finite
 * value; a NaN propagates; nothing else in the tile changes. */
static void check_specials(const char *name, ctbc_ukr_amx_fn ukr)
{
    static uint16_t a[TILE * 32];
    static uint32_t b[16 * TILE];
    static float c[TILE * TILE];
    const ctbc_ukr_args args = {1, 16, 32, 0, 0, TILE, 0, 1};
    for (int i = 0; i < TILE * 32; i++)
        a[i] = 0x3f80u; /* 1.0 */
    for (int i = 0; i < 16 * TILE; i++)
        b[i] = 0x3f803f80u; /* 1.0, 1.0 */
    a[0 * 32 + 0] = 0x0001u;                   /* row 0: a subnormal (2^-133) */
    b[0 * TILE + 0] = 0x3f807e80u;             /*   against 2^126 in column 0: reads 0 */
    a[1 * 32 + 3] = 0x7f80u;                   /* row 1: +Inf */
    a[2 * 32 + 5] = 0x7fc0u;                   /* row 2: NaN */
    ukr(&args, a, b, c, TILE);
    CHECK(c[0] == 31.0f, "%s: a subnormal operand read as nonzero: %a", name, c[0]);
    for (int j = 0; j < TILE; j++) {
        CHECK(isinf(c[1 * TILE + j]) && c[1 * TILE + j] > 0, "%s: Inf times 1 gave %a at column %d", name,
              c[1 * TILE + j], j);
        CHECK(isnan(c[2 * TILE + j]), "%s: NaN gave %a at column %d", name, c[2 * TILE + j], j);
        CHECK(c[3 * TILE + j] == (j ? 32.0f : 0x1p126f + 31.0f), "%s: row 3 column %d: %a", name, j, c[3 * TILE + j]);
    }
}

static void check_kernel(const char *name, ctbc_ukr_amx_fn ukr, void (*begin)(void))
{
    const int before = failures;
    begin();
    const int64_t outers[] = {1, 2, 3}, inners[] = {16, 32, 48};
    for (size_t l = 0; l < sizeof(LAYOUTS) / sizeof(LAYOUTS[0]); l++)
        for (int o = 0; o < 3; o++)
            for (int n = 0; n < 3; n++)
                for (int overwrite = 0; overwrite <= 1; overwrite++) {
                    check_call(name, ukr, &LAYOUTS[l], outers[o], inners[n], overwrite, 1);
                    check_call(name, ukr, &LAYOUTS[l], outers[o], inners[n], overwrite, 0);
                }
    check_specials(name, ukr);
    printf("%s: %s\n", name, failures == before ? "ok" : "FAILED");
}

int main(int argc, char **argv)
{
    check_kernel("amx_emulated", ctbc_ukr_amx_emulated, ctbc_amx_emulated_begin);
    if (argc > 1 && strcmp(argv[1], "tiles") == 0) {
        CHECK(ctbc_ukr_amx_tiles, "the AMX tile kernel was not built");
        CHECK(!ctbc_ukr_amx_tiles || ctbc_amx_request_permission(),
              "Linux refused the tile data (arch_prctl ARCH_REQ_XCOMP_PERM)");
        if (ctbc_ukr_amx_tiles && ctbc_amx_request_permission())
            check_kernel("amx_bf16", ctbc_ukr_amx_tiles, ctbc_amx_begin);
    } else {
        printf("amx_bf16: skipped (CPU)\n");
    }
    if (failures) {
        printf("%d checks failed\n", failures);
        return 1;
    }
    printf("OK\n");
    return 0;
}
