"""Time conv_tbc_backward right after a numpy matmul, and back to back.

    python examples/after_matmul.py [T B C_in K C_out]

Another library's threads (numpy's OpenBLAS here) spin for a while after
their own call; on a machine with few cores a thread of ours then waits
for a core. The backward op's team (libconvtbc/compute/team.c) does not
wait for a thread that has not started, so the call costs at worst its
one-thread time; compare with OPENBLAS_NUM_THREADS=1 or OMP_NUM_THREADS=1
set in the environment.
"""

import statistics
import sys
import time

import numpy as np

import convtbc_py

T, B, C_IN, K, C_OUT = (int(v) for v in sys.argv[1:6]) if len(sys.argv) > 5 else (8, 17, 240, 3, 16)
CALLS = 300

rng = np.random.default_rng(0)
grad_output = rng.standard_normal((T + 1 - K, B, C_OUT), dtype=np.float32)
x = rng.standard_normal((T, B, C_IN), dtype=np.float32)
weight = rng.standard_normal((K, C_IN, C_OUT), dtype=np.float32)
bias = rng.standard_normal(C_OUT, dtype=np.float32)
square = rng.standard_normal((256, 256), dtype=np.float32)


def median_ms(before_each=None):
    times = []
    for _ in range(CALLS):
        if before_each is not None:
            before_each()
        start = time.perf_counter()
        convtbc_py.conv_tbc_backward(grad_output, x, weight, bias, 0)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


after = median_ms(lambda: square @ square)
alone = median_ms()
print(f"T{T} B{B} C_in{C_IN} K{K} C_out{C_OUT}: after a matmul {after:.2f} ms, back to back {alone:.2f} ms")
