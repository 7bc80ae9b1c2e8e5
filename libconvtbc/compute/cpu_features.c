/* CPU feature detection and the kernel table (see cpu_features.h). */
#include "compute/cpu_features.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "compute/cpu_probe.h"
#include "convtbc/convtbc_ext.h"

/* The best kernel set the CPU's usable features (cpu_probe.c counts a
 * feature only where the OS saves its registers) allow. The AVX-512
 * kernels use BW and VL for their 16-bit edges (every AVX-512 server core
 * has both) and FMA and F16C besides. */
static ctbc_isa detect_cpu(void)
{
    const uint64_t features = ctbc_cpu_probe()->features;
    const uint64_t avx2 = CONVTBC_CPU_AVX2 | CONVTBC_CPU_FMA | CONVTBC_CPU_F16C;
    const uint64_t avx512 = avx2 | CONVTBC_CPU_AVX512F | CONVTBC_CPU_AVX512BW | CONVTBC_CPU_AVX512VL;
    if ((features & avx512) == avx512)
        return features & CONVTBC_CPU_AVX512_BF16 ? CTBC_ISA_AVX512_BF16 : CTBC_ISA_AVX512;
    if ((features & avx2) == avx2)
        return CTBC_ISA_AVX2;
    return CTBC_ISA_PORTABLE;
}

static ctbc_isa cached_cpu(void)
{
    /* Benign if two threads probe at once: both store the same value. */
    static atomic_int cached = -1;
    int v = atomic_load(&cached);
    if (v < 0) {
        v = (int)detect_cpu();
        atomic_store(&cached, v);
    }
    return (ctbc_isa)v;
}

static ctbc_isa env_cap(void)
{
    const char *s = getenv("CONVTBC_ISA");
    if (s && strcmp(s, "portable") == 0)
        return CTBC_ISA_PORTABLE;
    if (s && strcmp(s, "avx2") == 0)
        return CTBC_ISA_AVX2;
    if (s && strcmp(s, "avx512") == 0)
        return CTBC_ISA_AVX512;
    return CTBC_ISA_AVX512_BF16;
}

static const ctbc_kernel *const kernel_table[] = {
    [CTBC_ISA_PORTABLE] = &ctbc_kernel_portable,
    [CTBC_ISA_AVX2] = &ctbc_kernel_avx2,
    [CTBC_ISA_AVX512] = &ctbc_kernel_avx512,
    [CTBC_ISA_AVX512_BF16] = &ctbc_kernel_avx512_bf16,
};

const ctbc_kernel *ctbc_kernel_for_isa(ctbc_isa isa)
{
    for (int i = (int)isa; i > 0; i--)
        if (kernel_table[i]->ukr)
            return kernel_table[i];
    return kernel_table[CTBC_ISA_PORTABLE];
}

static ctbc_kernel narrow_table[CTBC_ISA_AVX512_BF16 + 1];
static bool narrow_present[CTBC_ISA_AVX512_BF16 + 1];
static pthread_once_t narrow_once = PTHREAD_ONCE_INIT;

static void make_narrow_table(void)
{
    for (int isa = CTBC_ISA_PORTABLE; isa <= CTBC_ISA_AVX512_BF16; isa++)
        narrow_present[isa] = ctbc_kernel_narrowed(ctbc_kernel_for_isa((ctbc_isa)isa), &narrow_table[isa]);
}

const ctbc_kernel *ctbc_narrow_kernel_for_isa(ctbc_isa isa)
{
    pthread_once(&narrow_once, make_narrow_table);
    return narrow_present[isa] ? &narrow_table[isa] : NULL;
}

ctbc_isa ctbc_isa_select(void)
{
    const ctbc_isa cpu = cached_cpu(), cap = env_cap();
    ctbc_isa isa = cpu < cap ? cpu : cap;
    /* step down past ISAs this build could not compile */
    while (isa > CTBC_ISA_PORTABLE && !kernel_table[isa]->ukr)
        isa = (ctbc_isa)(isa - 1);
    return isa;
}
