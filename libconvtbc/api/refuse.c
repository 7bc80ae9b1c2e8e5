#include "api/refuse.h"

#include <string.h>

#include "api/errors.h"

int ctbc_refuse(const char *function, int code, const char *why)
{
    /* Operators report in the aclnn family, the runtime in its own. */
    if (strncmp(function, "aclnn", 5) == 0)
        return ctbc_fail(code, CTBC_EZ_PARAM, function, "not implemented: %s", why);
    return ctbc_fail(code, CTBC_EE_RUNTIME, function, "not supported by convtbc, which runs without an NPU: %s", why);
}
