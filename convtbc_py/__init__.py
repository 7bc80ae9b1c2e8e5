"""convtbc: CANN's aclnnConvTbcBackward on the CPU, with CANN's C API.

`conv_tbc_backward` is the numpy front end. `ffi` and `lib` are the raw C API
(generated from the shipped headers) for code written in CANN's style;
`check` turns their status codes into `AclnnError` / `AclError`.
`__version__` is the package version (meson.build's project version).
"""

from ._library import ffi, lib
from ._version import __version__ as __version__  # "as": re-exported, for type checkers
from .emulation import device_memory_guard, memory_checking, set_soc, soc_name, soc_profile
from .errors import AclError, AclnnArgumentError, AclnnError, AclnnTypeError, AclnnValueError, ConvTbcError, check
from .ops import conv_tbc_backward

__all__ = [
    "AclError",
    "AclnnArgumentError",
    "AclnnError",
    "AclnnTypeError",
    "AclnnValueError",
    "ConvTbcError",
    "check",
    "conv_tbc_backward",
    "device_memory_guard",
    "ffi",
    "lib",
    "memory_checking",
    "set_soc",
    "soc_name",
    "soc_profile",
]
