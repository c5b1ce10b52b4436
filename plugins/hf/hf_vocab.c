/* hf_vocab_add: the converter's set_vocab of each family (hf_vocab.h) over
 * the builders of hf_vocab_spm.c, hf_vocab_bpe.c and hf_vocab_special.c. The
 * key/values are collected first and appended to the model only when the
 * whole vocabulary was built. */
#include <string.h>

#include "hf_vocab.h"
#include "hf_vocab_int.h"

/* The fallback chain of LlamaModel.set_vocab once tokenizer.model is
 * missing: LlamaHfVocab takes a byte-fallback BPE with a Sequence decoder and refuses
 * Llama-3-style files (TypeError) and anything else (FileNotFoundError), which
 * fall back to gpt2. */
static int llama_no_spm(hf_vctx *c, amn_error *err) {
    json_object *root;
    int rc = hf_json_load(c->dir, "tokenizer.json", c->lim, &root, err);
    if (rc) return rc;
    if (!root) return amn_error_set(err, AMN_E_IO, "tokenizer.model, tokenizer.json: not found");
    json_object *model = hf_json_get(root, "model");
    json_object *type = hf_json_get(model, "type"), *bf = hf_json_get(model, "byte_fallback");
    json_object *dtype = hf_json_get(hf_json_get(root, "decoder"), "type");
    bool bpe = type && json_object_is_type(type, json_type_string) &&
               strcmp(json_object_get_string(type), "BPE") == 0;
    bool llama3 = bpe && hf_json_truthy(hf_json_get(model, "ignore_merges")) &&
                  !(bf ? hf_json_truthy(bf) : true);
    bool llama_hf = !llama3 && bpe && hf_json_truthy(bf) && dtype &&
                    json_object_is_type(dtype, json_type_string) &&
                    strcmp(json_object_get_string(dtype), "Sequence") == 0;
    if (llama_hf) rc = hf_vocab_llama_hf(c, root, err);
    json_object_put(root);
    return llama_hf ? rc : hf_vocab_gpt2(c, err);
}

static int spm_or(hf_vctx *c, int (*fallback)(hf_vctx *, amn_error *), amn_error *err) {
    bool missing;
    int rc = hf_vocab_spm(c, false, &missing, err);
    return missing ? fallback(c, err) : rc;
}

static int family_llama(hf_vctx *c, amn_error *err) {
    json_object *tc;
    int rc = hf_json_load(c->dir, "tokenizer_config.json", c->lim, &tc, err);
    if (rc) return rc;
    if (hf_file_exists(c->dir, "tekken.json") && !hf_file_exists(c->dir, "tokenizer.json"))
        rc = amn_error_set(err, AMN_E_UNSUPPORTED, "tekken.json: Mistral's tokenizer format");
    json_object *asp = hf_json_get(tc, "add_prefix_space"),
                *cls = hf_json_get(tc, "tokenizer_class");
    if (!rc && asp && !json_object_is_type(asp, json_type_null))
        rc = hf_vkv_bool(c->kvs, "tokenizer.ggml.add_space_prefix", hf_json_truthy(asp), err);
    if (!rc && cls && json_object_is_type(cls, json_type_string) &&
        strcmp(json_object_get_string(cls), "HybridDNATokenizer") == 0)
        rc = amn_error_set(err, AMN_E_UNSUPPORTED, "tokenizer_config.json: HybridDNATokenizer");
    json_object_put(tc);
    if (!rc) rc = spm_or(c, llama_no_spm, err);
    if (rc) return rc;
    if (c->vocab_size == 32016) { /* CodeLlama's infill tokens */
        static const char *const types[] = {"prefix", "suffix", "middle", "eot", NULL};
        static const int64_t ids[] = {32007, 32008, 32009, 32010};
        hf_special_opts so = {.types = types, .fixed_types = types, .fixed_ids = ids};
        rc = hf_special_vocab(c, &so, err);
    }
    if (!rc && c->vocab_size == 49152) /* granite small models */
        rc = hf_vkv_bool(c->kvs, "tokenizer.ggml.add_bos_token", false, err);
    return rc;
}

static int family_gemma(hf_vctx *c, bool codegemma, amn_error *err) {
    bool missing;
    int rc = hf_vocab_spm(c, false, &missing, err);
    if (!rc && codegemma) {
        static const char *const types[] = {"prefix", "suffix", "middle", "fsep", "eot", NULL};
        static const int64_t ids[] = {67, 69, 68, 70, 107};
        hf_special_opts so = {
            .types = types, .fixed_types = types, .fixed_ids = ids, .chat_template_none = true};
        rc = hf_special_vocab(c, &so, err);
    }
    if (!rc) rc = hf_vkv_bool(c->kvs, "tokenizer.ggml.add_space_prefix", false, err);
    return rc;
}

static int family_phi3(hf_vctx *c, amn_error *err) {
    json_object *tc;
    int rc = hf_json_load(c->dir, "tokenizer_config.json", c->lim, &tc, err);
    if (rc) return rc;
    if (tc) {
        json_object *cls = hf_json_get(tc, "tokenizer_class");
        bool gpt2 = cls && json_object_is_type(cls, json_type_string) &&
                    strcmp(json_object_get_string(cls), "GPT2Tokenizer") == 0;
        if (!cls) rc = amn_error_set(err, AMN_E_PARSE, "tokenizer_config.json: no tokenizer_class");
        json_object_put(tc);
        if (rc || gpt2) return rc ? rc : hf_vocab_gpt2(c, err);
    }
    bool missing;
    return hf_vocab_spm(c, true, &missing, err);
}

static int dispatch(hf_vctx *c, const char *family, amn_error *err) {
    if (strcmp(family, "llama") == 0) return family_llama(c, err);
    if (strcmp(family, "qwen2") == 0) return spm_or(c, hf_vocab_gpt2, err);
    if (strcmp(family, "gpt2") == 0) return hf_vocab_gpt2(c, err);
    if (strcmp(family, "gemma") == 0) return family_gemma(c, true, err);
    if (strcmp(family, "gemma2") == 0) return family_gemma(c, false, err);
    if (strcmp(family, "gemma3") == 0)
        return hf_file_exists(c->dir, "tokenizer.model") ? family_gemma(c, false, err)
                                                         : hf_vocab_gpt2(c, err);
    if (strcmp(family, "phi3") == 0) return family_phi3(c, err);
    return amn_error_set(err, AMN_E_INVALID, "vocabulary: unknown family '%s'", family);
}

int hf_vocab_add(amn_model *kv, const char *dir, const char *family, uint64_t vocab_size,
                 const amn_limits *lim, amn_error *err) {
    amn_limits defaults;
    if (!lim) amn_limits_default(&defaults), lim = &defaults;
    /* a folder without any tokenizer file gets no vocabulary (the model
     * side can still be converted and compared) */
    if (!hf_file_exists(dir, "tokenizer.model") && !hf_file_exists(dir, "tokenizer.json") &&
        !hf_file_exists(dir, "tekken.json"))
        return AMN_OK;
    hf_arena arena = {.lim = lim};
    hf_vkvs kvs = {.arena = &arena};
    hf_vctx c = {dir, lim, vocab_size, &arena, &kvs};
    int rc = dispatch(&c, family, err);
    for (size_t i = 0; i < kvs.n && !rc; i++) rc = amn_model_add_kv(kv, &kvs.v[i], err);
    hf_vkv_free(&kvs);
    hf_arena_free(&arena);
    return rc;
}

int hf_vocab_real_count(const char *dir, uint64_t vocab_size, const amn_limits *lim, uint64_t *out,
                        amn_error *err) {
    amn_limits defaults;
    if (!lim) amn_limits_default(&defaults), lim = &defaults;
    hf_arena arena = {.lim = lim};
    int rc;
    if (hf_file_exists(dir, "tokenizer.model")) {
        char *buf;
        size_t n;
        hf_spm_piece *ps;
        uint64_t np;
        rc = hf_file_load(&arena, dir, "tokenizer.model", lim->max_header_bytes, &buf, &n, err);
        if (!rc) rc = hf_spm_parse((const uint8_t *)buf, n, lim, &arena, &ps, &np, err);
        if (!rc) *out = vocab_size ? vocab_size : np;
    } else {
        json_object *root;
        rc = hf_json_load(dir, "tokenizer.json", lim, &root, err);
        if (!rc && !root) rc = amn_error_set(err, AMN_E_IO, "tokenizer.json: not found");
        if (!rc) {
            json_object *v = hf_json_get(hf_json_get(root, "model"), "vocab");
            json_object *a = hf_json_get(root, "added_tokens");
            if (!v || !json_object_is_type(v, json_type_object) ||
                (a && !json_object_is_type(a, json_type_array)))
                rc = amn_error_set(err, AMN_E_PARSE, "tokenizer.json: no model.vocab");
            else
                *out =
                    (uint64_t)json_object_object_length(v) + (a ? json_object_array_length(a) : 0);
            json_object_put(root);
        }
    }
    hf_arena_free(&arena);
    return rc;
}
