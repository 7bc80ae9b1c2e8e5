"""The AMX implementations (gi_c_on_m_amx, gw_c_on_m_amx) forced on the
problems of test_implementations, on the tile unit where the CPU has it
and on its emulation in plain C everywhere (CONVTBC_ISA=amx_emulated, which
the library reads at every plan): numerics against the float64 reference,
NaN/Inf, strided views, and bit-identical results across 1, 2 and 3
threads for each. So the drivers' AMX paths (packing along the reduction,
steps padded with zero pairs, taps reaching only some rows) are tested on
CPUs without AMX too. The kernel itself is held to its contract in
test_ukernel_contract.py (tests/c/amx_contract.c).
"""

import numpy as np
import pytest

import convtbc_py
from conftest import run_python
from convtbc_py.plan import forced_implementations, plan_implementations
from kernels_in_use import KERNEL
from reference import BF16, assert_close, conv_tbc_backward_ref
from test_implementations import PROBLEMS, check_nan_inf, check_views, operands

AMX = ("gi_c_on_m_amx", "gw_c_on_m_amx")
# the tile unit where the library found it (CPU, build and Linux's grant)
ISAS = ["amx_emulated"] + (["amx_bf16"] if KERNEL == "amx_bf16" else [])
# besides PROBLEMS: c_out past one 256-channel block with an odd pair, and
# rows cut for balance (big enough for the tile unit only: the emulation
# takes seconds)
BIG = [(44, 4, 374, 19, 341, 17), (15, 24, 768, 14, 256, 0)]


@pytest.fixture(params=ISAS)
def amx_isa(request, monkeypatch):
    monkeypatch.setenv("CONVTBC_ISA", request.param)
    with forced_implementations(*AMX):
        yield request.param


def problems_for(isa):
    return PROBLEMS + (BIG if isa == "amx_bf16" else [(9, 33, 70, 3, 300, 1)])


def test_forced_numerics(amx_isa, rng):
    for problem in problems_for(amx_isa):
        chosen = plan_implementations(*problem, "bfloat16")
        assert (chosen["gradInput"], chosen["gradWeight"]) == AMX, (problem, chosen)
        go, x, w, bias = operands(rng, problem, BF16)
        gi, gw, gb = convtbc_py.conv_tbc_backward(go, x, w, bias, problem[5])
        r_gi, r_gw, r_gb = conv_tbc_backward_ref(go, x, w, problem[5])
        assert_close(gi, r_gi, "gradInput")
        assert_close(gw, r_gw, "gradWeight")
        assert_close(gb, r_gb, "gradBias")


def test_other_dtypes_fall_back(amx_isa):
    # the tiles take bfloat16 operands only (the compute dtype must keep them)
    for dtype in ("float32", "float16"):
        chosen = plan_implementations(*PROBLEMS[3], dtype)
        assert chosen["gradInput"] not in AMX and chosen["gradWeight"] not in AMX


@pytest.mark.parametrize("kind", ["transposed", "sliced", "reversed"])
def test_forced_views(amx_isa, kind, rng):
    check_views("bfloat16", kind, rng)


@pytest.mark.parametrize("pad", [0, 2])
@pytest.mark.parametrize("b", [8, 7])
def test_forced_nan_inf(amx_isa, b, pad):
    check_nan_inf(b, pad, "bfloat16")


WORKER = r"""
import sys, numpy as np
import convtbc_py
from convtbc_py.plan import force_implementations
from test_amx import AMX, problems_for
from test_implementations import operands
from reference import BF16
force_implementations(list(AMX))
out = {}
for i, problem in enumerate(problems_for(sys.argv[2])):
    ops = operands(np.random.default_rng(i), problem, BF16)
    for j, a in enumerate(convtbc_py.conv_tbc_backward(*ops, problem[5])):
        out[f"{i}_{j}"] = np.ascontiguousarray(a).view(np.uint8)
np.savez(sys.argv[1], **out)
"""


@pytest.mark.parametrize("isa", ISAS)
def test_thread_counts_bit_identical(isa, tmp_path):
    results = {}
    for threads in (1, 2, 3):
        path = tmp_path / f"out_{threads}.npz"
        run_python(f"import sys; sys.argv = ['w', {str(path)!r}, {isa!r}]\n" + WORKER,
                   env_extra={"OMP_NUM_THREADS": str(threads), "CONVTBC_ISA": isa}, timeout=300)
        with np.load(path) as z:
            results[threads] = {k: z[k].copy() for k in z.files}
    assert len(results[1]) == 3 * len(problems_for(isa))
    for threads in (2, 3):
        for key, value in results[1].items():
            assert results[threads][key].tobytes() == value.tobytes(), (key, threads)


def test_plans_take_the_tiles_only_where_they_run(monkeypatch):
    # A large bfloat16 problem goes to the tile unit where the library
    # found it, never to the emulation unforced (it is for tests), and
    # CONVTBC_ISA=avx512_bf16 caps it away.
    problem = (44, 4, 374, 19, 340, 17, "bfloat16")
    chosen = plan_implementations(*problem)
    assert ((chosen["gradInput"], chosen["gradWeight"]) == AMX) == (KERNEL == "amx_bf16")
    for cap in ("amx_emulated", "avx512_bf16"):
        monkeypatch.setenv("CONVTBC_ISA", cap)
        chosen = plan_implementations(*problem)
        assert chosen["gradInput"] not in AMX and chosen["gradWeight"] not in AMX, cap
