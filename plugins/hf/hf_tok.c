/* tokenizer.encode(chktxt) for a tokenizer.json, as Hugging Face tokenizers
 * computes it, and the converter's chkhsh of it: sha256 of the Python repr
 * of the id list. Implemented: normalizer none or NFC (the check text is
 * already NFC), pre-tokenizers Split (Isolated, regex or string) and
 * ByteLevel (with or without its GPT-2 regex) alone or in a Sequence, the BPE
 * model with merges and ignore_merges, post-processors TemplateProcessing,
 * RobertaProcessing, BertProcessing, ByteLevel, Sequence. Anything else is
 * AMN_E_UNSUPPORTED naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/kit/sha256.h"
#include "hf_tok_regex.h"
#include "hf_vocab_int.h"

/* convert_hf_to_gguf.py's chktxt, UTF-8 */
static const char chktxt[] =
    "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n\xf0\x9f\x9a\x80 (normal) "
    "\xf0\x9f\x98\xb6\xe2\x80\x8d\xf0\x9f\x8c\xab\xef\xb8\x8f (multiple emojis concatenated) "
    "\xe2\x9c\x85 \xf0\x9f\xa6\x99\xf0\x9f\xa6\x99 3 33 333 3333 33333 333333 3333333 33333333 "
    "3.3 3..3 3...3 "
    "\xe1\x9e\x80\xe1\x9e\xb6\xe1\x9e\x93\xe1\x9f\x8b\xe1\x9e\x8f\xe1\x9f\x82\xe1\x9e\x96\xe1\x9e"
    "\xb7\xe1\x9e\x9f\xe1\x9f\x81\xe1\x9e\x9f\xe1\x9e\xa2\xe1\x9e\xb6\xe1\x9e\x85\xf0\x9f\x98\x81 "
    "?\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8"
    "apple\xe5\xb7\xa5\xe4\xbd\x9c"
    "1314151\xe5\xa4\xa9\xef\xbd"
    "\x9e ------======= \xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe \xd0\xbd\xd0\xb0 "
    "\xd0\x91\xd1\x8a\xd0\xbb\xd0\xb3\xd0\xb0\xd1\x80\xd1\x81\xd0\xba\xd0\xb8 "
    "''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? 'M not "
    "sure I'll make it, 'D you like some tea? We'Ve a'lL";

#define MAX_CP 1024 /* the check text is 350 code points; byte-level 3x that at most */
/* regex steps for one whole encoding; the known tokenizers need ~10^5 */
#define REGEX_BUDGET 50000000u

/* ---- hash tables ---- */
typedef struct strmap {
    const char **keys;
    uint32_t *lens;
    int64_t *vals;
    size_t cap;
} strmap;

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static int strmap_init(strmap *m, size_t n) {
    m->cap = 16;
    while (m->cap < n * 2) m->cap *= 2;
    m->keys = calloc(m->cap, sizeof *m->keys);
    m->lens = calloc(m->cap, sizeof *m->lens);
    m->vals = calloc(m->cap, sizeof *m->vals);
    return m->keys && m->lens && m->vals ? 0 : -1;
}

static void strmap_free(strmap *m) {
    free(m->keys);
    free(m->lens);
    free(m->vals);
}

static size_t strmap_slot(const strmap *m, const char *s, size_t n) {
    size_t i = hash_bytes(s, n) & (m->cap - 1);
    while (m->keys[i] && !(m->lens[i] == n && memcmp(m->keys[i], s, n) == 0))
        i = (i + 1) & (m->cap - 1);
    return i;
}

static void strmap_put(strmap *m, const char *s, size_t n, int64_t v) {
    size_t i = strmap_slot(m, s, n);
    m->keys[i] = s;
    m->lens[i] = (uint32_t)n;
    m->vals[i] = v;
}

static int64_t strmap_get(const strmap *m, const char *s, size_t n) {
    size_t i = strmap_slot(m, s, n);
    return m->keys[i] ? m->vals[i] : -1;
}

typedef struct pairmap {
    uint64_t *keys; /* (a + 1) << 32 | (b + 1); 0 empty */
    uint32_t *rank;
    uint32_t *id;
    size_t cap;
} pairmap;

static size_t pair_slot(const pairmap *m, uint64_t k) {
    size_t i = (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & (m->cap - 1);
    while (m->keys[i] && m->keys[i] != k) i = (i + 1) & (m->cap - 1);
    return i;
}

/* ---- the tokenizer ---- */
typedef struct tok {
    strmap vocab;
    pairmap merges;
    bool ignore_merges;
} tok;

typedef struct piece {
    uint32_t *cp;
    size_t n;
} piece;

typedef struct pieces {
    piece *v;
    size_t n, cap;
    bool byte_level;
    uint64_t budget; /* regex steps left */
} pieces;

static int push_piece(pieces *ps, const uint32_t *cp, size_t n, amn_error *err) {
    if (n == 0) return AMN_OK;
    if (ps->n == ps->cap) {
        size_t nc = ps->cap ? ps->cap * 2 : 64;
        if (nc > 4 * MAX_CP)
            return amn_error_set(err, AMN_E_LIMIT, "pre-tokenizer: too many pieces");
        piece *nv = realloc(ps->v, nc * sizeof *nv);
        if (!nv) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        ps->v = nv;
        ps->cap = nc;
    }
    uint32_t *c = malloc(n * sizeof *c);
    if (!c) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    memcpy(c, cp, n * sizeof *c);
    ps->v[ps->n++] = (piece){c, n};
    return AMN_OK;
}

static void free_pieces(pieces *ps) {
    for (size_t i = 0; i < ps->n; i++) free(ps->v[i].cp);
    free(ps->v);
    ps->v = NULL;
    ps->n = ps->cap = 0;
}

static size_t utf8_decode(const char *s, size_t n, uint32_t *out) {
    size_t k = 0;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n && k < MAX_CP;) {
        uint32_t c = p[i];
        size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (len > 1) c &= 0xFF >> (len + 1);
        for (size_t j = 1; j < len && i + j < n; j++) c = c << 6 | (p[i + j] & 0x3F);
        out[k++] = c;
        i += len;
    }
    return k;
}

static size_t utf8_encode(uint32_t c, char *o) {
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

/* Split every piece on the regex, keeping matches and gaps (Isolated). */
static int split_regex(pieces *ps, const char *pattern, amn_error *err) {
    hf_re *re;
    int rc = hf_re_compile(pattern, &re, err);
    if (rc) return rc;
    pieces out = {0};
    out.byte_level = ps->byte_level;
    for (size_t i = 0; i < ps->n && !rc; i++) {
        const piece *p = &ps->v[i];
        size_t pos = 0, s, e;
        int hit;
        while (!rc && (hit = hf_re_find(re, p->cp, p->n, pos, &s, &e, &ps->budget, err)) == 1) {
            if (e == s) { /* an empty match splits nothing; step over one char */
                if (s >= p->n) break;
                rc = push_piece(&out, p->cp + pos, s + 1 - pos, err);
                pos = s + 1;
                continue;
            }
            rc = push_piece(&out, p->cp + pos, s - pos, err);
            if (!rc) rc = push_piece(&out, p->cp + s, e - s, err);
            pos = e;
        }
        if (hit < 0) rc = err ? err->code : AMN_E_LIMIT;
        if (!rc) rc = push_piece(&out, p->cp + pos, p->n - pos, err);
    }
    hf_re_free(re);
    if (rc) {
        free_pieces(&out);
        return rc;
    }
    out.budget = ps->budget;
    free_pieces(ps);
    *ps = out;
    return AMN_OK;
}

static int split_string(pieces *ps, const char *lit, amn_error *err) {
    /* a literal pattern, escaped into a regex of the same code points */
    size_t n = strlen(lit);
    if (n == 0 || n > 1024)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "pre-tokenizer: Split string");
    char *re = malloc(n * 2 + 1);
    if (!re) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (strchr("\\^$.|?*+()[]{}", lit[i])) re[o++] = '\\';
        re[o++] = lit[i];
    }
    re[o] = 0;
    int rc = split_regex(ps, re, err);
    free(re);
    return rc;
}

static int byte_level(pieces *ps, json_object *pt, amn_error *err) {
    int rc;
    bool prefix = hf_json_truthy(hf_json_get(pt, "add_prefix_space"));
    json_object *ur = hf_json_get(pt, "use_regex");
    bool use_regex = !ur || json_object_get_boolean(ur); /* default true */
    if (prefix)
        for (size_t i = 0; i < ps->n; i++) {
            piece *p = &ps->v[i];
            if (p->n && p->cp[0] == ' ') continue;
            uint32_t *c = malloc((p->n + 1) * sizeof *c);
            if (!c) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
            c[0] = ' ';
            memcpy(c + 1, p->cp, p->n * sizeof *c);
            free(p->cp);
            p->cp = c;
            p->n++;
        }
    if (use_regex && (rc = split_regex(ps, gpt2_pattern, err))) return rc;
    for (size_t i = 0; i < ps->n; i++) {
        piece *p = &ps->v[i];
        uint32_t *c = malloc(p->n * 4 * sizeof *c);
        if (!c) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        size_t k = 0;
        for (size_t j = 0; j < p->n; j++) {
            char b[4];
            size_t nb = utf8_encode(p->cp[j], b);
            for (size_t x = 0; x < nb; x++) c[k++] = byte_char((uint8_t)b[x]);
        }
        free(p->cp);
        p->cp = c;
        p->n = k;
    }
    ps->byte_level = true;
    return AMN_OK;
}

static bool is_type(json_object *o, const char *t) {
    json_object *ty = hf_json_get(o, "type");
    return ty && json_object_is_type(ty, json_type_string) &&
           strcmp(json_object_get_string(ty), t) == 0;
}

static const char *type_name(json_object *o) {
    json_object *ty = hf_json_get(o, "type");
    return ty && json_object_is_type(ty, json_type_string) ? json_object_get_string(ty) : "?";
}

static int pre_tokenize(pieces *ps, json_object *pt, int depth, amn_error *err) {
    if (!pt || json_object_is_type(pt, json_type_null)) return AMN_OK;
    if (depth > 8) return amn_error_set(err, AMN_E_LIMIT, "pre_tokenizer nests too deep");
    if (is_type(pt, "Sequence")) {
        json_object *list = hf_json_get(pt, "pretokenizers");
        if (!list || !json_object_is_type(list, json_type_array))
            return amn_error_set(err, AMN_E_PARSE,
                                 "tokenizer.json: Sequence without pretokenizers");
        for (size_t i = 0; i < json_object_array_length(list); i++) {
            int rc = pre_tokenize(ps, json_object_array_get_idx(list, i), depth + 1, err);
            if (rc) return rc;
        }
        return AMN_OK;
    }
    if (is_type(pt, "ByteLevel")) return byte_level(ps, pt, err);
    if (is_type(pt, "Split")) {
        json_object *pat = hf_json_get(pt, "pattern"), *beh = hf_json_get(pt, "behavior");
        json_object *re = hf_json_get(pat, "Regex"), *str = hf_json_get(pat, "String");
        if (hf_json_truthy(hf_json_get(pt, "invert")) || !beh ||
            !json_object_is_type(beh, json_type_string) ||
            strcmp(json_object_get_string(beh), "Isolated") != 0)
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "tokenizer.json: Split pre-tokenizer other than Isolated");
        if (ps->byte_level)
            return amn_error_set(err, AMN_E_UNSUPPORTED, "tokenizer.json: Split after ByteLevel");
        if (re && json_object_is_type(re, json_type_string))
            return split_regex(ps, json_object_get_string(re), err);
        if (str && json_object_is_type(str, json_type_string))
            return split_string(ps, json_object_get_string(str), err);
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: Split without a pattern");
    }
    return amn_error_set(err, AMN_E_UNSUPPORTED, "tokenizer.json: pre-tokenizer %s", type_name(pt));
}

static int load_vocab(tok *t, json_object *model, const amn_limits *lim, amn_error *err) {
    json_object *vocab = hf_json_get(model, "vocab");
    if (!vocab || !json_object_is_type(vocab, json_type_object))
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: model.vocab is not an object");
    size_t n = (size_t)json_object_object_length(vocab);
    if (n > lim->max_array)
        return amn_error_set(err, AMN_E_LIMIT, "tokenizer.json: %zu tokens exceed the cap", n);
    if (strmap_init(&t->vocab, n)) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    json_object_object_foreach(vocab, key, val) {
        if (!json_object_is_type(val, json_type_int) || json_object_get_int64(val) < 0 ||
            json_object_get_int64(val) > UINT32_MAX)
            return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: token id of '%.40s' is bad",
                                 key);
        strmap_put(&t->vocab, key, strlen(key), json_object_get_int64(val));
    }
    return AMN_OK;
}

static int merge_parts(json_object *m, const char **a, size_t *na, const char **b, size_t *nb) {
    if (json_object_is_type(m, json_type_string)) {
        const char *s = json_object_get_string(m);
        const char *sp = strchr(s, ' ');
        if (!sp || strchr(sp + 1, ' ')) return -1;
        *a = s, *na = (size_t)(sp - s), *b = sp + 1, *nb = strlen(sp + 1);
        return 0;
    }
    if (!json_object_is_type(m, json_type_array) || json_object_array_length(m) != 2) return -1;
    json_object *x = json_object_array_get_idx(m, 0), *y = json_object_array_get_idx(m, 1);
    if (!json_object_is_type(x, json_type_string) || !json_object_is_type(y, json_type_string))
        return -1;
    *a = json_object_get_string(x), *na = (size_t)json_object_get_string_len(x);
    *b = json_object_get_string(y), *nb = (size_t)json_object_get_string_len(y);
    return 0;
}

static int load_merges(tok *t, json_object *model, const amn_limits *lim, amn_error *err) {
    json_object *merges = hf_json_get(model, "merges");
    size_t n = merges && json_object_is_type(merges, json_type_array)
                   ? json_object_array_length(merges)
                   : 0;
    if (n > lim->max_array)
        return amn_error_set(err, AMN_E_LIMIT, "tokenizer.json: %zu merges exceed the cap", n);
    pairmap *pm = &t->merges;
    pm->cap = 16;
    while (pm->cap < n * 2) pm->cap *= 2;
    pm->keys = calloc(pm->cap, sizeof *pm->keys);
    pm->rank = calloc(pm->cap, sizeof *pm->rank);
    pm->id = calloc(pm->cap, sizeof *pm->id);
    if (!pm->keys || !pm->rank || !pm->id) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    char *joined = NULL;
    size_t jcap = 0;
    int rc = AMN_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        const char *a, *b;
        size_t na, nb;
        if (merge_parts(json_object_array_get_idx(merges, i), &a, &na, &b, &nb)) {
            rc = amn_error_set(err, AMN_E_PARSE, "tokenizer.json: merge %zu is malformed", i);
            break;
        }
        if (na + nb > jcap) {
            jcap = (na + nb) * 2;
            char *nj = realloc(joined, jcap);
            if (!nj) {
                rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
                break;
            }
            joined = nj;
        }
        memcpy(joined, a, na);
        memcpy(joined + na, b, nb);
        int64_t ia = strmap_get(&t->vocab, a, na), ib = strmap_get(&t->vocab, b, nb);
        int64_t ij = strmap_get(&t->vocab, joined, na + nb);
        if (ia < 0 || ib < 0 || ij < 0) {
            rc = amn_error_set(err, AMN_E_PARSE,
                               "tokenizer.json: merge %zu is out of the vocabulary", i);
            break;
        }
        uint64_t k = (uint64_t)(ia + 1) << 32 | (uint64_t)(ib + 1);
        size_t s = pair_slot(pm, k);
        pm->keys[s] = k; /* a repeated pair keeps its last rank, as a HashMap collect does */
        pm->rank[s] = (uint32_t)i;
        pm->id[s] = (uint32_t)ij;
    }
    free(joined);
    return rc;
}

/* BPE of one byte-level piece, ids appended to out */
static int bpe(const tok *t, const piece *p, int64_t *out, size_t *n_out, size_t cap,
               amn_error *err) {
    char buf[4 * 3 * MAX_CP];
    size_t len = 0;
    uint32_t ids[3 * MAX_CP];
    size_t n = 0;
    if (p->n > 3 * MAX_CP) return amn_error_set(err, AMN_E_LIMIT, "pre-token too long");
    for (size_t i = 0; i < p->n; i++) {
        char c[4];
        size_t k = utf8_encode(p->cp[i], c);
        memcpy(buf + len, c, k);
        int64_t id = strmap_get(&t->vocab, c, k);
        if (id < 0)
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "tokenizer.json: a byte-level character is not in the vocabulary");
        ids[n++] = (uint32_t)id;
        len += k;
    }
    int64_t whole = t->ignore_merges ? strmap_get(&t->vocab, buf, len) : -1;
    if (whole >= 0) {
        ids[0] = (uint32_t)whole;
        n = 1;
    }
    for (;;) { /* merge the lowest-ranked pair, leftmost first */
        size_t best = SIZE_MAX;
        uint32_t best_rank = UINT32_MAX, best_id = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            uint64_t k = (uint64_t)(ids[i] + 1ull) << 32 | (uint64_t)(ids[i + 1] + 1ull);
            size_t s = pair_slot(&t->merges, k);
            if (t->merges.keys[s] && t->merges.rank[s] < best_rank) {
                best_rank = t->merges.rank[s];
                best_id = t->merges.id[s];
                best = i;
            }
        }
        if (best == SIZE_MAX) break;
        ids[best] = best_id;
        memmove(ids + best + 1, ids + best + 2, (n - best - 2) * sizeof *ids);
        n--;
    }
    if (*n_out + n > cap) return amn_error_set(err, AMN_E_LIMIT, "encoding too long");
    for (size_t i = 0; i < n; i++) out[(*n_out)++] = ids[i];
    return AMN_OK;
}

static int special_ids(json_object *specials, json_object *name, int64_t *out, size_t *n,
                       size_t cap, amn_error *err) {
    json_object *e = name && json_object_is_type(name, json_type_string)
                         ? hf_json_get(specials, json_object_get_string(name))
                         : NULL;
    json_object *ids = hf_json_get(e, "ids");
    if (!ids || !json_object_is_type(ids, json_type_array))
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: template special token unknown");
    for (size_t i = 0; i < json_object_array_length(ids); i++) {
        if (*n >= cap) return amn_error_set(err, AMN_E_LIMIT, "encoding too long");
        out[(*n)++] = json_object_get_int64(json_object_array_get_idx(ids, i));
    }
    return AMN_OK;
}

/* cls/sep of Roberta/Bert processing: ["<s>", 0] */
static int pair_id(json_object *pp, const char *key, int64_t *out) {
    json_object *v = hf_json_get(pp, key);
    if (!v || !json_object_is_type(v, json_type_array) || json_object_array_length(v) != 2)
        return -1;
    *out = json_object_get_int64(json_object_array_get_idx(v, 1));
    return 0;
}

static int post_process(json_object *pp, int64_t *ids, size_t *n, size_t cap, int depth,
                        amn_error *err) {
    if (!pp || json_object_is_type(pp, json_type_null) || is_type(pp, "ByteLevel")) return AMN_OK;
    if (depth > 8) return amn_error_set(err, AMN_E_LIMIT, "post_processor nests too deep");
    if (is_type(pp, "Sequence")) {
        json_object *list = hf_json_get(pp, "processors");
        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
            int rc = post_process(json_object_array_get_idx(list, i), ids, n, cap, depth + 1, err);
            if (rc) return rc;
        }
        return AMN_OK;
    }
    int64_t *seq = malloc((*n ? *n : 1) * sizeof *seq);
    if (!seq) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    size_t ns = *n;
    memcpy(seq, ids, ns * sizeof *seq);
    *n = 0;
    int rc = AMN_OK;
    if (is_type(pp, "TemplateProcessing")) {
        json_object *single = hf_json_get(pp, "single");
        json_object *specials = hf_json_get(pp, "special_tokens");
        for (size_t i = 0; single && i < json_object_array_length(single) && !rc; i++) {
            json_object *it = json_object_array_get_idx(single, i);
            json_object *sp = hf_json_get(it, "SpecialToken");
            if (sp) {
                rc = special_ids(specials, hf_json_get(sp, "id"), ids, n, cap, err);
            } else if (hf_json_get(it, "Sequence")) {
                if (*n + ns > cap)
                    rc = amn_error_set(err, AMN_E_LIMIT, "encoding too long");
                else
                    memcpy(ids + *n, seq, ns * sizeof *seq), *n += ns;
            } else {
                rc = amn_error_set(err, AMN_E_PARSE, "tokenizer.json: bad template item");
            }
        }
    } else if (is_type(pp, "RobertaProcessing") || is_type(pp, "BertProcessing")) {
        int64_t cls, sep;
        if (pair_id(pp, "cls", &cls) || pair_id(pp, "sep", &sep) || ns + 2 > cap) {
            rc = amn_error_set(err, AMN_E_PARSE, "tokenizer.json: bad %s", type_name(pp));
        } else {
            ids[(*n)++] = cls;
            memcpy(ids + *n, seq, ns * sizeof *seq);
            *n += ns;
            ids[(*n)++] = sep;
        }
    } else {
        rc = amn_error_set(err, AMN_E_UNSUPPORTED, "tokenizer.json: post-processor %s",
                           type_name(pp));
    }
    free(seq);
    return rc;
}

static int check_normalizer(json_object *norm, int depth, amn_error *err) {
    if (!norm || json_object_is_type(norm, json_type_null) || is_type(norm, "NFC"))
        return AMN_OK; /* chktxt is NFC already: NFC leaves it as it is */
    if (is_type(norm, "Sequence") && depth < 8) {
        json_object *list = hf_json_get(norm, "normalizers");
        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
            int rc = check_normalizer(json_object_array_get_idx(list, i), depth + 1, err);
            if (rc) return rc;
        }
        return AMN_OK;
    }
    return amn_error_set(err, AMN_E_UNSUPPORTED, "tokenizer.json: normalizer %s", type_name(norm));
}

/* Added tokens are cut out of the text before anything else; none of the
 * known tokenizers has one that occurs in the check text. */
static int check_added(json_object *root, amn_error *err) {
    json_object *added = hf_json_get(root, "added_tokens");
    for (size_t i = 0; added && json_object_is_type(added, json_type_array) &&
                       i < json_object_array_length(added);
         i++) {
        json_object *c = hf_json_get(json_object_array_get_idx(added, i), "content");
        if (c && json_object_is_type(c, json_type_string) && json_object_get_string_len(c) &&
            strstr(chktxt, json_object_get_string(c)))
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "tokenizer.json: added token '%.40s' occurs in the check text",
                                 json_object_get_string(c));
    }
    return AMN_OK;
}

static int encode(json_object *root, const amn_limits *lim, tok *t, int64_t *ids, size_t *n,
                  size_t cap, amn_error *err) {
    json_object *model = hf_json_get(root, "model");
    json_object *mt = hf_json_get(model, "type");
    if (mt && !is_type(model, "BPE"))
        return amn_error_set(err, AMN_E_UNSUPPORTED, "tokenizer.json: model type %s",
                             type_name(model));
    int rc = check_normalizer(hf_json_get(root, "normalizer"), 0, err);
    if (!rc) rc = check_added(root, err);
    if (!rc) rc = load_vocab(t, model, lim, err);
    if (!rc) rc = load_merges(t, model, lim, err);
    if (rc) return rc;
    t->ignore_merges = hf_json_truthy(hf_json_get(model, "ignore_merges"));
    uint32_t cps[MAX_CP];
    size_t ncp = utf8_decode(chktxt, sizeof chktxt - 1, cps);
    pieces ps = {.budget = REGEX_BUDGET};
    rc = push_piece(&ps, cps, ncp, err);
    if (!rc) rc = pre_tokenize(&ps, hf_json_get(root, "pre_tokenizer"), 0, err);
    if (!rc && !ps.byte_level)
        rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                           "tokenizer.json: a BPE model without a ByteLevel pre-tokenizer");
    for (size_t i = 0; i < ps.n && !rc; i++) rc = bpe(t, &ps.v[i], ids, n, cap, err);
    free_pieces(&ps);
    if (!rc) rc = post_process(hf_json_get(root, "post_processor"), ids, n, cap, 0, err);
    return rc;
}

int hf_tok_chkhsh(json_object *root, const amn_limits *lim, char out[65], amn_error *err) {
    tok t = {0};
    size_t cap = 4 * MAX_CP, n = 0;
    int64_t *ids = malloc(cap * sizeof *ids);
    char *text = malloc(cap * 24 + 4);
    int rc = ids && text ? encode(root, lim, &t, ids, &n, cap, err)
                         : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc) { /* Python's str(list): "[1, 2, 3]" */
        size_t o = 0;
        text[o++] = '[';
        for (size_t i = 0; i < n; i++)
            o += (size_t)sprintf(text + o, i ? ", %lld" : "%lld", (long long)ids[i]);
        text[o++] = ']';
        uint8_t h[32];
        kit_sha256_of(text, o, h);
        kit_sha256_hex(h, out);
    }
    strmap_free(&t.vocab);
    free(t.merges.keys);
    free(t.merges.rank);
    free(t.merges.id);
    free(ids);
    free(text);
    return rc;
}
