"""Parity with torch.ops.aten.conv_tbc_backward (CANN's own golden
reference), float32, on assorted shapes and CANN system-test rows with small
flops; also checks this suite's float64 reference against torch in float64.
"""

import numpy as np
import pytest

import convtbc_py
from reference import conv_tbc_backward_ref, conv_tbc_backward_ref_loops
from test_numerics import st_rows

torch = pytest.importorskip("torch")

SHAPES = [
    # T, B, C_in, K, C_out, pad
    (5, 1, 2, 1, 2, 0),
    (7, 3, 5, 3, 4, 1),
    (7, 3, 5, 3, 4, 2),
    (4, 2, 3, 6, 2, 3),
    (33, 5, 17, 4, 19, 1),
    (16, 8, 64, 2, 48, 0),
    (1, 4, 9, 1, 3, 0),
    (2, 1, 3, 5, 2, 2),
    (5, 2, 3, 0, 4, 1),
    (0, 2, 3, 1, 4, 1),
]


def torch_grads(go, x, w, bias, pad):
    t = [torch.from_numpy(np.ascontiguousarray(a)) for a in (go, x, w, bias)]
    return [r.numpy() for r in torch.ops.aten.conv_tbc_backward(*t, pad)]


def operands(rng, T, B, C_in, K, C_out, pad, dt=np.float32):
    T_out = T + 2 * pad + 1 - K
    mk = lambda s: rng.uniform(-1, 1, size=s).astype(dt)  # noqa: E731
    return mk((T_out, B, C_out)), mk((T, B, C_in)), mk((K, C_in, C_out)), mk((C_out,))


def compare(ours, theirs, name):
    for a, b, n in zip(ours, theirs, ("gradInput", "gradWeight", "gradBias")):
        assert a.shape == b.shape, (name, n, a.shape, b.shape)
        if a.size == 0:
            continue
        scale = max(np.max(np.abs(b)), 1e-30)
        err = np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))) / scale
        assert err <= 1e-4, f"{name} {n}: {err:.2e} from torch"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_parity(shape, rng):
    ops = operands(rng, *shape)
    compare(convtbc_py.conv_tbc_backward(*ops, shape[5]), torch_grads(*ops, shape[5]), str(shape))


@pytest.mark.parametrize("row", st_rows(), ids=lambda r: "x".join(
    r[k] for k in ("T", "B", "C_in", "K", "C_out")))
def test_parity_st_shapes(row, rng):
    shape = tuple(int(row[k]) for k in ("T", "B", "C_in", "K", "C_out", "pad"))
    ops = operands(rng, *shape)
    compare(convtbc_py.conv_tbc_backward(*ops, shape[5]), torch_grads(*ops, shape[5]), str(shape))


@pytest.mark.parametrize("shape", SHAPES[:9], ids=lambda s: "x".join(map(str, s)))
def test_reference_matches_torch_float64(shape, rng):
    # The suite's own reference, checked against torch and the scalar loops.
    ops = operands(rng, *shape, dt=np.float64)
    ref = conv_tbc_backward_ref(*ops[:3], shape[5])
    th = torch_grads(*ops, shape[5])
    for a, b in zip(ref, th):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    if np.prod(shape[:5]) <= 2000:
        for a, b in zip(ref, conv_tbc_backward_ref_loops(*ops[:3], shape[5])):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
