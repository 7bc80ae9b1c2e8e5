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
/* Copies out the entry whose [handle, handle + size) holds `address`. */
bool ctbc_registry_find_containing(ctbc_registry *registry, const void *address, ctbc_registry_entry *found);
/* Calls `visit` on each entry with the registry locked (so `visit` must not
 * use this registry). */
void ctbc_registry_for_each(ctbc_registry *registry, void (*visit)(const ctbc_registry_entry *entry, void *arg),
                            void *arg);
/* Removes every entry, calling `release` (may be NULL) on each handle. */
void ctbc_registry_clear(ctbc_registry *registry, void (*release)(const void *handle));

#endif /* CONVTBC_API_REGISTRY_H */
