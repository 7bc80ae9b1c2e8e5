/* The two phases' work that is the same for every op (see op_frame.h). */
#include "api/op_frame.h"

#include <stdio.h>
#include <string.h>

#include "api/errors.h"
#include "api/executor.h"
#include "api/memory.h"
#include "api/overlap.h"
#include "api/streams.h"
#include "api/tensor.h"

/* What phase 2 needs beyond the op's compute plan: each view's geometry,
 * and the storage addresses whose overlaps phase 1 ruled out (NULL: none
 * yet), so that only a run with other addresses checks them again. */
typedef struct {
    const ctbc_op *op;
    ctbc_view_geometry views[CTBC_OP_MAX_TENSORS];
    const void *checked_storage[CTBC_OP_MAX_TENSORS];
    max_align_t compute_plan[];
} op_plan;

/* A queued run: a copy of the compute plan (the executor may be gone by
 * then) and the storage addresses fixed at submission. */
typedef struct {
    const ctbc_op *op;
    const void *storage[CTBC_OP_MAX_TENSORS];
    uint64_t offset_bytes[CTBC_OP_MAX_TENSORS], end_bytes[CTBC_OP_MAX_TENSORS];
    void *workspace;
    uint64_t workspace_bytes;
    max_align_t compute_plan[];
} queued_run;

/* Room for a queued run on phase 2's stack (the stream copies it). */
enum { QUEUED_RUN_CAPACITY = 4096 };

static size_t tensor_count(const ctbc_op *op) { return op->input_count + op->output_count; }
static bool used(const ctbc_op *op, size_t i) { return !(op->unused >> i & 1u); }

const char *ctbc_list_text(const int64_t *values, uint64_t count, char *buf, size_t size)
{
    size_t used_bytes = (size_t)snprintf(buf, size, "[");
    for (uint64_t i = 0; i < count && used_bytes < size; i++)
        used_bytes += (size_t)snprintf(buf + used_bytes, size - used_bytes, i ? ", %lld" : "%lld", (long long)values[i]);
    if (used_bytes < size)
        snprintf(buf + used_bytes, size - used_bytes, "]");
    return buf;
}

const char *ctbc_shape_text(const aclTensor *t, char *buf, size_t size)
{
    return ctbc_list_text(t->view_dims, t->rank, buf, size);
}

int64_t ctbc_item_bytes(const aclTensor *t) { return t->dtype == ACL_FLOAT ? 4 : 2; }

#define INVALID(op, ...) ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, (op)->phase1, __VA_ARGS__)

/* ---- phase 1: views ---------------------------------------------------- */

/* What creation records as given must still make sense before an address
 * is derived from it. Negative strides are refused everywhere (the compute
 * walks views upwards from element [0,0,0]); an output whose elements share
 * addresses (a stride 0 on a dim longer than 1, or interleaved dims) would
 * be written in a thread-dependent order. */
static bool view_overlaps_itself(const aclTensor *t)
{
    int64_t strides[CTBC_MAX_DIMS], dims[CTBC_MAX_DIMS];
    uint64_t n = 0;
    for (uint64_t i = 0; i < t->rank; i++) {
        if (t->view_dims[i] == 0)
            return false; /* no elements: nothing to overlap */
        if (t->view_dims[i] > 1) {
            strides[n] = t->strides[i];
            dims[n++] = t->view_dims[i];
        }
    }
    /* Sorted by stride, each dim must step over the whole extent of the
     * smaller ones. */
    for (uint64_t i = 1; i < n; i++)
        for (uint64_t j = i; j > 0 && strides[j] < strides[j - 1]; j--) {
            int64_t s = strides[j], d = dims[j];
            strides[j] = strides[j - 1], dims[j] = dims[j - 1];
            strides[j - 1] = s, dims[j - 1] = d;
        }
    int64_t extent = 1;
    for (uint64_t i = 0; i < n; i++) {
        if (strides[i] < extent)
            return true;
        if (__builtin_mul_overflow(strides[i], dims[i], &extent))
            extent = INT64_MAX; /* no larger stride can step over it */
    }
    return false;
}

/* An int64_t byte count must fit in size_t. */
_Static_assert(sizeof(size_t) >= sizeof(int64_t), "convtbc needs a 64-bit address space");

/* The storage must describe memory: dims >= 0 and a byte size that fits in
 * int64_t (no address space holds more), for every tensor, empty views
 * included. Creation does not check this (CANN's does not). */
static aclnnStatus check_storage(const ctbc_op *op, size_t i, const aclTensor *t, int64_t *elements)
{
    const char *name = op->names[i];
    char a[96];
    int64_t storage = 1, bytes;
    bool overflow = false;
    for (uint64_t d = 0; d < t->storage_rank; d++) {
        if (t->storage_dims[d] < 0)
            return INVALID(op, "%s's storageDims[%llu] is %lld; storage dims should be >= 0.", name,
                           (unsigned long long)d, (long long)t->storage_dims[d]);
        overflow |= __builtin_mul_overflow(storage, t->storage_dims[d], &storage);
    }
    if (overflow)
        return INVALID(op, "%s's storage %s has more elements than int64_t counts.", name,
                       ctbc_list_text(t->storage_dims, t->storage_rank, a, sizeof a));
    const int64_t item = ctbc_item_bytes(t);
    if (__builtin_mul_overflow(storage, item, &bytes))
        return INVALID(op,
                       "%s's storage %s of %lld elements of %lld bytes has a byte size that overflows int64_t "
                       "(more bytes than an address space holds).",
                       name, ctbc_list_text(t->storage_dims, t->storage_rank, a, sizeof a), (long long)storage,
                       (long long)item);
    *elements = storage;
    return ACLNN_SUCCESS;
}

/* The view must lie inside its storage (storageDims), every element
 * offset and byte count computed without overflow: creation does not check
 * this (CANN's does not). Whether the storage lies inside device memory is
 * phase 2's check, against the addresses of that run. Fills the geometry. */
static aclnnStatus check_extent(const ctbc_op *op, size_t i, const aclTensor *t, ctbc_view_geometry *g)
{
    const char *name = op->names[i];
    char a[96], b[96], c[96];
    /* ranks are 1 or 3 by now; an aclTensor's unused dims are 0 */
    _Static_assert(CTBC_MAX_DIMS >= 3, "a view of an op has at most 3 dims");
    memset(g, 0, sizeof *g);
    g->rank = t->rank;
    for (int d = 0; d < 3; d++)
        g->dims[d] = t->view_dims[d], g->strides[d] = t->strides[d];
    g->item = ctbc_item_bytes(t);
    int64_t storage = 0;
    CTBC_RETURN_IF_FAILED(check_storage(op, i, t, &storage));
    int64_t numel = ctbc_tensor_numel(t);
    if (numel == 0)
        return ACLNN_SUCCESS; /* no element, no address */
    if (numel < 0) /* dims are >= 0 by now: the count overflowed */
        return INVALID(op, "%s has more elements than int64_t counts (shape %s).", name,
                       ctbc_shape_text(t, a, sizeof a));
    if (t->offset < 0)
        return INVALID(op, "%s's offset is %lld; a view with elements should start inside its storage (offset >= 0).",
                       name, (long long)t->offset);
    int64_t last = t->offset, reach;
    for (uint64_t d = 0; d < t->rank; d++)
        if (__builtin_mul_overflow(t->view_dims[d] - 1, t->strides[d], &reach) ||
            __builtin_add_overflow(last, reach, &last))
            return INVALID(op,
                           "%s's view (shape %s, strides %s, offset %lld) has element offsets beyond int64_t; "
                           "expected a view inside its storage of %lld elements.",
                           name, ctbc_shape_text(t, a, sizeof a), ctbc_list_text(t->strides, t->rank, b, sizeof b),
                           (long long)t->offset, (long long)storage);
    if (last >= storage)
        return INVALID(op,
                       "%s's view (shape %s, strides %s, offset %lld) reaches element %lld, outside its storage "
                       "of %lld elements (storageDims %s); expected a view inside its storage.",
                       name, ctbc_shape_text(t, a, sizeof a), ctbc_list_text(t->strides, t->rank, b, sizeof b),
                       (long long)t->offset, (long long)last, (long long)storage,
                       ctbc_list_text(t->storage_dims, t->storage_rank, c, sizeof c));
    /* Cannot overflow inside a storage check_storage passed; checked all
     * the same, where the product is formed. */
    int64_t end_bytes;
    if (__builtin_mul_overflow(last + 1, g->item, &end_bytes))
        return INVALID(op,
                       "%s's view ends %lld elements of %lld bytes past its storage start, more bytes than "
                       "an address can span.",
                       name, (long long)(last + 1), (long long)g->item);
    g->offset_bytes = (uint64_t)(t->offset * g->item); /* <= end_bytes: cannot overflow */
    g->end_bytes = (uint64_t)end_bytes;
    return ACLNN_SUCCESS;
}

aclnnStatus ctbc_op_check_views(const ctbc_op *op, const aclTensor *const *tensors, ctbc_view_geometry *views)
{
    for (size_t i = 0; i < tensor_count(op); i++) {
        for (uint64_t d = 0; d < tensors[i]->rank; d++)
            if (tensors[i]->strides[d] < 0)
                return INVALID(op, "%s has a negative stride (%lld on dim %llu); convtbc takes strides >= 0.",
                               op->names[i], (long long)tensors[i]->strides[d], (unsigned long long)d);
        CTBC_RETURN_IF_FAILED(check_extent(op, i, tensors[i], &views[i]));
        if (i >= op->input_count && view_overlaps_itself(tensors[i]))
            return INVALID(op,
                           "%s's view has elements that share an address (a stride 0, or strides that "
                           "interleave); an output needs a distinct address per element.",
                           op->names[i]);
    }
    return ACLNN_SUCCESS;
}

ctbc_layout ctbc_op_layout(const aclTensor *t, const ctbc_view_geometry *g)
{
    ctbc_layout layout;
    memset(&layout, 0, sizeof layout);
    layout.dtype = t->dtype == ACL_FLOAT16 ? CTBC_F16 : t->dtype == ACL_BF16 ? CTBC_BF16 : CTBC_F32;
    if (g->end_bytes > 0)
        for (uint64_t i = 0; i < t->rank; i++)
            layout.stride[i] = t->strides[i];
    return layout;
}

/* ---- overlaps between views -------------------------------------------- */

/* Beyond CANN's checkers, which do not look: an output that shares memory
 * with an input the op reads, or with another output, gives wrong results
 * (an input overwritten before it is read, an element written twice).
 * Decided on the elements of the views, not their ranges; empty views and
 * storage without an address yet overlap nothing; inputs may share memory
 * (they are only read). Phase 1 checks the addresses the tensors hold,
 * phase 2 the addresses of its run when they changed. */
static ctbc_byte_view byte_view(const ctbc_view_geometry *g, const void *storage)
{
    return (ctbc_byte_view){(uintptr_t)storage, g->offset_bytes, storage ? g->end_bytes - g->offset_bytes : 0,
                            g->item, g->rank, g->dims, g->strides};
}

static aclnnStatus check_pair(const ctbc_op *op, const char *api, const ctbc_view_geometry *views,
                              const void *const *storage, size_t out, size_t other)
{
    const ctbc_byte_view a = byte_view(&views[out], storage[out]), b = byte_view(&views[other], storage[other]);
    ctbc_overlap found = ctbc_views_overlap(&a, &b);
    if (found == CTBC_DISJOINT)
        return ACLNN_SUCCESS;
    const char *kind = other < op->input_count ? "an input" : "another output";
    const char *out_name = op->names[out], *other_name = op->names[other];
    /* in integers: the addresses are the caller's, not yet checked */
    const void *start_a = (const void *)(a.storage + a.offset), *start_b = (const void *)(b.storage + b.offset);
    if (found == CTBC_OVERLAP)
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                         "%s overlaps %s: the two views share memory (%s: %llu bytes from %p, %s: %llu bytes "
                         "from %p); an output must not overlap %s, give it memory of its own.",
                         out_name, other_name, out_name, (unsigned long long)a.span, start_a, other_name,
                         (unsigned long long)b.span, start_b, kind);
    return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                     "%s may overlap %s: the byte ranges of the two views intersect (%s: %llu bytes from %p, %s: "
                     "%llu bytes from %p) and convtbc could not rule out a shared element within its work bound; "
                     "an output must not overlap %s, give it memory of its own.",
                     out_name, other_name, out_name, (unsigned long long)a.span, start_a, other_name,
                     (unsigned long long)b.span, start_b, kind);
}

/* The quick test first, on each view's byte range [lo, hi) (lo >= hi: an
 * empty view, or storage without an address; saturated, as the addresses
 * are the caller's and may lie anywhere); the exact one only for ranges
 * that intersect. */
static aclnnStatus check_overlaps(const ctbc_op *op, const char *api, const ctbc_view_geometry *views,
                                  const void *const *storage)
{
    uint64_t lo[CTBC_OP_MAX_TENSORS], hi[CTBC_OP_MAX_TENSORS];
    for (size_t i = 0; i < tensor_count(op); i++) {
        const uint64_t base = (uintptr_t)storage[i];
        lo[i] = base + views[i].offset_bytes;
        hi[i] = base + views[i].end_bytes;
        if (hi[i] < base) /* past the top: saturate, and lo with it if it passed too */
            hi[i] = UINT64_MAX, lo[i] = lo[i] < base ? UINT64_MAX : lo[i];
        if (!base || views[i].end_bytes == 0)
            lo[i] = UINT64_MAX, hi[i] = 0;
    }
    for (size_t p = 0; p < op->overlap_pair_count; p++) {
        const size_t a = op->overlap_pairs[p][0], b = op->overlap_pairs[p][1];
        if (lo[a] < hi[b] && lo[b] < hi[a])
            CTBC_RETURN_IF_FAILED(check_pair(op, api, views, storage, a, b));
    }
    return ACLNN_SUCCESS;
}

/* ---- phase 1: the executor --------------------------------------------- */

aclnnStatus ctbc_op_make_executor(const ctbc_op *op, const aclTensor *const *tensors,
                                  const ctbc_view_geometry *views, aclOpExecutor **made)
{
    if (op->compute_plan_bytes + sizeof(queued_run) > QUEUED_RUN_CAPACITY)
        return ctbc_fail(ACLNN_ERR_INNER, CTBC_EE_INNER, op->phase1,
                         "the compute plan of %zu bytes does not fit a queued run", op->compute_plan_bytes);
    aclOpExecutor *executor = ctbc_executor_create(op->phase2, sizeof(op_plan) + op->compute_plan_bytes,
                                                   op->input_count, op->output_count);
    if (!executor)
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    op_plan *plan = (op_plan *)executor->plan;
    plan->op = op;
    for (size_t i = 0; i < tensor_count(op); i++) {
        plan->views[i] = views[i];
        plan->checked_storage[i] = tensors[i]->data;
    }
    aclnnStatus status = check_overlaps(op, op->phase1, plan->views, plan->checked_storage);
    if (status != ACLNN_SUCCESS) {
        ctbc_executor_discard(executor);
        return status;
    }
    for (size_t i = 0; i < op->input_count; i++)
        ctbc_executor_bind(executor, i, tensors[i], true);
    for (size_t i = 0; i < op->output_count; i++)
        ctbc_executor_bind(executor, i, tensors[op->input_count + i], false);
    *made = executor;
    return ACLNN_SUCCESS;
}

void *ctbc_op_compute_plan(aclOpExecutor *executor) { return ((op_plan *)executor->plan)->compute_plan; }

/* ---- phase 2 ------------------------------------------------------------ */

static const char *argument_text(const ctbc_op *op, size_t i, char *buf, size_t size)
{
    snprintf(buf, size, "tensor %s", op->names[i]);
    return buf;
}

/* Refuses storage and a workspace outside device memory (checked mode):
 * each view's bytes from its storage's start, so that an offset cannot
 * carry a view from its own allocation into another. */
static aclnnStatus check_memory(const char *api, const queued_run *run, int status)
{
    const ctbc_op *op = run->op;
    char what[64];
    for (size_t i = 0; i < tensor_count(op); i++)
        if (used(op, i))
            CTBC_RETURN_IF_FAILED(ctbc_check_device_range(api, argument_text(op, i, what, sizeof what),
                                                          run->storage[i], run->end_bytes[i], status));
    return ctbc_check_device_range(api, "workspace", run->workspace, run->workspace_bytes, status);
}

/* Where a view's first element is, given the (host view of the) storage;
 * in integers, as the host path's addresses are not checked. */
static void *view_start(void *storage, uint64_t offset_bytes, uint64_t end_bytes)
{
    return end_bytes > 0 ? (void *)((uintptr_t)storage + (uintptr_t)offset_bytes) : storage;
}

/* Runs a queued plan on the views of its memory. Memory freed between
 * submission and now is an error of the queued work, reported at the next
 * synchronisation, as a fault on the NPU. The storage is looked up here,
 * once per tensor and run, inside the bracket that keeps aclrtFree out. */
static aclError run_queued(void *payload)
{
    const queued_run *run = payload;
    const ctbc_op *op = run->op;
    void *view[CTBC_OP_MAX_TENSORS] = {NULL}, *workspace = NULL;
    char what[64];
    aclError status = ACL_SUCCESS;
    ctbc_memory_use_begin();
    for (size_t i = 0; i < tensor_count(op) && status == ACL_SUCCESS; i++)
        if (used(op, i)) {
            void *storage = NULL;
            status = ctbc_use_device_range(op->phase2, argument_text(op, i, what, sizeof what), run->storage[i],
                                           run->end_bytes[i], ACL_ERROR_RT_AICORE_EXCEPTION, &storage);
            view[i] = view_start(storage, run->offset_bytes[i], run->end_bytes[i]);
        }
    if (status == ACL_SUCCESS)
        status = ctbc_use_device_range(op->phase2, "workspace", run->workspace, run->workspace_bytes,
                                       ACL_ERROR_RT_AICORE_EXCEPTION, &workspace);
    if (status == ACL_SUCCESS)
        op->compute(run->compute_plan, view, workspace);
    ctbc_memory_use_end();
    return status;
}

/* The addresses of one run: each tensor's storage from the executor's
 * current addresses, checked for overlaps again when they are not the ones
 * phase 1 checked. Fails for a view with elements but no data address. */
static aclnnStatus collect_run(const ctbc_op *op, const aclOpExecutor *executor, void *workspace, queued_run *run)
{
    const op_plan *plan = (const op_plan *)executor->plan;
    if (plan->op != op)
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, op->phase2,
                         "the executor was made by %s, not by %s; pass it to %s.", plan->op->phase1, op->phase1,
                         plan->op->phase2);
    memset(run, 0, sizeof *run);
    run->op = op;
    bool moved = false;
    for (size_t i = 0; i < tensor_count(op); i++) {
        const bool input = i < op->input_count;
        const void *storage = input ? executor->inputs[i] : executor->outputs[i - op->input_count];
        if (used(op, i) && plan->views[i].end_bytes > 0 && !storage)
            return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, op->phase2,
                             "tensor %s has no data address; give one to aclCreateTensor or set it with "
                             "aclSet%sTensorAddr.",
                             op->names[i], input ? "Input" : "Output");
        /* The compute reads and writes whole elements, as the NPU's vector
         * units do: an address off the element grid is refused, not used. */
        if (used(op, i) && plan->views[i].end_bytes > 0 && (uintptr_t)storage % (uintptr_t)plan->views[i].item != 0)
            return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, op->phase2,
                             "tensor %s's data address %p is not a multiple of its element size, %lld bytes.",
                             op->names[i], storage, (long long)plan->views[i].item);
        run->storage[i] = storage;
        run->offset_bytes[i] = plan->views[i].offset_bytes;
        run->end_bytes[i] = plan->views[i].end_bytes;
        moved |= used(op, i) && storage != plan->checked_storage[i];
    }
    if (moved)
        CTBC_RETURN_IF_FAILED(check_overlaps(op, op->phase2, plan->views, run->storage));
    run->workspace = workspace;
    run->workspace_bytes = executor->workspace_bytes;
    memcpy(run->compute_plan, plan->compute_plan, op->compute_plan_bytes);
    return ACLNN_SUCCESS;
}

aclnnStatus ctbc_op_run(const ctbc_op *op, void *workspace, uint64_t workspace_size, aclOpExecutor *executor,
                        aclrtStream stream)
{
    CTBC_RETURN_IF_FAILED(ctbc_executor_begin_run(executor, workspace, workspace_size, stream, op->phase2));
    max_align_t room[QUEUED_RUN_CAPACITY / sizeof(max_align_t)];
    queued_run *run = (queued_run *)room;
    aclnnStatus status = collect_run(op, executor, workspace, run);
    if (status == ACLNN_SUCCESS)
        status = check_memory(op->phase2, run, ACLNN_ERR_PARAM_INVALID);
    if (status == ACLNN_SUCCESS) {
        aclError submitted =
            ctbc_stream_submit(op->phase2, stream, run_queued, run, sizeof *run + op->compute_plan_bytes);
        if (submitted != ACL_SUCCESS)
            status = submitted == ACL_ERROR_BAD_ALLOC ? ACLNN_ERR_INNER : submitted;
    }
    ctbc_executor_end_run(executor, status == ACLNN_SUCCESS);
    return status;
}

aclnnStatus ctbc_op_run_host(const ctbc_op *op, aclOpExecutor *executor, void *workspace)
{
    max_align_t room[QUEUED_RUN_CAPACITY / sizeof(max_align_t)];
    queued_run *run = (queued_run *)room;
    CTBC_RETURN_IF_FAILED(collect_run(op, executor, workspace, run));
    void *view[CTBC_OP_MAX_TENSORS] = {NULL};
    for (size_t i = 0; i < tensor_count(op); i++)
        view[i] = view_start((void *)run->storage[i], run->offset_bytes[i], run->end_bytes[i]);
    op->compute(run->compute_plan, view, run->workspace);
    return ACLNN_SUCCESS;
}
