/*
 * convtbc extensions: calls that CANN does not have, for tests and for the
 * Python bindings. Nothing here is needed to run code written for CANN.
 */
#ifndef CONVTBC_CONVTBC_EXT_H
#define CONVTBC_CONVTBC_EXT_H

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checked device memory (on unless CONVTBC_CHECK_MEMORY=0): tensor data,
 * workspaces and aclrtMemcpy/aclrtMemset ranges must lie in live aclrtMalloc
 * blocks. enabled 0 turns the checks off, 1 on; returns the previous
 * setting. Independent of the guard below. */
ACL_FUNC_VISIBILITY int convtbcSetMemoryChecking(int enabled);

/* The device-memory guard (on unless CONVTBC_GUARD_DEVICE_MEMORY=0): the
 * addresses aclrtMalloc and its variants return cannot be loaded from or
 * stored to by the host, as on the NPU; a host access ends the process with
 * a message naming the allocation. enabled 0 makes every guarded block
 * host-accessible until the guard is turned on again, 1 guards them (and
 * blocks allocated from then on); returns the previous setting. Blocks
 * allocated while the guard was off because of the environment variable
 * stay host-accessible. */
ACL_FUNC_VISIBILITY int convtbcSetDeviceMemoryGuard(int enabled);

/* Lets host memory [ptr, ptr + size) stand for device memory until it is
 * forgotten, so that code which owns host buffers (the numpy bindings) can
 * pass them without copies while checking stays on for everything else.
 * Declarations nest: each declare needs one forget with the same ptr. */
ACL_FUNC_VISIBILITY aclError convtbcDeclareHostMemory(const void *ptr, size_t size);
ACL_FUNC_VISIBILITY aclError convtbcForgetHostMemory(const void *ptr);

/* Selects the emulated SoC by name (see aclrtGetSocName), overriding
 * CONVTBC_SOC_VERSION; ACL_ERROR_INVALID_PARAM for an unknown name. */
ACL_FUNC_VISIBILITY aclError convtbcSetSocVersion(const char *socName);

/* Waits for the work queued on the calling thread's default stream (the
 * NULL stream) when it has a current context; returns ACL_SUCCESS at once
 * otherwise. Needs no aclInit. */
ACL_FUNC_VISIBILITY aclError convtbcSynchronizeCurrent(void);

/* What an aclScalar holds: its dtype and the bytes aclCreateScalar copied
 * (the dtype's size; 1 for the 8-, 6- and 4-bit floats). *valueSize gives
 * the room at value and returns the bytes written. CANN has no such
 * getter; tests and bindings use it to read a scalar back. */
ACL_FUNC_VISIBILITY aclnnStatus convtbcGetScalar(const aclScalar *scalar, aclDataType *dataType, void *value,
                                                 size_t *valueSize);

/* One operand of convtbcConvTbcBackwardOnHost: what aclCreateTensor would
 * be given for a view of host memory with ND format and 1-D storage. */
typedef struct {
    void *data;               /* storage start (aclCreateTensor's tensorData) */
    int64_t storage_elements; /* storage length, in elements */
    int64_t offset;           /* view offset into the storage, in elements */
    aclDataType dtype;
    uint64_t rank;            /* dims used, at most 8 */
    int64_t dims[8];
    int64_t strides[8];       /* in elements */
} convtbcHostTensor;

/* aclnnConvTbcBackward in one synchronous call on host memory: builds the
 * tensors, runs both phases with a workspace of its own and returns when
 * the gradients are written, on the calling thread whatever its context.
 * Statuses and messages are those of aclCreateTensor (ACLNN_ERR_PARAM_INVALID
 * for a tensor it refuses) and of the two phases; nothing is written when
 * phase 1 refuses. A NULL operand is passed to phase 1 as a NULL tensor.
 * It first drops the calling thread's pending error messages, so that
 * after a failure aclGetRecentErrMsg holds this call's messages only.
 * The numpy bindings call this: one crossing into C per call. */
ACL_FUNC_VISIBILITY aclnnStatus convtbcConvTbcBackwardOnHost(
    const convtbcHostTensor *self, const convtbcHostTensor *input, const convtbcHostTensor *weight,
    const convtbcHostTensor *bias, int64_t pad, int8_t cubeMathType, const convtbcHostTensor *gradInput,
    const convtbcHostTensor *gradWeight, const convtbcHostTensor *gradBias);

/* aclnnConvTbc (the forward op) the same way: out = conv_tbc(self, weight,
 * bias, pad), both phases on host memory in one synchronous call. */
ACL_FUNC_VISIBILITY aclnnStatus convtbcConvTbcOnHost(const convtbcHostTensor *self, const convtbcHostTensor *weight,
                                                     const convtbcHostTensor *bias, int64_t pad, int8_t cubeMathType,
                                                     const convtbcHostTensor *out);

/* CPU features in convtbcCpuInfo.features; each bit's name, lower-cased
 * after CONVTBC_CPU_, is the flag Linux shows in /proc/cpuinfo. */
#define CONVTBC_CPU_AVX 0x1
#define CONVTBC_CPU_AVX2 0x2
#define CONVTBC_CPU_FMA 0x4
#define CONVTBC_CPU_F16C 0x8
#define CONVTBC_CPU_AVX512F 0x10
#define CONVTBC_CPU_AVX512DQ 0x20
#define CONVTBC_CPU_AVX512BW 0x40
#define CONVTBC_CPU_AVX512VL 0x80
#define CONVTBC_CPU_AVX512_BF16 0x100
#define CONVTBC_CPU_AVX512_FP16 0x200
#define CONVTBC_CPU_AMX_TILE 0x400
#define CONVTBC_CPU_AMX_BF16 0x800

/* The CPU convtbc runs on and what it chose to run there. Strings end in
 * NUL; sizes are in bytes, 0 when the CPU does not report them. */
typedef struct {
    char vendor[16];    /* CPUID vendor, e.g. "GenuineIntel"; "" off x86 */
    char model[64];     /* brand string; "" if the CPU has none */
    uint64_t features;  /* CONVTBC_CPU_* the CPU has and the OS enables */
    int64_t l1dBytes;   /* level 1 data cache of one core */
    int64_t l2Bytes;
    int64_t l3Bytes;    /* one L3 (a CPU may have several) */
    char isa[16];       /* instruction set a plan made now uses, within CONVTBC_ISA */
    char kernel[16];    /* its micro-kernel */
    int32_t mr;         /* the micro-kernel's tile: mr rows x nr columns */
    int32_t nr;
    int32_t threads;    /* OpenMP threads a plan made now on this thread uses */
} convtbcCpuInfo;

/* Fills *info; ACL_ERROR_INVALID_PARAM for a NULL info. Needs no aclInit. */
ACL_FUNC_VISIBILITY aclError convtbcGetCpuInfo(convtbcCpuInfo *info);

/* Forces, for the plans made from now on in this process, the
 * implementations named in `names` (comma-separated, e.g.
 * "gi_reference,gw_pairs") wherever they apply; elsewhere phase 1 chooses
 * as usual. NULL or "" lifts the forcing. Until the first call the
 * environment variable CONVTBC_FORCE_IMPL, read at the first plan, does the
 * same. ACLNN_ERR_PARAM_INVALID for an unknown name (nothing changes). */
ACL_FUNC_VISIBILITY aclnnStatus convtbcForceImplementations(const char *names);

/* The implementations phase 1 of aclnnConvTbcBackward, and of aclnnConvTbc
 * on the same sizes, picks for a problem with contiguous tensors of one
 * dataType (ACL_FLOAT, ACL_FLOAT16 or ACL_BF16) and cubeMathType
 * KEEP_DTYPE, on this CPU and with CONVTBC_ISA and the forcing as they are
 * now: writes "<gradInput> <gradWeight> <gradBias> <out>" (names separated
 * by one space, NUL-terminated) into names. ACLNN_ERR_PARAM_INVALID for a size out of
 * 0..2^24, T + 2*pad + 1 - K below 1, another dataType or a namesSize too
 * small (names is not written then). */
ACL_FUNC_VISIBILITY aclnnStatus convtbcPlanImplementations(int64_t t, int64_t b, int64_t cIn, int64_t k,
                                                           int64_t cOut, int64_t pad, aclDataType dataType,
                                                           char *names, size_t namesSize);

#ifdef __cplusplus
}
#endif

#endif /* CONVTBC_CONVTBC_EXT_H */
