/*
 * The Intel AVX-512 intrinsics over SIMDe, for building
 * libconvtbc/compute/kernels/kernel_avx512.c on a CPU without AVX-512
 * (ukernel_contract.c; the file includes this header when
 * CTBC_KERNEL_VIA_SIMDE is defined).
 *
 * SIMDe 0.8.2 emulates masked loads by reading, and masked stores by
 * writing, the whole vector; the instructions touch only the lanes in the
 * mask. The replacements below do what the instructions do, so a kernel
 * that writes past its edge is caught here as it would be on hardware. Two
 * intrinsics the kernel uses are missing from SIMDe and are defined from
 * their documented meaning (vcvtps2ph on 16 lanes is vcvtps2ph on each
 * half; vpmovdw keeps the low 16 bits of each lane).
 */
#ifndef CONVTBC_TESTS_SIMDE_AVX512_H
#define CONVTBC_TESTS_SIMDE_AVX512_H

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline simde__m512 ctbc_simde_maskz_loadu_ps(simde__mmask16 k, const void *p)
{
    float lanes[16] = {0};
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1)
            lanes[i] = ((const float *)p)[i];
    return simde_mm512_loadu_ps(lanes);
}

static inline void ctbc_simde_mask_storeu_ps(void *p, simde__mmask16 k, simde__m512 v)
{
    float lanes[16];
    simde_mm512_storeu_ps(lanes, v);
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1)
            ((float *)p)[i] = lanes[i];
}

static inline simde__m256i ctbc_simde_maskz_loadu_epi16(simde__mmask16 k, const void *p)
{
    uint16_t lanes[16] = {0};
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1)
            lanes[i] = ((const uint16_t *)p)[i];
    return simde_mm256_loadu_si256((const simde__m256i *)lanes);
}

static inline simde__m512i ctbc_simde_maskz_loadu_epi16_512(simde__mmask32 k, const void *p)
{
    uint16_t lanes[32] = {0};
    for (int i = 0; i < 32; i++)
        if ((k >> i) & 1)
            lanes[i] = ((const uint16_t *)p)[i];
    return simde_mm512_loadu_si512(lanes);
}

static inline void ctbc_simde_mask_storeu_epi16(void *p, simde__mmask16 k, simde__m256i v)
{
    uint16_t lanes[16];
    simde_mm256_storeu_si256((simde__m256i *)lanes, v);
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1)
            ((uint16_t *)p)[i] = lanes[i];
}

static inline simde__m256i ctbc_simde_cvtps_ph(simde__m512 v, int rounding)
{
    (void)rounding; /* the kernel asks for round-to-nearest-even only */
    return simde_mm256_setr_m128i(
        simde_mm256_cvtps_ph(simde_mm512_extractf32x8_ps(v, 0), SIMDE_MM_FROUND_TO_NEAREST_INT),
        simde_mm256_cvtps_ph(simde_mm512_extractf32x8_ps(v, 1), SIMDE_MM_FROUND_TO_NEAREST_INT));
}

static inline simde__m256i ctbc_simde_cvtepi32_epi16(simde__m512i v)
{
    int32_t in[16];
    uint16_t out[16];
    simde_mm512_storeu_si512(in, v);
    for (int i = 0; i < 16; i++)
        out[i] = (uint16_t)((uint32_t)in[i] & 0xffffu);
    return simde_mm256_loadu_si256((const simde__m256i *)out);
}

/* VDPBF16PS as Intel's pseudocode defines it: per float32 lane, the odd
 * bfloat16 product then the even one, each a fused multiply-add rounded to
 * nearest even, with subnormal inputs read as zero and subnormal results
 * written as zero, whatever MXCSR says. (SIMDe adds both products unfused,
 * even first, and keeps subnormals.) The kernel hands over its 32-lane
 * operands as plain integer vectors (CTBC_AS_BH below). */
static inline float ctbc_simde_flush(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0 && (u & 0x007fffffu) != 0)
        u &= 0x80000000u;
    memcpy(&x, &u, 4);
    return x;
}

static inline simde__m512 ctbc_simde_dpbf16_ps(simde__m512 src, simde__m512i a, simde__m512i b)
{
    float acc[16];
    uint32_t x[16], y[16];
    simde_mm512_storeu_ps(acc, src);
    simde_mm512_storeu_si512(x, a);
    simde_mm512_storeu_si512(y, b);
    for (int i = 0; i < 16; i++)
        for (int h = 1; h >= 0; h--) {
            const uint32_t xb = (x[i] >> (16 * h)) << 16, yb = (y[i] >> (16 * h)) << 16;
            float xf, yf;
            memcpy(&xf, &xb, 4);
            memcpy(&yf, &yb, 4);
            acc[i] = ctbc_simde_flush(fmaf(ctbc_simde_flush(xf), ctbc_simde_flush(yf), ctbc_simde_flush(acc[i])));
        }
    return simde_mm512_loadu_ps(acc);
}

#define CTBC_AS_BH(v) (v)
#undef _mm512_dpbf16_ps
#define _mm512_dpbf16_ps(src, a, b) ctbc_simde_dpbf16_ps(src, a, b)

#undef _mm512_maskz_loadu_ps
#undef _mm512_mask_storeu_ps
#undef _mm256_maskz_loadu_epi16
#undef _mm512_maskz_loadu_epi16
#undef _mm256_mask_storeu_epi16
#undef _mm512_cvtps_ph
#undef _mm512_cvtepi32_epi16
#define _mm512_maskz_loadu_ps(k, p) ctbc_simde_maskz_loadu_ps(k, p)
#define _mm512_mask_storeu_ps(p, k, v) ctbc_simde_mask_storeu_ps(p, k, v)
#define _mm256_maskz_loadu_epi16(k, p) ctbc_simde_maskz_loadu_epi16(k, p)
#define _mm512_maskz_loadu_epi16(k, p) ctbc_simde_maskz_loadu_epi16_512(k, p)
#define _mm256_mask_storeu_epi16(p, k, v) ctbc_simde_mask_storeu_epi16(p, k, v)
#define _mm512_cvtps_ph(v, rounding) ctbc_simde_cvtps_ph(v, rounding)
#define _mm512_cvtepi32_epi16(v) ctbc_simde_cvtepi32_epi16(v)

#endif /* CONVTBC_TESTS_SIMDE_AVX512_H */
