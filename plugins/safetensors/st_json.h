/* A strict JSON scanner over a safetensors header, private to the plugin.
 *
 * json-c builds an object of 70-500 bytes for every value, so a hostile
 * header under the 100 MiB cap ("[0,0,0,...]" in __metadata__) took 3.8 GB
 * and half a minute before any check could refuse it. This scanner reads
 * the text in place and allocates nothing: strings are decoded into the
 * text buffer itself (a decoded string is never longer than its escaped
 * form), numbers are read as unsigned integers or skipped.
 *
 * It accepts RFC 8259 JSON as serde_json (the reference reader of
 * safetensors) does: UTF-8 text, no raw control characters in strings, no
 * lone surrogates. An escaped NUL is refused: names are C strings here, so
 * "a\u0000x" would become "a" and two readers would see different names. */
#ifndef ST_JSON_H
#define ST_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/error.h"

typedef struct st_json {
    char *p, *end;   /* the unread text; strings are decoded in place */
    const char *src; /* the file, for messages */
    amn_error *err;
} st_json;

/* Skips white space; false at the end of the text. */
bool stj_more(st_json *j);
/* The next character after white space, or 0 at the end. */
char stj_peek(st_json *j);
/* Consumes c after white space, or fails with a syntax error. */
int stj_expect(st_json *j, char c);
/* Consumes ',' (true) or the closing bracket (false) of a container. */
int stj_next(st_json *j, char close, bool *more);
/* A string, decoded in place and NUL-terminated there. */
int stj_string(st_json *j, const char **out);
/* A number: *ok says whether it is an integer in [0, 2^64). */
int stj_u64(st_json *j, uint64_t *out, bool *ok);
/* Skips any value, containers included, at most max_depth deep. */
int stj_skip(st_json *j, unsigned max_depth);
/* The syntax error at the current position (AMN_E_PARSE). */
int stj_error(st_json *j, const char *what);

#endif
