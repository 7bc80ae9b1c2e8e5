/*
 * The row-sum kernel (ctbc_row_sums_fn in ukernel.h), written once in plain
 * C and included by every kernel file, as dot_rows.h is, so that each ISA
 * vectorizes the same adds with its own registers: grad_bias's column sums
 * are bound by how fast grad_output streams in, and the library's
 * baseline build adds four floats an instruction (T1039 B3 Ci1 K2 Co1951:
 * a third of the op's samples).
 *
 * Every element is one chain of float32 adds in row order within its lane,
 * so every ISA gives the same bits.
 */
#ifndef CONVTBC_COMPUTE_KERNELS_ROW_SUMS_H
#define CONVTBC_COMPUTE_KERNELS_ROW_SUMS_H

#include "compute/kernels/ukernel.h"

static int row_sums(float *lanes, int64_t lane_stride, int lane, const float *rows, int64_t row_stride,
                    int64_t n_rows, int64_t n)
{
    for (int64_t r = 0; r < n_rows; r++) {
        float *restrict sums = lanes + lane * lane_stride;
        const float *restrict values = rows + r * row_stride;
        for (int64_t o = 0; o < n; o++)
            sums[o] += values[o];
        lane = lane + 1 == CTBC_ROW_SUM_LANES ? 0 : lane + 1;
    }
    return lane;
}

#endif /* CONVTBC_COMPUTE_KERNELS_ROW_SUMS_H */
