"""libconvtbc/api/api_functions.tsv, the one list of exported functions,
against CANN's list of functions (tests/data/cann_api_names.tsv, copied from
the project's spec) and against what the installed library does.

- every function CANN's runtime and aclnn meta headers declare is a row, with
  the header CANN declares it in;
- the library exports exactly the table's functions;
- each refused function returns its code and leaves a message naming it;
- docs/api.md is what the table generates.
"""

import importlib.util
import re

import pytest

from conftest import DATA_DIR, REPO_ROOT

OP_HEADER = "aclnnop/aclnn_convolution_backward.h"
FORWARD_HEADER = "aclnnop/aclnn_convolution.h"  # the forward op (conv_tbc_forward.md)
OP_HEADERS = (OP_HEADER, FORWARD_HEADER)


def _load_generator():
    spec = importlib.util.spec_from_file_location("api_table", REPO_ROOT / "packaging" / "api_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


api_table = _load_generator()
ROWS = api_table.read_table(REPO_ROOT / "libconvtbc" / "api" / "api_functions.tsv")
REFUSED = [row for row in ROWS if row.status == "refused"]


def _cann_functions():
    pairs = [line.split("\t") for line in (DATA_DIR / "cann_api_names.tsv").read_text().splitlines() if line.strip()]
    return {name: header for header, name in pairs}


def test_every_cann_function_is_a_row_with_cann_header():
    rows = {row.name: row.header for row in ROWS}
    cann = _cann_functions()
    assert len(cann) == 442
    missing = sorted(set(cann) - set(rows))
    assert not missing, f"CANN functions missing from the table: {missing}"
    moved = {name: (rows[name], header) for name, header in cann.items() if rows[name] != header}
    assert not moved, f"(table, CANN) headers differ: {moved}"


def test_the_op_and_its_siblings_are_rows():
    op_rows = {row.name: row.status for row in ROWS if row.header == OP_HEADER}
    assert op_rows == {
        "aclnnConvTbcBackwardGetWorkspaceSize": "emulated", "aclnnConvTbcBackward": "emulated",
        "aclnnConvolutionBackwardGetWorkspaceSize": "refused", "aclnnConvolutionBackward": "refused",
        "aclnnDeformableConv2dBackwardGetWorkspaceSize": "refused", "aclnnDeformableConv2dBackward": "refused",
    }
    # the forward op's header declares two siblings (conv_tbc_forward.md, "Header and prototypes")
    forward_rows = {row.name: row.status for row in ROWS if row.header == FORWARD_HEADER}
    assert forward_rows == {
        "aclnnConvTbcGetWorkspaceSize": "emulated", "aclnnConvTbc": "emulated",
        "aclnnConvolutionGetWorkspaceSize": "refused", "aclnnConvolution": "refused",
        "aclnnConvDepthwise2dGetWorkspaceSize": "refused", "aclnnConvDepthwise2d": "refused",
    }


def test_only_convtbc_extensions_are_outside_cann(tmp_path):
    cann = _cann_functions()
    extras = {row.name for row in ROWS if row.name not in cann and row.header not in OP_HEADERS}
    assert extras == {row.name for row in ROWS if row.status == "extension"}
    assert all(name.startswith("convtbc") for name in extras)


def test_library_exports_exactly_the_table():
    import subprocess
    from convtbc_py._library import library_path

    out = subprocess.run(["nm", "-D", "--defined-only", str(library_path())], capture_output=True, text=True,
                         check=True).stdout
    exported = {line.split()[2].split("@")[0] for line in out.splitlines() if len(line.split()) >= 3}
    assert exported == {row.name for row in ROWS}


def _zero_arguments(ffi, function):
    """Harmless arguments of the right C types: NULL pointers, zeros, zeroed structs."""
    args = []
    for ctype in ffi.typeof(function).args:
        if ctype.kind == "pointer" or ctype.kind == "function":
            args.append(ffi.NULL)
        elif ctype.kind == "struct":
            args.append(ffi.new(ctype.cname + " *")[0])
        else:
            args.append(0)
    return args


@pytest.mark.parametrize("row", REFUSED, ids=[row.name for row in REFUSED])
def test_refused_function_returns_its_code_and_names_itself(row):
    from convtbc_py import ffi, lib
    from convtbc_py._library import CONSTANTS
    from convtbc_py.errors import recent_error_message

    recent_error_message()  # start from an empty message log
    function = getattr(lib, row.name)
    result = function(*_zero_arguments(ffi, function))
    result_type = ffi.typeof(function).result
    if result_type.kind == "pointer":
        assert result == ffi.NULL and row.code == "NULL"
    elif result_type.cname in api_table.STATUS_TYPES:
        assert result == CONSTANTS[row.code], f"{row.name} returned {result}, expected {row.code}"
    else:
        assert result == int(row.code, 0), f"{row.name} returned {result}, expected {row.code}"
    message = recent_error_message()
    said = "not implemented" if row.name.startswith("aclnn") else "not supported"
    assert row.name in message and said in message, message


def test_refusal_codes_are_cann_values():
    from convtbc_py._library import CONSTANTS

    # acl_base_rt.h: ACL_ERROR_API_NOT_SUPPORT = 200001; aclnn_base.h: ACLNN_ERR_PARAM_INVALID 161002.
    facts = {"ACL_ERROR_API_NOT_SUPPORT": 200001, "ACLNN_ERR_PARAM_INVALID": 161002,
             "ACL_ERROR_RT_FEATURE_NOT_SUPPORT": 207000}
    for code in {row.code for row in REFUSED}:
        if code in ("NULL", "0xFFFFFFFF"):  # CANN's failure values of handle and id getters
            continue
        assert code in facts, f"{code}: not one of the codes this test knows CANN's value of"
        assert CONSTANTS[code] == facts[code]


def test_docs_page_is_generated_from_the_table():
    page = (REPO_ROOT / "docs" / "api.md").read_text()
    assert page == api_table.docs(ROWS), "docs/api.md is stale: run " \
        "python3 packaging/api_table.py docs libconvtbc/api/api_functions.tsv docs/api.md"
    assert len(re.findall(r"^\| `\w+` \|", page, re.M)) == len(ROWS)
