"""Shared fixtures for the convtbc test suite.

Run everything:      python -m pytest tests
Skip the slow parts: python -m pytest tests -m "not slow"
"""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
C_DIR = TESTS_DIR / "c"
DATA_DIR = TESTS_DIR / "data"

if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: builds or runs subprocesses (several seconds); deselect with -m 'not slow'")


def convtbc_script():
    """The installed `convtbc` console script (next to the interpreter, else
    on PATH)."""
    exe_dir = Path(sys.executable).parent
    for name in ("convtbc", "convtbc.exe"):
        cand = exe_dir / name
        if cand.exists():
            return str(cand)
    found = shutil.which("convtbc")
    if found:
        return found
    pytest.fail("the `convtbc` console script is not installed (pip install .)")


@pytest.fixture(scope="session")
def convtbc_cli():
    return convtbc_script()


def run_python(code, env_extra=None, timeout=120, check=True):
    """Run `code` in a fresh interpreter (fresh library state: no aclInit,
    no error messages) with the tests directory importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(TESTS_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    if env_extra:
        env.update(env_extra)
    # cwd is the tests directory: from the repository root, `python -c` would
    # import the source tree's convtbc_py (no library in it), not the
    # installed package.
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=TESTS_DIR,
                          capture_output=True, text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, (
            f"subprocess failed (rc={proc.returncode})\n--- stdout\n{proc.stdout}\n"
            f"--- stderr\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def convtbc_config(convtbc_cli):
    """`convtbc config --prefix/--cflags/--libs`, each run once per session."""
    out = {}
    for flag in ("--prefix", "--cflags", "--libs"):
        p = subprocess.run([convtbc_cli, "config", flag], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        out[flag] = p.stdout.strip()
    return out


@pytest.fixture
def rng():
    import numpy as np
    return np.random.default_rng(20240611)
