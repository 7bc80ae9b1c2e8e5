#include "api/tensor.h"

#include <stdlib.h>
#include <string.h>

#include "api/errors.h"

static const char *const DTYPE_NAMES[] = {
    [ACL_FLOAT] = "DT_FLOAT",       [ACL_FLOAT16] = "DT_FLOAT16",     [ACL_INT8] = "DT_INT8",
    [ACL_INT32] = "DT_INT32",       [ACL_UINT8] = "DT_UINT8",         [ACL_INT16] = "DT_INT16",
    [ACL_UINT16] = "DT_UINT16",     [ACL_UINT32] = "DT_UINT32",       [ACL_INT64] = "DT_INT64",
    [ACL_UINT64] = "DT_UINT64",     [ACL_DOUBLE] = "DT_DOUBLE",       [ACL_BOOL] = "DT_BOOL",
    [ACL_STRING] = "DT_STRING",     [ACL_COMPLEX64] = "DT_COMPLEX64", [ACL_COMPLEX128] = "DT_COMPLEX128",
    [ACL_BF16] = "DT_BF16",         [ACL_INT4] = "DT_INT4",           [ACL_UINT1] = "DT_UINT1",
    [ACL_COMPLEX32] = "DT_COMPLEX32", [ACL_HIFLOAT8] = "DT_HIFLOAT8", [ACL_FLOAT8_E5M2] = "DT_FLOAT8_E5M2",
    [ACL_FLOAT8_E4M3FN] = "DT_FLOAT8_E4M3FN",
};

const char *ctbc_dtype_name(aclDataType dtype)
{
    if (dtype == ACL_DT_UNDEFINED)
        return "DT_UNDEFINED";
    if ((int)dtype >= 0 && (size_t)dtype < sizeof DTYPE_NAMES / sizeof *DTYPE_NAMES && DTYPE_NAMES[dtype])
        return DTYPE_NAMES[dtype];
    return "an unknown dtype";
}

static const char *const FORMAT_NAMES[] = {
    [ACL_FORMAT_NCHW] = "NCHW",           [ACL_FORMAT_NHWC] = "NHWC",         [ACL_FORMAT_ND] = "ND",
    [ACL_FORMAT_NC1HWC0] = "NC1HWC0",     [ACL_FORMAT_FRACTAL_Z] = "FRACTAL_Z",
    [ACL_FORMAT_NC1HWC0_C04] = "NC1HWC0_C04", [ACL_FORMAT_HWCN] = "HWCN", [ACL_FORMAT_NDHWC] = "NDHWC",
    [ACL_FORMAT_FRACTAL_NZ] = "FRACTAL_NZ", [ACL_FORMAT_NCDHW] = "NCDHW", [ACL_FORMAT_NDC1HWC0] = "NDC1HWC0",
    [ACL_FRACTAL_Z_3D] = "FRACTAL_Z_3D",  [ACL_FORMAT_NC] = "NC",         [ACL_FORMAT_NCL] = "NCL",
};

const char *ctbc_format_name(aclFormat format)
{
    if (format == ACL_FORMAT_UNDEFINED)
        return "UNDEFINED";
    if ((int)format >= 0 && (size_t)format < sizeof FORMAT_NAMES / sizeof *FORMAT_NAMES && FORMAT_NAMES[format])
        return FORMAT_NAMES[format];
    return "an unknown format";
}

size_t aclDataTypeSize(aclDataType dataType)
{
    switch (dataType) {
    case ACL_BOOL: case ACL_INT8: case ACL_UINT8: case ACL_HIFLOAT8:
    case ACL_FLOAT8_E5M2: case ACL_FLOAT8_E4M3FN:
        return 1;
    case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: case ACL_UINT16:
        return 2;
    case ACL_FLOAT: case ACL_INT32: case ACL_UINT32: case ACL_COMPLEX32:
        return 4;
    case ACL_INT64: case ACL_UINT64: case ACL_DOUBLE: case ACL_COMPLEX64:
        return 8;
    case ACL_COMPLEX128:
        return 16;
    default: /* STRING, INT4, UINT1, UNDEFINED: no whole-byte element size */
        return 0;
    }
}

int64_t ctbc_tensor_numel(const aclTensor *tensor)
{
    int64_t numel = 1;
    bool invalid = false;
    for (uint64_t i = 0; i < tensor->rank; i++) {
        if (tensor->view_dims[i] == 0)
            return 0; /* empty, whatever the other dims say */
        invalid |= tensor->view_dims[i] < 0 || __builtin_mul_overflow(numel, tensor->view_dims[i], &numel);
    }
    return invalid ? -1 : numel;
}

/* Records a descriptor in `out` the way CANN's aclCreateTensor does: only
 * NULL dims with a non-zero count are refused (plus more dims than a tensor
 * holds, which CANN cannot represent either). Views outside their storage,
 * negative dims, strides or offsets are recorded as given; the op that uses
 * the tensor refuses what it cannot use. On failure records a message for
 * `api` and returns false, leaving `out` untouched. */
static bool describe(aclTensor *out, const char *api, const int64_t *view_dims, uint64_t rank,
                     aclDataType dtype, const int64_t *strides, int64_t offset, aclFormat format,
                     const int64_t *storage_dims, uint64_t storage_rank, void *data)
{
    const int status = ACLNN_ERR_PARAM_INVALID;
    if ((rank > 0 && view_dims == NULL) || (storage_rank > 0 && storage_dims == NULL)) {
        ctbc_fail(status, CTBC_EZ_PARAM, api, "%s is NULL but %s is %llu; a NULL dims array needs a count of 0",
                  view_dims == NULL && rank > 0 ? "viewDims" : "storageDims",
                  view_dims == NULL && rank > 0 ? "viewDimsNum" : "storageDimsNum",
                  (unsigned long long)(view_dims == NULL && rank > 0 ? rank : storage_rank));
        return false;
    }
    if (rank > CTBC_MAX_DIMS || storage_rank > CTBC_MAX_DIMS) {
        ctbc_fail(status, CTBC_EZ_PARAM, api, "a tensor has at most %d dims, got viewDimsNum %llu, storageDimsNum %llu",
                  CTBC_MAX_DIMS, (unsigned long long)rank, (unsigned long long)storage_rank);
        return false;
    }

    aclTensor t;
    memset(&t, 0, sizeof t);
    t.rank = rank;
    t.storage_rank = storage_rank;
    t.offset = offset;
    t.dtype = dtype;
    t.format = format;
    t.data = data;
    if (rank > 0)
        memcpy(t.view_dims, view_dims, rank * sizeof *view_dims);
    if (storage_rank > 0)
        memcpy(t.storage_dims, storage_dims, storage_rank * sizeof *storage_dims);
    if (strides && rank > 0) {
        memcpy(t.strides, strides, rank * sizeof *strides);
    } else {
        /* CANN's default strides: each the product of the dims after it,
         * so a 0 dim zeroes the strides before it. A product wraps (as
         * CANN's does) only for a view with no element, a negative dim or
         * more elements than int64_t counts: no op follows those strides. */
        int64_t step = 1;
        for (uint64_t i = rank; i-- > 0;) {
            t.strides[i] = step;
            (void)__builtin_mul_overflow(step, t.view_dims[i], &step);
        }
    }
    *out = t;
    return true;
}

aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t *stride, int64_t offset, aclFormat format, const int64_t *storageDims,
                           uint64_t storageDimsNum, void *tensorData)
{
    aclTensor t;
    if (!describe(&t, "aclCreateTensor", viewDims, viewDimsNum, dataType, stride, offset, format, storageDims,
                  storageDimsNum, tensorData))
        return NULL;
    aclTensor *tensor = malloc(sizeof *tensor);
    if (!tensor) {
        ctbc_fail(ACLNN_ERR_INNER, CTBC_EE_INNER, "aclCreateTensor", "out of memory");
        return NULL;
    }
    *tensor = t;
    return tensor;
}

aclnnStatus aclInitTensor(aclTensor *tensor, const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                          const int64_t *stride, int64_t offset, aclFormat format, const int64_t *storageDims,
                          uint64_t storageDimsNum, void *tensorDataAddr)
{
    if (!tensor)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, "aclInitTensor",
                         "Expected a proper Tensor but got null for argument tensor.");
    if (!describe(tensor, "aclInitTensor", viewDims, viewDimsNum, dataType, stride, offset, format, storageDims,
                  storageDimsNum, tensorDataAddr))
        return ACLNN_ERR_PARAM_INVALID;
    return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyTensor(const aclTensor *tensor)
{
    free((void *)tensor);
    return ACLNN_SUCCESS;
}

static aclnnStatus copy_out(const char *api, const aclTensor *tensor, const int64_t *values, uint64_t count,
                            int64_t **out, uint64_t *out_count)
{
    if (!tensor || !out || !out_count)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, api, "tensor and both output pointers must not be NULL");
    int64_t *copy = ctbc_new_int64_array(count);
    if (!copy)
        return ctbc_fail(ACLNN_ERR_INNER, CTBC_EE_INNER, api, "out of memory");
    memcpy(copy, values, count * sizeof *copy);
    *out = copy;
    *out_count = count;
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetViewShape(const aclTensor *tensor, int64_t **viewDims, uint64_t *viewDimsNum)
{
    return copy_out("aclGetViewShape", tensor, tensor ? tensor->view_dims : NULL, tensor ? tensor->rank : 0,
                    viewDims, viewDimsNum);
}

aclnnStatus aclGetStorageShape(const aclTensor *tensor, int64_t **storageDims, uint64_t *storageDimsNum)
{
    return copy_out("aclGetStorageShape", tensor, tensor ? tensor->storage_dims : NULL,
                    tensor ? tensor->storage_rank : 0, storageDims, storageDimsNum);
}

aclnnStatus aclGetViewStrides(const aclTensor *tensor, int64_t **stridesValue, uint64_t *stridesNum)
{
    return copy_out("aclGetViewStrides", tensor, tensor ? tensor->strides : NULL, tensor ? tensor->rank : 0,
                    stridesValue, stridesNum);
}

/* The scalar getters share one shape: check both pointers, copy one field. */
#define SCALAR_GETTER(api, out_type, out_name, field)                                                         \
    aclnnStatus api(const aclTensor *tensor, out_type *out_name)                                              \
    {                                                                                                         \
        if (!tensor || !out_name)                                                                             \
            return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, #api,                                    \
                             "tensor and " #out_name " must not be NULL");                                    \
        *out_name = tensor->field;                                                                            \
        return ACLNN_SUCCESS;                                                                                 \
    }

SCALAR_GETTER(aclGetViewOffset, int64_t, offset, offset)
SCALAR_GETTER(aclGetFormat, aclFormat, format, format)
SCALAR_GETTER(aclGetDataType, aclDataType, dataType, dtype)
SCALAR_GETTER(aclGetRawTensorAddr, void *, addr, data)

aclnnStatus aclSetRawTensorAddr(aclTensor *tensor, void *addr)
{
    if (!tensor)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, "aclSetRawTensorAddr",
                         "Expected a proper Tensor but got null for argument tensor.");
    tensor->data = addr;
    return ACLNN_SUCCESS;
}
