/* The shared edge helpers of the GEMM drivers (see driver.h). */
#include <string.h>

#include "compute/driver.h"

/* The shared edge helper: computes the full micro-tile into scratch and adds
 * only the rows whose flag is set. */
void ctbc_edge_rows(const ctbc_kernel *kern, const ctbc_ukr_args *args, const float *a,
                    const float *b, float *c, int64_t ldc, const unsigned char *row_ok)
{
    float tile[CTBC_MR_MAX * CTBC_NR_MAX];
    const int mr = kern->mr, nr = kern->nr;
    memset(tile, 0, sizeof(float) * (size_t)(mr * nr));
    kern->ukr(args, a, b, tile, nr);
    ctbc_add_tile(c, ldc, tile, mr, nr, row_ok, NULL);
}

void ctbc_add_tile(float *c, int64_t ldc, const float *tile, int64_t mr, int64_t nr, const unsigned char *row_ok,
                   const unsigned char *column_ok)
{
    for (int64_t i = 0; i < mr; i++)
        if (!row_ok || row_ok[i])
            for (int64_t j = 0; j < nr; j++)
                if (!column_ok || column_ok[j])
                    c[i * ldc + j] += tile[i * nr + j];
}

/* No Inf or NaN among x[0..n): an all-ones exponent carries into the sign
 * bit when 2^23 is added to it. Two vectors of four lanes (the width
 * every target's base ISA holds in registers), no early exit. */
typedef uint32_t lanes4 __attribute__((vector_size(16)));

int ctbc_all_finite(const float *x, int64_t n)
{
    lanes4 acc0 = {0}, acc1 = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        lanes4 u0, u1;
        memcpy(&u0, x + i, sizeof u0);
        memcpy(&u1, x + i + 4, sizeof u1);
        acc0 |= (u0 & 0x7f800000u) + 0x00800000u;
        acc1 |= (u1 & 0x7f800000u) + 0x00800000u;
    }
    acc0 |= acc1;
    uint32_t all = 0;
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        all |= (u & 0x7f800000u) + 0x00800000u;
    }
    for (int l = 0; l < 4; l++)
        all |= acc0[l];
    return !(all & 0x80000000u);
}
