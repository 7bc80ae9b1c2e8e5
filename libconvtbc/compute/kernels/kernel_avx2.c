/*
 * AVX2+FMA micro-kernel, 6 x 16: twelve ymm accumulators, two B vectors and
 * one broadcast fill the 16 ymm registers; per reduction step 12 FMAs
 * against 8 loads keeps Zen3/Haswell-class cores FMA-bound.
 * Built with -mavx2 -mfma -mf16c (kernel file only); without them it registers a
 * NULL kernel so the dispatcher skips it.
 */
#include "compute/kernels/ukernel.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#define MR 6
#define NR 16

static void ukr_avx2_6x16(const ctbc_ukr_args *args, const float *a, const float *b,
                          float *c, int64_t ldc)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    const int64_t ar = args->a_row, ai = args->a_inner, bi = args->b_inner;
    const int64_t n_inner = args->n_inner;
    /* C is read only at the end: start fetching it now (it usually lives
     * in L3, the accumulator being larger than L2) */
    for (int i = 0; i < MR; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + 15), _MM_HINT_T0);
    }

    for (int64_t q = 0; q < args->n_outer; q++) {
        const float *pa = a + q * args->a_outer;
        const float *pb = b + q * args->b_outer;
        for (int64_t p = 0; p < n_inner; p++) {
            const __m256 b0 = _mm256_loadu_ps(pb);
            const __m256 b1 = _mm256_loadu_ps(pb + 8);
            __m256 x;
            x = _mm256_broadcast_ss(pa);
            c00 = _mm256_fmadd_ps(x, b0, c00);
            c01 = _mm256_fmadd_ps(x, b1, c01);
            x = _mm256_broadcast_ss(pa + ar);
            c10 = _mm256_fmadd_ps(x, b0, c10);
            c11 = _mm256_fmadd_ps(x, b1, c11);
            x = _mm256_broadcast_ss(pa + 2 * ar);
            c20 = _mm256_fmadd_ps(x, b0, c20);
            c21 = _mm256_fmadd_ps(x, b1, c21);
            x = _mm256_broadcast_ss(pa + 3 * ar);
            c30 = _mm256_fmadd_ps(x, b0, c30);
            c31 = _mm256_fmadd_ps(x, b1, c31);
            x = _mm256_broadcast_ss(pa + 4 * ar);
            c40 = _mm256_fmadd_ps(x, b0, c40);
            c41 = _mm256_fmadd_ps(x, b1, c41);
            x = _mm256_broadcast_ss(pa + 5 * ar);
            c50 = _mm256_fmadd_ps(x, b0, c50);
            c51 = _mm256_fmadd_ps(x, b1, c51);
            pa += ai;
            pb += bi;
        }
    }

#define CTBC_ADD_ROW(i, lo, hi)                                                  \
    do {                                                                         \
        float *row = c + (i) * ldc;                                              \
        _mm256_storeu_ps(row, _mm256_add_ps(_mm256_loadu_ps(row), lo));          \
        _mm256_storeu_ps(row + 8, _mm256_add_ps(_mm256_loadu_ps(row + 8), hi));  \
    } while (0)
    CTBC_ADD_ROW(0, c00, c01);
    CTBC_ADD_ROW(1, c10, c11);
    CTBC_ADD_ROW(2, c20, c21);
    CTBC_ADD_ROW(3, c30, c31);
    CTBC_ADD_ROW(4, c40, c41);
    CTBC_ADD_ROW(5, c50, c51);
#undef CTBC_ADD_ROW
}

/* F16C conversions (every AVX2 CPU has F16C; cpu_features checks it). */
static void f16_load_f16c(float *dst, const uint16_t *src, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++)
        dst[i] = _cvtsh_ss(src[i]);
}

static void f16_store_f16c(uint16_t *dst, const float *src, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

const ctbc_kernel ctbc_kernel_avx2 = {"avx2", MR, NR, ukr_avx2_6x16, f16_load_f16c,
                                      f16_store_f16c};

#else

const ctbc_kernel ctbc_kernel_avx2 = {"avx2", 6, 16, 0, 0, 0};

#endif
