/*
 * Four rows into packed strips (ctbc_strips4_fn in ukernel.h), written once
 * in plain C (the framework's row pieces, strip_row.h) and included by
 * every kernel file, as row_sums.h is; the AVX-512 entries replace it with
 * masked moves.
 */
#ifndef CONVTBC_COMPUTE_KERNELS_STRIPS4_H
#define CONVTBC_COMPUTE_KERNELS_STRIPS4_H

#include "compute/kernels/strip_row.h"
#include "compute/kernels/ukernel.h"

static void strips4(float *dst, int64_t strip_step, int64_t width, const float *const rows[4], int64_t strips)
{
    for (int64_t s = 0; s < strips; s++, dst += strip_step)
        for (int i = 0; i < 4; i++)
            strip_row(dst + i * width, rows[i] + s * width, width);
}

#endif /* CONVTBC_COMPUTE_KERNELS_STRIPS4_H */
