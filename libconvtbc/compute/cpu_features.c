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
    const uint64_t amx = avx512 | CONVTBC_CPU_AVX512_BF16 | CONVTBC_CPU_AMX_TILE | CONVTBC_CPU_AMX_BF16;
    if ((features & amx) == amx && ctbc_ukr_amx_tiles && ctbc_amx_request_permission())
        return CTBC_ISA_AMX_BF16;
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
    if (s && strcmp(s, "avx512_bf16") == 0)
        return CTBC_ISA_AVX512_BF16;
    if (s && strcmp(s, "amx_emulated") == 0)
        return CTBC_ISA_AMX_EMULATED;
    return CTBC_ISA_AMX_BF16;
}

/* The entries of the AMX levels are made at run time, each from the entry
 * below it plus the tile kernel: amx_bf16 from avx512_bf16, amx_emulated
 * from the best the CPU has (so that its other kernels are this CPU's). */
static ctbc_kernel kernel_amx, kernel_amx_emulated;
static const ctbc_kernel *kernel_table[CTBC_ISA_COUNT] = {
    [CTBC_ISA_PORTABLE] = &ctbc_kernel_portable,
    [CTBC_ISA_AVX2] = &ctbc_kernel_avx2,
    [CTBC_ISA_AVX512] = &ctbc_kernel_avx512,
    [CTBC_ISA_AVX512_BF16] = &ctbc_kernel_avx512_bf16,
    [CTBC_ISA_AMX_BF16] = &kernel_amx,
    [CTBC_ISA_AMX_EMULATED] = &kernel_amx_emulated,
};
static ctbc_kernel narrow_table[CTBC_ISA_COUNT], amx_table[CTBC_ISA_COUNT];
static bool narrow_present[CTBC_ISA_COUNT], amx_present[CTBC_ISA_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static const ctbc_kernel *entry_at_or_below(ctbc_isa isa)
{
    for (int i = (int)isa; i > 0; i--)
        if (kernel_table[i]->ukr)
            return kernel_table[i];
    return kernel_table[CTBC_ISA_PORTABLE];
}

static void make_tables(void)
{
    if (ctbc_kernel_avx512_bf16.ukr && ctbc_ukr_amx_tiles) {
        kernel_amx = ctbc_kernel_avx512_bf16;
        kernel_amx.name = "amx_bf16";
        kernel_amx.ukr_amx = ctbc_ukr_amx_tiles;
        kernel_amx.amx_begin = ctbc_amx_begin;
    }
    kernel_amx_emulated = *entry_at_or_below(cached_cpu());
    kernel_amx_emulated.name = "amx_emulated";
    kernel_amx_emulated.ukr_amx = ctbc_ukr_amx_emulated;
    kernel_amx_emulated.amx_begin = ctbc_amx_emulated_begin;
    for (int isa = CTBC_ISA_PORTABLE; isa < CTBC_ISA_COUNT; isa++) {
        const ctbc_kernel *entry = entry_at_or_below((ctbc_isa)isa);
        narrow_present[isa] = ctbc_kernel_narrowed(entry, &narrow_table[isa]);
        amx_present[isa] = ctbc_kernel_amx_tiled(entry, &amx_table[isa]);
    }
}

const ctbc_kernel *ctbc_kernel_for_isa(ctbc_isa isa)
{
    pthread_once(&tables_once, make_tables);
    return entry_at_or_below(isa);
}

const ctbc_kernel *ctbc_narrow_kernel_for_isa(ctbc_isa isa)
{
    pthread_once(&tables_once, make_tables);
    return narrow_present[isa] ? &narrow_table[isa] : NULL;
}

const ctbc_kernel *ctbc_amx_kernel_for_isa(ctbc_isa isa)
{
    pthread_once(&tables_once, make_tables);
    return amx_present[isa] ? &amx_table[isa] : NULL;
}

ctbc_isa ctbc_isa_select(void)
{
    const ctbc_isa cpu = cached_cpu(), cap = env_cap();
    if (cap == CTBC_ISA_AMX_EMULATED)
        return cap;
    ctbc_isa isa = cpu < cap ? cpu : cap;
    /* step down past ISAs this build could not compile */
    pthread_once(&tables_once, make_tables);
    while (isa > CTBC_ISA_PORTABLE && !kernel_table[isa]->ukr)
        isa = (ctbc_isa)(isa - 1);
    return isa;
}
