/*
 * Checked device memory. aclrtMalloc blocks are tracked; unless checking is
 * off (CONVTBC_CHECK_MEMORY=0, or convtbcSetMemoryChecking(0)), every range
 * the op or a copy touches as device memory must lie inside one live block
 * (or host memory declared with convtbcDeclareHostMemory). Freed blocks are
 * poisoned (all bytes 0xFF: NaN as floats) and kept aside for a while, so
 * that a late use is named as such instead of reading reused memory.
 */
#ifndef CONVTBC_API_MEMORY_H
#define CONVTBC_API_MEMORY_H

#include <stdbool.h>
#include <stddef.h>

/* ACL_SUCCESS (0) when [address, address + bytes) may be used as device
 * memory; otherwise records a message for `api` naming `what` (e.g. "tensor
 * self"), the address and the block it falls in, and returns `status`. */
int ctbc_check_device_range(const char *api, const char *what, const void *address, size_t bytes, int status);

/* Whether [address, address + bytes) touches a live device block. */
bool ctbc_is_device_memory(const void *address, size_t bytes);

/* Queued work that reads or writes device memory brackets its check and its
 * use with these, so that aclrtFree (which waits for the bracket to close)
 * cannot poison or release a block in between. */
void ctbc_memory_use_begin(void);
void ctbc_memory_use_end(void);

/* aclFinalize: really frees the quarantined blocks. */
void ctbc_memory_shutdown(void);

#endif /* CONVTBC_API_MEMORY_H */
