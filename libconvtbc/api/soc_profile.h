/*
 * The SoC convtbc emulates. CANN's checks for aclnnConvTbcBackward differ
 * per SoC family; the profile is chosen once, from the environment variable
 * CONVTBC_SOC_VERSION (a name below; default Ascend910B1), and reported by
 * aclrtGetSocName.
 */
#ifndef CONVTBC_API_SOC_PROFILE_H
#define CONVTBC_API_SOC_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "acl/acl_base.h"

typedef enum {
    CTBC_SOC_ATLAS_A2,       /* Ascend910B*: FLOAT, FLOAT16, BFLOAT16 */
    CTBC_SOC_ATLAS_A3,       /* Ascend910_93*: as A2 */
    CTBC_SOC_TRAINING,       /* Ascend910A/B (first series): no BFLOAT16 */
    CTBC_SOC_ASCEND950       /* output dtypes must equal their inputs' */
} ctbc_soc_family;

/* What the device queries and aclrtGetMemInfo report for a SoC: the
 * [SoCInfo] figures of CANN's platform_config/<SoC>.ini. */
typedef struct {
    int64_t ai_cores, cube_cores, vector_cores, ai_cpus;
    int64_t memory_bytes; /* device memory (HBM) per device */
    int64_t l2_bytes, ub_bytes;
    int64_t npu_arch;
    bool bf16; /* support_bf16 */
} ctbc_soc_hardware;

typedef struct {
    const char *name;
    ctbc_soc_family family;
    ctbc_soc_hardware hw;
} ctbc_soc_profile;

const ctbc_soc_profile *ctbc_soc(void);

/* ACL_ERROR_INVALID_PARAM, with a message for `api`, when
 * CONVTBC_SOC_VERSION names no profile (aclInit refuses to start then). */
aclError ctbc_soc_check_environment(const char *api);



#endif /* CONVTBC_API_SOC_PROFILE_H */
