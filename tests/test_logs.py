"""CANN-style logs (acl_api_facts.md, "Logs"), from a real client program:
tests/c/buggy_small_workspace.c (aclInit, a device, a stream, aclrtMalloc,
phase 1, then a phase 2 that is refused) run in a subprocess.

- ASCEND_GLOBAL_LOG_LEVEL: 0 DEBUG, 1 INFO, 2 WARNING, 3 ERROR (the default),
  4 nothing; unset, empty or illegal means the default.
- ASCEND_SLOG_PRINT_TO_STDOUT=1 prints to stdout; otherwise (level set)
  lines go to $ASCEND_PROCESS_LOG_PATH/plog/plog-<pid>_<timestamp>.log,
  default $HOME/ascend/log.
- Nothing is logged when neither variable is set.
- A line holds, in order: the level in brackets, the module with the process
  id and program name in parentheses, a colon, the local time down to the
  microsecond as year-month-day-hour:minute:second.milli.micro, the source
  file and line in brackets, then the text, e.g.
  "[ERROR] OP(4711,train):2026-03-02-14:21:45.118.302 [conv_tbc.c:210]...".
- Lines for API calls, for phase 1's decisions (shapes, dtypes, workspace)
  and for errors.
"""

import datetime
import re
import subprocess

import pytest

from test_buggy_clients import build_c_programs, clean_env

PROGRAM = "buggy_small_workspace"

LINE = re.compile(
    r"^\[(?P<level>DEBUG|INFO|WARNING|ERROR)\] (?P<module>[A-Z][A-Z0-9_]*)\((?P<pid>\d+),(?P<pname>[^)]+)\):"
    r"(?P<stamp>\d{4}-\d{2}-\d{2}-\d{2}:\d{2}:\d{2}\.\d{3}\.\d{3}) \[(?P<file>[\w.+-]+):(?P<line>\d+)\](?P<text>.*)$")


@pytest.fixture(scope="module")
def program(convtbc_cli, tmp_path_factory):
    return build_c_programs(convtbc_cli, tmp_path_factory.mktemp("logs"), [PROGRAM])[PROGRAM]


def run(program, tmp_path, env):
    """Runs the program with HOME and the log path inside tmp_path (unless
    env says otherwise); returns (pid, stdout, stderr)."""
    base = {"HOME": str(tmp_path / "home")}
    base.update(env)
    proc = subprocess.Popen([str(program)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env(base), cwd=tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert "DONE" in out, out + err
    return proc.pid, out, err


def log_lines(text):
    return [line for line in text.splitlines() if line.startswith("[")]


def parse(lines, pid):
    """Every line must have CANN's shape, this process's pid and name, and a
    time stamp of today (give or take a minute)."""
    now = datetime.datetime.now()
    parsed = []
    for line in lines:
        m = LINE.match(line)
        assert m, f"not a plog line: {line!r}"
        assert int(m["pid"]) == pid, line
        assert m["pname"] == PROGRAM, line
        stamp = datetime.datetime.strptime(m["stamp"][:19], "%Y-%m-%d-%H:%M:%S")
        assert abs((now - stamp).total_seconds()) < 120, line
        assert int(m["line"]) > 0, line
        parsed.append(m)
    return parsed


def levels(parsed):
    return {m["level"] for m in parsed}


@pytest.mark.slow
def test_nothing_logged_without_the_variables(program, tmp_path):
    log_dir = tmp_path / "logs"
    pid, out, err = run(program, tmp_path, {"ASCEND_PROCESS_LOG_PATH": str(log_dir)})
    assert log_lines(out) == [] and log_lines(err) == [], out + err
    assert not log_dir.exists() and not (tmp_path / "home").exists()


@pytest.mark.slow
def test_debug_level_to_stdout(program, tmp_path):
    pid, out, err = run(program, tmp_path, {"ASCEND_SLOG_PRINT_TO_STDOUT": "1", "ASCEND_GLOBAL_LOG_LEVEL": "0"})
    parsed = parse(log_lines(out), pid)
    assert {"DEBUG", "INFO", "ERROR"} <= levels(parsed), out
    texts = [m["text"] for m in parsed]
    for api in ("aclInit", "aclrtSetDevice", "aclrtCreateStream", "aclrtMalloc"):
        assert any(api in t for t in texts), f"no line for {api}\n{out}"

    # phase 1's decisions: the problem's dims, the dtypes and the workspace it asked for
    workspace = int(re.search(r"^WORKSPACE (\d+)$", out, re.M).group(1))
    phase1 = [m for m in parsed if "aclnnConvTbcBackwardGetWorkspaceSize" in m["text"]]
    assert phase1, out
    text = phase1[0]["text"]
    for fact in ("T 8", "B 2", "C_in 4", "K 3", "C_out 3", "pad 1", "T_out 8", "FLOAT", "cubeMathType 0"):
        assert fact in text, f"phase-1 line lacks {fact!r}: {text}"
    assert re.search(rf"\bworkspace\D{{0,20}}\b{workspace}\b", text), f"workspace {workspace} not in: {text}"

    # the refused phase 2: an ERROR line with the message aclGetRecentErrMsg gave
    errors = [m for m in parsed if m["level"] == "ERROR"]
    assert any("smaller than" in m["text"] and "aclnnConvTbcBackward" in m["text"] for m in errors), out
    assert "(status 161002)" in out or "161002" in " ".join(m["text"] for m in errors), out


@pytest.mark.slow
def test_op_error_line_names_the_op_module_and_its_source(program, tmp_path):
    """The spec's example of an op's error line is `[ERROR] OP(...) ...
    [conv_tbc.c:33]...`: the op's module, and the file and line where the
    error was raised (not a shared error helper)."""
    pid, out, err = run(program, tmp_path, {"ASCEND_SLOG_PRINT_TO_STDOUT": "1", "ASCEND_GLOBAL_LOG_LEVEL": "3"})
    errors = [m for m in parse(log_lines(out), pid) if "smaller than" in m["text"]]
    assert errors, out
    m = errors[0]
    assert m["module"] == "OP", f"op error logged under module {m['module']}: {m.group(0)}"
    assert m["file"] != "errors.c", f"the location is the error helper, not where the error arose: {m.group(0)}"


@pytest.mark.slow
@pytest.mark.parametrize("level, want", [
    ("1", {"INFO", "ERROR"}),
    ("2", {"ERROR"}),
    ("3", {"ERROR"}),
    ("4", set()),
    ("", {"ERROR"}),       # empty: the default
    ("7", {"ERROR"}),      # illegal: the default
    (None, {"ERROR"}),     # unset: the default
])
def test_level_filters_stdout(program, tmp_path, level, want):
    env = {"ASCEND_SLOG_PRINT_TO_STDOUT": "1"}
    if level is not None:
        env["ASCEND_GLOBAL_LOG_LEVEL"] = level
    pid, out, err = run(program, tmp_path, env)
    parsed = parse(log_lines(out), pid)
    assert levels(parsed) == want, out


def plog_files(log_dir, pid):
    files = sorted((log_dir / "plog").glob("plog-*.log")) if (log_dir / "plog").exists() else []
    for f in files:
        assert re.fullmatch(rf"plog-{pid}_\d{{14,17}}\.log", f.name), f.name
    return files


@pytest.mark.slow
def test_level_alone_writes_plog_file(program, tmp_path):
    log_dir = tmp_path / "logs"
    pid, out, err = run(program, tmp_path, {"ASCEND_GLOBAL_LOG_LEVEL": "1", "ASCEND_PROCESS_LOG_PATH": str(log_dir)})
    assert log_lines(out) == [], out  # nothing on the screen
    files = plog_files(log_dir, pid)
    assert len(files) == 1, list(log_dir.rglob("*"))
    parsed = parse(files[0].read_text().splitlines(), pid)
    assert levels(parsed) == {"INFO", "ERROR"}
    assert any("aclnnConvTbcBackwardGetWorkspaceSize" in m["text"] for m in parsed)


@pytest.mark.slow
def test_print_to_stdout_0_writes_plog_file(program, tmp_path):
    log_dir = tmp_path / "logs"
    pid, out, err = run(program, tmp_path, {"ASCEND_GLOBAL_LOG_LEVEL": "3", "ASCEND_SLOG_PRINT_TO_STDOUT": "0",
                                            "ASCEND_PROCESS_LOG_PATH": str(log_dir)})
    assert log_lines(out) == [], out
    files = plog_files(log_dir, pid)
    assert len(files) == 1
    assert levels(parse(files[0].read_text().splitlines(), pid)) == {"ERROR"}


@pytest.mark.slow
def test_default_log_directory_is_home_ascend_log(program, tmp_path):
    pid, out, err = run(program, tmp_path, {"ASCEND_GLOBAL_LOG_LEVEL": "3"})
    files = plog_files(tmp_path / "home" / "ascend" / "log", pid)
    assert len(files) == 1, list(tmp_path.rglob("*"))
    assert levels(parse(files[0].read_text().splitlines(), pid)) == {"ERROR"}
