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
#include <string.h>

#include "compute/kernels/dot_rows.h"
#include "compute/kernels/bf16_pairs.h"
#include "compute/kernels/row_sums.h"
#include "compute/kernels/strips4.h"
#include "compute/kernels/gemv_tail.h"

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
    for (int i = 0; i < MR && !args->overwrite; i++) {
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

    /* overwrite: C = 0 + sum, added to a zero register rather than to C */
    const int keep_c = !args->overwrite;
#define CTBC_ADD_ROW(i, lo, hi)                                                  \
    do {                                                                         \
        float *row = c + (i) * ldc;                                              \
        const __m256 old_lo = keep_c ? _mm256_loadu_ps(row) : _mm256_setzero_ps();   \
        const __m256 old_hi = keep_c ? _mm256_loadu_ps(row + 8) : _mm256_setzero_ps(); \
        _mm256_storeu_ps(row, _mm256_add_ps(old_lo, lo));                        \
        _mm256_storeu_ps(row + 8, _mm256_add_ps(old_hi, hi));                    \
    } while (0)
    CTBC_ADD_ROW(0, c00, c01);
    CTBC_ADD_ROW(1, c10, c11);
    CTBC_ADD_ROW(2, c20, c21);
    CTBC_ADD_ROW(3, c30, c31);
    CTBC_ADD_ROW(4, c40, c41);
    CTBC_ADD_ROW(5, c50, c51);
#undef CTBC_ADD_ROW
}

/* 64 columns (eight ymm accumulators, as many FMAs in flight as the FMA
 * latency needs) per pass over the rows, then 8 at a time. */
static void gemv_avx2(int64_t n_rows, int64_t n, const float *a, int64_t a_step, const float *b,
                      int64_t b_row, float *y)
{
    int64_t j = 0;
    for (; j + 64 <= n; j += 64) {
        __m256 acc[8];
        for (int v = 0; v < 8; v++)
            acc[v] = _mm256_setzero_ps();
        for (int64_t p = 0; p < n_rows; p++) {
            const __m256 x = _mm256_broadcast_ss(a + p * a_step);
            const float *row = b + p * b_row + j;
            for (int v = 0; v < 8; v++)
                acc[v] = _mm256_fmadd_ps(x, _mm256_loadu_ps(row + 8 * v), acc[v]);
        }
        for (int v = 0; v < 8; v++)
            _mm256_storeu_ps(y + j + 8 * v, _mm256_add_ps(_mm256_loadu_ps(y + j + 8 * v), acc[v]));
    }
    gemv_tail8(j, n_rows, n, a, a_step, b, b_row, y);
}

/*
 * 16-bit conversions, 8 values per step. A tail of fewer than 8 goes
 * through an 8-wide stack copy, so every value takes the same vector path.
 */
#define H16_LOAD(name, widen)                                                    \
    static void name(float *dst, const uint16_t *src, int64_t n)                 \
    {                                                                            \
        int64_t i = 0;                                                           \
        for (; i + 8 <= n; i += 8)                                               \
            _mm256_storeu_ps(dst + i,                                            \
                             widen(_mm_loadu_si128((const __m128i *)(src + i))));  \
        if (i < n) {                                                             \
            uint16_t in[8] = {0};                                                \
            float out[8];                                                        \
            memcpy(in, src + i, (size_t)(n - i) * sizeof(uint16_t));             \
            _mm256_storeu_ps(out, widen(_mm_loadu_si128((const __m128i *)in)));  \
            memcpy(dst + i, out, (size_t)(n - i) * sizeof(float));               \
        }                                                                        \
    }

#define H16_STORE(name, narrow)                                                  \
    static void name(uint16_t *dst, const float *src, int64_t n)                 \
    {                                                                            \
        int64_t i = 0;                                                           \
        for (; i + 8 <= n; i += 8)                                               \
            _mm_storeu_si128((__m128i *)(dst + i), narrow(_mm256_loadu_ps(src + i))); \
        if (i < n) {                                                             \
            float in[8] = {0};                                                   \
            uint16_t out[8];                                                     \
            memcpy(in, src + i, (size_t)(n - i) * sizeof(float));                \
            _mm_storeu_si128((__m128i *)out, narrow(_mm256_loadu_ps(in)));       \
            memcpy(dst + i, out, (size_t)(n - i) * sizeof(uint16_t));            \
        }                                                                        \
    }

/* float16: F16C (every AVX2 CPU has it; cpu_features checks it). Its NaN
 * narrowing sets the quiet bit and keeps the top mantissa bits, as the
 * scalar code does; its widening quiets a signalling NaN, which the scalar
 * code keeps as it is, so that bit is cleared again for those. */
static inline __m256 f16_widen(__m128i h)
{
    const __m256i t = _mm256_and_si256(_mm256_cvtepu16_epi32(h), _mm256_set1_epi32(0x7fff));
    const __m256i snan = _mm256_and_si256(_mm256_cmpgt_epi32(t, _mm256_set1_epi32(0x7c00)),
                                          _mm256_cmpgt_epi32(_mm256_set1_epi32(0x7e00), t));
    const __m256i quiet_bit = _mm256_and_si256(snan, _mm256_set1_epi32(0x00400000));
    return _mm256_castsi256_ps(
        _mm256_andnot_si256(quiet_bit, _mm256_castps_si256(_mm256_cvtph_ps(h))));
}
static inline __m128i f16_narrow(__m256 f) { return _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT); }

/* bfloat16: the top half of a float32. Narrowing rounds to nearest even by
 * adding 0x7fff plus the lowest kept bit; a NaN keeps its top bits with
 * the quiet bit set (the carry could otherwise turn it into Inf). */
static inline __m256 bf16_widen(__m128i h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline __m128i bf16_narrow(__m256 f)
{
    const __m256i u = _mm256_castps_si256(f);
    const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i odd = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd), 16);
    const __m256i quiet = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    /* every lane is <= 0xffff: the unsigned saturating pack is exact */
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

H16_LOAD(f16_load_avx2, f16_widen)
H16_STORE(f16_store_avx2, f16_narrow)
H16_LOAD(bf16_load_avx2, bf16_widen)
H16_STORE(bf16_store_avx2, bf16_narrow)

/* 8 x 8 blocks through registers (unpack/shuffle/permute), scalar edges. */
static inline void transpose_8x8(float *dst, int64_t ld_dst, const float *src, int64_t ld_src)
{
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + ld_src);
    __m256 r2 = _mm256_loadu_ps(src + 2 * ld_src), r3 = _mm256_loadu_ps(src + 3 * ld_src);
    __m256 r4 = _mm256_loadu_ps(src + 4 * ld_src), r5 = _mm256_loadu_ps(src + 5 * ld_src);
    __m256 r6 = _mm256_loadu_ps(src + 6 * ld_src), r7 = _mm256_loadu_ps(src + 7 * ld_src);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    r0 = _mm256_shuffle_ps(t0, t2, 0x44);
    r1 = _mm256_shuffle_ps(t0, t2, 0xee);
    r2 = _mm256_shuffle_ps(t1, t3, 0x44);
    r3 = _mm256_shuffle_ps(t1, t3, 0xee);
    r4 = _mm256_shuffle_ps(t4, t6, 0x44);
    r5 = _mm256_shuffle_ps(t4, t6, 0xee);
    r6 = _mm256_shuffle_ps(t5, t7, 0x44);
    r7 = _mm256_shuffle_ps(t5, t7, 0xee);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(r0, r4, 0x20));
    _mm256_storeu_ps(dst + ld_dst, _mm256_permute2f128_ps(r1, r5, 0x20));
    _mm256_storeu_ps(dst + 2 * ld_dst, _mm256_permute2f128_ps(r2, r6, 0x20));
    _mm256_storeu_ps(dst + 3 * ld_dst, _mm256_permute2f128_ps(r3, r7, 0x20));
    _mm256_storeu_ps(dst + 4 * ld_dst, _mm256_permute2f128_ps(r0, r4, 0x31));
    _mm256_storeu_ps(dst + 5 * ld_dst, _mm256_permute2f128_ps(r1, r5, 0x31));
    _mm256_storeu_ps(dst + 6 * ld_dst, _mm256_permute2f128_ps(r2, r6, 0x31));
    _mm256_storeu_ps(dst + 7 * ld_dst, _mm256_permute2f128_ps(r3, r7, 0x31));
}

static void transpose_avx2(float *dst, int64_t ld_dst, const float *src, int64_t ld_src,
                           int64_t rows, int64_t cols)
{
    const int64_t rows8 = rows & ~(int64_t)7, cols8 = cols & ~(int64_t)7;
    for (int64_t j = 0; j < cols8; j += 8) {
        for (int64_t i = 0; i < rows8; i += 8)
            transpose_8x8(dst + j * ld_dst + i, ld_dst, src + i * ld_src + j, ld_src);
        for (int64_t jj = j; jj < j + 8; jj++)
            for (int64_t i = rows8; i < rows; i++)
                dst[jj * ld_dst + i] = src[i * ld_src + jj];
    }
    for (int64_t j = cols8; j < cols; j++)
        for (int64_t i = 0; i < rows; i++)
            dst[j * ld_dst + i] = src[i * ld_src + j];
}

const ctbc_kernel ctbc_kernel_avx2 = {.name = "avx2",
                                      .mr = MR,
                                      .nr = NR,
                                      .ukr = ukr_avx2_6x16,
                                      .gemv = gemv_avx2,
                                      .f16_load = f16_load_avx2,
                                      .bf16_load = bf16_load_avx2,
                                      .f16_store = f16_store_avx2,
                                      .bf16_store = bf16_store_avx2,
                                      .transpose = transpose_avx2,
                                      .dot = dot_rows,
                                      .dot_lanes = 8,
                                      .row_sums = row_sums,
                                      .strips4 = strips4,
                                      .bf16_pairs = bf16_pairs};

#else

/* Built without the ISA flags: no kernel (ukr NULL), never picked. */
const ctbc_kernel ctbc_kernel_avx2 = {.name = "avx2", .mr = 6, .nr = 16};

#endif
