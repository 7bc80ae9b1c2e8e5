/*
 * Byte counts from caller-given element counts. A count comes straight from
 * the caller (uint64_t), so every multiplication and addition is checked:
 * a wrapped size would allocate a small block and then copy past it.
 */
#ifndef CONVTBC_API_SIZES_H
#define CONVTBC_API_SIZES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* header + count * item, in *bytes; false when that does not fit in size_t
 * (or exceeds PTRDIFF_MAX, which no allocation can reach). */
static inline bool ctbc_bytes_for(uint64_t count, size_t item, size_t header, size_t *bytes)
{
    uint64_t body, total;
    if (__builtin_mul_overflow(count, (uint64_t)item, &body) ||
        __builtin_add_overflow(body, (uint64_t)header, &total) || total > (uint64_t)PTRDIFF_MAX)
        return false;
    *bytes = (size_t)total;
    return true;
}

#endif /* CONVTBC_API_SIZES_H */
