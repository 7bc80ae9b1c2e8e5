"""The package version, written in one place: the project() call of meson.build.

A build writes it into `_build_version.py` (convtbc_py/meson.build); a source
checkout that was never built reads it from meson.build beside the package.
Neither loads the library, so `convtbc --version` stays cheap.
"""

from __future__ import annotations

import re
from pathlib import Path

# project('convtbc', 'c', ..., version: '0.1.0', ...): the first `version:`
# of the file is the project's (meson requires project() to come first).
_PROJECT_VERSION = re.compile(r"^\s*project\s*\(.*?\bversion\s*:\s*'([^']+)'", re.S | re.M)


def version_from_meson_build(path: Path) -> str:
    """The project version in the meson.build at `path`."""
    match = _PROJECT_VERSION.search(path.read_text(encoding="utf-8"))
    if match is None:
        raise RuntimeError(f"no project(..., version: '...') in {path}")
    return match.group(1)


__version__: str
try:
    from ._build_version import VERSION

    __version__ = VERSION
except ImportError:  # a source checkout
    __version__ = version_from_meson_build(Path(__file__).resolve().parent.parent / "meson.build")
