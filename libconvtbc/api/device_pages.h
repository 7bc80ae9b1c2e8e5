/*
 * Device memory the host cannot touch. A guarded block is one set of pages
 * mapped at two addresses: the caller's, which has no access while the guard
 * is on (on the NPU the host cannot load or store device memory), and a
 * read-write view that only the library uses for its kernels, copies, fills
 * and poison. A host load or store through the caller's address faults; the
 * fault handler names the allocation on stderr and ends the process, as the
 * same access ends it on the NPU. Faults anywhere else go on to the handler
 * that was installed before (the default action, AddressSanitizer's, ...).
 */
#ifndef CONVTBC_API_DEVICE_PAGES_H
#define CONVTBC_API_DEVICE_PAGES_H

#include <stdbool.h>
#include <stddef.h>

/* What the fault handler knows of one block (opaque here). */
typedef struct ctbc_fault_record ctbc_fault_record;

typedef struct {
    char *device;              /* the address the caller holds */
    char *host;                /* the same bytes, read-write, for the library */
    size_t mapped;             /* bytes mapped at each address: whole pages */
    ctbc_fault_record *record;
} ctbc_pages;

/* Maps `size` (> 0) zero-filled bytes twice, guards the caller's address or
 * not, and tells the fault handler about the block (`allocator` names the
 * call that made it, e.g. "aclrtMalloc"; a string literal). false when the
 * system refuses the mappings. */
bool ctbc_pages_map(size_t size, const char *allocator, bool guarded, ctbc_pages *out);

/* Makes the caller's address inaccessible (guarded) or read-write. */
void ctbc_pages_protect(const ctbc_pages *pages, bool guarded);

/* The block was released by `releaser` but stays mapped (quarantined): a
 * later fault in it is reported as a use after free. */
void ctbc_pages_mark_freed(const ctbc_pages *pages, const char *releaser);

/* Unmaps both addresses and forgets the block. */
void ctbc_pages_unmap(const ctbc_pages *pages);

/* In a fork()ed child, on its only thread: forgets every block (the child
 * has none of the parent's pages, and their addresses may be mapped again)
 * and makes the lock new. */
void ctbc_pages_after_fork(void);

#endif /* CONVTBC_API_DEVICE_PAGES_H */
