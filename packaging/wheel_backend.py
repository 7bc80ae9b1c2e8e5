"""PEP 517 build backend: meson-python, with the wheel tagged py3-none-<platform>.

pyproject.toml names this module (`backend-path = ['packaging']`). Every hook
is meson-python's; only `build_wheel` adds a step. meson-python tags a wheel
for one CPython version and ABI as soon as anything is installed in platlib,
on the assumption that native code there is an extension module. convtbc's
native code is a plain C library (and CANN's library names as filters of it)
that the package loads through cffi in ABI mode: no file links to libpython
or defines a module, so one wheel serves every Python 3 on its platform.
`build_wheel` checks that this still holds and then rewrites the tag in the
wheel's name, its WHEEL file and RECORD's line for WHEEL.

Editable installs are left as meson-python makes them: they point at a
build directory kept for the running interpreter.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional

import mesonpy

get_requires_for_build_sdist = mesonpy.get_requires_for_build_sdist
get_requires_for_build_wheel = mesonpy.get_requires_for_build_wheel
get_requires_for_build_editable = mesonpy.get_requires_for_build_editable
build_sdist = mesonpy.build_sdist
build_editable = mesonpy.build_editable

PYTHON_TAG = "py3"
ABI_TAG = "none"

# What would tie a file to one Python: an extension module's file name
# (foo.cpython-311-x86_64-linux-gnu.so, foo.abi3.so, foo.pyd), or, in a
# shared object of any name, a module init function or a link to libpython.
_EXTENSION_NAME = re.compile(r"\.(cpython|pypy|graalpy)[^/]*\.so$|\.abi3\.so$|\.pyd$")
_PYTHON_ABI_MARKERS = (b"PyInit_", b"libpython")


def build_wheel(wheel_directory: str,
                config_settings: Optional[Dict[Any, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    name = mesonpy.build_wheel(wheel_directory, config_settings, metadata_directory)
    return retag_wheel(Path(wheel_directory) / name).name


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def python_abi_files(whl: zipfile.ZipFile) -> List[str]:
    """Members of the wheel that depend on the Python version or ABI."""
    found = []
    for info in whl.infolist():
        if _EXTENSION_NAME.search(info.filename):
            found.append(info.filename)
            continue
        with whl.open(info) as f:
            if f.read(4) != b"\x7fELF":
                continue
            data = f.read()
        if any(marker in data for marker in _PYTHON_ABI_MARKERS):
            found.append(info.filename)
    return found


def retag_wheel(path: Path, python_tag: str = PYTHON_TAG, abi_tag: str = ABI_TAG) -> Path:
    """Give the wheel at `path` the tags `python_tag`-`abi_tag`-<its platform>
    and return its new path (the old file is replaced)."""
    # {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl
    stem_parts = path.name[:-len(".whl")].split("-")
    if len(stem_parts) not in (5, 6):
        raise ValueError(f"{path.name}: not a wheel file name")
    platform_tag = stem_parts[-1]
    new_name = "-".join(stem_parts[:-3] + [python_tag, abi_tag, platform_tag]) + ".whl"
    new_path = path.with_name(new_name)
    if new_path == path:
        return path

    with zipfile.ZipFile(path) as src:
        tied = python_abi_files(src)
        if tied:
            raise RuntimeError(
                f"{path.name} holds files built for one Python version ({', '.join(tied)}); "
                f"it cannot be tagged {python_tag}-{abi_tag}")
        infos = src.infolist()
        dist_info = {i.filename.split("/", 1)[0] for i in infos
                     if i.filename.endswith(".dist-info/WHEEL") and i.filename.count("/") == 1}
        if len(dist_info) != 1:
            raise ValueError(f"{path.name}: expected one .dist-info/WHEEL, found {sorted(dist_info)}")
        wheel_member = dist_info.pop() + "/WHEEL"
        record_member = wheel_member[:-len("WHEEL")] + "RECORD"

        # One Tag line per platform of a compressed tag set (a.b -> two lines).
        wheel_lines = [line for line in src.read(wheel_member).decode("utf-8").splitlines()
                       if not line.startswith("Tag:")]
        wheel_lines += [f"Tag: {python_tag}-{abi_tag}-{plat}" for plat in platform_tag.split(".")]
        wheel_text = ("\n".join(wheel_lines) + "\n").encode("utf-8")

        record_lines = []
        for line in src.read(record_member).decode("utf-8").splitlines():
            if line.split(",", 1)[0] == wheel_member:
                line = f"{wheel_member},{_record_hash(wheel_text)},{len(wheel_text)}"
            record_lines.append(line)
        record_text = ("\n".join(record_lines) + "\n").encode("utf-8")

        tmp_path = new_path.with_name(new_path.name + ".part")
        with zipfile.ZipFile(tmp_path, "w") as dst:
            for info in infos:
                if info.filename == wheel_member:
                    data = wheel_text
                elif info.filename == record_member:
                    data = record_text
                else:
                    data = src.read(info)
                # The same ZipInfo keeps the order, dates, modes and compression.
                dst.writestr(info, data)
    os.replace(tmp_path, new_path)
    path.unlink()
    return new_path
