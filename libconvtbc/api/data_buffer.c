/*
 * aclDataBuffer: a (data, size) pair that describes memory the caller owns.
 * Live buffers are registered, so that a getter or a destroy given a
 * pointer that is not one (NULL, freed, made up) answers with CANN's
 * "nothing" (NULL, 0) or an error code and a message instead of reading
 * freed memory.
 */
#include <stdint.h>
#include <stdlib.h>

#include "acl/acl_base.h"
#include "api/errors.h"
#include "api/registry.h"

struct aclDataBuffer {
    void *data;
    size_t size;
};

static ctbc_registry buffers = CTBC_REGISTRY_INIT;

/* Looks `buffer` up; leaves a message for `api` when it is not live. */
static bool live(const char *api, const aclDataBuffer *buffer)
{
    if (buffer && ctbc_registry_contains(&buffers, buffer))
        return true;
    ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
              "dataBuffer %p is not a live aclDataBuffer (NULL, never made by aclCreateDataBuffer, or "
              "destroyed)",
              (const void *)buffer);
    return false;
}

aclDataBuffer *aclCreateDataBuffer(void *data, size_t size)
{
    /* CANN takes any pointer and size, NULL and 0 included: the buffer
     * only describes the memory. */
    aclDataBuffer *buffer = malloc(sizeof *buffer);
    if (buffer) {
        buffer->data = data;
        buffer->size = size;
    }
    if (!buffer || !ctbc_registry_add(&buffers, buffer, sizeof *buffer)) {
        free(buffer);
        ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, "aclCreateDataBuffer", "out of memory");
        return NULL;
    }
    return buffer;
}

aclError aclDestroyDataBuffer(const aclDataBuffer *dataBuffer)
{
    if (!dataBuffer || !ctbc_registry_remove(&buffers, dataBuffer))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclDestroyDataBuffer",
                         "dataBuffer %p is not a live aclDataBuffer (NULL, never made by aclCreateDataBuffer, or "
                         "already destroyed)",
                         (const void *)dataBuffer);
    free((void *)dataBuffer); /* the memory it describes stays the caller's */
    return ACL_SUCCESS;
}

aclError aclUpdateDataBuffer(aclDataBuffer *dataBuffer, void *data, size_t size)
{
    if (!live("aclUpdateDataBuffer", dataBuffer))
        return ACL_ERROR_INVALID_PARAM;
    dataBuffer->data = data;
    dataBuffer->size = size;
    return ACL_SUCCESS;
}

void *aclGetDataBufferAddr(const aclDataBuffer *dataBuffer)
{
    return live("aclGetDataBufferAddr", dataBuffer) ? dataBuffer->data : NULL;
}

uint32_t aclGetDataBufferSize(const aclDataBuffer *dataBuffer)
{
    /* The deprecated getter truncates to 32 bits, as CANN's does. */
    return live("aclGetDataBufferSize", dataBuffer) ? (uint32_t)dataBuffer->size : 0;
}

size_t aclGetDataBufferSizeV2(const aclDataBuffer *dataBuffer)
{
    return live("aclGetDataBufferSizeV2", dataBuffer) ? dataBuffer->size : 0;
}
