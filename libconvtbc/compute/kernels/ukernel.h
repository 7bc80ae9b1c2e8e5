/*
 * The one micro-kernel signature every ISA implements, and the kernel table
 * entry the framework looks kernels up in (BLIS style: the framework never
 * branches on the ISA, it only reads mr/nr and calls ukr).
 */
#ifndef CONVTBC_COMPUTE_KERNELS_UKERNEL_H
#define CONVTBC_COMPUTE_KERNELS_UKERNEL_H

#include <stdint.h>

/*
 * One call computes, for i < mr and j < nr,
 *
 *   C(i, j) += sum_{q < n_outer} sum_{p < n_inner} A(i; q, p) * B(q, p; j)
 *
 *   A(i; q, p) = a[i*a_row + q*a_outer + p*a_inner]   (any strides)
 *   B(q, p; j) = b[q*b_outer + p*b_inner + j]         (nr contiguous floats)
 *   C(i, j)    = c[i*ldc + j]
 *
 * The products of one call are summed in registers starting from zero and
 * then added to C, in a fixed order, so results never depend on threads.
 * With `overwrite` set C is not read: C(i, j) = 0 + sum, the same bits as
 * adding the sum to a zeroed C (a -0 sum gives +0 both ways), so a caller
 * that knows a tile gets exactly one call skips zeroing it.
 *
 * Two reduction levels because grad_input reduces over taps (outer) and
 * output channels (inner), and one tap step is a jump of b rows backwards in
 * the shifted window of grad_output rather than a unit step. A is read with
 * broadcasts, so it may be a packed mr-wide strip (a_row 1, a_inner mr) or a
 * plain row-major block (a_row ld, a_inner 1). Strides may be negative.
 *
 * Every call computes a full mr x nr tile: callers keep all buffers padded
 * so that rows and columns beyond the valid edge are readable, and discard
 * those results.
 */
typedef struct {
    int64_t n_outer, n_inner;
    int64_t a_row, a_inner, a_outer;
    int64_t b_inner, b_outer;
    int64_t overwrite; /* 1: C = 0 + sum (C not read); 0: C += sum */
} ctbc_ukr_args;

typedef void (*ctbc_ukr_fn)(const ctbc_ukr_args *args, const float *a, const float *b,
                            float *c, int64_t ldc);

/* Largest tile any kernel uses (sizes stack scratch tiles). */
#define CTBC_MR_MAX 8
#define CTBC_NR_MAX 32

/*
 * One row of C against a long run of B rows (GEMV), for a GEMM whose A side
 * has a single row, which the mr x nr kernel would fill one row in mr of:
 *
 *   y[j] += sum_{p < n_rows} a[p*a_step] * b[p*b_row + j]    for j < n
 *
 * each y[j] summed over p in order from zero and then added, like ukr
 * (n is a multiple of 8).
 */
typedef void (*ctbc_gemv_fn)(int64_t n_rows, int64_t n, const float *a, int64_t a_step,
                             const float *b, int64_t b_row, float *y);

/* Unit-stride conversions between float32 and a 16-bit format (float16 or
 * bfloat16): exact widening; narrowing with round-to-nearest-even, NaN kept
 * quiet, overflow to Inf: the same bits as float_convert.h on every input,
 * subnormals included. NULL: the framework's scalar loops are used (no
 * entry of a built ISA leaves one NULL: each starts from the portable
 * element-at-a-time helpers and replaces what it does better). */
typedef void (*ctbc_h16_load_fn)(float *dst, const uint16_t *src, int64_t n);
typedef void (*ctbc_h16_store_fn)(uint16_t *dst, const float *src, int64_t n);

/* dst[j*ld_dst + i] = src[i*ld_src + j] for i < rows, j < cols (float32
 * transpose, exact). NULL: the framework's scalar loops are used. */
typedef void (*ctbc_transpose_fn)(float *dst, int64_t ld_dst, const float *src, int64_t ld_src,
                                  int64_t rows, int64_t cols);

typedef struct {
    const char *name;
    int mr, nr;
    ctbc_ukr_fn ukr; /* NULL when the compiler could not build this ISA */
    ctbc_gemv_fn gemv; /* set whenever ukr is */
    ctbc_h16_load_fn f16_load, bf16_load;
    ctbc_h16_store_fn f16_store, bf16_store;
    ctbc_transpose_fn transpose;
} ctbc_kernel;

extern const ctbc_kernel ctbc_kernel_portable;
extern const ctbc_kernel ctbc_kernel_avx2;
extern const ctbc_kernel ctbc_kernel_avx512;

#endif /* CONVTBC_COMPUTE_KERNELS_UKERNEL_H */
