#include "api/lists.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/errors.h"
#include "api/sizes.h"

static int compare_addresses(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(const void *const *)a, y = (uintptr_t)*(const void *const *)b;
    return (x > y) - (x < y);
}

/* The position of a handle that `items` holds twice, or -1. A list owns
 * its elements, so a repeated one would be destroyed twice with the list. */
static int64_t repeated_item(const void *const *items, uint64_t count, bool *out_of_memory)
{
    *out_of_memory = false;
    if (count < 2)
        return -1;
    const void **sorted = malloc((size_t)count * sizeof *sorted); /* the caller checked the size */
    if (!sorted) {
        *out_of_memory = true;
        return -1;
    }
    memcpy(sorted, items, (size_t)count * sizeof *sorted);
    qsort(sorted, (size_t)count, sizeof *sorted, compare_addresses);
    const void *twice = NULL;
    for (uint64_t i = 1; i < count && !twice; i++)
        if (sorted[i] && sorted[i] == sorted[i - 1])
            twice = sorted[i];
    free(sorted);
    for (uint64_t i = 0; twice && i < count; i++)
        if (items[i] == twice)
            return (int64_t)i;
    return -1;
}

/* A list block of `items_at` header bytes and `size` handles copied from
 * `value`, its count in the first field; NULL with a message for `api`
 * when the arguments or memory do not allow it. */
static void *copy_list(const char *api, const char *element, const void *const *value, uint64_t size,
                       size_t items_at)
{
    if (size > 0 && !value) {
        ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, api,
                  "Expected a proper pointer but got null for argument value (size is %llu).",
                  (unsigned long long)size);
        return NULL;
    }
    size_t bytes;
    if (!ctbc_bytes_for(size, sizeof(void *), items_at, &bytes)) {
        ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api, "size %llu is too large for a list of %s handles",
                  (unsigned long long)size, element);
        return NULL;
    }
    bool out_of_memory;
    int64_t repeated = repeated_item(value, size, &out_of_memory);
    if (repeated >= 0) {
        ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, api,
                  "value[%lld] (%p) appears more than once: the list owns its elements and would destroy that "
                  "%s twice; create one %s per element",
                  (long long)repeated, value[repeated], element, element);
        return NULL;
    }
    unsigned char *block = out_of_memory ? NULL : malloc(bytes);
    if (!block) {
        ctbc_fail(ACLNN_ERR_INNER, CTBC_EE_INNER, api, "out of memory for a list of %llu elements",
                  (unsigned long long)size);
        return NULL;
    }
    memcpy(block, &size, sizeof size); /* both list structs start with their uint64_t size */
    if (size > 0)
        memcpy(block + items_at, value, bytes - items_at);
    return block;
}

aclTensorList *aclCreateTensorList(const aclTensor *const *value, uint64_t size)
{
    return copy_list("aclCreateTensorList", "aclTensor", (const void *const *)value, size,
                     offsetof(aclTensorList, items));
}

aclScalarList *aclCreateScalarList(const aclScalar *const *value, uint64_t size)
{
    return copy_list("aclCreateScalarList", "aclScalar", (const void *const *)value, size,
                     offsetof(aclScalarList, items));
}

aclnnStatus aclDestroyTensorList(const aclTensorList *array)
{
    if (!array)
        return ACLNN_SUCCESS;
    for (uint64_t i = 0; i < array->size; i++)
        aclDestroyTensor(array->items[i]);
    free((void *)array);
    return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyScalarList(const aclScalarList *array)
{
    if (!array)
        return ACLNN_SUCCESS;
    for (uint64_t i = 0; i < array->size; i++)
        aclDestroyScalar(array->items[i]);
    free((void *)array);
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetTensorListSize(const aclTensorList *tensorList, uint64_t *size)
{
    if (!tensorList || !size)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, "aclGetTensorListSize",
                         "Expected proper pointers but got null for argument %s.", tensorList ? "size" : "tensorList");
    *size = tensorList->size;
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetScalarListSize(const aclScalarList *scalarList, uint64_t *size)
{
    if (!scalarList || !size)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, "aclGetScalarListSize",
                         "Expected proper pointers but got null for argument %s.", scalarList ? "size" : "scalarList");
    *size = scalarList->size;
    return ACLNN_SUCCESS;
}
