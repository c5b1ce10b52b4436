/* llama-quantize's per-tensor type rule (see gguf_qpolicy.h). Comments cite
 * src/llama-quant.cpp of EAddario/llama.cpp 3af988fab as "lq:LINE". */
#include <ctype.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_qpolicy.h"
#include "gguf_types.h"

/* ---- file types ------------------------------------------------------------ */

/* tools/quantize/quantize.cpp QUANT_OPTIONS (without COPY), and
 * llama_ftype_get_default_type (lq:810-853). */
static const struct {
    const char *name;
    int ftype;
    uint32_t dflt;
} ftypes[] = {
    {"Q1_0", GGUF_FTYPE_Q1_0, GGUF_TYPE_Q1_0},
    {"Q2_0", GGUF_FTYPE_Q2_0, GGUF_TYPE_Q2_0},
    {"Q4_0", GGUF_FTYPE_Q4_0, GGUF_TYPE_Q4_0},
    {"Q4_1", GGUF_FTYPE_Q4_1, GGUF_TYPE_Q4_1},
    {"MXFP4_MOE", GGUF_FTYPE_MXFP4_MOE, GGUF_TYPE_MXFP4},
    {"Q5_0", GGUF_FTYPE_Q5_0, GGUF_TYPE_Q5_0},
    {"Q5_1", GGUF_FTYPE_Q5_1, GGUF_TYPE_Q5_1},
    {"IQ2_XXS", GGUF_FTYPE_IQ2_XXS, GGUF_TYPE_IQ2_XXS},
    {"IQ2_XS", GGUF_FTYPE_IQ2_XS, GGUF_TYPE_IQ2_XS},
    {"IQ2_S", GGUF_FTYPE_IQ2_S, GGUF_TYPE_IQ2_XS},
    {"IQ2_M", GGUF_FTYPE_IQ2_M, GGUF_TYPE_IQ2_S},
    {"IQ1_S", GGUF_FTYPE_IQ1_S, GGUF_TYPE_IQ1_S},
    {"IQ1_M", GGUF_FTYPE_IQ1_M, GGUF_TYPE_IQ1_M},
    {"TQ1_0", GGUF_FTYPE_TQ1_0, GGUF_TYPE_TQ1_0},
    {"TQ2_0", GGUF_FTYPE_TQ2_0, GGUF_TYPE_TQ2_0},
    {"Q2_K", GGUF_FTYPE_Q2_K, GGUF_TYPE_Q2_K},
    {"Q2_K_S", GGUF_FTYPE_Q2_K_S, GGUF_TYPE_Q2_K},
    {"IQ3_XXS", GGUF_FTYPE_IQ3_XXS, GGUF_TYPE_IQ3_XXS},
    {"IQ3_S", GGUF_FTYPE_IQ3_S, GGUF_TYPE_IQ3_S},
    {"IQ3_M", GGUF_FTYPE_IQ3_M, GGUF_TYPE_IQ3_S},
    {"Q3_K", GGUF_FTYPE_Q3_K_M, GGUF_TYPE_Q3_K},
    {"IQ3_XS", GGUF_FTYPE_IQ3_XS, GGUF_TYPE_IQ3_S},
    {"Q3_K_S", GGUF_FTYPE_Q3_K_S, GGUF_TYPE_Q3_K},
    {"Q3_K_M", GGUF_FTYPE_Q3_K_M, GGUF_TYPE_Q3_K},
    {"Q3_K_L", GGUF_FTYPE_Q3_K_L, GGUF_TYPE_Q3_K},
    {"IQ4_NL", GGUF_FTYPE_IQ4_NL, GGUF_TYPE_IQ4_NL},
    {"IQ4_XS", GGUF_FTYPE_IQ4_XS, GGUF_TYPE_IQ4_XS},
    {"Q4_K", GGUF_FTYPE_Q4_K_M, GGUF_TYPE_Q4_K},
    {"Q4_K_S", GGUF_FTYPE_Q4_K_S, GGUF_TYPE_Q4_K},
    {"Q4_K_M", GGUF_FTYPE_Q4_K_M, GGUF_TYPE_Q4_K},
    {"Q5_K", GGUF_FTYPE_Q5_K_M, GGUF_TYPE_Q5_K},
    {"Q5_K_S", GGUF_FTYPE_Q5_K_S, GGUF_TYPE_Q5_K},
    {"Q5_K_M", GGUF_FTYPE_Q5_K_M, GGUF_TYPE_Q5_K},
    {"Q6_K", GGUF_FTYPE_Q6_K, GGUF_TYPE_Q6_K},
    {"Q8_0", GGUF_FTYPE_Q8_0, GGUF_TYPE_Q8_0},
    {"F16", GGUF_FTYPE_F16, GGUF_TYPE_F16},
    {"BF16", GGUF_FTYPE_BF16, GGUF_TYPE_BF16},
    {"F32", GGUF_FTYPE_ALL_F32, GGUF_TYPE_F32},
    /* only copy tensors (quantize.cpp: after F32, so that file type 0 names F32) */
    {"COPY", GGUF_FTYPE_ALL_F32, GGUF_TYPE_F32},
};
#define N_FTYPES (sizeof ftypes / sizeof ftypes[0])

bool gguf_ftype_parse(const char *name, int *ftype) {
    for (size_t i = 0; i < N_FTYPES; i++)
        if (strcasecmp(name, ftypes[i].name) == 0) {
            *ftype = ftypes[i].ftype;
            return true;
        }
    return false;
}

const char *gguf_ftype_name(int ftype) {
    /* The first entry of a number is its own name; aliases come later. */
    for (size_t i = 0; i < N_FTYPES; i++)
        if (ftypes[i].ftype == ftype && strcmp(ftypes[i].name, "Q3_K") != 0 &&
            strcmp(ftypes[i].name, "Q4_K") != 0 && strcmp(ftypes[i].name, "Q5_K") != 0)
            return ftypes[i].name;
    return NULL;
}

uint32_t gguf_ftype_default_type(int ftype) {
    for (size_t i = 0; i < N_FTYPES; i++)
        if (ftypes[i].ftype == ftype) return ftypes[i].dflt;
    return GGUF_TYPE_COUNT;
}

gguf_qpolicy_options gguf_qpolicy_defaults(int ftype) {
    /* llama_model_quantize_default_params (lq:1309-1326). */
    gguf_qpolicy_options o = {0};
    o.ftype = ftype;
    o.output_tensor_type = GGUF_TYPE_COUNT;
    o.token_embedding_type = GGUF_TYPE_COUNT;
    return o;
}

/* ---- tensor categories (lq:101-158) ---------------------------------------- */

typedef enum cat {
    CAT_TOKEN_EMBD,
    CAT_ATTN_Q,
    CAT_ATTN_V,
    CAT_ATTN_K,
    CAT_ATTN_QKV,
    CAT_ATTN_KV_B,
    CAT_ATTN_OUTPUT,
    CAT_FFN_UP,
    CAT_FFN_GATE,
    CAT_FFN_DOWN,
    CAT_OUTPUT,
    CAT_OTHER,
} cat;

static bool has(const char *s, const char *sub) {
    return strstr(s, sub) != NULL;
}

static bool is_token_embd(const char *n) {
    return strcmp(n, "token_embd.weight") == 0 || strcmp(n, "per_layer_token_embd.weight") == 0;
}

static cat category(const char *n) {
    if (strcmp(n, "output.weight") == 0) return CAT_OUTPUT;
    if (is_token_embd(n)) return CAT_TOKEN_EMBD;
    if (has(n, "attn_qkv.weight")) return CAT_ATTN_QKV;
    if (has(n, "attn_kv_b.weight")) return CAT_ATTN_KV_B;
    if (has(n, "attn_v.weight")) return CAT_ATTN_V;
    if (has(n, "attn_k.weight")) return CAT_ATTN_K;
    if (has(n, "attn_q.weight")) return CAT_ATTN_Q;
    if (has(n, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (has(n, "ffn_up")) return CAT_FFN_UP;
    if (has(n, "ffn_gate")) return CAT_FFN_GATE;
    if (has(n, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

static bool cat_is_attn_v(cat c) {
    return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B;
}

/* ---- which tensors may be quantized (lq:289-367) --------------------------- */

static int n_dims(const gguf_qpolicy_tensor *t) {
    /* ggml_n_dims: trailing dimensions of 1 do not count. */
    for (int i = 3; i >= 1; i--)
        if (t->ne[i] > 1) return i + 1;
    return 1;
}

static bool allows_quantization(const gguf_qpolicy_options *opt, const gguf_qpolicy_tensor *t) {
    if (opt->only_copy || n_dims(t) < 2) return false;
    const char *n = t->name;
    const size_t len = strlen(n);
    /* name.rfind("weight") == name.size() - 6: also true for a 5-character
     * name, where both sides are npos (size_t wrap-around). */
    bool q = len >= 6 ? strcmp(n + len - 6, "weight") == 0 : len == 5;
    static const char *const never[] = {"_norm.weight",
                                        "ffn_gate_inp.weight",
                                        "ffn_gate_tid2eid.weight",
                                        "altup",
                                        "laurel",
                                        "per_layer_model_proj",
                                        "ssm_conv1d",
                                        "shortconv.conv.weight",
                                        "indexer.k_proj.weight",
                                        "indexer.q_proj.weight",
                                        "time_mix_first.weight",
                                        "time_mix_w0.weight",
                                        "time_mix_w1.weight",
                                        "time_mix_w2.weight",
                                        "time_mix_v0.weight",
                                        "time_mix_v1.weight",
                                        "time_mix_v2.weight",
                                        "time_mix_a0.weight",
                                        "time_mix_a1.weight",
                                        "time_mix_a2.weight",
                                        "time_mix_g1.weight",
                                        "time_mix_g2.weight",
                                        "time_mix_decay_w1.weight",
                                        "time_mix_decay_w2.weight",
                                        "time_mix_lerp_fused.weight",
                                        "attn_rel_b.weight",
                                        ".position_embd",
                                        "sam.pos_embd",
                                        "sam.neck.",
                                        "sam.net_",
                                        ".rel_pos",
                                        ".patch_embd",
                                        ".patch_merger",
                                        "a.rvq.codebook",
                                        "mm.a.code_embd"};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) q = q && !has(n, never[i]);
    q = q && (!opt->leave_output_tensor || strcmp(n, "output.weight") != 0);
    /* LLM_TN(arch)(LLM_TENSOR_POS_EMBD / TOKEN_TYPES, "weight") */
    q = q && strcmp(n, "position_embd.weight") != 0 && strcmp(n, "token_types.weight") != 0;
    return q;
}

/* ---- the state llama-quantize carries across tensors (lq:164-197) --------- */

typedef struct qstate {
    const gguf_qpolicy_model *model;
    const gguf_qpolicy_options *opt;
    int n_attention_wv, n_ffn_down, n_ffn_gate, n_ffn_up;
    int i_attention_wv, i_ffn_down, i_ffn_gate, i_ffn_up;
    int n_fallback;
    bool has_tied_embeddings;
    bool is_70b, falcon, bailingmoe3;
    regex_t *patterns;
    amn_error *err;
    int rc; /* first error, AMN_OK until one occurs */
} qstate;

static uint32_t n_gqa(const gguf_qpolicy_model *m) {
    return m->n_head_kv == 0 ? 0 : m->n_head / m->n_head_kv;
}

/* llm_type 70B, the only model type the rules read: llama with 80 layers and
 * GQA (not an 8-expert model: src/models/llama.cpp), qwen2 / olmo / deci
 * with 80 layers, jais2 with 68. */
static bool model_is_70b(const gguf_qpolicy_model *m) {
    const char *a = m->arch ? m->arch : "";
    if (strcmp(a, "llama") == 0)
        return m->n_expert != 8 && m->n_layer == 80 && m->n_head != m->n_head_kv;
    if (strcmp(a, "qwen2") == 0 || strcmp(a, "olmo") == 0 || strcmp(a, "deci") == 0)
        return m->n_layer == 80;
    return strcmp(a, "jais2") == 0 && m->n_layer == 68;
}

static bool use_more_bits(int i_layer, int n_layers) {
    /* lq:430-432 */
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 ||
           (i_layer - n_layers / 8) % 3 == 2;
}

/* lq:434-448: with experts the layer comes from the name, else the counter. */
static bool layer_info(qstate *qs, int i_counter, const char *name, int *i_layer) {
    const int n_expert = qs->model->n_expert > 1 ? (int)qs->model->n_expert : 1;
    *i_layer = i_counter;
    if (n_expert > 1) {
        if (sscanf(name, "blk.%d.", i_layer) != 1) {
            qs->rc = amn_error_set(qs->err, AMN_E_PARSE, "Failed to determine layer for tensor %s",
                                   name);
            return false;
        }
        if (*i_layer < 0 || *i_layer >= (int)qs->model->n_layer) {
            qs->rc = amn_error_set(qs->err, AMN_E_PARSE,
                                   "Bad layer %d for tensor %s. Must be in [0, %d)", *i_layer, name,
                                   (int)qs->model->n_layer);
            return false;
        }
    }
    return true;
}

static bool ftype_in(int f, const int *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (list[i] == f) return true;
    return false;
}
#define FT_IN(f, ...)                                                                              \
    ftype_in(f, (const int[]){__VA_ARGS__}, sizeof((int[]){__VA_ARGS__}) / sizeof(int))

/* ---- llama_tensor_get_type_impl (lq:424-676) ------------------------------- */

static uint32_t output_type(qstate *qs, uint32_t new_type, const gguf_qpolicy_tensor *t, int ft) {
    /* lq:452-473 */
    if (qs->opt->output_tensor_type < GGUF_TYPE_COUNT) return qs->opt->output_tensor_type;
    const int64_t qk_k = gguf_type_traits_get(new_type)->block_elems;
    if (ft == GGUF_FTYPE_MXFP4_MOE) return GGUF_TYPE_Q8_0;
    if (qs->falcon || t->ne[0] % qk_k != 0) return GGUF_TYPE_Q8_0;
    if (FT_IN(ft, GGUF_FTYPE_IQ2_XXS, GGUF_FTYPE_IQ2_XS, GGUF_FTYPE_IQ3_XXS, GGUF_FTYPE_IQ1_S,
              GGUF_FTYPE_IQ2_S, GGUF_FTYPE_IQ2_M, GGUF_FTYPE_IQ1_M))
        return GGUF_TYPE_Q5_K;
    if (new_type != GGUF_TYPE_Q8_0) return GGUF_TYPE_Q6_K;
    return new_type;
}

static uint32_t attn_v_type(qstate *qs, uint32_t new_type, int ft) {
    /* lq:529-566 */
    const uint32_t gqa = n_gqa(qs->model);
    if (ft == GGUF_FTYPE_Q2_K)
        new_type = gqa >= 4 ? GGUF_TYPE_Q4_K : GGUF_TYPE_Q3_K;
    else if (ft == GGUF_FTYPE_Q2_K_S && gqa >= 4)
        new_type = GGUF_TYPE_Q4_K;
    else if (ft == GGUF_FTYPE_IQ3_XXS)
        new_type = gqa >= 4                ? GGUF_TYPE_Q4_K
                   : !qs->opt->has_imatrix ? GGUF_TYPE_IQ3_S
                                           : GGUF_TYPE_IQ3_XXS;
    else if (FT_IN(ft, GGUF_FTYPE_IQ3_XS, GGUF_FTYPE_IQ3_S) && gqa >= 4)
        new_type = GGUF_TYPE_Q4_K;
    else if (ft == GGUF_FTYPE_IQ3_M)
        new_type = GGUF_TYPE_Q4_K;
    else if (ft == GGUF_FTYPE_Q3_K_M)
        new_type = qs->i_attention_wv < 2 ? GGUF_TYPE_Q5_K : GGUF_TYPE_Q4_K;
    else if (ft == GGUF_FTYPE_Q3_K_L)
        new_type = GGUF_TYPE_Q5_K;
    else if (FT_IN(ft, GGUF_FTYPE_IQ4_NL, GGUF_FTYPE_IQ4_XS) && gqa >= 4)
        new_type = GGUF_TYPE_Q5_K;
    else if (FT_IN(ft, GGUF_FTYPE_Q4_K_M, GGUF_FTYPE_Q5_K_M) &&
             use_more_bits(qs->i_attention_wv, qs->n_attention_wv))
        new_type = GGUF_TYPE_Q6_K;
    else if (ft == GGUF_FTYPE_Q4_K_S && qs->i_attention_wv < 4)
        new_type = GGUF_TYPE_Q5_K;
    if (qs->is_70b && (new_type == GGUF_TYPE_Q3_K || new_type == GGUF_TYPE_Q4_K))
        new_type = GGUF_TYPE_Q5_K;
    if (qs->model->n_expert == 8) new_type = GGUF_TYPE_Q8_0;
    ++qs->i_attention_wv;
    return new_type;
}

static uint32_t ffn_down_type(qstate *qs, uint32_t new_type, const char *name, int ft) {
    /* lq:586-630 */
    int i_layer;
    if (!layer_info(qs, qs->i_ffn_down, name, &i_layer)) return new_type;
    const int n_layer = qs->n_ffn_down;
    if (ft == GGUF_FTYPE_Q2_K)
        new_type = GGUF_TYPE_Q3_K;
    else if (ft == GGUF_FTYPE_Q2_K_S) {
        if (i_layer < n_layer / 8) new_type = GGUF_TYPE_Q4_K;
    } else if (ft == GGUF_FTYPE_IQ3_XXS && !qs->opt->has_imatrix)
        new_type = i_layer < n_layer / 8 ? GGUF_TYPE_Q4_K : GGUF_TYPE_Q3_K;
    else if (ft == GGUF_FTYPE_Q3_K_M)
        new_type = i_layer < n_layer / 16                           ? GGUF_TYPE_Q5_K
                   : !qs->falcon || use_more_bits(i_layer, n_layer) ? GGUF_TYPE_Q4_K
                                                                    : GGUF_TYPE_Q3_K;
    else if (ft == GGUF_FTYPE_IQ3_M && (i_layer < n_layer / 8 || (qs->model->n_expert == 8 &&
                                                                  use_more_bits(i_layer, n_layer))))
        new_type = GGUF_TYPE_Q4_K;
    else if (ft == GGUF_FTYPE_Q3_K_L)
        new_type = qs->falcon ? GGUF_TYPE_Q4_K : GGUF_TYPE_Q5_K;
    else if (ft == GGUF_FTYPE_Q4_K_M) {
        if (qs->falcon)
            new_type = i_layer < n_layer / 16            ? GGUF_TYPE_Q6_K
                       : use_more_bits(i_layer, n_layer) ? GGUF_TYPE_Q5_K
                                                         : GGUF_TYPE_Q4_K;
        else if (use_more_bits(i_layer, n_layer))
            new_type = GGUF_TYPE_Q6_K;
    } else if (i_layer < n_layer / 8 && FT_IN(ft, GGUF_FTYPE_IQ4_NL, GGUF_FTYPE_IQ4_XS) &&
               !qs->opt->has_imatrix)
        new_type = GGUF_TYPE_Q5_K;
    else if (ft == GGUF_FTYPE_Q5_K_M && use_more_bits(i_layer, n_layer))
        new_type = GGUF_TYPE_Q6_K;
    else if (ft == GGUF_FTYPE_Q4_K_S && !qs->falcon && i_layer < n_layer / 8)
        new_type = GGUF_TYPE_Q5_K;
    else if (FT_IN(ft, GGUF_FTYPE_Q4_0, GGUF_FTYPE_Q5_0) && qs->opt->has_imatrix &&
             i_layer < n_layer / 8) /* lq:623-629 */
        new_type = ft == GGUF_FTYPE_Q4_0 ? GGUF_TYPE_Q4_1 : GGUF_TYPE_Q5_1;
    ++qs->i_ffn_down;
    return new_type;
}

static uint32_t attn_output_type(qstate *qs, uint32_t new_type, int ft) {
    /* lq:631-650 */
    if (!qs->falcon) {
        if (qs->model->n_expert == 8) {
            if (FT_IN(ft, GGUF_FTYPE_Q2_K, GGUF_FTYPE_IQ3_XS, GGUF_FTYPE_IQ3_XXS, GGUF_FTYPE_Q3_K_S,
                      GGUF_FTYPE_Q3_K_M, GGUF_FTYPE_IQ4_NL, GGUF_FTYPE_Q4_K_S, GGUF_FTYPE_Q4_K_M,
                      GGUF_FTYPE_IQ3_S, GGUF_FTYPE_IQ3_M, GGUF_FTYPE_IQ4_XS))
                new_type = GGUF_TYPE_Q5_K;
        } else {
            if (ft == GGUF_FTYPE_Q2_K)
                new_type = GGUF_TYPE_Q3_K;
            else if (ft == GGUF_FTYPE_IQ3_XXS)
                new_type = GGUF_TYPE_IQ3_S;
            else if (ft == GGUF_FTYPE_Q3_K_M)
                new_type = GGUF_TYPE_Q4_K;
            else if (ft == GGUF_FTYPE_Q3_K_L)
                new_type = GGUF_TYPE_Q5_K;
            else if (ft == GGUF_FTYPE_IQ3_M)
                new_type = GGUF_TYPE_Q4_K;
        }
    } else if (ft == GGUF_FTYPE_Q3_K_L) {
        new_type = GGUF_TYPE_Q4_K;
    }
    return new_type;
}

/* The branch for the very low-bit file types (lq:505-528). */
static uint32_t lowbit_type(qstate *qs, uint32_t new_type, cat c, int ft) {
    const bool s_or_m = FT_IN(ft, GGUF_FTYPE_IQ2_S, GGUF_FTYPE_IQ2_M);
    if (cat_is_attn_v(c)) {
        if (n_gqa(qs->model) >= 4 || qs->model->n_expert >= 4)
            new_type = GGUF_TYPE_Q4_K;
        else
            new_type = s_or_m ? GGUF_TYPE_IQ3_S : GGUF_TYPE_Q2_K;
        ++qs->i_attention_wv;
    } else if (qs->model->n_expert == 8 && c == CAT_ATTN_K) {
        new_type = GGUF_TYPE_Q4_K;
    } else if (c == CAT_FFN_DOWN) {
        if (qs->i_ffn_down < qs->n_ffn_down / 8)
            new_type = s_or_m ? GGUF_TYPE_IQ3_S : GGUF_TYPE_Q2_K;
        ++qs->i_ffn_down;
    } else if (c == CAT_ATTN_OUTPUT) {
        if (qs->model->n_expert == 8)
            new_type = GGUF_TYPE_Q5_K;
        else if (FT_IN(ft, GGUF_FTYPE_IQ1_S, GGUF_FTYPE_IQ1_M))
            new_type = GGUF_TYPE_IQ2_XXS;
        else if (s_or_m)
            new_type = GGUF_TYPE_IQ3_S;
    }
    return new_type;
}

static uint32_t get_type_impl(qstate *qs, uint32_t new_type, const gguf_qpolicy_tensor *t, cat c) {
    const int ft = qs->opt->ftype;
    if (c == CAT_OUTPUT || (qs->has_tied_embeddings && c == CAT_TOKEN_EMBD))
        return output_type(qs, new_type, t, ft);
    if (ft == GGUF_FTYPE_MXFP4_MOE) {
        /* lq:474-486 */
        const bool bailing_expert =
            qs->bailingmoe3 && (c == CAT_FFN_UP || c == CAT_FFN_GATE || c == CAT_FFN_DOWN);
        return t->ne[2] > 1 && (!qs->bailingmoe3 || bailing_expert) ? GGUF_TYPE_MXFP4
                                                                    : GGUF_TYPE_Q8_0;
    }
    if (c == CAT_TOKEN_EMBD) {
        /* lq:487-504 */
        if (qs->opt->token_embedding_type < GGUF_TYPE_COUNT) return qs->opt->token_embedding_type;
        if (FT_IN(ft, GGUF_FTYPE_IQ2_XXS, GGUF_FTYPE_IQ2_XS, GGUF_FTYPE_IQ1_S, GGUF_FTYPE_IQ1_M))
            return GGUF_TYPE_Q2_K;
        if (FT_IN(ft, GGUF_FTYPE_IQ2_S, GGUF_FTYPE_IQ2_M, GGUF_FTYPE_IQ3_XXS))
            return GGUF_TYPE_IQ3_S;
        if (FT_IN(ft, GGUF_FTYPE_TQ1_0, GGUF_FTYPE_TQ2_0, GGUF_FTYPE_Q2_0)) return GGUF_TYPE_Q4_K;
        return new_type;
    }
    if (FT_IN(ft, GGUF_FTYPE_IQ2_XXS, GGUF_FTYPE_IQ2_XS, GGUF_FTYPE_IQ1_S, GGUF_FTYPE_IQ2_S,
              GGUF_FTYPE_IQ2_M, GGUF_FTYPE_IQ1_M))
        return lowbit_type(qs, new_type, c, ft);
    if (cat_is_attn_v(c)) return attn_v_type(qs, new_type, ft);
    if (c == CAT_ATTN_K) {
        /* lq:567-578 */
        if (qs->model->n_expert == 8) return GGUF_TYPE_Q8_0;
        if (ft == GGUF_FTYPE_IQ3_XS) return GGUF_TYPE_IQ3_XXS;
        if (ft == GGUF_FTYPE_IQ3_XXS) return GGUF_TYPE_IQ2_S;
        return new_type;
    }
    if (c == CAT_ATTN_Q) {
        /* lq:579-585 */
        if (ft == GGUF_FTYPE_IQ3_XS) return GGUF_TYPE_IQ3_XXS;
        if (ft == GGUF_FTYPE_IQ3_XXS) return GGUF_TYPE_IQ2_S;
        return new_type;
    }
    if (c == CAT_FFN_DOWN) return ffn_down_type(qs, new_type, t->name, ft);
    if (c == CAT_ATTN_OUTPUT) return attn_output_type(qs, new_type, ft);
    if (c == CAT_ATTN_QKV) {
        /* lq:651-657 (unreachable: attn_qkv is attn_v-like above, as in llama.cpp) */
        return new_type;
    }
    if (c == CAT_FFN_GATE || c == CAT_FFN_UP) {
        /* lq:658-673 */
        int *counter = c == CAT_FFN_GATE ? &qs->i_ffn_gate : &qs->i_ffn_up;
        const int n_layer = c == CAT_FFN_GATE ? qs->n_ffn_gate : qs->n_ffn_up;
        int i_layer;
        if (!layer_info(qs, *counter, t->name, &i_layer)) return new_type;
        if (ft == GGUF_FTYPE_IQ3_XS && i_layer >= n_layer / 8 && i_layer < 7 * n_layer / 8)
            new_type = GGUF_TYPE_IQ3_XXS;
        ++*counter;
    }
    return new_type;
}

/* ---- fallback for rows that do not divide the block (lq:374-421) ----------- */

static uint32_t type_fallback(qstate *qs, const gguf_qpolicy_tensor *t, uint32_t target) {
    const int64_t ncols = t->ne[0];
    const gguf_type_traits *tr = gguf_type_traits_get(target);
    if (ncols % tr->block_elems == 0) return target;
    ++qs->n_fallback;
    uint32_t r;
    switch (target) {
    case GGUF_TYPE_IQ1_S:
    case GGUF_TYPE_IQ1_M:
    case GGUF_TYPE_IQ2_XXS:
    case GGUF_TYPE_IQ2_XS:
    case GGUF_TYPE_IQ2_S:
    case GGUF_TYPE_IQ3_XXS:
    case GGUF_TYPE_IQ3_S:
    case GGUF_TYPE_IQ4_XS:
        r = GGUF_TYPE_IQ4_NL;
        break;
    case GGUF_TYPE_Q2_0:
    case GGUF_TYPE_Q2_K:
    case GGUF_TYPE_Q3_K:
    case GGUF_TYPE_TQ1_0:
    case GGUF_TYPE_TQ2_0:
        r = GGUF_TYPE_Q4_0;
        break;
    case GGUF_TYPE_Q4_K:
        r = GGUF_TYPE_Q5_0;
        break;
    case GGUF_TYPE_Q5_K:
        r = GGUF_TYPE_Q5_1;
        break;
    case GGUF_TYPE_Q6_K:
        r = GGUF_TYPE_Q8_0;
        break;
    default:
        qs->rc = amn_error_set(qs->err, AMN_E_UNSUPPORTED,
                               "no tensor type fallback is defined for type %s", tr->name);
        return target;
    }
    if (ncols % gguf_type_traits_get(r)->block_elems != 0) r = GGUF_TYPE_F16;
    return r;
}

/* ---- llama_tensor_get_type (lq:679-721) ------------------------------------ */

static bool type_is_quantized(uint32_t type) {
    const gguf_type_traits *tr = gguf_type_traits_get(type);
    return tr && tr->kind != GGUF_KIND_PLAIN && tr->block_elems > 1;
}

static uint32_t get_type(qstate *qs, const gguf_qpolicy_tensor *t, uint32_t default_type, cat c) {
    const gguf_qpolicy_options *opt = qs->opt;
    if (!allows_quantization(opt, t)) return t->type;
    if (opt->token_embedding_type < GGUF_TYPE_COUNT && c == CAT_TOKEN_EMBD)
        return opt->token_embedding_type;
    if (opt->output_tensor_type < GGUF_TYPE_COUNT && c == CAT_OUTPUT)
        return opt->output_tensor_type;
    uint32_t new_type = default_type;
    if (!type_is_quantized(default_type)) return new_type;
    bool manual = false;
    /* The pattern is lowered (quantize.cpp parse_tensor_type), the name is not. */
    for (size_t i = 0; i < opt->n_overrides; i++)
        if (regexec(&qs->patterns[i], t->name, 0, NULL, 0) == 0) {
            new_type = opt->overrides[i].type;
            manual = true;
            break;
        }
    if (!manual && !opt->pure) new_type = get_type_impl(qs, new_type, t, c);
    if (qs->rc) return new_type;
    return type_fallback(qs, t, new_type);
}

/* ---- walk order: weight_name_comparer (src/llama-model-loader.h) ----------- */

static int layer_of(const char *name) {
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) < 1) l = -1;
    return l;
}

typedef struct keyed {
    int layer;
    const char *name;
    size_t index;
} keyed;

static int cmp_weight_names(const void *pa, const void *pb) {
    const keyed *a = pa, *b = pb;
    if (a->layer != b->layer) return a->layer < b->layer ? -1 : 1;
    const int c = strcmp(a->name, b->name); /* std::string's < compares bytes unsigned */
    if (c) return c;
    return a->index < b->index ? -1 : a->index > b->index;
}

bool gguf_qpolicy_walk_order(const char *const *names, size_t n, size_t *order) {
    keyed *keys = n <= SIZE_MAX / sizeof *keys ? malloc((n ? n : 1) * sizeof *keys) : NULL;
    if (!keys) return false;
    for (size_t i = 0; i < n; i++) keys[i] = (keyed){layer_of(names[i]), names[i], i};
    qsort(keys, n, sizeof *keys, cmp_weight_names);
    for (size_t k = 0; k < n; k++) order[k] = keys[k].index;
    free(keys);
    return true;
}

/* ---- the loader's file type (src/llama-model-loader.cpp, its switch) ------- */

static uint32_t ftype_of_type(uint32_t type) {
    static const struct {
        uint8_t type, ftype;
    } map[] = {
        {GGUF_TYPE_F32, GGUF_FTYPE_ALL_F32},     {GGUF_TYPE_F16, GGUF_FTYPE_F16},
        {GGUF_TYPE_BF16, GGUF_FTYPE_BF16},       {GGUF_TYPE_Q4_0, GGUF_FTYPE_Q4_0},
        {GGUF_TYPE_Q4_1, GGUF_FTYPE_Q4_1},       {GGUF_TYPE_Q5_0, GGUF_FTYPE_Q5_0},
        {GGUF_TYPE_Q5_1, GGUF_FTYPE_Q5_1},       {GGUF_TYPE_Q8_0, GGUF_FTYPE_Q8_0},
        {GGUF_TYPE_Q2_K, GGUF_FTYPE_Q2_K},       {GGUF_TYPE_Q3_K, GGUF_FTYPE_Q3_K_M},
        {GGUF_TYPE_Q4_K, GGUF_FTYPE_Q4_K_M},     {GGUF_TYPE_Q5_K, GGUF_FTYPE_Q5_K_M},
        {GGUF_TYPE_Q6_K, GGUF_FTYPE_Q6_K},       {GGUF_TYPE_TQ1_0, GGUF_FTYPE_TQ1_0},
        {GGUF_TYPE_TQ2_0, GGUF_FTYPE_TQ2_0},     {GGUF_TYPE_IQ2_XXS, GGUF_FTYPE_IQ2_XXS},
        {GGUF_TYPE_IQ2_XS, GGUF_FTYPE_IQ2_XS},   {GGUF_TYPE_IQ2_S, GGUF_FTYPE_IQ2_S},
        {GGUF_TYPE_IQ3_XXS, GGUF_FTYPE_IQ3_XXS}, {GGUF_TYPE_IQ1_S, GGUF_FTYPE_IQ1_S},
        {GGUF_TYPE_IQ1_M, GGUF_FTYPE_IQ1_M},     {GGUF_TYPE_IQ4_NL, GGUF_FTYPE_IQ4_NL},
        {GGUF_TYPE_IQ4_XS, GGUF_FTYPE_IQ4_XS},   {GGUF_TYPE_IQ3_S, GGUF_FTYPE_IQ3_S},
        {GGUF_TYPE_NVFP4, GGUF_FTYPE_NVFP4},     {GGUF_TYPE_Q1_0, GGUF_FTYPE_Q1_0},
        {GGUF_TYPE_Q2_0, GGUF_FTYPE_Q2_0},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].type == type) return map[i].ftype;
    return GGUF_FTYPE_ALL_F32; /* the loader warns "unknown type" and says F32 */
}

uint32_t gguf_qpolicy_guess_ftype(const gguf_qpolicy_tensor *tensors, size_t n) {
    const char **names = calloc(n ? n : 1, sizeof *names);
    size_t *order = calloc(n ? n : 1, sizeof *order);
    uint32_t count[GGUF_TYPE_COUNT] = {0}, most = 0, type_max = GGUF_TYPE_F32;
    bool ok = names && order;
    for (size_t i = 0; ok && i < n; i++) names[i] = tensors[i].name;
    ok = ok && gguf_qpolicy_walk_order(names, n, order);
    for (size_t k = 0; ok && k < n; k++) {
        const uint32_t type = tensors[order[k]].type;
        if (type >= GGUF_TYPE_COUNT) continue; /* refused by the caller's reader */
        if (most < ++count[type]) {
            most = count[type];
            type_max = type;
        }
    }
    free(names);
    free(order);
    return ok ? ftype_of_type(type_max) | GGUF_FTYPE_GUESSED : GGUF_TYPE_COUNT;
}

/* ---- --tensor-type patterns -------------------------------------------------- */

/* ECMAScript's \d \w \s (and negations) as POSIX bracket expressions. */
static char *to_posix(const char *p) {
    const size_t n = strlen(p);
    char *out = malloc(n * 12 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        const char *rep = NULL;
        if (p[i] == '\\' && i + 1 < n) {
            switch (p[i + 1]) {
            case 'd':
                rep = "[0-9]";
                break;
            case 'D':
                rep = "[^0-9]";
                break;
            case 'w':
                rep = "[A-Za-z0-9_]";
                break;
            case 'W':
                rep = "[^A-Za-z0-9_]";
                break;
            case 's':
                rep = "[[:space:]]";
                break;
            case 'S':
                rep = "[^[:space:]]";
                break;
            default:
                break;
            }
        }
        if (rep) {
            o += sprintf(o, "%s", rep);
            i++;
        } else {
            *o++ = p[i];
        }
    }
    *o = 0;
    return out;
}

static int compile_patterns(qstate *qs) {
    const gguf_qpolicy_options *opt = qs->opt;
    if (!opt->n_overrides) return AMN_OK;
    qs->patterns = calloc(opt->n_overrides, sizeof(regex_t));
    if (!qs->patterns) return amn_error_set(qs->err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < opt->n_overrides; i++) {
        const char *pat = opt->overrides[i].pattern;
        char *lower = to_posix(pat ? pat : "");
        if (!lower) return amn_error_set(qs->err, AMN_E_NOMEM, "out of memory");
        for (char *c = lower; *c; c++) *c = (char)tolower((unsigned char)*c);
        const int rc = *lower ? regcomp(&qs->patterns[i], lower, REG_EXTENDED | REG_NOSUB) : 1;
        free(lower);
        if (rc != 0) {
            /* Free the ones compiled so far; the caller frees none. */
            for (size_t k = 0; k < i; k++) regfree(&qs->patterns[k]);
            free(qs->patterns);
            qs->patterns = NULL;
            return amn_error_set(qs->err, AMN_E_INVALID, "--tensor-type: bad pattern '%s'",
                                 pat ? pat : "");
        }
        if (!gguf_type_traits_get(opt->overrides[i].type) ||
            gguf_type_traits_get(opt->overrides[i].type)->kind == GGUF_KIND_RETIRED) {
            for (size_t k = 0; k <= i; k++) regfree(&qs->patterns[k]);
            free(qs->patterns);
            qs->patterns = NULL;
            return amn_error_set(qs->err, AMN_E_INVALID, "--tensor-type: invalid type for '%s'",
                                 pat);
        }
    }
    return AMN_OK;
}

/* ---- the whole walk ----------------------------------------------------------- */

bool gguf_qpolicy_requires_imatrix(const char *name, uint32_t dst, int ftype) {
    /* lq:785-804 */
    if (is_token_embd(name) || strcmp(name, "output.weight") == 0) return false;
    switch (dst) {
    case GGUF_TYPE_IQ3_XXS:
    case GGUF_TYPE_IQ2_XXS:
    case GGUF_TYPE_IQ2_XS:
    case GGUF_TYPE_IQ2_S:
    case GGUF_TYPE_IQ1_M:
    case GGUF_TYPE_IQ1_S:
        return true;
    case GGUF_TYPE_Q2_K:
        return ftype == GGUF_FTYPE_Q2_K_S;
    default:
        return false;
    }
}

static bool valid_given_type(uint32_t t) {
    const gguf_type_traits *tr = gguf_type_traits_get(t);
    return t == GGUF_TYPE_COUNT || (tr && tr->kind != GGUF_KIND_RETIRED);
}

/* The checks of the main loop (lq:1165-1239), in walk order. */
static int data_path_errors(const gguf_qpolicy_tensor *t, uint32_t new_type, bool requant,
                            amn_error *err) {
    if (t->type == new_type || t->type == GGUF_TYPE_F32) return AMN_OK;
    const gguf_type_traits *cur = gguf_type_traits_get(t->type);
    if (type_is_quantized(t->type) && !requant)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "requantizing from type %s is disabled",
                             cur->name);
    if (!type_is_quantized(t->type) && t->type != GGUF_TYPE_F16 && t->type != GGUF_TYPE_BF16)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "cannot dequantize/convert tensor type %s",
                             cur ? cur->name : "?");
    return AMN_OK;
}

int gguf_qpolicy_choose(const gguf_qpolicy_model *model, const gguf_qpolicy_tensor *tensors,
                        size_t n, const gguf_qpolicy_options *opt, size_t *order, uint32_t *types,
                        amn_error *err) {
    const uint32_t default_type = gguf_ftype_default_type(opt->ftype);
    if (default_type == GGUF_TYPE_COUNT)
        return amn_error_set(err, AMN_E_INVALID, "invalid output file type %d", opt->ftype);
    if (!valid_given_type(opt->output_tensor_type) || !valid_given_type(opt->token_embedding_type))
        return amn_error_set(err, AMN_E_INVALID,
                             "invalid ggml type for the output or token "
                             "embedding tensor");
    for (size_t i = 0; i < n; i++)
        if (!gguf_type_traits_get(tensors[i].type))
            return amn_error_set(err, AMN_E_INVALID, "tensor %s: unknown ggml type %u",
                                 tensors[i].name, tensors[i].type);
    qstate qs = {.model = model, .opt = opt, .err = err, .has_tied_embeddings = true};
    const char *arch = model->arch ? model->arch : "";
    qs.falcon = strcmp(arch, "falcon") == 0;
    qs.bailingmoe3 = strcmp(arch, "bailingmoe3") == 0;
    qs.is_70b = model_is_70b(model);
    int rc = compile_patterns(&qs);
    if (rc) return rc;

    keyed *keys = n <= SIZE_MAX / sizeof *keys ? malloc((n ? n : 1) * sizeof *keys) : NULL;
    if (!keys) {
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) keys[i] = (keyed){layer_of(tensors[i].name), tensors[i].name, i};
    if (!opt->input_order) qsort(keys, n, sizeof *keys, cmp_weight_names);
    for (size_t k = 0; k < n; k++) order[k] = keys[k].index;
    free(keys);

    /* init_quantize_state_counters (lq:856-870) */
    for (size_t i = 0; i < n; i++) {
        const cat c = category(tensors[i].name);
        if (cat_is_attn_v(c)) ++qs.n_attention_wv;
        if (c == CAT_OUTPUT) qs.has_tied_embeddings = false;
    }
    qs.n_ffn_down = qs.n_ffn_gate = qs.n_ffn_up = (int)model->n_layer;

    /* The preliminary loop (lq:1040-1075): types, then the imatrix check. */
    for (size_t k = 0; k < n && !rc; k++) {
        const gguf_qpolicy_tensor *t = &tensors[order[k]];
        const cat c = category(t->name);
        const bool allowed = allows_quantization(opt, t);
        types[order[k]] = allowed ? get_type(&qs, t, default_type, c) : t->type;
        if (qs.rc) {
            rc = qs.rc;
            break;
        }
        /* With an importance matrix, a tensor it lacks is found when its
         * entry is looked up (the caller's check, lq:1199-1227). */
        if (allowed && !opt->has_imatrix &&
            gguf_qpolicy_requires_imatrix(t->name, types[order[k]], opt->ftype)) {
            rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                               "this quantization requires an importance matrix (offending "
                               "tensor: %s, target type: %s); give one with --imatrix",
                               t->name, gguf_type_traits_get(types[order[k]])->name);
        }
    }
    for (size_t k = 0; k < n && !rc; k++)
        rc = data_path_errors(&tensors[order[k]], types[order[k]], opt->allow_requantize, err);
out:
    if (qs.patterns) {
        for (size_t i = 0; i < opt->n_overrides; i++) regfree(&qs.patterns[i]);
        free(qs.patterns);
    }
    return rc;
}
