"""`convtbc info` reports what the library itself finds (convtbcGetCpuInfo:
CPUID and XGETBV), checked here against what Linux found independently:
the flags and model name of /proc/cpuinfo, the cache sizes under
/sys/devices/system/cpu/cpu0/cache; and against the documented knobs:
CONVTBC_ISA=portable selects the portable kernels, OMP_NUM_THREADS sets the
OpenMP threads, CONVTBC_SOC_VERSION the SoC profile."""

import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path

import pytest

from convtbc_py import cli, ffi, lib
from convtbc_py.info import feature_names
from kernels_in_use import has_amx
from rawapi import recent_msg

ACL_ERROR_INVALID_PARAM = 100000
X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
# The knobs the report follows, cleared so that the caller's shell cannot
# change the expected values.
KNOBS = ("CONVTBC_ISA", "OMP_NUM_THREADS", "CONVTBC_SOC_VERSION", "CONVTBC_LIBRARY")


def _info(cli, *args, **env):
    clean = {k: v for k, v in os.environ.items() if k not in KNOBS}
    p = subprocess.run([cli, "info", *args], capture_output=True, text=True, timeout=120, env=dict(clean, **env))
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


@pytest.fixture(scope="module")
def report(convtbc_cli):
    return json.loads(_info(convtbc_cli, "--json"))


def _proc_cpuinfo():
    """The first processor's fields of /proc/cpuinfo."""
    path = Path("/proc/cpuinfo")
    if not path.is_file():
        pytest.skip("no /proc/cpuinfo")
    fields = {}
    for line in path.read_text().splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


@pytest.mark.skipif(not X86, reason="CPUID features are x86's")
def test_features_match_proc_cpuinfo(report):
    flags = set(_proc_cpuinfo().get("flags", "").split())
    names = feature_names()
    assert {"avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16"} <= set(names)
    # Linux names every one of these flags (and hides those whose register
    # state the OS does not save, as convtbc does).
    assert {n for n in names if n in flags} == set(report["cpu"]["features"])
    assert set(report["cpu"]["features"]) | set(report["cpu"]["features_absent"]) == set(names)


@pytest.mark.skipif(not X86, reason="CPUID vendor and brand strings are x86's")
def test_model_and_vendor_match_proc_cpuinfo(report):
    fields = _proc_cpuinfo()
    assert report["cpu"]["vendor"] == fields["vendor_id"]
    assert report["cpu"]["model"] == fields["model name"]


def _sysfs_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def test_cache_sizes_match_sysfs(report):
    if not SYSFS_CACHE.is_dir():
        pytest.skip("no cache description in sysfs")
    sysfs = {}
    for index in sorted(SYSFS_CACHE.glob("index*")):
        try:
            level, kind, size = ((index / name).read_text().strip() for name in ("level", "type", "size"))
        except OSError:
            continue
        if kind in ("Data", "Unified"):
            sysfs[{"1": "l1d", "2": "l2", "3": "l3"}.get(level)] = _sysfs_size(size)
    sysfs.pop(None, None)
    if not sysfs:
        pytest.skip("sysfs lists no data caches")
    for level, size in sysfs.items():
        assert report["cpu"]["caches"][level] == size, level


def test_default_isa_follows_the_cpu(report):
    flags = set(_proc_cpuinfo().get("flags", "").split()) if X86 else set()
    compute = report["compute"]
    if {"avx2", "fma", "f16c"} <= flags:
        if {"avx512f", "avx512bw", "avx512vl"} <= flags:
            best = "avx512_bf16" if "avx512_bf16" in flags else "avx512"
            if has_amx(flags):
                best = "amx_bf16"
            assert compute["isa"] == best
        else:
            assert compute["isa"] == "avx2"
    else:
        assert compute["isa"] == "portable"
    assert compute["kernel"] == compute["isa"]
    assert compute["convtbc_isa"] is None and compute["omp_num_threads"] is None
    mr, nr = compute["micro_tile"]
    assert 1 <= mr and 1 <= nr


def test_report_follows_the_environment(convtbc_cli):
    report = json.loads(_info(convtbc_cli, "--json", CONVTBC_ISA="portable", OMP_NUM_THREADS="3",
                              CONVTBC_SOC_VERSION="Ascend910A"))
    assert report["compute"]["isa"] == report["compute"]["kernel"] == "portable"
    assert report["compute"]["convtbc_isa"] == "portable"
    assert report["compute"]["threads"] == 3
    assert report["convtbc"]["soc"] == "Ascend910A"


def test_report_names_the_package_and_library(report, capsys):
    package = report["convtbc"]
    assert package["version"] == importlib.metadata.version("convtbc")
    library = Path(package["library"])
    assert library.is_file() and library.name == "libconvtbc.so.0"
    assert package["library_from"] == "package"
    assert package["soc"] == "Ascend910B1"  # the default profile
    # The text form, in this process: the same facts for people.
    assert cli.main(["info"]) == 0
    text = capsys.readouterr().out
    for expected in (package["library"], report["cpu"]["model"], "micro-tile", "L1d", "threads"):
        assert expected in text


def test_a_reader_that_leaves_early_gets_no_traceback(convtbc_cli):
    # As `convtbc info --plan ... | head -1` when head has gone: the pipe's
    # reading end is closed before the command writes a line.
    with subprocess.Popen([convtbc_cli, "info", "--plan", "15", "16", "480", "3", "15", "0", "float32"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
        p.stdout.close()
        err = p.stderr.read().decode()
        status = p.wait(timeout=120)
    assert err == ""
    assert status == 141


def test_null_info_is_refused():
    assert lib.convtbcGetCpuInfo(ffi.NULL) == ACL_ERROR_INVALID_PARAM
    message = recent_msg()
    assert "convtbcGetCpuInfo" in message and "argument info" in message
