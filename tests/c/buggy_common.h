/*
 * The client every tests/c/buggy_*.c program is built on: a CANN-style host
 * program (aclInit, a device, a stream, aclrtMalloc'd tensors, inputs
 * uploaded with aclrtMemcpy, outputs pre-filled with a sentinel) for one
 * small aclnnConvTbcBackward problem with small-integer data, so that every
 * correct result is exact and can be compared with a plain-loop reference.
 *
 * Each program makes one mistake unless run with --fixed, which makes it
 * the corrected program. Programs do not judge themselves; they print what
 * happened, one fact a line, for tests/test_buggy_clients.py to check:
 *   CALL <api> <status>      the status of a call the test cares about
 *   MSG <api> <message>      aclGetRecentErrMsg() after a failing CALL (one line)
 *   READ <what>              what a download found in the outputs:
 *                            correct (== the reference), stale (still the
 *                            sentinel) or wrong (anything else)
 *   DONE                     the program reached its end
 * They return 0 when they ran to the end, 2 when the setup itself failed.
 */
#ifndef CONVTBC_TESTS_BUGGY_COMMON_H
#define CONVTBC_TESTS_BUGGY_COMMON_H

#include "test_common.h"

/* The outputs are filled with this byte before the op runs. */
enum { SENTINEL_BYTE = 0x7F };

/* Tensors in CANN's order: inputs self, input, weight, bias, outputs
 * gradInput, gradWeight, gradBias. */
enum { SELF, INPUT, WEIGHT, BIAS, GRAD_INPUT, GRAD_WEIGHT, GRAD_BIAS, NTENSORS };

typedef struct {
    int64_t T, B, Ci, K, Co, pad, To;
    int64_t dims[NTENSORS][3];
    int rank[NTENSORS];
    int64_t count[NTENSORS];
    size_t bytes[NTENSORS];
    float *host[NTENSORS];  /* inputs: the data uploaded; outputs: where downloads land */
    void *dev[NTENSORS];    /* the tensors' data addresses */
    aclTensor *tensor[NTENSORS];
    double *ref[NTENSORS];  /* plain-loop reference of the outputs */
    aclrtStream stream;
} Client;

static inline int has_flag(int argc, char **argv, const char *flag)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], flag) == 0)
            return 1;
    return 0;
}

/* argv's first argument that is not a flag, or `fallback`. */
static inline const char *variant(int argc, char **argv, const char *fallback)
{
    for (int i = 1; i < argc; i++)
        if (argv[i][0] != '-')
            return argv[i];
    return fallback;
}

static inline void die(const char *what, int status)
{
    const char *m = aclGetRecentErrMsg();
    fprintf(stderr, "setup failed: %s -> %d: %s\n", what, status, m ? m : "(no message)");
    exit(2);
}

#define SETUP(call)                     \
    do {                                \
        int st_ = (call);               \
        if (st_ != 0)                   \
            die(#call, st_);            \
    } while (0)

/* Prints CALL (and MSG when it failed); returns the status. */
static inline int report(const char *api, int status)
{
    printf("CALL %s %d\n", api, status);
    if (status != 0) {
        const char *m = aclGetRecentErrMsg();
        char line[4096];
        snprintf(line, sizeof line, "%s", m ? m : "(no message)");
        for (char *c = line; *c; c++)
            if (*c == '\n' || *c == '\r')
                *c = ' ';
        printf("MSG %s %s\n", api, line);
    }
    fflush(stdout);
    return status;
}

static inline void client_start(Client *c)
{
    memset(c, 0, sizeof *c);
    SETUP(aclInit(NULL));
    SETUP(aclrtSetDevice(0));
    SETUP(aclrtCreateStream(&c->stream));
}

/* Shapes, host data and the reference; no device memory yet. */
static inline void client_problem(Client *c, int64_t T, int64_t B, int64_t Ci, int64_t K, int64_t Co, int64_t pad)
{
    c->T = T; c->B = B; c->Ci = Ci; c->K = K; c->Co = Co; c->pad = pad;
    c->To = T + 2 * pad + 1 - K;
    int64_t d[NTENSORS][3] = {{c->To, B, Co}, {T, B, Ci}, {K, Ci, Co}, {Co, 0, 0},
                              {T, B, Ci}, {K, Ci, Co}, {Co, 0, 0}};
    for (int i = 0; i < NTENSORS; i++) {
        c->rank[i] = (i == BIAS || i == GRAD_BIAS) ? 1 : 3;
        c->count[i] = 1;
        for (int k = 0; k < 3; k++) {
            c->dims[i][k] = d[i][k];
            if (k < c->rank[i])
                c->count[i] *= d[i][k];
        }
        c->bytes[i] = (size_t)c->count[i] * sizeof(float);
        c->host[i] = (float *)calloc((size_t)c->count[i], sizeof(float));
    }
    for (int64_t i = 0; i < c->count[SELF]; i++) c->host[SELF][i] = (float)((i * 5) % 7) - 3;
    for (int64_t i = 0; i < c->count[INPUT]; i++) c->host[INPUT][i] = (float)((i * 3) % 5) - 2;
    for (int64_t i = 0; i < c->count[WEIGHT]; i++) c->host[WEIGHT][i] = (float)((i * 2) % 3) - 1;
    for (int64_t i = 0; i < c->count[BIAS]; i++) c->host[BIAS][i] = 0.5f;

    double *in[3];
    for (int i = 0; i < 3; i++) {
        in[i] = (double *)malloc((size_t)c->count[i] * sizeof(double));
        for (int64_t k = 0; k < c->count[i]; k++)
            in[i][k] = c->host[i][k];
    }
    for (int i = GRAD_INPUT; i < NTENSORS; i++)
        c->ref[i] = (double *)malloc((size_t)c->count[i] * sizeof(double));
    reference(in[0], in[1], in[2], T, B, Ci, K, Co, pad, c->ref[GRAD_INPUT], c->ref[GRAD_WEIGHT], c->ref[GRAD_BIAS]);
    for (int i = 0; i < 3; i++)
        free(in[i]);
}

/* Device memory for tensor i with aclrtMalloc; inputs uploaded, outputs
 * filled with the sentinel. */
static inline void client_device_buffer(Client *c, int i)
{
    SETUP(aclrtMalloc(&c->dev[i], c->bytes[i], ACL_MEM_MALLOC_HUGE_FIRST));
    if (i < GRAD_INPUT)
        SETUP(aclrtMemcpy(c->dev[i], c->bytes[i], c->host[i], c->bytes[i], ACL_MEMCPY_HOST_TO_DEVICE));
    else
        SETUP(aclrtMemset(c->dev[i], c->bytes[i], SENTINEL_BYTE, c->bytes[i]));
}

static inline void client_make_tensors(Client *c)
{
    for (int i = 0; i < NTENSORS; i++) {
        int64_t st[3];
        contiguous_strides(c->dims[i], c->rank[i], st);
        c->tensor[i] = aclCreateTensor(c->dims[i], (uint64_t)c->rank[i], ACL_FLOAT, st, 0, ACL_FORMAT_ND,
                                       c->dims[i], (uint64_t)c->rank[i], c->dev[i]);
        if (!c->tensor[i])
            die("aclCreateTensor", -1);
    }
}

/* The usual client: every tensor in aclrtMalloc'd memory. */
static inline void client_setup(Client *c, int64_t T, int64_t B, int64_t Ci, int64_t K, int64_t Co, int64_t pad)
{
    client_start(c);
    client_problem(c, T, B, Ci, K, Co, pad);
    for (int i = 0; i < NTENSORS; i++)
        client_device_buffer(c, i);
    client_make_tensors(c);
}

static inline int client_phase1(Client *c, uint64_t *ws_size, aclOpExecutor **executor)
{
    return aclnnConvTbcBackwardGetWorkspaceSize(c->tensor[SELF], c->tensor[INPUT], c->tensor[WEIGHT],
                                                c->tensor[BIAS], c->pad, 0, c->tensor[GRAD_INPUT],
                                                c->tensor[GRAD_WEIGHT], c->tensor[GRAD_BIAS], ws_size, executor);
}

/* Outputs back to the host (synchronous aclrtMemcpy, as CANN's samples
 * do); returns the first failing status. */
static inline int client_download(Client *c)
{
    for (int i = GRAD_INPUT; i < NTENSORS; i++) {
        int st = aclrtMemcpy(c->host[i], c->bytes[i], c->dev[i], c->bytes[i], ACL_MEMCPY_DEVICE_TO_HOST);
        if (st != 0)
            return st;
    }
    return 0;
}

/* "correct", "stale" or "wrong" for what the host copies of the outputs hold. */
static inline const char *client_classify(const Client *c)
{
    int correct = 1, stale = 1;
    for (int i = GRAD_INPUT; i < NTENSORS; i++) {
        const unsigned char *bytes = (const unsigned char *)c->host[i];
        for (size_t k = 0; k < c->bytes[i]; k++)
            if (bytes[k] != SENTINEL_BYTE)
                stale = 0;
        for (int64_t k = 0; k < c->count[i]; k++)
            if ((double)c->host[i][k] != c->ref[i][k])
                correct = 0;
    }
    return correct ? "correct" : stale ? "stale" : "wrong";
}

static inline void client_read(Client *c, const char *label)
{
    int st = client_download(c);
    if (st != 0)
        report("aclrtMemcpy", st);
    printf("%s %s\n", label, st != 0 ? "failed" : client_classify(c));
    fflush(stdout);
}

/* Tear-down; device buffers the program already freed must be NULL. */
static inline void client_finish(Client *c)
{
    for (int i = 0; i < NTENSORS; i++) {
        if (c->tensor[i])
            aclDestroyTensor(c->tensor[i]);
        if (c->dev[i])
            aclrtFree(c->dev[i]);
        free(c->host[i]);
        free(c->ref[i]);
    }
    aclrtDestroyStream(c->stream);
    aclrtResetDevice(0);
    aclFinalize();
    printf("DONE\n");
}

#endif /* CONVTBC_TESTS_BUGGY_COMMON_H */
