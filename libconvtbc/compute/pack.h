/*
 * Packing: read strided operand views of any element type, convert to
 * float32, apply the cubeMathType rounding, and lay the values out the way
 * the micro-kernels read them. Storing: convert float32 result tiles to the
 * output's element type (round-to-nearest-even) and write them through the
 * output's strided view.
 *
 * Rows of the 3-D operands [t, b, x] are the flattened (t, b) pairs,
 * row = t*b_size + b, so a block of consecutive rows may span time steps.
 */
#ifndef CONVTBC_COMPUTE_PACK_H
#define CONVTBC_COMPUTE_PACK_H

#include "compute/conv_tbc_compute.h"
#include "compute/kernels/ukernel.h"

/* A strided 3-D operand view as the packers read it. */
typedef struct {
    const void *data;       /* element [0,0,0] */
    ctbc_dtype dtype;
    ctbc_rounding rounding; /* already NONE unless dtype is F32 */
    int64_t s0, s1, s2;     /* strides in elements */
    ctbc_h16_load_fn load16; /* the kernel set's widening of this 16-bit dtype, or NULL */
    ctbc_transpose_fn transpose; /* the kernel set's float32 transpose, or NULL */
    ctbc_bf16_pairs_fn bf16_pairs; /* the kernel set's */
    ctbc_strips4_fn strips4;       /* the kernel set's */
} ctbc_operand;

/* Address of element `offset` of a buffer of dtype. */
static inline void *ctbc_element_ptr(void *base, ctbc_dtype dtype, int64_t offset)
{
    return (char *)base + offset * (dtype == CTBC_F32 ? 4 : 2);
}

ctbc_operand ctbc_operand_make(const void *data, const ctbc_layout *layout, ctbc_rounding rounding,
                               const ctbc_kernel *kernel);

/* The kernel set's unit-stride narrowing to dtype (NULL: scalar, or F32). */
static inline ctbc_h16_store_fn ctbc_store16_for(const ctbc_kernel *kernel, ctbc_dtype dtype)
{
    return dtype == CTBC_F16 ? kernel->f16_store : dtype == CTBC_BF16 ? kernel->bf16_store : 0;
}

/* Rows g in [first, last] of a [t, b, x] view with strides s0, s1 (row
 * g = t*b_size + b) lie evenly spaced, *step apart: with one batch entry,
 * with t's stride b_size times b's, or all in one time step. */
static inline int ctbc_rows_evenly_spaced(int64_t s0, int64_t s1, int64_t b_size, int64_t first, int64_t last,
                                          int64_t *step)
{
    if (b_size == 1)
        *step = s0;
    else if (s0 == b_size * s1 || first / b_size == last / b_size)
        *step = s1;
    else
        return 0;
    return 1;
}

/*
 * An operand the kernels can read in place: float32 without rounding, unit
 * column stride, and rows g = t*b_size + b equally spaced (true for
 * contiguous tensors, and whenever b_size or the row count makes one of the
 * two strides irrelevant). Gives the row stride; rows_total is the number of
 * rows of the operand.
 */
int ctbc_operand_direct(const ctbc_operand *op, int64_t b_size, int64_t rows_total,
                        int64_t *row_stride);

/* dst[i] = value of element offset + i*stride, for i < n. */
void ctbc_convert_run(float *dst, const ctbc_operand *op, int64_t offset, int64_t stride,
                      int64_t n);

/*
 * Strip layout: columns [col0, col0+ncols) cut into strips of `width`
 * columns (the last one zero-padded); strip s holds rows r < strip_rows as
 * dst[s*strip_rows*width + r*width + j]. Row r is operand row row_first + r,
 * packed only when that row lies in [row_lo, row_hi) (other rows are left
 * as they are: callers never read them).
 */
void ctbc_pack_strips(float *dst, int64_t strip_rows, int width, const ctbc_operand *op,
                      int64_t b_size, int64_t row_first, int64_t row_lo, int64_t row_hi,
                      int64_t col0, int64_t ncols);

/*
 * Row-major layout: dst[r*ld + j] = operand(row_first + r, col0 + j) for
 * r < nrows, j < ncols; rows outside [row_lo, row_hi) are zero-filled (they
 * are read by full-tile kernel calls whose results for them are dropped).
 */
void ctbc_pack_rows(float *dst, int64_t ld, int64_t nrows, const ctbc_operand *op,
                    int64_t b_size, int64_t row_first, int64_t row_lo, int64_t row_hi,
                    int64_t col0, int64_t ncols);

/*
 * The same rows, transposed: dst[j*ld + r] = operand(row_first + r, col0 + j)
 * for r < nrows, j < ncols, zero for rows outside [row_lo, row_hi). For
 * kernels that take the rows as their nr-wide vector side.
 */
void ctbc_pack_rows_transposed(float *dst, int64_t ld, int64_t nrows, const ctbc_operand *op,
                               int64_t b_size, int64_t row_first, int64_t row_lo, int64_t row_hi,
                               int64_t col0, int64_t ncols);

/*
 * bfloat16 pairs (ctbc_ukr_bf16_fn) for a bfloat16 operand, read as it lies:
 * ctbc_pack_rows_transposed over pairs of columns, dst[q*ld + r] holding
 * columns col0 + 2q (low half) and col0 + 2q + 1 (high half) of row
 * row_first + r, for q < ceil(ncols / 2); zero halves past ncols and rows
 * outside [row_lo, row_hi).
 */
void ctbc_pack_rows_transposed_bf16(uint32_t *dst, int64_t ld, int64_t nrows, const ctbc_operand *op,
                                    int64_t b_size, int64_t row_first, int64_t row_lo, int64_t row_hi,
                                    int64_t col0, int64_t ncols);

/*
 * The same rows of a bfloat16 operand transposed as 16-bit values, for
 * the AMX tile's A (its rows along the reduction): dst[j*ld + r] = operand
 * (row_first + r, col0 + j) for r < nrows, j < ncols, zero for rows outside
 * [row_lo, row_hi) and for columns from ncols to padded_cols; with nrows
 * odd, r = nrows is written too (zero). ld is even. Returns 1 when no
 * value packed is Inf or NaN.
 */
int ctbc_pack_rows_transposed_h16(uint16_t *dst, int64_t ld, int64_t nrows, const ctbc_operand *op, int64_t b_size,
                                  int64_t row_first, int64_t row_lo, int64_t row_hi, int64_t col0, int64_t ncols,
                                  int64_t padded_cols);

/*
 * ctbc_pack_strips over bfloat16 pairs of rows, for a bfloat16 operand:
 * strip s holds dst[(s*pairs + q)*width + i] with operand rows
 * row_first + 2q (low half) and row_first + 2q + 1 (high half) of column
 * col0 + s*width + i, for q < pairs; zero halves for rows outside
 * [row_lo, row_hi) and columns past ncols (the strips are all written).
 * Returns 1 when no half packed is Inf or NaN.
 */
int ctbc_pack_strips_bf16(uint32_t *dst, int64_t pairs, int width, const ctbc_operand *op, int64_t b_size,
                          int64_t row_first, int64_t row_lo, int64_t row_hi, int64_t col0, int64_t ncols);

/*
 * Weight panel for grad_input: dst[s][kk][o][nr] = weight[k0+kk, c0+s*nr+j, o0+o]
 * for kk < nk, o < no, c strips of width nr over [c0, c0+nc), zero-padded.
 */
void ctbc_pack_weight(float *dst, int nr, const ctbc_operand *weight, int64_t k0, int64_t nk,
                      int64_t o0, int64_t no, int64_t c0, int64_t nc);

/* ctbc_pack_weight over bfloat16 pairs of output channels, for a bfloat16
 * weight: per strip s and tap kk a block of steps x width pairs, pair q of
 * channel i holding output channels o0 + 2q (low) and o0 + 2q + 1 (high),
 * zero past no, past nc and from ceil(no / 2) to steps; the block is
 * [q][width] (the pair tile's strips) or, channel_major, [i][steps] (the
 * AMX tile's rows along the reduction). */
void ctbc_pack_weight_bf16(uint32_t *dst, int width, int64_t steps, int channel_major, const ctbc_operand *weight,
                           int64_t k0, int64_t nk, int64_t o0, int64_t no, int64_t c0, int64_t nc);

/*
 * Where a float32 result tile goes: an output view of dtype, whose tile row
 * g lies at (g / row_split)*rs_hi + (g % row_split)*rs_lo elements and
 * column j at j*cs (a two-level row index because grad_input's rows are the
 * flattened (t, b) pairs). Built once per run and output orientation, with
 * the kernel set's 16-bit narrowing and float32 transpose (NULL: scalar).
 */
typedef struct {
    void *base;
    ctbc_dtype dtype;
    int64_t row_split, rs_hi, rs_lo, cs;
    ctbc_h16_store_fn store16;
    ctbc_transpose_fn transpose;
} ctbc_writer;

ctbc_writer ctbc_writer_make(void *base, ctbc_dtype dtype, const ctbc_kernel *kernel, int64_t row_split,
                             int64_t rs_hi, int64_t rs_lo, int64_t cs);

/*
 * Writes src[i*ld + j] (i < rows, j < cols) as tile rows row_first + i of
 * the writer's view, from element `offset` on, converted with
 * round-to-nearest-even.
 */
void ctbc_write_tile(const ctbc_writer *writer, int64_t offset, const float *src, int64_t ld,
                     int64_t rows, int64_t cols, int64_t row_first);

#endif /* CONVTBC_COMPUTE_PACK_H */
