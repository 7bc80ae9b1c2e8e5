"""numpy front end of aclnnConvTbcBackward.

Arrays are handed to the C API zero-copy: each becomes an aclTensor whose
storage is the 1-D span of memory the numpy view touches, with the view's
strides in elements. libconvtbc checks that device addresses lie in
aclrtMalloc blocks, so each span is declared to it as host memory standing
for device memory for the length of the call. Argument checking is left to
the C library on purpose, so that Python callers get exactly CANN's status
codes and messages.
"""

from __future__ import annotations

import operator
from typing import Any, Dict, List, Optional, Tuple

import ml_dtypes
import numpy as np

from ._library import ffi, lib
from .errors import AclError, check, check_created, recent_error_message

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

# CANN hands out device memory aligned at least this much; give the library
# the same guarantee for a host workspace.
_WORKSPACE_ALIGNMENT = 64


_CODE_OF: Dict[np.dtype, int] = dict(_ACL_DTYPES)
_INT64_ARRAY = ffi.typeof("int64_t[]")  # parsed once: ffi.new runs several times a call


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


def _contiguous_strides(shape: Tuple[int, ...]) -> List[int]:
    """C-order strides in elements (what a size-1 dim's stride is reported as)."""
    strides: List[int] = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return strides[::-1]


class _CallResources:
    """What one call hands to the C library, released in reverse when it ends:
    tensors first, then the host-memory declarations. Plain lists rather than
    an ExitStack: this is the per-call hot path, and small shapes feel it."""

    def __init__(self) -> None:
        self.tensors: List[Any] = []
        self.declared: List[Any] = []
        self.backings: List[Optional[np.ndarray]] = []  # keep copies alive while C holds their addresses

    def declare(self, pointer: Any, size: int) -> None:
        """Let [pointer, pointer + size) stand for device memory until release()."""
        if size == 0:  # an empty view touches nothing, so there is nothing to check
            return
        check(lib.convtbcDeclareHostMemory(pointer, size), AclError)
        self.declared.append(pointer)

    def release(self) -> None:
        for tensor in reversed(self.tensors):
            lib.aclDestroyTensor(tensor)
        for pointer in reversed(self.declared):
            lib.convtbcForgetHostMemory(pointer)
        self.tensors.clear()
        self.declared.clear()


def _create_tensor(array: Optional[np.ndarray], resources: _CallResources) -> Any:
    """An aclTensor viewing `array` (destroyed by `resources.release()`).

    When the C API cannot express the view (negative strides, byte strides
    that are not a whole number of elements, a misaligned address) the tensor
    views a C-ordered copy, kept alive in `resources`.
    """
    if array is None:
        return ffi.NULL
    code = acl_dtype(array.dtype)
    dims = ffi.new(_INT64_ARRAY, array.shape)
    if array.flags.c_contiguous and array.flags.aligned:
        # The common case, and the cheap one: the storage is the array itself.
        pointer = ffi.from_buffer(array)
        strides = ffi.new(_INT64_ARRAY, _contiguous_strides(array.shape))
        storage, offset = array.size, 0
    else:
        itemsize = array.itemsize
        # Strides of dims with extent <= 1 are never followed, so they never
        # force a copy; a misaligned address would be undefined behaviour in C,
        # so it does.
        if not array.flags.aligned or any(
            n > 1 and (s < 0 or s % itemsize) for n, s in zip(array.shape, array.strides)
        ):
            array = np.array(array, order="C", copy=True)
            resources.backings.append(array)
            return _create_tensor(array, resources)
        contiguous = _contiguous_strides(array.shape)
        element_strides = [s // itemsize if n > 1 else c for n, s, c in zip(array.shape, array.strides, contiguous)]
        strides = ffi.new(_INT64_ARRAY, element_strides)
        # Storage = the span of elements the view touches (strides are >= 0
        # here, so it starts at the first element).
        storage = 0 if array.size == 0 else 1 + sum((n - 1) * e for n, e in zip(array.shape, element_strides))
        offset = 0
        pointer = ffi.cast("void *", array.ctypes.data)
    resources.declare(pointer, storage * array.itemsize)
    tensor = lib.aclCreateTensor(dims, array.ndim, code, strides, offset, lib.ACL_FORMAT_ND,
                                 ffi.new(_INT64_ARRAY, [storage]), 1, pointer)
    check_created(tensor)
    resources.tensors.append(tensor)
    return tensor


def _workspace(size: int, resources: _CallResources) -> Tuple[Optional[np.ndarray], Any]:
    """Host memory for phase 2 and its aligned address (NULL when size is 0).

    A numpy buffer rather than aclrtMalloc: the runtime's allocator needs
    aclInit and a device, which this function promises not to require.
    """
    if size == 0:
        return None, ffi.NULL
    buffer = np.empty(size + _WORKSPACE_ALIGNMENT - 1, dtype=np.uint8)
    address = -buffer.ctypes.data % _WORKSPACE_ALIGNMENT + buffer.ctypes.data
    pointer = ffi.cast("void *", address)
    resources.declare(pointer, size)
    return buffer, pointer


def _discard_executor(executor: Any) -> None:
    # Phase 2 failed (its checks leave the executor live) or never ran (e.g.
    # MemoryError for the workspace): the executor is still ours to free.
    if lib.aclDestroyAclOpExecutor(executor) != 0:
        recent_error_message()  # no stray message about our own cleanup


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
    resources = _CallResources()
    try:
        self_, input_, weight_, bias_, grad_input, grad_weight, grad_bias = (
            _create_tensor(array, resources) for array in operands + grads
        )
        workspace_size = ffi.new("uint64_t *")
        executor_out = ffi.new("aclOpExecutor **")
        check(
            lib.aclnnConvTbcBackwardGetWorkspaceSize(
                self_, input_, weight_, bias_, pad, cube_math_type,
                grad_input, grad_weight, grad_bias, workspace_size, executor_out,
            )
        )
        executor = executor_out[0]
        try:
            workspace, workspace_address = _workspace(workspace_size[0], resources)
            check(lib.aclnnConvTbcBackward(workspace_address, workspace_size[0], executor, ffi.NULL))
        except BaseException:
            _discard_executor(executor)
            raise
        # Phase 2 ran on the NULL stream: at once on a thread without a current
        # context, queued on the context's default stream otherwise. Wait, so
        # that the results are complete and the memory can be let go.
        check(lib.convtbcSynchronizeCurrent(), AclError)
        del workspace  # only now: the C side held its address until here
    finally:
        resources.release()
    return tuple(grads)  # type: ignore[return-value]
