#include "api/soc_profile.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl_rt.h"
#include "api/errors.h"
#include "convtbc/convtbc_ext.h"

#define GIB(n) ((uint64_t)(n) << 30)

/* Memory sizes are the published HBM capacity of one device: 64 GB for
 * Ascend910B1-B3 and 32 GB for B4 (Atlas A2), 64 GB per device (die) for the
 * Atlas A3 Ascend910_93xx, 32 GB HBM2 for the first training series
 * (Ascend910A/ProA), 128 GB for Ascend950 (the 950PR's HBM). aclrtGetMemInfo
 * reports them as the total. */
static const ctbc_soc_profile PROFILES[] = {
    {"Ascend910B1", CTBC_SOC_ATLAS_A2, GIB(64)},    {"Ascend910B2", CTBC_SOC_ATLAS_A2, GIB(64)},
    {"Ascend910B3", CTBC_SOC_ATLAS_A2, GIB(64)},    {"Ascend910B4", CTBC_SOC_ATLAS_A2, GIB(32)},
    {"Ascend910_9391", CTBC_SOC_ATLAS_A3, GIB(64)}, {"Ascend910_9392", CTBC_SOC_ATLAS_A3, GIB(64)},
    {"Ascend910A", CTBC_SOC_TRAINING, GIB(32)},     {"Ascend910ProA", CTBC_SOC_TRAINING, GIB(32)},
    {"Ascend950", CTBC_SOC_ASCEND950, GIB(128)},
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

static void choose_from_environment(void)
{
    const char *name = getenv("CONVTBC_SOC_VERSION");
    const ctbc_soc_profile *profile = find(name);
    if (profile)
        chosen = profile;
    else if (name && *name)
        ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "CONVTBC_SOC_VERSION",
                  "unknown SoC '%s'; emulating %s", name, chosen->name);
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
                         "unknown SoC '%s': expected Ascend910B1-4, Ascend910_9391/9392, Ascend910A, "
                         "Ascend910ProA or Ascend950",
                         socName ? socName : "(null)");
    __atomic_store_n(&chosen, profile, __ATOMIC_RELEASE);
    return ACL_SUCCESS;
}

/* Figures from CANN's platform_config ini files (hicann/runtime,
 * src/platform/platform_config). "Ascend950" stands for the 950PR bin
 * Ascend950PR_9599. The Ascend910A/ProA files leave memory_size empty: the
 * 32 GiB there is the HBM of that generation. */
static const struct {
    const char *name;
    ctbc_soc_hardware hw;
} HARDWARE[] = {
    {"Ascend910B1", {24, 24, 48, 6, 64LL << 30, 192LL << 20, 196608, 2201, true}},
    {"Ascend910B2", {24, 24, 48, 6, 64LL << 30, 192LL << 20, 196608, 2201, true}},
    {"Ascend910B3", {20, 20, 40, 6, 64LL << 30, 192LL << 20, 196608, 2201, true}},
    {"Ascend910B4", {20, 20, 40, 6, 32LL << 30, 96LL << 20, 196608, 2201, true}},
    {"Ascend910_9391", {24, 24, 48, 6, 64LL << 30, 192LL << 20, 196608, 2201, true}},
    {"Ascend910_9392", {24, 24, 48, 6, 64LL << 30, 192LL << 20, 196608, 2201, true}},
    {"Ascend910A", {32, 32, 0, 4, 32LL << 30, 32LL << 20, 262144, 1001, false}},
    {"Ascend910ProA", {32, 32, 0, 4, 32LL << 30, 32LL << 20, 262144, 1001, false}},
    {"Ascend950", {36, 36, 72, 6, 128LL << 30, 128LL << 20, 253952, 3510, true}},
};

const ctbc_soc_hardware *ctbc_soc_hardware_of(const ctbc_soc_profile *profile)
{
    for (size_t i = 0; i < sizeof HARDWARE / sizeof *HARDWARE; i++)
        if (strcmp(profile->name, HARDWARE[i].name) == 0)
            return &HARDWARE[i].hw;
    return &HARDWARE[0].hw; /* every profile has a row; a new one without falls back to A2 */
}
