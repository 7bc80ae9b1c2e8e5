/*
 * The 8-lane dot-product kernel (ctbc_dot_fn in ukernel.h, dot_lanes 8),
 * written once with GCC's vector extension and included by the portable
 * and AVX2 kernel files, so each compiles the same arithmetic with its own
 * instructions (AVX-512 has a 16-lane one of its own, kernel_avx512.c).
 * The project is built as ISO C11, where GCC does not contract a * b + c
 * into an FMA, so both give the same bits.
 *
 * Each accumulator holds eight partial sums (lane l takes the products of
 * p = l, l + 8, ...); at the end the lanes are added in order 0..7, then
 * the products of the p past the last multiple of 8, in order.
 */
#ifndef CONVTBC_COMPUTE_KERNELS_DOT_ROWS_H
#define CONVTBC_COMPUTE_KERNELS_DOT_ROWS_H

#include <string.h>

#include "compute/kernels/ukernel.h"

typedef float ctbc_dot_lanes __attribute__((vector_size(32)));

/* By pointer, not by value: the portable build has no 32-byte registers to
 * pass vectors in (GCC warns about the ABI). */
static inline void dot_load(ctbc_dot_lanes *v, const float *p) { memcpy(v, p, sizeof *v); }

static inline float dot_lane_sum(const ctbc_dot_lanes *v)
{
    float s = (*v)[0];
    for (int l = 1; l < 8; l++)
        s += (*v)[l];
    return s;
}

/* CTBC_DOT_ROWS rows against COLS columns, the register tile of one call. */
#define CTBC_DEFINE_DOT_TILE(COLS)                                                                              \
    static void dot_tile_##COLS(const ctbc_dot_args *args, const float *a, const float *b, float *c, int64_t ldc) \
    {                                                                                                           \
        ctbc_dot_lanes acc[CTBC_DOT_ROWS][COLS];                                                                \
        float tail[CTBC_DOT_ROWS][COLS];                                                                        \
        for (int i = 0; i < CTBC_DOT_ROWS; i++)                                                                 \
            for (int j = 0; j < COLS; j++) {                                                                    \
                acc[i][j] = (ctbc_dot_lanes){0, 0, 0, 0, 0, 0, 0, 0};                                           \
                tail[i][j] = 0.0f;                                                                              \
            }                                                                                                   \
        const int64_t full = args->n_inner / 8 * 8;                                                             \
        for (int64_t q = 0; q < args->n_outer; q++) {                                                           \
            const float *pa = a + q * args->a_outer, *pb = b + q * args->b_outer;                               \
            for (int64_t p = 0; p < full; p += 8) {                                                             \
                ctbc_dot_lanes bv[COLS];                                                                        \
                for (int j = 0; j < COLS; j++)                                                                  \
                    dot_load(&bv[j], pb + j * args->b_col + p);                                                 \
                for (int i = 0; i < CTBC_DOT_ROWS; i++) {                                                       \
                    ctbc_dot_lanes av;                                                                          \
                    dot_load(&av, pa + i * args->a_row + p);                                                    \
                    for (int j = 0; j < COLS; j++)                                                              \
                        acc[i][j] += av * bv[j];                                                                \
                }                                                                                               \
            }                                                                                                   \
            for (int64_t p = full; p < args->n_inner; p++)                                                      \
                for (int i = 0; i < CTBC_DOT_ROWS; i++)                                                         \
                    for (int j = 0; j < COLS; j++)                                                              \
                        tail[i][j] += pa[i * args->a_row + p] * pb[j * args->b_col + p];                        \
        }                                                                                                       \
        for (int i = 0; i < CTBC_DOT_ROWS; i++)                                                                 \
            for (int j = 0; j < COLS; j++)                                                                      \
                c[i * ldc + j] = dot_lane_sum(&acc[i][j]) + tail[i][j];                                         \
    }

CTBC_DEFINE_DOT_TILE(1)
CTBC_DEFINE_DOT_TILE(2)

/* Columns in pairs, an odd last one alone; rows always CTBC_DOT_ROWS. */
static void dot_rows(const ctbc_dot_args *args, const float *a, const float *b, float *c, int64_t ldc)
{
    int64_t j = 0;
    for (; j + 2 <= args->n; j += 2)
        dot_tile_2(args, a, b + j * args->b_col, c + j, ldc);
    if (j < args->n)
        dot_tile_1(args, a, b + j * args->b_col, c + j, ldc);
}

#endif /* CONVTBC_COMPUTE_KERNELS_DOT_ROWS_H */
