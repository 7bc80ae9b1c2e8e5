/*
 * What the op needs from the emulated ACL runtime.
 *
 * Streams run their work synchronously, on the submitting thread: work on a
 * stream is done, in submission order, when the call that submitted it
 * returns, so aclrtSynchronizeStream has nothing left to wait for.
 */
#ifndef CONVTBC_API_RUNTIME_H
#define CONVTBC_API_RUNTIME_H

#include <stdbool.h>

#include "acl/acl_rt.h"

/* NULL (the default stream) or a stream made by aclrtCreateStream and not
 * yet destroyed. */
bool ctbc_stream_is_live(aclrtStream stream);

#endif /* CONVTBC_API_RUNTIME_H */
