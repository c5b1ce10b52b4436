/* _set_vocab_llama_hf: gguf-py's LlamaHfVocab over a byte-fallback BPE
 * tokenizer.json (a Llama-2-style vocabulary shipped without
 * tokenizer.model). The base vocabulary in id order, every score -1000,
 * <0xXX> tokens BYTE, the ids of transformers' all_special_tokens CONTROL;
 * then the added tokens past the base vocabulary, USER_DEFINED unless
 * special. No padding to vocab_size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_vocab_int.h"

#define MAX_SPECIALS 4096

typedef struct specials {
    const char *text[MAX_SPECIALS];
    size_t n;
} specials;

static void add_special(specials *sp, json_object *v) {
    if (v && json_object_is_type(v, json_type_object)) v = hf_json_get(v, "content");
    if (!v || !json_object_is_type(v, json_type_string) || sp->n == MAX_SPECIALS) return;
    const char *t = json_object_get_string(v);
    for (size_t i = 0; i < sp->n; i++)
        if (strcmp(sp->text[i], t) == 0) return;
    sp->text[sp->n++] = t;
}

/* transformers' all_special_tokens: the special-token attributes in their
 * order, then additional_special_tokens, each once; special_tokens_map.json
 * overrides tokenizer_config.json. */
static void collect(specials *sp, json_object *tc, json_object *map) {
    static const char *const attrs[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                        "pad_token", "cls_token", "mask_token"};
    for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++) {
        json_object *v = hf_json_get(map, attrs[i]);
        add_special(sp, v ? v : hf_json_get(tc, attrs[i]));
    }
    json_object *extra = hf_json_get(map, "additional_special_tokens");
    if (!extra) extra = hf_json_get(tc, "additional_special_tokens");
    if (extra && json_object_is_type(extra, json_type_array))
        for (size_t i = 0; i < json_object_array_length(extra); i++)
            add_special(sp, json_object_array_get_idx(extra, i));
}

/* get_vocab(): model vocabulary with the added tokens' ids over it; `byname`
 * maps an added token's text to its id (the last one wins, as in a dict) */
static int64_t vocab_id(json_object *vocab, json_object *byname, const char *t) {
    json_object *v;
    if (json_object_object_get_ex(byname, t, &v)) return json_object_get_int64(v);
    if (json_object_object_get_ex(vocab, t, &v)) return json_object_get_int64(v);
    return -1;
}

typedef struct extra {
    int64_t id;
    size_t at;
} extra;

static int by_id(const void *a, const void *b) {
    const extra *x = a, *y = b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

static bool is_byte_token(const char *s, size_t n) {
    static const char hex[] = "0123456789abcdefABCDEF";
    return n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && s[3] && s[4] && strchr(hex, s[3]) &&
           strchr(hex, s[4]);
}

static bool in_ids(const int64_t *ids, size_t n, int64_t id) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

static int build(hf_vctx *c, json_object *root, json_object *tc, json_object *map, amn_error *err) {
    json_object *vocab = hf_json_get(hf_json_get(root, "model"), "vocab");
    json_object *added = hf_json_get(root, "added_tokens");
    if (!vocab || !json_object_is_type(vocab, json_type_object) ||
        (added && !json_object_is_type(added, json_type_array)))
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: no model.vocab / added_tokens");
    size_t na = added ? json_object_array_length(added) : 0;
    uint64_t base = (uint64_t)json_object_object_length(vocab);
    static specials sp_zero;
    specials sp = sp_zero;
    collect(&sp, tc, map);
    json_object *byname = json_object_new_object();
    if (!byname) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < na; i++) {
        json_object *a = json_object_array_get_idx(added, i), *ct = hf_json_get(a, "content");
        if (ct && json_object_is_type(ct, json_type_string))
            json_object_object_add(
                byname, json_object_get_string(ct),
                json_object_new_int64(json_object_get_int64(hf_json_get(a, "id"))));
    }
    int64_t special_ids[MAX_SPECIALS];
    for (size_t i = 0; i < sp.n; i++) special_ids[i] = vocab_id(vocab, byname, sp.text[i]);
    json_object_put(byname);
    for (size_t i = 0; i < sp.n; i++)
        if (special_ids[i] < 0)
            return amn_error_set(err, AMN_E_PARSE, "special token '%.40s' is not in the vocabulary",
                                 sp.text[i]);
    /* added tokens past the base vocabulary, by id (get_added_vocab sorted) */
    extra *ex = hf_alloc(c->arena, na ? na : 1, sizeof *ex, err);
    if (!ex) return err ? err->code : AMN_E_NOMEM;
    uint64_t n_extra = 0;
    for (size_t i = 0; i < na; i++) {
        int64_t id = json_object_get_int64(hf_json_get(json_object_array_get_idx(added, i), "id"));
        if (id >= 0 && (uint64_t)id >= base) ex[n_extra++] = (extra){id, i};
    }
    qsort(ex, (size_t)n_extra, sizeof *ex, by_id);
    uint64_t total = base + n_extra;
    if (total > c->lim->max_array)
        return amn_error_set(err, AMN_E_LIMIT, "vocabulary: %llu tokens exceed the cap",
                             (unsigned long long)total);
    amn_str *tokens = hf_alloc(c->arena, total ? total : 1, sizeof *tokens, err);
    float *scores = tokens ? hf_alloc(c->arena, total ? total : 1, sizeof *scores, err) : NULL;
    int32_t *types = scores ? hf_alloc(c->arena, total ? total : 1, sizeof *types, err) : NULL;
    bool *seen = types ? hf_alloc(c->arena, base ? base : 1, sizeof *seen, err) : NULL;
    if (!seen) return err ? err->code : AMN_E_NOMEM;
    json_object_object_foreach(vocab, key, val) {
        int64_t id = json_object_get_int64(val);
        if (!json_object_is_type(val, json_type_int) || id < 0 || (uint64_t)id >= base)
            return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: token id of '%.40s' is bad",
                                 key);
        tokens[id] = (amn_str){key, strlen(key)};
        seen[id] = true;
    }
    for (size_t i = 0; i < na; i++) { /* get_vocab: added ids win */
        json_object *a = json_object_array_get_idx(added, i);
        int64_t id = json_object_get_int64(hf_json_get(a, "id"));
        json_object *ct = hf_json_get(a, "content");
        if (!ct || !json_object_is_type(ct, json_type_string))
            return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: added token %zu is malformed",
                                 i);
        if (id >= 0 && (uint64_t)id < base) {
            tokens[id] =
                (amn_str){json_object_get_string(ct), (uint64_t)json_object_get_string_len(ct)};
            seen[id] = true;
        }
    }
    for (uint64_t id = 0; id < base; id++) {
        if (!seen[id])
            return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: no token has id %llu",
                                 (unsigned long long)id);
        char *p = hf_strdup(c->arena, tokens[id].ptr, (size_t)tokens[id].len, err);
        if (!p) return err ? err->code : AMN_E_NOMEM;
        tokens[id].ptr = p;
        scores[id] = -1000.0f;
        types[id] = is_byte_token(p, (size_t)tokens[id].len) ? HF_TT_BYTE
                    : in_ids(special_ids, sp.n, (int64_t)id) ? HF_TT_CONTROL
                                                             : HF_TT_NORMAL;
    }
    uint64_t k = base;
    for (uint64_t e = 0; e < n_extra; e++) {
        if (e && ex[e].id == ex[e - 1].id) continue; /* one entry per id */
        json_object *ct = hf_json_get(json_object_array_get_idx(added, ex[e].at), "content");
        const char *t = json_object_get_string(ct);
        bool special = false;
        for (size_t i = 0; i < sp.n && !special; i++) special = strcmp(sp.text[i], t) == 0;
        char *p = hf_strdup(c->arena, t, (size_t)json_object_get_string_len(ct), err);
        if (!p) return err ? err->code : AMN_E_NOMEM;
        tokens[k] = (amn_str){p, (uint64_t)json_object_get_string_len(ct)};
        scores[k] = -1000.0f;
        types[k++] = special ? HF_TT_CONTROL : HF_TT_USER_DEFINED;
    }
    int rc;
    static const char model[] = "llama", pre[] = "default";
    if ((rc = hf_vkv_str(c->kvs, "tokenizer.ggml.model", model, sizeof model - 1, err)) ||
        (rc = hf_vkv_str(c->kvs, "tokenizer.ggml.pre", pre, sizeof pre - 1, err)) ||
        (rc = hf_vkv_array(c->kvs, "tokenizer.ggml.tokens", AMN_KV_STRING, k, tokens, err)) ||
        (rc = hf_vkv_array(c->kvs, "tokenizer.ggml.scores", AMN_KV_F32, k, scores, err)) ||
        (rc = hf_vkv_array(c->kvs, "tokenizer.ggml.token_type", AMN_KV_I32, k, types, err)))
        return rc;
    hf_special_opts so = {.n_vocab = k};
    return hf_special_vocab(c, &so, err);
}

int hf_vocab_llama_hf(hf_vctx *c, json_object *root, amn_error *err) {
    json_object *tc, *map = NULL;
    int rc = hf_json_load(c->dir, "tokenizer_config.json", c->lim, &tc, err);
    if (!rc) rc = hf_json_load(c->dir, "special_tokens_map.json", c->lim, &map, err);
    if (!rc) rc = build(c, root, tc, map, err);
    json_object_put(tc);
    json_object_put(map);
    return rc;
}
