/*
 * CANN's memory calls from C, as a host program makes them: the allocation
 * variants, 2-D copies with pitches, fills of device and of aclrtMallocHost
 * memory, aclrtGetMemInfo before and after allocations, pointer attributes,
 * the cache calls, the frees that synchronise the device first, and the
 * convtbc switch that lets the host touch device memory for a while. Every
 * access to device memory goes through the runtime, except inside the
 * switch. Run with memory checking on (the default); prints "device_memory:
 * OK" when every check passes. Also built with ASan+UBSan and TSan.
 */
#include "test_common.h"

#include "convtbc/convtbc_ext.h"

static void *device(size_t bytes, aclrtMemMallocPolicy policy)
{
    void *p = NULL;
    EXPECT_EQ(aclrtMalloc(&p, bytes, policy), ACL_SUCCESS, "aclrtMalloc");
    return p;
}

static size_t free_memory(void)
{
    size_t free_bytes = 0, total = 0;
    EXPECT_EQ(aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total), ACL_SUCCESS, "aclrtGetMemInfo");
    return free_bytes;
}

static void test_mem_info(void)
{
    size_t before = free_memory(), free_bytes = 1, total = 0;
    EXPECT_EQ(aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total), ACL_SUCCESS, "aclrtGetMemInfo");
    EXPECT(total == ((size_t)64 << 30), "Ascend910B1 total %zu", total);
    void *a = device(1000, ACL_MEM_MALLOC_NORMAL_ONLY), *b = NULL;
    EXPECT(free_memory() == before - 1056, "aclrtMalloc(1000) takes 1024 + 32 bytes");
    EXPECT_EQ(aclrtMallocAlign32(&b, 1000, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS, "aclrtMallocAlign32");
    EXPECT(free_memory() == before - 1056 - 1024, "aclrtMallocAlign32(1000) takes 1024 bytes");
    EXPECT_EQ(aclrtFree(a), ACL_SUCCESS, "aclrtFree");
    EXPECT_EQ(aclrtFree(b), ACL_SUCCESS, "aclrtFree");
    EXPECT(free_memory() == before, "the frees give the bytes back");
    EXPECT_EQ(aclrtGetMemInfo(ACL_DDR_MEM, &free_bytes, &total), ACL_SUCCESS, "aclrtGetMemInfo DDR");
    EXPECT(free_bytes == 0 && total == 0, "no device DDR");
    EXPECT_EQ(aclrtGetMemInfo(ACL_HBM_MEM, NULL, &total), ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo NULL");
    recent_msg();
}

static void test_variants(void)
{
    void *p = NULL;
    aclrtMallocAttribute attrs[1];
    memset(attrs, 0, sizeof attrs);
    attrs[0].attr = ACL_RT_MEM_ATTR_DEVICE_ID;
    attrs[0].value.deviceId = 0;
    aclrtMallocConfig cfg = {attrs, 1};
    EXPECT_EQ(aclrtMallocWithCfg(&p, 256, ACL_MEM_MALLOC_HUGE_FIRST, &cfg), ACL_SUCCESS, "aclrtMallocWithCfg");
    EXPECT(((uintptr_t)p & 63) == 0, "aclrtMallocWithCfg 64-byte aligned");
    EXPECT_EQ(aclrtMemset(p, 256, 0x11, 256), ACL_SUCCESS, "aclrtMemset");
    EXPECT_EQ(aclrtMemFlush(p, 256), ACL_SUCCESS, "aclrtMemFlush");
    EXPECT_EQ(aclrtMemInvalidate(p, 256), ACL_SUCCESS, "aclrtMemInvalidate");
    EXPECT_EQ(aclrtMemFlush(p, 0), ACL_ERROR_INVALID_PARAM, "aclrtMemFlush size 0");
    aclrtPtrAttributes where;
    EXPECT_EQ(aclrtPointerGetAttributes((char *)p + 100, &where), ACL_SUCCESS, "aclrtPointerGetAttributes");
    EXPECT(where.location.type == ACL_MEM_LOCATION_TYPE_DEVICE, "device location");
    EXPECT_EQ(aclrtFree(p), ACL_SUCCESS, "aclrtFree");
    cfg.attrs = NULL;
    EXPECT_EQ(aclrtMallocWithCfg(&p, 256, ACL_MEM_MALLOC_HUGE_FIRST, &cfg), ACL_ERROR_INVALID_PARAM,
              "aclrtMallocWithCfg attrs NULL");

    EXPECT_EQ(aclrtMallocCached(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS, "aclrtMallocCached");
    EXPECT_EQ(aclrtFree(p), ACL_SUCCESS, "aclrtFree");

    /* host memory from ACL is the host's */
    unsigned char *host = NULL;
    EXPECT_EQ(aclrtMallocHost((void **)&host, 64), ACL_SUCCESS, "aclrtMallocHost");
    if (host) {
        host[0] = 1;
        EXPECT_EQ(aclrtMemset(host, 64, 0x22, 64), ACL_SUCCESS, "aclrtMemset of aclrtMallocHost memory");
        EXPECT(host[0] == 0x22 && host[63] == 0x22, "filled host memory");
        EXPECT_EQ(aclrtPointerGetAttributes(host, &where), ACL_SUCCESS, "aclrtPointerGetAttributes host");
        EXPECT(where.location.type == ACL_MEM_LOCATION_TYPE_HOST, "host location");
        EXPECT_EQ(aclrtFreeHost(host), ACL_SUCCESS, "aclrtFreeHost");
    }
    EXPECT_EQ(aclrtMallocHostWithCfg((void **)&host, 32, NULL), ACL_SUCCESS, "aclrtMallocHostWithCfg");
    EXPECT_EQ(aclrtFreeHostWithDevSync(host), ACL_SUCCESS, "aclrtFreeHostWithDevSync");
    recent_msg();
}

static void test_copies_2d(aclrtStream stream)
{
    enum { W = 6, H = 5, SP = 8, DP = 16 };
    unsigned char src[SP * H], back[H * 10];
    for (int i = 0; i < SP * H; i++)
        src[i] = (unsigned char)(i + 1);
    void *dev = device(DP * H, ACL_MEM_MALLOC_HUGE_FIRST);
    EXPECT_EQ(aclrtMemset(dev, DP * H, 0xEE, DP * H), ACL_SUCCESS, "aclrtMemset");
    EXPECT_EQ(aclrtMemcpy2d(dev, DP, src, SP, W, H, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS, "aclrtMemcpy2d H2D");
    memset(back, 0xCC, sizeof back);
    EXPECT_EQ(aclrtMemcpy2d(back, 10, dev, DP, W, H, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS, "aclrtMemcpy2d D2H");
    int right = 1;
    for (int r = 0; r < H; r++)
        for (int c = 0; c < 10; c++)
            right &= back[r * 10 + c] == (c < W ? src[r * SP + c] : 0xCC);
    EXPECT(right, "2-D round trip with pitches");

    /* queued: the rows land when the stream gets to them */
    void *dev2 = device(DP * H, ACL_MEM_MALLOC_HUGE_FIRST);
    EXPECT_EQ(aclrtMemcpy2dAsync(dev2, DP, dev, DP, W, H, ACL_MEMCPY_DEVICE_TO_DEVICE, stream), ACL_SUCCESS,
              "aclrtMemcpy2dAsync D2D");
    EXPECT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS, "aclrtSynchronizeStream");
    unsigned char row[DP];
    EXPECT_EQ(aclrtMemcpy(row, DP, (char *)dev2 + (H - 1) * DP, DP, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS,
              "aclrtMemcpy");
    EXPECT(row[0] == src[(H - 1) * SP] && row[W - 1] == src[(H - 1) * SP + W - 1], "last row copied");

    EXPECT_EQ(aclrtMemcpy2d(dev, DP, src, SP, SP + 1, H, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM,
              "width > spitch");
    EXPECT_EQ(aclrtMemcpy2d(back, 10, src, SP, W, H, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_INVALID_PARAM,
              "2-D host to host");
    EXPECT_EQ(aclrtMemcpy2d(dev, DP, src, SP, W, H + 1, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID,
              "rows past the end of the block");
    EXPECT_EQ(aclrtFree(dev), ACL_SUCCESS, "aclrtFree");
    EXPECT_EQ(aclrtFree(dev2), ACL_SUCCESS, "aclrtFree");
    recent_msg();
}

static void test_free_with_dev_sync(aclrtStream stream)
{
    void *dev = device(1 << 16, ACL_MEM_MALLOC_HUGE_FIRST);
    EXPECT_EQ(aclrtMemsetAsync(dev, 1 << 16, 3, 1 << 16, stream), ACL_SUCCESS, "aclrtMemsetAsync");
    EXPECT_EQ(aclrtFreeWithDevSync(dev), ACL_SUCCESS, "aclrtFreeWithDevSync");
    EXPECT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS, "the fill ran before the free");
    EXPECT_EQ(aclrtFreeWithDevSync(dev), ACL_ERROR_INVALID_PARAM, "aclrtFreeWithDevSync twice");
    recent_msg();
}

static void test_guard_switch(void)
{
    unsigned char *dev = device(64, ACL_MEM_MALLOC_HUGE_FIRST), byte = 0;
    EXPECT_EQ(aclrtMemset(dev, 64, 0, 64), ACL_SUCCESS, "aclrtMemset");
    EXPECT_EQ(convtbcSetDeviceMemoryGuard(0), 1, "the guard is on by default");
    dev[10] = 99; /* allowed while the guard is off */
    EXPECT_EQ(convtbcSetDeviceMemoryGuard(1), 0, "the guard was off");
    EXPECT_EQ(aclrtMemcpy(&byte, 1, dev + 10, 1, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS, "aclrtMemcpy");
    EXPECT(byte == 99, "the host store reached the device block");
    EXPECT_EQ(aclrtFree(dev), ACL_SUCCESS, "aclrtFree");
}

int main(void)
{
    aclrtStream stream = NULL;
    EXPECT_EQ(aclInit(NULL), ACL_SUCCESS, "aclInit");
    EXPECT_EQ(aclrtSetDevice(0), ACL_SUCCESS, "aclrtSetDevice");
    EXPECT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS, "aclrtCreateStream");
    test_mem_info();
    test_variants();
    test_copies_2d(stream);
    test_free_with_dev_sync(stream);
    test_guard_switch();
    EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS, "aclrtDestroyStream");
    EXPECT_EQ(aclrtResetDevice(0), ACL_SUCCESS, "aclrtResetDevice");
    EXPECT_EQ(aclFinalize(), ACL_SUCCESS, "aclFinalize");
    return finish("device_memory");
}
