/*
 * Versions. convtbc stands for one CANN release throughout: CANN 9.1.0,
 * whose runtime (hicann/runtime, package npu-runtime 9.1.0) declares the
 * functions convtbc implements, with ACL interface version 1.17.0. The
 * packages it stands in for are those whose libraries it provides:
 * runtime (libascendcl), opbase (libnnopbase), ops-nn and ops-math
 * (libopapi*). Asked about another package (driver, firmware, hccl, ...),
 * it answers as CANN does for one that is not installed.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "api/errors.h"

#define CANN_MAJOR 9
#define CANN_MINOR 1
#define CANN_PATCH 0
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define CANN_VERSION STRINGIFY(CANN_MAJOR) "." STRINGIFY(CANN_MINOR) "." STRINGIFY(CANN_PATCH)

/* CANN's number for a release version X.Y.Z: X*10^7 + Y*10^5 + Z*10^3
 * (pre-releases subtract from that; 9.1.0 is none). */
#define CANN_VERSION_NUM (CANN_MAJOR * 10000000 + CANN_MINOR * 100000 + CANN_PATCH * 1000)

static const char *const PACKAGES[] = {"runtime", "opbase", "ops-nn", "ops-math"};

/* CANN looks a name up as given, then with '-' and '_' swapped. */
static bool same_package(const char *asked, const char *known)
{
    for (; *asked && *known; asked++, known++) {
        char a = *asked == '_' ? '-' : *asked;
        if (a != *known)
            return false;
    }
    return *asked == *known;
}

static aclError find_package(const char *api, const char *pkgName)
{
    if (!pkgName)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "pkgName must not be NULL");
    for (size_t i = 0; i < sizeof PACKAGES / sizeof *PACKAGES; i++)
        if (same_package(pkgName, PACKAGES[i]))
            return ACL_SUCCESS;
    return ctbc_fail(ACL_ERROR_INVALID_FILE, CTBC_EE_RUNTIME, api,
                     "package '%.64s' is not installed: convtbc provides runtime, opbase, ops-nn and ops-math "
                     "(CANN " CANN_VERSION ")",
                     pkgName);
}

aclError aclsysGetVersionStr(char *pkgName, char *versionStr)
{
    if (!versionStr)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclsysGetVersionStr",
                         "versionStr must not be NULL");
    CTBC_RETURN_IF_FAILED(find_package("aclsysGetVersionStr", pkgName));
    memcpy(versionStr, CANN_VERSION, sizeof CANN_VERSION); /* CANN's buffer holds ACL_PKG_VERSION_MAX_SIZE */
    return ACL_SUCCESS;
}

aclError aclsysGetVersionNum(char *pkgName, int32_t *versionNum)
{
    if (!versionNum)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclsysGetVersionNum",
                         "versionNum must not be NULL");
    CTBC_RETURN_IF_FAILED(find_package("aclsysGetVersionNum", pkgName));
    *versionNum = CANN_VERSION_NUM;
    return ACL_SUCCESS;
}

aclError aclsysGetCANNVersion(aclCANNPackageName name, aclCANNPackageVersion *version)
{
    static const char API[] = "aclsysGetCANNVersion";
    if (!version)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API, "version must not be NULL");
    /* CANN reads ACL_PKG_NAME_CANN and _RUNTIME from the runtime package;
     * the compiler, HCCL, toolkit, operator and driver packages are not
     * part of convtbc. */
    switch ((int)name) {
    case ACL_PKG_NAME_CANN:
    case ACL_PKG_NAME_RUNTIME:
        break;
    case ACL_PKG_NAME_COMPILER:
    case ACL_PKG_NAME_HCCL:
    case ACL_PKG_NAME_TOOLKIT:
    case ACL_PKG_NAME_OPP:
    case ACL_PKG_NAME_OPP_KERNEL:
    case ACL_PKG_NAME_DRIVER:
        return ctbc_fail(ACL_ERROR_INVALID_FILE, CTBC_EE_RUNTIME, API,
                         "package %d is not installed: convtbc provides the runtime (ACL_PKG_NAME_CANN, "
                         "ACL_PKG_NAME_RUNTIME) of CANN " CANN_VERSION,
                         (int)name);
    default:
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API,
                         "name %d is not an aclCANNPackageName (0 to 7)", (int)name);
    }
    memset(version, 0, sizeof *version);
    snprintf(version->version, sizeof version->version, "%s", CANN_VERSION);
    snprintf(version->majorVersion, sizeof version->majorVersion, "%d", CANN_MAJOR);
    snprintf(version->minorVersion, sizeof version->minorVersion, "%d", CANN_MINOR);
    snprintf(version->releaseVersion, sizeof version->releaseVersion, "%d", CANN_PATCH);
    snprintf(version->patchVersion, sizeof version->patchVersion, "0"); /* a fourth part, absent here */
    return ACL_SUCCESS;
}

aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion)
{
    if (!majorVersion || !minorVersion || !patchVersion)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtGetVersion",
                         "majorVersion, minorVersion and patchVersion must not be NULL");
    /* The ACL interface version, not the package's: what the headers say. */
    *majorVersion = ACL_MAJOR_VERSION;
    *minorVersion = ACL_MINOR_VERSION;
    *patchVersion = ACL_PATCH_VERSION;
    return ACL_SUCCESS;
}
