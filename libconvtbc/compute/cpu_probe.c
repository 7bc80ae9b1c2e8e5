/* The CPU's own account of itself (see cpu_probe.h). */
#include "compute/cpu_probe.h"

#include <omp.h>
#include <pthread.h>
#include <string.h>

#include "convtbc/convtbc_ext.h"

static ctbc_cpu_probe_result probed;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* XCR0 via inline asm so this file needs no -mxsave. */
static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* XCR0 state components an instruction family needs the OS to save: a CPU
 * bit without them is unusable, and Linux then hides the flag too. */
#define XSTATE_AVX 0x6ull             /* XMM, YMM */
#define XSTATE_AVX512 0xe6ull         /* and opmask, ZMM0-15 upper halves, ZMM16-31 */
#define XSTATE_AMX (0x3ull << 17)     /* XTILECFG, XTILEDATA */

static uint64_t probe_features(void)
{
    unsigned a, b, c, d;
    const unsigned max_leaf = __get_cpuid_max(0, 0);
    if (max_leaf < 1)
        return 0;
    __cpuid(1, a, b, c, d);
    const int osxsave = (c >> 27) & 1;
    const uint64_t xcr0 = osxsave ? read_xcr0() : 0;
    const int avx_state = (xcr0 & XSTATE_AVX) == XSTATE_AVX;
    const int avx512_state = (xcr0 & XSTATE_AVX512) == XSTATE_AVX512;
    const int amx_state = (xcr0 & XSTATE_AMX) == XSTATE_AMX;

    uint64_t f = 0;
    /* FMA and F16C are VEX-encoded: they need the YMM state as AVX does. */
    if (avx_state) {
        f |= ((c >> 28) & 1) ? CONVTBC_CPU_AVX : 0;
        f |= ((c >> 12) & 1) ? CONVTBC_CPU_FMA : 0;
        f |= ((c >> 29) & 1) ? CONVTBC_CPU_F16C : 0;
    }
    if (max_leaf < 7)
        return f;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned leaf7_subleaves = a;
    if (avx_state)
        f |= ((b >> 5) & 1) ? CONVTBC_CPU_AVX2 : 0;
    if (avx512_state) {
        f |= ((b >> 16) & 1) ? CONVTBC_CPU_AVX512F : 0;
        f |= ((b >> 17) & 1) ? CONVTBC_CPU_AVX512DQ : 0;
        f |= ((b >> 30) & 1) ? CONVTBC_CPU_AVX512BW : 0;
        f |= ((b >> 31) & 1) ? CONVTBC_CPU_AVX512VL : 0;
        f |= ((d >> 23) & 1) ? CONVTBC_CPU_AVX512_FP16 : 0;
    }
    if (amx_state) {
        f |= ((d >> 22) & 1) ? CONVTBC_CPU_AMX_BF16 : 0;
        f |= ((d >> 24) & 1) ? CONVTBC_CPU_AMX_TILE : 0;
    }
    if (leaf7_subleaves >= 1 && avx512_state) {
        __cpuid_count(7, 1, a, b, c, d);
        f |= ((a >> 5) & 1) ? CONVTBC_CPU_AVX512_BF16 : 0;
    }
    return f;
}

static void copy_registers(char *dst, const unsigned *words, int n)
{
    memcpy(dst, words, (size_t)n * sizeof(unsigned));
    dst[n * sizeof(unsigned)] = '\0';
}

static void probe_names(ctbc_cpu_probe_result *r)
{
    unsigned a, b, c, d;
    __cpuid(0, a, b, c, d);
    const unsigned vendor[3] = {b, d, c};
    copy_registers(r->vendor, vendor, 3);
    if (__get_cpuid_max(0x80000000, 0) < 0x80000004)
        return;
    unsigned brand[12];
    for (unsigned i = 0; i < 3; i++)
        __cpuid(0x80000002 + i, brand[4 * i], brand[4 * i + 1], brand[4 * i + 2], brand[4 * i + 3]);
    char text[49];
    copy_registers(text, brand, 12);
    /* Vendors pad the brand string with blanks on either side. */
    const char *start = text;
    while (*start == ' ')
        start++;
    size_t length = strlen(start);
    while (length > 0 && start[length - 1] == ' ')
        length--;
    memcpy(r->model, start, length);
    r->model[length] = '\0';
}

/* One cache of a deterministic cache parameters leaf (Intel's 4, AMD's
 * 0x8000001D: the same layout); returns 0 past the last cache. */
static int record_cache(ctbc_cpu_probe_result *r, unsigned a, unsigned b, unsigned c)
{
    const unsigned type = a & 0x1f, level = (a >> 5) & 0x7;
    if (type == 0)
        return 0;
    if (type == 2) /* instruction cache */
        return 1;
    const int64_t bytes = (int64_t)((b >> 22) + 1) * (((b >> 12) & 0x3ff) + 1) * ((b & 0xfff) + 1) * ((int64_t)c + 1);
    int64_t *slot = level == 1 ? &r->l1d_bytes : level == 2 ? &r->l2_bytes : level == 3 ? &r->l3_bytes : NULL;
    if (slot)
        *slot = bytes;
    return 1;
}

static void probe_caches(ctbc_cpu_probe_result *r)
{
    unsigned a, b, c, d;
    const unsigned max_leaf = __get_cpuid_max(0, 0), max_ext = __get_cpuid_max(0x80000000, 0);
    int topoext = 0;
    if (max_ext >= 0x80000001) {
        __cpuid(0x80000001, a, b, c, d);
        topoext = (c >> 22) & 1;
    }
    /* AMD and Hygon describe their caches in 0x8000001D (with topology
     * extensions) and leave leaf 4 zero; Intel and the others use leaf 4. */
    const unsigned leaf = topoext && max_ext >= 0x8000001D ? 0x8000001D : max_leaf >= 4 ? 4 : 0;
    if (leaf) {
        for (unsigned i = 0; i < 16; i++) {
            __cpuid_count(leaf, i, a, b, c, d);
            if (!record_cache(r, a, b, c))
                break;
        }
    }
    /* Older AMD parts: the legacy L1/L2/L3 descriptors, in KiB (L3 in 512 KiB units). */
    if (!r->l1d_bytes && max_ext >= 0x80000006) {
        __cpuid(0x80000005, a, b, c, d);
        r->l1d_bytes = (int64_t)(c >> 24) * 1024;
        __cpuid(0x80000006, a, b, c, d);
        r->l2_bytes = (int64_t)(c >> 16) * 1024;
        r->l3_bytes = (int64_t)(d >> 18) * 512 * 1024;
    }
}

static void probe(void)
{
    probe_names(&probed);
    probed.features = probe_features();
    probe_caches(&probed);
}
#else
static void probe(void) {}
#endif

const ctbc_cpu_probe_result *ctbc_cpu_probe(void)
{
    pthread_once(&probe_once, probe);
    return &probed;
}

int ctbc_cpu_threads(void)
{
    const int threads = omp_get_max_threads();
    return threads < 1 ? 1 : threads;
}
