#!/usr/bin/env python3
"""Everything derived from libconvtbc/api/api_functions.tsv, the one list of
the functions convtbc exports.

    api_table.py exports   TABLE OUTPUT.map            GNU ld version script
    api_table.py refusals  TABLE INCLUDE_DIR OUTPUT.cpp stubs of refused functions
    api_table.py filter    TABLE OUTPUT.c              symbols of CANN's library names
    api_table.py docs      TABLE OUTPUT.md             docs/api.md
    api_table.py headers   INCLUDE_DIR                 every public header, one a line

A refused function's stub is defined with the exact prototype its public
header declares (read from the header, so the two cannot drift) and returns
the table's code after leaving a message that names the function and why a
CPU cannot do it. The stubs are C++ so that parameters need no names.

CANN's library names (libascendcl.so, libnnopbase.so, ...) are ELF filter
libraries: their symbol tables let a linker resolve every function, and at
run time the dynamic loader looks each symbol up in libconvtbc.so.0 instead,
so every name leads to the one implementation and one runtime state.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple

STATUSES = ("emulated", "refused", "extension")
# Markers in front of a declaration that are not part of its return type.
_NOT_RETURN_TYPE = re.compile(r"\b(ACL_FUNC_VISIBILITY|ACLNN_API|extern)\b|\bACL_DEPRECATED\w*\s*(\([^)]*\))?")
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


class Function(NamedTuple):
    name: str
    header: str
    library: str
    status: str
    code: str
    why: str


def read_table(path: str | Path) -> List[Function]:
    rows: List[Function] = []
    lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")]
    columns = lines[0].split("\t")
    assert columns == list(Function._fields), f"{path}: columns are {columns}, expected {list(Function._fields)}"
    seen = set()
    for number, line in enumerate(lines[1:], start=2):
        cells = (line.split("\t") + [""] * len(columns))[:len(columns)]
        row = Function(*cells)
        if row.status not in STATUSES:
            raise ValueError(f"{path}: {row.name}: status {row.status!r} is not one of {STATUSES}")
        if row.status == "refused" and not (row.code and row.why):
            raise ValueError(f"{path}: {row.name}: a refused function needs a code and a reason")
        if row.name in seen:
            raise ValueError(f"{path}: {row.name} is listed twice")
        seen.add(row.name)
        rows.append(row)
    return rows


def _declarations(header_text: str) -> Dict[str, str]:
    """name -> 'RET NAME(PARAMS)' for every function the header declares."""
    text = _COMMENT.sub(" ", header_text.replace("\\\n", " "))
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    found: Dict[str, str] = {}
    for match in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", text):
        # A declaration starts after the previous statement, block or
        # `extern "C"` brace and ends at the parenthesis that closes its
        # parameter list, followed by `;`.
        start = max(text.rfind(c, 0, match.start()) for c in ";{}") + 1
        head = _NOT_RETURN_TYPE.sub(" ", text[start:match.start()]).split()
        if not head or head[0] in ("typedef", "return") or "=" in head or "(" in "".join(head):
            continue
        depth, end = 0, match.end() - 1
        for end in range(match.end() - 1, len(text)):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                break
        if not text[end + 1:].lstrip().startswith(";"):
            continue
        params = " ".join(text[match.end():end].split())
        found.setdefault(match.group(1), f"{' '.join(head)} {match.group(1)}({params})")
    return found


STATUS_TYPES = ("aclError", "aclnnStatus", "int", "int32_t")


def _return_statement(declaration: str, row: Function) -> str:
    """A status-returning stub returns its code; any other stub records
    ACL_ERROR_API_NOT_SUPPORT with its message and returns the table's
    failure value (NULL for handles)."""
    returns = declaration[:declaration.index(row.name + "(")].strip()
    why = row.why.replace("\\", "\\\\").replace('"', '\\"')
    if returns in STATUS_TYPES:
        return f'return ctbc_refuse("{row.name}", {row.code}, "{why}");'
    call = f'ctbc_refuse("{row.name}", ACL_ERROR_API_NOT_SUPPORT, "{why}")'
    if returns == "void":
        return f"{call};"
    value = "0" if row.code == "NULL" else row.code
    return f"{call};\n    return static_cast<{returns}>({value});"


def refusals(rows: List[Function], include_dir: Path) -> str:
    refused = [r for r in rows if r.status == "refused"]
    headers = sorted({r.header for r in refused})
    parsed = {h: _declarations((include_dir / h).read_text(encoding="utf-8")) for h in headers}
    out = ["// Generated by packaging/api_table.py from libconvtbc/api/api_functions.tsv. Do not edit.",
           "// Each function below is one a CPU cannot do; it refuses with CANN's code and a message.",
           ""]
    out += [f'#include "{h}"' for h in headers]
    out += ['', 'extern "C" {', '#include "api/refuse.h"', '}', '']
    for row in refused:
        declaration = parsed[row.header].get(row.name)
        if declaration is None:
            raise ValueError(f"{row.name}: no declaration in {row.header}")
        out.append(f'extern "C" {declaration}\n{{\n    {_return_statement(declaration, row)}\n}}\n')
    return "\n".join(out)


def filter_symbols(rows: List[Function]) -> str:
    out = ["/* Generated by packaging/api_table.py. The symbols of a CANN-named filter",
           "   library: a linker resolves against them, the loader uses libconvtbc's. */", ""]
    out += [f"void {r.name}(void);\nvoid {r.name}(void) {{}}" for r in rows]
    return "\n".join(out) + "\n"


def version_script(rows: List[Function]) -> str:
    lines = ["/* Generated by packaging/api_table.py from libconvtbc/api/api_functions.tsv. */",
             "{", "  global:"]
    lines += [f"    {name};" for name in sorted(r.name for r in rows)]
    lines += ["  local:", "    *;", "};", ""]
    return "\n".join(lines)


def docs(rows: List[Function]) -> str:
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES}
    out = ["# Every function convtbc exports",
           "",
           "Generated by `packaging/api_table.py docs` from `libconvtbc/api/api_functions.tsv`,",
           "the table that also drives the library's export list, the stubs of refused",
           "functions and CANN's library names; `tests/test_api_table.py` checks that this",
           "page is up to date.",
           "",
           f"{counts['emulated']} functions are emulated, {counts['refused']} are refused and "
           f"{counts['extension']} are convtbc's own extensions. A refused function returns",
           "the code shown and leaves a message for `aclGetRecentErrMsg()` that names it and",
           "says why a CPU cannot do it. Every function resolves through each of CANN's",
           "library names (`libascendcl.so`, `libnnopbase.so`, `libopapi.so`,",
           "`libopapi_nn.so`, `libopapi_math.so`) to the one library, `libconvtbc.so.0`.",
           ""]
    for header in sorted({r.header for r in rows}):
        out += [f"## `{header}`", "", "| function | convtbc | why not |", "|---|---|---|"]
        for r in sorted((r for r in rows if r.header == header), key=lambda r: r.name):
            status = f"refused: returns `{r.code}`" if r.status == "refused" else r.status
            out.append(f"| `{r.name}` | {status} | {r.why} |")
        out.append("")
    return "\n".join(out)


def main(argv: List[str]) -> int:
    if len(argv) == 2 and argv[0] == "headers":
        print("\n".join(str(h) for h in sorted(Path(argv[1]).rglob("*.h"))))
        return 0
    if len(argv) < 3 or argv[0] not in ("exports", "refusals", "filter", "docs"):
        print(__doc__, file=sys.stderr)
        return 2
    rows = read_table(argv[1])
    if argv[0] == "refusals":
        text, output = refusals(rows, Path(argv[2])), argv[3]
    else:
        text, output = {"exports": version_script, "filter": filter_symbols, "docs": docs}[argv[0]](rows), argv[2]
    Path(output).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
