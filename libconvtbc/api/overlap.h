/*
 * Whether two strided views share a byte: an op refuses outputs that
 * overlap an input or another output, since it would read what it has
 * already written (or write one element twice, in a thread-dependent
 * order). The decision follows the views' elements, not their bounding
 * ranges: two views that interleave without touching the same byte (the
 * even and the odd elements of one buffer) do not overlap.
 */
#ifndef CONVTBC_API_OVERLAP_H
#define CONVTBC_API_OVERLAP_H

#include <stdint.h>

/* A view as bytes. Its elements lie at storage + offset + sum(i[d] *
 * strides[d] * item), 0 <= i[d] < dims[d], each `item` bytes long; the
 * first is the lowest (strides are >= 0) and `span` counts the bytes from
 * it to the end of the highest, 0 for a view without elements. The caller
 * has checked that offset + span fits in int64_t. */
typedef struct {
    uintptr_t storage;
    uint64_t offset;
    uint64_t span;
    int64_t item;
    uint64_t rank;
    const int64_t *dims;
    const int64_t *strides;
} ctbc_byte_view;

typedef enum {
    CTBC_DISJOINT,  /* no byte in common */
    CTBC_OVERLAP,   /* a byte in common */
    CTBC_UNDECIDED, /* the exact test gave up within its work bound */
} ctbc_overlap;

/* Empty views overlap nothing. Costs two comparisons unless the byte
 * ranges of the views intersect; the exact test after that is bounded. */
ctbc_overlap ctbc_views_overlap(const ctbc_byte_view *a, const ctbc_byte_view *b);

#endif /* CONVTBC_API_OVERLAP_H */
