/* get_vocab_base / _set_vocab_gpt2: the tokens of tokenizer.json (model vocab
 * and added tokens, as transformers' get_vocab merges them) padded to
 * vocab_size, their types, the pre-tokenizer name from the check-text hash,
 * then SpecialVocab with the merges. */
#include <stdio.h>
#include <string.h>

#include "hf_vocab_int.h"

typedef struct entry {
    const char *s;
    size_t n;
    json_object *added; /* the added_tokens entry, or NULL */
    bool set;
} entry;

static int put(entry *rev, uint64_t size, int64_t id, const char *s, size_t n, json_object *added,
               amn_error *err) {
    if (id < 0 || (uint64_t)id >= size)
        return amn_error_set(err, AMN_E_PARSE,
                             "tokenizer.json: token id %lld is outside the vocabulary of %llu",
                             (long long)id, (unsigned long long)size);
    rev[id] = (entry){s, n, added, true};
    return AMN_OK;
}

/* Highest id and distinct-token count, for the table size and the assert. */
static int scan(json_object *vocab, json_object *added, int64_t *max_id, uint64_t *count,
                amn_error *err) {
    *max_id = -1;
    *count = 0;
    json_object_object_foreach(vocab, key, val) {
        (void)key;
        if (!json_object_is_type(val, json_type_int))
            return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: a token id is not an integer");
        int64_t id = json_object_get_int64(val);
        if (id > *max_id) *max_id = id;
        ++*count;
    }
    size_t na = json_object_array_length(added);
    for (size_t i = 0; i < na; i++) {
        json_object *t = json_object_array_get_idx(added, i);
        json_object *id = hf_json_get(t, "id"), *c = hf_json_get(t, "content");
        if (!id || !json_object_is_type(id, json_type_int) || !c ||
            !json_object_is_type(c, json_type_string))
            return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: added token %zu is malformed",
                                 i);
        if (json_object_get_int64(id) > *max_id) *max_id = json_object_get_int64(id);
        if (!json_object_object_get_ex(vocab, json_object_get_string(c), NULL)) ++*count;
    }
    return AMN_OK;
}

static int fill(json_object *vocab, json_object *added, entry *rev, uint64_t size, amn_error *err) {
    json_object_object_foreach(vocab, key, val) {
        int rc = put(rev, size, json_object_get_int64(val), key, strlen(key), NULL, err);
        if (rc) return rc;
    }
    size_t na = json_object_array_length(added);
    /* get_vocab: an added token with the text of a model token replaces its id */
    for (size_t i = 0; i < na; i++) {
        json_object *ct = hf_json_get(json_object_array_get_idx(added, i), "content"), *id;
        if (json_object_object_get_ex(vocab, json_object_get_string(ct), &id))
            rev[json_object_get_int64(id)].set = false;
    }
    for (size_t i = 0; i < na; i++) {
        json_object *t = json_object_array_get_idx(added, i);
        json_object *ct = hf_json_get(t, "content");
        int rc = put(rev, size, json_object_get_int64(hf_json_get(t, "id")),
                     json_object_get_string(ct), (size_t)json_object_get_string_len(ct), t, err);
        if (rc) return rc;
    }
    return AMN_OK;
}

static int token_text(hf_vctx *c, const entry *e, amn_str *out, int32_t *type, amn_error *err) {
    const char *s = e->s;
    size_t n = e->n;
    char *p;
    if (!e->added) {
        *type = HF_TT_NORMAL;
    } else if (hf_json_truthy(hf_json_get(e->added, "special")) || hf_token_looks_special(s, n)) {
        /* decode(encode(token)) of an added token gives its text back */
        *type = HF_TT_CONTROL;
    } else {
        *type = HF_TT_USER_DEFINED;
        p = hf_alloc(c->arena, (uint64_t)n + 1, 1, err);
        if (!p) return err ? err->code : AMN_E_NOMEM;
        size_t o = 0;
        for (size_t i = 0; i < n;) {
            if (n - i >= 3 && memcmp(s + i, "\xe2\x96\x81", 3) == 0)
                p[o++] = ' ', i += 3;
            else
                p[o++] = s[i++];
        }
        *out = (amn_str){p, o};
        return AMN_OK;
    }
    p = hf_strdup(c->arena, s, n, err);
    if (!p) return err ? err->code : AMN_E_NOMEM;
    *out = (amn_str){p, n};
    return AMN_OK;
}

static int build(hf_vctx *c, json_object *root, amn_error *err) {
    json_object *vocab = hf_json_get(hf_json_get(root, "model"), "vocab");
    json_object *added = hf_json_get(root, "added_tokens");
    json_object *empty = NULL;
    if (!vocab || !json_object_is_type(vocab, json_type_object))
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: model.vocab is not an object");
    if (!added || !json_object_is_type(added, json_type_array)) {
        if (added)
            return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: added_tokens is not a list");
        added = empty = json_object_new_array();
        if (!added) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    int64_t max_id;
    uint64_t count;
    int rc = scan(vocab, added, &max_id, &count, err);
    uint64_t size = c->vocab_size ? c->vocab_size : count;
    if (!rc && max_id >= 0 && (uint64_t)max_id >= size)
        rc = amn_error_set(err, AMN_E_PARSE,
                           "tokenizer.json: token id %lld is not below vocab_size %llu",
                           (long long)max_id, (unsigned long long)size);
    if (!rc && size > c->lim->max_array)
        rc = amn_error_set(err, AMN_E_LIMIT, "vocabulary: %llu tokens exceed the cap",
                           (unsigned long long)size);
    char hex[65];
    json_object *config = NULL;
    if (!rc) rc = hf_json_load(c->dir, "tokenizer_config.json", c->lim, &config, err);
    if (!rc) rc = hf_tok_config_post(root, config, err);
    json_object_put(config);
    if (!rc) rc = hf_tok_chkhsh(root, c->lim, hex, err);
    const char *pre = rc ? NULL : hf_tok_pre_name(hex);
    if (!rc && !pre)
        rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                           "tokenizer.json: BPE pre-tokenizer not recognized (chkhsh %s); "
                           "llama.cpp's convert_hf_to_gguf.py does not know it either",
                           hex);
    entry *rev = rc ? NULL : hf_alloc(c->arena, size, sizeof *rev, err);
    amn_str *tokens = rev ? hf_alloc(c->arena, size, sizeof *tokens, err) : NULL;
    int32_t *types = tokens ? hf_alloc(c->arena, size, sizeof *types, err) : NULL;
    if (!rc && !types) rc = err ? err->code : AMN_E_NOMEM;
    if (!rc) rc = fill(vocab, added, rev, size, err);
    for (uint64_t i = 0; i < size && !rc; i++) {
        if (rev[i].set) {
            rc = token_text(c, &rev[i], &tokens[i], &types[i], err);
            continue;
        }
        char buf[32];
        int len = snprintf(buf, sizeof buf, "[PAD%llu]", (unsigned long long)i);
        char *p = hf_strdup(c->arena, buf, (size_t)len, err);
        if (!p) rc = err ? err->code : AMN_E_NOMEM;
        tokens[i] = (amn_str){p, (uint64_t)len};
        types[i] = HF_TT_UNUSED;
    }
    json_object_put(empty);
    if (rc) return rc;
    hf_vkvs *k = c->kvs;
    static const char model[] = "gpt2";
    if ((rc = hf_vkv_str(k, "tokenizer.ggml.model", model, sizeof model - 1, err)) ||
        (rc = hf_vkv_str(k, "tokenizer.ggml.pre", pre, strlen(pre), err)) ||
        (rc = hf_vkv_array(k, "tokenizer.ggml.tokens", AMN_KV_STRING, size, tokens, err)) ||
        (rc = hf_vkv_array(k, "tokenizer.ggml.token_type", AMN_KV_I32, size, types, err)))
        return rc;
    return AMN_OK;
}

int hf_vocab_gpt2(hf_vctx *c, amn_error *err) {
    json_object *root;
    int rc = hf_json_load(c->dir, "tokenizer.json", c->lim, &root, err);
    if (rc) return rc;
    if (!root) return amn_error_set(err, AMN_E_IO, "tokenizer.json: not found");
    rc = build(c, root, err);
    json_object_put(root);
    if (rc) return rc;
    hf_special_opts so = {.load_merges = true};
    return hf_special_vocab(c, &so, err);
}
