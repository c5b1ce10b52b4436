/* --json: every document is built with json-c, and every string goes
 * through cli_json_str, so names and paths with quotes, backslashes,
 * control characters or bytes that are not UTF-8 still give valid JSON. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static bool json_mode;

void cli_json_set(bool on) {
    json_mode = on;
}

bool cli_json_on(void) {
    return json_mode;
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0. */
static size_t utf8_len(const unsigned char *s, size_t avail) {
    if (s[0] < 0x80) return 1;
    size_t n;
    uint32_t cp;
    if ((s[0] & 0xE0) == 0xC0)
        n = 2, cp = s[0] & 0x1F;
    else if ((s[0] & 0xF0) == 0xE0)
        n = 3, cp = s[0] & 0x0F;
    else if ((s[0] & 0xF8) == 0xF0)
        n = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (n > avail) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

json_object *cli_json_str(const char *s) {
    return s ? cli_json_strn(s, strlen(s)) : NULL;
}

json_object *cli_json_strn(const char *s, size_t n) {
    size_t bad = 0;
    if (n > INT32_MAX / 3) n = INT32_MAX / 3;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_len((const unsigned char *)s + i, n - i);
        bad += !k;
        i += k ? k : 1;
    }
    if (!bad) return json_object_new_string_len(s, (int)(n > INT32_MAX ? INT32_MAX : n));
    /* Each byte that starts no valid sequence becomes U+FFFD (3 bytes). */
    char *fixed = malloc(n + 2 * bad + 1);
    if (!fixed) return json_object_new_string("");
    size_t used = 0;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_len((const unsigned char *)s + i, n - i);
        if (k) {
            memcpy(fixed + used, s + i, k);
            used += k, i += k;
        } else {
            memcpy(fixed + used, "\xEF\xBF\xBD", 3);
            used += 3, i++;
        }
    }
    json_object *o = json_object_new_string_len(fixed, (int)(used > INT32_MAX ? INT32_MAX : used));
    free(fixed);
    return o;
}

void cli_json_print(json_object *o) {
    puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                               JSON_C_TO_STRING_NOSLASHESCAPE));
    fflush(stdout);
    json_object_put(o);
}

/* Stable names of the README's exit-code classes. */
const char *cli_exit_class(int exit_code) {
    switch (exit_code) {
    case EXIT_PARSE:
        return "parse";
    case EXIT_USAGE:
        return "invalid_argument";
    case EXIT_UNSUPPORTED:
        return "unsupported";
    case EXIT_LIMIT:
        return "limit_exceeded";
    case EXIT_DISALLOWED:
        return "disallowed";
    case EXIT_IO:
        return "io";
    case EXIT_NOMEM:
        return "out_of_memory";
    default:
        return "error";
    }
}

int cli_json_error(int exit_code, const char *message) {
    json_object *root = json_object_new_object(), *e = json_object_new_object();
    json_object_object_add(e, "class", json_object_new_string(cli_exit_class(exit_code)));
    json_object_object_add(e, "exit_code", json_object_new_int(exit_code));
    json_object_object_add(e, "message", cli_json_str(message));
    json_object_object_add(root, "error", e);
    fputs(json_object_to_json_string_ext(root,
                                         JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE),
          stderr);
    fputc('\n', stderr);
    json_object_put(root);
    return exit_code;
}
