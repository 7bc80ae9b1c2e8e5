"""numpy front end of aclnnConvTbcBackward.

Arrays are handed to the C API zero-copy: each becomes a convtbcHostTensor
whose storage is the 1-D span of memory the numpy view touches, with the
view's strides in elements, and one call to convtbcConvTbcBackwardOnHost
runs both phases on them (crossing into C once keeps small calls cheap).
Argument checking is left to the C library on purpose, so that Python
callers get exactly CANN's status codes and messages.
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Dict, List, Optional, Tuple

import ml_dtypes
import numpy as np

from . import _library
from ._library import ffi, lib
from .errors import check, recent_error_message

# numpy dtype -> ACL dtype code. Dtypes the operator rejects are listed too so
# that the C library, not Python, reports them (with CANN's 161002).
_ACL_DTYPES: Tuple[Tuple[np.dtype, int], ...] = tuple(
    (np.dtype(dtype), code)
    for dtype, code in (
        (np.float32, lib.ACL_FLOAT),
        (np.float16, lib.ACL_FLOAT16),
        (ml_dtypes.bfloat16, lib.ACL_BF16),
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
        (ml_dtypes.float8_e5m2, lib.ACL_FLOAT8_E5M2),
        (ml_dtypes.float8_e4m3fn, lib.ACL_FLOAT8_E4M3FN),
    )
)

_CODE_OF: Dict[np.dtype, int] = dict(_ACL_DTYPES)
_HOST_TENSORS = ffi.typeof("convtbcHostTensor[7]")  # parsed once: this is the per-call path
_MAX_DIMS = len(ffi.new("convtbcHostTensor *").dims)


def acl_dtype(dtype: np.dtype) -> int:
    """The ACL dtype code of a numpy dtype; TypeError if ACL has no equivalent."""
    code = _CODE_OF.get(dtype)
    if code is None:
        raise TypeError(f"dtype {dtype} has no ACL equivalent")
    return code


def _as_operand(value: Any) -> Optional[np.ndarray]:
    """An ndarray with a native-order dtype that ACL can name, or None for NULL."""
    if value is None:
        return None
    array = np.asarray(value)
    if not array.dtype.isnative:
        # Byte order is a storage detail; the values are what the caller means.
        array = array.astype(array.dtype.newbyteorder("="))
    acl_dtype(array.dtype)
    return array


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
    grad_output: Any,
    input: Any,
    weight: Any,
    bias: Any,
    pad: int,
    *,
    cube_math_type: int = 0,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of the TBC convolution: (grad_input, grad_weight, grad_bias).

    `grad_output` is dL/dy `[T_out, B, C_out]`, `input` x `[T, B, C_in]`,
    `weight` `[K, C_in, C_out]`, `bias` `[C_out]`, with
    `T_out = T + 2*pad + 1 - K`. Arrays may be float32, float16 or
    ml_dtypes.bfloat16, in any mix and with any strides; each gradient has the
    dtype of the matching input. `cube_math_type` is CANN's cubeMathType
    (0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION, 2 USE_FP16, 3 USE_HF32).

    Does not need aclInit. Raises AclnnError with CANN's status for anything
    the operator rejects (a None argument is passed as NULL), TypeError for
    a dtype ACL cannot name.
    """
    operands = [_as_operand(a) for a in (grad_output, input, weight, bias)]
    grads = [None if a is None else np.empty(a.shape, dtype=a.dtype) for a in operands[1:]]
    pad = operator.index(pad)
    cube_math_type = operator.index(cube_math_type)

    recent_error_message()  # drop stale messages so an error reports only this call
    if _library.backend() == "cann":  # a CANN toolkit: device memory and CANN's public API only
        from ._cann import conv_tbc_backward as on_cann

        return on_cann(operands, pad, cube_math_type)  # type: ignore[return-value]
    arrays = operands + grads
    keep_alive: List[Any] = []
    tensors = ffi.new(_HOST_TENSORS, [() if a is None else _host_tensor(a, keep_alive) for a in arrays])
    self_, input_, weight_, bias_, grad_input, grad_weight, grad_bias = (
        ffi.NULL if a is None else tensors + i for i, a in enumerate(arrays)
    )
    check(
        lib.convtbcConvTbcBackwardOnHost(
            self_, input_, weight_, bias_, pad, cube_math_type, grad_input, grad_weight, grad_bias
        )
    )
    del keep_alive  # only now: the C side held these addresses until here
    return tuple(grads)  # type: ignore[return-value]
