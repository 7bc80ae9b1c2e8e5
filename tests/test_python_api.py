"""The Python package's surface: conv_tbc_backward's errors and dtypes,
the exception classes, ffi/lib against the published ACL constants, the
`convtbc` console script (demo, config) and the installed CANN-shaped
tree (headers identical to the repository's, compilable as C11 and C++11).
"""

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import convtbc_py
from conftest import REPO_ROOT
from reference import BF16, assert_close, conv_tbc_backward_ref

HEADERS = ["acl/acl.h", "acl/acl_base.h", "acl/acl_base_rt.h", "acl/acl_rt.h", "acl/acl_rt_allocator.h",
           "acl/error_codes/rt_error_codes.h", "acl/error_codes/ge_error_codes.h", "aclnn/acl_meta.h",
           "aclnn/aclnn_base.h", "aclnn/opdev/op_errno.h", "aclnnop/aclnn_util.h",
           "aclnnop/aclnn_convolution_backward.h"]


def ops(dt=np.float32, T=5, B=2, C_in=3, K=2, C_out=4, pad=1):
    rng = np.random.default_rng(7)
    T_out = T + 2 * pad + 1 - K
    mk = lambda s: rng.uniform(-1, 1, size=s).astype(np.float32).astype(dt)  # noqa: E731
    return mk((T_out, B, C_out)), mk((T, B, C_in)), mk((K, C_in, C_out)), mk((C_out,)), pad


def raises(status, *args, **kw):
    with pytest.raises(convtbc_py.AclnnError) as ei:
        convtbc_py.conv_tbc_backward(*args, **kw)
    e = ei.value
    assert e.status == status, (e.status, e.message)
    return e


# --------------------------------------------------------------------------
# conv_tbc_backward errors


@pytest.mark.parametrize("dt", [np.float64, np.int32, np.complex64])
@pytest.mark.parametrize("slot", [0, 1, 2, 3])
def test_unsupported_dtype(dt, slot):
    args = list(ops())
    args[slot] = args[slot].astype(dt)
    e = raises(161002, *args)
    assert e.name == "ACLNN_ERR_PARAM_INVALID"
    assert e.message.startswith("EZ1001")
    assert ["self", "input", "weight", "bias"][slot] in e.message, e.message


def test_error_attributes():
    go, x, w, b, pad = ops()
    e = raises(161002, go, x, w, b[:3], pad)
    assert isinstance(e, convtbc_py.AclnnError)
    assert e.name == "ACLNN_ERR_PARAM_INVALID"
    assert "bias" in e.message
    assert "bias" in str(e)


@pytest.mark.parametrize("cube", [-1, 4, 100])
def test_bad_cube_math_type(cube):
    e = raises(161002, *ops(), cube_math_type=cube)
    assert "cubeMathType" in e.message


def test_negative_pad():
    go, x, w, b, _ = ops(pad=0)
    e = raises(161002, go, x, w, b, -1)
    assert "pad" in e.message


@pytest.mark.parametrize("bad", ["self_T", "self_B", "self_C", "input_C", "rank"])
def test_shape_errors(bad):
    go, x, w, b, pad = ops()
    if bad == "self_T":
        go = go[1:]
    elif bad == "self_B":
        go = go[:, :1]
    elif bad == "self_C":
        go = go[:, :, :3]
    elif bad == "input_C":
        x = x[:, :, :2]
    elif bad == "rank":
        x = x[0]
    raises(161002, go, x, w, b, pad)


def test_more_dims_than_acl_allows():
    # The numpy path's host tensors hold 8 dims (aclCreateTensor takes up to
    # 25, as CANN's); more must be reported with 161002, not crash or truncate.
    go, x, w, b, pad = ops()
    e = raises(161002, go, x.reshape(x.shape + (1,) * 6), w, b, pad)
    assert "at most 8 dims" in e.message


def test_works_on_a_thread_with_a_current_context():
    # With a device set, the NULL stream is the context's default stream; the
    # numpy call must still return finished results.
    lib = convtbc_py.lib
    go, x, w, b, pad = ops()
    status = lib.aclInit(convtbc_py.ffi.NULL)
    assert status in (0, 100002)  # 100002: another test already initialised
    convtbc_py.check(lib.aclrtSetDevice(0))
    try:
        for got, ref in zip(convtbc_py.conv_tbc_backward(go, x, w, b, pad), conv_tbc_backward_ref(go, x, w, pad)):
            assert_close(got, ref)
    finally:
        convtbc_py.check(lib.aclrtResetDevice(0))
        if status == 0:
            convtbc_py.check(lib.aclFinalize())


def test_outputs_dtypes_follow_operands():
    go, x, w, b, pad = ops()
    res = convtbc_py.conv_tbc_backward(go.astype(BF16), x.astype(np.float16), w, b.astype(BF16), pad)
    assert [r.dtype for r in res] == [np.dtype(np.float16), np.dtype(np.float32), np.dtype(BF16)]
    for r, ref in zip(res, conv_tbc_backward_ref(go.astype(BF16), x.astype(np.float16), w, pad)):
        assert_close(r, ref)


def test_outputs_are_fresh_arrays():
    go, x, w, b, pad = ops()
    gi, gw, gb = convtbc_py.conv_tbc_backward(go, x, w, b, pad)
    for r in (gi, gw, gb):
        assert isinstance(r, np.ndarray)
        for a in (go, x, w, b):
            assert not np.shares_memory(r, a)


def test_runtime_error_class():
    # A runtime status is an AclError with the ACL name (check() maps it).
    assert issubclass(convtbc_py.AclError, Exception)
    with pytest.raises(convtbc_py.AclError) as ei:
        convtbc_py.check(convtbc_py.lib.aclrtSetDevice(3))
    assert ei.value.status in (100001, 107001)
    assert ei.value.name in ("ACL_ERROR_UNINITIALIZE", "ACL_ERROR_RT_INVALID_DEVICEID")


# --------------------------------------------------------------------------
# ffi / lib against the published values


SPEC_CONSTANTS = {
    "ACL_SUCCESS": 0, "ACL_ERROR_NONE": 0, "ACL_ERROR_INVALID_PARAM": 100000,
    "ACL_ERROR_UNINITIALIZE": 100001, "ACL_ERROR_REPEAT_INITIALIZE": 100002,
    "ACL_ERROR_REPEAT_FINALIZE": 100037, "ACL_ERROR_BAD_ALLOC": 200000,
    "ACL_ERROR_RT_PARAM_INVALID": 107000, "ACL_ERROR_RT_INVALID_DEVICEID": 107001,
    "ACL_ERROR_RT_CONTEXT_NULL": 107002, "ACL_ERROR_RT_MEMORY_ALLOCATION": 207001,
    "ACL_ERROR_RT_INTERNAL_ERROR": 507000,
    "ACLNN_SUCCESS": 0, "ACLNN_ERR_PARAM_NULLPTR": 161001, "ACLNN_ERR_PARAM_INVALID": 161002,
    "ACLNN_ERR_RUNTIME_ERROR": 361001, "ACLNN_ERR_INNER": 561000,
    "ACLNN_ERR_INNER_CREATE_EXECUTOR": 561101, "ACLNN_ERR_INNER_NULLPTR": 561103,
    "ACL_DT_UNDEFINED": -1, "ACL_FLOAT": 0, "ACL_FLOAT16": 1, "ACL_INT8": 2, "ACL_INT32": 3,
    "ACL_UINT8": 4, "ACL_INT16": 6, "ACL_UINT16": 7, "ACL_UINT32": 8, "ACL_INT64": 9,
    "ACL_UINT64": 10, "ACL_DOUBLE": 11, "ACL_BOOL": 12, "ACL_STRING": 13, "ACL_COMPLEX64": 16,
    "ACL_COMPLEX128": 17, "ACL_BF16": 27, "ACL_INT4": 29, "ACL_UINT1": 30, "ACL_COMPLEX32": 33,
    "ACL_HIFLOAT8": 34, "ACL_FLOAT8_E5M2": 35, "ACL_FLOAT8_E4M3FN": 36,
    "ACL_FORMAT_UNDEFINED": -1, "ACL_FORMAT_NCHW": 0, "ACL_FORMAT_NHWC": 1, "ACL_FORMAT_ND": 2,
    "ACL_FORMAT_NC1HWC0": 3, "ACL_FORMAT_FRACTAL_Z": 4, "ACL_FORMAT_NC1HWC0_C04": 12,
    "ACL_FORMAT_HWCN": 16, "ACL_FORMAT_NDHWC": 27, "ACL_FORMAT_FRACTAL_NZ": 29,
    "ACL_FORMAT_NCDHW": 30, "ACL_FORMAT_NDC1HWC0": 32, "ACL_FRACTAL_Z_3D": 33, "ACL_FORMAT_NC": 35,
    "ACL_FORMAT_NCL": 47,
    "ACL_OPT_DETERMINISTIC": 0,
    "ACL_MEM_MALLOC_HUGE_FIRST": 0, "ACL_MEM_MALLOC_HUGE_ONLY": 1, "ACL_MEM_MALLOC_NORMAL_ONLY": 2,
    "ACL_MEM_MALLOC_HUGE_FIRST_P2P": 3, "ACL_MEM_MALLOC_HUGE_ONLY_P2P": 4,
    "ACL_MEM_MALLOC_NORMAL_ONLY_P2P": 5, "ACL_MEM_TYPE_LOW_BAND_WIDTH": 0x100,
    "ACL_MEM_TYPE_HIGH_BAND_WIDTH": 0x1000,
    "ACL_MEMCPY_HOST_TO_HOST": 0, "ACL_MEMCPY_HOST_TO_DEVICE": 1, "ACL_MEMCPY_DEVICE_TO_HOST": 2,
    "ACL_MEMCPY_DEVICE_TO_DEVICE": 3, "ACL_MEMCPY_DEFAULT": 4,
}


@pytest.mark.parametrize("name", sorted(SPEC_CONSTANTS))
def test_lib_constants(name):
    assert getattr(convtbc_py.lib, name) == SPEC_CONSTANTS[name]


def _header_functions():
    # Every function the public headers declare, as gcc reads them.
    from test_install_tree import _header_functions as declared
    import tempfile
    with tempfile.TemporaryDirectory() as scratch:
        return sorted(declared(REPO_ROOT / "include", Path(scratch)))


@pytest.mark.parametrize("fn", _header_functions())
def test_lib_has_every_header_function(fn):
    assert callable(getattr(convtbc_py.lib, fn))


def test_spec_functions_declared():
    # Every function the spec lists is in the headers (and so in lib).
    need = """aclInit aclFinalize aclrtSetDevice aclrtResetDevice aclrtGetDevice aclrtGetDeviceCount
    aclrtCreateContext aclrtDestroyContext aclrtSetCurrentContext aclrtGetCurrentContext
    aclrtCreateStream aclrtDestroyStream aclrtSynchronizeStream aclrtSynchronizeDevice
    aclrtCreateEvent aclrtDestroyEvent aclrtRecordEvent aclrtStreamWaitEvent aclrtSynchronizeEvent
    aclrtMalloc aclrtFree aclrtMallocHost aclrtFreeHost aclrtMemset aclrtMemcpy aclrtMemcpyAsync
    aclrtCtxSetSysParamOpt aclrtCtxGetSysParamOpt aclrtGetSocName aclGetRecentErrMsg
    aclFloat16ToFloat aclFloatToFloat16 aclDataTypeSize aclCreateTensor aclDestroyTensor
    aclGetViewShape aclGetStorageShape aclGetViewStrides aclGetViewOffset aclGetFormat
    aclGetDataType aclInitTensor aclSetRawTensorAddr aclGetRawTensorAddr aclCreateIntArray
    aclDestroyIntArray aclSetAclOpExecutorRepeatable aclDestroyAclOpExecutor aclSetInputTensorAddr
    aclSetOutputTensorAddr aclnnInit aclnnFinalize aclnnConvTbcBackwardGetWorkspaceSize
    aclnnConvTbcBackward""".split()
    have = set(_header_functions())
    assert not set(need) - have, sorted(set(need) - have)


# --------------------------------------------------------------------------
# console script and installed tree


def cli(convtbc_cli, *args):
    return subprocess.run([convtbc_cli, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_cli_demo(convtbc_cli):
    p = cli(convtbc_cli, "demo")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PASS" in p.stdout
    # both documented examples ran and printed CANN's values (the forward
    # one: every output 7)
    assert "aclnnConvTbcBackward" in p.stdout and "aclnnConvTbc (forward)" in p.stdout
    assert "out [2, 2, 4] = [7. 7. 7. 7. 7. 7. 7. 7. 7. 7. 7. 7. 7. 7. 7. 7.]" in p.stdout


def test_cli_config(convtbc_config):
    prefix = Path(convtbc_config["--prefix"])
    assert prefix.is_dir()
    for h in HEADERS:
        assert (prefix / "include" / h).is_file(), h
    assert (prefix / "lib64" / "libconvtbc.so").is_file()
    cflags = convtbc_config["--cflags"].split()
    assert f"-I{prefix / 'include'}" in cflags
    libs = convtbc_config["--libs"].split()
    assert "-lconvtbc" in libs and f"-L{prefix / 'lib64'}" in libs


def test_installed_headers_match_repository(convtbc_config):
    prefix = Path(convtbc_config["--prefix"])
    for h in HEADERS:
        assert (prefix / "include" / h).read_bytes() == (REPO_ROOT / "include" / h).read_bytes(), h


@pytest.mark.parametrize("lang", ["c11", "c++11"])
def test_installed_headers_compile(lang, convtbc_config, tmp_path):
    cflags = convtbc_config["--cflags"].split()
    src = tmp_path / ("h.c" if lang == "c11" else "h.cpp")
    src.write_text("#include \"acl/acl.h\"\n#include \"aclnnop/aclnn_convolution_backward.h\"\n"
                   "#include \"aclnn_base.h\"\n#include \"acl_meta.h\"\n"
                   "int main(void) { aclDataType d = ACL_BF16; aclFormat f = ACL_FORMAT_NCL;\n"
                   "  return (int)d + (int)f == 74 ? 0 : 1; }\n")
    compiler = ["gcc", "-std=c11"] if lang == "c11" else ["g++", "-std=c++11"]
    p = subprocess.run(compiler + ["-Wall", "-Wextra", "-pedantic", "-Werror", *cflags, "-c", str(src),
                                   "-o", str(tmp_path / "h.o")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
