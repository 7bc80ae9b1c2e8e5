#include "api/soc_profile.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl_rt.h"

static const ctbc_soc_profile PROFILES[] = {
    {"Ascend910B1", CTBC_SOC_ATLAS_A2},   {"Ascend910B2", CTBC_SOC_ATLAS_A2},
    {"Ascend910B3", CTBC_SOC_ATLAS_A2},   {"Ascend910B4", CTBC_SOC_ATLAS_A2},
    {"Ascend910_9391", CTBC_SOC_ATLAS_A3}, {"Ascend910_9392", CTBC_SOC_ATLAS_A3},
    {"Ascend910A", CTBC_SOC_TRAINING},    {"Ascend910ProA", CTBC_SOC_TRAINING},
    {"Ascend950", CTBC_SOC_ASCEND950},
};

static const ctbc_soc_profile *chosen = &PROFILES[0];
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    const char *name = getenv("CONVTBC_SOC_VERSION");
    if (!name || !*name)
        return;
    for (size_t i = 0; i < sizeof PROFILES / sizeof *PROFILES; i++)
        if (strcmp(name, PROFILES[i].name) == 0)
            chosen = &PROFILES[i];
}

const ctbc_soc_profile *ctbc_soc(void)
{
    pthread_once(&choose_once, choose);
    return chosen;
}

const char *aclrtGetSocName(void) { return ctbc_soc()->name; }
