"""aclInit / aclFinalize / aclFinalizeReference and the init and finalize
callbacks, against CANN's documented behaviour (hicann/runtime docs
02_initialization_and_deinitialization.md, acl_rt.h):

- aclInit may be called again: it answers ACL_ERROR_REPEAT_INITIALIZE
  (100002) and counts one more reference. aclFinalizeReference drops one;
  only the last one finalises; it reports the count left. aclFinalize drops
  them all at once. With nothing left, both answer ACL_ERROR_REPEAT_FINALIZE
  (100037).
- A NULL or empty configPath is an empty configuration; a path that cannot
  be read is ACL_ERROR_INVALID_FILE (100003); a later aclInit must pass the
  same configuration as the first (else ACL_ERROR_INVALID_PARAM).
- aclInitCallbackRegister before aclInit: the callback runs at aclInit, with
  (configStr, len, userData), configStr the configuration file's text;
  after aclInit: it runs at once. aclFinalizeCallbackRegister: the callback
  runs at aclFinalize with its userData. Callbacks run by type in CANN's
  order (init: ACL_MODEL, ACL_OP_EXECUTOR (only with a configuration file),
  ACL_DVPP, OTHER; finalize: ACL_OP_COMPILER, ACL_MODEL, ACL_DVPP, OTHER),
  several OTHER callbacks in registration order; a failing callback's code
  is returned and initialisation (finalisation) does not happen. Only
  ACL_REG_TYPE_OTHER takes several callbacks (else
  ACL_ERROR_INTERNAL_ERROR 500000); NULL cbFunc is ACL_ERROR_INVALID_PARAM;
  unregistering what is not registered is ACL_ERROR_INTERNAL_ERROR.
"""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_streams import tsan_library, tsan_program  # noqa: F401 (a fixture)
from conftest import C_DIR, REPO_ROOT, run_python

PRELUDE = """
import convtbc_py
ffi, lib = convtbc_py.ffi, convtbc_py.lib
def eq(got, want, what):
    assert got == want, f"{what}: got {got!r}, want {want!r}"
calls = []
def addr(p):
    return int(ffi.cast("uintptr_t", p))
def init_cb(name, status=0):
    @ffi.callback("aclInitCallbackFunc")
    def cb(config, length, user):
        calls.append(("init", name, ffi.string(config, length).decode() if length else ffi.string(config).decode(),
                      length, addr(user)))
        return status
    return cb
def fini_cb(name, status=0):
    @ffi.callback("aclFinalizeCallbackFunc")
    def cb(user):
        calls.append(("finalize", name, addr(user)))
        return status
    return cb
datas = [ffi.new("int *", i) for i in range(8)]
OTHER, MODEL, OP_EXECUTOR, OP_CBLAS, OP_COMPILER, DVPP = (lib.ACL_REG_TYPE_OTHER, lib.ACL_REG_TYPE_ACL_MODEL,
    lib.ACL_REG_TYPE_ACL_OP_EXECUTOR, lib.ACL_REG_TYPE_ACL_OP_CBLAS, lib.ACL_REG_TYPE_ACL_OP_COMPILER,
    lib.ACL_REG_TYPE_ACL_DVPP)
"""


def run(code, **kw):
    return run_python(PRELUDE + textwrap.dedent(code), **kw)


def test_reference_counts():
    run("""
    ref = ffi.new("uint64_t *", 99)
    eq(lib.aclFinalizeReference(ref), 100037, "aclFinalizeReference before aclInit"); eq(ref[0], 0, "count")
    eq(lib.aclInit(ffi.NULL), 0, "aclInit")
    eq(lib.aclInit(ffi.NULL), 100002, "aclInit 2")
    eq(lib.aclInit(b""), 100002, "aclInit 3")
    eq(lib.aclFinalizeReference(ref), 0, "drop 1"); eq(ref[0], 2, "count after drop 1")
    eq(lib.aclrtSetDevice(0), 0, "still initialised")
    eq(lib.aclFinalizeReference(ffi.NULL), 0, "drop 2 without refCount")
    eq(lib.aclrtSetDevice(0), 0, "still initialised after drop 2")
    eq(lib.aclFinalizeReference(ref), 0, "last drop"); eq(ref[0], 0, "count after the last drop")
    eq(lib.aclrtSetDevice(0), 100001, "finalised")
    eq(lib.aclFinalizeReference(ref), 100037, "one drop too many"); eq(ref[0], 0, "count stays 0")
    eq(lib.aclFinalize(), 100037, "aclFinalize with nothing left")
    # aclFinalize drops every reference at once
    eq(lib.aclInit(ffi.NULL), 0, "re-init"); eq(lib.aclInit(ffi.NULL), 100002, "re-init 2")
    eq(lib.aclFinalize(), 0, "aclFinalize")
    eq(lib.aclFinalizeReference(ref), 100037, "nothing left after aclFinalize"); eq(ref[0], 0, "count")
    eq(lib.aclrtSetDevice(0), 100001, "finalised by aclFinalize")
    print("ok")
    """)


def test_init_callbacks_run_once_with_config_and_user_data(tmp_path):
    config = tmp_path / "acl.json"
    config.write_text('{"err_msg_mode": "0"}\n')
    run(f"""
    a, b, m = init_cb("a"), init_cb("b"), init_cb("model")
    eq(lib.aclInitCallbackRegister(OTHER, a, datas[1]), 0, "register a")
    eq(lib.aclInitCallbackRegister(OTHER, b, datas[2]), 0, "register b")
    eq(lib.aclInitCallbackRegister(MODEL, m, datas[3]), 0, "register model")
    eq(calls, [], "nothing runs before aclInit")
    text = open({str(config)!r}).read()
    eq(lib.aclInit({str(config)!r}.encode()), 0, "aclInit")
    eq(calls, [("init", "model", text, len(text), addr(datas[3])),
               ("init", "a", text, len(text), addr(datas[1])),
               ("init", "b", text, len(text), addr(datas[2]))], "callbacks at aclInit")
    del calls[:]
    eq(lib.aclInit({str(config)!r}.encode()), 100002, "aclInit again")
    eq(calls, [], "a repeated aclInit runs no callback")
    late = init_cb("late")
    eq(lib.aclInitCallbackRegister(OTHER, late, datas[4]), 0, "register after aclInit")
    eq(calls, [("init", "late", text, len(text), addr(datas[4]))], "runs at once, with the configuration")
    eq(lib.aclFinalize(), 0, "aclFinalize")
    del calls[:]
    eq(lib.aclInit({str(config)!r}.encode()), 0, "aclInit after aclFinalize")
    eq([c[1] for c in calls], ["model", "a", "b", "late"], "registered callbacks run at every initialisation")
    print("ok")
    """)


def test_init_callback_order_by_type(tmp_path):
    config = tmp_path / "acl.json"
    config.write_text("{}")
    code = """
    cbs = {{n: init_cb(n) for n in ("other", "dvpp", "op_executor", "model", "cblas")}}
    for n, t in (("other", OTHER), ("dvpp", DVPP), ("op_executor", OP_EXECUTOR), ("model", MODEL),
                 ("cblas", OP_CBLAS)):
        eq(lib.aclInitCallbackRegister(t, cbs[n], ffi.NULL), 0, "register " + n)
    eq(lib.aclInit({path}), 0, "aclInit")
    eq([c[1] for c in calls], {want}, "order")
    print("ok")
    """
    # ACL_OP_EXECUTOR only runs when aclInit has a configuration file; other
    # types (ACL_OP_CBLAS here) are never called.
    run(code.format(path="ffi.NULL", want=["model", "dvpp", "other"]))
    run(code.format(path=repr(str(config).encode()), want=["model", "op_executor", "dvpp", "other"]))


def test_init_callback_failure_stops_init():
    run("""
    bad, after = init_cb("bad", status=500001), init_cb("after")
    eq(lib.aclInitCallbackRegister(MODEL, bad, ffi.NULL), 0, "register bad")
    eq(lib.aclInitCallbackRegister(OTHER, after, ffi.NULL), 0, "register after")
    eq(lib.aclInit(ffi.NULL), 500001, "aclInit returns the callback's code")
    eq([c[1] for c in calls], ["bad"], "later callbacks do not run")
    eq(lib.aclrtSetDevice(0), 100001, "not initialised")
    eq(lib.aclFinalize(), 100037, "nothing to finalise")
    eq(lib.aclInitCallbackUnRegister(MODEL, bad), 0, "unregister bad")
    eq(lib.aclInit(ffi.NULL), 0, "aclInit without it")
    eq([c[1] for c in calls], ["bad", "after"], "then the others run")
    print("ok")
    """)


def test_register_rules():
    run("""
    a, b = init_cb("a"), init_cb("b")
    f, g = fini_cb("f"), fini_cb("g")
    eq(lib.aclInitCallbackRegister(OTHER, ffi.NULL, ffi.NULL), 100000, "NULL init cbFunc")
    eq(lib.aclFinalizeCallbackRegister(OTHER, ffi.NULL, ffi.NULL), 100000, "NULL finalize cbFunc")
    eq(lib.aclInitCallbackUnRegister(OTHER, ffi.NULL), 100000, "unregister NULL init cbFunc")
    eq(lib.aclFinalizeCallbackUnRegister(OTHER, ffi.NULL), 100000, "unregister NULL finalize cbFunc")
    eq(lib.aclInitCallbackRegister(MODEL, a, ffi.NULL), 0, "first MODEL")
    eq(lib.aclInitCallbackRegister(MODEL, b, ffi.NULL), 500000, "second MODEL")
    eq(lib.aclInitCallbackRegister(OTHER, a, ffi.NULL), 0, "first OTHER")
    eq(lib.aclInitCallbackRegister(OTHER, b, ffi.NULL), 0, "second OTHER")
    eq(lib.aclFinalizeCallbackRegister(DVPP, f, ffi.NULL), 0, "first finalize DVPP")
    eq(lib.aclFinalizeCallbackRegister(DVPP, g, ffi.NULL), 500000, "second finalize DVPP")
    eq(lib.aclInitCallbackUnRegister(DVPP, a), 500000, "unregister an unregistered type")
    eq(lib.aclInitCallbackUnRegister(OTHER, a), 0, "unregister a")
    eq(lib.aclInitCallbackUnRegister(OTHER, a), 500000, "unregister a twice")
    eq(lib.aclFinalizeCallbackUnRegister(DVPP, g), 500000, "unregister a function never registered")
    eq(lib.aclFinalizeCallbackUnRegister(DVPP, f), 0, "unregister f")
    msg = ffi.string(lib.aclGetRecentErrMsg()).decode()
    assert "aclFinalizeCallbackUnRegister" in msg and "aclInitCallbackUnRegister" in msg, msg
    eq(lib.aclInit(ffi.NULL), 0, "aclInit")
    eq([c[1] for c in calls], ["a", "b"], "MODEL a, OTHER b")
    eq(lib.aclFinalize(), 0, "aclFinalize")
    eq([c[1] for c in calls], ["a", "b"], "no finalize callback left")
    print("ok")
    """)


def test_finalize_callbacks():
    run("""
    names = ("other1", "dvpp", "other2", "model", "compiler", "cblas")
    types = (OTHER, DVPP, OTHER, MODEL, OP_COMPILER, OP_CBLAS)
    cbs = [fini_cb(n) for n in names]
    for i, (cb, t) in enumerate(zip(cbs, types)):
        eq(lib.aclFinalizeCallbackRegister(t, cb, datas[i]), 0, "register " + names[i])
    eq(lib.aclInit(ffi.NULL), 0, "aclInit"); eq(lib.aclInit(ffi.NULL), 100002, "aclInit 2")
    eq(calls, [], "nothing at aclInit")
    eq(lib.aclFinalizeReference(ffi.NULL), 0, "first drop")
    eq(calls, [], "nothing while a reference is left")
    eq(lib.aclFinalizeReference(ffi.NULL), 0, "last drop")
    eq(calls, [("finalize", "compiler", addr(datas[4])), ("finalize", "model", addr(datas[3])),
               ("finalize", "dvpp", addr(datas[1])), ("finalize", "other1", addr(datas[0])),
               ("finalize", "other2", addr(datas[2]))], "finalize order and user data")
    eq(lib.aclFinalize(), 100037, "finalised once")
    eq(len(calls), 5, "each callback ran once")
    print("ok")
    """)


def test_finalize_callback_failure_keeps_acl_initialised():
    run("""
    bad = fini_cb("bad", status=107000)
    eq(lib.aclFinalizeCallbackRegister(OTHER, bad, ffi.NULL), 0, "register")
    eq(lib.aclInit(ffi.NULL), 0, "aclInit")
    eq(lib.aclFinalize(), 107000, "aclFinalize returns the callback's code")
    eq(lib.aclrtSetDevice(0), 0, "still initialised")
    ref = ffi.new("uint64_t *")
    eq(lib.aclFinalizeReference(ref), 107000, "aclFinalizeReference too"); eq(ref[0], 1, "the reference stays")
    eq(lib.aclFinalizeCallbackUnRegister(OTHER, bad), 0, "unregister")
    eq(lib.aclFinalize(), 0, "aclFinalize")
    eq(lib.aclrtSetDevice(0), 100001, "finalised")
    print("ok")
    """)


def test_callback_may_call_the_registers():
    # Callbacks run inside aclInit/aclFinalize and may call the registers.
    run("""
    inner = fini_cb("inner")
    @ffi.callback("aclInitCallbackFunc")
    def outer(config, length, user):
        calls.append(("init", "outer"))
        return lib.aclFinalizeCallbackRegister(OTHER, inner, ffi.NULL)
    eq(lib.aclInitCallbackRegister(OTHER, outer, ffi.NULL), 0, "register")
    eq(lib.aclInit(ffi.NULL), 0, "aclInit")
    eq(lib.aclFinalize(), 0, "aclFinalize")
    eq([c[1] for c in calls], ["outer", "inner"], "calls")
    print("ok")
    """)


def test_config_path(tmp_path):
    first, other = tmp_path / "first.json", tmp_path / "other.json"
    first.write_text("{}")
    other.write_text('{"dump": {}}')
    run(f"""
    eq(lib.aclInit({str(tmp_path / 'missing.json').encode()!r}), 100003, "missing configPath")
    msg = ffi.string(lib.aclGetRecentErrMsg()).decode()
    assert "aclInit" in msg and "missing.json" in msg, msg
    eq(lib.aclInit({str(tmp_path).encode()!r}), 100003, "a directory as configPath")
    eq(lib.aclrtSetDevice(0), 100001, "not initialised")
    eq(lib.aclInit({str(first).encode()!r}), 0, "aclInit with a file")
    eq(lib.aclFinalize(), 0, "aclFinalize")
    eq(lib.aclInit({str(other).encode()!r}), 100000, "a different configuration later")
    eq(lib.aclrtSetDevice(0), 100001, "not initialised")
    eq(lib.aclInit({str(first).encode()!r}), 0, "the first configuration again")
    print("ok")
    """)


# ---- many threads: tests/c/runtime_threads.c under ThreadSanitizer ------------

@pytest.fixture(scope="module")
def threads_under_tsan(tsan_library):
    return tsan_program(tsan_library, "runtime_threads")


@pytest.mark.slow
def test_threads_under_thread_sanitizer(threads_under_tsan, tmp_path):
    # Each thread pairs aclInit with aclFinalizeReference (CANN's concurrent
    # pattern); the application log is on so that its lines race too.
    env = dict(os.environ, OMP_NUM_THREADS="1", ASCEND_GLOBAL_LOG_LEVEL="1",
               ASCEND_PROCESS_LOG_PATH=str(tmp_path / "logs"),
               TSAN_OPTIONS="halt_on_error=0:exitcode=66:second_deadlock_stack=1:report_signal_unsafe=0")
    p = subprocess.run([str(threads_under_tsan)], capture_output=True, text=True, env=env, timeout=600)
    report = p.stdout[-2000:] + p.stderr[-20000:]
    assert "ThreadSanitizer" not in p.stderr, report
    assert p.returncode == 0, report
    assert "runtime_threads: OK" in p.stdout, report
