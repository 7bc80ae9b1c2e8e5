/* The shared edge helper of the GEMM drivers (see driver.h). */
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
    for (int i = 0; i < mr; i++)
        if (row_ok[i])
            for (int j = 0; j < nr; j++)
                c[i * ldc + j] += tile[i * nr + j];
}
