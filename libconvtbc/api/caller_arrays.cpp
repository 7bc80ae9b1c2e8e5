// Arrays handed to the caller (aclGetViewShape and friends) are released by
// CANN programs with delete[]; allocating them with new[] keeps that legal
// (and quiet under AddressSanitizer's alloc-dealloc-mismatch check).
#include <cstdint>
#include <new>

extern "C" int64_t *ctbc_new_int64_array(uint64_t count)
{
    return new (std::nothrow) int64_t[count ? count : 1];
}
