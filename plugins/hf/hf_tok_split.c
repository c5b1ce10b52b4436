/* The normalizers and pre-tokenizers of a tokenizer.json, applied to the
 * check text as Hugging Face tokenizers applies them. Each component is a
 * row of a table (its "type" and the function doing it); a type no row names
 * is AMN_E_UNSUPPORTED naming it.
 *
 * Normalizers: NFC (a no-op: the check text is NFC, and only while no other
 * normalizer has changed it), Replace (a String or Regex pattern), Prepend,
 * Sequence. Pre-tokenizers: Split (String or Regex pattern; every behavior:
 * Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous; invert),
 * ByteLevel (with or without its GPT-2 regex), Sequence. */
#include <stdlib.h>
#include <string.h>

#include "hf_tok_int.h"
#include "hf_tok_regex.h"
#include "hf_vocab_int.h"

#define MAX_DEPTH   8    /* Sequence in Sequence ... */
#define MAX_PATTERN 1024 /* bytes of a Replace / Split / Prepend string */

/* ---- pieces ---- */
int hf_push_piece(hf_pieces *ps, const uint32_t *cp, size_t n, amn_error *err) {
    if (n == 0) return AMN_OK;
    if (ps->n == ps->cap) {
        size_t nc = ps->cap ? ps->cap * 2 : 64;
        if (nc > 4 * HF_TOK_MAX_CP)
            return amn_error_set(err, AMN_E_LIMIT, "pre-tokenizer: too many pieces");
        hf_piece *nv = realloc(ps->v, nc * sizeof *nv);
        if (!nv) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        ps->v = nv;
        ps->cap = nc;
    }
    uint32_t *c = malloc(n * sizeof *c);
    if (!c) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    memcpy(c, cp, n * sizeof *c);
    ps->v[ps->n++] = (hf_piece){c, n};
    return AMN_OK;
}

void hf_free_pieces(hf_pieces *ps) {
    for (size_t i = 0; i < ps->n; i++) free(ps->v[i].cp);
    free(ps->v);
    ps->v = NULL;
    ps->n = ps->cap = 0;
}

/* ps's pieces replaced by out's (budget carried over) */
static void take_pieces(hf_pieces *ps, hf_pieces *out) {
    out->budget = ps->budget;
    hf_free_pieces(ps);
    *ps = *out;
}

size_t hf_utf8_decode(const char *s, size_t n, uint32_t *out, size_t cap) {
    size_t k = 0;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n && k < cap;) {
        uint32_t c = p[i];
        size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (len > 1) c &= 0xFF >> (len + 1);
        for (size_t j = 1; j < len && i + j < n; j++) c = c << 6 | (p[i + j] & 0x3F);
        out[k++] = c;
        i += len;
    }
    return k;
}

size_t hf_utf8_encode(uint32_t c, char *o) {
    if (c < 0x80) return o[0] = (char)c, 1;
    if (c < 0x800) return o[0] = (char)(0xC0 | c >> 6), o[1] = (char)(0x80 | (c & 0x3F)), 2;
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | c >> 12);
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | c >> 18);
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

bool hf_tok_is_type(json_object *o, const char *t) {
    json_object *ty = hf_json_get(o, "type");
    return ty && json_object_is_type(ty, json_type_string) &&
           strcmp(json_object_get_string(ty), t) == 0;
}

const char *hf_tok_type_name(json_object *o) {
    json_object *ty = hf_json_get(o, "type");
    return ty && json_object_is_type(ty, json_type_string) ? json_object_get_string(ty) : "?";
}

/* ---- patterns: {"String": s} or {"Regex": r} ---- */
typedef struct pattern {
    hf_re *re;                 /* a Regex, or */
    uint32_t lit[MAX_PATTERN]; /* a String's code points */
    size_t nlit;
} pattern;

/* A string member as code points; what is a parse error vs. a limit. */
static int string_cps(json_object *o, const char *what, uint32_t *out, size_t *n, bool nonempty,
                      amn_error *err) {
    if (!o || !json_object_is_type(o, json_type_string))
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: %s is not a string", what);
    size_t len = (size_t)json_object_get_string_len(o);
    if (len > MAX_PATTERN)
        return amn_error_set(err, AMN_E_LIMIT, "tokenizer.json: %s of %zu bytes", what, len);
    if (nonempty && len == 0)
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: %s is empty", what);
    *n = hf_utf8_decode(json_object_get_string(o), len, out, MAX_PATTERN);
    return AMN_OK;
}

static int pattern_open(json_object *o, const char *what, pattern *p, amn_error *err) {
    json_object *re = hf_json_get(o, "Regex"), *str = hf_json_get(o, "String");
    p->re = NULL;
    if (str) return string_cps(str, what, p->lit, &p->nlit, true, err);
    if (!re || !json_object_is_type(re, json_type_string))
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: %s without a pattern", what);
    if (json_object_get_string_len(re) > MAX_PATTERN)
        return amn_error_set(err, AMN_E_LIMIT, "tokenizer.json: %s regex too long", what);
    return hf_re_compile(json_object_get_string(re), &p->re, err);
}

/* The code of a failed hf_re_find (its message is in err). */
static int find_error(const amn_error *err) {
    return err && err->code ? err->code : AMN_E_LIMIT;
}

/* The next match in t[from, n): 1 with [*s, *e), 0 none, -1 an error. */
static int pattern_find(const pattern *p, const uint32_t *t, size_t n, size_t from, size_t *s,
                        size_t *e, uint64_t *budget, amn_error *err) {
    if (p->re) {
        return hf_re_find(p->re, t, n, from, s, e, budget, err);
    }
    for (size_t i = from; i + p->nlit <= n; i++)
        if (memcmp(t + i, p->lit, p->nlit * sizeof *t) == 0) {
            *s = i, *e = i + p->nlit;
            return 1;
        }
    return 0;
}

/* ---- normalizers ---- */
typedef struct norm_state {
    bool changed; /* the text may no longer be NFC */
    int depth;
} norm_state;

typedef int (*norm_fn)(hf_pieces *ps, json_object *n, norm_state *st, amn_error *err);

static int normalize(hf_pieces *ps, json_object *n, norm_state *st, amn_error *err);

static int norm_nfc(hf_pieces *ps, json_object *n, norm_state *st, amn_error *err) {
    (void)ps, (void)n;
    if (st->changed) /* would need Unicode's composition tables */
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "tokenizer.json: normalizer NFC after another normalizer");
    return AMN_OK;
}

static int norm_sequence(hf_pieces *ps, json_object *n, norm_state *st, amn_error *err) {
    json_object *list = hf_json_get(n, "normalizers");
    if (!list || !json_object_is_type(list, json_type_array))
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: Sequence without normalizers");
    if (st->depth >= MAX_DEPTH) return amn_error_set(err, AMN_E_LIMIT, "normalizer nests too deep");
    st->depth++;
    int rc = AMN_OK;
    for (size_t i = 0; i < json_object_array_length(list) && !rc; i++)
        rc = normalize(ps, json_object_array_get_idx(list, i), st, err);
    st->depth--;
    return rc;
}

/* t[0, n) with every match replaced by with[0, nw), as a new piece of out */
static int replace_piece(const pattern *p, const hf_piece *pc, const uint32_t *with, size_t nw,
                         hf_pieces *out, uint64_t *budget, amn_error *err) {
    uint32_t *buf = malloc(4 * HF_TOK_MAX_CP * sizeof *buf);
    if (!buf) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    size_t o = 0, pos = 0, s, e;
    int hit, rc = AMN_OK;
    while ((hit = pattern_find(p, pc->cp, pc->n, pos, &s, &e, budget, err)) == 1) {
        if (e == s) {
            rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                               "tokenizer.json: Replace pattern matching the empty string");
            break;
        }
        if (o + (s - pos) + nw > 4 * HF_TOK_MAX_CP) {
            rc = amn_error_set(err, AMN_E_LIMIT, "normalizer: the text grows too long");
            break;
        }
        memcpy(buf + o, pc->cp + pos, (s - pos) * sizeof *buf), o += s - pos;
        memcpy(buf + o, with, nw * sizeof *buf), o += nw;
        pos = e;
    }
    if (hit < 0) rc = find_error(err);
    if (!rc && o + (pc->n - pos) > 4 * HF_TOK_MAX_CP)
        rc = amn_error_set(err, AMN_E_LIMIT, "normalizer: the text grows too long");
    if (!rc) {
        memcpy(buf + o, pc->cp + pos, (pc->n - pos) * sizeof *buf), o += pc->n - pos;
        rc = hf_push_piece(out, buf, o, err);
    }
    free(buf);
    return rc;
}

static int norm_replace(hf_pieces *ps, json_object *n, norm_state *st, amn_error *err) {
    pattern *p = malloc(sizeof *p);
    uint32_t *with = malloc(MAX_PATTERN * sizeof *with);
    size_t nw = 0;
    int rc = p && with ? AMN_OK : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc) rc = string_cps(hf_json_get(n, "content"), "Replace content", with, &nw, false, err);
    if (!rc) rc = pattern_open(hf_json_get(n, "pattern"), "Replace pattern", p, err);
    if (!rc) {
        hf_pieces out = {.byte_level = ps->byte_level};
        for (size_t i = 0; i < ps->n && !rc; i++)
            rc = replace_piece(p, &ps->v[i], with, nw, &out, &ps->budget, err);
        if (rc)
            hf_free_pieces(&out);
        else
            take_pieces(ps, &out);
        hf_re_free(p->re);
        st->changed = true;
    }
    free(p);
    free(with);
    return rc;
}

static int norm_prepend(hf_pieces *ps, json_object *n, norm_state *st, amn_error *err) {
    uint32_t with[MAX_PATTERN];
    size_t nw;
    int rc = string_cps(hf_json_get(n, "prepend"), "Prepend", with, &nw, false, err);
    for (size_t i = 0; i < ps->n && !rc; i++) {
        hf_piece *p = &ps->v[i];
        if (p->n + nw > 4 * HF_TOK_MAX_CP)
            return amn_error_set(err, AMN_E_LIMIT, "normalizer: the text grows too long");
        uint32_t *c = malloc((p->n + nw) * sizeof *c);
        if (!c) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        memcpy(c, with, nw * sizeof *c);
        memcpy(c + nw, p->cp, p->n * sizeof *c);
        free(p->cp);
        p->cp = c;
        p->n += nw;
    }
    st->changed = true;
    return rc;
}

static const struct {
    const char *type;
    norm_fn fn;
} normalizers[] = {
    {"NFC", norm_nfc},
    {"Sequence", norm_sequence},
    {"Replace", norm_replace},
    {"Prepend", norm_prepend},
};

static int normalize(hf_pieces *ps, json_object *n, norm_state *st, amn_error *err) {
    if (!n || json_object_is_type(n, json_type_null)) return AMN_OK;
    for (size_t i = 0; i < sizeof normalizers / sizeof *normalizers; i++)
        if (hf_tok_is_type(n, normalizers[i].type)) return normalizers[i].fn(ps, n, st, err);
    return amn_error_set(err, AMN_E_UNSUPPORTED, "tokenizer.json: normalizer %s",
                         hf_tok_type_name(n));
}

int hf_tok_normalize(hf_pieces *ps, json_object *norm, amn_error *err) {
    norm_state st = {0};
    return normalize(ps, norm, &st, err);
}

/* ---- pre-tokenizers ---- */
typedef int (*pre_fn)(hf_pieces *ps, json_object *pt, int depth, amn_error *err);

static int pre_tokenize(hf_pieces *ps, json_object *pt, int depth, amn_error *err);

/* GPT-2's bytes_to_unicode */
static uint32_t byte_char(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
    uint32_t n = 0;
    for (uint32_t x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE))) n++;
    return 256 + n;
}

static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

enum behavior { B_REMOVED, B_ISOLATED, B_MERGED_PREV, B_MERGED_NEXT, B_CONTIGUOUS };

static const char *const behavior_names[] = {"Removed", "Isolated", "MergedWithPrevious",
                                             "MergedWithNext", "Contiguous"};

typedef struct seg {
    size_t s, e;
    bool match;
} seg;

/* The pattern's matches in p and the gaps between them, in order, as the
 * tokenizers library lists them (a regex's empty match splits there; the
 * search goes on one character further). */
static int find_segs(const pattern *pat, const hf_piece *p, seg *v, size_t *nv, uint64_t *budget,
                     amn_error *err) {
    size_t prev = 0, from = 0, s, e, k = 0;
    while (from <= p->n) {
        int hit = pattern_find(pat, p->cp, p->n, from, &s, &e, budget, err);
        if (hit < 0) return find_error(err);
        if (!hit) break;
        if (prev != s) v[k++] = (seg){prev, s, false};
        v[k++] = (seg){s, e, true};
        prev = e;
        from = e > s ? e : s + 1;
    }
    if (prev != p->n) v[k++] = (seg){prev, p->n, false};
    *nv = k;
    return AMN_OK;
}

/* SplitDelimiterBehavior's fold over the segments, in place */
static size_t apply_behavior(seg *v, size_t n, enum behavior b) {
    size_t k = 0;
    bool prev_match = false;
    switch (b) {
    case B_REMOVED:
        for (size_t i = 0; i < n; i++)
            if (!v[i].match) v[k++] = v[i];
        return k;
    case B_ISOLATED:
        return n;
    case B_MERGED_PREV: /* a match joins the gap before it */
        for (size_t i = 0; i < n; i++) {
            if (v[i].match && !prev_match && k)
                v[k - 1].e = v[i].e;
            else
                v[k++] = v[i];
            prev_match = v[i].match;
        }
        return k;
    case B_MERGED_NEXT: /* a match joins the gap after it: the same fold from the end */
        for (size_t i = n; i-- > 0;) {
            seg cur = v[i];
            if (cur.match && !prev_match && k)
                v[n - k].s = cur.s;
            else
                v[n - ++k] = cur;
            prev_match = cur.match;
        }
        memmove(v, v + n - k, k * sizeof *v);
        return k;
    case B_CONTIGUOUS: /* runs of matches (and of gaps) become one */
        for (size_t i = 0; i < n; i++) {
            if (v[i].match == prev_match && k)
                v[k - 1].e = v[i].e;
            else
                v[k++] = v[i];
            prev_match = v[i].match;
        }
        return k;
    }
    return n;
}

static int split_all(hf_pieces *ps, const pattern *pat, enum behavior b, bool invert,
                     amn_error *err) {
    hf_pieces out = {.byte_level = ps->byte_level};
    int rc = AMN_OK;
    for (size_t i = 0; i < ps->n && !rc; i++) {
        const hf_piece *p = &ps->v[i];
        seg *v = malloc((2 * p->n + 2) * sizeof *v);
        size_t nv = 0;
        if (!v) {
            rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
            break;
        }
        rc = find_segs(pat, p, v, &nv, &ps->budget, err);
        for (size_t j = 0; j < nv && invert; j++) v[j].match = !v[j].match;
        if (!rc) nv = apply_behavior(v, nv, b);
        for (size_t j = 0; j < nv && !rc; j++)
            rc = hf_push_piece(&out, p->cp + v[j].s, v[j].e - v[j].s, err);
        free(v);
    }
    if (rc)
        hf_free_pieces(&out);
    else
        take_pieces(ps, &out);
    return rc;
}

static int pre_split(hf_pieces *ps, json_object *pt, int depth, amn_error *err) {
    (void)depth;
    json_object *beh = hf_json_get(pt, "behavior"), *inv = hf_json_get(pt, "invert");
    if (!beh || !json_object_is_type(beh, json_type_string))
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: Split without a behavior");
    if (inv && !json_object_is_type(inv, json_type_boolean))
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: Split invert is not a boolean");
    size_t b = 0, nb = sizeof behavior_names / sizeof *behavior_names;
    while (b < nb && strcmp(behavior_names[b], json_object_get_string(beh)) != 0) b++;
    if (b == nb)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "tokenizer.json: Split behavior %.40s",
                             json_object_get_string(beh));
    if (ps->byte_level)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "tokenizer.json: Split after ByteLevel");
    pattern *pat = malloc(sizeof *pat);
    if (!pat) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = pattern_open(hf_json_get(pt, "pattern"), "Split pattern", pat, err);
    if (!rc) {
        rc = split_all(ps, pat, (enum behavior)b, inv && json_object_get_boolean(inv), err);
        hf_re_free(pat->re);
    }
    free(pat);
    return rc;
}

static int pre_byte_level(hf_pieces *ps, json_object *pt, int depth, amn_error *err) {
    (void)depth;
    int rc;
    bool prefix = hf_json_truthy(hf_json_get(pt, "add_prefix_space"));
    json_object *ur = hf_json_get(pt, "use_regex");
    bool use_regex = !ur || json_object_get_boolean(ur); /* default true */
    if (prefix)
        for (size_t i = 0; i < ps->n; i++) {
            hf_piece *p = &ps->v[i];
            if (p->n && p->cp[0] == ' ') continue;
            uint32_t *c = malloc((p->n + 1) * sizeof *c);
            if (!c) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
            c[0] = ' ';
            memcpy(c + 1, p->cp, p->n * sizeof *c);
            free(p->cp);
            p->cp = c;
            p->n++;
        }
    if (use_regex) {
        pattern pat = {0};
        if ((rc = hf_re_compile(gpt2_pattern, &pat.re, err))) return rc;
        rc = split_all(ps, &pat, B_ISOLATED, false, err);
        hf_re_free(pat.re);
        if (rc) return rc;
    }
    for (size_t i = 0; i < ps->n; i++) {
        hf_piece *p = &ps->v[i];
        uint32_t *c = malloc(p->n * 4 * sizeof *c);
        if (!c) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        size_t k = 0;
        for (size_t j = 0; j < p->n; j++) {
            char b[4];
            size_t nb = hf_utf8_encode(p->cp[j], b);
            for (size_t x = 0; x < nb; x++) c[k++] = byte_char((uint8_t)b[x]);
        }
        free(p->cp);
        p->cp = c;
        p->n = k;
    }
    ps->byte_level = true;
    return AMN_OK;
}

static int pre_sequence(hf_pieces *ps, json_object *pt, int depth, amn_error *err) {
    json_object *list = hf_json_get(pt, "pretokenizers");
    if (!list || !json_object_is_type(list, json_type_array))
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: Sequence without pretokenizers");
    for (size_t i = 0; i < json_object_array_length(list); i++) {
        int rc = pre_tokenize(ps, json_object_array_get_idx(list, i), depth + 1, err);
        if (rc) return rc;
    }
    return AMN_OK;
}

static const struct {
    const char *type;
    pre_fn fn;
} pre_tokenizers[] = {
    {"Sequence", pre_sequence},
    {"Split", pre_split},
    {"ByteLevel", pre_byte_level},
};

static int pre_tokenize(hf_pieces *ps, json_object *pt, int depth, amn_error *err) {
    if (!pt || json_object_is_type(pt, json_type_null)) return AMN_OK;
    if (depth > MAX_DEPTH) return amn_error_set(err, AMN_E_LIMIT, "pre_tokenizer nests too deep");
    for (size_t i = 0; i < sizeof pre_tokenizers / sizeof *pre_tokenizers; i++)
        if (hf_tok_is_type(pt, pre_tokenizers[i].type))
            return pre_tokenizers[i].fn(ps, pt, depth, err);
    return amn_error_set(err, AMN_E_UNSUPPORTED, "tokenizer.json: pre-tokenizer %s",
                         hf_tok_type_name(pt));
}

int hf_tok_pre_tokenize(hf_pieces *ps, json_object *pt, amn_error *err) {
    return pre_tokenize(ps, pt, 0, err);
}
