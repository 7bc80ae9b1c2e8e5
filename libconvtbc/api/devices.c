/*
 * Device queries and device-wide settings of the one emulated device: what
 * it is (run mode, status, attributes and capabilities from the SoC
 * profile), how it relates to other devices (there are none: peer access,
 * topology, id mappings), and the settings a program may store and read
 * back (saturation mode, resource limits, operator timeouts).
 */
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl.h"
#include "api/errors.h"
#include "api/runtime.h"
#include "api/soc_profile.h"

#define REQUIRE_ARG(api, cond, what)                                                                          \
    do {                                                                                                      \
        if (!(cond))                                                                                          \
            return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "%s", what);                      \
    } while (0)

/* Everything a program can set here, behind one lock. */
static pthread_mutex_t settings_lock = PTHREAD_MUTEX_INITIALIZER;

static const ctbc_soc_hardware *hardware(void) { return (&ctbc_soc()->hw); }

/* The Atlas A2/A3 and Ascend950 families share CANN's newer device
 * features (stack and printf limits); the training series does not. */
static bool newer_family(void) { return ctbc_soc()->family != CTBC_SOC_TRAINING; }

static aclError unsupported(const char *api, const char *what)
{
    return ctbc_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, CTBC_EE_RUNTIME, api, "%s is not supported on %s", what,
                     ctbc_soc()->name);
}

/* ---- what the device is ------------------------------------------------------ */

aclError aclrtGetRunMode(aclrtRunMode *runMode)
{
    REQUIRE_ARG("aclrtGetRunMode", runMode, "runMode must not be NULL");
    *runMode = ACL_HOST; /* the program runs on the host, beside its device */
    return ACL_SUCCESS;
}

aclError aclrtQueryDeviceStatus(int32_t deviceId, aclrtDeviceStatus *deviceStatus)
{
    REQUIRE_ARG("aclrtQueryDeviceStatus", deviceStatus, "deviceStatus must not be NULL");
    CTBC_RETURN_IF_FAILED(ctbc_check_device("aclrtQueryDeviceStatus", deviceId));
    *deviceStatus = ACL_RT_DEVICE_STATUS_NORMAL;
    return ACL_SUCCESS;
}

aclError aclrtGetDeviceUtilizationRate(int32_t deviceId, aclrtUtilizationInfo *utilizationInfo)
{
    REQUIRE_ARG("aclrtGetDeviceUtilizationRate", utilizationInfo, "utilizationInfo must not be NULL");
    REQUIRE_ARG("aclrtGetDeviceUtilizationRate", !utilizationInfo->utilizationExtend,
                "utilizationInfo->utilizationExtend is reserved and must be NULL");
    CTBC_RETURN_IF_FAILED(ctbc_check_device("aclrtGetDeviceUtilizationRate", deviceId));
    /* CANN's -1 means "not there" (a SoC without vector cores) or "not
     * measured" (memory, in every release so far). The cores of an
     * emulated device are never busy between calls. */
    utilizationInfo->cubeUtilization = 0;
    utilizationInfo->vectorUtilization = hardware()->vector_cores > 0 ? 0 : -1;
    utilizationInfo->aicpuUtilization = 0;
    utilizationInfo->memoryUtilization = -1;
    return ACL_SUCCESS;
}

aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr, int64_t *value)
{
    static const char API[] = "aclrtGetDeviceInfo";
    REQUIRE_ARG(API, value, "value must not be NULL");
    if (deviceId != 0)
        return ctbc_fail(ACL_ERROR_RT_INVALID_DEVICEID, CTBC_EE_RUNTIME, API,
                         "deviceId %u is invalid: convtbc emulates one device, id 0", deviceId);
    const ctbc_soc_hardware *hw = hardware();
    switch ((int)attr) {
    case ACL_DEV_ATTR_AICPU_CORE_NUM: *value = hw->ai_cpus; return ACL_SUCCESS;
    case ACL_DEV_ATTR_AICORE_CORE_NUM: *value = hw->ai_cores; return ACL_SUCCESS;
    case ACL_DEV_ATTR_CUBE_CORE_NUM: *value = hw->cube_cores; return ACL_SUCCESS;
    case ACL_DEV_ATTR_VECTOR_CORE_NUM: *value = hw->vector_cores; return ACL_SUCCESS;
    case ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE: *value = hw->memory_bytes; return ACL_SUCCESS;
    case ACL_DEV_ATTR_L2_CACHE_SIZE: *value = hw->l2_bytes; return ACL_SUCCESS;
    case ACL_DEV_ATTR_NPU_ARCH: *value = hw->npu_arch; return ACL_SUCCESS;
    case ACL_DEV_ATTR_SMP_ID:     /* one device: alone on its OS */
    case ACL_DEV_ATTR_PHY_CHIP_ID: /* and the first chip */
    case ACL_DEV_ATTR_IS_VIRTUAL: /* and not a split of one */
        *value = 0;
        return ACL_SUCCESS;
    case ACL_DEV_ATTR_UBUF_PER_VECTOR_CORE:
        if (hw->vector_cores == 0)
            return unsupported(API, "ACL_DEV_ATTR_UBUF_PER_VECTOR_CORE (no vector cores)");
        *value = hw->ub_bytes;
        return ACL_SUCCESS;
    case ACL_DEV_ATTR_WARP_SIZE:
    case ACL_DEV_ATTR_MAX_THREAD_PER_VECTOR_CORE:
    case ACL_DEV_ATTR_MAX_GRID_DIM_X:
    case ACL_DEV_ATTR_MAX_GRID_DIM_Y:
    case ACL_DEV_ATTR_MAX_GRID_DIM_Z:
    case ACL_DEV_ATTR_MAX_BLOCK_PER_GRID:
    case ACL_DEV_ATTR_MAX_THREADS_PER_BLOCK:
    case ACL_DEV_ATTR_MAX_BLOCK_DIM_X:
    case ACL_DEV_ATTR_MAX_BLOCK_DIM_Y:
    case ACL_DEV_ATTR_MAX_BLOCK_DIM_Z:
        return ctbc_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, CTBC_EE_RUNTIME, API,
                         "attr %d describes SIMT kernels, which convtbc does not run", (int)attr);
    case ACL_DEV_ATTR_SUPER_POD_DEVICE_ID:
    case ACL_DEV_ATTR_SUPER_POD_SERVER_ID:
    case ACL_DEV_ATTR_SUPER_POD_ID:
    case ACL_DEV_ATTR_CUST_OP_PRIVILEGE:
    case ACL_DEV_ATTR_MAINBOARD_ID:
    case ACL_DEV_ATTR_HD_CONNECT_TYPE:
    case ACL_DEV_ATTR_DEVICE_FORM_FACTOR:
        return ctbc_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, CTBC_EE_RUNTIME, API,
                         "attr %d describes the server the device sits in; the emulated device has none",
                         (int)attr);
    default:
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API, "attr %d is not an aclrtDevAttr",
                         (int)attr);
    }
}

aclError aclrtGetDeviceCapability(int32_t deviceId, aclrtDevFeatureType devFeatureType, int32_t *value)
{
    static const char API[] = "aclrtGetDeviceCapability";
    REQUIRE_ARG(API, value, "value must not be NULL");
    CTBC_RETURN_IF_FAILED(ctbc_check_device(API, deviceId));
    switch ((int)devFeatureType) {
    case ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV: /* no model tasks to update */
    case ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV:       /* no other device */
        *value = ACL_DEV_FEATURE_NOT_SUPPORT;
        return ACL_SUCCESS;
    default:
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API,
                         "devFeatureType %d is not an aclrtDevFeatureType", (int)devFeatureType);
    }
}

aclError aclGetDeviceCapability(uint32_t deviceId, aclDeviceInfo deviceInfo, int64_t *value)
{
    static const char API[] = "aclGetDeviceCapability";
    REQUIRE_ARG(API, value, "value must not be NULL");
    /* CANN checks the id itself here, with the plain parameter code. */
    if (deviceId >= CTBC_DEVICE_COUNT)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API,
                         "deviceId %u is greater than the last device, 0", deviceId);
    const ctbc_soc_hardware *hw = hardware();
    switch ((int)deviceInfo) {
    case ACL_DEVICE_INFO_AI_CORE_NUM: *value = hw->ai_cores; return ACL_SUCCESS;
    case ACL_DEVICE_INFO_VECTOR_CORE_NUM: *value = hw->vector_cores; return ACL_SUCCESS;
    case ACL_DEVICE_INFO_L2_SIZE: *value = hw->l2_bytes; return ACL_SUCCESS;
    default:
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API,
                         "deviceInfo %d is not one of ACL_DEVICE_INFO_AI_CORE_NUM (0), VECTOR_CORE_NUM (1), "
                         "L2_SIZE (2)",
                         (int)deviceInfo);
    }
}

/* CANN's attributes of the software and SoC. Inf/NaN: convtbc computes IEEE
 * Inf and NaN on every profile (it has no saturation mode, see
 * aclrtSetDeviceSatMode); BF16 as the SoC's platform file says; no JIT
 * compiler. The lists are in enum order, as CANN builds them. */
static const aclCannAttr WITH_BF16[] = {ACL_CANN_ATTR_INF_NAN, ACL_CANN_ATTR_BF16};
static const aclCannAttr WITHOUT_BF16[] = {ACL_CANN_ATTR_INF_NAN};

aclError aclGetCannAttributeList(const aclCannAttr **cannAttrList, size_t *num)
{
    REQUIRE_ARG("aclGetCannAttributeList", cannAttrList, "cannAttrList must not be NULL");
    REQUIRE_ARG("aclGetCannAttributeList", num, "num must not be NULL");
    bool bf16 = hardware()->bf16;
    *cannAttrList = bf16 ? WITH_BF16 : WITHOUT_BF16;
    *num = bf16 ? sizeof WITH_BF16 / sizeof *WITH_BF16 : sizeof WITHOUT_BF16 / sizeof *WITHOUT_BF16;
    return ACL_SUCCESS;
}

aclError aclGetCannAttribute(aclCannAttr cannAttr, int32_t *value)
{
    REQUIRE_ARG("aclGetCannAttribute", value, "value must not be NULL");
    switch ((int)cannAttr) {
    case ACL_CANN_ATTR_INF_NAN: *value = 1; return ACL_SUCCESS;
    case ACL_CANN_ATTR_BF16: *value = hardware()->bf16; return ACL_SUCCESS;
    case ACL_CANN_ATTR_JIT_COMPILE: *value = 0; return ACL_SUCCESS;
    default:
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclGetCannAttribute",
                         "cannAttr %d is not one of ACL_CANN_ATTR_INF_NAN (0), BF16 (1), JIT_COMPILE (2)",
                         (int)cannAttr);
    }
}

aclError aclrtDeviceGetUuid(int32_t deviceId, aclrtUuid *uuid)
{
    REQUIRE_ARG("aclrtDeviceGetUuid", uuid, "uuid must not be NULL");
    CTBC_RETURN_IF_FAILED(ctbc_check_device("aclrtDeviceGetUuid", deviceId));
    /* The emulated device is the same everywhere, so its id is a constant:
     * the 16 bytes of "convtbc device 0". */
    static const char ID[16] = {'c', 'o', 'n', 'v', 't', 'b', 'c', ' ', 'd', 'e', 'v', 'i', 'c', 'e', ' ', '0'};
    memcpy(uuid->bytes, ID, sizeof ID);
    return ACL_SUCCESS;
}

aclError aclrtDeviceGetBareTgid(int32_t *pid)
{
    REQUIRE_ARG("aclrtDeviceGetBareTgid", pid, "pid must not be NULL");
    *pid = (int32_t)getpid(); /* no virtual machine between the program and its device */
    return ACL_SUCCESS;
}

aclError aclrtGetErrorVerbose(int32_t deviceId, aclrtErrorInfo *errorInfo)
{
    REQUIRE_ARG("aclrtGetErrorVerbose", errorInfo, "errorInfo must not be NULL");
    CTBC_RETURN_IF_FAILED(ctbc_check_device("aclrtGetErrorVerbose", deviceId));
    /* Faults inside queued work come back through synchronisation with their
     * message; the device itself never breaks. */
    memset(errorInfo, 0, sizeof *errorInfo);
    errorInfo->errorType = ACL_RT_NO_ERROR;
    return ACL_SUCCESS;
}

aclError aclrtSetTsDevice(aclrtTsId tsId)
{
    /* One scheduler runs everything; CANN ignores the choice on SoCs without
     * a vector-core scheduler, and so does convtbc on all of them. */
    if (tsId != ACL_TS_ID_AICORE && tsId != ACL_TS_ID_AIVECTOR)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtSetTsDevice",
                         "tsId %d is invalid: expected ACL_TS_ID_AICORE (0) or ACL_TS_ID_AIVECTOR (1)", (int)tsId);
    return ACL_SUCCESS;
}

/* ---- other devices: there are none --------------------------------------- */

static aclError require_different(const char *api, int32_t deviceId, int32_t peerDeviceId)
{
    if (deviceId == peerDeviceId)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "deviceId %d cannot be equal to peerDeviceId %d", (int)deviceId, (int)peerDeviceId);
    return ACL_SUCCESS;
}

aclError aclrtDeviceCanAccessPeer(int32_t *canAccessPeer, int32_t deviceId, int32_t peerDeviceId)
{
    static const char API[] = "aclrtDeviceCanAccessPeer";
    REQUIRE_ARG(API, canAccessPeer, "canAccessPeer must not be NULL");
    CTBC_RETURN_IF_FAILED(require_different(API, deviceId, peerDeviceId));
    /* Two different ids: one of them is not device 0. */
    CTBC_RETURN_IF_FAILED(ctbc_check_device(API, peerDeviceId));
    CTBC_RETURN_IF_FAILED(ctbc_check_device(API, deviceId));
    return ACL_SUCCESS; /* not reached with one device */
}

/* Peer access is set from the current device (always device 0 here) to
 * another one, which does not exist. */
static aclError change_peer_access(const char *api, int32_t peerDeviceId)
{
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context(api, &ctx));
    CTBC_RETURN_IF_FAILED(require_different(api, 0, peerDeviceId));
    return ctbc_check_device(api, peerDeviceId);
}

aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags)
{
    if (flags != 0)
        return ctbc_fail(ACL_ERROR_FEATURE_UNSUPPORTED, CTBC_EE_RUNTIME, "aclrtDeviceEnablePeerAccess",
                         "flags is reserved and must be 0, got %u", flags);
    return change_peer_access("aclrtDeviceEnablePeerAccess", peerDeviceId);
}

aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId)
{
    return change_peer_access("aclrtDeviceDisablePeerAccess", peerDeviceId);
}

aclError aclrtDevicePeerAccessStatus(int32_t deviceId, int32_t peerDeviceId, int32_t *status)
{
    static const char API[] = "aclrtDevicePeerAccessStatus";
    REQUIRE_ARG(API, status, "status must not be NULL");
    if (deviceId != 0 || peerDeviceId != 0)
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API,
                         "deviceId %d / peerDeviceId %d: convtbc emulates one device, id 0", (int)deviceId,
                         (int)peerDeviceId);
    *status = 0; /* a device never has peer access enabled to itself */
    return ACL_SUCCESS;
}

aclError aclrtGetDevicesTopo(uint32_t deviceId, uint32_t otherDeviceId, uint64_t *value)
{
    static const char API[] = "aclrtGetDevicesTopo";
    REQUIRE_ARG(API, value, "value must not be NULL");
    if (deviceId != 0 || otherDeviceId != 0)
        return ctbc_fail(ACL_ERROR_RT_INVALID_DEVICEID, CTBC_EE_RUNTIME, API,
                         "deviceId %u / otherDeviceId %u: convtbc emulates one device, id 0", deviceId,
                         otherDeviceId);
    return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API,
                     "deviceId and otherDeviceId are both 0: a topology links two different devices");
}

/* Without ASCEND_RT_VISIBLE_DEVICES and outside containers, CANN's user,
 * logical and physical ids coincide: here all three are 0. */
static aclError same_id(const char *api, const char *out_name, int32_t in, int32_t *out)
{
    if (!out)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "%s must not be NULL", out_name);
    CTBC_RETURN_IF_FAILED(ctbc_check_device(api, in));
    *out = in;
    return ACL_SUCCESS;
}

aclError aclrtGetLogicDevIdByUserDevId(const int32_t userDevid, int32_t *const logicDevId)
{
    return same_id("aclrtGetLogicDevIdByUserDevId", "logicDevId", userDevid, logicDevId);
}

aclError aclrtGetUserDevIdByLogicDevId(const int32_t logicDevId, int32_t *const userDevid)
{
    return same_id("aclrtGetUserDevIdByLogicDevId", "userDevid", logicDevId, userDevid);
}

aclError aclrtGetLogicDevIdByPhyDevId(const int32_t phyDevId, int32_t *const logicDevId)
{
    return same_id("aclrtGetLogicDevIdByPhyDevId", "logicDevId", phyDevId, logicDevId);
}

aclError aclrtGetPhyDevIdByLogicDevId(const int32_t logicDevId, int32_t *const phyDevId)
{
    return same_id("aclrtGetPhyDevIdByLogicDevId", "phyDevId", logicDevId, phyDevId);
}

aclError aclrtGetUserDevIdByPhyDevId(const int32_t phyDevId, int32_t *const userDevId)
{
    return same_id("aclrtGetUserDevIdByPhyDevId", "userDevId", phyDevId, userDevId);
}

aclError aclrtGetPhyDevIdByUserDevId(const int32_t userDevId, int32_t *const phyDevId)
{
    return same_id("aclrtGetPhyDevIdByUserDevId", "phyDevId", userDevId, phyDevId);
}

/* ---- saturation mode ------------------------------------------------------- */

aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode)
{
    static const char API[] = "aclrtSetDeviceSatMode";
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context(API, &ctx));
    if (mode == ACL_RT_OVERFLOW_MODE_INFNAN)
        return ACL_SUCCESS; /* what convtbc always computes */
    if (mode == ACL_RT_OVERFLOW_MODE_SATURATION)
        return ctbc_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, CTBC_EE_RUNTIME, API,
                         "saturation mode is not emulated: convtbc computes with IEEE Inf and NaN "
                         "(ACL_RT_OVERFLOW_MODE_INFNAN) only");
    return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API,
                     "mode %d is invalid: expected ACL_RT_OVERFLOW_MODE_SATURATION (0) or "
                     "ACL_RT_OVERFLOW_MODE_INFNAN (1)",
                     (int)mode);
}

aclError aclrtGetDeviceSatMode(aclrtFloatOverflowMode *mode)
{
    REQUIRE_ARG("aclrtGetDeviceSatMode", mode, "mode must not be NULL");
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context("aclrtGetDeviceSatMode", &ctx));
    *mode = ACL_RT_OVERFLOW_MODE_INFNAN;
    return ACL_SUCCESS;
}

/* ---- device limits (aclrtDeviceSetLimit) ------------------------------------ */

/* CANN's documented rules per limit: which SoCs have it, the default, the
 * granularity values are rounded up to, the bounds, and for the SIMT stack
 * the factor aclrtDeviceGetLimit reports (32 threads a warp). Below the
 * minimum, a stack takes the minimum and a FIFO is refused. */
typedef struct {
    const char *name;
    bool ascend950_only;
    size_t fallback, granule, minimum, maximum, reported_factor;
    bool clamp_low;
} limit_rule;

static const limit_rule LIMITS[] = {
    [ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE] = {"ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE", true, 1152, 128, 128, UINT32_MAX, 32,
                                          false},
    [ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE] = {"ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE", true, 1024, 128,
                                                   128, UINT32_MAX, 1, false},
    [ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE] = {"ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE", false, 32 << 10, 16 << 10, 32 << 10,
                                          192 << 10, 1, true},
    [ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE] = {"ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE", false,
                                                         32 << 10, 8, 1 << 10, 64 << 20, 1, false},
    [ACL_RT_DEV_LIMIT_SIMT_PRINTF_FIFO_SIZE] = {"ACL_RT_DEV_LIMIT_SIMT_PRINTF_FIFO_SIZE", true, 2 << 20, 8, 1 << 20,
                                                64 << 20, 1, false},
};
enum { LIMIT_COUNT = sizeof LIMITS / sizeof *LIMITS };

static size_t limit_values[LIMIT_COUNT]; /* 0: never set, the default holds */

static aclError find_limit(const char *api, aclrtDeviceLimit limit, const limit_rule **rule)
{
    if ((int)limit < 0 || (int)limit >= LIMIT_COUNT)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "limit %d is invalid: expected [0, 4]",
                         (int)limit);
    *rule = &LIMITS[limit];
    if (!newer_family() || ((*rule)->ascend950_only && ctbc_soc()->family != CTBC_SOC_ASCEND950))
        return unsupported(api, (*rule)->name);
    return ACL_SUCCESS;
}

static size_t maximum_of(const limit_rule *rule, aclrtDeviceLimit limit)
{
    /* Ascend950 caps the SIMD stack lower than the A2/A3 parts. */
    if (limit == ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE && ctbc_soc()->family == CTBC_SOC_ASCEND950)
        return 128 << 10;
    return rule->maximum;
}

aclError aclrtDeviceSetLimit(aclrtDeviceLimit limit, size_t value)
{
    static const char API[] = "aclrtDeviceSetLimit";
    const limit_rule *rule;
    CTBC_RETURN_IF_FAILED(find_limit(API, limit, &rule));
    if (value > UINT32_MAX)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, API, "value %zu is invalid: expected [0, %u]",
                         value, (unsigned)UINT32_MAX);
    size_t rounded = (value + rule->granule - 1) / rule->granule * rule->granule;
    if (rounded < rule->minimum) {
        if (!rule->clamp_low)
            return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API,
                             "value %zu for %s is below its minimum, %zu bytes", value, rule->name, rule->minimum);
        rounded = rule->minimum;
    }
    if (rounded > maximum_of(rule, limit))
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API,
                         "value %zu for %s is above its maximum on %s, %zu bytes", value, rule->name,
                         ctbc_soc()->name, maximum_of(rule, limit));
    pthread_mutex_lock(&settings_lock);
    limit_values[limit] = rounded;
    pthread_mutex_unlock(&settings_lock);
    return ACL_SUCCESS;
}

aclError aclrtDeviceGetLimit(aclrtDeviceLimit limit, size_t *value)
{
    static const char API[] = "aclrtDeviceGetLimit";
    REQUIRE_ARG(API, value, "value must not be NULL");
    const limit_rule *rule;
    CTBC_RETURN_IF_FAILED(find_limit(API, limit, &rule));
    pthread_mutex_lock(&settings_lock);
    size_t stored = limit_values[limit];
    pthread_mutex_unlock(&settings_lock);
    *value = (stored ? stored : rule->fallback) * rule->reported_factor;
    return ACL_SUCCESS;
}

/* ---- resource limits (cores a process may use) ------------------------------- */

static uint32_t res_limits[2]; /* 0: never set, the hardware's count holds */

static aclError res_hardware(const char *api, aclrtDevResLimitType type, uint32_t *cores)
{
    if (type != ACL_RT_DEV_RES_CUBE_CORE && type != ACL_RT_DEV_RES_VECTOR_CORE)
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, api,
                         "type %d is invalid: expected ACL_RT_DEV_RES_CUBE_CORE (0) or "
                         "ACL_RT_DEV_RES_VECTOR_CORE (1)",
                         (int)type);
    const ctbc_soc_hardware *hw = hardware();
    *cores = (uint32_t)(type == ACL_RT_DEV_RES_CUBE_CORE ? hw->cube_cores : hw->vector_cores);
    return ACL_SUCCESS;
}

/* The process limit if one was set (never above what the SoC has, should
 * the profile change), else the SoC's count. */
static uint32_t res_current(aclrtDevResLimitType type, uint32_t cores)
{
    pthread_mutex_lock(&settings_lock);
    uint32_t set = res_limits[type];
    pthread_mutex_unlock(&settings_lock);
    return set && set < cores ? set : cores;
}

aclError aclrtGetDeviceResLimit(int32_t deviceId, aclrtDevResLimitType type, uint32_t *value)
{
    static const char API[] = "aclrtGetDeviceResLimit";
    REQUIRE_ARG(API, value, "value must not be NULL");
    CTBC_RETURN_IF_FAILED(ctbc_check_device(API, deviceId));
    uint32_t cores = 0;
    CTBC_RETURN_IF_FAILED(res_hardware(API, type, &cores));
    *value = res_current(type, cores);
    return ACL_SUCCESS;
}

aclError aclrtSetDeviceResLimit(int32_t deviceId, aclrtDevResLimitType type, uint32_t value)
{
    static const char API[] = "aclrtSetDeviceResLimit";
    CTBC_RETURN_IF_FAILED(ctbc_check_device(API, deviceId));
    uint32_t cores = 0;
    CTBC_RETURN_IF_FAILED(res_hardware(API, type, &cores));
    if (value == 0 || value > cores)
        return ctbc_fail(ACL_ERROR_RT_PARAM_INVALID, CTBC_EE_RUNTIME, API,
                         "value %u is invalid: %s has %u such cores, expected [1, %u]", value, ctbc_soc()->name,
                         cores, cores);
    pthread_mutex_lock(&settings_lock);
    res_limits[type] = value;
    pthread_mutex_unlock(&settings_lock);
    return ACL_SUCCESS;
}

aclError aclrtResetDeviceResLimit(int32_t deviceId)
{
    CTBC_RETURN_IF_FAILED(ctbc_check_device("aclrtResetDeviceResLimit", deviceId));
    pthread_mutex_lock(&settings_lock);
    memset(res_limits, 0, sizeof res_limits);
    pthread_mutex_unlock(&settings_lock);
    return ACL_SUCCESS;
}

aclError aclrtGetResInCurrentThread(aclrtDevResLimitType type, uint32_t *value)
{
    static const char API[] = "aclrtGetResInCurrentThread";
    REQUIRE_ARG(API, value, "value must not be NULL");
    uint32_t cores = 0;
    CTBC_RETURN_IF_FAILED(res_hardware(API, type, &cores));
    /* Stream-level limits (aclrtSetStreamResLimit with
     * aclrtUseStreamResInCurrentThread) would come first; without them the
     * thread may use what the process may. */
    *value = res_current(type, cores);
    return ACL_SUCCESS;
}

/* ---- operator timeouts -------------------------------------------------------- */

/* The hardware counts an operator's time in units of `interval` (2^32 ns
 * at 1 GHz on Atlas A2/A3/950, whose model convtbc applies to every
 * profile) and accepts 1 to 254 of them: a timeout is rounded up to a
 * whole number of units, capped at 254, and 0 asks for the cap. The
 * default is that cap, about 1091 s. convtbc stores the setting; its
 * operators never run into it. */
enum { TIMEOUT_UNITS_MAX = 254 };
static const uint64_t TIMEOUT_INTERVAL_US = 4294967;
static const uint64_t MAX_OP_TIMEOUT_MS = 1000000; /* aclrtSetOpExecuteTimeOutWithMs caps here */

static bool timeout_set;
static uint64_t timeout_us;  /* in force, once set */
static uint32_t wait_timeout_s;

static uint64_t effective_timeout_us(uint64_t requested_us)
{
    uint64_t units = requested_us == 0 ? TIMEOUT_UNITS_MAX
                                       : requested_us / TIMEOUT_INTERVAL_US + (requested_us % TIMEOUT_INTERVAL_US != 0);
    if (units > TIMEOUT_UNITS_MAX)
        units = TIMEOUT_UNITS_MAX;
    return units * TIMEOUT_INTERVAL_US;
}

static uint64_t set_timeout(uint64_t requested_us)
{
    uint64_t effective = effective_timeout_us(requested_us);
    pthread_mutex_lock(&settings_lock);
    timeout_set = true;
    timeout_us = effective;
    pthread_mutex_unlock(&settings_lock);
    return effective;
}

aclError aclrtSetOpExecuteTimeOut(uint32_t timeout)
{
    set_timeout((uint64_t)timeout * 1000000);
    return ACL_SUCCESS;
}

aclError aclrtSetOpExecuteTimeOutWithMs(uint32_t timeout)
{
    uint64_t ms = timeout < MAX_OP_TIMEOUT_MS ? timeout : MAX_OP_TIMEOUT_MS;
    set_timeout(ms * 1000);
    return ACL_SUCCESS;
}

aclError aclrtSetOpExecuteTimeOutV2(uint64_t timeout, uint64_t *actualTimeout)
{
    REQUIRE_ARG("aclrtSetOpExecuteTimeOutV2", actualTimeout, "actualTimeout must not be NULL");
    *actualTimeout = set_timeout(timeout);
    return ACL_SUCCESS;
}

aclError aclrtGetOpTimeOutInterval(uint64_t *interval)
{
    REQUIRE_ARG("aclrtGetOpTimeOutInterval", interval, "interval must not be NULL");
    *interval = TIMEOUT_INTERVAL_US;
    return ACL_SUCCESS;
}

aclError aclrtGetOpExecuteTimeout(uint32_t *const timeoutMs)
{
    REQUIRE_ARG("aclrtGetOpExecuteTimeout", timeoutMs, "timeoutMs must not be NULL");
    pthread_mutex_lock(&settings_lock);
    uint64_t us = timeout_set ? timeout_us : (uint64_t)TIMEOUT_UNITS_MAX * TIMEOUT_INTERVAL_US;
    pthread_mutex_unlock(&settings_lock);
    *timeoutMs = (uint32_t)((us + 999) / 1000); /* whole milliseconds, rounded up */
    return ACL_SUCCESS;
}

aclError aclrtSetOpWaitTimeout(uint32_t timeout)
{
    /* How long an event wait may block, in seconds (0: for ever). Stored
     * only: CANN has no call to read it back. */
    pthread_mutex_lock(&settings_lock);
    wait_timeout_s = timeout;
    pthread_mutex_unlock(&settings_lock);
    return ACL_SUCCESS;
}
