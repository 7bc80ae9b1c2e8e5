"""CANN's stream, event and host-callback calls beyond create/sync/destroy,
through the raw API, each scenario in a fresh interpreter (the runtime state
is per process). Codes and statuses are CANN's documented values, written
out as numbers so that a wrong header value fails too:

  100000 ACL_ERROR_INVALID_PARAM        107000 ACL_ERROR_RT_PARAM_INVALID
  107002 ACL_ERROR_RT_CONTEXT_NULL      107006 ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID
  107011 ACL_ERROR_RT_STREAM_SUBSCRIBE  107012 ACL_ERROR_RT_THREAD_SUBSCRIBE
  107015 ACL_ERROR_RT_STREAM_NO_CB_REG  107020 ACL_ERROR_RT_TASK_TIMEOUT
  207000 ACL_ERROR_RT_FEATURE_NOT_SUPPORT 507000 ACL_ERROR_RT_INTERNAL_ERROR
  507012 ACL_ERROR_RT_REPORT_TIMEOUT    507046 ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
  507047 ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
  aclrtStreamStatus / aclrtEventStatus / aclrtEventWaitStatus: COMPLETE 0, NOT_READY 1
  aclrtEventRecordedStatus: NOT_READY 0, COMPLETE 1

CONVTBC_STREAM_DELAY_MS holds every queued task back, so that work is still
queued when a query or a timed synchronisation looks at it.
"""

import pytest

from conftest import run_python

PRELUDE = r"""
import threading, time
import numpy as np
import convtbc_py
ffi, lib = convtbc_py.ffi, convtbc_py.lib

def msg():
    p = lib.aclGetRecentErrMsg()
    return "" if p == ffi.NULL else ffi.string(p).decode()

def eq(got, want, what):
    assert got == want, f"{what}: got {got}, want {want} ({msg()})"

def fails(status, want, what, api):
    # a failure returns CANN's code and leaves a message naming the call
    assert status == want, f"{what}: got {status}, want {want}"
    m = msg()
    assert api in m, f"{what}: message {m!r} does not name {api}"

def ok(status, what):
    eq(status, 0, what)

def new(kind, init=None):
    return ffi.new(kind + " *", init) if init is not None else ffi.new(kind + " *")

def stream(priority=None, flags=0):
    p = new("aclrtStream")
    if priority is None:
        ok(lib.aclrtCreateStream(p), "aclrtCreateStream")
    else:
        ok(lib.aclrtCreateStreamWithConfig(p, priority, flags), "aclrtCreateStreamWithConfig")
    return p[0]

def event(flag=None, ex=False):
    p = new("aclrtEvent")
    if flag is None:
        ok(lib.aclrtCreateEvent(p), "aclrtCreateEvent")
    elif ex:
        ok(lib.aclrtCreateEventExWithFlag(p, flag), "aclrtCreateEventExWithFlag")
    else:
        ok(lib.aclrtCreateEventWithFlag(p, flag), "aclrtCreateEventWithFlag")
    return p[0]

N = 64
def dev_buffer():
    p = new("void *")
    ok(lib.aclrtMalloc(p, N, 0), "aclrtMalloc")
    ok(lib.aclrtMemset(p[0], N, 0, N), "aclrtMemset")
    return p[0]

def read(dev):
    host = np.zeros(N, np.uint8)
    ok(lib.aclrtMemcpy(ffi.cast("void *", host.ctypes.data), N, dev, N, lib.ACL_MEMCPY_DEVICE_TO_HOST), "read")
    vals = set(host.tolist())
    return vals.pop() if len(vals) == 1 else "mixed"

def query(s):
    st = new("aclrtStreamStatus")
    ok(lib.aclrtStreamQuery(s, st), "aclrtStreamQuery")
    return st[0]

def recorded_status(e):
    st = new("aclrtEventRecordedStatus")
    ok(lib.aclrtQueryEventStatus(e, st), "aclrtQueryEventStatus")
    return st[0]

def event_status(e):
    st = new("aclrtEventStatus")
    ok(lib.aclrtQueryEvent(e, st), "aclrtQueryEvent")
    return st[0]

def wait_status(e):
    st = new("aclrtEventWaitStatus")
    ok(lib.aclrtQueryEventWaitStatus(e, st), "aclrtQueryEventWaitStatus")
    return st[0]

def elapsed(a, b):
    ms = new("float")
    status = lib.aclrtEventElapsedTime(ms, a, b)
    return status, ms[0]

def stamp_us(e):
    t = new("uint64_t")
    ok(lib.aclrtEventGetTimestamp(e, t), "aclrtEventGetTimestamp")
    return t[0]

def now_us():
    return time.monotonic_ns() // 1000   # CLOCK_MONOTONIC, as the event stamps

ok(lib.aclInit(ffi.NULL), "aclInit")
ok(lib.aclrtSetDevice(0), "aclrtSetDevice")
"""


def run(code, delay_ms=0, timeout=120, extra_env=None):
    env = {"CONVTBC_STREAM_DELAY_MS": str(delay_ms)}
    env.update(extra_env or {})
    p = run_python(PRELUDE + code + "\nprint('done')\n", env_extra=env, timeout=timeout)
    assert p.stdout.strip().endswith("done"), p.stdout + p.stderr


# ---- streams -----------------------------------------------------------------------

def test_stream_priority_flags_and_ids():
    run(r"""
u32, i32 = new("uint32_t"), new("int32_t")
s = stream(3, lib.ACL_STREAM_FAST_LAUNCH | lib.ACL_STREAM_FAST_SYNC)
ok(lib.aclrtStreamGetPriority(s, u32), "priority"); eq(u32[0], 3, "priority as created")
ok(lib.aclrtStreamGetFlags(s, u32), "flags"); eq(u32[0], 0x3, "flags OR'ed as created")
# CANN clamps priorities to its range [0 greatest, 7 least] and keeps the flags it knows
s_hi = stream(99, 0x100)
ok(lib.aclrtStreamGetPriority(s_hi, u32), "priority"); eq(u32[0], 7, "priority 99 clamped")
ok(lib.aclrtStreamGetFlags(s_hi, u32), "flags"); eq(u32[0], 0, "unknown flag bits: a plain stream")
least, greatest = new("int32_t"), new("int32_t")
ok(lib.aclrtDeviceGetStreamPriorityRange(least, greatest), "range")
eq((least[0], greatest[0]), (7, 0), "priority range")
ok(lib.aclrtDeviceGetStreamPriorityRange(ffi.NULL, greatest), "range, one pointer")
# plain and default streams: the greatest priority, no flags
plain = stream()
for h, what in ((plain, "aclrtCreateStream"), (ffi.NULL, "default stream")):
    ok(lib.aclrtStreamGetPriority(h, u32), what); eq(u32[0], 0, what + " priority")
    ok(lib.aclrtStreamGetFlags(h, u32), what); eq(u32[0], 0, what + " flags")
ids = set()
for h in (s, s_hi, plain, ffi.NULL):
    ok(lib.aclrtStreamGetId(h, i32), "id"); ids.add(i32[0])
eq(len(ids), 4, "four streams, four ids")
ok(lib.aclrtStreamGetId(ffi.NULL, i32), "id"); first = i32[0]
ok(lib.aclrtStreamGetId(ffi.NULL, i32), "id"); eq(i32[0], first, "an id stays")

# stream config handles
h = lib.aclrtCreateStreamConfigHandle()
assert h != ffi.NULL
prio = new("uint32_t", 5); flag = new("size_t", lib.ACL_STREAM_FAST_SYNC)
ok(lib.aclrtSetStreamConfigOpt(h, lib.ACL_RT_STREAM_PRIORITY, prio, 4), "config priority")
ok(lib.aclrtSetStreamConfigOpt(h, lib.ACL_RT_STREAM_FLAG, flag, ffi.sizeof("size_t")), "config flag")
sp = new("aclrtStream")
ok(lib.aclrtCreateStreamV2(sp, h), "aclrtCreateStreamV2")
ok(lib.aclrtStreamGetPriority(sp[0], u32), "V2 priority"); eq(u32[0], 5, "V2 priority")
ok(lib.aclrtStreamGetFlags(sp[0], u32), "V2 flags"); eq(u32[0], 2, "V2 flags")
ok(lib.aclrtDestroyStream(sp[0]), "destroy V2 stream")
ok(lib.aclrtCreateStreamV2(sp, ffi.NULL), "aclrtCreateStreamV2 without config")
ok(lib.aclrtDestroyStream(sp[0]), "destroy")
API = "aclrtSetStreamConfigOpt"
fails(lib.aclrtSetStreamConfigOpt(h, lib.ACL_RT_STREAM_PRIORITY, new("uint32_t", 8), 4), 100000, "priority 8", API)
fails(lib.aclrtSetStreamConfigOpt(h, lib.ACL_RT_STREAM_PRIORITY, prio, 8), 100000, "wrong size", API)
fails(lib.aclrtSetStreamConfigOpt(h, 9, prio, 4), 100000, "unknown attr", API)
fails(lib.aclrtSetStreamConfigOpt(ffi.NULL, lib.ACL_RT_STREAM_PRIORITY, prio, 4), 100000, "NULL handle", API)
fails(lib.aclrtSetStreamConfigOpt(h, lib.ACL_RT_STREAM_PRIORITY, ffi.NULL, 4), 100000, "NULL value", API)
ok(lib.aclrtDestroyStreamConfigHandle(h), "destroy config")
fails(lib.aclrtDestroyStreamConfigHandle(h), 100000, "config destroyed twice", "aclrtDestroyStreamConfigHandle")
fails(lib.aclrtDestroyStreamConfigHandle(ffi.NULL), 100000, "NULL config", "aclrtDestroyStreamConfigHandle")

# CANN: N = stream maximum (1984 on Atlas A2) - streams that exist, the default one included
avail = new("uint32_t")
ok(lib.aclrtGetStreamAvailableNum(avail), "available")
eq(avail[0], 1984 - 4, "available with the default stream and three made")
ok(lib.aclrtDestroyStream(s_hi), "destroy")
ok(lib.aclrtGetStreamAvailableNum(avail), "available"); eq(avail[0], 1984 - 3, "one destroyed")
""")


def test_stream_available_num_follows_the_soc():
    run(r"""
avail = new("uint32_t")
ok(lib.aclrtGetStreamAvailableNum(avail), "available")
eq(avail[0], 2048 - 1, "Atlas training series: 2048 streams")
""", extra_env={"CONVTBC_SOC_VERSION": "Ascend910A"})


def test_stream_attributes_and_failure_mode():
    run(r"""
s = stream()
v = new("aclrtStreamAttrValue")
v.userCustomTag = 1234
ok(lib.aclrtSetStreamAttribute(s, lib.ACL_STREAM_ATTR_USER_CUSTOM_TAG, v), "set tag")
v.userCustomTag = 0
ok(lib.aclrtGetStreamAttribute(s, lib.ACL_STREAM_ATTR_USER_CUSTOM_TAG, v), "get tag"); eq(v.userCustomTag, 1234, "tag")
v.streamPriority = 6
ok(lib.aclrtSetStreamAttribute(s, lib.ACL_STREAM_ATTR_PRIORITY, v), "set priority")
u32 = new("uint32_t")
ok(lib.aclrtStreamGetPriority(s, u32), "priority"); eq(u32[0], 6, "priority set as an attribute")
v.overflowSwitch = 1
ok(lib.aclrtSetStreamAttribute(s, lib.ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, v), "set overflow")
ok(lib.aclrtGetStreamOverflowSwitch(s, u32), "get overflow switch"); eq(u32[0], 1, "overflow switch")
ok(lib.aclrtSetStreamOverflowSwitch(s, 0), "set overflow switch")
ok(lib.aclrtGetStreamAttribute(s, lib.ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, v), "get overflow")
eq(v.overflowSwitch, 0, "overflow switch through the attribute")
fails(lib.aclrtSetStreamOverflowSwitch(s, 2), 100000, "overflow flag 2", "aclrtSetStreamOverflowSwitch")
fails(lib.aclrtSetStreamAttribute(s, 99, v), 107000, "unknown attribute", "aclrtSetStreamAttribute")
fails(lib.aclrtGetStreamAttribute(s, 0, v), 107000, "attribute 0", "aclrtGetStreamAttribute")
fails(lib.aclrtSetStreamAttribute(s, lib.ACL_STREAM_ATTR_USER_CUSTOM_TAG, ffi.NULL), 100000, "NULL value",
      "aclrtSetStreamAttribute")

# failure mode: continue by default; stop once set; stop cannot go back
ok(lib.aclrtGetStreamAttribute(s, lib.ACL_STREAM_ATTR_FAILURE_MODE, v), "get mode")
eq(v.failureMode, lib.ACL_CONTINUE_ON_FAILURE, "default failure mode"); eq(lib.ACL_STOP_ON_FAILURE, 1, "macro")
ok(lib.aclrtSetStreamFailureMode(s, 1), "set stop")
ok(lib.aclrtGetStreamAttribute(s, lib.ACL_STREAM_ATTR_FAILURE_MODE, v), "get mode"); eq(v.failureMode, 1, "stop")
ok(lib.aclrtSetStreamFailureMode(s, 1), "stop again")
fails(lib.aclrtSetStreamFailureMode(s, 0), 207000, "stop back to continue", "aclrtSetStreamFailureMode")
fails(lib.aclrtSetStreamFailureMode(ffi.NULL, 1), 207000, "default stream", "aclrtSetStreamFailureMode")
""")


def test_stream_query_and_synchronize_with_timeout():
    run(r"""
s, t = stream(), stream()
A, B = dev_buffer(), dev_buffer()
eq(query(s), 0, "an empty stream is complete")
ok(lib.aclrtMemsetAsync(A, N, 5, N, s), "memset async")
eq(query(s), 1, "work queued: not ready")
t0 = time.monotonic()
fails(lib.aclrtSynchronizeStreamWithTimeout(s, 50), 507046, "50 ms < 300 ms of queued work",
      "aclrtSynchronizeStreamWithTimeout")
waited = time.monotonic() - t0
assert 0.04 <= waited < 0.28, f"timed-out synchronisation took {waited:.3f} s"
eq(read(A), 0, "not done after the timeout")
ok(lib.aclrtSynchronizeStreamWithTimeout(s, -1), "wait for ever")
eq(read(A), 5, "done after the synchronisation"); eq(query(s), 0, "complete")
ok(lib.aclrtMemsetAsync(A, N, 6, N, s), "memset async")
ok(lib.aclrtSynchronizeStreamWithTimeout(s, 5000), "long enough")
eq(read(A), 6, "done")
API = "aclrtSynchronizeStreamWithTimeout"
fails(lib.aclrtSynchronizeStreamWithTimeout(s, 0), 107000, "timeout 0", API)
fails(lib.aclrtSynchronizeStreamWithTimeout(s, -2), 107000, "timeout -2", API)

# the default stream is queried through NULL
ok(lib.aclrtMemsetAsync(B, N, 1, N, ffi.NULL), "memset async on the default stream")
eq(query(ffi.NULL), 1, "default stream not ready"); ok(lib.aclrtSynchronizeStream(ffi.NULL), "sync")
eq(query(ffi.NULL), 0, "default stream complete")

# device-wide
ok(lib.aclrtMemsetAsync(A, N, 7, N, s), "m"); ok(lib.aclrtMemsetAsync(B, N, 8, N, t), "m")
fails(lib.aclrtSynchronizeDeviceWithTimeout(50), 507046, "device, 50 ms", "aclrtSynchronizeDeviceWithTimeout")
ok(lib.aclrtSynchronizeDeviceWithTimeout(5000), "device, 5 s")
eq((read(A), read(B)), (7, 8), "both streams done")
fails(lib.aclrtSynchronizeDeviceWithTimeout(0), 107000, "device timeout 0", "aclrtSynchronizeDeviceWithTimeout")

# CANN: synchronising a stream made for a model or the device does nothing
p = stream(0, lib.ACL_STREAM_PERSISTENT)
ok(lib.aclrtMemsetAsync(B, N, 9, N, p), "memset on a persistent stream")
t0 = time.monotonic(); ok(lib.aclrtSynchronizeStreamWithTimeout(p, 100), "sync persistent")
assert time.monotonic() - t0 < 0.2
""", delay_ms=300)


def test_stream_bad_arguments():
    run(r"""
s = stream(); ok(lib.aclrtDestroyStream(s), "destroy")
u32, i32, st, v = new("uint32_t"), new("int32_t"), new("aclrtStreamStatus"), new("aclrtStreamAttrValue")
live = stream()
calls = [
    ("aclrtStreamQuery", lambda h: lib.aclrtStreamQuery(h, st)),
    ("aclrtStreamGetPriority", lambda h: lib.aclrtStreamGetPriority(h, u32)),
    ("aclrtStreamGetFlags", lambda h: lib.aclrtStreamGetFlags(h, u32)),
    ("aclrtStreamGetId", lambda h: lib.aclrtStreamGetId(h, i32)),
    ("aclrtSynchronizeStreamWithTimeout", lambda h: lib.aclrtSynchronizeStreamWithTimeout(h, 10)),
    ("aclrtStreamAbort", lambda h: lib.aclrtStreamAbort(h)),
    ("aclrtDestroyStreamForce", lambda h: lib.aclrtDestroyStreamForce(h)),
    ("aclrtSetStreamFailureMode", lambda h: lib.aclrtSetStreamFailureMode(h, 1)),
    ("aclrtSetStreamOverflowSwitch", lambda h: lib.aclrtSetStreamOverflowSwitch(h, 1)),
    ("aclrtSetStreamAttribute", lambda h: lib.aclrtSetStreamAttribute(h, lib.ACL_STREAM_ATTR_PRIORITY, v)),
    ("aclrtGetStreamAttribute", lambda h: lib.aclrtGetStreamAttribute(h, lib.ACL_STREAM_ATTR_PRIORITY, v)),
]
for api, call in calls:
    fails(call(s), 100000, api + " on a destroyed stream", api)
fails(lib.aclrtStreamQuery(live, ffi.NULL), 100000, "NULL status", "aclrtStreamQuery")
fails(lib.aclrtStreamGetPriority(live, ffi.NULL), 100000, "NULL priority", "aclrtStreamGetPriority")
fails(lib.aclrtStreamGetFlags(live, ffi.NULL), 100000, "NULL flags", "aclrtStreamGetFlags")
fails(lib.aclrtStreamGetId(live, ffi.NULL), 100000, "NULL id", "aclrtStreamGetId")
fails(lib.aclrtGetStreamAvailableNum(ffi.NULL), 100000, "NULL count", "aclrtGetStreamAvailableNum")
fails(lib.aclrtCreateStreamWithConfig(ffi.NULL, 0, 0), 100000, "NULL stream", "aclrtCreateStreamWithConfig")
fails(lib.aclrtStreamAbort(ffi.NULL), 100000, "abort the default stream", "aclrtStreamAbort")
fails(lib.aclrtDestroyStreamForce(ffi.NULL), 100000, "force-destroy NULL", "aclrtDestroyStreamForce")

# a thread with no current context
def no_context():
    p = new("aclrtStream")
    fails(lib.aclrtCreateStreamWithConfig(p, 0, 0), 107002, "no context", "aclrtCreateStreamWithConfig")
    fails(lib.aclrtStreamQuery(ffi.NULL, st), 107002, "no context", "aclrtStreamQuery")
    fails(lib.aclrtSynchronizeDeviceWithTimeout(10), 107002, "no context", "aclrtSynchronizeDeviceWithTimeout")
th = threading.Thread(target=no_context); th.start(); th.join()
""")


def test_abort_and_force_destroy_drop_queued_work():
    run(r"""
s = stream(); A = dev_buffer()
for value in (1, 2, 3, 4):
    ok(lib.aclrtMemsetAsync(A, N, value, N, s), "queue")
ok(lib.aclrtStreamAbort(s), "aclrtStreamAbort")
ok(lib.aclrtSynchronizeStream(s), "sync after abort")
assert read(A) in (0, 1), f"queued work ran after the abort: {read(A)}"
eq(query(s), 0, "an aborted stream is complete")
ok(lib.aclrtMemsetAsync(A, N, 9, N, s), "the stream takes work again")
ok(lib.aclrtSynchronizeStream(s), "sync"); eq(read(A), 9, "new work runs")

# a synchroniser waiting while the stream is aborted gets ACL_ERROR_RT_STREAM_ABORT
for value in (1, 2, 3, 4):
    ok(lib.aclrtMemsetAsync(A, N, value, N, s), "queue")
got = []
waiter = threading.Thread(target=lambda: got.append(lib.aclrtSynchronizeStream(s)))
waiter.start(); time.sleep(0.1)
ok(lib.aclrtStreamAbort(s), "abort under a waiter")
waiter.join(); eq(got, [107023], "the waiter's status")

B = dev_buffer(); f = stream()
for value in (1, 2, 3, 4):
    ok(lib.aclrtMemsetAsync(B, N, value, N, f), "queue")
t0 = time.monotonic()
ok(lib.aclrtDestroyStreamForce(f), "aclrtDestroyStreamForce")
assert time.monotonic() - t0 < 0.35, "forced destruction waited for the queued work"
assert read(B) in (0, 1), f"queued work ran after the forced destruction: {read(B)}"
fails(lib.aclrtSynchronizeStream(f), 100000, "destroyed", "aclrtSynchronizeStream")
""", delay_ms=150)


def test_stop_on_failure_drops_the_rest():
    run(r"""
# a wait that times out is a failing task (CANN reports it at the next synchronisation)
e = event(lib.ACL_EVENT_SYNC)
A, B = dev_buffer(), dev_buffer()
for s, buf, mode in ((stream(), A, 1), (stream(), B, 0)):
    ok(lib.aclrtSetStreamFailureMode(s, mode), "mode")
    ok(lib.aclrtResetEvent(e, s), "reset: later waits wait for the next recording")
    ok(lib.aclrtStreamWaitEventWithTimeout(s, e, 1), "wait 1 s")
    ok(lib.aclrtMemsetAsync(buf, N, 7, N, s), "after the failing wait")
    fails(lib.aclrtSynchronizeStream(s), 107020, "wait timed out", "aclrtStreamWaitEventWithTimeout")
    if mode == 1:
        eq(read(A), 0, "stop on failure: later work dropped")
        fails(lib.aclrtMemsetAsync(A, N, 8, N, s), 107020, "a stopped stream takes no work", "aclrtMemsetAsync")
    else:
        eq(read(B), 7, "continue on failure: later work runs")
        ok(lib.aclrtMemsetAsync(B, N, 8, N, s), "still takes work")
        ok(lib.aclrtSynchronizeStream(s), "sync"); eq(read(B), 8, "ran")
""", timeout=60)


# ---- events ------------------------------------------------------------------------

def test_event_statuses_and_synchronize_with_timeout():
    run(r"""
s = stream(); A = dev_buffer()
plain, ex = event(), event(lib.ACL_EVENT_SYNC, ex=True)
eq(recorded_status(plain), 0, "never recorded: NOT_READY")
eq(recorded_status(ex), 1, "Ex event never recorded: COMPLETE")
eq(event_status(plain), 0, "deprecated query, never recorded: COMPLETE")
ok(lib.aclrtSynchronizeEventWithTimeout(plain, 10), "nothing recorded: nothing to wait for")

ok(lib.aclrtMemsetAsync(A, N, 3, N, s), "m")
ok(lib.aclrtRecordEvent(plain, s), "record"); ok(lib.aclrtRecordEvent(ex, s), "record")
eq(recorded_status(plain), 0, "recorded, not reached"); eq(recorded_status(ex), 0, "Ex: not reached")
eq(event_status(plain), 1, "deprecated query: NOT_READY")
t0 = time.monotonic()
fails(lib.aclrtSynchronizeEventWithTimeout(plain, 50), 507047, "50 ms", "aclrtSynchronizeEventWithTimeout")
assert 0.04 <= time.monotonic() - t0 < 0.28
ok(lib.aclrtSynchronizeEventWithTimeout(plain, -1), "wait for ever")
eq(read(A), 3, "the work before the recording is done")
eq(recorded_status(plain), 1, "reached: COMPLETE"); eq(event_status(plain), 0, "deprecated: COMPLETE")
ok(lib.aclrtSynchronizeEventWithTimeout(ex, 5000), "Ex, 5 s"); eq(recorded_status(ex), 1, "Ex COMPLETE")
API = "aclrtSynchronizeEventWithTimeout"
fails(lib.aclrtSynchronizeEventWithTimeout(plain, 0), 107000, "timeout 0", API)
fails(lib.aclrtSynchronizeEventWithTimeout(plain, -2), 107000, "timeout -2", API)

# what the Ex events do not take (CANN)
st, wst = new("aclrtEventStatus"), new("aclrtEventWaitStatus")
fails(lib.aclrtQueryEvent(ex, st), 207000, "aclrtQueryEvent on an Ex event", "aclrtQueryEvent")
fails(lib.aclrtQueryEventWaitStatus(ex, wst), 207000, "wait status of an Ex event", "aclrtQueryEventWaitStatus")
fails(lib.aclrtResetEvent(ex, s), 207000, "reset an Ex event", "aclrtResetEvent")

# waits: a second stream waiting for a recording not yet reached
t = stream(); w = event()
eq(wait_status(w), 0, "no waits: COMPLETE")
ok(lib.aclrtMemsetAsync(A, N, 4, N, s), "m"); ok(lib.aclrtRecordEvent(w, s), "record")
ok(lib.aclrtStreamWaitEvent(t, w), "wait")
eq(wait_status(w), 1, "a wait pending: NOT_READY")
ok(lib.aclrtSynchronizeStream(t), "sync the waiting stream")
eq(wait_status(w), 0, "the wait passed: COMPLETE"); eq(read(A), 4, "the waiting stream waited")
""", delay_ms=300)


def test_event_flags_ids_and_counts():
    run(r"""
p = new("aclrtEvent")
API = "aclrtCreateEventWithFlag"
for flag in (0, 0x100, lib.ACL_EVENT_DEVICE_USE_ONLY | lib.ACL_EVENT_SYNC, lib.ACL_EVENT_EXTERNAL | lib.ACL_EVENT_SYNC):
    fails(lib.aclrtCreateEventWithFlag(p, flag), 107000, f"flag {flag:#x}", API)
API = "aclrtCreateEventExWithFlag"
for flag in (0, lib.ACL_EVENT_DEVICE_USE_ONLY, lib.ACL_EVENT_IPC | lib.ACL_EVENT_SYNC):
    fails(lib.aclrtCreateEventExWithFlag(p, flag), 107000, f"Ex flag {flag:#x}", API)
fails(lib.aclrtCreateEventExWithFlag(p, lib.ACL_EVENT_IPC), 207000, "IPC event", API)
fails(lib.aclrtCreateEventWithFlag(ffi.NULL, lib.ACL_EVENT_SYNC), 100000, "NULL event", "aclrtCreateEventWithFlag")

s = stream()
timeline = event(lib.ACL_EVENT_TIME_LINE)   # keeps time, cannot be waited for
fails(lib.aclrtStreamWaitEvent(s, timeline), 207000, "wait for a time-line-only event", "aclrtStreamWaitEvent")
fails(lib.aclrtResetEvent(timeline, s), 207000, "reset a time-line-only event", "aclrtResetEvent")
device_only = event(lib.ACL_EVENT_DEVICE_USE_ONLY)
fails(lib.aclrtRecordEvent(device_only, s), 107000, "record a device-only event", "aclrtRecordEvent")
external = event(lib.ACL_EVENT_EXTERNAL)
fails(lib.aclrtSynchronizeEvent(external), 207000, "synchronise an external event", "aclrtSynchronizeEvent")

e = event()
fails(lib.aclrtRecordEventWithFlag(e, s, 2), 100000, "record flag 2", "aclrtRecordEventWithFlag")
fails(lib.aclrtRecordEventWithFlag(e, s, lib.ACL_EVENT_RECORD_EXTERNAL), 207000, "external record",
      "aclrtRecordEventWithFlag")
ok(lib.aclrtRecordEventWithFlag(e, s, lib.ACL_EVENT_RECORD_DEFAULT), "default record")
ok(lib.aclrtSynchronizeEvent(e), "sync"); eq(recorded_status(e), 1, "recorded with the flag")
API = "aclrtStreamWaitEventWithFlag"
fails(lib.aclrtStreamWaitEventWithFlag(s, e, 0, 2), 100000, "wait flag 2", API)
fails(lib.aclrtStreamWaitEventWithFlag(s, e, 5, lib.ACL_EVENT_WAIT_EXTERNAL), 100000, "external wait, timeout 5", API)
fails(lib.aclrtStreamWaitEventWithFlag(s, e, 0, lib.ACL_EVENT_WAIT_EXTERNAL), 207000, "external wait", API)
ok(lib.aclrtStreamWaitEventWithFlag(s, e, 10, lib.ACL_EVENT_WAIT_DEFAULT), "default wait")
ok(lib.aclrtSynchronizeStream(s), "sync")
fails(lib.aclrtStreamWaitEventWithTimeout(s, e, -1), 107000, "timeout -1 s", "aclrtStreamWaitEventWithTimeout")

u32 = new("uint32_t")
ids = set()
for ev in (timeline, device_only, external, e):
    ok(lib.aclrtGetEventId(ev, u32), "id"); ids.add(u32[0])
eq(len(ids), 4, "four events, four ids")
# CANN: 65536 events per device on Atlas A2
ok(lib.aclrtGetEventAvailNum(u32), "available"); eq(u32[0], 65536 - 4, "four events live")
ok(lib.aclrtDestroyEvent(e), "destroy")
ok(lib.aclrtGetEventAvailNum(u32), "available"); eq(u32[0], 65536 - 3, "three live")
fails(lib.aclrtGetEventId(e, u32), 100000, "id of a destroyed event", "aclrtGetEventId")
fails(lib.aclrtGetEventAvailNum(ffi.NULL), 100000, "NULL count", "aclrtGetEventAvailNum")
""")


def test_elapsed_time_and_timestamps():
    run(r"""
s = stream(); A = dev_buffer()
start, mid, end = event(), event(lib.ACL_EVENT_TIME_LINE | lib.ACL_EVENT_SYNC), event()
ok(lib.aclrtRecordEvent(start, s), "record start")
for value in (1, 2):
    ok(lib.aclrtMemsetAsync(A, N, value, N, s), "m")
ok(lib.aclrtRecordEvent(mid, s), "record mid")
ok(lib.aclrtMemsetAsync(A, N, 3, N, s), "m")
ok(lib.aclrtRecordEvent(end, s), "record end")
fails(elapsed(start, end)[0], 107006, "end not reached yet", "aclrtEventElapsedTime")
t = new("uint64_t")
fails(lib.aclrtEventGetTimestamp(end, t), 107006, "end not reached yet", "aclrtEventGetTimestamp")
ok(lib.aclrtSynchronizeStream(s), "sync")
# each queued task is held 100 ms: start..mid spans 3 tasks, mid..end 2
st, ms_all = elapsed(start, end); ok(st, "elapsed start..end")
st, ms_first = elapsed(start, mid); ok(st, "elapsed start..mid")
st, ms_second = elapsed(mid, end); ok(st, "elapsed mid..end")
assert 0 <= ms_first <= ms_all and 0 <= ms_second <= ms_all, (ms_first, ms_second, ms_all)
assert 270 <= ms_all <= 2000, f"5 tasks of 100 ms took {ms_all} ms"
assert 170 <= ms_first and 170 <= ms_second, (ms_first, ms_second)
assert abs(ms_first + ms_second - ms_all) < 0.01, (ms_first, ms_second, ms_all)
st, back = elapsed(end, start); ok(st, "reversed"); assert abs(back + ms_all) < 0.01, (back, ms_all)
st, zero = elapsed(start, start); ok(st, "same event"); eq(zero, 0.0, "an event to itself")
t_start, t_mid, t_end = stamp_us(start), stamp_us(mid), stamp_us(end)
assert t_start <= t_mid <= t_end <= now_us(), (t_start, t_mid, t_end)
assert abs((t_end - t_start) / 1000 - ms_all) < 1.0, (t_start, t_end, ms_all)

API = "aclrtEventElapsedTime"
never = event()
fails(elapsed(never, end)[0], 507000, "start never recorded", API)
fails(elapsed(start, never)[0], 507000, "end never recorded", API)
fails(lib.aclrtEventGetTimestamp(never, t), 507000, "never recorded", "aclrtEventGetTimestamp")
untimed = event(lib.ACL_EVENT_SYNC)
ok(lib.aclrtRecordEvent(untimed, s), "record"); ok(lib.aclrtSynchronizeStream(s), "sync")
fails(elapsed(start, untimed)[0], 107006, "an event without ACL_EVENT_TIME_LINE", API)
ms = new("float")
fails(lib.aclrtEventElapsedTime(ffi.NULL, start, end), 100000, "NULL ms", API)
fails(lib.aclrtEventElapsedTime(ms, ffi.NULL, end), 100000, "NULL start", API)
fails(lib.aclrtEventGetTimestamp(start, ffi.NULL), 100000, "NULL timestamp", "aclrtEventGetTimestamp")
ok(lib.aclrtDestroyEvent(end), "destroy")
fails(lib.aclrtEventElapsedTime(ms, start, end), 100000, "destroyed end", API)
""", delay_ms=100)


def test_reset_and_wait_with_timeout():
    run(r"""
s, t = stream(), stream()
A = dev_buffer()
e = event(lib.ACL_EVENT_SYNC)
ok(lib.aclrtRecordEvent(e, s), "record"); ok(lib.aclrtSynchronizeStream(s), "sync")
eq(recorded_status(e), 1, "recorded")
ok(lib.aclrtResetEvent(e, s), "reset"); ok(lib.aclrtSynchronizeStream(s), "sync")
eq(recorded_status(e), 0, "a reset event is as never recorded")
# after the reset a stream waits for the next recording: with none, the wait gives up
ok(lib.aclrtStreamWaitEventWithTimeout(t, e, 1), "wait up to 1 s")
ok(lib.aclrtMemsetAsync(A, N, 5, N, t), "after the wait")
t0 = time.monotonic()
fails(lib.aclrtSynchronizeStream(t), 107020, "the wait timed out", "aclrtStreamWaitEventWithTimeout")
assert 0.9 <= time.monotonic() - t0 < 3, time.monotonic() - t0
eq(read(A), 5, "continue on failure: the stream went on")
# the next recording releases a wait queued after the reset
ok(lib.aclrtResetEvent(e, s), "reset"); ok(lib.aclrtSynchronizeStream(s), "sync")
ok(lib.aclrtStreamWaitEventWithTimeout(t, e, 0), "wait for ever")
ok(lib.aclrtMemsetAsync(A, N, 6, N, t), "after the wait")
time.sleep(0.2)
eq(read(A), 5, "the waiting stream is held")
eq(wait_status(e), 1, "wait pending")
ok(lib.aclrtRecordEvent(e, s), "the next recording")
ok(lib.aclrtSynchronizeStream(t), "sync"); eq(read(A), 6, "released by the recording")
eq(wait_status(e), 0, "wait done")
""", timeout=60)


# ---- host callbacks ----------------------------------------------------------------

CALLBACKS = r"""
log = []                  # (tag, thread ident, monotonic us at the end)
log_lock = threading.Lock()

@ffi.callback("void(void *)")
def callback(user):
    tag = int(ffi.cast("intptr_t", user))
    if tag >= 100:        # the slow ones
        time.sleep(0.3)
    with log_lock:
        log.append((tag, threading.get_ident(), now_us()))

class Processor(threading.Thread):
    # a thread of the program's that serves callbacks, as in CANN's samples;
    # it starts processing once start_processing() says it is subscribed
    def __init__(self):
        super().__init__(daemon=True); self.go = True; self.codes = set(); self.gate = threading.Event()
    def start_processing(self):
        self.gate.set()
    def run(self):
        ok(lib.aclrtSetDevice(0), "processor context")
        self.gate.wait()
        while self.go:
            self.codes.add(lib.aclrtProcessReport(20))

def tagged(n):
    return ffi.cast("void *", n)
"""


def test_callbacks_run_on_the_subscribed_thread_in_order():
    run(CALLBACKS + r"""
s = stream()
proc = Processor(); proc.start()
ok(lib.aclrtSubscribeReport(proc.ident, s), "aclrtSubscribeReport"); proc.start_processing()
for n in range(5):
    ok(lib.aclrtLaunchCallback(callback, tagged(n), lib.ACL_CALLBACK_NO_BLOCK, s), "launch")
ok(lib.aclrtLaunchCallback(callback, tagged(5), lib.ACL_CALLBACK_BLOCK, s), "launch blocking")
ok(lib.aclrtSynchronizeStream(s), "sync")   # the blocking one has returned by now
deadline = time.monotonic() + 5
while len(log) < 6 and time.monotonic() < deadline:
    time.sleep(0.01)
eq([tag for tag, _, _ in log], list(range(6)), "every callback once, in launch order")
assert all(ident == proc.ident for _, ident, _ in log), (log, proc.ident)
assert proc.ident != threading.get_ident()
assert proc.codes <= {0, 507012}, proc.codes   # processed, or nothing within 20 ms

# unsubscribing: the stream takes no callbacks; the thread no longer processes
fails(lib.aclrtUnSubscribeReport(proc.ident + 1, s), 107012, "another thread's stream", "aclrtUnSubscribeReport")
ok(lib.aclrtUnSubscribeReport(proc.ident, s), "aclrtUnSubscribeReport")
fails(lib.aclrtUnSubscribeReport(proc.ident, s), 107011, "not subscribed", "aclrtUnSubscribeReport")
fails(lib.aclrtLaunchCallback(callback, tagged(9), lib.ACL_CALLBACK_NO_BLOCK, s), 107015, "no subscriber",
      "aclrtLaunchCallback")
time.sleep(0.1); proc.codes.clear(); time.sleep(0.1)   # calls begun before the unsubscription are over
eq(proc.codes, {107012}, "ProcessReport on a thread with no stream")
proc.go = False; proc.join()
""")


def test_blocking_and_non_blocking_callbacks_order_later_work():
    run(CALLBACKS + r"""
s = stream()
proc = Processor(); proc.start()
ok(lib.aclrtSubscribeReport(proc.ident, s), "subscribe"); proc.start_processing()
after_block, after_noblock = event(), event()
# a slow blocking callback: the recording queued after it happens after it returned
ok(lib.aclrtLaunchCallback(callback, tagged(100), lib.ACL_CALLBACK_BLOCK, s), "launch blocking")
ok(lib.aclrtRecordEvent(after_block, s), "record")
ok(lib.aclrtSynchronizeStream(s), "sync")
# a slow non-blocking one: the stream goes on at once
ok(lib.aclrtLaunchCallback(callback, tagged(101), lib.ACL_CALLBACK_NO_BLOCK, s), "launch non-blocking")
ok(lib.aclrtRecordEvent(after_noblock, s), "record")
ok(lib.aclrtSynchronizeStream(s), "sync")
deadline = time.monotonic() + 5
while len(log) < 2 and time.monotonic() < deadline:
    time.sleep(0.01)
ends = {tag: end for tag, _, end in log}
assert stamp_us(after_block) >= ends[100], (stamp_us(after_block), ends[100])
assert stamp_us(after_noblock) < ends[101] - 100_000, (stamp_us(after_noblock), ends[101])

# a blocking callback for a thread that never processes holds the stream...
A = dev_buffer(); q = stream(); idle = 12345
ok(lib.aclrtSubscribeReport(idle, q), "subscribe an idle thread")
ok(lib.aclrtLaunchCallback(callback, tagged(7), lib.ACL_CALLBACK_BLOCK, q), "launch")
ok(lib.aclrtMemsetAsync(A, N, 4, N, q), "after the callback")
fails(lib.aclrtSynchronizeStreamWithTimeout(q, 100), 507046, "held by the callback",
      "aclrtSynchronizeStreamWithTimeout")
eq(read(A), 0, "held")
# ...until the subscription goes: the callback is dropped and the stream goes on
ok(lib.aclrtUnSubscribeReport(idle, q), "unsubscribe")
ok(lib.aclrtSynchronizeStream(q), "sync"); eq(read(A), 4, "went on")
assert 7 not in [tag for tag, _, _ in log], "a dropped callback ran"
# aborting a stream held by a callback drops both
ok(lib.aclrtSubscribeReport(idle, q), "subscribe again")
ok(lib.aclrtLaunchCallback(callback, tagged(8), lib.ACL_CALLBACK_BLOCK, q), "launch")
ok(lib.aclrtMemsetAsync(A, N, 5, N, q), "after the callback")
ok(lib.aclrtStreamAbort(q), "abort"); ok(lib.aclrtSynchronizeStream(q), "sync")
eq(read(A), 4, "the work after the callback was dropped")
ok(lib.aclrtDestroyStream(q), "destroy a subscribed stream")
proc.go = False; proc.join()
""")


def test_process_report_codes():
    run(CALLBACKS + r"""
s = stream()
got = {}
def lonely():
    got["unsubscribed"] = lib.aclrtProcessReport(50)
    ok(lib.aclrtSubscribeReport(threading.get_ident(), s), "subscribe myself")
    t0 = time.monotonic()
    got["timeout"] = lib.aclrtProcessReport(100)
    got["waited"] = time.monotonic() - t0
    got["message"] = msg()
    got["zero"] = lib.aclrtProcessReport(0)
    got["minus2"] = lib.aclrtProcessReport(-2)
    ok(lib.aclrtUnSubscribeReport(threading.get_ident(), s), "unsubscribe myself")
    got["after"] = lib.aclrtProcessReport(50)
th = threading.Thread(target=lonely); th.start(); th.join()
eq(got["unsubscribed"], 107012, "not subscribed")
eq(got["timeout"], 507012, "nothing within 100 ms")
assert 0.09 <= got["waited"] < 1.0, got["waited"]
assert "aclrtProcessReport" in got["message"], got["message"]
eq((got["zero"], got["minus2"]), (100000, 100000), "timeouts 0 and -2")
eq(got["after"], 107012, "unsubscribed again")

proc = Processor(); proc.start()
API = "aclrtLaunchCallback"
fails(lib.aclrtLaunchCallback(callback, ffi.NULL, lib.ACL_CALLBACK_NO_BLOCK, s), 107015, "not subscribed", API)
ok(lib.aclrtSubscribeReport(proc.ident, s), "subscribe"); proc.start_processing()
fails(lib.aclrtSubscribeReport(proc.ident, s), 107011, "subscribed twice", "aclrtSubscribeReport")
fails(lib.aclrtSubscribeReport(proc.ident + 1, s), 107011, "a second thread", "aclrtSubscribeReport")
fails(lib.aclrtLaunchCallback(callback, ffi.NULL, 2, s), 100000, "blockType 2", API)
fails(lib.aclrtLaunchCallback(ffi.NULL, ffi.NULL, lib.ACL_CALLBACK_BLOCK, s), 107000, "NULL fn", API)
dead = stream(); ok(lib.aclrtDestroyStream(dead), "destroy")
fails(lib.aclrtLaunchCallback(callback, ffi.NULL, lib.ACL_CALLBACK_BLOCK, dead), 100000, "destroyed stream", API)
fails(lib.aclrtSubscribeReport(proc.ident, dead), 100000, "destroyed stream", "aclrtSubscribeReport")
# the default stream, through NULL
ok(lib.aclrtSubscribeReport(proc.ident, ffi.NULL), "subscribe the default stream")
ok(lib.aclrtLaunchCallback(callback, tagged(3), lib.ACL_CALLBACK_BLOCK, ffi.NULL), "launch on NULL")
ok(lib.aclrtSynchronizeStream(ffi.NULL), "sync"); eq([t for t, _, _ in log], [3], "ran")
ok(lib.aclrtUnSubscribeReport(proc.ident, ffi.NULL), "unsubscribe the default stream")
ok(lib.aclrtUnSubscribeReport(proc.ident, s), "unsubscribe")
proc.go = False; proc.join()
""")


def test_launch_host_func():
    run(CALLBACKS + r"""
s = stream()
done = event()
ok(lib.aclrtLaunchHostFunc(s, callback, tagged(100)), "aclrtLaunchHostFunc (slow)")
ok(lib.aclrtRecordEvent(done, s), "record after it")
ok(lib.aclrtSynchronizeStream(s), "sync")
eq(len(log), 1, "ran once")
tag, ident, end = log[0]
assert ident != threading.get_ident(), "ran on the caller's thread"
assert stamp_us(done) >= end, "the stream did not wait for the host function"
# CANN: one callback mechanism per stream
fails(lib.aclrtSubscribeReport(threading.get_ident(), s), 107011, "host-func stream", "aclrtSubscribeReport")
fails(lib.aclrtLaunchCallback(callback, ffi.NULL, 0, s), 107011, "host-func stream", "aclrtLaunchCallback")
u = stream()
ok(lib.aclrtSubscribeReport(threading.get_ident(), u), "subscribe")
fails(lib.aclrtLaunchHostFunc(u, callback, ffi.NULL), 107011, "subscribed stream", "aclrtLaunchHostFunc")
fails(lib.aclrtLaunchHostFunc(s, ffi.NULL, ffi.NULL), 107000, "NULL fn", "aclrtLaunchHostFunc")
ok(lib.aclrtUnSubscribeReport(threading.get_ident(), u), "unsubscribe")
""")


def test_finalize_releases_streams_held_by_callbacks():
    # aclFinalize must not hang on a stream held by a callback nobody serves
    run(CALLBACKS + r"""
s = stream()
ok(lib.aclrtSubscribeReport(4242, s), "subscribe a thread that never processes")
ok(lib.aclrtLaunchCallback(callback, tagged(1), lib.ACL_CALLBACK_BLOCK, s), "launch")
ok(lib.aclFinalize(), "aclFinalize")
eq(log, [], "the callback never ran")
""", timeout=30)
