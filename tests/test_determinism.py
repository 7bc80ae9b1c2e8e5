"""Determinism: bit-identical outputs across repeated runs and across
OpenMP thread counts (each in its own process), for every kernel ISA
selectable with CONVTBC_ISA (a cap the CPU lacks falls back); every ISA's
results within the reference bounds.
"""

import os

import numpy as np
import pytest

import convtbc_py
from conftest import run_python
from reference import BF16, F16, F32, assert_close, conv_tbc_backward_ref

# T, B, C_in, K, C_out, pad, dtype
SHAPES = [
    (33, 16, 96, 5, 48, 2, "float32"),
    (17, 16, 64, 9, 16, 0, "float32"),
    (24, 8, 200, 3, 33, 1, "bfloat16"),
    (40, 4, 64, 7, 64, 3, "float16"),
    (9, 64, 130, 2, 70, 1, "float32"),
    # c_out 1, K 1: GEMV grad_weight, grad_input written in place with
    # partial micro-tiles in both directions, parallel (2e6 flops, 6e5 elements)
    (43, 7, 1700, 1, 1, 0, "float32"),
    # c_out 1 with B < 8: GEMV per tap, padded
    (64, 1, 100, 5, 1, 2, "float32"),
    # one time step: the last micro-tile of grad_input is partial and reads
    # grad_output in place
    (1, 9, 1570, 1, 17, 0, "float32"),
    # few output channels, batch >= 8: grad_weight on (tap, channel) pairs,
    # micro-tiles spanning two taps, a partial c_in strip, padding
    (20, 8, 160, 5, 8, 2, "float32"),
    (14, 9, 130, 4, 7, 1, "bfloat16"),
    # gradients of one or two cache blocks, cut into tiles so that a team
    # balances (blocking.c, split_for_balance): grad_input by channels,
    # grad_weight by output channels
    (15, 24, 768, 14, 256, 0, "float16"),
    (12, 29, 494, 16, 99, 14, "float32"),
]

WORKER = r"""
import sys, numpy as np, ml_dtypes
import convtbc_py
from test_determinism import SHAPES, operands
out = {}
for i, shape in enumerate(SHAPES):
    ops = operands(shape)
    first = convtbc_py.conv_tbc_backward(*ops, shape[5])
    for rep in range(3):
        again = convtbc_py.conv_tbc_backward(*ops, shape[5])
        for a, b in zip(first, again):
            assert a.tobytes() == b.tobytes(), f"shape {shape}: repeated run differs"
    for j, a in enumerate(first):
        out[f"s{i}_{j}"] = np.ascontiguousarray(a).view(np.uint8)
np.savez(sys.argv[1], **out)
"""


def operands(shape):
    T, B, C_in, K, C_out, pad, dt = shape
    dt = {"float32": F32, "float16": F16, "bfloat16": BF16}[dt]
    rng = np.random.default_rng(T * 1000003 + C_in)
    T_out = T + 2 * pad + 1 - K
    mk = lambda s: rng.uniform(-1, 1, size=s).astype(np.float32).astype(dt)  # noqa: E731
    return mk((T_out, B, C_out)), mk((T, B, C_in)), mk((K, C_in, C_out)), mk((C_out,))


def run_worker(tmp_path, threads, isa=None):
    out = tmp_path / f"out_{threads}_{isa or 'default'}.npz"
    env = {"OMP_NUM_THREADS": str(threads)}
    if isa:
        env["CONVTBC_ISA"] = isa
    run_python(f"import sys; sys.argv = ['w', {str(out)!r}]\n" + WORKER, env_extra=env, timeout=300)
    with np.load(out) as z:
        return {k: z[k].copy() for k in z.files}


def test_repeated_runs_in_process():
    for shape in SHAPES[:2]:
        ops = operands(shape)
        first = convtbc_py.conv_tbc_backward(*ops, shape[5])
        for _ in range(3):
            for a, b in zip(first, convtbc_py.conv_tbc_backward(*ops, shape[5])):
                assert a.tobytes() == b.tobytes()


@pytest.mark.slow
@pytest.mark.parametrize("isa", [None, "portable", "avx2", "avx512"])
def test_thread_counts_bit_identical(isa, tmp_path):
    counts = (1, 2, 3) if isa is None else (1, 2)
    results = {n: run_worker(tmp_path, n, isa) for n in counts}
    for n in counts[1:]:
        for k, v in results[1].items():
            assert results[n][k].tobytes() == v.tobytes(), (
                f"ISA {isa or 'default'}: output {k} differs between 1 and {n} threads")
    # and within bounds of the reference
    for i, shape in enumerate(SHAPES):
        ops = operands(shape)
        refs = conv_tbc_backward_ref(ops[0], ops[1], ops[2], shape[5])
        for j, (ref, like) in enumerate(zip(refs, (ops[1], ops[2], ops[3]))):
            got = results[1][f"s{i}_{j}"].view(like.dtype).reshape(ref.shape)
            assert_close(got, ref, f"ISA {isa or 'default'} shape {shape} output {j}")


@pytest.mark.slow
def test_unknown_isa_value_still_correct(tmp_path):
    # An unrecognised cap must not break the op (falls back to something valid).
    res = run_worker(tmp_path, 2, "no-such-isa")
    shape = SHAPES[1]
    ops = operands(shape)
    refs = conv_tbc_backward_ref(ops[0], ops[1], ops[2], shape[5])
    for j, (ref, like) in enumerate(zip(refs, (ops[1], ops[2], ops[3]))):
        assert_close(res[f"s1_{j}"].view(like.dtype).reshape(ref.shape), ref)


def test_deterministic_in_python_threads():
    # Concurrent calls from several Python threads give the single-call bits,
    # each thread its own operands of one shape: the bindings reuse the host
    # tensors of a shape from call to call, so a set shared across threads
    # would hand one thread's arrays to another's call.
    import threading
    shape = SHAPES[4]
    first = operands(shape)
    sets = [first] + [tuple(a * (i + 2) for a in first) for i in range(3)]
    wants = [[a.tobytes() for a in convtbc_py.conv_tbc_backward(*ops, shape[5])] for ops in sets]
    assert len({w[0] for w in wants}) == len(wants)  # the sets differ in what they give
    errors = []

    def work(index):
        try:
            for _ in range(40):
                got = convtbc_py.conv_tbc_backward(*sets[index], shape[5])
                if [a.tobytes() for a in got] != wants[index]:
                    errors.append(f"thread {index} differs")
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    ths = [threading.Thread(target=work, args=(i,)) for i in range(len(sets))]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert not errors, errors
