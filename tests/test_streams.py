"""Asynchronous streams and events.

- tests/c/stream_stress.c: 4 host threads x 4 streams x 200 queued ops
  (producer/consumer pairs on small random shapes, async copies, events
  between streams) must give bit-for-bit the results of the same ops run one
  by one, and the plain-loop reference; the same program without the events
  must be caught by that comparison (so the comparison can fail); and the
  whole run must be clean under ThreadSanitizer (library and program built
  with -fsanitize=thread; OMP_NUM_THREADS=1, libgomp not being instrumented;
  no suppressions). tests/c/stream_api.c (the stream, event and host-callback
  calls, also from four threads at once) runs under the same build.
- The documented stream semantics, through the raw API in a fresh process:
  aclrtMemcpyAsync / aclrtMemsetAsync return before the work is done
  (CONVTBC_STREAM_DELAY_MS holds queued work back), a stream runs its work in
  order, aclrtStreamWaitEvent orders one stream after another's recording,
  aclrtSynchronizeEvent / aclrtSynchronizeDevice wait, the NULL stream is the
  current context's default stream, and on a thread with no current context
  the work runs at once.
"""

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import C_DIR, REPO_ROOT, TESTS_DIR
from test_buggy_clients import build_c_programs, clean_env


def run_stress(exe, *args, env=None, timeout=300):
    p = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout, env=clean_env(env))
    counts = {}
    for key in ("mismatch_sequential", "mismatch_reference", "calls_failed"):
        m = re.search(rf"^{key} (\d+)$", p.stdout, re.M)
        counts[key] = int(m.group(1)) if m else None
    m = re.search(r"^threads (\d+) streams_per_thread (\d+) ops (\d+)$", p.stdout, re.M)
    counts["shape"] = tuple(int(g) for g in m.groups()) if m else None
    return p, counts


@pytest.fixture(scope="module")
def stress(convtbc_cli, tmp_path_factory):
    return build_c_programs(convtbc_cli, tmp_path_factory.mktemp("stress"), ["stream_stress"])["stream_stress"]


@pytest.mark.slow
def test_stress_matches_one_by_one_and_reference(stress):
    p, counts = run_stress(stress)
    report = p.stdout[-3000:] + p.stderr[-5000:]
    assert counts["shape"] == (4, 4, 800), report  # 4 threads x 200 ops, 4 streams each
    assert counts["calls_failed"] == 0, report
    assert counts["mismatch_sequential"] == 0, report
    assert counts["mismatch_reference"] == 0, report
    assert p.returncode == 0 and "OK" in p.stdout, report


@pytest.mark.slow
def test_stress_with_queue_delay(stress):
    """Every queued task held back 1 ms: the streams interleave differently,
    the results must not change."""
    p, counts = run_stress(stress, "--pairs", "25", env={"CONVTBC_STREAM_DELAY_MS": "1"})
    report = p.stdout[-3000:] + p.stderr[-5000:]
    assert (counts["calls_failed"], counts["mismatch_sequential"], counts["mismatch_reference"]) == (0, 0, 0), report
    assert p.returncode == 0, report


@pytest.mark.slow
def test_stress_without_events_is_caught(stress):
    """The consumer stream no longer waits for the producer's event: with the
    queues held back it copies the producer's gradInput before it is written,
    and the comparison with the one-by-one run must notice."""
    p, counts = run_stress(stress, "--pairs", "20", "--no-events", env={"CONVTBC_STREAM_DELAY_MS": "2"})
    report = p.stdout[-3000:] + p.stderr[-5000:]
    assert counts["calls_failed"] == 0, report
    assert counts["mismatch_sequential"] > 0, report


# ---- ThreadSanitizer ------------------------------------------------------------

def tool(name):
    cand = Path(sys.executable).parent / name
    return str(cand) if cand.exists() else shutil.which(name)


# The ThreadSanitizer library is built once per session, however many
# modules use the fixture (test_runtime_lifecycle.py does).
_TSAN_LIBRARY = []


@pytest.fixture(scope="module")
def tsan_library(tmp_path_factory):
    if not _TSAN_LIBRARY:
        _TSAN_LIBRARY.append(_build_tsan_library(tmp_path_factory))
    return _TSAN_LIBRARY[0]


def _build_tsan_library(tmp_path_factory):
    meson, ninja = tool("meson"), tool("ninja")
    cc = shutil.which("gcc")
    if not meson or not ninja or not cc:
        pytest.skip("meson, ninja and gcc are needed for the ThreadSanitizer build")
    build = tmp_path_factory.mktemp("tsan_build")
    env = dict(os.environ)
    env["PATH"] = str(Path(ninja).parent) + os.pathsep + env.get("PATH", "")
    setup = subprocess.run([meson, "setup", str(build), str(REPO_ROOT), "-Db_sanitize=thread", "-Db_lundef=false",
                            "-Dbuildtype=debugoptimized"], capture_output=True, text=True, env=env, timeout=300)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    comp = subprocess.run([ninja, "-C", str(build)], capture_output=True, text=True, env=env, timeout=900)
    assert comp.returncode == 0, comp.stdout[-5000:] + comp.stderr[-5000:]
    elves = [p for p in build.rglob("libconvtbc.so*")
             if p.is_file() and not p.is_symlink() and p.read_bytes()[:4] == b"\x7fELF"]
    assert elves, "no libconvtbc shared object in the ThreadSanitizer build"
    return elves[0]


def tsan_program(lib, name):
    exe = lib.parent / f"{name}_tsan"
    cmd = [shutil.which("gcc"), "-std=c11", "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=thread",
           f"-I{REPO_ROOT / 'include'}", f"-I{REPO_ROOT / 'include' / 'aclnn'}", str(C_DIR / f"{name}.c"), "-o",
           str(exe), str(lib), f"-Wl,-rpath,{lib.parent}", "-pthread", "-lm"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return exe


TSAN_ENV = {"OMP_NUM_THREADS": "1",
            "TSAN_OPTIONS": "halt_on_error=0:exitcode=66:second_deadlock_stack=1:report_signal_unsafe=0"}


@pytest.fixture(scope="module")
def tsan_stress(tsan_library):
    return tsan_program(tsan_library, "stream_stress")


@pytest.mark.slow
@pytest.mark.parametrize("args, env", [
    (["--pairs", "100"], {}),
    (["--pairs", "20"], {"CONVTBC_STREAM_DELAY_MS": "1"}),
], ids=["full", "delayed-queues"])
def test_stress_under_thread_sanitizer(tsan_stress, args, env):
    env = dict(env)
    env.update(TSAN_ENV)
    p, counts = run_stress(tsan_stress, *args, env=env, timeout=600)
    report = p.stdout[-2000:] + p.stderr[-20000:]
    assert "WARNING: ThreadSanitizer" not in p.stderr, report
    assert "ThreadSanitizer" not in p.stderr, report
    assert p.returncode == 0, report
    assert (counts["calls_failed"], counts["mismatch_sequential"], counts["mismatch_reference"]) == (0, 0, 0), report


@pytest.mark.slow
def test_stream_api_under_thread_sanitizer(tsan_library):
    """tests/c/stream_api.c: the stream, event and host-callback calls, then
    the same from four threads at once (callbacks served by one thread,
    aborts racing submissions, forced destruction): no report."""
    exe = tsan_program(tsan_library, "stream_api")
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600, env=clean_env(TSAN_ENV))
    report = p.stdout[-2000:] + p.stderr[-20000:]
    assert "ThreadSanitizer" not in p.stderr, report
    assert p.returncode == 0 and "stream_api: OK" in p.stdout, report


@pytest.mark.slow
def test_executor_race_under_thread_sanitizer(tsan_library):
    """tests/c/executor_race.c: two threads racing for one executor (two
    runs, a run and a destroy, two destroys, a run and a destroy of a
    repeatable one): exactly one takes it, and no report."""
    exe = tsan_program(tsan_library, "executor_race")
    p = subprocess.run([str(exe), "300"], capture_output=True, text=True, timeout=600, env=clean_env(TSAN_ENV))
    report = p.stdout[-2000:] + p.stderr[-20000:]
    assert "ThreadSanitizer" not in p.stderr, report
    assert p.returncode == 0 and "executor_race: OK" in p.stdout, report


@pytest.mark.slow
def test_stream_handles_under_thread_sanitizer(tsan_library):
    """tests/c/stream_handles.c: a stale handle after destruction, a stream
    destroyed from its own task, and destruction racing another thread's
    queries and synchronisations: no report."""
    exe = tsan_program(tsan_library, "stream_handles")
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600, env=clean_env(TSAN_ENV))
    report = p.stdout[-2000:] + p.stderr[-20000:]
    assert "ThreadSanitizer" not in p.stderr, report
    assert p.returncode == 0 and "stream_handles: OK" in p.stdout, report

# ---- documented semantics, one fact a line ----------------------------------------

SEMANTICS = r"""
import threading
import numpy as np
from convtbc_py import ffi, lib

def ok(st, what):
    assert st == 0, (what, st, ffi.string(lib.aclGetRecentErrMsg() or ffi.new("char[]", b"")))

N = 64
ok(lib.aclInit(ffi.NULL), "aclInit")
ok(lib.aclrtSetDevice(0), "aclrtSetDevice")
s1p, s2p, evp = ffi.new("aclrtStream *"), ffi.new("aclrtStream *"), ffi.new("aclrtEvent *")
ok(lib.aclrtCreateStream(s1p), "stream"); ok(lib.aclrtCreateStream(s2p), "stream")
ok(lib.aclrtCreateEvent(evp), "event")
s1, s2, ev = s1p[0], s2p[0], evp[0]
a_p, b_p = ffi.new("void **"), ffi.new("void **")
ok(lib.aclrtMalloc(a_p, N, 0), "malloc"); ok(lib.aclrtMalloc(b_p, N, 0), "malloc")
A, B = a_p[0], b_p[0]

def read(dev):
    host = np.zeros(N, np.uint8)
    ok(lib.aclrtMemcpy(ffi.cast("void *", host.ctypes.data), N, dev, N, lib.ACL_MEMCPY_DEVICE_TO_HOST), "read")
    vals = set(host.tolist())
    return str(vals.pop()) if len(vals) == 1 else "mixed"

def fact(name, value):
    print(name, value, flush=True)

ones = np.full(N, 1, np.uint8)
ok(lib.aclrtMemset(A, N, 0, N), "memset")
ok(lib.aclrtMemcpyAsync(A, N, ffi.cast("void *", ones.ctypes.data), N, lib.ACL_MEMCPY_HOST_TO_DEVICE, s1), "cpy")
fact("memcpy_async_before_sync", read(A))
ok(lib.aclrtSynchronizeStream(s1), "sync")
fact("memcpy_async_after_sync", read(A))

ok(lib.aclrtMemsetAsync(A, N, 9, N, s1), "memset async")
fact("memset_async_before_sync", read(A))
ok(lib.aclrtSynchronizeStream(s1), "sync")
fact("memset_async_after_sync", read(A))

# in order on one stream
ok(lib.aclrtMemsetAsync(A, N, 1, N, s1), "m")
ok(lib.aclrtMemcpyAsync(B, N, A, N, lib.ACL_MEMCPY_DEVICE_TO_DEVICE, s1), "c")
ok(lib.aclrtMemsetAsync(A, N, 2, N, s1), "m")
ok(lib.aclrtSynchronizeStream(s1), "sync")
fact("fifo_b", read(B)); fact("fifo_a", read(A))

# s2 waits for s1's recording: its copy sees s1's memset; synchronising s2 is enough
ok(lib.aclrtMemsetAsync(A, N, 3, N, s1), "m")
ok(lib.aclrtRecordEvent(ev, s1), "record")
ok(lib.aclrtStreamWaitEvent(s2, ev), "wait")
ok(lib.aclrtMemcpyAsync(B, N, A, N, lib.ACL_MEMCPY_DEVICE_TO_DEVICE, s2), "c")
ok(lib.aclrtSynchronizeStream(s2), "sync s2")
fact("event_ordered_copy", read(B))

# aclrtSynchronizeEvent waits for the work before the recording
ok(lib.aclrtMemsetAsync(A, N, 4, N, s1), "m")
ok(lib.aclrtRecordEvent(ev, s1), "record")
fact("event_before_sync", read(A))
ok(lib.aclrtSynchronizeEvent(ev), "sync event")
fact("event_after_sync", read(A))

# aclrtSynchronizeDevice waits for every stream
ok(lib.aclrtMemsetAsync(A, N, 5, N, s1), "m")
ok(lib.aclrtMemsetAsync(B, N, 6, N, s2), "m")
ok(lib.aclrtSynchronizeDevice(), "sync device")
fact("device_sync_a", read(A)); fact("device_sync_b", read(B))

# NULL stream: the current context's default stream
ok(lib.aclrtMemsetAsync(A, N, 7, N, ffi.NULL), "m")
fact("null_stream_before_sync", read(A))
ok(lib.aclrtSynchronizeStream(ffi.NULL), "sync null")
fact("null_stream_after_sync", read(A))

# a thread with no current context: the work runs at once
def no_context():
    ok(lib.aclrtMemsetAsync(A, N, 8, N, ffi.NULL), "m")
    fact("no_context_at_once", read(A))
t = threading.Thread(target=no_context); t.start(); t.join()

ok(lib.aclrtDestroyEvent(ev), "destroy event")
ok(lib.aclrtFree(A), "free"); ok(lib.aclrtFree(B), "free")
ok(lib.aclrtDestroyStream(s1), "d"); ok(lib.aclrtDestroyStream(s2), "d")
ok(lib.aclrtResetDevice(0), "reset"); ok(lib.aclFinalize(), "fin")
fact("done", 1)
"""


@pytest.mark.slow
def test_stream_semantics(tmp_path):
    env = clean_env({"CONVTBC_STREAM_DELAY_MS": "100", "PYTHONPATH": str(TESTS_DIR)})
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(SEMANTICS)], capture_output=True, text=True,
                       timeout=120, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    got = dict(line.split(" ", 1) for line in p.stdout.strip().splitlines())
    assert got == {
        "memcpy_async_before_sync": "0", "memcpy_async_after_sync": "1",
        "memset_async_before_sync": "1", "memset_async_after_sync": "9",
        "fifo_b": "1", "fifo_a": "2",
        "event_ordered_copy": "3",
        "event_before_sync": "3", "event_after_sync": "4",
        "device_sync_a": "5", "device_sync_b": "6",
        "null_stream_before_sync": "5",
        "null_stream_after_sync": "7",
        "no_context_at_once": "8",
        "done": "1",
    }, p.stdout
