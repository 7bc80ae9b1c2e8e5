/*
 * The pair-interleaving kernel (ctbc_bf16_pairs_fn in ukernel.h), written
 * once in plain C and included by every kernel file, as dot_rows.h is, so
 * that each ISA interleaves at its own vector width: packing grad_output
 * into bfloat16 pairs took a quarter of T1 B3841 Ci14 K7 Co362 p7 on the
 * AMX path at the library's baseline width.
 */
#ifndef CONVTBC_COMPUTE_KERNELS_BF16_PAIRS_H
#define CONVTBC_COMPUTE_KERNELS_BF16_PAIRS_H

#include "compute/kernels/ukernel.h"

static int bf16_pairs(uint32_t *dst, int64_t strip_stride, int64_t width, const uint16_t *first,
                      const uint16_t *second, int64_t n)
{
    /* (bits & 0x7f80) + 0x80 carries into bit 15 exactly when a value's
     * exponent is all ones (Inf or NaN) */
    uint32_t special = 0;
    for (int64_t c0 = 0; c0 < n; c0 += width, dst += strip_stride) {
        const int64_t valid = n - c0 < width ? n - c0 : width;
        uint32_t *restrict d = dst;
        const uint16_t *restrict lo = first + c0, *restrict hi = second + c0;
        for (int64_t i = 0; i < valid; i++) {
            const uint32_t l = lo[i], h = hi[i];
            special |= ((l & 0x7f80u) + 0x80u) | ((h & 0x7f80u) + 0x80u);
            d[i] = l | h << 16;
        }
        for (int64_t i = valid; i < width; i++)
            d[i] = 0;
    }
    return (special & 0x8000u) != 0;
}

#endif /* CONVTBC_COMPUTE_KERNELS_BF16_PAIRS_H */
