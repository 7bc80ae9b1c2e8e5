#include "api/refuse.h"

#include <string.h>

#include "api/errors.h"

int ctbc_refuse(const char *function, int code, const char *why)
{
    /* Operators report in the aclnn family, the runtime in its own. */
    const char *error_id = strncmp(function, "aclnn", 5) == 0 ? CTBC_EZ_PARAM : CTBC_EE_RUNTIME;
    return ctbc_fail(code, error_id, function, "not supported by convtbc, which runs without an NPU: %s", why);
}
