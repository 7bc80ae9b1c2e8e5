/*
 * One hostile call of aclnnConvTbcBackward, decoded from a string of bytes.
 *
 * Shared by the libFuzzer target (fuzz_conv_tbc_backward.c, bytes from the
 * fuzzer) and the seeded driver (random_descriptors.c, bytes from a PRNG),
 * so that any input either of them finds replays in the other.
 *
 * The decoding is structure-aware: it starts from a consistent convolution
 * (CANN's documented case unless the bytes say otherwise) and each byte
 * either keeps a field as that convolution needs it (byte 0, also what a
 * short input reads past its end) or replaces it with a hostile value. So
 * the empty input is the documented case, and a mutation changes one thing.
 *
 * Per input: build 7 descriptors (dims, strides, offset, storage dims,
 * dtype, format) over aclrtMalloc blocks (or NULL, freed, aliased or shared
 * ones), run phase 1 and, when it accepts, phase 2 and a synchronisation;
 * then free everything. Beyond the sanitizers, these oracles end the
 * process with "FUZZ FINDING:" and abort():
 *   - every refused call leaves a message naming the function;
 *   - phase 1 accepts only views inside their storage whose element
 *     offsets and byte ends fit in int64_t (checked here in 128 bits);
 *   - phase 1 refuses outputs whose bytes overlap an input's or another
 *     output's (the actual addresses, element by element);
 *   - phase 2 accepts only views inside one live aclrtMalloc block and a
 *     big enough workspace, and refuses nothing else (a misaligned address
 *     may go either way);
 *   - no byte outside the output views changes (all blocks are filled with
 *     a pattern first and read back after), nothing at all when refused.
 * An oracle can be switched off with CONVTBC_FUZZ_IGNORE=name[,name]
 * (names: message, storage, alias, device, spurious, bytes), so that a
 * campaign can go on past a known defect. Two more names keep inputs away
 * from open defects that the sanitizers report: "misaligned" keeps every
 * tensor address a multiple of its element size, "huge-problem" skips
 * valid views of a convolution with a dim above 2^32.
 *
 * Everything here is deterministic per input, apart from which addresses
 * the allocator hands out.
 */
#ifndef CONVTBC_TESTS_FUZZ_CONV_TBC_CASE_H
#define CONVTBC_TESTS_FUZZ_CONV_TBC_CASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_convolution_backward.h"
#include "convtbc/convtbc_ext.h"

enum { FZ_SELF, FZ_INPUT, FZ_WEIGHT, FZ_BIAS, FZ_GRAD_INPUT, FZ_GRAD_WEIGHT, FZ_GRAD_BIAS, FZ_TENSORS };
static const char *const FZ_NAMES[FZ_TENSORS] = {"self", "input", "weight", "bias",
                                                 "gradInput", "gradWeight", "gradBias"};
enum { FZ_MAX_DIMS = 5 };

/* Memory caps: a block never exceeds FZ_BLOCK_CAP and one input never
 * allocates more than FZ_TOTAL_CAP (workspace included); phase 2 is skipped
 * when the work would exceed FZ_WORK_CAP multiply-adds. */
#define FZ_BLOCK_CAP ((int64_t)256 << 10)
#define FZ_TOTAL_CAP ((int64_t)1 << 20)
#define FZ_WORK_CAP ((__int128)1 << 22)

/* ---- reading bytes -------------------------------------------------------- */

typedef struct {
    const uint8_t *data;
    size_t size, at;
} fz_bytes;

/* Past the end every byte is 0: "keep the consistent value". */
static inline uint8_t fz_u8(fz_bytes *in) { return in->at < in->size ? in->data[in->at++] : 0; }

static inline uint64_t fz_u64(fz_bytes *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)fz_u8(in) << (8 * i);
    return v;
}

/* Values where size arithmetic goes wrong: the int64_t and int32_t edges,
 * and the 2^61..2^62 strides and storages whose byte counts wrap (issue 11
 * found those). */
static const int64_t FZ_SPECIAL[] = {
    0, 1, 2, 3, -1, -2, INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1,
    INT32_MAX, (int64_t)INT32_MAX + 1, INT32_MIN, UINT32_MAX, (int64_t)1 << 32, ((int64_t)1 << 32) + 1,
    (int64_t)1 << 40, (int64_t)1 << 61, ((int64_t)1 << 61) + 1, ((int64_t)1 << 61) + 1000,
    ((int64_t)1 << 61) - 1, (int64_t)1 << 62, ((int64_t)1 << 62) - 1, ((int64_t)1 << 62) + 100,
    ((int64_t)1 << 62) + 101, ((int64_t)1 << 62) - 3, (int64_t)3 << 61, INT64_MAX / 2, INT64_MAX / 4 + 1,
    INT64_MAX / 3, 255, 256, 1000, 4096, 65535, 65536,
};
enum { FZ_SPECIAL_COUNT = (int)(sizeof FZ_SPECIAL / sizeof *FZ_SPECIAL) };

/* A hostile integer selected by the byte `v` (more bytes for raw values):
 * small ones, small negatives, the specials, 2^k +- 1, or any 64 bits. */
static inline int64_t fz_value_of(fz_bytes *in, uint8_t v)
{
    if (v < 0x40)
        return v;
    if (v < 0x50)
        return -(int64_t)(v - 0x3f);
    if (v < 0x50 + FZ_SPECIAL_COUNT)
        return FZ_SPECIAL[v - 0x50];
    if (v < 0xc0) {
        uint8_t w = fz_u8(in);
        int64_t p = (int64_t)((uint64_t)1 << (w % 63));
        return p + (int64_t)(v % 3) - 1;
    }
    return (int64_t)fz_u64(in);
}

static inline int64_t fz_value(fz_bytes *in) { return fz_value_of(in, fz_u8(in)); }

/* ---- the decoded case ----------------------------------------------------- */

/* Where a rebound address points. */
enum { FZ_REBIND_NULL, FZ_REBIND_NEXT_TENSOR, FZ_REBIND_ONE_ELEMENT_ON, FZ_REBIND_FRESH_BLOCK, FZ_REBIND_SOURCES };

/* How a tensor's address is chosen. */
enum {
    FZ_MEM_OWN,        /* its own block, exactly the storage's bytes (capped) */
    FZ_MEM_NULL,       /* a NULL address */
    FZ_MEM_SHORT,      /* its own block, some bytes short of the storage */
    FZ_MEM_ALIAS,      /* somewhere in an earlier tensor's block */
    FZ_MEM_SAME,       /* the very aclTensor of an earlier argument */
    FZ_MEM_NO_TENSOR,  /* a NULL aclTensor */
    FZ_MEM_INSIDE,     /* its own block, starting some bytes into it */
    FZ_MEM_FREED,      /* its own block, freed before phase 1 */
    FZ_MEM_MODES
};

typedef struct {
    uint64_t rank, storage_rank;
    int64_t dims[FZ_MAX_DIMS], strides[FZ_MAX_DIMS], storage[FZ_MAX_DIMS];
    bool null_strides; /* aclCreateTensor gets NULL strides: CANN's defaults */
    int64_t offset;
    aclDataType dtype;
    aclFormat format;
    int mem;
    int other;            /* FZ_MEM_ALIAS / FZ_MEM_SAME: which earlier tensor */
    int64_t byte_offset;  /* FZ_MEM_ALIAS / FZ_MEM_INSIDE: bytes into the block */
    int64_t short_bytes;  /* FZ_MEM_SHORT: how many bytes short */
} fz_tensor;

typedef struct {
    const char *soc;
    int64_t t, b, c_in, k, c_out, pad;
    int8_t cube_math_type;
    bool repeatable;         /* make the executor repeatable and run it twice */
    bool workspace_short;    /* allocate the workspace one byte short */
    bool workspace_null;     /* pass a NULL workspace */
    bool workspace_size_low; /* pass workspaceSize - 1 */
    bool null_size_out, null_executor_out;
    bool default_stream;     /* the NULL stream instead of a created one */
    bool free_after_phase1;  /* aclrtFree one tensor's block between the phases */
    int free_which;
    bool destroy_after_phase1; /* aclDestroyTensor everything before phase 2 */
    /* A repeatable executor gets a new address for one tensor before it
     * runs (aclSetInputTensorAddr / aclSetOutputTensorAddr). */
    bool rebind;
    int rebind_which, rebind_source;
    fz_tensor tensor[FZ_TENSORS];
} fz_case;

static const char *const FZ_SOCS[] = {"Ascend910B1", "Ascend910_9391", "Ascend910A", "Ascend950",
                                      "Ascend910B4", "Ascend910ProA"};

static const aclDataType FZ_DTYPES[] = {
    ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_INT32, ACL_INT8, ACL_UINT8, ACL_INT64, ACL_BOOL,
    ACL_STRING, ACL_INT4, ACL_UINT1, ACL_COMPLEX64, ACL_COMPLEX32, ACL_HIFLOAT8, ACL_FLOAT8_E5M2,
    ACL_DT_UNDEFINED, (aclDataType)5, (aclDataType)14, (aclDataType)99, (aclDataType)INT32_MAX,
    (aclDataType)INT32_MIN,
};

static const aclFormat FZ_FORMATS[] = {
    ACL_FORMAT_NCL, ACL_FORMAT_ND, ACL_FORMAT_NCHW, ACL_FORMAT_NHWC, ACL_FORMAT_UNDEFINED,
    ACL_FORMAT_FRACTAL_NZ, ACL_FORMAT_NC, ACL_FORMAT_NC1HWC0, (aclFormat)5, (aclFormat)12345, (aclFormat)-7,
};

#define FZ_COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

/* The shape each argument has in a consistent call. */
static inline void fz_role_shape(const fz_case *c, int role, uint64_t *rank, int64_t *dims)
{
    /* T_out in 128 bits: the bytes may make T or pad huge. */
    __int128 t_out = (__int128)c->t + 2 * (__int128)c->pad + 1 - c->k;
    int64_t t_out64 = t_out > INT64_MAX ? INT64_MAX : t_out < INT64_MIN ? INT64_MIN : (int64_t)t_out;
    switch (role) {
    case FZ_SELF: *rank = 3, dims[0] = t_out64, dims[1] = c->b, dims[2] = c->c_out; break;
    case FZ_INPUT: case FZ_GRAD_INPUT: *rank = 3, dims[0] = c->t, dims[1] = c->b, dims[2] = c->c_in; break;
    case FZ_WEIGHT: case FZ_GRAD_WEIGHT: *rank = 3, dims[0] = c->k, dims[1] = c->c_in, dims[2] = c->c_out; break;
    default: *rank = 1, dims[0] = c->c_out; break;
    }
}

/* Row-major strides over `dims` taken in `order` (outermost first), each dim
 * padded by `gap` elements; wraps silently like a careless caller's. */
static inline void fz_dense_strides(uint64_t rank, const int64_t *dims, const int *order, int64_t gap,
                                    int64_t *strides)
{
    uint64_t step = 1;
    for (uint64_t i = rank; i-- > 0;) {
        int d = order[i];
        strides[d] = (int64_t)step;
        step *= (uint64_t)(dims[d] < 0 ? 1 : dims[d]) + (uint64_t)gap;
    }
}

/* Highest element offset of a view (128 bits, so nothing wraps), or -1 for
 * a view without elements; *lowest gets the lowest. Both are clamped to
 * +-2^120, far outside int64_t, so that five dims cannot overflow. */
#define FZ_FAR ((__int128)1 << 120)
static inline __int128 fz_last_element(const fz_tensor *t, __int128 *lowest)
{
    __int128 hi = t->offset, lo = t->offset;
    for (uint64_t d = 0; d < t->rank; d++) {
        if (t->dims[d] <= 0) {
            *lowest = 0;
            return -1;
        }
        __int128 reach = (__int128)(t->dims[d] - 1) * t->strides[d]; /* |reach| < 2^126 */
        if (reach > 0)
            hi = hi + reach > FZ_FAR ? FZ_FAR : hi + reach;
        else
            lo = lo + reach < -FZ_FAR ? -FZ_FAR : lo + reach;
    }
    *lowest = lo;
    return hi;
}

#define FZ_HUGE ((__int128)1 << 100)
static inline __int128 fz_storage_elements(const fz_tensor *t)
{
    __int128 n = 1;
    for (uint64_t d = 0; d < t->storage_rank; d++)
        if (t->storage[d] < 0)
            return -1;
    for (uint64_t d = 0; d < t->storage_rank; d++) {
        if (n > ((__int128)1 << 64))
            return FZ_HUGE; /* far past anything; keeps the product in range */
        n *= t->storage[d];
    }
    return n > FZ_HUGE ? FZ_HUGE : n;
}

static inline int64_t fz_item_size(aclDataType dtype)
{
    size_t s = aclDataTypeSize(dtype);
    return s ? (int64_t)s : 4;
}

static inline void fz_decode_tensor(fz_bytes *in, fz_case *c, int i, aclDataType case_dtype)
{
    fz_tensor *t = &c->tensor[i];
    memset(t, 0, sizeof *t);
    fz_role_shape(c, i, &t->rank, t->dims);

    /* Shape: keep, change one dim, or another rank with dims of its own. */
    uint8_t shape = fz_u8(in);
    if (shape % 4 == 1) {
        uint8_t d = fz_u8(in);
        t->dims[d % t->rank] = fz_value(in);
    } else if (shape % 4 == 2) {
        t->rank = fz_u8(in) % (FZ_MAX_DIMS + 1);
        for (uint64_t d = 0; d < t->rank; d++) {
            uint8_t v = fz_u8(in);
            t->dims[d] = v == 0 ? (d < 3 ? t->dims[d] : 1) : fz_value_of(in, v);
        }
    }

    /* Strides. */
    int order[FZ_MAX_DIMS];
    for (int d = 0; d < FZ_MAX_DIMS; d++)
        order[d] = d;
    uint8_t smode = fz_u8(in);
    int64_t gap = 0;
    switch (smode % 8) {
    case 1: t->null_strides = true; break;
    case 2: /* another dim order, contiguous in it */
        if (t->rank > 1) {
            uint8_t p = fz_u8(in);
            for (uint64_t d = t->rank; d > 1; d--) {
                uint64_t j = p % d;
                p = (uint8_t)(p / d + 7 * d);
                int tmp = order[d - 1];
                order[d - 1] = order[j], order[j] = tmp;
            }
        }
        break;
    case 3: gap = fz_u8(in) % 5; break;
    default: break;
    }
    fz_dense_strides(t->rank, t->dims, order, gap, t->strides);
    if (t->rank > 0) {
        switch (smode % 8) {
        case 4: { uint8_t d = fz_u8(in); t->strides[d % t->rank] = fz_value(in); break; }
        case 5: for (uint64_t d = 0; d < t->rank; d++) t->strides[d] = fz_value(in); break;
        case 6: t->strides[fz_u8(in) % t->rank] = 0; break;
        case 7: { uint8_t d = fz_u8(in) % t->rank; t->strides[d] = (int64_t)(0 - (uint64_t)t->strides[d]); break; }
        default: break;
        }
    }

    /* Offset. */
    uint8_t off = fz_u8(in);
    t->offset = off == 0 ? 0 : fz_value_of(in, off);

    /* Storage: just what the view needs (1-D, or the view's own dims),
     * less, more, any dims, or a huge 1-D storage. */
    __int128 lowest, last = fz_last_element(t, &lowest);
    int64_t need = last < 0 ? 0 : last >= INT64_MAX ? INT64_MAX : (int64_t)(last + 1);
    uint8_t st = fz_u8(in);
    t->storage_rank = 1;
    t->storage[0] = need;
    switch (st % 6) {
    case 1: t->storage[0] = need - 1 - (fz_u8(in) % 4); break;
    case 2: t->storage[0] = (int64_t)((uint64_t)need + fz_u8(in)); break; /* may wrap, as a caller's sum */
    case 3:
        t->storage_rank = t->rank;
        memcpy(t->storage, t->dims, sizeof t->dims);
        break;
    case 4:
        t->storage_rank = fz_u8(in) % (FZ_MAX_DIMS + 1);
        for (uint64_t d = 0; d < t->storage_rank; d++)
            t->storage[d] = fz_value(in);
        break;
    case 5: t->storage[0] = fz_value(in); break;
    default: break;
    }

    uint8_t dt = fz_u8(in);
    t->dtype = dt == 0 ? case_dtype : FZ_DTYPES[(dt - 1) % FZ_COUNT(FZ_DTYPES)];
    uint8_t fm = fz_u8(in);
    t->format = fm == 0 ? ACL_FORMAT_ND : FZ_FORMATS[(fm - 1) % FZ_COUNT(FZ_FORMATS)];

    uint8_t mem = fz_u8(in);
    t->mem = mem % FZ_MEM_MODES;
    if ((t->mem == FZ_MEM_ALIAS || t->mem == FZ_MEM_SAME) && i == 0)
        t->mem = FZ_MEM_OWN; /* nothing earlier to share */
    switch (t->mem) {
    case FZ_MEM_ALIAS: case FZ_MEM_SAME: t->other = fz_u8(in) % i; break;
    case FZ_MEM_SHORT: t->short_bytes = 1 + fz_u8(in) % 16; break;
    default: break;
    }
    if (t->mem == FZ_MEM_ALIAS || t->mem == FZ_MEM_INSIDE) {
        /* Mostly whole elements in; a set top bit gives any byte count
         * (misaligned addresses). */
        uint8_t v = fz_u8(in);
        t->byte_offset = v & 0x80 ? (v & 0x7f) : (int64_t)(v & 0x7f) * fz_item_size(t->dtype);
    }
}

/* Decodes the whole case; never fails (missing bytes read as 0). */
static inline void fz_decode(const uint8_t *data, size_t size, fz_case *c)
{
    fz_bytes in = {data, size, 0};
    memset(c, 0, sizeof *c);

    uint8_t soc = fz_u8(&in);
    c->soc = FZ_SOCS[soc % FZ_COUNT(FZ_SOCS)];

    /* The convolution; 0 keeps CANN's documented case T 5, B 1, C_in 2,
     * K 1, C_out 2, pad 0, cubeMathType 1, FLOAT. */
    static const int64_t doc[6] = {5, 1, 2, 1, 2, 0};
    int64_t *fields[6] = {&c->t, &c->b, &c->c_in, &c->k, &c->c_out, &c->pad};
    for (int f = 0; f < 6; f++) {
        uint8_t v = fz_u8(&in);
        *fields[f] = v == 0 ? doc[f] : fz_value_of(&in, v);
    }
    uint8_t cube = fz_u8(&in);
    c->cube_math_type = cube == 0 ? 1 : (int8_t)(uint8_t)(cube - 1);
    uint8_t dt = fz_u8(&in);
    static const aclDataType case_dtypes[3] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
    aclDataType case_dtype = case_dtypes[dt % 3];

    uint8_t f1 = fz_u8(&in), f2 = fz_u8(&in), rebind = fz_u8(&in);
    c->repeatable = f1 & 1;
    c->workspace_short = f1 & 2;
    c->workspace_null = f1 & 4;
    c->workspace_size_low = f1 & 8;
    c->null_size_out = f1 & 16;
    c->null_executor_out = f1 & 32;
    c->default_stream = f1 & 64;
    c->destroy_after_phase1 = f1 & 128;
    c->free_after_phase1 = f2 & 1;
    c->free_which = (f2 >> 1) % FZ_TENSORS;
    if (rebind != 0) {
        c->rebind = true;
        c->rebind_which = (rebind - 1) % FZ_TENSORS;
        c->rebind_source = (rebind - 1) / FZ_TENSORS % FZ_REBIND_SOURCES;
    }

    for (int i = 0; i < FZ_TENSORS; i++)
        fz_decode_tensor(&in, c, i, case_dtype);
}

/* ---- findings ----------------------------------------------------------- */

/* Which oracles CONVTBC_FUZZ_IGNORE switched off. */
static inline bool fz_checking(const char *oracle)
{
    const char *list = getenv("CONVTBC_FUZZ_IGNORE");
    size_t n = strlen(oracle);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, oracle, n) == 0)
            return false;
        p = end ? end + 1 : p + len;
    }
    return true;
}

/* Called before abort() (the driver saves its input there). */
static void (*fz_before_abort)(void);

static void fz_describe(FILE *out, const fz_case *c);

static inline void fz_finding(const fz_case *c, const char *oracle, const char *fmt, ...)
{
    if (!fz_checking(oracle))
        return;
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "FUZZ FINDING (%s): ", oracle);
    vfprintf(stderr, fmt, args);
    fprintf(stderr, "\n");
    va_end(args);
    fz_describe(stderr, c);
    fflush(stderr);
    if (fz_before_abort)
        fz_before_abort();
    abort();
}

static inline void fz_list(FILE *out, const int64_t *v, uint64_t n)
{
    fprintf(out, "[");
    for (uint64_t i = 0; i < n; i++)
        fprintf(out, i ? ", %lld" : "%lld", (long long)v[i]);
    fprintf(out, "]");
}

static void fz_describe(FILE *out, const fz_case *c)
{
    static const char *const mems[FZ_MEM_MODES] = {"own", "NULL address", "short", "alias", "same tensor as",
                                                   "NULL tensor", "inside", "freed"};
    fprintf(out, "  case: soc %s, T %lld, B %lld, C_in %lld, K %lld, C_out %lld, pad %lld, cubeMathType %d%s%s%s%s%s%s%s%s",
            c->soc, (long long)c->t, (long long)c->b, (long long)c->c_in, (long long)c->k, (long long)c->c_out,
            (long long)c->pad, (int)c->cube_math_type, c->repeatable ? ", repeatable" : "",
            c->workspace_short ? ", workspace short" : "", c->workspace_null ? ", workspace NULL" : "",
            c->workspace_size_low ? ", workspaceSize low" : "", c->null_size_out ? ", NULL workspaceSize out" : "",
            c->null_executor_out ? ", NULL executor out" : "", c->default_stream ? ", default stream" : "",
            c->destroy_after_phase1 ? ", tensors destroyed after phase 1" : "");
    if (c->free_after_phase1)
        fprintf(out, ", %s's block freed after phase 1", FZ_NAMES[c->free_which]);
    if (c->rebind) {
        static const char *const sources[FZ_REBIND_SOURCES] = {"NULL", "the next tensor's address",
                                                               "its address + 1 element", "a fresh block"};
        fprintf(out, ", %s rebound to %s%s", FZ_NAMES[c->rebind_which], sources[c->rebind_source],
                c->repeatable && !c->destroy_after_phase1 ? "" : " (not done: needs a repeatable executor and live "
                                                                  "tensors)");
    }
    fprintf(out, "\n");
    for (int i = 0; i < FZ_TENSORS; i++) {
        const fz_tensor *t = &c->tensor[i];
        fprintf(out, "  %-10s dims ", FZ_NAMES[i]);
        fz_list(out, t->dims, t->rank);
        fprintf(out, " strides ");
        if (t->null_strides)
            fprintf(out, "NULL");
        else
            fz_list(out, t->strides, t->rank);
        fprintf(out, " offset %lld storage ", (long long)t->offset);
        fz_list(out, t->storage, t->storage_rank);
        fprintf(out, " dtype %d format %d memory %s", (int)t->dtype, (int)t->format, mems[t->mem]);
        if (t->mem == FZ_MEM_ALIAS || t->mem == FZ_MEM_SAME)
            fprintf(out, " %s", FZ_NAMES[t->other]);
        if (t->mem == FZ_MEM_ALIAS || t->mem == FZ_MEM_INSIDE)
            fprintf(out, " +%lld bytes", (long long)t->byte_offset);
        if (t->mem == FZ_MEM_SHORT)
            fprintf(out, " by %lld bytes", (long long)t->short_bytes);
        fprintf(out, "\n");
    }
}

/* ---- running a case ------------------------------------------------------ */

typedef struct {
    void *device;    /* aclrtMalloc's address */
    int64_t size;
    bool live;       /* not freed yet */
    uint8_t *marks;  /* per byte: bit i set when tensor i's view covers it (made on first use) */
    uint8_t marked;  /* bit i set when tensor i's view is in this block */
} fz_block;

/* The harness's own loops over bytes and elements are kept out of the
 * fuzzer's coverage: their comparisons say nothing about the library and,
 * traced, they would cost most of the time. */
#if defined(__clang__)
#define FZ_UNTRACED __attribute__((no_sanitize("coverage"), noinline))
#else
#define FZ_UNTRACED __attribute__((noinline))
#endif

/* One block per tensor, the workspace, and a block for a rebound address. */
enum { FZ_WORKSPACE_BLOCK = FZ_TENSORS, FZ_REBOUND_BLOCK, FZ_BLOCKS };
static const char *const FZ_BLOCK_NAMES[FZ_BLOCKS] = {"self", "input", "weight", "bias", "gradInput", "gradWeight",
                                                      "gradBias", "workspace", "rebound"};

typedef struct {
    fz_case c;
    fz_block block[FZ_BLOCKS];
    int64_t allocated;
    aclTensor *tensor[FZ_TENSORS];
    bool owner[FZ_TENSORS]; /* this argument created its aclTensor (destroy it once) */
    void *address[FZ_TENSORS];
    char message[1024]; /* the last refusal's message */
} fz_run;

/* What a case reached, for the driver's statistics. */
enum { FZ_SKIPPED, FZ_REFUSED_AT_PHASE1, FZ_PHASE1_OK, FZ_PHASE2_REFUSED, FZ_PHASE2_OK, FZ_OUTCOMES };

static aclrtStream fz_stream;

/* Once per process. Device memory is left unguarded unless the environment
 * asks otherwise: guarded blocks are page mappings AddressSanitizer knows
 * nothing about, plain ones (posix_memalign) have its redzones around them,
 * so an access past a block is reported where it happens. */
static inline void fz_init(void)
{
    setenv("CONVTBC_GUARD_DEVICE_MEMORY", "0", 0);
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS ||
        aclrtCreateStream(&fz_stream) != ACL_SUCCESS) {
        fprintf(stderr, "fuzz: runtime setup failed: %s\n", aclGetRecentErrMsg());
        abort();
    }
}

static inline void fz_shutdown(void)
{
    aclrtDestroyStream(fz_stream);
    aclrtResetDevice(0);
    aclFinalize();
}

static inline void fz_forget_messages(void) { (void)aclGetRecentErrMsg(); }

/* A refused call must say why, naming itself. */
static inline void fz_expect_message(fz_run *r, const char *api, int status)
{
    const char *msg = aclGetRecentErrMsg();
    snprintf(r->message, sizeof r->message, "%d %s", status, msg ? msg : "(no message)");
    if (!msg || !strstr(msg, api))
        fz_finding(&r->c, "message", "%s returned %d with %s%s", api, status,
                   msg ? "a message not naming it: " : "no message", msg ? msg : "");
}

/* What a block holds before the run: bytes that differ from their
 * neighbours (so a copy from elsewhere shows too), shifted per block. */
static uint8_t fz_pattern_bytes[FZ_BLOCK_CAP + 256];

FZ_UNTRACED static const uint8_t *fz_pattern(int block)
{
    if (!fz_pattern_bytes[1])
        for (size_t i = 0; i < sizeof fz_pattern_bytes; i++)
            fz_pattern_bytes[i] = (uint8_t)((i * 131u) ^ 0x5au);
    return fz_pattern_bytes + (block * 37) % 256;
}

static inline void fz_alloc(fz_run *r, int b, int64_t bytes, int64_t at_least)
{
    fz_block *blk = &r->block[b];
    if (bytes < at_least)
        bytes = at_least;
    if (bytes > FZ_BLOCK_CAP)
        bytes = FZ_BLOCK_CAP;
    if (r->allocated + bytes > FZ_TOTAL_CAP)
        return; /* over budget: this tensor goes without memory */
    if (aclrtMalloc(&blk->device, (size_t)bytes, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        blk->device = NULL;
        fz_forget_messages();
        return;
    }
    r->allocated += bytes;
    blk->size = bytes;
    blk->live = true;
    if (aclrtMemcpy(blk->device, (size_t)bytes, fz_pattern(b), (size_t)bytes, ACL_MEMCPY_HOST_TO_DEVICE) !=
        ACL_SUCCESS) {
        fprintf(stderr, "fuzz: filling a block failed: %s\n", aclGetRecentErrMsg());
        abort();
    }
}

static inline void fz_free_block(fz_run *r, int b)
{
    fz_block *blk = &r->block[b];
    if (blk->device && blk->live) {
        if (aclrtFree(blk->device) != ACL_SUCCESS) {
            fprintf(stderr, "fuzz: aclrtFree failed: %s\n", aclGetRecentErrMsg());
            abort();
        }
        blk->live = false;
    }
}

/* The live block whose bytes [a, a + n) lie in, or -1. */
static inline int fz_block_holding(const fz_run *r, uintptr_t a, __int128 n)
{
    for (int b = 0; b < FZ_BLOCKS; b++) {
        const fz_block *blk = &r->block[b];
        uintptr_t start = (uintptr_t)blk->device;
        if (blk->device && blk->live && a >= start && a - start < (uintptr_t)blk->size)
            return n <= (__int128)(start + (uintptr_t)blk->size - a) ? b : -1;
    }
    return -1;
}

/* Where the view's element [0..0] and its end lie, if it has elements and an
 * address and its byte range is representable: *start, *bytes. */
static inline bool fz_view_range(const fz_run *r, int i, uintptr_t *start, __int128 *bytes)
{
    const fz_tensor *t = &r->c.tensor[i];
    if (!r->address[i])
        return false;
    __int128 lowest, last = fz_last_element(t, &lowest);
    if (last < 0)
        return false;
    __int128 item = fz_item_size(t->dtype);
    __int128 first_byte = (__int128)(uintptr_t)r->address[i] + lowest * item;
    __int128 end_byte = (__int128)(uintptr_t)r->address[i] + (last + 1) * item;
    if (first_byte < 0 || end_byte > (__int128)UINTPTR_MAX)
        return false;
    *start = (uintptr_t)first_byte;
    *bytes = end_byte - first_byte;
    return true;
}

/* Marks every byte of tensor i's elements in the block that holds its
 * view. Returns false when it cannot: the view lies outside every live
 * block, or has too many distinct elements to walk (only an input can:
 * phase 1 refuses outputs whose elements share addresses). */
FZ_UNTRACED static bool fz_mark_view(fz_run *r, int i)
{
    const fz_tensor *t = &r->c.tensor[i];
    uintptr_t start;
    __int128 bytes;
    if (!fz_view_range(r, i, &start, &bytes))
        return true; /* no element, or no address: nothing to mark */
    int b = fz_block_holding(r, start, bytes);
    if (b < 0)
        return false;
    /* A dim of stride 0 repeats the same addresses: walk it once. */
    int64_t dims[FZ_MAX_DIMS];
    __int128 walk = 1;
    for (uint64_t d = 0; d < t->rank; d++) {
        dims[d] = t->strides[d] == 0 ? 1 : t->dims[d];
        walk *= dims[d];
        if (walk > ((__int128)1 << 20))
            return false;
    }
    fz_block *blk = &r->block[b];
    if (!blk->marks)
        blk->marks = calloc((size_t)blk->size, 1);
    blk->marked |= (uint8_t)(1u << i);
    int64_t item = fz_item_size(t->dtype);
    int64_t base = (int64_t)((uintptr_t)r->address[i] - (uintptr_t)blk->device); /* may be negative */
    int64_t idx[FZ_MAX_DIMS] = {0};
    for (;;) {
        int64_t e = t->offset;
        for (uint64_t d = 0; d < t->rank; d++)
            e += idx[d] * t->strides[d];
        for (int64_t k = 0; k < item; k++)
            blk->marks[base + e * item + k] |= (uint8_t)(1u << i);
        uint64_t d = t->rank;
        while (d > 0 && ++idx[d - 1] == dims[d - 1])
            idx[--d] = 0;
        if (d == 0)
            break;
    }
    return true;
}

/* Marks the views of all tensors the op reads or writes (bias is not
 * read), afresh. Views that cannot be walked are left out; returns false
 * if that left out an output (then the byte check cannot run). */
static inline bool fz_mark_views(fz_run *r)
{
    for (int b = 0; b < FZ_BLOCKS; b++) {
        if (r->block[b].marks)
            memset(r->block[b].marks, 0, (size_t)r->block[b].size);
        r->block[b].marked = 0;
    }
    bool outputs_marked = true;
    for (int i = 0; i < FZ_TENSORS; i++)
        if (i != FZ_BIAS && !fz_mark_view(r, i) && i >= FZ_GRAD_INPUT)
            outputs_marked = false;
    return outputs_marked;
}

/* The strides the library records: the given ones, or CANN's defaults. */
static inline void fz_effective_strides(fz_tensor *t)
{
    if (!t->null_strides)
        return;
    int64_t step = 1;
    for (uint64_t i = t->rank; i-- > 0;) {
        t->strides[i] = step;
        (void)__builtin_mul_overflow(step, t->dims[i], &step);
    }
}

/* Phase 1's contract beyond CANN's own checks (docs/emulation.md): each
 * view with elements has strides >= 0, an offset >= 0, and lies inside its
 * storage of non-negative dims, with the element count, the last element
 * and its byte end all inside int64_t. */
static inline const char *fz_view_problem(const fz_tensor *t)
{
    __int128 lowest, last = fz_last_element(t, &lowest);
    if (last < 0)
        return NULL;
    __int128 numel = 1;
    for (uint64_t d = 0; d < t->rank; d++) {
        numel *= t->dims[d];
        if (numel > INT64_MAX)
            return "more elements than int64_t counts";
    }
    for (uint64_t d = 0; d < t->rank; d++)
        if (t->strides[d] < 0)
            return "a negative stride";
    if (t->offset < 0)
        return "a negative offset";
    __int128 storage = fz_storage_elements(t);
    if (storage < 0)
        return "a negative storage dim";
    if (storage > INT64_MAX)
        return "a storage with more elements than int64_t counts";
    if (last >= storage)
        return "elements outside its storage";
    if ((last + 1) * fz_item_size(t->dtype) > INT64_MAX)
        return "a byte end beyond int64_t";
    return NULL;
}

/* Roughly the multiply-adds of a run; each factor is capped first, so the
 * product stays in 128 bits and is still above FZ_WORK_CAP when it should. */
static inline __int128 fz_capped(__int128 v) { return v < 0 ? 0 : v > 2 * FZ_WORK_CAP ? 2 * FZ_WORK_CAP : v; }

static inline __int128 fz_work(const fz_case *c)
{
    const fz_tensor *x = &c->tensor[FZ_INPUT], *w = &c->tensor[FZ_WEIGHT];
    __int128 t_out = fz_capped((__int128)x->dims[0] + 2 * (__int128)c->pad + 1 - w->dims[0]);
    __int128 b = fz_capped(x->dims[1]), c_in = fz_capped(x->dims[2]), k = fz_capped(w->dims[0]);
    __int128 c_out = fz_capped(w->dims[2]), t = fz_capped(x->dims[0]);
    /* gradBias and packing self, the three products, packing input. */
    return t_out * b * c_out + 3 * t_out * b * c_out * k * c_in + t * b * c_in;
}

/* What phase 2 must do with a run. */
enum { FZ_MUST_REFUSE, FZ_MAY_EITHER, FZ_MUST_ACCEPT };

/* Phase 2 must refuse a run with a view outside one live block or a wrong
 * workspace, and accept it otherwise; a view at an address that is not a
 * multiple of its element size may go either way (refusing it is one fix,
 * reading it bytewise another). *why says what is wrong. */
static inline int fz_phase2_expectation(const fz_run *r, uint64_t ws_size, uint64_t ws_passed, void *ws,
                                        int64_t ws_block, const char **why)
{
    if (ws_size > 0 && !ws) {
        *why = "NULL workspace";
        return FZ_MUST_REFUSE;
    }
    if (ws_passed < ws_size) {
        *why = "workspaceSize below phase 1's";
        return FZ_MUST_REFUSE;
    }
    bool misaligned = false;
    for (int i = 0; i < FZ_TENSORS; i++) {
        if (i == FZ_BIAS)
            continue; /* not read by the backward pass, not checked */
        __int128 lowest, last = fz_last_element(&r->c.tensor[i], &lowest);
        if (last < 0)
            continue;
        uintptr_t start;
        __int128 bytes;
        if (!r->address[i] || !fz_view_range(r, i, &start, &bytes) || fz_block_holding(r, start, bytes) < 0) {
            *why = FZ_NAMES[i];
            return FZ_MUST_REFUSE;
        }
        misaligned |= (uintptr_t)r->address[i] % (uintptr_t)fz_item_size(r->c.tensor[i].dtype) != 0;
    }
    if (ws_size > 0 && (ws_block < 0 || (uint64_t)r->block[ws_block].size < ws_size)) {
        *why = "workspace outside its block";
        return FZ_MUST_REFUSE;
    }
    return misaligned ? FZ_MAY_EITHER : FZ_MUST_ACCEPT;
}

/* The first byte of a block that changed outside the views in `allowed`,
 * or -1. */
FZ_UNTRACED static int64_t fz_changed_byte(const fz_block *blk, const uint8_t *now, const uint8_t *before,
                                                  uint8_t allowed)
{
    if (memcmp(now, before, (size_t)blk->size) == 0)
        return -1;
    for (int64_t k = 0; k < blk->size; k++)
        if (now[k] != before[k] && !(blk->marks && (blk->marks[k] & allowed)))
            return k;
    return -1;
}

/* After phase 2 ran (or refused): nothing outside the output views may have
 * changed. */
static inline void fz_check_bytes(fz_run *r, bool outputs_written)
{
    uint8_t written = outputs_written ? (uint8_t)((1u << FZ_GRAD_INPUT) | (1u << FZ_GRAD_WEIGHT) | (1u << FZ_GRAD_BIAS))
                                      : 0;
    for (int b = 0; b < FZ_BLOCKS; b++) {
        fz_block *blk = &r->block[b];
        if (b == FZ_WORKSPACE_BLOCK || !blk->device || !blk->live)
            continue;
        uint8_t *now = malloc((size_t)blk->size);
        if (aclrtMemcpy(now, (size_t)blk->size, blk->device, (size_t)blk->size, ACL_MEMCPY_DEVICE_TO_HOST) !=
            ACL_SUCCESS) {
            fprintf(stderr, "fuzz: reading a block back failed: %s\n", aclGetRecentErrMsg());
            abort();
        }
        int64_t at = fz_changed_byte(blk, now, fz_pattern(b), written);
        free(now);
        if (at >= 0)
            fz_finding(&r->c, "bytes", "byte %lld of %s's block (%lld bytes) changed, outside every output view%s",
                       (long long)at, FZ_BLOCK_NAMES[b], (long long)blk->size,
                       outputs_written ? "" : " (the call was refused)");
    }
}

/* The first byte that an output shares with another view of the op, or
 * -1; *first and *second name the two. */
FZ_UNTRACED static int64_t fz_shared_byte(const fz_block *blk, int *first, int *second)
{
    const uint8_t outputs = (1u << FZ_GRAD_INPUT) | (1u << FZ_GRAD_WEIGHT) | (1u << FZ_GRAD_BIAS);
    uint8_t m = blk->marked;
    if (!(m & outputs) || !(m & (m - 1)))
        return -1; /* no output here, or only one view */
    for (int64_t k = 0; k < blk->size; k++) {
        m = blk->marks[k];
        if ((m & outputs) && (m & (m - 1))) {
            *first = __builtin_ctz(m);
            *second = __builtin_ctz(m & (m - 1));
            return k;
        }
    }
    return -1;
}

static inline void fz_release(fz_run *r)
{
    for (int i = 0; i < FZ_TENSORS; i++)
        if (r->owner[i] && r->tensor[i])
            aclDestroyTensor(r->tensor[i]);
    for (int b = 0; b < FZ_BLOCKS; b++) {
        fz_free_block(r, b);
        free(r->block[b].marks);
    }
    fz_forget_messages();
}

/* A call whose views are all valid but whose convolution has a dim, or
 * pad, above 2^32: phase 1 plans it, and issue 11's fuzzing found the
 * workspace arithmetic of that plan overflowing (UBSan). "huge-problem" in
 * CONVTBC_FUZZ_IGNORE skips these inputs. */
static inline bool fz_huge_problem(const fz_run *r)
{
    for (int i = 0; i < FZ_TENSORS; i++)
        if (!r->tensor[i] || fz_view_problem(&r->c.tensor[i]))
            return false; /* refused before any planning */
    const int64_t limit = (int64_t)1 << 32;
    if (r->c.pad > limit)
        return true;
    for (int i = 0; i < FZ_TENSORS; i++)
        for (uint64_t d = 0; d < r->c.tensor[i].rank; d++)
            if (r->c.tensor[i].dims[d] > limit)
                return true;
    return false;
}

/* Gives one tensor of a repeatable executor a new address, as
 * aclSet{Input,Output}TensorAddr do between runs of CANN programs. */
static inline void fz_rebind(fz_run *r, aclOpExecutor *executor)
{
    fz_case *c = &r->c;
    int i = c->rebind_which;
    const fz_tensor *t = &c->tensor[i];
    uintptr_t a = 0;
    switch (c->rebind_source) {
    case FZ_REBIND_NEXT_TENSOR: a = (uintptr_t)r->address[(i + 1) % FZ_TENSORS]; break;
    case FZ_REBIND_ONE_ELEMENT_ON:
        a = r->address[i] ? (uintptr_t)r->address[i] + (uintptr_t)fz_item_size(t->dtype) : 0;
        break;
    case FZ_REBIND_FRESH_BLOCK: {
        __int128 storage = fz_storage_elements(t), bytes = storage < 0 ? 0 : storage * fz_item_size(t->dtype);
        fz_alloc(r, FZ_REBOUND_BLOCK, bytes > FZ_BLOCK_CAP ? FZ_BLOCK_CAP : (int64_t)bytes, 16);
        a = (uintptr_t)r->block[FZ_REBOUND_BLOCK].device;
        break;
    }
    default: break;
    }
    if (!fz_checking("misaligned"))
        a -= a % (uintptr_t)fz_item_size(t->dtype);
    fz_forget_messages();
    aclnnStatus st = i < FZ_GRAD_INPUT
                         ? aclSetInputTensorAddr(executor, (size_t)i, r->tensor[i], (void *)a)
                         : aclSetOutputTensorAddr(executor, (size_t)(i - FZ_GRAD_INPUT), r->tensor[i], (void *)a);
    if (st != ACLNN_SUCCESS)
        fz_finding(c, "spurious", "setting %s's address of a live repeatable executor failed (%d): %s", FZ_NAMES[i],
                   st, aclGetRecentErrMsg());
    r->address[i] = (void *)a;
}

/* Runs one decoded input; returns what it reached (FZ_REFUSED_AT_PHASE1, ...). */
static inline int fz_run_case(fz_run *r)
{
    fz_case *c = &r->c;
    fz_forget_messages();
    if (convtbcSetSocVersion(c->soc) != ACL_SUCCESS) {
        fprintf(stderr, "fuzz: unknown SoC %s\n", c->soc);
        abort();
    }

    /* Memory first (so that a freed block cannot come back as a later
     * one), then tensors. */
    for (int i = 0; i < FZ_TENSORS; i++) {
        fz_tensor *t = &c->tensor[i];
        if (t->mem != FZ_MEM_OWN && t->mem != FZ_MEM_SHORT && t->mem != FZ_MEM_INSIDE && t->mem != FZ_MEM_FREED)
            continue;
        __int128 storage = fz_storage_elements(t), bytes = storage < 0 ? 0 : storage * fz_item_size(t->dtype);
        if (t->mem == FZ_MEM_SHORT)
            bytes -= t->short_bytes;
        if (t->mem == FZ_MEM_INSIDE)
            bytes += t->byte_offset;
        /* At least 16 bytes: a real address even for an empty view. */
        fz_alloc(r, i, bytes > FZ_BLOCK_CAP ? FZ_BLOCK_CAP : (int64_t)(bytes < 0 ? 0 : bytes), 16);
    }
    for (int i = 0; i < FZ_TENSORS; i++) {
        fz_tensor *t = &c->tensor[i];
        uintptr_t a = 0;
        switch (t->mem) {
        case FZ_MEM_OWN: case FZ_MEM_SHORT: case FZ_MEM_FREED: a = (uintptr_t)r->block[i].device; break;
        case FZ_MEM_INSIDE:
            a = r->block[i].device ? (uintptr_t)r->block[i].device + (uintptr_t)t->byte_offset : 0;
            break;
        case FZ_MEM_ALIAS:
            a = r->address[t->other] ? (uintptr_t)r->address[t->other] + (uintptr_t)t->byte_offset : 0;
            break;
        default: break;
        }
        /* Misaligned addresses (issue 11's fuzzing found the compute loading
         * floats from them) only while that is checked. */
        if (!fz_checking("misaligned"))
            a -= a % (uintptr_t)fz_item_size(t->dtype);
        r->address[i] = (void *)a;
    }
    for (int i = 0; i < FZ_TENSORS; i++)
        if (c->tensor[i].mem == FZ_MEM_FREED)
            fz_free_block(r, i);

    for (int i = 0; i < FZ_TENSORS; i++) {
        fz_tensor *t = &c->tensor[i];
        if (t->mem == FZ_MEM_NO_TENSOR)
            continue;
        if (t->mem == FZ_MEM_SAME) {
            int other = t->other;
            r->tensor[i] = r->tensor[other];
            r->address[i] = r->address[other];
            *t = c->tensor[other]; /* the same view, as far as the oracles go */
            t->mem = FZ_MEM_SAME, t->other = other;
            continue;
        }
        r->tensor[i] = aclCreateTensor(t->dims, t->rank, t->dtype, t->null_strides ? NULL : t->strides, t->offset,
                                       t->format, t->storage, t->storage_rank, r->address[i]);
        r->owner[i] = true;
        if (!r->tensor[i])
            fz_expect_message(r, "aclCreateTensor", ACLNN_ERR_PARAM_INVALID);
        fz_effective_strides(t);
    }

    if (!fz_checking("huge-problem") && fz_huge_problem(r)) {
        fz_release(r);
        return FZ_SKIPPED;
    }

    uint64_t ws_size = 0;
    aclOpExecutor *executor = NULL;
    fz_forget_messages();
    aclnnStatus st = aclnnConvTbcBackwardGetWorkspaceSize(
        r->tensor[FZ_SELF], r->tensor[FZ_INPUT], r->tensor[FZ_WEIGHT], r->tensor[FZ_BIAS], c->pad, c->cube_math_type,
        r->tensor[FZ_GRAD_INPUT], r->tensor[FZ_GRAD_WEIGHT], r->tensor[FZ_GRAD_BIAS],
        c->null_size_out ? NULL : &ws_size, c->null_executor_out ? NULL : &executor);
    if (st != ACLNN_SUCCESS) {
        fz_expect_message(r, "aclnnConvTbcBackwardGetWorkspaceSize", st);
        fz_release(r);
        return FZ_REFUSED_AT_PHASE1;
    }
    if (c->null_size_out || c->null_executor_out)
        fz_finding(c, "message", "phase 1 accepted a NULL workspaceSize or executor pointer");

    /* Phase 1 accepted: every view must be one it can use safely ... */
    for (int i = 0; i < FZ_TENSORS; i++) {
        const char *problem = fz_view_problem(&c->tensor[i]);
        if (problem)
            fz_finding(c, "storage", "phase 1 accepted %s with %s", FZ_NAMES[i], problem);
    }
    /* ... and no output may share a byte with an input it reads or with
     * another output. */
    bool outputs_marked = fz_mark_views(r);
    for (int b = 0; b < FZ_BLOCKS; b++) {
        int first, second;
        int64_t k = fz_shared_byte(&r->block[b], &first, &second);
        if (k >= 0)
            fz_finding(c, "alias", "phase 1 accepted %s and %s sharing byte %lld of %s's block", FZ_NAMES[first],
                       FZ_NAMES[second], (long long)k, FZ_BLOCK_NAMES[b]);
    }

    /* Phase 2 only for work a fuzzer can afford; the executor is freed
     * either way. */
    if (ws_size > (uint64_t)(FZ_TOTAL_CAP - r->allocated) || fz_work(c) > FZ_WORK_CAP) {
        aclDestroyAclOpExecutor(executor);
        fz_release(r);
        return FZ_PHASE1_OK;
    }
    void *ws = NULL;
    int ws_block = -1;
    if (ws_size > 0 && !c->workspace_null) {
        fz_alloc(r, FZ_WORKSPACE_BLOCK, (int64_t)ws_size - (c->workspace_short ? 1 : 0), 1);
        ws = r->block[FZ_WORKSPACE_BLOCK].device;
        ws_block = ws ? FZ_WORKSPACE_BLOCK : -1;
    }
    uint64_t ws_passed = c->workspace_size_low && ws_size > 0 ? ws_size - 1 : ws_size;
    if (c->repeatable && aclSetAclOpExecutorRepeatable(executor) != ACLNN_SUCCESS)
        fz_finding(c, "spurious", "aclSetAclOpExecutorRepeatable refused a fresh executor: %s", aclGetRecentErrMsg());
    bool rebound = c->rebind && c->repeatable && !c->destroy_after_phase1;
    if (rebound) {
        fz_rebind(r, executor);
        outputs_marked = fz_mark_views(r);
    }
    if (c->free_after_phase1)
        fz_free_block(r, c->free_which);
    if (c->destroy_after_phase1) {
        for (int i = 0; i < FZ_TENSORS; i++)
            if (r->owner[i] && r->tensor[i])
                aclDestroyTensor(r->tensor[i]);
        memset(r->owner, 0, sizeof r->owner);
    }
    /* A view's block may have been freed or be too small (the storage
     * outgrows the capped block); the run must then be refused. */
    const char *why = NULL;
    int expected = fz_phase2_expectation(r, ws_size, ws_passed, ws, ws_block, &why);
    if (rebound && expected == FZ_MUST_ACCEPT)
        for (int b = 0; b < FZ_BLOCKS; b++) {
            int first, second;
            if (fz_shared_byte(&r->block[b], &first, &second) >= 0)
                expected = FZ_MAY_EITHER; /* a rebound address made an alias: refusing it is fine too */
        }
    aclrtStream stream = c->default_stream ? NULL : fz_stream;

    int outcome = FZ_PHASE2_REFUSED;
    for (int round = 0; round < (c->repeatable ? 2 : 1); round++) {
        fz_forget_messages();
        st = aclnnConvTbcBackward(ws, ws_passed, executor, stream);
        if (st != ACLNN_SUCCESS) {
            fz_expect_message(r, "aclnnConvTbcBackward", st);
            if (expected == FZ_MUST_ACCEPT)
                fz_finding(c, "spurious", "phase 2 refused a run whose views all lie in live blocks (status %d): %s",
                           st, aclGetRecentErrMsg());
            break;
        }
        if (expected == FZ_MUST_REFUSE)
            fz_finding(c, "device", "phase 2 accepted a run it should refuse (%s is not inside one live block or "
                       "the workspace is wrong)", why);
        aclError sync = aclrtSynchronizeStream(stream);
        if (sync != ACL_SUCCESS)
            fz_finding(c, "device", "aclrtSynchronizeStream after an accepted run returned %d: %s", sync,
                       aclGetRecentErrMsg());
        outcome = FZ_PHASE2_OK;
    }
    if (outcome == FZ_PHASE2_REFUSED || c->repeatable)
        aclDestroyAclOpExecutor(executor); /* refused runs leave it live */
    if (outputs_marked || outcome != FZ_PHASE2_OK)
        fz_check_bytes(r, outcome == FZ_PHASE2_OK);
    fz_release(r);
    return outcome;
}

/* Runs one input. With CONVTBC_FUZZ_VERBOSE=1 it prints what the bytes
 * decoded to and how far the call went, and the refusal's message. */
static inline int fz_run_input(const uint8_t *data, size_t size)
{
    static const char *const outcome_names[FZ_OUTCOMES] = {"skipped (an ignored open defect)", "refused at phase 1",
                                                          "phase 1 only (phase 2 skipped)", "refused at phase 2",
                                                          "run"};
    fz_run run;
    memset(&run, 0, sizeof run);
    fz_decode(data, size, &run.c);
    const char *verbose = getenv("CONVTBC_FUZZ_VERBOSE");
    if (verbose && strcmp(verbose, "1") == 0)
        fz_describe(stderr, &run.c);
    int outcome = fz_run_case(&run);
    if (verbose && strcmp(verbose, "1") == 0)
        fprintf(stderr, "  outcome: %s%s%s\n", outcome_names[outcome], run.message[0] ? "; last refusal: " : "",
                run.message);
    return outcome;
}

#endif /* CONVTBC_TESTS_FUZZ_CONV_TBC_CASE_H */
