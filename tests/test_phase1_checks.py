"""Phase-1 argument checks of aclnnConvTbcBackwardGetWorkspaceSize, through
the raw C API: the cases of CANN's own unit tests (spec table), every check
in CANN's order (first failure wins), dtype/format lists, ranks, shape
relations, cubeMathType, NULL out-parameters, and the messages
(`EZ1001 ...` naming the argument).
"""

import re

import numpy as np
import pytest

from rawapi import ELEM_SIZE, Tensor, ffi, lib, phase1, phase2, recent_msg
from reference import BF16, REL_BOUND, conv_tbc_backward_ref, rel_error

NAMES = ["self", "input", "weight", "bias", "gradInput", "gradWeight", "gradBias"]
NP_OF = {"ACL_FLOAT": np.float32, "ACL_FLOAT16": np.float16, "ACL_BF16": BF16}
ND, NCL = "ACL_FORMAT_ND", "ACL_FORMAT_NCL"
OK, NULLPTR, INVALID = 0, 161001, 161002


def default_shapes(T=5, B=1, C_in=2, K=1, C_out=2, pad=0):
    T_out = T + 2 * pad + 1 - K
    return {
        "self": (T_out, B, C_out), "input": (T, B, C_in), "weight": (K, C_in, C_out),
        "bias": (C_out,), "gradInput": (T, B, C_in), "gradWeight": (K, C_in, C_out),
        "gradBias": (C_out,),
    }


class Case:
    """The seven tensors of one phase-1 call; any of them may be replaced."""

    def __init__(self, dtype="ACL_FLOAT16", pad=0, shapes=None, dtypes=None, fmts=None,
                 nulls=(), seed=0, **dims):
        self.pad = pad
        self.shapes = default_shapes(pad=pad, **dims)
        self.shapes.update(shapes or {})
        self.dtypes = {n: dtype for n in NAMES}
        self.dtypes.update(dtypes or {})
        self.fmts = {n: (NCL if n in ("self", "input", "weight") else ND) for n in NAMES}
        self.fmts.update({"bias": ND, "gradInput": ND, "gradWeight": ND, "gradBias": ND})
        self.fmts.update(fmts or {})
        rng = np.random.default_rng(seed)
        self.t = {}
        for n in NAMES:
            if n in nulls:
                self.t[n] = None
                continue
            shape = self.shapes[n]
            count = int(np.prod(shape)) if len(shape) else 1
            code = self.dtypes[n]
            if code in NP_OF:
                if n.startswith("grad"):
                    vals = np.full(count, 7.0)  # sentinel: outputs must overwrite it
                else:
                    vals = rng.integers(-4, 5, size=count).astype(np.float64) / 4
                storage = vals.astype(NP_OF[code])
            else:
                storage = np.zeros(count * ELEM_SIZE.get(code, 8), dtype=np.uint8)
            self.t[n] = Tensor(storage, shape, dtype_code=code, fmt=self.fmts[n],
                               storage_dims=shape if len(shape) else (1,))

    def phase1(self, cube=1, **kw):
        t = self.t
        return phase1(t["self"], t["input"], t["weight"], t["bias"], self.pad, cube,
                      t["gradInput"], t["gradWeight"], t["gradBias"], **kw)

    def check_results(self):
        t = self.t
        ref = conv_tbc_backward_ref(t["self"].view(), t["input"].view(), t["weight"].view(),
                                    self.pad)
        for name, r in zip(("gradInput", "gradWeight", "gradBias"), ref):
            out = t[name].view()
            err = rel_error(out, r)
            assert err <= REL_BOUND[out.dtype], f"{name}: rel err {err}"


def assert_fails(p1, status, *names):
    """Status, EZ1001 prefix, and a message naming one of `names`."""
    assert p1.status == status, (
        f"expected {status}, got {p1.status}; message: {p1.message!r}")
    assert p1.message.startswith("EZ1001"), f"message does not start with EZ1001: {p1.message!r}"
    if names:
        assert any(n in p1.message for n in names), (
            f"message does not name any of {names}: {p1.message!r}")


def names_word(message, name):
    """True if `name` occurs in `message` as a whole word (so 'input' does
    not match 'gradInput' or 'inputs')."""
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])", message) is not None


def run_ok(case, cube=1):
    p1 = case.phase1(cube)
    assert p1.status == OK, f"phase 1 failed: {p1.status} {p1.message!r}"
    assert p1.executor != ffi.NULL
    st = phase2(p1)
    assert st == OK, f"phase 2 failed: {st} {recent_msg()!r}"
    case.check_results()


# --------------------------------------------------------------------------
# The spec's table of CANN unit-test cases (Atlas A2, pad 0, cube 1 unless said)


def test_cann_ut_ncl_float16():
    run_ok(Case("ACL_FLOAT16", fmts={n: NCL for n in NAMES if n not in ("bias", "gradBias")}))


def test_cann_ut_ncl_float():
    run_ok(Case("ACL_FLOAT", fmts={n: NCL for n in NAMES if n not in ("bias", "gradBias")}))


@pytest.mark.parametrize("null", ["self", "input", "weight", "bias"])
def test_cann_ut_null_input(null):
    assert_fails(Case("ACL_FLOAT", nulls=(null,)).phase1(), NULLPTR, null)


@pytest.mark.parametrize("null", ["gradInput", "gradWeight", "gradBias"])
def test_null_output(null):
    assert_fails(Case("ACL_FLOAT", nulls=(null,)).phase1(), NULLPTR, null)


@pytest.mark.parametrize("code", ["ACL_DOUBLE", "ACL_INT32", "ACL_COMPLEX64", "ACL_COMPLEX128",
                                  "ACL_DT_UNDEFINED"])
def test_cann_ut_bad_dtype_all_tensors(code):
    assert_fails(Case(code).phase1(), INVALID, *NAMES)


def test_cann_ut_input_nchw_bias_ncl():
    p1 = Case("ACL_FLOAT16", fmts={"input": "ACL_FORMAT_NCHW", "bias": NCL}).phase1()
    assert_fails(p1, INVALID, "input", "bias")


def test_cann_ut_all_nd():
    run_ok(Case("ACL_FLOAT16", fmts={n: ND for n in NAMES}))


def test_cann_ut_inputs_ncl_outputs_nd():
    run_ok(Case("ACL_FLOAT16", fmts={"self": NCL, "input": NCL, "weight": NCL}))


def test_cann_ut_batch_mismatch():
    # input [5,0,2], weight [1,2,2], self [5,1,2]
    p1 = Case("ACL_FLOAT16", shapes={"input": (5, 0, 2), "gradInput": (5, 0, 2)}).phase1()
    assert_fails(p1, INVALID, "self", "input")


def test_cann_ut_empty_self():
    p1 = Case("ACL_FLOAT16", shapes={"self": (0, 1, 2)}).phase1()
    assert_fails(p1, INVALID, "self")


def test_cann_ut_k0():
    # input [5,1,2], weight [0,2,2], self [6,1,2]
    case = Case("ACL_FLOAT16", K=0)
    assert case.shapes["self"] == (6, 1, 2)
    run_ok(case)
    # gradInput: every sum is empty -> 0 (storage was pre-filled with 7)
    assert np.all(case.t["gradInput"].view().astype(np.float64) == 0)


def test_cann_ut_t0_pad1():
    case = Case("ACL_FLOAT16", T=0, pad=1)
    assert case.shapes["self"] == (2, 1, 2)
    run_ok(case)
    # gradWeight: only padding rows meet self -> 0
    assert np.all(case.t["gradWeight"].view().astype(np.float64) == 0)


def test_cann_ut_t0_k0():
    case = Case("ACL_FLOAT16", T=0, K=0)
    assert case.shapes["self"] == (1, 1, 2)
    run_ok(case)


def test_cann_ut_pad1_k3():
    case = Case("ACL_FLOAT16", pad=1, K=3)
    assert case.shapes["self"] == (5, 1, 2)
    run_ok(case)


# --------------------------------------------------------------------------
# Check 1: NULL pointers


def test_null_workspace_size():
    assert_fails(Case("ACL_FLOAT").phase1(ws_size_null=True), NULLPTR, "workspaceSize")


def test_null_executor():
    assert_fails(Case("ACL_FLOAT").phase1(executor_null=True), NULLPTR, "executor")


def test_order_null_before_dtype():
    # A NULL tensor and a bad dtype elsewhere: the NULL check comes first.
    p1 = Case("ACL_FLOAT", nulls=("gradBias",), dtypes={"self": "ACL_DOUBLE"}).phase1()
    assert_fails(p1, NULLPTR, "gradBias")


def test_order_null_before_everything():
    p1 = Case("ACL_FLOAT", nulls=("weight",), fmts={"input": "ACL_FORMAT_NCHW"},
              shapes={"self": (0, 1, 2)}, dtypes={"bias": "ACL_INT32"}).phase1(cube=9)
    assert_fails(p1, NULLPTR, "weight")


def test_order_null_workspace_size_before_dtype():
    p1 = Case("ACL_DOUBLE").phase1(ws_size_null=True)
    assert p1.status == NULLPTR


# --------------------------------------------------------------------------
# Check 2: dtypes


GOOD = ["ACL_FLOAT", "ACL_FLOAT16", "ACL_BF16"]
BAD = ["ACL_DOUBLE", "ACL_INT32", "ACL_COMPLEX64", "ACL_COMPLEX128", "ACL_DT_UNDEFINED",
       "ACL_INT8", "ACL_UINT64", "ACL_HIFLOAT8", "ACL_FLOAT8_E4M3FN"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("code", BAD)
def test_bad_dtype_per_tensor(name, code):
    p1 = Case("ACL_FLOAT", dtypes={name: code}).phase1()
    assert_fails(p1, INVALID, name)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("code", GOOD)
def test_good_dtype_per_tensor(name, code):
    base = "ACL_FLOAT16" if code == "ACL_FLOAT" else "ACL_FLOAT"
    run_ok(Case(base, dtypes={name: code}))


def test_order_dtype_before_format():
    # weight has a bad dtype, input a bad format: the dtype check (all
    # tensors) comes before the format check.
    p1 = Case("ACL_FLOAT", dtypes={"weight": "ACL_DOUBLE"},
              fmts={"input": "ACL_FORMAT_NCHW"}).phase1()
    assert_fails(p1, INVALID, "weight")
    assert not names_word(p1.message, "input"), p1.message


def test_order_dtype_of_later_tensor_before_format_of_earlier():
    p1 = Case("ACL_FLOAT", dtypes={"gradBias": "ACL_INT32"},
              fmts={"self": "ACL_FORMAT_NHWC"}).phase1()
    assert_fails(p1, INVALID, "gradBias")


# --------------------------------------------------------------------------
# Check 3: formats


THREE_D = ["self", "input", "weight", "gradInput", "gradWeight"]
BAD_FORMATS = ["ACL_FORMAT_NCHW", "ACL_FORMAT_NHWC", "ACL_FORMAT_NC", "ACL_FORMAT_FRACTAL_NZ",
               "ACL_FORMAT_NC1HWC0", "ACL_FORMAT_UNDEFINED"]


@pytest.mark.parametrize("name", THREE_D)
@pytest.mark.parametrize("fmt", [ND, NCL])
def test_format_allowed_3d(name, fmt):
    run_ok(Case("ACL_FLOAT", fmts={name: fmt}))


@pytest.mark.parametrize("name", THREE_D)
@pytest.mark.parametrize("fmt", BAD_FORMATS)
def test_format_rejected_3d(name, fmt):
    assert_fails(Case("ACL_FLOAT", fmts={name: fmt}).phase1(), INVALID, name)


@pytest.mark.parametrize("name", ["bias", "gradBias"])
@pytest.mark.parametrize("fmt", [NCL, "ACL_FORMAT_NCHW", "ACL_FORMAT_NC"])
def test_format_rejected_1d(name, fmt):
    assert_fails(Case("ACL_FLOAT", fmts={name: fmt}).phase1(), INVALID, name)


def test_order_format_before_empty_self():
    p1 = Case("ACL_FLOAT", fmts={"weight": "ACL_FORMAT_NCHW"},
              shapes={"self": (0, 1, 2)}).phase1()
    assert_fails(p1, INVALID, "weight")


# --------------------------------------------------------------------------
# Check 4: empty self


@pytest.mark.parametrize("self_shape", [(0, 1, 2), (5, 0, 2), (5, 1, 0), (0, 0, 0)])
def test_empty_self(self_shape):
    assert_fails(Case("ACL_FLOAT", shapes={"self": self_shape}).phase1(), INVALID, "self")


def test_empty_self_b0_consistent_shapes():
    # B = 0 everywhere: shapes agree, but self is empty -> refused.
    case = Case("ACL_FLOAT", B=0)
    assert case.shapes["self"] == (5, 0, 2)
    assert_fails(case.phase1(), INVALID, "self")


def test_empty_self_cout0_consistent_shapes():
    case = Case("ACL_FLOAT", C_out=0)
    assert_fails(case.phase1(), INVALID, "self")


def test_order_empty_self_before_rank():
    p1 = Case("ACL_FLOAT", shapes={"self": (0, 1, 2), "input": (5, 2)}).phase1()
    assert_fails(p1, INVALID, "self")
    assert not names_word(p1.message, "input"), p1.message


# --------------------------------------------------------------------------
# Check 5: ranks


@pytest.mark.parametrize("name", THREE_D)
@pytest.mark.parametrize("rank", [1, 2, 4])
def test_rank_3d(name, rank):
    shape = {1: (2,), 2: (5, 2), 4: (5, 1, 2, 1)}[rank]
    assert_fails(Case("ACL_FLOAT", shapes={name: shape}).phase1(), INVALID, name)


@pytest.mark.parametrize("name", ["bias", "gradBias"])
@pytest.mark.parametrize("shape", [(), (1, 2), (2, 1, 1)])
def test_rank_1d(name, shape):
    assert_fails(Case("ACL_FLOAT", shapes={name: shape}).phase1(), INVALID, name)


def test_order_rank_before_shape_relation():
    p1 = Case("ACL_FLOAT", shapes={"gradWeight": (1, 2), "bias": (3,)}).phase1()
    assert_fails(p1, INVALID, "gradWeight")


# --------------------------------------------------------------------------
# Negative dims: aclCreateTensor records them as given (as CANN's does); the
# op refuses them once the ranks are known.


def _with_dims(case, name, dims):
    old = case.t[name]
    case.t[name] = Tensor(old.storage, dims, old.strides, 0, dtype_code=old.dtype_code, fmt=old.fmt,
                          storage_dims=old.storage_dims)


@pytest.mark.parametrize("name", NAMES)
def test_negative_dim_refused(name):
    case = Case("ACL_FLOAT")
    shape = case.shapes[name]
    _with_dims(case, name, shape[:-1] + (-shape[-1],))
    p1 = case.phase1()
    assert_fails(p1, INVALID, name)
    assert ">= 0" in p1.message, p1.message
    for out in ("gradInput", "gradWeight", "gradBias"):
        assert np.all(case.t[out].storage == 7), f"{out} written by a refused call"


def test_order_rank_before_negative_dim():
    case = Case("ACL_FLOAT", shapes={"gradBias": (2, 1)})
    _with_dims(case, "input", (5, -1, 2))
    assert_fails(case.phase1(), INVALID, "gradBias")


def test_order_negative_dim_before_shape_relation():
    # weight [1, 2, -2] also breaks bias[0] == weight[2]: the dim itself is named
    case = Case("ACL_FLOAT")
    _with_dims(case, "weight", (1, 2, -2))
    p1 = case.phase1()
    assert_fails(p1, INVALID, "weight")
    assert "-2" in p1.message and ">= 0" in p1.message, p1.message


# --------------------------------------------------------------------------
# Check 6: shape relations, pad, T_out


def test_cin_mismatch():
    p1 = Case("ACL_FLOAT", shapes={"input": (5, 1, 3), "gradInput": (5, 1, 3)}).phase1()
    assert_fails(p1, INVALID, "input", "weight")


def test_bias_mismatch():
    p1 = Case("ACL_FLOAT", shapes={"bias": (3,), "gradBias": (3,)}).phase1()
    assert_fails(p1, INVALID, "bias", "weight")


def test_t_out_overflow_refused():
    # T + 2*pad + 1 - K does not fit in int64: refused, not wrapped
    case = Case("ACL_FLOAT")
    case.pad = (1 << 62) + 5
    assert_fails(case.phase1(), INVALID, "pad")


@pytest.mark.parametrize("pad", [-1, -5])
def test_negative_pad(pad):
    case = Case("ACL_FLOAT", shapes=default_shapes())
    case.pad = pad
    assert_fails(case.phase1(), INVALID, "pad")


def test_negative_t_out():
    # T=2, K=5, pad 0 -> T_out = -2
    case = Case("ACL_FLOAT", shapes={"input": (2, 1, 2), "gradInput": (2, 1, 2),
                                     "weight": (5, 2, 2), "gradWeight": (5, 2, 2),
                                     "self": (1, 1, 2)})
    assert_fails(case.phase1(), INVALID)


def test_t_out_zero_refused():
    # T + 2*pad + 1 - K == 0 needs an empty self; a non-empty one mismatches.
    case = Case("ACL_FLOAT", shapes={"input": (2, 1, 2), "gradInput": (2, 1, 2),
                                     "weight": (3, 2, 2), "gradWeight": (3, 2, 2),
                                     "self": (1, 1, 2)})
    assert_fails(case.phase1(), INVALID)


@pytest.mark.parametrize("self_shape", [(4, 1, 2), (6, 1, 2), (5, 2, 2), (5, 1, 3)])
def test_self_shape_mismatch(self_shape):
    assert_fails(Case("ACL_FLOAT", shapes={"self": self_shape}).phase1(), INVALID, "self")


def test_self_shape_with_pad():
    # pad 2, K 1: T_out = 9; self [5,1,2] (as if pad were 0) is wrong
    case = Case("ACL_FLOAT", pad=2, shapes={"self": (5, 1, 2)})
    assert_fails(case.phase1(), INVALID, "self")


def test_order_shape_relation_before_output_shape():
    p1 = Case("ACL_FLOAT", shapes={"bias": (3,), "gradInput": (4, 1, 2)}).phase1()
    assert_fails(p1, INVALID, "bias", "weight")
    assert "gradInput" not in p1.message, p1.message


# --------------------------------------------------------------------------
# Check 7: output shapes


@pytest.mark.parametrize("name,shape", [
    ("gradInput", (4, 1, 2)), ("gradInput", (5, 1, 3)), ("gradInput", (5, 2, 2)),
    ("gradWeight", (2, 2, 2)), ("gradWeight", (1, 2, 3)), ("gradWeight", (1, 1, 2)),
    ("gradBias", (3,)), ("gradBias", (1,)),
])
def test_output_shape(name, shape):
    assert_fails(Case("ACL_FLOAT", shapes={name: shape}).phase1(), INVALID, name)


def test_order_output_shape_before_cube_math_type():
    p1 = Case("ACL_FLOAT", shapes={"gradWeight": (2, 2, 2)}).phase1(cube=7)
    assert_fails(p1, INVALID, "gradWeight")


# --------------------------------------------------------------------------
# Check 8: cubeMathType


@pytest.mark.parametrize("cube", [-128, -1, 4, 5, 127])
def test_cube_math_type_out_of_range(cube):
    assert_fails(Case("ACL_FLOAT").phase1(cube=cube), INVALID, "cubeMathType")


@pytest.mark.parametrize("code", GOOD)
@pytest.mark.parametrize("cube", [0, 1, 2, 3])
def test_cube_math_type_accepted(code, cube):
    p1 = Case(code).phase1(cube=cube)
    assert p1.status == OK, p1.message
    assert phase2(p1) == OK


# --------------------------------------------------------------------------
# Phase 1 outcomes


def test_failure_message_cleared_after_read():
    p1 = Case("ACL_FLOAT", nulls=("bias",)).phase1()
    assert p1.status == NULLPTR and p1.message  # read once by phase1()
    assert recent_msg() == ""


def test_no_output_written_on_phase1_failure():
    case = Case("ACL_FLOAT", shapes={"gradBias": (3,)})
    assert case.phase1().status == INVALID
    assert np.all(case.t["gradInput"].view() == 7)
    assert np.all(case.t["gradWeight"].view() == 7)
