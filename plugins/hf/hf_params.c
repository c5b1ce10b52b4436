/* Hyperparameters (hf_params.h), after conversion/base.py's TextModel. */
#include "hf_params.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>

#include "hf_config.h"
#include "hf_convert.h"

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

void hf_params_free(hf_params *p) {
    json_object_put(p->cfg);
    json_object_put(p->rope);
    p->cfg = p->rope = NULL;
}

/* {**cfg, **cfg["text_config"]}: a shallow merge, as the converter does. */
static json_object *merged(json_object *cfg) {
    json_object *m = json_object_new_object(), *tc = NULL;
    if (!m) return NULL;
    json_object_object_foreach(cfg, k, v) json_object_object_add(m, k, json_object_get(v));
    if (json_object_object_get_ex(cfg, "text_config", &tc) &&
        json_object_is_type(tc, json_type_object)) {
        json_object_object_foreach(tc, k2, v2) json_object_object_add(m, k2, json_object_get(v2));
    }
    return m;
}

/* TextModel.__init__'s rope_parameters: rope_parameters or rope_scaling,
 * with the global values mirrored into it. */
static int rope_of(hf_params *p, amn_error *err) {
    json_object *base = hf_find(p->cfg, KEYS("rope_parameters"));
    if (!base && !json_object_object_get_ex(p->cfg, "rope_parameters", NULL))
        base = hf_find(p->cfg, KEYS("rope_scaling"));
    if (base && !json_object_is_type(base, json_type_object))
        return amn_error_set(err, AMN_E_PARSE, "config.json: rope_scaling is not an object");
    p->rope = json_object_new_object();
    if (!p->rope) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (base) {
        json_object_object_foreach(base, k, v)
            json_object_object_add(p->rope, k, json_object_get(v));
    }
    if (json_object_object_get_ex(p->rope, "full_attention", NULL) ||
        json_object_object_get_ex(p->rope, "sliding_attention", NULL))
        return AMN_OK;
    json_object *theta =
        hf_find(p->cfg, KEYS("global_rope_theta", "rope_global_theta", "rope_theta_global",
                             "rope_theta", "rotary_emb_base"));
    json_object *local =
        hf_find(p->cfg, KEYS("local_rope_theta", "rope_local_theta", "rope_theta_local",
                             "swa_rope_theta", "rope_local_base_freq"));
    json_object *partial =
        hf_find(p->cfg, KEYS("partial_rotary_factor", "rope_pct", "rope_percent"));
    json_object *orig = hf_find(p->cfg, KEYS("original_max_position_embeddings"));
    if (local) {
        json_object *sw = json_object_new_object();
        json_object_object_add(sw, "rope_theta", json_object_get(local));
        json_object_object_add(p->rope, "sliding_attention", sw);
    }
    json_object *t;
    if (!json_object_object_get_ex(p->rope, "rope_theta", NULL) && theta)
        json_object_object_add(p->rope, "rope_theta", json_object_get(theta));
    if (!json_object_object_get_ex(p->rope, "rope_type", NULL) &&
        json_object_object_get_ex(p->rope, "type", &t) && t)
        json_object_object_add(p->rope, "rope_type", json_object_get(t));
    if (!json_object_object_get_ex(p->rope, "partial_rotary_factor", NULL) && partial)
        json_object_object_add(p->rope, "partial_rotary_factor", json_object_get(partial));
    if (!json_object_object_get_ex(p->rope, "original_max_position_embeddings", NULL) && orig)
        json_object_object_add(p->rope, "original_max_position_embeddings", json_object_get(orig));
    return AMN_OK;
}

int hf_params_read(json_object *cfg, const hf_arch *a, hf_params *p, amn_error *err) {
    (void)a;
    memset(p, 0, sizeof *p);
    if (!(p->cfg = merged(cfg))) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int r = hf_get_u32(p->cfg, KEYS("n_layers", "num_hidden_layers", "n_layer", "num_layers"),
                       &p->block_count, err);
    if (r < 0) return r;
    if (r == 0)
        return amn_error_set(err, AMN_E_PARSE, "config.json: no num_hidden_layers (block count)");
    if ((r = hf_get_u32(p->cfg, KEYS("num_attention_heads", "n_head", "n_heads"), &p->n_head,
                        err)) < 0)
        return r;
    p->has_head = r == 1;
    if ((r = hf_get_u32(p->cfg, KEYS("num_key_value_heads", "n_kv_heads"), &p->n_head_kv, err)) < 0)
        return r;
    p->has_head_kv = r == 1;
    if (!p->has_head_kv) p->n_head_kv = p->n_head;
    if ((r = hf_get_u32(p->cfg, KEYS("hidden_size", "n_embd", "dim"), &p->n_embd, err)) < 0)
        return r;
    p->has_embd = r == 1;
    uint32_t vs = 0;
    if ((r = hf_get_u32(p->cfg, KEYS("vocab_size"), &vs, err)) < 0) return r;
    p->vocab_size = vs;
    json_object *tied = hf_find(p->cfg, KEYS("tie_word_embeddings"));
    p->tied = tied && json_object_is_type(tied, json_type_boolean) && json_object_get_boolean(tied);
    if (p->has_head && p->has_head_kv && p->n_head_kv && p->n_head % p->n_head_kv)
        return amn_error_set(err, AMN_E_PARSE,
                             "config.json: num_attention_heads %u is not a multiple of "
                             "num_key_value_heads %u",
                             p->n_head, p->n_head_kv);
    return rope_of(p, err);
}

/* A number of an object (rope_parameters) as float. */
static int obj_f32(json_object *o, const char *key, float *v, amn_error *err) {
    return hf_get_f32(o, (const char *const[]){key, NULL}, v, err);
}

static int u32_kv(hf_kvs *l, json_object *cfg, const char *const *keys, const char *suffix,
                  amn_error *err) {
    uint32_t v;
    const int r = hf_get_u32(cfg, keys, &v, err);
    if (r <= 0) return r;
    return hf_kv_arch_u32(l, suffix, v, err);
}

static int f32_kv(hf_kvs *l, json_object *cfg, const char *const *keys, const char *suffix,
                  amn_error *err) {
    float v;
    const int r = hf_get_f32(cfg, keys, &v, err);
    if (r <= 0) return r;
    return hf_kv_arch_f32(l, suffix, v, err);
}

/* The rope scaling keys of rope_params' type. */
static int rope_scaling(hf_kvs *l, json_object *rp, amn_error *err) {
    json_object *t = hf_find(rp, KEYS("rope_type"));
    if (!t) return AMN_OK;
    if (!json_object_is_type(t, json_type_string))
        return amn_error_set(err, AMN_E_PARSE, "config.json: rope_type is not a string");
    const char *type = json_object_get_string(t);
    float factor;
    int r = obj_f32(rp, "factor", &factor, err);
    if (r < 0) return r;
    int rc = AMN_OK;
    if (strcmp(type, "linear") == 0 && r == 1) {
        rc = hf_kv_arch_str(l, "rope.scaling.type", "linear", err);
        if (!rc) rc = hf_kv_arch_f32(l, "rope.scaling.factor", factor, err);
    } else if (strcmp(type, "yarn") == 0 && r == 1) {
        rc = hf_kv_arch_str(l, "rope.scaling.type", "yarn", err);
        if (!rc) rc = hf_kv_arch_f32(l, "rope.scaling.factor", factor, err);
        uint32_t orig;
        r = rc ? 0 : hf_get_u32(rp, KEYS("original_max_position_embeddings"), &orig, err);
        if (r < 0) return r;
        if (!rc && r == 0)
            return amn_error_set(err, AMN_E_PARSE,
                                 "config.json: yarn rope scaling without "
                                 "original_max_position_embeddings");
        if (!rc) rc = hf_kv_arch_u32(l, "rope.scaling.original_context_length", orig, err);
        if (!rc)
            rc = f32_kv(l, rp, KEYS("extrapolation_factor"), "rope.scaling.yarn_ext_factor", err);
        if (!rc)
            rc = f32_kv(l, rp, KEYS("attention_factor", "attn_factor"),
                        "rope.scaling.yarn_attn_factor", err);
        if (!rc) rc = f32_kv(l, rp, KEYS("beta_fast"), "rope.scaling.yarn_beta_fast", err);
        if (!rc) rc = f32_kv(l, rp, KEYS("beta_slow"), "rope.scaling.yarn_beta_slow", err);
    } else if (strcmp(type, "su") == 0 || strcmp(type, "longrope") == 0) {
        rc = hf_kv_arch_str(l, "rope.scaling.type", "longrope", err);
    }
    return rc; /* dynamic, llama3 and unknown types write nothing here */
}

/* The expert score function (gguf-py's ExpertGatingFuncType). */
static int gating_func(hf_kvs *l, json_object *cfg, amn_error *err) {
    static const struct {
        const char *name;
        uint32_t type;
    } funcs[] = {{"softmax", 1}, {"sigmoid", 2}, {"sqrtsoftplus", 4}};
    json_object *f =
        hf_find(cfg, KEYS("score_function", "scoring_func", "score_func", "moe_router_activation",
                          "moe_router_activation_func", "expert_selection_fn"));
    if (!f) return AMN_OK;
    const char *name = json_object_is_type(f, json_type_string) ? json_object_get_string(f) : "";
    for (size_t i = 0; i < sizeof funcs / sizeof *funcs; i++)
        if (strcmp(name, funcs[i].name) == 0)
            return hf_kv_arch_u32(l, "expert_gating_func", funcs[i].type, err);
    return amn_error_set(err, AMN_E_PARSE,
                         "config.json: unsupported expert score function %.100s (softmax, "
                         "sigmoid or sqrtsoftplus)",
                         json_object_to_json_string(f));
}

/* TextModel.set_gguf_parameters, then LlamaModel's additions (flags). */
static int text_params(hf_kvs *l, const hf_arch *a, const hf_params *p, uint32_t ftype,
                       amn_error *err) {
    json_object *cfg = p->cfg;
    int rc = hf_kv_arch_u32(l, "block_count", p->block_count, err);
    if (!rc)
        rc = u32_kv(l, cfg,
                    KEYS("max_position_embeddings", "n_ctx", "n_positions", "max_length",
                         "max_sequence_length", "model_max_length"),
                    "context_length", err);
    if (!rc) rc = u32_kv(l, cfg, KEYS("hidden_size", "n_embd", "dim"), "embedding_length", err);
    if (!rc)
        rc = u32_kv(l, cfg,
                    KEYS("prefix_dense_intermediate_size", "dense_intermediate_size",
                         "intermediate_size", "n_inner", "hidden_dim"),
                    "feed_forward_length", err);
    if (!rc)
        rc = u32_kv(l, cfg, KEYS("num_attention_heads", "n_head", "n_heads"),
                    "attention.head_count", err);
    if (!rc)
        rc = u32_kv(l, cfg, KEYS("num_key_value_heads", "n_kv_heads"), "attention.head_count_kv",
                    err);
    json_object *causal;
    if (!rc && json_object_object_get_ex(cfg, "is_causal", &causal) &&
        json_object_is_type(causal, json_type_boolean) && !json_object_get_boolean(causal))
        rc = hf_kv_arch_bool(l, "attention.causal", false, err);
    json_object *rp = p->rope, *full;
    if (json_object_object_get_ex(p->rope, "full_attention", &full) && full) rp = full;
    if (!rc) rc = rope_scaling(l, rp, err);
    if (!rc && json_object_object_get_ex(p->rope, "mrope_section", NULL))
        rc = amn_error_set(err, AMN_E_UNSUPPORTED, "unsupported: mrope_section (multimodal rope)");
    if (!rc) rc = f32_kv(l, rp, KEYS("rope_theta"), "rope.freq_base", err);
    json_object *sw;
    if (!rc && json_object_object_get_ex(p->rope, "sliding_attention", &sw) && sw &&
        json_object_is_type(sw, json_type_object))
        rc = f32_kv(l, sw, KEYS("rope_theta"), "rope.freq_base_swa", err);
    if (!rc)
        rc = f32_kv(l, cfg, KEYS("rms_norm_eps", "norm_eps"), "attention.layer_norm_rms_epsilon",
                    err);
    if (!rc)
        rc = f32_kv(l, cfg, KEYS("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"),
                    "attention.layer_norm_epsilon", err);
    if (!rc)
        rc = u32_kv(l, cfg, KEYS("num_local_experts", "num_experts", "n_routed_experts"),
                    "expert_count", err);
    if (!rc)
        rc = u32_kv(l, cfg, KEYS("num_experts_per_tok", "num_experts_per_token", "top_k_experts"),
                    "expert_used_count", err);
    if (!rc) rc = u32_kv(l, cfg, KEYS("n_group"), "expert_group_count", err);
    if (!rc) rc = u32_kv(l, cfg, KEYS("topk_group"), "expert_group_used_count", err);
    if (!rc) rc = gating_func(l, cfg, err);
    uint32_t head_dim;
    int r = rc ? 0 : hf_get_u32(cfg, KEYS("head_dim"), &head_dim, err);
    if (r < 0) return r;
    if (!rc && r == 1) {
        rc = hf_kv_arch_u32(l, "attention.key_length", head_dim, err);
        if (!rc) rc = hf_kv_arch_u32(l, "attention.value_length", head_dim, err);
    }
    if (!rc) rc = hf_kv_u32(l, "general.file_type", ftype, err);
    /* LlamaModel.set_gguf_parameters */
    if (!rc && (a->flags & HF_A_VOCAB_SIZE_KV)) {
        if (!p->vocab_size && !json_object_object_get_ex(cfg, "vocab_size", NULL))
            return amn_error_set(err, AMN_E_PARSE, "config.json: no vocab_size");
        rc = hf_kv_arch_u32(l, "vocab_size", (uint32_t)p->vocab_size, err);
    }
    if (!rc && (a->flags & HF_A_ROPE_DIM_KV)) {
        uint32_t rope_dim;
        r = hf_get_u32(cfg, KEYS("head_dim"), &rope_dim, err);
        if (r < 0) return r;
        if (r == 0) {
            if (!p->has_embd || !p->has_head || !p->n_head)
                return amn_error_set(err, AMN_E_PARSE,
                                     "config.json: no hidden_size / num_attention_heads");
            rope_dim = p->n_embd / p->n_head;
        }
        rc = hf_kv_arch_u32(l, "rope.dimension_count", rope_dim, err);
    }
    return rc;
}

void hf_llama3_freqs(float base, float factor, float lo, float hi, float old, uint32_t dim,
                     float *v, uint32_t n) {
    const float lo_wave = (float)((double)old / (double)lo),
                hi_wave = (float)((double)old / (double)hi);
    const float two_pi = (float)(2 * M_PI);
    for (uint32_t k = 0; k < n; k++) {
        const float e = (float)(2 * k) / (float)dim;
        const float freq = 1.0f / powf(base, e);
        const float wavelen = (1.0f / freq) * two_pi;
        if (wavelen < hi_wave) {
            v[k] = 1.0f;
        } else if (wavelen > lo_wave) {
            v[k] = factor;
        } else {
            const float smooth = ((1.0f / wavelen) * old - lo) / (hi - lo);
            v[k] = 1.0f / ((1.0f - smooth) / factor + smooth);
        }
    }
}

/* LlamaModel.generate_extra_tensors: llama3's rope_freqs, in float32 as
 * torch computes it (a Python scalar over a tensor is the tensor's
 * reciprocal times the scalar). */
static int llama3_rope(const hf_arch *a, const hf_params *p, hf_out *t, float **values,
                       amn_error *err) {
    *values = NULL;
    json_object *rp = p->rope, *full, *type;
    if (json_object_object_get_ex(p->rope, "full_attention", &full) && full) rp = full;
    if (!(a->flags & HF_A_LLAMA3_ROPE) || !json_object_object_get_ex(rp, "rope_type", &type) ||
        !json_object_is_type(type, json_type_string) ||
        strcasecmp(json_object_get_string(type), "llama3") != 0)
        return AMN_OK;
    float base = 10000.0f, factor = 8.0f, lo = 1.0f, hi = 4.0f, old = 8192.0f;
    double based = 10000.0;
    json_object *bj;
    if (json_object_object_get_ex(rp, "rope_theta", &bj) && bj) based = json_object_get_double(bj);
    base = (float)based;
    int r;
    if ((r = obj_f32(rp, "factor", &factor, err)) < 0 ||
        (r = obj_f32(rp, "low_freq_factor", &lo, err)) < 0 ||
        (r = obj_f32(rp, "high_freq_factor", &hi, err)) < 0 ||
        (r = obj_f32(rp, "original_max_position_embeddings", &old, err)) < 0)
        return r;
    uint32_t dim;
    if ((r = hf_get_u32(p->cfg, KEYS("head_dim"), &dim, err)) < 0) return r;
    if (r == 0) {
        if (!p->n_head)
            return amn_error_set(err, AMN_E_PARSE, "config.json: no num_attention_heads");
        dim = p->n_embd / p->n_head;
    }
    if (dim < 2 || dim > (1u << 20))
        return amn_error_set(err, AMN_E_PARSE, "config.json: head dimension %u", dim);
    const uint32_t n = (dim + 1) / 2;
    float *v = malloc(n * sizeof *v);
    if (!v) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    hf_llama3_freqs(base, factor, lo, hi, old, dim, v, n);
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "rope_freqs.weight");
    t->dtype = AMN_DTYPE_F32;
    t->src = AMN_DTYPE_F32;
    t->ndim = 1;
    t->shape[0] = n;
    t->rows = n;
    t->cols = 1;
    t->nbytes = (uint64_t)n * 4;
    t->values = v;
    *values = v;
    return AMN_OK;
}

/* A required integer / number hparam (hparams["key"] in the converter). */
static int need_u32(hf_kvs *l, json_object *cfg, const char *key, const char *suffix,
                    amn_error *err) {
    uint32_t v;
    const int r = hf_get_u32(cfg, (const char *const[]){key, NULL}, &v, err);
    if (r < 0) return r;
    if (r == 0) return amn_error_set(err, AMN_E_PARSE, "config.json: no %s", key);
    return hf_kv_arch_u32(l, suffix, v, err);
}

static int need_f32(hf_kvs *l, json_object *cfg, const char *key, const char *suffix,
                    amn_error *err) {
    float v;
    const int r = hf_get_f32(cfg, (const char *const[]){key, NULL}, &v, err);
    if (r < 0) return r;
    if (r == 0) return amn_error_set(err, AMN_E_PARSE, "config.json: no %s", key);
    return hf_kv_arch_f32(l, suffix, v, err);
}

/* hparams.get(key, default) */
static int get_u32(json_object *cfg, const char *key, uint32_t def, uint32_t *v, amn_error *err) {
    const int r = hf_get_u32(cfg, (const char *const[]){key, NULL}, v, err);
    if (r == 0) *v = def;
    return r < 0 ? r : AMN_OK;
}

static int get_f32(json_object *cfg, const char *key, float def, float *v, amn_error *err) {
    const int r = hf_get_f32(cfg, (const char *const[]){key, NULL}, v, err);
    if (r == 0) *v = def;
    return r < 0 ? r : AMN_OK;
}

/* GemmaModel / Gemma2Model.set_gguf_parameters: their own list. */
static int gemma_params(hf_kvs *l, const hf_params *p, uint32_t ftype, bool v2, amn_error *err) {
    json_object *cfg = p->cfg;
    int rc = need_u32(l, cfg, "max_position_embeddings", "context_length", err);
    if (!rc) rc = need_u32(l, cfg, "hidden_size", "embedding_length", err);
    if (!rc) rc = hf_kv_arch_u32(l, "block_count", p->block_count, err);
    if (!rc) rc = need_u32(l, cfg, "intermediate_size", "feed_forward_length", err);
    if (!rc) rc = need_u32(l, cfg, "num_attention_heads", "attention.head_count", err);
    if (!rc)
        rc = need_u32(l, cfg,
                      json_object_object_get_ex(cfg, "num_key_value_heads", NULL)
                          ? "num_key_value_heads"
                          : "num_attention_heads",
                      "attention.head_count_kv", err);
    if (!rc) rc = need_f32(l, cfg, "rms_norm_eps", "attention.layer_norm_rms_epsilon", err);
    if (!rc) rc = need_u32(l, cfg, "head_dim", "attention.key_length", err);
    if (!rc) rc = need_u32(l, cfg, "head_dim", "attention.value_length", err);
    if (!rc) rc = hf_kv_u32(l, "general.file_type", ftype, err);
    if (!rc && v2) rc = need_f32(l, cfg, "attn_logit_softcapping", "attn_logit_softcapping", err);
    if (!rc && v2) rc = need_f32(l, cfg, "final_logit_softcapping", "final_logit_softcapping", err);
    if (!rc && v2) rc = need_u32(l, cfg, "sliding_window", "attention.sliding_window", err);
    return rc;
}

/* Gemma3Model.set_gguf_parameters: TextModel's keys, then its defaults
 * (a key set again keeps its first place). */
static int gemma3_params(hf_kvs *l, const hf_arch *a, const hf_params *p, uint32_t ftype,
                         amn_error *err) {
    json_object *cfg = p->cfg, *rp = p->rope, *full;
    if (json_object_object_get_ex(p->rope, "full_attention", &full) && full) rp = full;
    int rc = text_params(l, a, p, ftype, err);
    uint32_t u;
    float f;
    if (!rc && !(rc = get_u32(cfg, "max_position_embeddings", 131072, &u, err)))
        rc = hf_kv_arch_u32(l, "context_length", u, err);
    if (!rc && !(rc = get_u32(cfg, "num_attention_heads", 8, &u, err)))
        rc = hf_kv_arch_u32(l, "attention.head_count", u, err);
    if (!rc && !(rc = get_f32(cfg, "rms_norm_eps", 1e-6f, &f, err)))
        rc = hf_kv_arch_f32(l, "attention.layer_norm_rms_epsilon", f, err);
    if (!rc && !(rc = get_u32(cfg, "head_dim", 256, &u, err))) {
        rc = hf_kv_arch_u32(l, "attention.key_length", u, err);
        if (!rc) rc = hf_kv_arch_u32(l, "attention.value_length", u, err);
    }
    if (!rc && !(rc = get_f32(rp, "rope_theta", 1000000.0f, &f, err)))
        rc = hf_kv_arch_f32(l, "rope.freq_base", f, err);
    if (!rc && hf_find(cfg, (const char *const[]){"attn_logit_softcapping", NULL}))
        return amn_error_set(err, AMN_E_PARSE,
                             "config.json: Gemma 3 has no attn_logit_softcapping");
    if (!rc && !(rc = get_f32(cfg, "final_logit_softcapping", 0.0f, &f, err)) && f != 0.0f)
        rc = hf_kv_arch_f32(l, "final_logit_softcapping", f, err);
    json_object *pat = NULL;
    const bool one = json_object_object_get_ex(cfg, "sliding_window_pattern", &pat) && pat &&
                     json_object_is_type(pat, json_type_int) && json_object_get_int64(pat) == 1;
    if (!rc && !one) rc = need_u32(l, cfg, "sliding_window", "attention.sliding_window", err);
    if (!rc && !(rc = get_u32(cfg, "num_key_value_heads", 4, &u, err)))
        rc = hf_kv_arch_u32(l, "attention.head_count_kv", u, err);
    return rc;
}

/* Phi3MiniModel.set_gguf_parameters. */
static int phi3_params(hf_kvs *l, const hf_params *p, uint32_t ftype, amn_error *err) {
    json_object *cfg = p->cfg, *rp = p->rope, *full;
    if (json_object_object_get_ex(p->rope, "full_attention", &full) && full) rp = full;
    uint32_t n_embd, n_head, v;
    int r = hf_get_u32(cfg, KEYS("hidden_size", "n_embd"), &n_embd, err);
    if (r <= 0) return r < 0 ? r : amn_error_set(err, AMN_E_PARSE, "config.json: no hidden_size");
    r = hf_get_u32(cfg, KEYS("num_attention_heads", "n_head"), &n_head, err);
    if (r <= 0 || !n_head)
        return r < 0 ? r : amn_error_set(err, AMN_E_PARSE, "config.json: no num_attention_heads");
    double pct = 1.0;
    json_object *pj = hf_find(p->rope, KEYS("partial_rotary_factor"));
    if (pj) pct = json_object_get_double(pj);
    r = hf_get_u32(p->rope, KEYS("original_max_position_embeddings"), &v, err);
    if (r <= 0)
        return r < 0 ? r
                     : amn_error_set(err, AMN_E_PARSE,
                                     "config.json: no original_max_position_embeddings");
    int rc = u32_kv(l, cfg, KEYS("n_positions", "max_position_embeddings"), "context_length", err);
    if (!rc) rc = hf_kv_arch_u32(l, "rope.scaling.original_context_length", v, err);
    if (!rc) rc = hf_kv_arch_u32(l, "embedding_length", n_embd, err);
    if (!rc) rc = need_u32(l, cfg, "intermediate_size", "feed_forward_length", err);
    if (!rc) rc = hf_kv_arch_u32(l, "block_count", p->block_count, err);
    if (!rc) rc = hf_kv_arch_u32(l, "attention.head_count", n_head, err);
    if (!rc)
        rc = u32_kv(l, cfg, KEYS("num_key_value_heads", "n_head_kv"), "attention.head_count_kv",
                    err);
    if (!rc) rc = need_f32(l, cfg, "rms_norm_eps", "attention.layer_norm_rms_epsilon", err);
    /* int(rot_pct * n_embd) // n_head, the product in double as Python's */
    if (!rc)
        rc = hf_kv_arch_u32(l, "rope.dimension_count",
                            (uint32_t)((uint64_t)(pct * (double)n_embd) / n_head), err);
    if (!rc) rc = need_f32(l, rp, "rope_theta", "rope.freq_base", err);
    if (!rc) rc = hf_kv_u32(l, "general.file_type", ftype, err);
    if (!rc && !(rc = get_u32(cfg, "sliding_window", 0, &v, err)))
        rc = hf_kv_arch_u32(l, "attention.sliding_window", v, err);
    return rc;
}

/* Qwen2MoeModel.set_gguf_parameters: TextModel's, then the experts' and
 * the shared expert's FFN lengths where config.json has them. */
static int qwen_moe_params(hf_kvs *l, const hf_arch *a, const hf_params *p, uint32_t ftype,
                           amn_error *err) {
    int rc = text_params(l, a, p, ftype, err);
    if (!rc)
        rc = u32_kv(l, p->cfg, KEYS("moe_intermediate_size"), "expert_feed_forward_length", err);
    if (!rc)
        rc = u32_kv(l, p->cfg, KEYS("shared_expert_intermediate_size"),
                    "expert_shared_feed_forward_length", err);
    return rc;
}

/* config.json's object copied (its values shared) without the key drop
 * (NULL: none), for a recipe that edits the hparams TextModel's keys read;
 * NULL when out of memory. */
static json_object *cfg_copy(json_object *cfg, const char *drop) {
    json_object *q = json_object_new_object();
    if (!q) return NULL;
    json_object_object_foreach(cfg, k, v) if (!drop || strcmp(k, drop) != 0)
        json_object_object_add(q, k, json_object_get(v));
    return q;
}

/* A scale GraniteModel writes `if` config.json has it: not when 0 or null. */
static int granite_scale(hf_kvs *l, json_object *cfg, const char *key, const char *suffix,
                         amn_error *err) {
    json_object *j = hf_find(cfg, KEYS(key));
    if (j && !json_object_is_type(j, json_type_int) && !json_object_is_type(j, json_type_double))
        return amn_error_set(err, AMN_E_PARSE, "config.json: %s must be a number", key);
    const double v = j ? json_object_get_double(j) : 0.0;
    return v == 0.0 ? AMN_OK : hf_kv_arch_f32(l, suffix, (float)v, err);
}

/* GraniteModel.set_gguf_parameters: head_dim popped from the hparams, then
 * LlamaModel's keys and the attention, embedding, residual and logit
 * scales (config.json's *_multiplier and logits_scaling). */
static int granite_params(hf_kvs *l, const hf_arch *a, const hf_params *p, uint32_t ftype,
                          amn_error *err) {
    hf_params q = *p;
    if (!(q.cfg = cfg_copy(p->cfg, "head_dim")))
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = text_params(l, a, &q, ftype, err);
    static const char *const scales[][2] = {{"attention_multiplier", "attention.scale"},
                                            {"embedding_multiplier", "embedding_scale"},
                                            {"residual_multiplier", "residual_scale"},
                                            {"logits_scaling", "logit_scale"}};
    for (size_t i = 0; !rc && i < sizeof scales / sizeof *scales; i++)
        rc = granite_scale(l, p->cfg, scales[i][0], scales[i][1], err);
    json_object_put(q.cfg);
    return rc;
}

/* Olmo2Model.set_gguf_parameters: TextModel's; where config.json has a
 * sliding_window (OLMo 3), it and the layers that slide: layer_types'
 * "sliding_attention" entries, else all but every fourth. */
static int olmo2_params(hf_kvs *l, const hf_arch *a, const hf_params *p, uint32_t ftype,
                        amn_error *err) {
    int rc = text_params(l, a, p, ftype, err);
    if (rc || !json_object_object_get_ex(p->cfg, "sliding_window", NULL)) return rc;
    uint32_t sw;
    int r = hf_get_u32(p->cfg, KEYS("sliding_window"), &sw, err);
    if (r <= 0)
        return r < 0 ? r : amn_error_set(err, AMN_E_PARSE, "config.json: sliding_window is null");
    rc = hf_kv_arch_u32(l, "attention.sliding_window", sw, err);
    json_object *types = NULL;
    const bool listed = json_object_object_get_ex(p->cfg, "layer_types", &types);
    if (listed && !json_object_is_type(types, json_type_array))
        return amn_error_set(err, AMN_E_PARSE, "config.json: layer_types is not a list");
    const size_t n = listed ? json_object_array_length(types) : p->block_count;
    if (n > 65536) return amn_error_set(err, AMN_E_LIMIT, "config.json: %zu layers", n);
    bool *pat = malloc(n ? n : 1);
    if (!pat) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_object *t = listed ? json_object_array_get_idx(types, i) : NULL;
        pat[i] = listed ? json_object_is_type(t, json_type_string) &&
                              strcmp(json_object_get_string(t), "sliding_attention") == 0
                        : (i + 1) % 4 != 0;
    }
    if (!rc) rc = hf_kv_arch_bools(l, "attention.sliding_window_pattern", pat, n, err);
    free(pat);
    return rc;
}

/* A required integer of config.json (the converter's hparams[key]). */
static int need_cfg_u32(json_object *cfg, const char *key, uint32_t *v, amn_error *err) {
    const int r = hf_get_u32(cfg, (const char *const[]){key, NULL}, v, err);
    return r < 0 ? r : r ? AMN_OK : amn_error_set(err, AMN_E_PARSE, "config.json: no %s", key);
}

/* An integer key/value from config.json's key where it is there and not
 * null, else def (has_def) or nothing. */
static int u32_or(hf_kvs *l, json_object *cfg, const char *key, bool has_def, uint32_t def,
                  const char *suffix, amn_error *err) {
    uint32_t v = def;
    const int r = hf_get_u32(cfg, (const char *const[]){key, NULL}, &v, err);
    if (r < 0) return r;
    return r || has_def ? hf_kv_arch_u32(l, suffix, v, err) : AMN_OK;
}

/* DeepseekV2Model.set_gguf_parameters: MLA is written as MQA (one KV
 * head), rms_norm_eps defaults to 1e-6; then the latent ranks and head
 * sizes, the leading dense layers, the experts, the rope dimension and
 * yarn's log multiplier (0.1 x mscale_all_dim, kept as the converter's
 * "legacy" value). */
static int deepseek2_params(hf_kvs *l, const hf_arch *a, const hf_params *p, uint32_t ftype,
                            amn_error *err) {
    json_object *cfg = p->cfg, *j;
    hf_params q = *p;
    if (!(q.cfg = cfg_copy(cfg, NULL))) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    json_object_object_add(q.cfg, "num_key_value_heads", json_object_new_int(1));
    if (!json_object_object_get_ex(cfg, "rms_norm_eps", NULL))
        json_object_object_add(q.cfg, "rms_norm_eps", json_object_new_double(1e-6));
    int rc = text_params(l, a, &q, ftype, err);
    json_object_put(q.cfg);
    const bool moe = hf_find(cfg, KEYS("n_routed_experts")) != NULL;
    if (!rc)
        rc = u32_or(l, cfg, "first_k_dense_replace", true, moe ? 0 : p->block_count,
                    "leading_dense_block_count", err);
    uint32_t vocab, kv_rank = 512, rope, nope, vdim;
    if (!rc) rc = need_cfg_u32(cfg, "vocab_size", &vocab, err);
    if (!rc) rc = hf_kv_arch_u32(l, "vocab_size", vocab, err);
    if (!rc) rc = u32_or(l, cfg, "q_lora_rank", false, 0, "attention.q_lora_rank", err);
    if (!rc && (rc = hf_get_u32(cfg, KEYS("kv_lora_rank"), &kv_rank, err)) > 0) rc = AMN_OK;
    if (!rc) rc = need_cfg_u32(cfg, "qk_rope_head_dim", &rope, err);
    if (!rc) rc = need_cfg_u32(cfg, "qk_nope_head_dim", &nope, err);
    if (!rc) rc = need_cfg_u32(cfg, "v_head_dim", &vdim, err);
    if (!rc && ((uint64_t)kv_rank + rope > UINT32_MAX || (uint64_t)nope + rope > UINT32_MAX))
        rc = amn_error_set(err, AMN_E_PARSE, "config.json: head sizes overflow");
    if (!rc) rc = hf_kv_arch_u32(l, "attention.kv_lora_rank", kv_rank, err);
    if (!rc) rc = hf_kv_arch_u32(l, "attention.key_length", kv_rank + rope, err);
    if (!rc) rc = hf_kv_arch_u32(l, "attention.value_length", kv_rank, err);
    if (!rc) rc = hf_kv_arch_u32(l, "attention.key_length_mla", nope + rope, err);
    if (!rc) rc = hf_kv_arch_u32(l, "attention.value_length_mla", vdim, err);
    uint32_t eff;
    const int r =
        rc ? 0 : hf_get_u32(cfg, KEYS("moe_intermediate_size", "intermediate_size"), &eff, err);
    if (r < 0) return r;
    if (!rc && r == 0)
        return amn_error_set(err, AMN_E_PARSE, "config.json: no moe_intermediate_size");
    if (!rc) rc = hf_kv_arch_u32(l, "expert_feed_forward_length", eff, err);
    if (!rc) rc = u32_or(l, cfg, "n_routed_experts", false, 0, "expert_count", err);
    if (!rc) rc = u32_or(l, cfg, "n_shared_experts", true, 0, "expert_shared_count", err);
    if (!rc) rc = f32_kv(l, cfg, KEYS("routed_scaling_factor"), "expert_weights_scale", err);
    if (!rc && (j = hf_find(cfg, KEYS("norm_topk_prob"))) &&
        json_object_is_type(j, json_type_boolean) && json_object_get_boolean(j))
        rc = hf_kv_arch_bool(l, "expert_weights_norm", true, err);
    if (!rc) rc = hf_kv_arch_u32(l, "rope.dimension_count", rope, err);
    if (!rc && (j = hf_find(p->rope, KEYS("mscale_all_dim")))) {
        if (!json_object_is_type(j, json_type_int) && !json_object_is_type(j, json_type_double))
            return amn_error_set(err, AMN_E_PARSE, "config.json: mscale_all_dim must be a number");
        rc = hf_kv_arch_f32(l, "rope.scaling.yarn_log_multiplier",
                            (float)(0.1 * json_object_get_double(j)), err);
    }
    return rc;
}

/* GptOssModel.set_gguf_parameters: TextModel's, then hparams
 * ["sliding_window"] and intermediate_size as the experts' FFN length. */
static int gpt_oss_params(hf_kvs *l, const hf_arch *a, const hf_params *p, uint32_t ftype,
                          amn_error *err) {
    int rc = text_params(l, a, p, ftype, err);
    if (!rc) rc = need_u32(l, p->cfg, "sliding_window", "attention.sliding_window", err);
    if (!rc) rc = need_u32(l, p->cfg, "intermediate_size", "expert_feed_forward_length", err);
    return rc;
}

int hf_params_kv(hf_kvs *l, const hf_arch *a, const hf_params *p, uint32_t ftype, amn_error *err) {
    switch (a->recipe) {
    case HF_P_GEMMA:
        return gemma_params(l, p, ftype, false, err);
    case HF_P_GEMMA2:
        return gemma_params(l, p, ftype, true, err);
    case HF_P_GEMMA3:
        return gemma3_params(l, a, p, ftype, err);
    case HF_P_PHI3:
        return phi3_params(l, p, ftype, err);
    case HF_P_QWENMOE:
        return qwen_moe_params(l, a, p, ftype, err);
    case HF_P_GRANITE:
        return granite_params(l, a, p, ftype, err);
    case HF_P_OLMO2:
        return olmo2_params(l, a, p, ftype, err);
    case HF_P_DEEPSEEK2:
        return deepseek2_params(l, a, p, ftype, err);
    case HF_P_GPT_OSS:
        return gpt_oss_params(l, a, p, ftype, err);
    default:
        return text_params(l, a, p, ftype, err);
    }
}

/* A list of numbers as F32 values (torch.tensor(list, dtype=float32)). */
static int factors(json_object *list, const char *what, uint32_t want, hf_out *t, float **vals,
                   amn_error *err) {
    const size_t n = json_object_array_length(list);
    if (n != want)
        return amn_error_set(err, AMN_E_PARSE,
                             "config.json: %zu rope %s factors, the head dimension wants %u", n,
                             what, want);
    float *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_object *x = json_object_array_get_idx(list, i);
        if (!json_object_is_type(x, json_type_int) && !json_object_is_type(x, json_type_double)) {
            free(v);
            return amn_error_set(err, AMN_E_PARSE, "config.json: a rope %s factor is not a number",
                                 what);
        }
        v[i] = (float)json_object_get_double(x);
    }
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "rope_factors_%s.weight", what);
    t->dtype = t->src = AMN_DTYPE_F32;
    t->ndim = 1;
    t->shape[0] = t->rows = n;
    t->cols = 1;
    t->nbytes = (uint64_t)n * 4;
    t->values = v;
    *vals = v;
    return AMN_OK;
}

/* Phi3MiniModel.generate_extra_tensors: long-context rope factors. */
static int phi3_rope(const hf_params *p, hf_conv *c, amn_error *err) {
    json_object *lf = hf_find(p->rope, KEYS("long_factor"));
    json_object *sf = hf_find(p->rope, KEYS("short_factor"));
    if (!lf || !json_object_is_type(lf, json_type_array) || !json_object_array_length(lf))
        return AMN_OK; /* `if not long_factors` */
    uint32_t max_pos, orig, n_embd, n_head;
    int r = hf_get_u32(p->cfg, KEYS("n_positions", "max_position_embeddings"), &max_pos, err);
    if (r <= 0)
        return r < 0 ? r
                     : amn_error_set(err, AMN_E_PARSE, "config.json: no max_position_embeddings");
    r = hf_get_u32(p->rope, KEYS("original_max_position_embeddings"), &orig, err);
    if (r <= 0 || !orig)
        return r < 0 ? r
                     : amn_error_set(err, AMN_E_PARSE,
                                     "config.json: no original_max_position_embeddings");
    r = hf_get_u32(p->cfg, KEYS("hidden_size", "n_embd"), &n_embd, err);
    if (r <= 0) return r < 0 ? r : amn_error_set(err, AMN_E_PARSE, "config.json: no hidden_size");
    r = hf_get_u32(p->cfg, KEYS("num_attention_heads", "n_head"), &n_head, err);
    if (r <= 0 || !n_head)
        return r < 0 ? r : amn_error_set(err, AMN_E_PARSE, "config.json: no num_attention_heads");
    double pct = 1.0;
    json_object *pj = hf_find(p->rope, KEYS("partial_rotary_factor"));
    if (pj) pct = json_object_get_double(pj);
    const uint64_t rope_dims = (uint64_t)(pct * (double)n_embd) / n_head;
    const double scale = (double)max_pos / (double)orig;
    json_object *tj = hf_find(p->rope, KEYS("rope_type"));
    char type[32] = "";
    if (tj && json_object_is_type(tj, json_type_string))
        for (size_t i = 0; i < sizeof type - 1 && json_object_get_string(tj)[i]; i++)
            type[i] = (char)tolower((unsigned char)json_object_get_string(tj)[i]);
    double attn;
    if (!type[0]) return amn_error_set(err, AMN_E_PARSE, "config.json: rope_scaling has no type");
    if (strcmp(type, "su") == 0 || strcmp(type, "longrope") == 0)
        attn = scale > 1.0 ? sqrt(1 + log(scale) / log((double)orig)) : 1.0;
    else if (strcmp(type, "yarn") == 0)
        attn = scale > 1.0 ? 0.1 * log(scale) + 1.0 : 1.0;
    else
        return amn_error_set(err, AMN_E_UNSUPPORTED, "unsupported: rope scaling type %s", type);
    c->has_attn_factor = true;
    c->attn_factor = (float)attn;
    if (!sf || !json_object_is_type(sf, json_type_array) ||
        !json_object_is_type(lf, json_type_array))
        return amn_error_set(err, AMN_E_PARSE, "config.json: rope_scaling without short_factor");
    if (rope_dims % 2 || rope_dims / 2 > UINT32_MAX)
        return amn_error_set(err, AMN_E_PARSE, "config.json: rope dimension %llu",
                             (unsigned long long)rope_dims);
    r = factors(lf, "long", (uint32_t)(rope_dims / 2), &c->extra[0], &c->extra_val[0], err);
    if (!r) c->n_extra = 1;
    if (!r)
        r = factors(sf, "short", (uint32_t)(rope_dims / 2), &c->extra[1], &c->extra_val[1], err);
    if (!r) c->n_extra = 2;
    return r;
}

int hf_params_extra(const hf_arch *a, const hf_params *p, hf_conv *c, amn_error *err) {
    if (a->recipe == HF_P_PHI3) return phi3_rope(p, c, err);
    int rc = llama3_rope(a, p, &c->extra[0], &c->extra_val[0], err);
    if (!rc && c->extra_val[0]) c->n_extra = 1;
    return rc;
}
