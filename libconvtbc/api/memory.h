/*
 * Device memory. aclrtMalloc and its variants hand out blocks the host cannot
 * touch (the guard, api/device_pages.h: on unless
 * CONVTBC_GUARD_DEVICE_MEMORY=0 or convtbcSetDeviceMemoryGuard(0)); the
 * library reaches their bytes through a second, read-write view, found with
 * ctbc_device_view / ctbc_use_device_range. Whatever the library reads or
 * writes on behalf of the caller goes through those two.
 *
 * Checked device memory: unless checking is off (CONVTBC_CHECK_MEMORY=0, or
 * convtbcSetMemoryChecking(0)), every range the op or a copy touches as
 * device memory must lie inside one live block (or host memory declared
 * with convtbcDeclareHostMemory). Freed blocks are poisoned (all bytes 0xFF:
 * NaN as floats) and kept aside for a while, so that a late use is named as
 * such instead of reading reused memory.
 */
#ifndef CONVTBC_API_MEMORY_H
#define CONVTBC_API_MEMORY_H

#include <stdbool.h>
#include <stddef.h>

/* ACL_SUCCESS (0) when [address, address + bytes) may be used as device
 * memory; otherwise records a message for `api` naming `what` (e.g. "tensor
 * self"), the address and the block it falls in, and returns `status`. */
int ctbc_check_device_range(const char *api, const char *what, const void *address, size_t bytes, int status);

/* ctbc_check_device_range, and *view set to where the library reads and
 * writes those bytes (see ctbc_device_view). With checking off the range is
 * not checked, except that it must stay inside the pages of the block it
 * starts in. Call it between ctbc_memory_use_begin/end and use the view
 * before the bracket closes. */
int ctbc_use_device_range(const char *api, const char *what, const void *address, size_t bytes, int status,
                          void **view);

/* The address the library uses for `address`: inside a live device block,
 * the same byte of the block's read-write view; anything else (host memory,
 * NULL) unchanged. Valid while the block lives (see ctbc_memory_use_begin). */
void *ctbc_device_view(const void *address);

/* ACL_SUCCESS unless checking is on and [address, address + bytes) touches
 * a device block, live or released: then a message for `api` naming `what`
 * and `status`. */
int ctbc_check_host_range(const char *api, const char *what, const void *address, size_t bytes, int status);

/* Whether [address, address + bytes) shares a byte with a live device block. */
bool ctbc_is_device_memory(const void *address, size_t bytes);

/* Where ACL_MEMCPY_DEFAULT puts `address`, deciding by address as CANN
 * does: true inside a device block, live or released (so that a late use
 * is refused as one), or, in a fork()ed child, inside one of the parent's
 * blocks where this process has no memory it may read (and write, when
 * `written`); false for host memory. */
bool ctbc_is_device_address(const void *address, bool written);

/* Whether [address, address + bytes) lies inside one block from
 * aclrtMallocHost / aclrtMallocHostWithCfg. */
bool ctbc_is_acl_host_memory(const void *address, size_t bytes);

/* Queued work that reads or writes device memory brackets its check and its
 * use with these, so that aclrtFree (which waits for the bracket to close)
 * cannot poison or release a block in between. */
void ctbc_memory_use_begin(void);
void ctbc_memory_use_end(void);

/* In a fork()ed child, on its only thread: forgets the parent's blocks
 * (remembering their ranges for messages) and makes the locks new. */
void ctbc_memory_after_fork(void);

/* aclFinalize: really frees the quarantined blocks. */
void ctbc_memory_shutdown(void);

#endif /* CONVTBC_API_MEMORY_H */
