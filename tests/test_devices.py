"""Device queries and settings of the one emulated device, against CANN's
documented codes and values (hicann/runtime acl_rt.h, acl_base_rt.h and
docs/zh/api_ref 03, 04, 12, 13, 24; the SoC figures are the [SoCInfo] of
CANN's platform_config/<SoC>.ini):

- aclrtGetRunMode: ACL_HOST (1) for a program on the host.
- aclrtGetDeviceInfo / aclGetDeviceCapability: AI Core, Cube and Vector core
  and AI CPU counts, memory and L2 sizes of the SoC (Ascend910B1: 24, 24,
  48, 6, 64 GiB, 192 MiB; Ascend910B4: 20, 20, 40, 6, 32 GiB, 96 MiB;
  Ascend910A: 32 AI cores, no vector cores, 32 MiB L2). An id past the
  last device: ACL_ERROR_RT_INVALID_DEVICEID (107001) from the runtime,
  ACL_ERROR_INVALID_PARAM (100000) from aclGetDeviceCapability.
- aclrtGetDeviceUtilizationRate: utilizationExtend must be NULL; -1 means
  "no vector cores" and "memory not measured".
- Peer access: deviceId and peerDeviceId must differ (100000); an id that
  is no device is 107001; aclrtDeviceEnablePeerAccess's flags must be 0
  (ACL_ERROR_FEATURE_UNSUPPORTED 200006).
- aclrtGetLastError / aclrtPeekAtLastError: the thread's last runtime error
  code; Get clears it (then ACL_SUCCESS); only ACL_RT_THREAD_LEVEL.
- aclrtGetPrimaryCtxState: flags is reserved (NULL); active 1 once
  aclrtSetDevice made the primary context.
- aclrtGetSysParamOpt: 0 for every option until aclrtSetSysParamOpt.
- Operator timeouts: the hardware counts in units of aclrtGetOpTimeOutInterval
  microseconds, 1 to 254 of them: a timeout is rounded up to whole units
  and capped at 254; 0 asks for the cap; the default is about 1091 s on
  Atlas A2/A3/950; aclrtGetOpExecuteTimeout reports milliseconds.
- aclrtDeviceSetLimit: SIMD stack sizes are rounded up to 16 KiB, at least
  32 KiB, at most 192 KiB (A2/A3) / 128 KiB (950); SIMT limits exist on
  Ascend950 only (ACL_ERROR_RT_FEATURE_NOT_SUPPORT 207000 elsewhere), where
  the SIMT stack is reported times 32 threads.
"""

import textwrap

import pytest

import convtbc_py
from conftest import run_python
from rawapi import ffi, lib, recent_msg

ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_INVALID_DEVICEID = 107001
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000
GiB, MiB, KiB = 1 << 30, 1 << 20, 1 << 10

# [SoCInfo] of CANN's platform_config files: ai_core_cnt, cube_core_cnt,
# vector_core_cnt, ai_cpu_cnt, memory_size, l2_size.
SOCS = {
    "Ascend910B1": (24, 24, 48, 6, 64 * GiB, 192 * MiB),
    "Ascend910B4": (20, 20, 40, 6, 32 * GiB, 96 * MiB),
    "Ascend910_9391": (24, 24, 48, 6, 64 * GiB, 192 * MiB),
    "Ascend950": (36, 36, 72, 6, 128 * GiB, 128 * MiB),
}

PRELUDE = """
import convtbc_py
ffi, lib = convtbc_py.ffi, convtbc_py.lib
def eq(got, want, what):
    assert got == want, f"{what}: got {got!r}, want {want!r}"
"""


def run(code, **kw):
    return run_python(PRELUDE + textwrap.dedent(code), **kw)


def device_info(attr, device=0):
    value = ffi.new("int64_t *", -99)
    return lib.aclrtGetDeviceInfo(device, attr, value), value[0]


def test_run_mode():
    mode = ffi.new("aclrtRunMode *", 7)
    assert lib.aclrtGetRunMode(mode) == 0
    assert mode[0] == lib.ACL_HOST == 1
    assert lib.aclrtGetRunMode(ffi.NULL) == ACL_ERROR_INVALID_PARAM
    assert "runMode" in recent_msg()


@pytest.mark.parametrize("soc", sorted(SOCS))
def test_device_info_from_the_soc(soc):
    ai, cube, vector, cpus, memory, l2 = SOCS[soc]
    with convtbc_py.soc_profile(soc):
        assert device_info(lib.ACL_DEV_ATTR_AICORE_CORE_NUM) == (0, ai)
        assert device_info(lib.ACL_DEV_ATTR_CUBE_CORE_NUM) == (0, cube)
        assert device_info(lib.ACL_DEV_ATTR_VECTOR_CORE_NUM) == (0, vector)
        assert device_info(lib.ACL_DEV_ATTR_AICPU_CORE_NUM) == (0, cpus)
        assert device_info(lib.ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE) == (0, memory)
        assert device_info(lib.ACL_DEV_ATTR_L2_CACHE_SIZE) == (0, l2)
        value = ffi.new("int64_t *")
        for info, want in ((lib.ACL_DEVICE_INFO_AI_CORE_NUM, ai), (lib.ACL_DEVICE_INFO_VECTOR_CORE_NUM, vector),
                           (lib.ACL_DEVICE_INFO_L2_SIZE, l2)):
            assert lib.aclGetDeviceCapability(0, info, value) == 0
            assert value[0] == want


def test_training_series_has_no_vector_cores():
    with convtbc_py.soc_profile("Ascend910A"):
        assert device_info(lib.ACL_DEV_ATTR_AICORE_CORE_NUM) == (0, 32)
        assert device_info(lib.ACL_DEV_ATTR_VECTOR_CORE_NUM) == (0, 0)
        assert device_info(lib.ACL_DEV_ATTR_L2_CACHE_SIZE) == (0, 32 * MiB)
        info = ffi.new("aclrtUtilizationInfo *")
        assert lib.aclrtGetDeviceUtilizationRate(0, info) == 0
        assert info.vectorUtilization == -1


def test_device_info_refusals():
    assert device_info(lib.ACL_DEV_ATTR_AICORE_CORE_NUM, device=1)[0] == ACL_ERROR_RT_INVALID_DEVICEID
    assert "deviceId 1" in recent_msg()
    assert device_info(999)[0] == ACL_ERROR_RT_PARAM_INVALID
    assert "attr 999" in recent_msg()
    assert lib.aclrtGetDeviceInfo(0, lib.ACL_DEV_ATTR_AICORE_CORE_NUM, ffi.NULL) == ACL_ERROR_INVALID_PARAM
    value = ffi.new("int64_t *")
    assert lib.aclGetDeviceCapability(1, lib.ACL_DEVICE_INFO_AI_CORE_NUM, value) == ACL_ERROR_INVALID_PARAM
    assert lib.aclGetDeviceCapability(0, lib.ACL_DEVICE_INFO_UNDEFINED, value) == ACL_ERROR_INVALID_PARAM
    assert lib.aclGetDeviceCapability(0, lib.ACL_DEVICE_INFO_L2_SIZE, ffi.NULL) == ACL_ERROR_INVALID_PARAM
    cap = ffi.new("int32_t *", 5)
    assert lib.aclrtGetDeviceCapability(0, lib.ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV, cap) == 0
    assert cap[0] == lib.ACL_DEV_FEATURE_NOT_SUPPORT
    assert lib.aclrtGetDeviceCapability(1, lib.ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV, cap) == \
        ACL_ERROR_RT_INVALID_DEVICEID
    assert lib.aclrtGetDeviceCapability(0, 0, cap) == ACL_ERROR_RT_PARAM_INVALID
    assert lib.aclrtGetDeviceCapability(0, lib.ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV, ffi.NULL) == \
        ACL_ERROR_INVALID_PARAM


def test_status_and_utilization():
    status = ffi.new("aclrtDeviceStatus *", 7)
    assert lib.aclrtQueryDeviceStatus(0, status) == 0
    assert status[0] == lib.ACL_RT_DEVICE_STATUS_NORMAL
    assert lib.aclrtQueryDeviceStatus(1, status) == ACL_ERROR_RT_INVALID_DEVICEID
    assert lib.aclrtQueryDeviceStatus(0, ffi.NULL) == ACL_ERROR_INVALID_PARAM
    info = ffi.new("aclrtUtilizationInfo *", {"cubeUtilization": 7, "vectorUtilization": 7,
                                              "aicpuUtilization": 7, "memoryUtilization": 7})
    assert lib.aclrtGetDeviceUtilizationRate(0, info) == 0
    assert (info.cubeUtilization, info.vectorUtilization, info.aicpuUtilization, info.memoryUtilization) == \
        (0, 0, 0, -1)
    assert lib.aclrtGetDeviceUtilizationRate(-1, info) == ACL_ERROR_RT_INVALID_DEVICEID
    assert lib.aclrtGetDeviceUtilizationRate(0, ffi.NULL) == ACL_ERROR_INVALID_PARAM
    info.utilizationExtend = ffi.cast("aclrtUtilizationExtendInfo *", 8)
    assert lib.aclrtGetDeviceUtilizationRate(0, info) == ACL_ERROR_INVALID_PARAM
    assert "utilizationExtend" in recent_msg()


def test_cann_attributes():
    value = ffi.new("int32_t *", 7)
    for soc, bf16 in (("Ascend910B1", 1), ("Ascend950", 1), ("Ascend910A", 0)):
        with convtbc_py.soc_profile(soc):
            answers = {}
            for attr in (lib.ACL_CANN_ATTR_INF_NAN, lib.ACL_CANN_ATTR_BF16, lib.ACL_CANN_ATTR_JIT_COMPILE):
                assert lib.aclGetCannAttribute(attr, value) == 0
                answers[attr] = value[0]
            assert answers[lib.ACL_CANN_ATTR_BF16] == bf16, soc
            assert answers[lib.ACL_CANN_ATTR_JIT_COMPILE] == 0
            listed = ffi.new("aclCannAttr **")
            count = ffi.new("size_t *")
            assert lib.aclGetCannAttributeList(ffi.cast("const aclCannAttr **", listed), count) == 0
            # The list holds exactly the available attributes.
            assert sorted(listed[0][i] for i in range(count[0])) == sorted(a for a, v in answers.items() if v == 1)
    assert lib.aclGetCannAttribute(lib.ACL_CANN_ATTR_UNDEFINED, value) == ACL_ERROR_INVALID_PARAM
    assert lib.aclGetCannAttribute(lib.ACL_CANN_ATTR_BF16, ffi.NULL) == ACL_ERROR_INVALID_PARAM
    assert lib.aclGetCannAttributeList(ffi.NULL, ffi.new("size_t *")) == ACL_ERROR_INVALID_PARAM


def test_peer_access_with_one_device():
    can = ffi.new("int32_t *", 7)
    assert lib.aclrtDeviceCanAccessPeer(can, 0, 0) == ACL_ERROR_INVALID_PARAM
    assert "peerDeviceId" in recent_msg()
    assert lib.aclrtDeviceCanAccessPeer(can, 0, 1) == ACL_ERROR_RT_INVALID_DEVICEID
    assert lib.aclrtDeviceCanAccessPeer(can, 1, 0) == ACL_ERROR_RT_INVALID_DEVICEID
    assert lib.aclrtDeviceCanAccessPeer(ffi.NULL, 0, 1) == ACL_ERROR_INVALID_PARAM
    assert can[0] == 7
    status = ffi.new("int32_t *", 7)
    assert lib.aclrtDevicePeerAccessStatus(0, 0, status) == 0
    assert status[0] == 0
    assert lib.aclrtDevicePeerAccessStatus(0, 1, status) == ACL_ERROR_RT_PARAM_INVALID
    assert lib.aclrtDevicePeerAccessStatus(0, 0, ffi.NULL) == ACL_ERROR_INVALID_PARAM
    topo = ffi.new("uint64_t *")
    assert lib.aclrtGetDevicesTopo(0, 1, topo) == ACL_ERROR_RT_INVALID_DEVICEID
    assert lib.aclrtGetDevicesTopo(0, 0, ffi.NULL) == ACL_ERROR_INVALID_PARAM


@pytest.mark.parametrize("name", ["LogicDevIdByUserDevId", "UserDevIdByLogicDevId", "LogicDevIdByPhyDevId",
                                  "PhyDevIdByLogicDevId", "UserDevIdByPhyDevId", "PhyDevIdByUserDevId"])
def test_device_id_mappings(name):
    # Without ASCEND_RT_VISIBLE_DEVICES and outside a container, CANN's user,
    # logical and physical ids are the same.
    fn = getattr(lib, "aclrtGet" + name)
    out = ffi.new("int32_t *", 7)
    assert fn(0, out) == 0 and out[0] == 0
    assert fn(1, out) == ACL_ERROR_RT_INVALID_DEVICEID
    assert fn(0, ffi.NULL) == ACL_ERROR_INVALID_PARAM


def test_uuid_and_error_verbose():
    a, b = ffi.new("aclrtUuid *"), ffi.new("aclrtUuid *")
    assert lib.aclrtDeviceGetUuid(0, a) == 0 and lib.aclrtDeviceGetUuid(0, b) == 0
    assert bytes(ffi.buffer(a)) == bytes(ffi.buffer(b)) != bytes(16)
    assert lib.aclrtDeviceGetUuid(1, a) == ACL_ERROR_RT_INVALID_DEVICEID
    assert lib.aclrtDeviceGetUuid(0, ffi.NULL) == ACL_ERROR_INVALID_PARAM
    info = ffi.new("aclrtErrorInfo *", {"tryRepair": 1, "hasDetail": 1, "errorType": lib.ACL_RT_ERROR_AICORE})
    assert lib.aclrtGetErrorVerbose(0, info) == 0
    assert (info.tryRepair, info.hasDetail, info.errorType) == (0, 0, lib.ACL_RT_NO_ERROR)
    assert lib.aclrtGetErrorVerbose(1, info) == ACL_ERROR_RT_INVALID_DEVICEID
    assert lib.aclrtGetErrorVerbose(0, ffi.NULL) == ACL_ERROR_INVALID_PARAM


def test_bare_tgid():
    import os
    pid = ffi.new("int32_t *")
    assert lib.aclrtDeviceGetBareTgid(pid) == 0
    assert pid[0] == os.getpid()
    assert lib.aclrtDeviceGetBareTgid(ffi.NULL) == ACL_ERROR_INVALID_PARAM


def test_ts_device():
    assert lib.aclrtSetTsDevice(lib.ACL_TS_ID_AICORE) == 0
    assert lib.aclrtSetTsDevice(lib.ACL_TS_ID_AIVECTOR) == 0
    assert lib.aclrtSetTsDevice(lib.ACL_TS_ID_RESERVED) == ACL_ERROR_INVALID_PARAM
    assert "tsId" in recent_msg()


def test_last_error_per_thread():
    run("""
    import threading
    eq(lib.aclrtGetLastError(lib.ACL_RT_THREAD_LEVEL), 0, "nothing yet")
    eq(lib.aclInit(ffi.NULL), 0, "aclInit")
    dev = ffi.new("int32_t *")
    eq(lib.aclrtGetDevice(dev), 107002, "aclrtGetDevice without a device")
    eq(lib.aclrtPeekAtLastError(lib.ACL_RT_THREAD_LEVEL), 107002, "peek")
    eq(lib.aclrtPeekAtLastError(lib.ACL_RT_THREAD_LEVEL), 107002, "peek does not clear")
    seen = []
    t = threading.Thread(target=lambda: seen.append(lib.aclrtPeekAtLastError(lib.ACL_RT_THREAD_LEVEL)))
    t.start(); t.join()
    eq(seen, [0], "another thread's last error")
    # a parameter error caught before the runtime does not replace it
    eq(lib.aclrtGetRunMode(ffi.NULL), 100000, "aclrtGetRunMode(NULL)")
    eq(lib.aclrtPeekAtLastError(1), 100000, "level 1")
    eq(lib.aclrtGetLastError(lib.ACL_RT_THREAD_LEVEL), 107002, "get")
    eq(lib.aclrtGetLastError(lib.ACL_RT_THREAD_LEVEL), 0, "get cleared it")
    eq(lib.aclrtSetDevice(3), 107001, "aclrtSetDevice(3)")
    eq(lib.aclrtSetDevice(0), 0, "aclrtSetDevice(0)")
    eq(lib.aclrtGetLastError(lib.ACL_RT_THREAD_LEVEL), 107001, "success keeps the last error")
    print("ok")
    """)


def test_contexts_streams_and_options():
    run("""
    s1, s2 = ffi.new("aclrtStream *"), ffi.new("aclrtStream *")
    active = ffi.new("int32_t *", 7)
    eq(lib.aclrtGetPrimaryCtxState(0, ffi.NULL, active), 0, "primary context state before aclInit")
    eq(active[0], 0, "inactive")
    eq(lib.aclInit(ffi.NULL), 0, "aclInit")
    eq(lib.aclrtCtxGetCurrentDefaultStream(s1), 107002, "no current context")
    eq(lib.aclrtGetPrimaryCtxState(0, ffi.NULL, active), 0, "state"); eq(active[0], 0, "still inactive")
    eq(lib.aclrtSetDevice(0), 0, "aclrtSetDevice")
    eq(lib.aclrtGetPrimaryCtxState(0, ffi.NULL, active), 0, "state"); eq(active[0], 1, "active")
    eq(lib.aclrtGetPrimaryCtxState(0, ffi.new("uint32_t *"), active), 100000, "flags must be NULL")
    eq(lib.aclrtGetPrimaryCtxState(1, ffi.NULL, active), 107001, "device 1")
    eq(lib.aclrtGetPrimaryCtxState(0, ffi.NULL, ffi.NULL), 100000, "NULL active")
    eq(lib.aclrtCtxGetCurrentDefaultStream(s1), 0, "default stream")
    eq(lib.aclrtCtxGetCurrentDefaultStream(s2), 0, "default stream again")
    assert s1[0] != ffi.NULL and s1[0] == s2[0]
    ctx = ffi.new("aclrtContext *")
    eq(lib.aclrtCreateContext(ctx, 0), 0, "aclrtCreateContext (becomes current)")
    eq(lib.aclrtCtxGetCurrentDefaultStream(s2), 0, "its default stream")
    assert s2[0] != ffi.NULL and s2[0] != s1[0], "each context has its own default stream"
    eq(lib.aclrtCtxGetCurrentDefaultStream(ffi.NULL), 100000, "NULL stream")
    eq(lib.aclrtDestroyContext(ctx[0]), 0, "destroy")
    eq(lib.aclrtSetDevice(0), 0, "back to the device's context")

    value = ffi.new("int64_t *", 7)
    for opt in range(4):
        eq(lib.aclrtGetSysParamOpt(opt, value), 0, f"get option {opt}"); eq(value[0], 0, f"option {opt} default")
    eq(lib.aclrtSetSysParamOpt(lib.ACL_OPT_DETERMINISTIC, 1), 0, "set deterministic")
    eq(lib.aclrtGetSysParamOpt(lib.ACL_OPT_DETERMINISTIC, value), 0, "get"); eq(value[0], 1, "deterministic")
    eq(lib.aclrtSetSysParamOpt(lib.ACL_OPT_ENABLE_KERNEL_EARLY_START, 1), 0, "set early start")
    eq(lib.aclrtGetSysParamOpt(lib.ACL_OPT_ENABLE_KERNEL_EARLY_START, value), 0, "get"); eq(value[0], 1, "early")
    eq(lib.aclrtSetSysParamOpt(9, 1), 100000, "unknown option")
    eq(lib.aclrtGetSysParamOpt(lib.ACL_OPT_DETERMINISTIC, ffi.NULL), 100000, "NULL value")
    eq(lib.aclrtCtxSetSysParamOpt(lib.ACL_OPT_ENABLE_DEBUG_KERNEL, 1), 0, "context option")
    eq(lib.aclrtCtxGetSysParamOpt(lib.ACL_OPT_ENABLE_DEBUG_KERNEL, value), 0, "get"); eq(value[0], 1, "debug")
    print("ok")
    """)


def test_saturation_mode_and_peer_changes_need_a_device():
    run("""
    mode = ffi.new("aclrtFloatOverflowMode *", 7)
    eq(lib.aclInit(ffi.NULL), 0, "aclInit")
    eq(lib.aclrtGetDeviceSatMode(mode), 107002, "no device")
    eq(lib.aclrtDeviceEnablePeerAccess(1, 0), 107002, "enable without a device")
    eq(lib.aclrtSetDevice(0), 0, "aclrtSetDevice")
    eq(lib.aclrtGetDeviceSatMode(mode), 0, "get"); eq(mode[0], lib.ACL_RT_OVERFLOW_MODE_INFNAN, "Inf/NaN mode")
    eq(lib.aclrtSetDeviceSatMode(lib.ACL_RT_OVERFLOW_MODE_INFNAN), 0, "set Inf/NaN")
    eq(lib.aclrtSetDeviceSatMode(lib.ACL_RT_OVERFLOW_MODE_SATURATION), 207000, "saturation is not emulated")
    msg = ffi.string(lib.aclGetRecentErrMsg()).decode()
    assert "aclrtSetDeviceSatMode" in msg and "saturation" in msg, msg
    eq(lib.aclrtSetDeviceSatMode(lib.ACL_RT_OVERFLOW_MODE_UNDEF), 107000, "undefined mode")
    eq(lib.aclrtGetDeviceSatMode(ffi.NULL), 100000, "NULL mode")
    eq(lib.aclrtDeviceEnablePeerAccess(1, 1), 200006, "flags must be 0")
    eq(lib.aclrtDeviceEnablePeerAccess(0, 0), 100000, "peer is the current device")
    eq(lib.aclrtDeviceEnablePeerAccess(1, 0), 107001, "peer 1 is no device")
    eq(lib.aclrtDeviceDisablePeerAccess(0), 100000, "disable: the current device")
    eq(lib.aclrtDeviceDisablePeerAccess(1), 107001, "disable: no device")
    eq(lib.aclrtResetDeviceForce(1), 107001, "force reset of device 1")
    eq(lib.aclrtResetDeviceForce(0), 0, "force reset")
    dev = ffi.new("int32_t *")
    eq(lib.aclrtGetDevice(dev), 107002, "no current device after the reset")
    print("ok")
    """)


def test_op_timeouts():
    run("""
    interval = ffi.new("uint64_t *"); actual = ffi.new("uint64_t *"); ms = ffi.new("uint32_t *")
    eq(lib.aclrtGetOpTimeOutInterval(interval), 0, "interval")
    unit = interval[0]
    assert unit > 0
    def expect_us(requested):
        units = 254 if requested == 0 else min(254, max(1, -(-requested // unit)))
        return units * unit
    eq(lib.aclrtGetOpExecuteTimeout(ms), 0, "default")
    assert abs(ms[0] - 1091000) <= 1000, ms[0]  # CANN: 1091 s on Atlas A2/A3/950
    eq(ms[0], -(-254 * unit // 1000), "the default is 254 units")
    for requested in (0, 1, unit, unit + 1, 10 * unit - 1, 10**12):
        eq(lib.aclrtSetOpExecuteTimeOutV2(requested, actual), 0, f"V2 {requested}")
        eq(actual[0], expect_us(requested), f"actual timeout for {requested} us")
        eq(lib.aclrtGetOpExecuteTimeout(ms), 0, "read back"); eq(ms[0], -(-actual[0] // 1000), "in ms")
    eq(lib.aclrtSetOpExecuteTimeOut(10), 0, "10 s")
    eq(lib.aclrtGetOpExecuteTimeout(ms), 0, "read back"); eq(ms[0], -(-expect_us(10**7) // 1000), "10 s rounded")
    eq(lib.aclrtSetOpExecuteTimeOutWithMs(1), 0, "1 ms")
    eq(lib.aclrtGetOpExecuteTimeout(ms), 0, "read back"); eq(ms[0], -(-unit // 1000), "one unit")
    eq(lib.aclrtSetOpExecuteTimeOut(0), 0, "0 s: the maximum")
    eq(lib.aclrtGetOpExecuteTimeout(ms), 0, "read back"); eq(ms[0], -(-254 * unit // 1000), "the maximum")
    eq(lib.aclrtSetOpWaitTimeout(30), 0, "op wait timeout")
    eq(lib.aclrtSetOpExecuteTimeOutV2(5, ffi.NULL), 100000, "NULL actualTimeout")
    eq(lib.aclrtGetOpExecuteTimeout(ffi.NULL), 100000, "NULL timeoutMs")
    eq(lib.aclrtGetOpTimeOutInterval(ffi.NULL), 100000, "NULL interval")
    print("ok")
    """)


def test_device_limits():
    run("""
    v = ffi.new("size_t *")
    L = lib
    eq(lib.aclrtDeviceGetLimit(L.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, v), 0, "stack default"); eq(v[0], 32768, "32K")
    eq(lib.aclrtDeviceGetLimit(L.ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE, v), 0, "fifo"); eq(v[0], 32768, "32K")
    eq(lib.aclrtDeviceSetLimit(L.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, 40000), 0, "stack 40000")
    eq(lib.aclrtDeviceGetLimit(L.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, v), 0, "get"); eq(v[0], 49152, "rounded to 16K")
    eq(lib.aclrtDeviceSetLimit(L.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, 1000), 0, "stack 1000")
    eq(lib.aclrtDeviceGetLimit(L.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, v), 0, "get"); eq(v[0], 32768, "at least 32K")
    eq(lib.aclrtDeviceSetLimit(L.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, 192 * 1024), 0, "192K")
    eq(lib.aclrtDeviceSetLimit(L.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, 192 * 1024 + 1), 107000, "above 192K")
    eq(lib.aclrtDeviceSetLimit(L.ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE, 5000), 0, "fifo 5000")
    eq(lib.aclrtDeviceGetLimit(L.ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE, v), 0, "get"); eq(v[0], 5000, "x8")
    eq(lib.aclrtDeviceSetLimit(L.ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE, 5001), 0, "fifo 5001")
    eq(lib.aclrtDeviceGetLimit(L.ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE, v), 0, "get"); eq(v[0], 5008, "x8")
    eq(lib.aclrtDeviceGetLimit(L.ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE, v), 207000, "no SIMT on A2")
    eq(lib.aclrtDeviceSetLimit(L.ACL_RT_DEV_LIMIT_SIMT_PRINTF_FIFO_SIZE, 1 << 21), 207000, "no SIMT on A2")
    eq(lib.aclrtDeviceSetLimit(5, 1), 100000, "limit 5")
    eq(lib.aclrtDeviceSetLimit(L.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, 1 << 33), 100000, "above UINT32_MAX")
    eq(lib.aclrtDeviceGetLimit(L.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, ffi.NULL), 100000, "NULL value")
    eq(lib.convtbcSetSocVersion(b"Ascend950"), 0, "Ascend950")
    eq(lib.aclrtDeviceSetLimit(L.ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE, 256), 0, "SIMT stack 256")
    eq(lib.aclrtDeviceGetLimit(L.ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE, v), 0, "get"); eq(v[0], 8192, "times 32")
    eq(lib.aclrtDeviceSetLimit(L.ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE, 512), 0, "divergence 512")
    eq(lib.aclrtDeviceGetLimit(L.ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE, v), 0, "get"); eq(v[0], 512, "as set")
    eq(lib.aclrtDeviceGetLimit(L.ACL_RT_DEV_LIMIT_SIMT_PRINTF_FIFO_SIZE, v), 0, "SIMT fifo"); eq(v[0], 2 << 20, "2M")
    eq(lib.aclrtDeviceSetLimit(L.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, 160 * 1024), 107000, "950 stack: at most 128K")
    eq(lib.convtbcSetSocVersion(b"Ascend910A"), 0, "Ascend910A")
    eq(lib.aclrtDeviceGetLimit(L.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, v), 207000, "training series")
    print("ok")
    """)


def test_resource_limits():
    run("""
    v = ffi.new("uint32_t *")
    CUBE, VECTOR = lib.ACL_RT_DEV_RES_CUBE_CORE, lib.ACL_RT_DEV_RES_VECTOR_CORE
    eq(lib.aclrtGetDeviceResLimit(0, CUBE, v), 0, "cube default"); eq(v[0], 24, "the SoC's cube cores")
    eq(lib.aclrtGetDeviceResLimit(0, VECTOR, v), 0, "vector default"); eq(v[0], 48, "the SoC's vector cores")
    eq(lib.aclrtSetDeviceResLimit(0, CUBE, 8), 0, "cube 8")
    eq(lib.aclrtGetDeviceResLimit(0, CUBE, v), 0, "get"); eq(v[0], 8, "8")
    eq(lib.aclrtGetResInCurrentThread(CUBE, v), 0, "thread"); eq(v[0], 8, "the process limit")
    eq(lib.aclrtGetResInCurrentThread(VECTOR, v), 0, "thread vector"); eq(v[0], 48, "hardware")
    eq(lib.aclrtSetDeviceResLimit(0, CUBE, 25), 107000, "more than the SoC has")
    eq(lib.aclrtSetDeviceResLimit(0, CUBE, 0), 107000, "none")
    eq(lib.aclrtSetDeviceResLimit(0, 2, 1), 107000, "type 2")
    eq(lib.aclrtSetDeviceResLimit(1, CUBE, 1), 107001, "device 1")
    eq(lib.aclrtGetDeviceResLimit(0, CUBE, ffi.NULL), 100000, "NULL value")
    eq(lib.aclrtResetDeviceResLimit(0), 0, "reset")
    eq(lib.aclrtGetDeviceResLimit(0, CUBE, v), 0, "get"); eq(v[0], 24, "back to the SoC's")
    eq(lib.aclrtResetDeviceResLimit(1), 107001, "reset device 1")
    print("ok")
    """)
