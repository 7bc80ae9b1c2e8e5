/*
 * Just enough JSON to read CANN's acl.json: a validating walk that finds
 * one string member by its path of object keys (e.g. "dump", "dump_path").
 * CANN limits acl.json to 10 levels of objects and of arrays.
 */
#ifndef CONVTBC_API_JSON_H
#define CONVTBC_API_JSON_H

#include <stddef.h>

typedef enum {
    CTBC_JSON_FOUND,
    CTBC_JSON_ABSENT,    /* the document is well formed but has no such member */
    CTBC_JSON_NOT_TEXT,  /* the member is there but is not a string (or too long for `out`) */
    CTBC_JSON_MALFORMED, /* not one JSON value, or nested too deep */
} ctbc_json_result;

/* Looks up keys[0] in the top-level object, keys[1] inside that, ...; a
 * string found at the end is decoded into out (NUL-terminated). */
ctbc_json_result ctbc_json_find_string(const char *text, const char *const *keys, size_t key_count, char *out,
                                       size_t out_size);

#endif /* CONVTBC_API_JSON_H */
