"""A float64 numpy reference for conv_tbc_backward, written from the spec's formulas.

Slow and simple on purpose: it is what the fast C path is compared against.
"""

from __future__ import annotations

from typing import Tuple

import numpy as np
import numpy.typing as npt


def conv_tbc_backward_reference(
    grad_output: npt.ArrayLike, input: npt.ArrayLike, weight: npt.ArrayLike, bias: npt.ArrayLike, pad: int
) -> Tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(grad_input, grad_weight, grad_bias) in float64.

    Arguments as conv_tbc_backward's, of any real dtype (converted to float64).
    With xp the input zero-padded by `pad` on both ends of T:
    grad_weight[k,c,o] = sum_{t,b} xp[t+k,b,c] * g[t,b,o];
    grad_xp[t+k,b,c] += sum_o g[t,b,o] * w[k,c,o], and grad_input is grad_xp
    without the padding (the same sum as the spec's gradInput formula);
    grad_bias[o] = sum_{t,b} g[t,b,o]. ValueError if the shapes do not fit.
    """
    g = np.asarray(grad_output, dtype=np.float64)
    x = np.asarray(input, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    if x.ndim != 3 or w.ndim != 3 or g.ndim != 3:
        raise ValueError("grad_output, input and weight must be 3-dimensional")
    T, B, _ = x.shape
    K = w.shape[0]
    T_out = T + 2 * pad + 1 - K
    if g.shape != (T_out, B, w.shape[2]) or np.shape(bias) != (w.shape[2],):
        raise ValueError("shapes do not describe a TBC convolution")

    xp = np.pad(x, ((pad, pad), (0, 0), (0, 0)))
    grad_xp = np.zeros_like(xp)
    grad_weight = np.zeros_like(w)
    for k in range(K):
        grad_weight[k] = np.einsum("tbc,tbo->co", xp[k : k + T_out], g)
        grad_xp[k : k + T_out] += np.einsum("tbo,co->tbc", g, w[k])
    grad_input = grad_xp[pad : pad + T]
    grad_bias = g.sum(axis=(0, 1))
    return grad_input, grad_weight, grad_bias
