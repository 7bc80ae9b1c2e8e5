/*
 * aclTensor: a view (dims, strides, offset in elements) into storage that
 * starts at `data`. Creation records what it is given, as CANN's does (it
 * refuses only NULL dims with a non-zero count): dims, strides and offset
 * may be anything. An op checks each view against its storage, with
 * overflow-checked arithmetic, before it derives an address from it.
 */
#ifndef CONVTBC_API_TENSOR_H
#define CONVTBC_API_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "aclnn/acl_meta.h"

/* The most dims a tensor holds: the capacity of CANN's shapes (opbase's
 * MAX_DIM_NUM); CANN cannot represent more either. */
#define CTBC_MAX_DIMS 25

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

/* Number of elements of the view: 0 when any dim is 0, else -1 when a dim
 * is negative or the count overflows int64_t. */
int64_t ctbc_tensor_numel(const aclTensor *tensor);

/* Short CANN names ("DT_FLOAT", "NCL") for messages. */
const char *ctbc_dtype_name(aclDataType dtype);
const char *ctbc_format_name(aclFormat format);

/* Allocates `count` int64_t the way CANN does (operator new[]), so that
 * callers written for CANN can release them with delete[]. */
int64_t *ctbc_new_int64_array(uint64_t count);

#endif /* CONVTBC_API_TENSOR_H */
