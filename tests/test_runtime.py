"""The ACL runtime slice: initialisation state machine, devices, memory,
streams/events, system parameters, SoC name, float16 conversions,
aclDataTypeSize, and aclGetRecentErrMsg (per thread, cleared on read).

Tests that depend on the initialisation state run in a fresh interpreter.
"""

import threading

import numpy as np
import pytest

from conftest import run_python
from rawapi import Tensor, ffi, lib, phase1, recent_msg, tensor_from_array

PRELUDE = """
import numpy as np
import convtbc_py
ffi, lib = convtbc_py.ffi, convtbc_py.lib
def eq(got, want, what):
    assert got == want, f"{what}: got {got}, want {want}"
"""


def test_before_init():
    run_python(PRELUDE + """
    p = ffi.new("void **")
    s = ffi.new("aclrtStream *")
    buf = np.zeros(16, np.uint8); src = np.arange(16, dtype=np.uint8)
    d, sp = ffi.cast("void *", buf.ctypes.data), ffi.cast("void *", src.ctypes.data)
    eq(lib.aclrtSetDevice(0), 100001, "aclrtSetDevice before aclInit")
    eq(lib.aclrtCreateStream(s), 100001, "aclrtCreateStream before aclInit")
    eq(lib.aclrtMalloc(p, 64, lib.ACL_MEM_MALLOC_HUGE_FIRST), 100001, "aclrtMalloc before aclInit")
    eq(lib.aclrtMemcpy(d, 16, sp, 16, lib.ACL_MEMCPY_HOST_TO_HOST), 100001, "aclrtMemcpy before aclInit")
    assert np.all(buf == 0)
    eq(lib.aclrtSynchronizeStream(ffi.NULL), 100001, "aclrtSynchronizeStream before aclInit")
    eq(lib.aclrtSynchronizeDevice(), 100001, "aclrtSynchronizeDevice before aclInit")
    eq(lib.aclFinalize(), 100037, "aclFinalize before aclInit")
    print("ok")
    """.replace("\n    ", "\n"))


def test_op_without_init():
    # Both phases work in a process that never called aclInit.
    run_python(PRELUDE + """
    from rawapi import Problem, run_op
    from reference import conv_tbc_backward_ref, assert_close
    rng = np.random.default_rng(1)
    go, x, w = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((6, 2, 4), (5, 2, 3), (2, 3, 4)))
    pr = Problem(go, x, w, np.zeros(4, np.float32))
    st, msg = run_op(*pr.args(), 1, 0, **pr.outs())
    eq(st, 0, "op without aclInit: " + msg)
    for a, r in zip(pr.results(), conv_tbc_backward_ref(go, x, w, 1)):
        assert_close(a, r)
    """.replace("\n    ", "\n"))


def test_init_state_machine_and_runtime():
    run_python(PRELUDE + """
    eq(lib.aclInit(ffi.NULL), 0, "aclInit")
    eq(lib.aclInit(ffi.NULL), 100002, "second aclInit")
    eq(lib.aclrtSetDevice(1), 107001, "aclrtSetDevice(1)")
    eq(lib.aclrtSetDevice(-1), 107001, "aclrtSetDevice(-1)")
    eq(lib.aclrtSetDevice(0), 0, "aclrtSetDevice(0)")
    dev = ffi.new("int32_t *", 99)
    eq(lib.aclrtGetDevice(dev), 0, "aclrtGetDevice"); eq(dev[0], 0, "device id")
    cnt = ffi.new("uint32_t *")
    eq(lib.aclrtGetDeviceCount(cnt), 0, "aclrtGetDeviceCount"); eq(cnt[0], 1, "device count")
    eq(ffi.string(lib.aclrtGetSocName()).decode(), "Ascend910B1", "aclrtGetSocName")

    # memory
    p = ffi.new("void **")
    eq(lib.aclrtMalloc(p, 0, lib.ACL_MEM_MALLOC_HUGE_FIRST), 100000, "aclrtMalloc size 0")
    eq(lib.aclrtMalloc(ffi.NULL, 64, lib.ACL_MEM_MALLOC_HUGE_FIRST), 100000, "aclrtMalloc NULL devPtr")
    eq(lib.aclrtMalloc(p, 256, lib.ACL_MEM_MALLOC_HUGE_FIRST), 0, "aclrtMalloc")
    dev_mem = p[0]
    assert dev_mem != ffi.NULL
    src = np.arange(64, dtype=np.float32); back = np.zeros(64, np.float32)
    s_ptr, b_ptr = ffi.cast("void *", src.ctypes.data), ffi.cast("void *", back.ctypes.data)
    eq(lib.aclrtMemcpy(dev_mem, 256, s_ptr, 256, lib.ACL_MEMCPY_HOST_TO_DEVICE), 0, "memcpy H2D")
    eq(lib.aclrtMemcpy(b_ptr, 256, dev_mem, 256, lib.ACL_MEMCPY_DEVICE_TO_HOST), 0, "memcpy D2H")
    assert np.array_equal(back, src)
    # count > destMax, NULLs, bad kind: 100000 and nothing written
    back[:] = -1
    eq(lib.aclrtMemcpy(b_ptr, 128, dev_mem, 256, lib.ACL_MEMCPY_DEVICE_TO_HOST), 100000, "count > destMax")
    eq(lib.aclrtMemcpy(ffi.NULL, 256, dev_mem, 256, lib.ACL_MEMCPY_DEVICE_TO_HOST), 100000, "NULL dst")
    eq(lib.aclrtMemcpy(b_ptr, 256, ffi.NULL, 256, lib.ACL_MEMCPY_DEVICE_TO_HOST), 100000, "NULL src")
    for kind in (5, 7, 100, 0xFFFFFFFF):
        eq(lib.aclrtMemcpy(b_ptr, 256, dev_mem, 256, kind), 100000, f"kind {kind}")
    assert np.all(back == -1), "a refused memcpy wrote"
    # every valid kind copies, each with its own direction
    p2 = ffi.new("void **")
    eq(lib.aclrtMalloc(p2, 256, lib.ACL_MEM_MALLOC_HUGE_FIRST), 0, "aclrtMalloc 2")
    dev2 = p2[0]
    host2 = np.zeros(64, np.float32); h2 = ffi.cast("void *", host2.ctypes.data)
    eq(lib.aclrtMemcpy(h2, 256, s_ptr, 128, lib.ACL_MEMCPY_HOST_TO_HOST), 0, "memcpy H2H")
    assert np.array_equal(host2[:32], src[:32]) and np.all(host2[32:] == 0)
    eq(lib.aclrtMemcpy(dev2, 256, dev_mem, 256, lib.ACL_MEMCPY_DEVICE_TO_DEVICE), 0, "memcpy D2D")
    back[:] = -1
    eq(lib.aclrtMemcpy(b_ptr, 256, dev2, 256, lib.ACL_MEMCPY_DEFAULT), 0, "memcpy DEFAULT (D2H)")
    assert np.array_equal(back, src)
    eq(lib.aclrtFree(dev2), 0, "aclrtFree 2")
    # memset
    eq(lib.aclrtMemset(dev_mem, 256, 0, 256), 0, "aclrtMemset")
    eq(lib.aclrtMemcpy(b_ptr, 256, dev_mem, 256, lib.ACL_MEMCPY_DEVICE_TO_HOST), 0, "memcpy D2H")
    assert np.all(back == 0)
    eq(lib.aclrtFree(dev_mem), 0, "aclrtFree")
    hp = ffi.new("void **")
    eq(lib.aclrtMallocHost(hp, 64), 0, "aclrtMallocHost"); assert hp[0] != ffi.NULL
    eq(lib.aclrtFreeHost(hp[0]), 0, "aclrtFreeHost")

    # streams and events
    s = ffi.new("aclrtStream *")
    eq(lib.aclrtCreateStream(s), 0, "aclrtCreateStream")
    e = ffi.new("aclrtEvent *")
    eq(lib.aclrtCreateEvent(e), 0, "aclrtCreateEvent")
    eq(lib.aclrtRecordEvent(e[0], s[0]), 0, "aclrtRecordEvent")
    eq(lib.aclrtStreamWaitEvent(s[0], e[0]), 0, "aclrtStreamWaitEvent")
    eq(lib.aclrtSynchronizeEvent(e[0]), 0, "aclrtSynchronizeEvent")
    eq(lib.aclrtSynchronizeStream(s[0]), 0, "aclrtSynchronizeStream")
    eq(lib.aclrtSynchronizeStream(ffi.NULL), 0, "aclrtSynchronizeStream(NULL)")
    eq(lib.aclrtSynchronizeDevice(), 0, "aclrtSynchronizeDevice")
    eq(lib.aclrtDestroyEvent(e[0]), 0, "aclrtDestroyEvent")
    eq(lib.aclrtDestroyStream(s[0]), 0, "aclrtDestroyStream")

    # system parameter
    v = ffi.new("int64_t *", -5)
    eq(lib.aclrtCtxSetSysParamOpt(lib.ACL_OPT_DETERMINISTIC, 1), 0, "aclrtCtxSetSysParamOpt")
    eq(lib.aclrtCtxGetSysParamOpt(lib.ACL_OPT_DETERMINISTIC, v), 0, "aclrtCtxGetSysParamOpt"); eq(v[0], 1, "deterministic")
    eq(lib.aclrtCtxSetSysParamOpt(lib.ACL_OPT_DETERMINISTIC, 0), 0, "set 0")
    eq(lib.aclrtCtxGetSysParamOpt(lib.ACL_OPT_DETERMINISTIC, v), 0, "get"); eq(v[0], 0, "deterministic 0")

    eq(lib.aclrtResetDevice(0), 0, "aclrtResetDevice")
    eq(lib.aclFinalize(), 0, "aclFinalize")
    eq(lib.aclFinalize(), 100037, "second aclFinalize")
    print("ok")
    """.replace("\n    ", "\n"))


def test_op_with_stream_after_init():
    # CANN's flow: stream from aclrtCreateStream, device memory via aclrtMalloc.
    run_python(PRELUDE + """
    from reference import conv_tbc_backward_ref, assert_close
    eq(lib.aclInit(ffi.NULL), 0, "aclInit"); eq(lib.aclrtSetDevice(0), 0, "setdev")
    s = ffi.new("aclrtStream *"); eq(lib.aclrtCreateStream(s), 0, "stream")
    rng = np.random.default_rng(3)
    host = {"self": rng.uniform(-1, 1, (5, 2, 4)).astype(np.float32),
            "input": rng.uniform(-1, 1, (4, 2, 3)).astype(np.float32),
            "weight": rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32),
            "bias": np.zeros(4, np.float32)}
    host["gradInput"] = np.zeros((4, 2, 3), np.float32)
    host["gradWeight"] = np.zeros((2, 3, 4), np.float32)
    host["gradBias"] = np.zeros(4, np.float32)
    dev, ten = {}, {}
    for n, a in host.items():
        p = ffi.new("void **")
        eq(lib.aclrtMalloc(p, a.nbytes, 0), 0, "malloc")
        dev[n] = p[0]
        eq(lib.aclrtMemcpy(p[0], a.nbytes, ffi.from_buffer(a), a.nbytes, 1), 0, "h2d")
        dims = ffi.new("int64_t[]", list(a.shape))
        st = ffi.new("int64_t[]", [x // 4 for x in a.strides])
        ten[n] = lib.aclCreateTensor(dims, a.ndim, lib.ACL_FLOAT, st, 0, lib.ACL_FORMAT_ND, dims, a.ndim, p[0])
        assert ten[n] != ffi.NULL
    ws = ffi.new("uint64_t *"); ex = ffi.new("aclOpExecutor **")
    eq(lib.aclnnConvTbcBackwardGetWorkspaceSize(ten["self"], ten["input"], ten["weight"], ten["bias"], 1, 1,
        ten["gradInput"], ten["gradWeight"], ten["gradBias"], ws, ex), 0, "phase 1")
    wp = ffi.new("void **")
    if ws[0]:
        eq(lib.aclrtMalloc(wp, ws[0], 0), 0, "workspace")
    eq(lib.aclnnConvTbcBackward(wp[0] if ws[0] else ffi.NULL, ws[0], ex[0], s[0]), 0, "phase 2")
    eq(lib.aclrtSynchronizeStream(s[0]), 0, "sync")
    out = {}
    for n in ("gradInput", "gradWeight", "gradBias"):
        a = np.empty_like(host[n])
        eq(lib.aclrtMemcpy(ffi.from_buffer(a), a.nbytes, dev[n], a.nbytes, 2), 0, "d2h")
        out[n] = a
    from reference import conv_tbc_backward_ref_cube
    ref = conv_tbc_backward_ref_cube(host["self"], host["input"], host["weight"], 1, 1)
    for n, r in zip(("gradInput", "gradWeight", "gradBias"), ref):
        assert_close(out[n], r, n)
    for n in ten: lib.aclDestroyTensor(ten[n]); lib.aclrtFree(dev[n])
    if ws[0]: lib.aclrtFree(wp[0])
    eq(lib.aclrtDestroyStream(s[0]), 0, "destroy stream"); lib.aclrtResetDevice(0)
    eq(lib.aclFinalize(), 0, "finalize")
    """.replace("\n    ", "\n"))


# --------------------------------------------------------------------------
# In-process (no dependence on the init state)


def test_float16_to_float_exhaustive():
    bits = np.arange(65536, dtype=np.uint32)
    want = bits.astype(np.uint16).view(np.float16).astype(np.float32)
    got = np.array([lib.aclFloat16ToFloat(int(b)) for b in bits], np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))  # incl. ±0, subnormals


def test_float_to_float16_rne():
    # All float16 values, every midpoint between neighbours (ties), one
    # float32 ulp either side of each midpoint, the overflow boundary,
    # float16 subnormal range, specials and random float32s.
    h = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    mids = (h[:-1] + h[1:]) / 2
    vals = np.concatenate([h, mids, [65504.0, 65519.0, 65519.996, 65520.0, 65536.0, 1e6, 3e38]])
    vals = vals.astype(np.float32)
    near = np.concatenate([np.nextafter(mids.astype(np.float32), np.float32(np.inf)),
                           np.nextafter(mids.astype(np.float32), np.float32(0))])
    rng = np.random.default_rng(5)
    rnd = np.concatenate([
        rng.uniform(-70000, 70000, 20000), rng.uniform(-1e-4, 1e-4, 20000),
        rng.uniform(-1e-7, 1e-7, 5000)]).astype(np.float32)
    x = np.concatenate([vals, near, rnd, -vals, -near, [np.inf, -np.inf, 0.0, -0.0]]).astype(np.float32)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    got = np.array([lib.aclFloatToFloat16(float(v)) for v in x], np.uint16)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(float(x[i]), hex(got[i]), hex(want[i])) for i in bad[:10]]
    n = lib.aclFloatToFloat16(float("nan"))
    assert (n & 0x7C00) == 0x7C00 and (n & 0x3FF) != 0, hex(n)


@pytest.mark.parametrize("name,size", [
    ("ACL_FLOAT", 4), ("ACL_FLOAT16", 2), ("ACL_BF16", 2), ("ACL_DOUBLE", 8), ("ACL_INT8", 1),
    ("ACL_UINT8", 1), ("ACL_INT16", 2), ("ACL_UINT16", 2), ("ACL_INT32", 4), ("ACL_UINT32", 4),
    ("ACL_INT64", 8), ("ACL_UINT64", 8), ("ACL_BOOL", 1), ("ACL_COMPLEX64", 8),
    ("ACL_COMPLEX128", 16),
])
def test_data_type_size(name, size):
    assert lib.aclDataTypeSize(getattr(lib, name)) == size


def _fail_phase1():
    """A phase-1 call failing with a NULL bias (message left unread); returns its status."""
    x = tensor_from_array(np.zeros((5, 1, 2), np.float32))
    w = tensor_from_array(np.zeros((1, 2, 2), np.float32))
    ws, ex = ffi.new("uint64_t *"), ffi.new("aclOpExecutor **")
    return lib.aclnnConvTbcBackwardGetWorkspaceSize(x.ptr, x.ptr, w.ptr, ffi.NULL, 0, 0, x.ptr, w.ptr,
                                                    ffi.NULL, ws, ex)


def test_recent_err_msg_per_thread():
    recent_msg()
    events = {"a_failed": threading.Event(), "b_read": threading.Event()}
    seen = {}

    def thread_a():
        x = tensor_from_array(np.zeros((5, 1, 2), np.float32))
        w = tensor_from_array(np.zeros((1, 2, 2), np.float32))
        ws, ex = ffi.new("uint64_t *"), ffi.new("aclOpExecutor **")
        seen["status"] = lib.aclnnConvTbcBackwardGetWorkspaceSize(
            x.ptr, x.ptr, w.ptr, ffi.NULL, 0, 0, x.ptr, w.ptr, ffi.NULL, ws, ex)
        events["a_failed"].set()
        events["b_read"].wait(10)
        seen["a_first"] = recent_msg()
        seen["a_second"] = recent_msg()

    def thread_b():
        events["a_failed"].wait(10)
        seen["b"] = recent_msg()
        events["b_read"].set()

    ta, tb = threading.Thread(target=thread_a), threading.Thread(target=thread_b)
    ta.start(); tb.start(); ta.join(); tb.join()
    assert seen["status"] == 161001
    assert seen["b"] == "", f"thread B saw thread A's message: {seen['b']!r}"
    assert "bias" in seen["a_first"], seen["a_first"]
    assert seen["a_second"] == "", "message not cleared after reading"
    assert recent_msg() == ""  # nor in the main thread


def test_recent_err_msg_newest_first():
    recent_msg()
    x = tensor_from_array(np.zeros((5, 1, 2), np.float32))
    w = tensor_from_array(np.zeros((1, 2, 2), np.float32))
    b = tensor_from_array(np.zeros(2, np.float32))
    ws, ex = ffi.new("uint64_t *"), ffi.new("aclOpExecutor **")
    # first: a NULL bias; then: a bad cubeMathType
    assert lib.aclnnConvTbcBackwardGetWorkspaceSize(x.ptr, x.ptr, w.ptr, ffi.NULL, 0, 0, x.ptr, w.ptr,
                                                    b.ptr, ws, ex) == 161001
    assert lib.aclnnConvTbcBackwardGetWorkspaceSize(x.ptr, x.ptr, w.ptr, b.ptr, 0, 9, x.ptr, w.ptr,
                                                    b.ptr, ws, ex) == 161002
    msg = recent_msg()
    assert "cubeMathType" in msg and "bias" in msg, msg
    assert msg.index("cubeMathType") < msg.index("bias"), f"not newest first: {msg!r}"
    assert recent_msg() == ""


def test_recent_err_msg_pointer_stable_until_next_call():
    recent_msg()
    assert _fail_phase1() == 161001
    p = lib.aclGetRecentErrMsg()
    assert p != ffi.NULL
    first = ffi.string(p)
    assert _fail_phase1() == 161001  # a new message is recorded...
    assert ffi.string(p) == first  # ...but the returned pointer is still valid and unchanged
    recent_msg()
