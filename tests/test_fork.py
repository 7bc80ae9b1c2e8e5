"""fork() from a process that uses convtbc: multiprocessing's default start
method on Linux, and the data-loader workers built on it.

- The numpy API works in a forked child, also after the parent ran a call
  large enough for the OpenMP parallel region (libgomp's threads are not
  inherited: entering a region in the child would wait for them for ever),
  and gives the parent's results bit for bit (the library promises
  bit-identical results for any thread count).
- A child of a process whose runtime is initialised inherits none of it
  (CANN does not support that either): its runtime calls fail at once with
  ACL_ERROR_UNINITIALIZE (100001), aclFinalize with
  ACL_ERROR_REPEAT_FINALIZE (100037), each with a message naming the parent
  and aclInit, instead of waiting for the parent's stream threads; the child
  may aclInit a runtime of its own.

Each test runs in a fresh interpreter with a timeout, so that a hang fails
the test instead of the suite (tests/c/fork_child.c covers the same in C).
"""

from conftest import run_python

TIMEOUT = 120

NUMPY_IN_CHILDREN = """
import multiprocessing as mp
import os
import pickle
import numpy as np
import convtbc_py

rng = np.random.default_rng(11)
T, B, C_IN, C_OUT, K, PAD = 64, 8, 64, 64, 3, 1
x = rng.standard_normal((T, B, C_IN)).astype(np.float32)
w = rng.standard_normal((K, C_IN, C_OUT)).astype(np.float32)
g = rng.standard_normal((T + 2 * PAD + 1 - K, B, C_OUT)).astype(np.float32)
b = np.zeros(C_OUT, np.float32)

def grads(_=None):
    return convtbc_py.conv_tbc_backward(g, x, w, b, PAD)

def same(a, b):
    return all(u.dtype == v.dtype and u.tobytes() == v.tobytes() for u, v in zip(a, b))

def child_and_grandchild(_):
    mine = grads()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a child of the child: forked twice
        os.close(read)
        os.write(write, pickle.dumps(grads()))
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 20):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return mine, pickle.loads(data)

parents = grads()      # 4 OpenMP threads: the parallel region runs in the parent
with mp.get_context("fork").Pool(2) as pool:
    children = pool.map(grads, range(4))
    nested = pool.map(child_and_grandchild, range(2))
assert all(same(c, parents) for c in children), "a forked child's gradients differ from the parent's"
assert all(same(c, parents) and same(gc, parents) for c, gc in nested), "a grandchild's gradients differ"
assert same(grads(), parents), "the parent after its children"
print("ok")
"""


def test_numpy_api_in_forked_children():
    """Before the fix the first child waits for ever inside libgomp."""
    proc = run_python(NUMPY_IN_CHILDREN, env_extra={"OMP_NUM_THREADS": "4"}, timeout=TIMEOUT)
    assert proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr


RUNTIME_IN_CHILD = """
import os
import numpy as np
import convtbc_py
ffi, lib = convtbc_py.ffi, convtbc_py.lib
H2D, D2H = 1, 2
UNINITIALIZE, REPEAT_FINALIZE, INVALID_PARAM, RT_PARAM_INVALID = 100001, 100037, 100000, 107000

def msg():
    p = lib.aclGetRecentErrMsg()
    return "" if p == ffi.NULL else ffi.string(p).decode()

def eq(got, want, what):
    assert got == want, f"{what}: got {got}, want {want} ({msg()})"

def names_parent(what):
    text = msg()
    assert "parent process" in text and "aclInit" in text, f"{what}: {text}"

eq(lib.aclInit(ffi.NULL), 0, "aclInit")
eq(lib.aclrtSetDevice(0), 0, "aclrtSetDevice")
stream_p, event_p, dev_p = ffi.new("aclrtStream *"), ffi.new("aclrtEvent *"), ffi.new("void **")
eq(lib.aclrtCreateStream(stream_p), 0, "aclrtCreateStream")
eq(lib.aclrtCreateEvent(event_p), 0, "aclrtCreateEvent")
eq(lib.aclrtMalloc(dev_p, 4096, 0), 0, "aclrtMalloc")
stream, event, dev = stream_p[0], event_p[0], dev_p[0]
host = np.arange(4096, dtype=np.uint8)
hp = ffi.cast("void *", host.ctypes.data)
# Queued work still pending at the fork (every task waits 300 ms first).
for s in (stream, ffi.NULL):
    eq(lib.aclrtMemcpyAsync(dev, 4096, hp, 4096, H2D, s), 0, "aclrtMemcpyAsync")
eq(lib.aclrtRecordEvent(event, stream), 0, "aclrtRecordEvent")

pid = os.fork()
if pid == 0:
    status = 1
    try:
        eq(lib.aclrtSynchronizeStream(stream), UNINITIALIZE, "aclrtSynchronizeStream of an inherited stream")
        names_parent("aclrtSynchronizeStream")
        eq(lib.aclrtSynchronizeStream(ffi.NULL), UNINITIALIZE, "aclrtSynchronizeStream of the default stream")
        eq(lib.aclrtSynchronizeDevice(), UNINITIALIZE, "aclrtSynchronizeDevice")
        eq(lib.aclrtSynchronizeEvent(event), UNINITIALIZE, "aclrtSynchronizeEvent")
        eq(lib.aclrtMemcpy(hp, 4096, dev, 4096, D2H), UNINITIALIZE, "aclrtMemcpy")
        eq(lib.aclrtDestroyStream(stream), UNINITIALIZE, "aclrtDestroyStream")
        eq(lib.aclFinalize(), REPEAT_FINALIZE, "aclFinalize")
        names_parent("aclFinalize")
        # The numpy API needs no runtime.
        gi, gw, gb = convtbc_py.conv_tbc_backward(np.ones((3, 1, 2), np.float32), np.ones((3, 1, 2), np.float32),
                                                  np.ones((1, 2, 2), np.float32), np.zeros(2, np.float32), 0)
        assert gb.tolist() == [3.0, 3.0], gb
        # A runtime of the child's own.
        eq(lib.aclInit(ffi.NULL), 0, "the child's aclInit")
        eq(lib.aclrtSetDevice(0), 0, "the child's aclrtSetDevice")
        eq(lib.aclrtSynchronizeStream(stream), INVALID_PARAM, "the parent's stream in the child's runtime")
        eq(lib.aclrtMemcpy(hp, 4096, dev, 4096, D2H), RT_PARAM_INVALID, "the parent's device memory")
        names_parent("the parent's device memory")
        eq(lib.aclrtFree(dev), INVALID_PARAM, "aclrtFree of the parent's block")
        mine = ffi.new("void **")
        eq(lib.aclrtMalloc(mine, 4096, 0), 0, "the child's aclrtMalloc")
        eq(lib.aclrtMemcpyAsync(mine[0], 4096, hp, 4096, H2D, ffi.NULL), 0, "the child's queued copy")
        eq(lib.aclrtSynchronizeStream(ffi.NULL), 0, "the child's synchronisation")
        back = np.zeros(4096, np.uint8)
        eq(lib.aclrtMemcpy(ffi.cast("void *", back.ctypes.data), 4096, mine[0], 4096, D2H), 0, "download")
        assert (back == host).all()
        eq(lib.aclrtFree(mine[0]), 0, "the child's aclrtFree")
        eq(lib.aclFinalize(), 0, "the child's aclFinalize")
        status = 0
    except BaseException as e:
        print("CHILD:", e, flush=True)
    os._exit(status)

_, status = os.waitpid(pid, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status}"
eq(lib.aclrtSynchronizeEvent(event), 0, "the parent's event")
eq(lib.aclrtSynchronizeStream(stream), 0, "the parent's stream")
back = np.zeros(4096, np.uint8)
eq(lib.aclrtMemcpy(ffi.cast("void *", back.ctypes.data), 4096, dev, 4096, D2H), 0, "the parent's download")
assert (back == host).all()
eq(lib.aclFinalize(), 0, "the parent's aclFinalize")
print("ok")
"""


def test_runtime_in_forked_child_fails_instead_of_hanging():
    """Before the fix the child's first synchronisation waits for ever for
    the parent's stream worker, which the child does not have."""
    proc = run_python(RUNTIME_IN_CHILD, env_extra={"CONVTBC_STREAM_DELAY_MS": "300"}, timeout=TIMEOUT)
    assert proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
