/*
 * AVX-512 (F, BW, VL) kernels: the 6 x 32 micro-kernel (twelve zmm
 * accumulators, two 16-float vectors per row), a 64-column GEMV, the 16-bit
 * conversions, a 16 x 16 transpose, the dot kernel on 16 lanes and the
 * four-row strip packing. Built with -mavx512f -mavx512bw -mavx512vl -mfma
 * (kernel file only); without them the entry has a NULL ukr and the
 * dispatcher never picks it.
 *
 * kernel_avx512_bf16.c builds this file again with -mavx512bf16 and
 * CTBC_AVX512_WITH_BF16: that entry adds the VDPBF16PS kernel on bfloat16
 * pairs (ukernel.h, ctbc_ukr_bf16_fn) to everything here.
 *
 * The test suite also builds this file against SIMDe (CTBC_KERNEL_VIA_SIMDE,
 * see tests/c/ukernel_contract.c), so that the same source runs on CPUs
 * without AVX-512 and is compared there with the portable kernels.
 *
 * Edges use masked loads and stores rather than scalar loops, so every
 * element of a conversion or a transpose takes the same vector path.
 */
#include "compute/kernels/ukernel.h"

#if defined(CTBC_KERNEL_VIA_SIMDE)
#include "simde_avx512.h" /* tests/c: SIMDe under the Intel names */
#define CTBC_AVX512_BUILT 1
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__) && \
    (!defined(CTBC_AVX512_WITH_BF16) || defined(__AVX512BF16__))
#include <immintrin.h>
#define CTBC_AVX512_BUILT 1
#endif

#if defined(CTBC_AVX512_BUILT)

#include "compute/kernels/bf16_pairs.h"
#include "compute/kernels/row_sums.h"
#include "compute/kernels/gemv_tail.h"

#define MR 6
#define NR 32

/* Steps of a tile call (6 cycles each for the float32 tile) from which it
 * prefetches C: 32 steps outlast a load from L3; a shorter call would
 * wait for C anyway, and the prefetches would only add to its work. */
#define CTBC_PREFETCH_MIN_STEPS 32

/* An ROWS x (16 VECS) tile: VECS zmm accumulators a row, one broadcast of
 * A against VECS vectors of B per step; the loops over the constant ROWS
 * and VECS are unrolled by the compiler. ELEM is what a and b hold (float,
 * or a bfloat16 pair as uint32_t), and STEP(acc, a element, B vector) one
 * step of the sum: the float32 tiles (ctbc_ukr_fn) and the bfloat16 pair
 * tiles (ctbc_ukr_bf16_fn) differ only there. */
#define CTBC_DEFINE_TILE(ROWS, VECS, NAME, ELEM, STEP)                                                           \
    static void NAME(const ctbc_ukr_args *args, const ELEM *a, const ELEM *b, float *c, int64_t ldc)            \
    {                                                                                                           \
        __m512 acc[ROWS][VECS];                                                                                 \
        for (int i = 0; i < ROWS; i++)                                                                          \
            for (int v = 0; v < VECS; v++)                                                                      \
                acc[i][v] = _mm512_setzero_ps();                                                                \
        /* C is read only at the end: fetch it now, for writing, while the                                      \
         * products run (an accumulator larger than L2 otherwise stalls                                         \
         * each call on its last loads; the AVX2 kernel does the same) */                                       \
        if (!args->overwrite && args->n_outer * args->n_inner >= CTBC_PREFETCH_MIN_STEPS)                       \
            for (int i = 0; i < ROWS; i++)                                                                      \
                for (int v = 0; v <= VECS; v++)                                                                 \
                    __builtin_prefetch(c + i * ldc + (v < VECS ? 16 * v : 16 * VECS - 1), 1, 3);                \
        const int64_t ar = args->a_row, ai = args->a_inner, bi = args->b_inner;                                 \
        const int64_t n_inner = args->n_inner;                                                                  \
        for (int64_t q = 0; q < args->n_outer; q++) {                                                           \
            const ELEM *pa = a + q * args->a_outer;                                                             \
            const ELEM *pb = b + q * args->b_outer;                                                             \
            for (int64_t p = 0; p < n_inner; p++) {                                                             \
                __m512i bv[VECS];                                                                               \
                for (int v = 0; v < VECS; v++)                                                                  \
                    bv[v] = _mm512_loadu_si512((const void *)(pb + 16 * v));                                    \
                for (int i = 0; i < ROWS; i++)                                                                  \
                    for (int v = 0; v < VECS; v++)                                                              \
                        acc[i][v] = STEP(acc[i][v], pa[i * ar], bv[v]);                                         \
                pa += ai;                                                                                       \
                pb += bi;                                                                                       \
            }                                                                                                   \
        }                                                                                                       \
        const int keep_c = !args->overwrite; /* overwrite: C = 0 + sum */                                       \
        for (int i = 0; i < ROWS; i++)                                                                          \
            for (int v = 0; v < VECS; v++) {                                                                    \
                float *out = c + i * ldc + 16 * v;                                                              \
                const __m512 old = keep_c ? _mm512_loadu_ps(out) : _mm512_setzero_ps();                         \
                _mm512_storeu_ps(out, _mm512_add_ps(old, acc[i][v]));                                           \
            }                                                                                                   \
    }

/* acc + x * (16 floats of b), fused */
#define CTBC_F32_STEP(acc, x, bv) _mm512_fmadd_ps(_mm512_set1_ps(x), _mm512_castsi512_ps(bv), acc)
#define CTBC_DEFINE_UKR(ROWS, VECS, NAME) CTBC_DEFINE_TILE(ROWS, VECS, NAME, float, CTBC_F32_STEP)

CTBC_DEFINE_UKR(MR, 2, ukr_avx512_6x32)

/* The narrow tile: 8 rows of one 16-float vector, eight accumulators (the
 * FMA latency times the two FMA pipes of a Zen 5), for GEMMs of at most 16
 * columns, where the 32-wide tile computes as many padding columns. */
#define MR_NARROW 8

CTBC_DEFINE_UKR(MR_NARROW, 1, ukr_avx512_8x16)

/* 64 columns (four zmm accumulators) per pass over the rows, then 8 */
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

/* The low `n` lanes (0 < n <= 16). */
static inline __mmask16 lanes(int64_t n) { return (__mmask16)((1u << n) - 1u); }

/* float16: vcvtph2ps / vcvtps2ph, as F16C does for 8 lanes. The narrowing
 * of a NaN sets the quiet bit and keeps the top payload bits, as the scalar
 * code does; the widening quiets a signalling NaN, which the scalar code
 * keeps as it is, so that bit is cleared again for those. */
static inline __m512 f16_widen(__m256i h)
{
    const __m512i t = _mm512_and_si512(_mm512_cvtepu16_epi32(h), _mm512_set1_epi32(0x7fff));
    const __mmask16 snan = _mm512_cmpgt_epi32_mask(t, _mm512_set1_epi32(0x7c00)) &
                           _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(0x7e00), t);
    const __m512i w = _mm512_castps_si512(_mm512_cvtph_ps(h));
    return _mm512_castsi512_ps(_mm512_mask_andnot_epi32(w, snan, _mm512_set1_epi32(0x00400000), w));
}

static inline __m256i f16_narrow(__m512 f) { return _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT); }

/* bfloat16: the top half of a float32. Narrowing rounds to nearest even by
 * adding 0x7fff plus the lowest kept bit; a NaN keeps its top bits with the
 * quiet bit set (the carry could otherwise turn it into Inf). Integer
 * arithmetic throughout, so subnormals round like any other value (the
 * AVX512_BF16 vcvtneps2bf16 would flush them to zero). */
static inline __m512 bf16_widen(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m256i bf16_narrow(__m512 f)
{
    const __m512i u = _mm512_castps_si512(f);
    const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(0x7f800000));
    const __m512i hi = _mm512_srli_epi32(u, 16);
    const __m512i odd = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd), 16);
    const __m512i r = _mm512_mask_or_epi32(rounded, nan, hi, _mm512_set1_epi32(0x40));
    /* every lane is <= 0xffff: the truncating narrow is exact */
    return _mm512_cvtepi32_epi16(r);
}

#define H16_LOAD(name, widen)                                                         \
    static void name(float *dst, const uint16_t *src, int64_t n)                      \
    {                                                                                 \
        int64_t i = 0;                                                                \
        for (; i + 16 <= n; i += 16)                                                  \
            _mm512_storeu_ps(dst + i, widen(_mm256_loadu_si256((const __m256i *)(src + i)))); \
        if (i < n) {                                                                  \
            const __mmask16 m = lanes(n - i);                                         \
            _mm512_mask_storeu_ps(dst + i, m, widen(_mm256_maskz_loadu_epi16(m, src + i))); \
        }                                                                             \
    }

#define H16_STORE(name, narrow)                                                       \
    static void name(uint16_t *dst, const float *src, int64_t n)                      \
    {                                                                                 \
        int64_t i = 0;                                                                \
        for (; i + 16 <= n; i += 16)                                                  \
            _mm256_storeu_si256((__m256i *)(dst + i), narrow(_mm512_loadu_ps(src + i))); \
        if (i < n) {                                                                  \
            const __mmask16 m = lanes(n - i);                                         \
            _mm256_mask_storeu_epi16(dst + i, m, narrow(_mm512_maskz_loadu_ps(m, src + i))); \
        }                                                                             \
    }

H16_LOAD(f16_load_avx512, f16_widen)
H16_STORE(f16_store_avx512, f16_narrow)
H16_LOAD(bf16_load_avx512, bf16_widen)
H16_STORE(bf16_store_avx512, bf16_narrow)

/*
 * One block of at most 16 x 16: rows past `rows` are not read (zero lanes),
 * columns past `cols` neither, and only the `rows` x `cols` transposed
 * elements are stored. Within each 128-bit lane, unpack + shuffle transpose
 * 4 x 4 sub-blocks; shuffle_f32x4 then moves lane L of the four row groups
 * into output rows 4L..4L+3.
 */
static void transpose_block(float *dst, int64_t ld_dst, const float *src, int64_t ld_src,
                            int rows, int cols)
{
    const __mmask16 col_mask = lanes(cols), row_mask = lanes(rows);
    __m512 r[16];
    for (int i = 0; i < 16; i++)
        r[i] = i < rows ? _mm512_maskz_loadu_ps(col_mask, src + i * ld_src) : _mm512_setzero_ps();
    __m512 u[4][4]; /* u[g][k], lane L: column 4L+k of rows 4g..4g+3 */
    for (int g = 0; g < 4; g++) {
        const __m512 t0 = _mm512_unpacklo_ps(r[4 * g], r[4 * g + 1]);
        const __m512 t1 = _mm512_unpackhi_ps(r[4 * g], r[4 * g + 1]);
        const __m512 t2 = _mm512_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]);
        const __m512 t3 = _mm512_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]);
        u[g][0] = _mm512_shuffle_ps(t0, t2, 0x44);
        u[g][1] = _mm512_shuffle_ps(t0, t2, 0xee);
        u[g][2] = _mm512_shuffle_ps(t1, t3, 0x44);
        u[g][3] = _mm512_shuffle_ps(t1, t3, 0xee);
    }
    __m512 out[16];
    for (int k = 0; k < 4; k++) {
        const __m512 lo01 = _mm512_shuffle_f32x4(u[0][k], u[1][k], 0x44);
        const __m512 hi01 = _mm512_shuffle_f32x4(u[0][k], u[1][k], 0xee);
        const __m512 lo23 = _mm512_shuffle_f32x4(u[2][k], u[3][k], 0x44);
        const __m512 hi23 = _mm512_shuffle_f32x4(u[2][k], u[3][k], 0xee);
        out[k] = _mm512_shuffle_f32x4(lo01, lo23, 0x88);
        out[4 + k] = _mm512_shuffle_f32x4(lo01, lo23, 0xdd);
        out[8 + k] = _mm512_shuffle_f32x4(hi01, hi23, 0x88);
        out[12 + k] = _mm512_shuffle_f32x4(hi01, hi23, 0xdd);
    }
    for (int j = 0; j < cols; j++)
        _mm512_mask_storeu_ps(dst + j * ld_dst, row_mask, out[j]);
}

static void transpose_avx512(float *dst, int64_t ld_dst, const float *src, int64_t ld_src,
                             int64_t rows, int64_t cols)
{
    for (int64_t j = 0; j < cols; j += 16) {
        const int w = cols - j < 16 ? (int)(cols - j) : 16;
        for (int64_t i = 0; i < rows; i += 16) {
            const int h = rows - i < 16 ? (int)(rows - i) : 16;
            transpose_block(dst + j * ld_dst + i, ld_dst, src + i * ld_src + j, ld_src, h, w);
        }
    }
}

/* Each row's piece of a strip is one masked load and one masked store: the
 * plain copy of strips4.h made two overlapping 16-byte moves of each 6-float
 * piece and packed a 429-row window of 768 channels at 0.33 ns an element,
 * this at 0.22 (EMR, in L2). */
static void strips4_avx512(float *dst, int64_t strip_step, int64_t width, const float *const rows[4],
                           int64_t strips)
{
    const __mmask16 mask = (__mmask16)((1u << width) - 1u);
    for (int64_t s = 0; s < strips; s++, dst += strip_step) {
        const int64_t at = s * width;
        const __m512 r0 = _mm512_maskz_loadu_ps(mask, rows[0] + at), r1 = _mm512_maskz_loadu_ps(mask, rows[1] + at);
        const __m512 r2 = _mm512_maskz_loadu_ps(mask, rows[2] + at), r3 = _mm512_maskz_loadu_ps(mask, rows[3] + at);
        _mm512_mask_storeu_ps(dst, mask, r0);
        _mm512_mask_storeu_ps(dst + width, mask, r1);
        _mm512_mask_storeu_ps(dst + 2 * width, mask, r2);
        _mm512_mask_storeu_ps(dst + 3 * width, mask, r3);
    }
}

/*
 * Each of the 16 vectors v[n] summed across its lanes as a tree, l + 8,
 * then l + 4, l + 2, l + 1 (the order ctbc_dot_fn states for 16 lanes, and
 * ctbc_dot_bf16_fn), into sums[n]. Every step adds the upper half of each
 * vector's partial sums to the lower half, two vectors' halves side by
 * side in one register, so the 16 trees take 15 vector adds (a scalar
 * tree took 15 adds per vector, the longest part of a dot tile of many
 * channels and short reductions). After the four steps lane 4L + e holds
 * the sum of v[4e + L].
 */
_Static_assert(CTBC_DOT_ROWS == 4, "a dot tile's 4 rows x at most 4 columns are the 16 trees summed at once");

static inline void lanes_tree_sums16(const __m512 v[16], float sums[16])
{
    __m512 s1[8], s2[4], s3[2];
    for (int k = 0; k < 8; k++) /* l + 8: 256-bit halves; v[2k] low, v[2k+1] high */
        s1[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x44),
                              _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xee));
    for (int k = 0; k < 4; k++) /* l + 4: 128-bit quarters; lane L of s2[k] from v[4k + L] */
        s2[k] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * k], s1[2 * k + 1], 0x88),
                              _mm512_shuffle_f32x4(s1[2 * k], s1[2 * k + 1], 0xdd));
    for (int k = 0; k < 2; k++) /* l + 2: pairs within each 128-bit lane */
        s3[k] = _mm512_add_ps(_mm512_shuffle_ps(s2[2 * k], s2[2 * k + 1], 0x44),
                              _mm512_shuffle_ps(s2[2 * k], s2[2 * k + 1], 0xee));
    const __m512 s4 = _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], 0x88), /* l + 1 */
                                    _mm512_shuffle_ps(s3[0], s3[1], 0xdd));
    float lane[16];
    _mm512_storeu_ps(lane, s4);
    for (int n = 0; n < 16; n++)
        sums[n] = lane[4 * (n % 4) + n / 4];
}

/* An empty asm that takes v in a vector register and may change it: GCC
 * then loads v once, where it folded the load into each FMA using it
 * (dot_f32_tile_3: three loads of each row's chunk, the loads and not the
 * FMAs the limit). SIMDe's types are not registers of the host. */
#if defined(CTBC_KERNEL_VIA_SIMDE)
#define CTBC_IN_REGISTER(v) ((void)0)
#else
#define CTBC_IN_REGISTER(v) __asm__("" : "+v"(v))
#endif

/*
 * The dot kernels on 16 float32 lanes: the float32 one (ctbc_dot_fn, its
 * 16-lane order) and the bfloat16 one (ctbc_dot_bf16_fn) differ only in
 * their element, how many of them one load takes (CHUNK: a zmm), and the
 * step, STEP(acc, a chunk, b chunk). CTBC_DOT_ROWS rows against COLS
 * columns a tile; the last partial chunk is a masked load, REST(mask,
 * ptr), whose missing elements are zero on both sides. GCC takes a masked
 * load for one that may read the accumulators and keeps them in memory
 * around it: with every chunk masked, dot_bf16_tile_3 stored all twelve
 * to the stack after every step (T464 B12 Ci6 K3 Co1361 p6, gi_dot_bf16:
 * 7.5 -> 5.2 ms unmasked), and with the partial chunk after each tap's
 * whole ones, after every tap (dot_f32_tile_3 on 20 taps of 86 floats:
 * 5.6 -> 5.0 ns a chunk, in L1). So the partial chunks of all taps come
 * last.
 */
#define CTBC_DOT16_CHUNK(COLS, STEP, LOAD)                     \
    do {                                                       \
        __m512i bv[COLS];                                      \
        for (int j = 0; j < COLS; j++)                         \
            bv[j] = LOAD(rest, pb + j * args->b_col + p);      \
        for (int i = 0; i < CTBC_DOT_ROWS; i++) {              \
            __m512i av = LOAD(rest, pa + i * args->a_row + p); \
            CTBC_IN_REGISTER(av);                              \
            for (int j = 0; j < COLS; j++)                     \
                acc[i][j] = STEP(acc[i][j], av, bv[j]);        \
        }                                                      \
    } while (0)
#define CTBC_DOT16_WHOLE(rest, ptr) _mm512_loadu_si512((const void *)(ptr))
#define CTBC_DEFINE_DOT16_TILE(NAME, COLS, ELEM, CHUNK, REST, STEP)                                                \
    static void NAME##_tile_##COLS(const ctbc_dot_args *args, const ELEM *a, const ELEM *b, float *c, int64_t ldc) \
    {                                                                                                              \
        __m512 acc[CTBC_DOT_ROWS][COLS];                                                                           \
        for (int i = 0; i < CTBC_DOT_ROWS; i++)                                                                    \
            for (int j = 0; j < COLS; j++)                                                                         \
                acc[i][j] = _mm512_setzero_ps();                                                                   \
        const int64_t n_inner = args->n_inner, whole = n_inner / CHUNK * CHUNK;                                    \
        const uint64_t rest = (UINT64_C(1) << (n_inner % CHUNK)) - 1u;                                             \
        for (int64_t q = 0; q < args->n_outer; q++) {                                                              \
            const ELEM *pa = a + q * args->a_outer, *pb = b + q * args->b_outer;                                   \
            for (int64_t p = 0; p < whole; p += CHUNK)                                                             \
                CTBC_DOT16_CHUNK(COLS, STEP, CTBC_DOT16_WHOLE);                                                    \
        }                                                                                                          \
        for (int64_t q = 0; q < args->n_outer && whole < n_inner; q++) {                                           \
            const ELEM *pa = a + q * args->a_outer, *pb = b + q * args->b_outer;                                   \
            const int64_t p = whole;                                                                               \
            CTBC_DOT16_CHUNK(COLS, STEP, REST);                                                                    \
        }                                                                                                          \
        __m512 all[16]; /* all[4i + j]: acc[i][j], zero past COLS */                                              \
        float sums[16];                                                                                            \
        for (int n = 0; n < 16; n++)                                                                               \
            all[n] = n % 4 < COLS ? acc[n / 4][n % 4] : _mm512_setzero_ps();                                       \
        lanes_tree_sums16(all, sums);                                                                              \
        for (int i = 0; i < CTBC_DOT_ROWS; i++)                                                                    \
            for (int j = 0; j < COLS; j++)                                                                         \
                c[i * ldc + j] = sums[4 * i + j];                                                                  \
    }

/* NAME_rows: columns in groups of at most four, as even as they come (7 as
 * 4 + 3, not 4 + 2 + 1): a narrow tile has too few independent sums to
 * hide the step's latency. */
#define CTBC_DEFINE_DOT16(NAME, ELEM, CHUNK, REST, STEP)                                                      \
    CTBC_DEFINE_DOT16_TILE(NAME, 1, ELEM, CHUNK, REST, STEP)                                                  \
    CTBC_DEFINE_DOT16_TILE(NAME, 2, ELEM, CHUNK, REST, STEP)                                                  \
    CTBC_DEFINE_DOT16_TILE(NAME, 3, ELEM, CHUNK, REST, STEP)                                                  \
    CTBC_DEFINE_DOT16_TILE(NAME, 4, ELEM, CHUNK, REST, STEP)                                                  \
    static void NAME##_rows(const ctbc_dot_args *args, const ELEM *a, const ELEM *b, float *c, int64_t ldc)   \
    {                                                                                                         \
        static void (*const tiles[])(const ctbc_dot_args *, const ELEM *, const ELEM *, float *, int64_t) = { \
            NULL, NAME##_tile_1, NAME##_tile_2, NAME##_tile_3, NAME##_tile_4};                                \
        int64_t groups = (args->n + 3) / 4;                                                                   \
        for (int64_t j = 0; j < args->n; groups--) {                                                          \
            const int64_t cols = (args->n - j + groups - 1) / groups;                                         \
            tiles[cols](args, a, b + j * args->b_col, c + j, ldc);                                            \
            j += cols;                                                                                        \
        }                                                                                                     \
    }

/* acc + a * b over 16 floats, fused */
#define CTBC_F32_DOT_STEP(acc, av, bv) _mm512_fmadd_ps(_mm512_castsi512_ps(av), _mm512_castsi512_ps(bv), acc)
#define CTBC_F32_DOT_REST(rest, ptr) _mm512_castps_si512(_mm512_maskz_loadu_ps((__mmask16)(rest), (ptr)))
CTBC_DEFINE_DOT16(dot_f32, float, 16, CTBC_F32_DOT_REST, CTBC_F32_DOT_STEP)
#undef CTBC_F32_DOT_STEP
#undef CTBC_F32_DOT_REST

#if defined(CTBC_AVX512_WITH_BF16)

#ifndef CTBC_AS_BH
#define CTBC_AS_BH(v) ((__m512bh)(v)) /* 32 bfloat16 lanes, the same bits */
#endif

/* acc + both products of the pair x with each of 16 pairs of b */
#define CTBC_BF16_STEP(acc, x, bv) _mm512_dpbf16_ps(acc, CTBC_AS_BH(_mm512_set1_epi32((int32_t)(x))), CTBC_AS_BH(bv))

/* The 6 x 32 tile on bfloat16 pairs (see ctbc_ukr_bf16_fn): one broadcast
 * pair of A against 32 pairs of B per step, twice the reduction of a float32
 * step per instruction and half its memory traffic; and the narrow one,
 * 8 x 16, for GEMMs of at most 16 columns, as for float32. */
CTBC_DEFINE_TILE(MR, 2, ukr_avx512bf16_6x32, uint32_t, CTBC_BF16_STEP)
CTBC_DEFINE_TILE(MR_NARROW, 1, ukr_avx512bf16_8x16, uint32_t, CTBC_BF16_STEP)

/* acc + the products of a's 32 bfloat16 values with b's, in pairs */
#define CTBC_BF16_DOT_STEP(acc, av, bv) _mm512_dpbf16_ps(acc, CTBC_AS_BH(av), CTBC_AS_BH(bv))
#define CTBC_BF16_DOT_REST(rest, ptr) _mm512_maskz_loadu_epi16((__mmask32)(rest), (ptr))
CTBC_DEFINE_DOT16(dot_bf16, uint16_t, 32, CTBC_BF16_DOT_REST, CTBC_BF16_DOT_STEP)
#undef CTBC_BF16_DOT_STEP
#undef CTBC_BF16_DOT_REST

/* kernel_avx512_bf16.c: this file again, built with -mavx512bf16; the
 * entry is the AVX-512 one plus the bfloat16 pair kernels. */
const ctbc_kernel ctbc_kernel_avx512_bf16 = {.name = "avx512_bf16",
                                             .mr = MR,
                                             .nr = NR,
                                             .ukr = ukr_avx512_6x32,
                                             .gemv = gemv_avx512,
                                             .f16_load = f16_load_avx512,
                                             .bf16_load = bf16_load_avx512,
                                             .f16_store = f16_store_avx512,
                                             .bf16_store = bf16_store_avx512,
                                             .transpose = transpose_avx512,
                                             .ukr_bf16 = ukr_avx512bf16_6x32,
                                             .ukr_bf16_narrow = ukr_avx512bf16_8x16,
                                             .dot = dot_f32_rows,
                                             .dot_lanes = 16,
                                             .row_sums = row_sums,
                                             .strips4 = strips4_avx512,
                                             .bf16_pairs = bf16_pairs,
                                             .dot_bf16 = dot_bf16_rows,
                                             .mr_narrow = MR_NARROW,
                                             .ukr_narrow = ukr_avx512_8x16};

#else

const ctbc_kernel ctbc_kernel_avx512 = {.name = "avx512",
                                        .mr = MR,
                                        .nr = NR,
                                        .ukr = ukr_avx512_6x32,
                                        .gemv = gemv_avx512,
                                        .f16_load = f16_load_avx512,
                                        .bf16_load = bf16_load_avx512,
                                        .f16_store = f16_store_avx512,
                                        .bf16_store = bf16_store_avx512,
                                        .transpose = transpose_avx512,
                                        .dot = dot_f32_rows,
                                        .dot_lanes = 16,
                                        .row_sums = row_sums,
                                        .strips4 = strips4_avx512,
                                        .bf16_pairs = bf16_pairs,
                                        .mr_narrow = MR_NARROW,
                                        .ukr_narrow = ukr_avx512_8x16};

#endif

#undef CTBC_IN_REGISTER
#undef CTBC_DOT16_CHUNK
#undef CTBC_DOT16_WHOLE
#undef CTBC_DEFINE_DOT16_TILE
#undef CTBC_DEFINE_DOT16

#elif defined(CTBC_AVX512_WITH_BF16)

/* Built without the ISA flags: no kernel (ukr NULL), never picked. */
const ctbc_kernel ctbc_kernel_avx512_bf16 = {.name = "avx512_bf16", .mr = 6, .nr = 32};

#else

const ctbc_kernel ctbc_kernel_avx512 = {.name = "avx512", .mr = 6, .nr = 32};

#endif
