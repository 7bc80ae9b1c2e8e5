#include "api/executor.h"

#include <pthread.h>
#include <stdlib.h>

#include "api/errors.h"
#include "api/lists.h"
#include "api/log.h"
#include "api/registry.h"
#include "api/streams.h"
#include "api/tensor.h"

/* state: the number of users in the low bits, DYING once the executor is
 * consumed or destroyed (no new user may acquire it; the last user to
 * release it frees it). */
#define DYING ((uint_least32_t)1 << 31)

static ctbc_registry live_executors = CTBC_REGISTRY_INIT;
/* Held while a caller's pointer is looked up and acquired, and while the
 * last user unregisters it: an executor found in the registry under it is
 * not freed before the lookup has counted itself a user. */
static pthread_mutex_t lifetime = PTHREAD_MUTEX_INITIALIZER;

aclOpExecutor *ctbc_executor_create(const char *op_name, size_t plan_bytes, size_t input_count,
                                    size_t output_count)
{
    aclOpExecutor *executor = calloc(1, sizeof *executor + plan_bytes);
    if (executor) {
        atomic_init(&executor->repeatable, false);
        atomic_init(&executor->state, 0);
    }
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

void ctbc_executor_bind(aclOpExecutor *executor, size_t index, const aclTensor *tensor, bool input)
{
    (input ? executor->inputs : executor->outputs)[index] = tensor->data;
    (input ? executor->input_tensors : executor->output_tensors)[index] = tensor;
}

void ctbc_executor_discard(aclOpExecutor *executor)
{
    if (executor && ctbc_registry_remove(&live_executors, executor))
        free(executor);
}

/* Counts the caller a user of a live executor; false for a pointer that is
 * not one (never registered, freed, or consumed by another thread). */
static bool acquire(aclOpExecutor *executor)
{
    bool acquired = false;
    pthread_mutex_lock(&lifetime);
    if (ctbc_registry_contains(&live_executors, executor)) {
        uint_least32_t state = atomic_load(&executor->state);
        while (!(state & DYING) && !acquired)
            acquired = atomic_compare_exchange_weak(&executor->state, &state, state + 1);
    }
    pthread_mutex_unlock(&lifetime);
    return acquired;
}

/* Ends a use; the last user of a dying executor frees it. */
static void release(aclOpExecutor *executor)
{
    if (atomic_fetch_sub(&executor->state, 1) != (DYING | 1))
        return;
    pthread_mutex_lock(&lifetime);
    ctbc_registry_remove(&live_executors, executor);
    pthread_mutex_unlock(&lifetime);
    free(executor);
}

/* Marks an acquired executor consumed; true for the one caller that did,
 * false when another thread consumed it first. */
static bool take(aclOpExecutor *executor)
{
    return !(atomic_fetch_or(&executor->state, DYING) & DYING);
}

/* Undoes take() (a refused run leaves the executor live). */
static void untake(aclOpExecutor *executor) { atomic_fetch_and(&executor->state, ~DYING); }

static aclnnStatus not_live(const char *api, const aclOpExecutor *executor)
{
    return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                     "executor %p is not live (already run or destroyed)", (const void *)executor);
}

aclnnStatus ctbc_executor_begin_run(aclOpExecutor *executor, void *workspace, uint64_t workspace_size,
                                    aclrtStream stream, const char *api)
{
    if (!executor)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, api,
                         "Expected a proper executor but got null for argument executor.");
    bool acquired = acquire(executor);
    /* A repeatable executor is shared by its runs; any other is this run's
     * alone, and a racing run or destroy loses. */
    if (acquired && !atomic_load(&executor->repeatable) && !take(executor)) {
        release(executor); /* it may be freed from here on */
        acquired = false;
    }
    if (!acquired)
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                         "executor %p is not live: it was already run (an executor runs once unless "
                         "aclSetAclOpExecutorRepeatable was called on it) or destroyed",
                         (void *)executor);
    aclnnStatus status = ACLNN_SUCCESS;
    if (workspace_size > 0 && !workspace)
        status = ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, api,
                           "workspace is null but workspaceSize is %llu", (unsigned long long)workspace_size);
    else if (workspace_size < executor->workspace_bytes)
        status = ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                           "workspaceSize %llu is smaller than the %llu bytes phase 1 asked for",
                           (unsigned long long)workspace_size, (unsigned long long)executor->workspace_bytes);
    else if (!ctbc_stream_is_live(stream))
        status = ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                           "stream %p is not a live stream (NULL is the default stream)", stream);
    if (status != ACLNN_SUCCESS)
        ctbc_executor_end_run(executor, false);
    return status;
}

void ctbc_executor_end_run(aclOpExecutor *executor, bool ran)
{
    if (!ran && !atomic_load(&executor->repeatable))
        untake(executor);
    release(executor);
}

aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor)
{
    if (!executor)
        return ctbc_fail(ACLNN_ERR_INNER_NULLPTR, CTBC_EZ_PARAM, "aclSetAclOpExecutorRepeatable",
                         "Expected a proper executor but got null for argument executor.");
    if (!acquire(executor))
        return not_live("aclSetAclOpExecutorRepeatable", executor);
    atomic_store(&executor->repeatable, true);
    release(executor);
    return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor)
{
    if (!executor)
        return ctbc_fail(ACLNN_ERR_INNER_NULLPTR, CTBC_EZ_PARAM, "aclDestroyAclOpExecutor",
                         "Expected a proper executor but got null for argument executor.");
    if (!acquire(executor))
        return not_live("aclDestroyAclOpExecutor", executor);
    bool won = take(executor);
    /* Frees it now, or when a run of it still going on ends. */
    release(executor);
    return won ? ACLNN_SUCCESS : not_live("aclDestroyAclOpExecutor", executor);
}

/* ---- the address setters -------------------------------------------------
 *
 * CANN's setters for a repeatable executor: each stores `addr` as the
 * storage address the next run uses for one of the op's tensors, and in the
 * aclTensor itself (aclGetRawTensorAddr then returns it). A failing call
 * changes nothing. The capitalised Acl* spellings are the same calls.
 */

/* Acquires a live executor for a setter (release it when done). */
static aclnnStatus acquire_live(const char *api, aclOpExecutor *executor)
{
    if (!executor)
        return ctbc_fail(ACLNN_ERR_INNER_NULLPTR, CTBC_EZ_PARAM, api,
                         "Expected a proper executor but got null for argument executor.");
    return acquire(executor) ? ACLNN_SUCCESS : not_live(api, executor);
}

static const char *side_name(bool input) { return input ? "input" : "output"; }

/* Stores the address of input or output `index`, which the caller checked. */
static void store(aclOpExecutor *executor, size_t index, aclTensor *tensor, void *addr, bool input)
{
    (input ? executor->inputs : executor->outputs)[index] = addr;
    tensor->data = addr;
}

/* The setters below look at the executor only while they hold it. */

static aclnnStatus set_held_address(const char *api, aclOpExecutor *executor, size_t index, aclTensor *tensor,
                                    void *addr, bool input)
{
    size_t count = input ? executor->input_count : executor->output_count;
    if (index >= count)
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                         "index %zu is out of range: %s has %zu %ss (0 to %zu)", index, executor->op_name, count,
                         side_name(input), count - 1);
    /* The index decides, as CANN documents; a different tensor object there
     * is most likely a slip in the caller's bookkeeping. */
    const aclTensor *bound = (input ? executor->input_tensors : executor->output_tensors)[index];
    if (bound != tensor)
        CTBC_LOG(CTBC_LOG_WARNING,
                 "%s: tensor %p is not the tensor phase 1 was given as %s %zu of %s (%p); the address of %s %zu "
                 "is set all the same",
                 api, (void *)tensor, side_name(input), index, executor->op_name, (const void *)bound,
                 side_name(input), index);
    store(executor, index, tensor, addr, input);
    return ACLNN_SUCCESS;
}

static aclnnStatus set_address(const char *api, aclOpExecutor *executor, size_t index, aclTensor *tensor,
                               void *addr, bool input)
{
    if (!tensor)
        return ctbc_fail(ACLNN_ERR_INNER_NULLPTR, CTBC_EZ_PARAM, api,
                         "Expected a proper Tensor but got null for argument tensor.");
    CTBC_RETURN_IF_FAILED(acquire_live(api, executor));
    aclnnStatus status = set_held_address(api, executor, index, tensor, addr, input);
    release(executor);
    return status;
}

/* aclSetTensorAddr's index counts the inputs, then the outputs. */
static aclnnStatus set_any_address(const char *api, aclOpExecutor *executor, size_t index, aclTensor *tensor,
                                   void *addr)
{
    if (!tensor)
        return ctbc_fail(ACLNN_ERR_INNER_NULLPTR, CTBC_EZ_PARAM, api,
                         "Expected a proper Tensor but got null for argument tensor.");
    CTBC_RETURN_IF_FAILED(acquire_live(api, executor));
    size_t inputs = executor->input_count, total = inputs + executor->output_count;
    aclnnStatus status;
    if (index >= total)
        status = ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                           "index %zu is out of range: %s has %zu tensors (inputs 0 to %zu, then outputs %zu to "
                           "%zu)",
                           index, executor->op_name, total, inputs - 1, inputs, total - 1);
    else if (index < inputs)
        status = set_held_address(api, executor, index, tensor, addr, true);
    else
        status = set_held_address(api, executor, index - inputs, tensor, addr, false);
    release(executor);
    return status;
}

typedef enum { DYNAMIC_INPUT, DYNAMIC_OUTPUT, DYNAMIC_ANY } dynamic_side;

static aclnnStatus set_held_dynamic_address(const char *api, aclOpExecutor *executor, size_t ir, size_t relative,
                                            aclTensor *tensor, void *addr, dynamic_side side)
{
    size_t inputs = executor->input_count, outputs = executor->output_count;
    size_t count = side == DYNAMIC_INPUT ? inputs : side == DYNAMIC_OUTPUT ? outputs : inputs + outputs;
    const char *counted = side == DYNAMIC_INPUT ? "inputs" : side == DYNAMIC_OUTPUT ? "outputs" : "parameters";
    if (ir >= count)
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                         "irIndex %zu is out of range: %s has %zu %s", ir, executor->op_name, count, counted);
    bool input = side == DYNAMIC_INPUT || (side == DYNAMIC_ANY && ir < inputs);
    size_t index = side == DYNAMIC_ANY && !input ? ir - inputs : ir;
    const aclTensor *bound = (input ? executor->input_tensors : executor->output_tensors)[index];
    if (tensor != bound)
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                         "%s has no dynamic (tensor list) parameters: its %s %zu is a single tensor, and "
                         "tensors[%zu] (%p) is not the tensor phase 1 was given there; set that address with "
                         "aclSet%sTensorAddr",
                         executor->op_name, side_name(input), index, relative, (void *)tensor,
                         input ? "Input" : "Output");
    store(executor, index, tensor, addr, input);
    return ACLNN_SUCCESS;
}

/* The Dynamic setters address element `relative` of the tensor list that is
 * IR parameter `ir` (counted among the inputs, the outputs, or the inputs
 * then the outputs). convtbc's op takes single tensors only, so the one
 * call that makes sense names a list whose element is the very tensor
 * phase 1 was given as parameter `ir`: it then acts as the single-tensor
 * setter would. */
static aclnnStatus set_dynamic_address(const char *api, aclOpExecutor *executor, size_t ir, size_t relative,
                                       aclTensorList *tensors, void *addr, dynamic_side side)
{
    if (!tensors)
        return ctbc_fail(ACLNN_ERR_INNER_NULLPTR, CTBC_EZ_PARAM, api,
                         "Expected a proper TensorList but got null for argument tensors.");
    if (relative >= tensors->size)
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                         "relativeIndex %zu is out of range: tensors holds %llu tensors", relative,
                         (unsigned long long)tensors->size);
    aclTensor *tensor = tensors->items[relative];
    if (!tensor)
        return ctbc_fail(ACLNN_ERR_INNER_NULLPTR, CTBC_EZ_PARAM, api,
                         "tensors[%zu] is null: there is no tensor whose address could be set", relative);
    CTBC_RETURN_IF_FAILED(acquire_live(api, executor));
    aclnnStatus status = set_held_dynamic_address(api, executor, ir, relative, tensor, addr, side);
    release(executor);
    return status;
}

aclnnStatus aclSetInputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr)
{
    return set_address("aclSetInputTensorAddr", executor, index, tensor, addr, true);
}

aclnnStatus aclSetOutputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr)
{
    return set_address("aclSetOutputTensorAddr", executor, index, tensor, addr, false);
}

aclnnStatus aclSetTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr)
{
    return set_any_address("aclSetTensorAddr", executor, index, tensor, addr);
}

aclnnStatus aclSetDynamicInputTensorAddr(aclOpExecutor *executor, size_t irIndex, const size_t relativeIndex,
                                         aclTensorList *tensors, void *addr)
{
    return set_dynamic_address("aclSetDynamicInputTensorAddr", executor, irIndex, relativeIndex, tensors, addr,
                               DYNAMIC_INPUT);
}

aclnnStatus aclSetDynamicOutputTensorAddr(aclOpExecutor *executor, size_t irIndex, const size_t relativeIndex,
                                          aclTensorList *tensors, void *addr)
{
    return set_dynamic_address("aclSetDynamicOutputTensorAddr", executor, irIndex, relativeIndex, tensors, addr,
                               DYNAMIC_OUTPUT);
}

aclnnStatus aclSetDynamicTensorAddr(aclOpExecutor *executor, size_t irIndex, const size_t relativeIndex,
                                    aclTensorList *tensors, void *addr)
{
    return set_dynamic_address("aclSetDynamicTensorAddr", executor, irIndex, relativeIndex, tensors, addr,
                               DYNAMIC_ANY);
}

aclnnStatus AclSetInputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr)
{
    return set_address("AclSetInputTensorAddr", executor, index, tensor, addr, true);
}

aclnnStatus AclSetOutputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr)
{
    return set_address("AclSetOutputTensorAddr", executor, index, tensor, addr, false);
}

aclnnStatus AclSetTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr)
{
    return set_any_address("AclSetTensorAddr", executor, index, tensor, addr);
}

aclnnStatus AclSetDynamicInputTensorAddr(aclOpExecutor *executor, size_t irIndex, const size_t relativeIndex,
                                         aclTensorList *tensors, void *addr)
{
    return set_dynamic_address("AclSetDynamicInputTensorAddr", executor, irIndex, relativeIndex, tensors, addr,
                               DYNAMIC_INPUT);
}

aclnnStatus AclSetDynamicOutputTensorAddr(aclOpExecutor *executor, size_t irIndex, const size_t relativeIndex,
                                          aclTensorList *tensors, void *addr)
{
    return set_dynamic_address("AclSetDynamicOutputTensorAddr", executor, irIndex, relativeIndex, tensors, addr,
                               DYNAMIC_OUTPUT);
}

aclnnStatus AclSetDynamicTensorAddr(aclOpExecutor *executor, size_t irIndex, const size_t relativeIndex,
                                    aclTensorList *tensors, void *addr)
{
    return set_dynamic_address("AclSetDynamicTensorAddr", executor, irIndex, relativeIndex, tensors, addr,
                               DYNAMIC_ANY);
}
