"""convtbc: CANN's aclnnConvTbc and aclnnConvTbcBackward on the CPU, with
CANN's C API.

`conv_tbc` (the forward op) and `conv_tbc_backward` are the numpy front end. `ffi` and `lib` are the raw C API
(generated from the shipped headers) for code written in CANN's style;
`check` turns their status codes into `AclnnError` / `AclError`.

Importing the package loads nothing: the library is loaded on first use of
`conv_tbc_backward`, `ffi` or `lib`, so `use_cann(home)` (or
`$CONVTBC_CANN_HOME`) can first choose a CANN toolkit to run on instead;
`backend()` says which one is in use. `__version__` is the package version
(meson.build's project version).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, List

from ._library import backend, use_cann
from ._version import __version__ as __version__  # "as": re-exported, for type checkers

if TYPE_CHECKING:  # what the lazy names below are, for type checkers ("X as X": re-exported)
    from ._library import ffi as ffi
    from ._library import lib as lib
    from .emulation import NotConvtbcError as NotConvtbcError
    from .emulation import device_memory_guard as device_memory_guard
    from .emulation import memory_checking as memory_checking
    from .emulation import set_soc as set_soc
    from .emulation import soc_name as soc_name
    from .emulation import soc_profile as soc_profile
    from .errors import AclError as AclError
    from .errors import AclnnArgumentError as AclnnArgumentError
    from .errors import AclnnError as AclnnError
    from .errors import AclnnTypeError as AclnnTypeError
    from .errors import AclnnValueError as AclnnValueError
    from .errors import ConvTbcError as ConvTbcError
    from .errors import check as check
    from .ops import conv_tbc as conv_tbc
    from .ops import conv_tbc_backward as conv_tbc_backward

# Public name -> the submodule defining it, imported on first access (PEP 562):
# importing any of them would load the library or numpy's extras.
_LAZY: Dict[str, str] = {
    "AclError": "errors",
    "AclnnArgumentError": "errors",
    "AclnnError": "errors",
    "AclnnTypeError": "errors",
    "AclnnValueError": "errors",
    "ConvTbcError": "errors",
    "check": "errors",
    "conv_tbc": "ops",
    "conv_tbc_backward": "ops",
    "device_memory_guard": "emulation",
    "memory_checking": "emulation",
    "NotConvtbcError": "emulation",
    "set_soc": "emulation",
    "soc_name": "emulation",
    "soc_profile": "emulation",
    "ffi": "_library",
    "lib": "_library",
}

__all__ = sorted([*_LAZY, "__version__", "backend", "use_cann"])


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted([*globals(), *_LAZY])
