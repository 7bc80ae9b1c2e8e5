/* Packing and storing (see pack.h). */
#include "compute/pack.h"

#include <stdint.h>
#include <string.h>

#include "compute/float_convert.h"
#include "compute/kernels/strip_row.h"

ctbc_operand ctbc_operand_make(const void *data, const ctbc_layout *layout, ctbc_rounding rounding,
                               const ctbc_kernel *kernel)
{
    ctbc_operand op;
    op.transpose = kernel->transpose;
    op.bf16_pairs = kernel->bf16_pairs;
    op.strips4 = kernel->strips4;
    op.load16 = layout->dtype == CTBC_F16    ? kernel->f16_load
                : layout->dtype == CTBC_BF16 ? kernel->bf16_load
                                             : 0;
    op.data = data;
    op.dtype = layout->dtype;
    /* cubeMathType only ever rounds FLOAT operands */
    op.rounding = layout->dtype == CTBC_F32 ? rounding : CTBC_ROUND_NONE;
    op.s0 = layout->stride[0];
    op.s1 = layout->stride[1];
    op.s2 = layout->stride[2];
    return op;
}

int ctbc_operand_direct(const ctbc_operand *op, int64_t b_size, int64_t rows_total,
                        int64_t *row_stride)
{
    if (op->dtype != CTBC_F32 || op->rounding != CTBC_ROUND_NONE || op->s2 != 1)
        return 0;
    return ctbc_rows_evenly_spaced(op->s0, op->s1, b_size, 0, rows_total - 1, row_stride);
}

/*
 * Element loaders specialised at compile time: each packing loop body is
 * an always-inline function instantiated once per source kind (and for a
 * unit column stride), so the dtype/rounding switch runs once per call and
 * the inner loops are straight-line (vectorisable for float32).
 */
enum { KIND_F32, KIND_F32_HF32, KIND_F32_FP16, KIND_F16, KIND_BF16 };

static int kind_of(const ctbc_operand *op)
{
    switch (op->dtype) {
    case CTBC_F16:
        return KIND_F16;
    case CTBC_BF16:
        return KIND_BF16;
    default:
        return op->rounding == CTBC_ROUND_HF32   ? KIND_F32_HF32
               : op->rounding == CTBC_ROUND_FP16 ? KIND_F32_FP16
                                                 : KIND_F32;
    }
}

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* A 16-bit kind the kernel set widens in bulk (unit stride only). */
#define FAST16(op, kind, unit)                                                   \
    (((kind) == KIND_F16 || (kind) == KIND_BF16) && (unit) && (op)->load16)

ALWAYS_INLINE float load_kind(const void *data, int64_t i, const int kind)
{
    switch (kind) {
    case KIND_F32:
        return ((const float *)data)[i];
    case KIND_F32_HF32:
        return ctbc_round_hf32(((const float *)data)[i]);
    case KIND_F32_FP16:
        return ctbc_round_fp16(((const float *)data)[i]);
    case KIND_F16:
        return ctbc_f16_to_f32(((const uint16_t *)data)[i]);
    default:
        return ctbc_bf16_to_f32(((const uint16_t *)data)[i]);
    }
}

/* Instantiates `body(args..., kind, unit)` for every kind and for a unit or
 * general stride. */
#define DISPATCH_KIND(kind, unit, call)                                                   \
    do {                                                                                  \
        switch (kind) {                                                                   \
        case KIND_F32:                                                                    \
            if (unit) call(KIND_F32, 1); else call(KIND_F32, 0);                          \
            break;                                                                        \
        case KIND_F32_HF32:                                                               \
            call(KIND_F32_HF32, 0);                                                       \
            break;                                                                        \
        case KIND_F32_FP16:                                                               \
            call(KIND_F32_FP16, 0);                                                       \
            break;                                                                        \
        case KIND_F16:                                                                    \
            if (unit) call(KIND_F16, 1); else call(KIND_F16, 0);                          \
            break;                                                                        \
        default:                                                                          \
            if (unit) call(KIND_BF16, 1); else call(KIND_BF16, 0);                        \
            break;                                                                        \
        }                                                                                 \
    } while (0)

ALWAYS_INLINE void convert_body(float *dst, const ctbc_operand *op, int64_t offset,
                                int64_t stride, int64_t n, const int kind, const int unit)
{
    const void *data = op->data;
    if (unit)
        stride = 1;
    if (FAST16(op, kind, unit)) {
        op->load16(dst, (const uint16_t *)data + offset, n);
        return;
    }
    if (kind == KIND_F32 && unit) {
        memcpy(dst, (const float *)data + offset, (size_t)n * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < n; i++)
        dst[i] = load_kind(data, offset + i * stride, kind);
}

void ctbc_convert_run(float *dst, const ctbc_operand *op, int64_t offset, int64_t stride,
                      int64_t n)
{
#define CALL(kind, unit) convert_body(dst, op, offset, stride, n, kind, unit)
    DISPATCH_KIND(kind_of(op), stride == 1, CALL);
#undef CALL
}

/* Offset of operand row g = t*b_size + b, walked incrementally to avoid a
 * division per row. */
typedef struct {
    int64_t t, b, b_size, s0, s1;
} row_walker;

static row_walker row_walker_at(int64_t g, int64_t b_size, const ctbc_operand *op)
{
    row_walker w = {g / b_size, g % b_size, b_size, op->s0, op->s1};
    return w;
}

static int64_t row_walker_offset(const row_walker *w) { return w->t * w->s0 + w->b * w->s1; }

static void row_walker_next(row_walker *w)
{
    if (++w->b == w->b_size) {
        w->b = 0;
        w->t++;
    }
}

/* Whole strips a row from which the kernel set's strips4 packs four rows
 * at a time: with fewer, its call per four rows costs more than it saves
 * (T14 B1334 Ci12 K25 Co4 p7, two strips of 6 and 4 channels a row,
 * took 1.05-1.08x the time on AVX2). */
#define STRIPS4_MIN_STRIPS 4

/* Floats widened per bulk call when packing 16-bit strips (a stack buffer). */
#define STRIP_RUN_FLOATS 512

static inline int64_t ctbc_min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* A row's partial strip at d: its `tail` values from element `off` on,
 * then zeros to the strip's width. */
ALWAYS_INLINE void row_tail(float *d, const ctbc_operand *op, int64_t off, int64_t s2, int64_t tail,
                            int64_t width, const int kind, const int unit)
{
    if (kind == KIND_F32 && unit)
        strip_row(d, (const float *)op->data + off, tail);
    else
        convert_body(d, op, off, s2, tail, kind, unit);
    strip_row(d + tail, NULL, width - tail);
}

ALWAYS_INLINE void pack_strips_body(float *dst, int64_t strip_rows, int64_t width,
                                    const ctbc_operand *op, row_walker w, int64_t r_begin,
                                    int64_t r_end, int64_t col0, int64_t ncols, const int kind,
                                    const int unit)
{
    const int64_t s2 = unit ? 1 : op->s2;
    const int64_t full = ncols / width, tail = ncols - full * width;
    if (FAST16(op, kind, unit)) {
        /* widen a run of whole strips of the row at once, then deal it out */
        const int64_t per_run = STRIP_RUN_FLOATS / width;
        for (int64_t r = r_begin; r < r_end; r++, row_walker_next(&w)) {
            const uint16_t *src = (const uint16_t *)op->data + row_walker_offset(&w) + col0;
            float *d = dst + r * width;
            for (int64_t s0 = 0; s0 * width < ncols; s0 += per_run) {
                float run[STRIP_RUN_FLOATS];
                const int64_t n = ctbc_min64(per_run * width, ncols - s0 * width);
                op->load16(run, src + s0 * width, n);
                for (int64_t s = 0; s * width < n; s++, d += strip_rows * width) {
                    const int64_t valid = n - s * width < width ? n - s * width : width;
                    memcpy(d, run + s * width, (size_t)valid * sizeof(float));
                    for (int64_t j = valid; j < width; j++)
                        d[j] = 0.0f;
                }
            }
        }
        return;
    }
    int64_t r = r_begin;
    if (kind == KIND_F32 && unit && width <= 16 && full >= STRIPS4_MIN_STRIPS && op->strips4) {
        /* four rows at a time into the whole strips, then each row's
         * partial strip as below */
        for (; r + 4 <= r_end; r += 4) {
            int64_t row_off[4];
            const float *rows[4];
            for (int i = 0; i < 4; i++, row_walker_next(&w)) {
                row_off[i] = row_walker_offset(&w) + col0;
                rows[i] = (const float *)op->data + row_off[i];
            }
            op->strips4(dst + r * width, strip_rows * width, width, rows, full);
            for (int i = 0; tail && i < 4; i++)
                row_tail(dst + (full * strip_rows + r + i) * width, op, row_off[i] + full * width, 1, tail, width,
                         kind, unit);
        }
    }
    for (; r < r_end; r++, row_walker_next(&w)) {
        const int64_t row_off = row_walker_offset(&w) + col0 * s2;
        float *d = dst + r * width;
        if (kind == KIND_F32 && unit) {
            const float *src = (const float *)op->data + row_off;
            for (int64_t s = 0; s < full; s++, d += strip_rows * width)
                strip_row(d, src + s * width, width);
        } else {
            for (int64_t s = 0; s < full; s++, d += strip_rows * width) {
                const int64_t off = row_off + s * width * s2;
                for (int64_t j = 0; j < width; j++)
                    d[j] = load_kind(op->data, off + j * s2, kind);
            }
        }
        if (tail)
            row_tail(d, op, row_off + full * width * s2, s2, tail, width, kind, unit);
    }
}

void ctbc_pack_strips(float *dst, int64_t strip_rows, int width, const ctbc_operand *op,
                      int64_t b_size, int64_t row_first, int64_t row_lo, int64_t row_hi,
                      int64_t col0, int64_t ncols)
{
    int64_t r_begin = row_lo - row_first, r_end = row_hi - row_first;
    if (r_begin < 0)
        r_begin = 0;
    if (r_end > strip_rows)
        r_end = strip_rows;
    if (r_begin >= r_end)
        return;
    const row_walker w = row_walker_at(row_first + r_begin, b_size, op);
#define CALL(kind, unit)                                                                  \
    pack_strips_body(dst, strip_rows, width, op, w, r_begin, r_end, col0, ncols, kind, unit)
    DISPATCH_KIND(kind_of(op), op->s2 == 1, CALL);
#undef CALL
}

void ctbc_pack_rows(float *dst, int64_t ld, int64_t nrows, const ctbc_operand *op,
                    int64_t b_size, int64_t row_first, int64_t row_lo, int64_t row_hi,
                    int64_t col0, int64_t ncols)
{
    int64_t r_begin = row_lo - row_first, r_end = row_hi - row_first;
    if (r_begin < 0)
        r_begin = 0;
    if (r_end > nrows)
        r_end = nrows;
    if (r_begin >= r_end) {
        r_begin = 0;
        r_end = 0;
    }
    for (int64_t r = 0; r < r_begin; r++)
        memset(dst + r * ld, 0, (size_t)ncols * sizeof(float));
    int64_t rs, step;
    if (r_begin < r_end && ld == ncols && op->s2 == 1 &&
        ctbc_rows_evenly_spaced(op->s0, op->s1, b_size, row_first + r_begin, row_first + r_end - 1, &step) &&
        step == ncols) {
        /* the rows follow each other in the operand as in dst: one run */
        const int64_t g = row_first + r_begin;
        rs = (g / b_size) * op->s0 + (g % b_size) * op->s1 + col0;
        ctbc_convert_run(dst + r_begin * ld, op, rs, 1, (r_end - r_begin) * ncols);
    } else if (r_begin < r_end) {
        row_walker w = row_walker_at(row_first + r_begin, b_size, op);
        for (int64_t r = r_begin; r < r_end; r++, row_walker_next(&w))
            ctbc_convert_run(dst + r * ld, op, row_walker_offset(&w) + col0 * op->s2, op->s2,
                             ncols);
    }
    for (int64_t r = r_end; r < nrows; r++)
        memset(dst + r * ld, 0, (size_t)ncols * sizeof(float));
}

/* Rows and columns of one step of the transposed packing: a block small
 * enough for the stack, its rows a whole number of 16 x 16 transposes. */
#define TRANSPOSE_ROWS 16
#define TRANSPOSE_COLS 256

/* dst[j*ld + r] = block[r*cols + j]: the kernel set's transpose, which
 * moves 4-byte values bit for bit (bfloat16 pairs too), or a plain copy. */
static void transpose_block(const ctbc_operand *op, float *dst, int64_t ld, const float *block, int64_t rows,
                            int64_t cols)
{
    if (op->transpose) {
        op->transpose(dst, ld, block, cols, rows, cols);
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++)
            memcpy(dst + j * ld + r, block + r * cols + j, sizeof(float));
}

void ctbc_pack_rows_transposed(float *dst, int64_t ld, int64_t nrows, const ctbc_operand *op,
                               int64_t b_size, int64_t row_first, int64_t row_lo, int64_t row_hi,
                               int64_t col0, int64_t ncols)
{
    float block[TRANSPOSE_ROWS * TRANSPOSE_COLS];
    for (int64_t j0 = 0; j0 < ncols; j0 += TRANSPOSE_COLS) {
        const int64_t nj = ncols - j0 < TRANSPOSE_COLS ? ncols - j0 : TRANSPOSE_COLS;
        for (int64_t r0 = 0; r0 < nrows; r0 += TRANSPOSE_ROWS) {
            const int64_t nr = nrows - r0 < TRANSPOSE_ROWS ? nrows - r0 : TRANSPOSE_ROWS;
            ctbc_pack_rows(block, nj, nr, op, b_size, row_first + r0, row_lo, row_hi, col0 + j0, nj);
            transpose_block(op, dst + j0 * ld + r0, ld, block, nr, nj);
        }
    }
}

/* Element i of a bfloat16 run as its raw bits; 0 past n (the missing half
 * of a last pair). */
static inline uint32_t bf16_bits(const uint16_t *run, int64_t stride, int64_t i, int64_t n)
{
    return i < n ? run[i * stride] : 0;
}

void ctbc_pack_rows_transposed_bf16(uint32_t *dst, int64_t ld, int64_t nrows, const ctbc_operand *op,
                                    int64_t b_size, int64_t row_first, int64_t row_lo, int64_t row_hi,
                                    int64_t col0, int64_t ncols)
{
    /* rows of pairs as they lie (a copy when the columns are contiguous),
     * then transposed as 4-byte values */
    const uint16_t *data = op->data;
    uint32_t block[TRANSPOSE_ROWS * TRANSPOSE_COLS];
    const int64_t pairs = (ncols + 1) / 2;
    for (int64_t q0 = 0; q0 < pairs; q0 += TRANSPOSE_COLS) {
        const int64_t nq = pairs - q0 < TRANSPOSE_COLS ? pairs - q0 : TRANSPOSE_COLS;
        const int64_t first = col0 + 2 * q0, count = ncols - 2 * q0 < 2 * nq ? ncols - 2 * q0 : 2 * nq;
        for (int64_t r0 = 0; r0 < nrows; r0 += TRANSPOSE_ROWS) {
            const int64_t n = nrows - r0 < TRANSPOSE_ROWS ? nrows - r0 : TRANSPOSE_ROWS;
            for (int64_t r = 0; r < n; r++) {
                uint32_t *row = block + r * nq;
                const int64_t g = row_first + r0 + r;
                row[nq - 1] = 0; /* the missing half of an odd count */
                if (g < row_lo || g >= row_hi) {
                    memset(row, 0, (size_t)nq * sizeof *row);
                    continue;
                }
                const uint16_t *src = data + (g / b_size) * op->s0 + (g % b_size) * op->s1 + first * op->s2;
                if (op->s2 == 1) {
                    memcpy(row, src, (size_t)count * sizeof *src);
                    continue;
                }
                uint16_t *halves = (uint16_t *)(void *)row;
                for (int64_t j = 0; j < count; j++)
                    halves[j] = src[j * op->s2];
            }
            transpose_block(op, (float *)(void *)(dst + q0 * ld + r0), ld, (const float *)(const void *)block, n, nq);
        }
    }
}

int ctbc_pack_rows_transposed_h16(uint16_t *dst, int64_t ld, int64_t nrows, const ctbc_operand *op, int64_t b_size,
                                  int64_t row_first, int64_t row_lo, int64_t row_hi, int64_t col0, int64_t ncols,
                                  int64_t padded_cols)
{
    /* pairs of rows interleaved into 4-byte values (one strip of
     * ctbc_pack_strips_bf16), then transposed as 4-byte values: each
     * column's rows 2q and 2q + 1 land side by side */
    uint32_t block[TRANSPOSE_ROWS * TRANSPOSE_COLS];
    uint32_t *dst_pairs = (uint32_t *)(void *)dst;
    const int64_t pairs = (nrows + 1) / 2, ld_pairs = ld / 2;
    const int64_t last = row_hi < row_first + nrows ? row_hi : row_first + nrows;
    int finite = 1;
    for (int64_t j0 = 0; j0 < ncols; j0 += TRANSPOSE_COLS) {
        const int64_t nj = ncols - j0 < TRANSPOSE_COLS ? ncols - j0 : TRANSPOSE_COLS;
        for (int64_t q0 = 0; q0 < pairs; q0 += TRANSPOSE_ROWS) {
            const int64_t nq = pairs - q0 < TRANSPOSE_ROWS ? pairs - q0 : TRANSPOSE_ROWS;
            finite &= ctbc_pack_strips_bf16(block, nq, (int)nj, op, b_size, row_first + 2 * q0, row_lo, last,
                                            col0 + j0, nj);
            transpose_block(op, (float *)(void *)(dst_pairs + j0 * ld_pairs + q0), ld_pairs,
                            (const float *)(const void *)block, nq, nj);
        }
    }
    for (int64_t j = ncols; j < padded_cols; j++)
        memset(dst + j * ld, 0, (size_t)(2 * pairs) * sizeof(*dst));
    return finite;
}

void ctbc_pack_weight_bf16(uint32_t *dst, int width, int64_t steps, int channel_major, const ctbc_operand *weight,
                           int64_t k0, int64_t nk, int64_t o0, int64_t no, int64_t c0, int64_t nc)
{
    /* channel by channel: a channel's output channels lie along o, and with
     * a unit o stride its pairs are read as they lie */
    const uint16_t *data = weight->data;
    const int64_t pairs = (no + 1) / 2, strips = (nc + width - 1) / width;
    const int64_t q_step = channel_major ? 1 : width, i_step = channel_major ? steps : 1;
    for (int64_t s = 0; s < strips; s++)
        for (int64_t kk = 0; kk < nk; kk++) {
            uint32_t *d = dst + (s * nk + kk) * steps * width;
            for (int64_t i = 0; i < width; i++) {
                uint32_t *di = d + i * i_step;
                const int64_t c = s * width + i;
                int64_t q = 0;
                if (c < nc) {
                    const uint16_t *src = data + (k0 + kk) * weight->s0 + (c0 + c) * weight->s1 + o0 * weight->s2;
                    if (weight->s2 == 1 && channel_major) {
                        memcpy(di, src, (size_t)(no / 2) * sizeof(uint32_t)); /* the pairs as they lie */
                        q = no / 2;
                    } else if (weight->s2 == 1)
                        for (; q < no / 2; q++)
                            memcpy(di + q * q_step, src + 2 * q, sizeof(uint32_t));
                    for (; q < pairs; q++)
                        di[q * q_step] = bf16_bits(src, weight->s2, 2 * q, no) |
                                         bf16_bits(src, weight->s2, 2 * q + 1, no) << 16;
                }
                for (; q < steps; q++)
                    di[q * q_step] = 0;
            }
        }
}

int ctbc_pack_strips_bf16(uint32_t *dst, int64_t pairs, int width, const ctbc_operand *op, int64_t b_size,
                          int64_t row_first, int64_t row_lo, int64_t row_hi, int64_t col0, int64_t ncols)
{
    /* pair by pair, each strip's part of the two rows interleaved in place;
     * (bits & 0x7f80) + 0x80 carries into bit 15 exactly when a half's
     * exponent is all ones (Inf or NaN) */
    const uint16_t *data = op->data;
    const int64_t strips = (ncols + width - 1) / width, s2 = op->s2;
    uint32_t special = 0;
    for (int64_t q = 0; q < pairs; q++) {
        const uint16_t *half[2];
        for (int h = 0; h < 2; h++) {
            const int64_t g = row_first + 2 * q + h;
            half[h] = g >= row_lo && g < row_hi ? data + (g / b_size) * op->s0 + (g % b_size) * op->s1 + col0 * s2
                                                : NULL;
        }
        const uint16_t *lo = half[0], *hi = half[1];
        if (lo && hi && s2 == 1) {
            special |= op->bf16_pairs(dst + q * width, pairs * width, width, lo, hi, ncols) ? 0x8000u : 0u;
            continue;
        }
        for (int64_t s = 0; s < strips; s++) {
            uint32_t *d = dst + (s * pairs + q) * width;
            const int64_t c0 = s * width, n = ncols - c0 < width ? ncols - c0 : width;
            for (int64_t i = 0; i < n; i++) {
                const uint32_t l = lo ? lo[(c0 + i) * s2] : 0u, h = hi ? hi[(c0 + i) * s2] : 0u;
                special |= ((l & 0x7f80u) + 0x80u) | ((h & 0x7f80u) + 0x80u);
                d[i] = l | h << 16;
            }
            for (int64_t i = n; i < width; i++)
                d[i] = 0;
        }
    }
    return !(special & 0x8000u);
}

/* Weight panel, read along c (unit c stride, or no unit stride at all). */
ALWAYS_INLINE void pack_weight_by_c(float *dst, int64_t nr, const ctbc_operand *w, int64_t k0,
                                    int64_t nk, int64_t o0, int64_t no, int64_t c0, int64_t nc,
                                    const int kind, const int unit)
{
    const int64_t s1 = unit ? 1 : w->s1;
    const int64_t strips = (nc + nr - 1) / nr;
    for (int64_t s = 0; s < strips; s++) {
        const int64_t valid = nc - s * nr < nr ? nc - s * nr : nr;
        for (int64_t kk = 0; kk < nk; kk++)
            for (int64_t o = 0; o < no; o++) {
                float *d = dst + ((s * nk + kk) * no + o) * nr;
                const int64_t off = (k0 + kk) * w->s0 + (c0 + s * nr) * s1 + (o0 + o) * w->s2;
                if (FAST16(w, kind, unit))
                    w->load16(d, (const uint16_t *)w->data + off, valid);
                else
                    for (int64_t j = 0; j < valid; j++)
                        d[j] = load_kind(w->data, off + j * s1, kind);
                for (int64_t j = valid; j < nr; j++)
                    d[j] = 0.0f;
            }
    }
}

#define WEIGHT_ROW_MAX 256
#define WEIGHT_BLOCK_MAX 1024

/* Weight panel, read along o (the usual contiguous c_out) and transposed
 * into the panel: contiguous reads, short-stride writes. */
ALWAYS_INLINE void pack_weight_by_o(float *dst, int64_t nr, const ctbc_operand *w, int64_t k0,
                                    int64_t nk, int64_t o0, int64_t no, int64_t c0, int64_t nc,
                                    const int kind, const int unit)
{
    (void)unit;
    const int64_t strips = (nc + nr - 1) / nr;
    for (int64_t s = 0; s < strips; s++) {
        const int64_t valid = nc - s * nr < nr ? nc - s * nr : nr;
        for (int64_t kk = 0; kk < nk; kk++) {
            float *d = dst + (s * nk + kk) * no * nr;
            if (!FAST16(w, kind, 1)) {
                /* o outer: the panel is written in order, and the nr weight
                 * rows being read stay in L1 */
                const int64_t off = (k0 + kk) * w->s0 + (c0 + s * nr) * w->s1 + o0;
                if (kind == KIND_F32 && w->transpose) {
                    w->transpose(d, nr, (const float *)w->data + off, w->s1, valid, no);
                    if (valid < nr)
                        for (int64_t o = 0; o < no; o++)
                            memset(d + o * nr + valid, 0, (size_t)(nr - valid) * sizeof(float));
                    continue;
                }
                for (int64_t o = 0; o < no; o++) {
                    for (int64_t j = 0; j < valid; j++)
                        d[o * nr + j] = load_kind(w->data, off + j * w->s1 + o, kind);
                    for (int64_t j = valid; j < nr; j++)
                        d[o * nr + j] = 0.0f;
                }
                continue;
            }
            if (FAST16(w, kind, 1) && w->transpose && valid * no <= WEIGHT_BLOCK_MAX) {
                /* widen the strip's rows (in one call when they follow each
                 * other), then transpose them into the panel */
                float block[WEIGHT_BLOCK_MAX];
                const int64_t off = (k0 + kk) * w->s0 + (c0 + s * nr) * w->s1 + o0;
                if (w->s1 == no)
                    w->load16(block, (const uint16_t *)w->data + off, valid * no);
                else
                    for (int64_t j = 0; j < valid; j++)
                        w->load16(block + j * no, (const uint16_t *)w->data + off + j * w->s1, no);
                w->transpose(d, nr, block, no, valid, no);
                if (valid < nr)
                    for (int64_t o = 0; o < no; o++)
                        memset(d + o * nr + valid, 0, (size_t)(nr - valid) * sizeof(float));
                continue;
            }
            for (int64_t j = 0; j < valid; j++) {
                const int64_t off = (k0 + kk) * w->s0 + (c0 + s * nr + j) * w->s1 + o0;
                if (FAST16(w, kind, 1) && no <= WEIGHT_ROW_MAX) {
                    float row[WEIGHT_ROW_MAX];
                    w->load16(row, (const uint16_t *)w->data + off, no);
                    for (int64_t o = 0; o < no; o++)
                        d[o * nr + j] = row[o];
                } else {
                    for (int64_t o = 0; o < no; o++)
                        d[o * nr + j] = load_kind(w->data, off + o, kind);
                }
            }
            for (int64_t j = valid; j < nr; j++)
                for (int64_t o = 0; o < no; o++)
                    d[o * nr + j] = 0.0f;
        }
    }
}

void ctbc_pack_weight(float *dst, int nr, const ctbc_operand *weight, int64_t k0, int64_t nk,
                      int64_t o0, int64_t no, int64_t c0, int64_t nc)
{
    if (weight->s2 == 1 && weight->s1 != 1) {
#define CALL(kind, unit) pack_weight_by_o(dst, nr, weight, k0, nk, o0, no, c0, nc, kind, unit)
        DISPATCH_KIND(kind_of(weight), 1, CALL);
#undef CALL
    } else {
#define CALL(kind, unit) pack_weight_by_c(dst, nr, weight, k0, nk, o0, no, c0, nc, kind, unit)
        DISPATCH_KIND(kind_of(weight), weight->s1 == 1, CALL);
#undef CALL
    }
}

/* Column run narrowed per bulk call in a transposed store. */
#define STORE_RUN 256

ctbc_writer ctbc_writer_make(void *base, ctbc_dtype dtype, const ctbc_kernel *kernel, int64_t row_split,
                             int64_t rs_hi, int64_t rs_lo, int64_t cs)
{
    return (ctbc_writer){base, dtype, row_split, rs_hi, rs_lo, cs, ctbc_store16_for(kernel, dtype),
                         kernel->transpose};
}

void ctbc_write_tile(const ctbc_writer *writer, int64_t offset, const float *src, int64_t ld,
                     int64_t rows, int64_t cols, int64_t row_first)
{
    void *out = ctbc_element_ptr(writer->base, writer->dtype, offset);
    const ctbc_dtype dtype = writer->dtype;
    const int64_t row_split = writer->row_split, rs_hi = writer->rs_hi, rs_lo = writer->rs_lo;
    const int64_t cs = writer->cs;
    const ctbc_h16_store_fn store16 = writer->store16;
    const ctbc_transpose_fn transpose = writer->transpose;
    int64_t g_hi = row_first / row_split, g_lo = row_first % row_split;
    if (cs != 1 && rs_lo == 1 && g_lo + rows <= row_split) {
        /* the tile's rows are the output's unit-stride dimension (a
         * transposed store): write along them, reading the tile by column */
        const int64_t base = g_hi * rs_hi + g_lo;
        if (dtype == CTBC_F32 && transpose) {
            transpose((float *)out + base, cs, src, ld, rows, cols);
            return;
        }
        if (store16 && transpose) {
            /* transpose a block of at most STORE_RUN rows by a run of
             * columns, then narrow it: in one call when the output columns
             * follow each other (cs == rows) */
            float run[STORE_RUN * 8];
            uint16_t *d = (uint16_t *)out + base;
            for (int64_t i0 = 0; i0 < rows; i0 += STORE_RUN) {
                const int64_t m = rows - i0 < STORE_RUN ? rows - i0 : STORE_RUN, per = STORE_RUN * 8 / m;
                for (int64_t j0 = 0; j0 < cols; j0 += per) {
                    const int64_t n = cols - j0 < per ? cols - j0 : per;
                    transpose(run, m, src + i0 * ld + j0, ld, m, n);
                    if (cs == rows && m == rows)
                        store16(d + j0 * cs, run, n * m);
                    else
                        for (int64_t j = 0; j < n; j++)
                            store16(d + i0 + (j0 + j) * cs, run + j * m, m);
                }
            }
            return;
        }
        for (int64_t j = 0; j < cols; j++) {
            const float *s = src + j;
            if (dtype == CTBC_F32) {
                float *d = (float *)out + base + j * cs;
                for (int64_t i = 0; i < rows; i++)
                    d[i] = s[i * ld];
                continue;
            }
            uint16_t *d = (uint16_t *)out + base + j * cs;
            for (int64_t i0 = 0; i0 < rows; i0 += STORE_RUN) {
                const int64_t n = rows - i0 < STORE_RUN ? rows - i0 : STORE_RUN;
                float column[STORE_RUN];
                for (int64_t i = 0; i < n; i++)
                    column[i] = s[(i0 + i) * ld];
                if (store16)
                    store16(d + i0, column, n);
                else if (dtype == CTBC_F16)
                    for (int64_t i = 0; i < n; i++)
                        d[i0 + i] = ctbc_f32_to_f16(column[i]);
                else
                    for (int64_t i = 0; i < n; i++)
                        d[i0 + i] = ctbc_f32_to_bf16(column[i]);
            }
        }
        return;
    }
    const int one_group = g_lo + rows <= row_split;
    if (cs == 1 && ld == cols && rs_lo == cols && (dtype == CTBC_F32 || store16) &&
        (one_group || (row_split <= INT64_MAX / (cols ? cols : 1) && rs_hi == row_split * cols))) {
        /* source and destination rows both follow each other: one run */
        const int64_t base = g_hi * rs_hi + g_lo * rs_lo;
        if (dtype == CTBC_F32)
            memcpy((float *)out + base, src, (size_t)(rows * cols) * sizeof(float));
        else
            store16((uint16_t *)out + base, src, rows * cols);
        return;
    }
    for (int64_t i = 0; i < rows; i++) {
        const int64_t base = g_hi * rs_hi + g_lo * rs_lo;
        if (++g_lo == row_split) {
            g_lo = 0;
            g_hi++;
        }
        const float *s = src + i * ld;
        switch (dtype) {
        case CTBC_F32: {
            float *d = (float *)out + base;
            if (cs == 1)
                memcpy(d, s, (size_t)cols * sizeof(float));
            else
                for (int64_t j = 0; j < cols; j++)
                    d[j * cs] = s[j];
            break;
        }
        case CTBC_F16: {
            uint16_t *d = (uint16_t *)out + base;
            if (cs == 1 && store16)
                store16(d, s, cols);
            else if (cs == 1)
                for (int64_t j = 0; j < cols; j++)
                    d[j] = ctbc_f32_to_f16(s[j]);
            else
                for (int64_t j = 0; j < cols; j++)
                    d[j * cs] = ctbc_f32_to_f16(s[j]);
            break;
        }
        case CTBC_BF16: {
            uint16_t *d = (uint16_t *)out + base;
            if (cs == 1 && store16)
                store16(d, s, cols);
            else if (cs == 1)
                for (int64_t j = 0; j < cols; j++)
                    d[j] = ctbc_f32_to_bf16(s[j]);
            else
                for (int64_t j = 0; j < cols; j++)
                    d[j * cs] = ctbc_f32_to_bf16(s[j]);
            break;
        }
        }
    }
}
