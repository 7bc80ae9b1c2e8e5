/*
 * The runtime surface from many threads at once, as CANN documents it for
 * aclInit / aclFinalizeReference: each thread pairs its own aclInit with
 * its own aclFinalizeReference, so the runtime stays initialised while any
 * thread holds a reference and is finalised once, by the last one. In
 * between, each thread uses its device, registers and unregisters
 * callbacks, makes data buffers, sets and reads timeouts, limits and
 * options, reads its own last error and writes application log lines.
 * Built with ThreadSanitizer by tests/test_runtime_lifecycle.py.
 * Prints FAIL lines and returns non-zero on any failure.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "acl/acl.h"

enum { THREADS = 8, ROUNDS = 40 };

static atomic_int failures;
static atomic_int init_calls, finalize_calls;

#define CHECK(cond, what)                                                                                     \
    do {                                                                                                      \
        if (!(cond)) {                                                                                        \
            atomic_fetch_add(&failures, 1);                                                                   \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, what);                                    \
        }                                                                                                     \
    } while (0)

static aclError count_init(const char *config, size_t len, void *user)
{
    (void)config;
    (void)len;
    (void)user;
    atomic_fetch_add(&init_calls, 1);
    return ACL_SUCCESS;
}

static aclError count_finalize(void *user)
{
    (void)user;
    atomic_fetch_add(&finalize_calls, 1);
    return ACL_SUCCESS;
}

static aclError passing_by(const char *config, size_t len, void *user)
{
    (void)config;
    (void)len;
    (void)user;
    return ACL_SUCCESS;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int round = 0; round < ROUNDS; round++) {
        aclError status = aclInit(NULL);
        CHECK(status == ACL_SUCCESS || status == 100002, "aclInit");
        /* our reference keeps the runtime up until our aclFinalizeReference */
        CHECK(aclrtSetDevice(0) == ACL_SUCCESS, "aclrtSetDevice inside a reference");
        aclrtStream stream = NULL;
        CHECK(aclrtCtxGetCurrentDefaultStream(&stream) == ACL_SUCCESS && stream, "default stream");

        CHECK(aclInitCallbackRegister(ACL_REG_TYPE_OTHER, passing_by, arg) == ACL_SUCCESS, "register");
        CHECK(aclInitCallbackUnRegister(ACL_REG_TYPE_OTHER, passing_by) == ACL_SUCCESS, "unregister");

        float data[4];
        aclDataBuffer *buffer = aclCreateDataBuffer(data, sizeof data);
        CHECK(aclGetDataBufferSizeV2(buffer) == sizeof data, "buffer size");
        CHECK(aclDestroyDataBuffer(buffer) == ACL_SUCCESS, "destroy buffer");

        uint64_t actual = 0;
        uint32_t ms = 0, cores = 0;
        CHECK(aclrtSetOpExecuteTimeOutV2((uint64_t)(id + 1) * 1000000, &actual) == ACL_SUCCESS, "timeout");
        CHECK(aclrtGetOpExecuteTimeout(&ms) == ACL_SUCCESS && ms > 0, "read timeout");
        CHECK(aclrtSetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, (uint32_t)(id % 4 + 1)) == ACL_SUCCESS, "limit");
        CHECK(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_CUBE_CORE, &cores) == ACL_SUCCESS && cores >= 1, "cores");
        CHECK(aclrtSetSysParamOpt(ACL_OPT_DETERMINISTIC, id & 1) == ACL_SUCCESS, "option");
        CHECK(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, 32768 * (size_t)(id % 3 + 1)) == ACL_SUCCESS,
              "device limit");

        int32_t device;
        CHECK(aclrtResetDevice(0) == ACL_SUCCESS, "aclrtResetDevice");
        CHECK(aclrtGetDevice(&device) == 107002, "no device after the reset");
        CHECK(aclrtGetLastError(ACL_RT_THREAD_LEVEL) == 107002, "this thread's last error");
        CHECK(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL) == ACL_SUCCESS, "cleared");
        ACL_APP_LOG(ACL_INFO, "thread %d round %d", id, round);

        uint64_t left = 0;
        CHECK(aclFinalizeReference(&left) == ACL_SUCCESS, "aclFinalizeReference");
    }
    return NULL;
}

int main(void)
{
    CHECK(aclInitCallbackRegister(ACL_REG_TYPE_ACL_MODEL, count_init, NULL) == ACL_SUCCESS, "count inits");
    CHECK(aclFinalizeCallbackRegister(ACL_REG_TYPE_ACL_MODEL, count_finalize, NULL) == ACL_SUCCESS,
          "count finalizations");
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    uint64_t left = 99;
    CHECK(aclFinalizeReference(&left) == 100037 && left == 0, "every reference was dropped");
    /* each initialisation was finalised once */
    CHECK(atomic_load(&init_calls) >= 1, "initialised at least once");
    CHECK(atomic_load(&init_calls) == atomic_load(&finalize_calls), "as many finalisations as initialisations");
    if (atomic_load(&failures)) {
        fprintf(stderr, "runtime_threads: %d failure(s)\n", atomic_load(&failures));
        return 1;
    }
    printf("runtime_threads: OK (%d initialisations)\n", atomic_load(&init_calls));
    return 0;
}
