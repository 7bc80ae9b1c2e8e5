"""The library built from this checkout with AddressSanitizer +
UndefinedBehaviorSanitizer (meson, in a temporary directory), and the C test
programs built with the same sanitizers against it: every program must run
clean (no sanitizer report, leaks detected; leaks inside libgomp's own
thread pool are suppressed).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import C_DIR, REPO_ROOT
from test_c_programs import env_for

PROGRAMS = ["bad_inputs.c", "executor_rules.c", "numerics_sweep.c", "cann_style_example.cpp", "phase1_views.c",
            "meta_objects.cpp", "meta_executor.c",
            "runtime_surface.c", "stream_api.c"]


def tool(name):
    cand = Path(sys.executable).parent / name
    if cand.exists():
        return str(cand)
    return shutil.which(name)


@pytest.fixture(scope="module")
def asan_build(tmp_path_factory):
    meson, ninja = tool("meson"), tool("ninja")
    if not meson or not ninja:
        pytest.skip("meson/ninja not available")
    build = tmp_path_factory.mktemp("asan_build")
    env = dict(os.environ)
    env["PATH"] = str(Path(ninja).parent) + os.pathsep + env.get("PATH", "")
    setup = subprocess.run([meson, "setup", str(build), str(REPO_ROOT), "-Db_sanitize=address,undefined",
                            "-Db_lundef=false", "-Dbuildtype=debugoptimized"],
                           capture_output=True, text=True, env=env, timeout=300)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    comp = subprocess.run([ninja, "-C", str(build)], capture_output=True, text=True, env=env, timeout=900)
    assert comp.returncode == 0, comp.stdout[-5000:] + comp.stderr[-5000:]
    # The real shared object (an ELF file named libconvtbc.so*; libconvtbc.so
    # itself may be a linker script naming it).
    elves = [p for p in build.rglob("libconvtbc.so*")
             if p.is_file() and not p.is_symlink() and p.read_bytes()[:4] == b"\x7fELF"]
    assert elves, "no libconvtbc shared object in the sanitizer build"
    return elves[0]


@pytest.mark.slow
@pytest.mark.parametrize("src", PROGRAMS)
def test_program_under_sanitizers(src, asan_build, tmp_path):
    exe = tmp_path / src.rsplit(".", 1)[0]
    cc = ["g++", "-std=c++11"] if src.endswith(".cpp") else ["gcc", "-std=c11"]
    cmd = cc + ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
                "-fno-sanitize-recover=undefined", f"-I{REPO_ROOT / 'include'}",
                f"-I{REPO_ROOT / 'include' / 'aclnn'}", str(C_DIR / src), "-o", str(exe),
                str(asan_build), f"-Wl,-rpath,{asan_build.parent}", "-pthread", "-lm"]
    comp = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert comp.returncode == 0, comp.stderr
    supp = tmp_path / "lsan.supp"
    supp.write_text("leak:libgomp\n")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update({
        "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=1",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
        "LSAN_OPTIONS": f"suppressions={supp}:print_suppressions=0",
        "OMP_NUM_THREADS": "2",
    })
    env.update(env_for(src))
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600, env=env)
    report = p.stdout[-4000:] + p.stderr[-8000:]
    assert p.returncode == 0, f"{src} under ASan/UBSan: rc={p.returncode}\n{report}"
    for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
        assert marker not in p.stderr, report
