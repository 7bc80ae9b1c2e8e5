#include "api/registry.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A plain array: live handles are few (tens), so a scan is cheaper than
 * hashing and keeps phase 2 within a few hundred nanoseconds. */
static ptrdiff_t find(const ctbc_registry *registry, const void *handle)
{
    for (size_t i = registry->count; i-- > 0;)
        if (registry->entries[i].handle == handle)
            return (ptrdiff_t)i;
    return -1;
}

bool ctbc_registry_add(ctbc_registry *registry, const void *handle, size_t size)
{
    bool added = true;
    pthread_mutex_lock(&registry->lock);
    if (registry->count == registry->capacity) {
        size_t capacity = registry->capacity ? 2 * registry->capacity : 16;
        ctbc_registry_entry *grown = realloc(registry->entries, capacity * sizeof *grown);
        if (grown) {
            registry->entries = grown;
            registry->capacity = capacity;
        } else {
            added = false;
        }
    }
    if (added)
        registry->entries[registry->count++] = (ctbc_registry_entry){handle, size};
    pthread_mutex_unlock(&registry->lock);
    return added;
}

bool ctbc_registry_remove(ctbc_registry *registry, const void *handle)
{
    pthread_mutex_lock(&registry->lock);
    ptrdiff_t at = find(registry, handle);
    if (at >= 0)
        registry->entries[at] = registry->entries[--registry->count];
    pthread_mutex_unlock(&registry->lock);
    return at >= 0;
}

bool ctbc_registry_contains(ctbc_registry *registry, const void *handle)
{
    pthread_mutex_lock(&registry->lock);
    bool found = find(registry, handle) >= 0;
    pthread_mutex_unlock(&registry->lock);
    return found;
}

bool ctbc_registry_visit(ctbc_registry *registry, const void *handle, void (*visit)(const void *handle, void *arg),
                         void *arg)
{
    pthread_mutex_lock(&registry->lock);
    bool found = find(registry, handle) >= 0;
    if (found)
        visit(handle, arg);
    pthread_mutex_unlock(&registry->lock);
    return found;
}

bool ctbc_registry_find_containing(ctbc_registry *registry, const void *address, ctbc_registry_entry *found)
{
    uintptr_t at = (uintptr_t)address;
    bool hit = false;
    pthread_mutex_lock(&registry->lock);
    for (size_t i = registry->count; i-- > 0 && !hit;) {
        uintptr_t start = (uintptr_t)registry->entries[i].handle;
        if (at >= start && at - start < registry->entries[i].size) {
            *found = registry->entries[i];
            hit = true;
        }
    }
    pthread_mutex_unlock(&registry->lock);
    return hit;
}

ctbc_registry_entry *ctbc_registry_snapshot(ctbc_registry *registry, size_t *count)
{
    pthread_mutex_lock(&registry->lock);
    ctbc_registry_entry *copy = registry->count ? malloc(registry->count * sizeof *copy) : NULL;
    *count = copy ? registry->count : 0;
    if (copy)
        memcpy(copy, registry->entries, registry->count * sizeof *copy);
    pthread_mutex_unlock(&registry->lock);
    return copy;
}

void ctbc_registry_clear(ctbc_registry *registry, void (*release)(const void *handle))
{
    pthread_mutex_lock(&registry->lock);
    if (release)
        for (size_t i = 0; i < registry->count; i++)
            release(registry->entries[i].handle);
    free(registry->entries);
    registry->entries = NULL;
    registry->count = registry->capacity = 0;
    pthread_mutex_unlock(&registry->lock);
}

void ctbc_registry_after_fork(ctbc_registry *registry, bool keep)
{
    pthread_mutex_init(&registry->lock, NULL);
    if (!keep) {
        free(registry->entries);
        registry->entries = NULL;
        registry->count = registry->capacity = 0;
    }
}
