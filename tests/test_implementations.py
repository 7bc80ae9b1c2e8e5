"""Every implementation of every gradient, forced in turn
(convtbcForceImplementations) on the same problems, against the float64 reference:
numerics (bounds of test_numerics), NaN/Inf propagation, strided views, and
bit-identical results across 1, 2 and 3 threads. So no implementation is
tested only when some shape happens to reach it.

Which implementation a forced name yields is checked against the
documented rules (`applies` below): a name is honoured where it applies,
and otherwise the plan falls back to its own choice.
"""

import os

import numpy as np
import pytest

import convtbc_py
from conftest import run_python
from convtbc_py.info import runtime_info
from convtbc_py.plan import force_implementations, forced_implementations, plan_implementations
from reference import BF16, F16, F32, assert_close, conv_tbc_backward_ref, grad_weight_without_padding
from test_nan_inf import check_special
from test_numerics import make_view

# VDPBF16PS implementations run where the CPU has it (elsewhere the kernel
# is checked through SIMDe in test_ukernel_contract.py, and forcing them
# falls back to the plan's own choice). The *_narrow ones run their base on
# the kernel's narrow tile (16 columns), where the kernel has one
# (AVX-512); elsewhere forcing them falls back. The *_amx ones run on AMX
# tiles, or their emulation (test_amx.py runs them so on every CPU).
from kernels_in_use import HAS_AMX, HAS_NARROW_TILE, HAS_VDPBF16PS, KERNEL, PORTABLE  # noqa: E402

GRAD_INPUT = ["gi_merged_in_place", "gi_merged", "gi_in_place", "gi_window", "gi_c_on_m", "gi_c_on_m_bf16",
              "gi_dot", "gi_dot_steps", "gi_dot_bf16", "gi_dot_bf16_steps", "gi_dot_f16",
              "gi_merged_in_place_narrow", "gi_merged_narrow", "gi_in_place_narrow", "gi_window_narrow",
              "gi_c_on_m_amx", "gi_reference"]
GRAD_WEIGHT = ["gw_pairs", "gw_c_on_m", "gw_gemv", "gw_o_on_m", "gw_c_on_m_bf16", "gw_o_on_m_bf16",
               "gw_c_on_m_narrow", "gw_o_on_m_narrow", "gw_c_on_m_bf16_narrow", "gw_o_on_m_bf16_narrow",
               "gw_reference", "gw_pairs", "gw_c_on_m", "gw_c_on_m_amx", "gw_o_on_m", "gw_gemv",
               "gw_o_on_m_narrow"]
# gb_in_gw where grad_weight's tiles carry the sums (gw_c_on_m and its
# narrow version, gw_gemv with c_in 1), gb_rows beside gw_c_on_m's and
# gw_gemv's second entries
GRAD_BIAS = ["gb_rows" if i in (12, 15) else "gb_in_gw" for i in range(len(GRAD_WEIGHT))]
# forced together, one of each gradient per run (some grad_weight ones
# twice, so that both lists are walked in one pass)
FORCED = [f"{gi},{gw},{gb}" for gi, gw, gb in zip(GRAD_INPUT, GRAD_WEIGHT, GRAD_BIAS)]

# T, B, C_in, K, C_out, pad: padding and partial taps, K > T, c_out 1 (the
# GEMV), a batch of 8+ with few channels (pairs), c_in past one 256-wide
# block, enough work for a parallel run, the smallest problem, and few input
# channels over many (t, b) rows (several gi_c_on_m tiles, taps that reach
# only some rows of a 32-row strip), one input channel (a GEMV along
# c_out), and fewer (t, b) rows than the dot kernel's four, every tap
# reaching grad_output from a fourth step (gi_dot's group runs past the
# last row), with more channels than a dot tile takes; c_out wider than
# the 64 channels grad_output is read in place for on gw_o_on_m's mr side;
# c_in wide enough that gw_o_on_m's tiles are narrowed to hold every tap;
# more steps than a tile along a batch entry's steps takes.
PROBLEMS = [
    (7, 3, 5, 3, 4, 2),
    (3, 2, 9, 6, 5, 4),
    (20, 9, 37, 4, 1, 1),
    (13, 10, 130, 5, 7, 2),
    (5, 17, 70, 2, 33, 0),
    (24, 8, 300, 3, 20, 1),
    (1, 1, 1, 1, 1, 0),
    (40, 9, 6, 5, 20, 3),
    (30, 5, 1, 4, 40, 2),
    (3, 1, 40, 3, 20, 4),
    # one input step: each tap reads its own rows, many row blocks of them
    (1, 600, 14, 7, 24, 7),
    (2, 40, 5, 3, 70, 1),
    (12, 24, 700, 10, 5, 0),
    # a few entries over more steps than one gi_dot_steps tile takes (64):
    # a short last tile, its groups shifted back
    (70, 3, 3, 3, 20, 1),
    # few input channels, c_out wide enough that gb_in_gw cuts grad_weight's
    # one c_out block in two for its sums
    (40, 6, 3, 4, 300, 2),
]
DTYPES = {"float32": F32, "float16": F16, "bfloat16": BF16}


def applies(name, problem, dtype):
    """The documented applicability rules (contiguous operands)."""
    t, b, _, k, c_out, pad = problem
    if name.endswith("_steps"):
        # along a batch entry's steps: 4 steps or more (the dot kernel's
        # rows), taps that share them, more than one entry, and at most a
        # quarter of the steps within K - 1 - pad of either end
        steps = t >= 4 and k >= 2 and b >= 2 and 2 * max(0, k - 1 - pad) * 4 <= t
        return steps and applies(name[:-len("_steps")], problem, dtype)
    if name.endswith("_narrow"):
        return HAS_NARROW_TILE and applies(name[:-len("_narrow")], problem, dtype)
    if name.endswith("in_place"):
        return dtype == "float32"  # grad_input float32 with evenly spaced rows
    if name.endswith("_bf16"):
        return dtype == "bfloat16" and HAS_VDPBF16PS
    if name.endswith("_amx"):
        return dtype == "bfloat16" and HAS_AMX
    if name == "gi_dot":
        return dtype == "float32"  # float32 grad_output and weight, read along o
    if name == "gi_dot_f16":
        return dtype == "float16"  # (and a tile's float32 copies within the budget)
    if name == "gw_gemv":
        return c_out == 1 or problem[2] == 1
    if name == "gw_pairs":
        return c_out >= 1
    return True


def applies_grad_bias(name, grad_weight, problem):
    """gb_in_gw: where the plan's grad_weight tiles read grad_output as the
    columns of their GEMM (c_in on the tile's rows)."""
    if name == "gb_in_gw":
        c_out = problem[4]
        return grad_weight in ("gw_c_on_m", "gw_c_on_m_narrow") or (grad_weight == "gw_gemv" and c_out != 1)
    return True


@pytest.fixture
def forced(request):
    names = request.param.split(",")
    with forced_implementations(*names):
        yield names


def operands(rng, problem, dt):
    t, b, c_in, k, c_out, pad = problem
    t_out = t + 2 * pad + 1 - k
    mk = lambda s: rng.uniform(-1, 1, size=s).astype(np.float32).astype(dt)  # noqa: E731
    return mk((t_out, b, c_out)), mk((t, b, c_in)), mk((k, c_in, c_out)), mk((c_out,))


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: "x".join(map(str, p)))
@pytest.mark.parametrize("forced", FORCED, indirect=True)
def test_forced_numerics(forced, problem, dtype, rng):
    chosen = plan_implementations(*problem, dtype)
    for name, gradient in zip(forced, ("gradInput", "gradWeight")):
        assert (chosen[gradient] == name) == applies(name, problem, dtype), (name, chosen)
    bias = forced[2]
    assert (chosen["gradBias"] == bias) == applies_grad_bias(bias, chosen["gradWeight"], problem), (bias, chosen)
    go, x, w, bias = operands(rng, problem, DTYPES[dtype])
    gi, gw, gb = convtbc_py.conv_tbc_backward(go, x, w, bias, problem[5])
    r_gi, r_gw, r_gb = conv_tbc_backward_ref(go, x, w, problem[5])
    assert_close(gi, r_gi, "gradInput")
    assert_close(gw, r_gw, "gradWeight")
    assert_close(gb, r_gb, "gradBias")


@pytest.mark.parametrize("kind", ["transposed", "sliced", "reversed"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("forced", FORCED, indirect=True)
def test_forced_views(forced, dtype, kind, rng):
    check_views(dtype, kind, rng)


def check_views(dtype, kind, rng):
    """The op on strided views of two problems' operands against the
    float64 reference."""
    for problem in (PROBLEMS[0], PROBLEMS[3]):
        go, x, w, bias = (make_view(a, kind, rng) for a in operands(rng, problem, DTYPES[dtype]))
        gi, gw, gb = convtbc_py.conv_tbc_backward(go, x, w, bias, problem[5])
        r_gi, r_gw, r_gb = conv_tbc_backward_ref(go, x, w, problem[5])
        assert_close(gi, r_gi, "gradInput")
        assert_close(gw, r_gw, "gradWeight")
        assert_close(gb, r_gb, "gradBias")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("pad", [0, 2])
@pytest.mark.parametrize("b", [8, 7])
@pytest.mark.parametrize("forced", FORCED, indirect=True)
def test_forced_nan_inf(forced, b, pad, dtype):
    check_nan_inf(b, pad, dtype)


def check_nan_inf(b, pad, dtype):
    # Specials where every term that holds them exists (grad_output at a
    # step that meets real input rows for every tap), and at the first and
    # last input rows, which some taps pair with no grad_output row. An odd
    # batch shifts odd taps by an odd number of rows (the bfloat16 pairs of
    # rows then straddle the rows a tap reaches).
    rng = np.random.default_rng(pad)
    t, c_in, k, c_out = 12, 130, 4, 7
    t_out = t + 2 * pad + 1 - k
    dt = DTYPES[dtype]
    mk = lambda s: rng.uniform(0.5, 1.0, size=s).astype(np.float32).astype(dt)  # noqa: E731
    go, x, w, bias = mk((t_out, b, c_out)), mk((t, b, c_in)), mk((k, c_in, c_out)), mk((c_out,))
    go[5, 3, 6] = np.inf
    # steps that some taps pair with padding (with pad 2: taps 0 and 1 at
    # step 0, tap 3 at step t_out - 2): there no product is formed
    go[0, b - 1, 2] = np.inf
    go[t_out - 2, 0, 4] = np.nan
    x[0, b - 1, 129] = -np.inf
    x[t - 1, 0, 0] = np.nan
    w[3, 64, 2] = np.inf
    w[0, 5, 0] = -np.inf
    gi, gw, gb = convtbc_py.conv_tbc_backward(go, x, w, bias, pad)
    r = conv_tbc_backward_ref(go, x, w, pad)
    check_special(gi, r[0], "gradInput")
    check_special(gw, grad_weight_without_padding(go, x, k, pad), "gradWeight")
    check_special(gb, r[2], "gradBias")


WORKER = r"""
import sys, numpy as np
import convtbc_py
from test_implementations import FORCED, PROBLEMS, DTYPES, operands
out = {}
from convtbc_py.plan import force_implementations
for f in FORCED:
    force_implementations(f.split(","))
    for i, problem in enumerate(PROBLEMS):
        for dtype in ("float32", "float16", "bfloat16"):
            ops = operands(np.random.default_rng(i), problem, DTYPES[dtype])
            for j, a in enumerate(convtbc_py.conv_tbc_backward(*ops, problem[5])):
                out[f"{f}_{i}_{dtype}_{j}"] = np.ascontiguousarray(a).view(np.uint8)
np.savez(sys.argv[1], **out)
"""


def test_forced_thread_counts_bit_identical(tmp_path):
    results = {}
    for threads in (1, 2, 3):
        path = tmp_path / f"out_{threads}.npz"
        run_python(f"import sys; sys.argv = ['w', {str(path)!r}]\n" + WORKER,
                   env_extra={"OMP_NUM_THREADS": str(threads)}, timeout=300)
        with np.load(path) as z:
            results[threads] = {k: z[k].copy() for k in z.files}
    assert len(results[1]) == len(FORCED) * len(PROBLEMS) * 3 * 3
    for threads in (2, 3):
        for key, value in results[1].items():
            assert results[threads][key].tobytes() == value.tobytes(), (key, threads)


def test_unforced_choices_differ_by_shape():
    # The cost model picks different implementations for different shapes
    # (documented choices: few output channels with a batch of 8+ put
    # (tap, channel) pairs on the micro-tile rows; c_out 1 otherwise is a
    # GEMV; a float32 grad_input is written in place). The portable
    # kernel's tile is 8 columns wide: 7 channels nearly fill it, and they
    # stay on its columns.
    chosen = plan_implementations(15, 257, 832, 5, 7, 2, "float32")
    pairs = "gw_c_on_m" if PORTABLE else "gw_pairs"
    assert {g: chosen[g] for g in ("gradInput", "gradWeight", "gradBias")} == {
        "gradInput": "gi_in_place", "gradWeight": pairs, "gradBias": "gb_rows"}
    assert plan_implementations(64, 1, 100, 5, 1, 2, "float32")["gradWeight"] == "gw_gemv"
    # grad_bias summed by grad_weight's tiles as they read grad_output, where
    # two or more tiles share it (1951 output channels), not on one tile (20
    # channels: within one block of every kernel, and too few to cut)
    assert plan_implementations(1039, 3, 1, 2, 1951, 1, "float32")["gradBias"] == "gb_in_gw"
    assert plan_implementations(1039, 3, 1, 2, 20, 1, "float32")["gradBias"] == "gb_rows"
    assert plan_implementations(30, 40, 300, 3, 300, 1, "bfloat16")["gradInput"] != "gi_in_place"
    # Twelve input channels over many rows and a long reduction (taps x
    # c_out): channels on the micro-tile rows, for both gradients; one
    # channel: grad_input as dot products along c_out, grad_weight as GEMVs;
    # the dot products along each batch entry's steps, as a step's rows
    # read 7 MB of grad_output over their taps (more than any L2 holds).
    narrow = plan_implementations(125, 1010, 12, 20, 86, 15, "float32")
    assert (narrow["gradInput"], narrow["gradWeight"]) == ("gi_c_on_m", "gw_c_on_m")
    one = plan_implementations(125, 1010, 1, 20, 86, 15, "float32")
    assert (one["gradInput"], one["gradWeight"]) == ("gi_dot_steps", "gw_gemv")
    # bfloat16 operands go through VDPBF16PS where the CPU has it. (Six
    # channels fill 6 of the portable kernel's 8 columns: they stay there.)
    portable = PORTABLE
    expected = "gi_dot_bf16" if HAS_VDPBF16PS else "gi_window" if portable else "gi_c_on_m"
    assert plan_implementations(124, 93, 6, 128, 932, 26, "bfloat16")["gradInput"] == expected
    # Its pair tile, though, only where it outruns the float32 tile: on
    # AMD's cores, not on Intel's (context.c: half the speed on an Emerald
    # Rapids, whose VDPBF16PS issues once a cycle).
    # Where the CPU has AMX tiles (not their emulation, which is only for
    # tests), they take this problem's 3e8 multiply-adds a gradient.
    # (On the portable kernel's 4 x 8 tile the cost model ranks the plain
    # window GEMM first here, as for the problem above.)
    pair_tile_pays = HAS_VDPBF16PS and runtime_info()["cpu"]["vendor"] != "GenuineIntel"
    expected = "gi_c_on_m_bf16" if pair_tile_pays else "gi_window" if portable else "gi_c_on_m"
    chosen = plan_implementations(195, 16, 22, 14, 221, 26, "bfloat16")
    if KERNEL == "amx_bf16":
        assert (chosen["gradInput"], chosen["gradWeight"]) == ("gi_c_on_m_amx", "gw_c_on_m_amx")
    else:
        assert chosen["gradInput"] == expected


def test_grad_bias_in_grad_weight_groups_every_tap_of_a_short_input():
    # One input step, pad 7, 7 taps: each block of grad_output's rows reads
    # at most 2 taps' input rows, so the window of all 7 fits where L2 holds
    # 1 MiB, and gb_in_gw plans grad_weight's taps as one group: its tiles
    # then read 7 of the 9 steps of grad_output (grad_bias's pass would read
    # 50 MB). Grouped by the budget of a full window (kc + 6b rows), the
    # first group would read 4 steps, too few to pay.
    problem = (1, 3841, 14, 7, 362, 7)
    with forced_implementations("gw_c_on_m"):
        chosen = plan_implementations(*problem, "float32")["gradBias"]
    if runtime_info()["cpu"]["caches"]["l2"] >= 1 << 20:
        assert chosen == "gb_in_gw"
    go, x, w, bias = operands(np.random.default_rng(7), problem, F32)
    with forced_implementations("gw_c_on_m", "gb_in_gw"):
        gi, gw, gb = convtbc_py.conv_tbc_backward(go, x, w, bias, problem[5])
    r_gi, r_gw, r_gb = conv_tbc_backward_ref(go, x, w, problem[5])
    assert_close(gi, r_gi, "gradInput")
    assert_close(gw, r_gw, "gradWeight")
    assert_close(gb, r_gb, "gradBias")


def test_unknown_force_name_is_refused():
    unforced = plan_implementations(13, 10, 130, 5, 7, 2, "float32")
    with forced_implementations("gi_reference"):
        with pytest.raises(convtbc_py.AclnnError, match="gw_nothing"):
            force_implementations(["gw_nothing"])
        # the refused call changed nothing
        assert plan_implementations(13, 10, 130, 5, 7, 2, "float32")["gradInput"] == "gi_reference"
    assert plan_implementations(13, 10, 130, 5, 7, 2, "float32") == unforced


@pytest.mark.parametrize("args", [
    (5, 2, 3, 9, 4, 0, "float32"),   # T_out < 1
    (-1, 2, 3, 1, 4, 0, "float32"),
    (5, 2, 3, 1, 4, 0, "float64"),
])
def test_plan_refuses_bad_problems(args):
    with pytest.raises((convtbc_py.AclnnError, ValueError)):
        plan_implementations(*args)


def test_info_plan_cli_and_environment(convtbc_cli):
    # CONVTBC_FORCE_IMPL forces from the first plan on (unknown names skipped)
    import subprocess
    env = dict(os.environ, CONVTBC_FORCE_IMPL="no_such_impl,gi_reference")
    p = subprocess.run([convtbc_cli, "info", "--plan", "15", "257", "832", "5", "7", "2", "float32"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    pairs = "gw_c_on_m" if PORTABLE else "gw_pairs"  # (as above)
    assert p.stdout.split("\n")[:3] == ["gradInput: gi_reference", f"gradWeight: {pairs}", "gradBias: gb_rows"]
