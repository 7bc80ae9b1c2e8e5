"""Device and host memory as CANN documents it: the allocation variants
(aclrtMallocAlign32, aclrtMallocCached, aclrtMallocWithCfg, aclrtMallocHost,
aclrtMallocHostWithCfg), the frees (aclrtFreeWithDevSync,
aclrtFreeHostWithDevSync), 2-D copies with pitches (aclrtMemcpy2d and its
Async twin), fills of host memory from aclrtMallocHost, the cache calls
(aclrtMemFlush, aclrtMemInvalidate), aclrtGetMemInfo (the SoC's memory less
what is allocated, with CANN's size rounding) and aclrtPointerGetAttributes.

And the guard: a host load or store through a device pointer ends the
process with a message naming the allocation, as the access faults on the
NPU; convtbc_py.device_memory_guard(False) lifts it for a block of code and
CONVTBC_GUARD_DEVICE_MEMORY=0 for the whole process.

Each test runs in a fresh interpreter (aclInit once per process; a fault
ends it).
"""

import re
import signal

import pytest

from conftest import run_python

ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_INVALID_DEVICEID = 107001
ACL_ERROR_RT_MEMORY_ALLOCATION = 207001
GIB = 1 << 30

PRELUDE = """
import numpy as np
import convtbc_py
ffi, lib = convtbc_py.ffi, convtbc_py.lib
H2H, H2D, D2H, D2D, DEFAULT = 0, 1, 2, 3, 4

def msg():
    p = lib.aclGetRecentErrMsg()
    return "" if p == ffi.NULL else ffi.string(p).decode()

def eq(got, want, what):
    assert got == want, f"{what}: got {got}, want {want} ({msg()})"

def ptr(a):
    return ffi.cast("void *", a.ctypes.data)

def address(p):
    return int(ffi.cast("uintptr_t", p))

def malloc(n, policy=0, fn=None):
    p = ffi.new("void **")
    eq((fn or lib.aclrtMalloc)(p, n, policy), 0, f"allocating {n} bytes")
    return p[0]

def upload(dev, a):
    eq(lib.aclrtMemcpy(dev, a.nbytes, ptr(a), a.nbytes, H2D), 0, "upload")

def download(dev, n):
    a = np.zeros(n, np.uint8)
    eq(lib.aclrtMemcpy(ptr(a), n, dev, n, D2H), 0, "download")
    return a

def mem_info(attr=1):
    free, total = ffi.new("size_t *"), ffi.new("size_t *")
    eq(lib.aclrtGetMemInfo(attr, free, total), 0, "aclrtGetMemInfo")
    return free[0], total[0]

eq(lib.aclInit(ffi.NULL), 0, "aclInit")
eq(lib.aclrtSetDevice(0), 0, "aclrtSetDevice")
"""


def run(code, env=None, check=True):
    return run_python(PRELUDE + code, env_extra=env, check=check)


# ---- allocation variants -------------------------------------------------------------


def test_device_allocation_variants():
    run(f"""
p = ffi.new("void **")
for name in ("aclrtMalloc", "aclrtMallocAlign32", "aclrtMallocCached"):
    fn = getattr(lib, name)
    eq(fn(p, 0, 0), {ACL_ERROR_INVALID_PARAM}, name + " size 0")
    eq(fn(ffi.NULL, 64, 0), {ACL_ERROR_INVALID_PARAM}, name + " NULL devPtr")
    dev = malloc(100, lib.ACL_MEM_MALLOC_NORMAL_ONLY, fn)
    if name != "aclrtMallocAlign32":  # CANN: the first address is 64-byte aligned
        eq(address(dev) % 64, 0, name + " alignment")
    data = np.arange(100, dtype=np.uint8)
    upload(dev, data)
    assert np.array_equal(download(dev, 100), data), name
    eq(lib.aclrtFree(dev), 0, name + ": aclrtFree")
    eq(lib.aclrtFree(dev), {ACL_ERROR_INVALID_PARAM}, name + ": aclrtFree twice")
    assert "double free" in msg()

# aclrtMallocWithCfg: NULL config, attributes, OR'ed policies
cfg = ffi.new("aclrtMallocConfig *")
eq(lib.aclrtMallocWithCfg(ffi.NULL, 64, 0, ffi.NULL), {ACL_ERROR_INVALID_PARAM}, "WithCfg NULL devPtr")
eq(lib.aclrtMallocWithCfg(p, 0, 0, ffi.NULL), {ACL_ERROR_INVALID_PARAM}, "WithCfg size 0")
cfg.numAttrs, cfg.attrs = 1, ffi.NULL
eq(lib.aclrtMallocWithCfg(p, 64, 0, cfg), {ACL_ERROR_INVALID_PARAM}, "WithCfg attrs NULL, numAttrs 1")
assert "attrs" in msg()
attrs = ffi.new("aclrtMallocAttribute[2]")
attrs[0].attr = lib.ACL_RT_MEM_ATTR_MODULE_ID
attrs[0].value.moduleId = 7
attrs[1].attr = lib.ACL_RT_MEM_ATTR_DEVICE_ID
attrs[1].value.deviceId = 1
cfg.attrs, cfg.numAttrs = attrs, 2
eq(lib.aclrtMallocWithCfg(p, 64, 0, cfg), {ACL_ERROR_RT_INVALID_DEVICEID}, "WithCfg on device 1")
attrs[1].value.deviceId = 0
policy = lib.ACL_MEM_MALLOC_HUGE_FIRST | lib.ACL_MEM_TYPE_HIGH_BAND_WIDTH
for c in (ffi.NULL, cfg):
    eq(lib.aclrtMallocWithCfg(p, 64, policy, c), 0, "aclrtMallocWithCfg")
    eq(address(p[0]) % 64, 0, "WithCfg alignment")
    upload(p[0], np.full(64, 3, np.uint8))
    assert (download(p[0], 64) == 3).all()
    eq(lib.aclrtFree(p[0]), 0, "aclrtFree of a WithCfg block")
print("ok")
""")


def test_host_memory_is_host_accessible():
    run(f"""
hp = ffi.new("void **")
eq(lib.aclrtMallocHost(hp, 0), {ACL_ERROR_INVALID_PARAM}, "MallocHost size 0")
eq(lib.aclrtMallocHostWithCfg(ffi.NULL, 64, ffi.NULL), {ACL_ERROR_INVALID_PARAM}, "MallocHostWithCfg NULL")
eq(lib.aclrtMallocHostWithCfg(hp, 0, ffi.NULL), {ACL_ERROR_INVALID_PARAM}, "MallocHostWithCfg size 0")
cfg = ffi.new("aclrtMallocConfig *")
cfg.numAttrs = 2
eq(lib.aclrtMallocHostWithCfg(hp, 64, cfg), {ACL_ERROR_INVALID_PARAM}, "MallocHostWithCfg attrs NULL")
for name, make in (("aclrtMallocHost", lambda: lib.aclrtMallocHost(hp, 256)),
                   ("aclrtMallocHostWithCfg", lambda: lib.aclrtMallocHostWithCfg(hp, 256, ffi.NULL))):
    eq(make(), 0, name)
    host = hp[0]
    eq(address(host) % 64, 0, name + " alignment")
    view = ffi.cast("uint8_t *", host)
    view[0], view[255] = 11, 22              # the host writes it directly
    eq((view[0], view[255]), (11, 22), name + " host access")
    # aclrtMemset fills host memory from aclrtMallocHost too (CANN decides by address)
    eq(lib.aclrtMemset(host, 256, 7, 256), 0, "aclrtMemset of " + name + " memory")
    assert all(view[i] == 7 for i in range(256))
    dev = malloc(256)
    eq(lib.aclrtMemcpy(dev, 256, host, 256, H2D), 0, "upload from " + name + " memory")
    assert (download(dev, 256) == 7).all()
    eq(lib.aclrtFreeHost(dev), {ACL_ERROR_INVALID_PARAM}, "aclrtFreeHost of device memory")
    eq(lib.aclrtFree(host), {ACL_ERROR_INVALID_PARAM}, "aclrtFree of host memory")
    eq(lib.aclrtFree(dev), 0, "aclrtFree")
    eq(lib.aclrtFreeHost(host), 0, "aclrtFreeHost")
    eq(lib.aclrtFreeHost(host), {ACL_ERROR_INVALID_PARAM}, "aclrtFreeHost twice")
eq(lib.aclrtMallocHost(hp, 64), 0, "aclrtMallocHost")
eq(lib.aclrtFreeHostWithDevSync(ffi.NULL), {ACL_ERROR_INVALID_PARAM}, "FreeHostWithDevSync NULL")
eq(lib.aclrtFreeHostWithDevSync(hp[0]), 0, "aclrtFreeHostWithDevSync")
eq(lib.aclrtFreeHostWithDevSync(hp[0]), {ACL_ERROR_INVALID_PARAM}, "aclrtFreeHostWithDevSync twice")
print("ok")
""")


def test_free_with_dev_sync_waits_for_queued_work():
    """aclrtFreeWithDevSync synchronises the device first: the queued fill of
    the block finishes before the block goes. aclrtFree does not wait, and the
    fill then fails at the next synchronisation (the block was freed)."""
    run(f"""
s = ffi.new("aclrtStream *")
eq(lib.aclrtCreateStream(s), 0, "aclrtCreateStream")
a, b = malloc(4096), malloc(4096)
eq(lib.aclrtMemsetAsync(a, 4096, 9, 4096, s[0]), 0, "aclrtMemsetAsync a")
eq(lib.aclrtFreeWithDevSync(a), 0, "aclrtFreeWithDevSync")
eq(lib.aclrtSynchronizeStream(s[0]), 0, "synchronize after aclrtFreeWithDevSync")
eq(lib.aclrtFreeWithDevSync(a), {ACL_ERROR_INVALID_PARAM}, "aclrtFreeWithDevSync twice")
eq(lib.aclrtFreeWithDevSync(ffi.NULL), {ACL_ERROR_INVALID_PARAM}, "aclrtFreeWithDevSync NULL")
eq(lib.aclrtMemsetAsync(b, 4096, 9, 4096, s[0]), 0, "aclrtMemsetAsync b")
eq(lib.aclrtFree(b), 0, "aclrtFree")
st = lib.aclrtSynchronizeStream(s[0])
assert st != 0 and "use after free" in msg(), (st, msg())
print("ok")
""", env={"CONVTBC_STREAM_DELAY_MS": "200"})


# ---- ACL_MEMCPY_DEFAULT ------------------------------------------------------------------


@pytest.mark.parametrize("guard", ["guarded", "plain"])
def test_memcpy_default_refuses_what_an_explicit_kind_refuses(guard):
    """CANN resolves ACL_MEMCPY_DEFAULT by where each pointer lies, so a
    DEFAULT copy is the copy of the kind its pointers imply, checks included:
    512 bytes into (or out of) a 16-byte block, into or out of a freed block,
    past a block's end are refused with the explicit kind's code (107000),
    by aclrtMemcpy and aclrtMemcpyAsync, and write nothing. Plain blocks
    (guard off) are heap memory, where a copy that slipped through would
    write past the block instead of faulting. tests/c/default_copies.c does
    the same under ASan."""
    run(f"""
N = 512
small, freed = malloc(16), malloc(16)
eq(lib.aclrtMemset(small, 16, 0x5A, 16), 0, "memset")
eq(lib.aclrtFree(freed), 0, "aclrtFree")
host = (np.arange(N) % 251 + 1).astype(np.uint8)
back = np.full(N, 0xEE, np.uint8)
past_end = ffi.cast("char *", small) + 16
for what, dst, src, kind in [
    ("into a 16-byte block", small, ptr(host), H2D),
    ("into a freed block", freed, ptr(host), H2D),
    ("out of a 16-byte block", ptr(back), small, D2H),
    ("out of a freed block", ptr(back), freed, D2H),
    ("past a block's end", past_end, ptr(host), H2D),
    ("host to host into a freed block", freed, ptr(host), H2H),
]:
    eq(lib.aclrtMemcpy(dst, N, src, N, kind), {ACL_ERROR_RT_PARAM_INVALID}, f"explicit kind {{kind}}, {{what}}")
    eq(lib.aclrtMemcpy(dst, N, src, N, DEFAULT), {ACL_ERROR_RT_PARAM_INVALID}, f"DEFAULT, {{what}}")
    assert "ACL_MEMCPY_DEFAULT" in msg()
    eq(lib.aclrtMemcpyAsync(dst, N, src, N, DEFAULT, ffi.NULL), {ACL_ERROR_RT_PARAM_INVALID}, f"Async, {{what}}")
    eq(lib.aclrtSynchronizeStream(ffi.NULL), 0, "nothing was queued")
    assert (back == 0xEE).all(), what
assert (download(small, 16) == 0x5A).all(), "a refused copy wrote the block"
# a 2-D copy takes no DEFAULT (CANN: HOST_TO_DEVICE or DEVICE_TO_HOST)
eq(lib.aclrtMemcpy2d(small, N, ptr(host), N, N, 1, DEFAULT), {ACL_ERROR_INVALID_PARAM}, "2-D DEFAULT")
eq(lib.aclrtMemcpy2dAsync(ptr(back), N, freed, N, N, 1, DEFAULT, ffi.NULL), {ACL_ERROR_INVALID_PARAM},
   "2-D Async DEFAULT")
eq(lib.aclrtMemcpy2d(freed, 64, ptr(host), 64, 64, 8, H2D), {ACL_ERROR_RT_PARAM_INVALID}, "2-D into a freed block")
assert (back == 0xEE).all() and (download(small, 16) == 0x5A).all()

# what DEFAULT infers still works: host to host, and every device direction
other = np.zeros(N, np.uint8)
eq(lib.aclrtMemcpy(ptr(other), N, ptr(host), N, DEFAULT), 0, "DEFAULT host to host")
assert np.array_equal(other, host)
a, b = malloc(N), malloc(N)
eq(lib.aclrtMemcpy(a, N, ptr(host), N, DEFAULT), 0, "DEFAULT host to device")
eq(lib.aclrtMemcpyAsync(b, N, a, N, DEFAULT, ffi.NULL), 0, "DEFAULT device to device, queued")
eq(lib.aclrtSynchronizeStream(ffi.NULL), 0, "synchronize")
eq(lib.aclrtMemcpy(ptr(back), N, b, N, DEFAULT), 0, "DEFAULT device to host")
assert np.array_equal(back, host)
print("ok")
""", env={"CONVTBC_GUARD_DEVICE_MEMORY": "0"} if guard == "plain" else None)


# ---- 2-D copies ------------------------------------------------------------------------


def test_memcpy_2d_pitches_and_codes():
    run(f"""
W, H, SP, DP = 5, 4, 8, 16
host = (np.arange(SP * H) + 1).astype(np.uint8)
dev = malloc(DP * H)
eq(lib.aclrtMemset(dev, DP * H, 0xEE, DP * H), 0, "memset")
eq(lib.aclrtMemcpy2d(dev, DP, ptr(host), SP, W, H, H2D), 0, "2d H2D")
rows = download(dev, DP * H).reshape(H, DP)
assert np.array_equal(rows[:, :W], host.reshape(H, SP)[:, :W]), rows
assert (rows[:, W:] == 0xEE).all(), "bytes between the rows were written"

back = np.full((H, 12), 0xCC, np.uint8)
eq(lib.aclrtMemcpy2d(ptr(back), 12, dev, DP, W, H, D2H), 0, "2d D2H")
assert np.array_equal(back[:, :W], host.reshape(H, SP)[:, :W]) and (back[:, W:] == 0xCC).all(), back

# device to device, and a block that ends exactly where the last row does
tight = malloc((H - 1) * 7 + W)
eq(lib.aclrtMemcpy2d(tight, 7, dev, DP, W, H, D2D), 0, "2d D2D")
got = download(tight, (H - 1) * 7 + W)
assert all(np.array_equal(got[r * 7:r * 7 + W], host[r * SP:r * SP + W]) for r in range(H)), got
short = malloc((H - 1) * 7 + W - 1)
eq(lib.aclrtMemcpy2d(short, 7, dev, DP, W, H, D2D), {ACL_ERROR_RT_PARAM_INVALID}, "2d past the end of dst")
assert "past the end" in msg()

# refusals, and nothing written by them
before = download(dev, DP * H)
other = np.zeros(SP * H, np.uint8)
for what, args, want in [
    ("width > spitch", (dev, DP, ptr(host), SP, SP + 1, H, H2D), {ACL_ERROR_INVALID_PARAM}),
    ("width > dpitch", (dev, 4, ptr(host), SP, W, H, H2D), {ACL_ERROR_INVALID_PARAM}),
    ("NULL dst", (ffi.NULL, DP, ptr(host), SP, W, H, H2D), {ACL_ERROR_INVALID_PARAM}),
    ("NULL src", (dev, DP, ffi.NULL, SP, W, H, H2D), {ACL_ERROR_INVALID_PARAM}),
    ("kind HOST_TO_HOST", (ptr(other), SP, ptr(host), SP, W, H, H2H), {ACL_ERROR_INVALID_PARAM}),
    ("kind DEFAULT", (dev, DP, ptr(host), SP, W, H, DEFAULT), {ACL_ERROR_INVALID_PARAM}),
    ("kind 7", (dev, DP, ptr(host), SP, W, H, 7), {ACL_ERROR_INVALID_PARAM}),
    ("height over 5242880", (dev, DP, ptr(host), SP, W, 5242881, H2D), {ACL_ERROR_INVALID_PARAM}),
    ("width over 5000000", (dev, 5000001, ptr(host), 5000001, 5000001, 1, H2D), {ACL_ERROR_INVALID_PARAM}),
    ("H2D into host memory", (ptr(other), SP, ptr(host), SP, W, H, H2D), {ACL_ERROR_RT_PARAM_INVALID}),
    ("D2H from host memory", (ptr(other), SP, ptr(host), SP, W, H, D2H), {ACL_ERROR_RT_PARAM_INVALID}),
    ("rows past the end of src", (ptr(other), SP, dev, DP, W, H + 1, D2H), {ACL_ERROR_RT_PARAM_INVALID}),
]:
    eq(lib.aclrtMemcpy2d(*args), want, what)
    assert "aclrtMemcpy2d" in msg() or want == 0
assert np.array_equal(download(dev, DP * H), before) and (other == 0).all(), "a refused copy wrote"
# nothing to copy: success whatever the pointers
eq(lib.aclrtMemcpy2d(ffi.NULL, 0, ffi.NULL, 0, 0, H, H2D), 0, "width 0")
eq(lib.aclrtMemcpy2d(ffi.NULL, 0, ffi.NULL, 0, W, 0, H2D), 0, "height 0")

# device-to-device 2-D copies exist on Atlas A2/A3 and Ascend950, not on the training series
with convtbc_py.soc_profile("Ascend910A"):
    eq(lib.aclrtMemcpy2d(tight, 7, dev, DP, W, H, D2D), {ACL_ERROR_INVALID_PARAM}, "2d D2D on Ascend910A")
    eq(lib.aclrtMemcpy2d(dev, DP, ptr(host), SP, W, H, H2D), 0, "2d H2D on Ascend910A")
print("ok")
""")


def test_memcpy_2d_async_is_queued():
    run(f"""
s = ffi.new("aclrtStream *")
eq(lib.aclrtCreateStream(s), 0, "aclrtCreateStream")
W, H, SP, DP = 3, 3, 4, 8
host = np.full(SP * H, 5, np.uint8)
dev = malloc(DP * H)
eq(lib.aclrtMemset(dev, DP * H, 0, DP * H), 0, "memset")
eq(lib.aclrtMemcpy2dAsync(dev, DP, ptr(host), SP, W, H, H2D, s[0]), 0, "aclrtMemcpy2dAsync")
assert (download(dev, DP * H) == 0).all(), "the queued copy ran before the stream got to it"
eq(lib.aclrtSynchronizeStream(s[0]), 0, "synchronize")
rows = download(dev, DP * H).reshape(H, DP)
assert (rows[:, :W] == 5).all() and (rows[:, W:] == 0).all(), rows
bogus = ffi.cast("aclrtStream", 0x1234)
eq(lib.aclrtMemcpy2dAsync(dev, DP, ptr(host), SP, W, H, H2D, bogus), {ACL_ERROR_INVALID_PARAM}, "dead stream")
eq(lib.aclrtMemcpy2dAsync(dev, DP, ptr(host), SP, DP + 1, H, H2D, s[0]), {ACL_ERROR_INVALID_PARAM},
   "width > dpitch")
eq(lib.aclrtMemcpy2dAsync(dev, DP, ptr(host), SP, W, H, H2H, s[0]), {ACL_ERROR_INVALID_PARAM}, "kind H2H")
eq(lib.aclrtSynchronizeStream(s[0]), 0, "synchronize")
print("ok")
""", env={"CONVTBC_STREAM_DELAY_MS": "200"})


# ---- fills and caches -------------------------------------------------------------------


def test_cache_calls_and_fills():
    run(f"""
dev = malloc(128)
for name in ("aclrtMemFlush", "aclrtMemInvalidate"):
    fn = getattr(lib, name)
    eq(fn(dev, 128), 0, name)
    eq(fn(ffi.NULL, 128), {ACL_ERROR_INVALID_PARAM}, name + " NULL")
    eq(fn(dev, 0), {ACL_ERROR_INVALID_PARAM}, name + " size 0")
    eq(fn(dev, 129), {ACL_ERROR_RT_PARAM_INVALID}, name + " past the end")
plain = np.zeros(64, np.uint8)                   # malloc'd host memory, not from ACL
eq(lib.aclrtMemset(ptr(plain), 64, 1, 64), {ACL_ERROR_RT_PARAM_INVALID}, "aclrtMemset of plain host memory")
assert (plain == 0).all()
eq(lib.aclrtMemset(dev, 128, 0x5A, 128), 0, "aclrtMemset")
assert (download(dev, 128) == 0x5A).all()
print("ok")
""")


def test_memset_d32_writes_words():
    # aclrtMemsetD32(ptr, memSize, value, N): N 32-bit words; 0x3F800000 is 1.0f.
    run(f"""
dev = malloc(64)
eq(lib.aclrtMemset(dev, 64, 0, 64), 0, "clear")
eq(lib.aclrtMemsetD32(dev, 64, 0x3F800000, 10), 0, "aclrtMemsetD32")
words = download(dev, 64).view(np.float32)
assert (words[:10] == 1.0).all() and (words[10:] == 0).all(), words
eq(lib.aclrtMemsetD32(dev, 36, 7, 10), {ACL_ERROR_INVALID_PARAM}, "40 bytes into memSize 36")
eq(lib.aclrtMemsetD32(dev, 2**64 - 1, 7, 2**62), {ACL_ERROR_INVALID_PARAM}, "N * 4 overflows")
eq(lib.aclrtMemsetD32(dev, 128, 7, 32), {ACL_ERROR_RT_PARAM_INVALID}, "past the allocation")
assert (download(dev, 64).view(np.float32)[:10] == 1.0).all(), "a refused fill wrote"
stream = ffi.new("aclrtStream *")
eq(lib.aclrtCreateStream(stream), 0, "stream")
eq(lib.aclrtMemsetD32Async(dev, 64, 0xFFFFFFFF, 16, stream[0]), 0, "aclrtMemsetD32Async")
eq(lib.aclrtSynchronizeStream(stream[0]), 0, "sync")
assert (download(dev, 64) == 0xFF).all()
print("ok")
""")


# ---- aclrtGetMemInfo -------------------------------------------------------------------------


def test_get_mem_info_before_and_after_malloc():
    """Total: the SoC's device memory. Free: the total less what is allocated,
    each block counted as CANN sizes it: rounded up to 32 bytes plus 32 of
    padding (aclrtMalloc; aclrtMallocAlign32 does not pad), and huge-page
    blocks (HUGE_ONLY; HUGE_FIRST above 1 MiB) in whole 2 MiB pages."""
    run(f"""
free0, total = mem_info()
eq(total, 64 * {GIB}, "Ascend910B1 device memory")
eq(free0, total, "nothing allocated yet")
a = malloc(1000, lib.ACL_MEM_MALLOC_NORMAL_ONLY)
eq(mem_info()[0], free0 - 1056, "after aclrtMalloc(1000): 1024 + 32 bytes")
b = malloc(1000, lib.ACL_MEM_MALLOC_NORMAL_ONLY, lib.aclrtMallocAlign32)
eq(mem_info()[0], free0 - 1056 - 1024, "after aclrtMallocAlign32(1000): 1024 bytes")
c = malloc((1 << 20) + 1, lib.ACL_MEM_MALLOC_HUGE_FIRST)
d = malloc(100, lib.ACL_MEM_MALLOC_HUGE_ONLY)
eq(mem_info()[0], free0 - 1056 - 1024 - 2 * (2 << 20), "two blocks in huge pages")
eq(mem_info()[1], total, "the total does not change")
for p in (a, b, c, d):
    eq(lib.aclrtFree(p), 0, "aclrtFree")
eq(mem_info()[0], free0, "after the frees")

# more than is free
p = ffi.new("void **")
eq(lib.aclrtMalloc(p, total, 0), {ACL_ERROR_RT_MEMORY_ALLOCATION}, "aclrtMalloc of the whole memory plus padding")
assert "out of device memory" in msg()
eq(mem_info()[0], free0, "a refused allocation takes nothing")

# the DDR kinds: memory these SoCs do not have
for attr in (lib.ACL_DDR_MEM, lib.ACL_DDR_MEM_HUGE, lib.ACL_DDR_MEM_NORMAL):
    eq(mem_info(attr), (0, 0), f"attr {{attr}}")
for attr in (lib.ACL_HBM_MEM_HUGE, lib.ACL_HBM_MEM_NORMAL, lib.ACL_MEM_NORMAL, lib.ACL_MEM_HUGE):
    eq(mem_info(attr), (free0, total), f"attr {{attr}}")
n = ffi.new("size_t *")
eq(lib.aclrtGetMemInfo(lib.ACL_HBM_MEM, ffi.NULL, n), {ACL_ERROR_INVALID_PARAM}, "NULL free")
eq(lib.aclrtGetMemInfo(lib.ACL_HBM_MEM, n, ffi.NULL), {ACL_ERROR_INVALID_PARAM}, "NULL total")
eq(lib.aclrtGetMemInfo(18, n, n), {ACL_ERROR_INVALID_PARAM}, "attr 18")

# other SoCs
with convtbc_py.soc_profile("Ascend910A"):
    eq(mem_info()[1], 32 * {GIB}, "Ascend910A device memory")
with convtbc_py.soc_profile("Ascend950"):
    eq(mem_info()[1], 128 * {GIB}, "Ascend950 device memory")
    a = malloc(1000, lib.ACL_MEM_MALLOC_NORMAL_ONLY)
    eq(mem_info()[0], 128 * {GIB} - 1024, "Ascend950 rounds to 32 bytes without padding")
    eq(lib.aclrtFree(a), 0, "aclrtFree")
print("ok")
""")


def test_get_mem_info_needs_a_device():
    p = run_python("""
import convtbc_py
ffi, lib = convtbc_py.ffi, convtbc_py.lib
n = ffi.new("size_t *")
assert lib.aclrtGetMemInfo(1, n, n) == 100001, "before aclInit"
assert lib.aclInit(ffi.NULL) == 0
assert lib.aclrtGetMemInfo(1, n, n) not in (0, 100001), "no device set"
print("ok")
""")
    assert "ok" in p.stdout


# ---- aclrtPointerGetAttributes -------------------------------------------------------------------


def test_pointer_attributes():
    run(f"""
attrs = ffi.new("aclrtPtrAttributes *")
def where(p):
    eq(lib.aclrtPointerGetAttributes(p, attrs), 0, "aclrtPointerGetAttributes")
    assert list(attrs.rsv) == [0, 0, 0, 0]
    return int(attrs.location.type), int(attrs.pageSize)
DEVICE, HOST, UNREGISTERED = (lib.ACL_MEM_LOCATION_TYPE_DEVICE, lib.ACL_MEM_LOCATION_TYPE_HOST,
                              lib.ACL_MEM_LOCATION_TYPE_UNREGISTERED)
normal = malloc(64, lib.ACL_MEM_MALLOC_NORMAL_ONLY)
eq(where(normal), (DEVICE, 4096), "normal pages")
eq(where(ffi.cast("char *", normal) + 63), (DEVICE, 4096), "inside a block")
eq(where(malloc(64, lib.ACL_MEM_MALLOC_HUGE_ONLY)), (DEVICE, 2 << 20), "HUGE_ONLY")
eq(where(malloc(64, lib.ACL_MEM_MALLOC_HUGE_FIRST)), (DEVICE, 4096), "HUGE_FIRST up to 1 MiB: normal pages")
eq(where(malloc(2 << 20, lib.ACL_MEM_MALLOC_HUGE_FIRST)), (DEVICE, 2 << 20), "HUGE_FIRST above 1 MiB")
eq(attrs.location.id, 0, "device id")
hp = ffi.new("void **")
eq(lib.aclrtMallocHost(hp, 64), 0, "aclrtMallocHost")
eq(where(hp[0])[0], HOST, "aclrtMallocHost memory")
plain = np.zeros(16, np.uint8)
eq(where(ptr(plain))[0], UNREGISTERED, "numpy memory")
eq(lib.aclrtFree(normal), 0, "aclrtFree")
eq(where(normal)[0], UNREGISTERED, "freed device memory")
eq(lib.aclrtPointerGetAttributes(ffi.NULL, attrs), {ACL_ERROR_INVALID_PARAM}, "NULL ptr")
eq(lib.aclrtPointerGetAttributes(hp[0], ffi.NULL), {ACL_ERROR_INVALID_PARAM}, "NULL attributes")
print("ok")
""")


# ---- the guard ------------------------------------------------------------------------------------


def died_of_fault(proc):
    return proc.returncode in (-signal.SIGSEGV, -signal.SIGBUS)


def accessed(proc):
    """The ACCESS line a child printed before its bad access: (address, size)."""
    m = re.search(r"ACCESS (0x[0-9a-f]+) (\d+)", proc.stdout)
    assert m, proc.stdout + proc.stderr
    return m.group(1), int(m.group(2))


def test_guard_context_manager_and_new_blocks():
    """Inside device_memory_guard(False) the host may touch device memory
    (the bytes land in the device block); on exit the guard is back, also for
    blocks allocated inside, and the next host access ends the process."""
    proc = run("""
from convtbc_py import device_memory_guard
dev = malloc(16)
upload(dev, np.zeros(16, np.uint8))
with device_memory_guard(False):
    view = ffi.cast("uint8_t *", dev)
    view[3] = 42
    eq(view[3], 42, "host access inside device_memory_guard(False)")
    late = malloc(32)
    ffi.cast("uint8_t *", late)[0] = 1
eq(int(download(dev, 16)[3]), 42, "the host store reached the device block")
eq(lib.convtbcSetDeviceMemoryGuard(1), 1, "the context manager restored the guard")
print("ACCESS", hex(address(late)), 32, flush=True)
ffi.cast("uint8_t *", late)[5]
print("NOT REACHED", flush=True)
""", check=False)
    assert died_of_fault(proc), f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "NOT REACHED" not in proc.stdout
    base, size = accessed(proc)
    assert "device memory" in proc.stderr and base in proc.stderr, proc.stderr
    assert f"offset 5 into the aclrtMalloc allocation at {base} of {size} bytes" in proc.stderr, proc.stderr


def test_guard_names_use_after_free():
    proc = run("""
dev = malloc(48, 0, lib.aclrtMallocAlign32)
eq(lib.aclrtFree(dev), 0, "aclrtFree")
print("ACCESS", hex(address(dev)), 48, flush=True)
ffi.cast("uint8_t *", dev)[0] = 1
print("NOT REACHED", flush=True)
""", check=False)
    assert died_of_fault(proc), f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    base, size = accessed(proc)
    assert f"aclrtMallocAlign32 allocation at {base} of {size} bytes" in proc.stderr, proc.stderr
    assert "aclrtFree already released (use after free)" in proc.stderr, proc.stderr


def test_guard_off_by_environment():
    run("""
eq(lib.convtbcSetDeviceMemoryGuard(0), 0, "the environment turned the guard off")
dev = malloc(16)
view = ffi.cast("uint8_t *", dev)
view[0] = 9
eq(int(download(dev, 16)[0]), 9, "host store with the guard off")
eq(lib.aclrtFree(dev), 0, "aclrtFree")
print("ok")
""", env={"CONVTBC_GUARD_DEVICE_MEMORY": "0"})


def test_library_still_uses_guarded_memory():
    """The library's own work on guarded blocks goes through their second
    view: the op, queued and at once, copies of every kind and fills."""
    run("""
import threading
from reference import conv_tbc_backward_ref, assert_close
rng = np.random.default_rng(3)
go, x, w = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((4, 2, 3), (5, 2, 2), (2, 2, 3)))
def on_device(a):
    dev = malloc(a.nbytes)
    upload(dev, np.ascontiguousarray(a).view(np.uint8).reshape(-1))
    return dev
def tensor(dev, shape):
    dims = ffi.new("int64_t[]", shape)
    strides = ffi.new("int64_t[]", [int(np.prod(shape[i + 1:])) for i in range(len(shape))])
    return lib.aclCreateTensor(dims, len(shape), lib.ACL_FLOAT, strides, 0, lib.ACL_FORMAT_ND, dims, len(shape), dev)
devs = [on_device(a) for a in (go, x, w, np.zeros(3, np.float32))]
outs = [malloc(n * 4) for n in (x.size, w.size, 3)]
ts = [tensor(d, s) for d, s in zip(devs + outs, [go.shape, x.shape, w.shape, (3,), x.shape, w.shape, (3,)])]
def phase1():
    size, ex = ffi.new("uint64_t *"), ffi.new("aclOpExecutor **")
    eq(lib.aclnnConvTbcBackwardGetWorkspaceSize(*ts[:4], 0, 0, *ts[4:], size, ex), 0, "phase 1")
    return size[0], ex[0], malloc(max(size[0], 1))
def check_results():
    got = [np.frombuffer(download(o, n * 4).tobytes(), np.float32) for o, n in zip(outs, (x.size, w.size, 3))]
    for g, r in zip(got, conv_tbc_backward_ref(go, x, w, 0)):
        assert_close(g.reshape(r.shape), r)
size, ex, ws = phase1()
eq(lib.aclnnConvTbcBackward(ws, size, ex, ffi.NULL), 0, "phase 2, queued on the default stream")
eq(lib.aclrtSynchronizeStream(ffi.NULL), 0, "synchronize")
check_results()
for o, n in zip(outs, (x.size, w.size, 3)):
    eq(lib.aclrtMemset(o, n * 4, 0, n * 4), 0, "clear the outputs")
size, ex, ws = phase1()
statuses = []
t = threading.Thread(target=lambda: statuses.append(lib.aclnnConvTbcBackward(ws, size, ex, ffi.NULL)))
t.start(); t.join()                                    # a thread with no context: the op runs at once
eq(statuses, [0], "phase 2 on a thread with no context")
check_results()
a, b = malloc(64), malloc(64)
eq(lib.aclrtMemset(a, 64, 4, 64), 0, "memset")
eq(lib.aclrtMemcpy(b, 64, a, 64, D2D), 0, "D2D")
eq(lib.aclrtMemcpy(a, 64, b, 64, DEFAULT), 0, "DEFAULT between device blocks")
assert (download(a, 64) == 4).all()
print("ok")
""")
