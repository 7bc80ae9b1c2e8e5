/*
 * Portable C micro-kernel: the reference twin of the SIMD kernels, and the
 * path used on CPUs (or builds) without AVX2+FMA. Plain multiply then add,
 * so it gives the same answer with or without hardware FMA.
 */
#include "compute/kernels/ukernel.h"

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

const ctbc_kernel ctbc_kernel_portable = {"portable", MR, NR, ukr_portable_4x8, gemv_portable, 0, 0, 0, 0, 0};
