/*
 * The whole two-phase call of an op for host arrays, in C, so that a
 * binding crosses into the library once per call instead of a dozen times
 * (tensors, phase 1, workspace, phase 2, cleanup): convtbcConvTbcOnHost
 * and convtbcConvTbcBackwardOnHost.
 */
#include <pthread.h>
#include <stdlib.h>

#include "aclnnop/aclnn_convolution.h"
#include "aclnnop/aclnn_convolution_backward.h"
#include "api/conv_tbc_backward.h"
#include "api/conv_tbc_forward.h"
#include "api/errors.h"
#include "api/executor.h"
#include "api/soc_profile.h"
#include "convtbc/convtbc_ext.h"

enum { MAX_OPERANDS = 7 };

/* One op as the host calls run it: phase 1 on the tensors (in the order of
 * its phase-1 prototype), then its phase 2 on the calling thread. */
typedef struct {
    const char *api;
    size_t operand_count;
    aclnnStatus (*phase1)(aclTensor *const *t, int64_t pad, int8_t cube_math_type, uint64_t *workspace_bytes,
                          aclOpExecutor **executor);
    aclnnStatus (*run_host)(aclOpExecutor *executor, void *workspace);
} host_op;

static aclnnStatus backward_phase1(aclTensor *const *t, int64_t pad, int8_t cube_math_type,
                                   uint64_t *workspace_bytes, aclOpExecutor **executor)
{
    return aclnnConvTbcBackwardGetWorkspaceSize(t[0], t[1], t[2], t[3], pad, cube_math_type, t[4], t[5], t[6],
                                                workspace_bytes, executor);
}

static aclnnStatus forward_phase1(aclTensor *const *t, int64_t pad, int8_t cube_math_type, uint64_t *workspace_bytes,
                                  aclOpExecutor **executor)
{
    return aclnnConvTbcGetWorkspaceSize(t[0], t[1], t[2], pad, t[3], cube_math_type, workspace_bytes, executor);
}

static const host_op BACKWARD = {"convtbcConvTbcBackwardOnHost", 7, backward_phase1,
                                 ctbc_conv_tbc_backward_run_host};
static const host_op FORWARD = {"convtbcConvTbcOnHost", 4, forward_phase1, ctbc_conv_tbc_run_host};

/* NULL for a NULL operand; otherwise the tensor, or NULL with
 * *refused set when it or aclCreateTensor refuses the description. */
static aclTensor *tensor_of(const char *api, const convtbcHostTensor *operand, bool *refused)
{
    if (!operand)
        return NULL;
    /* aclCreateTensor takes more dims than this struct holds. */
    const size_t capacity = sizeof operand->dims / sizeof *operand->dims;
    if (operand->rank > capacity) {
        ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api, "a convtbcHostTensor has at most %zu dims, got %llu",
                  capacity, (unsigned long long)operand->rank);
        *refused = true;
        return NULL;
    }
    const int64_t storage = operand->storage_elements;
    aclTensor *tensor = aclCreateTensor(operand->dims, operand->rank, operand->dtype, operand->strides,
                                        operand->offset, ACL_FORMAT_ND, &storage, 1, operand->data);
    *refused = !tensor;
    return tensor;
}

/* The calling thread's last workspace, kept for its next call: host calls
 * repeat the same few problems, and a workspace of megabytes allocated
 * afresh each time comes back from the allocator as new pages, whose
 * faults cost as much as a few hundred microseconds of compute (T255 B9
 * Ci816 K65 Co7 float16: 1500 faults a call). Kept up to KEPT_BYTES; the
 * key frees it when the thread exits. */
enum { KEPT_BYTES = 64 << 20 };

typedef struct {
    void *base;
    size_t bytes;
} kept_workspace;

static _Thread_local kept_workspace kept;
static pthread_key_t kept_key;
static pthread_once_t kept_once = PTHREAD_ONCE_INIT;

/* libc's free itself as the destructor: no code of this library runs at
 * thread exit, so a thread may outlive a dlclose of it. */
static void make_kept_key(void) { (void)pthread_key_create(&kept_key, free); }

/* A 64-byte aligned workspace of `bytes` (> 0) for this call, or NULL. */
static void *take_workspace(size_t bytes)
{
    if (kept.bytes >= bytes)
        return kept.base;
    void *base = NULL;
    if (posix_memalign(&base, 64, bytes) != 0)
        return NULL;
    if (bytes > KEPT_BYTES)
        return base; /* the caller frees it */
    pthread_once(&kept_once, make_kept_key);
    free(kept.base);
    kept = (kept_workspace){base, bytes};
    (void)pthread_setspecific(kept_key, base);
    return base;
}

static void give_back_workspace(void *base)
{
    if (base != kept.base)
        free(base);
}

static aclnnStatus run_both_phases(const host_op *op, aclTensor *const *t, int64_t pad, int8_t cube_math_type)
{
    uint64_t workspace_bytes = 0;
    aclOpExecutor *executor = NULL;
    CTBC_RETURN_IF_FAILED(op->phase1(t, pad, cube_math_type, &workspace_bytes, &executor));
    void *workspace = NULL;
    if (workspace_bytes > 0 && !(workspace = take_workspace((size_t)workspace_bytes))) {
        ctbc_executor_discard(executor);
        return ctbc_fail(ACLNN_ERR_INNER, CTBC_EE_INNER, op->api, "cannot allocate a workspace of %llu bytes",
                         (unsigned long long)workspace_bytes);
    }
    aclnnStatus status = op->run_host(executor, workspace);
    ctbc_executor_discard(executor);
    give_back_workspace(workspace);
    return status;
}

static aclnnStatus on_host(const host_op *op, const convtbcHostTensor *const *operands, int64_t pad,
                           int8_t cube_math_type)
{
    aclTensor *tensors[MAX_OPERANDS] = {NULL};
    /* So that a failure's messages are this call's alone, without the
     * caller paying a crossing to read and drop older ones. */
    ctbc_errors_clear();
    /* This call stands in for aclInit too: it refuses what aclInit would. */
    aclnnStatus status = ctbc_soc_check_environment(op->api);
    for (size_t i = 0; i < op->operand_count && status == ACLNN_SUCCESS; i++) {
        bool refused = false;
        tensors[i] = tensor_of(op->api, operands[i], &refused);
        if (refused)
            status = ACLNN_ERR_PARAM_INVALID; /* aclCreateTensor recorded why */
    }
    if (status == ACLNN_SUCCESS)
        status = run_both_phases(op, tensors, pad, cube_math_type);
    for (size_t i = 0; i < op->operand_count; i++)
        if (tensors[i])
            aclDestroyTensor(tensors[i]);
    return status;
}

aclnnStatus convtbcConvTbcBackwardOnHost(const convtbcHostTensor *self, const convtbcHostTensor *input,
                                         const convtbcHostTensor *weight, const convtbcHostTensor *bias,
                                         int64_t pad, int8_t cubeMathType, const convtbcHostTensor *gradInput,
                                         const convtbcHostTensor *gradWeight, const convtbcHostTensor *gradBias)
{
    const convtbcHostTensor *const operands[] = {self, input, weight, bias, gradInput, gradWeight, gradBias};
    return on_host(&BACKWARD, operands, pad, cubeMathType);
}

aclnnStatus convtbcConvTbcOnHost(const convtbcHostTensor *self, const convtbcHostTensor *weight,
                                 const convtbcHostTensor *bias, int64_t pad, int8_t cubeMathType,
                                 const convtbcHostTensor *out)
{
    const convtbcHostTensor *const operands[] = {self, weight, bias, out};
    return on_host(&FORWARD, operands, pad, cubeMathType);
}
