/*
 * The AMX tile kernel (ukernel.h, ctbc_ukr_amx_fn): a 32 x 32 tile of C in
 * four 16 x 16 float32 accumulator tiles, A as two 16-row tiles read along
 * the reduction, B as two 16-column tiles of pairs; each step of 16 pairs
 * is four TDPBF16PS. Built with -mamx-tile -mamx-bf16 (this file only);
 * without them ctbc_ukr_amx_tiles is NULL and the dispatcher never picks
 * the AMX entry.
 *
 * Also here: the emulation of the same contract in plain C, which the
 * test suite runs on CPUs without AMX (CONVTBC_ISA=amx_emulated) so that
 * the drivers' AMX paths are tested everywhere, against float64
 * references (the emulation's bits are not the hardware's: see ukernel.h).
 */
#define _GNU_SOURCE /* syscall() */
#include <string.h>

#include "compute/kernels/ukernel.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__linux__)

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Linux keeps the tile data out of a process until it asks
 * (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), Linux 5.16+); a
 * tile instruction before that is killed with SIGILL. */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

int ctbc_amx_request_permission(void)
{
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} __attribute__((packed)) tile_config;

/* Palette 1, tiles 0-7 of 16 rows of 64 bytes. */
static const tile_config config = {.palette = 1,
                                   .bytes_per_row = {64, 64, 64, 64, 64, 64, 64, 64},
                                   .rows = {16, 16, 16, 16, 16, 16, 16, 16}};

/* Loading a configuration costs about 110 ns (EMR), reading it back to
 * compare 10 but then waits for the tile unit to drain: once per driver
 * tile, not per call. The tiles are never released (release returns them
 * to the unconfigured state, and the next tile would load again). */
static void amx_begin(void) { _tile_loadconfig(&config); }

static void ukr_amx_32x32(const ctbc_ukr_args *args, const uint16_t *a, const uint32_t *b, float *c, int64_t ldc)
{
    /* C is the accumulator: its four 16 x 16 quarters, ldc floats a row */
    const int64_t a_bytes = args->a_row * 2, b_bytes = args->b_inner * 4, c_bytes = ldc * 4;
    float *c1 = c + 16, *c2 = c + 16 * ldc, *c3 = c + 16 * ldc + 16;
    if (args->overwrite) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    } else {
        _tile_loadd(0, c, c_bytes);
        _tile_loadd(1, c1, c_bytes);
        _tile_loadd(2, c2, c_bytes);
        _tile_loadd(3, c3, c_bytes);
    }
    for (int64_t q = 0; q < args->n_outer; q++) {
        const uint16_t *aq = a + q * args->a_outer;
        const uint32_t *bq = b + q * args->b_outer;
        for (int64_t p = 0; p < args->n_inner; p += CTBC_AMX_PAIRS) {
            _tile_loadd(4, aq + 2 * p, a_bytes);
            _tile_loadd(5, aq + 2 * p + 16 * args->a_row, a_bytes);
            _tile_loadd(6, bq + p * args->b_inner, b_bytes);
            _tile_loadd(7, bq + p * args->b_inner + 16, b_bytes);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, c, c_bytes);
    _tile_stored(1, c1, c_bytes);
    _tile_stored(2, c2, c_bytes);
    _tile_stored(3, c3, c_bytes);
}

const ctbc_ukr_amx_fn ctbc_ukr_amx_tiles = ukr_amx_32x32;
void (*const ctbc_amx_begin)(void) = amx_begin;

#else

int ctbc_amx_request_permission(void) { return 0; }

const ctbc_ukr_amx_fn ctbc_ukr_amx_tiles = 0;
void (*const ctbc_amx_begin)(void) = 0;

#endif

/* ---- the emulation ---------------------------------------------------------- */

/* x with a subnormal read as zero (sign kept), as the tile unit reads its
 * operands and writes its sums. */
static float flushed(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof(bits));
    if ((bits & 0x7f800000u) == 0)
        bits &= 0x80000000u;
    memcpy(&x, &bits, sizeof(x));
    return x;
}

static float bf16_value(uint16_t h)
{
    const uint32_t bits = (uint32_t)h << 16;
    float x;
    memcpy(&x, &bits, sizeof(x));
    return flushed(x);
}

/* Intel's pseudocode for TDPBF16PS: per element, the even product, then
 * the odd one, each added with one rounding. A bfloat16 product is exact
 * in float32, and float32 arithmetic in C is IEEE single here (x86-64's
 * SSE; no contraction into an FMA, which would round the same anyway). */
static void ukr_amx_emulated_32x32(const ctbc_ukr_args *args, const uint16_t *a, const uint32_t *b, float *c,
                                   int64_t ldc)
{
    for (int i = 0; i < CTBC_AMX_TILE; i++)
        for (int j = 0; j < CTBC_AMX_TILE; j++) {
            float sum = args->overwrite ? 0.0f : flushed(c[i * ldc + j]);
            for (int64_t q = 0; q < args->n_outer; q++) {
                const uint16_t *ai = a + q * args->a_outer + i * args->a_row;
                const uint32_t *bj = b + q * args->b_outer + j;
                for (int64_t p = 0; p < args->n_inner; p++) {
                    const uint32_t pair = bj[p * args->b_inner];
                    sum = flushed(sum + bf16_value(ai[2 * p]) * bf16_value((uint16_t)(pair & 0xffffu)));
                    sum = flushed(sum + bf16_value(ai[2 * p + 1]) * bf16_value((uint16_t)(pair >> 16)));
                }
            }
            c[i * ldc + j] = sum;
        }
}

static void amx_emulated_begin(void) {}

const ctbc_ukr_amx_fn ctbc_ukr_amx_emulated = ukr_amx_emulated_32x32;
void (*const ctbc_amx_emulated_begin)(void) = amx_emulated_begin;
