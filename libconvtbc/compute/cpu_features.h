/*
 * Which micro-kernel set this process uses.
 *
 * The CPU is probed once (CPUID for the instruction sets, XGETBV for the
 * OS saving the wide registers) and the answer cached. The environment
 * variable CONVTBC_ISA caps the choice, read at every plan (so a test can
 * run each path in one process; a plan keeps the ISA it was made with):
 *
 *   CONVTBC_ISA=portable   plain C kernels
 *   CONVTBC_ISA=avx2       AVX2+FMA kernels if the CPU and OS have them
 *   CONVTBC_ISA=avx512     AVX-512 (F, BW, VL) kernels if the CPU and OS
 *                          have them, else the best below
 *   CONVTBC_ISA=avx512_bf16  the same plus the VDPBF16PS kernel where the
 *                          CPU has AVX512_BF16
 *   CONVTBC_ISA=amx_bf16   the same plus the AMX tile kernel where the CPU
 *                          has AMX-BF16 and the OS grants the tile data
 *   CONVTBC_ISA=amx_emulated  the best the CPU has, plus the AMX tile
 *                          kernel's emulation in plain C (tests: the AMX
 *                          drivers on any CPU; slow)
 *
 * Unset (or any other value) means no cap: the best the CPU has.
 */
#ifndef CONVTBC_COMPUTE_CPU_FEATURES_H
#define CONVTBC_COMPUTE_CPU_FEATURES_H

#include "compute/kernels/ukernel.h"

typedef enum {
    CTBC_ISA_PORTABLE = 0,
    CTBC_ISA_AVX2 = 1,
    CTBC_ISA_AVX512 = 2,
    CTBC_ISA_AVX512_BF16 = 3,
    CTBC_ISA_AMX_BF16 = 4,
    CTBC_ISA_AMX_EMULATED = 5, /* never detected: only CONVTBC_ISA names it */
    CTBC_ISA_COUNT
} ctbc_isa;

/* The best ISA the CPU, the OS and this build support, within the cap. */
ctbc_isa ctbc_isa_select(void);

/* The kernel table entry of an ISA (never NULL, never a NULL ukr: falls back
 * to portable). */
const ctbc_kernel *ctbc_kernel_for_isa(ctbc_isa isa);
/* That entry on its narrow tile (ctbc_kernel_narrowed), or NULL where it
 * has none; the pointer stays valid for the process. */
const ctbc_kernel *ctbc_narrow_kernel_for_isa(ctbc_isa isa);
/* That entry on its AMX tile (ctbc_kernel_amx_tiled), or NULL. */
const ctbc_kernel *ctbc_amx_kernel_for_isa(ctbc_isa isa);

#endif /* CONVTBC_COMPUTE_CPU_FEATURES_H */
