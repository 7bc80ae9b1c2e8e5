/*
 * aclScalar: one host value and its dtype, copied at creation from the
 * caller's pointer (as many bytes as the dtype has), so the caller's
 * variable may go out of scope at once.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "aclnn/acl_meta.h"
#include "api/errors.h"
#include "api/tensor.h"
#include "convtbc/convtbc_ext.h"

enum { SCALAR_MAX_BYTES = 16 }; /* DT_COMPLEX128 */

struct aclScalar {
    aclDataType dtype;
    size_t bytes;
    union {
        max_align_t align; /* lets a caller's view of the value as double or int64_t be aligned */
        unsigned char raw[SCALAR_MAX_BYTES];
    } value;
};

/* The bytes CANN's aclScalar reads for a dtype, 0 for dtypes it refuses
 * (STRING, INT4, UINT1, COMPLEX32, UNDEFINED and unknown values). The 8-,
 * 6- and 4-bit floats from 37 on (FLOAT8_E8M0, FLOAT6_E3M2, FLOAT6_E2M3,
 * FLOAT4_E2M1, FLOAT4_E1M2) are held in one byte each; they are matched by
 * value so that this file does not depend on the header naming them. */
static size_t scalar_bytes(aclDataType dtype)
{
    switch ((int)dtype) {
    case ACL_INT8: case ACL_UINT8: case ACL_BOOL: case ACL_HIFLOAT8: case ACL_FLOAT8_E5M2:
    case ACL_FLOAT8_E4M3FN: case 37: case 38: case 39: case 40: case 41:
        return 1;
    case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: case ACL_UINT16:
        return 2;
    case ACL_FLOAT: case ACL_INT32: case ACL_UINT32:
        return 4;
    case ACL_INT64: case ACL_UINT64: case ACL_DOUBLE: case ACL_COMPLEX64:
        return 8;
    case ACL_COMPLEX128:
        return 16;
    default:
        return 0;
    }
}

aclScalar *aclCreateScalar(void *value, aclDataType dataType)
{
    static const char API[] = "aclCreateScalar";
    if (!value) {
        ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, API,
                  "Expected a proper pointer but got null for argument value.");
        return NULL;
    }
    size_t bytes = scalar_bytes(dataType);
    if (bytes == 0) {
        ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, API,
                  "dataType %d (%s) is not supported for a scalar; expected one of DT_FLOAT(0), DT_FLOAT16(1), "
                  "DT_INT8(2), DT_INT32(3), DT_UINT8(4), DT_INT16(6), DT_UINT16(7), DT_UINT32(8), DT_INT64(9), "
                  "DT_UINT64(10), DT_DOUBLE(11), DT_BOOL(12), DT_COMPLEX64(16), DT_COMPLEX128(17), DT_BF16(27), "
                  "DT_HIFLOAT8(34), DT_FLOAT8_E5M2(35), DT_FLOAT8_E4M3FN(36), DT_FLOAT8_E8M0(37), "
                  "DT_FLOAT6_E3M2(38), DT_FLOAT6_E2M3(39), DT_FLOAT4_E2M1(40), DT_FLOAT4_E1M2(41)",
                  (int)dataType, ctbc_dtype_name(dataType));
        return NULL;
    }
    aclScalar *scalar = calloc(1, sizeof *scalar);
    if (!scalar) {
        ctbc_fail(ACLNN_ERR_INNER, CTBC_EE_INNER, API, "out of memory");
        return NULL;
    }
    scalar->dtype = dataType;
    scalar->bytes = bytes;
    memcpy(scalar->value.raw, value, bytes);
    return scalar;
}

aclnnStatus aclDestroyScalar(const aclScalar *scalar)
{
    free((void *)scalar);
    return ACLNN_SUCCESS;
}

aclnnStatus convtbcGetScalar(const aclScalar *scalar, aclDataType *dataType, void *value, size_t *valueSize)
{
    static const char API[] = "convtbcGetScalar";
    if (!scalar || !dataType || !value || !valueSize)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, API,
                         "Expected proper pointers but got null for argument %s.",
                         !scalar ? "scalar" : !dataType ? "dataType" : !value ? "value" : "valueSize");
    if (*valueSize < scalar->bytes) {
        size_t room = *valueSize;
        *valueSize = scalar->bytes;
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, API,
                         "valueSize %zu is smaller than the %zu bytes of a dtype %d scalar", room, scalar->bytes,
                         (int)scalar->dtype);
    }
    *dataType = scalar->dtype;
    memcpy(value, scalar->value.raw, scalar->bytes);
    *valueSize = scalar->bytes;
    return ACLNN_SUCCESS;
}
