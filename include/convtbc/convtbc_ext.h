/*
 * convtbc extensions: calls that CANN does not have, for tests and for the
 * Python bindings. Nothing here is needed to run code written for CANN.
 */
#ifndef CONVTBC_CONVTBC_EXT_H
#define CONVTBC_CONVTBC_EXT_H

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checked device memory (on unless CONVTBC_CHECK_MEMORY=0): tensor data,
 * workspaces and aclrtMemcpy/aclrtMemset ranges must lie in live aclrtMalloc
 * blocks. enabled 0 turns the checks off, 1 on; returns the previous
 * setting. */
ACL_FUNC_VISIBILITY int convtbcSetMemoryChecking(int enabled);

/* Lets host memory [ptr, ptr + size) stand for device memory until it is
 * forgotten, so that code which owns host buffers (the numpy bindings) can
 * pass them without copies while checking stays on for everything else.
 * Declarations nest: each declare needs one forget with the same ptr. */
ACL_FUNC_VISIBILITY aclError convtbcDeclareHostMemory(const void *ptr, size_t size);
ACL_FUNC_VISIBILITY aclError convtbcForgetHostMemory(const void *ptr);

/* Selects the emulated SoC by name (see aclrtGetSocName), overriding
 * CONVTBC_SOC_VERSION; ACL_ERROR_INVALID_PARAM for an unknown name. */
ACL_FUNC_VISIBILITY aclError convtbcSetSocVersion(const char *socName);

/* Waits for the work queued on the calling thread's default stream (the
 * NULL stream) when it has a current context; returns ACL_SUCCESS at once
 * otherwise. Needs no aclInit. */
ACL_FUNC_VISIBILITY aclError convtbcSynchronizeCurrent(void);

#ifdef __cplusplus
}
#endif

#endif /* CONVTBC_CONVTBC_EXT_H */
