/*
 * Copies and fills: aclrtMemcpy, aclrtMemcpy2d, aclrtMemset and their Async
 * twins, and the cache calls aclrtMemFlush / aclrtMemInvalidate (nothing to
 * do on the host). Each checks its arguments in CANN's order and, in checked
 * mode, that every side its kind calls device memory lies inside a live
 * block and every side it calls host memory does not; then the work runs
 * now, or queued on a stream, through the blocks' read-write views.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl_rt.h"
#include "api/errors.h"
#include "api/memory.h"
#include "api/runtime.h"
#include "api/soc_profile.h"
#include "api/streams.h"

/* Rows of `width` bytes, `height` of them (1 for a plain copy or fill), each
 * side stepping by its pitch. */
typedef struct {
    const char *api;
    char *dst;
    const char *src;
    size_t width, height, dpitch, spitch;
    uint32_t value; /* a fill's byte, or its 32-bit word when fill_word */
    bool fill, fill_word;
    bool dst_device, src_device; /* the sides that must be live device memory */
    int status;                  /* what a side freed meanwhile fails with */
} transfer;

/* Bytes from the first row's start to the last row's end; the checks made
 * sure it does not overflow. */
static size_t extent(size_t width, size_t height, size_t pitch) { return (height - 1) * pitch + width; }

/* Where the library reaches one side: device sides are checked again (the
 * memory may have been freed since the call, if the work was queued) and
 * give their block's view; host sides are used as they are, unless they
 * are device memory after all (checking off lets a kind contradict its
 * pointers). */
static aclError reach(const transfer *job, const char *what, const void *address, size_t bytes, bool device,
                      void **view)
{
    if (device)
        return ctbc_use_device_range(job->api, what, address, bytes, job->status, view);
    *view = ctbc_device_view(address);
    return ACL_SUCCESS;
}

static aclError run_transfer(void *payload)
{
    const transfer *job = payload;
    void *dst = NULL, *src = NULL;
    ctbc_memory_use_begin();
    aclError status = reach(job, "dst", job->dst, extent(job->width, job->height, job->dpitch), job->dst_device, &dst);
    if (status == ACL_SUCCESS && !job->fill)
        status = reach(job, "src", job->src, extent(job->width, job->height, job->spitch), job->src_device, &src);
    for (size_t row = 0; status == ACL_SUCCESS && row < job->height; row++) {
        char *to = (char *)dst + row * job->dpitch;
        if (job->fill && job->fill_word)
            for (size_t at = 0; at < job->width; at += sizeof job->value)
                memcpy(to + at, &job->value, sizeof job->value);
        else if (job->fill)
            memset(to, (int)job->value, job->width);
        else
            memmove(to, (const char *)src + row * job->spitch, job->width);
    }
    ctbc_memory_use_end();
    return status;
}

static const char *const KIND_NAMES[] = {"ACL_MEMCPY_HOST_TO_HOST", "ACL_MEMCPY_HOST_TO_DEVICE",
                                         "ACL_MEMCPY_DEVICE_TO_HOST", "ACL_MEMCPY_DEVICE_TO_DEVICE",
                                         "ACL_MEMCPY_DEFAULT"};

/* Which sides are device memory: as the kind says, or for
 * ACL_MEMCPY_DEFAULT as the addresses say (CANN decides by address). A
 * released block still counts as device memory, so that DEFAULT refuses a
 * late use of one exactly as an explicit kind does, instead of copying
 * into or out of it as if it were host memory. Decided once per call: the
 * checks and the copy must agree even if another thread frees meanwhile. */
typedef struct {
    bool dst_device, src_device;
} sides;

static sides sides_of(aclrtMemcpyKind kind, const void *dst, const void *src)
{
    sides are = {false, false};
    if (kind == ACL_MEMCPY_DEFAULT) {
        are.dst_device = ctbc_is_device_address(dst, true);
        are.src_device = ctbc_is_device_address(src, false);
    } else {
        are.dst_device = kind == ACL_MEMCPY_HOST_TO_DEVICE || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
        are.src_device = kind == ACL_MEMCPY_DEVICE_TO_HOST || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    }
    return are;
}

/* Each side against what the kind (or for DEFAULT, its address) says it is. */
static aclError check_sides(const char *api, aclrtMemcpyKind kind, sides are, const void *dst, size_t dst_bytes,
                            const void *src, size_t src_bytes)
{
    char what[64];
    snprintf(what, sizeof what, "dst of %s", KIND_NAMES[kind]);
    CTBC_RETURN_IF_FAILED(are.dst_device
                              ? ctbc_check_device_range(api, what, dst, dst_bytes, ACL_ERROR_RT_PARAM_INVALID)
                              : ctbc_check_host_range(api, what, dst, dst_bytes, ACL_ERROR_RT_PARAM_INVALID));
    snprintf(what, sizeof what, "src of %s", KIND_NAMES[kind]);
    return are.src_device ? ctbc_check_device_range(api, what, src, src_bytes, ACL_ERROR_RT_PARAM_INVALID)
                          : ctbc_check_host_range(api, what, src, src_bytes, ACL_ERROR_RT_PARAM_INVALID);
}

static transfer copy_job(const char *api, void *dst, const void *src, size_t width, size_t height, size_t dpitch,
                         size_t spitch, sides are, bool queued)
{
    return (transfer){.api = api, .dst = dst, .src = src, .width = width, .height = height, .dpitch = dpitch,
                      .spitch = spitch, .dst_device = are.dst_device, .src_device = are.src_device,
                      .status = queued ? ACL_ERROR_RT_INTERNAL_ERROR : ACL_ERROR_RT_PARAM_INVALID};
}

/* ---- one-dimensional copies ------------------------------------------------------ */

/* The checks every copy makes before it runs or is queued. */
static aclError check_copy(const char *api, void *dst, size_t destMax, const void *src, size_t count,
                           aclrtMemcpyKind kind, sides *are)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init(api));
    if ((int)kind < ACL_MEMCPY_HOST_TO_HOST || (int)kind > ACL_MEMCPY_DEFAULT)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "kind %d is invalid: expected an aclrtMemcpyKind from 0 to 4", (int)kind);
    if (count > destMax)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "count %zu is larger than destMax %zu",
                         count, destMax);
    if (count > 0 && (!dst || !src))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "dst and src must not be NULL");
    if (count == 0)
        return ACL_SUCCESS;
    *are = sides_of(kind, dst, src);
    return check_sides(api, kind, *are, dst, count, src, count);
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind)
{
    sides are = {false, false};
    CTBC_RETURN_IF_FAILED(check_copy("aclrtMemcpy", dst, destMax, src, count, kind, &are));
    if (count == 0)
        return ACL_SUCCESS;
    transfer job = copy_job("aclrtMemcpy", dst, src, count, 1, count, count, are, false);
    return run_transfer(&job);
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream)
{
    sides are = {false, false};
    CTBC_RETURN_IF_FAILED(check_copy("aclrtMemcpyAsync", dst, destMax, src, count, kind, &are));
    CTBC_RETURN_IF_FAILED(ctbc_check_stream("aclrtMemcpyAsync", stream));
    if (count == 0)
        return ACL_SUCCESS;
    transfer job = copy_job("aclrtMemcpyAsync", dst, src, count, 1, count, count, are, true);
    return ctbc_stream_submit("aclrtMemcpyAsync", stream, run_transfer, &job, sizeof job);
}

/* ---- two-dimensional copies ------------------------------------------------------ */

/* CANN's documented limits for 2-D copies. */
static const size_t MAX_WIDTH_2D = 5000000, MAX_HEIGHT_2D = (size_t)5 << 20;

static bool kind_copies_2d(aclrtMemcpyKind kind)
{
    /* Device-to-device 2-D copies exist on Atlas A2, A3 and Ascend950 only. */
    return kind == ACL_MEMCPY_HOST_TO_DEVICE || kind == ACL_MEMCPY_DEVICE_TO_HOST ||
           (kind == ACL_MEMCPY_DEVICE_TO_DEVICE && ctbc_soc()->family != CTBC_SOC_TRAINING);
}

static aclError check_copy_2d(const char *api, void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, aclrtMemcpyKind kind, sides *are)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init(api));
    if (width == 0 || height == 0)
        return ACL_SUCCESS; /* nothing to copy, as in CANN: no further checks */
    if (!dst || !src)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "dst and src must not be NULL");
    if (width > spitch || width > dpitch)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "width %zu must not exceed spitch %zu and dpitch %zu", width, spitch, dpitch);
    if (!kind_copies_2d(kind))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "kind %d is invalid: a 2-D copy takes ACL_MEMCPY_HOST_TO_DEVICE (1), "
                         "ACL_MEMCPY_DEVICE_TO_HOST (2)%s",
                         (int)kind,
                         ctbc_soc()->family != CTBC_SOC_TRAINING ? " or ACL_MEMCPY_DEVICE_TO_DEVICE (3)"
                                                                 : " (not ACL_MEMCPY_DEVICE_TO_DEVICE on this SoC)");
    if (width > MAX_WIDTH_2D || height > MAX_HEIGHT_2D)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "width %zu and height %zu must be at most %zu and %zu", width, height, MAX_WIDTH_2D,
                         MAX_HEIGHT_2D);
    size_t dst_bytes, src_bytes;
    if (__builtin_mul_overflow(height - 1, dpitch, &dst_bytes) || __builtin_add_overflow(dst_bytes, width, &dst_bytes) ||
        __builtin_mul_overflow(height - 1, spitch, &src_bytes) || __builtin_add_overflow(src_bytes, width, &src_bytes))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "height %zu rows at pitches %zu (dst) and %zu (src) do not fit in the address space", height,
                         dpitch, spitch);
    *are = sides_of(kind, dst, src);
    return check_sides(api, kind, *are, dst, dst_bytes, src, src_bytes);
}

aclError aclrtMemcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                       aclrtMemcpyKind kind)
{
    sides are = {false, false};
    CTBC_RETURN_IF_FAILED(check_copy_2d("aclrtMemcpy2d", dst, dpitch, src, spitch, width, height, kind, &are));
    if (width == 0 || height == 0)
        return ACL_SUCCESS;
    transfer job = copy_job("aclrtMemcpy2d", dst, src, width, height, dpitch, spitch, are, false);
    return run_transfer(&job);
}

aclError aclrtMemcpy2dAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                            aclrtMemcpyKind kind, aclrtStream stream)
{
    sides are = {false, false};
    CTBC_RETURN_IF_FAILED(check_copy_2d("aclrtMemcpy2dAsync", dst, dpitch, src, spitch, width, height, kind, &are));
    CTBC_RETURN_IF_FAILED(ctbc_check_stream("aclrtMemcpy2dAsync", stream));
    if (width == 0 || height == 0)
        return ACL_SUCCESS;
    transfer job = copy_job("aclrtMemcpy2dAsync", dst, src, width, height, dpitch, spitch, are, true);
    return ctbc_stream_submit("aclrtMemcpy2dAsync", stream, run_transfer, &job, sizeof job);
}

/* ---- fills ------------------------------------------------------------------------- */

/* CANN fills device memory, or host memory from aclrtMallocHost. */
static aclError check_fill(const char *api, void *devPtr, size_t maxCount, size_t count)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init(api));
    if (count > 0 && !devPtr)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "devPtr must not be NULL");
    if (count > maxCount)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "count %zu is larger than maxCount %zu",
                         count, maxCount);
    if (count > 0 && ctbc_is_acl_host_memory(devPtr, count))
        return ACL_SUCCESS;
    return ctbc_check_device_range(api, "devPtr", devPtr, count, ACL_ERROR_RT_PARAM_INVALID);
}

static transfer fill_job(const char *api, void *devPtr, int32_t value, size_t count, bool queued)
{
    bool device = !ctbc_is_acl_host_memory(devPtr, count);
    return (transfer){.api = api, .dst = devPtr, .width = count, .height = 1, .dpitch = count,
                      .value = (uint32_t)value, .fill = true, .dst_device = device,
                      .status = queued ? ACL_ERROR_RT_INTERNAL_ERROR : ACL_ERROR_RT_PARAM_INVALID};
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
    CTBC_RETURN_IF_FAILED(check_fill("aclrtMemset", devPtr, maxCount, count));
    if (count == 0)
        return ACL_SUCCESS;
    transfer job = fill_job("aclrtMemset", devPtr, value, count, false);
    return run_transfer(&job);
}

aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream)
{
    CTBC_RETURN_IF_FAILED(check_fill("aclrtMemsetAsync", devPtr, maxCount, count));
    CTBC_RETURN_IF_FAILED(ctbc_check_stream("aclrtMemsetAsync", stream));
    if (count == 0)
        return ACL_SUCCESS;
    transfer job = fill_job("aclrtMemsetAsync", devPtr, value, count, true);
    return ctbc_stream_submit("aclrtMemsetAsync", stream, run_transfer, &job, sizeof job);
}

/* aclrtMemsetD32: N 32-bit words of `value` into at most memSize bytes,
 * checked as aclrtMemset checks its byte count. */
static aclError fill_words(const char *api, void *ptr, size_t memSize, uint32_t value, size_t N, aclrtStream stream,
                           bool queued)
{
    size_t bytes;
    if (__builtin_mul_overflow(N, sizeof value, &bytes))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "N %zu words do not fit in a size_t", N);
    CTBC_RETURN_IF_FAILED(check_fill(api, ptr, memSize, bytes));
    if (queued)
        CTBC_RETURN_IF_FAILED(ctbc_check_stream(api, stream));
    if (bytes == 0)
        return ACL_SUCCESS;
    transfer job = fill_job(api, ptr, 0, bytes, queued);
    job.value = value;
    job.fill_word = true;
    return queued ? ctbc_stream_submit(api, stream, run_transfer, &job, sizeof job) : run_transfer(&job);
}

aclError aclrtMemsetD32(void *ptr, size_t memSize, uint32_t value, size_t N)
{
    return fill_words("aclrtMemsetD32", ptr, memSize, value, N, NULL, false);
}

aclError aclrtMemsetD32Async(void *ptr, size_t memSize, uint32_t value, size_t N, aclrtStream stream)
{
    return fill_words("aclrtMemsetD32Async", ptr, memSize, value, N, stream, true);
}

/* ---- caches ------------------------------------------------------------------------ */

/* Host and device share one coherent memory here: after CANN's checks
 * there is nothing to flush or invalidate. */
static aclError cache_call(const char *api, void *devPtr, size_t size)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init(api));
    if (!devPtr)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "devPtr must not be NULL");
    if (size == 0)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "size must be > 0");
    return ctbc_check_device_range(api, "devPtr", devPtr, size, ACL_ERROR_RT_PARAM_INVALID);
}

aclError aclrtMemFlush(void *devPtr, size_t size) { return cache_call("aclrtMemFlush", devPtr, size); }

aclError aclrtMemInvalidate(void *devPtr, size_t size) { return cache_call("aclrtMemInvalidate", devPtr, size); }
