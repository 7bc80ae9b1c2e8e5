"""docs/testing-with-convtbc.md's Python recipe, as written: its conftest.py
fixture and test file are copied into an empty project and run by pytest
there, against the installed convtbc_py (the C++ job is run by
tests/test_install_tree.py)."""

import re
import subprocess
import sys

import pytest

from conftest import REPO_ROOT

DOC = REPO_ROOT / "docs" / "testing-with-convtbc.md"


def python_blocks():
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.M | re.S)


@pytest.mark.slow
def test_python_recipe_runs_as_written(tmp_path):
    files = {}
    for block in python_blocks():
        name = re.match(r"# (\S+\.py)\n", block)
        assert name, f"a python block of the recipe does not start with its file name:\n{block}"
        files[name.group(1)] = block
    assert set(files) == {"conftest.py", "test_training_step.py"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the fixture's two SoC profiles: the test ran once under each
    assert "2 passed" in proc.stdout, proc.stdout
