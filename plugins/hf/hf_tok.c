/* tokenizer.encode(chktxt) for a tokenizer.json, as Hugging Face tokenizers
 * computes it, and the converter's chkhsh of it: sha256 of the Python repr
 * of the id list. In the library's order: the added tokens are cut out of
 * the text (those not normalized first, then the normalized ones), each
 * other stretch is normalized and pre-tokenized (hf_tok_split.c), each piece
 * goes through the BPE model (merges, ignore_merges, byte_fallback, the
 * unknown token and fuse_unk; byte-level or not), and the post-processor
 * (TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel,
 * Sequence) adds its tokens. Anything else is AMN_E_UNSUPPORTED naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/kit/sha256.h"
#include "hf_tok_int.h"
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

#define MAX_CP HF_TOK_MAX_CP
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

/* ---- the tokenizer ---- */
typedef struct tok {
    strmap vocab;
    pairmap merges;
    bool ignore_merges, byte_fallback, fuse_unk;
    int64_t unk; /* the unknown token's id; -1 none, -2 named but not in the vocabulary */
} tok;

static bool is_null(json_object *o) {
    return !o || json_object_is_type(o, json_type_null);
}

/* The BPE model's options. A subword prefix or suffix and dropout change
 * the encoding in ways the known tokenizers never need. */
static int load_options(tok *t, json_object *model, amn_error *err) {
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < 2; i++) {
        json_object *v = hf_json_get(model, affixes[i]);
        if (!is_null(v) &&
            !(json_object_is_type(v, json_type_string) && json_object_get_string_len(v) == 0))
            return amn_error_set(err, AMN_E_UNSUPPORTED, "tokenizer.json: BPE with %s", affixes[i]);
    }
    json_object *d = hf_json_get(model, "dropout");
    if (!is_null(d) &&
        !((json_object_is_type(d, json_type_double) || json_object_is_type(d, json_type_int)) &&
          json_object_get_double(d) == 0.0))
        return amn_error_set(err, AMN_E_UNSUPPORTED, "tokenizer.json: BPE with dropout");
    static const char *const flags[] = {"ignore_merges", "byte_fallback", "fuse_unk"};
    bool *dst[] = {&t->ignore_merges, &t->byte_fallback, &t->fuse_unk};
    for (size_t i = 0; i < 3; i++) {
        json_object *v = hf_json_get(model, flags[i]);
        if (!is_null(v) && !json_object_is_type(v, json_type_boolean))
            return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: model.%s is not a boolean",
                                 flags[i]);
        *dst[i] = v && json_object_get_boolean(v);
    }
    json_object *unk = hf_json_get(model, "unk_token");
    t->unk = -1;
    if (!is_null(unk)) {
        if (!json_object_is_type(unk, json_type_string))
            return amn_error_set(err, AMN_E_PARSE,
                                 "tokenizer.json: model.unk_token is not a string");
        t->unk = strmap_get(&t->vocab, json_object_get_string(unk),
                            (size_t)json_object_get_string_len(unk));
        if (t->unk < 0) t->unk = -2;
    }
    return AMN_OK;
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

/* A character the vocabulary lacks: its UTF-8 bytes as <0xXX> tokens
 * (byte_fallback), when all of them exist. */
static bool byte_tokens(const tok *t, const char *c, size_t k, uint32_t *ids, size_t *n) {
    uint32_t b[4];
    for (size_t i = 0; i < k; i++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", (unsigned)(uint8_t)c[i]);
        int64_t id = strmap_get(&t->vocab, name, 6);
        if (id < 0) return false;
        b[i] = (uint32_t)id;
    }
    memcpy(ids + *n, b, k * sizeof *b);
    *n += k;
    return true;
}

/* The piece's characters as vocabulary ids, as the library's BPE starts a
 * word: a known character is its token; an unknown one its byte tokens
 * (byte_fallback), else the unknown token (one for a run with fuse_unk),
 * else nothing. A pending unknown token is written before the next known
 * character, not before byte tokens, as the library does. */
static int word_ids(const tok *t, const hf_piece *p, uint32_t *ids, size_t *n, amn_error *err) {
    bool pending = false;
    for (size_t i = 0; i < p->n; i++) {
        char c[4];
        size_t k = hf_utf8_encode(p->cp[i], c);
        int64_t id = strmap_get(&t->vocab, c, k);
        if (id >= 0) {
            if (pending) ids[(*n)++] = (uint32_t)t->unk;
            pending = false;
            ids[(*n)++] = (uint32_t)id;
            continue;
        }
        if (t->byte_fallback && byte_tokens(t, c, k, ids, n)) continue;
        if (t->unk == -1) continue;
        if (t->unk == -2)
            return amn_error_set(err, AMN_E_PARSE,
                                 "tokenizer.json: model.unk_token is not in the vocabulary");
        if (pending && t->fuse_unk) continue;
        if (pending) ids[(*n)++] = (uint32_t)t->unk;
        pending = true;
    }
    if (pending) ids[(*n)++] = (uint32_t)t->unk;
    return AMN_OK;
}

/* BPE of one piece, ids appended to out */
static int bpe(const tok *t, const hf_piece *p, int64_t *out, size_t *n_out, size_t cap,
               amn_error *err) {
    if (p->n > 3 * MAX_CP) return amn_error_set(err, AMN_E_LIMIT, "pre-token too long");
    uint32_t *ids = malloc(4 * p->n * sizeof *ids);
    char *buf = malloc(4 * p->n);
    size_t n = 0, len = 0;
    int rc = ids && buf ? AMN_OK : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < p->n && !rc; i++) len += hf_utf8_encode(p->cp[i], buf + len);
    int64_t whole = !rc && t->ignore_merges ? strmap_get(&t->vocab, buf, len) : -1;
    if (whole >= 0)
        ids[n++] = (uint32_t)whole;
    else if (!rc)
        rc = word_ids(t, p, ids, &n, err);
    for (; !rc;) { /* merge the lowest-ranked pair, leftmost first */
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
    if (!rc && *n_out + n > cap) rc = amn_error_set(err, AMN_E_LIMIT, "encoding too long");
    for (size_t i = 0; i < n && !rc; i++) out[(*n_out)++] = ids[i];
    free(ids);
    free(buf);
    return rc;
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
    if (!pp || json_object_is_type(pp, json_type_null) || hf_tok_is_type(pp, "ByteLevel"))
        return AMN_OK;
    if (depth > 8) return amn_error_set(err, AMN_E_LIMIT, "post_processor nests too deep");
    if (hf_tok_is_type(pp, "Sequence")) {
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
    if (hf_tok_is_type(pp, "TemplateProcessing")) {
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
    } else if (hf_tok_is_type(pp, "RobertaProcessing") || hf_tok_is_type(pp, "BertProcessing")) {
        int64_t cls, sep;
        if (pair_id(pp, "cls", &cls) || pair_id(pp, "sep", &sep) || ns + 2 > cap) {
            rc = amn_error_set(err, AMN_E_PARSE, "tokenizer.json: bad %s", hf_tok_type_name(pp));
        } else {
            ids[(*n)++] = cls;
            memcpy(ids + *n, seq, ns * sizeof *seq);
            *n += ns;
            ids[(*n)++] = sep;
        }
    } else {
        rc = amn_error_set(err, AMN_E_UNSUPPORTED, "tokenizer.json: post-processor %s",
                           hf_tok_type_name(pp));
    }
    free(seq);
    return rc;
}

/* ---- added tokens ---- */
typedef struct added {
    strmap raw;               /* content -> index in the added_tokens list, normalized: false */
    strmap norm;              /* the same for normalized: true (content normalized) */
    size_t max_raw, max_norm; /* longest key, bytes */
    char **owned;             /* the normalized contents */
    size_t n_owned;
} added;

static void added_free(added *a) {
    strmap_free(&a->raw);
    strmap_free(&a->norm);
    for (size_t i = 0; i < a->n_owned; i++) free(a->owned[i]);
    free(a->owned);
}

/* code points as a new UTF-8 string */
static char *cps_utf8(const uint32_t *cp, size_t n, size_t *len) {
    char *s = malloc(4 * n + 1);
    size_t o = 0;
    for (size_t i = 0; s && i < n; i++) o += hf_utf8_encode(cp[i], s + o);
    if (s) s[o] = 0;
    *len = o;
    return s;
}

/* A normalized added token is matched as the normalizer writes it. One of
 * more bytes than the normalizers let the check text's 350 characters grow
 * to never matches: it is left out (its normalization could hit that cap). */
static int add_normalized(added *a, json_object *norm, const char *c, size_t n, int64_t idx,
                          amn_error *err) {
    if (n > 4 * MAX_CP) return AMN_OK;
    uint32_t *cp = malloc((n + 1) * sizeof *cp);
    if (!cp) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    hf_pieces ps = {.budget = REGEX_BUDGET};
    int rc = hf_push_piece(&ps, cp, hf_utf8_decode(c, n, cp, n), err);
    free(cp);
    if (!rc) rc = hf_tok_normalize(&ps, norm, err);
    size_t len = 0;
    char *s = !rc && ps.n == 1 ? cps_utf8(ps.v[0].cp, ps.v[0].n, &len) : NULL;
    hf_free_pieces(&ps);
    if (rc || !s) return rc ? rc : AMN_OK; /* normalized to nothing: never matches */
    a->owned[a->n_owned++] = s;
    strmap_put(&a->norm, s, len, idx);
    if (len > a->max_norm) a->max_norm = len;
    return AMN_OK;
}

static int load_added(added *a, json_object *list, json_object *norm, const amn_limits *lim,
                      amn_error *err) {
    size_t n =
        list && json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
    if (list && !is_null(list) && !json_object_is_type(list, json_type_array))
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: added_tokens is not a list");
    if (n > lim->max_array)
        return amn_error_set(err, AMN_E_LIMIT, "tokenizer.json: %zu added tokens exceed the cap",
                             n);
    if (strmap_init(&a->raw, n) || strmap_init(&a->norm, n) ||
        !(a->owned = calloc(n + 1, sizeof *a->owned)))
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_object *t = json_object_array_get_idx(list, i);
        json_object *c = hf_json_get(t, "content"), *id = hf_json_get(t, "id");
        json_object *nz = hf_json_get(t, "normalized");
        if (!c || !json_object_is_type(c, json_type_string) || !id ||
            !json_object_is_type(id, json_type_int) ||
            (!is_null(nz) && !json_object_is_type(nz, json_type_boolean)))
            return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: added token %zu is malformed",
                                 i);
        size_t len = (size_t)json_object_get_string_len(c);
        if (len == 0) continue;
        if (nz && !json_object_get_boolean(nz)) {
            strmap_put(&a->raw, json_object_get_string(c), len, (int64_t)i);
            if (len > a->max_raw) a->max_raw = len;
            continue;
        }
        int rc = add_normalized(a, norm, json_object_get_string(c), len, (int64_t)i, err);
        if (rc) return rc;
    }
    return AMN_OK;
}

typedef struct span {
    size_t s, e;  /* bytes of the text */
    int64_t item; /* the added token's index, -1 for text */
} span;

/* Leftmost-longest matches of the map's keys in s[0, n) (the library's
 * Aho-Corasick), as spans of text and of tokens. */
static int split_added(const strmap *m, size_t max, const char *s, size_t n, span *out,
                       size_t *nout, size_t cap, amn_error *err) {
    size_t prev = 0, k = 0;
    for (size_t i = 0; i < n; i++) {
        if (((uint8_t)s[i] & 0xC0) == 0x80) continue; /* not a character's start */
        size_t best = 0;
        int64_t item = -1;
        for (size_t len = n - i < max ? n - i : max; len > 0 && item < 0; len--)
            if ((item = strmap_get(m, s + i, len)) >= 0) best = len;
        if (item < 0) continue;
        if (k + 2 > cap) return amn_error_set(err, AMN_E_LIMIT, "too many added tokens");
        if (prev < i) out[k++] = (span){prev, i, -1};
        out[k++] = (span){i, i + best, item};
        prev = i + best;
        i = prev - 1;
    }
    if (prev < n) {
        if (k + 1 > cap) return amn_error_set(err, AMN_E_LIMIT, "too many added tokens");
        out[k++] = (span){prev, n, -1};
    }
    *nout = k;
    return AMN_OK;
}

/* The added token's id; one that strips or must be a single word is
 * matched differently by the library, and none of the known tokenizers has
 * one in the check text. */
static int added_id(json_object *list, int64_t item, int64_t *ids, size_t *n, size_t cap,
                    amn_error *err) {
    json_object *t = json_object_array_get_idx(list, (size_t)item);
    static const char *const flags[] = {"lstrip", "rstrip", "single_word"};
    for (size_t i = 0; i < 3; i++)
        if (hf_json_truthy(hf_json_get(t, flags[i])))
            return amn_error_set(
                err, AMN_E_UNSUPPORTED,
                "tokenizer.json: added token '%.40s' (%s) occurs in the check text",
                json_object_get_string(hf_json_get(t, "content")), flags[i]);
    if (*n >= cap) return amn_error_set(err, AMN_E_LIMIT, "encoding too long");
    ids[(*n)++] = json_object_get_int64(hf_json_get(t, "id"));
    return AMN_OK;
}

/* The normalized text of one stretch between added tokens, then its own
 * split by the normalized added tokens, pre-tokenizer and model. */
static int encode_text(json_object *root, const tok *t, const added *a, const char *s, size_t n,
                       int64_t *ids, size_t *nids, size_t cap, amn_error *err) {
    uint32_t *cps = malloc(4 * MAX_CP * sizeof *cps); /* the normalizers' cap */
    span *sp = malloc(4 * MAX_CP * sizeof *sp);
    char *u = NULL;
    hf_pieces ps = {.budget = REGEX_BUDGET};
    int rc = cps && sp ? AMN_OK : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc) rc = hf_push_piece(&ps, cps, hf_utf8_decode(s, n, cps, MAX_CP), err);
    if (!rc) rc = hf_tok_normalize(&ps, hf_json_get(root, "normalizer"), err);
    size_t nu = 0, nsp = 0;
    if (!rc && ps.n && !(u = cps_utf8(ps.v[0].cp, ps.v[0].n, &nu)))
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    hf_free_pieces(&ps);
    if (!rc && u) rc = split_added(&a->norm, a->max_norm, u, nu, sp, &nsp, 4 * MAX_CP, err);
    json_object *list = hf_json_get(root, "added_tokens");
    for (size_t i = 0; i < nsp && !rc; i++) {
        if (sp[i].item >= 0) {
            rc = added_id(list, sp[i].item, ids, nids, cap, err);
            continue;
        }
        hf_pieces pt = {.budget = REGEX_BUDGET};
        rc = hf_push_piece(&pt, cps,
                           hf_utf8_decode(u + sp[i].s, sp[i].e - sp[i].s, cps, 4 * MAX_CP), err);
        if (!rc) rc = hf_tok_pre_tokenize(&pt, hf_json_get(root, "pre_tokenizer"), err);
        for (size_t j = 0; j < pt.n && !rc; j++) rc = bpe(t, &pt.v[j], ids, nids, cap, err);
        hf_free_pieces(&pt);
    }
    free(u);
    free(sp);
    free(cps);
    return rc;
}

static int encode(json_object *root, const amn_limits *lim, tok *t, const char *text, size_t len,
                  int64_t *ids, size_t *n, size_t cap, amn_error *err) {
    json_object *model = hf_json_get(root, "model");
    json_object *mt = hf_json_get(model, "type");
    if (mt && !hf_tok_is_type(model, "BPE"))
        return amn_error_set(err, AMN_E_UNSUPPORTED, "tokenizer.json: model type %s",
                             hf_tok_type_name(model));
    added a = {0};
    span *sp = malloc(4 * MAX_CP * sizeof *sp);
    size_t nsp = 0;
    int rc = sp ? AMN_OK : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc) rc = load_vocab(t, model, lim, err);
    if (!rc) rc = load_merges(t, model, lim, err);
    if (!rc) rc = load_options(t, model, err);
    json_object *list = hf_json_get(root, "added_tokens");
    if (!rc) rc = load_added(&a, list, hf_json_get(root, "normalizer"), lim, err);
    if (!rc) rc = split_added(&a.raw, a.max_raw, text, len, sp, &nsp, 4 * MAX_CP, err);
    for (size_t i = 0; i < nsp && !rc; i++)
        rc = sp[i].item >= 0
                 ? added_id(list, sp[i].item, ids, n, cap, err)
                 : encode_text(root, t, &a, text + sp[i].s, sp[i].e - sp[i].s, ids, n, cap, err);
    if (!rc) rc = post_process(hf_json_get(root, "post_processor"), ids, n, cap, 0, err);
    added_free(&a);
    free(sp);
    return rc;
}

static void tok_free(tok *t) {
    strmap_free(&t->vocab);
    free(t->merges.keys);
    free(t->merges.rank);
    free(t->merges.id);
}

/* A special token's content: a string or an AddedToken {"content": ...} */
static const char *token_content(json_object *v) {
    if (v && json_object_is_type(v, json_type_object)) v = hf_json_get(v, "content");
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* The token's id as convert_tokens_to_ids finds it: an added token, else the
 * model's vocabulary; -1 when neither has it. */
static int64_t token_id(json_object *root, const char *s) {
    json_object *list = hf_json_get(root, "added_tokens");
    for (size_t i = 0;
         list && json_object_is_type(list, json_type_array) && i < json_object_array_length(list);
         i++) {
        json_object *t = json_object_array_get_idx(list, i);
        const char *c = token_content(t);
        json_object *id = hf_json_get(t, "id");
        if (c && strcmp(c, s) == 0 && id && json_object_is_type(id, json_type_int))
            return json_object_get_int64(id);
    }
    json_object *id = hf_json_get(hf_json_get(hf_json_get(root, "model"), "vocab"), s);
    return id && json_object_is_type(id, json_type_int) ? json_object_get_int64(id) : -1;
}

/* One SpecialToken item of a template, and its entry in special_tokens */
static int template_token(json_object *single, json_object *specials, const char *s, int64_t id) {
    json_object *item = json_object_new_object(), *sp = json_object_new_object();
    json_object *entry = json_object_new_object(), *ids = json_object_new_array();
    int rc = item && sp && entry && ids ? 0 : -1;
    if (!rc) {
        json_object_object_add(sp, "id", json_object_new_string(s));
        json_object_object_add(item, "SpecialToken", sp);
        json_object_array_add(single, item);
        json_object_array_add(ids, json_object_new_int64(id));
        json_object_object_add(entry, "ids", ids);
        json_object_object_add(specials, s, entry);
    } else {
        json_object_put(item), json_object_put(sp), json_object_put(entry), json_object_put(ids);
    }
    return rc;
}

int hf_tok_config_post(json_object *root, json_object *config, amn_error *err) {
    json_object *cls = hf_json_get(config, "tokenizer_class");
    if (!cls || !json_object_is_type(cls, json_type_string)) return AMN_OK;
    const char *name = json_object_get_string(cls);
    if (strcmp(name, "LlamaTokenizerFast") != 0 && strcmp(name, "LlamaTokenizer") != 0)
        return AMN_OK;
    static const char *const keys[][2] = {{"add_bos_token", "bos_token"},
                                          {"add_eos_token", "eos_token"}};
    static const char *const defaults[] = {"<s>", "</s>"};
    json_object *single = json_object_new_array(), *specials = json_object_new_object();
    json_object *post = json_object_new_object();
    int rc = single && specials && post ? AMN_OK : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < 2 && !rc; i++) {
        json_object *add = hf_json_get(config, keys[i][0]);
        bool on = add ? hf_json_truthy(add) : i == 0; /* present but null: off */
        if (i == 1) {                                 /* the text between the bos and eos tokens */
            json_object *item = json_object_new_object(), *seq = json_object_new_object();
            if (!item || !seq) {
                json_object_put(item), json_object_put(seq);
                rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
                break;
            }
            json_object_object_add(seq, "id", json_object_new_string("A"));
            json_object_object_add(item, "Sequence", seq);
            json_object_array_add(single, item);
        }
        if (!on) continue;
        json_object *tok = hf_json_get(config, keys[i][1]);
        const char *s = tok ? token_content(tok) : defaults[i];
        int64_t id = s ? token_id(root, s) : -1;
        if (id < 0)
            rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                               "tokenizer_config.json: %s is on and %s is not a token", keys[i][0],
                               keys[i][1]);
        else if (template_token(single, specials, s, id))
            rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    if (!rc) {
        json_object_object_add(post, "type", json_object_new_string("TemplateProcessing"));
        json_object_object_add(post, "single", single);
        json_object_object_add(post, "special_tokens", specials);
        json_object_object_add(root, "post_processor", post);
        return AMN_OK;
    }
    json_object_put(single), json_object_put(specials), json_object_put(post);
    return rc;
}

int hf_tok_encode(json_object *root, const amn_limits *lim, const char *text, size_t len,
                  int64_t *ids, size_t *n, size_t cap, amn_error *err) {
    *n = 0;
    /* the normalizers' and pre-tokenizers' buffers hold MAX_CP code points */
    if (len > MAX_CP)
        return amn_error_set(err, AMN_E_LIMIT, "encoder: text of %zu bytes exceeds %d", len,
                             MAX_CP);
    tok t = {0};
    int rc = encode(root, lim, &t, text, len, ids, n, cap, err);
    tok_free(&t);
    return rc;
}

int hf_tok_chkhsh(json_object *root, const amn_limits *lim, char out[65], amn_error *err) {
    size_t cap = 4 * MAX_CP, n = 0;
    int64_t *ids = malloc(cap * sizeof *ids);
    char *text = malloc(cap * 24 + 4);
    int rc = ids && text ? hf_tok_encode(root, lim, chktxt, sizeof chktxt - 1, ids, &n, cap, err)
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
    free(ids);
    free(text);
    return rc;
}
