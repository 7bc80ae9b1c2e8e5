/*
 * Conversions between float32 and the 16-bit formats, and the cubeMathType
 * operand roundings. Used by the compute layer (packing, storing results)
 * and by the API layer (aclFloat16ToFloat, aclFloatToFloat16). All roundings
 * are round-to-nearest-even; NaN stays NaN, overflow gives Inf.
 */
#ifndef CONVTBC_COMPUTE_FLOAT_CONVERT_H
#define CONVTBC_COMPUTE_FLOAT_CONVERT_H

#include <stdint.h>
#include <string.h>

static inline uint32_t ctbc_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float ctbc_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float ctbc_bf16_to_f32(uint16_t h) { return ctbc_bits_f32((uint32_t)h << 16); }

static inline uint16_t ctbc_f32_to_bf16(float f)
{
    uint32_t u = ctbc_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet and a NaN */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float ctbc_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu) /* Inf or NaN */
        return ctbc_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        /* zero or subnormal: value = man * 2^-24, exact in float32 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return ctbc_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t ctbc_f32_to_f16(float f)
{
    uint32_t u = ctbc_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) /* rounds to >= 65520: Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (abs < 0x38800000u) {
        /* below the smallest normal: round to a multiple of 2^-24 by adding
         * a magic number whose ulp is 2^-24 (float addition rounds RNE) */
        float v = ctbc_bits_f32(abs) + 0.5f;
        return (uint16_t)(sign | (uint16_t)(ctbc_f32_bits(v) - 0x3f000000u));
    }
    /* normal: rebias exponent, round the 13 dropped bits to nearest even */
    uint32_t r = abs + 0xc8000fffu + ((abs >> 13) & 1u);
    return (uint16_t)(sign | (uint16_t)(r >> 13));
}

/* HF32: float32 range with 11 explicit mantissa bits (12 dropped), RNE. */
static inline float ctbc_round_hf32(float f)
{
    uint32_t u = ctbc_f32_bits(f);
    if ((u & 0x7f800000u) == 0x7f800000u) /* Inf, NaN unchanged */
        return f;
    u += 0x7ffu + ((u >> 12) & 1u);
    return ctbc_bits_f32(u & 0xfffff000u);
}

static inline float ctbc_round_fp16(float f) { return ctbc_f16_to_f32(ctbc_f32_to_f16(f)); }

#endif /* CONVTBC_COMPUTE_FLOAT_CONVERT_H */
