/*
 * aclTensor: a view (dims, strides, offset in elements) into storage that
 * starts at `data`. Creation checks that the view stays inside the storage,
 * so the op can trust every address it derives from a tensor.
 */
#ifndef CONVTBC_API_TENSOR_H
#define CONVTBC_API_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "aclnn/acl_meta.h"

#define CTBC_MAX_DIMS 8

struct aclTensor {
    int64_t view_dims[CTBC_MAX_DIMS];
    int64_t strides[CTBC_MAX_DIMS];
    uint64_t rank;
    int64_t offset;
    aclDataType dtype;
    aclFormat format;
    int64_t storage_dims[CTBC_MAX_DIMS];
    uint64_t storage_rank;
    void *data;
};

/* Number of elements of the view (0 when any dim is 0). */
int64_t ctbc_tensor_numel(const aclTensor *tensor);

/* Short CANN names ("DT_FLOAT", "NCL") for messages. */
const char *ctbc_dtype_name(aclDataType dtype);
const char *ctbc_format_name(aclFormat format);

/* Allocates `count` int64_t the way CANN does (operator new[]), so that
 * callers written for CANN can release them with delete[]. */
int64_t *ctbc_new_int64_array(uint64_t count);

#endif /* CONVTBC_API_TENSOR_H */
