"""Buggy client programs (tests/c/buggy_*.c): each makes one mistake a CANN
host program can make, and each mistake must be caught with a non-zero status
and a message naming it, while nothing is written; the same program with
--fixed (the corrected version) must run clean and give the plain-loop
reference's results (exact: small-integer data).

The programs are built against the INSTALLED tree (`convtbc config`) and run
in a clean environment; they print what happened (see tests/c/buggy_common.h)
and this file judges it against the documented behaviour:
  - checked device memory (on by default; CONVTBC_CHECK_MEMORY=0 turns it off):
    phase 2 refuses tensor data / workspaces outside live aclrtMalloc blocks
    with 161002, naming the tensor; "use after free" for freed blocks;
  - aclrtMemcpy whose kind contradicts its pointers -> 107000
    (ACL_ERROR_RT_PARAM_INVALID) naming "dst of <kind>";
  - aclrtFree twice -> 100000 "double free"; of a pointer aclrtMalloc never
    returned -> 100000;
  - a consumed executor -> 161002; a smaller workspace -> 161002;
  - memory freed while an op is queued -> the next aclrtSynchronizeStream
    returns 507015 (ACL_ERROR_RT_AICORE_EXCEPTION);
  - phase 2 is asynchronous: a read before aclrtSynchronizeStream sees the old
    contents (CONVTBC_STREAM_DELAY_MS holds the queued work back);
  - device memory is not host-addressable (the guard, on by default;
    CONVTBC_GUARD_DEVICE_MEMORY=0 turns it off): a host load or store through
    an aclrtMalloc pointer ends the program by SIGSEGV with a message naming
    device memory, the allocation's address and size, and the offset.
Also: convtbc_py.memory_checking restores the previous setting.
"""

import os
import re
import shutil
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from conftest import C_DIR

ACLNN_ERR_PARAM_INVALID = 161002
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_AICORE_EXCEPTION = 507015

PROGRAMS = ["buggy_read_before_sync", "buggy_host_pointer", "buggy_rerun_executor", "buggy_small_workspace",
            "buggy_use_after_free", "buggy_wrong_kind", "buggy_double_free", "buggy_host_access"]

# Variables of the library that change what the programs see.
LIBRARY_ENV = ("CONVTBC_CHECK_MEMORY", "CONVTBC_GUARD_DEVICE_MEMORY", "CONVTBC_STREAM_DELAY_MS", "CONVTBC_SOC_VERSION",
               "ASCEND_GLOBAL_LOG_LEVEL", "ASCEND_SLOG_PRINT_TO_STDOUT", "LD_LIBRARY_PATH", "LD_PRELOAD")


def convtbc_config(cli, flag):
    p = subprocess.run([cli, "config", flag], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def build_c_programs(cli, out_dir, sources, extra_flags=()):
    """Compile tests/c/<name>.c for each name against the installed tree, in
    parallel; {name: path}. Fails the test on a compiler error or warning."""
    cflags, libs = convtbc_config(cli, "--cflags"), convtbc_config(cli, "--libs")
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")

    def build(name):
        exe = out_dir / name
        cmd = [cc, "-std=c11", "-O1", "-g", "-Wall", "-Wextra", *extra_flags, *cflags, str(C_DIR / f"{name}.c"),
               "-o", str(exe), *libs, "-pthread", "-lm"]
        return name, exe, subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(build, sources))
    exes = {}
    for name, exe, p in results:
        assert p.returncode == 0, f"{name}: compile failed\n{' '.join(p.args)}\n{p.stderr}"
        assert "warning" not in p.stderr, p.stderr
        exes[name] = exe
    return exes


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if k not in LIBRARY_ENV}
    env.update(extra or {})
    return env


@pytest.fixture(scope="module")
def programs(convtbc_cli, tmp_path_factory):
    return build_c_programs(convtbc_cli, tmp_path_factory.mktemp("buggy"), PROGRAMS)


class Run:
    """What a buggy_* program printed: CALL/MSG lines, the other tagged lines."""

    def __init__(self, proc):
        self.proc = proc
        self.calls = []  # [api, status, message or None]
        self.tags = {}
        for line in proc.stdout.splitlines():
            tag, _, rest = line.partition(" ")
            if tag == "CALL":
                api, status = rest.rsplit(" ", 1)
                self.calls.append([api, int(status), None])
            elif tag == "MSG":
                api, _, message = rest.partition(" ")
                assert self.calls and self.calls[-1][0] == api, line
                self.calls[-1][2] = message
            else:
                self.tags[tag] = rest
        assert proc.returncode == 0, f"rc={proc.returncode}\n{self.output()}"
        assert "DONE" in self.tags, self.output()

    def output(self):
        return f"--- stdout\n{self.proc.stdout}\n--- stderr\n{self.proc.stderr}"

    def failures(self):
        return [c for c in self.calls if c[1] != 0]


def run(programs, name, *args, env=None):
    proc = subprocess.run([str(programs[name]), *args], capture_output=True, text=True, timeout=120,
                          env=clean_env(env))
    return Run(proc)


# (program, variant, env, the failing call, its status (None: any non-zero),
# words its message must contain, tagged lines the buggy run must print, tagged lines the fixed run must print)
DELAY = {"CONVTBC_STREAM_DELAY_MS": "300"}
MISTAKES = [
    pytest.param("buggy_host_pointer", None, None, "aclnnConvTbcBackward", ACLNN_ERR_PARAM_INVALID,
                 ["aclnnConvTbcBackward", "tensor self", "not device memory"], {"READ": "stale"}, {},
                 id="host-pointer-as-tensor-data"),
    pytest.param("buggy_rerun_executor", None, None, "aclnnConvTbcBackward", ACLNN_ERR_PARAM_INVALID,
                 ["aclnnConvTbcBackward", "executor", "already run"], {"FIRST": "correct", "READ": "stale"},
                 {"FIRST": "correct"}, id="consumed-executor-run-again"),
    pytest.param("buggy_small_workspace", "size", None, "aclnnConvTbcBackward", ACLNN_ERR_PARAM_INVALID,
                 ["aclnnConvTbcBackward", "workspaceSize", "smaller than"], {"READ": "stale"}, {},
                 id="workspace-size-smaller-than-asked"),
    pytest.param("buggy_small_workspace", "alloc", None, "aclnnConvTbcBackward", ACLNN_ERR_PARAM_INVALID,
                 ["aclnnConvTbcBackward", "workspace", "past the end"], {"READ": "stale"}, {},
                 id="workspace-allocation-smaller-than-asked"),
    pytest.param("buggy_use_after_free", "op", None, "aclnnConvTbcBackward", ACLNN_ERR_PARAM_INVALID,
                 ["aclnnConvTbcBackward", "tensor weight", "use after free"], {"READ": "stale"}, {},
                 id="op-on-freed-memory"),
    pytest.param("buggy_use_after_free", "copy", None, "aclrtMemcpy", ACL_ERROR_RT_PARAM_INVALID,
                 ["aclrtMemcpy", "src of ACL_MEMCPY_DEVICE_TO_HOST", "use after free"],
                 {"HOSTBIAS": "untouched"}, {}, id="copy-from-freed-memory"),
    pytest.param("buggy_use_after_free", "queued", DELAY, "aclrtSynchronizeStream", ACL_ERROR_RT_AICORE_EXCEPTION,
                 ["aclrtSynchronizeStream", "tensor weight", "use after free"], {}, {},
                 id="memory-freed-while-op-queued"),
    pytest.param("buggy_use_after_free", "queued-copy", DELAY, "aclrtSynchronizeStream", None,
                 ["aclrtSynchronizeStream", "use after free"], {"READ": "correct"}, {},
                 id="memory-freed-while-copy-queued"),
    pytest.param("buggy_wrong_kind", "upload", None, "aclrtMemcpy", ACL_ERROR_RT_PARAM_INVALID,
                 ["aclrtMemcpy", "dst of ACL_MEMCPY_DEVICE_TO_HOST"], {"DEVSELF": "untouched"},
                 {"DEVSELF": "written"}, id="upload-with-device-to-host-kind"),
    pytest.param("buggy_wrong_kind", "download", None, "aclrtMemcpy", ACL_ERROR_RT_PARAM_INVALID,
                 ["aclrtMemcpy", "dst of ACL_MEMCPY_HOST_TO_DEVICE"], {"HOSTWEIGHT": "untouched", "READ": "correct"},
                 {"HOSTWEIGHT": "written"}, id="download-with-host-to-device-kind"),
    pytest.param("buggy_double_free", "twice", None, "aclrtFree", ACL_ERROR_INVALID_PARAM,
                 ["aclrtFree", "double free"], {"READ": "correct"}, {}, id="free-twice"),
    pytest.param("buggy_double_free", "never", None, "aclrtFree", ACL_ERROR_INVALID_PARAM,
                 ["aclrtFree", "not returned by aclrtMalloc"], {"READ": "correct"}, {},
                 id="free-of-pointer-never-allocated"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, variant, env, api, status, words, buggy_tags, fixed_tags", MISTAKES)
def test_mistake_caught_and_fixed_version_clean(programs, name, variant, env, api, status, words, buggy_tags,
                                                fixed_tags):
    args = [variant] if variant else []
    buggy = run(programs, name, *args, env=env)
    failed = buggy.failures()
    assert len(failed) == 1, f"expected exactly one failing call ({api})\n{buggy.output()}"
    got_api, got_status, message = failed[0]
    assert got_api == api and got_status == (got_status if status is None else status), buggy.output()
    assert message, f"{api} failed without a message\n{buggy.output()}"
    for word in words:
        assert word in message, f"message lacks {word!r}: {message}"
    for tag, value in buggy_tags.items():
        assert buggy.tags.get(tag) == value, f"{tag}: want {value}\n{buggy.output()}"
    if "READ" not in buggy_tags and "READ" in buggy.tags:
        # whatever was refused must not have produced results
        assert buggy.tags["READ"] != "correct", buggy.output()

    fixed = run(programs, name, *args, "--fixed", env=env)
    assert fixed.failures() == [], fixed.output()
    assert fixed.tags.get("READ") == "correct", fixed.output()
    for tag, value in fixed_tags.items():
        assert fixed.tags.get(tag) == value, f"{tag}: want {value}\n{fixed.output()}"


@pytest.mark.slow
def test_read_before_synchronize_sees_stale_outputs(programs):
    """Phase 2 only queues the op: with the queue held back, a read right after
    it still finds the sentinel; the same read after aclrtSynchronizeStream
    finds the results. The corrected program (synchronise, then read) is right."""
    buggy = run(programs, "buggy_read_before_sync", env=DELAY)
    assert buggy.failures() == [], buggy.output()
    assert buggy.tags.get("EARLY") == "stale", buggy.output()
    assert buggy.tags.get("READ") == "correct", buggy.output()

    fixed = run(programs, "buggy_read_before_sync", "--fixed", env=DELAY)
    assert fixed.failures() == [], fixed.output()
    assert "EARLY" not in fixed.tags
    assert fixed.tags.get("READ") == "correct", fixed.output()


@pytest.mark.slow
def test_memory_checks_off_by_environment(programs):
    """CONVTBC_CHECK_MEMORY=0: host memory passes as tensor data (the op runs
    and is right); executor rules do not depend on memory checking."""
    off = {"CONVTBC_CHECK_MEMORY": "0"}
    r = run(programs, "buggy_host_pointer", env=off)
    assert r.failures() == [], r.output()
    assert r.tags.get("READ") == "correct", r.output()

    r = run(programs, "buggy_rerun_executor", env=off)
    assert [(c[0], c[1]) for c in r.failures()] == [("aclnnConvTbcBackward", ACLNN_ERR_PARAM_INVALID)], r.output()


# ---- host access to device memory ---------------------------------------------------

def check_host_access_fault(proc, how):
    """The program died by the fault at its ACCESS line, and stderr names
    device memory, the access, the allocation (address, size) and the offset."""
    out = f"rc={proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert proc.returncode in (-signal.SIGSEGV, -signal.SIGBUS), out
    m = re.search(r"^ACCESS (\w+) (0x[0-9a-f]+) (\d+) (\d+)$", proc.stdout, re.M)
    assert m and m.group(1) == how, out
    base, size, offset = m.group(2), int(m.group(3)), int(m.group(4))
    assert "DONE" not in proc.stdout and "VALUE" not in proc.stdout, out
    assert "device memory" in proc.stderr, out
    assert f"offset {offset} into the aclrtMalloc allocation at {base} of {size} bytes" in proc.stderr, out
    assert f"at {hex(int(base, 16) + offset)}" in proc.stderr, out
    assert re.search(rf"host ({how}|load or store) of device memory", proc.stderr), out


@pytest.mark.slow
@pytest.mark.parametrize("how", ["store", "load"])
def test_host_access_to_device_memory_ends_the_program(programs, how):
    buggy = subprocess.run([str(programs["buggy_host_access"]), how], capture_output=True, text=True, timeout=120,
                           env=clean_env())
    check_host_access_fault(buggy, how)

    fixed = run(programs, "buggy_host_access", how, "--fixed")
    assert fixed.failures() == [], fixed.output()
    assert fixed.tags.get("READ") == "correct", fixed.output()
    if how == "load":
        assert fixed.tags.get("VALUE") == "correct", fixed.output()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["store", "load"])
def test_host_access_allowed_with_the_guard_off(programs, how):
    """CONVTBC_GUARD_DEVICE_MEMORY=0: device memory is host memory, as before
    the guard; the buggy program runs to the end with right results."""
    r = run(programs, "buggy_host_access", how, env={"CONVTBC_GUARD_DEVICE_MEMORY": "0"})
    assert r.failures() == [], r.output()
    assert r.tags.get("READ") == "correct", r.output()
    if how == "load":
        assert r.tags.get("VALUE") == "correct", r.output()
    assert "device memory" not in r.proc.stderr, r.output()


# ---- convtbc_py.memory_checking -------------------------------------------------

def _undeclared_phase2():
    """Phase 2 status for a valid problem whose tensors and workspace are plain
    numpy memory, never declared to the library (so: not device memory)."""
    import convtbc_py
    ffi, lib = convtbc_py.ffi, convtbc_py.lib
    keep = []

    def tensor(a):
        a = np.ascontiguousarray(a, dtype=np.float32)
        keep.append(a)
        dims = ffi.new("int64_t[]", list(a.shape))
        strides = ffi.new("int64_t[]", [s // 4 for s in a.strides])
        t = lib.aclCreateTensor(dims, a.ndim, lib.ACL_FLOAT, strides, 0, lib.ACL_FORMAT_ND, dims, a.ndim,
                                ffi.cast("void *", a.ctypes.data))
        assert t != ffi.NULL
        keep.append(t)
        return t

    T, B, Ci, K, Co, pad = 4, 2, 3, 2, 2, 0
    To = T + 2 * pad + 1 - K
    ts = [tensor(np.ones(s)) for s in [(To, B, Co), (T, B, Ci), (K, Ci, Co), (Co,), (T, B, Ci), (K, Ci, Co), (Co,)]]
    ws_size = ffi.new("uint64_t *")
    ex = ffi.new("aclOpExecutor **")
    st = lib.aclnnConvTbcBackwardGetWorkspaceSize(ts[0], ts[1], ts[2], ts[3], pad, 0, ts[4], ts[5], ts[6], ws_size, ex)
    assert st == 0
    ws = np.zeros(int(ws_size[0]) + 64, np.uint8)
    st = lib.aclnnConvTbcBackward(ffi.cast("void *", ws.ctypes.data), ws_size[0], ex[0], ffi.NULL)
    if st != 0:
        lib.aclDestroyAclOpExecutor(ex[0])
    lib.convtbcSynchronizeCurrent()
    lib.aclGetRecentErrMsg()  # leave no message behind
    for t in keep:
        if not isinstance(t, np.ndarray):
            lib.aclDestroyTensor(t)
    return st


def test_memory_checking_context_manager_restores():
    import convtbc_py
    lib = convtbc_py.lib
    start = lib.convtbcSetMemoryChecking(1)  # whatever the process had; put back at the end
    try:
        assert _undeclared_phase2() == ACLNN_ERR_PARAM_INVALID  # checking on: host memory refused
        with convtbc_py.memory_checking(False):
            assert _undeclared_phase2() == 0
            with convtbc_py.memory_checking(True):
                assert _undeclared_phase2() == ACLNN_ERR_PARAM_INVALID
            assert _undeclared_phase2() == 0  # inner exit restored "off"
        assert _undeclared_phase2() == ACLNN_ERR_PARAM_INVALID  # outer exit restored "on"

        with pytest.raises(RuntimeError):
            with convtbc_py.memory_checking(False):
                raise RuntimeError("inside")
        assert _undeclared_phase2() == ACLNN_ERR_PARAM_INVALID  # restored after an exception

        lib.convtbcSetMemoryChecking(0)
        with convtbc_py.memory_checking(True):
            assert _undeclared_phase2() == ACLNN_ERR_PARAM_INVALID
        assert _undeclared_phase2() == 0  # restored to the "off" it found
    finally:
        lib.convtbcSetMemoryChecking(start)
