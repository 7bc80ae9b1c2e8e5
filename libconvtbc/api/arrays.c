/*
 * aclIntArray, aclFloatArray, aclBoolArray: host arrays copied at creation
 * (the caller's buffer may go away at once), freed by their Destroy call.
 * As in CANN, destroying NULL is a success and an empty array is valid.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "aclnn/acl_meta.h"
#include "api/errors.h"
#include "api/sizes.h"

struct aclIntArray {
    uint64_t size;
    int64_t values[];
};

struct aclFloatArray {
    uint64_t size;
    float values[];
};

struct aclBoolArray {
    uint64_t size;
    bool values[];
};

/* A block of `values_at` header bytes followed by `size` items of `item`
 * bytes copied from `value`, with the count stored in its first field;
 * NULL with a message for `api` when the arguments or memory do not allow
 * it. */
static void *copy_array(const char *api, const void *value, uint64_t size, size_t item, size_t values_at)
{
    if (size > 0 && !value) {
        ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, api,
                  "Expected a proper pointer but got null for argument value (size is %llu).",
                  (unsigned long long)size);
        return NULL;
    }
    size_t bytes;
    if (!ctbc_bytes_for(size, item, values_at, &bytes)) {
        ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                  "size %llu is too large: %llu elements of %zu bytes do not fit in memory",
                  (unsigned long long)size, (unsigned long long)size, item);
        return NULL;
    }
    unsigned char *block = malloc(bytes);
    if (!block) {
        ctbc_fail(ACLNN_ERR_INNER, CTBC_EE_INNER, api, "out of memory for an array of %llu elements",
                  (unsigned long long)size);
        return NULL;
    }
    memcpy(block, &size, sizeof size); /* every array struct starts with its uint64_t size */
    if (size > 0)
        memcpy(block + values_at, value, bytes - values_at);
    return block;
}

static aclnnStatus size_of(const char *api, const void *array, uint64_t *size)
{
    if (!array || !size)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, api,
                         "Expected proper pointers but got null for argument %s.", array ? "size" : "array");
    memcpy(size, array, sizeof *size);
    return ACLNN_SUCCESS;
}

aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size)
{
    return copy_array("aclCreateIntArray", value, size, sizeof(int64_t), offsetof(aclIntArray, values));
}

aclFloatArray *aclCreateFloatArray(const float *value, uint64_t size)
{
    return copy_array("aclCreateFloatArray", value, size, sizeof(float), offsetof(aclFloatArray, values));
}

aclBoolArray *aclCreateBoolArray(const bool *value, uint64_t size)
{
    return copy_array("aclCreateBoolArray", value, size, sizeof(bool), offsetof(aclBoolArray, values));
}

aclnnStatus aclDestroyIntArray(const aclIntArray *array)
{
    free((void *)array);
    return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyFloatArray(const aclFloatArray *array)
{
    free((void *)array);
    return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyBoolArray(const aclBoolArray *array)
{
    free((void *)array);
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetIntArraySize(const aclIntArray *array, uint64_t *size)
{
    return size_of("aclGetIntArraySize", array, size);
}

aclnnStatus aclGetFloatArraySize(const aclFloatArray *array, uint64_t *size)
{
    return size_of("aclGetFloatArraySize", array, size);
}

aclnnStatus aclGetBoolArraySize(const aclBoolArray *array, uint64_t *size)
{
    return size_of("aclGetBoolArraySize", array, size);
}
