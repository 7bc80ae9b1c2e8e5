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

import contextlib
import operator
from typing import Any, List, Optional, Tuple

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


def acl_dtype(dtype: np.dtype) -> int:
    """The ACL dtype code of a numpy dtype; TypeError if ACL has no equivalent."""
    for candidate, code in _ACL_DTYPES:
        if dtype == candidate:
            return code
    raise TypeError(f"dtype {dtype} has no ACL equivalent")


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


def _declare_host_memory(address: int, size: int, cleanup: contextlib.ExitStack) -> None:
    """Let [address, address + size) stand for device memory until `cleanup` unwinds."""
    if size == 0:  # an empty view touches nothing, so there is nothing to check
        return
    pointer = ffi.cast("void *", address)
    check(lib.convtbcDeclareHostMemory(pointer, size), AclError)
    cleanup.callback(lib.convtbcForgetHostMemory, pointer)


def _create_tensor(array: Optional[np.ndarray], cleanup: contextlib.ExitStack) -> Tuple[Any, Optional[np.ndarray]]:
    """An aclTensor viewing `array` (destroyed when `cleanup` unwinds), and the
    array it points into.

    The returned array must outlive the tensor: it is `array` itself or, when
    the C API cannot express the view (negative strides, byte strides that are
    not a whole number of elements, a misaligned address), a C-ordered copy.
    """
    if array is None:
        return ffi.NULL, None
    itemsize = array.itemsize
    # Strides of dims with extent <= 1 are never followed, so they never force a
    # copy; a misaligned address would be undefined behaviour in C, so it does.
    if not array.flags.aligned or any(
        n > 1 and (s < 0 or s % itemsize) for n, s in zip(array.shape, array.strides)
    ):
        array = np.array(array, order="C", copy=True)

    contiguous = _contiguous_strides(array.shape)
    strides = [s // itemsize if n > 1 else c for n, s, c in zip(array.shape, array.strides, contiguous)]
    address = array.__array_interface__["data"][0]
    if array.size == 0:
        storage, offset = 0, 0
    else:
        # Storage = the span from the lowest to the highest touched element;
        # the view's first element sits `offset` elements into it.
        low = sum((n - 1) * e for n, e in zip(array.shape, strides) if e < 0)
        high = sum((n - 1) * e for n, e in zip(array.shape, strides) if e > 0)
        storage, offset = high - low + 1, -low
        address += low * itemsize
    _declare_host_memory(address, storage * itemsize, cleanup)

    tensor = lib.aclCreateTensor(
        ffi.new("int64_t[]", list(array.shape)),
        array.ndim,
        acl_dtype(array.dtype),
        ffi.new("int64_t[]", strides),
        offset,
        lib.ACL_FORMAT_ND,
        ffi.new("int64_t[]", [storage]),
        1,
        ffi.cast("void *", address),
    )
    check_created(tensor)
    tensor = ffi.gc(tensor, lib.aclDestroyTensor)
    cleanup.callback(ffi.release, tensor)
    return tensor, array


def _workspace(size: int, cleanup: contextlib.ExitStack) -> Tuple[Optional[np.ndarray], Any]:
    """Host memory for phase 2 and its aligned address (NULL when size is 0).

    A numpy buffer rather than aclrtMalloc: the runtime's allocator needs
    aclInit and a device, which this function promises not to require.
    """
    if size == 0:
        return None, ffi.NULL
    buffer = np.empty(size + _WORKSPACE_ALIGNMENT - 1, dtype=np.uint8)
    address = -buffer.ctypes.data % _WORKSPACE_ALIGNMENT + buffer.ctypes.data
    _declare_host_memory(address, size, cleanup)
    return buffer, ffi.cast("void *", address)


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
    # Unwinds in reverse: tensors, then the memory declarations.
    with contextlib.ExitStack() as cleanup:
        tensors: List[Any] = []
        backings: List[Optional[np.ndarray]] = []
        for array in operands + grads:
            tensor, backing = _create_tensor(array, cleanup)
            tensors.append(tensor)
            backings.append(backing)
        self_, input_, weight_, bias_, grad_input, grad_weight, grad_bias = tensors

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
            workspace, workspace_address = _workspace(workspace_size[0], cleanup)
            check(lib.aclnnConvTbcBackward(workspace_address, workspace_size[0], executor, ffi.NULL))
        except BaseException:
            _discard_executor(executor)
            raise
        # Phase 2 ran on the NULL stream: at once on a thread without a current
        # context, queued on the context's default stream otherwise. Wait, so
        # that the results are complete and the memory can be let go.
        check(lib.convtbcSynchronizeCurrent(), AclError)
        # `backings` and `workspace` stay referenced until here: the C side
        # holds raw pointers into them.
    return tuple(grads)  # type: ignore[return-value]
