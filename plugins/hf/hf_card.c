/* Model-card front matter (hf_card.h). */
#include "hf_card.h"

#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CARD_MAX_BYTES (1u << 20) /* front matter read from at most 1 MiB of README */
#define CARD_MAX_ITEMS 4096

void hf_card_free(hf_card *c) {
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].key);
        for (size_t k = 0; k < c->v[i].n; k++) free(c->v[i].items[k]);
        free(c->v[i].items);
    }
    free(c->v);
    c->v = NULL;
    c->n = 0;
}

const hf_card_val *hf_card_get(const hf_card *c, const char *key) {
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].key, key) == 0) return c->v[i].all_str ? &c->v[i] : NULL;
    return NULL;
}

static bool match(const char *re, const char *s) {
    regex_t r;
    if (regcomp(&r, re, REG_EXTENDED | REG_NOSUB)) return false;
    const bool ok = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

/* A plain scalar PyYAML resolves to something else than a string. */
static bool plain_not_string(const char *s) {
    return !*s || strcmp(s, "~") == 0 || match("^(null|Null|NULL)$", s) ||
           match("^(yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$",
                 s) ||
           match("^[-+]?(0|[1-9][0-9_]*)$", s) ||
           match("^[-+]?[0-9][0-9_]*\\.[0-9_]*([eE][-+][0-9]+)?$", s) ||
           match("^[-+]?\\.[0-9_]+([eE][-+][0-9]+)?$", s) || match("^0[0-7_]+$", s) ||
           match("^0x[0-9a-fA-F_]+$", s) || match("^[-+]?\\.(inf|Inf|INF)$", s) ||
           match("^\\.(nan|NaN|NAN)$", s) || match("^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}", s);
}

static char *trim(char *s) {
    while (*s == ' ') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

/* One scalar, unquoted; *is_str false for a plain scalar of another type;
 * NULL for what this reader does not take (escapes, anchors, ...). */
static char *scalar(char *s, bool *is_str) {
    s = trim(s);
    const size_t n = strlen(s);
    *is_str = true;
    if (n >= 2 && (s[0] == '"' || s[0] == '\'') && s[n - 1] == s[0]) {
        if (memchr(s + 1, s[0] == '"' ? '\\' : '\'', n - 2)) return NULL; /* escapes */
        return strndup(s + 1, n - 2);
    }
    if (strchr("&*!|>%@`{\"'", s[0]) && *s) return NULL;
    char *hash = strstr(s, " #");
    if (hash) *hash = '\0', s = trim(s);
    if (strstr(s, ": ")) return NULL;
    *is_str = !plain_not_string(s);
    return strdup(s);
}

static int add_item(hf_card_val *v, char *item, bool is_str, amn_error *err) {
    if (!item) return 1; /* not taken */
    if (v->n >= CARD_MAX_ITEMS) {
        free(item);
        return amn_error_set(err, AMN_E_LIMIT, "README.md: a list of more than %d items",
                             CARD_MAX_ITEMS);
    }
    char **p = realloc(v->items, (v->n + 1) * sizeof *p);
    if (!p) {
        free(item);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    v->items = p;
    v->items[v->n++] = item;
    v->all_str &= is_str;
    return AMN_OK;
}

/* One scalar of text s into v (see scalar()). */
static int add_scalar(hf_card_val *v, char *s, amn_error *err) {
    bool is_str = false;
    char *item = scalar(s, &is_str);
    return add_item(v, item, is_str, err);
}

/* The front matter text (after the converter's rewrites: "- no" quoted,
 * tabs as two spaces) into lines. */
static char *front_matter(const char *dir, amn_error *err, int *rc) {
    char path[4096];
    *rc = AMN_OK;
    snprintf(path, sizeof path, "%s/README.md", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(CARD_MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        *rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
        return NULL;
    }
    const size_t n = fread(buf, 1, CARD_MAX_BYTES, f);
    fclose(f);
    buf[n] = '\0';
    if (strncmp(buf, "---\n", 4) != 0 && strncmp(buf, "---\r\n", 5) != 0) {
        free(buf);
        return NULL;
    }
    /* the first line that is exactly "---" ends it */
    char *body = strchr(buf, '\n') + 1, *end = NULL;
    for (char *l = body - 1; l && !end; l = strchr(l + 1, '\n'))
        if (strncmp(l + 1, "---", 3) == 0 &&
            (l[4] == '\n' || l[4] == '\0' || (l[4] == '\r' && (l[5] == '\n' || !l[5]))))
            end = l;
    if (!end) { /* no closing line within the cap */
        free(buf);
        return NULL;
    }
    end[1] = '\0';
    char *out = malloc(strlen(body) * 2 + 2);
    if (!out) {
        free(buf);
        *rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
        return NULL;
    }
    char *w = out;
    for (const char *r = body; *r; r++) {
        if (*r == '\t') {
            *w++ = ' ', *w++ = ' ';
        } else if (strncmp(r, "- no\n", 5) == 0) {
            memcpy(w, "- \"no\"\n", 7);
            w += 7, r += 4;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
    free(buf);
    return out;
}

int hf_card_read(const char *dir, hf_card *c, amn_error *err) {
    memset(c, 0, sizeof *c);
    int rc;
    char *text = front_matter(dir, err, &rc);
    if (!text) return rc;
    hf_card_val *cur = NULL;
    bool bad_cur = false;
    for (char *line = text, *next; !rc && line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (!*trim(line) || trim(line)[0] == '#') continue;
        if (line[0] == ' ' || line[0] == '-') { /* a block item, or nesting */
            char *t = trim(line);
            if (!cur || t[0] != '-' || (t[1] != ' ' && t[1] != '\0')) {
                bad_cur = true;
                continue;
            }
            cur->is_list = true;
            const int r = add_scalar(cur, t + 1, err);
            if (r < 0) rc = r;
            if (r == 1) bad_cur = true;
            if (bad_cur && cur) cur->all_str = false;
            continue;
        }
        if (cur && bad_cur) cur->all_str = false;
        char *colon = strchr(line, ':');
        if (!colon || (colon[1] != ' ' && colon[1] != '\0')) {
            cur = NULL;
            continue;
        }
        *colon = '\0';
        hf_card_val *p = realloc(c->v, (c->n + 1) * sizeof *p);
        if (!p || c->n >= CARD_MAX_ITEMS) {
            rc = p ? amn_error_set(err, AMN_E_LIMIT, "README.md: too many keys")
                   : amn_error_set(err, AMN_E_NOMEM, "out of memory");
            if (p) c->v = p;
            break;
        }
        c->v = p;
        cur = &c->v[c->n++];
        *cur = (hf_card_val){.key = strdup(trim(line)), .all_str = true};
        bad_cur = false;
        char *val = trim(colon + 1);
        if (!*val) continue; /* a block list follows, or null */
        if (val[0] == '[') {
            const size_t n = strlen(val);
            cur->is_list = true;
            if (val[n - 1] != ']' || strpbrk(val + 1, "[{\"'")) {
                bad_cur = true;
                continue;
            }
            val[n - 1] = '\0';
            for (char *it = val + 1, *comma; !rc && it; it = comma) {
                comma = strchr(it, ',');
                if (comma) *comma++ = '\0';
                if (!*trim(it) && !comma) break;
                const int r = add_scalar(cur, it, err);
                if (r < 0) rc = r;
                if (r == 1) bad_cur = true;
            }
            continue;
        }
        const int r = add_scalar(cur, val, err);
        if (r < 0) rc = r;
        if (r == 1) bad_cur = true;
    }
    if (cur && bad_cur) cur->all_str = false;
    /* a key with nothing (null) is not a string */
    for (size_t i = 0; i < c->n; i++)
        if (!c->v[i].n && !c->v[i].is_list) c->v[i].all_str = false;
    free(text);
    if (rc) hf_card_free(c);
    return rc;
}
