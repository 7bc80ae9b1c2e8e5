/*
 * The emulated runtime's shared state: whether ACL is initialised (with
 * CANN's aclInit reference count and its init and finalize callbacks), the
 * one device and its contexts, and the calling thread's current context
 * (each context owns a default stream, the one the NULL stream names).
 */
#ifndef CONVTBC_API_RUNTIME_H
#define CONVTBC_API_RUNTIME_H

#include "acl/acl_rt.h"
#include "api/streams.h"

typedef struct ctbc_context ctbc_context;

/* convtbc emulates one device, id 0. */
#define CTBC_DEVICE_COUNT 1

/* ACL_SUCCESS for device 0, else ACL_ERROR_RT_INVALID_DEVICEID with a
 * message for `api`. */
aclError ctbc_check_device(const char *api, int32_t device);

/* ACL_SUCCESS, or ACL_ERROR_UNINITIALIZE with a message for `api`. */
aclError ctbc_require_init(const char *api);

/* The calling thread's live current context, or NULL. */
ctbc_context *ctbc_current_context(void);

/* ctbc_require_init, then the current context or ACL_ERROR_RT_CONTEXT_NULL
 * with a message. */
aclError ctbc_require_context(const char *api, ctbc_context **out);

/* The stream that the NULL stream stands for in `ctx`. */
ctbc_stream *ctbc_context_default_stream(ctbc_context *ctx);

#endif /* CONVTBC_API_RUNTIME_H */
