/*
 * The 8-column tail of the AVX2 and AVX-512 GEMV kernels (both files are
 * built with AVX2-class FMA; see ukernel.h for what a GEMV call computes).
 * Included by kernel files only, after <immintrin.h>.
 */
#ifndef CONVTBC_COMPUTE_KERNELS_GEMV_TAIL_H
#define CONVTBC_COMPUTE_KERNELS_GEMV_TAIL_H

#include <stdint.h>

/* Columns [j, n) of the GEMV, 8 at a time (n - j is a multiple of 8). */
static inline void gemv_tail8(int64_t j, int64_t n_rows, int64_t n, const float *a, int64_t a_step,
                              const float *b, int64_t b_row, float *y)
{
    for (; j < n; j += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t p = 0; p < n_rows; p++)
            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(a + p * a_step), _mm256_loadu_ps(b + p * b_row + j), acc);
        _mm256_storeu_ps(y + j, _mm256_add_ps(_mm256_loadu_ps(y + j), acc));
    }
}

#endif /* CONVTBC_COMPUTE_KERNELS_GEMV_TAIL_H */
