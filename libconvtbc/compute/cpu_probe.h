/*
 * What the CPU says about itself, for reports (convtbcGetCpuInfo) and for
 * block sizes that follow the caches: vendor and brand strings, the
 * instruction-set features the kernels care about, and the data cache sizes.
 * Probed once per process (CPUID, XGETBV); later calls return the same
 * record.
 */
#ifndef CONVTBC_COMPUTE_CPU_PROBE_H
#define CONVTBC_COMPUTE_CPU_PROBE_H

#include <stdint.h>

typedef struct {
    char vendor[13];    /* CPUID leaf 0, e.g. "AuthenticAMD"; "" off x86 */
    char model[49];     /* brand string without its padding blanks; "" if none */
    uint64_t features;  /* CONVTBC_CPU_* bits (convtbc_ext.h) the CPU has and the OS enables */
    int64_t l1d_bytes;  /* per level, the data or unified cache one core sees; 0 unknown */
    int64_t l2_bytes;
    int64_t l3_bytes;
} ctbc_cpu_probe_result;

const ctbc_cpu_probe_result *ctbc_cpu_probe(void);

/* The OpenMP threads a plan made now on the calling thread would use. */
int ctbc_cpu_threads(void);

#endif /* CONVTBC_COMPUTE_CPU_PROBE_H */
