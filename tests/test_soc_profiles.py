"""SoC profiles: the same calls give each emulated SoC's documented codes.

The expected status of every call is computed here, independently, from the
spec's rules (conv_tbc_backward.md, phase-1 checks 2, 6, 8, 9):
  - Atlas A2 (Ascend910B1, the default) and A3 (Ascend910_9391): FLOAT,
    FLOAT16, BFLOAT16 in every slot and any mix; cubeMathType 0..3 all accepted;
  - training series (Ascend910A): FLOAT and FLOAT16 only (BFLOAT16 -> 161002);
    for the promoted compute dtype of self/input/weight, KEEP_DTYPE(0) and
    USE_HF32(3) reject FLOAT and BFLOAT16, ALLOW_FP32_DOWN_PRECISION(1) and
    USE_FP16(2) reject BFLOAT16;
  - bias is the exception to the SoC's list: FLOAT, FLOAT16, BFLOAT16 on every
    profile, training series included (gradBias follows the SoC's list);
  - Ascend950: as A2, and gradInput/gradWeight/gradBias must have the dtype
    of input/weight/bias; no profile checks the kernel length K (weight dim
    0): K = 0 makes weight empty and takes the empty path (gradients whose
    sums have no terms are 0, gradBias is the sum of self);
  - cubeMathType outside 0..3 -> 161002 everywhere.
Profiles are selected with convtbc_py.soc_profile (convtbcSetSocVersion),
with CONVTBC_SOC_VERSION (read once, at load), and reported by
aclrtGetSocName.
"""

import itertools
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import convtbc_py
from conftest import TESTS_DIR
from rawapi import Problem, phase1, phase2
from reference import BF16, REL_BOUND, conv_tbc_backward_ref, rel_error

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
OK, INVALID, ACL_ERROR_INVALID_PARAM = 0, 161002, 100000

A2, A3, TRAINING, A950 = "Ascend910B1", "Ascend910_9391", "Ascend910A", "Ascend950"
PROFILES = [A2, A3, TRAINING, A950]
FAMILY = {A2: "a2", A3: "a3", TRAINING: "training", A950: "950"}

pytestmark = pytest.mark.skipif(BF16 is None, reason="ml_dtypes is needed for bfloat16")


# ---- the rules, from the spec -------------------------------------------------

def promoted(self_dt, input_dt, weight_dt):
    """The compute dtype: the common dtype of self/input/weight (torch's
    promotion: any two different float dtypes here promote to float32)."""
    return self_dt if self_dt == input_dt == weight_dt else F32


def expected_status(profile, ins, outs, cube):
    """ins = dtypes of (self, input, weight, bias); outs = of (gradInput,
    gradWeight, gradBias). The kernel length does not matter on any profile."""
    family = FAMILY[profile]
    allowed = {F32, F16} if family == "training" else {F32, F16, BF16}
    if any(d not in allowed for d in (*ins[:3], *outs)) or ins[3] not in {F32, F16, BF16}:
        return INVALID
    if not 0 <= cube <= 3:
        return INVALID
    if family == "training":
        compute = promoted(*ins[:3])
        if cube in (0, 3) and compute in (F32, BF16):
            return INVALID
        if cube in (1, 2) and compute == BF16:
            return INVALID
    if family == "950" and tuple(outs) != tuple(ins[1:]):
        return INVALID
    return OK


# ---- the matrix, through the raw API -------------------------------------------

IN_DTYPES = [  # self, input, weight, bias
    (F32, F32, F32, F32),
    (F16, F16, F16, F16),
    (BF16, BF16, BF16, BF16),
    (F16, F32, F16, F16),     # mixed: computes in FLOAT
    (BF16, F16, BF16, BF16),  # mixed: computes in FLOAT
    (F16, F16, F16, F32),     # bias apart: still computes in FLOAT16
    (F32, F32, F32, BF16),
]
OUT_CHOICES = ["match", "all-f32", "all-f16", "all-bf16"]
CUBES = [-1, 0, 1, 2, 3, 4]


def out_dtypes(ins, choice):
    if choice == "match":
        return ins[1], ins[2], ins[3]
    dt = {"all-f32": F32, "all-f16": F16, "all-bf16": BF16}[choice]
    return dt, dt, dt


def operands(ins, T=5, B=2, C_in=3, K=2, C_out=2, pad=1, seed=0):
    rng = np.random.default_rng(seed)
    T_out = T + 2 * pad + 1 - K
    shapes = [(T_out, B, C_out), (T, B, C_in), (K, C_in, C_out), (C_out,)]
    return [rng.uniform(-1, 1, s).astype(np.float32).astype(dt) for s, dt in zip(shapes, ins)], pad


def phase1_status(ins, outs, cube, K=2, T=5, pad=1):
    (go, x, w, b), pad = operands(ins, T=T, K=K, pad=pad)
    p = Problem(go, x, w, b, out_dtypes=outs)
    r = phase1(*p.args(), pad, cube, **p.outs())
    if r.status == OK:
        assert phase2(r) == 0  # consumes the executor
        # wait in case this thread has a current context (the op is then queued on its default stream)
        assert convtbc_py.lib.convtbcSynchronizeCurrent() == 0
    else:
        assert "aclnnConvTbcBackwardGetWorkspaceSize" in r.message, r.message
    return r.status


@pytest.mark.parametrize("profile", PROFILES)
def test_dtype_and_cube_math_matrix(profile):
    wrong = []
    with convtbc_py.soc_profile(profile):
        assert convtbc_py.soc_name() == profile
        for ins, choice, cube in itertools.product(IN_DTYPES, OUT_CHOICES, CUBES):
            outs = out_dtypes(ins, choice)
            want = expected_status(profile, ins, outs, cube)
            got = phase1_status(ins, outs, cube)
            if got != want:
                wrong.append(f"ins={[d.name for d in ins]} outs={choice} cube={cube}: got {got}, want {want}")
    assert not wrong, f"{profile}: {len(wrong)} calls gave the wrong code:\n" + "\n".join(wrong)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("K, T", [(0, 5), (1, 5), (255, 256), (256, 256), (300, 300)])
def test_no_kernel_length_range(profile, K, T):
    """No profile checks K's range (CANN's checker has no such check; a
    documented 1..255 is not in its code): K = 0 is CANN's own unit-test case
    and takes the empty path. FLOAT16 with cubeMathType 1 passes every
    profile's dtype rules."""
    ins = (F16, F16, F16, F16)
    with convtbc_py.soc_profile(profile):
        assert phase1_status(ins, ins[1:], 1, K=K, T=T, pad=0) == OK


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("T, C_in, K, pad", [(5, 3, 0, 0), (5, 3, 0, 2), (0, 3, 0, 0), (5, 0, 2, 1)])
def test_empty_weight_takes_the_empty_path(profile, T, C_in, K, pad):
    """An empty weight (K = 0 or C_in = 0) on every profile, Ascend950
    included: gradInput is 0 (its sums have no terms), gradWeight has no
    element, gradBias is the sum of self (not CANN's B * T_out). Compared with
    the float64 reference; small integers, so exactly."""
    B, C_out = 2, 4
    T_out = T + 2 * pad + 1 - K
    rng = np.random.default_rng(K + T)
    go = rng.integers(-3, 4, (T_out, B, C_out)).astype(F16)
    x = rng.integers(-3, 4, (T, B, C_in)).astype(F16)
    w = np.zeros((K, C_in, C_out), F16)
    b = rng.integers(-3, 4, (C_out,)).astype(F16)
    with convtbc_py.soc_profile(profile):
        p = Problem(go, x, w, b, fill=7)
        r = phase1(*p.args(), pad, 0, **p.outs())
        assert r.status == OK, r.message
        assert phase2(r) == 0
        assert convtbc_py.lib.convtbcSynchronizeCurrent() == 0
        gi, gw, gb = p.results()
        # the numpy API agrees
        ngi, ngw, ngb = convtbc_py.conv_tbc_backward(go, x, w, b, pad)
    ref_gi, ref_gw, ref_gb = conv_tbc_backward_ref(go, x, w, pad)
    assert gw.size == 0 and ngw.shape == (K, C_in, C_out)
    assert np.all(ref_gi == 0)
    assert np.array_equal(gi.astype(np.float64), ref_gi) and np.array_equal(ngi.astype(np.float64), ref_gi)
    assert np.array_equal(ref_gb, go.astype(np.float64).sum(axis=(0, 1)))
    assert np.array_equal(gb.astype(np.float64), ref_gb) and np.array_equal(ngb.astype(np.float64), ref_gb)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("bias_dt", [F32, F16, BF16], ids=["f32", "f16", "bf16"])
def test_bias_dtype_list_is_the_same_on_every_profile(profile, bias_dt):
    """bias takes FLOAT, FLOAT16 and BFLOAT16 on every profile; gradBias keeps
    the profile's list (and on Ascend950 must have bias's dtype)."""
    ins = (F16, F16, F16, bias_dt)
    grad_bias = bias_dt if FAMILY[profile] == "950" else F16
    with convtbc_py.soc_profile(profile):
        assert phase1_status(ins, (F16, F16, grad_bias), 0) == OK
        (go, x, w, b), pad = operands(ins)
        p = Problem(go, x, w, b, out_dtypes=(F16, F16, grad_bias))
        r = phase1(*p.args(), pad, 0, **p.outs())
        assert r.status == OK, r.message
        assert phase2(r) == 0
        assert convtbc_py.lib.convtbcSynchronizeCurrent() == 0
        for out, ref in zip(p.results(), conv_tbc_backward_ref(go, x, w, pad)):
            assert rel_error(out, ref) <= REL_BOUND[out.dtype]


def test_training_series_bias_bf16_grad_bias_bf16():
    """On the training series a BFLOAT16 bias is accepted, a BFLOAT16 gradBias
    is not: the message names gradBias."""
    ins = (F16, F16, F16, BF16)
    with convtbc_py.soc_profile(TRAINING):
        (go, x, w, b), pad = operands(ins)
        p = Problem(go, x, w, b, out_dtypes=(F16, F16, BF16))
        r = phase1(*p.args(), pad, 0, **p.outs())
    assert r.status == INVALID
    assert "gradBias" in r.message and "DT_BF16" in r.message, r.message


# ---- the same calls through the numpy API -------------------------------------

@pytest.mark.parametrize("profile", PROFILES)
def test_numpy_api_codes_and_results(profile):
    """conv_tbc_backward (outputs in the inputs' dtypes) raises AclnnError
    161002 exactly where the profile's rules say; KEEP_DTYPE results that are
    accepted match the float64 reference."""
    wrong = []
    with convtbc_py.soc_profile(profile):
        for ins, cube in itertools.product(IN_DTYPES, range(4)):
            (go, x, w, b), pad = operands(ins, seed=cube)
            want = expected_status(profile, ins, ins[1:], cube)
            try:
                gi, gw, gb = convtbc_py.conv_tbc_backward(go, x, w, b, pad, cube_math_type=cube)
                got = OK
            except convtbc_py.AclnnError as e:
                got = e.status
                assert e.message, "an AclnnError without a message"
            if got != want:
                wrong.append(f"ins={[d.name for d in ins]} cube={cube}: got {got}, want {want}")
            elif got == OK and cube == 0:
                for out, ref in zip((gi, gw, gb), conv_tbc_backward_ref(go, x, w, pad)):
                    assert rel_error(out, ref) <= REL_BOUND[out.dtype], (profile, ins, out.dtype)
    assert not wrong, f"{profile}:\n" + "\n".join(wrong)


def test_same_call_differs_by_profile():
    """One call, four answers: bfloat16 with float32 gradients."""
    ins = (BF16, BF16, BF16, BF16)
    outs = (F32, F32, F32)
    got = {}
    for profile in PROFILES:
        with convtbc_py.soc_profile(profile):
            got[profile] = phase1_status(ins, outs, 1)
    assert got == {A2: OK, A3: OK, TRAINING: INVALID, A950: INVALID}


# ---- selecting the profile -----------------------------------------------------

def test_soc_profile_context_manager_restores():
    before = convtbc_py.soc_name()
    with convtbc_py.soc_profile(TRAINING) as name:
        assert name == TRAINING
        assert convtbc_py.soc_name() == TRAINING
        assert convtbc_py.ffi.string(convtbc_py.lib.aclrtGetSocName()).decode() == TRAINING
        with convtbc_py.soc_profile(A950):
            assert convtbc_py.soc_name() == A950
        assert convtbc_py.soc_name() == TRAINING  # inner exit restores the outer profile
    assert convtbc_py.soc_name() == before

    with pytest.raises(KeyError):
        with convtbc_py.soc_profile(A3):
            assert convtbc_py.soc_name() == A3
            raise KeyError("inside")
    assert convtbc_py.soc_name() == before  # restored after an exception


def test_unknown_soc_is_refused_and_changes_nothing():
    before = convtbc_py.soc_name()
    assert convtbc_py.lib.convtbcSetSocVersion(b"Ascend310P") == ACL_ERROR_INVALID_PARAM
    convtbc_py.lib.aclGetRecentErrMsg()
    assert convtbc_py.soc_name() == before
    with pytest.raises(convtbc_py.AclError) as info:
        with convtbc_py.soc_profile("NoSuchSoc"):
            pass  # pragma: no cover
    assert info.value.status == ACL_ERROR_INVALID_PARAM
    assert convtbc_py.soc_name() == before


def test_unknown_soc_in_the_environment_fails_acl_init(tmp_path):
    """A misspelt CONVTBC_SOC_VERSION must not quietly test against the
    default SoC: aclInit refuses it (ACL_ERROR_INVALID_PARAM) and says which
    names exist; unset, it starts."""
    code = """
    import convtbc_py
    from convtbc_py import ffi, lib
    status = lib.aclInit(ffi.NULL)
    text = lib.aclGetRecentErrMsg()
    print("message", ffi.string(text).decode() if text != ffi.NULL else "-")
    print("status", status)
    """
    result = finish(start_fresh(code, {"CONVTBC_SOC_VERSION": "Ascend910C"}, tmp_path))
    assert int(result["status"]) == ACL_ERROR_INVALID_PARAM
    assert "CONVTBC_SOC_VERSION" in result["message"] and "'Ascend910C'" in result["message"]
    assert "Ascend910B1" in result["message"] and "Ascend950" in result["message"]
    assert int(finish(start_fresh(code, {}, tmp_path))["status"]) == 0


def test_unknown_soc_in_the_environment_fails_the_numpy_call(tmp_path):
    """The numpy front end needs no aclInit, so its call refuses the name."""
    code = """
    import numpy as np
    import convtbc_py
    g = np.ones((5, 1, 2), np.float32); w = np.ones((1, 2, 2), np.float32); b = np.ones(2, np.float32)
    try:
        convtbc_py.conv_tbc_backward(g, g, w, b, 0)
        print("status 0")
    except convtbc_py.AclError as e:
        print("message", e.message)
        print("status", e.status)
    """
    result = finish(start_fresh(code, {"CONVTBC_SOC_VERSION": "ascend910b1"}, tmp_path))
    assert int(result["status"]) == ACL_ERROR_INVALID_PARAM
    assert "'ascend910b1'" in result["message"]


def start_fresh(code, env_extra, cwd):
    """`code` in a new interpreter (the library loads afresh), outside the
    source tree so that the installed package is imported; a Popen."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVTBC_", "ASCEND_"))}
    env["PYTHONPATH"] = str(TESTS_DIR)
    env.update(env_extra)
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)


def finish(proc):
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, f"rc={proc.returncode}\n{out}\n{err}"
    return dict(line.split(" ", 1) for line in out.strip().splitlines())


PROBE = """
import os
import numpy as np
import ml_dtypes
import convtbc_py
from convtbc_py import ffi, lib

def status(dtype):
    g = np.ones((5, 1, 2), dtype); w = np.ones((1, 2, 2), dtype); b = np.ones(2, dtype)
    try:
        convtbc_py.conv_tbc_backward(g, g, w, b, 0, cube_math_type=1)
        return 0
    except convtbc_py.AclnnError as e:
        return e.status

print("soc", ffi.string(lib.aclrtGetSocName()).decode())
print("bf16", status(ml_dtypes.bfloat16))
os.environ["CONVTBC_SOC_VERSION"] = "Ascend950"   # too late: read once, at load
print("later", ffi.string(lib.aclrtGetSocName()).decode())
with convtbc_py.soc_profile("Ascend910A"):
    print("inside", convtbc_py.soc_name())
print("restored", convtbc_py.soc_name())
print("set", lib.convtbcSetSocVersion(b"Ascend910B1"))
print("after_set", ffi.string(lib.aclrtGetSocName()).decode())
print("bf16_after_set", status(ml_dtypes.bfloat16))
"""


@pytest.fixture(scope="module")
def fresh_processes(tmp_path_factory):
    """The probes, run concurrently, one process per environment."""
    cwd = tmp_path_factory.mktemp("soc")
    procs = {profile: start_fresh(PROBE, {"CONVTBC_SOC_VERSION": profile}, cwd) for profile in PROFILES}
    procs["unset"] = start_fresh(PROBE, {}, cwd)
    return {key: finish(proc) for key, proc in procs.items()}


@pytest.mark.slow
@pytest.mark.parametrize("profile", PROFILES)
def test_environment_selects_profile_once(profile, fresh_processes):
    got = fresh_processes[profile]
    assert got["soc"] == profile
    # bfloat16 is refused by the training series only (outputs match inputs, so Ascend950 takes it)
    assert int(got["bf16"]) == (INVALID if profile == TRAINING else OK)
    assert got["later"] == profile
    # soc_profile puts back the profile the environment chose
    assert (got["inside"], got["restored"]) == (TRAINING, profile)
    assert got["set"] == "0"  # convtbcSetSocVersion overrides the environment
    assert got["after_set"] == A2
    assert got["bf16_after_set"] == "0"


@pytest.mark.slow
def test_default_profile_is_atlas_a2(fresh_processes):
    got = fresh_processes["unset"]
    assert got["soc"] == A2
    assert got["bf16"] == "0"
