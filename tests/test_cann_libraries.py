"""CANN's library files in the installed tree, used the ways CANN's users use
them: a binary that was linked against CANN (its ELF records NEEDED
libascendcl.so, libnnopbase.so, libopapi_nn.so, ...) runs on convtbc's
lib64 unchanged, and frameworks that dlopen a CANN name and dlsym each
function find every one of them in the one library.

The "CANN" the binary is linked against is a set of stand-in libraries built
here: each carries a CANN soname and defines the functions CANN puts in it
(from tests/data/cann_api_names.tsv), with bodies that do nothing. Nothing of
convtbc goes into them, so the binary can only work if convtbc's files take
their place at run time.
"""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import C_DIR, DATA_DIR, REPO_ROOT

pytestmark = pytest.mark.slow

CANN_NAMES = ("libascendcl.so", "libnnopbase.so", "libopapi.so", "libopapi_nn.so", "libopapi_math.so")
OP_FUNCTIONS = ("aclnnConvTbcBackwardGetWorkspaceSize", "aclnnConvTbcBackward")
# Which CANN library holds the functions of which header.
LIBRARY_OF_HEADER = {"acl/acl_rt.h": "ascendcl", "acl/acl_base_rt.h": "ascendcl", "acl/acl_rt_allocator.h": "ascendcl",
                     "aclnn/acl_meta.h": "nnopbase", "aclnn/aclnn_base.h": "nnopbase"}


def _cann_functions():
    pairs = [line.split("\t") for line in (DATA_DIR / "cann_api_names.tsv").read_text().splitlines() if line.strip()]
    return [(header, name) for header, name in pairs]


def _run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == 0, f"{cmd}: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def lib64(convtbc_config):
    from pathlib import Path
    return Path(convtbc_config["--prefix"]) / "lib64"


@pytest.fixture(scope="module")
def stand_in_cann(tmp_path_factory):
    """Stand-ins for CANN's libraries: sonames and symbols, no behaviour."""
    root = tmp_path_factory.mktemp("stand_in_cann")
    contents = {name: [] for name in ("ascendcl", "nnopbase", "opapi", "opapi_nn", "opapi_math")}
    for header, name in _cann_functions():
        contents[LIBRARY_OF_HEADER[header]].append(name)
    contents["opapi"] += OP_FUNCTIONS  # older releases: one operator library
    contents["opapi_nn"] += OP_FUNCTIONS  # newer: convolutions are in opapi_nn
    for library, names in contents.items():
        source = root / f"{library}.c"
        source.write_text("".join(f"void {n}(void);\nvoid {n}(void) {{}}\n" for n in names) or "int unused;\n")
        _run(["gcc", "-shared", "-fPIC", "-w", "-o", str(root / f"lib{library}.so"),
              f"-Wl,-soname,lib{library}.so", str(source)])
    return root


def test_binary_linked_against_cann_runs_on_convtbc(stand_in_cann, lib64, convtbc_config, tmp_path):
    program = tmp_path / "cann_built"
    cflags = convtbc_config["--cflags"].split()
    # Linked as examples/cann_sample links against a CANN toolkit.
    _run(["g++", "-std=c++11", *cflags, str(C_DIR / "cann_style_example.cpp"), "-o", str(program),
          f"-L{stand_in_cann}", "-lascendcl", "-lnnopbase", "-lopapi_nn", "-lopapi_math"])
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", _run(["readelf", "-d", str(program)]))
    assert {"libascendcl.so", "libnnopbase.so", "libopapi_nn.so"} <= set(needed)
    assert not [n for n in needed if "convtbc" in n]

    # Against the stand-ins alone it cannot compute anything ...
    alone = subprocess.run([str(program)], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, LD_LIBRARY_PATH=str(stand_in_cann)))
    assert alone.returncode != 0
    # ... and with convtbc's lib64 first on the path (what set_env.sh does) it is right.
    env = dict(os.environ, LD_LIBRARY_PATH=f"{lib64}{os.pathsep}{stand_in_cann}")
    ran = subprocess.run([str(program)], capture_output=True, text=True, timeout=120, env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "cann_style_example: OK" in ran.stdout


def _in_fresh_process(code, lib64):
    return _run([sys.executable, "-c", textwrap.dedent(code)], env=dict(os.environ, LD_LIBRARY_PATH=str(lib64)))


def test_every_function_through_every_cann_name(lib64):
    names = [name for _, name in _cann_functions()] + list(OP_FUNCTIONS)
    out = _in_fresh_process(f"""
        import ctypes
        names = {names!r}
        real = ctypes.CDLL("libconvtbc.so.0", mode=ctypes.RTLD_LOCAL)
        address = lambda lib, n: ctypes.cast(getattr(lib, n), ctypes.c_void_p).value
        for library in {CANN_NAMES!r}:
            handle = ctypes.CDLL(library, mode=ctypes.RTLD_LOCAL)  # dlopen by name, found on LD_LIBRARY_PATH
            missing = [n for n in names if not hasattr(handle, n)]
            elsewhere = [n for n in names if n not in missing and address(handle, n) != address(real, n)]
            print(library, len(names), len(missing), len(elsewhere), missing[:5], elsewhere[:5])
        """, lib64)
    for line in out.splitlines():
        library, count, missing, elsewhere = line.split()[:4]
        assert int(count) == 444
        assert (missing, elsewhere) == ("0", "0"), line


def test_one_runtime_state_through_two_names(lib64):
    out = _in_fresh_process("""
        import ctypes
        first = ctypes.CDLL("libascendcl.so", mode=ctypes.RTLD_LOCAL)
        second = ctypes.CDLL("libnnopbase.so", mode=ctypes.RTLD_LOCAL)
        print(first.aclInit(None), second.aclInit(None), second.aclFinalize(), first.aclFinalize())
        """, lib64)
    # 100002 ACL_ERROR_REPEAT_INITIALIZE; 100037 ACL_ERROR_REPEAT_FINALIZE.
    assert out.split() == ["0", "100002", "0", "100037"]


def test_every_function_compiles_and_links_from_cann_headers(lib64, convtbc_config, tmp_path):
    """A C++ file that takes the address of every function, including only
    the headers CANN declares them in, links with --no-undefined against
    CANN's library names in the tree."""
    functions = _cann_functions() + [("aclnnop/aclnn_convolution_backward.h", name) for name in OP_FUNCTIONS + (
        "aclnnConvolutionBackwardGetWorkspaceSize", "aclnnConvolutionBackward",
        "aclnnDeformableConv2dBackwardGetWorkspaceSize", "aclnnDeformableConv2dBackward")]
    headers = sorted({header for header, _ in functions})
    source = tmp_path / "every_function.cpp"
    source.write_text(
        "".join(f'#include "{h}"\n' for h in headers) + "#include <cstdio>\n\n"
        "int main()\n{\n    const void *functions[] = {\n"
        + "".join(f"        reinterpret_cast<const void *>(&{name}),\n" for _, name in functions)
        + "    };\n    int resolved = 0;\n"
        "    for (const void *f : functions)\n        resolved += f != nullptr;\n"
        '    std::printf("%d\\n", resolved);\n    return 0;\n}\n')
    program = tmp_path / "every_function"
    # Deprecated functions stay callable, with the warning CANN gives them.
    _run(["g++", "-std=c++11", "-Wall", "-Wextra", "-Werror", "-Wno-deprecated-declarations",
          *convtbc_config["--cflags"].split(), str(source),
          "-o", str(program), "-Wl,--no-undefined", f"-L{lib64}", "-lascendcl", "-lnnopbase", "-lopapi_nn",
          "-lopapi_math"])
    out = _run([str(program)], env=dict(os.environ, LD_LIBRARY_PATH=str(lib64)))
    assert out.split() == [str(len(functions))]
