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
from typing import Any, Callable, List, Optional, Sequence, Tuple

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


def device_tensor(host: np.ndarray, upload: bool, cleanup: contextlib.ExitStack,
                  format_name: str = "ND") -> Tuple[Any, Any]:
    """aclrtMalloc'd memory of C-ordered `host`'s size (filled from it if
    `upload`) and an aclTensor over it (format ACL_FORMAT_<format_name>),
    both released when `cleanup` closes; returns (memory, tensor). An empty
    tensor has no memory (NULL data), as CANN allows."""
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
    tensor = lib.aclCreateTensor(dims, host.ndim, _acl_dtype(host.dtype), strides, 0,
                                 getattr(lib, f"ACL_FORMAT_{format_name}"), dims, host.ndim, data)
    check_created(tensor)
    cleanup.callback(lib.aclDestroyTensor, tensor)
    return data, tensor


def _c_ordered(array: np.ndarray) -> np.ndarray:
    # Device memory holds C-ordered data; a view (transposed, sliced,
    # broadcast) is copied into that order first. (Not np.ascontiguousarray:
    # it turns a 0-d array into a 1-d one, which the operator must see as is.)
    return array if array.flags.c_contiguous else array.copy(order="C")


def _run(phase1: str, phase2: str, inputs: Sequence[Optional[np.ndarray]], outputs: Sequence[Optional[np.ndarray]],
         arguments: Callable[[List[Any], List[Any]], Sequence[Any]]) -> None:
    """Both phases of an operator on the device: `inputs` uploaded, the host
    arrays `outputs` filled from the device afterwards (None: a NULL
    tensor); `arguments(input_tensors, output_tensors)` gives phase 1's
    arguments up to its workspaceSize and executor."""
    lib, ffi = _library.lib, _library.ffi
    _start_runtime()
    # Every step registers its undoing, so nothing stays allocated whether
    # the call succeeds, is refused or raises.
    with contextlib.ExitStack() as cleanup:
        stream = ffi.new("aclrtStream *")
        check(lib.aclrtCreateStream(stream), AclError)
        cleanup.callback(lib.aclrtDestroyStream, stream[0])
        input_tensors = [ffi.NULL if a is None else device_tensor(_c_ordered(a), True, cleanup)[1] for a in inputs]
        on_device = [None if a is None else device_tensor(a, False, cleanup) for a in outputs]
        output_tensors = [ffi.NULL if d is None else d[1] for d in on_device]

        workspace_size = ffi.new("uint64_t *")
        executor = ffi.new("aclOpExecutor **")
        recent_error_message()  # an error must report this call's messages only
        check(getattr(lib, phase1)(*arguments(input_tensors, output_tensors), workspace_size, executor))
        workspace = ffi.NULL
        if workspace_size[0]:
            memory = ffi.new("void **")
            check(lib.aclrtMalloc(memory, workspace_size[0], lib.ACL_MEM_MALLOC_HUGE_FIRST), AclError)
            workspace = memory[0]
            cleanup.callback(lib.aclrtFree, workspace)
        check(getattr(lib, phase2)(workspace, workspace_size[0], executor[0], stream[0]))
        check(lib.aclrtSynchronizeStream(stream[0]), AclError)

        for host, device in zip(outputs, on_device):
            if host is not None and device is not None and host.nbytes:
                check(lib.aclrtMemcpy(ffi.from_buffer(host), host.nbytes, device[0], host.nbytes,
                                      lib.ACL_MEMCPY_DEVICE_TO_HOST), AclError)


def conv_tbc_backward(
    operands: Sequence[Optional[np.ndarray]], pad: int, cube_math_type: int
) -> Tuple[Optional[np.ndarray], Optional[np.ndarray], Optional[np.ndarray]]:
    """(grad_input, grad_weight, grad_bias) of aclnnConvTbcBackward run on the
    CANN backend, for `operands` = (grad_output, input, weight, bias). A None
    operand is passed as a NULL tensor, and its gradient (for input, weight,
    bias) is None."""
    grads = [None if a is None else np.empty(a.shape, a.dtype) for a in operands[1:]]
    _run("aclnnConvTbcBackwardGetWorkspaceSize", "aclnnConvTbcBackward", operands, grads,
         lambda inputs, outputs: (*inputs, pad, cube_math_type, *outputs))
    return grads[0], grads[1], grads[2]


def conv_tbc(operands: Sequence[Optional[np.ndarray]], out: np.ndarray, pad: int, cube_math_type: int) -> np.ndarray:
    """`out` filled by aclnnConvTbc (the forward op) run on the CANN backend,
    for `operands` = (input, weight, bias); a None operand is a NULL tensor."""
    _run("aclnnConvTbcGetWorkspaceSize", "aclnnConvTbc", operands, [out],
         lambda inputs, outputs: (*inputs, pad, outputs[0], cube_math_type))
    return out
