/* Packing and storing (see pack.h). */
#include "compute/pack.h"

#include <string.h>

#include "compute/float_convert.h"

ctbc_operand ctbc_operand_make(const void *data, const ctbc_layout *layout, ctbc_rounding rounding)
{
    ctbc_operand op;
    op.data = data;
    op.dtype = layout->dtype;
    /* cubeMathType only ever rounds FLOAT operands */
    op.rounding = layout->dtype == CTBC_F32 ? rounding : CTBC_ROUND_NONE;
    op.s0 = layout->stride[0];
    op.s1 = layout->stride[1];
    op.s2 = layout->stride[2];
    return op;
}

void ctbc_convert_run(float *dst, const ctbc_operand *op, int64_t offset, int64_t stride,
                      int64_t n)
{
    switch (op->dtype) {
    case CTBC_F32: {
        const float *s = (const float *)op->data + offset;
        switch (op->rounding) {
        case CTBC_ROUND_NONE:
            if (stride == 1)
                memcpy(dst, s, (size_t)n * sizeof(float));
            else
                for (int64_t i = 0; i < n; i++)
                    dst[i] = s[i * stride];
            break;
        case CTBC_ROUND_HF32:
            for (int64_t i = 0; i < n; i++)
                dst[i] = ctbc_round_hf32(s[i * stride]);
            break;
        case CTBC_ROUND_FP16:
            for (int64_t i = 0; i < n; i++)
                dst[i] = ctbc_round_fp16(s[i * stride]);
            break;
        }
        break;
    }
    case CTBC_F16: {
        const uint16_t *s = (const uint16_t *)op->data + offset;
        for (int64_t i = 0; i < n; i++)
            dst[i] = ctbc_f16_to_f32(s[i * stride]);
        break;
    }
    case CTBC_BF16: {
        const uint16_t *s = (const uint16_t *)op->data + offset;
        for (int64_t i = 0; i < n; i++)
            dst[i] = ctbc_bf16_to_f32(s[i * stride]);
        break;
    }
    }
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
    const int64_t strips = (ncols + width - 1) / width;
    row_walker w = row_walker_at(row_first + r_begin, b_size, op);
    for (int64_t r = r_begin; r < r_end; r++, row_walker_next(&w)) {
        const int64_t row_off = row_walker_offset(&w) + col0 * op->s2;
        for (int64_t s = 0; s < strips; s++) {
            float *d = dst + (s * strip_rows + r) * width;
            int64_t valid = ncols - s * width;
            if (valid > width)
                valid = width;
            ctbc_convert_run(d, op, row_off + s * width * op->s2, op->s2, valid);
            for (int64_t j = valid; j < width; j++)
                d[j] = 0.0f;
        }
    }
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
    if (r_begin < r_end) {
        row_walker w = row_walker_at(row_first + r_begin, b_size, op);
        for (int64_t r = r_begin; r < r_end; r++, row_walker_next(&w))
            ctbc_convert_run(dst + r * ld, op, row_walker_offset(&w) + col0 * op->s2, op->s2,
                             ncols);
    }
    for (int64_t r = r_end; r < nrows; r++)
        memset(dst + r * ld, 0, (size_t)ncols * sizeof(float));
}

void ctbc_pack_weight(float *dst, int nr, const ctbc_operand *weight, int64_t k0, int64_t nk,
                      int64_t o0, int64_t no, int64_t c0, int64_t nc)
{
    const int64_t strips = (nc + nr - 1) / nr;
    for (int64_t s = 0; s < strips; s++) {
        int64_t valid = nc - s * nr;
        if (valid > nr)
            valid = nr;
        for (int64_t kk = 0; kk < nk; kk++)
            for (int64_t o = 0; o < no; o++) {
                float *d = dst + ((s * nk + kk) * no + o) * nr;
                const int64_t off =
                    (k0 + kk) * weight->s0 + (c0 + s * nr) * weight->s1 + (o0 + o) * weight->s2;
                ctbc_convert_run(d, weight, off, weight->s1, valid);
                for (int64_t j = valid; j < nr; j++)
                    d[j] = 0.0f;
            }
    }
}

void ctbc_store_tile(void *out, ctbc_dtype dtype, const float *src, int64_t ld, int64_t rows,
                     int64_t cols, int64_t row_first, int64_t row_split, int64_t rs_hi,
                     int64_t rs_lo, int64_t cs)
{
    for (int64_t i = 0; i < rows; i++) {
        const int64_t g = row_first + i;
        const int64_t base = (g / row_split) * rs_hi + (g % row_split) * rs_lo;
        const float *s = src + i * ld;
        switch (dtype) {
        case CTBC_F32: {
            float *d = (float *)out + base;
            for (int64_t j = 0; j < cols; j++)
                d[j * cs] = s[j];
            break;
        }
        case CTBC_F16: {
            uint16_t *d = (uint16_t *)out + base;
            for (int64_t j = 0; j < cols; j++)
                d[j * cs] = ctbc_f32_to_f16(s[j]);
            break;
        }
        case CTBC_BF16: {
            uint16_t *d = (uint16_t *)out + base;
            for (int64_t j = 0; j < cols; j++)
                d[j * cs] = ctbc_f32_to_bf16(s[j]);
            break;
        }
        }
    }
}
