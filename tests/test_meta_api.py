"""The aclnn meta API through the raw C API: scalars of every dtype (read
back with convtbc's convtbcGetScalar), int/float/bool arrays, tensor and
scalar lists (which own their elements), the flat-index and Dynamic address
setters on a repeatable executor, and aclDumpOpTensors' argument checks.
Codes are CANN's: 161001 NULL argument, 161002 invalid argument, 561103 NULL
handle in an executor setter.
"""

import numpy as np
import pytest

from rawapi import Tensor, const, declare_host, ffi, lib, recent_msg
from reference import BF16, conv_tbc_backward_ref
from test_executor import KEEP, SENT, Op, phase2

OK, NULLPTR, INVALID, INNER_NULLPTR = 0, 161001, 161002, 561103


def read_scalar(scalar):
    dtype = ffi.new("aclDataType *")
    room = ffi.new("size_t *", 32)
    out = ffi.new("unsigned char[32]")
    assert lib.convtbcGetScalar(scalar, dtype, out, room) == OK, recent_msg()
    return int(dtype[0]), bytes(ffi.buffer(out, room[0]))


SCALARS = [
    (np.float32(1.5), "ACL_FLOAT"), (np.float16(-0.25), "ACL_FLOAT16"), (np.float64(-2.125), "ACL_DOUBLE"),
    (np.int8(-128), "ACL_INT8"), (np.uint8(255), "ACL_UINT8"), (np.int16(-30000), "ACL_INT16"),
    (np.uint16(65535), "ACL_UINT16"), (np.int32(-(2 ** 31)), "ACL_INT32"), (np.uint32(2 ** 32 - 1), "ACL_UINT32"),
    (np.int64(-(2 ** 63)), "ACL_INT64"), (np.uint64(2 ** 64 - 1), "ACL_UINT64"), (np.bool_(True), "ACL_BOOL"),
    (np.complex64(1 - 2j), "ACL_COMPLEX64"), (np.complex128(-3 + 0.5j), "ACL_COMPLEX128"),
    (np.uint8(0x7C), "ACL_HIFLOAT8"), (np.uint8(0x3C), "ACL_FLOAT8_E5M2"), (np.uint8(0x38), "ACL_FLOAT8_E4M3FN"),
]
if BF16 is not None:
    SCALARS.append((np.array(1.75, dtype=BF16)[()], "ACL_BF16"))


@pytest.mark.parametrize("value, code", SCALARS, ids=[c for _, c in SCALARS])
def test_scalar_round_trip(value, code):
    raw = np.array(value).tobytes()
    source = ffi.new("unsigned char[]", raw)
    scalar = lib.aclCreateScalar(source, const(code))
    assert scalar != ffi.NULL, recent_msg()
    ffi.memmove(source, b"\0" * len(raw), len(raw))  # the scalar keeps its own copy
    dtype, held = read_scalar(scalar)
    assert dtype == const(code)
    assert held == raw
    assert np.frombuffer(held, dtype=np.array(value).dtype)[0] == value
    assert lib.aclDestroyScalar(scalar) == OK


@pytest.mark.parametrize("code", [13, 29, 30, 33, -1, 42, 1000])  # STRING INT4 UINT1 COMPLEX32 UNDEFINED, unknown
def test_scalar_dtype_refused(code):
    value = ffi.new("double *", 1.0)
    assert lib.aclCreateScalar(value, code) == ffi.NULL
    msg = recent_msg()
    assert "aclCreateScalar" in msg and "dataType" in msg


def test_scalar_null_value():
    assert lib.aclCreateScalar(ffi.NULL, const("ACL_FLOAT")) == ffi.NULL
    assert "value" in recent_msg()
    assert lib.aclDestroyScalar(ffi.NULL) == OK


@pytest.mark.parametrize("kind, ctype, values", [
    ("Int", "int64_t[]", [5, -6, 7, 2 ** 62]), ("Float", "float[]", [0.5, -1.0, 3.25]),
    ("Bool", "bool[]", [True, False, True, True, False])])
def test_arrays(kind, ctype, values):
    create, size_of, destroy = (getattr(lib, f"acl{op}{kind}Array{s}") for op, s in
                                (("Create", ""), ("Get", "Size"), ("Destroy", "")))
    array = create(ffi.new(ctype, values), len(values))
    assert array != ffi.NULL, recent_msg()
    size = ffi.new("uint64_t *")
    assert size_of(array, size) == OK and size[0] == len(values)
    assert size_of(ffi.NULL, size) == NULLPTR
    assert size_of(array, ffi.NULL) == NULLPTR
    assert destroy(array) == OK
    assert destroy(ffi.NULL) == OK
    empty = create(ffi.NULL, 0)
    assert empty != ffi.NULL and size_of(empty, size) == OK and size[0] == 0
    destroy(empty)
    assert create(ffi.NULL, 3) == ffi.NULL and "value" in recent_msg()
    assert create(ffi.new(ctype, values), 2 ** 64 - 1) == ffi.NULL and "too large" in recent_msg()


def fresh_tensor(n=4):
    """An aclTensor (no storage needed: it is never run) for a list to own."""
    dims = ffi.new("int64_t[]", [n])
    t = lib.aclCreateTensor(dims, 1, const("ACL_FLOAT"), ffi.NULL, 0, const("ACL_FORMAT_ND"), dims, 1, ffi.NULL)
    assert t != ffi.NULL, recent_msg()
    return t


def test_tensor_list_size_and_refusals():
    items = ffi.new("aclTensor *[]", [fresh_tensor(), fresh_tensor(2), ffi.NULL, fresh_tensor(8)])
    tl = lib.aclCreateTensorList(items, 4)
    assert tl != ffi.NULL, recent_msg()
    size = ffi.new("uint64_t *")
    assert lib.aclGetTensorListSize(tl, size) == OK and size[0] == 4
    assert lib.aclGetTensorListSize(ffi.NULL, size) == NULLPTR
    assert lib.aclDestroyTensorList(tl) == OK  # destroys its three tensors
    assert lib.aclDestroyTensorList(ffi.NULL) == OK

    t = fresh_tensor()
    twice = ffi.new("aclTensor *[]", [t, t])
    assert lib.aclCreateTensorList(twice, 2) == ffi.NULL
    assert "more than once" in recent_msg()
    lib.aclDestroyTensor(t)
    assert lib.aclCreateTensorList(ffi.NULL, 1) == ffi.NULL
    assert "value" in recent_msg()


def test_scalar_list_size_and_refusals():
    a, b = ffi.new("float *", 2.0), ffi.new("int64_t *", 9)
    items = ffi.new("aclScalar *[]", [lib.aclCreateScalar(a, const("ACL_FLOAT")),
                                      lib.aclCreateScalar(b, const("ACL_INT64"))])
    sl = lib.aclCreateScalarList(items, 2)
    assert sl != ffi.NULL, recent_msg()
    size = ffi.new("uint64_t *")
    assert lib.aclGetScalarListSize(sl, size) == OK and size[0] == 2
    assert lib.aclGetScalarListSize(sl, ffi.NULL) == NULLPTR
    assert lib.aclDestroyScalarList(sl) == OK  # destroys both scalars
    s = lib.aclCreateScalar(a, const("ACL_FLOAT"))
    assert lib.aclCreateScalarList(ffi.new("aclScalar *[]", [s, s]), 2) == ffi.NULL
    recent_msg()
    lib.aclDestroyScalar(s)


def declared(array):
    KEEP.append(array)
    declare_host(array.ctypes.data, array.nbytes)
    return ffi.cast("void *", array.ctypes.data)


def raw_address(tensor_ptr):
    out = ffi.new("void **")
    assert lib.aclGetRawTensorAddr(tensor_ptr, out) == OK
    return out[0]


@pytest.mark.parametrize("setter", ["aclSetTensorAddr", "AclSetTensorAddr"])
def test_set_tensor_addr_counts_inputs_then_outputs(setter, rng):
    op = Op(rng)
    p1 = op.phase1()
    assert p1.status == OK, p1.message
    assert lib.aclSetAclOpExecutorRepeatable(p1.executor) == OK
    new_w = rng.uniform(-2, 2, size=op.w.size).astype(np.float32)
    new_gb = np.full(op.outs[2].storage.size, SENT, np.float32)
    fn = getattr(lib, setter)
    assert fn(p1.executor, 2, op.t_w.ptr, declared(new_w)) == OK  # weight
    assert fn(p1.executor, 6, op.outs[2].ptr, declared(new_gb)) == OK  # gradBias: 4 inputs, then outputs
    assert raw_address(op.outs[2].ptr) == ffi.cast("void *", new_gb.ctypes.data)
    assert phase2(p1) == OK
    w = new_w.reshape(op.w.shape)
    gi, gw, gb = conv_tbc_backward_ref(op.go, op.x, w, op.pad)
    np.testing.assert_allclose(new_gb, gb, rtol=1e-5, atol=1e-5)
    assert np.all(op.outs[2].storage == SENT), "the old gradBias address was written"
    np.testing.assert_allclose(op.outs[0].view(), gi, rtol=1e-5, atol=1e-5)
    assert fn(p1.executor, 7, op.outs[2].ptr, declared(new_gb)) == INVALID
    assert setter in recent_msg()
    assert fn(ffi.NULL, 0, op.t_go.ptr, ffi.NULL) == INNER_NULLPTR
    assert fn(p1.executor, 0, ffi.NULL, ffi.NULL) == INNER_NULLPTR
    assert lib.aclDestroyAclOpExecutor(p1.executor) == OK


def test_dynamic_setters(rng):
    op = Op(rng)
    p1 = op.phase1()
    assert p1.status == OK, p1.message
    assert lib.aclSetAclOpExecutorRepeatable(p1.executor) == OK
    # A list owns its tensors: the Python wrapper must not destroy t_x too.
    lx = lib.aclCreateTensorList(ffi.new("aclTensor *[]", [op.t_x.ptr]), 1)
    lgi = lib.aclCreateTensorList(ffi.new("aclTensor *[]", [op.outs[0].ptr]), 1)
    x_keep, gi_keep = op.t_x, op.outs[0]
    x_keep.ptr = gi_keep.ptr = None
    new_x = rng.uniform(-2, 2, size=op.x.size).astype(np.float32)
    new_gi = np.full(op.x.size, SENT, np.float32)
    assert lib.aclSetDynamicInputTensorAddr(p1.executor, 1, 0, lx, declared(new_x)) == OK
    assert lib.aclSetDynamicTensorAddr(p1.executor, 4, 0, lgi, declared(new_gi)) == OK  # gradInput
    assert phase2(p1) == OK
    gi, gw, _ = conv_tbc_backward_ref(op.go, new_x.reshape(op.x.shape), op.w, op.pad)
    np.testing.assert_allclose(new_gi.reshape(op.x.shape), gi, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(op.outs[1].view(), gw, rtol=1e-5, atol=1e-5)

    # CANN's codes: NULL list or executor 561103; indexes out of range 161002;
    # a list whose tensor is not the op's tensor at irIndex 161002.
    addr = declared(np.zeros(64, np.float32))
    for name in ("aclSetDynamicInputTensorAddr", "AclSetDynamicInputTensorAddr"):
        fn = getattr(lib, name)
        assert fn(p1.executor, 1, 0, ffi.NULL, addr) == INNER_NULLPTR
        assert fn(ffi.NULL, 1, 0, lx, addr) == INNER_NULLPTR
        assert fn(p1.executor, 1, 1, lx, addr) == INVALID
        assert fn(p1.executor, 4, 0, lx, addr) == INVALID
        assert fn(p1.executor, 2, 0, lx, addr) == INVALID
        assert "no dynamic" in recent_msg()
    for name in ("aclSetDynamicOutputTensorAddr", "AclSetDynamicOutputTensorAddr"):
        fn = getattr(lib, name)
        assert fn(p1.executor, 3, 0, lgi, addr) == INVALID
        assert fn(p1.executor, 0, 0, lgi, declared(new_gi)) == OK
    assert lib.aclSetDynamicTensorAddr(p1.executor, 7, 0, lgi, addr) == INVALID
    assert lib.AclSetDynamicTensorAddr(p1.executor, 0, 0, lgi, addr) == INVALID  # 0 is self
    recent_msg()
    assert lib.aclDestroyAclOpExecutor(p1.executor) == OK
    assert lib.aclDestroyTensorList(lx) == OK
    assert lib.aclDestroyTensorList(lgi) == OK


def test_dump_argument_checks():
    t = Tensor(np.zeros(4, np.float32), (4,))
    tensors = ffi.new("aclTensor *[]", [t.ptr, ffi.NULL])
    stream = ffi.cast("aclrtStream", 1)
    assert lib.aclDumpOpTensors(ffi.NULL, b"n", tensors, 1, 0, stream) == NULLPTR
    assert lib.aclDumpOpTensors(b"T", ffi.NULL, tensors, 1, 0, stream) == NULLPTR
    assert lib.aclDumpOpTensors(b"T", b"n", ffi.NULL, 1, 0, stream) == NULLPTR
    assert lib.aclDumpOpTensors(b"T", b"n", tensors, 1, 0, ffi.NULL) == NULLPTR
    assert "stream" in recent_msg()
    assert lib.aclDumpOpTensors(b"T", b"n", tensors, 1, 0, stream) == INVALID  # not a live stream
    assert "stream" in recent_msg()
