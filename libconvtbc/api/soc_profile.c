#include "api/soc_profile.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl_rt.h"
#include "api/errors.h"
#include "convtbc/convtbc_ext.h"

static const ctbc_soc_profile PROFILES[] = {
    {"Ascend910B1", CTBC_SOC_ATLAS_A2},    {"Ascend910B2", CTBC_SOC_ATLAS_A2},
    {"Ascend910B3", CTBC_SOC_ATLAS_A2},    {"Ascend910B4", CTBC_SOC_ATLAS_A2},
    {"Ascend910_9391", CTBC_SOC_ATLAS_A3}, {"Ascend910_9392", CTBC_SOC_ATLAS_A3},
    {"Ascend910A", CTBC_SOC_TRAINING},     {"Ascend910ProA", CTBC_SOC_TRAINING},
    {"Ascend950", CTBC_SOC_ASCEND950},
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
