#include "api/runtime.h"

#include <pthread.h>
#include <stdlib.h>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "api/dump.h"
#include "api/errors.h"
#include "api/log.h"
#include "api/memory.h"
#include "api/registry.h"
#include "compute/float_convert.h"

/* The one emulated device. */
enum { DEVICE_ID = 0, DEVICE_COUNT = 1 };

struct ctbc_context {
    int32_t device;
    int64_t deterministic; /* stored for aclrtCtxGetSysParamOpt; convtbc is always deterministic */
    ctbc_stream *default_stream;
};

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static bool initialised;
static ctbc_context *device_context; /* made by the first aclrtSetDevice */
static ctbc_registry contexts = CTBC_REGISTRY_INIT;

/* As in CANN, the current context belongs to the thread. */
static _Thread_local ctbc_context *current_context;

aclError ctbc_require_init(const char *api)
{
    pthread_mutex_lock(&state_lock);
    bool yes = initialised;
    pthread_mutex_unlock(&state_lock);
    if (!yes)
        return ctbc_fail(ACL_ERROR_UNINITIALIZE, CTBC_EE_RUNTIME, api, "ACL is not initialised: call aclInit first");
    return ACL_SUCCESS;
}

ctbc_context *ctbc_current_context(void)
{
    ctbc_context *ctx = current_context;
    if (ctx && !ctbc_registry_contains(&contexts, ctx))
        ctx = current_context = NULL; /* destroyed by another thread, or by aclFinalize */
    return ctx;
}

aclError ctbc_require_context(const char *api, ctbc_context **out)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init(api));
    *out = ctbc_current_context();
    if (!*out)
        return ctbc_fail(ACL_ERROR_RT_CONTEXT_NULL, CTBC_EE_RUNTIME, api,
                         "no current context on this thread: call aclrtSetDevice or aclrtSetCurrentContext first");
    return ACL_SUCCESS;
}

ctbc_stream *ctbc_context_default_stream(ctbc_context *ctx) { return ctx->default_stream; }

#define REQUIRE_ARG(api, cond, what)                                                                          \
    do {                                                                                                      \
        if (!(cond))                                                                                          \
            return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api, "%s", what);                      \
    } while (0)

static void delete_context(const void *handle)
{
    const ctbc_context *ctx = handle;
    ctbc_stream_delete(ctx->default_stream);
    free((void *)ctx);
}

/* ---- init ------------------------------------------------------------------- */

aclError aclInit(const char *configPath)
{
    /* Of CANN's options in the config file, operator dump applies here. */
    pthread_mutex_lock(&state_lock);
    bool again = initialised;
    initialised = true;
    pthread_mutex_unlock(&state_lock);
    if (again)
        return ctbc_fail(ACL_ERROR_REPEAT_INITIALIZE, CTBC_EE_RUNTIME, "aclInit", "ACL is already initialised");
    ctbc_dump_configure(configPath);
    CTBC_LOG(CTBC_LOG_INFO, "aclInit: SoC %s", aclrtGetSocName());
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
    /* Streams run what they hold before they go; handles die with the
     * runtime, as on the device. Memory blocks stay until the caller frees
     * them (they are plain host memory here), except quarantined ones. */
    ctbc_streams_shutdown();
    ctbc_registry_clear(&contexts, delete_context);
    ctbc_events_shutdown();
    ctbc_memory_shutdown();
    ctbc_dump_configure(NULL);
    current_context = NULL;
    CTBC_LOG(CTBC_LOG_INFO, "aclFinalize");
    return ACL_SUCCESS;
}

aclnnStatus aclnnInit(const char *configPath)
{
    (void)configPath;
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnFinalize(void) { return ACLNN_SUCCESS; }

/* ---- devices and contexts --------------------------------------------------- */

static aclError check_device(const char *api, int32_t device)
{
    if (device != DEVICE_ID)
        return ctbc_fail(ACL_ERROR_RT_INVALID_DEVICEID, CTBC_EE_RUNTIME, api,
                         "deviceId %d is invalid: convtbc emulates one device, id 0", (int)device);
    return ACL_SUCCESS;
}

static ctbc_context *new_context(int32_t device)
{
    ctbc_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->device = device;
    ctx->default_stream = ctbc_stream_new();
    if (!ctx->default_stream || !ctbc_registry_add(&contexts, ctx, sizeof *ctx)) {
        ctbc_stream_delete(ctx->default_stream);
        free(ctx);
        return NULL;
    }
    return ctx;
}

aclError aclrtSetDevice(int32_t deviceId)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtSetDevice"));
    CTBC_RETURN_IF_FAILED(check_device("aclrtSetDevice", deviceId));
    pthread_mutex_lock(&state_lock);
    if (!device_context)
        device_context = new_context(deviceId);
    ctbc_context *ctx = device_context;
    pthread_mutex_unlock(&state_lock);
    if (!ctx)
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, "aclrtSetDevice", "cannot make the device context");
    current_context = ctx;
    CTBC_LOG(CTBC_LOG_INFO, "aclrtSetDevice: device %d, context %p", (int)deviceId, (void *)ctx);
    return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtResetDevice"));
    CTBC_RETURN_IF_FAILED(check_device("aclrtResetDevice", deviceId));
    /* The device context stays for other threads; this one lets go of it
     * once the work it queued there is done. */
    pthread_mutex_lock(&state_lock);
    ctbc_context *ctx = device_context;
    pthread_mutex_unlock(&state_lock);
    if (ctx && current_context == ctx) {
        current_context = NULL;
        return ctbc_stream_synchronize("aclrtResetDevice", ctx->default_stream);
    }
    return ACL_SUCCESS;
}

aclError aclrtGetDevice(int32_t *deviceId)
{
    REQUIRE_ARG("aclrtGetDevice", deviceId, "deviceId must not be NULL");
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context("aclrtGetDevice", &ctx));
    *deviceId = ctx->device;
    return ACL_SUCCESS;
}

aclError aclrtGetDeviceCount(uint32_t *count)
{
    REQUIRE_ARG("aclrtGetDeviceCount", count, "count must not be NULL");
    *count = DEVICE_COUNT;
    return ACL_SUCCESS;
}

aclError aclrtCreateContext(aclrtContext *out, int32_t deviceId)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtCreateContext"));
    REQUIRE_ARG("aclrtCreateContext", out, "context must not be NULL");
    CTBC_RETURN_IF_FAILED(check_device("aclrtCreateContext", deviceId));
    ctbc_context *ctx = new_context(deviceId);
    if (!ctx)
        return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, "aclrtCreateContext", "cannot make a context");
    current_context = ctx; /* CANN makes a new context current */
    *out = ctx;
    return ACL_SUCCESS;
}

aclError aclrtDestroyContext(aclrtContext handle)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtDestroyContext"));
    pthread_mutex_lock(&state_lock);
    bool is_device_context = handle == device_context;
    pthread_mutex_unlock(&state_lock);
    if (!handle || is_device_context || !ctbc_registry_remove(&contexts, handle))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtDestroyContext",
                         "context %p was not made by aclrtCreateContext, or is already destroyed", handle);
    if (current_context == handle)
        current_context = NULL;
    delete_context(handle);
    return ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext handle)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtSetCurrentContext"));
    if (!handle || !ctbc_registry_contains(&contexts, handle))
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclrtSetCurrentContext",
                         "context %p is not a live context", handle);
    current_context = handle;
    return ACL_SUCCESS;
}

aclError aclrtGetCurrentContext(aclrtContext *out)
{
    REQUIRE_ARG("aclrtGetCurrentContext", out, "context must not be NULL");
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context("aclrtGetCurrentContext", &ctx));
    *out = ctx;
    return ACL_SUCCESS;
}

static aclError check_option(const char *api, aclSysParamOpt opt)
{
    if (opt != ACL_OPT_DETERMINISTIC)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "opt %d is not supported: expected ACL_OPT_DETERMINISTIC (0)", (int)opt);
    return ACL_SUCCESS;
}

aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value)
{
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context("aclrtCtxSetSysParamOpt", &ctx));
    CTBC_RETURN_IF_FAILED(check_option("aclrtCtxSetSysParamOpt", opt));
    ctx->deterministic = value;
    return ACL_SUCCESS;
}

aclError aclrtCtxGetSysParamOpt(aclSysParamOpt opt, int64_t *value)
{
    REQUIRE_ARG("aclrtCtxGetSysParamOpt", value, "value must not be NULL");
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context("aclrtCtxGetSysParamOpt", &ctx));
    CTBC_RETURN_IF_FAILED(check_option("aclrtCtxGetSysParamOpt", opt));
    *value = ctx->deterministic;
    return ACL_SUCCESS;
}

/* ---- half precision ----------------------------------------------------- */

float aclFloat16ToFloat(aclFloat16 value) { return ctbc_f16_to_f32(value); }

aclFloat16 aclFloatToFloat16(float value) { return ctbc_f32_to_f16(value); }
