/*
 * The micro-kernel contract (libconvtbc/compute/kernels/ukernel.h), checked
 * for every kernel entry this program is linked with: portable, AVX2 (where
 * the CPU has it) and AVX-512, either built natively or built against SIMDe
 * (tests/test_ukernel_contract.py builds one program per AVX-512 variant:
 * the kernel sources are compiled in directly, their symbols being hidden
 * in the shared library).
 *
 * The reference is the portable kernel's arithmetic written out one element
 * at a time: C(i, j) = C(i, j) + sum, the sum taken from zero over q then p
 * in order, each step a fused multiply-add (fmaf) for the SIMD kernels and a
 * multiply then an add for the portable one (this file is compiled with
 * -ffp-contract=off); for the bfloat16 pair kernel, VDPBF16PS's steps as
 * ukernel.h states them (odd element first, subnormals flushed). So every kernel is held to the bits, on every edge
 * tile, stride layout and mode; the 16-bit conversions are held to
 * float_convert.h and the transpose to a copy.
 *
 * Usage: ukernel_contract [avx512] [avx512_bf16]   (the AVX-512 entries to
 * check too, which the driver names only where they may run).
 * Prints OK and returns 0 when every check passes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/float_convert.h"
#include "compute/kernels/ukernel.h"

#include "contract_checks.h"

static uint32_t bits(float f) { return ctbc_f32_bits(f); }

/* ---- the GEMM micro-kernel ---------------------------------------------- */

#define ARENA 65536
#define CENTER (ARENA / 2)
/* float32 bits, or bfloat16 pairs for ukr_bf16 (the kernels are compiled
 * apart, so they read these words as floats without aliasing concerns) */
static uint32_t arena_a[ARENA], arena_b[ARENA];

#define C_PAD 3 /* rows and columns of sentinels around the tile */
#define SENTINEL 0x7fa5a5a5u /* a NaN no kernel produces */
#define BF16_NAN_PAIR 0x7fc07fc0u

typedef struct {
    const char *name;
    int64_t a_row, a_inner, a_outer, b_inner, b_outer;
} layout;

/* The layouts the drivers use and a few they might: a packed mr-wide strip,
 * a row-major block, grad_input's backwards tap step (B rows of one call
 * shared between taps), negative and zero strides. Written as functions of
 * the tile and of n_inner; no two rows of A share an element (rows past the
 * edge hold NaN). */
static int make_layouts(layout *out, int mr, int nr, int64_t n_inner)
{
    int n = 0;
    out[n++] = (layout){"packed", 1, mr, mr * n_inner, nr, nr * n_inner};
    out[n++] = (layout){"row-major", 4 * n_inner + 7, 1, n_inner + 1, nr + 5, (nr + 5) * n_inner + 3};
    out[n++] = (layout){"tap-step", 1, mr, mr * n_inner + 2, nr + 2, -(int64_t)(nr + 2) * 3};
    out[n++] = (layout){"negative", -64, -1, -(n_inner + 2), -(int64_t)nr - 1, (nr + 1) * (n_inner + 1)};
    out[n++] = (layout){"zero", 2, 0, 0, 0, nr};
    return n;
}

/* A bfloat16 operand: mostly ordinary values, some subnormal, some so
 * small that products and partial sums fall below float32's normal range
 * (what VDPBF16PS flushes). */
static uint16_t random_bf16(void)
{
    const uint32_t kind = next_u32() % 16;
    if (kind == 0)
        return (uint16_t)((next_u32() & 0x8000u) | (1u + next_u32() % 0x7fu)); /* subnormal */
    if (kind == 1)
        return (uint16_t)((next_u32() & 0x8000u) | ((60u + next_u32() % 8u) << 7) | (next_u32() & 0x7fu));
    return ctbc_f32_to_bf16(random_value());
}

static uint32_t random_word(int bf16)
{
    return bf16 ? (uint32_t)random_bf16() | (uint32_t)random_bf16() << 16 : bits(random_value());
}

static float flush_subnormal(float x)
{
    return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x;
}

/* The sum of one element of C, as ukernel.h defines it for ukr (fused or
 * not) and for ukr_bf16 (pairs, odd element first, flushing). */
static float model_sum(int fused, int bf16, const ctbc_ukr_args *s, const uint32_t *a, const uint32_t *b,
                       int i, int j)
{
    float acc = 0.0f;
    for (int64_t q = 0; q < s->n_outer; q++)
        for (int64_t p = 0; p < s->n_inner; p++) {
            const uint32_t x = a[i * s->a_row + q * s->a_outer + p * s->a_inner];
            const uint32_t y = b[q * s->b_outer + p * s->b_inner + j];
            if (bf16) {
                for (int h = 1; h >= 0; h--) {
                    const float xh = flush_subnormal(ctbc_bf16_to_f32((uint16_t)(x >> (16 * h))));
                    const float yh = flush_subnormal(ctbc_bf16_to_f32((uint16_t)(y >> (16 * h))));
                    acc = flush_subnormal(fmaf(xh, yh, flush_subnormal(acc)));
                }
            } else {
                const float xf = ctbc_bits_f32(x), yf = ctbc_bits_f32(y);
                acc = fused ? fmaf(xf, yf, acc) : acc + xf * yf;
            }
        }
    return acc;
}

/* One call on tile m x n of the kernel's mr x nr: rows of A past m and
 * columns of B past n hold NaN (padding a caller discards), which must not
 * reach the m x n results; C outside the mr x nr tile must be untouched. */
static void check_ukr_call(const ctbc_kernel *k, int fused, int bf16, const layout *l, int64_t n_outer,
                           int64_t n_inner, int overwrite, int m, int n)
{
    const ctbc_ukr_args args = {.n_outer = n_outer, .n_inner = n_inner, .a_row = l->a_row,
                                .a_inner = l->a_inner, .a_outer = l->a_outer, .b_inner = l->b_inner,
                                .b_outer = l->b_outer, .overwrite = overwrite};
    const uint32_t nan = bf16 ? BF16_NAN_PAIR : bits(NAN);
    const uint32_t *a = arena_a + CENTER, *b = arena_b + CENTER;
    for (int i = 0; i < k->mr; i++)
        for (int64_t q = 0; q < n_outer; q++)
            for (int64_t p = 0; p < n_inner; p++)
                arena_a[CENTER + i * l->a_row + q * l->a_outer + p * l->a_inner] = i < m ? random_word(bf16) : nan;
    for (int64_t q = 0; q < n_outer; q++)
        for (int64_t p = 0; p < n_inner; p++)
            for (int j = 0; j < k->nr; j++)
                arena_b[CENTER + q * l->b_outer + p * l->b_inner + j] = j < n ? random_word(bf16) : nan;

    enum { LDC = CTBC_NR_MAX + 2 * C_PAD };
    float c[(CTBC_MR_MAX + 2 * C_PAD) * LDC], before[(CTBC_MR_MAX + 2 * C_PAD) * LDC];
    for (int e = 0; e < (k->mr + 2 * C_PAD) * LDC; e++)
        c[e] = ctbc_bits_f32(SENTINEL);
    float *tile = c + C_PAD * LDC + C_PAD;
    for (int i = 0; i < k->mr; i++)
        for (int j = 0; j < k->nr; j++)
            /* overwrite must not read C: a NaN there would show */
            tile[i * LDC + j] = overwrite ? NAN : (next_u32() % 5 == 0 ? -0.0f : random_value());
    memcpy(before, c, sizeof c);

    if (bf16)
        k->ukr_bf16(&args, a, b, tile, LDC);
    else
        k->ukr(&args, (const float *)(const void *)a, (const float *)(const void *)b, tile, LDC);

    const char *kind = bf16 ? "ukr_bf16" : "ukr";
    for (int r = 0; r < k->mr + 2 * C_PAD; r++)
        for (int col = 0; col < LDC; col++) {
            const int i = r - C_PAD, j = col - C_PAD;
            const uint32_t got = bits(c[r * LDC + col]);
            if (i < 0 || i >= k->mr || j < 0 || j >= k->nr) {
                CHECK(got == SENTINEL, "%s %s %s: C(%d, %d) outside the tile was written", k->name, kind, l->name,
                      i, j);
            } else if (i < m && j < n) {
                const float old = overwrite ? 0.0f : before[r * LDC + col];
                const uint32_t want = bits(old + model_sum(fused, bf16, &args, a, b, i, j));
                CHECK(got == want,
                      "%s %s %s n_outer %lld n_inner %lld %s tile %dx%d: C(%d, %d) = %08x, want %08x", k->name,
                      kind, l->name, (long long)n_outer, (long long)n_inner,
                      overwrite ? "overwrite" : "accumulate", m, n, i, j, got, want);
            }
        }
}

static void check_ukr(const ctbc_kernel *k, int fused, int bf16)
{
    static const int64_t n_outers[] = {0, 1, 2, 3}, n_inners[] = {0, 1, 2, 5};
    layout layouts[8];
    for (size_t a = 0; a < sizeof n_outers / sizeof *n_outers; a++)
        for (size_t b = 0; b < sizeof n_inners / sizeof *n_inners; b++) {
            const int nl = make_layouts(layouts, k->mr, k->nr, n_inners[b]);
            for (int l = 0; l < nl; l++)
                for (int overwrite = 0; overwrite < 2; overwrite++) {
                    /* every edge tile on the plainest layout, the full tile
                     * and a few edges on the others */
                    if (l == 0 && a == 2 && b == 2) {
                        for (int m = 1; m <= k->mr; m++)
                            for (int n = 1; n <= k->nr; n++)
                                check_ukr_call(k, fused, bf16, &layouts[l], n_outers[a], n_inners[b], overwrite, m,
                                               n);
                    } else {
                        const int64_t no = n_outers[a], ni = n_inners[b];
                        check_ukr_call(k, fused, bf16, &layouts[l], no, ni, overwrite, k->mr, k->nr);
                        check_ukr_call(k, fused, bf16, &layouts[l], no, ni, overwrite, 1, 1);
                        check_ukr_call(k, fused, bf16, &layouts[l], no, ni, overwrite, k->mr > 1 ? k->mr - 1 : 1,
                                       k->nr - 3);
                    }
                }
        }
}

/* ---- GEMV --------------------------------------------------------------- */

static void check_gemv(const ctbc_kernel *k, int fused)
{
    static const int64_t rows[] = {0, 1, 2, 7, 33};
    static const int64_t ns[] = {8, 16, 24, 56, 64, 72, 120, 128, 200};
    static const int64_t a_steps[] = {1, 3, -2, 0};
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
        for (size_t t = 0; t < sizeof ns / sizeof *ns; t++)
            for (size_t s = 0; s < sizeof a_steps / sizeof *a_steps; s++)
                for (int neg = 0; neg < 2; neg++) {
                    const int64_t n = ns[t], n_rows = rows[r], a_step = a_steps[s];
                    const int64_t b_row = neg ? -(n + 5) : n + 3;
                    static float ga[ARENA], gb[ARENA];
                    const float *a = ga + CENTER, *b = gb + CENTER;
                    for (int64_t p = 0; p < n_rows; p++) {
                        ga[CENTER + p * a_step] = random_value();
                        for (int64_t j = 0; j < n; j++)
                            gb[CENTER + p * b_row + j] = random_value();
                    }
                    float y[200 + 16], before[200 + 16];
                    for (int64_t j = 0; j < n + 16; j++)
                        y[j] = j < n ? random_value() : ctbc_bits_f32(SENTINEL);
                    memcpy(before, y, sizeof y);
                    k->gemv(n_rows, n, a, a_step, b, b_row, y);
                    for (int64_t j = 0; j < n + 16; j++) {
                        if (j >= n) {
                            CHECK(bits(y[j]) == SENTINEL, "%s gemv n %lld: y[%lld] past n written", k->name,
                                  (long long)n, (long long)j);
                            continue;
                        }
                        float acc = 0.0f;
                        for (int64_t p = 0; p < n_rows; p++) {
                            const float x = a[p * a_step], v = b[p * b_row + j];
                            acc = fused ? fmaf(x, v, acc) : acc + x * v;
                        }
                        CHECK(bits(y[j]) == bits(before[j] + acc),
                              "%s gemv rows %lld n %lld a_step %lld b_row %lld: y[%lld] = %08x, want %08x", k->name,
                              (long long)n_rows, (long long)n, (long long)a_step, (long long)b_row, (long long)j,
                              bits(y[j]), bits(before[j] + acc));
                    }
                }
}

/* ---- 16-bit conversions ------------------------------------------------- */

#define GUARD 20 /* elements checked untouched past the end */

static void check_widen(const char *kname, const char *what, ctbc_h16_load_fn load,
                        float (*ref)(uint16_t))
{
    /* all 65536 values in one call, then every tail length at odd offsets */
    static uint16_t in[65536];
    static float out[65536 + GUARD];
    for (uint32_t h = 0; h < 65536; h++)
        in[h] = (uint16_t)h;
    load(out, in, 65536);
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++)
        if (bits(out[h]) != bits(ref((uint16_t)h)) && bad++ < 5)
            CHECK(0, "%s %s widen %04x: %08x, want %08x", kname, what, h, bits(out[h]), bits(ref((uint16_t)h)));
    failures += bad > 5 ? bad - 5 : 0;
    for (int64_t n = 0; n <= 40; n++)
        for (int64_t off = 0; off < 3; off++) {
            const uint16_t *src = in + 0x7bf0 + off * 7; /* around Inf and NaN */
            for (int64_t i = 0; i < n + GUARD; i++)
                out[i] = ctbc_bits_f32(SENTINEL);
            load(out, src, n);
            for (int64_t i = 0; i < n + GUARD; i++)
                CHECK(bits(out[i]) == (i < n ? bits(ref(src[i])) : SENTINEL), "%s %s widen, n %lld: element %lld",
                      kname, what, (long long)n, (long long)i);
        }
}

/* float32 patterns for narrowing: every exponent, both signs, with
 * mantissas at and around each rounding boundary (the ties of every
 * float16 subnormal shift and of bfloat16), then random patterns. */
static size_t narrow_patterns(uint32_t *p, size_t cap)
{
    size_t n = 0;
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t e = 0; e < 256; e++) {
            for (int b = 0; b < 23; b++) {
                const uint32_t one = 1u << b;
                const uint32_t m[] = {one, one - 1, one + 1, one | (one << 1), (one << 1) - 1, one | 1u,
                                      (0x7fffffu & ~(one - 1))};
                for (size_t t = 0; t < sizeof m / sizeof *m && n < cap; t++)
                    p[n++] = sign << 31 | e << 23 | (m[t] & 0x7fffffu);
            }
            if (n + 2 <= cap) {
                p[n++] = sign << 31 | e << 23;
                p[n++] = sign << 31 | e << 23 | 0x7fffffu;
            }
        }
    while (n < cap)
        p[n++] = next_u32() ^ (next_u32() << 16);
    return n;
}

static void check_narrow(const char *kname, const char *what, ctbc_h16_store_fn store,
                         uint16_t (*ref)(float))
{
    enum { N = 1 << 20 };
    static uint32_t pat[N];
    static float in[N];
    static uint16_t out[N + GUARD];
    const size_t n_pat = narrow_patterns(pat, N);
    memcpy(in, pat, n_pat * sizeof *pat);
    store(out, in, (int64_t)n_pat);
    int bad = 0;
    for (size_t i = 0; i < n_pat; i++)
        if (out[i] != ref(in[i]) && bad++ < 5)
            CHECK(0, "%s %s narrow %08x: %04x, want %04x", kname, what, pat[i], out[i], ref(in[i]));
    failures += bad > 5 ? bad - 5 : 0;
    for (int64_t n = 0; n <= 40; n++)
        for (int64_t off = 0; off < 3; off++) {
            const float *src = in + off * 5;
            for (int64_t i = 0; i < n + GUARD; i++)
                out[i] = 0xa5a5;
            store(out, src, n);
            for (int64_t i = 0; i < n + GUARD; i++)
                CHECK(out[i] == (i < n ? ref(src[i]) : 0xa5a5), "%s %s narrow, n %lld: element %lld", kname, what,
                      (long long)n, (long long)i);
        }
}

/* ---- transpose ---------------------------------------------------------- */

static void check_transpose(const ctbc_kernel *k)
{
    enum { MAXD = 40, LD_PAD = 3 };
    static float src[MAXD * (MAXD + LD_PAD)], dst[(MAXD + GUARD) * (MAXD + LD_PAD)];
    for (size_t i = 0; i < sizeof src / sizeof *src; i++)
        src[i] = ctbc_bits_f32(next_u32()); /* any bits, NaN payloads included */
    for (int64_t rows = 0; rows <= MAXD; rows++)
        for (int64_t cols = 0; cols <= MAXD; cols++) {
            const int64_t ld_src = cols + (rows + cols) % LD_PAD, ld_dst = rows + (rows * cols) % LD_PAD;
            const int64_t dst_len = (cols + 1) * (ld_dst + 1) + GUARD;
            for (int64_t e = 0; e < dst_len; e++)
                dst[e] = ctbc_bits_f32(SENTINEL);
            k->transpose(dst, ld_dst, src, ld_src, rows, cols);
            for (int64_t e = 0; e < dst_len; e++) {
                const int64_t j = e / (ld_dst ? ld_dst : 1), i = e % (ld_dst ? ld_dst : 1);
                const int inside = ld_dst > 0 && j < cols && i < rows;
                const uint32_t want = inside ? bits(src[i * ld_src + j]) : SENTINEL;
                CHECK(bits(dst[e]) == want, "%s transpose %lldx%lld (ld %lld, %lld): dst[%lld] = %08x, want %08x",
                      k->name, (long long)rows, (long long)cols, (long long)ld_src, (long long)ld_dst, (long long)e,
                      bits(dst[e]), want);
            }
        }
}

/* ---- four rows into packed strips --------------------------------------- */

/* ctbc_strips4_fn: an exact copy of every width up to 16 (the masks of the
 * AVX-512 moves), rows apart in memory and not, nothing written past the
 * strips' pieces (the gaps between strips keep their sentinels). */
static void check_strips4(const ctbc_kernel *k)
{
    enum { MAX_W = 16, MAX_S = 5, ROW = MAX_W * MAX_S + 3, GAP = 5 };
    static float rows[4 * ROW], dst[MAX_S * (4 * MAX_W + GAP) + GUARD];
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        rows[i] = ctbc_bits_f32(next_u32()); /* any bits, NaN payloads included */
    for (int64_t width = 1; width <= MAX_W; width++)
        for (int64_t strips = 0; strips <= MAX_S; strips++)
            for (int order = 0; order < 2; order++) {
                /* rows in order, or reversed and one float off */
                const float *r[4];
                for (int i = 0; i < 4; i++)
                    r[i] = order ? rows + (3 - i) * ROW + 1 : rows + i * ROW;
                const int64_t step = 4 * width + GAP, len = strips * step + GUARD;
                for (int64_t e = 0; e < len; e++)
                    dst[e] = ctbc_bits_f32(SENTINEL);
                k->strips4(dst, step, width, r, strips);
                for (int64_t e = 0; e < len; e++) {
                    const int64_t s = e / step, at = e % step, i = at / width, j = at % width;
                    const int inside = s < strips && at < 4 * width;
                    const uint32_t want = inside ? bits(r[i][s * width + j]) : SENTINEL;
                    CHECK(bits(dst[e]) == want,
                          "%s strips4 width %lld strips %lld order %d: dst[%lld] = %08x, want %08x", k->name,
                          (long long)width, (long long)strips, order, (long long)e, bits(dst[e]), want);
                }
            }
}

/* ---- the dot kernel ------------------------------------------------------ */

/* The two orders of ctbc_dot_fn written out. dot_lanes 8 (dot_rows.h):
 * lane l of each (row, column) sums the products of p = l (mod 8) below
 * the last multiple of 8, over q then p; the lanes are added 0..7; the
 * remaining p are summed separately over q then p, and that sum added
 * last. Multiplies and adds, never fused. */
static float dot_model_8(const ctbc_dot_args *s, const float *a, const float *b, int64_t i, int64_t j)
{
    const int64_t full = s->n_inner / 8 * 8;
    float lanes[8] = {0}, tail = 0.0f;
    for (int64_t q = 0; q < s->n_outer; q++)
        for (int64_t p = 0; p < s->n_inner; p++) {
            const float x = a[i * s->a_row + q * s->a_outer + p] * b[j * s->b_col + q * s->b_outer + p];
            if (p < full)
                lanes[p % 8] += x;
            else
                tail += x;
        }
    float sum = lanes[0];
    for (int l = 1; l < 8; l++)
        sum += lanes[l];
    return sum + tail;
}

/* The 16 lanes added as a tree: l + 8, then l + 4, l + 2, l + 1. */
static float lanes_tree(float *lanes)
{
    for (int half = 8; half >= 1; half /= 2)
        for (int l = 0; l < half; l++)
            lanes[l] += lanes[l + half];
    return lanes[0];
}

/* dot_lanes 16: per lane, each q, its element of each whole 16-element
 * chunk as a fused multiply-add; then each q's partial chunk (padded with
 * zeros on both sides); then the lane tree. */
static float dot_model_16(const ctbc_dot_args *s, const float *a, const float *b, int64_t i, int64_t j)
{
    const int64_t whole = s->n_inner / 16 * 16, padded = (s->n_inner + 15) / 16 * 16;
    float lanes[16] = {0};
    for (int part = 0; part < 2; part++) /* the whole chunks, then the partial ones */
        for (int64_t q = 0; q < s->n_outer; q++)
            for (int64_t p = part ? whole : 0; p < (part ? padded : whole); p++) {
                const float x = p < s->n_inner ? a[i * s->a_row + q * s->a_outer + p] : 0.0f;
                const float y = p < s->n_inner ? b[j * s->b_col + q * s->b_outer + p] : 0.0f;
                lanes[p % 16] = fmaf(x, y, lanes[p % 16]);
            }
    return lanes_tree(lanes);
}

static void check_dot(const ctbc_kernel *k)
{
    static float a[4096], b[4096];
    for (int i = 0; i < 4096; i++)
        a[i] = random_value(), b[i] = random_value();
    a[17] = NAN, b[33] = INFINITY; /* they propagate like any value */
    CHECK(k->dot_lanes == 8 || k->dot_lanes == 16, "%s: dot_lanes %d is neither order", k->name, k->dot_lanes);
    const int64_t inners[] = {0, 1, 7, 8, 9, 16, 17, 29, 32, 45};
    for (size_t ii = 0; ii < sizeof inners / sizeof *inners; ii++)
        for (int64_t n_outer = 0; n_outer <= 3; n_outer++)
            for (int64_t n = 1; n <= 9; n++)
                for (int64_t a_row = 0; a_row <= 40; a_row += 40) { /* 0: one row read four times */
                    const int64_t inner = inners[ii];
                    const ctbc_dot_args s = {.n = n, .n_outer = n_outer, .n_inner = inner, .a_row = a_row,
                                             .a_outer = 200, .b_col = 3 * 40 + 1, .b_outer = 40};
                    float c[CTBC_DOT_ROWS * 16 + 1];
                    for (int x = 0; x < CTBC_DOT_ROWS * 16 + 1; x++)
                        c[x] = NAN;
                    const float guard = 12345.0f;
                    c[CTBC_DOT_ROWS * 16] = guard;
                    k->dot(&s, a, b, c, 16);
                    for (int64_t i = 0; i < CTBC_DOT_ROWS; i++)
                        for (int64_t j = 0; j < n; j++) {
                            const float want = k->dot_lanes == 16 ? dot_model_16(&s, a, b, i, j)
                                                                  : dot_model_8(&s, a, b, i, j);
                            const float got = c[i * 16 + j];
                            CHECK(bits(got) == bits(want) || (isnan(got) && isnan(want)),
                                  "%s dot: inner %lld outer %lld n %lld a_row %lld (%lld,%lld): %a, want %a", k->name,
                                  (long long)inner, (long long)n_outer, (long long)n, (long long)a_row, (long long)i,
                                  (long long)j, got, want);
                        }
                    CHECK(c[CTBC_DOT_ROWS * 16] == guard, "%s dot wrote past its tile", k->name);
                }
}

/* ctbc_dot_bf16_fn's order written out: per lane, each q, each whole
 * 32-element chunk, then each q's partial chunk (padded with zeros), the
 * odd then the even element of the lane's pair as a flushing fused
 * multiply-add; then the lane tree. */
static float dot_bf16_model(const ctbc_dot_args *s, const uint16_t *a, const uint16_t *b, int64_t i, int64_t j)
{
    const int64_t whole = s->n_inner / 32 * 32, padded = (s->n_inner + 31) / 32 * 32;
    float lanes[16] = {0};
    for (int part = 0; part < 2; part++) /* the whole chunks, then the partial ones */
        for (int64_t q = 0; q < s->n_outer; q++)
            for (int64_t p = part ? whole : 0; p < (part ? padded : whole); p += 2)
                for (int h = 1; h >= 0; h--) {
                    const int64_t e = p + h;
                    const float x = e < s->n_inner ? ctbc_bf16_to_f32(a[i * s->a_row + q * s->a_outer + e]) : 0.0f;
                    const float y = e < s->n_inner ? ctbc_bf16_to_f32(b[j * s->b_col + q * s->b_outer + e]) : 0.0f;
                    float *acc = &lanes[p % 32 / 2];
                    *acc = flush_subnormal(fmaf(flush_subnormal(x), flush_subnormal(y), flush_subnormal(*acc)));
                }
    return lanes_tree(lanes);
}

static void check_dot_bf16(const ctbc_kernel *k)
{
    static uint16_t a[8192], b[8192];
    for (int i = 0; i < 8192; i++)
        a[i] = random_bf16(), b[i] = random_bf16();
    a[17] = 0x7fc0u, b[33] = 0x7f80u; /* NaN and Inf propagate like any value */
    const int64_t inners[] = {0, 1, 2, 31, 32, 33, 64, 77};
    for (size_t ii = 0; ii < sizeof inners / sizeof *inners; ii++)
        for (int64_t n_outer = 0; n_outer <= 3; n_outer++)
            for (int64_t n = 1; n <= 9; n++)
                for (int64_t a_row = 0; a_row <= 81; a_row += 81) { /* 0: one row read four times */
                    const int64_t inner = inners[ii];
                    /* odd strides: rows and taps start at odd elements */
                    const ctbc_dot_args s = {.n = n, .n_outer = n_outer, .n_inner = inner, .a_row = a_row,
                                             .a_outer = 401, .b_col = 3 * 81 + 1, .b_outer = 81};
                    float c[CTBC_DOT_ROWS * 16 + 1];
                    for (int x = 0; x < CTBC_DOT_ROWS * 16 + 1; x++)
                        c[x] = NAN;
                    const float guard = 12345.0f;
                    c[CTBC_DOT_ROWS * 16] = guard;
                    k->dot_bf16(&s, a, b, c, 16);
                    for (int64_t i = 0; i < CTBC_DOT_ROWS; i++)
                        for (int64_t j = 0; j < n; j++) {
                            const float want = dot_bf16_model(&s, a, b, i, j), got = c[i * 16 + j];
                            CHECK(bits(got) == bits(want) || (isnan(got) && isnan(want)),
                                  "%s dot_bf16: inner %lld outer %lld n %lld a_row %lld (%lld,%lld): %a, want %a",
                                  k->name, (long long)inner, (long long)n_outer, (long long)n, (long long)a_row,
                                  (long long)i, (long long)j, got, want);
                        }
                    CHECK(c[CTBC_DOT_ROWS * 16] == guard, "%s dot_bf16 wrote past its tile", k->name);
                }
}

/* ---- the row sums (grad_bias) ------------------------------------------- */

/* ctbc_row_sums_fn's order written out: row r goes to lane (lane + r) % 8,
 * one add per element, rows in order. Lanes start from values of their own
 * (a call continues the sums of the call before), and the elements past n
 * of each lane are never touched. */
static void check_row_sums(const ctbc_kernel *k)
{
    enum { LANE_STRIDE = 80, ROWS_MAX = 19 };
    static float rows[ROWS_MAX * 100], got[CTBC_ROW_SUM_LANES * LANE_STRIDE], want[CTBC_ROW_SUM_LANES * LANE_STRIDE];
    for (int i = 0; i < ROWS_MAX * 100; i++)
        rows[i] = random_value();
    rows[5] = NAN, rows[130] = INFINITY, rows[231] = -INFINITY; /* they propagate like any value */
    const int64_t ns[] = {0, 1, 3, 15, 16, 17, 33, 64, 71};
    const int64_t strides[] = {0, 71, 100};
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
        for (size_t si = 0; si < sizeof strides / sizeof *strides; si++)
            for (int64_t n_rows = 0; n_rows <= ROWS_MAX; n_rows += 3)
                for (int lane = 0; lane < CTBC_ROW_SUM_LANES; lane += 3) {
                    const int64_t n = ns[ni], stride = strides[si];
                    if (stride && stride < n)
                        continue;
                    for (int e = 0; e < CTBC_ROW_SUM_LANES * LANE_STRIDE; e++)
                        got[e] = want[e] = (float)(e % 7) - 3.25f;
                    int next = lane;
                    for (int64_t r = 0; r < n_rows; r++) {
                        for (int64_t o = 0; o < n; o++)
                            want[next * LANE_STRIDE + o] += rows[r * stride + o];
                        next = (next + 1) % CTBC_ROW_SUM_LANES;
                    }
                    const int returned = k->row_sums(got, LANE_STRIDE, lane, rows, stride, n_rows, n);
                    CHECK(returned == next, "%s row_sums: n %lld rows %lld lane %d returned lane %d, want %d",
                          k->name, (long long)n, (long long)n_rows, lane, returned, next);
                    for (int e = 0; e < CTBC_ROW_SUM_LANES * LANE_STRIDE; e++)
                        CHECK(bits(got[e]) == bits(want[e]) || (isnan(got[e]) && isnan(want[e])),
                              "%s row_sums: n %lld stride %lld rows %lld lane %d: element %d is %a, want %a",
                              k->name, (long long)n, (long long)stride, (long long)n_rows, lane, e, got[e],
                              want[e]);
                }
}

/* ---- the bfloat16 pairs (packing) ---------------------------------------- */

/* ctbc_bf16_pairs_fn written out: pair i of the rows in strip i / width at
 * i % width, zero pairs to the strip's end, nothing else written; the
 * flag set exactly when some value is Inf or NaN. */
static void check_bf16_pairs(const ctbc_kernel *k)
{
    enum { N_MAX = 100, OUT = 400 };
    static uint16_t first[N_MAX], second[N_MAX];
    static uint32_t got[OUT];
    const int64_t ns[] = {0, 1, 15, 16, 17, 31, 32, 33, 64, 77, 100};
    const int64_t widths[] = {16, 32};
    for (int special = 0; special <= 3; special++)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
            for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
                const int64_t n = ns[ni], width = widths[wi], stride = width + 3;
                for (int i = 0; i < N_MAX; i++) {
                    first[i] = (uint16_t)((int)(random_value() * 30000.0f) & 0x7f7f); /* finite */
                    second[i] = (uint16_t)((int)(random_value() * 30000.0f) & 0xff7f);
                }
                /* 1: an Inf in the first row, 2: a NaN in the second, 3: a NaN past n (not read) */
                if (special == 1 && n > 0)
                    first[n - 1] = 0x7f80;
                if (special == 2 && n > 0)
                    second[n / 2] = 0xffc1;
                if (special == 3 && n < N_MAX)
                    first[n] = 0x7fc0;
                for (int e = 0; e < OUT; e++)
                    got[e] = SENTINEL;
                const int flagged = k->bf16_pairs(got, stride, width, first, second, n);
                const int want_flag = (special == 1 || special == 2) && n > 0;
                CHECK(!flagged == !want_flag, "%s bf16_pairs n %lld width %lld case %d: flag %d, want %d", k->name,
                      (long long)n, (long long)width, special, flagged, want_flag);
                const int64_t strips = (n + width - 1) / width;
                for (int64_t e = 0; e < OUT; e++) {
                    const int64_t s = e / stride, i = e % stride, c = s * width + i;
                    uint32_t want = SENTINEL;
                    if (s < strips && i < width)
                        want = c < n ? (uint32_t)first[c] | (uint32_t)second[c] << 16 : 0u;
                    CHECK(got[e] == want, "%s bf16_pairs n %lld width %lld: dst[%lld] = %08x, want %08x", k->name,
                          (long long)n, (long long)width, (long long)e, got[e], want);
                }
            }
}

/* ---- the entries -------------------------------------------------------- */

static void check_entry(const ctbc_kernel *k, int fused)
{
    const int before = failures;
    CHECK(k->ukr && k->gemv && k->f16_load && k->bf16_load && k->f16_store && k->bf16_store && k->transpose && k->dot &&
              k->row_sums && k->bf16_pairs && k->strips4,
          "%s: an entry of a built ISA leaves a helper NULL", k->name);
    CHECK(k->mr >= 1 && k->mr <= CTBC_MR_MAX && k->nr >= 4 && k->nr <= CTBC_NR_MAX && k->nr % 8 == 0,
          "%s: tile %dx%d outside the scratch bounds", k->name, k->mr, k->nr);
    if (failures != before)
        return;
    check_ukr(k, fused, 0);
    if (k->ukr_narrow) {
        /* the narrow tile as an entry of its own, held to ukr's bits */
        ctbc_kernel narrow = *k;
        narrow.mr = k->mr_narrow, narrow.nr = CTBC_NR_NARROW, narrow.ukr = k->ukr_narrow;
        narrow.ukr_bf16 = k->ukr_bf16_narrow;
        CHECK(narrow.mr >= 1 && narrow.mr <= CTBC_MR_MAX, "%s: narrow tile %dx%d outside the scratch bounds",
              k->name, narrow.mr, narrow.nr);
        if (narrow.mr >= 1 && narrow.mr <= CTBC_MR_MAX) {
            check_ukr(&narrow, fused, 0);
            if (narrow.ukr_bf16)
                check_ukr(&narrow, 1, 1);
        }
    }
    CHECK(!k->ukr_bf16 == !k->dot_bf16, "%s: the bfloat16 pair kernels come together", k->name);
    CHECK(!k->ukr_bf16_narrow || (k->ukr_bf16 && k->ukr_narrow),
          "%s: a narrow bfloat16 tile without the wide one or the float32 narrow one", k->name);
    if (k->ukr_bf16)
        check_ukr(k, 1, 1);
    if (k->dot_bf16)
        check_dot_bf16(k);
    check_gemv(k, fused);
    check_widen(k->name, "float16", k->f16_load, ctbc_f16_to_f32);
    check_widen(k->name, "bfloat16", k->bf16_load, ctbc_bf16_to_f32);
    check_narrow(k->name, "float16", k->f16_store, ctbc_f32_to_f16);
    check_narrow(k->name, "bfloat16", k->bf16_store, ctbc_f32_to_bf16);
    check_transpose(k);
    check_strips4(k);
    check_dot(k);
    check_row_sums(k);
    check_bf16_pairs(k);
    printf("%s: %s\n", k->name, failures == before ? "ok" : "FAILED");
}

/* Arguments: the AVX-512 entries to check besides portable and AVX2
 * ("avx512", "avx512_bf16"), those the driver knows this CPU can run. */
int main(int argc, char **argv)
{
    check_entry(&ctbc_kernel_portable, 0);
    CHECK(!ctbc_kernel_portable.ukr_bf16 && !ctbc_kernel_avx2.ukr_bf16 && !ctbc_kernel_avx512.ukr_bf16,
          "only the AVX512_BF16 entry has the bfloat16 pair kernel");
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        CHECK(ctbc_kernel_avx2.ukr, "the AVX2 kernel was not built");
        if (ctbc_kernel_avx2.ukr)
            check_entry(&ctbc_kernel_avx2, 1);
    } else {
        printf("avx2: skipped (CPU)\n");
    }
#endif
    for (int i = 1; i < argc; i++) {
        const ctbc_kernel *k = strcmp(argv[i], "avx512") == 0        ? &ctbc_kernel_avx512
                               : strcmp(argv[i], "avx512_bf16") == 0 ? &ctbc_kernel_avx512_bf16
                                                                     : NULL;
        CHECK(k && k->ukr, "%s: no such kernel was built", argv[i]);
        if (k && k->ukr) {
            CHECK(strcmp(argv[i], "avx512_bf16") != 0 || k->ukr_bf16, "avx512_bf16 lacks ukr_bf16");
            check_entry(k, 1);
        }
    }
    if (failures) {
        printf("%d checks failed\n", failures);
        return 1;
    }
    printf("OK\n");
    return 0;
}
