"""convtbc: CANN's aclnnConvTbcBackward on the CPU, with CANN's C API.

`conv_tbc_backward` is the numpy front end. `ffi` and `lib` are the raw C API
(generated from the shipped headers) for code written in CANN's style;
`check` turns their status codes into `AclnnError` / `AclError`.
"""

from ._library import ffi, lib
from .emulation import device_memory_guard, memory_checking, set_soc, soc_name, soc_profile
from .errors import AclError, AclnnError, ConvTbcError, check
from .ops import conv_tbc_backward

__all__ = [
    "AclError",
    "AclnnError",
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
