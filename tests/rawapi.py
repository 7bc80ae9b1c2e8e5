"""Thin helpers over the raw C API (convtbc_py.ffi / convtbc_py.lib) for tests
that need what the numpy-level wrapper cannot express: specific formats,
NULL arguments, output views, executors.

Tensors here are backed by numpy arrays (the library runs on the host);
the helpers keep those arrays alive for as long as the tensor objects.
"""

import numpy as np

import convtbc_py
from reference import BF16

ffi = convtbc_py.ffi
lib = convtbc_py.lib

ACL_CODE = {
    np.dtype(np.float32): "ACL_FLOAT",
    np.dtype(np.float16): "ACL_FLOAT16",
    np.dtype(np.float64): "ACL_DOUBLE",
    np.dtype(np.int32): "ACL_INT32",
    np.dtype(np.int8): "ACL_INT8",
    np.dtype(np.complex64): "ACL_COMPLEX64",
    np.dtype(np.complex128): "ACL_COMPLEX128",
}
if BF16 is not None:
    ACL_CODE[BF16] = "ACL_BF16"

# For a dtype code without a numpy twin, the element size used to size
# storage in the tests.
ELEM_SIZE = {
    "ACL_FLOAT": 4, "ACL_FLOAT16": 2, "ACL_BF16": 2, "ACL_DOUBLE": 8, "ACL_INT32": 4,
    "ACL_INT8": 1, "ACL_COMPLEX64": 8, "ACL_COMPLEX128": 16, "ACL_DT_UNDEFINED": 4,
    "ACL_UINT64": 8, "ACL_HIFLOAT8": 1, "ACL_FLOAT8_E4M3FN": 1, "ACL_FLOAT8_E5M2": 1,
    "ACL_INT64": 8, "ACL_BOOL": 1, "ACL_UINT8": 1, "ACL_INT16": 2,
}


# libconvtbc may check that tensor data and workspaces are device memory
# (aclrtMalloc blocks); host buffers are then declared through its extension
# call, as the numpy bindings do. Older builds have no such check.
_DECLARE = getattr(lib, "convtbcDeclareHostMemory", None) if hasattr(lib, "convtbcDeclareHostMemory") else None
_FORGET = getattr(lib, "convtbcForgetHostMemory", None) if hasattr(lib, "convtbcForgetHostMemory") else None
_KEEP_WORKSPACES = []


def declare_host(address, nbytes):
    """Declare [address, address+nbytes) as usable by the op (no-op on builds
    without memory checking). Returns True if something must be forgotten."""
    if _DECLARE is None or nbytes == 0:
        return False
    st = _DECLARE(ffi.cast("void *", address), nbytes)
    assert st == 0, f"convtbcDeclareHostMemory failed: {st}"
    return True


def forget_host(address):
    if _FORGET is not None:
        _FORGET(ffi.cast("void *", address))


def const(name):
    return getattr(lib, name)


def recent_msg():
    """aclGetRecentErrMsg() as a str ('' for NULL)."""
    p = lib.aclGetRecentErrMsg()
    return "" if p == ffi.NULL else ffi.string(p).decode("utf-8", "replace")


def aligned_zeros(nbytes, align=64):
    """A uint8 numpy array of nbytes whose data pointer is `align`-aligned."""
    raw = np.zeros(nbytes + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + nbytes]


class Tensor:
    """An aclTensor over (a view of) a numpy storage array.

    storage: 1-D numpy array holding the elements (its dtype gives the
    element size); shape/strides/offset in elements; dtype_code/fmt are
    the names of ACL constants.
    """

    def __init__(self, storage, shape, strides=None, offset=0, dtype_code=None,
                 fmt="ACL_FORMAT_ND", storage_dims=None, data=True):
        self.storage = storage
        self.shape = tuple(int(s) for s in shape)
        if strides is None:
            strides = contiguous_strides(self.shape)
        self.strides = tuple(int(s) for s in strides)
        self.offset = int(offset)
        if dtype_code is None:
            dtype_code = ACL_CODE[storage.dtype]
        self.dtype_code = dtype_code
        self.fmt = fmt
        if storage_dims is None:
            storage_dims = (storage.size,) if storage is not None else (0,)
        self.storage_dims = tuple(int(s) for s in storage_dims)
        self._dims = ffi.new("int64_t[]", list(self.shape) or [0])
        self._strides = ffi.new("int64_t[]", list(self.strides) or [0])
        self._sdims = ffi.new("int64_t[]", list(self.storage_dims) or [0])
        self._declared = None
        if storage is not None and data and storage.size:
            self._data = ffi.cast("void *", storage.ctypes.data)
            if declare_host(storage.ctypes.data, storage.nbytes):
                self._declared = storage.ctypes.data
        elif storage is not None and data:
            self._keep = ffi.new("char[64]")
            self._data = ffi.cast("void *", self._keep)
        else:
            self._data = ffi.NULL
        self.ptr = lib.aclCreateTensor(
            self._dims, len(self.shape), const(dtype_code), self._strides, self.offset,
            const(fmt), self._sdims, len(self.storage_dims), self._data)
        assert self.ptr != ffi.NULL, (
            f"aclCreateTensor refused a valid tensor {self.shape} {self.strides} "
            f"{self.offset} {dtype_code} {fmt}: {recent_msg()}")

    def view(self):
        """The numpy view the tensor describes (for reading results)."""
        item = self.storage.itemsize
        return np.lib.stride_tricks.as_strided(
            self.storage[self.offset:], shape=self.shape,
            strides=tuple(s * item for s in self.strides))

    def destroy(self):
        if self.ptr is not None and self.ptr != ffi.NULL:
            lib.aclDestroyTensor(self.ptr)
        self.ptr = None
        if getattr(self, "_declared", None) is not None:
            forget_host(self._declared)
            self._declared = None

    def __del__(self):
        try:
            self.destroy()
        except Exception:
            pass


def contiguous_strides(shape):
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(int(d), 1)
    return tuple(reversed(strides))


def tensor_from_array(a, fmt="ACL_FORMAT_ND", dtype_code=None):
    """A contiguous tensor holding a copy of numpy array `a`."""
    a = np.ascontiguousarray(a)
    flat = a.reshape(-1).copy()
    return Tensor(flat, a.shape, fmt=fmt, dtype_code=dtype_code,
                  storage_dims=a.shape if a.ndim else (1,))


def empty_tensor(shape, dtype, fmt="ACL_FORMAT_ND", fill=0):
    n = int(np.prod(shape)) if len(shape) else 1
    flat = np.full(n, fill, dtype=dtype)
    return Tensor(flat, shape, fmt=fmt, storage_dims=shape)


def ptr(t):
    """ffi pointer of a Tensor, or NULL for None."""
    return ffi.NULL if t is None else t.ptr


class Phase1:
    """Result of aclnnConvTbcBackwardGetWorkspaceSize."""

    def __init__(self, status, ws_size, executor, message, keep=()):
        self.keep = keep  # the tensors (and their storage) outlive the executor's use
        self.status = status
        self.ws_size = ws_size
        self.executor = executor
        self.message = message


def phase1(self_t, input_t, weight_t, bias_t, pad, cube=0, gi=None, gw=None, gb=None,
           ws_size_null=False, executor_null=False):
    ws = ffi.NULL if ws_size_null else ffi.new("uint64_t *", 12345)
    ex = ffi.NULL if executor_null else ffi.new("aclOpExecutor **")
    recent_msg()  # clear anything older
    st = lib.aclnnConvTbcBackwardGetWorkspaceSize(
        ptr(self_t), ptr(input_t), ptr(weight_t), ptr(bias_t), pad, cube,
        ptr(gi), ptr(gw), ptr(gb), ws, ex)
    msg = recent_msg() if st != 0 else ""
    return Phase1(st, None if ws_size_null else int(ws[0]),
                  None if executor_null else ex[0], msg,
                  keep=(self_t, input_t, weight_t, bias_t, gi, gw, gb))


def workspace_for(size):
    """(pointer, keep-alive) for a 64-byte aligned host workspace."""
    if size == 0:
        return ffi.NULL, None
    buf = aligned_zeros(size)
    if declare_host(buf.ctypes.data, buf.nbytes):
        _KEEP_WORKSPACES.append(buf)  # declared for the life of the process
    return ffi.cast("void *", buf.ctypes.data), buf


def phase2(p1, workspace_size=None, workspace=None):
    if workspace_size is None:
        workspace_size = p1.ws_size
    keep = None
    if workspace is None:
        workspace, keep = workspace_for(workspace_size)
    st = lib.aclnnConvTbcBackward(workspace, workspace_size, p1.executor, ffi.NULL)
    del keep
    return st


def run_op(self_t, input_t, weight_t, bias_t, pad, cube=0, gi=None, gw=None, gb=None):
    """Both phases; returns (status, message) of the first failing phase."""
    p1 = phase1(self_t, input_t, weight_t, bias_t, pad, cube, gi, gw, gb)
    if p1.status != 0:
        return p1.status, p1.message
    st = phase2(p1)
    return st, (recent_msg() if st else "")


class Problem:
    """The nine tensors of one call, contiguous, from numpy operands."""

    def __init__(self, go, x, w, bias, fmt_in="ACL_FORMAT_ND", fmt_out="ACL_FORMAT_ND",
                 out_dtypes=None, fill=0):
        self.go = tensor_from_array(go, fmt_in)
        self.x = tensor_from_array(x, fmt_in)
        self.w = tensor_from_array(w, fmt_in)
        self.b = tensor_from_array(bias, "ACL_FORMAT_ND")
        if out_dtypes is None:
            out_dtypes = (x.dtype, w.dtype, bias.dtype)
        self.gi = empty_tensor(x.shape, out_dtypes[0], fmt_out, fill)
        self.gw = empty_tensor(w.shape, out_dtypes[1], fmt_out, fill)
        self.gb = empty_tensor(bias.shape, out_dtypes[2], "ACL_FORMAT_ND", fill)

    def args(self):
        return self.go, self.x, self.w, self.b

    def outs(self):
        return dict(gi=self.gi, gw=self.gw, gb=self.gb)

    def results(self):
        return self.gi.view().copy(), self.gw.view().copy(), self.gb.view().copy()
