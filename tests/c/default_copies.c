/*
 * ACL_MEMCPY_DEFAULT, which CANN resolves by where each pointer lies: a
 * copy whose explicit kind would be refused (too many bytes for a device
 * block, a freed block, an address past a block's end) must be refused
 * with the same code when the kind is DEFAULT, by aclrtMemcpy and
 * aclrtMemcpyAsync, and nothing may be written; a 2-D copy takes no DEFAULT
 * at all (CANN: HOST_TO_DEVICE or DEVICE_TO_HOST only). DEFAULT copies of
 * every legal direction still work, host to host included.
 *
 * The checks run twice: with guarded blocks (the default: a stray host
 * access faults), then, re-executing itself with
 * CONVTBC_GUARD_DEVICE_MEMORY=0, with plain heap blocks, where a copy that
 * slipped through would write past a heap block (AddressSanitizer's
 * heap-buffer-overflow in the sanitizer run) instead of faulting.
 * Prints "default_copies: OK" when every check passes.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <unistd.h>

#include "test_common.h"

enum { N = 512, SMALL = 16 };

#define OK(x) EXPECT_EQ((x), 0, #x)

static const char *mode;

static void *device(size_t bytes)
{
    void *p = NULL;
    OK(aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    return p;
}

static bool all_bytes(const unsigned char *a, size_t n, unsigned char value)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != value)
            return false;
    return true;
}

/* The 16 bytes of `small`, which every refused copy must leave 0x5A. */
static void expect_small_untouched(void *small, const char *after)
{
    unsigned char bytes[SMALL];
    memset(bytes, 0, sizeof bytes);
    OK(aclrtMemcpy(bytes, SMALL, small, SMALL, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(all_bytes(bytes, SMALL, 0x5A), "[%s] %s changed the 16-byte block", mode, after);
}

typedef struct {
    const char *what;
    void *dst;
    const void *src;
    aclrtMemcpyKind kind; /* the explicit kind that names the same misuse */
} misuse;

static void test_refused(void *small, void *freed, void *big, unsigned char *host, unsigned char *back,
                         aclrtStream stream)
{
    const misuse cases[] = {
        {"512 bytes into a 16-byte block", small, host, ACL_MEMCPY_HOST_TO_DEVICE},
        {"512 bytes into a freed block", freed, host, ACL_MEMCPY_HOST_TO_DEVICE},
        {"512 bytes from a live block into a freed one", freed, big, ACL_MEMCPY_DEVICE_TO_DEVICE},
        {"512 bytes out of a 16-byte block", back, small, ACL_MEMCPY_DEVICE_TO_HOST},
        {"512 bytes out of a freed block", back, freed, ACL_MEMCPY_DEVICE_TO_HOST},
        {"512 bytes to just past a 16-byte block's end", (char *)small + SMALL, host, ACL_MEMCPY_HOST_TO_DEVICE},
        {"host-to-host into a freed block", freed, host, ACL_MEMCPY_HOST_TO_HOST},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const misuse *c = &cases[i];
        memset(back, 0xEE, N);
        aclError explicit_kind = aclrtMemcpy(c->dst, N, c->src, N, c->kind);
        EXPECT(explicit_kind == ACL_ERROR_RT_PARAM_INVALID, "[%s] %s with kind %d: got %d, want 107000 (%s)", mode,
               c->what, (int)c->kind, (int)explicit_kind, recent_msg());
        aclError by_address = aclrtMemcpy(c->dst, N, c->src, N, ACL_MEMCPY_DEFAULT);
        const char *why = recent_msg();
        EXPECT(by_address == explicit_kind, "[%s] aclrtMemcpy DEFAULT, %s: got %d, as the explicit kind %d", mode,
               c->what, (int)by_address, (int)explicit_kind);
        EXPECT(strstr(why, "aclrtMemcpy") && strstr(why, "ACL_MEMCPY_DEFAULT"),
               "[%s] %s: the message names the call and the kind: %s", mode, c->what, why);
        aclError queued = aclrtMemcpyAsync(c->dst, N, c->src, N, ACL_MEMCPY_DEFAULT, stream);
        EXPECT(queued == explicit_kind, "[%s] aclrtMemcpyAsync DEFAULT, %s: got %d (%s)", mode, c->what,
               (int)queued, recent_msg());
        queued = aclrtMemcpyAsync(c->dst, N, c->src, N, ACL_MEMCPY_DEFAULT, NULL);
        EXPECT(queued == explicit_kind, "[%s] aclrtMemcpyAsync DEFAULT on the default stream, %s: got %d (%s)", mode,
               c->what, (int)queued, recent_msg());
        OK(aclrtSynchronizeStream(stream));
        OK(aclrtSynchronizeStream(NULL));
        EXPECT(all_bytes(back, N, 0xEE), "[%s] %s: the host buffer was written", mode, c->what);
    }
    expect_small_untouched(small, "a refused 1-D copy");

    /* 2-D: DEFAULT is not a 2-D kind; the same misuse with a 2-D kind gives
     * 107000 as in 1-D. */
    EXPECT_EQ(aclrtMemcpy2d(small, N, host, N, N, 1, ACL_MEMCPY_DEFAULT), ACL_ERROR_INVALID_PARAM,
              "aclrtMemcpy2d DEFAULT into a 16-byte block");
    EXPECT_EQ(aclrtMemcpy2d(freed, 64, host, 64, 64, 8, ACL_MEMCPY_DEFAULT), ACL_ERROR_INVALID_PARAM,
              "aclrtMemcpy2d DEFAULT into a freed block");
    EXPECT_EQ(aclrtMemcpy2d(back, 64, freed, 64, 64, 8, ACL_MEMCPY_DEFAULT), ACL_ERROR_INVALID_PARAM,
              "aclrtMemcpy2d DEFAULT out of a freed block");
    EXPECT_EQ(aclrtMemcpy2dAsync(small, N, host, N, N, 1, ACL_MEMCPY_DEFAULT, stream), ACL_ERROR_INVALID_PARAM,
              "aclrtMemcpy2dAsync DEFAULT into a 16-byte block");
    EXPECT_EQ(aclrtMemcpy2dAsync(back, 64, freed, 64, 64, 8, ACL_MEMCPY_DEFAULT, stream), ACL_ERROR_INVALID_PARAM,
              "aclrtMemcpy2dAsync DEFAULT out of a freed block");
    EXPECT_EQ(aclrtMemcpy2d(small, 64, host, 64, 64, 8, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtMemcpy2d HOST_TO_DEVICE, 8 rows of 64 into a 16-byte block");
    EXPECT_EQ(aclrtMemcpy2d(freed, 64, host, 64, 64, 8, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID,
              "aclrtMemcpy2d HOST_TO_DEVICE into a freed block");
    EXPECT_EQ(aclrtMemcpy2dAsync(back, 64, freed, 64, 64, 8, ACL_MEMCPY_DEVICE_TO_HOST, stream),
              ACL_ERROR_RT_PARAM_INVALID, "aclrtMemcpy2dAsync DEVICE_TO_HOST out of a freed block");
    recent_msg();
    OK(aclrtSynchronizeStream(stream));
    EXPECT(all_bytes(back, N, 0xEE), "[%s] a refused 2-D copy wrote the host buffer", mode);
    expect_small_untouched(small, "a refused 2-D copy");
}

static void test_legal_directions(void *big, unsigned char *host, unsigned char *back, aclrtStream stream)
{
    /* Host to host, as CANN infers it from two host pointers. */
    memset(back, 0, N);
    OK(aclrtMemcpy(back, N, host, N, ACL_MEMCPY_DEFAULT));
    EXPECT(memcmp(back, host, N) == 0, "[%s] DEFAULT host to host copies", mode);
    memset(back, 0, N);
    OK(aclrtMemcpyAsync(back, N, host, N, ACL_MEMCPY_DEFAULT, stream));
    OK(aclrtSynchronizeStream(stream));
    EXPECT(memcmp(back, host, N) == 0, "[%s] queued DEFAULT host to host copies", mode);

    /* Host to device, device to device, device to host. */
    void *other = device(N);
    OK(aclrtMemcpy(big, N, host, N, ACL_MEMCPY_DEFAULT));
    OK(aclrtMemcpyAsync(other, N, big, N, ACL_MEMCPY_DEFAULT, stream));
    memset(back, 0, N);
    OK(aclrtMemcpyAsync(back, N, other, N, ACL_MEMCPY_DEFAULT, stream));
    OK(aclrtSynchronizeStream(stream));
    EXPECT(memcmp(back, host, N) == 0, "[%s] DEFAULT host -> device -> device -> host", mode);

    /* aclrtMallocHost memory is host memory. */
    void *pinned = NULL;
    OK(aclrtMallocHost(&pinned, N));
    OK(aclrtMemcpy(pinned, N, other, N, ACL_MEMCPY_DEFAULT));
    EXPECT(memcmp(pinned, host, N) == 0, "[%s] DEFAULT device -> aclrtMallocHost memory", mode);
    OK(aclrtFreeHost(pinned));
    OK(aclrtFree(other));
}

static void run_checks(void)
{
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    aclrtStream stream = NULL;
    OK(aclrtCreateStream(&stream));
    unsigned char host[N], back[N];
    for (int i = 0; i < N; i++)
        host[i] = (unsigned char)(i * 7 + 1);
    void *small = device(SMALL), *big = device(N), *freed = device(SMALL);
    OK(aclrtMemset(small, SMALL, 0x5A, SMALL));
    OK(aclrtFree(freed));

    test_refused(small, freed, big, host, back, stream);
    test_legal_directions(big, host, back, stream);

    OK(aclrtFree(small));
    OK(aclrtFree(big));
    OK(aclrtDestroyStream(stream));
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *guard = getenv("CONVTBC_GUARD_DEVICE_MEMORY");
    bool plain = guard && strcmp(guard, "0") == 0;
    mode = plain ? "plain blocks" : "guarded blocks";
    run_checks();
    if (plain || g_failures)
        return finish("default_copies");
    printf("default_copies: guarded blocks OK; again with plain blocks\n");
    fflush(stdout);
    setenv("CONVTBC_GUARD_DEVICE_MEMORY", "0", 1);
    execv("/proc/self/exe", argv);
    perror("execv /proc/self/exe");
    return 1;
}
