#include "api/executor.h"

#include <stdlib.h>

#include "api/errors.h"
#include "api/registry.h"
#include "api/streams.h"

static ctbc_registry live_executors = CTBC_REGISTRY_INIT;

aclOpExecutor *ctbc_executor_create(const char *op_name, size_t plan_bytes, size_t input_count,
                                    size_t output_count)
{
    aclOpExecutor *executor = calloc(1, sizeof *executor + plan_bytes);
    if (executor && !ctbc_registry_add(&live_executors, executor, sizeof *executor + plan_bytes)) {
        free(executor);
        executor = NULL;
    }
    if (!executor) {
        ctbc_fail(ACLNN_ERR_INNER_CREATE_EXECUTOR, CTBC_EE_INNER, op_name, "out of memory making the executor");
        return NULL;
    }
    executor->op_name = op_name;
    executor->input_count = input_count;
    executor->output_count = output_count;
    return executor;
}

void ctbc_executor_discard(aclOpExecutor *executor)
{
    if (executor && ctbc_registry_remove(&live_executors, executor))
        free(executor);
}

static bool is_live(const aclOpExecutor *executor)
{
    return executor && ctbc_registry_contains(&live_executors, executor);
}

aclnnStatus ctbc_executor_check_run(aclOpExecutor *executor, void *workspace, uint64_t workspace_size,
                                    aclrtStream stream, const char *api)
{
    if (!executor)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, api,
                         "Expected a proper executor but got null for argument executor.");
    if (!is_live(executor))
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                         "executor %p is not live: it was already run (an executor runs once unless "
                         "aclSetAclOpExecutorRepeatable was called on it) or destroyed",
                         (void *)executor);
    if (workspace_size > 0 && !workspace)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, api,
                         "workspace is null but workspaceSize is %llu", (unsigned long long)workspace_size);
    if (workspace_size < executor->workspace_bytes)
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                         "workspaceSize %llu is smaller than the %llu bytes phase 1 asked for",
                         (unsigned long long)workspace_size, (unsigned long long)executor->workspace_bytes);
    if (!ctbc_stream_is_live(stream))
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                         "stream %p is not a live stream (NULL is the default stream)", stream);
    return ACLNN_SUCCESS;
}

void ctbc_executor_finish_run(aclOpExecutor *executor)
{
    if (!executor->repeatable)
        ctbc_executor_discard(executor);
}

aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor)
{
    if (!executor)
        return ctbc_fail(ACLNN_ERR_INNER_NULLPTR, CTBC_EZ_PARAM, "aclSetAclOpExecutorRepeatable",
                         "Expected a proper executor but got null for argument executor.");
    if (!is_live(executor))
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, "aclSetAclOpExecutorRepeatable",
                         "executor %p is not live (already run or destroyed)", (void *)executor);
    executor->repeatable = true;
    return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor)
{
    if (!executor)
        return ctbc_fail(ACLNN_ERR_INNER_NULLPTR, CTBC_EZ_PARAM, "aclDestroyAclOpExecutor",
                         "Expected a proper executor but got null for argument executor.");
    if (!ctbc_registry_remove(&live_executors, executor))
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, "aclDestroyAclOpExecutor",
                         "executor %p is not live (already run or destroyed)", (void *)executor);
    free(executor);
    return ACLNN_SUCCESS;
}

/* Both setters: check the handles and the index, then store the address
 * that the next run uses for that tensor. */
static aclnnStatus set_address(const char *api, aclOpExecutor *executor, size_t index, const aclTensor *tensor,
                               void *addr, bool input)
{
    if (!executor || !tensor)
        return ctbc_fail(ACLNN_ERR_INNER_NULLPTR, CTBC_EZ_PARAM, api, "executor and tensor must not be NULL");
    if (!is_live(executor))
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                         "executor %p is not live (already run or destroyed)", (void *)executor);
    size_t count = input ? executor->input_count : executor->output_count;
    if (index >= count)
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                         "index %zu is out of range: %s has %zu %s (0 to %zu)", index, executor->op_name, count,
                         input ? "inputs" : "outputs", count - 1);
    (input ? executor->inputs : executor->outputs)[index] = addr;
    return ACLNN_SUCCESS;
}

aclnnStatus aclSetInputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr)
{
    return set_address("aclSetInputTensorAddr", executor, index, tensor, addr, true);
}

aclnnStatus aclSetOutputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr)
{
    return set_address("aclSetOutputTensorAddr", executor, index, tensor, addr, false);
}
