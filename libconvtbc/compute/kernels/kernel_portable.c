/*
 * Portable C micro-kernel: the reference twin of the SIMD kernels, and the
 * path used on CPUs (or builds) without AVX2+FMA. Plain multiply then add,
 * so it gives the same answer with or without hardware FMA.
 */
#include "compute/kernels/ukernel.h"
#include "compute/kernels/dot_rows.h"
#include "compute/kernels/bf16_pairs.h"
#include "compute/kernels/row_sums.h"
#include "compute/kernels/strips4.h"

#include "compute/float_convert.h"

#define MR 4
#define NR 8

static void ukr_portable_4x8(const ctbc_ukr_args *args, const float *a, const float *b,
                             float *c, int64_t ldc)
{
    float acc[MR][NR] = {{0.0f}};
    for (int64_t q = 0; q < args->n_outer; q++) {
        const float *pa = a + q * args->a_outer;
        const float *pb = b + q * args->b_outer;
        for (int64_t p = 0; p < args->n_inner; p++) {
            for (int i = 0; i < MR; i++) {
                const float x = pa[i * args->a_row];
                for (int j = 0; j < NR; j++)
                    acc[i][j] += x * pb[j];
            }
            pa += args->a_inner;
            pb += args->b_inner;
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++)
            c[i * ldc + j] = (args->overwrite ? 0.0f : c[i * ldc + j]) + acc[i][j];
}

static void gemv_portable(int64_t n_rows, int64_t n, const float *a, int64_t a_step, const float *b,
                          int64_t b_row, float *y)
{
    enum { CHUNK = 32 };
    for (int64_t j0 = 0; j0 < n; j0 += CHUNK) {
        const int64_t w = n - j0 < CHUNK ? n - j0 : CHUNK;
        float acc[CHUNK] = {0.0f};
        for (int64_t p = 0; p < n_rows; p++) {
            const float x = a[p * a_step];
            const float *row = b + p * b_row + j0;
            for (int64_t j = 0; j < w; j++)
                acc[j] += x * row[j];
        }
        for (int64_t j = 0; j < w; j++)
            y[j0 + j] += acc[j];
    }
}

/* The 16-bit conversions and the transpose, one element at a time: the
 * helpers every ISA's entry starts from (no entry leaves one NULL). */
static void f16_load_portable(float *dst, const uint16_t *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = ctbc_f16_to_f32(src[i]);
}

static void bf16_load_portable(float *dst, const uint16_t *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = ctbc_bf16_to_f32(src[i]);
}

static void f16_store_portable(uint16_t *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = ctbc_f32_to_f16(src[i]);
}

static void bf16_store_portable(uint16_t *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = ctbc_f32_to_bf16(src[i]);
}

static void transpose_portable(float *dst, int64_t ld_dst, const float *src, int64_t ld_src,
                               int64_t rows, int64_t cols)
{
    for (int64_t j = 0; j < cols; j++)
        for (int64_t i = 0; i < rows; i++)
            dst[j * ld_dst + i] = src[i * ld_src + j];
}

const ctbc_kernel ctbc_kernel_portable = {.name = "portable",
                                          .mr = MR,
                                          .nr = NR,
                                          .ukr = ukr_portable_4x8,
                                          .gemv = gemv_portable,
                                          .f16_load = f16_load_portable,
                                          .bf16_load = bf16_load_portable,
                                          .f16_store = f16_store_portable,
                                          .bf16_store = bf16_store_portable,
                                          .transpose = transpose_portable,
                                          .dot = dot_rows,
                                          .dot_lanes = 8,
                                          .row_sums = row_sums,
                                          .strips4 = strips4,
                                          .bf16_pairs = bf16_pairs};
