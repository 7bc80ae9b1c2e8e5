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
