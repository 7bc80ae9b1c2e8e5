"""Controls of what convtbc emulates, for tests of code that calls CANN.

All are context managers that restore the previous setting on exit:

    with convtbc_py.soc_profile("Ascend910A"):
        ...   # phase 1 applies the training series' dtype rules
    with convtbc_py.memory_checking(False):
        ...   # raw-API code may pass host memory as tensor data
    with convtbc_py.device_memory_guard(False):
        ...   # the host may load and store aclrtMalloc'd memory

They wrap convtbc extensions (convtbc/convtbc_ext.h), not CANN symbols, and
act on the whole process.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from ._library import ffi, lib
from .errors import AclError, check


def soc_name() -> str:
    """The emulated SoC, as aclrtGetSocName reports it."""
    return ffi.string(lib.aclrtGetSocName()).decode()


def set_soc(name: str) -> None:
    """Selects the emulated SoC (e.g. "Ascend910B1", "Ascend910A", "Ascend950");
    AclError for a name convtbc does not emulate."""
    check(lib.convtbcSetSocVersion(name.encode()), AclError)


@contextlib.contextmanager
def soc_profile(name: str) -> Iterator[str]:
    """While inside, convtbc emulates SoC `name` (see set_soc); yields the name.

    The SoC decides phase 1's dtype and cubeMathType rules, as on that chip.
    An unknown name raises AclError before the block runs.
    """
    previous = soc_name()
    set_soc(name)
    try:
        yield name
    finally:
        set_soc(previous)


@contextlib.contextmanager
def memory_checking(enabled: bool) -> Iterator[bool]:
    """While inside, tensor data, workspaces and aclrtMemcpy/aclrtMemset
    ranges must (True) or need not (False) lie in live aclrtMalloc'd blocks;
    yields `enabled`.

    Checking is on unless CONVTBC_CHECK_MEMORY=0, since real CANN needs
    device memory; False lets raw-API code pass host memory.
    """
    previous = lib.convtbcSetMemoryChecking(int(enabled))
    try:
        yield enabled
    finally:
        lib.convtbcSetMemoryChecking(previous)


@contextlib.contextmanager
def device_memory_guard(enabled: bool) -> Iterator[bool]:
    """While inside, aclrtMalloc'd memory is (False) or is not (True)
    host-accessible; outside, a host access ends the process as on the NPU."""
    previous = lib.convtbcSetDeviceMemoryGuard(int(enabled))
    try:
        yield enabled
    finally:
        lib.convtbcSetDeviceMemoryGuard(previous)
