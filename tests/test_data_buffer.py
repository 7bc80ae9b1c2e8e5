"""aclDataBuffer (hicann/runtime acl_base_rt.h): a (data, size) pair that
only describes memory the caller owns. aclCreateDataBuffer takes any
pointer and size; aclGetDataBufferAddr / aclGetDataBufferSizeV2 give them
back (NULL / 0 for a NULL buffer); the deprecated aclGetDataBufferSize gives
the size as uint32_t; aclUpdateDataBuffer replaces both; aclDestroyDataBuffer
frees the descriptor only. A NULL buffer (and here any pointer that is not a
live buffer) is ACL_ERROR_INVALID_PARAM for the calls that return a code.
"""

import numpy as np

from rawapi import ffi, lib, recent_msg

ACL_ERROR_INVALID_PARAM = 100000


def test_getters_update_and_destroy():
    data = np.arange(16, dtype=np.float32)
    ptr = ffi.cast("void *", data.ctypes.data)
    buf = lib.aclCreateDataBuffer(ptr, data.nbytes)
    assert buf != ffi.NULL
    assert lib.aclGetDataBufferAddr(buf) == ptr
    assert lib.aclGetDataBufferSizeV2(buf) == 64
    assert lib.aclGetDataBufferSize(buf) == 64
    other = np.zeros(3, np.float64)
    optr = ffi.cast("void *", other.ctypes.data)
    assert lib.aclUpdateDataBuffer(buf, optr, other.nbytes) == 0
    assert lib.aclGetDataBufferAddr(buf) == optr
    assert lib.aclGetDataBufferSizeV2(buf) == 24
    assert lib.aclDestroyDataBuffer(buf) == 0
    assert np.array_equal(data, np.arange(16, dtype=np.float32))  # the memory stays the caller's
    assert lib.aclDestroyDataBuffer(buf) == ACL_ERROR_INVALID_PARAM
    assert "aclDestroyDataBuffer" in recent_msg()
    assert lib.aclGetDataBufferAddr(buf) == ffi.NULL
    assert lib.aclGetDataBufferSizeV2(buf) == 0
    assert lib.aclUpdateDataBuffer(buf, optr, 8) == ACL_ERROR_INVALID_PARAM


def test_any_pointer_and_size():
    empty = lib.aclCreateDataBuffer(ffi.NULL, 0)
    assert empty != ffi.NULL
    assert lib.aclGetDataBufferAddr(empty) == ffi.NULL and lib.aclGetDataBufferSizeV2(empty) == 0
    assert lib.aclDestroyDataBuffer(empty) == 0
    # Only described, never touched: a size past 4 GiB is kept whole by the
    # V2 getter and cut to 32 bits by the deprecated one.
    big = lib.aclCreateDataBuffer(ffi.cast("void *", 0x1000), (1 << 32) + 5)
    assert lib.aclGetDataBufferSizeV2(big) == (1 << 32) + 5
    assert lib.aclGetDataBufferSize(big) == 5
    assert lib.aclDestroyDataBuffer(big) == 0


def test_null_buffer():
    assert lib.aclDestroyDataBuffer(ffi.NULL) == ACL_ERROR_INVALID_PARAM
    assert lib.aclUpdateDataBuffer(ffi.NULL, ffi.NULL, 0) == ACL_ERROR_INVALID_PARAM
    assert lib.aclGetDataBufferAddr(ffi.NULL) == ffi.NULL
    assert lib.aclGetDataBufferSize(ffi.NULL) == 0
    assert lib.aclGetDataBufferSizeV2(ffi.NULL) == 0
    assert "dataBuffer" in recent_msg()


def test_made_up_pointer_is_refused():
    fake = ffi.new("char[64]")
    assert lib.aclDestroyDataBuffer(ffi.cast("aclDataBuffer *", fake)) == ACL_ERROR_INVALID_PARAM
    assert lib.aclGetDataBufferSizeV2(ffi.cast("aclDataBuffer *", fake)) == 0
