/*
 * AVX-512F micro-kernel, 6 x 32: twelve zmm accumulators (two 16-float
 * vectors per row). Built with -mavx512f (kernel file only); without it the
 * entry is NULL. Not validated on hardware yet (the development machine has
 * no AVX-512), which is why the dispatcher only picks it when
 * CONVTBC_ISA=avx512 asks for it.
 */
#include "compute/kernels/ukernel.h"

#if defined(__AVX512F__)
#include <immintrin.h>

#include "compute/kernels/gemv_tail.h"

#define MR 6
#define NR 32

static void ukr_avx512_6x32(const ctbc_ukr_args *args, const float *a, const float *b,
                            float *c, int64_t ldc)
{
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++) {
        acc[i][0] = _mm512_setzero_ps();
        acc[i][1] = _mm512_setzero_ps();
    }
    const int64_t ar = args->a_row, ai = args->a_inner, bi = args->b_inner;
    const int64_t n_inner = args->n_inner;

    for (int64_t q = 0; q < args->n_outer; q++) {
        const float *pa = a + q * args->a_outer;
        const float *pb = b + q * args->b_outer;
        for (int64_t p = 0; p < n_inner; p++) {
            const __m512 b0 = _mm512_loadu_ps(pb);
            const __m512 b1 = _mm512_loadu_ps(pb + 16);
            /* fully unrolled by the compiler: MR is a constant */
            for (int i = 0; i < MR; i++) {
                const __m512 x = _mm512_set1_ps(pa[i * ar]);
                acc[i][0] = _mm512_fmadd_ps(x, b0, acc[i][0]);
                acc[i][1] = _mm512_fmadd_ps(x, b1, acc[i][1]);
            }
            pa += ai;
            pb += bi;
        }
    }
    const int keep_c = !args->overwrite; /* overwrite: C = 0 + sum */
    for (int i = 0; i < MR; i++) {
        float *row = c + i * ldc;
        const __m512 old0 = keep_c ? _mm512_loadu_ps(row) : _mm512_setzero_ps();
        const __m512 old1 = keep_c ? _mm512_loadu_ps(row + 16) : _mm512_setzero_ps();
        _mm512_storeu_ps(row, _mm512_add_ps(old0, acc[i][0]));
        _mm512_storeu_ps(row + 16, _mm512_add_ps(old1, acc[i][1]));
    }
}

/* 64 columns (four zmm accumulators) per pass over the rows, then 16 */
static void gemv_avx512(int64_t n_rows, int64_t n, const float *a, int64_t a_step, const float *b,
                        int64_t b_row, float *y)
{
    int64_t j = 0;
    for (; j + 64 <= n; j += 64) {
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        for (int64_t p = 0; p < n_rows; p++) {
            const __m512 x = _mm512_set1_ps(a[p * a_step]);
            const float *row = b + p * b_row + j;
            for (int v = 0; v < 4; v++)
                acc[v] = _mm512_fmadd_ps(x, _mm512_loadu_ps(row + 16 * v), acc[v]);
        }
        for (int v = 0; v < 4; v++)
            _mm512_storeu_ps(y + j + 16 * v, _mm512_add_ps(_mm512_loadu_ps(y + j + 16 * v), acc[v]));
    }
    gemv_tail8(j, n_rows, n, a, a_step, b, b_row, y);
}

const ctbc_kernel ctbc_kernel_avx512 = {"avx512", MR, NR, ukr_avx512_6x32, gemv_avx512, 0, 0, 0, 0, 0};

#else

const ctbc_kernel ctbc_kernel_avx512 = {"avx512", 6, 32, 0, 0, 0, 0, 0, 0, 0};

#endif
