/*
 * A thread-safe set of live handles (executors, contexts, streams, events,
 * allocations), each with a size. Handles the caller gives back are looked
 * up here before they are used, so that a destroyed, consumed or made-up
 * handle gets an error code instead of a crash.
 */
#ifndef CONVTBC_API_REGISTRY_H
#define CONVTBC_API_REGISTRY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const void *handle;
    size_t size;
} ctbc_registry_entry;

typedef struct {
    pthread_mutex_t lock;
    ctbc_registry_entry *entries;
    size_t count, capacity;
} ctbc_registry;

#define CTBC_REGISTRY_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0}

/* false when memory ran out. */
bool ctbc_registry_add(ctbc_registry *registry, const void *handle, size_t size);
/* false when `handle` was not registered. */
bool ctbc_registry_remove(ctbc_registry *registry, const void *handle);
bool ctbc_registry_contains(ctbc_registry *registry, const void *handle);
/* When `handle` is registered, calls visit(handle, arg) while still holding
 * the registry's lock (so a concurrent remove cannot come between the check
 * and what visit does, e.g. taking a reference) and returns true. */
bool ctbc_registry_visit(ctbc_registry *registry, const void *handle, void (*visit)(const void *handle, void *arg),
                         void *arg);
/* Copies out the entry whose [handle, handle + size) holds `address`. */
bool ctbc_registry_find_containing(ctbc_registry *registry, const void *address, ctbc_registry_entry *found);
/* A malloc'd copy of the entries (free it); NULL with *count 0 when empty or
 * out of memory. */
ctbc_registry_entry *ctbc_registry_snapshot(ctbc_registry *registry, size_t *count);
/* Removes every entry, calling `release` (may be NULL) on each handle. */
void ctbc_registry_clear(ctbc_registry *registry, void (*release)(const void *handle));
/* In a fork()ed child, on its only thread: the lock made new (a thread of
 * the parent may have held it, and that thread does not exist here), and
 * the entries kept or forgotten. Forgotten handles are not released: what
 * they name belongs to the parent's threads. */
void ctbc_registry_after_fork(ctbc_registry *registry, bool keep);

#endif /* CONVTBC_API_REGISTRY_H */
