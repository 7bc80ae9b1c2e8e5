"""Controls of what convtbc emulates, for tests of code that calls CANN.

All are context managers that restore the previous setting on exit:

    with convtbc_py.soc_profile("Ascend910A"):
        ...   # phase 1 applies the training series' dtype rules
    with convtbc_py.memory_checking(False):
        ...   # raw-API code may pass host memory as tensor data
    with convtbc_py.device_memory_guard(False):
        ...   # the host may load and store aclrtMalloc'd memory

They wrap convtbc extensions (convtbc/convtbc_ext.h), not CANN symbols, and
act on the whole process; under the CANN backend they raise
`NotConvtbcError` (a RuntimeError), since a toolkit has no such controls.
`soc_name` is CANN's own aclrtGetSocName and works on both backends.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from . import _library
from .errors import AclError, check


class NotConvtbcError(RuntimeError):
    """A convtbc-only control was used while the CANN backend is in use."""


def _convtbc_only(name: str) -> None:
    if _library.backend() == "cann":
        raise NotConvtbcError(
            f"convtbc_py.{name} controls convtbc's emulation, and the CANN backend is in use "
            f"(toolkit at {_library.cann_home()}); it has no such control. Run without "
            f"{_library.CANN_HOME_VARIABLE} / use_cann() to use it")


def soc_name() -> str:
    """The SoC the library runs on, as aclrtGetSocName reports it (the emulated
    one under convtbc)."""
    lib, ffi = _library.lib, _library.ffi
    return str(ffi.string(lib.aclrtGetSocName()).decode())


def set_soc(name: str) -> None:
    """Selects the emulated SoC (e.g. "Ascend910B1", "Ascend910A", "Ascend950");
    AclError for a name convtbc does not emulate."""
    _convtbc_only("set_soc")
    check(_library.lib.convtbcSetSocVersion(name.encode()), AclError)


def soc_profile(name: str) -> "contextlib.AbstractContextManager[str]":
    """While inside, convtbc emulates SoC `name` (see set_soc); yields the name.

    The SoC decides phase 1's dtype and cubeMathType rules (and what
    aclrtGetSocName reports), as on that chip; the previous SoC is restored
    on exit. An unknown name raises AclError before the block runs.
    """
    _convtbc_only("soc_profile")
    return _soc_profile(name)


@contextlib.contextmanager
def _soc_profile(name: str) -> Iterator[str]:
    previous = soc_name()
    set_soc(name)
    try:
        yield name
    finally:
        set_soc(previous)


def memory_checking(enabled: bool) -> "contextlib.AbstractContextManager[bool]":
    """While inside, tensor data, workspaces and aclrtMemcpy/aclrtMemset
    ranges must (True) or need not (False) lie in live aclrtMalloc'd blocks;
    yields `enabled`; the previous setting is restored on exit.

    Checking is on unless CONVTBC_CHECK_MEMORY=0, since real CANN needs
    device memory; False lets raw-API code pass host memory.
    """
    _convtbc_only("memory_checking")
    return _switch(_library.lib.convtbcSetMemoryChecking, enabled)


def device_memory_guard(enabled: bool) -> "contextlib.AbstractContextManager[bool]":
    """While inside, aclrtMalloc'd memory is (False) or is not (True)
    host-accessible; outside, a host access ends the process as on the NPU."""
    _convtbc_only("device_memory_guard")
    return _switch(_library.lib.convtbcSetDeviceMemoryGuard, enabled)


@contextlib.contextmanager
def _switch(setter: object, enabled: bool) -> Iterator[bool]:
    # The convtbc setters return the previous value, which is put back on exit.
    previous = setter(int(enabled))  # type: ignore[operator]
    try:
        yield enabled
    finally:
        setter(previous)  # type: ignore[operator]
