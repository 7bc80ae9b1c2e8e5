"""The micro-kernel contract (tests/c/ukernel_contract.c) for every kernel
entry: portable, AVX2, AVX-512 and AVX512_BF16 built against SIMDe (runs on
any x86-64 CPU with AVX2+FMA+F16C) and built natively (runs where the CPU
has AVX-512 F/BW/VL, and AVX512_BF16 for that entry); the AMX tile kernel's
(tests/c/amx_contract.c), its emulation everywhere and the tile unit where
the CPU has it. The kernel sources are compiled straight into the test
program (their symbols are hidden in the shared library), each with the ISA
flags meson gives it; and the kernels the library picks by default are the
best the CPU has.
"""

import platform
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import C_DIR, REPO_ROOT, run_python
from kernels_in_use import has_amx

KERNELS = REPO_ROOT / "libconvtbc" / "compute" / "kernels"
AVX2_FLAGS = ["-mavx2", "-mfma", "-mf16c"]
AVX512_FLAGS = ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mfma", "-mf16c"]

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                                reason="the SIMD kernels are x86-64 kernels")


def cpu_flags():
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


AMX_FLAGS = ["-mamx-tile", "-mamx-bf16"]


def best_isa(flags):
    """What cpu_features.c should pick (Linux lists avx512* only when the OS
    saves the ZMM state)."""
    if {"avx512f", "avx512bw", "avx512vl", "fma", "f16c"} <= flags:
        if has_amx(flags):
            return "amx_bf16"
        return "avx512_bf16" if "avx512_bf16" in flags else "avx512"
    if {"avx2", "fma", "f16c"} <= flags:
        return "avx2"
    return "portable"


def simde_include():
    """SIMDe's headers: the `simde-py` package of the test extra, else
    Debian's libsimde-dev."""
    try:
        import simde_py
        return simde_py.get_include()
    except ImportError:
        pass
    if Path("/usr/include/simde/x86/avx512.h").exists():
        return "/usr/include"
    pytest.fail("SIMDe headers not found: pip install simde-py (in the test extra) or apt-get install libsimde-dev")


def compile_all(cc, jobs):
    """Compile (source, object, flags) jobs side by side."""
    procs = []
    for src, obj, extra in jobs:
        cmd = [cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{REPO_ROOT / 'libconvtbc'}",
               f"-I{C_DIR}", *extra, "-c", str(src), "-o", str(obj)]
        procs.append((cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    for cmd, proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"compile failed:\n{' '.join(cmd)}\n{err}"


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """The contract program linked with the SIMDe-built AVX-512 kernels, and
    where the CPU can run them with the native ones (the library's build
    compiles those everywhere)."""
    cc = shutil.which("gcc") or shutil.which("cc")
    out = tmp_path_factory.mktemp("ukernel")
    via_simde = ["-DCTBC_KERNEL_VIA_SIMDE", f"-I{simde_include()}", "-Wno-psabi", *AVX2_FLAGS]
    jobs = [
        # -ffp-contract=off: the reference's multiply-then-add stays unfused
        (C_DIR / "ukernel_contract.c", out / "main.o", ["-ffp-contract=off"]),
        (KERNELS / "kernel_portable.c", out / "portable.o", []),
        (KERNELS / "kernel_avx2.c", out / "avx2.o", AVX2_FLAGS),
        # SIMDe splits each 512-bit operation into two native AVX2/FMA/F16C
        # ones where the compiler may use them: the same bits as the
        # instructions (its plain-C fallback for FMA would round twice)
        (KERNELS / "kernel_avx512.c", out / "avx512_simde.o", via_simde),
        (KERNELS / "kernel_avx512_bf16.c", out / "avx512_bf16_simde.o", via_simde),
    ]
    builds = {"simde": [out / "avx512_simde.o", out / "avx512_bf16_simde.o"]}
    if best_isa(cpu_flags()) not in ("avx2", "portable"):
        jobs += [(KERNELS / "kernel_avx512.c", out / "avx512_native.o", AVX512_FLAGS),
                 (KERNELS / "kernel_avx512_bf16.c", out / "avx512_bf16_native.o", [*AVX512_FLAGS, "-mavx512bf16"])]
        builds["native"] = [out / "avx512_native.o", out / "avx512_bf16_native.o"]
    compile_all(cc, jobs)
    common = [out / "main.o", out / "portable.o", out / "avx2.o"]
    exes = {}
    for name, objs in builds.items():
        exe = out / f"ukernel_contract_{name}"
        p = subprocess.run([cc, *map(str, common + objs), "-o", str(exe), "-lm"], capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        exes[name] = exe
    return exes


def run_contract(exe, entries):
    p = subprocess.run([str(exe), *entries], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"{exe.name} failed (rc={p.returncode})\n{p.stdout}\n{p.stderr}"
    assert p.stdout.splitlines()[-1] == "OK", p.stdout
    return p.stdout


@pytest.mark.slow
def test_kernels_via_simde(programs):
    if not {"avx2", "fma", "f16c"} <= cpu_flags():
        pytest.skip("the SIMDe build runs on AVX2+FMA+F16C")
    out = run_contract(programs["simde"], ["avx512", "avx512_bf16"])
    for name in ("portable", "avx2", "avx512", "avx512_bf16"):
        assert f"{name}: ok" in out


@pytest.mark.slow
def test_kernels_native_avx512(programs):
    best = best_isa(cpu_flags())
    if best in ("avx2", "portable"):
        pytest.skip("this CPU has no AVX-512 F/BW/VL (the SIMDe build ran the same source)")
    # where the CPU has AVX512_BF16 this also holds VDPBF16PS to the
    # semantics ukernel.h states (and the SIMDe build emulates)
    entries = ["avx512", "avx512_bf16"] if best in ("avx512_bf16", "amx_bf16") else ["avx512"]
    out = run_contract(programs["native"], entries)
    for name in entries:
        assert f"{name}: ok" in out


@pytest.mark.slow
def test_amx_tile_kernel(tmp_path):
    # The emulation runs on any CPU; the tile unit where the CPU has it (a
    # compiler without the AMX flags builds the emulation alone, as meson
    # does).
    cc = shutil.which("gcc") or shutil.which("cc")
    main = tmp_path / "main.o"
    compile_all(cc, [(C_DIR / "amx_contract.c", main, ["-ffp-contract=off"])])
    kernel = tmp_path / "amx.o"
    try:
        compile_all(cc, [(KERNELS / "kernel_amx.c", kernel, AMX_FLAGS)])
        built = True
    except AssertionError:
        compile_all(cc, [(KERNELS / "kernel_amx.c", kernel, [])])
        built = False
    exe = tmp_path / "amx_contract"
    p = subprocess.run([cc, str(main), str(kernel), "-o", str(exe), "-lm"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    tiles = built and has_amx(cpu_flags())
    out = run_contract(exe, ["tiles"] if tiles else [])
    assert "amx_emulated: ok" in out
    assert ("amx_bf16: ok" if tiles else "amx_bf16: skipped (CPU)") in out


# CONVTBC_ISA is read at every plan: one process runs the op with no cap,
# then with each cap.
ISA_WORKER = r"""
import os, sys, numpy as np
import convtbc_py
rng = np.random.default_rng(7)
mk = lambda *s: rng.standard_normal(s).astype(np.float32)
ops = mk(30, 8, 48), mk(32, 8, 40), mk(3, 40, 48), mk(48)
out = {}
for isa in ["default"] + sys.argv[2:]:
    if isa != "default":
        os.environ["CONVTBC_ISA"] = isa
    out[isa] = np.concatenate([np.ravel(o) for o in convtbc_py.conv_tbc_backward(*ops, 0)])
np.savez(sys.argv[1], **out)
"""


@pytest.mark.slow
def test_default_is_the_best_isa_of_the_cpu(tmp_path, monkeypatch):
    monkeypatch.delenv("CONVTBC_ISA", raising=False)
    best = best_isa(cpu_flags())
    out = tmp_path / "isa.npz"
    run_python(f"import sys; sys.argv = ['w', {str(out)!r}, {best!r}, 'portable']\n" + ISA_WORKER)
    with np.load(out) as z:
        got = {k: z[k].tobytes() for k in z.files}
    assert got["default"] == got[best], f"the default kernels are not {best}'s"
    if best != "portable":
        # the cap holds: the portable kernels (no FMA) give other bits here
        assert got["default"] != got["portable"]
