#include "api/soc_profile.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl_rt.h"
#include "api/errors.h"
#include "convtbc/convtbc_ext.h"

/* The hardware figures are those of CANN's platform_config ini files
 * (hicann/runtime, src/platform/platform_config): AI cores, cube cores,
 * vector cores, AI CPUs, device memory, L2, unified buffer, NPU arch,
 * bfloat16. "Ascend950" stands for the 950PR bin Ascend950PR_9599 (128 GiB
 * HBM). The Ascend910A/ProA files leave memory_size empty: 32 GiB is the HBM
 * of that generation. aclrtGetMemInfo reports the memory as the total. */
static const ctbc_soc_profile PROFILES[] = {
    {"Ascend910B1", CTBC_SOC_ATLAS_A2, {24, 24, 48, 6, 64LL << 30, 192LL << 20, 196608, 2201, true}},
    {"Ascend910B2", CTBC_SOC_ATLAS_A2, {24, 24, 48, 6, 64LL << 30, 192LL << 20, 196608, 2201, true}},
    {"Ascend910B3", CTBC_SOC_ATLAS_A2, {20, 20, 40, 6, 64LL << 30, 192LL << 20, 196608, 2201, true}},
    {"Ascend910B4", CTBC_SOC_ATLAS_A2, {20, 20, 40, 6, 32LL << 30, 96LL << 20, 196608, 2201, true}},
    {"Ascend910_9391", CTBC_SOC_ATLAS_A3, {24, 24, 48, 6, 64LL << 30, 192LL << 20, 196608, 2201, true}},
    {"Ascend910_9392", CTBC_SOC_ATLAS_A3, {24, 24, 48, 6, 64LL << 30, 192LL << 20, 196608, 2201, true}},
    {"Ascend910A", CTBC_SOC_TRAINING, {32, 32, 0, 4, 32LL << 30, 32LL << 20, 262144, 1001, false}},
    {"Ascend910ProA", CTBC_SOC_TRAINING, {32, 32, 0, 4, 32LL << 30, 32LL << 20, 262144, 1001, false}},
    {"Ascend950", CTBC_SOC_ASCEND950, {36, 36, 72, 6, 128LL << 30, 128LL << 20, 253952, 3510, true}},
};

static const ctbc_soc_profile *chosen = &PROFILES[0];
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static const ctbc_soc_profile *find(const char *name)
{
    for (size_t i = 0; name && i < sizeof PROFILES / sizeof *PROFILES; i++)
        if (strcmp(name, PROFILES[i].name) == 0)
            return &PROFILES[i];
    return NULL;
}

#define SOC_NAMES "Ascend910B1-4, Ascend910_9391/9392, Ascend910A, Ascend910ProA or Ascend950"

/* The CONVTBC_SOC_VERSION read at load when it names no profile (the
 * default is emulated meanwhile; aclInit refuses it, see below). */
static const char *unknown_environment_name;

static void choose_from_environment(void)
{
    const char *name = getenv("CONVTBC_SOC_VERSION");
    const ctbc_soc_profile *profile = find(name);
    if (profile)
        chosen = profile;
    else if (name && *name)
        unknown_environment_name = name;
}

aclError ctbc_soc_check_environment(const char *api)
{
    pthread_once(&choose_once, choose_from_environment);
    if (!unknown_environment_name)
        return ACL_SUCCESS;
    /* A typo must not silently test against the default SoC's rules. */
    return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                     "CONVTBC_SOC_VERSION is '%s', which names no SoC convtbc emulates: expected " SOC_NAMES
                     " (or unset, for Ascend910B1)",
                     unknown_environment_name);
}

const ctbc_soc_profile *ctbc_soc(void)
{
    pthread_once(&choose_once, choose_from_environment);
    return __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
}

const char *aclrtGetSocName(void) { return ctbc_soc()->name; }

aclError convtbcSetSocVersion(const char *socName)
{
    pthread_once(&choose_once, choose_from_environment);
    const ctbc_soc_profile *profile = find(socName);
    if (!profile)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "convtbcSetSocVersion",
                         "unknown SoC '%s': expected " SOC_NAMES,
                         socName ? socName : "(null)");
    __atomic_store_n(&chosen, profile, __ATOMIC_RELEASE);
    return ACL_SUCCESS;
}
