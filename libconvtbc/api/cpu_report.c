/* convtbcGetCpuInfo: the compute layer's view of the CPU, for `convtbc info`. */
#include <stdio.h>
#include <string.h>

#include "api/errors.h"
#include "compute/cpu_features.h"
#include "compute/cpu_probe.h"
#include "convtbc/convtbc_ext.h"

static const char *const isa_names[] = {
    [CTBC_ISA_PORTABLE] = "portable",
    [CTBC_ISA_AVX2] = "avx2",
    [CTBC_ISA_AVX512] = "avx512",
    [CTBC_ISA_AVX512_BF16] = "avx512_bf16",
    [CTBC_ISA_AMX_BF16] = "amx_bf16",
    [CTBC_ISA_AMX_EMULATED] = "amx_emulated",
};

aclError convtbcGetCpuInfo(convtbcCpuInfo *info)
{
    if (!info)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "convtbcGetCpuInfo",
                         "Expected a convtbcCpuInfo to fill but got null for argument info.");
    const ctbc_cpu_probe_result *cpu = ctbc_cpu_probe();
    const ctbc_isa isa = ctbc_isa_select();
    const ctbc_kernel *kernel = ctbc_kernel_for_isa(isa);

    memset(info, 0, sizeof(*info));
    snprintf(info->vendor, sizeof(info->vendor), "%s", cpu->vendor);
    snprintf(info->model, sizeof(info->model), "%s", cpu->model);
    info->features = cpu->features;
    info->l1dBytes = cpu->l1d_bytes;
    info->l2Bytes = cpu->l2_bytes;
    info->l3Bytes = cpu->l3_bytes;
    /* An ISA added to the enum but not named here reports its kernel's name. */
    const int named = (unsigned)isa < sizeof(isa_names) / sizeof(isa_names[0]) && isa_names[isa];
    snprintf(info->isa, sizeof(info->isa), "%s", named ? isa_names[isa] : kernel->name);
    snprintf(info->kernel, sizeof(info->kernel), "%s", kernel->name);
    info->mr = kernel->mr;
    info->nr = kernel->nr;
    info->threads = ctbc_cpu_threads();
    return ACL_SUCCESS;
}
