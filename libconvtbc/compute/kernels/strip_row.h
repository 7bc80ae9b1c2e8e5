/*
 * One row's piece of a packed strip, for the framework's packing (pack.c)
 * and the plain four-row packing of every kernel file (strips4.h).
 */
#ifndef CONVTBC_COMPUTE_KERNELS_STRIP_ROW_H
#define CONVTBC_COMPUTE_KERNELS_STRIP_ROW_H

#include <stdint.h>
#include <string.h>

/* floats [at, at + count) of d: src's, or zeros where src is NULL */
static inline __attribute__((always_inline)) void piece_of(float *d, const float *src, int64_t at, size_t count)
{
    if (src)
        memcpy(d + at, src + at, count * sizeof(float));
    else
        memset(d + at, 0, count * sizeof(float));
}

/* d[0, n) = src[0, n), or zeros where src is NULL: a strip row of float32
 * in fixed-size pieces (the last two overlapping) that the compiler turns
 * into vector moves. Run-time lengths went to libc, a call per row: T14
 * B1334 Ci12 K25 Co4 p7 packs strips of 4 and 12 channels, and memmove and
 * memset took a third of its samples; an element loop costs more too. */
static inline __attribute__((always_inline)) void strip_row(float *d, const float *src, int64_t n)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        piece_of(d, src, j, 8);
    if (j == n)
        return;
    if (n >= 8) {
        piece_of(d, src, n - 8, 8);
    } else if (n >= 4) {
        piece_of(d, src, 0, 4);
        piece_of(d, src, n - 4, 4);
    } else if (n >= 2) {
        piece_of(d, src, 0, 2);
        piece_of(d, src, n - 2, 2);
    } else {
        piece_of(d, src, 0, 1);
    }
}

#endif /* CONVTBC_COMPUTE_KERNELS_STRIP_ROW_H */
