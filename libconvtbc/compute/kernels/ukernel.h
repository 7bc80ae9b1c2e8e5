/*
 * The one micro-kernel signature every ISA implements, and the kernel table
 * entry the framework looks kernels up in (BLIS style: the framework never
 * branches on the ISA, it only reads mr/nr and calls ukr).
 */
#ifndef CONVTBC_COMPUTE_KERNELS_UKERNEL_H
#define CONVTBC_COMPUTE_KERNELS_UKERNEL_H

#include <stdbool.h>
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

/* Largest tile of the mr x nr kernels (sizes stack scratch tiles; the
 * AMX tile, CTBC_AMX_TILE square, is sized apart where it runs). */
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

/* Four rows of a row-major float32 operand dealt into `strips` packed
 * strips `width` wide (width <= 16), as four consecutive rows of each:
 *
 *   dst[s*strip_step + i*width + j] = rows[i][s*width + j]
 *
 * for s < strips, i < 4, j < width (an exact copy). The packing of
 * grad_weight's mr-wide strips, where a row-by-row copy moves a piece of
 * 24 bytes to a strip kilobytes away each time. */
typedef void (*ctbc_strips4_fn)(float *dst, int64_t strip_step, int64_t width, const float *const rows[4],
                                int64_t strips);

/* dst[j*ld_dst + i] = src[i*ld_src + j] for i < rows, j < cols (float32
 * transpose, exact). NULL: the framework's scalar loops are used. */
typedef void (*ctbc_transpose_fn)(float *dst, int64_t ld_dst, const float *src, int64_t ld_src,
                                  int64_t rows, int64_t cols);

/*
 * bfloat16 operands through VDPBF16PS (AVX512_BF16): the same tile, loops
 * and strides as ukr, but A and B hold bfloat16 PAIRS along the reduction,
 * and every stride counts pairs (uint32_t):
 *
 *   C(i, j) += sum_{q < n_outer} sum_{p < n_inner} sum_{h = 1, 0} A_h(i; q, p) * B_h(q, p; j)
 *
 *   A_h(i; q, p) = bfloat16 h of a[i*a_row + q*a_outer + p*a_inner]
 *   B_h(q, p; j) = bfloat16 h of b[q*b_outer + p*b_inner + j]
 *
 * (bfloat16 h of a pair: h = 0 the low 16 bits, the element of even index
 * along the reduction; h = 1 the high 16 bits.) Each step is a float32
 * fused multiply-add, odd element first, as the instruction does it: a
 * bfloat16 product is exact in float32, so this is the float32 sum in that
 * order, EXCEPT that the instruction ignores MXCSR and flushes: subnormal
 * operands and running sums are read as zero and subnormal results are
 * written as zero (signs kept). A reduction of odd length is padded with a
 * zero pair element on BOTH sides (0 * Inf would be NaN). The sum starts
 * from zero and is then added to C (or C = 0 + sum with overwrite), as ukr.
 */
typedef void (*ctbc_ukr_bf16_fn)(const ctbc_ukr_args *args, const uint32_t *a, const uint32_t *b,
                                 float *c, int64_t ldc);

/*
 * Few columns against many rows, the reduction contiguous on both sides
 * (a dot product per element), for a GEMM whose columns are too few to
 * fill an nr-wide tile:
 *
 *   C(i, j) = sum_{q < n_outer} sum_{p < n_inner} a[i*a_row + q*a_outer + p] * b[j*b_col + q*b_outer + p]
 *
 * for i < CTBC_DOT_ROWS (callers keep that many rows readable) and j < n,
 * written to c[i*ldc + j] (C is not read). The summation order is fixed
 * for a kernel, by its dot_lanes:
 *  - 8 (portable, AVX2): dot_rows.h's, the same on those ISAs: lane l sums
 *    the products of p = l (mod 8) below the last multiple of 8, over q
 *    then p, multiplies and adds never fused; the lanes are added 0..7,
 *    then the sum of the remaining p (over q then p).
 *  - 16 (AVX-512): lane l takes, for each q in order, its element of
 *    each whole 16-element chunk of the reduction in order, as a fused
 *    multiply-add; then, for each q in order, its element of the last
 *    partial chunk (padded with zeros on both sides); the lanes are then
 *    added as a tree (l + 8, then l + 4, l + 2, l + 1), as
 *    ctbc_dot_bf16_fn's. Twice the lanes and half the instructions.
 */
#define CTBC_DOT_ROWS 4

typedef struct {
    int64_t n, n_outer, n_inner;
    int64_t a_row, a_outer;
    int64_t b_col, b_outer;
} ctbc_dot_args;

typedef void (*ctbc_dot_fn)(const ctbc_dot_args *args, const float *a, const float *b, float *c, int64_t ldc);

/*
 * Sums of rows into lanes of sums, for grad_bias: the rows r < n_rows in
 * order, row r being rows[r*row_stride + o] for o < n, each added to lane
 * (lane + r) % CTBC_ROW_SUM_LANES,
 *
 *   lanes[l*lane_stride + o] += rows[r*row_stride + o]
 *
 * one float32 add per element in that order (so every ISA gives the same
 * bits); returns the lane the next row goes to. The lanes let a few
 * channels over many rows run several chains of adds at once.
 */
#define CTBC_ROW_SUM_LANES 8

typedef int (*ctbc_row_sums_fn)(float *lanes, int64_t lane_stride, int lane, const float *rows,
                                int64_t row_stride, int64_t n_rows, int64_t n);

/*
 * Two rows of bfloat16 values made pairs, for packing the pair kernels'
 * operands: for i < n, in strips of `width` pairs,
 *
 *   dst[(i / width)*strip_stride + i % width] = first[i] | second[i] << 16
 *
 * the last strip padded with zero pairs to `width` (strip_stride >= width,
 * n >= 0). Returns nonzero when a value of either row has an all-ones
 * exponent (Inf or NaN), else 0.
 */
typedef int (*ctbc_bf16_pairs_fn)(uint32_t *dst, int64_t strip_stride, int64_t width, const uint16_t *first,
                                  const uint16_t *second, int64_t n);

/*
 * The dot kernel on bfloat16 operands through VDPBF16PS: the same rows,
 * columns, arguments and output as ctbc_dot_fn, but a and b hold bfloat16
 * values (strides count them), each product exact in float32:
 *
 *   C(i, j) = sum over 16 lanes l of S_l, where lane l takes, for each q in
 *   order and each whole 32-element chunk of the reduction in order, its
 *   pair (odd element first, then even: p = 32 c + 2 l + 1, 32 c + 2 l) as
 *   a fused multiply-add that flushes subnormal operands and results to
 *   zero (as ctbc_ukr_bf16_fn); then, for each q in order, its pair of the
 *   last partial chunk, padded with zeros on both sides. The lanes are then
 *   added as a tree (l + 8, then l + 4, l + 2, l + 1; ordinary float32
 *   adds), a fixed order on every CPU.
 *
 * Twice the products of a float32 dot step per instruction and half the
 * memory; it differs from the float32 dot only on subnormals and in the
 * order of the sum.
 */
typedef void (*ctbc_dot_bf16_fn)(const ctbc_dot_args *args, const uint16_t *a, const uint16_t *b, float *c,
                                 int64_t ldc);

/*
 * bfloat16 operands through AMX tiles (TDPBF16PS): a 32 x 32 tile of C,
 * with ukr_bf16's loops, B and C, but A read along the reduction, as the
 * tile unit reads it: A holds bfloat16 ELEMENTS (strides count them), the
 * reduction contiguous in each row,
 *
 *   C(i, j) += sum_{q < n_outer} sum_{p < n_inner} sum_{h = 0, 1} A(i; q, 2p + h) * B_h(q, p; j)
 *
 *   A(i; q, e) = a[i*a_row + q*a_outer + e]    (a_inner is not read)
 *   B_h(q, p; j) = bfloat16 h of b[q*b_outer + p*b_inner + j]
 *
 * for i, j < CTBC_AMX_TILE; n_inner a multiple of CTBC_AMX_PAIRS (a tile
 * row's 16 pairs; callers pad the reduction with zero pairs on both
 * sides). Subnormal operands and results are flushed as by ukr_bf16; the
 * order in which one instruction sums its 16 pairs per element is the
 * hardware's (it matches neither a left-to-right sum nor an exact one:
 * the last place differs on about a third of random sums), fixed for a
 * CPU, so the bits are deterministic on one machine but not across
 * machines. Unlike ukr's, the sum starts from C itself (the tile unit
 * accumulates in its registers; loading C there costs less than adding
 * a sum to it), or from zero with overwrite (C not read).
 */
#define CTBC_AMX_TILE 32
#define CTBC_AMX_PAIRS 16

typedef void (*ctbc_ukr_amx_fn)(const ctbc_ukr_args *args, const uint16_t *a, const uint32_t *b, float *c,
                                int64_t ldc);

typedef struct {
    const char *name;
    int mr, nr;
    ctbc_ukr_fn ukr; /* NULL when the compiler could not build this ISA */
    ctbc_gemv_fn gemv; /* set whenever ukr is */
    ctbc_h16_load_fn f16_load, bf16_load;
    ctbc_h16_store_fn f16_store, bf16_store;
    ctbc_transpose_fn transpose;
    /* NULL unless the CPU level of this entry has VDPBF16PS. Its results
     * differ from ukr's on subnormals (see ctbc_ukr_bf16_fn), so a driver
     * uses it only where both operands are BFLOAT16 tensors and the
     * compute dtype keeps them (every cubeMathType but USE_FP16), as
     * forward_gemm_bf16 does (and forward_dot_bf16 with dot_bf16). Same
     * mr x nr as ukr. */
    ctbc_ukr_bf16_fn ukr_bf16;
    ctbc_dot_fn dot; /* set whenever ukr is */
    int dot_lanes;   /* dot's order (see ctbc_dot_fn): 8 or 16 */
    ctbc_row_sums_fn row_sums; /* set whenever ukr is */
    ctbc_bf16_pairs_fn bf16_pairs; /* set whenever ukr is */
    ctbc_strips4_fn strips4;       /* set whenever ukr is */
    ctbc_dot_bf16_fn dot_bf16; /* set where ukr_bf16 is */
    /* ukr's contract on a narrower tile, mr_narrow x CTBC_NR_NARROW, with
     * ukr's bits, for GEMMs of few columns, which an nr-wide tile would
     * fill with padding; NULL where nr is that narrow already. */
    int mr_narrow;
    ctbc_ukr_fn ukr_narrow;
    ctbc_ukr_bf16_fn ukr_bf16_narrow; /* ukr_bf16 on the narrow tile, where both are */
    /* NULL unless the entry has AMX tiles (or emulates them, for tests):
     * used under ukr_bf16's rule, on its own CTBC_AMX_TILE-square tile
     * (ctbc_kernel_amx_tiled). A thread calls amx_begin (which configures
     * its tiles) before its calls of ukr_amx, again after any code that
     * may use tiles otherwise (another library's): a driver, at the start
     * of each of its tiles. */
    ctbc_ukr_amx_fn ukr_amx;
    void (*amx_begin)(void);
} ctbc_kernel;

#define CTBC_NR_NARROW 16

/* `kernel` as seen on its narrow tile: mr_narrow x CTBC_NR_NARROW, with the
 * narrow micro-kernels in place of the wide ones (ukr_bf16 NULL where the
 * entry has no narrow bfloat16 one); false where it has no narrow tile. */
static inline bool ctbc_kernel_narrowed(const ctbc_kernel *kernel, ctbc_kernel *narrow)
{
    if (!kernel->ukr_narrow)
        return false;
    *narrow = *kernel;
    narrow->mr = kernel->mr_narrow, narrow->nr = CTBC_NR_NARROW, narrow->ukr = kernel->ukr_narrow;
    narrow->ukr_bf16 = kernel->ukr_bf16_narrow;
    return true;
}

/* `kernel` as seen on its AMX tile: CTBC_AMX_TILE square, ukr_amx its
 * only micro-kernel (ukr and ukr_bf16 NULL: their tiles are not this
 * one); false where the entry has no ukr_amx. */
static inline bool ctbc_kernel_amx_tiled(const ctbc_kernel *kernel, ctbc_kernel *tiled)
{
    if (!kernel->ukr_amx)
        return false;
    *tiled = *kernel;
    tiled->mr = CTBC_AMX_TILE, tiled->nr = CTBC_AMX_TILE;
    tiled->ukr = 0, tiled->ukr_bf16 = 0, tiled->ukr_narrow = 0, tiled->ukr_bf16_narrow = 0;
    return true;
}

extern const ctbc_kernel ctbc_kernel_portable;
extern const ctbc_kernel ctbc_kernel_avx2;
extern const ctbc_kernel ctbc_kernel_avx512;
extern const ctbc_kernel ctbc_kernel_avx512_bf16; /* avx512 + ukr_bf16 */
/* kernel_amx.c: the AMX tile kernel (NULL where the compiler could not
 * build it), the permission Linux asks a process to request before its
 * first tile instruction (1: granted), and the tile's emulation in plain
 * C, Intel's pseudocode order, for the tests of CPUs without AMX. */
extern const ctbc_ukr_amx_fn ctbc_ukr_amx_tiles;
extern void (*const ctbc_amx_begin)(void);
int ctbc_amx_request_permission(void);
extern const ctbc_ukr_amx_fn ctbc_ukr_amx_emulated;
extern void (*const ctbc_amx_emulated_begin)(void);

#endif /* CONVTBC_COMPUTE_KERNELS_UKERNEL_H */
