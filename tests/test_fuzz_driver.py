"""The fuzz cases of tests/fuzz/ in the normal run, under AddressSanitizer +
UndefinedBehaviorSanitizer: random_descriptors.c (built with gcc against the
sanitizer build of test_sanitizers.py) decodes hostile aclnnConvTbcBackward
calls from a seeded PRNG for a bounded time, then replays every input of
tests/fuzz/corpus/ and tests/fuzz/regressions/. The oracles (tensor views
inside their storage and their blocks, no aliasing outputs, no byte written
outside the outputs, a message for every refusal) are in
tests/fuzz/conv_tbc_case.h; tests/fuzz/README.md says how to run the
libFuzzer target and add a regression input.
"""

import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT, TESTS_DIR
from test_sanitizers import asan_build, sanitizer_env  # noqa: F401 (asan_build is a fixture)

FUZZ_DIR = TESTS_DIR / "fuzz"
CORPUS = sorted(p for p in (FUZZ_DIR / "corpus").iterdir() if p.is_file())
REGRESSIONS = sorted(p for p in (FUZZ_DIR / "regressions").iterdir() if p.is_file() and p.name != "README.md")

# Regression inputs of defects not fixed yet: file -> (the oracle that
# reports it, the defect). Their tests are xfail(strict=True), and the
# bounded run and the corpus replay switch those oracles off
# (CONVTBC_FUZZ_IGNORE) so that they keep checking everything else. When a
# fix lands its tests XPASS, which fails: delete the entries then.
OPEN = {}
IGNORED = ",".join(sorted({oracle for oracle, _ in OPEN.values()}))

# Regression inputs whose defect only clang's UBSan reports (the libFuzzer
# build): gcc's build computes the same values without a report, so their
# replay here passes. Fuzz past them with CONVTBC_FUZZ_IGNORE=<the name>.
CLANG_ONLY = {}

# Regression inputs that must also run both phases: a refusal would pass
# every oracle, but these calls are valid.
MUST_RUN = {
    "interleaved-outputs-no-alias": "gradInput on the even and gradWeight on the odd elements of one block share "
                                    "no element: an alias check must look at elements, not at spans",
}

SECONDS = float(os.environ.get("CONVTBC_FUZZ_SECONDS", "25"))
SEED = int(os.environ.get("CONVTBC_FUZZ_SEED", "11"))

STATS = re.compile(r"inputs (\d+): skipped (\d+), refused at phase 1 (\d+), phase 1 only (\d+), "
                   r"refused at phase 2 (\d+), run (\d+)")
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


@pytest.fixture(scope="module")
def driver(asan_build, tmp_path_factory):  # noqa: F811 (the fixture imported above)
    exe = tmp_path_factory.mktemp("fuzz_driver") / "random_descriptors"
    cmd = ["gcc", "-std=c11", "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
           "-fno-sanitize-recover=undefined", "-Wall", "-Wextra", f"-I{REPO_ROOT / 'include'}",
           f"-I{REPO_ROOT / 'include' / 'aclnn'}", str(FUZZ_DIR / "random_descriptors.c"), "-o", str(exe),
           str(asan_build), f"-Wl,-rpath,{asan_build.parent}", "-pthread", "-lm"]
    comp = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert comp.returncode == 0, comp.stderr
    return exe


def run_driver(driver, tmp_path, args, ignore=IGNORED, timeout=300):
    env = sanitizer_env(tmp_path)
    env["CONVTBC_FUZZ_IGNORE"] = ignore
    p = subprocess.run([str(driver), *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp_path)
    report = p.stdout[-3000:] + p.stderr[-8000:]
    return p, report


def assert_clean(p, report):
    assert p.returncode == 0, f"rc={p.returncode}\n{report}"
    for marker in SANITIZER_MARKERS:
        assert marker not in p.stderr, report
    m = STATS.search(p.stdout)
    assert m, report
    return [int(g) for g in m.groups()]


@pytest.mark.slow
def test_random_descriptors_bounded(driver, tmp_path):
    """A bounded run from a fixed seed (CONVTBC_FUZZ_SEED, CONVTBC_FUZZ_SECONDS
    change them): no sanitizer report, no oracle fires, and the decoder
    still reaches every outcome, so the run tests more than phase 1's first
    check."""
    crashes = tmp_path / "crashes"
    crashes.mkdir()
    p, report = run_driver(driver, tmp_path, ["--seed", str(SEED), "--seconds", str(SECONDS), "--save", str(crashes)],
                           timeout=SECONDS + 300)
    left = sorted(crashes.iterdir())
    if p.returncode != 0 and left:
        # pytest keeps the last runs' temporary directories: name the file.
        report += (f"\nThe input that ended the run is {left[0]}; copy it to tests/fuzz/regressions/ "
                   f"(see tests/fuzz/README.md).")
    inputs, _, refused1, phase1_only, refused2, ran = assert_clean(p, report)
    assert inputs >= 200, report
    # Every kind of outcome is reached, and a good share runs both phases.
    assert refused1 > 0 and refused2 > 0 and phase1_only >= 0, report
    assert ran >= inputs // 10, report


@pytest.mark.slow
def test_corpus_replays(driver, tmp_path):
    """Every input of the libFuzzer corpus runs clean under gcc's sanitizers
    (the corpus was grown under clang's)."""
    assert CORPUS, "tests/fuzz/corpus is empty"
    p, report = run_driver(driver, tmp_path, [str(f) for f in CORPUS])
    inputs, *_ = assert_clean(p, report)
    assert inputs == len(CORPUS), report


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    pytest.param(p, id=p.name, marks=[pytest.mark.xfail(strict=True, reason=OPEN[p.name][1])] if p.name in OPEN else [])
    for p in REGRESSIONS])
def test_regression_input(driver, tmp_path, path):
    """Each input that once ended a fuzz run (or guards a fix), replayed
    with every oracle on."""
    p, report = run_driver(driver, tmp_path, [str(path)], ignore="")
    inputs, _, _, _, _, ran = assert_clean(p, report)
    if path.name in MUST_RUN:
        assert ran == 1, f"{MUST_RUN[path.name]}\n{report}"


def test_entries_name_regression_files():
    """OPEN, CLANG_ONLY and MUST_RUN name files that exist, so that no entry
    silently covers nothing."""
    named = set(OPEN) | set(MUST_RUN) | set(CLANG_ONLY)
    assert named <= {p.name for p in REGRESSIONS}, sorted(named - {p.name for p in REGRESSIONS})


@pytest.mark.slow
def test_libfuzzer_target_compiles(tmp_path):
    """The libFuzzer target still compiles (with clang and libFuzzer when
    they are installed; running it is tests/fuzz/README.md's job)."""
    clang = shutil.which("clang")
    if not clang:
        pytest.skip("clang not installed")
    probe = subprocess.run([clang, "-fsanitize=fuzzer", "-x", "c", "-", "-o", str(tmp_path / "probe")],
                           input="#include <stdint.h>\n#include <stddef.h>\n"
                                 "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n",
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip("clang has no libFuzzer runtime (libclang-rt-dev)")
    cmd = [clang, "-std=c11", "-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-Wall", "-Wextra",
           f"-I{REPO_ROOT / 'include'}", f"-I{REPO_ROOT / 'include' / 'aclnn'}", "-c",
           str(FUZZ_DIR / "fuzz_conv_tbc_backward.c"), "-o", str(tmp_path / "fuzz.o")]
    comp = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert comp.returncode == 0, comp.stderr
