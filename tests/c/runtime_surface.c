/*
 * The runtime surface around the op, as a C client uses it: init and
 * finalize callbacks with their user data and CANN's reference counting,
 * data buffers, versions, device queries and settings, the thread's last
 * error, and application log lines (some too long for CANN's limit). Bad
 * arguments (NULL out-pointers, unknown enumerators, device ids that are no
 * device, handles that are no handles) must give CANN's codes and never
 * crash; the sanitizer build runs this too.
 * Prints FAIL lines and returns non-zero on any failure.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */

/* aclrtGetVersion and aclsysGetCANNVersion are deprecated in CANN, and still tested here. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"

static int failures;

#define CHECK_EQ(got, want, what)                                                                             \
    do {                                                                                                      \
        long long got_ = (long long)(got), want_ = (long long)(want);                                         \
        if (got_ != want_) {                                                                                  \
            ++failures;                                                                                       \
            fprintf(stderr, "FAIL %s:%d: %s: got %lld, want %lld\n", __FILE__, __LINE__, what, got_, want_); \
        }                                                                                                     \
    } while (0)

enum { INVALID_PARAM = 100000, REPEAT_INIT = 100002, INVALID_FILE = 100003, REPEAT_FINALIZE = 100037,
       INTERNAL_ERROR = 500000, RT_PARAM_INVALID = 107000, RT_INVALID_DEVICE = 107001, RT_CONTEXT_NULL = 107002,
       RT_NOT_SUPPORTED = 207000 };

/* ---- callbacks ---- */

static char trace[64];
static size_t trace_len;
static int init_users[3], finalize_users[2];

static void note(char c)
{
    if (trace_len + 1 < sizeof trace)
        trace[trace_len++] = c;
}

static aclError on_init_model(const char *config, size_t len, void *user)
{
    CHECK_EQ(user == &init_users[0], 1, "model callback user data");
    CHECK_EQ(len, 0, "no configuration file: empty configuration");
    CHECK_EQ(config != NULL && config[0] == '\0', 1, "configStr is \"\"");
    note('m');
    return ACL_SUCCESS;
}

static aclError on_init_other(const char *config, size_t len, void *user)
{
    (void)config;
    (void)len;
    note(user == &init_users[1] ? 'a' : user == &init_users[2] ? 'b' : '?');
    return ACL_SUCCESS;
}

static aclError on_finalize(void *user)
{
    note(user == &finalize_users[0] ? 'F' : user == &finalize_users[1] ? 'G' : '?');
    return ACL_SUCCESS;
}

static void lifecycle(void)
{
    CHECK_EQ(aclInitCallbackRegister(ACL_REG_TYPE_ACL_MODEL, NULL, NULL), INVALID_PARAM, "NULL cbFunc");
    CHECK_EQ(aclInitCallbackRegister(ACL_REG_TYPE_OTHER, on_init_other, &init_users[1]), 0, "register a");
    CHECK_EQ(aclInitCallbackRegister(ACL_REG_TYPE_ACL_MODEL, on_init_model, &init_users[0]), 0, "register model");
    CHECK_EQ(aclInitCallbackRegister(ACL_REG_TYPE_ACL_MODEL, on_init_other, NULL), INTERNAL_ERROR, "second model");
    CHECK_EQ(aclFinalizeCallbackRegister(ACL_REG_TYPE_OTHER, on_finalize, &finalize_users[1]), 0, "register G");
    CHECK_EQ(aclFinalizeCallbackRegister(ACL_REG_TYPE_ACL_MODEL, on_finalize, &finalize_users[0]), 0, "register F");
    CHECK_EQ(aclInit("/nonexistent/convtbc/acl.json"), INVALID_FILE, "unreadable configPath");
    CHECK_EQ(trace_len, 0, "no callback before a successful aclInit");

    CHECK_EQ(aclInit(NULL), 0, "aclInit");
    CHECK_EQ(aclInit(NULL), REPEAT_INIT, "aclInit again");
    CHECK_EQ(aclInitCallbackRegister(ACL_REG_TYPE_OTHER, on_init_other, &init_users[2]), 0, "register b late");
    CHECK_EQ(strcmp(trace, "mab"), 0, "init callbacks: model, a, then b at once");

    uint64_t refs = 99;
    CHECK_EQ(aclFinalizeReference(&refs), 0, "first drop");
    CHECK_EQ(refs, 1, "one reference left");
    CHECK_EQ(strcmp(trace, "mab"), 0, "no finalize callback yet");
    CHECK_EQ(aclFinalizeReference(&refs), 0, "last drop");
    CHECK_EQ(refs, 0, "none left");
    CHECK_EQ(strcmp(trace, "mabFG"), 0, "finalize callbacks: model, then other");
    CHECK_EQ(aclFinalizeReference(NULL), REPEAT_FINALIZE, "one drop too many");
    CHECK_EQ(aclFinalize(), REPEAT_FINALIZE, "aclFinalize with nothing left");

    CHECK_EQ(aclInitCallbackUnRegister(ACL_REG_TYPE_OTHER, on_init_other), 0, "unregister a");
    CHECK_EQ(aclInitCallbackUnRegister(ACL_REG_TYPE_OTHER, on_init_other), 0, "unregister b");
    CHECK_EQ(aclInitCallbackUnRegister(ACL_REG_TYPE_OTHER, on_init_other), INTERNAL_ERROR, "nothing left");
    CHECK_EQ(aclFinalizeCallbackUnRegister(ACL_REG_TYPE_OTHER, on_finalize), 0, "unregister G");
    CHECK_EQ(aclFinalizeCallbackUnRegister(ACL_REG_TYPE_ACL_MODEL, on_finalize), 0, "unregister F");
    CHECK_EQ(aclInitCallbackUnRegister(ACL_REG_TYPE_ACL_MODEL, on_init_model), 0, "unregister model");
}

/* ---- data buffers ---- */

static void data_buffers(void)
{
    float data[8] = {0};
    aclDataBuffer *buffer = aclCreateDataBuffer(data, sizeof data);
    CHECK_EQ(buffer != NULL, 1, "aclCreateDataBuffer");
    CHECK_EQ(aclGetDataBufferAddr(buffer) == (void *)data, 1, "address");
    CHECK_EQ(aclGetDataBufferSizeV2(buffer), sizeof data, "size");
    CHECK_EQ(aclUpdateDataBuffer(buffer, data + 4, 16), 0, "update");
    CHECK_EQ(aclGetDataBufferAddr(buffer) == (void *)(data + 4), 1, "new address");
    CHECK_EQ(aclGetDataBufferSizeV2(buffer), 16, "new size");
    CHECK_EQ(aclDestroyDataBuffer(buffer), 0, "destroy");
    /* the freed descriptor and made-up ones are refused without being read */
    CHECK_EQ(aclDestroyDataBuffer(buffer), INVALID_PARAM, "destroy twice");
    CHECK_EQ(aclGetDataBufferSizeV2(buffer), 0, "size of a destroyed buffer");
    CHECK_EQ(aclGetDataBufferAddr(buffer) == NULL, 1, "address of a destroyed buffer");
    CHECK_EQ(aclUpdateDataBuffer(buffer, data, 4), INVALID_PARAM, "update a destroyed buffer");
    CHECK_EQ(aclDestroyDataBuffer(NULL), INVALID_PARAM, "destroy NULL");
    CHECK_EQ(aclGetDataBufferSize(NULL), 0, "size of NULL");
    for (int i = 0; i < 100; i++) { /* no leak: each one freed */
        aclDataBuffer *b = aclCreateDataBuffer(NULL, (size_t)i);
        CHECK_EQ(aclGetDataBufferSize(b), i, "size");
        CHECK_EQ(aclDestroyDataBuffer(b), 0, "destroy");
    }
}

/* ---- versions ---- */

static void versions(void)
{
    char text[ACL_PKG_VERSION_MAX_SIZE];
    int32_t number = -1;
    char runtime[] = "runtime", ops_nn[] = "ops_nn", driver[] = "driver";
    CHECK_EQ(aclsysGetVersionStr(runtime, text), 0, "runtime version string");
    CHECK_EQ(aclsysGetVersionNum(runtime, &number), 0, "runtime version number");
    int major = 0, minor = 0, patch = 0;
    CHECK_EQ(sscanf(text, "%d.%d.%d", &major, &minor, &patch), 3, "X.Y.Z");
    CHECK_EQ(number, major * 10000000 + minor * 100000 + patch * 1000, "number from the string");
    CHECK_EQ(aclsysGetVersionNum(ops_nn, &number), 0, "ops_nn, named with '_'");
    aclCANNPackageVersion pkg;
    CHECK_EQ(aclsysGetCANNVersion(ACL_PKG_NAME_CANN, &pkg), 0, "aclsysGetCANNVersion");
    CHECK_EQ(strcmp(pkg.version, text), 0, "same version");
    CHECK_EQ(atoi(pkg.majorVersion), major, "major part");
    CHECK_EQ(aclsysGetVersionStr(driver, text), INVALID_FILE, "driver");
    CHECK_EQ(aclsysGetVersionStr(NULL, text), INVALID_PARAM, "NULL pkgName");
    CHECK_EQ(aclsysGetVersionNum(runtime, NULL), INVALID_PARAM, "NULL versionNum");
    CHECK_EQ(aclsysGetCANNVersion((aclCANNPackageName)42, &pkg), INVALID_PARAM, "unknown package name");
    int32_t a, b, c;
    CHECK_EQ(aclrtGetVersion(&a, &b, &c), 0, "aclrtGetVersion");
    CHECK_EQ(a * 10000 + b * 100 + c, ACL_MAJOR_VERSION * 10000 + ACL_MINOR_VERSION * 100 + ACL_PATCH_VERSION,
             "the header's ACL version");
    CHECK_EQ(aclrtGetVersion(NULL, &b, &c), INVALID_PARAM, "NULL majorVersion");
}

/* ---- devices ---- */

static void devices(void)
{
    aclrtRunMode mode;
    CHECK_EQ(aclrtGetRunMode(&mode), 0, "aclrtGetRunMode");
    CHECK_EQ(mode, ACL_HOST, "ACL_HOST");
    int64_t value = 0;
    CHECK_EQ(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_AICORE_CORE_NUM, &value), 0, "AI cores");
    CHECK_EQ(value > 0, 1, "some AI cores");
    CHECK_EQ(aclrtGetDeviceInfo(7, ACL_DEV_ATTR_AICORE_CORE_NUM, &value), RT_INVALID_DEVICE, "device 7");
    CHECK_EQ(aclrtGetDeviceInfo(0, (aclrtDevAttr)12345, &value), RT_PARAM_INVALID, "unknown attr");
    CHECK_EQ(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_L2_CACHE_SIZE, NULL), INVALID_PARAM, "NULL value");
    CHECK_EQ(aclGetDeviceCapability(0, (aclDeviceInfo)-7, &value), INVALID_PARAM, "unknown info");
    int32_t flag = 0;
    CHECK_EQ(aclGetCannAttribute((aclCannAttr)77, &flag), INVALID_PARAM, "unknown CANN attribute");
    const aclCannAttr *attrs = NULL;
    size_t count = 0;
    CHECK_EQ(aclGetCannAttributeList(&attrs, &count), 0, "attribute list");
    for (size_t i = 0; i < count; i++) {
        CHECK_EQ(aclGetCannAttribute(attrs[i], &flag), 0, "listed attribute");
        CHECK_EQ(flag, 1, "a listed attribute is available");
    }
    aclrtUtilizationInfo use;
    memset(&use, 0, sizeof use);
    CHECK_EQ(aclrtGetDeviceUtilizationRate(0, &use), 0, "utilisation");
    CHECK_EQ(use.memoryUtilization, -1, "memory not measured");
    int32_t can = 0, id = -1;
    CHECK_EQ(aclrtDeviceCanAccessPeer(&can, 0, 0), INVALID_PARAM, "same device");
    CHECK_EQ(aclrtDeviceCanAccessPeer(&can, 0, 1), RT_INVALID_DEVICE, "no device 1");
    CHECK_EQ(aclrtGetPhyDevIdByLogicDevId(0, &id), 0, "physical id");
    CHECK_EQ(id, 0, "identity");
    CHECK_EQ(aclrtGetPhyDevIdByLogicDevId(0, NULL), INVALID_PARAM, "NULL phyDevId");
    aclrtUuid uuid;
    CHECK_EQ(aclrtDeviceGetUuid(-1, &uuid), RT_INVALID_DEVICE, "uuid of device -1");
    size_t limit = 0;
    CHECK_EQ(aclrtDeviceGetLimit((aclrtDeviceLimit)99, &limit), INVALID_PARAM, "unknown limit");
    uint32_t cores = 0;
    CHECK_EQ(aclrtGetDeviceResLimit(0, (aclrtDevResLimitType)9, &cores), RT_PARAM_INVALID, "unknown resource");
    uint64_t actual = 0;
    CHECK_EQ(aclrtSetOpExecuteTimeOutV2(UINT64_MAX, &actual), 0, "huge timeout");
    uint64_t interval = 0;
    CHECK_EQ(aclrtGetOpTimeOutInterval(&interval), 0, "interval");
    CHECK_EQ(actual, 254 * interval, "capped at 254 units");

    /* with a device */
    CHECK_EQ(aclInit(NULL), 0, "aclInit");
    aclrtStream stream = NULL;
    CHECK_EQ(aclrtCtxGetCurrentDefaultStream(&stream), RT_CONTEXT_NULL, "no context yet");
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), RT_CONTEXT_NULL, "last error");
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), 0, "cleared");
    CHECK_EQ(aclrtPeekAtLastError((aclrtLastErrLevel)3), INVALID_PARAM, "level 3");
    CHECK_EQ(aclrtSetDevice(0), 0, "aclrtSetDevice");
    CHECK_EQ(aclrtCtxGetCurrentDefaultStream(&stream), 0, "default stream");
    CHECK_EQ(stream != NULL, 1, "a real handle");
    aclrtFloatOverflowMode sat;
    CHECK_EQ(aclrtGetDeviceSatMode(&sat), 0, "saturation mode");
    CHECK_EQ(sat, ACL_RT_OVERFLOW_MODE_INFNAN, "Inf/NaN");
    CHECK_EQ(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_SATURATION), RT_NOT_SUPPORTED, "no saturation");
    CHECK_EQ(aclrtDeviceEnablePeerAccess(1, 0), RT_INVALID_DEVICE, "no peer");
    CHECK_EQ(aclrtSetSysParamOpt((aclSysParamOpt)-1, 0), INVALID_PARAM, "option -1");
    CHECK_EQ(aclrtResetDeviceForce(0), 0, "aclrtResetDeviceForce");
    CHECK_EQ(aclFinalize(), 0, "aclFinalize");
}

/* ---- application log lines ---- */

static void app_log(void)
{
    static char long_text[5000];
    memset(long_text, 'y', sizeof long_text - 1);
    ACL_APP_LOG(ACL_ERROR, "%s", long_text);
    ACL_APP_LOG(ACL_INFO, "a %d-byte line", 5000);
    aclAppLog(ACL_ERROR, "f", "x.c", 1, NULL);
    aclAppLog((aclLogLevel)17, "f", "x.c", 1, "level 17");
}

int main(void)
{
    /* Lines to stdout, every level: the long ones go through the real
     * formatting path. */
    setenv("ASCEND_SLOG_PRINT_TO_STDOUT", "1", 1);
    setenv("ASCEND_GLOBAL_LOG_LEVEL", "0", 1);
    lifecycle();
    data_buffers();
    versions();
    devices();
    app_log();
    if (failures) {
        fprintf(stderr, "runtime_surface: %d failure(s)\n", failures);
        return 1;
    }
    printf("runtime_surface: OK\n");
    return 0;
}
