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
# The layout is CANN's: acl.h and acl_base.h only gather the others.
HEADERS: Tuple[str, ...] = (
    "acl/error_codes/rt_error_codes.h",
    "acl/error_codes/ge_error_codes.h",
    "acl/acl_base_rt.h",
    "acl/acl_base_mdl.h",
    "acl/acl_base.h",
    "acl/acl_rt_allocator.h",
    "acl/acl_rt.h",
    "acl/acl_op.h",
    "acl/acl_mdl.h",
    "acl/acl.h",
    "aclnn/opdev/op_errno.h",
    "aclnn/acl_meta.h",
    "aclnn/aclnn_base.h",
    "aclnnop/aclnn_util.h",
    "aclnnop/aclnn_convolution.h",
    "aclnnop/aclnn_convolution_backward.h",
    # convtbc's own additions (host memory declarations, synchronising the
    # current default stream), which the numpy front end needs.
    "convtbc/convtbc_ext.h",
)

# Macros the headers test that we treat as defined: the visibility and
# deprecation macros mean nothing to cffi, so their fallback definition blocks
# must be skipped (their uses are erased below).
_PREDEFINED = frozenset({"ACL_FUNC_VISIBILITY", "ACLNN_API", "ACL_DEPRECATED_MESSAGE"})
# Tokens erased from declarations: visibility and deprecation attributes.
_ERASED_TOKENS = re.compile(
    r'\bACL_DEPRECATED_MESSAGE\s*\(\s*"(?:[^"\\]|\\.)*"\s*\)|\b(?:ACL_FUNC_VISIBILITY|ACLNN_API|ACL_DEPRECATED)\b')

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*?)\s*$")
_INTEGER = re.compile(r"^\(?\s*(-?)\s*(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\s*\)?$")
_MACRO_NAME = re.compile(r"^(\w+)(\(?)")
# `static const int ACL_ERROR_X = 100000;` (CANN's kind for acl_base_rt.h's
# codes): an object cffi's ABI mode would look up in the library, so it is
# turned into an integer constant instead.
_STATIC_CONST = re.compile(r"^\s*static\s+const\s+[\w\s]+?\b(\w+)\s*=\s*([^;]+);\s*$")
_ARRAY_BOUND = re.compile(r"\[\s*([A-Za-z_]\w*)\s*\]")
_CONDITION_TOKEN = re.compile(r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)|(0[xX][0-9a-fA-F]+|\d+)[uUlL]*|"
                              r"([A-Za-z_]\w*)|(&&|\|\||!=|==|<=|>=|<<|>>|[-+*/%<>()!~&|^])|(\S)")


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


def _condition_holds(directive: str, argument: str, defined: set, constants: Dict[str, int]) -> bool:
    if directive == "ifdef":
        return argument in defined
    if directive == "ifndef":
        return argument not in defined
    # `#if` / `#elif`: an integer expression over defined(NAME), numbers and
    # macros, as the C preprocessor reads the simple conditions these headers
    # use (unknown names are 0).
    python = []
    for match in _CONDITION_TOKEN.finditer(argument):
        name_a, name_b, number, ident, op, other = match.groups()
        if other is not None:
            raise ValueError(f"unsupported preprocessor condition: #{directive} {argument}")
        if name_a or name_b:
            python.append("1" if (name_a or name_b) in defined else "0")
        elif number is not None:
            base = 16 if number[:2].lower() == "0x" else 8 if number.startswith("0") else 10
            python.append(str(int(number, base)))
        elif ident is not None:
            python.append(str(constants.get(ident, 0)))
        else:
            python.append({"&&": " and ", "||": " or ", "!": " not ", "/": "//"}.get(op, op))
    return bool(eval("".join(python), {"__builtins__": {}}, {}))  # noqa: S307 (header text only)


def cdef_from_headers(texts: Iterable[str]) -> Tuple[str, Dict[str, int]]:
    """Turn C header texts into a cffi cdef.

    A minimal preprocessor, enough for CANN-style headers: it evaluates
    `#ifdef/#ifndef/#if/#elif/#else/#endif` with `__cplusplus` and `__GNUC__`
    undefined (which drops the `extern "C"` lines and C++-only members) and
    the visibility and deprecation macros predefined (which drops their
    fallback blocks), treats include guards as ordinary conditionals, drops
    `#include`s and erases the attribute macros. It keeps `#define NAME
    <integer>` and `static const <type> NAME = <integer>;` constants, both as
    cdef integer constants and in a dict, so callers can build tables (e.g.
    status names) from the headers' own values.
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
                    line = _ERASED_TOKENS.sub("", line)
                    static = _STATIC_CONST.match(line)
                    number = _parse_integer(static.group(2).strip()) if static else None
                    if number is not None:
                        constants[static.group(1)] = number
                        out.append(f"#define {static.group(1)} {number}")
                        continue
                    # Array bounds named by a macro: cffi wants the number.
                    line = _ARRAY_BOUND.sub(
                        lambda m: f"[{constants[m.group(1)]}]" if m.group(1) in constants else m.group(0), line)
                    out.append(line)
                continue
            name, argument = directive.groups()
            if name in ("ifdef", "ifndef", "if"):
                holds = active and _condition_holds(name, argument, defined, constants)
                stack.append((holds, holds))
            elif name == "elif":
                _, taken = stack.pop()
                holds = (not taken and all(e[0] for e in stack)
                         and _condition_holds(name, argument, defined, constants))
                stack.append((holds, taken or holds))
            elif name == "else":
                _, taken = stack.pop()
                stack.append((not taken and all(e[0] for e in stack), True))
            elif name == "endif":
                stack.pop()
            elif not active or name in ("include", "pragma", "undef"):
                continue
            elif name == "define":
                macro, function_like = _MACRO_NAME.match(argument).groups()
                defined.add(macro)
                value = argument[len(macro):].strip()
                number = None if function_like else _parse_integer(value)
                if number is not None:
                    constants[macro] = number
                    out.append(f"#define {macro} {number}")
                # Valueless defines (guards, ACLNN_META) only mark a name defined;
                # other macros (ACL_APP_LOG) cannot be expressed in a cdef and are
                # left out.
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
