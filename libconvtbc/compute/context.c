/*
 * Kernel contexts (see driver.h): each ISA's micro-kernel with its cache
 * blocking, derived once per process from the data cache sizes the CPU
 * reports (Linux sysfs), as BLIS sizes MC/NC/KC from the caches:
 *
 *   kc: a kc x nr micro-panel of B fills half of L1d;
 *   mc: an mc x kc block of A fills 9/32 of L2 (the rest holds the
 *       streaming B panel and C);
 *   nc: a kc x nc block of B fills half of L2;
 *   budget (per-thread scratch unit): L2 / 2 floats.
 *
 * With 32 KiB L1d and 512 KiB L2 (the AMD EPYC the constants were measured
 * on) this gives the AVX2 kernel's kc 256, mc 24 and nc 16 micro-tiles and
 * a 256 Ki-float budget, the values it had as constants. A CPU that reports
 * nothing gets those caches.
 */
#include <pthread.h>
#include <stdio.h>

#include "compute/driver.h"

#define DEFAULT_L1D (32 * 1024)
#define DEFAULT_L2 (512 * 1024)

static ctbc_context contexts[3];
static pthread_once_t contexts_once = PTHREAD_ONCE_INIT;

/* Size in bytes of cpu0's data or unified cache of `level`, or 0. */
static int64_t cache_bytes(int level)
{
    for (int index = 0; index < 8; index++) {
        char path[96], type[32] = "";
        int lvl = 0;
        long long size = 0;
        char unit = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
        FILE *f = fopen(path, "r");
        if (!f)
            return 0;
        const int got_level = fscanf(f, "%d", &lvl) == 1;
        fclose(f);
        if (!got_level || lvl != level)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", index);
        if ((f = fopen(path, "r"))) {
            if (fscanf(f, "%31s", type) != 1)
                type[0] = 0;
            fclose(f);
        }
        if (type[0] == 'I') /* Instruction */
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
        if (!(f = fopen(path, "r")))
            return 0;
        const int n = fscanf(f, "%lld%c", &size, &unit);
        fclose(f);
        if (n < 1 || size <= 0)
            return 0;
        return n == 2 && unit == 'K' ? size * 1024 : n == 2 && unit == 'M' ? size * 1024 * 1024 : size;
    }
    return 0;
}

static void context_from_caches(ctbc_isa isa, int64_t l1d, int64_t l2, ctbc_context *ctx)
{
    ctx->isa = isa;
    ctx->kernel = ctbc_kernel_for_isa(isa);
    const int64_t mr = ctx->kernel->mr, nr = ctx->kernel->nr, f = (int64_t)sizeof(float);
    ctx->kc = ctbc_clamp(l1d / 2 / (nr * f) / 16 * 16, 64, 1024);
    ctx->mc_tiles = ctbc_clamp(l2 * 9 / 32 / (ctx->kc * f) / mr, 4, 64);
    ctx->nc_tiles = ctbc_clamp(l2 / 2 / (ctx->kc * f) / nr, 4, 64);
    ctx->budget_floats = ctbc_clamp(l2 / 2, 64 * 1024, 4 * 1024 * 1024);
}

static void make_contexts(void)
{
    int64_t l1d = cache_bytes(1), l2 = cache_bytes(2);
    if (l1d < 4096 || l2 < 64 * 1024) { /* nothing sensible reported */
        l1d = DEFAULT_L1D;
        l2 = DEFAULT_L2;
    }
    for (int isa = CTBC_ISA_PORTABLE; isa <= CTBC_ISA_AVX512; isa++)
        context_from_caches((ctbc_isa)isa, l1d, l2, &contexts[isa]);
}

void ctbc_context_for_isa(ctbc_isa isa, ctbc_context *ctx)
{
    pthread_once(&contexts_once, make_contexts);
    *ctx = contexts[isa];
}
