"""The installed tree drops into CANN builds.

Both installs -- the Python package (`convtbc config --prefix`) and a plain
`meson install` into a prefix -- give a tree shaped like a CANN toolkit:
include/acl, include/aclnn, include/aclnnop, lib64 with libconvtbc and CANN's
library names, set_env.sh, pkg-config and CMake package files. These tests
build programs against that tree the ways CANN users do (CANN's sample
CMakeLists.txt, pkg-config, find_package) in an emptied environment where only
set_env.sh has been sourced, and check what comes out against known values:
CANN's documented example, the headers' own declarations, ELF facts.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import C_DIR, REPO_ROOT

SONAME = "libconvtbc.so.0"
# CANN's library names (old and new operator library splits): ELF filter
# libraries of the one real library.
CANN_NAMES = ("libascendcl.so", "libnnopbase.so", "libopapi.so", "libopapi_nn.so", "libopapi_math.so")
# Every name a build may link; each must resolve to the one real library.
ALIASES = ("libconvtbc.so",) + CANN_NAMES
TREE_FILES = (
    "set_env.sh",
    "include/acl/acl.h",
    "include/acl/acl_base.h",
    "include/acl/acl_rt.h",
    "include/aclnn/acl_meta.h",
    "include/aclnn/aclnn_base.h",
    "include/aclnnop/aclnn_convolution_backward.h",
    "lib64/" + SONAME,
    "lib64/pkgconfig/convtbc.pc",
    "share/cmake/convtbc/convtbcConfig.cmake",
    "share/cmake/convtbc/convtbcConfigVersion.cmake",
) + tuple("lib64/" + name for name in ALIASES)
# CANN's documented aclnnConvTbcBackward example (all ones, pad 0): every
# gradInput element is 2, every gradWeight and gradBias element 5.
SAMPLE_EXPECTED = {"gradInput": [2.0] * 10, "gradWeight": [5.0] * 4, "gradBias": [5.0] * 2}
SAMPLE_DIR = REPO_ROOT / "examples" / "cann_sample"
# The Python package's own files: modules, and data/ (the bench's shapes).
PYTHON_FILES = re.compile(r"(\.py|\.pyc|py\.typed)$|__pycache__|^data/")


# ------------------------------------------------------------------ helpers


def _tool(name, *, python_bin=False):
    """A program from PATH, or from this interpreter's bin/ (the test extra's
    cmake, meson, ninja from PyPI)."""
    found = shutil.which(name)
    local = Path(sys.executable).parent / name
    if python_bin and local.exists():
        return str(local)
    if found:
        return found
    if local.exists():
        return str(local)
    pytest.skip(f"{name} is not installed")


def _run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == 0, (
        f"{cmd} failed (rc={proc.returncode})\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    return proc.stdout


def _clean_shell(script, tree, *, shell="bash", cwd, env=None, extra_path=()):
    """Run `script` in `shell` with an emptied environment after sourcing the
    tree's set_env.sh. PATH holds only the system directories plus the
    directories of tools the test brings (cmake from PyPI)."""
    path = os.pathsep.join(list(extra_path) + ["/usr/local/bin", "/usr/bin", "/bin"])
    base = {"PATH": path, "HOME": str(cwd)}
    base.update(env or {})
    text = f". {shlex.quote(str(tree / 'set_env.sh'))}\n{script}"
    return _run(["env", "-i"] + [f"{k}={v}" for k, v in base.items()] + [shell, "-c", text], cwd=cwd)


def _exports(library):
    """Defined dynamic symbols: {name: nm type letter}."""
    out = _run([_tool("nm"), "-D", "--defined-only", str(library)])
    symbols = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            symbols[fields[2].split("@")[0]] = fields[1]
    return symbols


def _header_functions(include_dir, tmp_path):
    """Every function the public headers declare, as the C compiler reads them
    (`-aux-info` lists each prototype with the file that declared it)."""
    headers = sorted(include_dir.rglob("*.h"))
    source = tmp_path / "all_headers.c"
    source.write_text("".join(f'#include "{h.relative_to(include_dir)}"\n' for h in headers))
    info = tmp_path / "aux-info.txt"
    _run([_tool("gcc"), "-std=c11", "-fsyntax-only", "-aux-info", str(info), f"-I{include_dir}", str(source)])
    names = set()
    for line in info.read_text().splitlines():
        match = re.match(r"/\* (\S+):\d+:\S+ \*/ (.*)", line)
        if not match or not Path(match.group(1)).resolve().is_relative_to(include_dir.resolve()):
            continue
        declaration = match.group(2)
        if re.match(r"static\b", declaration):
            continue  # inline helpers in a header are not library exports
        names.add(re.search(r"(\w+)\s*\(", declaration).group(1))
    return names


def _elf_dynamic(path):
    out = _run([_tool("readelf"), "-d", str(path)])
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)
    soname = re.findall(r"\(SONAME\)\s+Library soname: \[(.+?)\]", out)
    return needed, soname


def _build_sample(tree, tmp_path):
    """Configure, build and run examples/cann_sample from an empty build folder with
    only set_env.sh sourced; returns the program's output."""
    cmake = _tool("cmake")
    build = tmp_path / "sample build"
    build.mkdir()
    return _clean_shell(
        f"cmake {shlex.quote(str(SAMPLE_DIR))} >/dev/null && cmake --build . >/dev/null && ./bin/opapi_test "
        f"&& ./bin/opapi_forward_test",
        tree, cwd=build, extra_path=[str(Path(cmake).parent)])


def _check_sample_output(out):
    # The forward op's documented case (CANN's doc prints result[i] for all
    # 16 outputs): bias 1 + 2 taps inside self * 3 channels = 7 everywhere.
    forward = re.findall(r"^result\[(\d+)\] is: (\S+)$", out, re.M)
    assert [int(i) for i, _ in forward] == list(range(16)), out
    assert {float(v) for _, v in forward} == {7.0}, out
    # One line per gradient: its name, its shape, then every element.
    got = {name: [float(v) for v in values.split()]
           for name, values in re.findall(r"^(\w+)\s+\[[\d,]+\]:(.*)$", out, re.M)}
    assert got == SAMPLE_EXPECTED, out


def _tree_listing(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and not PYTHON_FILES.search(str(p.relative_to(root))))


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def tree(convtbc_cli):
    """The tree inside the installed Python package."""
    root = Path(_run([convtbc_cli, "config", "--prefix"]).strip())
    assert root.is_dir(), root
    return root


@pytest.fixture(scope="session")
def prefix_tree(tmp_path_factory):
    """A plain `meson setup --prefix && meson install` of this checkout."""
    meson = _tool("meson", python_bin=True)
    ninja = _tool("ninja", python_bin=True)
    base = tmp_path_factory.mktemp("meson_prefix")
    build, prefix = base / "build", base / "prefix"
    env = dict(os.environ, NINJA=ninja, PATH=str(Path(ninja).parent) + os.pathsep + os.environ.get("PATH", ""))
    _run([meson, "setup", str(build), str(REPO_ROOT), f"--prefix={prefix}"], env=env)
    _run([meson, "install", "-C", str(build), "--quiet"], env=env)
    return prefix


# --------------------------------------------------------------------- tests


def test_tree_is_shaped_like_cann(tree):
    missing = [f for f in TREE_FILES if not (tree / f).is_file()]
    assert not missing, f"missing from {tree}: {missing}"
    # A wheel cannot hold symlinks, and copies would be separate runtime states.
    assert not [p for p in tree.rglob("*") if p.is_symlink()]


def test_one_real_library_with_soname(tree):
    library = tree / "lib64" / SONAME
    assert library.read_bytes()[:4] == b"\x7fELF"
    needed, soname = _elf_dynamic(library)
    assert soname == [SONAME]
    # The development name is a GNU ld script: comments, then INPUT(<the real library>).
    text = (tree / "lib64" / "libconvtbc.so").read_text()
    body = re.sub(r"/\*.*?\*/", "", text, flags=re.S).split()
    assert body == [f"INPUT({SONAME})"], text
    # CANN's names are ELF objects with CANN's sonames that filter to it.
    for name in CANN_NAMES:
        path = tree / "lib64" / name
        assert path.read_bytes()[:4] == b"\x7fELF", name
        dynamic = _run([_tool("readelf"), "-d", str(path)])
        assert re.findall(r"\(SONAME\)\s+Library soname: \[(.+?)\]", dynamic) == [name]
        assert re.findall(r"\(FILTER\)\s+Filter library: \[(.+?)\]", dynamic) == [SONAME]


def test_exports_are_exactly_the_public_functions(tree, tmp_path):
    exported = _exports(tree / "lib64" / SONAME)
    declared = _header_functions(tree / "include", tmp_path)
    assert len(declared) > 40, sorted(declared)
    assert set(exported) - declared == set(), "exported but not in the public headers"
    assert declared - set(exported) == set(), "declared in the public headers but not exported"
    assert {t for t in exported.values()} == {"T"}, "only functions are exported"


def test_every_cann_name_links_one_runtime(tree, tmp_path):
    lib64 = tree / "lib64"
    program = tmp_path / "one_runtime"
    # By full path (as CANN's sample CMake files do) and by -l, every name at once.
    _run([_tool("gcc"), "-std=c11", f"-I{tree / 'include'}", f"-I{tree / 'include' / 'aclnn'}",
          str(C_DIR / "install_one_runtime.c"), "-o", str(program)]
         + [str(lib64 / name) for name in ALIASES]
         + [f"-L{lib64}"] + [f"-l{name[3:-3]}" for name in ALIASES])
    needed, _ = _elf_dynamic(program)
    # The linker records the real library for the ld script, and a CANN name
    # itself for a filter it takes symbols from, as a CANN build would.
    ours = [n for n in needed if "convtbc" in n or n in ALIASES]
    assert ours and set(ours) <= {SONAME, *CANN_NAMES}, needed
    out = _run([str(program)], env=dict(os.environ, LD_LIBRARY_PATH=str(lib64)))
    facts = dict(line.split() for line in out.splitlines())
    assert facts == {"convtbc_objects": "1", "init": "0", "init_again": "100002", "aclnn_success": "0"}


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_set_env_sh(tree, tmp_path, shell):
    # A copy of the tree at a path with a space, which nothing was built to
    # know: set_env.sh must find its own location. Sourced twice, with
    # entries already on the lists.
    moved = tmp_path / "moved tree"
    shutil.copytree(tree, moved, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    out = _clean_shell(
        f". {shlex.quote(str(moved / 'set_env.sh'))}\n"
        "for v in ASCEND_HOME_PATH ASCEND_TOOLKIT_HOME ASCEND_CUSTOM_PATH LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH; do\n"
        "  eval \"echo $v=\\$$v\"\ndone\nset | grep -c '^_convtbc' || true\n",
        moved, shell=shell, cwd=tmp_path, env={"LD_LIBRARY_PATH": "/opt/a:/opt/b"})
    lines = out.splitlines()
    values = dict(line.split("=", 1) for line in lines[:-1])
    root = str(moved.resolve())
    assert values["ASCEND_HOME_PATH"] == values["ASCEND_TOOLKIT_HOME"] == values["ASCEND_CUSTOM_PATH"] == root
    assert values["LD_LIBRARY_PATH"] == f"{root}/lib64:/opt/a:/opt/b"
    assert values["PKG_CONFIG_PATH"] == f"{root}/lib64/pkgconfig"
    assert values["CMAKE_PREFIX_PATH"] == root
    assert lines[-1] == "0", "set_env.sh leaves no variables of its own behind"


@pytest.mark.slow
def test_pkg_config(tree, tmp_path):
    if not shutil.which("pkg-config"):
        pytest.skip("pkg-config is not installed")
    src = C_DIR / "install_one_runtime.c"
    out = _clean_shell(
        f"cc -std=c11 $(pkg-config --cflags convtbc) {shlex.quote(str(src))} $(pkg-config --libs convtbc) "
        "-o prog && ./prog && pkg-config --modversion convtbc", tree, cwd=tmp_path)
    lines = out.splitlines()
    assert lines[0] == "convtbc_objects 1" and lines[1] == "init 0"
    assert lines[-1] == _run([sys.executable, "-c", "import importlib.metadata as m; print(m.version('convtbc'))"]).strip()


@pytest.mark.slow
def test_find_package_consumer(tree, tmp_path):
    cmake = _tool("cmake")
    build = tmp_path / "build"
    build.mkdir()
    out = _clean_shell(
        f"cmake {shlex.quote(str(C_DIR / 'install_consumer'))} >/dev/null && cmake --build . >/dev/null && ./consumer",
        tree, cwd=build, extra_path=[str(Path(cmake).parent)])
    assert out.splitlines()[:3] == ["convtbc_objects 1", "init 0", "init_again 100002"]


@pytest.mark.slow
def test_cann_sample_against_the_python_package_tree(tree, tmp_path):
    _check_sample_output(_build_sample(tree, tmp_path))


@pytest.mark.slow
def test_meson_prefix_install_gives_the_same_tree(tree, prefix_tree):
    assert _tree_listing(prefix_tree) == _tree_listing(tree)
    assert not [p for p in prefix_tree.rglob("*") if p.is_symlink()]


@pytest.mark.slow
def test_cann_sample_against_the_meson_prefix_tree(prefix_tree, tmp_path):
    _check_sample_output(_build_sample(prefix_tree, tmp_path))


def _doc_blocks(path, language):
    """The fenced code blocks of one language in a markdown file, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", path.read_text(), re.M | re.S)


@pytest.mark.slow
def test_ci_recipe_builds_and_tests_a_cann_project(convtbc_cli, tmp_path):
    """docs/testing-with-convtbc.md's C++ job, after its install line, as
    written: set_env.sh from `convtbc config --prefix`, the project's CMake
    build, ctest with the stream delay; the project is examples/cann_sample,
    whose test exits 1 on a wrong gradient."""
    job = _doc_blocks(REPO_ROOT / "docs" / "testing-with-convtbc.md", "sh")[0].splitlines()
    assert "pip install" in job[0] and len(job) == 4
    script = "\n".join(job[1:]).replace("/tmp/convtbc/bin/convtbc", shlex.quote(convtbc_cli))
    project = tmp_path / "project"
    shutil.copytree(SAMPLE_DIR, project)
    cmake = Path(_tool("cmake"))
    path = os.pathsep.join([str(cmake.parent), "/usr/local/bin", "/usr/bin", "/bin"])
    out = _run(["env", "-i", f"PATH={path}", f"HOME={tmp_path}", "bash", "-c", "set -e\n" + script], cwd=project)
    assert re.search(r"^100% tests passed.* out of 2$", out, re.M), out
