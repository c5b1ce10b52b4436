/* A GGUF's key/values as a Hugging Face folder's files (hf_rev.h):
 * config.json with the family's hyperparameters under transformers' names,
 * generation_config.json, tokenizer_config.json with the special tokens and
 * the chat template, and for BPE (gpt2) vocabularies tokenizer.json. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/byteorder.h"
#include "hf_params.h"
#include "hf_rev.h"

const amn_kv *hf_rev_kv(const amn_model *m, const char *arch, const char *suffix) {
    char key[160];
    if (snprintf(key, sizeof key, "%s.%s", arch, suffix) >= (int)sizeof key) return NULL;
    return amn_model_find_kv(m, key);
}

bool hf_rev_num(const amn_kv *kv, double *v) {
    if (!kv || !kv->data) return false;
    const void *d = kv->data;
    switch (kv->type) {
    case AMN_KV_U8:
        *v = *(const uint8_t *)d;
        return true;
    case AMN_KV_I8:
        *v = *(const int8_t *)d;
        return true;
    case AMN_KV_U16:
        *v = *(const uint16_t *)d;
        return true;
    case AMN_KV_I16:
        *v = *(const int16_t *)d;
        return true;
    case AMN_KV_U32:
        *v = *(const uint32_t *)d;
        return true;
    case AMN_KV_I32:
        *v = *(const int32_t *)d;
        return true;
    case AMN_KV_U64:
        *v = (double)*(const uint64_t *)d;
        return true;
    case AMN_KV_I64:
        *v = (double)*(const int64_t *)d;
        return true;
    case AMN_KV_F32:
        *v = *(const float *)d;
        return true;
    case AMN_KV_F64:
        *v = *(const double *)d;
        return true;
    case AMN_KV_BOOL:
        *v = *(const uint8_t *)d != 0;
        return true;
    default:
        return false;
    }
}

static json_object *str_of(const amn_str *s) {
    return json_object_new_string_len(s->ptr, (int)(s->len > 0x7fffffff ? 0x7fffffff : s->len));
}

/* An arch key as an integer field; false when absent. */
static bool put_int(json_object *o, const hf_rev *r, const char *suffix, const char *field) {
    double v;
    if (!hf_rev_num(hf_rev_kv(r->model, r->arch->gguf_arch, suffix), &v)) return false;
    json_object_object_add(o, field, json_object_new_int64((int64_t)v));
    return true;
}

/* The shortest decimal x of value / scale whose scale x x reads back as
 * value's float: an F32 key as config.json had it (scale 1), or one the
 * converter wrote scaled (DeepSeek's yarn multiplier, 0.1 x mscale). */
static json_object *float_json_scaled(double value, double scale) {
    char buf[64];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, value / scale);
        if ((float)(scale * strtod(buf, NULL)) == (float)value) break;
    }
    if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
    return json_object_new_double_s(strtod(buf, NULL), buf);
}

static json_object *float_json(double v) {
    return float_json_scaled(v, 1.0);
}

static bool put_float(json_object *o, const hf_rev *r, const char *suffix, const char *field) {
    double v;
    if (!hf_rev_num(hf_rev_kv(r->model, r->arch->gguf_arch, suffix), &v)) return false;
    json_object_object_add(o, field, float_json(v));
    return true;
}

static const amn_str *kv_str(const amn_model *m, const char *key) {
    const amn_kv *kv = amn_model_find_kv(m, key);
    return kv && kv->type == AMN_KV_STRING ? kv->data : NULL;
}

static bool token_id(const amn_model *m, const char *which, double *id) {
    char key[96];
    snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", which);
    return hf_rev_num(amn_model_find_kv(m, key), id);
}

static const char *torch_name(amn_dtype d) {
    return d == AMN_DTYPE_F32 ? "float32" : d == AMN_DTYPE_F16 ? "float16" : "bfloat16";
}

/* The Hugging Face class and model_type of a GGUF family (with stacked
 * experts or not) where they are not its first name and the GGUF name. */
static const struct {
    const char *arch;
    bool experts;
    const char *cls, *type;
} classes[] = {
    {"llama", true, "MixtralForCausalLM", "mixtral"},
    {"llama", false, "LlamaForCausalLM", "llama"},
    {"gemma3", false, "Gemma3ForCausalLM", "gemma3_text"},
    {"qwen2moe", true, "Qwen2MoeForCausalLM", "qwen2_moe"},
    {"qwen3moe", true, "Qwen3MoeForCausalLM", "qwen3_moe"},
};

static void class_of(const hf_rev *r, const char **cls, const char **type) {
    const char *a = r->arch->gguf_arch;
    *cls = r->arch->hf_names[0], *type = a;
    if (strcmp(a, "olmo2") == 0 && hf_rev_kv(r->model, a, "attention.sliding_window")) {
        *cls = "Olmo3ForCausalLM", *type = "olmo3"; /* OLMo 3: OLMo 2 with a sliding window */
        return;
    }
    double gate = 0;
    if (strcmp(a, "deepseek2") == 0 &&
        hf_rev_num(hf_rev_kv(r->model, a, "expert_gating_func"), &gate) && gate == 2) {
        *cls = "DeepseekV3ForCausalLM", *type = "deepseek_v3"; /* sigmoid scores: V3 */
        return;
    }
    if (strcmp(a, "deepseek2") == 0) {
        *cls = "DeepseekV2ForCausalLM", *type = "deepseek_v2";
        return;
    }
    for (size_t i = 0; i < sizeof classes / sizeof *classes; i++)
        if (strcmp(classes[i].arch, a) == 0 && classes[i].experts == (r->n_experts != 0)) {
            *cls = classes[i].cls, *type = classes[i].type;
            return;
        }
}

/* A 1-D F32 tensor of the GGUF (Phi-3's rope factors) as a JSON array, or
 * NULL when absent or not that. */
static json_object *f32_array(const amn_model *m, const char *name) {
    const int64_t i = amn_model_find(m, name);
    const amn_tensor *t = i >= 0 ? amn_model_tensor(m, (size_t)i) : NULL;
    if (!t || t->dtype != AMN_DTYPE_F32 || t->ndim != 1 || !t->data || t->shape[0] > 65536 ||
        (t->flags & AMN_TENSOR_STRIDED) || t->extent < t->shape[0] * 4)
        return NULL;
    amn_error err = {0};
    const float *v = amn_model_fetch(m, t->data, (size_t)t->shape[0] * 4, 0, &err);
    if (!v) return NULL;
    json_object *a = json_object_new_array();
    for (uint64_t k = 0; k < t->shape[0]; k++) {
        /* tensor bytes: little-endian, not necessarily aligned */
        json_object_array_add(a, float_json(amn_load_le_f32((const char *)v + k * 4)));
    }
    return a;
}

/* Phi-3's long context: rope_scaling from the factor tensors; the
 * attention factor tells the converter's yarn from longrope. */
static json_object *phi3_rope(const hf_rev *r) {
    json_object *lf = f32_array(r->model, "rope_factors_long.weight"),
                *sf = lf ? f32_array(r->model, "rope_factors_short.weight") : NULL;
    if (!lf || !sf) {
        json_object_put(lf);
        return NULL;
    }
    double ctx = 0, orig = 0, attn = 0;
    hf_rev_num(hf_rev_kv(r->model, "phi3", "context_length"), &ctx);
    hf_rev_num(hf_rev_kv(r->model, "phi3", "rope.scaling.original_context_length"), &orig);
    const bool have_attn =
        hf_rev_num(hf_rev_kv(r->model, "phi3", "rope.scaling.attn_factor"), &attn);
    const double scale = orig > 0 ? ctx / orig : 1.0;
    const bool yarn = have_attn && scale > 1.0 && orig > 1.0 &&
                      (float)attn == (float)(0.1 * log(scale) + 1.0) &&
                      (float)attn != (float)sqrt(1 + log(scale) / log(orig));
    json_object *o = json_object_new_object();
    json_object_object_add(o, "type", json_object_new_string(yarn ? "yarn" : "longrope"));
    json_object_object_add(o, "long_factor", lf);
    json_object_object_add(o, "short_factor", sf);
    return o;
}

/* Llama 3's rope_scaling, which the GGUF holds only as the generated
 * rope_freqs: the parameters (Llama 3's own first) whose rope_freqs equals
 * the GGUF's bit for bit, or NULL when none does. */
static json_object *llama3_rope(const hf_rev *r) {
    json_object *arr = f32_array(r->model, "rope_freqs.weight");
    const size_t n = arr ? json_object_array_length(arr) : 0;
    double base = 10000, hd = 0, emb = 0, nh = 0;
    const char *a = r->arch->gguf_arch;
    hf_rev_num(hf_rev_kv(r->model, a, "rope.freq_base"), &base);
    if (!hf_rev_num(hf_rev_kv(r->model, a, "attention.key_length"), &hd) &&
        hf_rev_num(hf_rev_kv(r->model, a, "embedding_length"), &emb) &&
        hf_rev_num(hf_rev_kv(r->model, a, "attention.head_count"), &nh) && nh >= 1)
        hd = (double)((uint32_t)emb / (uint32_t)nh);
    const uint32_t dim = hd >= 2 && hd <= 65536 ? (uint32_t)hd : 0;
    if (!n || n > 4096 || !dim || (dim + 1) / 2 != n) {
        json_object_put(arr);
        return NULL;
    }
    float want[4096], got[4096], factor = 1.0f;
    for (size_t k = 0; k < n; k++) {
        want[k] = (float)json_object_get_double(json_object_array_get_idx(arr, k));
        if (want[k] > factor) factor = want[k];
    }
    json_object_put(arr);
    static const float los[] = {1, 2, 0.5f}, his[] = {4, 2, 8, 1, 16},
                       olds[] = {8192, 256, 512, 1024, 2048, 4096, 16384, 32768, 65536};
    json_object *o = NULL;
    for (size_t c = 0; c < sizeof olds / sizeof *olds && !o; c++)
        for (size_t a = 0; a < 3 && !o; a++)
            for (size_t b = 0; b < 5 && !o; b++) {
                if (his[b] <= los[a]) continue;
                hf_llama3_freqs((float)base, factor, los[a], his[b], olds[c], dim, got,
                                (uint32_t)n);
                if (memcmp(got, want, n * sizeof *got) != 0) continue;
                o = json_object_new_object();
                json_object_object_add(o, "factor", float_json(factor));
                json_object_object_add(o, "low_freq_factor", float_json(los[a]));
                json_object_object_add(o, "high_freq_factor", float_json(his[b]));
                json_object_object_add(o, "original_max_position_embeddings",
                                       json_object_new_int64((int64_t)olds[c]));
                json_object_object_add(o, "rope_type", json_object_new_string("llama3"));
            }
    return o;
}

static json_object *rope_scaling(const hf_rev *r) {
    if (strcmp(r->arch->gguf_arch, "phi3") == 0) return phi3_rope(r);
    if ((r->arch->flags & HF_A_LLAMA3_ROPE) && amn_model_find(r->model, "rope_freqs.weight") >= 0)
        return llama3_rope(r);
    const amn_str *t = NULL;
    char key[96];
    snprintf(key, sizeof key, "%s.rope.scaling.type", r->arch->gguf_arch);
    t = kv_str(r->model, key);
    if (!t || (t->len == 4 && memcmp(t->ptr, "none", 4) == 0)) return NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "rope_type", str_of(t));
    json_object_object_add(o, "type", str_of(t));
    put_float(o, r, "rope.scaling.factor", "factor");
    put_int(o, r, "rope.scaling.original_context_length", "original_max_position_embeddings");
    /* yarn's own parameters, under transformers' names */
    put_float(o, r, "rope.scaling.yarn_ext_factor", "extrapolation_factor");
    put_float(o, r, "rope.scaling.yarn_attn_factor", "attention_factor");
    put_float(o, r, "rope.scaling.yarn_beta_fast", "beta_fast");
    put_float(o, r, "rope.scaling.yarn_beta_slow", "beta_slow");
    return o;
}

/* OLMo 3's layer_types from the GGUF's sliding_window_pattern (bools). */
static void layer_types(json_object *c, const hf_rev *r) {
    char key[96];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", r->arch->gguf_arch);
    const amn_kv *kv = amn_model_find_kv(r->model, key);
    if (!kv || kv->type != AMN_KV_ARRAY || kv->elem_type != AMN_KV_BOOL) return;
    json_object *a = json_object_new_array();
    for (uint64_t i = 0; i < kv->count; i++)
        json_object_array_add(a, json_object_new_string(((const uint8_t *)kv->data)[i]
                                                            ? "sliding_attention"
                                                            : "full_attention"));
    json_object_object_add(c, "layer_types", a);
}

/* DeepseekV2Model's keys under DeepSeek's config.json names: the latent
 * ranks and head sizes, the experts and their routing (topk_method from
 * the router's correction bias), yarn's mscale_all_dim from the log
 * multiplier the converter wrote as 0.1 x it. */
static void deepseek2_config(json_object *c, const hf_rev *r) {
    const char *a = r->arch->gguf_arch;
    double rope = 0, kl = 0, vl = 0, gate = 0, norm = 0;
    put_int(c, r, "attention.head_count", "num_key_value_heads"); /* MLA: one per head */
    if (!put_int(c, r, "attention.q_lora_rank", "q_lora_rank"))
        json_object_object_add(c, "q_lora_rank", NULL);
    put_int(c, r, "attention.kv_lora_rank", "kv_lora_rank");
    put_int(c, r, "rope.dimension_count", "qk_rope_head_dim");
    if (hf_rev_num(hf_rev_kv(r->model, a, "rope.dimension_count"), &rope) &&
        hf_rev_num(hf_rev_kv(r->model, a, "attention.key_length_mla"), &kl) && kl >= rope)
        json_object_object_add(c, "qk_nope_head_dim", json_object_new_int64((int64_t)(kl - rope)));
    if (hf_rev_num(hf_rev_kv(r->model, a, "attention.value_length_mla"), &vl))
        json_object_object_add(c, "v_head_dim", json_object_new_int64((int64_t)vl));
    put_int(c, r, "leading_dense_block_count", "first_k_dense_replace");
    put_int(c, r, "expert_shared_count", "n_shared_experts");
    put_int(c, r, "expert_group_count", "n_group");
    put_int(c, r, "expert_group_used_count", "topk_group");
    put_float(c, r, "expert_weights_scale", "routed_scaling_factor");
    hf_rev_num(hf_rev_kv(r->model, a, "expert_weights_norm"), &norm);
    json_object_object_add(c, "norm_topk_prob", json_object_new_boolean(norm != 0));
    if (hf_rev_num(hf_rev_kv(r->model, a, "expert_gating_func"), &gate))
        json_object_object_add(c, "scoring_func",
                               json_object_new_string(gate == 2   ? "sigmoid"
                                                      : gate == 4 ? "sqrtsoftplus"
                                                                  : "softmax"));
    bool bias = false; /* the router's correction bias: V3's noaux_tc routing */
    for (size_t i = 0; !bias && i < amn_model_tensor_count(r->model); i++) {
        const char *n = amn_model_tensor(r->model, i)->name;
        const size_t ln = strlen(n);
        bias = ln >= 17 && strcmp(n + ln - 17, ".exp_probs_b.bias") == 0;
    }
    json_object_object_add(c, "topk_method", json_object_new_string(bias ? "noaux_tc" : "greedy"));
}

/* yarn's mscale / mscale_all_dim (DeepSeek): the shortest decimal x whose
 * 0.1 x the converter writes as the GGUF's multiplier. */
static void deepseek2_mscale(json_object *rs, const hf_rev *r) {
    double mul;
    if (!rs ||
        !hf_rev_num(hf_rev_kv(r->model, r->arch->gguf_arch, "rope.scaling.yarn_log_multiplier"),
                    &mul))
        return;
    json_object_object_add(rs, "mscale", float_json_scaled(mul, 0.1));
    json_object_object_add(rs, "mscale_all_dim", float_json_scaled(mul, 0.1));
}

static json_object *config_json(const hf_rev *r) {
    json_object *c = json_object_new_object();
    const char *cls, *type;
    class_of(r, &cls, &type);
    json_object *archs = json_object_new_array();
    json_object_array_add(archs, json_object_new_string(cls));
    json_object_object_add(c, "architectures", archs);
    json_object_object_add(c, "model_type", json_object_new_string(type));
    put_int(c, r, "embedding_length", "hidden_size");
    put_int(c, r, "feed_forward_length", "intermediate_size");
    put_int(c, r, "attention.head_count", "num_attention_heads");
    const bool mla = (r->arch->flags & HF_A_MLA) != 0;
    if (!mla) put_int(c, r, "attention.head_count_kv", "num_key_value_heads");
    put_int(c, r, "block_count", "num_hidden_layers");
    put_int(c, r, "context_length", "max_position_embeddings");
    put_float(c, r, "attention.layer_norm_rms_epsilon", "rms_norm_eps");
    put_float(c, r, "rope.freq_base", "rope_theta");
    if (!mla) put_int(c, r, "attention.key_length", "head_dim"); /* MLA's is the latent's */
    /* 0 is the converter's writing of a null window (Phi-3): null again
     * (transformers takes any number as a window's width) */
    double sw;
    if (hf_rev_num(hf_rev_kv(r->model, r->arch->gguf_arch, "attention.sliding_window"), &sw))
        json_object_object_add(c, "sliding_window",
                               sw == 0 ? NULL : json_object_new_int64((int64_t)sw));
    put_float(c, r, "rope.freq_base_swa", "rope_local_base_freq");
    put_float(c, r, "attn_logit_softcapping", "attn_logit_softcapping");
    put_float(c, r, "final_logit_softcapping", "final_logit_softcapping");
    if (strcmp(r->arch->gguf_arch, "gemma2") == 0) /* not in the GGUF: Gemma 2's usual value */
        put_int(c, r, "attention.key_length", "query_pre_attn_scalar");
    if (r->n_experts) {
        put_int(c, r, "expert_count", r->arch->experts->config_key);
        put_int(c, r, "expert_used_count", "num_experts_per_tok");
        put_int(c, r, "expert_feed_forward_length", "moe_intermediate_size");
        put_int(c, r, "expert_shared_feed_forward_length", "shared_expert_intermediate_size");
    }
    /* llama.cpp normalises Qwen3-MoE's top-k routing weights and not
     * Qwen2-MoE's (llama-model.cpp); transformers' defaults differ */
    if (strcmp(r->arch->gguf_arch, "qwen3moe") == 0)
        json_object_object_add(c, "norm_topk_prob", json_object_new_boolean(1));
    if (strcmp(r->arch->gguf_arch, "phi3") == 0)
        put_int(c, r, "rope.scaling.original_context_length", "original_max_position_embeddings");
    if (strcmp(r->arch->gguf_arch, "olmo2") == 0) layer_types(c, r);
    if (mla) deepseek2_config(c, r);
    if (strcmp(r->arch->gguf_arch, "granite") == 0) { /* GraniteModel's scales, named back */
        put_float(c, r, "attention.scale", "attention_multiplier");
        put_float(c, r, "embedding_scale", "embedding_multiplier");
        put_float(c, r, "residual_scale", "residual_multiplier");
        put_float(c, r, "logit_scale", "logits_scaling");
    }
    json_object_object_add(c, "vocab_size", json_object_new_int64((int64_t)r->vocab_rows));
    json_object *rs = rope_scaling(r);
    if (mla) deepseek2_mscale(rs, r);
    if (rs) json_object_object_add(c, "rope_scaling", rs);
    double id;
    if (token_id(r->model, "bos", &id))
        json_object_object_add(c, "bos_token_id", json_object_new_int64((int64_t)id));
    if (token_id(r->model, "eos", &id))
        json_object_object_add(c, "eos_token_id", json_object_new_int64((int64_t)id));
    if (token_id(r->model, "padding", &id))
        json_object_object_add(c, "pad_token_id", json_object_new_int64((int64_t)id));
    const bool gemma = strncmp(r->arch->gguf_arch, "gemma", 5) == 0;
    json_object_object_add(c, gemma ? "hidden_activation" : "hidden_act",
                           json_object_new_string(gemma ? "gelu_pytorch_tanh" : "silu"));
    json_object_object_add(c, "tie_word_embeddings", json_object_new_boolean(r->tied));
    json_object_object_add(c, "torch_dtype", json_object_new_string(torch_name(r->dtype)));
    return c;
}

/* general.sampling.* under generation_config.json's names. */
static const char *const sampling_keys[][2] = {
    {"sequence", "sequence"},
    {"top_k", "top_k"},
    {"top_p", "top_p"},
    {"min_p", "min_p"},
    {"xtc_probability", "xtc_probability"},
    {"xtc_threshold", "xtc_threshold"},
    {"temp", "temperature"},
    {"penalty_last_n", "penalty_last_n"},
    {"penalty_repeat", "penalty_repeat"},
    {"mirostat", "mirostat"},
    {"mirostat_tau", "mirostat_tau"},
    {"mirostat_eta", "mirostat_eta"},
};

static json_object *generation_json(const hf_rev *r) {
    json_object *g = json_object_new_object();
    for (size_t k = 0; k < sizeof sampling_keys / sizeof *sampling_keys; k++) {
        char key[96];
        snprintf(key, sizeof key, "general.sampling.%s", sampling_keys[k][0]);
        const amn_kv *kv = amn_model_find_kv(r->model, key);
        double v;
        if (kv && kv->type == AMN_KV_STRING)
            json_object_object_add(g, sampling_keys[k][1], str_of(kv->data));
        else if (kv && kv->type == AMN_KV_F32 && hf_rev_num(kv, &v))
            json_object_object_add(g, sampling_keys[k][1], float_json(v));
        else if (kv && hf_rev_num(kv, &v))
            json_object_object_add(g, sampling_keys[k][1], json_object_new_int64((int64_t)v));
    }
    double id;
    if (token_id(r->model, "bos", &id))
        json_object_object_add(g, "bos_token_id", json_object_new_int64((int64_t)id));
    if (token_id(r->model, "eos", &id))
        json_object_object_add(g, "eos_token_id", json_object_new_int64((int64_t)id));
    if (token_id(r->model, "padding", &id))
        json_object_object_add(g, "pad_token_id", json_object_new_int64((int64_t)id));
    return g;
}

/* tokenizer.ggml.tokens / token_type as arrays, or NULL. */
static const amn_kv *arr(const amn_model *m, const char *key, amn_kv_type t) {
    const amn_kv *kv = amn_model_find_kv(m, key);
    return kv && kv->type == AMN_KV_ARRAY && kv->elem_type == t ? kv : NULL;
}

static json_object *token_of(const amn_kv *toks, const amn_model *m, const char *which) {
    double id;
    if (!token_id(m, which, &id) || id < 0 || id >= (double)toks->count) return NULL;
    return str_of((const amn_str *)toks->data + (uint64_t)id);
}

/* A user-defined token of an escaped-space vocabulary as its
 * tokenizer.json had it: the converter wrote its U+2581 as spaces
 * ("pre-normalize user-defined spaces"), here escaped again. */
static json_object *escaped_of(const amn_str *s) {
    size_t sp = 0;
    for (uint64_t i = 0; i < s->len; i++) sp += s->ptr[i] == ' ';
    if (!sp || s->len > 0x7fffffff / 3) return str_of(s);
    char *b = malloc((size_t)s->len + 2 * sp + 1), *p = b;
    if (!b) return str_of(s);
    for (uint64_t i = 0; i < s->len; i++)
        if (s->ptr[i] == ' ') {
            memcpy(p, HF_REV_SPACE, 3);
            p += 3;
        } else {
            *p++ = s->ptr[i];
        }
    json_object *o = json_object_new_string_len(b, (int)(p - b));
    free(b);
    return o;
}

static int32_t type_of(const amn_kv *types, uint64_t i) {
    return types && i < types->count ? ((const int32_t *)types->data)[i] : 1;
}

/* Token i's text in tokenizer.json. */
static json_object *token_text(const amn_kv *toks, const amn_kv *types, uint64_t i, bool escaped) {
    const amn_str *s = (const amn_str *)toks->data + i;
    return escaped && type_of(types, i) == 4 ? escaped_of(s) : str_of(s);
}

/* Control and user-defined tokens as tokenizer_config.json's
 * added_tokens_decoder; of a SentencePiece model's own pieces (below
 * pieces) only those the converter scored -1000, as it scores the tokens
 * it takes from there. */
static json_object *added_decoder(const amn_kv *toks, const amn_kv *types, const amn_kv *scores,
                                  uint64_t pieces, bool escaped) {
    json_object *d = json_object_new_object();
    for (uint64_t i = 0; types && i < toks->count && i < types->count; i++) {
        const int32_t ty = ((const int32_t *)types->data)[i];
        if (ty != 3 && ty != 4) continue;
        if (scores && i < pieces && i < scores->count &&
            ((const float *)scores->data)[i] != -1000.0f)
            continue;
        json_object *a = json_object_new_object();
        json_object_object_add(a, "content", token_text(toks, types, i, escaped));
        json_object_object_add(a, "lstrip", json_object_new_boolean(false));
        json_object_object_add(a, "normalized", json_object_new_boolean(false));
        json_object_object_add(a, "rstrip", json_object_new_boolean(false));
        json_object_object_add(a, "single_word", json_object_new_boolean(false));
        json_object_object_add(a, "special", json_object_new_boolean(ty == 3));
        char id[32];
        snprintf(id, sizeof id, "%llu", (unsigned long long)i);
        json_object_object_add(d, id, a);
    }
    return d;
}

/* Which special tokens tokenizer_config.json names (bit k: which[k] of
 * tokenizer_config_json). gguf-py's SpecialVocab sets them from there in
 * the order bos, eos, unk, sep, pad, then the ids config.json adds; so the
 * GGUF's *_token_id keys in ascending order form the first group, and a key
 * out of that order came from config.json (Qwen's null bos_token). */
static unsigned named_specials(const amn_model *m) {
    static const char *const order[] = {"bos", "eos", "unknown", "seperator", "padding"};
    static const int bit[] = {0, 1, 2, -1, 3};
    unsigned named = 0;
    int last = -1;
    for (size_t i = 0; i < amn_model_kv_count(m); i++) {
        const char *k = amn_model_kv(m, i)->key;
        if (strncmp(k, "tokenizer.ggml.", 15) != 0) continue;
        for (int o = 0; o < 5; o++) {
            char want[64];
            snprintf(want, sizeof want, "tokenizer.ggml.%s_token_id", order[o]);
            if (strcmp(k, want) != 0) continue;
            if (o < last) return named;
            last = o;
            if (bit[o] >= 0) named |= 1u << bit[o];
        }
    }
    return named;
}

static json_object *tokenizer_config_json(const hf_rev *r, const amn_kv *toks, const amn_kv *types,
                                          const amn_kv *scores, uint64_t pieces, const char *cls,
                                          bool escaped) {
    json_object *t = json_object_new_object();
    static const char *const which[][2] = {{"bos", "bos_token"},
                                           {"eos", "eos_token"},
                                           {"unknown", "unk_token"},
                                           {"padding", "pad_token"}};
    double v;
    if (hf_rev_num(amn_model_find_kv(r->model, "tokenizer.ggml.add_bos_token"), &v))
        json_object_object_add(t, "add_bos_token", json_object_new_boolean(v != 0));
    if (hf_rev_num(amn_model_find_kv(r->model, "tokenizer.ggml.add_eos_token"), &v))
        json_object_object_add(t, "add_eos_token", json_object_new_boolean(v != 0));
    if (hf_rev_num(amn_model_find_kv(r->model, "tokenizer.ggml.add_space_prefix"), &v))
        json_object_object_add(t, "add_prefix_space", json_object_new_boolean(v != 0));
    json_object_object_add(t, "added_tokens_decoder",
                           added_decoder(toks, types, scores, pieces, escaped));
    const unsigned named = named_specials(r->model);
    for (size_t k = 0; k < 4; k++)
        json_object_object_add(t, which[k][1],
                               named & (1u << k) ? token_of(toks, r->model, which[k][0]) : NULL);
    const amn_str *tmpl = kv_str(r->model, "tokenizer.chat_template");
    if (tmpl) json_object_object_add(t, "chat_template", str_of(tmpl));
    json_object_object_add(t, "clean_up_tokenization_spaces", json_object_new_boolean(false));
    json_object_object_add(t, "model_max_length", json_object_new_int64(1000000000000000019LL));
    json_object_object_add(t, "tokenizer_class", json_object_new_string(cls));
    return t;
}

/* tokenizer.model (and added_tokens.json for the tokens past its pieces). */
static int spm_files(const hf_rev *r, json_object *files, const amn_kv *toks, const amn_kv *types,
                     amn_error *err) {
    const amn_kv *scores = arr(r->model, "tokenizer.ggml.scores", AMN_KV_F32);
    uint8_t *pb = NULL;
    size_t n = 0;
    int rc = hf_rev_spm(r->model, toks, types, scores, &pb, &n, err);
    if (rc) return rc;
    char *b64 = hf_rev_base64(pb, n);
    free(pb);
    if (!b64) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    json_object *bin = json_object_new_object();
    json_object_object_add(bin, "base64", json_object_new_string(b64));
    free(b64);
    json_object_object_add(files, "tokenizer.model", bin);
    const uint64_t pieces = hf_rev_spm_pieces(toks, types), ntok = hf_rev_spm_tokens(toks, types);
    if (pieces < ntok) {
        json_object *added = json_object_new_object();
        const amn_str *s = toks->data;
        for (uint64_t i = pieces; i < ntok; i++) {
            char *k = strndup(s[i].ptr, s[i].len);
            if (!k) continue;
            json_object_object_add(added, k, json_object_new_int64((int64_t)i));
            free(k);
        }
        json_object_object_add(files, "added_tokens.json", added);
    }
    json_object_object_add(
        files, "tokenizer_config.json",
        tokenizer_config_json(r, toks, types, scores, pieces, "LlamaTokenizer", false));
    return AMN_OK;
}

/* One TemplateProcessing piece: a special token or sequence A / B. */
static json_object *tmpl_piece(const char *kind, json_object *id, int type_id) {
    json_object *o = json_object_new_object(), *in = json_object_new_object();
    json_object_object_add(in, "id", id);
    json_object_object_add(in, "type_id", json_object_new_int(type_id));
    json_object_object_add(o, kind, in);
    return o;
}

/* The post-processor adding bos / eos as tokenizer.ggml.add_bos_token /
 * add_eos_token say, as transformers' LlamaTokenizerFast builds it (and as
 * the converter reads it back: Llama 3.1's tokenizer hashes with its
 * <|begin_of_text|>); NULL when neither is added. */
static json_object *post_processor(const amn_model *m, const amn_kv *toks) {
    double v;
    json_object *ends[2] = {NULL, NULL}; /* bos, eos */
    const char *which[2] = {"bos", "eos"};
    for (int k = 0; k < 2; k++) {
        char key[64];
        snprintf(key, sizeof key, "tokenizer.ggml.add_%s_token", which[k]);
        if (hf_rev_num(amn_model_find_kv(m, key), &v) && v != 0)
            ends[k] = token_of(toks, m, which[k]);
    }
    if (!ends[0] && !ends[1]) return NULL;
    json_object *single = json_object_new_array(), *pair = json_object_new_array();
    json_object *specials = json_object_new_object();
    for (int part = 0; part < 2; part++) {
        for (int k = 0; k < 2; k++) {
            if (k == 1) {
                json_object *seq = json_object_new_string(part ? "B" : "A");
                if (!part)
                    json_object_array_add(single, tmpl_piece("Sequence", json_object_get(seq), 0));
                json_object_array_add(pair, tmpl_piece("Sequence", seq, part));
            }
            if (!ends[k]) continue;
            if (!part)
                json_object_array_add(single,
                                      tmpl_piece("SpecialToken", json_object_get(ends[k]), 0));
            json_object_array_add(pair, tmpl_piece("SpecialToken", json_object_get(ends[k]), part));
        }
    }
    for (int k = 0; k < 2; k++) {
        if (!ends[k]) continue;
        double id = 0;
        token_id(m, which[k], &id);
        json_object *e = json_object_new_object(), *ids = json_object_new_array(),
                    *tk = json_object_new_array();
        json_object_array_add(ids, json_object_new_int64((int64_t)id));
        json_object_array_add(tk, json_object_get(ends[k]));
        json_object_object_add(e, "id", json_object_get(ends[k]));
        json_object_object_add(e, "ids", ids);
        json_object_object_add(e, "tokens", tk);
        json_object_object_add(specials, json_object_get_string(ends[k]), e);
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "type", json_object_new_string("TemplateProcessing"));
    json_object_object_add(o, "single", single);
    json_object_object_add(o, "pair", pair);
    json_object_object_add(o, "special_tokens", specials);
    json_object_put(ends[0]);
    json_object_put(ends[1]);
    return o;
}

/* One part of a GGUF merge as tokenizer.json's pair form has it: gguf-py
 * wrote the spaces of a pair's parts as U+0120; where the part so spelled
 * is no token but its spaced spelling is, the spaces are put back. */
static json_object *merge_part(json_object *vocab, const char *p, size_t n) {
    char *k = strndup(p, n);
    if (!k) return json_object_new_string_len(p, (int)(n > 0x7fffffff ? 0x7fffffff : n));
    if (!json_object_object_get_ex(vocab, k, NULL) && strstr(k, "\xc4\xa0")) {
        char *w = k;
        for (const char *r = k; *r;)
            if ((unsigned char)r[0] == 0xc4 && (unsigned char)r[1] == 0xa0) {
                *w++ = ' ';
                r += 2;
            } else {
                *w++ = *r++;
            }
        *w = '\0';
        if (!json_object_object_get_ex(vocab, k, NULL)) {
            free(k);
            return json_object_new_string_len(p, (int)(n > 0x7fffffff ? 0x7fffffff : n));
        }
    }
    json_object *o = json_object_new_string(k);
    free(k);
    return o;
}

/* A merge "a b" (split at its first space after the first byte, as
 * llama.cpp reads it; hf_rev_pre_check refused merges without one) as
 * the pair ["a", "b"], the form of the Gemma 3 tokenizer.json. */
static json_object *merge_pair(json_object *vocab, const amn_str *m) {
    const char *sp = m->len > 1 ? memchr(m->ptr + 1, ' ', m->len - 1) : NULL;
    const size_t a = sp ? (size_t)(sp - m->ptr) : m->len;
    json_object *pair = json_object_new_array();
    json_object_array_add(pair, merge_part(vocab, m->ptr, a));
    json_object_array_add(pair, sp ? merge_part(vocab, sp + 1, m->len - a - 1)
                                   : json_object_new_string(""));
    return pair;
}

/* The BPE model of tokenizer.json. */
static json_object *bpe_model(const amn_model *mdl, const amn_kv *toks, json_object *vocab,
                              const amn_kv *merges, const hf_rev_pre_out *pre) {
    json_object *m = json_object_new_object(), *ml = json_object_new_array();
    for (uint64_t i = 0; merges && i < merges->count; i++) {
        const amn_str *ms = (const amn_str *)merges->data + i;
        json_object_array_add(ml, pre->escaped ? merge_pair(vocab, ms) : str_of(ms));
    }
    json_object_object_add(m, "type", json_object_new_string("BPE"));
    json_object_object_add(m, "dropout", NULL);
    /* the escaped form's unknown token: what a byte without a <0xXX>
     * piece becomes */
    json_object_object_add(m, "unk_token", pre->escaped ? token_of(toks, mdl, "unknown") : NULL);
    json_object_object_add(m, "continuing_subword_prefix", NULL);
    json_object_object_add(m, "end_of_word_suffix", NULL);
    json_object_object_add(m, "fuse_unk", json_object_new_boolean(pre->escaped));
    json_object_object_add(m, "byte_fallback", json_object_new_boolean(pre->escaped));
    json_object_object_add(m, "ignore_merges", json_object_new_boolean(pre->ignore_merges));
    json_object_object_add(m, "vocab", vocab);
    json_object_object_add(m, "merges", ml);
    return m;
}

/* tokenizer.json for a BPE (gpt2) vocabulary: the vocabulary with its
 * merges; control and user-defined tokens as added tokens (user-defined
 * ones normalized, but in the escaped form, whose file has them as the
 * text before its normalizer). */
static json_object *tokenizer_json(const amn_model *mdl, const amn_kv *toks, const amn_kv *types,
                                   const amn_kv *merges, const hf_rev_pre_out *pre) {
    json_object *t = json_object_new_object(), *added = json_object_new_array();
    json_object *vocab = json_object_new_object();
    const uint64_t n = hf_rev_spm_tokens(toks, types); /* without the [PAD<i>] filler */
    for (uint64_t i = 0; i < n; i++) {
        json_object *text = token_text(toks, types, i, pre->escaped);
        json_object_object_add(vocab, json_object_get_string(text),
                               json_object_new_int64((int64_t)i));
        const int32_t ty = type_of(types, i);
        if (ty != 3 && ty != 4) {
            json_object_put(text);
            continue;
        }
        json_object *a = json_object_new_object();
        json_object_object_add(a, "id", json_object_new_int64((int64_t)i));
        json_object_object_add(a, "content", text);
        json_object_object_add(a, "single_word", json_object_new_boolean(false));
        json_object_object_add(a, "lstrip", json_object_new_boolean(false));
        json_object_object_add(a, "rstrip", json_object_new_boolean(false));
        json_object_object_add(a, "normalized", json_object_new_boolean(ty == 4 && !pre->escaped));
        json_object_object_add(a, "special", json_object_new_boolean(ty == 3));
        json_object_array_add(added, a);
    }
    json_object_object_add(t, "version", json_object_new_string("1.0"));
    json_object_object_add(t, "truncation", NULL);
    json_object_object_add(t, "padding", NULL);
    json_object_object_add(t, "added_tokens", added);
    json_object_object_add(t, "normalizer", pre->normalizer);
    json_object_object_add(t, "pre_tokenizer", pre->pre_tokenizer);
    json_object_object_add(t, "post_processor", post_processor(mdl, toks));
    json_object_object_add(t, "decoder",
                           pre->escaped ? hf_rev_escaped_decoder() : hf_rev_byte_level(true, true));
    json_object_object_add(t, "model", bpe_model(mdl, toks, vocab, merges, pre));
    return t;
}

/* A value the card reader (hf_card.c) takes back as written: single
 * quoted, so without quotes or line breaks. */
static bool card_safe(const amn_str *v) {
    return v && v->len <= 1024 && !memchr(v->ptr, '\'', v->len) && !memchr(v->ptr, '\n', v->len) &&
           !memchr(v->ptr, '\r', v->len) && !memchr(v->ptr, '\0', v->len);
}

/* A string-array key (general.tags, general.languages) as a block list;
 * left out when an item is not card_safe. */
static void card_list(FILE *f, const amn_model *m, const char *key, const char *field) {
    const amn_kv *kv = arr(m, key, AMN_KV_STRING);
    if (!kv || kv->count > 4096) return;
    const amn_str *s = kv->data;
    for (uint64_t i = 0; i < kv->count; i++)
        if (!card_safe(&s[i])) return;
    fprintf(f, "%s:%s\n", field, kv->count ? "" : " []");
    for (uint64_t i = 0; i < kv->count; i++) fprintf(f, "- '%.*s'\n", (int)s[i].len, s[i].ptr);
}

/* general.base_model.* / general.dataset.* as the card's list of sources:
 * each entry by its repo_url, from which the converter derives the same
 * name, organization and version again (a Hugging Face id's URL, or the URL
 * it was given). Left out when an entry has no repo_url (an id without an
 * organization: its name is a title made from the id, not the id). */
static void card_sources(FILE *f, const amn_model *m, const char *what, const char *field) {
    char key[96];
    snprintf(key, sizeof key, "general.%s.count", what);
    double n;
    if (!hf_rev_num(amn_model_find_kv(m, key), &n) || n < 0 || n > 4096) return;
    for (uint32_t i = 0; i < (uint32_t)n; i++) {
        snprintf(key, sizeof key, "general.%s.%u.repo_url", what, i);
        if (!card_safe(kv_str(m, key))) return;
    }
    fprintf(f, "%s:%s\n", field, n ? "" : " []");
    for (uint32_t i = 0; i < (uint32_t)n; i++) {
        snprintf(key, sizeof key, "general.%s.%u.repo_url", what, i);
        const amn_str *v = kv_str(m, key);
        fprintf(f, "- '%.*s'\n", (int)v->len, v->ptr);
    }
}

/* README.md: a model card whose front matter carries the general.* names
 * and lists (as the converter's model card reader takes them back). Values
 * needing YAML escapes are left out. */
static json_object *card_text(const hf_rev *r) {
    static const char *const keys[][2] = {
        {"general.name", "name"},
        {"general.author", "author"},
        {"general.version", "version"},
        {"general.organization", "organization"},
        {"general.description", "description"},
        {"general.finetune", "finetune"},
        {"general.basename", "basename"},
        {"general.size_label", "size_label"},
        {"general.license", "license"},
        {"general.license.name", "license_name"},
        {"general.license.link", "license_link"},
    };
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return json_object_new_string("---\n---\n");
    fputs("---\n", f);
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        const amn_str *v = kv_str(r->model, keys[k][0]);
        if (v && v->len && card_safe(v))
            fprintf(f, "%s: '%.*s'\n", keys[k][1], (int)v->len, v->ptr);
    }
    card_sources(f, r->model, "base_model", "base_model");
    card_sources(f, r->model, "dataset", "datasets");
    card_list(f, r->model, "general.tags", "tags");
    card_list(f, r->model, "general.languages", "languages");
    fputs("---\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return json_object_new_string("---\n---\n");
    }
    json_object *o = json_object_new_string_len(buf, (int)len);
    free(buf);
    return o;
}

int hf_rev_files(const hf_rev *r, char **json, amn_error *err) {
    *json = NULL;
    json_object *files = json_object_new_object();
    if (!files) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    json_object_object_add(files, "config.json", config_json(r));
    json_object_object_add(files, "generation_config.json", generation_json(r));
    json_object_object_add(files, "README.md", card_text(r));
    const amn_kv *toks = arr(r->model, "tokenizer.ggml.tokens", AMN_KV_STRING);
    const amn_str *model = kv_str(r->model, "tokenizer.ggml.model");
    int rc = AMN_OK;
    if (toks && model) {
        const amn_kv *types = arr(r->model, "tokenizer.ggml.token_type", AMN_KV_I32);
        if (model->len == 4 && memcmp(model->ptr, "gpt2", 4) == 0) {
            const amn_kv *merges = arr(r->model, "tokenizer.ggml.merges", AMN_KV_STRING);
            hf_rev_pre_out pre;
            rc = hf_rev_pre(r->model, &pre, err);
            if (!rc)
                json_object_object_add(files, "tokenizer.json",
                                       tokenizer_json(r->model, toks, types, merges, &pre));
            if (!rc)
                json_object_object_add(files, "tokenizer_config.json",
                                       tokenizer_config_json(r, toks, types, NULL, 0,
                                                             "PreTrainedTokenizerFast",
                                                             pre.escaped));
        } else if (model->len == 5 && memcmp(model->ptr, "llama", 5) == 0) {
            rc = spm_files(r, files, toks, types, err);
        } else {
            rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                               "unsupported: a '%.*s' vocabulary to tokenizer files (gpt2 and "
                               "llama convert)",
                               (int)(model->len > 32 ? 32 : model->len), model->ptr);
        }
    }
    if (!rc) {
        const char *text = json_object_to_json_string_ext(files, JSON_C_TO_STRING_PLAIN);
        if (!text || !(*json = strdup(text))) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    json_object_put(files);
    return rc;
}
