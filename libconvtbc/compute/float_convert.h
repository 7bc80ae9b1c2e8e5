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
    const uint32_t u = ctbc_f32_bits(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) /* NaN: quiet, with the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x47800000u) /* 2^16 and above, Inf included */
        return (uint16_t)(sign | 0x7c00u);
    /* The float16 exponent field this value would have. float16 keeps 10 of
     * float32's 23 fraction bits; below its normal range (field <= 0) every
     * step down drops one bit more, and the field of the result is 0. A
     * float32 subnormal lands far below and becomes zero like anything
     * under half the smallest float16 subnormal (field < -10). */
    const int32_t field = (int32_t)(abs >> 23) - 127 + 15;
    if (field < -10)
        return sign;
    const uint32_t significand = (abs & 0x7fffffu) | 0x800000u; /* the implicit 1 made explicit */
    const int dropped = field >= 1 ? 13 : 14 - field;
    uint32_t kept = significand >> dropped;
    const uint32_t rest = significand & ((1u << dropped) - 1u), half = 1u << (dropped - 1);
    if (rest > half || (rest == half && (kept & 1u)))
        kept++;
    /* For a normal result `kept` still holds the implicit 1 (0x400), which
     * adds one to the exponent field: hence field - 1. A rounding carry out
     * of the fraction moves into the exponent the same way, up to Inf. */
    const uint32_t magnitude = (field >= 1 ? (uint32_t)(field - 1) << 10 : 0u) + kept;
    return (uint16_t)(sign | (magnitude >= 0x7c00u ? 0x7c00u : magnitude));
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
