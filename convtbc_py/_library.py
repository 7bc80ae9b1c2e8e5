"""The one place that loads a library and declares its C API to cffi.

The cdef is generated from the public headers that ship with the library, so
the Python view of the API cannot drift from the C one. Nothing is loaded at
import: `ffi`, `lib` and `CONSTANTS` are made on first use (PEP 562), so
`convtbc config` runs without the library and a backend can be chosen first.

Two backends share the cdef (CANN's signatures are convtbc's):

- "convtbc": libconvtbc.so.0 of the installed tree;
- "cann": a CANN toolkit's lib64/libascendcl.so, libnnopbase.so and operator
  library, chosen by `use_cann(home)` or `$CONVTBC_CANN_HOME` before first
  use. convtbc's own extensions (convtbc/convtbc_ext.h) are left out of the
  cdef then: CANN has none of them.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

PACKAGE_DIR: Path = Path(__file__).resolve().parent
DISTRIBUTION = "convtbc"
# The library inside the tree, by its soname: `lib64/libconvtbc.so` is a GNU
# ld script for linkers, which dlopen cannot load.
LIBRARY_FILE = "lib64/libconvtbc.so.0"

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




# --------------------------------------------------------- where the tree is


class Tree:
    """A built convtbc: the library file, the headers it was built with and,
    for an installed one, the root of the CANN-shaped tree holding both."""

    def __init__(self, library: Path, include: Path, prefix: Optional[Path], origin: str) -> None:
        self.library = library
        self.include = include
        self.prefix = prefix
        self.origin = origin

    def __repr__(self) -> str:
        return f"Tree(library={str(self.library)!r}, include={str(self.include)!r}, origin={self.origin!r})"


def _package_tree() -> Optional[Tree]:
    """The tree inside this package: a wheel install, or the build directory
    behind a meson-python editable install (whose loader serves the built
    files through importlib.resources; the package's own folder is the
    source folder then)."""
    if (PACKAGE_DIR / LIBRARY_FILE).is_file():
        return Tree(PACKAGE_DIR / LIBRARY_FILE, PACKAGE_DIR / "include", PACKAGE_DIR, "package")
    import importlib.resources

    try:
        resources = importlib.resources.files(__package__)
        library = resources.joinpath(*LIBRARY_FILE.split("/"))
        header = resources.joinpath("include", *HEADERS[0].split("/"))
        if not (library.is_file() and header.is_file()):
            return None
        library_file, header_file = Path(str(library)), Path(str(header))
    except (ModuleNotFoundError, TypeError, OSError):
        return None
    # Each served file is a real file of the build or source tree.
    include = header_file.parents[HEADERS[0].count("/")]
    return Tree(library_file, include, None, "editable build")


def _distribution_tree() -> Optional[Tree]:
    """The tree of the installed `convtbc` distribution, found from its list of
    files: from a source checkout the checkout's convtbc_py/ shadows the
    installed package, whose library is still where pip put it."""
    import importlib.metadata

    try:
        distribution = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    suffix = "convtbc_py/" + LIBRARY_FILE
    for file in distribution.files or ():
        if file.as_posix().endswith(suffix):
            library = Path(str(distribution.locate_file(file))).resolve()
            prefix = library.parents[1]
            if library.is_file() and (prefix / "include" / HEADERS[0]).is_file():
                return Tree(library, prefix / "include", prefix, f"installed distribution {DISTRIBUTION}")
    return None


def install_advice() -> str:
    """What to do when no built library is found, for messages."""
    import sys

    python = sys.executable
    if (PACKAGE_DIR.parent / "pyproject.toml").is_file():
        where = (f"{PACKAGE_DIR} is the source folder of a checkout (it shadows an installed package when "
                 f"Python runs from {PACKAGE_DIR.parent}), and no `{DISTRIBUTION}` distribution with a built "
                 f"library is installed for {python}")
    else:
        where = f"the package at {PACKAGE_DIR} holds no {LIBRARY_FILE}"
    return (f"{where}. Install it into this interpreter with `{python} -m pip install {PACKAGE_DIR.parent}`, "
            f"or for development `{python} -m pip install meson-python meson ninja && {python} -m pip install "
            f"--no-build-isolation -e {PACKAGE_DIR.parent}`; or set CONVTBC_LIBRARY to a built libconvtbc.so.0")


_tree_cache: List[Optional[Tree]] = []


def find_tree() -> Optional[Tree]:
    """The built convtbc this package uses, without loading it; None if none is found."""
    if not _tree_cache:
        _tree_cache.append(_package_tree() or _distribution_tree())
    return _tree_cache[0]


def include_dir() -> Path:
    """The CANN-shaped include tree matching the library; the repository's in
    a checkout with no built library (headers alone declare the API)."""
    tree = find_tree()
    if tree is not None:
        return tree.include
    checkout = PACKAGE_DIR.parent / "include"
    if (checkout / HEADERS[0]).is_file():
        return checkout
    raise OSError(f"cannot find convtbc's headers: {install_advice()}")


def library_path() -> Path:
    """`$CONVTBC_LIBRARY` if set (development builds), else the tree's library."""
    override = os.environ.get("CONVTBC_LIBRARY")
    if override:
        return Path(override)
    tree = find_tree()
    if tree is None:
        raise OSError(f"cannot find libconvtbc: {install_advice()}")
    return tree.library


# ------------------------------------------------------------------ backends

CANN_HOME_VARIABLE = "CONVTBC_CANN_HOME"
# Where CANN keeps the functions, under the toolkit root. The operator library
# is ops-nn's libopapi_nn.so in current releases (the convolutions moved there
# from the single libopapi.so of older ones), so it is tried first.
CANN_RUNTIME_LIBRARIES: Tuple[str, ...] = ("lib64/libascendcl.so", "lib64/libnnopbase.so")
CANN_OPERATOR_LIBRARIES: Tuple[str, ...] = ("lib64/libopapi_nn.so", "lib64/libopapi.so")
CANN_OPERATOR = "aclnnConvTbcBackward"
EXTENSION_HEADER = "convtbc/convtbc_ext.h"

_lock = threading.RLock()
_chosen_cann_home: List[Path] = []


class CannLibraries:
    """A CANN toolkit's libraries as one namespace, as `lib` is for convtbc:
    a name is looked up in libascendcl, libnnopbase, then the operator
    library, and remembered."""

    def __init__(self, libraries: List[Tuple[Path, Any]]) -> None:
        self._libraries = libraries

    @property
    def paths(self) -> List[Path]:
        return [path for path, _ in self._libraries]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        for _, library in self._libraries:
            try:
                value = getattr(library, name)
            except AttributeError:
                continue
            setattr(self, name, value)
            return value
        raise AttributeError(f"{name} is in none of CANN's libraries {[str(p) for p in self.paths]}")

    def __dir__(self) -> List[str]:
        return sorted({name for _, library in self._libraries for name in dir(library)})


class Loaded:
    """What first use made: the cffi FFI, the library namespace, the header
    constants, and which backend they belong to."""

    def __init__(self, ffi: Any, lib: Any, constants: Dict[str, int], cann_home: Optional[Path],
                 paths: List[Path]) -> None:
        self.ffi = ffi
        self.lib = lib
        self.constants = constants
        self.cann_home = cann_home
        self.paths = paths


_loaded: List[Loaded] = []


def _environment_cann_home() -> Optional[Path]:
    value = os.environ.get(CANN_HOME_VARIABLE, "")
    return Path(value) if value else None


def _check_cann_home(home: Path, source: str) -> Path:
    for name in CANN_RUNTIME_LIBRARIES:
        if not (home / name).is_file():
            raise FileNotFoundError(
                f"{source}: {home} is not a CANN toolkit root: {home / name} does not exist (give the directory "
                "CANN's set_env.sh exports as ASCEND_TOOLKIT_HOME, the one holding lib64/)")
    return home.absolute()


def use_cann(home: "os.PathLike[str] | str") -> None:
    """Run the numpy API and `lib` on the CANN toolkit at `home` instead of
    convtbc (the effect of `$CONVTBC_CANN_HOME`). Call before first use of
    `conv_tbc_backward`, `ffi` or `lib`; after it, only the same home is
    accepted (RuntimeError)."""
    path = _check_cann_home(Path(os.fspath(home)), "use_cann")
    with _lock:
        if _loaded and _loaded[0].cann_home != path:
            raise RuntimeError(
                f"use_cann: the {backend()} backend was already loaded by an earlier call into convtbc_py; "
                f"call use_cann() before the first use, or set {CANN_HOME_VARIABLE} before starting Python")
        _chosen_cann_home[:] = [path]


def cann_home() -> Optional[Path]:
    """The CANN toolkit root in use or chosen (use_cann, then $CONVTBC_CANN_HOME), None for convtbc."""
    if _loaded:
        return _loaded[0].cann_home
    if _chosen_cann_home:
        return _chosen_cann_home[0]
    return _environment_cann_home()


def backend() -> str:
    """"cann" when the API runs on a CANN toolkit, "convtbc" otherwise. Does not load anything."""
    return "convtbc" if cann_home() is None else "cann"


def _read_headers(root: Path, names: Iterable[str]) -> List[str]:
    return [(root / name).read_text(encoding="utf-8") for name in names]


_constants_cache: List[Dict[str, int]] = []


def constants() -> Dict[str, int]:
    """The headers' integer constants (status codes, enum values) by name.
    Reads the headers only; loads no library."""
    if _loaded:
        return _loaded[0].constants
    if not _constants_cache:
        _constants_cache.append(cdef_from_headers(_read_headers(include_dir(), HEADERS))[1])
    return _constants_cache[0]


def _declarations(cdef: str) -> List[str]:
    """Top-level declarations of a cdef, each ending with its `;` (braces
    nest), and its #define lines."""
    pieces: List[str] = []
    current: List[str] = []
    depth = 0
    for line in cdef.splitlines(keepends=True):
        if depth == 0 and not "".join(current).strip() and line.lstrip().startswith("#"):
            # the line break before it stays, or the directive would join
            # the previous declaration's line
            pieces.append("".join(current) + line)
            current = []
            continue
        for char in line:
            current.append(char)
            depth += char == "{"
            depth -= char == "}"
            if char == ";" and depth == 0:
                pieces.append("".join(current))
                current = []
    pieces.append("".join(current))
    return pieces


_FUNCTION = re.compile(r"\b\w+\s*\([^()]*(?:\([^()]*\)[^()]*)*\)\s*;\s*$", re.S)


def _without_functions(cdef: str) -> str:
    """The cdef minus its function prototypes (types and constants stay)."""
    return "".join(piece for piece in _declarations(cdef) if not _FUNCTION.search(piece) or "typedef" in piece)


def _cdef(cann: bool) -> Tuple[str, Dict[str, int]]:
    root = include_dir()
    if not cann:
        return cdef_from_headers(_read_headers(root, HEADERS))
    # convtbc_ext.h's types stay declared (the numpy front end names them);
    # its functions are convtbc's, which CANN does not have.
    common = [name for name in HEADERS if name != EXTENSION_HEADER]
    cdef, values = cdef_from_headers(_read_headers(root, common))
    extension, _ = cdef_from_headers(_read_headers(root, common + [EXTENSION_HEADER]))
    return cdef + _without_functions(extension[len(cdef):]), values


def _dlopen(ffi: Any, path: Path, what: str) -> Any:
    """Opens a library that stays mapped until the process ends: cffi
    dlcloses it when its lib object is collected, at interpreter exit
    included, and the OpenMP threads it started (with their runtime, which
    it pulled in) would then wake in unmapped code."""
    flags = ffi.RTLD_NOW | getattr(ffi, "RTLD_NODELETE", 0)
    try:
        return ffi.dlopen(str(path), flags)
    except OSError as exc:
        raise OSError(f"cannot load {what} from {path}: {exc}") from exc


def _load_cann(ffi: Any, home: Path) -> Tuple[CannLibraries, List[Path]]:
    libraries = [(home / name, _dlopen(ffi, home / name, "CANN's runtime")) for name in CANN_RUNTIME_LIBRARIES]
    tried = []
    for name in CANN_OPERATOR_LIBRARIES:
        path = home / name
        tried.append(str(path))
        if not path.is_file():
            continue
        operators = _dlopen(ffi, path, "CANN's operator library")
        try:
            getattr(operators, CANN_OPERATOR)
        except AttributeError:
            continue
        libraries.append((path, operators))
        return CannLibraries(libraries), [p for p, _ in libraries]
    raise OSError(f"no CANN operator library under {home} defines {CANN_OPERATOR} (tried {', '.join(tried)})")


def load() -> Loaded:
    """Load the chosen backend once (thread-safe) and return it."""
    if _loaded:
        return _loaded[0]
    with _lock:
        if _loaded:
            return _loaded[0]
        home = _chosen_cann_home[0] if _chosen_cann_home else _environment_cann_home()
        if home is not None and not _chosen_cann_home:
            home = _check_cann_home(home, f"${CANN_HOME_VARIABLE}")
        # Found before cffi is imported: a missing library is the error worth reporting.
        path = library_path() if home is None else None
        import cffi

        cdef, values = _cdef(home is not None)
        ffi = cffi.FFI()
        ffi.cdef(cdef)
        if path is not None:
            lib: Any = _dlopen(ffi, path, "libconvtbc")
            paths = [path]
        else:
            assert home is not None
            lib, paths = _load_cann(ffi, home)
        loaded = Loaded(ffi, lib, values, home, paths)
        _loaded.append(loaded)
        # Module attributes from now on, so later lookups skip __getattr__.
        globals().update(ffi=ffi, lib=lib, CONSTANTS=values)
        return loaded


def loaded() -> bool:
    """Whether first use has loaded a library yet."""
    return bool(_loaded)


def __getattr__(name: str) -> Any:
    # PEP 562: `ffi`, `lib` and `CONSTANTS` are made on first access.
    if name in ("ffi", "lib"):
        return getattr(load(), name)
    if name == "CONSTANTS":
        return constants()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
