"""aclnnConvTbc, the forward op, through the raw C API: CANN's unit-test
cases and the per-SoC rows of the spec (conv_tbc_forward.md), the check
order, accuracy against a float64 reference over dtype x pad x view x empty
with each implementation forced in turn, NaN/Inf, determinism across thread
counts, executors, and the tie between the two ops: for random x, w, g,
<g, conv_tbc(x, w)> equals <grad_input, x> and <grad_weight, w> of
aclnnConvTbcBackward.
"""

import hashlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import convtbc_py
from convtbc_py.info import runtime_info
from conftest import TESTS_DIR
from rawapi import ELEM_SIZE, Tensor, ffi, lib, recent_msg, workspace_for
from reference import (BF16, F16, F32, REL_BOUND, conv_tbc_backward_ref, conv_tbc_ref, forward_operand,
                       rel_error)

OK, NULLPTR, INVALID = 0, 161001, 161002
ND, NCL = "ACL_FORMAT_ND", "ACL_FORMAT_NCL"
NP_OF = {"ACL_FLOAT": np.float32, "ACL_FLOAT16": np.float16, "ACL_BF16": BF16}
CODE_OF = {np.dtype(v): k for k, v in NP_OF.items()}
IMPLEMENTATIONS = ("forward_gemm", "forward_gemm_narrow", "forward_gemm_bf16", "forward_gemm_bf16_narrow",
                   "forward_gemm_positions", "forward_dot", "forward_dot_bf16", "forward_gemm_tail",
                   "forward_reference")
# The _bf16 implementations need VDPBF16PS and forward_gemm_narrow an AVX-512
# kernel; elsewhere their kernels are checked through SIMDe
# (test_ukernel_contract.py) and forcing them falls back.
from kernels_in_use import HAS_NARROW_TILE, HAS_VDPBF16PS, PORTABLE  # noqa: E402
# forward_gemm_tail's GEMM tile is 16 columns wide (AVX-512's narrow tile,
# AVX2's tile), 8 on portable C
HEAD_COLUMNS = 8 if PORTABLE else 16


def applies(implementation, dtype, C_out):
    """Whether forcing `implementation` holds for a problem (where it does
    not, the plan takes the cheapest that applies)."""
    if implementation == "forward_dot":
        return C_out <= 16
    if implementation == "forward_dot_bf16":
        return C_out <= 16 and dtype == BF16 and HAS_VDPBF16PS
    if implementation in ("forward_gemm_bf16", "forward_gemm_bf16_narrow"):
        return dtype == BF16 and HAS_VDPBF16PS
    if implementation == "forward_gemm_narrow":
        return HAS_NARROW_TILE
    if implementation == "forward_gemm_tail":
        return dtype == F32 and C_out > HEAD_COLUMNS and 1 <= C_out % HEAD_COLUMNS <= 4
    return True


@pytest.fixture
def force():
    """force(name): the forward op uses that implementation (where it
    applies) in the plans of this test; the forcing is lifted after."""
    def apply(name):
        assert lib.convtbcForceImplementations(name.encode()) == OK, recent_msg()
    yield apply
    assert lib.convtbcForceImplementations(b"") == OK


def planned(T, B, C_in, K, C_out, pad, dtype="float32"):
    """The forward implementation phase 1 picks for contiguous tensors."""
    from convtbc_py.plan import plan_implementations
    return plan_implementations(T, B, C_in, K, C_out, pad, dtype)["out (forward)"]


def tensor(shape, code="ACL_FLOAT16", fmt=ND, values=None, fill=0.0):
    """A contiguous tensor of `shape` over host memory (zeros, `fill` or
    `values`)."""
    count = int(np.prod(shape)) if len(shape) else 1
    if code in NP_OF:
        storage = np.full(count, fill, dtype=NP_OF[code]) if values is None else \
            np.ascontiguousarray(values, dtype=NP_OF[code]).reshape(-1).copy()
    else:
        storage = np.zeros(count * ELEM_SIZE.get(code, 8), dtype=np.uint8)
    return Tensor(storage, shape, dtype_code=code, fmt=fmt, storage_dims=(max(count, 1),) if not count else shape)


class Call:
    """One phase-1 call's result, keeping the tensors alive."""

    def __init__(self, status, workspace_size, executor, message, keep):
        self.status, self.workspace_size, self.executor, self.message, self.keep = (
            status, workspace_size, executor, message, keep)


def phase1(x, w, b, pad, out, cube=1, workspace_size_null=False, executor_null=False):
    size = ffi.NULL if workspace_size_null else ffi.new("uint64_t *", 12345)
    executor = ffi.NULL if executor_null else ffi.new("aclOpExecutor **")
    recent_msg()
    status = lib.aclnnConvTbcGetWorkspaceSize(*(ffi.NULL if t is None else t.ptr for t in (x, w, b)), pad,
                                              ffi.NULL if out is None else out.ptr, cube, size, executor)
    return Call(status, None if workspace_size_null else int(size[0]),
                None if executor_null else executor[0], recent_msg() if status else "", (x, w, b, out))


def phase2(call):
    workspace, keep = workspace_for(call.workspace_size)
    status = lib.aclnnConvTbc(workspace, call.workspace_size, call.executor, ffi.NULL)
    del keep
    return status


def status_of(shapes, dtypes=None, fmts=None, pad=1, cube=1, nulls=()):
    """Phase 1's status and message for tensors of the given shapes; FLOAT16
    and ND unless told otherwise."""
    names = ("self", "weight", "bias", "out")
    dtypes = {n: (dtypes or {}).get(n, "ACL_FLOAT16") for n in names}
    fmts = {n: (fmts or {}).get(n, ND) for n in names}
    made = [None if n in nulls else tensor(shapes[i], dtypes[n], fmts[n]) for i, n in enumerate(names)]
    call = phase1(made[0], made[1], made[2], pad, made[3], cube)
    if call.status == OK:
        lib.aclDestroyAclOpExecutor(call.executor)
    return call.status, call.message


# ---------------------------------------------------------------- CANN's UT

# conv_tbc_forward.md, "CANN's unit tests": FLOAT16 self/weight/out, ND,
# cubeMathType 1; (self, weight, bias, bias dtype, out, pad, expected).
UT_CASES = {
    "bias_dim_error": ((16, 16, 8), (3, 8, 16), (1, 1, 16), "ACL_FLOAT16", (16, 16, 16), 1, INVALID),
    "empty_tensor_1": ((0, 0, 0), (0, 0, 0), (0,), "ACL_FLOAT16", (3, 0, 0), 1, INVALID),
    "empty_tensor_2": ((16, 16, 0), (3, 0, 16), (16,), "ACL_FLOAT", (16, 16, 16), 1, OK),
    "empty_tensor_3": ((1, 16, 8), (4, 8, 16), (16,), "ACL_FLOAT", (0, 16, 16), 1, INVALID),
    "empty_tensor_4": ((32, 2, 16), (3, 16, 64), (0,), "ACL_FLOAT", (30, 2, 64), 0, INVALID),
    "empty_tensor_6": ((0, 2, 16), (1, 16, 64), (64,), "ACL_FLOAT", (0, 2, 64), 0, OK),
    "empty_tensor_7": ((32, 2, 0), (3, 16, 64), (64,), "ACL_FLOAT", (30, 2, 64), 0, INVALID),
    "empty_tensor_10": ((32, 2, 16), (0, 16, 64), (64,), "ACL_FLOAT", (30, 2, 64), 0, INVALID),
    "dim_error_channel_1": ((16, 16, 8), (3, 10, 16), (16,), "ACL_FLOAT16", (16, 16, 16), 1, INVALID),
    "dim_error_channel_2": ((16, 16, 8), (3, 8, 16), (8,), "ACL_FLOAT16", (16, 16, 16), 1, INVALID),
}


@pytest.mark.parametrize("name", sorted(UT_CASES))
def test_cann_unit_test_cases(name):
    x, w, b, b_dtype, out, pad, expected = UT_CASES[name]
    status, message = status_of((x, w, b, out), dtypes={"bias": b_dtype}, pad=pad)
    assert status == expected, (name, message)
    if expected != OK:
        assert message.startswith("EZ1001") or "aclnnConvTbcGetWorkspaceSize" in message, message


def test_cann_unit_test_dim_error_rank_4():
    shapes = ((16, 16, 8, 4), (3, 8, 16, 4), (16,), (16, 16, 16, 4))
    fmts = {"self": "ACL_FORMAT_NCHW", "weight": "ACL_FORMAT_NCHW", "out": "ACL_FORMAT_NCHW"}
    status, message = status_of(shapes, fmts=fmts)
    assert status == INVALID and "3-dimensional" in message, message


def test_cann_unit_test_nullptr_error():
    status, message = status_of(((16, 16, 8), (3, 8, 16), (16,), (16, 16, 16)), nulls=("self",))
    assert status == NULLPTR and "self" in message, message


# ---------------------------------------------------------------- the order

SHAPES = ((5, 2, 3), (3, 3, 4), (4,), (5, 2, 4))  # T 5, pad 1, K 3: T_out 5


@pytest.mark.parametrize("missing", ["self", "weight", "bias", "out"])
def test_null_tensors_in_order(missing):
    names = ["self", "weight", "bias", "out"]
    later = tuple(names[names.index(missing):])  # this one and every later one
    status, message = status_of(SHAPES, nulls=later)
    assert status == NULLPTR and f"argument {missing}." in message, message


def test_null_out_parameters_come_first():
    made = [tensor(s) for s in SHAPES]
    call = phase1(None, made[1], made[2], 1, made[3], workspace_size_null=True)
    assert call.status == NULLPTR and "workspaceSize" in call.message
    call = phase1(made[0], made[1], made[2], 1, made[3], executor_null=True)
    assert call.status == NULLPTR and "executor" in call.message


@pytest.mark.parametrize("dtype", ["ACL_DOUBLE", "ACL_INT32", "ACL_INT8", "ACL_HIFLOAT8", "ACL_COMPLEX64",
                                   "ACL_DT_UNDEFINED", "ACL_UINT64", "ACL_BOOL"])
def test_unsupported_dtypes_on_every_tensor(dtype):
    for name in ("self", "bias"):
        status, message = status_of(SHAPES, dtypes={name: dtype})
        assert status == INVALID and f"tensor {name} not implemented" in message, message
    dtypes = {n: dtype for n in ("self", "weight", "out")}
    assert status_of(SHAPES, dtypes=dtypes)[0] == INVALID


def test_mixed_dtypes_are_refused_but_bias_may_differ():
    assert status_of(SHAPES, dtypes={"weight": "ACL_FLOAT"})[1].startswith("EZ1001")
    status, message = status_of(SHAPES, dtypes={"weight": "ACL_FLOAT"})
    assert status == INVALID and "weight's dtype" in message
    status, message = status_of(SHAPES, dtypes={"out": "ACL_BF16"})
    assert status == INVALID and "out's dtype" in message
    for bias in ("ACL_FLOAT", "ACL_BF16", "ACL_FLOAT16"):
        assert status_of(SHAPES, dtypes={"bias": bias})[0] == OK


def test_formats():
    for name in ("self", "weight", "out"):
        status, message = status_of(SHAPES, fmts={name: "ACL_FORMAT_NHWC"})
        assert status == INVALID and f"format of {name}" in message
        assert status_of(SHAPES, fmts={name: NCL})[0] == OK
    # bias's format is not checked on A2 (only on Ascend950)
    assert status_of(SHAPES, fmts={"bias": "ACL_FORMAT_NCHW"})[0] == OK


def test_values_in_cann_order():
    # bias vs C_out, then K, then pad, then the one-sided pad check, then C_in
    assert "bias's dim 0" in status_of(((5, 2, 3), (0, 9, 4), (3,), (5, 2, 4)))[1]
    assert "(K) should be > 0" in status_of(((5, 2, 3), (0, 9, 4), (4,), (5, 2, 4)))[1]
    assert "pad should be >= 0" in status_of(((5, 2, 3), (3, 9, 4), (4,), (1, 2, 4)), pad=-1)[1]
    assert "C_in" in status_of(((5, 2, 3), (3, 9, 4), (4,), (5, 2, 4)))[1]
    status, message = status_of(((5, 2, 3), (3, 3, 4), (4,), (4, 2, 4)))
    assert status == INVALID and "[5, 2, 4]" in message and "out's shape" in message


@pytest.mark.parametrize("T, K, pad", [(2, 4, 1), (1, 3, 1), (3, 6, 2)])
def test_cann_one_sided_pad_check_is_reproduced(T, K, pad):
    """CANN's bug: valid calls with 1 <= T_out <= pad fail (T + pad < K)."""
    T_out = T + 2 * pad - K + 1
    assert 1 <= T_out <= pad
    status, message = status_of(((T, 1, 2), (K, 2, 3), (3,), (T_out, 1, 3)), pad=pad)
    assert status == INVALID and "T + pad - K" in message, message


def test_cube_math_type_range():
    for cube in (-1, 5, 100):
        status, message = status_of(SHAPES, cube=cube)
        assert status == INVALID and "cubeMathType" in message
    for cube in range(5):
        for code in ("ACL_FLOAT", "ACL_FLOAT16", "ACL_BF16"):
            assert status_of(SHAPES, dtypes={n: code for n in ("self", "weight", "out")}, cube=cube)[0] == OK


def test_training_series_rules():
    with convtbc_py.soc_profile("Ascend910A"):
        bf16 = {n: "ACL_BF16" for n in ("self", "weight", "out")}
        status, message = status_of(SHAPES, dtypes=bf16)
        assert status == INVALID and "tensor self not implemented for DT_BF16" in message
        fp32 = {n: "ACL_FLOAT" for n in ("self", "weight", "out")}
        for cube in range(5):
            expected = OK if cube in (1, 2) else INVALID
            assert status_of(SHAPES, dtypes=fp32, cube=cube)[0] == expected, cube
            assert status_of(SHAPES, cube=cube)[0] == OK  # FLOAT16: every mode
        # bias keeps its own list, BFLOAT16 included (sic)
        assert status_of(SHAPES, dtypes={"bias": "ACL_BF16"})[0] == OK


def test_ascend950_checks_out_and_bias_first():
    with convtbc_py.soc_profile("Ascend950"):
        status, message = status_of(SHAPES, fmts={"bias": NCL})
        assert status == INVALID and "format of bias" in message
        # out's rank is checked before self's dtype there
        status, message = status_of(((5, 2, 3), (3, 3, 4), (4,), (5, 8)), dtypes={"self": "ACL_DOUBLE"})
        assert status == INVALID and "out should be 3-dimensional" in message, message
        assert status_of(SHAPES, dtypes={n: "ACL_BF16" for n in ("self", "weight", "out")})[0] == OK
    # elsewhere self's dtype comes first
    status, message = status_of(((5, 2, 3), (3, 3, 4), (4,), (5, 8)), dtypes={"self": "ACL_DOUBLE"})
    assert "tensor self not implemented" in message, message


# ---------------------------------------------------------------- numerics


def run_forward(x, w, b, pad, cube=0, out_dtype=None, views=(), fill=7.0):
    """out of aclnnConvTbc on numpy operands; `views` names tensors passed as
    non-contiguous views (transposed storage)."""
    T, B, C_in = x.shape
    K, _, C_out = w.shape
    T_out = T + 2 * pad + 1 - K
    out_dtype = np.dtype(out_dtype or x.dtype)

    def as_tensor(a, name, code):
        if name in views and a.ndim == 3:
            # storage holds the array with its last two dims swapped
            storage = np.ascontiguousarray(np.swapaxes(a, 1, 2)).reshape(-1)
            d0, d1, d2 = a.shape
            return Tensor(storage, a.shape, (d1 * d2, 1, d1), dtype_code=code, storage_dims=(max(storage.size, 1),))
        if name in views:  # 1-D: every other element of a longer storage
            storage = np.zeros(max(2 * a.size, 1), dtype=a.dtype)
            storage[::2][:a.size] = a
            return Tensor(storage, a.shape, (2,), dtype_code=code, storage_dims=(storage.size,))
        storage = a.reshape(-1).copy() if a.size else np.zeros(1, a.dtype)
        return Tensor(storage, a.shape, dtype_code=code, storage_dims=(storage.size,))

    tx, tw, tb = (as_tensor(a, n, CODE_OF[a.dtype]) for a, n in ((x, "self"), (w, "weight"), (b, "bias")))
    out = as_tensor(np.full((T_out, B, C_out), fill, out_dtype), "out", CODE_OF[out_dtype])
    call = phase1(tx, tw, tb, pad, out, cube)
    assert call.status == OK, call.message
    assert phase2(call) == OK, recent_msg()
    return out.view().copy()


def operands(rng, T, B, C_in, K, C_out, dtype, bias_dtype=None):
    def draw(*shape, dt=dtype):
        return rng.uniform(-1, 1, size=shape).astype(np.float32).astype(dt)
    return draw(T, B, C_in), draw(K, C_in, C_out), draw(C_out, dt=bias_dtype or dtype)


DTYPES = [F32, F16] + ([BF16] if BF16 is not None else [])
SIZES = [(9, 3, 5, 3, 4), (17, 5, 33, 4, 19), (6, 7, 2, 1, 40), (40, 2, 70, 5, 3), (3, 11, 21, 2, 33)]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("pad", [0, 1, 3, 12])
def test_accuracy(implementation, dtype, pad, force):
    force(implementation)
    rng = np.random.default_rng(pad)
    for i, (T, B, C_in, K, C_out) in enumerate(SIZES):
        if T + pad < K:
            continue  # CANN refuses it (one-sided pad check)
        x, w, b = operands(rng, T, B, C_in, K, C_out, dtype)
        assert (planned(T, B, C_in, K, C_out, pad, np.dtype(dtype).name) == implementation) == \
            applies(implementation, dtype, C_out)
        views = (("self", "weight", "bias", "out")[i % 4],)
        got = run_forward(x, w, b, pad, views=views)
        assert got.dtype == dtype
        err = rel_error(got, conv_tbc_ref(x, w, b, pad))
        assert err <= REL_BOUND[dtype], (T, B, C_in, K, C_out, pad, views, err)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("cube", range(5))
def test_cube_math_type_numerics(implementation, cube, force):
    """Each mode rounds the operands as CANN's cube does (HF32 for FLOAT with
    1 and 3, float16 for every dtype with 2) and the result to the compute
    dtype (float16 with 2): checked against a float64 sum of the rounded
    operands, tighter than the rounding itself."""
    force(implementation)
    rng = np.random.default_rng(cube)
    for dtype in DTYPES:
        x, w, b = operands(rng, 11, 3, 40, 3, 9, dtype, bias_dtype=F32)
        got = run_forward(x, w, b, 1, cube=cube)
        want = conv_tbc_ref(forward_operand(x, cube), forward_operand(w, cube), forward_operand(b, cube)
                            if cube == 2 else b, 1)
        # the sum is rounded to float16 under USE_FP16, to the dtype otherwise
        bound = max(REL_BOUND[dtype], 1e-3 if cube == 2 else 0)
        assert rel_error(got, want) <= bound, (dtype, cube, rel_error(got, want))
        if dtype == F32 and cube in (1, 2, 3):
            # and the rounding is visible: not what full float32 gives
            assert rel_error(got, conv_tbc_ref(x, w, b, 1)) > 1e-6


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("dims", [(0, 2, 3, 2, 4, 2), (5, 2, 0, 3, 4, 1), (5, 0, 3, 3, 4, 1), (5, 2, 3, 3, 0, 1),
                                  (4, 1, 2, 2, 3, 9)])
@pytest.mark.parametrize("dtype", [F32] + ([BF16] if BF16 is not None else []), ids=str)
def test_empty_and_all_padding(implementation, dims, dtype, force):
    """With an empty self or weight out is bias (CANN copies it); steps whose
    taps all read padding are bias too."""
    force(implementation)
    T, B, C_in, K, C_out, pad = dims
    rng = np.random.default_rng(1)
    x, w, b = operands(rng, T, B, C_in, K, C_out, dtype)
    got = run_forward(x, w, b, pad)
    want = conv_tbc_ref(x, w, b, pad)
    assert got.shape == want.shape
    assert rel_error(got, want) <= REL_BOUND[dtype]
    if T == 0 or C_in == 0:
        np.testing.assert_array_equal(got, np.broadcast_to(b, got.shape))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("pad", [1, 4])
@pytest.mark.parametrize("dtype", [F32] + ([BF16] if BF16 is not None else []), ids=str)
def test_nan_and_inf_propagate(implementation, pad, dtype, force):
    """As the formula has it in IEEE arithmetic: a tap in the padding is a
    zero times the weight, so an Inf weight makes NaN there too (with pad 4
    and K 3 the first and last steps read only padding). The Inf sits past
    the first 32 input channels, where a vector scan for it has a tail."""
    force(implementation)
    rng = np.random.default_rng(3)
    x, w, b = operands(rng, 8, 2, 37, 3, 5, dtype)
    x[2, 1, 3] = np.nan
    w[0, 35, 4] = np.inf
    got = run_forward(x, w, b, pad)
    want = conv_tbc_ref(x, w, b, pad)
    assert np.isnan(want[0, :, 4]).all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    assert rel_error(got[finite], want[finite]) <= REL_BOUND[dtype]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_weight_rounded_to_inf_reaches_the_padding(implementation, force):
    """The spec: with USE_FP16 the operands are cast to float16 and NaN and
    Inf propagate. A float32 weight of 1e6 is Inf in float16, so the steps
    that meet it through padding (here pad 4, K 3: steps 0 and 1 read only
    padding) are 0 * Inf = NaN in its output channel, and only there."""
    force(implementation)
    rng = np.random.default_rng(6)
    x, w, b = operands(rng, 8, 2, 40, 3, 5, F32)
    w[1, 33, 2] = 1e6
    got = convtbc_py.conv_tbc(x, w, b, 4, cube_math_type=2)
    assert np.isnan(got[0:2, :, 2]).all()
    assert not np.isnan(np.delete(got[0:2], 2, axis=2)).any()
    with_fp32 = convtbc_py.conv_tbc(x, w, b, 4, cube_math_type=0)
    assert not np.isnan(with_fp32).any()


DETERMINISM = """
import hashlib, os, sys
import ml_dtypes
import numpy as np
sys.path.insert(0, {tests!r})
from test_forward_op import operands, run_forward
rng = np.random.default_rng(5)
digest = hashlib.sha256()
for dtype in (np.float32, np.float16, ml_dtypes.bfloat16):
    for C_out in (45, 7):
        x, w, b = operands(rng, 64, 33, 70, 3, C_out, dtype)
        digest.update(run_forward(x, w, b, 2).tobytes())
    # one block of rows against a weight read in place, which a team splits
    for T, B, C_in, K, C_out in ((8, 17, 240, 3, 16), (1, 40, 150, 1, 17)):
        x, w, b = operands(rng, T, B, C_in, K, C_out, dtype)
        digest.update(run_forward(x, w, b, 0).tobytes())
print(digest.hexdigest())
"""


@pytest.mark.slow
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_bits_do_not_depend_on_threads(implementation):
    code = DETERMINISM.format(tests=str(TESTS_DIR))
    digests = set()
    for threads in ("1", "2", "3"):
        env = dict(os.environ, OMP_NUM_THREADS=threads, CONVTBC_FORCE_IMPL=implementation)
        proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=TESTS_DIR, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        digests.add(proc.stdout.strip())
    assert len(digests) == 1


# ---------------------------------------------------------------- the two ops


def test_gradients_are_consistent_with_the_forward_op():
    """<g, conv_tbc(x, w, 0)> is linear in x and in w, so it equals
    <grad_input, x> and <grad_weight, w> from the backward op."""
    rng = np.random.default_rng(11)
    for T, B, C_in, K, C_out, pad in [(13, 4, 9, 3, 7, 1), (30, 3, 20, 5, 11, 4), (7, 2, 3, 1, 5, 0)]:
        x, w, _ = operands(rng, T, B, C_in, K, C_out, F32)
        zero = np.zeros(C_out, np.float32)
        y = run_forward(x, w, zero, pad)
        g = rng.uniform(-1, 1, size=y.shape).astype(np.float32)
        grad_input, grad_weight, _ = convtbc_py.conv_tbc_backward(g, x, w, zero, pad)
        total = np.sum(g.astype(np.float64) * y)
        for gradient, operand in ((grad_input, x), (grad_weight, w)):
            other = np.sum(gradient.astype(np.float64) * operand)
            assert abs(other - total) <= 1e-4 * np.sum(np.abs(g.astype(np.float64) * y)), (other, total)


def test_backward_executor_is_refused_by_the_forward_op():
    x, w, b = (np.ones(s, np.float32) for s in ((5, 1, 2), (1, 2, 2), (2,)))
    tensors = [Tensor(a.reshape(-1).copy(), a.shape, storage_dims=a.shape) for a in (x, x, w, b)]
    outs = [Tensor(np.zeros(a.size, np.float32), a.shape, storage_dims=a.shape) for a in (x, w, b)]
    size = ffi.new("uint64_t *")
    executor = ffi.new("aclOpExecutor **")
    assert lib.aclnnConvTbcBackwardGetWorkspaceSize(*(t.ptr for t in tensors), 0, 0, *(t.ptr for t in outs), size,
                                                    executor) == OK
    workspace, keep = workspace_for(size[0])
    assert lib.aclnnConvTbc(workspace, size[0], executor[0], ffi.NULL) == INVALID
    assert "aclnnConvTbcBackwardGetWorkspaceSize" in recent_msg()
    # refused, not consumed: the right op still runs it
    assert lib.aclnnConvTbcBackward(workspace, size[0], executor[0], ffi.NULL) == OK


def test_repeatable_executor_with_new_addresses():
    """CANN's address slots for this op: inputs self 0, weight 1, bias 2;
    output out 0."""
    rng = np.random.default_rng(2)
    x, w, b = operands(rng, 6, 2, 3, 2, 4, F32)
    tx, tw, tb = (Tensor(a.reshape(-1).copy(), a.shape, storage_dims=a.shape) for a in (x, w, b))
    out = Tensor(np.zeros(7 * 2 * 4, np.float32), (7, 2, 4), storage_dims=(7, 2, 4))
    call = phase1(tx, tw, tb, 1, out, 0)
    assert call.status == OK
    assert lib.aclSetAclOpExecutorRepeatable(call.executor) == OK
    assert phase2(call) == OK
    np.testing.assert_allclose(out.view(), conv_tbc_ref(x, w, b, 1), rtol=1e-5, atol=1e-6)
    x2, w2, b2 = operands(rng, 6, 2, 3, 2, 4, F32)
    keep = [np.ascontiguousarray(a).reshape(-1).copy() for a in (x2, w2, b2)]
    out2 = np.zeros(7 * 2 * 4, np.float32)
    from rawapi import declare_host
    for array in keep + [out2]:
        declare_host(array.ctypes.data, array.nbytes)
    for index, array in enumerate(keep):
        assert lib.aclSetInputTensorAddr(call.executor, index, (tx, tw, tb)[index].ptr,
                                         ffi.cast("void *", array.ctypes.data)) == OK
    assert lib.aclSetOutputTensorAddr(call.executor, 0, out.ptr, ffi.cast("void *", out2.ctypes.data)) == OK
    assert phase2(call) == OK
    np.testing.assert_allclose(out2.reshape(7, 2, 4), conv_tbc_ref(x2, w2, b2, 1), rtol=1e-5, atol=1e-6)
    assert lib.aclDestroyAclOpExecutor(call.executor) == OK


def test_torch_parity():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    for T, B, C_in, K, C_out, pad in [(20, 3, 16, 3, 8, 1), (9, 5, 7, 4, 13, 2)]:
        x, w, b = operands(rng, T, B, C_in, K, C_out, F32)
        want = torch.conv_tbc(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), pad).numpy()
        assert rel_error(run_forward(x, w, b, pad), want) <= REL_BOUND[F32]


def test_sibling_functions_refuse():
    size = ffi.new("uint64_t *")
    executor = ffi.new("aclOpExecutor **")
    status = lib.aclnnConvolutionGetWorkspaceSize(ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, False,
                                                  ffi.NULL, 1, ffi.NULL, 0, size, executor)
    assert status == INVALID and "aclnnConvTbc" in recent_msg()
    assert lib.aclnnConvDepthwise2d(ffi.NULL, 0, ffi.NULL, ffi.NULL) == INVALID


# ---------------------------------------------------------------- numpy API


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("pad", [0, 2])
def test_numpy_conv_tbc(dtype, pad):
    """convtbc_py.conv_tbc: out in input's dtype, views taken as they are,
    bias in its own dtype."""
    rng = np.random.default_rng(21)
    x, w, b = operands(rng, 12, 5, 7, 3, 6, dtype, bias_dtype=F32)
    views = (x, np.asfortranarray(w), b)                      # weight column-major
    strided = (np.repeat(x, 2, axis=2)[:, :, ::2], w, b[::-1].copy()[::-1])  # every other channel
    for args in ((x, w, b), views, strided):
        got = convtbc_py.conv_tbc(*args, pad)
        assert got.dtype == dtype and got.shape == (12 + 2 * pad - 2, 5, 6)
        assert rel_error(got, conv_tbc_ref(x, w, b, pad)) <= REL_BOUND[dtype]


def test_numpy_conv_tbc_errors_speak_python():
    x, w, b = np.ones((5, 2, 3)), np.ones((3, 3, 4), np.float32), np.ones(4, np.float32)
    with pytest.raises(convtbc_py.AclnnTypeError) as error:
        convtbc_py.conv_tbc(x, w, b, 1)  # float64 input
    assert error.value.status == INVALID and error.value.argument == "input"
    assert "input" in str(error.value) and "float32" in str(error.value) and "astype" in str(error.value)
    assert "DT_DOUBLE" in error.value.message  # CANN's own text stays available
    with pytest.raises(TypeError):
        convtbc_py.conv_tbc(x.astype(np.float32), w, b, True)
    with pytest.raises(convtbc_py.AclnnValueError) as error:
        convtbc_py.conv_tbc(x.astype(np.float32), w[:, :2], b, 1)
    assert error.value.argument in ("input", "weight") and "C_in" in str(error.value)
    # lists take the other arguments' dtype (float16 here), not float64
    got = convtbc_py.conv_tbc([[[1.0, 2.0]]], np.ones((1, 2, 1), np.float16), [0.5], 0)
    assert got.dtype == np.float16 and float(got[0, 0, 0]) == 3.5


def test_unforced_forward_choices_follow_the_output_channels():
    """The cost model: one output channel with a float32 self read in place
    is dot products; many channels, the GEMM with channels along nr (the
    transposed GEMM, forced only here, loses to it on every shared shape
    measured). In between it weighs the tile's unused columns: with the
    portable nr of 8 and AVX2's 16 seven channels go to the GEMM, and AVX-512
    has its narrow tile of 16 columns for them (on a Zen 4 it took half the
    time of the wide tile and 0.6-1.0 of the dot products'). 17 float32
    channels are a GEMM on 16 (or 8) and dot products on the last one; in
    float16, which both would widen, a GEMM on all 17."""
    assert planned(8, 4096, 1184, 5, 1, 0) == "forward_dot"
    assert planned(16, 9, 1600, 1, 1, 0) == "forward_dot"
    narrow = HAS_NARROW_TILE
    assert planned(1, 9, 1568, 1, 17, 0) == "forward_gemm_tail"
    assert planned(1, 9, 1568, 1, 17, 0, "float16") == ("forward_gemm_narrow" if narrow else "forward_gemm")
    assert planned(15, 257, 832, 5, 7, 0) == ("forward_gemm_narrow" if narrow else "forward_gemm")
    assert planned(257, 32, 1024, 3, 1024, 1) == "forward_gemm"
    assert planned(8, 4096, 1184, 5, 1, 0, "float16") != "forward_reference"


@pytest.mark.skipif(not HAS_VDPBF16PS, reason="the bfloat16 pair kernels need AVX512_BF16")
def test_unforced_bfloat16_choices_follow_the_output_channels():
    """With VDPBF16PS: one output channel is dot products on bfloat16; 9 to
    16 channels the narrow pair tile (on a Zen 4 it took 0.4-0.9 of the dot
    products' time there); hundreds of channels the wide pair tile. On
    Intel's cores, where the pair tiles run at half the float32 tiles' speed
    (context.c), the float32 tiles instead."""
    pairs = "_bf16" if runtime_info()["cpu"]["vendor"] != "GenuineIntel" else ""
    assert planned(16, 9, 1600, 1, 1, 0, "bfloat16") == "forward_dot_bf16"
    assert planned(218, 17, 656, 124, 15, 0, "bfloat16") == f"forward_gemm{pairs}_narrow"
    assert planned(64, 1, 896, 16, 16, 0, "bfloat16") == f"forward_gemm{pairs}_narrow"
    assert planned(15, 257, 1440, 14, 256, 0, "bfloat16") == f"forward_gemm{pairs}"


def test_bits_do_not_depend_on_the_views():
    """The implementation is chosen as if the tensors were contiguous, so the
    same values give the same bits through any strides (here a channel
    stride of 2 and a column-major weight against contiguous arrays)."""
    rng = np.random.default_rng(4)
    # (the last three: one block of rows, which splits between threads only
    # when the weight is read in place, and channels past 16)
    for T, B, C_in, K, C_out, pad in [(9, 6, 40, 3, 6, 0), (8, 3, 4, 3, 6, 2), (12, 5, 300, 2, 40, 0),
                                      (8, 17, 240, 3, 16, 0), (3, 40, 150, 1, 17, 0), (17, 7, 48, 5, 18, 2)]:
        x, w, b = operands(rng, T, B, C_in, K, C_out, F32)
        strided = (np.repeat(x, 2, axis=2)[:, :, ::2], np.asfortranarray(w), b)
        assert convtbc_py.conv_tbc(x, w, b, pad).tobytes() == convtbc_py.conv_tbc(*strided, pad).tobytes()
