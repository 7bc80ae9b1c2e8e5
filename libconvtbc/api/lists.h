/*
 * aclTensorList and aclScalarList: arrays of handles that own what they
 * hold, as in CANN. aclDestroyTensorList / aclDestroyScalarList destroy
 * every element, so a caller destroys the list and never its elements.
 */
#ifndef CONVTBC_API_LISTS_H
#define CONVTBC_API_LISTS_H

#include <stdint.h>

#include "aclnn/acl_meta.h"

struct aclTensorList {
    uint64_t size;
    aclTensor *items[]; /* may hold NULL (an absent optional tensor) */
};

struct aclScalarList {
    uint64_t size;
    aclScalar *items[];
};

#endif /* CONVTBC_API_LISTS_H */
