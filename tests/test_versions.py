"""Versions: one CANN release reported the same way by all four calls
(hicann/runtime acl_rt.h and docs/zh/api_ref/24_other_APIs.md):

- aclsysGetVersionStr(pkgName, versionStr): the package's version string
  (the `Version=` of its version.info); a package that is not installed is
  ACL_ERROR_INVALID_FILE (100003); CANN also tries the name with '-' and '_'
  swapped.
- aclsysGetVersionNum: the same version as a number, major * 10^7 +
  minor * 10^5 + patch * 10^3 for a release, so that later is larger.
- aclsysGetCANNVersion (deprecated): version, major, minor, release and patch
  parts of ACL_PKG_NAME_CANN / ACL_PKG_NAME_RUNTIME (the runtime package),
  missing parts "0"; an unknown name is ACL_ERROR_INVALID_PARAM.
- aclrtGetVersion (deprecated): the ACL interface version, which the header
  states as ACL_MAJOR_VERSION / ACL_MINOR_VERSION / ACL_PATCH_VERSION.
"""

import re

import pytest

from rawapi import ffi, lib, recent_msg

ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_INVALID_FILE = 100003


def version_str(name):
    buf = ffi.new("char[]", 128)
    status = lib.aclsysGetVersionStr(ffi.new("char[]", name.encode()), buf)
    return status, ffi.string(buf).decode()


def version_num(name):
    num = ffi.new("int32_t *", -1)
    return lib.aclsysGetVersionNum(ffi.new("char[]", name.encode()), num), num[0]


def cann_number(text):
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", text)
    assert m, f"{text!r} is not a release version X.Y.Z"
    major, minor, patch = map(int, m.groups())
    return major * 10**7 + minor * 10**5 + patch * 10**3


@pytest.mark.parametrize("package", ["runtime", "opbase", "ops-nn", "ops_nn", "ops-math"])
def test_string_and_number_agree(package):
    status, text = version_str(package)
    assert status == 0
    status, number = version_num(package)
    assert status == 0
    assert number == cann_number(text)


def test_one_release_everywhere():
    _, runtime = version_str("runtime")
    for package in ("opbase", "ops-nn", "ops-math"):
        assert version_str(package)[1] == runtime
    pkg = ffi.new("aclCANNPackageVersion *")
    for name in (lib.ACL_PKG_NAME_CANN, lib.ACL_PKG_NAME_RUNTIME):
        assert lib.aclsysGetCANNVersion(name, pkg) == 0
        assert ffi.string(pkg.version).decode() == runtime
        parts = runtime.split(".") + ["0"] * (4 - len(runtime.split(".")))
        got = [ffi.string(getattr(pkg, f)).decode()
               for f in ("majorVersion", "minorVersion", "releaseVersion", "patchVersion")]
        assert got == parts
    major, minor, patch = ffi.new("int32_t *"), ffi.new("int32_t *"), ffi.new("int32_t *")
    assert lib.aclrtGetVersion(major, minor, patch) == 0
    assert (major[0], minor[0], patch[0]) == (lib.ACL_MAJOR_VERSION, lib.ACL_MINOR_VERSION, lib.ACL_PATCH_VERSION)
    assert major[0] >= 1


def test_packages_convtbc_does_not_provide():
    for package in ("driver", "firmware", "hccl", "nonsense"):
        assert version_str(package)[0] == ACL_ERROR_INVALID_FILE
        assert version_num(package)[0] == ACL_ERROR_INVALID_FILE
    assert package in recent_msg()
    pkg = ffi.new("aclCANNPackageVersion *")
    for name in (lib.ACL_PKG_NAME_DRIVER, lib.ACL_PKG_NAME_HCCL, lib.ACL_PKG_NAME_OPP):
        assert lib.aclsysGetCANNVersion(name, pkg) == ACL_ERROR_INVALID_FILE
    assert lib.aclsysGetCANNVersion(99, pkg) == ACL_ERROR_INVALID_PARAM


def test_null_arguments():
    buf = ffi.new("char[]", 128)
    num = ffi.new("int32_t *")
    name = ffi.new("char[]", b"runtime")
    assert lib.aclsysGetVersionStr(name, ffi.NULL) == ACL_ERROR_INVALID_PARAM
    assert lib.aclsysGetVersionStr(ffi.NULL, buf) == ACL_ERROR_INVALID_PARAM
    assert lib.aclsysGetVersionNum(name, ffi.NULL) == ACL_ERROR_INVALID_PARAM
    assert lib.aclsysGetVersionNum(ffi.NULL, num) == ACL_ERROR_INVALID_PARAM
    assert lib.aclsysGetCANNVersion(lib.ACL_PKG_NAME_CANN, ffi.NULL) == ACL_ERROR_INVALID_PARAM
    v = ffi.new("int32_t *")
    assert lib.aclrtGetVersion(v, ffi.NULL, v) == ACL_ERROR_INVALID_PARAM
    assert "aclrtGetVersion" in recent_msg()
