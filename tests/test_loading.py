"""How convtbc_py finds and loads a library, and the CANN backend.

- From the repository root the source folder convtbc_py/ shadows the
  installed package; the README's Python example still works there (the
  installed distribution's library and headers are found), and with no
  install the error says what to run.
- `import convtbc_py` loads no library (nor numpy), and `convtbc config`
  never loads it.
- With CONVTBC_CANN_HOME (or use_cann) naming a toolkit root, the numpy API
  runs through CANN's public API on that toolkit's libascendcl.so,
  libnnopbase.so and operator library. convtbc's own install tree is the
  toolkit here (its CANN-named libraries are filters of libconvtbc), with
  checked device memory and the device-memory guard on, as by default.
"""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import REPO_ROOT, run_python
from reference import BF16, REL_BOUND, conv_tbc_backward_ref

pytestmark = pytest.mark.slow

# Settings that would weaken what the CANN path is checked against.
LIBRARY_ENV = ("CONVTBC_CHECK_MEMORY", "CONVTBC_GUARD_DEVICE_MEMORY", "CONVTBC_STREAM_DELAY_MS",
               "CONVTBC_SOC_VERSION", "CONVTBC_LIBRARY", "CONVTBC_CANN_HOME")


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in LIBRARY_ENV}
    env.update(extra)
    return env


def _readme_python_example():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Use it from Python"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


# ------------------------------------------------------------------ checkout


def test_readme_example_at_the_repository_root():
    """What a user types after the README's `pip install .`, from where the
    README's commands leave them."""
    example = _readme_python_example()
    # The example prints an exception's status and name; the README's
    # comment says which.
    expected = re.search(r"print\(e\.status.*#\s*(\d+) (\w+)", example).groups()
    code = "import convtbc_py\nprint('from', convtbc_py.__file__)\n" + example
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=_clean_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    # The checkout's package really was the one imported (it shadows an
    # installed one; an editable install maps it there too).
    assert lines[0] == f"from {REPO_ROOT / 'convtbc_py' / '__init__.py'}"
    assert lines[-1].split()[:2] == list(expected)


def test_checkout_without_an_install_says_what_to_do():
    # -S: no site-packages, so no installed distribution to fall back on.
    code = textwrap.dedent("""
        import convtbc_py
        try:
            convtbc_py.lib
        except OSError as exc:
            print(exc)
        else:
            print("loaded")
        """)
    proc = subprocess.run([sys.executable, "-S", "-c", code], cwd=REPO_ROOT, env=_clean_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    message = proc.stdout
    assert "source folder of a checkout" in message
    assert f"{sys.executable} -m pip install {REPO_ROOT}" in message
    assert f"--no-build-isolation -e {REPO_ROOT}" in message


# ------------------------------------------------------------------ start-up


def test_import_loads_no_library():
    out = run_python("""
        import sys
        import convtbc_py
        maps = open("/proc/self/maps").read()
        print("libconvtbc" in maps, "numpy" in sys.modules, "cffi" in sys.modules, convtbc_py.backend())
        convtbc_py.lib
        print("libconvtbc" in open("/proc/self/maps").read())
        """, env_extra=_clean_env()).stdout.split()
    assert out == ["False", "False", "False", "convtbc", "True"]


def test_the_library_stays_mapped_after_dlclose():
    """Closed (as cffi closes it when its lib object is collected, at exit
    too), the library and the OpenMP runtime it pulled in stay mapped, so
    that idle OpenMP threads never wake in unmapped code."""
    out = run_python("""
        import cffi
        from convtbc_py import _library
        ffi = cffi.FFI()
        lib = _library._dlopen(ffi, _library.library_path(), "libconvtbc")
        loaded = open("/proc/self/maps").read()
        ffi.dlclose(lib)
        maps = open("/proc/self/maps").read()
        print("libconvtbc" in loaded, "libgomp" in loaded, "libconvtbc" in maps, "libgomp" in maps)
        """, env_extra=_clean_env()).stdout.split()
    assert out == ["True", "True", "True", "True"]


def test_config_does_not_load_the_library(convtbc_config):
    # A library that cannot load (CONVTBC_LIBRARY names no file) changes
    # nothing, and nothing of the library is mapped after config ran.
    out = run_python("""
        import contextlib, io
        from convtbc_py.cli import main
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            rc = main(["config", "--prefix", "--cflags", "--libs"])
        print(rc, "libconvtbc" in open("/proc/self/maps").read())
        print(printed.getvalue().strip())
        """, env_extra=_clean_env(CONVTBC_LIBRARY="/nonexistent/libconvtbc.so.0")).stdout.splitlines()
    assert out[0] == "0 False"
    assert out[1] == " ".join(convtbc_config[flag] for flag in ("--prefix", "--cflags", "--libs"))


# ------------------------------------------------------------- CANN backend

# Each case: (name, T, B, C_in, K, C_out, pad, dtypes of grad_output/input/weight/bias, views, cube_math_type).
# "views" makes every operand a non-contiguous view (transposed, strided,
# broadcast bias) of the same values.
CASES = [
    ("f32", 9, 3, 5, 3, 4, 0, ("float32",) * 4, False, 0),
    ("f32_pad", 7, 2, 6, 4, 5, 3, ("float32",) * 4, False, 0),
    ("f32_views_pad", 8, 3, 4, 3, 6, 2, ("float32",) * 4, True, 0),
    ("f32_hf32", 9, 2, 7, 2, 3, 1, ("float32",) * 4, False, 1),
    ("f16_pad", 10, 2, 8, 3, 5, 2, ("float16",) * 4, False, 0),
    ("f16_views", 6, 4, 3, 2, 7, 0, ("float16",) * 4, True, 0),
    ("bf16_pad", 9, 3, 6, 3, 4, 1, ("bfloat16",) * 4, False, 0),
    ("bf16_views_pad", 7, 2, 5, 4, 3, 2, ("bfloat16",) * 4, True, 0),
    ("mixed", 8, 2, 4, 3, 5, 1, ("float16", "bfloat16", "float32", "float16"), False, 0),
    ("empty_input", 5, 2, 0, 2, 4, 1, ("float32",) * 4, False, 0),
]

_RUN_CASES = """
import re
import numpy as np
import ml_dtypes
import convtbc_py

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def operands(T, B, C_in, K, C_out, pad, dtypes, views, seed):
    rng = np.random.default_rng(seed)
    T_out = T + 2 * pad + 1 - K
    values = [rng.standard_normal(s) for s in ((T_out, B, C_out), (T, B, C_in), (K, C_in, C_out), (C_out,))]
    arrays = [v.astype(DTYPES[d]) for v, d in zip(values, dtypes)]
    if views:
        g, x, w, b = arrays
        g = np.ascontiguousarray(g.transpose(1, 0, 2)).transpose(1, 0, 2)   # strides (C, T*C, 1)
        x = np.repeat(x, 2, axis=2)[:, :, ::2]                              # every other channel
        w = np.asfortranarray(w)                                            # column-major
        b = np.broadcast_to(b[:1], b.shape)                                 # stride 0
        assert not any(a.flags.c_contiguous for a in (g, x, w, b))
        arrays = [g, x, w, b]
    return arrays


def run(cases):
    out = {}
    for seed, (name, T, B, C_in, K, C_out, pad, dtypes, views, cube) in enumerate(cases):
        arrays = operands(T, B, C_in, K, C_out, pad, dtypes, views, seed)
        for grad_name, grad in zip(("gi", "gw", "gb"), convtbc_py.conv_tbc_backward(*arrays, pad, cube_math_type=cube)):
            out[f"{name}/{grad_name}"] = (str(grad.dtype), grad.shape, grad.tobytes().hex())
        x, w, b = arrays[1:]
        if x.dtype == w.dtype and T + pad >= K:  # what the forward op takes
            y = convtbc_py.conv_tbc(x, w, b, pad, cube_math_type=cube)
            out[f"{name}/out"] = (str(y.dtype), y.shape, y.tobytes().hex())
    return out


def errors():
    rng = np.random.default_rng(0)
    g, x = rng.standard_normal((5, 2, 4), np.float32), rng.standard_normal((5, 2, 3), np.float32)
    w, b = rng.standard_normal((3, 3, 4), np.float32), np.zeros(4, np.float32)
    calls = {
        "channels": (g, x, w[:, :2], b, 1),
        "t_out": (g, x, w, b, 2),
        "bias": (g, x, w, b[:3], 1),
        "null_input": (g, None, w, b, 1),
    }
    forward = {"forward_channels": (x, w[:, :2], b, 1), "forward_pad": (x, w, b, -1)}
    out = {}
    for name, args in list(calls.items()) + list(forward.items()):
        try:
            (convtbc_py.conv_tbc if name in forward else convtbc_py.conv_tbc_backward)(*args)
            out[name] = None
        except convtbc_py.ConvTbcError as e:
            # The PID/timestamp of the log line is not part of what is compared.
            out[name] = (type(e).__name__, e.status, e.name, re.sub(r"\\[PID: \\d+\\] \\S+ ", "", e.message))
    return out
"""


def _results(backend, env, select=""):
    code = _RUN_CASES + textwrap.dedent(f"""
        {select}
        assert convtbc_py.backend() == {backend!r}, convtbc_py.backend()
        print(repr((run({CASES!r}), errors(), "libascendcl.so" in open("/proc/self/maps").read())))
        """)
    import ast

    return ast.literal_eval(run_python(code, env_extra=env, timeout=240).stdout)


@pytest.fixture(scope="module")
def builtin_results():
    return _results("convtbc", _clean_env())


@pytest.fixture(scope="module")
def cann_results(convtbc_config):
    return _results("cann", _clean_env(CONVTBC_CANN_HOME=convtbc_config["--prefix"]))


def test_cann_backend_is_bit_identical_to_the_builtin_one(builtin_results, cann_results):
    builtin, _, builtin_mapped = builtin_results
    cann, _, cann_mapped = cann_results
    assert (builtin_mapped, cann_mapped) == (False, True)
    forward = [key for key in builtin if key.endswith("/out")]
    assert sorted(cann) == sorted(builtin) and len(cann) == 3 * len(CASES) + len(forward) and len(forward) >= 8
    differing = [key for key in builtin if cann[key] != builtin[key]]
    assert not differing


def test_cann_backend_against_the_float64_reference(cann_results):
    # What the toolkit computed, checked independently of either backend.
    results, _, _ = cann_results
    dtypes = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": BF16}
    exec_namespace = {}
    exec(compile(_RUN_CASES, "cases", "exec"), exec_namespace)  # noqa: S102 (the test's own code)
    for seed, (name, T, B, C_in, K, C_out, pad, case_dtypes, views, cube) in enumerate(CASES):
        if cube:
            continue  # HF32 rounding of the operands: tests/test_cube_math.py covers it
        g, x, w, b = exec_namespace["operands"](T, B, C_in, K, C_out, pad, case_dtypes, views, seed)
        wanted = conv_tbc_backward_ref(*(a.astype(np.float64) for a in (g, x, w)), pad)
        for grad_name, want in zip(("gi", "gw", "gb"), wanted):
            dtype_name, shape, hexed = results[f"{name}/{grad_name}"]
            got = np.frombuffer(bytes.fromhex(hexed), dtype=dtypes[dtype_name]).reshape(shape).astype(np.float64)
            assert got.shape == want.shape
            scale = max(float(np.max(np.abs(want), initial=0.0)), 1.0)
            error = float(np.max(np.abs(got - want), initial=0.0))
            assert error <= REL_BOUND[dtypes[dtype_name]] * scale * 4, (name, grad_name, error, scale)


def test_cann_backend_raises_what_the_builtin_one_raises(builtin_results, cann_results):
    _, builtin, _ = builtin_results
    _, cann, _ = cann_results
    assert all(value is not None for value in builtin.values())
    assert cann == builtin


def test_use_cann_and_the_convtbc_only_controls(convtbc_config, tmp_path):
    home = convtbc_config["--prefix"]
    other_home = tmp_path / "other_toolkit"  # valid too, but not the one in use
    other_home.symlink_to(home)
    out = run_python(f"""
        import numpy as np
        import convtbc_py

        try:
            convtbc_py.use_cann("/nonexistent")
        except FileNotFoundError as exc:
            print("missing:", "/nonexistent/lib64/libascendcl.so" in str(exc))
        print(convtbc_py.backend())
        convtbc_py.use_cann({home!r})
        print(convtbc_py.backend())
        x = np.ones((5, 1, 2), np.float32)
        print(convtbc_py.conv_tbc_backward(x, x, np.ones((1, 2, 2), np.float32), np.ones(2, np.float32), 0)[2])
        print(hasattr(convtbc_py.lib, "convtbcConvTbcBackwardOnHost"), hasattr(convtbc_py.lib, "aclnnConvTbcBackward"))
        for control in ("soc_profile", "memory_checking", "device_memory_guard", "set_soc"):
            try:
                getattr(convtbc_py, control)("Ascend910A" if "soc" in control else False)
            except convtbc_py.NotConvtbcError as exc:
                print(control, "CANN backend" in str(exc))
        print(convtbc_py.soc_name())
        convtbc_py.use_cann({home!r})  # the same home again: accepted
        try:
            convtbc_py.use_cann({str(other_home)!r})
        except RuntimeError as exc:
            print(type(exc).__name__)
        """, env_extra=_clean_env()).stdout.splitlines()
    assert out == ["missing: True", "convtbc", "cann", "[5. 5.]", "False True", "soc_profile True",
                   "memory_checking True", "device_memory_guard True", "set_soc True", "Ascend910B1",
                   "RuntimeError"]


def test_use_cann_after_first_use_is_refused(convtbc_config):
    out = run_python(f"""
        import convtbc_py
        convtbc_py.lib
        try:
            convtbc_py.use_cann({convtbc_config["--prefix"]!r})
        except RuntimeError as exc:
            print("refused:", "before the first use" in str(exc), convtbc_py.backend())
        """, env_extra=_clean_env()).stdout.split()
    assert out == ["refused:", "True", "convtbc"]
