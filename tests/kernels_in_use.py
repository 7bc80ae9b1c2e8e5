"""What the kernel entry a plan made now would use can do, from `convtbc
info`'s report: the entry's name, and for the AMX emulation (an entry
copied from the best one the CPU has, CONVTBC_ISA=amx_emulated) the CPU's
features. Read at import, so within CONVTBC_ISA as the test process starts.
"""

import ctypes

from convtbc_py.info import runtime_info

_report = runtime_info()
KERNEL = _report["compute"]["kernel"]
_FEATURES = set(_report["cpu"]["features"])
_AVX512 = {"avx512f", "avx512bw", "avx512vl", "fma", "f16c"} <= _FEATURES
_EMULATED = KERNEL == "amx_emulated"

# VDPBF16PS pair kernels (AVX512_BF16)
HAS_VDPBF16PS = KERNEL in ("avx512_bf16", "amx_bf16") or (_EMULATED and _AVX512 and "avx512_bf16" in _FEATURES)
# the AVX-512 entries' narrow 8 x 16 tile
HAS_NARROW_TILE = KERNEL in ("avx512", "avx512_bf16", "amx_bf16") or (_EMULATED and _AVX512)
# the AMX tile kernel, or its emulation
HAS_AMX = KERNEL in ("amx_bf16", "amx_emulated")
PORTABLE = KERNEL == "portable" or (_EMULATED and not {"avx2", "fma", "f16c"} <= _FEATURES)


def has_amx(flags):
    """AMX tiles with bfloat16 products that this process may use: the CPU
    lists them (in /proc/cpuinfo's `flags`), and Linux grants the tile data
    on request (5.16 and later; the library asks the same way)."""
    if not {"amx_bf16", "amx_tile", "avx512_bf16"} <= set(flags):
        return False
    sys_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata = 158, 0x1023, 18  # x86-64 Linux
    return ctypes.CDLL(None, use_errno=True).syscall(sys_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0
