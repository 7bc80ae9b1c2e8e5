"""The C/C++ programs in tests/c, built against the INSTALLED headers and
library exactly as a user would (`cc $(convtbc config --cflags) prog.c
$(convtbc config --libs)`) and run without LD_LIBRARY_PATH; each returns 0
only if all of its checks pass.
"""

import os
import shutil
import subprocess

import pytest

from conftest import C_DIR

PROGRAMS = ["cann_style_example.cpp", "bad_inputs.c", "executor_rules.c", "numerics_sweep.c", "phase1_views.c",
            "meta_objects.cpp", "meta_executor.c", "runtime_surface.c", "stream_api.c", "device_memory.c",
            "default_copies.c", "fork_child.c", "hostile_views.c", "aliased_outputs.c", "executor_race.c",
            "stream_handles.c", "forward_op.c", "caller_team.c"]
# Programs that need more than the user's include and link lines.
EXTRA_FLAGS = {"caller_team.c": ["-fopenmp"]}

# The programs other than these hand host buffers straight to the op (the op
# needs no aclInit, and aclrtMalloc does); libconvtbc's optional device-memory
# checks are switched off for them. These keep every tensor in aclrtMalloc'd memory.
CHECKED_MEMORY_PROGRAMS = ("cann_style_example.cpp", "meta_executor.c", "device_memory.c", "default_copies.c",
                           "fork_child.c", "hostile_views.c", "aliased_outputs.c", "executor_race.c")
HOST_MEMORY_ENV = {"CONVTBC_CHECK_MEMORY": "0"}


def env_for(src):
    return {} if src in CHECKED_MEMORY_PROGRAMS else dict(HOST_MEMORY_ENV)


def compiler_for(src):
    if src.endswith(".cpp"):
        return [shutil.which("g++") or "c++", "-std=c++11"]
    return [shutil.which("gcc") or "cc", "-std=c11"]


@pytest.fixture(scope="module")
def built(convtbc_config, tmp_path_factory):
    out = tmp_path_factory.mktemp("cprogs")
    cflags, libs = convtbc_config["--cflags"].split(), convtbc_config["--libs"].split()
    exes = {}
    for src in PROGRAMS:
        exe = out / src.rsplit(".", 1)[0]
        cmd = compiler_for(src) + ["-O1", "-g", "-Wall", "-Wextra", *EXTRA_FLAGS.get(src, []), *cflags,
                                   str(C_DIR / src), "-o", str(exe),
                                   *libs, "-pthread", "-lm"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        exes[src] = (exe, p)
    return exes


def run_clean_env(exe, extra=None, timeout=300):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env.update(extra or {})
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow
@pytest.mark.parametrize("src", PROGRAMS)
def test_program(src, built):
    exe, comp = built[src]
    assert comp.returncode == 0, f"compile failed:\n{' '.join(comp.args)}\n{comp.stderr}"
    assert "warning" not in comp.stderr, comp.stderr
    p = run_clean_env(exe, env_for(src))
    assert p.returncode == 0, f"{src} failed (rc={p.returncode})\n{p.stdout}\n{p.stderr}"
    assert "OK" in p.stdout
