/*
 * The compute layer's thread pool under concurrent callers: several host
 * threads run ops large enough to be shared out (about 3e6 flops) at the
 * same time, so that some find the pool busy and run alone, and one thread
 * keeps a pause between calls so that pool threads go to sleep and are
 * woken. Every result must match, bit for bit, the result of the same op
 * run once up front, and that result must match the plain-loop double
 * reference. Built with -fsanitize=thread by tests/test_streams.py.
 * Usage: pool_stress [calls per thread]
 */
#include <pthread.h>
#include <time.h>

#include "test_common.h"
#include "convtbc/convtbc_ext.h"

enum { THREADS = 3, OPERANDS = 7 };
static const int64_t T = 16, B = 8, C_IN = 64, K = 3, C_OUT = 32, PAD = 1;
#define T_OUT (T + 2 * PAD + 1 - K)

static float *inputs[4];
static float *expected[3];
static int64_t dims[OPERANDS][3];
static int ranks[OPERANDS];
static int calls_per_thread = 40;

static int64_t count_of(int i) { return ranks[i] == 1 ? dims[i][0] : dims[i][0] * dims[i][1] * dims[i][2]; }

static void run_op(float *const *outputs)
{
    convtbcHostTensor h[OPERANDS];
    memset(h, 0, sizeof h);
    for (int i = 0; i < OPERANDS; i++) {
        h[i].data = i < 4 ? inputs[i] : outputs[i - 4];
        h[i].storage_elements = count_of(i);
        h[i].dtype = ACL_FLOAT;
        h[i].rank = (uint64_t)ranks[i];
        for (int d = 0; d < ranks[i]; d++)
            h[i].dims[d] = dims[i][d];
        contiguous_strides(h[i].dims, ranks[i], h[i].strides);
    }
    aclnnStatus st = convtbcConvTbcBackwardOnHost(&h[0], &h[1], &h[2], &h[3], PAD, 0, &h[4], &h[5], &h[6]);
    EXPECT(st == 0, "host call status %d: %s", st, recent_msg());
}

static void *caller(void *arg)
{
    const int id = (int)(intptr_t)arg;
    float *outputs[3];
    for (int j = 0; j < 3; j++)
        outputs[j] = (float *)malloc((size_t)count_of(4 + j) * sizeof(float));
    for (int c = 0; c < calls_per_thread; c++) {
        if (id == 0 && c % 8 == 0) { /* long enough for pool threads to sleep */
            const struct timespec pause = {0, 2000000};
            nanosleep(&pause, NULL);
        }
        run_op(outputs);
        for (int j = 0; j < 3; j++)
            EXPECT(memcmp(outputs[j], expected[j], (size_t)count_of(4 + j) * sizeof(float)) == 0,
                   "thread %d call %d: output %d differs from the first run", id, c, j);
    }
    for (int j = 0; j < 3; j++)
        free(outputs[j]);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        calls_per_thread = atoi(argv[1]);
    const int64_t d[OPERANDS][3] = {{T_OUT, B, C_OUT}, {T, B, C_IN}, {K, C_IN, C_OUT}, {C_OUT, 1, 1},
                                    {T, B, C_IN},     {K, C_IN, C_OUT}, {C_OUT, 1, 1}};
    memcpy(dims, d, sizeof dims);
    for (int i = 0; i < OPERANDS; i++)
        ranks[i] = (i == 3 || i == 6) ? 1 : 3;

    unsigned seed = 7u;
    double *dense[4];
    for (int i = 0; i < 4; i++) {
        inputs[i] = (float *)malloc((size_t)count_of(i) * sizeof(float));
        dense[i] = (double *)malloc((size_t)count_of(i) * sizeof(double));
        for (int64_t e = 0; e < count_of(i); e++) {
            seed = seed * 1103515245u + 12345u;
            inputs[i][e] = (float)((int)((seed >> 16) % 129) - 64) / 64.0f;
            dense[i][e] = inputs[i][e];
        }
    }
    for (int j = 0; j < 3; j++)
        expected[j] = (float *)malloc((size_t)count_of(4 + j) * sizeof(float));
    run_op(expected);

    double *ref[3];
    for (int j = 0; j < 3; j++)
        ref[j] = (double *)calloc((size_t)count_of(4 + j), sizeof(double));
    reference(dense[0], dense[1], dense[2], T, B, C_IN, K, C_OUT, PAD, ref[0], ref[1], ref[2]);
    for (int j = 0; j < 3; j++) {
        double scale = 0, err = 0;
        for (int64_t e = 0; e < count_of(4 + j); e++) {
            scale = fmax(scale, fabs(ref[j][e]));
            err = fmax(err, fabs(expected[j][e] - ref[j][e]));
        }
        EXPECT(err <= 1e-4 * scale, "output %d: error %.3e against the reference (scale %.3e)", j, err, scale);
    }

    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&threads[t], NULL, caller, (void *)(intptr_t)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);

    for (int i = 0; i < 4; i++) {
        free(inputs[i]);
        free(dense[i]);
    }
    for (int j = 0; j < 3; j++) {
        free(expected[j]);
        free(ref[j]);
    }
    return finish("pool_stress");
}
