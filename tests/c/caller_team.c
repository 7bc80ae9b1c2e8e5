/*
 * The op called from the threads of the caller's own OpenMP team, each
 * thread with its own tensors (a data loader or a test runner that runs
 * several small problems at once). The library's loops must not bind to
 * the caller's team: every thread's output is checked against plain loops,
 * on problems small enough to run on the calling thread and on ones large
 * enough for a team of the library's own. Built with -fopenmp.
 */
#include <omp.h>

#include "aclnnop/aclnn_convolution.h"
#include "test_common.h"

enum { TEAM = 4, ROUNDS = 20 };

typedef struct {
    int64_t t, b, c_in, k, c_out, pad;
} shape;

/* out = conv_tbc(x, w, bias) by the op; 0 on success. */
static int forward(const shape *s, float *x, float *w, float *bias, float *out)
{
    const int64_t t_out = s->t + 2 * s->pad + 1 - s->k;
    const int64_t dx[3] = {s->t, s->b, s->c_in}, dw[3] = {s->k, s->c_in, s->c_out}, db[1] = {s->c_out},
                  dy[3] = {t_out, s->b, s->c_out};
    int64_t sx[3], sw[3], sb[1] = {1}, sy[3];
    contiguous_strides(dx, 3, sx), contiguous_strides(dw, 3, sw), contiguous_strides(dy, 3, sy);
    aclTensor *tx = make_tensor(dx, 3, ACL_FLOAT, sx, 0, ACL_FORMAT_ND, dx[0] * dx[1] * dx[2], x);
    aclTensor *tw = make_tensor(dw, 3, ACL_FLOAT, sw, 0, ACL_FORMAT_ND, dw[0] * dw[1] * dw[2], w);
    aclTensor *tb = make_tensor(db, 1, ACL_FLOAT, sb, 0, ACL_FORMAT_ND, db[0], bias);
    aclTensor *ty = make_tensor(dy, 3, ACL_FLOAT, sy, 0, ACL_FORMAT_ND, dy[0] * dy[1] * dy[2], out);
    uint64_t size = 0;
    aclOpExecutor *executor = NULL;
    int status = aclnnConvTbcGetWorkspaceSize(tx, tw, tb, s->pad, ty, 0, &size, &executor);
    if (status == 0) {
        void *workspace = size ? malloc((size_t)size) : NULL;
        status = aclnnConvTbc(workspace, size, executor, NULL);
        free(workspace);
    }
    aclDestroyTensor(tx), aclDestroyTensor(tw), aclDestroyTensor(tb), aclDestroyTensor(ty);
    return status;
}

/* Small integers: every sum is exact in float32, so outputs compare equal. */
static int check_one(const shape *s, unsigned seed)
{
    const int64_t t_out = s->t + 2 * s->pad + 1 - s->k;
    const int64_t nx = s->t * s->b * s->c_in, nw = s->k * s->c_in * s->c_out, ny = t_out * s->b * s->c_out;
    float *x = malloc(sizeof(float) * (size_t)nx), *w = malloc(sizeof(float) * (size_t)nw);
    float *bias = malloc(sizeof(float) * (size_t)s->c_out), *out = malloc(sizeof(float) * (size_t)ny);
    for (int64_t i = 0; i < nx; i++)
        x[i] = (float)((seed + (unsigned)i * 7u) % 5u) - 2.0f;
    for (int64_t i = 0; i < nw; i++)
        w[i] = (float)((seed + (unsigned)i * 3u) % 3u) - 1.0f;
    for (int64_t o = 0; o < s->c_out; o++)
        bias[o] = (float)(seed % 7u);
    int wrong = forward(s, x, w, bias, out) != 0;
    const int64_t x_strides[3] = {s->b * s->c_in, s->c_in, 1};
    for (int64_t t = 0; t < t_out && !wrong; t++)
        for (int64_t b = 0; b < s->b; b++)
            for (int64_t o = 0; o < s->c_out; o++)
                if (out[(t * s->b + b) * s->c_out + o] !=
                    (float)forward_reference(s->t, s->c_in, s->k, s->c_out, s->pad, x, x_strides, w, bias, t, b, o))
                    wrong = 1;
    free(x), free(w), free(bias), free(out);
    return wrong;
}

int main(void)
{
    /* two below the library's team threshold (dot products, GEMM), one above */
    const shape shapes[] = {{9, 4, 16, 3, 5, 1}, {8, 17, 24, 3, 20, 1}, {12, 64, 256, 3, 64, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        int failures = 0;
#pragma omp parallel num_threads(TEAM) reduction(+ : failures)
        for (int round = 0; round < ROUNDS; round++)
            failures += check_one(&shapes[i], (unsigned)(omp_get_thread_num() * 131 + round));
        EXPECT(failures == 0, "shape %zu: %d of %d calls from a team of %d gave wrong outputs", i, failures,
               TEAM * ROUNDS, TEAM);
    }
    return finish("caller_team");
}
