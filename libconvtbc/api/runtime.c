#include "api/runtime.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "api/errors.h"
#include "api/registry.h"
#include "compute/float_convert.h"

/* The one emulated device. */
enum { DEVICE_ID = 0, DEVICE_COUNT = 1 };

typedef struct {
    int32_t device;
    int64_t deterministic; /* stored for aclrtCtxGetSysParamOpt; convtbc is always deterministic */
} context;

typedef struct {
    context *owner;
} stream;

typedef struct {
    bool recorded;
} event;

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static bool initialised;
static context *device_context; /* made by the first aclrtSetDevice */

static ctbc_registry contexts = CTBC_REGISTRY_INIT;
static ctbc_registry streams = CTBC_REGISTRY_INIT;
static ctbc_registry events = CTBC_REGISTRY_INIT;
static ctbc_registry device_blocks = CTBC_REGISTRY_INIT;
static ctbc_registry host_blocks = CTBC_REGISTRY_INIT;

/* As in CANN, the current context belongs to the thread. */
static _Thread_local context *current_context;

static bool is_initialised(void)
{
    pthread_mutex_lock(&state_lock);
    bool yes = initialised;
    pthread_mutex_unlock(&state_lock);
    return yes;
}

#define REQUIRE_INIT(api)                                                                                     \
    do {                                                                                                      \
        if (!is_initialised())                                                                                \
            return ctbc_fail(ACL_ERROR_UNINITIALIZE, CTBC_EE_RUNTIME, api,                                    \
                             "ACL is not initialised: call aclInit first");                                   \
    } while (0)

/* The calling thread's current context, or NULL with a message recorded. */
static context *require_context(const char *api)
{
    context *ctx = current_context;
    if (ctx && ctbc_registry_contains(&contexts, ctx))
        return ctx;
    current_context = NULL;
    ctbc_fail(ACL_ERROR_RT_CONTEXT_NULL, CTBC_EE_RUNTIME, api,
              "no current context on this thread: call aclrtSetDevice or aclrtSetCurrentContext first");
    return NULL;
}

#define REQUIRE_CONTEXT(api, ctx)                                                                             \
    REQUIRE_INIT(api);                                                                                        \
    context *ctx = require_context(api);                                                                      \
    if (!ctx)                                                                                                 \
        return ACL_ERROR_RT_CONTEXT_NULL

#define REQUIRE_ARG(api, cond, what)                                                                          \
    do {                                                                                                      \
        if (!(cond))                                                                                          \
            return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "%s", what);                      \
    } while (0)

static void free_handle(const void *handle) { free((void *)handle); }

/* ---- init and devices ------------------------------------------------- */

aclError aclInit(const char *configPath)
{
    (void)configPath; /* CANN reads dump/profiling options from it; none apply here */
    pthread_mutex_lock(&state_lock);
    bool again = initialised;
    initialised = true;
    pthread_mutex_unlock(&state_lock);
    if (again)
        return ctbc_fail(ACL_ERROR_REPEAT_INITIALIZE, CTBC_EE_RUNTIME, "aclInit", "ACL is already initialised");
    return ACL_SUCCESS;
}

aclError aclFinalize(void)
{
    pthread_mutex_lock(&state_lock);
    bool was = initialised;
    initialised = false;
    device_context = NULL;
    pthread_mutex_unlock(&state_lock);
    if (!was)
        return ctbc_fail(ACL_ERROR_REPEAT_FINALIZE, CTBC_EE_RUNTIME, "aclFinalize",
                         "ACL is not initialised (never initialised, or already finalised)");
    /* Handles die with the runtime, as on the device; memory blocks stay
     * until the caller frees them (they are plain host memory here). */
    ctbc_registry_clear(&streams, free_handle);
    ctbc_registry_clear(&events, free_handle);
    ctbc_registry_clear(&contexts, free_handle);
    current_context = NULL;
    return ACL_SUCCESS;
}

aclnnStatus aclnnInit(const char *configPath)
{
    (void)configPath;
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnFinalize(void) { return ACLNN_SUCCESS; }

static aclError check_device(const char *api, int32_t device)
{
    if (device != DEVICE_ID)
        return ctbc_fail(ACL_ERROR_RT_INVALID_DEVICEID, CTBC_EE_RUNTIME, api,
                         "deviceId %d is invalid: convtbc emulates one device, id 0", (int)device);
    return ACL_SUCCESS;
}

static context *new_context(int32_t device)
{
    context *ctx = calloc(1, sizeof *ctx);
    if (ctx && !ctbc_registry_add(&contexts, ctx, sizeof *ctx)) {
        free(ctx);
        ctx = NULL;
    }
    if (ctx)
        ctx->device = device;
    return ctx;
}

aclError aclrtSetDevice(int32_t deviceId)
{
    REQUIRE_INIT("aclrtSetDevice");
    aclError status = check_device("aclrtSetDevice", deviceId);
    if (status != ACL_SUCCESS)
        return status;
    pthread_mutex_lock(&state_lock);
    if (!device_context)
        device_context = new_context(deviceId);
    context *ctx = device_context;
    pthread_mutex_unlock(&state_lock);
    if (!ctx)
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, "aclrtSetDevice", "out of memory");
    current_context = ctx;
    return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId)
{
    REQUIRE_INIT("aclrtResetDevice");
    aclError status = check_device("aclrtResetDevice", deviceId);
    if (status != ACL_SUCCESS)
        return status;
    /* The device context stays for other threads; this one lets go of it. */
    if (current_context == device_context)
        current_context = NULL;
    return ACL_SUCCESS;
}

aclError aclrtGetDevice(int32_t *deviceId)
{
    REQUIRE_ARG("aclrtGetDevice", deviceId, "deviceId must not be NULL");
    REQUIRE_CONTEXT("aclrtGetDevice", ctx);
    *deviceId = ctx->device;
    return ACL_SUCCESS;
}

aclError aclrtGetDeviceCount(uint32_t *count)
{
    REQUIRE_ARG("aclrtGetDeviceCount", count, "count must not be NULL");
    *count = DEVICE_COUNT;
    return ACL_SUCCESS;
}

/* ---- contexts ----------------------------------------------------------- */

aclError aclrtCreateContext(aclrtContext *ctx_out, int32_t deviceId)
{
    REQUIRE_INIT("aclrtCreateContext");
    REQUIRE_ARG("aclrtCreateContext", ctx_out, "context must not be NULL");
    aclError status = check_device("aclrtCreateContext", deviceId);
    if (status != ACL_SUCCESS)
        return status;
    context *ctx = new_context(deviceId);
    if (!ctx)
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, "aclrtCreateContext", "out of memory");
    current_context = ctx; /* CANN makes a new context current */
    *ctx_out = ctx;
    return ACL_SUCCESS;
}

aclError aclrtDestroyContext(aclrtContext ctx)
{
    REQUIRE_INIT("aclrtDestroyContext");
    pthread_mutex_lock(&state_lock);
    bool is_device_context = ctx == device_context;
    pthread_mutex_unlock(&state_lock);
    if (!ctx || is_device_context || !ctbc_registry_remove(&contexts, ctx))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtDestroyContext",
                         "context %p was not made by aclrtCreateContext, or is already destroyed", ctx);
    if (current_context == ctx)
        current_context = NULL;
    free(ctx);
    return ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext ctx)
{
    REQUIRE_INIT("aclrtSetCurrentContext");
    if (!ctx || !ctbc_registry_contains(&contexts, ctx))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtSetCurrentContext",
                         "context %p is not a live context", ctx);
    current_context = ctx;
    return ACL_SUCCESS;
}

aclError aclrtGetCurrentContext(aclrtContext *ctx_out)
{
    REQUIRE_ARG("aclrtGetCurrentContext", ctx_out, "context must not be NULL");
    REQUIRE_CONTEXT("aclrtGetCurrentContext", ctx);
    *ctx_out = ctx;
    return ACL_SUCCESS;
}

aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value)
{
    REQUIRE_CONTEXT("aclrtCtxSetSysParamOpt", ctx);
    if (opt != ACL_OPT_DETERMINISTIC)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtCtxSetSysParamOpt",
                         "opt %d is not supported: expected ACL_OPT_DETERMINISTIC (0)", (int)opt);
    ctx->deterministic = value;
    return ACL_SUCCESS;
}

aclError aclrtCtxGetSysParamOpt(aclSysParamOpt opt, int64_t *value)
{
    REQUIRE_ARG("aclrtCtxGetSysParamOpt", value, "value must not be NULL");
    REQUIRE_CONTEXT("aclrtCtxGetSysParamOpt", ctx);
    if (opt != ACL_OPT_DETERMINISTIC)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtCtxGetSysParamOpt",
                         "opt %d is not supported: expected ACL_OPT_DETERMINISTIC (0)", (int)opt);
    *value = ctx->deterministic;
    return ACL_SUCCESS;
}

/* ---- streams and events ----------------------------------------------- */

bool ctbc_stream_is_live(aclrtStream s) { return s == NULL || ctbc_registry_contains(&streams, s); }

static aclError check_stream(const char *api, aclrtStream s)
{
    if (!ctbc_stream_is_live(s))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "stream %p is not a live stream (NULL is the default stream)", s);
    return ACL_SUCCESS;
}

/* Makes a zeroed handle of `size` bytes and registers it. */
static aclError create_handle(const char *api, ctbc_registry *registry, size_t size, void **out)
{
    void *handle = calloc(1, size);
    if (!handle || !ctbc_registry_add(registry, handle, size)) {
        free(handle);
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, api, "out of memory");
    }
    *out = handle;
    return ACL_SUCCESS;
}

static aclError destroy_handle(const char *api, ctbc_registry *registry, void *handle, const char *kind)
{
    if (!handle || !ctbc_registry_remove(registry, handle))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "%s %p is not live (never created, or "
                         "already destroyed)", kind, handle);
    free(handle);
    return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream *out)
{
    REQUIRE_ARG("aclrtCreateStream", out, "stream must not be NULL");
    REQUIRE_CONTEXT("aclrtCreateStream", ctx);
    aclError status = create_handle("aclrtCreateStream", &streams, sizeof(stream), out);
    if (status == ACL_SUCCESS)
        ((stream *)*out)->owner = ctx;
    return status;
}

aclError aclrtDestroyStream(aclrtStream s)
{
    REQUIRE_INIT("aclrtDestroyStream");
    return destroy_handle("aclrtDestroyStream", &streams, s, "stream");
}

aclError aclrtSynchronizeStream(aclrtStream s)
{
    REQUIRE_INIT("aclrtSynchronizeStream");
    return check_stream("aclrtSynchronizeStream", s);
}

aclError aclrtSynchronizeDevice(void)
{
    REQUIRE_CONTEXT("aclrtSynchronizeDevice", ctx);
    (void)ctx;
    return ACL_SUCCESS;
}

aclError aclrtCreateEvent(aclrtEvent *out)
{
    REQUIRE_ARG("aclrtCreateEvent", out, "event must not be NULL");
    REQUIRE_CONTEXT("aclrtCreateEvent", ctx);
    (void)ctx;
    return create_handle("aclrtCreateEvent", &events, sizeof(event), out);
}

aclError aclrtDestroyEvent(aclrtEvent e)
{
    REQUIRE_INIT("aclrtDestroyEvent");
    return destroy_handle("aclrtDestroyEvent", &events, e, "event");
}

static aclError check_event(const char *api, aclrtEvent e)
{
    if (!e || !ctbc_registry_contains(&events, e))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "event %p is not a live event", e);
    return ACL_SUCCESS;
}

aclError aclrtRecordEvent(aclrtEvent e, aclrtStream s)
{
    REQUIRE_INIT("aclrtRecordEvent");
    aclError status = check_event("aclrtRecordEvent", e);
    if (status == ACL_SUCCESS)
        status = check_stream("aclrtRecordEvent", s);
    if (status == ACL_SUCCESS)
        ((event *)e)->recorded = true; /* the stream's earlier work is already done */
    return status;
}

aclError aclrtStreamWaitEvent(aclrtStream s, aclrtEvent e)
{
    REQUIRE_INIT("aclrtStreamWaitEvent");
    aclError status = check_event("aclrtStreamWaitEvent", e);
    return status == ACL_SUCCESS ? check_stream("aclrtStreamWaitEvent", s) : status;
}

aclError aclrtSynchronizeEvent(aclrtEvent e)
{
    REQUIRE_INIT("aclrtSynchronizeEvent");
    return check_event("aclrtSynchronizeEvent", e);
}

/* ---- memory ------------------------------------------------------------- */

/* Device memory is host memory here. Blocks are 64-byte aligned (CANN
 * guarantees 32) and padded by 32 bytes as CANN pads its allocations. */
static aclError allocate(const char *api, ctbc_registry *registry, void **out, size_t size)
{
    REQUIRE_ARG(api, out, "the pointer to receive the address must not be NULL");
    REQUIRE_ARG(api, size > 0, "size must be > 0");
    void *block = NULL;
    size_t padded = size + 32 + (32 - size % 32) % 32;
    if (padded < size || posix_memalign(&block, 64, padded) != 0)
        return ctbc_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, CTBC_EE_RUNTIME, api, "cannot allocate %zu bytes", size);
    if (!ctbc_registry_add(registry, block, size)) {
        free(block);
        return ctbc_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, CTBC_EE_RUNTIME, api, "out of memory");
    }
    *out = block;
    return ACL_SUCCESS;
}

static aclError release(const char *api, ctbc_registry *registry, void *block, const char *allocator)
{
    if (!block || !ctbc_registry_remove(registry, block))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "%p was not returned by %s, or was already freed", block, allocator);
    free(block);
    return ACL_SUCCESS;
}

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    (void)policy; /* huge pages and bandwidth classes mean nothing on the host */
    REQUIRE_CONTEXT("aclrtMalloc", ctx);
    (void)ctx;
    return allocate("aclrtMalloc", &device_blocks, devPtr, size);
}

aclError aclrtFree(void *devPtr)
{
    REQUIRE_INIT("aclrtFree");
    return release("aclrtFree", &device_blocks, devPtr, "aclrtMalloc");
}

aclError aclrtMallocHost(void **hostPtr, size_t size)
{
    REQUIRE_INIT("aclrtMallocHost");
    return allocate("aclrtMallocHost", &host_blocks, hostPtr, size);
}

aclError aclrtFreeHost(void *hostPtr)
{
    REQUIRE_INIT("aclrtFreeHost");
    return release("aclrtFreeHost", &host_blocks, hostPtr, "aclrtMallocHost");
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
    REQUIRE_INIT("aclrtMemset");
    REQUIRE_ARG("aclrtMemset", devPtr || count == 0, "devPtr must not be NULL");
    if (count > maxCount)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtMemset",
                         "count %zu is larger than maxCount %zu", count, maxCount);
    if (count)
        memset(devPtr, value, count);
    return ACL_SUCCESS;
}

static aclError copy(const char *api, void *dst, size_t destMax, const void *src, size_t count,
                     aclrtMemcpyKind kind)
{
    REQUIRE_INIT(api);
    if ((int)kind < ACL_MEMCPY_HOST_TO_HOST || (int)kind > ACL_MEMCPY_DEFAULT)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "kind %d is invalid: expected an aclrtMemcpyKind from 0 to 4", (int)kind);
    if (count > destMax)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "count %zu is larger than destMax %zu", count, destMax);
    REQUIRE_ARG(api, count == 0 || (dst && src), "dst and src must not be NULL");
    if (count)
        memmove(dst, src, count);
    return ACL_SUCCESS;
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind)
{
    return copy("aclrtMemcpy", dst, destMax, src, count, kind);
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream s)
{
    REQUIRE_INIT("aclrtMemcpyAsync");
    aclError status = check_stream("aclrtMemcpyAsync", s);
    return status == ACL_SUCCESS ? copy("aclrtMemcpyAsync", dst, destMax, src, count, kind) : status;
}

/* ---- half precision ----------------------------------------------------- */

float aclFloat16ToFloat(aclFloat16 value) { return ctbc_f16_to_f32(value); }

aclFloat16 aclFloatToFloat16(float value) { return ctbc_f32_to_f16(value); }
