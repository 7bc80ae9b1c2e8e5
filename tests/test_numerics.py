"""Results of convtbc_py.conv_tbc_backward against the float64 reference:
dtype (per operand) x pad x input view kind, empty problems, and a few rows
of CANN's system-test shape list.

Bounds (relative to the largest reference magnitude, by OUTPUT dtype):
1e-4 float32, 1e-3 float16, 8e-3 bfloat16.
"""

import csv

import numpy as np
import pytest

import convtbc_py
from conftest import DATA_DIR
from reference import BF16, F16, F32, assert_close, conv_tbc_backward_ref

DT = {"f32": F32, "f16": F16, "bf16": BF16}

# (self, input, weight, bias) dtypes: all-same plus mixes per operand.
DTYPE_SETS = [
    ("f32", "f32", "f32", "f32"),
    ("f16", "f16", "f16", "f16"),
    ("bf16", "bf16", "bf16", "bf16"),
    ("f32", "f16", "bf16", "f32"),
    ("f16", "f32", "f32", "bf16"),
    ("bf16", "f32", "f16", "f16"),
    ("f32", "bf16", "f32", "f16"),
    ("f16", "bf16", "f16", "f32"),
]

T, B, C_IN, K, C_OUT = 7, 3, 5, 3, 4


def pads_for(k):
    return sorted({0, 1, max(k - 1, 0), k, k + 3})


def make_view(a, kind, rng):
    """The same values as `a`, laid out as `kind`."""
    if kind == "contiguous":
        return np.ascontiguousarray(a)
    if kind == "transposed":
        # storage order reversed: strides ascend instead of descending
        perm = tuple(reversed(range(a.ndim)))
        return np.ascontiguousarray(a.transpose(perm)).transpose(perm)
    if kind == "sliced":
        big = np.zeros(tuple(2 * d + 1 for d in a.shape), dtype=a.dtype)
        idx = tuple(slice(1, 1 + 2 * d, 2) for d in a.shape)
        big[idx] = a
        return big[idx]
    if kind == "offset":
        big = np.full(tuple(d + 2 for d in a.shape), 99, dtype=a.dtype)
        idx = tuple(slice(2, 2 + d) for d in a.shape)
        big[idx] = a
        return big[idx]
    if kind == "reversed":
        # negative numpy strides ("any strides")
        idx = tuple(slice(None, None, -1) for _ in a.shape)
        return np.ascontiguousarray(a[idx])[idx]
    raise ValueError(kind)


def broadcast_operands(rng, dts, pad):
    """Operands where one dim of each 3-D input is a stride-0 broadcast."""
    T_out = T + 2 * pad + 1 - K
    go = np.broadcast_to(rand(rng, (T_out, B, 1), dts[0]), (T_out, B, C_OUT))
    x = np.broadcast_to(rand(rng, (T, 1, C_IN), dts[1]), (T, B, C_IN))
    w = np.broadcast_to(rand(rng, (1, C_IN, C_OUT), dts[2]), (K, C_IN, C_OUT))
    bias = np.broadcast_to(rand(rng, (1,), dts[3]), (C_OUT,))
    return go, x, w, bias


def rand(rng, shape, dt):
    return rng.uniform(-1, 1, size=shape).astype(np.float32).astype(dt)


def check_result(res, go, x, w, bias, pad):
    gi, gw, gb = res
    assert gi.shape == x.shape and gw.shape == w.shape and gb.shape == bias.shape
    assert gi.dtype == x.dtype, (gi.dtype, x.dtype)
    assert gw.dtype == w.dtype, (gw.dtype, w.dtype)
    assert gb.dtype == bias.dtype, (gb.dtype, bias.dtype)
    r_gi, r_gw, r_gb = conv_tbc_backward_ref(go, x, w, pad)
    assert_close(gi, r_gi, "gradInput")
    assert_close(gw, r_gw, "gradWeight")
    assert_close(gb, r_gb, "gradBias")


@pytest.mark.parametrize("kind", ["contiguous", "transposed", "sliced", "offset", "reversed",
                                  "broadcast"])
@pytest.mark.parametrize("pad", pads_for(K))
@pytest.mark.parametrize("dts", DTYPE_SETS, ids=lambda d: "-".join(d))
def test_matrix(dts, pad, kind, rng):
    dts = [DT[d] for d in dts]
    T_out = T + 2 * pad + 1 - K
    if kind == "broadcast":
        go, x, w, bias = broadcast_operands(rng, dts, pad)
        assert 0 in go.strides and 0 in x.strides and 0 in w.strides
    else:
        go = make_view(rand(rng, (T_out, B, C_OUT), dts[0]), kind, rng)
        x = make_view(rand(rng, (T, B, C_IN), dts[1]), kind, rng)
        w = make_view(rand(rng, (K, C_IN, C_OUT), dts[2]), kind, rng)
        bias = make_view(rand(rng, (C_OUT,), dts[3]), kind, rng)
    before = [a.copy() for a in (go, x, w, bias)]
    res = convtbc_py.conv_tbc_backward(go, x, w, bias, pad)
    check_result(res, go, x, w, bias, pad)
    for a, b in zip((go, x, w, bias), before):  # inputs untouched
        assert np.array_equal(a, b)


@pytest.mark.parametrize("shape", [
    # T, B, C_in, K, C_out, pad
    (1, 1, 1, 1, 1, 0),
    (1, 1, 1, 1, 1, 2),
    (3, 2, 1, 4, 1, 2),      # K > T
    (2, 1, 3, 5, 2, 2),      # T_out = 1
    (2, 1, 3, 5, 2, 3),
    (33, 5, 17, 4, 19, 1),   # odd sizes past typical tile edges
    (16, 8, 64, 2, 48, 0),
    (9, 3, 7, 9, 70, 4),
    (40, 2, 3, 1, 3, 0),
])
@pytest.mark.parametrize("dt", ["f32", "f16", "bf16"])
def test_shapes(shape, dt, rng):
    T_, B_, Ci, K_, Co, pad = shape
    T_out = T_ + 2 * pad + 1 - K_
    dt = DT[dt]
    go, x, w = rand(rng, (T_out, B_, Co), dt), rand(rng, (T_, B_, Ci), dt), rand(rng, (K_, Ci, Co), dt)
    bias = rand(rng, (Co,), dt)
    check_result(convtbc_py.conv_tbc_backward(go, x, w, bias, pad), go, x, w, bias, pad)


@pytest.mark.parametrize("cube", [0, 1, 2, 3])
def test_cube_modes_f16_bf16_within_bounds(cube, rng):
    # FLOAT16/BFLOAT16 operands are unchanged by cubeMathType: every mode
    # matches the unrounded reference within the dtype bound.
    for dt in (F16, BF16):
        go, x, w = rand(rng, (6, 2, 3), dt), rand(rng, (5, 2, 4), dt), rand(rng, (2, 4, 3), dt)
        bias = rand(rng, (3,), dt)
        res = convtbc_py.conv_tbc_backward(go, x, w, bias, 1, cube_math_type=cube)
        check_result(res, go, x, w, bias, 1)


# --------------------------------------------------------------------------
# Empty problems


def test_empty_t0_with_pad(rng):
    # T = 0, pad 2, K = 2: T_out = 3; gradInput is empty, gradWeight's sums
    # meet only padding (0), gradBias is the real sum of self.
    go = (rng.integers(1, 5, size=(3, 2, 3))).astype(np.float32)
    x = np.zeros((0, 2, 4), np.float32)
    w = rand(rng, (2, 4, 3), F32)
    bias = rand(rng, (3,), F32)
    gi, gw, gb = convtbc_py.conv_tbc_backward(go, x, w, bias, 2)
    assert gi.shape == (0, 2, 4)
    assert gw.shape == (2, 4, 3) and np.all(gw == 0)
    assert not np.all(go.sum(axis=(0, 1)) == 3 * 2)  # distinguishable from CANN's B*T_out
    np.testing.assert_array_equal(gb, go.sum(axis=(0, 1)))


def test_empty_k0(rng):
    # K = 0: T_out = T + 2*pad + 1; every gradInput sum is empty -> 0.
    go = rng.integers(1, 5, size=(8, 2, 3)).astype(np.float16)
    x = rand(rng, (5, 2, 4), F16)
    w = np.zeros((0, 4, 3), np.float16)
    bias = rand(rng, (3,), F32)
    gi, gw, gb = convtbc_py.conv_tbc_backward(go, x, w, bias, 1)
    assert gi.shape == (5, 2, 4) and np.all(gi == 0)
    assert gw.shape == (0, 4, 3)
    np.testing.assert_array_equal(gb, go.astype(np.float64).sum(axis=(0, 1)))
    assert gb.dtype == np.float32


def test_empty_cin0(rng):
    go = rng.integers(-3, 6, size=(5, 3, 2)).astype(BF16)
    x = np.zeros((5, 3, 0), BF16)
    w = np.zeros((1, 0, 2), BF16)
    bias = rand(rng, (2,), BF16)
    gi, gw, gb = convtbc_py.conv_tbc_backward(go, x, w, bias, 0)
    assert gi.shape == (5, 3, 0) and gw.shape == (1, 0, 2)
    np.testing.assert_array_equal(gb.astype(np.float64), go.astype(np.float64).sum(axis=(0, 1)))


def test_empty_t0_k0(rng):
    go = np.array([[[2.0, -3.0]]], np.float32)
    gi, gw, gb = convtbc_py.conv_tbc_backward(
        go, np.zeros((0, 1, 2), np.float32), np.zeros((0, 2, 2), np.float32),
        np.ones(2, np.float32), 0)
    assert gi.shape == (0, 1, 2) and gw.shape == (0, 2, 2)
    np.testing.assert_array_equal(gb, [2.0, -3.0])


@pytest.mark.parametrize("which", ["B", "C_out"])
def test_empty_self_refused(which, rng):
    # B = 0 or C_out = 0 makes self empty: 161002 (checked before shapes).
    b, co = (0, 3) if which == "B" else (2, 0)
    go = np.zeros((5, b, co), np.float32)
    x = np.zeros((5, b, 4), np.float32)
    w = np.zeros((1, 4, co), np.float32)
    bias = np.zeros((co,), np.float32)
    with pytest.raises(convtbc_py.AclnnError) as ei:
        convtbc_py.conv_tbc_backward(go, x, w, bias, 0)
    assert ei.value.status == 161002
    assert "self" in ei.value.message


# --------------------------------------------------------------------------
# CANN's system-test shapes (rows with small flops)


def st_rows():
    with open(DATA_DIR / "st_shapes_small.tsv") as f:
        rows = [r for r in csv.reader((line for line in f if not line.startswith("#")),
                                      delimiter="\t")]
    header, rows = rows[0], rows[1:]
    return [dict(zip(header, r)) for r in rows]


@pytest.mark.parametrize("row", st_rows(), ids=lambda r: "x".join(
    r[k] for k in ("T", "B", "C_in", "K", "C_out")) + "-" + r["dtype"])
def test_st_shapes(row, rng):
    T_, B_, Ci, K_, Co, pad = (int(row[k]) for k in ("T", "B", "C_in", "K", "C_out", "pad"))
    dt = {"float32": F32, "float16": F16, "bfloat16": BF16}[row["dtype"]]
    T_out = T_ + 2 * pad + 1 - K_
    go, x, w = rand(rng, (T_out, B_, Co), dt), rand(rng, (T_, B_, Ci), dt), rand(rng, (K_, Ci, Co), dt)
    bias = rand(rng, (Co,), dt)
    check_result(convtbc_py.conv_tbc_backward(go, x, w, bias, pad), go, x, w, bias, pad)
