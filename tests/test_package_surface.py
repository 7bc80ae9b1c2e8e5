"""The Python package as its users meet it (issue 12): one version everywhere
(meson.build's project(), the installed metadata, `convtbc_py.__version__`,
`convtbc --version`, a source checkout), a docstring on every public name,
types a `mypy --strict` user file can rely on, and an import that leaves
ml_dtypes alone until a bfloat16 array shows up.
"""

import importlib
import importlib.metadata
import importlib.util
import inspect
import re
import subprocess
import sys
import textwrap

import pytest

import convtbc_py
from conftest import REPO_ROOT, TESTS_DIR, run_python

TYPED_USER = TESTS_DIR / "data" / "typed_user.py"


def meson_project_version():
    text = (REPO_ROOT / "meson.build").read_text()
    project = text[text.index("project("):]
    return re.search(r"version:\s*'([^']+)'", project[:project.index(")")]).group(1)


def test_version_is_the_projects_everywhere(convtbc_cli):
    version = meson_project_version()
    assert convtbc_py.__version__ == version
    assert importlib.metadata.version("convtbc") == version
    p = subprocess.run([convtbc_cli, "--version"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"convtbc {version}"


def test_version_in_a_checkout_that_was_never_built():
    # Loaded outside its package, _version.py has no generated _build_version
    # beside it: it must fall back to the meson.build next to its folder.
    spec = importlib.util.spec_from_file_location("checkout_version", REPO_ROOT / "convtbc_py" / "_version.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.__version__ == meson_project_version()


def test_import_does_not_import_ml_dtypes():
    proc = run_python("""
        import sys
        import numpy as np
        import convtbc_py
        assert "ml_dtypes" not in sys.modules, "import convtbc_py imported ml_dtypes"
        x = np.ones((5, 1, 2), np.float32)
        w = np.ones((1, 2, 2), np.float32)
        gi, gw, gb = convtbc_py.conv_tbc_backward(x, x, w, [0.0, 0.0], 0)
        assert "ml_dtypes" not in sys.modules, "a float32 call imported ml_dtypes"
        try:
            convtbc_py.conv_tbc_backward(x.astype(np.float64), x, w, [0.0, 0.0], 0)
        except TypeError as e:
            assert "bfloat16" in str(e)
        assert "ml_dtypes" not in sys.modules, "an error message imported ml_dtypes"
        import ml_dtypes
        bf = x.astype(ml_dtypes.bfloat16)
        gi, gw, gb = convtbc_py.conv_tbc_backward(bf, bf, w, [0.0, 0.0], 0)
        print(gi.dtype, float(gi.astype(np.float32).max()))
    """)
    assert proc.stdout.split() == ["bfloat16", "2.0"], proc.stdout


def public_names():
    """The package's __all__, then each module's own public functions and classes."""
    for name in convtbc_py.__all__:
        value = getattr(convtbc_py, name)
        if inspect.isfunction(value) or inspect.isclass(value):
            yield f"convtbc_py.{name}", value
    for module_name in ("errors", "ops", "emulation", "reference", "cli"):
        module = importlib.import_module(f"convtbc_py.{module_name}")
        for name, value in vars(module).items():
            if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(value) or inspect.isclass(value):
                yield f"{module.__name__}.{name}", value


def test_public_names_have_docstrings():
    names = dict(public_names())
    assert {"convtbc_py.conv_tbc_backward", "convtbc_py.memory_checking", "convtbc_py.soc_profile",
            "convtbc_py.ops.run_on_host", "convtbc_py.cli.main"} <= set(names)
    # Classes need their own docstring, not one inherited from Exception.
    missing = [q for q, v in names.items() if not (v.__dict__.get("__doc__") if inspect.isclass(v) else v.__doc__)]
    assert not missing, f"no docstring: {missing}"
    for module in ("", ".errors", ".ops", ".emulation", ".reference", ".cli", "._version"):
        assert importlib.import_module(f"convtbc_py{module}").__doc__, module


@pytest.fixture(scope="module")
def mypy():
    pytest.importorskip("mypy", reason="mypy is in the test extra")
    return [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--show-error-codes"]


@pytest.mark.slow
def test_typed_user_file_passes_mypy_strict_and_types_catch_misuse(mypy, tmp_path):
    # A second file misuses the API: mypy must flag each marked line, which
    # shows the arrays and integers are typed, not Any.
    wrong = tmp_path / "typed_misuse.py"
    wrong.write_text(textwrap.dedent("""\
        import numpy as np
        import convtbc_py
        x = np.zeros((5, 1, 2), np.float32)
        convtbc_py.conv_tbc_backward(x, x, x, x, pad="1")  # WRONG
        convtbc_py.conv_tbc_backward(x, x, x, x, 0, cube_math_type=1.5)  # WRONG
        convtbc_py.conv_tbc_backward(x, x, x, x, 0, 1)  # WRONG
        name: int = convtbc_py.conv_tbc_backward(x, x, x, x, 0)[0]  # WRONG
        version: int = convtbc_py.__version__  # WRONG
        status: str = convtbc_py.AclnnTypeError(161002).status  # WRONG
        """))
    # From tmp_path: the repository root would shadow the installed package.
    p = subprocess.run([*mypy, "--cache-dir", str(tmp_path / "cache"), str(TYPED_USER), str(wrong)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    lines = p.stdout.splitlines()
    assert not [line for line in lines if "typed_user.py" in line], p.stdout
    flagged = {int(m.group(1)) for m in re.finditer(r"typed_misuse\.py:(\d+): error", p.stdout)}
    expected = {n for n, line in enumerate(wrong.read_text().splitlines(), 1) if "# WRONG" in line}
    assert flagged == expected, p.stdout + p.stderr
