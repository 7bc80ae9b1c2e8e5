/* CPU feature detection and the kernel table (see cpu_features.h). */
#include "compute/cpu_features.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* XCR0 via inline asm so this file needs no -mxsave. */
static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static ctbc_isa detect_cpu(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return CTBC_ISA_PORTABLE;
    const int has_fma = (c >> 12) & 1, has_osxsave = (c >> 27) & 1, has_avx = (c >> 28) & 1;
    const int has_f16c = (c >> 29) & 1;
    if (!has_osxsave || !has_avx)
        return CTBC_ISA_PORTABLE;
    const uint64_t xcr0 = read_xcr0();
    if ((xcr0 & 0x6) != 0x6) /* OS saves XMM and YMM state */
        return CTBC_ISA_PORTABLE;
    if (__get_cpuid_max(0, 0) < 7)
        return CTBC_ISA_PORTABLE;
    __cpuid_count(7, 0, a, b, c, d);
    const int has_avx2 = (b >> 5) & 1, has_avx512f = (b >> 16) & 1;
    const int has_avx512bw = (b >> 30) & 1, has_avx512vl = (b >> 31) & 1;
    /* The AVX-512 kernels use BW and VL for their 16-bit edges (every
     * AVX-512 server core has both) and FMA; the OS must save the opmask
     * registers and both halves of the ZMM state (XCR0 bits 5, 6, 7). */
    if (has_avx512f && has_avx512bw && has_avx512vl && has_fma && has_f16c && (xcr0 & 0xe6) == 0xe6) {
        unsigned a1 = 0, b1, c1, d1;
        if (a >= 1) /* leaf 7's highest sub-leaf */
            __cpuid_count(7, 1, a1, b1, c1, d1);
        return (a1 >> 5) & 1 ? CTBC_ISA_AVX512_BF16 : CTBC_ISA_AVX512;
    }
    if (has_avx2 && has_fma && has_f16c)
        return CTBC_ISA_AVX2;
    return CTBC_ISA_PORTABLE;
}
#else
static ctbc_isa detect_cpu(void) { return CTBC_ISA_PORTABLE; }
#endif

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

ctbc_isa ctbc_isa_select(void)
{
    const ctbc_isa cpu = cached_cpu(), cap = env_cap();
    ctbc_isa isa = cpu < cap ? cpu : cap;
    /* step down past ISAs this build could not compile */
    while (isa > CTBC_ISA_PORTABLE && !kernel_table[isa]->ukr)
        isa = (ctbc_isa)(isa - 1);
    return isa;
}
