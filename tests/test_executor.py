"""Executor and workspace rules of phase 2 (aclnnConvTbcBackward), repeatable
executors, aclSetInputTensorAddr / aclSetOutputTensorAddr.
"""

import numpy as np
import pytest

from rawapi import (Tensor, declare_host, ffi, lib, phase1, phase2, recent_msg,
                    tensor_from_array, workspace_for)
from reference import assert_close, conv_tbc_backward_ref

OK, NULLPTR, INVALID, INNER_NULLPTR = 0, 161001, 161002, 561103
SENT = np.float32(-31.0)
KEEP = []  # host buffers declared to the library for the life of the process


class Op:
    """One float32 problem with sentinel-filled contiguous outputs."""

    def __init__(self, rng, T=6, B=2, C_in=3, K=3, C_out=4, pad=1):
        self.pad = pad
        T_out = T + 2 * pad + 1 - K
        mk = lambda s: rng.uniform(-1, 1, size=s).astype(np.float32)  # noqa: E731
        self.go, self.x, self.w, self.bias = mk((T_out, B, C_out)), mk((T, B, C_in)), mk((K, C_in, C_out)), mk((C_out,))
        self.t_go, self.t_x, self.t_w, self.t_b = (tensor_from_array(a) for a in (self.go, self.x, self.w, self.bias))
        self.outs = [Tensor(np.full(int(np.prod(s)), SENT, np.float32), s)
                     for s in (self.x.shape, self.w.shape, (C_out,))]

    def phase1(self, **kw):
        return phase1(self.t_go, self.t_x, self.t_w, self.t_b, self.pad, 0, *self.outs, **kw)

    def untouched(self):
        return all(np.all(o.storage == SENT) for o in self.outs)

    def reset(self):
        for o in self.outs:
            o.storage[:] = SENT

    def check(self, go=None, x=None, w=None):
        ref = conv_tbc_backward_ref(self.go if go is None else go, self.x if x is None else x,
                                    self.w if w is None else w, self.pad)
        for o, r, n in zip(self.outs, ref, ("gradInput", "gradWeight", "gradBias")):
            assert_close(o.view(), r, n)


def find_workspace_problem(rng):
    """A problem whose phase 1 asks for a workspace (None if none does)."""
    for dims in ((64, 16, 256, 5, 128, 2), (33, 8, 96, 9, 64, 4), (128, 32, 512, 3, 256, 1)):
        op = Op(rng, *dims)
        p1 = op.phase1()
        assert p1.status == OK, p1.message
        if p1.ws_size > 0:
            return op, p1
        assert phase2(p1) == OK
    return None, None


def test_null_executor(rng):
    st = lib.aclnnConvTbcBackward(ffi.NULL, 0, ffi.NULL, ffi.NULL)
    assert st == NULLPTR
    assert "executor" in recent_msg()


def test_consumed_executor_refused(rng):
    op = Op(rng)
    p1 = op.phase1()
    assert p1.status == OK
    assert phase2(p1) == OK
    op.check()
    op.reset()
    st = phase2(p1)
    assert st == INVALID, st
    assert recent_msg()
    assert op.untouched()


def test_null_workspace_with_size(rng):
    op = Op(rng)
    p1 = op.phase1()
    assert p1.status == OK
    st = lib.aclnnConvTbcBackward(ffi.NULL, max(p1.ws_size, 64), p1.executor, ffi.NULL)
    assert st == NULLPTR, st
    assert "workspace" in recent_msg()
    assert op.untouched()


def test_small_workspace_refused(rng):
    op, p1 = find_workspace_problem(rng)
    if op is None:
        pytest.skip("phase 1 asked for no workspace on any tried problem")
    ws, keep = workspace_for(p1.ws_size)
    st = lib.aclnnConvTbcBackward(ws, p1.ws_size - 1, p1.executor, ffi.NULL)
    assert st == INVALID, st
    assert "workspace" in recent_msg().lower()
    assert op.untouched()
    del keep


def test_larger_workspace_accepted(rng):
    op = Op(rng)
    p1 = op.phase1()
    ws, keep = workspace_for(p1.ws_size + 4096)
    assert lib.aclnnConvTbcBackward(ws, p1.ws_size + 4096, p1.executor, ffi.NULL) == OK
    op.check()


def test_workspace_problem_runs(rng):
    op, p1 = find_workspace_problem(rng)
    if op is None:
        pytest.skip("phase 1 asked for no workspace on any tried problem")
    assert phase2(p1) == OK
    op.check()


def test_repeatable_runs_many_times(rng):
    op = Op(rng)
    p1 = op.phase1()
    assert p1.status == OK
    assert lib.aclSetAclOpExecutorRepeatable(p1.executor) == OK
    for i in range(4):
        op.reset()
        # new values at the same addresses are picked up
        op.t_go.storage[:] = rng.uniform(-1, 1, size=op.t_go.storage.size).astype(np.float32)
        assert phase2(p1) == OK, f"run {i}: {recent_msg()}"
        op.check(go=op.t_go.view())
    assert lib.aclDestroyAclOpExecutor(p1.executor) == OK


def test_repeatable_null_and_destroy_null():
    assert lib.aclSetAclOpExecutorRepeatable(ffi.NULL) == INNER_NULLPTR
    assert lib.aclDestroyAclOpExecutor(ffi.NULL) == INNER_NULLPTR


def test_repeatable_failed_run_then_good_run(rng):
    # A refused run (NULL workspace with a size) leaves a repeatable executor usable.
    op = Op(rng)
    p1 = op.phase1()
    assert lib.aclSetAclOpExecutorRepeatable(p1.executor) == OK
    assert lib.aclnnConvTbcBackward(ffi.NULL, 64, p1.executor, ffi.NULL) == NULLPTR
    assert op.untouched()
    assert phase2(p1) == OK
    op.check()
    assert lib.aclDestroyAclOpExecutor(p1.executor) == OK


@pytest.mark.parametrize("index,which", [(0, "self"), (1, "input"), (2, "weight"), (3, "bias")])
def test_set_input_tensor_addr(index, which, rng):
    op = Op(rng)
    p1 = op.phase1()
    assert lib.aclSetAclOpExecutorRepeatable(p1.executor) == OK
    assert phase2(p1) == OK
    op.check()
    t = {"self": op.t_go, "input": op.t_x, "weight": op.t_w, "bias": op.t_b}[which]
    new = rng.uniform(-2, 2, size=t.storage.size).astype(np.float32)
    KEEP.append(new)
    declare_host(new.ctypes.data, new.nbytes)
    old_copy = t.storage.copy()
    assert lib.aclSetInputTensorAddr(p1.executor, index, t.ptr, ffi.cast("void *", new.ctypes.data)) == OK
    op.reset()
    assert phase2(p1) == OK
    newv = new.reshape(t.shape)
    kw = {"self": dict(go=newv), "input": dict(x=newv), "weight": dict(w=newv), "bias": {}}[which]
    op.check(**kw)
    assert np.array_equal(t.storage, old_copy)
    assert lib.aclDestroyAclOpExecutor(p1.executor) == OK


@pytest.mark.parametrize("index", [0, 1, 2])
def test_set_output_tensor_addr(index, rng):
    op = Op(rng)
    p1 = op.phase1()
    assert lib.aclSetAclOpExecutorRepeatable(p1.executor) == OK
    t = op.outs[index]
    new = np.full(t.storage.size, SENT, np.float32)
    KEEP.append(new)
    declare_host(new.ctypes.data, new.nbytes)
    assert lib.aclSetOutputTensorAddr(p1.executor, index, t.ptr, ffi.cast("void *", new.ctypes.data)) == OK
    assert phase2(p1) == OK
    assert np.all(t.storage == SENT), "the old output address was written"
    ref = conv_tbc_backward_ref(op.go, op.x, op.w, op.pad)[index]
    assert_close(new.reshape(t.shape), ref)
    assert lib.aclDestroyAclOpExecutor(p1.executor) == OK


def test_set_tensor_addr_errors(rng):
    op = Op(rng)
    p1 = op.phase1()
    assert lib.aclSetAclOpExecutorRepeatable(p1.executor) == OK
    buf = np.zeros(256, np.float32)
    KEEP.append(buf)
    declare_host(buf.ctypes.data, buf.nbytes)
    addr = ffi.cast("void *", buf.ctypes.data)
    assert lib.aclSetInputTensorAddr(ffi.NULL, 0, op.t_go.ptr, addr) == INNER_NULLPTR
    assert lib.aclSetOutputTensorAddr(ffi.NULL, 0, op.outs[0].ptr, addr) == INNER_NULLPTR
    assert lib.aclSetInputTensorAddr(p1.executor, 0, ffi.NULL, addr) == INNER_NULLPTR
    assert lib.aclSetOutputTensorAddr(p1.executor, 0, ffi.NULL, addr) == INNER_NULLPTR
    for i in (4, 5, 100):
        assert lib.aclSetInputTensorAddr(p1.executor, i, op.t_go.ptr, addr) == INVALID
    for i in (3, 4, 100):
        assert lib.aclSetOutputTensorAddr(p1.executor, i, op.outs[0].ptr, addr) == INVALID
    # nothing changed: the executor still computes the original problem
    assert phase2(p1) == OK
    op.check()
    assert lib.aclDestroyAclOpExecutor(p1.executor) == OK


def test_executors_independent(rng):
    # Two live executors (phase 1 twice before any phase 2) each compute
    # their own problem.
    a, b = Op(rng), Op(rng, T=4, B=3, C_in=2, K=2, C_out=5, pad=0)
    pa, pb = a.phase1(), b.phase1()
    assert pa.status == OK and pb.status == OK
    assert phase2(pb) == OK
    assert phase2(pa) == OK
    a.check()
    b.check()


def test_phase2_with_stream_without_init(rng):
    # The op works without aclInit; a NULL stream is the default stream.
    op = Op(rng)
    p1 = op.phase1()
    ws, keep = workspace_for(p1.ws_size)
    assert lib.aclnnConvTbcBackward(ws, p1.ws_size, p1.executor, ffi.NULL) == OK
    op.check()
