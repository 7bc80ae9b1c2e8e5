#include "api/json.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

enum { MAX_OBJECT_DEPTH = 10, MAX_ARRAY_DEPTH = 10, KEY_BYTES = 128 };

typedef struct {
    const char *at;
    int objects, arrays; /* open containers */
    ctbc_json_result result;
    char *out;
    size_t out_size;
} walker;

static void skip_space(walker *w)
{
    while (*w->at == ' ' || *w->at == '\t' || *w->at == '\n' || *w->at == '\r')
        w->at++;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool read_hex4(walker *w, uint32_t *value)
{
    *value = 0;
    for (int i = 0; i < 4; i++) {
        int digit = hex_value(w->at[i]);
        if (digit < 0)
            return false;
        *value = *value * 16 + (uint32_t)digit;
    }
    w->at += 4;
    return true;
}

/* Appends `code` as UTF-8 to out[*used], if it fits; *fits turns false
 * (and stays) when it does not, the NUL included. */
static void put_code(char *out, size_t size, size_t *used, uint32_t code, bool *fits)
{
    unsigned char bytes[4];
    size_t n;
    if (code < 0x80) {
        bytes[0] = (unsigned char)code;
        n = 1;
    } else if (code < 0x800) {
        bytes[0] = (unsigned char)(0xC0 | (code >> 6));
        bytes[1] = (unsigned char)(0x80 | (code & 0x3F));
        n = 2;
    } else if (code < 0x10000) {
        bytes[0] = (unsigned char)(0xE0 | (code >> 12));
        bytes[1] = (unsigned char)(0x80 | ((code >> 6) & 0x3F));
        bytes[2] = (unsigned char)(0x80 | (code & 0x3F));
        n = 3;
    } else {
        bytes[0] = (unsigned char)(0xF0 | (code >> 18));
        bytes[1] = (unsigned char)(0x80 | ((code >> 12) & 0x3F));
        bytes[2] = (unsigned char)(0x80 | ((code >> 6) & 0x3F));
        bytes[3] = (unsigned char)(0x80 | (code & 0x3F));
        n = 4;
    }
    if (!out || !*fits || size - *used < n + 1) {
        *fits = false;
        return;
    }
    memcpy(out + *used, bytes, n);
    *used += n;
    out[*used] = '\0';
}

/* A string at w->at (the opening quote): checked, and decoded into out
 * when out is not NULL; *fits says whether all of it went there. */
static bool read_string(walker *w, char *out, size_t size, bool *fits)
{
    size_t used = 0;
    *fits = out != NULL && size > 0;
    if (*fits)
        out[0] = '\0';
    if (*w->at != '"')
        return false;
    w->at++;
    for (;;) {
        unsigned char c = (unsigned char)*w->at;
        if (c == '"') {
            w->at++;
            return true;
        }
        if (c < 0x20) /* the end of the text, or a raw control character */
            return false;
        w->at++;
        if (c != '\\') {
            put_code(out, size, &used, c, fits); /* UTF-8 passes through byte by byte */
            continue;
        }
        char escape = *w->at++;
        uint32_t code;
        switch (escape) {
        case '"': code = '"'; break;
        case '\\': code = '\\'; break;
        case '/': code = '/'; break;
        case 'b': code = '\b'; break;
        case 'f': code = '\f'; break;
        case 'n': code = '\n'; break;
        case 'r': code = '\r'; break;
        case 't': code = '\t'; break;
        case 'u': {
            if (!read_hex4(w, &code))
                return false;
            uint32_t low;
            if (code >= 0xD800 && code < 0xDC00 && w->at[0] == '\\' && w->at[1] == 'u') {
                const char *pair = w->at;
                w->at += 2;
                if (read_hex4(w, &low) && low >= 0xDC00 && low < 0xE000)
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                else
                    w->at = pair; /* a lone surrogate: kept as it is */
            }
            break;
        }
        default:
            return false;
        }
        if (code == 0) /* a NUL would cut the decoded text short */
            *fits = false;
        else
            put_code(out, size, &used, code, fits);
    }
}

static bool read_digits(walker *w)
{
    const char *start = w->at;
    while (*w->at >= '0' && *w->at <= '9')
        w->at++;
    return w->at > start;
}

static bool skip_number(walker *w)
{
    if (*w->at == '-')
        w->at++;
    if (*w->at == '0')
        w->at++;
    else if (!read_digits(w))
        return false;
    if (*w->at == '.') {
        w->at++;
        if (!read_digits(w))
            return false;
    }
    if (*w->at == 'e' || *w->at == 'E') {
        w->at++;
        if (*w->at == '+' || *w->at == '-')
            w->at++;
        if (!read_digits(w))
            return false;
    }
    return true;
}

static bool skip_word(walker *w, const char *word)
{
    size_t n = strlen(word);
    if (strncmp(w->at, word, n) != 0)
        return false;
    w->at += n;
    return true;
}

/* One value at w->at. `keys`/`key_count` is what is left of the wanted
 * path when this value lies on it (key_count 0: this is the member), or
 * NULL off the path. */
static bool walk_value(walker *w, const char *const *keys, size_t key_count)
{
    skip_space(w);
    bool target = keys && key_count == 0;
    if (target)
        w->result = CTBC_JSON_NOT_TEXT; /* unless it is a string that fits, below */
    switch (*w->at) {
    case '"': {
        bool fits;
        if (!read_string(w, target ? w->out : NULL, w->out_size, &fits))
            return false;
        if (target && fits)
            w->result = CTBC_JSON_FOUND;
        return true;
    }
    case '{': {
        if (++w->objects > MAX_OBJECT_DEPTH)
            return false;
        w->at++;
        skip_space(w);
        bool first = true;
        while (*w->at != '}') {
            if (!first) {
                if (*w->at != ',')
                    return false;
                w->at++;
                skip_space(w);
            }
            first = false;
            char key[KEY_BYTES];
            bool fits;
            if (!read_string(w, key, sizeof key, &fits))
                return false;
            skip_space(w);
            if (*w->at != ':')
                return false;
            w->at++;
            /* The first member with the wanted key is the one looked into. */
            bool on_path = keys && key_count > 0 && fits && strcmp(key, keys[0]) == 0 &&
                           w->result == CTBC_JSON_ABSENT;
            if (!walk_value(w, on_path ? keys + 1 : NULL, on_path ? key_count - 1 : 0))
                return false;
            skip_space(w);
        }
        w->at++;
        w->objects--;
        return true;
    }
    case '[': {
        if (++w->arrays > MAX_ARRAY_DEPTH)
            return false;
        w->at++;
        skip_space(w);
        bool first = true;
        while (*w->at != ']') {
            if (!first) {
                if (*w->at != ',')
                    return false;
                w->at++;
            }
            first = false;
            if (!walk_value(w, NULL, 0))
                return false;
            skip_space(w);
        }
        w->at++;
        w->arrays--;
        return true;
    }
    case 't':
        return skip_word(w, "true");
    case 'f':
        return skip_word(w, "false");
    case 'n':
        return skip_word(w, "null");
    default:
        return skip_number(w);
    }
}

ctbc_json_result ctbc_json_find_string(const char *text, const char *const *keys, size_t key_count, char *out,
                                       size_t out_size)
{
    if (!text || !out || out_size == 0)
        return CTBC_JSON_MALFORMED;
    out[0] = '\0';
    walker w = {text, 0, 0, CTBC_JSON_ABSENT, out, out_size};
    if (!walk_value(&w, keys, key_count))
        return CTBC_JSON_MALFORMED;
    skip_space(&w);
    if (*w.at != '\0')
        return CTBC_JSON_MALFORMED;
    if (w.result != CTBC_JSON_FOUND)
        out[0] = '\0';
    return w.result;
}
