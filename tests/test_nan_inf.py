"""NaN and Inf propagate to exactly the output elements whose sums contain
them (float64 reference with IEEE semantics), in every dtype and
cubeMathType; float16 outputs overflow to Inf.

Positions in `self` are chosen so that every term meets a real input row
(never zero padding), where the formula and implementations that skip the
padding agree.
"""

import numpy as np
import pytest

import convtbc_py
from reference import BF16, F16, F32, REL_BOUND, conv_tbc_backward_ref, conv_tbc_backward_ref_cube

T, B, C_IN, K, C_OUT = 6, 2, 3, 3, 4


def base(rng, pad, dt):
    T_out = T + 2 * pad + 1 - K
    mk = lambda s: rng.uniform(0.5, 1.0, size=s).astype(np.float32).astype(dt)  # noqa: E731
    return mk((T_out, B, C_OUT)), mk((T, B, C_IN)), mk((K, C_IN, C_OUT)), mk((C_OUT,))


def check_special(out, ref, name):
    o = out.astype(np.float64)
    for what, f in (("NaN", np.isnan), ("+Inf", lambda a: np.isposinf(a)),
                    ("-Inf", lambda a: np.isneginf(a))):
        mo, mr = f(o), f(ref)
        assert np.array_equal(mo, mr), (
            f"{name}: {what} at {np.argwhere(mo).tolist()}, expected at {np.argwhere(mr).tolist()}")
    fin = np.isfinite(ref)
    if fin.any():
        scale = np.max(np.abs(ref[fin]))
        err = np.max(np.abs(o[fin] - ref[fin])) / scale
        assert err <= REL_BOUND[out.dtype], f"{name}: finite part rel err {err}"


CASES = {
    "self_nan": [("self", (2, 1, 3), np.nan)],
    "self_inf": [("self", (3, 0, 1), np.inf)],
    "input_inf": [("input", (4, 1, 2), np.inf)],
    "input_nan": [("input", (0, 0, 0), np.nan)],
    "weight_neg_inf": [("weight", (1, 2, 0), -np.inf)],
    "weight_inf_minus_inf": [("weight", (0, 1, 2), np.inf), ("weight", (2, 1, 3), -np.inf)],
    "self_inf_input_neg_inf": [("self", (2, 0, 0), np.inf), ("input", (1, 0, 1), -np.inf)],
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("pad", [0, 1])
@pytest.mark.parametrize("dt,mode", [(F32, 0), (F32, 1), (F32, 2), (F16, 0), (BF16, 3)],
                         ids=["f32-0", "f32-1", "f32-2", "f16-0", "bf16-3"])
def test_propagation(case, pad, dt, mode, rng):
    go, x, w, bias = base(rng, pad, dt)
    arrays = {"self": go, "input": x, "weight": w}
    for which, idx, val in CASES[case]:
        if which == "self":
            t0 = idx[0]
            assert pad <= t0 and t0 + K - 1 - pad < T  # only real rows meet it
        arrays[which][idx] = val
    gi, gw, gb = convtbc_py.conv_tbc_backward(go, x, w, bias, pad, cube_math_type=mode)
    r = conv_tbc_backward_ref_cube(go, x, w, pad, mode)
    check_special(gi, r[0], "gradInput")
    check_special(gw, r[1], "gradWeight")
    check_special(gb, r[2], "gradBias")
    # the case really produced specials somewhere
    assert any(not np.all(np.isfinite(a)) for a in r)


@pytest.mark.parametrize("dt", [F32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("pad", [0, 2])
def test_propagation_tap_channel_pairs(dt, pad, rng):
    # Batch >= 8, c_in >= 128 and 7 output channels: grad_weight puts (tap,
    # channel) pairs on the micro-tile's rows, and input rows where only
    # some taps of a micro-tile reach grad_output are cut out. A special
    # value must still reach exactly the sums that contain it.
    t, b, c_in, k, c_out = 12, 8, 130, 4, 7
    t_out = t + 2 * pad + 1 - k
    mk = lambda s: rng.uniform(0.5, 1.0, size=s).astype(np.float32).astype(dt)  # noqa: E731
    go, x, w, bias = mk((t_out, b, c_out)), mk((t, b, c_in)), mk((k, c_in, c_out)), mk((c_out,))
    go[5, 3, 6] = np.inf      # meets real input rows for every tap
    # first and last input rows: some taps pair them with no grad_output
    # row, a term that does not exist (the reference leaves it out too)
    x[0, 7, 129] = -np.inf
    x[t - 1, 0, 0] = np.nan
    w[3, 64, 2] = np.inf
    gi, gw, gb = convtbc_py.conv_tbc_backward(go, x, w, bias, pad)
    r = conv_tbc_backward_ref(go, x, w, pad)
    check_special(gi, r[0], "gradInput")
    check_special(gw, r[1], "gradWeight")
    check_special(gb, r[2], "gradBias")


def test_float16_output_overflows_to_inf():
    # Sums beyond float16's range round to Inf in a float16 output, while a
    # float32 output of the same problem holds the finite value.
    go = np.full((4, 2, 2), 200.0, np.float16)
    x = np.full((4, 2, 3), 200.0, np.float16)
    w = np.full((1, 3, 2), 1.0, np.float16)
    bias = np.zeros(2, np.float16)
    gi, gw, gb = convtbc_py.conv_tbc_backward(go, x, w, bias, 0)
    ref = conv_tbc_backward_ref(go, x, w, 0)
    assert np.all(ref[1] > 65520)
    assert np.all(np.isposinf(gw.astype(np.float64)))
    np.testing.assert_array_equal(gi.astype(np.float64), ref[0])  # 400: exact
    np.testing.assert_array_equal(gb.astype(np.float64), ref[2])  # 1600: exact
    gw32 = convtbc_py.conv_tbc_backward(go, x, w.astype(np.float32), bias, 0)[1]
    np.testing.assert_array_equal(gw32.astype(np.float64), ref[1])
