#include "st_json.h"

#include <string.h>

static bool is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool stj_more(st_json *j) {
    while (j->p < j->end && is_ws(*j->p)) j->p++;
    return j->p < j->end;
}

char stj_peek(st_json *j) {
    return stj_more(j) ? *j->p : 0;
}

int stj_error(st_json *j, const char *what) {
    if (j->p >= j->end) what = "the text ends inside a value";
    return amn_error_set(j->err, AMN_E_PARSE, "%s: header: not valid JSON: %s", j->src, what);
}

int stj_expect(st_json *j, char c) {
    if (stj_peek(j) != c) return stj_error(j, "unexpected character");
    j->p++;
    return AMN_OK;
}

int stj_next(st_json *j, char close, bool *more) {
    const char c = stj_peek(j);
    if (c != ',' && c != close) return stj_error(j, "unexpected character");
    j->p++;
    *more = c == ',';
    return AMN_OK;
}

/* The length of the UTF-8 sequence at s (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF), or 0 if it is not one. */
static size_t utf8_length(const unsigned char *s, const unsigned char *end) {
    const size_t left = (size_t)(end - s);
    unsigned char lo = 0x80, hi = 0xBF;
    size_t n;
    if (s[0] >= 0xC2 && s[0] <= 0xDF)
        n = 2;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        n = 3, lo = s[0] == 0xE0 ? 0xA0 : 0x80, hi = s[0] == 0xED ? 0x9F : 0xBF;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        n = 4, lo = s[0] == 0xF0 ? 0x90 : 0x80, hi = s[0] == 0xF4 ? 0x8F : 0xBF;
    else
        return 0;
    if (left < n || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return n;
}

static int hex4(const char *p, const char *end, unsigned *out) {
    if (end - p < 4) return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        const char c = p[i];
        const int d = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
        if (d < 0) return -1;
        v = v << 4 | (unsigned)d;
    }
    *out = v;
    return 0;
}

static char *put_utf8(char *w, unsigned cp) {
    if (cp < 0x80) {
        *w++ = (char)cp;
    } else if (cp < 0x800) {
        *w++ = (char)(0xC0 | cp >> 6);
        *w++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *w++ = (char)(0xE0 | cp >> 12);
        *w++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *w++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *w++ = (char)(0xF0 | cp >> 18);
        *w++ = (char)(0x80 | (cp >> 12 & 0x3F));
        *w++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *w++ = (char)(0x80 | (cp & 0x3F));
    }
    return w;
}

/* A \u escape at r (just after the backslash and 'u'), a surrogate pair
 * whole; *r moves past it. */
static int unicode_escape(st_json *j, char **r, unsigned *cp) {
    if (hex4(*r, j->end, cp)) return stj_error(j, "bad \\u escape");
    *r += 4;
    if (*cp == 0)
        return amn_error_set(j->err, AMN_E_PARSE,
                             "%s: header string holds an escaped NUL (\\u0000)", j->src);
    if (*cp >= 0xDC00 && *cp <= 0xDFFF) return stj_error(j, "lone surrogate in a \\u escape");
    if (*cp < 0xD800 || *cp > 0xDBFF) return AMN_OK;
    unsigned low = 0;
    if (j->end - *r < 6 || (*r)[0] != '\\' || (*r)[1] != 'u' || hex4(*r + 2, j->end, &low) ||
        low < 0xDC00 || low > 0xDFFF)
        return stj_error(j, "lone surrogate in a \\u escape");
    *r += 6;
    *cp = 0x10000 + ((*cp - 0xD800) << 10) + (low - 0xDC00);
    return AMN_OK;
}

int stj_string(st_json *j, const char **out) {
    if (stj_peek(j) != '"') return stj_error(j, "unexpected character");
    char *r = ++j->p, *w = r;
    const char *start = w;
    int rc;
    for (;;) {
        if (r >= j->end) {
            j->p = r;
            return stj_error(j, "");
        }
        const unsigned char c = (unsigned char)*r;
        if (c == '"') {
            *w = '\0';
            j->p = r + 1;
            *out = start;
            return AMN_OK;
        }
        if (c < 0x20) return stj_error(j, "control character in a string");
        if (c >= 0x80) {
            const size_t n = utf8_length((const unsigned char *)r, (const unsigned char *)j->end);
            if (!n) return stj_error(j, "text is not UTF-8");
            memmove(w, r, n);
            w += n, r += n;
            continue;
        }
        if (c != '\\') {
            *w++ = *r++;
            continue;
        }
        if (++r >= j->end) {
            j->p = r;
            return stj_error(j, "");
        }
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *k = *r ? strchr(from, *r) : NULL;
        if (k) {
            *w++ = to[k - from];
            r++;
        } else if (*r == 'u') {
            unsigned cp = 0;
            r++;
            if ((rc = unicode_escape(j, &r, &cp))) return rc;
            w = put_utf8(w, cp);
        } else {
            return stj_error(j, "bad escape in a string");
        }
    }
}

int stj_u64(st_json *j, uint64_t *out, bool *ok) {
    char c = stj_peek(j);
    const bool neg = c == '-';
    if (neg) c = ++j->p < j->end ? *j->p : 0;
    if (c < '0' || c > '9') return stj_error(j, "unexpected character");
    uint64_t v = 0;
    bool fits = true;
    if (c == '0') {
        j->p++;
    } else {
        for (; j->p < j->end && *j->p >= '0' && *j->p <= '9'; j->p++) {
            const uint64_t d = (uint64_t)(*j->p - '0');
            if (v > (UINT64_MAX - d) / 10) fits = false;
            v = v * 10 + d;
        }
    }
    bool integer = true;
    if (j->p < j->end && *j->p == '.') {
        integer = false;
        if (++j->p >= j->end || *j->p < '0' || *j->p > '9') return stj_error(j, "bad number");
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        integer = false;
        if (++j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
        if (j->p >= j->end || *j->p < '0' || *j->p > '9') return stj_error(j, "bad number");
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    }
    *ok = !neg && fits && integer;
    *out = *ok ? v : 0;
    return AMN_OK;
}

static int literal(st_json *j, const char *word) {
    const size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
        return stj_error(j, "unexpected character");
    j->p += n;
    return AMN_OK;
}

int stj_skip(st_json *j, unsigned max_depth) {
    const char c = stj_peek(j);
    uint64_t u;
    bool ok, more = true;
    const char *s;
    int rc = AMN_OK;
    switch (c) {
    case '"':
        return stj_string(j, &s);
    case 't':
        return literal(j, "true");
    case 'f':
        return literal(j, "false");
    case 'n':
        return literal(j, "null");
    case '{':
    case '[':
        if (max_depth == 0)
            return amn_error_set(j->err, AMN_E_PARSE,
                                 "%s: header nests deeper than a safetensors header does", j->src);
        j->p++;
        if (stj_peek(j) == (c == '{' ? '}' : ']')) {
            j->p++;
            return AMN_OK;
        }
        while (!rc && more) {
            if (c == '{' && !(rc = stj_string(j, &s))) rc = stj_expect(j, ':');
            if (!rc) rc = stj_skip(j, max_depth - 1);
            if (!rc) rc = stj_next(j, c == '{' ? '}' : ']', &more);
        }
        return rc;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return stj_u64(j, &u, &ok);
        return stj_error(j, "unexpected character");
    }
}
