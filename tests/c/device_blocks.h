/*
 * Device memory for tests that must show a refused call changed nothing:
 * every aclrtMalloc block a test makes is recorded with the bytes it should
 * hold, and blocks_unchanged() reads them all back through aclrtMemcpy
 * (the host cannot load device memory) and compares. Also the op's seven
 * tensors over blocks of their own, for a small problem with small-integer
 * data (every sum exact). Compiles as C11; include after test_common.h.
 */
#ifndef CONVTBC_TESTS_DEVICE_BLOCKS_H
#define CONVTBC_TESTS_DEVICE_BLOCKS_H

#include "test_common.h"

enum { SELF, INPUT, WEIGHT, BIAS, GRAD_INPUT, GRAD_WEIGHT, GRAD_BIAS, NT };
static const char *const NAMES[NT] = {"self", "input", "weight", "bias", "gradInput", "gradWeight", "gradBias"};

enum { MAX_BLOCKS = 64 };
typedef struct {
    void *dev;
    size_t bytes;
    unsigned char *expect;
} Block;
static Block g_blocks[MAX_BLOCKS];
static int g_block_count;

static inline Block *block_of(const void *dev)
{
    for (int i = 0; i < g_block_count; i++)
        if (g_blocks[i].dev == dev)
            return &g_blocks[i];
    return NULL;
}

/* A block filled with `fill`. */
static inline void *block_new(size_t bytes, unsigned char fill)
{
    void *dev = NULL;
    EXPECT_EQ(aclrtMalloc(&dev, bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS, "aclrtMalloc");
    EXPECT(g_block_count < MAX_BLOCKS, "too many blocks");
    if (!dev || g_block_count >= MAX_BLOCKS)
        return dev;
    EXPECT_EQ(aclrtMemset(dev, bytes, fill, bytes), ACL_SUCCESS, "aclrtMemset");
    Block *b = &g_blocks[g_block_count++];
    b->dev = dev;
    b->bytes = bytes;
    b->expect = (unsigned char *)malloc(bytes);
    memset(b->expect, fill, bytes);
    return dev;
}

/* Writes `bytes` of `host` at byte `at` of the block `dev`. */
static inline void block_write(void *dev, size_t at, const void *host, size_t bytes)
{
    Block *b = block_of(dev);
    EXPECT(b && at + bytes <= b->bytes, "block_write out of its block");
    if (!b || at + bytes > b->bytes)
        return;
    EXPECT_EQ(aclrtMemcpy((char *)dev + at, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS, "upload");
    memcpy(b->expect + at, host, bytes);
}

/* Takes what the block holds now as what it should hold (after a run). */
static inline void block_accept(void *dev)
{
    Block *b = block_of(dev);
    if (b)
        EXPECT_EQ(aclrtMemcpy(b->expect, b->bytes, dev, b->bytes, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS,
                  "download");
}

static inline void block_read(const void *dev, size_t at, void *host, size_t bytes)
{
    EXPECT_EQ(aclrtMemcpy(host, bytes, (const char *)dev + at, bytes, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS,
              "download");
}

/* 1 when every block holds what it should; names the first that does not. */
static inline int blocks_unchanged(const char *what)
{
    for (int i = 0; i < g_block_count; i++) {
        Block *b = &g_blocks[i];
        unsigned char *now = (unsigned char *)malloc(b->bytes);
        EXPECT_EQ(aclrtMemcpy(now, b->bytes, b->dev, b->bytes, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS,
                  "download");
        size_t at = 0;
        while (at < b->bytes && now[at] == b->expect[at])
            at++;
        free(now);
        if (at < b->bytes) {
            fprintf(stderr, "%s: block %d (%zu bytes) changed at byte %zu\n", what, i, b->bytes, at);
            return 0;
        }
    }
    return 1;
}

static inline void blocks_free(void)
{
    for (int i = 0; i < g_block_count; i++) {
        EXPECT_EQ(aclrtFree(g_blocks[i].dev), ACL_SUCCESS, "aclrtFree");
        free(g_blocks[i].expect);
    }
    g_block_count = 0;
}

/* One problem: shapes, and host copies of the data in float. */
typedef struct {
    int64_t T, B, Ci, K, Co, pad, To;
    int64_t dims[NT][3];
    int rank[NT];
    int64_t count[NT];
    float *host[NT];
    void *dev[NT];
    aclTensor *t[NT];
} Problem;

static inline void problem_shapes(Problem *p, int64_t T, int64_t B, int64_t Ci, int64_t K, int64_t Co, int64_t pad)
{
    memset(p, 0, sizeof *p);
    p->T = T, p->B = B, p->Ci = Ci, p->K = K, p->Co = Co, p->pad = pad, p->To = T + 2 * pad + 1 - K;
    const int64_t shapes[NT][3] = {{p->To, B, Co}, {T, B, Ci}, {K, Ci, Co}, {Co}, {T, B, Ci}, {K, Ci, Co}, {Co}};
    for (int i = 0; i < NT; i++) {
        p->rank[i] = i == BIAS || i == GRAD_BIAS ? 1 : 3;
        p->count[i] = 1;
        for (int d = 0; d < p->rank[i]; d++) {
            p->dims[i][d] = shapes[i][d];
            p->count[i] *= shapes[i][d];
        }
    }
}

/* Small integers for the inputs, -7 (never a result here) for outputs. */
static inline float problem_value(int i, int64_t e) { return i >= GRAD_INPUT ? -7.0f : (float)((e * 7 + i * 3) % 5 - 2); }

static inline aclTensor *dense_tensor(const Problem *p, int i, void *dev)
{
    int64_t strides[3];
    contiguous_strides(p->dims[i], p->rank[i], strides);
    return make_tensor(p->dims[i], (uint64_t)p->rank[i], ACL_FLOAT, strides, 0, ACL_FORMAT_ND, p->count[i], dev);
}

/* Each tensor dense in a block of its own (FLOAT). */
static inline void problem_init(Problem *p, int64_t T, int64_t B, int64_t Ci, int64_t K, int64_t Co, int64_t pad)
{
    problem_shapes(p, T, B, Ci, K, Co, pad);
    for (int i = 0; i < NT; i++) {
        size_t bytes = (size_t)(p->count[i] > 0 ? p->count[i] : 1) * sizeof(float);
        p->host[i] = (float *)malloc(bytes);
        for (int64_t e = 0; e < p->count[i]; e++)
            p->host[i][e] = problem_value(i, e);
        p->dev[i] = block_new(bytes, 0);
        if (p->count[i] > 0)
            block_write(p->dev[i], 0, p->host[i], (size_t)p->count[i] * sizeof(float));
        p->t[i] = dense_tensor(p, i, p->dev[i]);
    }
}

static inline void problem_free(Problem *p)
{
    for (int i = 0; i < NT; i++) {
        aclDestroyTensor(p->t[i]);
        free(p->host[i]);
    }
}

/* The exact gradients of the problem's inputs, dense, in double. */
static inline void problem_reference(const Problem *p, double *out[NT])
{
    double *in[NT];
    for (int i = 0; i < NT; i++) {
        in[i] = (double *)calloc((size_t)(p->count[i] > 0 ? p->count[i] : 1), sizeof(double));
        out[i] = i >= GRAD_INPUT ? in[i] : NULL;
        for (int64_t e = 0; e < p->count[i] && i < GRAD_INPUT; e++)
            in[i][e] = p->host[i][e];
    }
    reference(in[SELF], in[INPUT], in[WEIGHT], p->T, p->B, p->Ci, p->K, p->Co, p->pad, in[GRAD_INPUT],
              in[GRAD_WEIGHT], in[GRAD_BIAS]);
    for (int i = 0; i < GRAD_INPUT; i++)
        free(in[i]);
}

static inline aclnnStatus phase1_of(aclTensor *const *t, int64_t pad, uint64_t *ws, aclOpExecutor **ex)
{
    recent_msg();
    *ex = NULL;
    return aclnnConvTbcBackwardGetWorkspaceSize(t[SELF], t[INPUT], t[WEIGHT], t[BIAS], pad, 0, t[GRAD_INPUT],
                                                t[GRAD_WEIGHT], t[GRAD_BIAS], ws, ex);
}

/* Phase 2 with a workspace of its own, synchronised; the status of the
 * call (or of the synchronisation when the call passed). */
static inline aclnnStatus phase2_of(aclOpExecutor *ex, uint64_t ws, aclrtStream stream)
{
    void *workspace = NULL;
    if (ws > 0)
        EXPECT_EQ(aclrtMalloc(&workspace, (size_t)ws, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS, "workspace");
    aclnnStatus st = aclnnConvTbcBackward(workspace, ws, ex, stream);
    aclError synced = aclrtSynchronizeStream(stream);
    if (workspace)
        aclrtFree(workspace);
    return st != 0 ? st : (aclnnStatus)synced;
}

#endif /* CONVTBC_TESTS_DEVICE_BLOCKS_H */
