"""conv_tbc_backward on a CANN toolkit, through CANN's public API only.

What a CANN host program does, for each call: the runtime is initialised
once per process (aclInit) and each calling thread sets device 0 once; then
a stream, aclrtMalloc'd device memory for every tensor, aclrtMemcpy host to
device, aclCreateTensor, the two phases (workspace size and executor, then
the run on the stream), a stream synchronisation, aclrtMemcpy device to host
of the gradients, and every free and destroy. No convtbc extension is used,
so it runs on a real toolkit as on convtbc's tree used as one.

The arrays come already normalised by ops.py; checking them is left to the
operator, so errors carry CANN's own status and message.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from . import _library
from .errors import AclError, check, check_created, recent_error_message

# numpy dtype name -> ACL dtype constant. Dtypes the operator rejects are
# listed too, so that the operator reports them with its own status.
_ACL_DTYPE_NAMES = {
    "float32": "ACL_FLOAT",
    "float16": "ACL_FLOAT16",
    "bfloat16": "ACL_BF16",
    "float64": "ACL_DOUBLE",
    "int8": "ACL_INT8",
    "int16": "ACL_INT16",
    "int32": "ACL_INT32",
    "int64": "ACL_INT64",
    "uint8": "ACL_UINT8",
    "uint16": "ACL_UINT16",
    "uint32": "ACL_UINT32",
    "uint64": "ACL_UINT64",
    "bool": "ACL_BOOL",
    "complex64": "ACL_COMPLEX64",
    "complex128": "ACL_COMPLEX128",
    "float8_e5m2": "ACL_FLOAT8_E5M2",
    "float8_e4m3fn": "ACL_FLOAT8_E4M3FN",
}

DEVICE_ID = 0

_runtime_lock = threading.Lock()
_runtime_started: List[bool] = []
_thread_state = threading.local()


def _finalize() -> None:
    _library.lib.aclFinalize()


def _start_runtime() -> None:
    """aclInit once per process (unless the caller's own code already did),
    aclrtSetDevice once per thread (a thread's current context is its own)."""
    lib, ffi = _library.lib, _library.ffi
    if not _runtime_started:
        with _runtime_lock:
            if not _runtime_started:
                status = lib.aclInit(ffi.NULL)
                if status == 0:
                    atexit.register(_finalize)
                elif status != lib.ACL_ERROR_REPEAT_INITIALIZE:
                    check(status, AclError)
                _runtime_started.append(True)
    if not getattr(_thread_state, "device_set", False):
        check(lib.aclrtSetDevice(DEVICE_ID), AclError)
        _thread_state.device_set = True


def _acl_dtype(dtype: np.dtype) -> int:
    name = _ACL_DTYPE_NAMES.get(dtype.name)
    if name is None:
        raise TypeError(f"dtype {dtype} has no ACL equivalent")
    return int(getattr(_library.lib, name))


def _c_order_strides(shape: Tuple[int, ...]) -> List[int]:
    strides: List[int] = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return strides[::-1]


def _device_tensor(host: np.ndarray, upload: bool, cleanup: contextlib.ExitStack) -> Tuple[Any, Any]:
    """aclrtMalloc'd memory of `host`'s size (filled from it if `upload`) and a
    C-ordered aclTensor over it, both released when `cleanup` closes.
    An empty tensor has no memory (NULL data), as CANN allows."""
    lib, ffi = _library.lib, _library.ffi
    data = ffi.NULL
    if host.nbytes:
        memory = ffi.new("void **")
        check(lib.aclrtMalloc(memory, host.nbytes, lib.ACL_MEM_MALLOC_HUGE_FIRST), AclError)
        data = memory[0]
        cleanup.callback(lib.aclrtFree, data)
        if upload:
            check(lib.aclrtMemcpy(data, host.nbytes, ffi.from_buffer(host), host.nbytes,
                                  lib.ACL_MEMCPY_HOST_TO_DEVICE), AclError)
    dims = ffi.new("int64_t[]", list(host.shape))
    strides = ffi.new("int64_t[]", _c_order_strides(host.shape))
    tensor = lib.aclCreateTensor(dims, host.ndim, _acl_dtype(host.dtype), strides, 0, lib.ACL_FORMAT_ND,
                                 dims, host.ndim, data)
    check_created(tensor)
    cleanup.callback(lib.aclDestroyTensor, tensor)
    return data, tensor


def _c_ordered(array: np.ndarray) -> np.ndarray:
    # Device memory holds C-ordered data; a view (transposed, sliced,
    # broadcast) is copied into that order first. (Not np.ascontiguousarray:
    # it turns a 0-d array into a 1-d one, which the operator must see as is.)
    return array if array.flags.c_contiguous else array.copy(order="C")


def conv_tbc_backward(
    operands: Sequence[Optional[np.ndarray]], pad: int, cube_math_type: int
) -> Tuple[Optional[np.ndarray], Optional[np.ndarray], Optional[np.ndarray]]:
    """(grad_input, grad_weight, grad_bias) of aclnnConvTbcBackward run on the
    CANN backend, for `operands` = (grad_output, input, weight, bias). A None
    operand is passed as a NULL tensor, and its gradient (for input, weight,
    bias) is None."""
    lib, ffi = _library.lib, _library.ffi
    _start_runtime()
    ordered = [None if a is None else _c_ordered(a) for a in operands]
    grads = [None if a is None else np.empty(a.shape, a.dtype) for a in ordered[1:]]
    # Every step registers its undoing, so nothing stays allocated whether
    # the call succeeds, is refused or raises.
    with contextlib.ExitStack() as cleanup:
        stream = ffi.new("aclrtStream *")
        check(lib.aclrtCreateStream(stream), AclError)
        cleanup.callback(lib.aclrtDestroyStream, stream[0])
        inputs = [ffi.NULL if a is None else _device_tensor(a, True, cleanup)[1] for a in ordered]
        outputs = [None if g is None else _device_tensor(g, False, cleanup) for g in grads]
        output_tensors = [ffi.NULL if o is None else o[1] for o in outputs]

        workspace_size = ffi.new("uint64_t *")
        executor = ffi.new("aclOpExecutor **")
        recent_error_message()  # an error must report this call's messages only
        check(lib.aclnnConvTbcBackwardGetWorkspaceSize(*inputs, pad, cube_math_type, *output_tensors,
                                                       workspace_size, executor))
        workspace = ffi.NULL
        if workspace_size[0]:
            memory = ffi.new("void **")
            check(lib.aclrtMalloc(memory, workspace_size[0], lib.ACL_MEM_MALLOC_HUGE_FIRST), AclError)
            workspace = memory[0]
            cleanup.callback(lib.aclrtFree, workspace)
        check(lib.aclnnConvTbcBackward(workspace, workspace_size[0], executor[0], stream[0]))
        check(lib.aclrtSynchronizeStream(stream[0]), AclError)

        for grad, output in zip(grads, outputs):
            if grad is not None and output is not None and grad.nbytes:
                check(lib.aclrtMemcpy(ffi.from_buffer(grad), grad.nbytes, output[0], grad.nbytes,
                                      lib.ACL_MEMCPY_DEVICE_TO_HOST), AclError)
    return grads[0], grads[1], grads[2]
