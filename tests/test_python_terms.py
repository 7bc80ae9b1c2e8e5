"""conv_tbc_backward's errors in Python's terms (issue 12): what CANN refuses
is raised as AclnnTypeError / AclnnValueError, both AclnnErrors with CANN's
status, name and message and also TypeError / ValueError, whose text names the
Python argument (grad_output where CANN says self), numpy's dtype names and a
conversion hint; the [PID] time stamp stays in the log. Python-side mistakes
(a bool or float pad, a dtype ACL cannot name, a ragged list) are plain
TypeError / ValueError / OverflowError. Array-likes are taken as numpy takes
them, with lists converted to the dtype rule of ops._operands.

Statuses are CANN's documented ones (161001 null, 161002 invalid); values are
checked against the float64 reference in tests/reference.py.
"""

import pickle
import re

import numpy as np
import pytest

import convtbc_py
from conftest import run_python
from reference import BF16, assert_close, conv_tbc_backward_ref

ARGUMENTS = ["grad_output", "input", "weight", "bias"]
CANN_NAMES = ["self", "input", "weight", "bias"]
STAMP = re.compile(r"\[PID: \d+\]|\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d")


def ops(dt=np.float32, T=5, B=2, C_in=3, K=2, C_out=4, pad=1):
    rng = np.random.default_rng(11)
    T_out = T + 2 * pad + 1 - K
    mk = lambda s: rng.uniform(-1, 1, size=s).astype(np.float32).astype(dt)  # noqa: E731
    return [mk((T_out, B, C_out)), mk((T, B, C_in)), mk((K, C_in, C_out)), mk((C_out,)), pad]


def refused(cls, *args, **kw):
    with pytest.raises(cls) as ei:
        convtbc_py.conv_tbc_backward(*args, **kw)
    return ei.value


def words(text):
    return set(re.findall(r"\w+", text))


# --------------------------------------------------------------------------
# what the operator refuses


@pytest.mark.parametrize("slot", range(4))
def test_float64_names_the_python_argument_and_the_fix(slot):
    args = ops()
    args[slot] = args[slot].astype(np.float64)
    e = refused(convtbc_py.AclnnTypeError, *args)
    assert isinstance(e, TypeError) and isinstance(e, convtbc_py.AclnnError)
    assert (e.status, e.name, e.argument) == (161002, "ACLNN_ERR_PARAM_INVALID", ARGUMENTS[slot])
    text = str(e)
    assert ARGUMENTS[slot] in words(text) and "float64" in text
    assert "float32, float16, bfloat16" in text
    assert f"{ARGUMENTS[slot]}.astype(np.float32)" in text
    # CANN's own words stay on the exception.
    assert e.message.startswith("EZ1001") and CANN_NAMES[slot] in words(e.message) and "DT_DOUBLE" in e.message
    if slot == 0:
        assert "self" not in words(text)


def test_training_series_refuses_bfloat16_with_its_own_list():
    args = ops()
    args[1] = args[1].astype(BF16)
    with convtbc_py.soc_profile("Ascend910A"):
        e = refused(convtbc_py.AclnnTypeError, *args, cube_math_type=1)
    assert e.argument == "input" and e.status == 161002
    assert "float32, float16 on Ascend910A" in str(e) and "bfloat16," not in str(e)
    assert "input.astype(np.float32)" in str(e)


@pytest.mark.parametrize("slot", range(4))
def test_none_is_a_type_error_with_cann_nullptr_status(slot):
    args = ops()
    args[slot] = None
    e = refused(convtbc_py.AclnnTypeError, *args)
    assert (e.status, e.name, e.argument) == (161001, "ACLNN_ERR_PARAM_NULLPTR", ARGUMENTS[slot])
    assert f"{ARGUMENTS[slot]} is None" in str(e)


@pytest.mark.parametrize("case, argument", [
    ("grad_output_T", "grad_output"), ("grad_output_rank", "grad_output"), ("grad_output_empty", "grad_output"),
    ("input_C", "input"), ("input_rank", "input"), ("weight_rank", "weight"), ("bias_C", "bias"),
    ("bias_rank", "bias"), ("too_many_dims", "input"),
])
def test_shape_errors_name_the_python_argument(case, argument):
    go, x, w, b, pad = ops()
    if case == "grad_output_T":
        go = go[1:]
    elif case == "grad_output_rank":
        go = go[0]
    elif case == "grad_output_empty":
        go = go[:0]
    elif case == "input_C":
        x = x[:, :, :2]
    elif case == "input_rank":
        x = x[0]
    elif case == "weight_rank":
        w = w[0]
    elif case == "bias_C":
        b = b[:3]
    elif case == "bias_rank":
        b = b[None]
    elif case == "too_many_dims":
        x = x.reshape(x.shape + (1,) * 6)
    e = refused(convtbc_py.AclnnValueError, go, x, w, b, pad)
    assert isinstance(e, ValueError) and isinstance(e, convtbc_py.AclnnError)
    assert (e.status, e.argument) == (161002, argument)
    assert str(e).startswith(f"conv_tbc_backward: {argument}")
    assert "self" not in words(str(e)), str(e)
    assert "[T_out, B, C_out]" in str(e)  # the shapes the function takes


def test_pad_and_cube_math_type_values():
    go, x, w, b, _ = ops(pad=0)
    e = refused(convtbc_py.AclnnValueError, go, x, w, b, -1)
    assert (e.status, e.argument) == (161002, "pad") and "pad should be >= 0, got -1" in str(e)
    e = refused(convtbc_py.AclnnValueError, go, x, w, b, 0, cube_math_type=4)
    assert (e.status, e.argument) == (161002, "cube_math_type")
    assert "cube_math_type" in str(e) and "cubeMathType" not in str(e) and "cubeMathType" in e.message
    with convtbc_py.soc_profile("Ascend910A"):
        e = refused(convtbc_py.AclnnValueError, go, x, w, b, 0, cube_math_type=0)
    assert e.argument == "cube_math_type" and "float32" in str(e) and "DT_FLOAT" not in str(e)


def test_no_pid_or_time_stamp_in_exception_texts():
    args = ops()
    args[0] = args[0].astype(np.float64)
    e = refused(convtbc_py.AclnnTypeError, *args)
    assert not STAMP.search(str(e)) and not STAMP.search(e.message), (str(e), e.message)
    with pytest.raises(convtbc_py.AclError) as ei:  # raw API errors too
        convtbc_py.check(convtbc_py.lib.aclrtSetDevice(3))
    assert ei.value.message and not STAMP.search(str(ei.value))


def test_the_log_keeps_the_pid_and_time_stamp():
    proc = run_python("""
        import os, numpy as np, convtbc_py
        x = np.zeros((5, 1, 2))
        try:
            convtbc_py.conv_tbc_backward(x, x, x[:1], x[0, 0], 0)
        except TypeError as e:
            print("EXCEPTION", e)
        print("PID", os.getpid())
    """, env_extra={"ASCEND_GLOBAL_LOG_LEVEL": "3", "ASCEND_SLOG_PRINT_TO_STDOUT": "1"})
    pid = re.search(r"^PID (\d+)$", proc.stdout, re.M).group(1)
    logged = [line for line in proc.stdout.splitlines() if line.startswith("[ERROR]") and "DT_DOUBLE" in line]
    assert logged and f"[PID: {pid}]" in logged[0], proc.stdout
    exception = next(line for line in proc.stdout.splitlines() if line.startswith("EXCEPTION"))
    assert "grad_output" in exception and not STAMP.search(exception)


def test_exceptions_pickle_with_their_attributes():
    args = ops()
    args[2] = args[2].astype(np.float64)
    e = refused(convtbc_py.AclnnTypeError, *args)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is convtbc_py.AclnnTypeError
    assert (back.status, back.name, back.message, back.argument, str(back)) == (
        e.status, e.name, e.message, e.argument, str(e))


def test_failed_call_is_catchable_as_either():
    args = ops()
    args[0] = args[0][1:]
    for cls in (ValueError, convtbc_py.AclnnError, convtbc_py.ConvTbcError, convtbc_py.AclnnArgumentError):
        with pytest.raises(cls):
            convtbc_py.conv_tbc_backward(*args)


# --------------------------------------------------------------------------
# integer arguments


@pytest.mark.parametrize("pad", [True, False, np.True_, 1.0, np.float32(1), "1", None, 1 + 0j])
def test_pad_must_be_a_true_integer(pad):
    go, x, w, b, _ = ops()
    with pytest.raises(TypeError, match="pad must be an integer") as ei:
        convtbc_py.conv_tbc_backward(go, x, w, b, pad)
    assert not isinstance(ei.value, convtbc_py.ConvTbcError)


@pytest.mark.parametrize("pad", [np.int64(1), np.int32(1), np.uint8(1), 1])
def test_numpy_integers_are_integers(pad):
    go, x, w, b, _ = ops(pad=1)
    for got, want in zip(convtbc_py.conv_tbc_backward(go, x, w, b, pad), conv_tbc_backward_ref(go, x, w, 1)):
        assert_close(got, want)


@pytest.mark.parametrize("name, value, error", [
    ("pad", 2**63, OverflowError), ("cube_math_type", 128, OverflowError), ("cube_math_type", True, TypeError),
    ("cube_math_type", 1.0, TypeError),
])
def test_integers_beyond_their_c_type(name, value, error):
    go, x, w, b, pad = ops()
    kw = {"cube_math_type": value} if name == "cube_math_type" else {}
    with pytest.raises(error, match=name):
        convtbc_py.conv_tbc_backward(go, x, w, b, value if name == "pad" else pad, **kw)


# --------------------------------------------------------------------------
# array-likes


def test_lists_of_floats_are_float32():
    go, x, w, b, pad = ops()
    got = convtbc_py.conv_tbc_backward(go.tolist(), x.tolist(), w.tolist(), b.tolist(), pad)
    assert [g.dtype for g in got] == [np.dtype(np.float32)] * 3
    for g, want in zip(got, conv_tbc_backward_ref(go, x, w, pad)):
        assert_close(g, want)


def test_lists_take_the_dtype_of_the_arrays():
    go, x, w, b, pad = ops(dt=np.float16)
    got = convtbc_py.conv_tbc_backward(go, x.tolist(), w.astype(np.float32).tolist(), [0] * b.shape[0], pad)
    assert [g.dtype for g in got] == [np.dtype(np.float16)] * 3
    gb = convtbc_py.conv_tbc_backward(go.astype(BF16), x.tolist(), w, b.tolist(), pad)
    assert [g.dtype for g in gb] == [np.dtype(BF16), np.dtype(np.float16), np.dtype(BF16)]


def test_numpy_scalars_keep_their_dtype():
    # np.float64 is a Python float too; it must still count as float64 (and
    # be refused), where a Python float would become float32.
    go, x, w, _, pad = ops(C_out=1)
    e = refused(convtbc_py.AclnnTypeError, go, x, w, np.float64(0.5), pad)
    assert e.argument == "bias" and "float64" in str(e)


def test_a_list_does_not_take_a_refused_dtype():
    # The float64 array is reported, not the list before it.
    go, x, w, b, pad = ops()
    e = refused(convtbc_py.AclnnTypeError, go.tolist(), x.astype(np.float64), w, b, pad)
    assert e.argument == "input"


class Wrapped:
    """An array-like with its own dtype, as torch tensors and others are."""

    def __init__(self, array):
        self.array = array

    def __array__(self, dtype=None, copy=None):
        return self.array if dtype is None else self.array.astype(dtype)


def test_objects_with_array_keep_their_dtype():
    go, x, w, b, pad = ops()
    got = convtbc_py.conv_tbc_backward(Wrapped(go), Wrapped(x.astype(np.float16)), memoryview(w), b, pad)
    assert [g.dtype for g in got] == [np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float32)]
    for g, want in zip(got, conv_tbc_backward_ref(go, x.astype(np.float16), w, pad)):
        assert_close(g, want)
    e = refused(convtbc_py.AclnnTypeError, go, x, Wrapped(w.astype(np.float64)), b, pad)
    assert e.argument == "weight"


@pytest.mark.parametrize("value, error", [([[1.0, 2.0], [3.0]], ValueError), ([["a"]], ValueError),
                                          (np.array([["a"]], dtype=object), TypeError),
                                          (np.array([["a"]]), TypeError)])
def test_what_is_not_an_array_of_numbers_names_the_argument(value, error):
    go, x, w, b, pad = ops()
    with pytest.raises(error, match="conv_tbc_backward: weight") as ei:
        convtbc_py.conv_tbc_backward(go, x, value, b, pad)
    assert not isinstance(ei.value, convtbc_py.ConvTbcError)
