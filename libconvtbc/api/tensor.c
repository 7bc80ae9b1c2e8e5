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
    for (uint64_t i = 0; i < tensor->rank; i++)
        numel *= tensor->view_dims[i]; /* creation checked this cannot overflow */
    return numel;
}

/* Checks a descriptor and fills `out`; on failure records a message for
 * `api` and returns false, leaving `out` untouched. */
static bool describe(aclTensor *out, const char *api, const int64_t *view_dims, uint64_t rank,
                     aclDataType dtype, const int64_t *strides, int64_t offset, aclFormat format,
                     const int64_t *storage_dims, uint64_t storage_rank, void *data)
{
    const int status = ACLNN_ERR_PARAM_INVALID;
    if (rank > CTBC_MAX_DIMS || storage_rank > CTBC_MAX_DIMS) {
        ctbc_fail(status, CTBC_EZ_PARAM, api, "a tensor has at most %d dims, got viewDimsNum %llu, storageDimsNum %llu",
                  CTBC_MAX_DIMS, (unsigned long long)rank, (unsigned long long)storage_rank);
        return false;
    }
    if ((rank > 0 && view_dims == NULL) || (storage_rank > 0 && storage_dims == NULL)) {
        ctbc_fail(status, CTBC_EZ_PARAM, api, "viewDims and storageDims must not be NULL when their count is non-zero");
        return false;
    }
    if (offset < 0) {
        ctbc_fail(status, CTBC_EZ_PARAM, api, "offset must be >= 0, got %lld", (long long)offset);
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

    int64_t storage_numel = 1;
    for (uint64_t i = 0; i < storage_rank; i++) {
        if (storage_dims[i] < 0 || __builtin_mul_overflow(storage_numel, storage_dims[i], &storage_numel)) {
            ctbc_fail(status, CTBC_EZ_PARAM, api, "storageDims[%llu] = %lld is negative or the storage is too large",
                      (unsigned long long)i, (long long)storage_dims[i]);
            return false;
        }
        t.storage_dims[i] = storage_dims[i];
    }

    /* Lowest and highest element index the view touches, relative to the
     * storage start; overflow anywhere means the view cannot fit. */
    int64_t numel = 1, lowest = offset, highest = offset;
    bool overflow = false;
    for (uint64_t i = 0; i < rank; i++) {
        if (view_dims[i] < 0) {
            ctbc_fail(status, CTBC_EZ_PARAM, api, "viewDims[%llu] = %lld: dims must be >= 0", (unsigned long long)i,
                      (long long)view_dims[i]);
            return false;
        }
        t.view_dims[i] = view_dims[i];
        overflow |= __builtin_mul_overflow(numel, view_dims[i], &numel);
    }
    for (int64_t i = (int64_t)rank - 1, contiguous = 1; i >= 0; i--) {
        t.strides[i] = strides ? strides[i] : contiguous;
        overflow |= __builtin_mul_overflow(contiguous, t.view_dims[i] ? t.view_dims[i] : 1, &contiguous);
    }
    if (numel > 0) {
        for (uint64_t i = 0; i < rank; i++) {
            int64_t reach;
            overflow |= __builtin_mul_overflow(view_dims[i] - 1, t.strides[i], &reach);
            overflow |= __builtin_add_overflow(reach < 0 ? lowest : highest, reach, reach < 0 ? &lowest : &highest);
        }
        if (overflow || lowest < 0 || highest >= storage_numel) {
            ctbc_fail(status, CTBC_EZ_PARAM, api,
                      "the view (offset %lld, %llu dims) reaches elements [%lld, %lld] outside its storage of %lld "
                      "elements",
                      (long long)offset, (unsigned long long)rank, (long long)lowest, (long long)highest,
                      (long long)storage_numel);
            return false;
        }
    } else if (overflow) {
        ctbc_fail(status, CTBC_EZ_PARAM, api, "the view is too large");
        return false;
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
