/*
 * aclnnConvTbcBackward: phase 1 checks the arguments in CANN's order (the
 * first failure wins, with CANN's status code and a message naming the
 * argument), then plans the computation; phase 2 runs the plan.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "aclnnop/aclnn_convolution_backward.h"
#include "api/conv_tbc_backward.h"
#include "api/errors.h"
#include "api/executor.h"
#include "api/log.h"
#include "api/memory.h"
#include "api/overlap.h"
#include "api/streams.h"
#include "api/soc_profile.h"
#include "api/tensor.h"
#include "compute/conv_tbc_compute.h"

static const char PHASE1[] = "aclnnConvTbcBackwardGetWorkspaceSize";
static const char PHASE2[] = "aclnnConvTbcBackward";

/* The op's tensors, in the order CANN checks them. The executor's address
 * slots follow CANN's indices: inputs self 0, input 1, weight 2, bias 3;
 * outputs gradInput 0, gradWeight 1, gradBias 2. */
enum { SELF, INPUT, WEIGHT, BIAS, GRAD_INPUT, GRAD_WEIGHT, GRAD_BIAS, TENSOR_COUNT };
enum { INPUT_COUNT = 4, OUTPUT_COUNT = 3 };
static const char *const TENSOR_NAMES[TENSOR_COUNT] = {"self", "input", "weight", "bias",
                                                       "gradInput", "gradWeight", "gradBias"};
/* The same, as memory checks name them. */
static const char *const TENSOR_ARGUMENTS[TENSOR_COUNT] = {"tensor self", "tensor input", "tensor weight",
                                                           "tensor bias", "tensor gradInput", "tensor gradWeight",
                                                           "tensor gradBias"};

/* cubeMathType values (CANN's names). */
enum { KEEP_DTYPE = 0, ALLOW_FP32_DOWN_PRECISION = 1, USE_FP16 = 2, USE_HF32 = 3 };
static const char *const CUBE_MATH_NAMES[] = {"KEEP_DTYPE", "ALLOW_FP32_DOWN_PRECISION", "USE_FP16", "USE_HF32"};

/* One of the op's views as phase 1 checked it, in bytes from its
 * storage's start: where element [0,0,0] lies (the lowest, strides being
 * >= 0) and where the last element ends; end 0: no elements. */
typedef struct {
    int64_t dims[3], strides[3];
    uint64_t rank;
    int64_t item;
    uint64_t offset_bytes, end_bytes;
} view_geometry;

/* What phase 2 needs beyond the compute plan: each view's geometry, and the
 * storage addresses whose overlaps phase 1 ruled out (NULL: none yet), so
 * that only a run with other addresses checks them again. */
typedef struct {
    ctbc_plan compute;
    view_geometry views[TENSOR_COUNT];
    const void *checked_storage[TENSOR_COUNT];
} op_plan;

/* A queued run: a copy of the plan (the executor may be gone by then) and
 * the storage addresses fixed at submission. */
typedef struct {
    ctbc_plan compute;
    const void *storage[TENSOR_COUNT];
    uint64_t offset_bytes[TENSOR_COUNT], end_bytes[TENSOR_COUNT];
    void *workspace;
} queued_run;

#define INVALID(...) ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, PHASE1, __VA_ARGS__)

/* "[5, 1, 2]" for messages (cut short if it does not fit). */
static const char *list_text(const int64_t *values, uint64_t count, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (uint64_t i = 0; i < count && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)values[i]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

static const char *shape_text(const aclTensor *t, char *buf, size_t size)
{
    return list_text(t->view_dims, t->rank, buf, size);
}

/* ---- the checks, one function per step of CANN's order ------------------- */

/* Every tensor but bias takes the SoC's list; CANN checks bias against
 * FLOAT, FLOAT16, BFLOAT16 on every SoC, the training series included. */
static aclnnStatus check_dtypes(const aclTensor *const *tensors, ctbc_soc_family soc)
{
    for (int i = 0; i < TENSOR_COUNT; i++) {
        aclDataType dtype = tensors[i]->dtype;
        bool bf16 = i == BIAS || soc != CTBC_SOC_TRAINING;
        if (dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || (bf16 && dtype == ACL_BF16))
            continue;
        return INVALID("tensor %s not implemented for %s, should be in dtype support list %s on %s.",
                       TENSOR_NAMES[i], ctbc_dtype_name(dtype),
                       bf16 ? "[DT_FLOAT, DT_FLOAT16, DT_BF16]" : "[DT_FLOAT, DT_FLOAT16]", ctbc_soc()->name);
    }
    return ACLNN_SUCCESS;
}

static aclnnStatus check_formats(const aclTensor *const *tensors)
{
    for (int i = 0; i < TENSOR_COUNT; i++) {
        aclFormat format = tensors[i]->format;
        bool one_dim = i == BIAS || i == GRAD_BIAS;
        bool ok = format == ACL_FORMAT_ND || (!one_dim && format == ACL_FORMAT_NCL);
        if (!ok)
            return INVALID("the format of %s should be %s, got %s.", TENSOR_NAMES[i], one_dim ? "ND" : "ND or NCL",
                           ctbc_format_name(format));
    }
    return ACLNN_SUCCESS;
}

static aclnnStatus check_ranks(const aclTensor *const *tensors)
{
    for (int i = 0; i < TENSOR_COUNT; i++) {
        uint64_t want = (i == BIAS || i == GRAD_BIAS) ? 1 : 3;
        if (tensors[i]->rank != want)
            return INVALID("%s should be %llu-dimensional, got %llu dims.", TENSOR_NAMES[i],
                           (unsigned long long)want, (unsigned long long)tensors[i]->rank);
    }
    return ACLNN_SUCCESS;
}

/* Beyond CANN's checker, which compares dims without looking at their
 * sign: a negative dim describes no tensor (creation records it as given). */
static aclnnStatus check_dims_non_negative(const aclTensor *const *tensors)
{
    char shape[96];
    for (int i = 0; i < TENSOR_COUNT; i++)
        for (uint64_t d = 0; d < tensors[i]->rank; d++)
            if (tensors[i]->view_dims[d] < 0)
                return INVALID("%s's dim %llu is %lld; dims should be >= 0, got shape %s.", TENSOR_NAMES[i],
                               (unsigned long long)d, (long long)tensors[i]->view_dims[d],
                               shape_text(tensors[i], shape, sizeof shape));
    return ACLNN_SUCCESS;
}

static bool same_shape(const aclTensor *a, const aclTensor *b)
{
    return a->rank == b->rank && memcmp(a->view_dims, b->view_dims, a->rank * sizeof(int64_t)) == 0;
}

/* Step 6: the shapes must describe one convolution; fills *t_out. */
static aclnnStatus check_problem_shape(const aclTensor *const *tensors, int64_t pad, int64_t *t_out)
{
    const int64_t *x = tensors[INPUT]->view_dims, *w = tensors[WEIGHT]->view_dims;
    const int64_t *dy = tensors[SELF]->view_dims;
    char a[96], b[96];
    if (x[2] != w[1])
        return INVALID("input's channel dim (dim 2) %lld should equal weight's dim 1 %lld (C_in); input %s, weight %s.",
                       (long long)x[2], (long long)w[1], shape_text(tensors[INPUT], a, sizeof a),
                       shape_text(tensors[WEIGHT], b, sizeof b));
    if (tensors[BIAS]->view_dims[0] != w[2])
        return INVALID("bias's dim 0 %lld should equal weight's dim 2 %lld (C_out).",
                       (long long)tensors[BIAS]->view_dims[0], (long long)w[2]);
    if (pad < 0)
        return INVALID("pad should be >= 0, got %lld.", (long long)pad);
    /* Exact in 128 bits: 2*pad, or T + 2*pad, may pass INT64_MAX while the
     * whole stays within int64_t (a K as large). */
    const __int128 wide_len = (__int128)x[0] + 2 * (__int128)pad + 1 - w[0];
    if (wide_len > INT64_MAX)
        return INVALID("T_out = T + 2*pad + 1 - K overflows int64_t (T %lld is input's dim 0, pad %lld, K %lld is "
                       "weight's dim 0); expected a T_out that self's dim 0 can hold.",
                       (long long)x[0], (long long)pad, (long long)w[0]);
    const int64_t len = (int64_t)wide_len; /* >= 0 - INT64_MAX + 1: fits */
    if (len < 0)
        return INVALID("T + 2*pad + 1 - K should be >= 0, got %lld (T %lld, pad %lld, K %lld).", (long long)len,
                       (long long)x[0], (long long)pad, (long long)w[0]);
    if (dy[0] != len || dy[1] != x[1] || dy[2] != w[2])
        return INVALID("self's shape should be [T_out, B, C_out] = [%lld, %lld, %lld], got %s.", (long long)len,
                       (long long)x[1], (long long)w[2], shape_text(tensors[SELF], a, sizeof a));
    *t_out = len;
    return ACLNN_SUCCESS;
}

static aclnnStatus check_output_shapes(const aclTensor *const *tensors)
{
    static const int pairs[][2] = {{GRAD_INPUT, INPUT}, {GRAD_WEIGHT, WEIGHT}, {GRAD_BIAS, BIAS}};
    char a[96], b[96];
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        const aclTensor *out = tensors[pairs[i][0]], *in = tensors[pairs[i][1]];
        if (!same_shape(out, in))
            return INVALID("%s's shape should equal %s's shape %s, got %s.", TENSOR_NAMES[pairs[i][0]],
                           TENSOR_NAMES[pairs[i][1]], shape_text(in, a, sizeof a), shape_text(out, b, sizeof b));
    }
    return ACLNN_SUCCESS;
}

/* The dtype the products run in: one input dtype, or FLOAT for a mix. */
static aclDataType promoted_dtype(const aclTensor *const *tensors)
{
    aclDataType d = tensors[SELF]->dtype;
    if (tensors[INPUT]->dtype != d || tensors[WEIGHT]->dtype != d)
        return ACL_FLOAT;
    return d;
}

static aclnnStatus check_cube_math_type(const aclTensor *const *tensors, int8_t cube_math_type, ctbc_soc_family soc)
{
    if (cube_math_type < KEEP_DTYPE || cube_math_type > USE_HF32)
        return INVALID("cubeMathType should be in [0, 3] (KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION, USE_FP16, "
                       "USE_HF32), got %d.", (int)cube_math_type);
    if (soc != CTBC_SOC_TRAINING)
        return ACLNN_SUCCESS;
    /* The training series computes FLOAT16 on the cube unit; only the modes
     * that allow rounding FLOAT down take FLOAT, and none takes BFLOAT16. */
    aclDataType d = promoted_dtype(tensors);
    bool fp32_down = cube_math_type == ALLOW_FP32_DOWN_PRECISION || cube_math_type == USE_FP16;
    if (d == ACL_BF16 || (d == ACL_FLOAT && !fp32_down))
        return INVALID("cubeMathType %d (%s) does not support compute dtype %s on %s.", (int)cube_math_type,
                       CUBE_MATH_NAMES[cube_math_type], ctbc_dtype_name(d), ctbc_soc()->name);
    return ACLNN_SUCCESS;
}

static aclnnStatus check_output_dtypes_equal(const aclTensor *const *tensors)
{
    static const int pairs[][2] = {{GRAD_INPUT, INPUT}, {GRAD_WEIGHT, WEIGHT}, {GRAD_BIAS, BIAS}};
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        const aclTensor *out = tensors[pairs[i][0]], *in = tensors[pairs[i][1]];
        if (out->dtype != in->dtype)
            return INVALID("%s's dtype should equal %s's dtype %s on %s, got %s.", TENSOR_NAMES[pairs[i][0]],
                           TENSOR_NAMES[pairs[i][1]], ctbc_dtype_name(in->dtype), ctbc_soc()->name,
                           ctbc_dtype_name(out->dtype));
    }
    return ACLNN_SUCCESS;
}

/* Beyond CANN's checker: what creation records as given must still make
 * sense before an address is derived from it. Negative strides are refused
 * everywhere (the compute walks views upwards from element [0,0,0]); an
 * output whose elements share addresses (a stride 0 on a dim longer than 1,
 * or interleaved dims) would be written in a thread-dependent order. */
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

/* Where a view with elements lies from its storage start, in bytes (an
 * int64_t byte count must fit in size_t). */
_Static_assert(sizeof(size_t) >= sizeof(int64_t), "convtbc needs a 64-bit address space");
typedef struct {
    int64_t offset_bytes; /* element [0,0,0], the lowest since strides are >= 0 */
    int64_t span_bytes;   /* from there to the end of the last element; 0: no elements */
} view_extent;

/* Bytes per element: the dtype check passed, so FLOAT, FLOAT16 or BF16. */
static int64_t item_bytes(const aclTensor *t) { return t->dtype == ACL_FLOAT ? 4 : 2; }

/* The storage must describe memory: dims >= 0 and a byte size that fits in
 * int64_t (no address space holds more), for every tensor, empty views
 * included. Creation does not check this (CANN's does not). */
static aclnnStatus check_storage(int i, const aclTensor *t, int64_t *elements)
{
    const char *name = TENSOR_NAMES[i];
    char a[96];
    int64_t storage = 1, bytes;
    bool overflow = false;
    for (uint64_t d = 0; d < t->storage_rank; d++) {
        if (t->storage_dims[d] < 0)
            return INVALID("%s's storageDims[%llu] is %lld; storage dims should be >= 0.", name,
                           (unsigned long long)d, (long long)t->storage_dims[d]);
        overflow |= __builtin_mul_overflow(storage, t->storage_dims[d], &storage);
    }
    if (overflow)
        return INVALID("%s's storage %s has more elements than int64_t counts.", name,
                       list_text(t->storage_dims, t->storage_rank, a, sizeof a));
    const int64_t item = item_bytes(t);
    if (__builtin_mul_overflow(storage, item, &bytes))
        return INVALID("%s's storage %s of %lld elements of %lld bytes has a byte size that overflows int64_t "
                       "(more bytes than an address space holds).",
                       name, list_text(t->storage_dims, t->storage_rank, a, sizeof a), (long long)storage,
                       (long long)item);
    *elements = storage;
    return ACLNN_SUCCESS;
}

/* The view must lie inside its storage (storageDims), every element
 * offset and byte count computed without overflow: creation does not check
 * this (CANN's does not). Whether the storage lies inside device memory is
 * phase 2's check, against the addresses of that run. */
static aclnnStatus check_extent(int i, const aclTensor *t, view_extent *extent)
{
    const char *name = TENSOR_NAMES[i];
    char a[96], b[96], c[96];
    *extent = (view_extent){0, 0};
    int64_t storage = 0;
    CTBC_RETURN_IF_FAILED(check_storage(i, t, &storage));
    int64_t numel = ctbc_tensor_numel(t);
    if (numel == 0)
        return ACLNN_SUCCESS; /* no element, no address */
    if (numel < 0) /* dims are >= 0 by now: the count overflowed */
        return INVALID("%s has more elements than int64_t counts (shape %s).", name, shape_text(t, a, sizeof a));
    if (t->offset < 0)
        return INVALID("%s's offset is %lld; a view with elements should start inside its storage (offset >= 0).",
                       name, (long long)t->offset);
    int64_t last = t->offset, reach;
    for (uint64_t d = 0; d < t->rank; d++)
        if (__builtin_mul_overflow(t->view_dims[d] - 1, t->strides[d], &reach) ||
            __builtin_add_overflow(last, reach, &last))
            return INVALID("%s's view (shape %s, strides %s, offset %lld) has element offsets beyond int64_t; "
                           "expected a view inside its storage of %lld elements.",
                           name, shape_text(t, a, sizeof a), list_text(t->strides, t->rank, b, sizeof b),
                           (long long)t->offset, (long long)storage);
    if (last >= storage)
        return INVALID("%s's view (shape %s, strides %s, offset %lld) reaches element %lld, outside its storage "
                       "of %lld elements (storageDims %s); expected a view inside its storage.",
                       name, shape_text(t, a, sizeof a), list_text(t->strides, t->rank, b, sizeof b),
                       (long long)t->offset, (long long)last, (long long)storage,
                       list_text(t->storage_dims, t->storage_rank, c, sizeof c));
    /* Cannot overflow inside a storage check_storage passed; checked all
     * the same, where the product is formed. */
    int64_t item = item_bytes(t), end_bytes;
    if (__builtin_mul_overflow(last + 1, item, &end_bytes))
        return INVALID("%s's view ends %lld elements of %lld bytes past its storage start, more bytes than "
                       "an address can span.",
                       name, (long long)(last + 1), (long long)item);
    extent->offset_bytes = t->offset * item; /* <= end_bytes: cannot overflow */
    extent->span_bytes = end_bytes - extent->offset_bytes;
    return ACLNN_SUCCESS;
}

static aclnnStatus check_views(const aclTensor *const *tensors, view_extent *extents)
{
    for (int i = 0; i < TENSOR_COUNT; i++) {
        for (uint64_t d = 0; d < tensors[i]->rank; d++)
            if (tensors[i]->strides[d] < 0)
                return INVALID("%s has a negative stride (%lld on dim %llu); convtbc takes strides >= 0.",
                               TENSOR_NAMES[i], (long long)tensors[i]->strides[d], (unsigned long long)d);
        CTBC_RETURN_IF_FAILED(check_extent(i, tensors[i], &extents[i]));
        if (i >= GRAD_INPUT && view_overlaps_itself(tensors[i]))
            return INVALID("%s's view has elements that share an address (a stride 0, or strides that "
                           "interleave); an output needs a distinct address per element.",
                           TENSOR_NAMES[i]);
    }
    return ACLNN_SUCCESS;
}

/* Beyond CANN's checker, which does not look: an output that shares memory
 * with an input the op reads, or with another output, gives wrong
 * gradients (an input overwritten before it is read, an element written
 * twice). Decided on the elements of the views, not their ranges; empty
 * views and storage without an address yet overlap nothing; inputs may
 * share memory (they are only read); bias is not read. Phase 1 checks the
 * addresses the tensors hold, phase 2 the addresses of its run when they
 * changed. */
static ctbc_byte_view byte_view(const view_geometry *g, const void *storage)
{
    return (ctbc_byte_view){(uintptr_t)storage, g->offset_bytes, storage ? g->end_bytes - g->offset_bytes : 0,
                            g->item, g->rank, g->dims, g->strides};
}

static aclnnStatus check_pair(const char *api, const view_geometry *views, const void *const *storage, int out,
                              int other)
{
    const ctbc_byte_view a = byte_view(&views[out], storage[out]), b = byte_view(&views[other], storage[other]);
    ctbc_overlap found = ctbc_views_overlap(&a, &b);
    if (found == CTBC_DISJOINT)
        return ACLNN_SUCCESS;
    const char *kind = other < INPUT_COUNT ? "an input" : "another output";
    /* in integers: the addresses are the caller's, not yet checked */
    const void *start_a = (const void *)(a.storage + a.offset), *start_b = (const void *)(b.storage + b.offset);
    if (found == CTBC_OVERLAP)
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                         "%s overlaps %s: the two views share memory (%s: %llu bytes from %p, %s: %llu bytes "
                         "from %p); an output must not overlap %s, give it memory of its own.",
                         TENSOR_NAMES[out], TENSOR_NAMES[other], TENSOR_NAMES[out], (unsigned long long)a.span,
                         start_a, TENSOR_NAMES[other], (unsigned long long)b.span, start_b, kind);
    return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                     "%s may overlap %s: the byte ranges of the two views intersect (%s: %llu bytes from %p, %s: "
                     "%llu bytes from %p) and convtbc could not rule out a shared element within its work bound; "
                     "an output must not overlap %s, give it memory of its own.",
                     TENSOR_NAMES[out], TENSOR_NAMES[other], TENSOR_NAMES[out], (unsigned long long)a.span, start_a,
                     TENSOR_NAMES[other], (unsigned long long)b.span, start_b, kind);
}

/* The pairs to test: each output against the inputs the op reads (bias is
 * not read), and each pair of outputs once. */
static const unsigned char PAIRS[][2] = {
    {GRAD_INPUT, SELF},       {GRAD_INPUT, INPUT},       {GRAD_INPUT, WEIGHT},  {GRAD_WEIGHT, SELF},
    {GRAD_WEIGHT, INPUT},     {GRAD_WEIGHT, WEIGHT},     {GRAD_BIAS, SELF},     {GRAD_BIAS, INPUT},
    {GRAD_BIAS, WEIGHT},      {GRAD_INPUT, GRAD_WEIGHT}, {GRAD_INPUT, GRAD_BIAS}, {GRAD_WEIGHT, GRAD_BIAS},
};

/* The quick test first, on each view's byte range [lo, hi) (lo >= hi: an
 * empty view, or storage without an address; saturated, as the addresses
 * are the caller's and may lie anywhere); the exact one only for ranges
 * that intersect. */
static aclnnStatus check_overlaps(const char *api, const view_geometry *views, const void *const *storage)
{
    uint64_t lo[TENSOR_COUNT], hi[TENSOR_COUNT];
    for (int i = 0; i < TENSOR_COUNT; i++) {
        const uint64_t base = (uintptr_t)storage[i];
        lo[i] = base + views[i].offset_bytes;
        hi[i] = base + views[i].end_bytes;
        if (hi[i] < base) /* past the top: saturate, and lo with it if it passed too */
            hi[i] = UINT64_MAX, lo[i] = lo[i] < base ? UINT64_MAX : lo[i];
        if (!base || views[i].end_bytes == 0)
            lo[i] = UINT64_MAX, hi[i] = 0;
    }
    for (size_t p = 0; p < sizeof PAIRS / sizeof *PAIRS; p++) {
        const int a = PAIRS[p][0], b = PAIRS[p][1];
        if (lo[a] < hi[b] && lo[b] < hi[a])
            CTBC_RETURN_IF_FAILED(check_pair(api, views, storage, a, b));
    }
    return ACLNN_SUCCESS;
}

static void set_geometry(view_geometry *g, const aclTensor *t, const view_extent *extent)
{
    /* ranks are 1 or 3 by now; an aclTensor's unused dims are 0 */
    _Static_assert(CTBC_MAX_DIMS >= 3, "a view of the op has 3 dims");
    g->rank = t->rank;
    g->dims[0] = t->view_dims[0], g->dims[1] = t->view_dims[1], g->dims[2] = t->view_dims[2];
    g->strides[0] = t->strides[0], g->strides[1] = t->strides[1], g->strides[2] = t->strides[2];
    g->item = item_bytes(t);
    g->offset_bytes = g->end_bytes = 0;
    if (extent->span_bytes > 0) {
        g->offset_bytes = (uint64_t)extent->offset_bytes;
        g->end_bytes = (uint64_t)extent->offset_bytes + (uint64_t)extent->span_bytes;
    }
}

/* ---- the plan -------------------------------------------------------------- */

/* An empty view's strides were never checked (it has no address to
 * derive): the compute gets zeros, whatever the caller gave. */
static ctbc_layout layout_of(const aclTensor *t, const view_geometry *g)
{
    ctbc_layout layout;
    memset(&layout, 0, sizeof layout);
    layout.dtype = t->dtype == ACL_FLOAT16 ? CTBC_F16 : t->dtype == ACL_BF16 ? CTBC_BF16 : CTBC_F32;
    if (g->end_bytes > 0)
        for (uint64_t i = 0; i < t->rank; i++)
            layout.stride[i] = t->strides[i];
    return layout;
}

static ctbc_rounding rounding_for(int8_t cube_math_type, ctbc_soc_family soc)
{
    switch (cube_math_type) {
    case ALLOW_FP32_DOWN_PRECISION:
        /* A2/A3 round FLOAT down to HF32; the training series has no HF32
         * and goes down to FLOAT16. */
        return soc == CTBC_SOC_TRAINING ? CTBC_ROUND_FP16 : CTBC_ROUND_HF32;
    case USE_HF32: return CTBC_ROUND_HF32;
    case USE_FP16: return CTBC_ROUND_FP16;
    default: return CTBC_ROUND_NONE;
    }
}

static void make_problem(ctbc_problem *p, const aclTensor *const *tensors, const view_geometry *views, int64_t pad,
                         int64_t t_out,
                         ctbc_rounding rounding)
{
    memset(p, 0, sizeof *p);
    p->t = tensors[INPUT]->view_dims[0];
    p->b = tensors[INPUT]->view_dims[1];
    p->c_in = tensors[INPUT]->view_dims[2];
    p->k = tensors[WEIGHT]->view_dims[0];
    p->c_out = tensors[WEIGHT]->view_dims[2];
    p->pad = pad;
    p->t_out = t_out;
    p->grad_output = layout_of(tensors[SELF], &views[SELF]);
    p->input = layout_of(tensors[INPUT], &views[INPUT]);
    p->weight = layout_of(tensors[WEIGHT], &views[WEIGHT]);
    p->grad_input = layout_of(tensors[GRAD_INPUT], &views[GRAD_INPUT]);
    p->grad_weight = layout_of(tensors[GRAD_WEIGHT], &views[GRAD_WEIGHT]);
    p->grad_bias = layout_of(tensors[GRAD_BIAS], &views[GRAD_BIAS]);
    p->rounding = rounding;
    /* With C_in = 0, input, weight and both their gradients are empty and
     * gradBias, the sum of self, is all there is to compute; T, K and pad
     * then only fix T_out, and nothing bounds them (T = INT64_MAX with
     * K = INT64_MAX is a T_out of 1). The compute's blocking multiplies and
     * rounds them up, so it gets the same T_out from the smallest ones. */
    if (p->c_in == 0) {
        p->t = t_out - 1;
        p->k = 0;
        p->pad = 0;
    }
}

aclnnStatus aclnnConvTbcBackwardGetWorkspaceSize(const aclTensor *self, const aclTensor *input,
                                                 const aclTensor *weight, const aclTensor *bias, int64_t pad,
                                                 int8_t cubeMathType, aclTensor *gradInput, aclTensor *gradWeight,
                                                 aclTensor *gradBias, uint64_t *workspaceSize,
                                                 aclOpExecutor **executor)
{
    const aclTensor *const tensors[TENSOR_COUNT] = {self, input, weight, bias, gradInput, gradWeight, gradBias};
    for (int i = 0; i < TENSOR_COUNT; i++)
        if (!tensors[i])
            return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, PHASE1,
                             "Expected a proper Tensor but got null for argument %s.", TENSOR_NAMES[i]);
    if (!workspaceSize || !executor)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, PHASE1,
                         "Expected a proper pointer but got null for argument %s.",
                         workspaceSize ? "executor" : "workspaceSize");

    ctbc_soc_family soc = ctbc_soc()->family;
    int64_t t_out = 0;
    view_extent extents[TENSOR_COUNT];
    aclnnStatus status = check_dtypes(tensors, soc);
    if (status == ACLNN_SUCCESS)
        status = check_formats(tensors);
    if (status == ACLNN_SUCCESS && ctbc_tensor_numel(self) == 0) {
        char shape[96];
        status = INVALID("self should not be empty, got shape %s.", shape_text(self, shape, sizeof shape));
    }
    if (status == ACLNN_SUCCESS)
        status = check_ranks(tensors);
    if (status == ACLNN_SUCCESS)
        status = check_dims_non_negative(tensors);
    if (status == ACLNN_SUCCESS)
        status = check_problem_shape(tensors, pad, &t_out);
    if (status == ACLNN_SUCCESS)
        status = check_output_shapes(tensors);
    if (status == ACLNN_SUCCESS)
        status = check_cube_math_type(tensors, cubeMathType, soc);
    if (status == ACLNN_SUCCESS && soc == CTBC_SOC_ASCEND950)
        status = check_output_dtypes_equal(tensors);
    if (status == ACLNN_SUCCESS)
        status = check_views(tensors, extents);
    if (status != ACLNN_SUCCESS)
        return status;

    aclOpExecutor *made = ctbc_executor_create(PHASE2, sizeof(op_plan), INPUT_COUNT, OUTPUT_COUNT);
    if (!made)
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    /* The last check works on the plan's own record of the views (phase 2
     * repeats it there when addresses move). */
    op_plan *plan = (op_plan *)made->plan;
    for (int i = 0; i < TENSOR_COUNT; i++) {
        set_geometry(&plan->views[i], tensors[i], &extents[i]);
        plan->checked_storage[i] = tensors[i]->data;
    }
    status = check_overlaps(PHASE1, plan->views, plan->checked_storage);
    if (status != ACLNN_SUCCESS) {
        ctbc_executor_discard(made);
        return status;
    }
    ctbc_problem problem;
    make_problem(&problem, tensors, plan->views, pad, t_out, rounding_for(cubeMathType, soc));
    ctbc_plan_init(&plan->compute, &problem);
    for (int i = 0; i < INPUT_COUNT; i++)
        ctbc_executor_bind(made, (size_t)i, tensors[i], true);
    for (int i = 0; i < OUTPUT_COUNT; i++)
        ctbc_executor_bind(made, (size_t)i, tensors[INPUT_COUNT + i], false);
    made->workspace_bytes = plan->compute.workspace_bytes;

    const int64_t *x = input->view_dims, *w = weight->view_dims;
    CTBC_LOG(CTBC_LOG_INFO,
             "%s: T %lld, B %lld, C_in %lld, K %lld, C_out %lld, pad %lld, T_out %lld; dtypes self %s, input %s, "
             "weight %s, gradInput %s, gradWeight %s, gradBias %s; cubeMathType %d; workspace %llu bytes; "
             "%d threads; implementations gradInput %s, gradWeight %s, gradBias %s",
             PHASE1, (long long)x[0], (long long)x[1], (long long)x[2], (long long)w[0], (long long)w[2],
             (long long)pad, (long long)t_out, ctbc_dtype_name(self->dtype), ctbc_dtype_name(input->dtype),
             ctbc_dtype_name(weight->dtype), ctbc_dtype_name(gradInput->dtype), ctbc_dtype_name(gradWeight->dtype),
             ctbc_dtype_name(gradBias->dtype), (int)cubeMathType, (unsigned long long)made->workspace_bytes,
             plan->compute.threads, ctbc_plan_impl_name(&plan->compute, CTBC_GRAD_INPUT),
             ctbc_plan_impl_name(&plan->compute, CTBC_GRAD_WEIGHT), ctbc_plan_impl_name(&plan->compute, CTBC_GRAD_BIAS));
    *workspaceSize = made->workspace_bytes;
    *executor = made;
    return ACLNN_SUCCESS;
}

/* Refuses storage and a workspace outside device memory (checked mode):
 * each view's bytes from its storage's start, so that an offset cannot
 * carry a view from its own allocation into another. */
static aclnnStatus check_memory(const char *api, const queued_run *run, size_t workspace_bytes, int status)
{
    for (int i = 0; i < TENSOR_COUNT; i++)
        if (i != BIAS) /* not read by the backward pass */
            CTBC_RETURN_IF_FAILED(
                ctbc_check_device_range(api, TENSOR_ARGUMENTS[i], run->storage[i], run->end_bytes[i], status));
    return ctbc_check_device_range(api, "workspace", run->workspace, workspace_bytes, status);
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
    void *view[TENSOR_COUNT] = {NULL}, *workspace = NULL;
    aclError status = ACL_SUCCESS;
    ctbc_memory_use_begin();
    for (int i = 0; i < TENSOR_COUNT && status == ACL_SUCCESS; i++)
        if (i != BIAS) { /* not read by the backward pass */
            void *storage = NULL;
            status = ctbc_use_device_range(PHASE2, TENSOR_ARGUMENTS[i], run->storage[i], run->end_bytes[i],
                                           ACL_ERROR_RT_AICORE_EXCEPTION, &storage);
            view[i] = view_start(storage, run->offset_bytes[i], run->end_bytes[i]);
        }
    if (status == ACL_SUCCESS)
        status = ctbc_use_device_range(PHASE2, "workspace", run->workspace, run->compute.workspace_bytes,
                                       ACL_ERROR_RT_AICORE_EXCEPTION, &workspace);
    if (status == ACL_SUCCESS) {
        const ctbc_buffers buffers = {view[SELF], view[INPUT], view[WEIGHT], view[GRAD_INPUT], view[GRAD_WEIGHT],
                                      view[GRAD_BIAS]};
        ctbc_execute(&run->compute, &buffers, workspace);
    }
    ctbc_memory_use_end();
    return status;
}

/* The addresses of one run: each tensor's storage from the executor's
 * current addresses, checked for overlaps again when they are not the ones
 * phase 1 checked. Fails for a view with elements but no data address. */
static aclnnStatus collect_run(const aclOpExecutor *executor, void *workspace, queued_run *run)
{
    const op_plan *plan = (const op_plan *)executor->plan;
    memset(run, 0, sizeof *run);
    bool moved = false;
    for (int i = 0; i < TENSOR_COUNT; i++) {
        const void *storage = i < INPUT_COUNT ? executor->inputs[i] : executor->outputs[i - INPUT_COUNT];
        if (i != BIAS && plan->views[i].end_bytes > 0 && !storage)
            return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, PHASE2,
                             "tensor %s has no data address; give one to aclCreateTensor or set it with "
                             "aclSet%sTensorAddr.",
                             TENSOR_NAMES[i], i < INPUT_COUNT ? "Input" : "Output");
        /* The compute reads and writes whole elements, as the NPU's vector
         * units do: an address off the element grid is refused, not used. */
        if (i != BIAS && plan->views[i].end_bytes > 0 && (uintptr_t)storage % (uintptr_t)plan->views[i].item != 0)
            return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, PHASE2,
                             "tensor %s's data address %p is not a multiple of its element size, %lld bytes.",
                             TENSOR_NAMES[i], storage, (long long)plan->views[i].item);
        run->storage[i] = storage;
        run->offset_bytes[i] = plan->views[i].offset_bytes;
        run->end_bytes[i] = plan->views[i].end_bytes;
        moved |= i != BIAS && storage != plan->checked_storage[i];
    }
    if (moved)
        CTBC_RETURN_IF_FAILED(check_overlaps(PHASE2, plan->views, run->storage));
    run->compute = plan->compute;
    run->workspace = workspace;
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnConvTbcBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                 aclrtStream stream)
{
    CTBC_RETURN_IF_FAILED(ctbc_executor_begin_run(executor, workspace, workspaceSize, stream, PHASE2));
    queued_run run;
    aclnnStatus status = collect_run(executor, workspace, &run);
    if (status == ACLNN_SUCCESS)
        status = check_memory(PHASE2, &run, executor->workspace_bytes, ACLNN_ERR_PARAM_INVALID);
    if (status == ACLNN_SUCCESS) {
        aclError submitted = ctbc_stream_submit(PHASE2, stream, run_queued, &run, sizeof run);
        if (submitted != ACL_SUCCESS)
            status = submitted == ACL_ERROR_BAD_ALLOC ? ACLNN_ERR_INNER : submitted;
    }
    ctbc_executor_end_run(executor, status == ACLNN_SUCCESS);
    return status;
}

aclnnStatus ctbc_conv_tbc_backward_run_host(aclOpExecutor *executor, void *workspace)
{
    queued_run run;
    CTBC_RETURN_IF_FAILED(collect_run(executor, workspace, &run));
    void *view[TENSOR_COUNT];
    for (int i = 0; i < TENSOR_COUNT; i++)
        view[i] = view_start((void *)run.storage[i], run.offset_bytes[i], run.end_bytes[i]);
    const ctbc_buffers buffers = {view[SELF], view[INPUT], view[WEIGHT], view[GRAD_INPUT], view[GRAD_WEIGHT],
                                  view[GRAD_BIAS]};
    ctbc_execute(&run.compute, &buffers, run.workspace);
    return ACLNN_SUCCESS;
}
