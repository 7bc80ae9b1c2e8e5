"""fork() from a process that uses convtbc: multiprocessing's default start
method on Linux, and the data-loader workers built on it.

- The numpy API works in a forked child, also after the parent ran a call
  large enough for the OpenMP parallel region (libgomp's threads are not
  inherited: entering a region in the child would wait for them for ever),
  and gives the parent's results bit for bit (the library promises
  bit-identical results for any thread count).

Each test runs in a fresh interpreter with a timeout, so that a hang fails
the test instead of the suite.
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
