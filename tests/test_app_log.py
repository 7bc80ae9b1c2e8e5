"""aclAppLog: the application's own lines in CANN's log, from a real client
program (tests/c/app_log.c, built against the installed tree).

CANN's facts (hicann/runtime acl_base_rt.h and its aclAppLog):
- ACL_APP_LOG(level, fmt, ...) is aclAppLog(level, __FUNCTION__, __FILE__,
  __LINE__, fmt, ...); levels ACL_DEBUG 0, ACL_INFO 1, ACL_WARNING 2,
  ACL_ERROR 3.
- The line goes to the plog under module APP, at the levels the log
  variables let through (ASCEND_GLOBAL_LOG_LEVEL, ASCEND_SLOG_PRINT_TO_STDOUT,
  see test_logs.py), with the text `<thread id> <function>:<file>:<line>:
  "<message>"`.
- The formatted text is limited to 1024 bytes with its NUL; a longer one is
  cut and ends with "...[truncated]".
- A NULL format, function or file, or a level outside 0..3, logs nothing.
"""

import re
import subprocess

import pytest

from conftest import C_DIR
from test_buggy_clients import build_c_programs, clean_env
from test_logs import LINE

PROGRAM = "app_log"
LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]
MESSAGES = {"debug": "debug line 0", "info": "info line 1", "warning": "warning line two", "error": "error line 3.0"}


def marked_lines():
    """{marker: source line number} from the program's @line: comments."""
    found = {}
    for number, text in enumerate((C_DIR / f"{PROGRAM}.c").read_text().splitlines(), start=1):
        m = re.search(r"@line:(\w+)", text)
        if m:
            found[m.group(1)] = number
    assert set(found) == set(MESSAGES)
    return found


@pytest.fixture(scope="module")
def program(convtbc_cli, tmp_path_factory):
    return build_c_programs(convtbc_cli, tmp_path_factory.mktemp("applog"), [PROGRAM])[PROGRAM]


def run(program, tmp_path, env):
    base = {"HOME": str(tmp_path / "home")}
    base.update(env)
    p = subprocess.run([str(program)], capture_output=True, text=True, env=clean_env(base), cwd=tmp_path,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "DONE" in p.stdout, p.stdout + p.stderr
    return [line for line in p.stdout.splitlines() if line.startswith("[")]


def app_lines(lines):
    parsed = []
    for line in lines:
        m = LINE.match(line)
        assert m, f"not CANN's line shape: {line!r}"
        if m.group("module") == "APP":
            parsed.append(m)
    return parsed


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_levels_module_and_caller_location(program, tmp_path, level):
    lines = app_lines(run(program, tmp_path, {"ASCEND_SLOG_PRINT_TO_STDOUT": "1",
                                               "ASCEND_GLOBAL_LOG_LEVEL": str(level)}))
    where = marked_lines()
    expected = [name for i, name in enumerate(MESSAGES) if i >= level]
    macro_lines = [m for m in lines if m.group("file") == f"{PROGRAM}.c"]
    assert [m.group("level") for m in macro_lines] == [name.upper() for name in expected]
    for m, name in zip(macro_lines, expected):
        assert int(m.group("line")) == where[name], m.group(0)
        text = m.group("text")
        # "<tid> <function>:<file>:<line>: "<message>"", the file as the
        # caller's __FILE__ spelled it.
        tm = re.fullmatch(r'(\d+) (\w+):(\S+):(\d+): "(.*)"', text)
        assert tm, text
        assert tm.group(2) == "log_each_level"
        assert tm.group(3).endswith(f"{PROGRAM}.c") and int(tm.group(4)) == where[name]
        assert tm.group(5) == MESSAGES[name]


def test_long_line_is_cut_and_marked(program, tmp_path):
    lines = app_lines(run(program, tmp_path, {"ASCEND_SLOG_PRINT_TO_STDOUT": "1", "ASCEND_GLOBAL_LOG_LEVEL": "3"}))
    long_lines = [m for m in lines if m.group("file") == "long.c"]
    assert len(long_lines) == 1
    m = long_lines[0]
    assert m.group("line") == "7"
    text = m.group("text")
    assert text.endswith("...[truncated]")
    assert len(text.encode()) == 1023  # 1024 bytes with the NUL
    assert "xxxxxxxx" in text


def test_dropped_calls_log_nothing(program, tmp_path):
    lines = app_lines(run(program, tmp_path, {"ASCEND_SLOG_PRINT_TO_STDOUT": "1", "ASCEND_GLOBAL_LOG_LEVEL": "0"}))
    assert not [m for m in lines if m.group("file") == "dropped.c"]
    assert not [m for m in lines if "no function" in m.group("text") or "no file" in m.group("text")]


@pytest.mark.parametrize("env", [{}, {"ASCEND_GLOBAL_LOG_LEVEL": "4", "ASCEND_SLOG_PRINT_TO_STDOUT": "1"}],
                         ids=["no-variables", "level-4"])
def test_nothing_when_logs_are_off(program, tmp_path, env):
    assert run(program, tmp_path, env) == []


def test_lines_reach_the_plog_file(program, tmp_path):
    log_dir = tmp_path / "logs"
    run(program, tmp_path, {"ASCEND_GLOBAL_LOG_LEVEL": "1", "ASCEND_PROCESS_LOG_PATH": str(log_dir)})
    files = list((log_dir / "plog").glob("plog-*.log"))
    assert len(files) == 1
    lines = app_lines([line for line in files[0].read_text().splitlines() if line.startswith("[")])
    assert [m.group("level") for m in lines if m.group("file") == f"{PROGRAM}.c"] == ["INFO", "WARNING", "ERROR"]
