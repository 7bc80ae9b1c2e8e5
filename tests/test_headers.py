"""The public headers are CANN's headers: every function of CANN's runtime and
aclnn meta API (tests/data/cann_api_names.tsv, one `header<TAB>function` a
line) declared in the header CANN declares it in, with CANN's prototypes,
named enums and constants of CANN's values and kinds; each header compiles on
its own as C11 and as C++11 without a warning.

The compiler is the judge throughout: gcc's -aux-info says which file declared
what, redeclarations and static assertions check types and values, and the
preprocessor tells a macro from an object.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import convtbc_py
from conftest import DATA_DIR, REPO_ROOT

INCLUDE = REPO_ROOT / "include"
PUBLIC_HEADERS = sorted(str(p.relative_to(INCLUDE)) for p in INCLUDE.rglob("*.h"))
CANN_NAMES = [tuple(line.split("\t")) for line in
              (DATA_DIR / "cann_api_names.tsv").read_text().splitlines() if line.strip()]
LANGS = {
    "c11": (["gcc", "-std=c11", "-x", "c"], ".c"),
    "c++11": (["g++", "-std=c++11", "-x", "c++"], ".cpp"),
}
WARNINGS = ["-Wall", "-Wextra", "-Wpedantic", "-Werror"]
# The operator header's entry points: CANN's prototypes, from ops-nn.
OP_HEADER = "aclnnop/aclnn_convolution_backward.h"
OP_FUNCTIONS = {
    "aclnnConvolutionBackwardGetWorkspaceSize", "aclnnConvolutionBackward",
    "aclnnConvTbcBackwardGetWorkspaceSize", "aclnnConvTbcBackward",
    "aclnnDeformableConv2dBackwardGetWorkspaceSize", "aclnnDeformableConv2dBackward",
}


def _compiler(lang):
    cmd, suffix = LANGS[lang]
    if shutil.which(cmd[0]) is None:
        pytest.skip(f"{cmd[0]} is not installed")
    return cmd, suffix


def _compile(lang, source, tmp_path, *, link=False, extra=()):
    """Compile `source` against the repository's headers; returns the process
    (and leaves an executable `prog` in tmp_path when link is true)."""
    cmd, suffix = _compiler(lang)
    src = tmp_path / f"probe{suffix}"
    src.write_text(source)
    out = ["-o", str(tmp_path / "prog")] if link else ["-fsyntax-only"]
    return subprocess.run(cmd + WARNINGS + [f"-I{INCLUDE}", *extra, str(src)] + out,
                          capture_output=True, text=True, timeout=120)


def _assert_compiles(lang, source, tmp_path, **kw):
    proc = _compile(lang, source, tmp_path, **kw)
    assert proc.returncode == 0, f"{lang} rejected:\n{source}\n--- stderr\n{proc.stderr}"


def _declarations(tmp_path):
    """{function: {header, ...}} for every function the public headers
    declare, as gcc reads them (-aux-info names the declaring file)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    src = tmp_path / "all.c"
    src.write_text("".join(f'#include "{h}"\n' for h in PUBLIC_HEADERS))
    info = tmp_path / "aux-info.txt"
    subprocess.run(["gcc", "-std=c11", "-fsyntax-only", "-aux-info", str(info), f"-I{INCLUDE}", str(src)],
                   check=True, capture_output=True, text=True, timeout=120)
    found = {}
    for line in info.read_text().splitlines():
        match = re.match(r"/\* (\S+):\d+:\S+ \*/ (.*)", line)
        if not match:
            continue
        path = Path(match.group(1)).resolve()
        if not path.is_relative_to(INCLUDE.resolve()):
            continue  # system headers
        name = re.search(r"(\w+)\s*\(", match.group(2)).group(1)
        found.setdefault(name, set()).add(str(path.relative_to(INCLUDE.resolve())))
    return found


@pytest.fixture(scope="module")
def declarations(tmp_path_factory):
    return _declarations(tmp_path_factory.mktemp("aux"))


# ------------------------------------------------------------------ placement


def test_the_list_is_cann_s_whole_surface():
    # 373 runtime functions in acl_rt.h, 14 in acl_base_rt.h, 10 in
    # acl_rt_allocator.h, 45 in the aclnn meta headers: 442 distinct names.
    per_header = {}
    for header, name in CANN_NAMES:
        per_header[header] = per_header.get(header, 0) + 1
    assert len({name for _, name in CANN_NAMES}) == len(CANN_NAMES) == 442
    assert per_header["acl/acl_rt.h"] == 373
    assert per_header["acl/acl_base_rt.h"] == 14
    assert per_header["acl/acl_rt_allocator.h"] == 10
    assert per_header["aclnn/acl_meta.h"] + per_header["aclnn/aclnn_base.h"] == 45


@pytest.mark.parametrize("header,name", CANN_NAMES, ids=[n for _, n in CANN_NAMES])
def test_declared_in_cann_s_header(declarations, header, name):
    assert declarations.get(name) == {header}, f"{name}: declared in {declarations.get(name)}, CANN: {header}"


def test_cann_s_headers_declare_nothing_else(declarations):
    listed = {name for _, name in CANN_NAMES}
    headers = {header for header, _ in CANN_NAMES}
    extra = sorted(name for name, where in declarations.items() if where & headers and name not in listed)
    assert extra == []


def test_the_operator_header_declares_its_siblings(declarations):
    assert {n for n, where in declarations.items() if OP_HEADER in where} == OP_FUNCTIONS


def test_gathering_headers_include_what_cann_s_do(tmp_path):
    # acl.h brings the runtime; acl_base.h the base types and both code tables.
    _assert_compiles("c11", '#include "acl/acl.h"\n'
                     "int f(void) { aclrtStream s = 0; (void)s; return ACL_ERROR_RT_PARAM_INVALID; }\n", tmp_path)
    _assert_compiles("c11", '#include "acl/acl_base.h"\n'
                     "unsigned f(void) { return ACL_ERROR_GE_PARAM_INVALID + ACL_ERROR_RT_PARAM_INVALID"
                     " + (unsigned)ACL_ERROR_API_NOT_SUPPORT; }\n", tmp_path)


def test_aclnn_api_comes_from_aclnn_util(tmp_path):
    # CANN's operator headers mark entry points with ACLNN_API from aclnn_util.h.
    _assert_compiles("c11", '#include "aclnnop/aclnn_util.h"\n#ifndef ACLNN_API\n#error no ACLNN_API\n#endif\n'
                     "ACLNN_API int f(void);\n", tmp_path)


# ------------------------------------------------------------------ compiling


@pytest.mark.parametrize("lang", sorted(LANGS))
@pytest.mark.parametrize("header", PUBLIC_HEADERS)
def test_each_header_compiles_alone(lang, header, tmp_path):
    # The typedef keeps the translation unit non-empty for the empty headers.
    _assert_compiles(lang, f'#include "{header}"\ntypedef int probe_nonempty;\n', tmp_path)


@pytest.mark.parametrize("lang", sorted(LANGS))
def test_all_headers_compile_together_twice(lang, tmp_path):
    includes = "".join(f'#include "{h}"\n' for h in PUBLIC_HEADERS)
    _assert_compiles(lang, includes + includes + "typedef int probe_nonempty;\n", tmp_path)


# ------------------------------------------------------------------ types and values

# Runtime enums carry CANN's tag, so `enum tag x;` compiles, and CANN's values.
NAMED_ENUM_VALUES = {
    "aclrtMemcpyKind": {"ACL_MEMCPY_HOST_TO_HOST": 0, "ACL_MEMCPY_HOST_TO_DEVICE": 1,
                        "ACL_MEMCPY_DEVICE_TO_HOST": 2, "ACL_MEMCPY_DEVICE_TO_DEVICE": 3,
                        "ACL_MEMCPY_DEFAULT": 4, "ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE": 5,
                        "ACL_MEMCPY_INNER_DEVICE_TO_DEVICE": 6, "ACL_MEMCPY_INTER_DEVICE_TO_DEVICE": 7},
    "aclrtRunMode": {"ACL_DEVICE": 0, "ACL_HOST": 1},
    "aclrtStreamStatus": {"ACL_STREAM_STATUS_COMPLETE": 0, "ACL_STREAM_STATUS_NOT_READY": 1},
    "aclrtEventStatus": {"ACL_EVENT_STATUS_COMPLETE": 0, "ACL_EVENT_STATUS_NOT_READY": 1},
    "aclrtEventRecordedStatus": {"ACL_EVENT_RECORDED_STATUS_NOT_READY": 0,
                                 "ACL_EVENT_RECORDED_STATUS_COMPLETE": 1},
    "aclrtCallbackBlockType": {"ACL_CALLBACK_NO_BLOCK": 0, "ACL_CALLBACK_BLOCK": 1},
    "aclrtMemMallocPolicy": {"ACL_MEM_MALLOC_HUGE_FIRST": 0, "ACL_MEM_MALLOC_NORMAL_ONLY": 2,
                             "ACL_MEM_TYPE_LOW_BAND_WIDTH": 0x100, "ACL_MEM_TYPE_HIGH_BAND_WIDTH": 0x1000},
}
# The base enums are anonymous in CANN too; only their values are facts.
BASE_ENUM_VALUES = {"ACL_DT_UNDEFINED": -1, "ACL_BF16": 27, "ACL_FLOAT8_E4M3FN": 36, "ACL_FLOAT4_E1M2": 41,
                    "ACL_FORMAT_UNDEFINED": -1, "ACL_FORMAT_NCL": 47, "ACL_FORMAT_FRACTAL_NZ_C0_8": 54,
                    "ACL_OPT_DETERMINISTIC": 0}


def _static_asserts(lang, values):
    keyword = "_Static_assert" if lang == "c11" else "static_assert"
    return "".join(f'{keyword}({name} == {value}, "{name}");\n' for name, value in values.items())


@pytest.mark.parametrize("lang", sorted(LANGS))
def test_runtime_enums_are_named_with_cann_s_values(lang, tmp_path):
    body = '#include "acl/acl_rt.h"\n'
    for tag, values in NAMED_ENUM_VALUES.items():
        body += _static_asserts(lang, values)
        first = next(iter(values))
        body += f"enum {tag} probe_{tag}(void);\nenum {tag} probe_{tag}(void) {{ enum {tag} k = {first}; return k; }}\n"
    body += _static_asserts(lang, BASE_ENUM_VALUES)
    _assert_compiles(lang, body, tmp_path)


def test_an_enumerator_past_cann_s_last_is_refused(tmp_path):
    # The static assertions above can fail: a wrong value is a compile error.
    proc = _compile("c11", '#include "acl/acl_rt.h"\n'
                    '_Static_assert(ACL_MEMCPY_INTER_DEVICE_TO_DEVICE == 8, "x");\n', tmp_path)
    assert proc.returncode != 0


@pytest.mark.parametrize("lang", sorted(LANGS))
def test_callback_types(lang, tmp_path):
    # aclrtCallback is void (*)(void *userData); a mismatching function is an
    # error under -Werror in C and always in C++.
    _assert_compiles(lang, '#include "acl/acl_rt.h"\n'
                     "static void on_done(void *userData) { (void)userData; }\n"
                     "aclrtCallback probe_cb(void);\naclrtCallback probe_cb(void) { return on_done; }\n"
                     "aclrtHostFunc probe_hf(void);\naclrtHostFunc probe_hf(void) { return on_done; }\n",
                     tmp_path)


# CANN's prototypes, as documented (acl_api_facts.md), redeclared: C rejects a
# redeclaration whose parameter or return types differ, const-ness included.
PROTOTYPES = """
aclError aclInit(const char *configPath);
aclError aclFinalize(void);
const char *aclGetRecentErrMsg(void);
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtGetDeviceCount(uint32_t *count);
aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId);
aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtSynchronizeDevice(void);
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind);
aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream);
aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value);
aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream);
aclError aclrtProcessReport(int32_t timeout);
aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType blockType,
                             aclrtStream stream);
aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status);
aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status);
aclError aclrtGetRunMode(aclrtRunMode *runMode);
const char *aclrtGetSocName(void);
float aclFloat16ToFloat(aclFloat16 value);
aclFloat16 aclFloatToFloat16(float value);
size_t aclDataTypeSize(aclDataType dataType);
aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t *stride, int64_t offset, aclFormat format,
                           const int64_t *storageDims, uint64_t storageDimsNum, void *tensorData);
aclnnStatus aclDestroyTensor(const aclTensor *tensor);
aclnnStatus aclGetViewShape(const aclTensor *tensor, int64_t **viewDims, uint64_t *viewDimsNum);
aclnnStatus aclGetRawTensorAddr(const aclTensor *tensor, void **addr);
aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size);
aclnnStatus aclSetInputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr);
aclnnStatus aclnnInit(const char *configPath);
aclnnStatus aclnnFinalize(void);
aclnnStatus aclnnConvTbcBackwardGetWorkspaceSize(const aclTensor *self, const aclTensor *input,
    const aclTensor *weight, const aclTensor *bias, int64_t pad, int8_t cubeMathType, aclTensor *gradInput,
    aclTensor *gradWeight, aclTensor *gradBias, uint64_t *workspaceSize, aclOpExecutor **executor);
aclnnStatus aclnnConvTbcBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                 aclrtStream stream);
"""
INCLUDE_ALL = '#include "acl/acl.h"\n#include "aclnnop/aclnn_convolution_backward.h"\n'


def test_prototypes_are_cann_s(tmp_path):
    _assert_compiles("c11", INCLUDE_ALL + PROTOTYPES, tmp_path)


def test_a_wrong_prototype_is_refused(tmp_path):
    # The redeclaration check can fail: drop one const and C says no.
    proc = _compile("c11", INCLUDE_ALL + "aclnnStatus aclDestroyTensor(aclTensor *tensor);\n", tmp_path)
    assert proc.returncode != 0


# ------------------------------------------------------------------ constants: values and kinds

# acl_base_rt.h: `static const int` objects (addressable, invisible to #if).
STATIC_CONST_INTS = {"ACL_SUCCESS": 0, "ACL_ERROR_NONE": 0, "ACL_ERROR_INVALID_PARAM": 100000,
                     "ACL_ERROR_UNINITIALIZE": 100001, "ACL_ERROR_REPEAT_INITIALIZE": 100002,
                     "ACL_ERROR_REPEAT_FINALIZE": 100037, "ACL_ERROR_BAD_ALLOC": 200000,
                     "ACL_ERROR_API_NOT_SUPPORT": 200001, "ACL_ERROR_INTERNAL_ERROR": 500000,
                     "ACL_ERROR_FAILURE": 500001}
# rt_error_codes.h and acl_rt.h: macros (usable in #if).
MACROS = {
    "acl/error_codes/rt_error_codes.h": {
        "ACL_ERROR_RT_PARAM_INVALID": 107000, "ACL_ERROR_RT_INVALID_DEVICEID": 107001,
        "ACL_ERROR_RT_CONTEXT_NULL": 107002, "ACL_ERROR_RT_STREAM_SUBSCRIBE": 107011,
        "ACL_ERROR_RT_THREAD_SUBSCRIBE": 107012, "ACL_ERROR_RT_FEATURE_NOT_SUPPORT": 207000,
        "ACL_ERROR_RT_MEMORY_ALLOCATION": 207001, "ACL_ERROR_RT_INTERNAL_ERROR": 507000,
        "ACL_ERROR_RT_STREAM_NOT_COMPLETE": 507004, "ACL_ERROR_RT_EVENT_NOT_COMPLETE": 507006,
        "ACL_ERROR_RT_REPORT_TIMEOUT": 507012, "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT": 507046,
        "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT": 507047},
    "acl/acl_rt.h": {"ACL_STREAM_FAST_LAUNCH": 0x1, "ACL_STREAM_FAST_SYNC": 0x2,
                     "ACL_EVENT_SYNC": 0x1, "ACL_EVENT_TIME_LINE": 0x8},
}


def test_status_codes_are_static_const_ints(tmp_path):
    # Each is an int object one can point at, not a macro, with CANN's value.
    checks = "".join(f"#ifdef {n}\n#error {n} is a macro\n#endif\n" for n in STATIC_CONST_INTS)
    table = ",\n".join(f"    {{&{n}, {v}}}" for n, v in STATIC_CONST_INTS.items())
    source = ('#include "acl/acl_base_rt.h"\n' + checks +
              "static const struct { const int *code; int value; } table[] = {\n" + table + "\n};\n"
              "int main(void) {\n"
              "    for (unsigned i = 0; i < sizeof table / sizeof table[0]; ++i)\n"
              "        if (*table[i].code != table[i].value) return 1;\n"
              "    return 0;\n}\n")
    _assert_compiles("c11", source, tmp_path, link=True)
    run = subprocess.run([str(tmp_path / "prog")], timeout=60)
    assert run.returncode == 0, "a status code has a value other than CANN's"


@pytest.mark.parametrize("header", sorted(MACROS))
def test_macros_work_in_preprocessor_conditions(header, tmp_path):
    source = f'#include "{header}"\n' + "".join(
        f"#if !defined({n}) || {n} != {v}\n#error {n}\n#endif\n" for n, v in MACROS[header].items())
    _assert_compiles("c11", source + "typedef int probe_nonempty;\n", tmp_path)


def test_python_sees_the_constants_of_both_kinds():
    lib, constants = convtbc_py.lib, convtbc_py._library.CONSTANTS
    for name, value in {**STATIC_CONST_INTS, **MACROS["acl/error_codes/rt_error_codes.h"],
                        **MACROS["acl/acl_rt.h"]}.items():
        assert getattr(lib, name) == value, name
        assert constants[name] == value, name
    for values in NAMED_ENUM_VALUES.values():
        for name, value in values.items():
            assert getattr(lib, name) == value, name
    # errors.py names the codes from the headers' own values.
    assert convtbc_py.errors.ACL_ERROR_NAMES[200001] == "ACL_ERROR_API_NOT_SUPPORT"
    assert convtbc_py.errors.ACL_ERROR_NAMES[507046] == "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT"


def test_python_sees_the_struct_layouts(tmp_path):
    # cffi's reading of the structs agrees with the C compiler's.
    ffi = convtbc_py.ffi
    names = ["aclrtMemUceInfo", "aclrtErrorInfo", "aclmdlRITaskParams", "aclrtLaunchKernelAttr",
             "aclCANNPackageVersion", "aclrtPhysicalMemProp", "aclrtRandomNumTaskInfo", "dim3",
             "aclrtStreamAttrValue", "aclrtMemUsageInfo", "aclrtIpcEventHandle", "aclrtUtilizationInfo"]
    source = INCLUDE_ALL + "#include <stdio.h>\nint main(void) {\n" + "".join(
        f'    printf("%zu\\n", sizeof({n}));\n' for n in names) + "    return 0;\n}\n"
    _assert_compiles("c11", source, tmp_path, link=True)
    run = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, timeout=60, check=True)
    assert dict(zip(names, map(int, run.stdout.split()))) == {n: ffi.sizeof(n) for n in names}
