"""A user of convtbc_py's public API, written as typed code would be:
tests/test_typing.py checks it with `mypy --strict`."""

from __future__ import annotations

from typing import List, Tuple

import numpy as np
import numpy.typing as npt

import convtbc_py
from convtbc_py.reference import conv_tbc_backward_reference


def gradients(T: int, B: int, C_in: int, K: int, C_out: int, pad: int) -> Tuple[npt.NDArray[np.float32], ...]:
    rng = np.random.default_rng(0)
    T_out = T + 2 * pad + 1 - K
    grad_output = rng.standard_normal((T_out, B, C_out)).astype(np.float32)
    x = rng.standard_normal((T, B, C_in)).astype(np.float32)
    weight: List[List[List[float]]] = [[[0.5] * C_out for _ in range(C_in)] for _ in range(K)]
    bias = np.zeros(C_out, np.float32)
    grad_input, grad_weight, grad_bias = convtbc_py.conv_tbc_backward(grad_output, x, weight, bias, pad)
    want = conv_tbc_backward_reference(grad_output, x, weight, bias, pad)
    worst: float = max(float(np.max(np.abs(g - r))) for g, r in zip((grad_input, grad_weight, grad_bias), want))
    assert worst < 1e-3
    return (grad_input.astype(np.float32), grad_weight.astype(np.float32), grad_bias.astype(np.float32))


def refused_argument() -> str:
    x = np.zeros((5, 1, 2))  # float64: refused, with a hint
    try:
        convtbc_py.conv_tbc_backward(x, x, x[:1], x[0, 0], 0, cube_math_type=1)
    except convtbc_py.AclnnTypeError as error:
        status: int = error.status
        name: str = error.name
        cann_text: str = error.message
        return f"{error.argument}: {status} {name} {cann_text}"
    except TypeError:
        return "a TypeError"
    return "nothing"


def emulated(soc: str) -> str:
    with convtbc_py.soc_profile(soc) as name, convtbc_py.memory_checking(False) as checking:
        assert checking is False
        return name + " " + convtbc_py.soc_name()


def version() -> str:
    text: str = convtbc_py.__version__
    return text


if __name__ == "__main__":
    print(version(), [g.shape for g in gradients(9, 2, 3, 3, 4, 1)], refused_argument(), emulated("Ascend910A"))
