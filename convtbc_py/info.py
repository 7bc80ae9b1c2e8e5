"""`convtbc info`: the machine convtbc runs on and what it chose to run there,
as `numpy.show_runtime()` reports numpy's.

The CPU facts come from the library itself (convtbcGetCpuInfo: CPUID and
XGETBV, as the kernel dispatch sees them), not from /proc/cpuinfo, so the
report says what convtbc will do rather than what the OS believes.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
from typing import Any, Dict, List

FEATURE_PREFIX = "CONVTBC_CPU_"


def feature_names() -> List[str]:
    """Every CPU feature the library reports, in its bit order, spelled as
    /proc/cpuinfo spells it."""
    from ._library import CONSTANTS

    bits = sorted((value, name) for name, value in CONSTANTS.items() if name.startswith(FEATURE_PREFIX))
    return [name[len(FEATURE_PREFIX):].lower() for _, name in bits]


def _version() -> str:
    package = importlib.import_module(__name__.rpartition(".")[0])
    version = getattr(package, "__version__", None)
    if version:
        return str(version)
    try:
        return importlib.metadata.version("convtbc")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _cann_release() -> str:
    from ._library import ffi, lib

    text = ffi.new("char[]", lib.ACL_PKG_VERSION_MAX_SIZE)
    if lib.aclsysGetVersionStr(ffi.new("char[]", b"runtime"), text) != 0:
        return "unknown"
    return ffi.string(text).decode()


def runtime_info() -> Dict[str, Any]:
    """The report as a dict (what `convtbc info --json` prints)."""
    from ._library import CONSTANTS, ffi, lib, library_path
    from .emulation import soc_name
    from .errors import AclError, check

    cpu = ffi.new("convtbcCpuInfo *")
    check(lib.convtbcGetCpuInfo(cpu), AclError)
    names = feature_names()
    present = [n for n in names if cpu.features & CONSTANTS[FEATURE_PREFIX + n.upper()]]
    return {
        "convtbc": {
            "version": _version(),
            "library": str(library_path().resolve()),
            "library_from": "CONVTBC_LIBRARY" if os.environ.get("CONVTBC_LIBRARY") else "package",
            "cann_release": _cann_release(),
            "soc": soc_name(),
        },
        "cpu": {
            "vendor": ffi.string(cpu.vendor).decode(errors="replace"),
            "model": ffi.string(cpu.model).decode(errors="replace"),
            "features": present,
            "features_absent": [n for n in names if n not in present],
            # Bytes; None where the CPU does not say.
            "caches": {level: (size or None) for level, size in
                       (("l1d", cpu.l1dBytes), ("l2", cpu.l2Bytes), ("l3", cpu.l3Bytes))},
        },
        "compute": {
            "isa": ffi.string(cpu.isa).decode(),
            "convtbc_isa": os.environ.get("CONVTBC_ISA"),
            "kernel": ffi.string(cpu.kernel).decode(),
            "micro_tile": [cpu.mr, cpu.nr],
            "threads": cpu.threads,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        },
    }


def _size(size: Any) -> str:
    if not size:
        return "not reported"
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def _env(name: str, value: Any) -> str:
    return f"{name} unset" if value is None else f"{name}={value}"


def text(info: Dict[str, Any]) -> str:
    """The report for people."""
    package, cpu, compute = info["convtbc"], info["cpu"], info["compute"]
    caches = cpu["caches"]
    rows = [
        ("convtbc", package["version"]),
        ("library", f"{package['library']} (from {package['library_from']})"),
        ("CANN release", package["cann_release"]),
        ("SoC profile", package["soc"]),
        ("cpu", f"{cpu['model'] or 'model not reported'} ({cpu['vendor'] or 'vendor not reported'})"),
        ("features", " ".join(cpu["features"]) or "none of those below"),
        ("lacking", " ".join(cpu["features_absent"]) or "none"),
        ("caches", f"L1d {_size(caches['l1d'])}, L2 {_size(caches['l2'])}, L3 {_size(caches['l3'])}"),
        ("isa", f"{compute['isa']} ({_env('CONVTBC_ISA', compute['convtbc_isa'])})"),
        ("kernel", f"{compute['kernel']}, micro-tile {compute['micro_tile'][0]} x {compute['micro_tile'][1]}"
                   + (", AMX tile 32 x 32 (bfloat16)" if compute["isa"].startswith("amx") else "")),
        ("threads", f"{compute['threads']} ({_env('OMP_NUM_THREADS', compute['omp_num_threads'])})"),
    ]
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"{key:<{width}}  {value}" for key, value in rows)


def show_runtime(as_json: bool = False) -> None:
    """Prints the report (JSON with as_json)."""
    info = runtime_info()
    print(json.dumps(info, indent=2) if as_json else text(info))
