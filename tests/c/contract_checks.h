/*
 * What the kernel contract programs (ukernel_contract.c, amx_contract.c)
 * share: a failure count with a CHECK that reports the first failures, and
 * a seeded xorshift generator with values of varied exponent, so that sums
 * round differently in different orders. Include once per program.
 */
#ifndef CONVTBC_TESTS_CONTRACT_CHECKS_H
#define CONVTBC_TESTS_CONTRACT_CHECKS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            if (failures < 20) {                                            \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);        \
                fprintf(stderr, __VA_ARGS__);                               \
                fputc('\n', stderr);                                        \
            }                                                               \
            failures++;                                                     \
        }                                                                   \
    } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint32_t next_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* A value in [-256, 256] with a varied exponent. */
static float random_value(void)
{
    const float unit = (float)(next_u32() % 2000001u) / 1000000.0f - 1.0f;
    return ldexpf(unit, (int)(next_u32() % 17u) - 8);
}

#endif /* CONVTBC_TESTS_CONTRACT_CHECKS_H */
