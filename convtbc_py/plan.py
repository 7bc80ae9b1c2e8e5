"""Which implementation convtbc computes each gradient with, for a problem,
and the forward op's output.

`plan_implementations` asks the library (convtbcPlanImplementations) what
phase 1 of aclnnConvTbcBackward, and of aclnnConvTbc, would choose for
contiguous tensors of one dtype; CONVTBC_ISA and the forcing (CONVTBC_FORCE_IMPL, read at the first
plan, or `forced_implementations`) apply.
"""

from __future__ import annotations

import contextlib
from typing import Dict, Iterator, Sequence

from ._library import ffi, lib
from .errors import check, recent_error_message

# What each name is for: the backward op's gradients, the forward op's output.
GRADIENTS = ("gradInput", "gradWeight", "gradBias", "out (forward)")
DTYPES = {"float32": "ACL_FLOAT", "float16": "ACL_FLOAT16", "bfloat16": "ACL_BF16"}


def plan_implementations(t: int, b: int, c_in: int, k: int, c_out: int, pad: int, dtype: str) -> Dict[str, str]:
    """{gradient name (or "out (forward)"): implementation name} for this problem."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype is {dtype!r}: expected one of {', '.join(DTYPES)}")
    recent_error_message()
    names = ffi.new("char[]", 128)
    check(lib.convtbcPlanImplementations(t, b, c_in, k, c_out, pad, getattr(lib, DTYPES[dtype]), names, 128))
    return dict(zip(GRADIENTS, ffi.string(names).decode().split(" ")))


def force_implementations(names: Sequence[str]) -> None:
    """Forces the named implementations, where they apply, in the plans made
    from now on in this process; an empty sequence lifts the forcing."""
    recent_error_message()
    check(lib.convtbcForceImplementations(",".join(names).encode()))


@contextlib.contextmanager
def forced_implementations(*names: str) -> Iterator[None]:
    """Forces `names` inside the block, then lifts all forcing."""
    force_implementations(names)
    try:
        yield
    finally:
        force_implementations(())
