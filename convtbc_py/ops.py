"""numpy front end of aclnnConvTbcBackward (`conv_tbc_backward`) and
aclnnConvTbc (`conv_tbc`, the forward op).

Each works in three steps: it turns the Python arguments into ndarrays and
checked integers (`_operands`, `_integer`), runs the operator on them in one
call (`run_on_host`, `run_forward_on_host`), and hands back the results.
Errors of that call come back in the Python function's terms
(errors.in_python_terms, with the function's `_Signature`).

The host runs hand the arrays to the C API zero-copy: each becomes a
convtbcHostTensor whose storage is the 1-D span of memory the numpy view
touches, with the view's strides in elements, and one call to
convtbcConvTbcBackwardOnHost (convtbcConvTbcOnHost) runs both phases on them
(crossing into C once keeps small calls cheap). Argument checking is left to the C library on
purpose, so that Python callers get exactly CANN's status codes.

ml_dtypes is not imported here: its dtypes (bfloat16, float8_*) are known by
name when an array of one arrives, so float32 users never pay its import.
"""

from __future__ import annotations

import functools
import operator
import threading
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from . import _library
from ._library import ffi, lib
from .errors import AclnnError, AclnnValueError, check, in_python_terms

# numpy dtype -> ACL dtype code. Dtypes the operator rejects are listed too so
# that the C library, not Python, reports them (with CANN's 161002).
_CODE_OF: Dict[np.dtype, int] = {
    np.dtype(dtype): code
    for dtype, code in (
        (np.float32, lib.ACL_FLOAT),
        (np.float16, lib.ACL_FLOAT16),
        (np.float64, lib.ACL_DOUBLE),
        (np.int8, lib.ACL_INT8),
        (np.int16, lib.ACL_INT16),
        (np.int32, lib.ACL_INT32),
        (np.int64, lib.ACL_INT64),
        (np.uint8, lib.ACL_UINT8),
        (np.uint16, lib.ACL_UINT16),
        (np.uint32, lib.ACL_UINT32),
        (np.uint64, lib.ACL_UINT64),
        (np.bool_, lib.ACL_BOOL),
        (np.complex64, lib.ACL_COMPLEX64),
        (np.complex128, lib.ACL_COMPLEX128),
    )
}
# ml_dtypes' dtypes by their numpy name; a dtype of that name counts only
# if its scalar type comes from ml_dtypes.
_ML_DTYPES_CODE_OF: Dict[str, int] = {
    "bfloat16": lib.ACL_BF16,
    "float8_e5m2": lib.ACL_FLOAT8_E5M2,
    "float8_e4m3fn": lib.ACL_FLOAT8_E4M3FN,
}
# The dtypes the operator takes on some SoC, the first being the one a hint suggests.
ACCEPTED_DTYPES: Tuple[str, ...] = ("float32", "float16", "bfloat16")
_OPERATOR_DTYPES = frozenset(ACCEPTED_DTYPES)

_HOST_TENSORS = ffi.typeof("convtbcHostTensor[]")  # parsed once: this is the per-call path
_MAX_DIMS = len(ffi.new("convtbcHostTensor *").dims)
_INT64 = (-(2**63), 2**63 - 1)
_INT8 = (-(2**7), 2**7 - 1)

class _Signature(NamedTuple):
    """A Python function over an operator, for its error messages: its name,
    its array arguments in order, CANN's argument names in Python's words,
    and the shapes it takes (told with value errors)."""

    function: str
    arrays: Tuple[str, ...]
    python_names: Dict[str, str]
    shapes: str

    @property
    def usage(self) -> Dict[str, str]:
        return {name: self.shapes for name in self.arrays}


_BACKWARD = _Signature(
    "conv_tbc_backward", ("grad_output", "input", "weight", "bias"),
    {"self": "grad_output", "input": "input", "weight": "weight", "bias": "bias", "pad": "pad",
     "cubeMathType": "cube_math_type", "gradInput": "grad_input", "gradWeight": "grad_weight",
     "gradBias": "grad_bias"},
    "shapes: grad_output [T_out, B, C_out], input [T, B, C_in], weight [K, C_in, C_out], bias [C_out], "
    "T_out = T + 2*pad + 1 - K")
_FORWARD = _Signature(
    "conv_tbc", ("input", "weight", "bias"),
    {"self": "input", "weight": "weight", "bias": "bias", "out": "the result", "pad": "pad",
     "cubeMathType": "cube_math_type"},
    "shapes: input [T, B, C_in], weight [K, C_in, C_out], bias [C_out]; the result is [T_out, B, C_out], "
    "T_out = T + 2*pad + 1 - K")


def acl_dtype(dtype: np.dtype) -> int:
    """The ACL dtype code of a numpy dtype; TypeError if ACL has no equivalent."""
    code = _CODE_OF.get(dtype)
    if code is not None:
        return code
    code = _ML_DTYPES_CODE_OF.get(dtype.name)
    if code is not None and dtype.type.__module__.split(".")[0] == "ml_dtypes":
        _CODE_OF[dtype] = code
        return code
    raise TypeError(f"dtype {dtype} has no ACL equivalent")


def _operands(signature: _Signature, values: Sequence[Any]) -> List[Optional[np.ndarray]]:
    """The array arguments as native-order ndarrays ACL can name (None stays None).

    Python lists, tuples and numbers have no dtype of their own: they take
    the dtype of the first argument that has one, when that is one of the
    operator's dtypes, and float32 otherwise (so that a list of floats is not
    the float64 numpy would make of it, and a wrong dtype is reported on the
    argument that has it). Everything else (ndarrays, numpy scalars, objects
    with `__array__` or the buffer protocol) keeps its dtype.
    """
    arrays: List[Optional[np.ndarray]] = []
    dtypeless: List[int] = []
    for index, value in enumerate(values):
        if type(value) is not np.ndarray:
            # (np.float64 is a float, but a numpy scalar keeps its dtype.)
            if value is None or (isinstance(value, (list, tuple, int, float, complex))
                                 and not isinstance(value, np.generic)):
                arrays.append(None)
                if value is not None:
                    dtypeless.append(index)
                continue
            value = _converted(signature, index, value, None)
        arrays.append(_named(signature, index, value))
    if dtypeless:
        given = next((a.dtype for a in arrays if a is not None), None)
        dtype = given if given is not None and given.name in _OPERATOR_DTYPES else np.dtype(np.float32)
        for index in dtypeless:
            arrays[index] = _named(signature, index, _converted(signature, index, values[index], dtype))
    return arrays


def _named(signature: _Signature, index: int, array: np.ndarray) -> np.ndarray:
    """`array` in native byte order; TypeError naming the argument if ACL
    has no name for its dtype."""
    if array.dtype not in _CODE_OF:
        try:
            acl_dtype(array.dtype)
        except TypeError:
            name, function = signature.arrays[index], signature.function
            raise TypeError(
                f"{function}: {name} has dtype {array.dtype}, which ACL has no type for; "
                f"{function} accepts {', '.join(ACCEPTED_DTYPES)}: pass e.g. {name}.astype(np.float32)"
            ) from None
    if not array.dtype.isnative:
        # Byte order is a storage detail; the values are what the caller means.
        array = array.astype(array.dtype.newbyteorder("="))
    return array


def _converted(signature: _Signature, index: int, value: Any, dtype: Optional[np.dtype]) -> np.ndarray:
    try:
        return np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        name = signature.arrays[index]
        raise type(exc)(f"{signature.function}: {name} is not an array of numbers: {exc}") from exc


def _integer(function: str, name: str, value: Any, bounds: Tuple[int, int], kind: str) -> int:
    """`value` as an int for a C parameter of type `kind`: a true integer
    (Python or numpy; bools and floats are refused) within `bounds`."""
    if type(value) is int and bounds[0] <= value <= bounds[1]:
        return value  # the usual case, decided cheaply
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{function}: {name} must be an integer, got a bool ({value!r})")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(
            f"{function}: {name} must be an integer, got {type(value).__name__} ({value!r})"
        ) from None
    if not bounds[0] <= number <= bounds[1]:
        raise OverflowError(f"{function}: {name}={number} does not fit CANN's {kind} {name}")
    return number


@functools.lru_cache(maxsize=256)
def _contiguous_strides(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """C-order strides in elements (what a size-1 dim's stride is reported as)."""
    strides: List[int] = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(strides[::-1])


@functools.lru_cache(maxsize=512)
def _contiguous_view(shape: Tuple[int, ...], dtype: np.dtype) -> Tuple[Any, ...]:
    """The convtbcHostTensor fields after data and storage_elements of a
    C-contiguous array (cached: calls repeat the same few shapes)."""
    return (0, acl_dtype(dtype), len(shape), shape[:_MAX_DIMS], _contiguous_strides(shape)[:_MAX_DIMS])


def _host_tensor(array: np.ndarray, keep_alive: List[Any]) -> Tuple[Any, ...]:
    """The convtbcHostTensor fields of a view of `array`.

    When the C API cannot express the view (negative strides, byte strides
    that are not a whole number of elements, a misaligned address) the tensor
    views a C-ordered copy. `keep_alive` holds what the C side points into
    until the call returns. An array with more dims than the struct holds
    keeps only the first ones: convtbcConvTbcBackwardOnHost refuses the rank
    (161002) before it reads any dim.
    """
    shape = array.shape
    if array.flags.c_contiguous and array.flags.aligned:
        # The common case, and the cheap one: the storage is the array itself.
        pointer = ffi.from_buffer(array)
        keep_alive.append(pointer)
        return (pointer, array.size) + _contiguous_view(shape, array.dtype)
    code = acl_dtype(array.dtype)
    itemsize = array.itemsize
    # Strides of dims with extent <= 1 are never followed, so they never
    # force a copy; a misaligned address would be undefined behaviour in C,
    # so it does.
    if not array.flags.aligned or any(n > 1 and (s < 0 or s % itemsize) for n, s in zip(shape, array.strides)):
        copy = np.array(array, order="C", copy=True)
        return _host_tensor(copy, keep_alive)
    contiguous = _contiguous_strides(shape)
    strides = tuple(s // itemsize if n > 1 else c for n, s, c in zip(shape, array.strides, contiguous))
    # Storage = the span of elements the view touches (strides are >= 0
    # here, so it starts at the first element).
    storage = 0 if array.size == 0 else 1 + sum((n - 1) * e for n, e in zip(shape, strides))
    keep_alive.append(array)
    pointer = ffi.cast("void *", array.ctypes.data)
    return (pointer, storage, 0, code, len(shape), shape[:_MAX_DIMS], strides[:_MAX_DIMS])


def conv_tbc_backward(
    grad_output: npt.ArrayLike,
    input: npt.ArrayLike,
    weight: npt.ArrayLike,
    bias: npt.ArrayLike,
    pad: int,
    *,
    cube_math_type: int = 0,
) -> Tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any]]:
    """Gradients of the TBC convolution: (grad_input, grad_weight, grad_bias).

    `grad_output` is dL/dy `[T_out, B, C_out]`, `input` x `[T, B, C_in]`,
    `weight` `[K, C_in, C_out]`, `bias` `[C_out]`, with
    `T_out = T + 2*pad + 1 - K`. Arrays may be float32, float16 or
    ml_dtypes.bfloat16 (not on the Ascend910 training series), in any mix and
    with any strides; each gradient has the dtype of the matching input.
    Array-likes are taken as numpy does; Python lists, tuples and numbers,
    which have no dtype, take that of the first argument that has one if it
    is one of those three, else float32. `pad` is an integer >= 0 (bools and
    floats are refused). `cube_math_type` is CANN's cubeMathType
    (0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION, 2 USE_FP16, 3 USE_HF32).

    Does not need aclInit. What the operator refuses raises an AclnnError
    with CANN's status: AclnnTypeError (also a TypeError) for a dtype or a
    None array, AclnnValueError (also a ValueError) for shapes, pad and
    cube_math_type, each naming the Python argument. Python-side problems
    raise plain TypeError (not an integer, a dtype ACL has no type for, not
    numbers) or OverflowError (an integer beyond its C type).
    """
    arrays = _operands(_BACKWARD, (grad_output, input, weight, bias))
    pad = _integer(_BACKWARD.function, "pad", pad, _INT64, "int64_t")
    cube_math_type = _integer(_BACKWARD.function, "cube_math_type", cube_math_type, _INT8, "int8_t")
    try:
        return run_on_host(arrays[0], arrays[1], arrays[2], arrays[3], pad, cube_math_type)
    except AclnnError as error:
        raise _in_python_terms(_BACKWARD, error, arrays) from None


def conv_tbc(
    input: npt.ArrayLike,
    weight: npt.ArrayLike,
    bias: npt.ArrayLike,
    pad: int,
    *,
    cube_math_type: int = 0,
) -> npt.NDArray[Any]:
    """The TBC convolution (CANN's aclnnConvTbc): out `[T_out, B, C_out]`,

        out[t, b, o] = bias[o] + sum_k sum_c xp[t + k, b, c] * weight[k, c, o]

    with xp = `input` `[T, B, C_in]` between `pad` zero steps at each end,
    `weight` `[K, C_in, C_out]`, `bias` `[C_out]`, `T_out = T + 2*pad + 1 - K`.
    `input` and `weight` share one dtype, float32, float16 or
    ml_dtypes.bfloat16 (not on the Ascend910 training series), which is
    out's; bias may be any of the three. Any strides. `cube_math_type` is
    CANN's cubeMathType (0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION,
    2 USE_FP16, 3 USE_HF32, 4 USE_FP32_ADD). Array-likes, `pad` and errors as
    for conv_tbc_backward; CANN's checker refuses calls with
    `T + pad < K` (one-sided) and `K = 0` even where the result exists, and
    so does this function.
    """
    arrays = _operands(_FORWARD, (input, weight, bias))
    pad = _integer(_FORWARD.function, "pad", pad, _INT64, "int64_t")
    cube_math_type = _integer(_FORWARD.function, "cube_math_type", cube_math_type, _INT8, "int8_t")
    try:
        return run_forward_on_host(arrays[0], arrays[1], arrays[2], pad, cube_math_type)
    except AclnnError as error:
        raise _in_python_terms(_FORWARD, error, arrays) from None


def _in_python_terms(signature: _Signature, error: AclnnError, arrays: Sequence[Optional[np.ndarray]]) -> AclnnError:
    translated = in_python_terms(error, signature.function, signature.python_names, signature.usage)
    if translated is error:
        # The one refusal that names no argument: more dims than a
        # convtbcHostTensor holds. CANN would say the rank is wrong, so say that.
        for name, array in zip(signature.arrays, arrays):
            if array is not None and array.ndim > _MAX_DIMS:
                wanted = 1 if name == "bias" else 3
                return AclnnValueError(
                    error.status, error.name, error.message, name,
                    f"{signature.function}: {name} should be {wanted}-dimensional, got {array.ndim} dims "
                    f"({signature.shapes})")
    return translated


def _on_host(function: Any, arrays: Sequence[Optional[np.ndarray]],
             arguments: Callable[[Sequence[Any]], Sequence[Any]]) -> None:
    """Calls the convtbc*OnHost `function` with `arrays` as host tensors (None
    passes NULL), `arguments(tensors)` giving its argument list. (The C call
    drops the thread's older error messages itself, so that an error
    reports only this call.)"""
    keep_alive: List[Any] = []
    pointers = _contiguous_host_tensors(arrays, keep_alive)
    if pointers is None:
        tensors = ffi.new(_HOST_TENSORS, [() if a is None else _host_tensor(a, keep_alive) for a in arrays])
        pointers = [ffi.NULL if a is None else tensors + i for i, a in enumerate(arrays)]
    check(function(*arguments(pointers)))
    del keep_alive  # only now: the C side held these addresses until here


# Host tensors by the shapes and dtypes of the operands, one set per thread
# (their data pointers are replaced on each call): calls repeat the same few
# descriptions but for the addresses, and setting those is several times
# cheaper than making and filling the structs from Python.
_DESCRIPTIONS_KEPT = 256


class _Described(threading.local):
    def __init__(self) -> None:
        self.by_key: Dict[Tuple[Any, ...], Tuple[Any, List[Any]]] = {}


_described = _Described()


def _contiguous_host_tensors(arrays: Sequence[Optional[np.ndarray]], keep_alive: List[Any]) -> Optional[List[Any]]:
    """Pointers to host tensors of `arrays` (NULL for None) when each is None
    or C-contiguous and aligned (the usual call), else None. The tensors are
    this thread's, valid until its next call."""
    key: List[Any] = []
    for a in arrays:
        if a is None:
            key.append(None)
            continue
        flags = a.flags
        if not (flags.c_contiguous and flags.aligned):
            return None
        key.append(a.shape)
        key.append(a.dtype)
    by_key = _described.by_key
    described = by_key.get(tuple(key))
    if described is None:
        tensors = ffi.new(_HOST_TENSORS, [() if a is None else _host_tensor(a, []) for a in arrays])
        described = (tensors, [ffi.NULL if a is None else tensors + i for i, a in enumerate(arrays)])
        if len(by_key) >= _DESCRIPTIONS_KEPT:
            by_key.clear()
        by_key[tuple(key)] = described
    tensors = described[0]
    for i, a in enumerate(arrays):
        if a is not None:
            pointer = ffi.from_buffer(a)
            keep_alive.append(pointer)
            tensors[i].data = pointer
    return described[1]


def run_on_host(
    grad_output: Optional[np.ndarray],
    input: Optional[np.ndarray],
    weight: Optional[np.ndarray],
    bias: Optional[np.ndarray],
    pad: int,
    cube_math_type: int,
) -> Tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any]]:
    """aclnnConvTbcBackward on host ndarrays (None passes NULL), in one C call.

    Takes what conv_tbc_backward has normalized: native-order arrays with an
    ACL dtype, integer pad and cube_math_type. Raises AclnnError, in CANN's
    terms, for what the operator refuses.
    """
    operands = (grad_output, input, weight, bias)
    if _library.backend() == "cann":  # a CANN toolkit: device memory and CANN's public API only
        from ._cann import conv_tbc_backward as on_cann

        return on_cann(operands, pad, cube_math_type)  # type: ignore[return-value]
    grads = tuple(None if a is None else np.empty(a.shape, dtype=a.dtype) for a in operands[1:])
    _on_host(lib.convtbcConvTbcBackwardOnHost, operands + grads,
             lambda t: (t[0], t[1], t[2], t[3], pad, cube_math_type, t[4], t[5], t[6]))
    return grads  # type: ignore[return-value]


def _forward_out(input: Optional[np.ndarray], weight: Optional[np.ndarray], pad: int) -> np.ndarray:
    """The result array of conv_tbc, in input's dtype. Shapes the operator
    will refuse still give an array (of what can be told, else empty), so
    that it, not Python, reports what is wrong."""
    dtype = input.dtype if input is not None else np.dtype(np.float32)
    if input is None or weight is None or input.ndim != 3 or weight.ndim != 3:
        return np.empty((0, 0, 0), dtype)
    t_out = input.shape[0] + 2 * pad + 1 - weight.shape[0]
    return np.empty((max(t_out, 0), input.shape[1], weight.shape[2]), dtype)


def run_forward_on_host(
    input: Optional[np.ndarray],
    weight: Optional[np.ndarray],
    bias: Optional[np.ndarray],
    pad: int,
    cube_math_type: int,
) -> npt.NDArray[Any]:
    """aclnnConvTbc on host ndarrays (None passes NULL), in one C call, as
    run_on_host does for the backward op."""
    operands = (input, weight, bias)
    out = _forward_out(input, weight, pad)
    if _library.backend() == "cann":
        from ._cann import conv_tbc as on_cann

        return on_cann(operands, out, pad, cube_math_type)
    _on_host(lib.convtbcConvTbcOnHost, operands + (out,), lambda t: (t[0], t[1], t[2], pad, cube_math_type, t[3]))
    return out
