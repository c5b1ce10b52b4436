/* _create_vocab_sentencepiece / _set_vocab_sentencepiece, and
 * Phi3MiniModel.set_vocab's variant of it: pieces from tokenizer.model, then
 * added_tokens.json, then tokenizer_config.json's added_tokens_decoder (and,
 * for Phi-3, tokenizer.json's added_tokens), over a table of vocab_size
 * "[PAD{i}]" entries. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_vocab_int.h"

typedef struct spm_vocab {
    amn_str *tokens;
    float *scores;
    int32_t *types;
    uint64_t n;
} spm_vocab;

static int set_token(hf_vctx *c, spm_vocab *v, uint64_t id, const char *s, size_t n,
                     amn_error *err) {
    char *p = hf_strdup(c->arena, s, n, err);
    if (!p) return err ? err->code : AMN_E_NOMEM;
    v->tokens[id] = (amn_str){p, n};
    return AMN_OK;
}

/* Python's str.replace("\u2581", " ") for user-defined tokens. */
static int set_user_token(hf_vctx *c, spm_vocab *v, uint64_t id, const char *s, size_t n,
                          amn_error *err) {
    char *p = hf_alloc(c->arena, (uint64_t)n + 1, 1, err);
    if (!p) return err ? err->code : AMN_E_NOMEM;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (n - i >= 3 && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
            p[o++] = ' ';
            i += 3;
        } else {
            p[o++] = s[i++];
        }
    }
    v->tokens[id] = (amn_str){p, o};
    return AMN_OK;
}

static int init_table(hf_vctx *c, spm_vocab *v, uint64_t size, amn_error *err) {
    if (size > c->lim->max_array)
        return amn_error_set(err, AMN_E_LIMIT, "vocabulary: %llu tokens exceed the cap %llu",
                             (unsigned long long)size, (unsigned long long)c->lim->max_array);
    v->n = size;
    v->tokens = hf_alloc(c->arena, size, sizeof *v->tokens, err);
    v->scores = v->tokens ? hf_alloc(c->arena, size, sizeof *v->scores, err) : NULL;
    v->types = v->scores ? hf_alloc(c->arena, size, sizeof *v->types, err) : NULL;
    if (!v->types) return err ? err->code : AMN_E_NOMEM;
    for (uint64_t i = 0; i < size; i++) {
        char buf[32];
        int len = snprintf(buf, sizeof buf, "[PAD%llu]", (unsigned long long)i);
        int rc = set_token(c, v, i, buf, (size_t)len, err);
        if (rc) return rc;
        v->scores[i] = -10000.0f;
        v->types[i] = HF_TT_UNUSED;
    }
    return AMN_OK;
}

/* Python's int(): optional sign, ASCII digits, surrounding white space and
 * single underscores between digits are what int() accepts; token ids in
 * real files are plain digits, so anything else is refused. */
static int parse_id(const char *s, int64_t *out) {
    if (!*s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || (*s != '-' && (*s < '0' || *s > '9'))) return -1;
    *out = v;
    return 0;
}

static int added_tokens_json(hf_vctx *c, spm_vocab *v, amn_error *err) {
    json_object *root;
    int rc = hf_json_load(c->dir, "added_tokens.json", c->lim, &root, err);
    if (rc || !root) return rc;
    json_object_object_foreach(root, key, val) {
        if (!json_object_is_type(val, json_type_int)) {
            rc = amn_error_set(err, AMN_E_PARSE, "added_tokens.json: %.40s is not an integer id",
                               key);
            break;
        }
        int64_t id = json_object_get_int64(val);
        if (id < 0) { /* Python would index from the end of the list */
            rc = amn_error_set(err, AMN_E_UNSUPPORTED, "added_tokens.json: negative id %lld",
                               (long long)id);
            break;
        }
        if ((uint64_t)id >= v->n) continue;
        rc = set_token(c, v, (uint64_t)id, key, strlen(key), err);
        if (rc) break;
        v->scores[id] = -1000.0f;
        v->types[id] = HF_TT_USER_DEFINED;
    }
    json_object_put(root);
    return rc;
}

/* One added token (content, special flag) at id, as the generic or the Phi-3
 * code does it. */
static int add_decoder_token(hf_vctx *c, spm_vocab *v, int64_t id, json_object *data, bool phi3,
                             const char *file, amn_error *err) {
    json_object *content = hf_json_get(data, "content");
    if (!content || !json_object_is_type(content, json_type_string))
        return amn_error_set(err, AMN_E_PARSE, "%s: token %lld has no string content", file,
                             (long long)id);
    const char *s = json_object_get_string(content);
    size_t n = (size_t)json_object_get_string_len(content);
    if (id < 0)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "%s: negative token id %lld", file,
                             (long long)id);
    if ((uint64_t)id >= v->n) {
        if (phi3) /* the Phi-3 code indexes without a check: IndexError */
            return amn_error_set(err, AMN_E_PARSE, "%s: token id %lld is out of range", file,
                                 (long long)id);
        return AMN_OK;
    }
    bool special = hf_json_truthy(hf_json_get(data, "special"));
    int rc;
    if (phi3) {
        rc = set_token(c, v, (uint64_t)id, s, n, err);
        v->types[id] = special ? HF_TT_CONTROL : HF_TT_USER_DEFINED;
    } else if (special || hf_token_looks_special(s, n)) {
        rc = set_token(c, v, (uint64_t)id, s, n, err);
        v->types[id] = HF_TT_CONTROL;
    } else {
        rc = set_user_token(c, v, (uint64_t)id, s, n, err);
        v->types[id] = HF_TT_USER_DEFINED;
    }
    v->scores[id] = -1000.0f;
    return rc;
}

static int added_tokens_decoder(hf_vctx *c, spm_vocab *v, bool phi3, amn_error *err) {
    json_object *root;
    int rc = hf_json_load(c->dir, "tokenizer_config.json", c->lim, &root, err);
    if (rc || !root) return rc;
    json_object *dec = hf_json_get(root, "added_tokens_decoder");
    if (dec && !json_object_is_type(dec, json_type_object)) {
        json_object_put(root);
        return amn_error_set(err, AMN_E_PARSE,
                             "tokenizer_config.json: added_tokens_decoder is not an object");
    }
    if (dec) {
        json_object_object_foreach(dec, key, val) {
            int64_t id;
            if (parse_id(key, &id)) {
                rc = amn_error_set(err, AMN_E_PARSE,
                                   "tokenizer_config.json: added_tokens_decoder key '%.40s' is "
                                   "not an integer",
                                   key);
                break;
            }
            rc = add_decoder_token(c, v, id, val, phi3, "tokenizer_config.json", err);
            if (rc) break;
        }
    }
    json_object_put(root);
    return rc;
}

static int phi3_tokenizer_json(hf_vctx *c, spm_vocab *v, amn_error *err) {
    json_object *root;
    int rc = hf_json_load(c->dir, "tokenizer.json", c->lim, &root, err);
    if (rc || !root) return rc;
    json_object *added = hf_json_get(root, "added_tokens");
    size_t n =
        added && json_object_is_type(added, json_type_array) ? json_object_array_length(added) : 0;
    for (size_t i = 0; i < n && !rc; i++) {
        json_object *t = json_object_array_get_idx(added, i);
        json_object *id = hf_json_get(t, "id");
        if (!id || !json_object_is_type(id, json_type_int))
            rc = amn_error_set(err, AMN_E_PARSE, "tokenizer.json: added token %zu has no id", i);
        else
            rc = add_decoder_token(c, v, json_object_get_int64(id), t, true, "tokenizer.json", err);
    }
    json_object_put(root);
    return rc;
}

int hf_vocab_spm(hf_vctx *c, bool phi3, bool *missing, amn_error *err) {
    *missing = false;
    if (!hf_file_exists(c->dir, "tokenizer.model")) {
        *missing = true;
        return amn_error_set(err, AMN_E_IO, "tokenizer.model: not found");
    }
    char *buf;
    size_t n;
    int rc =
        hf_file_load(c->arena, c->dir, "tokenizer.model", c->lim->max_header_bytes, &buf, &n, err);
    if (rc) return rc;
    hf_spm_piece *ps;
    uint64_t np;
    rc = hf_spm_parse((const uint8_t *)buf, n, c->lim, c->arena, &ps, &np, err);
    if (rc) return rc;
    /* find_hparam(...) or tokenizer.vocab_size(): 0 counts as absent */
    uint64_t size = c->vocab_size ? c->vocab_size : np;
    spm_vocab v;
    rc = init_table(c, &v, size, err);
    if (rc) return rc;
    for (uint64_t i = 0; i < np && i < size; i++) {
        /* USER_DEFINED pieces stay NORMAL: the converter asks only these four */
        int t = ps[i].type;
        v.tokens[i] = (amn_str){ps[i].piece, ps[i].len};
        v.scores[i] = ps[i].score;
        v.types[i] =
            (t == HF_TT_UNKNOWN || t == HF_TT_CONTROL || t == HF_TT_UNUSED || t == HF_TT_BYTE)
                ? t
                : HF_TT_NORMAL;
    }
    if (phi3 && np > size)
        return amn_error_set(err, AMN_E_PARSE,
                             "tokenizer.model: %llu pieces exceed vocab_size %llu",
                             (unsigned long long)np, (unsigned long long)size);
    rc = added_tokens_json(c, &v, err);
    if (!rc) rc = added_tokens_decoder(c, &v, phi3, err);
    if (!rc && phi3) rc = phi3_tokenizer_json(c, &v, err);
    if (rc) return rc;
    hf_vkvs *k = c->kvs;
    static const char model[] = "llama", pre[] = "default";
    if ((rc = hf_vkv_str(k, "tokenizer.ggml.model", model, sizeof model - 1, err)) ||
        (rc = hf_vkv_str(k, "tokenizer.ggml.pre", pre, sizeof pre - 1, err)) ||
        (rc = hf_vkv_array(k, "tokenizer.ggml.tokens", AMN_KV_STRING, v.n, v.tokens, err)) ||
        (rc = hf_vkv_array(k, "tokenizer.ggml.scores", AMN_KV_F32, v.n, v.scores, err)) ||
        (rc = hf_vkv_array(k, "tokenizer.ggml.token_type", AMN_KV_I32, v.n, v.types, err)))
        return rc;
    hf_special_opts so = {.n_vocab = v.n};
    return hf_special_vocab(c, &so, err);
}
