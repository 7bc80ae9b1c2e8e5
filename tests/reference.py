"""Independent float64 reference for aclnnConvTbcBackward, written from the
spec's formulas (docs: /work/shared/spec/conv_tbc_backward.md), plus the
operand roundings cubeMathType asks for, emulated with integer bit
operations.

Nothing here calls convtbc.
"""

import numpy as np

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency
    BF16 = None

F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)

# Error bound relative to the largest reference magnitude, by output dtype.
REL_BOUND = {F32: 1e-4, F16: 1e-3}
if BF16 is not None:
    REL_BOUND[BF16] = 8e-3


def conv_tbc_backward_ref(grad_output, inp, weight, pad):
    """float64 gradInput, gradWeight, gradBias by plain sums.

    grad_output [T_out, B, C_out], inp [T, B, C_in], weight [K, C_in, C_out].
    """
    go = np.asarray(grad_output).astype(np.float64)
    x = np.asarray(inp).astype(np.float64)
    w = np.asarray(weight).astype(np.float64)
    T, B, C_in = x.shape
    K, C_in_w, C_out = w.shape
    assert C_in_w == C_in
    T_out = T + 2 * pad + 1 - K
    assert go.shape == (T_out, B, C_out), (go.shape, (T_out, B, C_out))

    # xp[t] = x[t - pad] for pad <= t < pad + T, else 0
    xp = np.zeros((T + 2 * pad, B, C_in), dtype=np.float64)
    xp[pad:pad + T] = x

    grad_input = np.zeros((T, B, C_in), dtype=np.float64)
    grad_weight = np.zeros((K, C_in, C_out), dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/Inf propagate
        _accumulate(go, xp, w, grad_input, grad_weight, pad, T, T_out, B)
    grad_bias = go.sum(axis=(0, 1)) if go.size else np.zeros(C_out)
    return grad_input, grad_weight, grad_bias


def _accumulate(go, xp, w, grad_input, grad_weight, pad, T, T_out, B):
    K, C_in, C_out = w.shape
    for k in range(K):
        # gradInput[t,b,c] += self[t+pad-k, b, o] * w[k,c,o] for 0 <= t+pad-k < T_out
        for t in range(T):
            s = t + pad - k
            if 0 <= s < T_out:
                grad_input[t] += go[s] @ w[k].T
        # gradWeight[k,c,o] = sum_{t,b} xp[t+k,b,c] * self[t,b,o]
        if T_out > 0:
            xs = xp[k:k + T_out].reshape(T_out * B, C_in)
            gs = go.reshape(T_out * B, C_out)
            grad_weight[k] = xs.T @ gs


def grad_weight_without_padding(grad_output, inp, k_size, pad):
    """float64 gradWeight summing only the terms whose input row exists, as
    PyTorch's conv_tbc_backward (CANN's golden) and convtbc form it: where
    the formula pairs a step of self with a zero of the padding, no product
    is formed, so an Inf or NaN there does not reach that tap."""
    go = np.asarray(grad_output).astype(np.float64)
    x = np.asarray(inp).astype(np.float64)
    T, B, C_in = x.shape
    T_out, _, C_out = go.shape
    grad_weight = np.zeros((k_size, C_in, C_out), dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(k_size):
            lo, hi = max(0, pad - k), min(T_out, T + pad - k)  # steps s with a real row s + k - pad
            if lo < hi:
                xs = x[lo + k - pad:hi + k - pad].reshape(-1, C_in)
                grad_weight[k] = xs.T @ go[lo:hi].reshape(-1, C_out)
    return grad_weight


def conv_tbc_backward_ref_loops(grad_output, inp, weight, pad):
    """The same formulas as scalar loops (slow; used on tiny shapes to check
    the vectorised reference above)."""
    go = np.asarray(grad_output).astype(np.float64)
    x = np.asarray(inp).astype(np.float64)
    w = np.asarray(weight).astype(np.float64)
    T, B, C_in = x.shape
    K, _, C_out = w.shape
    T_out = T + 2 * pad + 1 - K

    def xp(t, b, c):
        return x[t - pad, b, c] if pad <= t < pad + T else 0.0

    gi = np.zeros((T, B, C_in))
    gw = np.zeros((K, C_in, C_out))
    gb = np.zeros(C_out)
    for t in range(T):
        for b in range(B):
            for c in range(C_in):
                s = 0.0
                for k in range(K):
                    if 0 <= t + pad - k < T_out:
                        for o in range(C_out):
                            s += go[t + pad - k, b, o] * w[k, c, o]
                gi[t, b, c] = s
    for k in range(K):
        for c in range(C_in):
            for o in range(C_out):
                s = 0.0
                for t in range(T_out):
                    for b in range(B):
                        s += xp(t + k, b, c) * go[t, b, o]
                gw[k, c, o] = s
    for o in range(C_out):
        gb[o] = sum(go[t, b, o] for t in range(T_out) for b in range(B))
    return gi, gw, gb


# --------------------------------------------------------------------------
# Operand roundings (cubeMathType)


def round_hf32(a):
    """Round float32 values to HF32: float32 range, 11 explicit mantissa bits,
    round-to-nearest-even, by integer operations on the bit pattern.
    NaN and Inf are returned unchanged."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    drop = 23 - 11
    half = np.uint64((1 << (drop - 1)) - 1)
    lsb = (bits >> np.uint64(drop)) & np.uint64(1)
    rounded = (bits + half + lsb) & ~np.uint64((1 << drop) - 1)
    rounded = rounded.astype(np.uint32)
    out = rounded.view(np.float32).copy()
    special = ~np.isfinite(a)
    out[special] = a[special]
    return out


def round_fp16(a):
    """Round float32 values to float16 (numpy's cast rounds to nearest even)
    and back to float32."""
    return np.asarray(a, dtype=np.float32).astype(np.float16).astype(np.float32)


def round_operand(a, cube_math_type):
    """The operand as the products see it: FLOAT operands are rounded by
    modes 1/3 (HF32) and 2 (FP16); FLOAT16/BFLOAT16 ones never."""
    a = np.asarray(a)
    if a.dtype != F32 or cube_math_type == 0:
        return a
    if cube_math_type in (1, 3):
        return round_hf32(a)
    if cube_math_type == 2:
        return round_fp16(a)
    raise ValueError(cube_math_type)


def conv_tbc_backward_ref_cube(grad_output, inp, weight, pad, cube_math_type):
    """Reference with the cubeMathType operand rounding applied; gradBias is
    the sum of the unrounded grad_output."""
    gi, gw, _ = conv_tbc_backward_ref(
        round_operand(grad_output, cube_math_type),
        round_operand(inp, cube_math_type),
        round_operand(weight, cube_math_type),
        pad,
    )
    go = np.asarray(grad_output).astype(np.float64)
    gb = go.sum(axis=(0, 1))
    return gi, gw, gb


# --------------------------------------------------------------------------
# Comparison


def rel_error(actual, expected):
    """max |actual - expected| / max |expected| (0 for empty arrays; the
    absolute error when the reference is all zero)."""
    a = np.asarray(actual).astype(np.float64)
    e = np.asarray(expected, dtype=np.float64)
    assert a.shape == e.shape, (a.shape, e.shape)
    if a.size == 0:
        return 0.0
    scale = np.max(np.abs(e))
    err = np.max(np.abs(a - e))
    if not np.isfinite(err):
        return float("inf")
    return float(err / scale) if scale > 0 else float(err)


def assert_close(actual, expected, name="", bound=None):
    """Check `actual` against the float64 reference with the bound for
    `actual`'s dtype (the output's dtype)."""
    dt = np.asarray(actual).dtype
    if bound is None:
        bound = REL_BOUND[np.dtype(dt)]
    err = rel_error(actual, expected)
    assert err <= bound, f"{name}: relative error {err:.3e} > {bound:.1e} (dtype {dt})"
    return err


def random_operand(rng, shape, dtype, scale=1.0):
    """Random values in [-scale, scale) converted to dtype."""
    return (rng.uniform(-scale, scale, size=shape)).astype(np.float32).astype(dtype)


# --------------------------------------------------------------------------
# The forward op (aclnnConvTbc), from conv_tbc_forward.md's formula


def conv_tbc_ref(inp, weight, bias, pad):
    """float64 out[t,b,o] = bias[o] + sum_k sum_c xp[t+k,b,c] * w[k,c,o],
    xp = inp with `pad` zero steps on both ends of T."""
    x = np.asarray(inp).astype(np.float64)
    w = np.asarray(weight).astype(np.float64)
    b = np.asarray(bias).astype(np.float64)
    T, B, C_in = x.shape
    K, _, C_out = w.shape
    T_out = T + 2 * pad + 1 - K
    xp = np.zeros((T + 2 * pad, B, C_in), dtype=np.float64)
    xp[pad:pad + T] = x
    out = np.broadcast_to(b, (max(T_out, 0), B, C_out)).copy()
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/Inf propagate
        for k in range(K):
            out += np.einsum("tbc,co->tbo", xp[k:k + T_out], w[k]) if C_in else 0.0
    return out


def forward_operand(a, cube_math_type):
    """An operand of the forward op as CANN's cube multiplies it on an A2
    SoC: USE_FP16 (2) rounds every dtype to float16; HF32 modes (1, 3)
    round FLOAT; KEEP_DTYPE (0) and USE_FP32_ADD (4) change nothing."""
    a = np.asarray(a)
    if cube_math_type == 2:
        return round_fp16(a.astype(np.float32))
    if a.dtype == F32 and cube_math_type in (1, 3):
        return round_hf32(a)
    return a
