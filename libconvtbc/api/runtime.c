#include "api/runtime.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "api/dump.h"
#include "api/errors.h"
#include "api/log.h"
#include "api/memory.h"
#include "api/registry.h"
#include "api/soc_profile.h"
#include "compute/float_convert.h"

/* The one emulated device. */
enum { DEVICE_ID = 0 };

/* The aclSysParamOpt values (ACL_OPT_DETERMINISTIC .. ACL_OPT_ENABLE_KERNEL_EARLY_START). */
enum { SYS_PARAM_OPTIONS = 4 };

struct ctbc_context {
    int32_t device;
    /* Stored for aclrtCtxGetSysParamOpt; convtbc is deterministic whatever
     * they say. */
    int64_t options[SYS_PARAM_OPTIONS];
    ctbc_stream *default_stream;
};

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static bool initialised;
static ctbc_context *device_context; /* made by the first aclrtSetDevice */
static ctbc_registry contexts = CTBC_REGISTRY_INIT;
/* aclrtSetSysParamOpt's process-wide values (CANN's default: 0 each). */
static int64_t process_options[SYS_PARAM_OPTIONS];

/* As in CANN, the current context belongs to the thread. */
static _Thread_local ctbc_context *current_context;

/* The process whose aclInit made the runtime (state_lock); in a fork()ed
 * child, until its own aclInit, the parent that initialised the runtime
 * the child inherited and cannot use. */
static pid_t initialised_by, inherited_from;

/* Why a fork()ed child's calls fail until it initialises its own runtime. */
#define FORKED_CHILD_TEXT                                                                                      \
    "ACL was initialised by the parent process (pid %ld), not by this one: a process made by fork() inherits "  \
    "none of the runtime's contexts, streams, events, callbacks or device memory (their threads do not exist "  \
    "in the child), so the child must call aclInit (and aclrtSetDevice) itself"

aclError ctbc_require_init(const char *api)
{
    pthread_mutex_lock(&state_lock);
    bool yes = initialised;
    pid_t parent = inherited_from;
    pthread_mutex_unlock(&state_lock);
    if (!yes && parent)
        return ctbc_fail(ACL_ERROR_UNINITIALIZE, CTBC_EE_RUNTIME, api, FORKED_CHILD_TEXT, (long)parent);
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

/* ---- init and finalize --------------------------------------------------- */

/* aclInit, aclFinalize, aclFinalizeReference and the callback registers take
 * this lock for their whole run, callbacks included, so that concurrent
 * calls see one state at a time. It is recursive: a callback may itself call
 * them (register another callback, query the reference count). */
static pthread_mutex_t lifecycle_lock;
static pthread_once_t lifecycle_once = PTHREAD_ONCE_INIT;
/* aclInit calls not yet undone; 0 when not initialised. */
static uint64_t init_refs;

static void make_lifecycle_lock(void)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&lifecycle_lock, &attr);
    pthread_mutexattr_destroy(&attr);
}

static void lifecycle_enter(void)
{
    pthread_once(&lifecycle_once, make_lifecycle_lock);
    pthread_mutex_lock(&lifecycle_lock);
}

static void lifecycle_leave(void) { pthread_mutex_unlock(&lifecycle_lock); }

typedef struct {
    aclRegisterCallbackType type;
    union {
        aclInitCallbackFunc on_init;
        aclFinalizeCallbackFunc on_finalize;
    } fn;
    void *user_data;
} hook;

typedef struct {
    hook *items;
    size_t count, capacity;
} hook_list;

static hook_list init_hooks, finalize_hooks;

/* The configuration text of the current initialisation (handed to init
 * callbacks, also to those registered later), and that of the first one:
 * CANN keeps the first configuration and refuses a different one later. */
static char *config_text;
static size_t config_bytes;
static char *first_config;
static size_t first_config_bytes;

/* CANN notifies the callback types in this order; the others are never
 * called. ACL_REG_TYPE_ACL_OP_EXECUTOR only runs when aclInit was given a
 * configuration file. */
static const aclRegisterCallbackType INIT_ORDER[] = {ACL_REG_TYPE_ACL_MODEL, ACL_REG_TYPE_ACL_OP_EXECUTOR,
                                                     ACL_REG_TYPE_ACL_DVPP, ACL_REG_TYPE_OTHER};
static const aclRegisterCallbackType FINALIZE_ORDER[] = {ACL_REG_TYPE_ACL_OP_COMPILER, ACL_REG_TYPE_ACL_MODEL,
                                                         ACL_REG_TYPE_ACL_DVPP, ACL_REG_TYPE_OTHER};

static bool hooks_hold_type(const hook_list *list, aclRegisterCallbackType type)
{
    for (size_t i = 0; i < list->count; i++)
        if (list->items[i].type == type)
            return true;
    return false;
}

static aclError add_hook(const char *api, hook_list *list, hook entry)
{
    /* Only ACL_REG_TYPE_OTHER takes several callbacks; CANN answers a second
     * one of another type with ACL_ERROR_INTERNAL_ERROR. */
    if (entry.type != ACL_REG_TYPE_OTHER && hooks_hold_type(list, entry.type))
        return ctbc_fail(ACL_ERROR_INTERNAL_ERROR, CTBC_EE_RUNTIME, api,
                         "type %d already has a callback; only ACL_REG_TYPE_OTHER (0xFFFF) takes several",
                         (int)entry.type);
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? 2 * list->capacity : 8;
        hook *grown = realloc(list->items, capacity * sizeof *grown);
        if (!grown)
            return ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, api, "out of memory registering the callback");
        list->items = grown;
        list->capacity = capacity;
    }
    list->items[list->count++] = entry;
    return ACL_SUCCESS;
}

/* Removes the first entry of `type` whose function is `fn` (compared through
 * `same`, since the two lists hold different function types). */
static aclError remove_hook(const char *api, hook_list *list, aclRegisterCallbackType type, const hook *wanted,
                            bool (*same)(const hook *, const hook *))
{
    for (size_t i = 0; i < list->count; i++) {
        if (list->items[i].type == type && same(&list->items[i], wanted)) {
            memmove(&list->items[i], &list->items[i + 1], (list->count - i - 1) * sizeof *list->items);
            list->count--;
            return ACL_SUCCESS;
        }
    }
    return ctbc_fail(ACL_ERROR_INTERNAL_ERROR, CTBC_EE_RUNTIME, api,
                     "cbFunc is not registered for type %d", (int)type);
}

static bool same_init_fn(const hook *a, const hook *b) { return a->fn.on_init == b->fn.on_init; }
static bool same_finalize_fn(const hook *a, const hook *b) { return a->fn.on_finalize == b->fn.on_finalize; }

/* The callbacks of `type`, in registration order, copied out so that a
 * callback may register or unregister while they run. */
static hook *hooks_of_type(const hook_list *list, aclRegisterCallbackType type, size_t *count)
{
    *count = 0;
    hook *copy = list->count ? malloc(list->count * sizeof *copy) : NULL;
    if (!copy)
        return NULL;
    for (size_t i = 0; i < list->count; i++)
        if (list->items[i].type == type)
            copy[(*count)++] = list->items[i];
    return copy;
}

/* Runs the callbacks of `type`; the first failure stops them and is
 * returned, as in CANN. */
static aclError run_hooks(const char *api, bool init, aclRegisterCallbackType type)
{
    size_t count;
    hook *todo = hooks_of_type(init ? &init_hooks : &finalize_hooks, type, &count);
    aclError status = ACL_SUCCESS;
    for (size_t i = 0; i < count && status == ACL_SUCCESS; i++) {
        status = init ? todo[i].fn.on_init(config_text ? config_text : "", config_bytes, todo[i].user_data)
                      : todo[i].fn.on_finalize(todo[i].user_data);
        if (status != ACL_SUCCESS)
            ctbc_fail(status, CTBC_EE_RUNTIME, api, "the %s callback registered for type %d returned %d",
                      init ? "init" : "finalize", (int)type, (int)status);
    }
    free(todo);
    return status;
}

/* The whole file, NUL-terminated; "" for no path (CANN treats a NULL or
 * empty configPath as an empty configuration). Only its dump options apply
 * here, and dump.c reads those itself. */
static aclError read_config(const char *path, char **text, size_t *bytes)
{
    *text = NULL;
    *bytes = 0;
    if (!path || !*path) {
        *text = calloc(1, 1);
        return *text ? ACL_SUCCESS : ctbc_fail(ACL_ERROR_BAD_ALLOC, CTBC_EE_RUNTIME, "aclInit", "out of memory");
    }
    FILE *file = fopen(path, "rb");
    if (!file)
        return ctbc_fail(ACL_ERROR_INVALID_FILE, CTBC_EE_RUNTIME, "aclInit", "configPath '%s' cannot be opened: %s",
                         path, strerror(errno));
    size_t used = 0, capacity = 4096;
    char *buffer = malloc(capacity);
    bool failed = !buffer;
    while (!failed) {
        if (used + 1 == capacity) {
            char *grown = capacity < ((size_t)64 << 20) ? realloc(buffer, 2 * capacity) : NULL;
            if (!grown) {
                failed = true;
                break;
            }
            buffer = grown;
            capacity *= 2;
        }
        size_t got = fread(buffer + used, 1, capacity - 1 - used, file);
        used += got;
        if (got == 0) {
            failed = ferror(file) != 0;
            break;
        }
    }
    const char *why = buffer ? strerror(errno) : "out of memory";
    fclose(file);
    if (failed) {
        free(buffer);
        return ctbc_fail(ACL_ERROR_INVALID_FILE, CTBC_EE_RUNTIME, "aclInit",
                         "configPath '%s' cannot be read (a file of at most 64 MiB is expected): %s", path, why);
    }
    buffer[used] = '\0';
    *text = buffer;
    *bytes = used;
    return ACL_SUCCESS;
}

/* ---- fork() ---------------------------------------------------------------- */

/* CANN does not support a runtime inherited through fork(), and here it
 * cannot work either: the streams' workers are threads, and a child has
 * only the thread that called fork(). Left as it is, the child would wait
 * for ever for those threads (synchronising, aclFinalize) or on a lock one
 * of them held at fork(). So the child starts with no runtime: every lock
 * made new, every handle of the parent's forgotten (not released: that
 * would wait for the missing threads), and runtime calls fail with
 * ACL_ERROR_UNINITIALIZE and a message naming the parent until the child
 * calls aclInit, which then starts a runtime of its own. What belongs to
 * the process rather than to the runtime stays: registered init and
 * finalize callbacks, aclrtSetSysParamOpt's options. */
static void forget_runtime_in_child(void)
{
    pthread_mutex_init(&state_lock, NULL);
    make_lifecycle_lock();
    inherited_from = init_refs > 0 ? initialised_by : 0;
    initialised = false;
    init_refs = 0;
    device_context = NULL;
    current_context = NULL; /* the one thread left is the caller of fork() */
    /* A child is a new process to CANN: its first aclInit may bring any
     * configuration. */
    free(first_config);
    first_config = NULL;
    first_config_bytes = 0;
    ctbc_registry_after_fork(&contexts, false);
    ctbc_streams_after_fork();
    ctbc_events_after_fork();
    ctbc_callbacks_after_fork();
    ctbc_memory_after_fork();
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void watch_forks(void) { pthread_atfork(NULL, NULL, forget_runtime_in_child); }

static aclError init_locked(const char *configPath)
{
    pthread_once(&fork_once, watch_forks);
    if (init_refs > 0) {
        /* CANN counts this call too (aclFinalizeReference undoes it) but
         * still answers 100002, which callers may ignore. */
        init_refs++;
        return ctbc_fail(ACL_ERROR_REPEAT_INITIALIZE, CTBC_EE_RUNTIME, "aclInit",
                         "ACL is already initialised (reference count now %llu)", (unsigned long long)init_refs);
    }
    CTBC_RETURN_IF_FAILED(ctbc_soc_check_environment("aclInit"));
    char *text;
    size_t bytes;
    CTBC_RETURN_IF_FAILED(read_config(configPath, &text, &bytes));
    if (first_config && (bytes != first_config_bytes || memcmp(text, first_config, bytes) != 0)) {
        free(text);
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, "aclInit",
                         "the configuration of configPath '%s' differs from that of the first aclInit; every "
                         "aclInit of a process must pass the same configuration",
                         configPath ? configPath : "(null)");
    }
    free(config_text);
    config_text = text;
    config_bytes = bytes;
    bool has_file = configPath && *configPath;
    for (size_t i = 0; i < sizeof INIT_ORDER / sizeof *INIT_ORDER; i++) {
        if (INIT_ORDER[i] == ACL_REG_TYPE_ACL_OP_EXECUTOR && !has_file)
            continue;
        CTBC_RETURN_IF_FAILED(run_hooks("aclInit", true, INIT_ORDER[i]));
    }
    if (!first_config) {
        first_config = malloc(bytes + 1);
        if (first_config) {
            memcpy(first_config, text, bytes + 1);
            first_config_bytes = bytes;
        }
    }
    pthread_mutex_lock(&state_lock);
    initialised = true;
    initialised_by = getpid();
    inherited_from = 0;
    pthread_mutex_unlock(&state_lock);
    init_refs = 1;
    /* Of CANN's options in the configuration, operator dump applies here. */
    ctbc_dump_configure(configPath);
    CTBC_LOG(CTBC_LOG_INFO, "aclInit: SoC %s", aclrtGetSocName());
    return ACL_SUCCESS;
}

aclError aclInit(const char *configPath)
{
    lifecycle_enter();
    aclError status = init_locked(configPath);
    lifecycle_leave();
    return status;
}

/* The real teardown: finalize callbacks first (a failing one stops it, and
 * ACL stays initialised, as in CANN), then every handle of the runtime. */
static aclError finalize_locked(const char *api)
{
    for (size_t i = 0; i < sizeof FINALIZE_ORDER / sizeof *FINALIZE_ORDER; i++)
        CTBC_RETURN_IF_FAILED(run_hooks(api, false, FINALIZE_ORDER[i]));
    pthread_mutex_lock(&state_lock);
    initialised = false;
    device_context = NULL;
    pthread_mutex_unlock(&state_lock);
    /* Streams run what they hold before they go; handles die with the
     * runtime, as on the device. Memory blocks stay until the caller frees
     * them (they are plain host memory here), except quarantined ones. */
    ctbc_streams_shutdown();
    ctbc_registry_clear(&contexts, delete_context);
    ctbc_events_shutdown();
    ctbc_memory_shutdown();
    ctbc_dump_configure(NULL);
    current_context = NULL;
    init_refs = 0;
    CTBC_LOG(CTBC_LOG_INFO, "%s", api);
    return ACL_SUCCESS;
}

/* aclFinalize and aclFinalizeReference with no reference left. */
static aclError nothing_to_finalize(const char *api, const char *what)
{
    pthread_mutex_lock(&state_lock);
    pid_t parent = inherited_from;
    pthread_mutex_unlock(&state_lock);
    if (parent)
        return ctbc_fail(ACL_ERROR_REPEAT_FINALIZE, CTBC_EE_RUNTIME, api,
                         FORKED_CHILD_TEXT "; there is nothing to finalise before that", (long)parent);
    return ctbc_fail(ACL_ERROR_REPEAT_FINALIZE, CTBC_EE_RUNTIME, api, "%s", what);
}

aclError aclFinalize(void)
{
    lifecycle_enter();
    /* aclFinalize drops every reference at once. */
    aclError status = init_refs == 0 ? nothing_to_finalize("aclFinalize", "ACL is not initialised (never "
                                                                           "initialised, or already finalised)")
                                     : finalize_locked("aclFinalize");
    lifecycle_leave();
    return status;
}

aclError aclFinalizeReference(uint64_t *refCount)
{
    lifecycle_enter();
    aclError status = ACL_SUCCESS;
    if (init_refs == 0)
        status = nothing_to_finalize("aclFinalizeReference", "the aclInit reference count is already 0 (never "
                                                             "initialised, or already finalised)");
    else if (init_refs > 1)
        init_refs--; /* another aclInit is still outstanding */
    else
        status = finalize_locked("aclFinalizeReference");
    if (refCount)
        *refCount = init_refs;
    lifecycle_leave();
    return status;
}

aclError aclInitCallbackRegister(aclRegisterCallbackType type, aclInitCallbackFunc cbFunc, void *userData)
{
    REQUIRE_ARG("aclInitCallbackRegister", cbFunc, "cbFunc must not be NULL");
    lifecycle_enter();
    hook entry = {.type = type, .fn.on_init = cbFunc, .user_data = userData};
    aclError status = add_hook("aclInitCallbackRegister", &init_hooks, entry);
    /* Registered after aclInit: CANN runs it at once, and ignores what it
     * returns. */
    if (status == ACL_SUCCESS && init_refs > 0)
        (void)cbFunc(config_text ? config_text : "", config_bytes, userData);
    lifecycle_leave();
    return status;
}

aclError aclInitCallbackUnRegister(aclRegisterCallbackType type, aclInitCallbackFunc cbFunc)
{
    REQUIRE_ARG("aclInitCallbackUnRegister", cbFunc, "cbFunc must not be NULL");
    lifecycle_enter();
    hook wanted = {.type = type, .fn.on_init = cbFunc};
    aclError status = remove_hook("aclInitCallbackUnRegister", &init_hooks, type, &wanted, same_init_fn);
    lifecycle_leave();
    return status;
}

aclError aclFinalizeCallbackRegister(aclRegisterCallbackType type, aclFinalizeCallbackFunc cbFunc, void *userData)
{
    REQUIRE_ARG("aclFinalizeCallbackRegister", cbFunc, "cbFunc must not be NULL");
    lifecycle_enter();
    hook entry = {.type = type, .fn.on_finalize = cbFunc, .user_data = userData};
    aclError status = add_hook("aclFinalizeCallbackRegister", &finalize_hooks, entry);
    lifecycle_leave();
    return status;
}

aclError aclFinalizeCallbackUnRegister(aclRegisterCallbackType type, aclFinalizeCallbackFunc cbFunc)
{
    REQUIRE_ARG("aclFinalizeCallbackUnRegister", cbFunc, "cbFunc must not be NULL");
    lifecycle_enter();
    hook wanted = {.type = type, .fn.on_finalize = cbFunc};
    aclError status =
        remove_hook("aclFinalizeCallbackUnRegister", &finalize_hooks, type, &wanted, same_finalize_fn);
    lifecycle_leave();
    return status;
}

aclnnStatus aclnnInit(const char *configPath)
{
    (void)configPath;
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnFinalize(void) { return ACLNN_SUCCESS; }

/* ---- devices and contexts --------------------------------------------------- */

aclError ctbc_check_device(const char *api, int32_t device)
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
    CTBC_RETURN_IF_FAILED(ctbc_check_device("aclrtSetDevice", deviceId));
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

/* The calling thread lets go of the device context once the work it queued
 * there is done; the context stays for other threads. aclrtSetDevice calls
 * are not counted here, so the plain and the forced reset (which in CANN
 * ignores the count) do the same. */
static aclError release_device(const char *api, int32_t deviceId)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init(api));
    CTBC_RETURN_IF_FAILED(ctbc_check_device(api, deviceId));
    pthread_mutex_lock(&state_lock);
    ctbc_context *ctx = device_context;
    pthread_mutex_unlock(&state_lock);
    if (ctx && current_context == ctx) {
        current_context = NULL;
        return ctbc_stream_synchronize(api, ctx->default_stream);
    }
    return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId) { return release_device("aclrtResetDevice", deviceId); }

aclError aclrtResetDeviceForce(int32_t deviceId) { return release_device("aclrtResetDeviceForce", deviceId); }

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
    *count = CTBC_DEVICE_COUNT;
    return ACL_SUCCESS;
}

aclError aclrtCreateContext(aclrtContext *out, int32_t deviceId)
{
    CTBC_RETURN_IF_FAILED(ctbc_require_init("aclrtCreateContext"));
    REQUIRE_ARG("aclrtCreateContext", out, "context must not be NULL");
    CTBC_RETURN_IF_FAILED(ctbc_check_device("aclrtCreateContext", deviceId));
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
    if ((int)opt < 0 || (int)opt >= SYS_PARAM_OPTIONS)
        return ctbc_fail(ACL_ERROR_INVALID_PARAM, CTBC_EE_RUNTIME, api,
                         "opt %d is not an aclSysParamOpt: expected ACL_OPT_DETERMINISTIC (0) to "
                         "ACL_OPT_ENABLE_KERNEL_EARLY_START (3)",
                         (int)opt);
    return ACL_SUCCESS;
}

aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value)
{
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context("aclrtCtxSetSysParamOpt", &ctx));
    CTBC_RETURN_IF_FAILED(check_option("aclrtCtxSetSysParamOpt", opt));
    pthread_mutex_lock(&state_lock);
    ctx->options[opt] = value;
    pthread_mutex_unlock(&state_lock);
    return ACL_SUCCESS;
}

aclError aclrtCtxGetSysParamOpt(aclSysParamOpt opt, int64_t *value)
{
    REQUIRE_ARG("aclrtCtxGetSysParamOpt", value, "value must not be NULL");
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context("aclrtCtxGetSysParamOpt", &ctx));
    CTBC_RETURN_IF_FAILED(check_option("aclrtCtxGetSysParamOpt", opt));
    pthread_mutex_lock(&state_lock);
    *value = ctx->options[opt];
    pthread_mutex_unlock(&state_lock);
    return ACL_SUCCESS;
}

/* The process-wide twins: no context needed, and they outlive aclFinalize
 * (they belong to the process, not to a runtime session). */
aclError aclrtSetSysParamOpt(aclSysParamOpt opt, int64_t value)
{
    CTBC_RETURN_IF_FAILED(check_option("aclrtSetSysParamOpt", opt));
    pthread_mutex_lock(&state_lock);
    process_options[opt] = value;
    pthread_mutex_unlock(&state_lock);
    return ACL_SUCCESS;
}

aclError aclrtGetSysParamOpt(aclSysParamOpt opt, int64_t *value)
{
    REQUIRE_ARG("aclrtGetSysParamOpt", value, "value must not be NULL");
    CTBC_RETURN_IF_FAILED(check_option("aclrtGetSysParamOpt", opt));
    pthread_mutex_lock(&state_lock);
    *value = process_options[opt];
    pthread_mutex_unlock(&state_lock);
    return ACL_SUCCESS;
}

aclError aclrtCtxGetCurrentDefaultStream(aclrtStream *stream)
{
    REQUIRE_ARG("aclrtCtxGetCurrentDefaultStream", stream, "stream must not be NULL");
    ctbc_context *ctx;
    CTBC_RETURN_IF_FAILED(ctbc_require_context("aclrtCtxGetCurrentDefaultStream", &ctx));
    *stream = ctx->default_stream;
    return ACL_SUCCESS;
}

aclError aclrtGetPrimaryCtxState(int32_t deviceId, uint32_t *flags, int32_t *active)
{
    REQUIRE_ARG("aclrtGetPrimaryCtxState", active, "active must not be NULL");
    REQUIRE_ARG("aclrtGetPrimaryCtxState", !flags, "flags is reserved and must be NULL");
    CTBC_RETURN_IF_FAILED(ctbc_check_device("aclrtGetPrimaryCtxState", deviceId));
    /* The primary context is the one aclrtSetDevice makes; it lives until
     * aclFinalize. */
    pthread_mutex_lock(&state_lock);
    *active = device_context != NULL;
    pthread_mutex_unlock(&state_lock);
    return ACL_SUCCESS;
}

/* ---- half precision ----------------------------------------------------- */

float aclFloat16ToFloat(aclFloat16 value) { return ctbc_f16_to_f32(value); }

aclFloat16 aclFloatToFloat16(float value) { return ctbc_f32_to_f16(value); }
