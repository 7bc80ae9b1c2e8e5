"""Which implementation convtbc computes each gradient with, for a problem.

`plan_implementations` asks the library (convtbcPlanImplementations) what
phase 1 of aclnnConvTbcBackward would choose for contiguous tensors of one
dtype; CONVTBC_ISA and CONVTBC_FORCE_IMPL, as set when it is called, apply.
"""

from __future__ import annotations

from typing import Dict

from ._library import ffi, lib
from .errors import check, recent_error_message

GRADIENTS = ("gradInput", "gradWeight", "gradBias")
DTYPES = {"float32": "ACL_FLOAT", "float16": "ACL_FLOAT16", "bfloat16": "ACL_BF16"}


def plan_implementations(t: int, b: int, c_in: int, k: int, c_out: int, pad: int, dtype: str) -> Dict[str, str]:
    """{gradient name: implementation name} for this problem."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype is {dtype!r}: expected one of {', '.join(DTYPES)}")
    recent_error_message()
    names = ffi.new("char[]", 128)
    check(lib.convtbcPlanImplementations(t, b, c_in, k, c_out, pad, getattr(lib, DTYPES[dtype]), names, 128))
    return dict(zip(GRADIENTS, ffi.string(names).decode().split(" ")))
