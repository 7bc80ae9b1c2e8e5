"""The one place that loads libconvtbc and declares its C API to cffi.

The cdef is generated at import time from the public headers that ship with
the library, so the Python view of the API cannot drift from the C one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

import cffi

PACKAGE_DIR: Path = Path(__file__).resolve().parent

# In dependency order: each header only uses names declared by earlier ones.
HEADERS: Tuple[str, ...] = (
    "acl/acl_base.h",
    "acl/acl_rt.h",
    "acl/acl.h",
    "aclnn/acl_meta.h",
    "aclnn/aclnn_base.h",
    "aclnnop/aclnn_convolution_backward.h",
    # convtbc's own additions (host memory declarations, synchronising the
    # current default stream), which the numpy front end needs.
    "convtbc/convtbc_ext.h",
)

# Macros the headers test that we treat as defined: the visibility macro means
# nothing to cffi, so its fallback definition block must be skipped.
_PREDEFINED = frozenset({"ACL_FUNC_VISIBILITY"})
# Tokens erased from declarations (the visibility attribute).
_ERASED_TOKENS = re.compile(r"\bACL_FUNC_VISIBILITY\b")

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*?)\s*$")
_INTEGER = re.compile(r"^\(?\s*(-?)\s*(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\s*\)?$")
_DEFINED = re.compile(r"^(!?)\s*defined\s*\(?\s*(\w+)\s*\)?$")


def include_dir() -> Path:
    """The installed CANN-shaped include tree, or the repository's in a checkout."""
    installed = PACKAGE_DIR / "include"
    if (installed / HEADERS[0]).is_file():
        return installed
    return PACKAGE_DIR.parent / "include"


def library_path() -> Path:
    """`$CONVTBC_LIBRARY` if set (development builds), else the bundled library.

    The bundled name is the ELF file itself (its soname): `lib64/libconvtbc.so`
    is a GNU ld script for linkers, which dlopen cannot load.
    """
    override = os.environ.get("CONVTBC_LIBRARY")
    if override:
        return Path(override)
    return PACKAGE_DIR / "lib64" / "libconvtbc.so.0"


def _parse_integer(text: str) -> int | None:
    match = _INTEGER.match(text)
    if match is None:
        return None
    value = int(match.group(2), 0)
    return -value if match.group(1) else value


def _condition_holds(directive: str, argument: str, defined: set) -> bool:
    if directive == "ifdef":
        return argument in defined
    if directive == "ifndef":
        return argument not in defined
    # `#if` / `#elif`: only `[!]defined(NAME)` occurs in these headers; anything
    # richer means the headers changed and this parser must be revisited.
    match = _DEFINED.match(argument)
    if match is None:
        raise ValueError(f"unsupported preprocessor condition: #{directive} {argument}")
    return (match.group(2) in defined) != bool(match.group(1))


def cdef_from_headers(texts: Iterable[str]) -> Tuple[str, Dict[str, int]]:
    """Turn C header texts into a cffi cdef.

    A minimal preprocessor, enough for CANN-style headers: it evaluates
    `#ifdef/#ifndef/#if defined()/#else/#endif` with `__cplusplus` undefined
    (which drops the `extern "C"` lines) and the visibility macro predefined
    (which drops its fallback block), treats include guards as ordinary
    conditionals, drops `#include`s and erases `ACL_FUNC_VISIBILITY`. It keeps
    `#define NAME <integer>` constants, returned also as a dict so callers can
    build tables (e.g. status names) from the header's own values.
    """
    defined = set(_PREDEFINED)
    constants: Dict[str, int] = {}
    out: List[str] = []
    for text in texts:
        text = _COMMENT.sub(" ", text.replace("\\\n", " "))
        # Stack of (branch active, some branch of this #if already taken).
        stack: List[Tuple[bool, bool]] = []
        for line in text.splitlines():
            active = all(entry[0] for entry in stack)
            directive = _DIRECTIVE.match(line)
            if directive is None:
                if active and line.strip():
                    out.append(_ERASED_TOKENS.sub("", line))
                continue
            name, argument = directive.groups()
            if name in ("ifdef", "ifndef", "if"):
                holds = active and _condition_holds(name, argument, defined)
                stack.append((holds, holds))
            elif name == "elif":
                _, taken = stack.pop()
                holds = not taken and all(e[0] for e in stack) and _condition_holds(name, argument, defined)
                stack.append((holds, taken or holds))
            elif name == "else":
                _, taken = stack.pop()
                stack.append((not taken and all(e[0] for e in stack), True))
            elif name == "endif":
                stack.pop()
            elif not active or name in ("include", "pragma", "undef"):
                continue
            elif name == "define":
                macro, value = (argument.split(None, 1) + [""])[:2]
                defined.add(macro)
                number = _parse_integer(value)
                if number is not None:
                    constants[macro] = number
                    out.append(f"#define {macro} {number}")
                # Valueless defines (guards, ACLNN_META) only mark a name defined;
                # other macros cannot be expressed in a cdef and are left out.
            elif name == "error":
                raise ValueError(f"#error in headers: {argument}")
        if stack:
            raise ValueError("unbalanced #if/#endif in headers")
    return "\n".join(out) + "\n", constants


def _read_headers(root: Path) -> List[str]:
    return [(root / name).read_text(encoding="utf-8") for name in HEADERS]


def _load() -> Tuple[cffi.FFI, object, Dict[str, int]]:
    cdef, constants = cdef_from_headers(_read_headers(include_dir()))
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    path = library_path()
    try:
        lib = ffi.dlopen(str(path))
    except OSError as exc:
        raise OSError(
            f"cannot load libconvtbc from {path} ({exc}); reinstall the package "
            "or point CONVTBC_LIBRARY at a built libconvtbc.so.0"
        ) from exc
    return ffi, lib, constants


ffi, lib, CONSTANTS = _load()
