/*
 * Helpers shared by the C test programs: failure counting, float16/bfloat16
 * conversions written independently of the library, a plain-loop double
 * reference of the spec's formulas, and tensor creation over host buffers.
 * Compiles as C11 and C++11.
 */
#ifndef CONVTBC_TESTS_TEST_COMMON_H
#define CONVTBC_TESTS_TEST_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_convolution_backward.h"

static int g_failures = 0;

#define EXPECT(cond, ...)                                              \
    do {                                                               \
        if (!(cond)) {                                                 \
            ++g_failures;                                              \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);       \
            fprintf(stderr, __VA_ARGS__);                              \
            fprintf(stderr, "\n");                                     \
        }                                                              \
    } while (0)

#define EXPECT_EQ(got, want, what)                                                          \
    do {                                                                                    \
        long long g_ = (long long)(got), w_ = (long long)(want);                            \
        EXPECT(g_ == w_, "%s: got %lld, want %lld", (what), g_, w_);                        \
    } while (0)

static inline int finish(const char *name)
{
    if (g_failures) {
        fprintf(stderr, "%s: %d failure(s)\n", name, g_failures);
        return 1;
    }
    printf("%s: OK\n", name);
    return 0;
}

/* The pending message (copied), "" if none. Reading clears it. */
static inline const char *recent_msg(void)
{
    static char buf[4096];
    const char *m = aclGetRecentErrMsg();
    snprintf(buf, sizeof buf, "%s", m ? m : "");
    return buf;
}

/* ---- float16 / bfloat16, independent of the library ---- */

static inline float bits_to_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t float_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float half_to_float(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v;
    if (exp == 0)
        v = ldexp((double)man, -24);
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexp((double)(man | 0x400), exp - 25);
    return (float)(sign ? -v : v);
}

/* Exact for the values the tests use (representable in float16). */
static inline uint16_t float_to_half_exact(float f)
{
    uint16_t sign = (uint16_t)(f < 0 || (f == 0 && signbit(f)) ? 0x8000 : 0);
    double a = fabs((double)f);
    if (a == 0)
        return sign;
    int e;
    double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    int exp = e - 1 + 15;
    if (exp <= 0) /* subnormal */
        return (uint16_t)(sign | (uint16_t)llround(ldexp(a, 24)));
    return (uint16_t)(sign | (uint16_t)(exp << 10) | (uint16_t)(llround(ldexp(m, 11)) & 0x3ff));
}

static inline float bf16_to_float(uint16_t b) { return bits_to_float((uint32_t)b << 16); }

static inline uint16_t float_to_bf16_exact(float f) { return (uint16_t)(float_to_bits(f) >> 16); }

/* Element size and load/store for FLOAT / FLOAT16 / BF16 buffers. */
static inline size_t elem_size(aclDataType dt) { return dt == ACL_FLOAT ? 4 : 2; }

static inline double load_elem(const void *base, int64_t i, aclDataType dt)
{
    if (dt == ACL_FLOAT)
        return ((const float *)base)[i];
    uint16_t h = ((const uint16_t *)base)[i];
    return dt == ACL_FLOAT16 ? half_to_float(h) : bf16_to_float(h);
}

static inline void store_elem(void *base, int64_t i, aclDataType dt, float v)
{
    if (dt == ACL_FLOAT)
        ((float *)base)[i] = v;
    else if (dt == ACL_FLOAT16)
        ((uint16_t *)base)[i] = float_to_half_exact(v);
    else
        ((uint16_t *)base)[i] = float_to_bf16_exact(v);
}

/* ---- plain-loop reference (double) on dense [d0][d1][d2] arrays ---- */

/* The forward op's out[t][b][o] = bias[o] + sum_k sum_c xp[t+k][b][c] w[k][c][o]
 * in double, xp being x [t_len][B][c_in] between pad zero steps; x is read
 * through its strides (xs), w [k_len][c_in][c_out] is contiguous. */
static inline double forward_reference(int64_t t_len, int64_t c_in, int64_t k_len, int64_t c_out, int64_t pad,
                                       const float *x, const int64_t *xs, const float *w, const float *bias,
                                       int64_t t, int64_t b, int64_t o)
{
    double sum = bias[o];
    for (int64_t k = 0; k < k_len; k++) {
        const int64_t u = t + k - pad;
        if (u < 0 || u >= t_len)
            continue;
        for (int64_t c = 0; c < c_in; c++)
            sum += (double)x[u * xs[0] + b * xs[1] + c * xs[2]] * w[(k * c_in + c) * c_out + o];
    }
    return sum;
}

static inline void reference(const double *go, const double *x, const double *w, int64_t T, int64_t B,
                      int64_t Ci, int64_t K, int64_t Co, int64_t pad, double *gi, double *gw, double *gb)
{
    int64_t To = T + 2 * pad + 1 - K;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t b = 0; b < B; ++b)
            for (int64_t c = 0; c < Ci; ++c) {
                double s = 0;
                for (int64_t k = 0; k < K; ++k) {
                    int64_t u = t + pad - k;
                    if (u < 0 || u >= To)
                        continue;
                    for (int64_t o = 0; o < Co; ++o)
                        s += go[(u * B + b) * Co + o] * w[(k * Ci + c) * Co + o];
                }
                gi[(t * B + b) * Ci + c] = s;
            }
    for (int64_t k = 0; k < K; ++k)
        for (int64_t c = 0; c < Ci; ++c)
            for (int64_t o = 0; o < Co; ++o) {
                double s = 0;
                for (int64_t t = 0; t < To; ++t) {
                    int64_t ti = t + k - pad;
                    if (ti < 0 || ti >= T)
                        continue;
                    for (int64_t b = 0; b < B; ++b)
                        s += x[(ti * B + b) * Ci + c] * go[(t * B + b) * Co + o];
                }
                gw[(k * Ci + c) * Co + o] = s;
            }
    for (int64_t o = 0; o < Co; ++o) {
        double s = 0;
        for (int64_t i = 0; i < To * B; ++i)
            s += go[i * Co + o];
        gb[o] = s;
    }
}

static inline aclTensor *make_tensor(const int64_t *dims, uint64_t n, aclDataType dt, const int64_t *strides,
                              int64_t offset, aclFormat fmt, int64_t storage_elems, void *data)
{
    int64_t sd[1];
    sd[0] = storage_elems;
    return aclCreateTensor(dims, n, dt, strides, offset, fmt, sd, 1, data);
}

static inline void contiguous_strides(const int64_t *dims, int n, int64_t *strides)
{
    int64_t acc = 1;
    for (int i = n - 1; i >= 0; --i) {
        strides[i] = acc;
        acc *= dims[i] > 0 ? dims[i] : 1;
    }
}

#endif /* CONVTBC_TESTS_TEST_COMMON_H */
