"""cubeMathType numerics with FLOAT operands: 0 keeps float32; 1 and 3 round
the operands (self, input, weight) to HF32 (11 explicit mantissa bits,
round-to-nearest-even) before the products; 2 rounds them to float16.
FLOAT16/BFLOAT16 operands are never rounded, gradBias never.

Inputs are built so the rounding is observable and the reference of the
rounded operands is exact (or nearly), see the `design_*` helpers.
"""

import numpy as np
import pytest

import convtbc_py
from rawapi import Tensor, phase1, phase2, tensor_from_array
from reference import (BF16, F16, F32, assert_close, conv_tbc_backward_ref,
                       conv_tbc_backward_ref_cube, rel_error, round_fp16, round_hf32)

SHAPE = dict(T=6, B=4, C_in=5, K=3, C_out=6)
PAD = 1
MODES = [0, 1, 2, 3]
ROUNDING_CLASS = {0: "none", 1: "hf32", 2: "fp16", 3: "hf32"}


def shapes(T, B, C_in, K, C_out, pad=PAD):
    T_out = T + 2 * pad + 1 - K
    return (T_out, B, C_out), (T, B, C_in), (K, C_in, C_out)


def design_exact(rng, shape, low_bits=True):
    """±(b + L): b a multiple of 1/16 in [1, 4), L = j * 2^-20 (j in 1..15),
    below half an HF32 ulp, so HF32 and float16 rounding both give ±b
    exactly. Sums of products of the rounded values are exact in float32."""
    b = rng.integers(16, 64, size=shape) / 16.0
    s = rng.choice([-1.0, 1.0], size=shape)
    L = rng.integers(1, 16, size=shape) * 2.0 ** -20 if low_bits else 0.0
    v = (s * (b + L)).astype(np.float32)
    assert np.array_equal(v.astype(np.float64), s * (b + L))  # representable
    return v, (s * b)


def design_separating(rng, shape):
    """b + 2^-11 + L with b a multiple of 1/16 in [1, 2), L = j * 2^-16
    (j in 1..7): HF32 gives b + 2^-11, float16 gives b + 2^-10, so the
    three classes (none, hf32, fp16) differ with a consistent sign."""
    b = rng.integers(16, 32, size=shape) / 16.0
    L = rng.integers(1, 8, size=shape) * 2.0 ** -16
    v = (b + 2.0 ** -11 + L).astype(np.float32)
    assert np.array_equal(round_hf32(v).astype(np.float64), b + 2.0 ** -11)
    assert np.array_equal(round_fp16(v).astype(np.float64), b + 2.0 ** -10)
    return v


def design_ties(rng, shape, fmt):
    """Exact ties: HF32 -> 1 + i*2^-11 + 2^-12; float16 -> 1 + i*2^-10 + 2^-11.
    Round-to-nearest-even sends odd i up and even i down."""
    if fmt == "hf32":
        i = rng.integers(0, 2048, size=shape)
        v = 1 + i * 2.0 ** -11 + 2.0 ** -12
    else:
        i = rng.integers(0, 1024, size=shape)
        v = 1 + i * 2.0 ** -10 + 2.0 ** -11
    return v.astype(np.float32)


def round_half_up(v, fmt):
    """Round-half-away-from-zero (the wrong tie rule), for separation."""
    ulp = 2.0 ** -11 if fmt == "hf32" else 2.0 ** -10
    v64 = v.astype(np.float64)  # all in [1, 2)
    return (np.floor(v64 / ulp + 0.5) * ulp).astype(np.float32)


def call(go, x, w, bias, mode, pad=PAD):
    return convtbc_py.conv_tbc_backward(go, x, w, bias, pad, cube_math_type=mode)


def test_emulation_sanity():
    # The emulation itself (independent of the library): ties to even.
    v = np.array([1 + 2.0 ** -12, 1 + 3 * 2.0 ** -12, 1 + 2.0 ** -11, 2 - 2.0 ** -13,
                  -(1 + 3 * 2.0 ** -12)], np.float32)
    np.testing.assert_array_equal(round_hf32(v), np.array(
        [1, 1 + 2.0 ** -10, 1 + 2.0 ** -11, 2, -(1 + 2.0 ** -10)], np.float32))
    # HF32 keeps exactly 11 explicit bits: every float16 value is an HF32 value
    h = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float32)
    np.testing.assert_array_equal(round_hf32(h), h)


@pytest.mark.parametrize("mode", MODES)
def test_exact_design(mode, rng):
    sg, sx, sw = shapes(**SHAPE)
    go, go_b = design_exact(rng, sg)
    x, x_b = design_exact(rng, sx)
    w, w_b = design_exact(rng, sw)
    bias = np.ones(SHAPE["C_out"], np.float32)
    gi, gw, gb = call(go, x, w, bias, mode)
    rounded = conv_tbc_backward_ref(go_b, x_b, w_b, PAD)
    plain = conv_tbc_backward_ref(go, x, w, PAD)
    for out, r, p, name in zip((gi, gw), rounded, plain, ("gradInput", "gradWeight")):
        assert out.dtype == np.float32
        if mode == 0:
            assert_close(out, p, name, bound=2e-6)
            assert not np.array_equal(out.astype(np.float64), r), f"{name}: mode 0 rounded the operands"
        else:
            # products and sums of the rounded operands are exact in float32
            np.testing.assert_array_equal(out.astype(np.float64), r, err_msg=name)
    # gradBias: never rounded (separation is checked in test_separating_design)
    assert_close(gb, go.astype(np.float64).sum(axis=(0, 1)), "gradBias", bound=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_separating_design(mode, rng):
    sg, sx, sw = shapes(**SHAPE)
    go, x, w = design_separating(rng, sg), design_separating(rng, sx), design_separating(rng, sw)
    bias = np.zeros(SHAPE["C_out"], np.float32)
    res = call(go, x, w, bias, mode)
    refs = {c: conv_tbc_backward_ref_cube(go, x, w, PAD, m) for c, m in
            (("none", 0), ("hf32", 1), ("fp16", 2))}
    mine = ROUNDING_CLASS[mode]
    for i, name in enumerate(("gradInput", "gradWeight")):
        err = rel_error(res[i], refs[mine][i])
        assert err <= 3e-6, f"mode {mode} {name}: {err:.2e} from the {mine} reference"
        for other in refs:
            if other != mine:
                sep = rel_error(res[i], refs[other][i])
                assert sep >= 2e-5, (f"mode {mode} {name}: only {sep:.2e} from the {other} "
                                     f"reference (rounding not observed)")
    # gradBias: the plain float32 sum whatever the mode
    assert_close(res[2], go.astype(np.float64).sum(axis=(0, 1)), "gradBias", bound=5e-6)
    assert rel_error(res[2], round_hf32(go).astype(np.float64).sum(axis=(0, 1))) >= 1e-5


@pytest.mark.parametrize("mode,fmt", [(1, "hf32"), (3, "hf32"), (2, "fp16")])
def test_ties_to_even(mode, fmt, rng):
    sg, sx, sw = shapes(**SHAPE)
    go, x, w = (design_ties(rng, s, fmt) for s in (sg, sx, sw))
    res = call(go, x, w, np.zeros(SHAPE["C_out"], np.float32), mode)
    rne = conv_tbc_backward_ref_cube(go, x, w, PAD, mode)
    up = conv_tbc_backward_ref(round_half_up(go, fmt), round_half_up(x, fmt),
                               round_half_up(w, fmt), PAD)
    trunc_fn = {"hf32": lambda a: (np.floor(a.astype(np.float64) * 2 ** 11) / 2 ** 11),
                "fp16": lambda a: (np.floor(a.astype(np.float64) * 2 ** 10) / 2 ** 10)}[fmt]
    trunc = conv_tbc_backward_ref(trunc_fn(go), trunc_fn(x), trunc_fn(w), PAD)
    for i, name in enumerate(("gradInput", "gradWeight")):
        assert rel_error(res[i], rne[i]) <= 3e-6, name
        assert rel_error(res[i], up[i]) >= 2e-5, f"{name}: ties rounded away from zero"
        assert rel_error(res[i], trunc[i]) >= 2e-5, f"{name}: operands truncated"


@pytest.mark.parametrize("mode", [1, 2, 3])
@pytest.mark.parametrize("which", ["self", "input", "weight"])
def test_each_operand_rounded(which, mode, rng):
    # Only `which` carries low bits; the result must be the exact sum over
    # the rounded operand, so each operand is seen to be rounded.
    sg, sx, sw = shapes(**SHAPE)
    ops = {}
    for n, s in (("self", sg), ("input", sx), ("weight", sw)):
        v, b = design_exact(rng, s, low_bits=(n == which))
        ops[n] = (v, b)
    res = call(ops["self"][0], ops["input"][0], ops["weight"][0],
               np.zeros(SHAPE["C_out"], np.float32), mode)
    rounded = conv_tbc_backward_ref(ops["self"][1], ops["input"][1], ops["weight"][1], PAD)
    affected = {"self": (0, 1), "input": (1,), "weight": (0,)}[which]
    for i in affected:
        np.testing.assert_array_equal(res[i].astype(np.float64), rounded[i])


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_float_self_with_f16_operands_raw(mode, rng):
    # Mixed operands: FLOAT self is rounded, FLOAT16 input/weight are not;
    # FLOAT outputs (raw API) so the rounding is visible.
    sg, sx, sw = shapes(**SHAPE)
    go = design_separating(rng, sg)
    x = (rng.integers(-32, 32, size=sx) / 16.0).astype(np.float16)
    w = (rng.integers(-32, 32, size=sw) / 16.0).astype(np.float16)
    outs = [Tensor(np.zeros(int(np.prod(s)), np.float32), s) for s in (sx, sw, (SHAPE["C_out"],))]
    p1 = phase1(tensor_from_array(go), tensor_from_array(x), tensor_from_array(w),
                tensor_from_array(np.zeros(SHAPE["C_out"], np.float32)), PAD, mode, *outs)
    assert p1.status == 0, p1.message
    assert phase2(p1) == 0
    rgo = round_hf32(go) if mode in (1, 3) else round_fp16(go)
    expect = conv_tbc_backward_ref(rgo, x, w, PAD)
    plain = conv_tbc_backward_ref(go, x, w, PAD)
    for i in (0, 1):
        assert rel_error(outs[i].view(), expect[i]) <= 3e-6
        assert rel_error(outs[i].view(), plain[i]) >= 1e-5


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_bf16_not_rounded_to_fp16(mode, rng):
    # bfloat16 values beyond float16's range stay finite in every mode.
    sg, sx, sw = shapes(**SHAPE)
    go = (rng.uniform(1, 2, size=sg) * 2.0 ** 17).astype(BF16)
    x = rng.uniform(1, 2, size=sx).astype(BF16)
    w = (rng.uniform(1, 2, size=sw) * 2.0 ** -20).astype(BF16)  # float16 would flush these
    gi, gw, gb = call(go, x, w, np.zeros(SHAPE["C_out"], BF16), mode)
    ref = conv_tbc_backward_ref(go, x, w, PAD)
    for out, r, name in zip((gi, gw, gb), ref, ("gradInput", "gradWeight", "gradBias")):
        assert np.all(np.isfinite(out.astype(np.float64))), name
        assert_close(out, r, name)


@pytest.mark.parametrize("mode", [1, 3])
def test_f16_operands_unchanged(mode, rng):
    # float16 values are HF32 values; results equal the plain reference
    # within the float16 output bound, and with FLOAT outputs tightly.
    sg, sx, sw = shapes(**SHAPE)
    go, x, w = (rng.uniform(-1, 1, size=s).astype(np.float16) for s in (sg, sx, sw))
    outs = [Tensor(np.zeros(int(np.prod(s)), np.float32), s) for s in (sx, sw, (SHAPE["C_out"],))]
    p1 = phase1(tensor_from_array(go), tensor_from_array(x), tensor_from_array(w),
                tensor_from_array(np.zeros(SHAPE["C_out"], np.float16)), PAD, mode, *outs)
    assert p1.status == 0, p1.message
    assert phase2(p1) == 0
    for t, r in zip(outs, conv_tbc_backward_ref(go, x, w, PAD)):
        assert rel_error(t.view(), r) <= 3e-6
