/* The family tables (see hf_arch.h). Tensor maps follow gguf-py's
 * tensor_mapping.py, restricted to what each family's checkpoints hold. */
#include "hf_arch.h"

#include <stdio.h>
#include <string.h>

/* Every llama-like decoder. */
static const hf_tensor_map decoder_common[] = {
    {"model.embed_tokens", "token_embd", HF_X_NONE},
    {"model.norm", "output_norm", HF_X_NONE},
    {"lm_head", "output", HF_X_NONE},
    {"model.layers.{bid}.self_attn.v_proj", "blk.{bid}.attn_v", HF_X_NONE},
    {"model.layers.{bid}.self_attn.o_proj", "blk.{bid}.attn_output", HF_X_NONE},
    {"model.layers.{bid}.mlp.gate_proj", "blk.{bid}.ffn_gate", HF_X_NONE},
    {"model.layers.{bid}.mlp.up_proj", "blk.{bid}.ffn_up", HF_X_NONE},
    {"model.layers.{bid}.mlp.down_proj", "blk.{bid}.ffn_down", HF_X_NONE},
    {NULL, NULL, 0},
};

/* The norm before attention (all but OLMo 2). */
static const hf_tensor_map pre_norm[] = {
    {"model.layers.{bid}.input_layernorm", "blk.{bid}.attn_norm", HF_X_NONE},
    {NULL, NULL, 0},
};

/* q and k as they are, and post_attention_layernorm as the FFN norm (also
 * Gemma's). */
static const hf_tensor_map qk_plain[] = {
    {"model.layers.{bid}.self_attn.q_proj", "blk.{bid}.attn_q", HF_X_NONE},
    {"model.layers.{bid}.self_attn.k_proj", "blk.{bid}.attn_k", HF_X_NONE},
    {"model.layers.{bid}.post_attention_layernorm", "blk.{bid}.ffn_norm", HF_X_NONE},
    {NULL, NULL, 0},
};

/* LlamaModel.undo_permute: q and k rows reordered for ggml's RoPE. */
static const hf_tensor_map qk_permuted[] = {
    {"model.layers.{bid}.self_attn.q_proj", "blk.{bid}.attn_q", HF_X_PERMUTE_Q},
    {"model.layers.{bid}.self_attn.k_proj", "blk.{bid}.attn_k", HF_X_PERMUTE_K},
    {"model.layers.{bid}.post_attention_layernorm", "blk.{bid}.ffn_norm", HF_X_NONE},
    {NULL, NULL, 0},
};

/* q and k as they are, and post_attention_layernorm as the norm after
 * attention (OLMo 2, gpt-oss) */
static const hf_tensor_map qk_post_norm[] = {
    {"model.layers.{bid}.self_attn.q_proj", "blk.{bid}.attn_q", HF_X_NONE},
    {"model.layers.{bid}.self_attn.k_proj", "blk.{bid}.attn_k", HF_X_NONE},
    {"model.layers.{bid}.post_attention_layernorm", "blk.{bid}.post_attention_norm", HF_X_NONE},
    {NULL, NULL, 0},
};

/* The norm after the FFN (Gemma 2 / 3, OLMo 2). */
static const hf_tensor_map post_ffw_norm[] = {
    {"model.layers.{bid}.post_feedforward_layernorm", "blk.{bid}.post_ffw_norm", HF_X_NONE},
    {NULL, NULL, 0},
};

static const hf_tensor_map qk_norms[] = {
    {"model.layers.{bid}.self_attn.q_norm", "blk.{bid}.attn_q_norm", HF_X_NONE},
    {"model.layers.{bid}.self_attn.k_norm", "blk.{bid}.attn_k_norm", HF_X_NONE},
    {NULL, NULL, 0},
};

/* Gemma 2 / 3: the norm before the FFN (after it: post_ffw_norm). */
static const hf_tensor_map gemma2_norms[] = {
    {"model.layers.{bid}.pre_feedforward_layernorm", "blk.{bid}.ffn_norm", HF_X_NONE},
    {NULL, NULL, 0},
};

/* Mixtral's router (its experts are stacked: mixtral_experts). */
static const hf_tensor_map moe_router[] = {
    {"model.layers.{bid}.block_sparse_moe.gate", "blk.{bid}.ffn_gate_inp", HF_X_NONE},
    {NULL, NULL, 0},
};

/* Qwen MoE's router, and Qwen2-MoE's shared expert with its gate. */
static const hf_tensor_map qwen_moe[] = {
    {"model.layers.{bid}.mlp.gate", "blk.{bid}.ffn_gate_inp", HF_X_NONE},
    {"model.layers.{bid}.mlp.shared_expert_gate", "blk.{bid}.ffn_gate_inp_shexp", HF_X_NONE},
    {"model.layers.{bid}.mlp.shared_expert.gate_proj", "blk.{bid}.ffn_gate_shexp", HF_X_NONE},
    {"model.layers.{bid}.mlp.shared_expert.up_proj", "blk.{bid}.ffn_up_shexp", HF_X_NONE},
    {"model.layers.{bid}.mlp.shared_expert.down_proj", "blk.{bid}.ffn_down_shexp", HF_X_NONE},
    {NULL, NULL, 0},
};

static const hf_experts mixtral_experts = {
    "block_sparse_moe.experts",
    "block_sparse_moe.experts.",
    {"w1", "w2", "w3"},
    {"ffn_gate_exps", "ffn_down_exps", "ffn_up_exps"},
    (const char *const[]){"num_local_experts", NULL},
    "num_local_experts",
    NULL,
};

/* Qwen2MoeModel.modify_tensors: any name holding "experts"; a 3-D
 * "down_proj" and "gate_up_proj" (gate, then up) are taken as they are */
static const hf_fused_experts qwen_fused[] = {
    {"down_proj", 1, {0, 0}},
    {"gate_up_proj", 2, {1, 2}},
    {NULL, 0, {0, 0}},
};
static const hf_experts qwen_experts = {
    "experts",
    "mlp.experts.",
    {"down_proj", "gate_proj", "up_proj"},
    {"ffn_down_exps", "ffn_gate_exps", "ffn_up_exps"},
    (const char *const[]){"num_local_experts", "num_experts", NULL},
    "num_experts",
    qwen_fused,
};

/* Phi-3: fused q/k/v and gate/up projections. */
static const hf_tensor_map phi3_tensors[] = {
    {"model.embed_tokens", "token_embd", HF_X_NONE},
    {"model.norm", "output_norm", HF_X_NONE},
    {"lm_head", "output", HF_X_NONE},
    {"model.layers.{bid}.input_layernorm", "blk.{bid}.attn_norm", HF_X_NONE},
    {"model.layers.{bid}.self_attn.qkv_proj", "blk.{bid}.attn_qkv", HF_X_NONE},
    {"model.layers.{bid}.self_attn.o_proj", "blk.{bid}.attn_output", HF_X_NONE},
    {"model.layers.{bid}.post_attention_layernorm", "blk.{bid}.ffn_norm", HF_X_NONE},
    {"model.layers.{bid}.mlp.gate_up_proj", "blk.{bid}.ffn_up", HF_X_NONE},
    {"model.layers.{bid}.mlp.down_proj", "blk.{bid}.ffn_down", HF_X_NONE},
    {NULL, NULL, 0},
};

/* DeepseekV2Model (DeepSeek V2, V3): multi-head latent attention, routed
 * and shared experts, the router's score correction bias
 * (ModelBase.filter_tensors renames "e_score_correction_bias" to
 * "e_score_correction.bias"). kv_b_proj becomes k_b_proj (transposed) and
 * v_b_proj, mapped as those names are. */
static const hf_tensor_map deepseek2_tensors[] = {
    {"model.layers.{bid}.post_attention_layernorm", "blk.{bid}.ffn_norm", HF_X_NONE},
    {"model.layers.{bid}.self_attn.q_proj", "blk.{bid}.attn_q", HF_X_NONE},
    {"model.layers.{bid}.self_attn.q_a_proj", "blk.{bid}.attn_q_a", HF_X_NONE},
    {"model.layers.{bid}.self_attn.q_a_layernorm", "blk.{bid}.attn_q_a_norm", HF_X_NONE},
    {"model.layers.{bid}.self_attn.q_b_proj", "blk.{bid}.attn_q_b", HF_X_NONE},
    {"model.layers.{bid}.self_attn.kv_a_proj_with_mqa", "blk.{bid}.attn_kv_a_mqa", HF_X_NONE},
    {"model.layers.{bid}.self_attn.kv_a_layernorm", "blk.{bid}.attn_kv_a_norm", HF_X_NONE},
    {"model.layers.{bid}.self_attn.kv_b_proj", "blk.{bid}.attn_kv_b", HF_X_MLA_KV_B},
    {"model.layers.{bid}.self_attn.k_b_proj", "blk.{bid}.attn_k_b", HF_X_NONE},
    {"model.layers.{bid}.self_attn.v_b_proj", "blk.{bid}.attn_v_b", HF_X_NONE},
    {"model.layers.{bid}.mlp.gate", "blk.{bid}.ffn_gate_inp", HF_X_NONE},
    {"model.layers.{bid}.mlp.gate.e_score_correction", "blk.{bid}.exp_probs_b", HF_X_NONE},
    {"model.layers.{bid}.mlp.shared_experts.gate_proj", "blk.{bid}.ffn_gate_shexp", HF_X_NONE},
    {"model.layers.{bid}.mlp.shared_experts.up_proj", "blk.{bid}.ffn_up_shexp", HF_X_NONE},
    {"model.layers.{bid}.mlp.shared_experts.down_proj", "blk.{bid}.ffn_down_shexp", HF_X_NONE},
    {NULL, NULL, 0},
};

/* DeepseekV2Model.modify_tensors: names holding "mlp.experts", stacked
 * down, gate, up; no stacked layout taken */
static const hf_experts deepseek2_experts = {
    "mlp.experts",
    "mlp.experts.",
    {"down_proj", "gate_proj", "up_proj"},
    {"ffn_down_exps", "ffn_gate_exps", "ffn_up_exps"},
    (const char *const[]){"n_routed_experts", NULL},
    "n_routed_experts",
    NULL,
};

static const char *const deepseek2_names[] = {"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM",
                                              NULL};
static const hf_tensor_map *const deepseek2_maps[] = {decoder_common, pre_norm, deepseek2_tensors,
                                                      NULL};

/* GptOssModel: attention sinks, a router with a bias, experts stacked
 * already with their biases (gate_up_proj split into gate and up). The
 * converter's renames first: filter_tensors' "sinks" + ".weight",
 * modify_tensors' "_bias" as ".bias" and ".weight" on the expert weights. */
static const hf_rename gpt_oss_renames[] = {
    {".self_attn.sinks", ".self_attn.sinks.weight"},
    {".mlp.experts.down_proj_bias", ".mlp.experts.down_proj.bias"},
    {".mlp.experts.gate_up_proj_bias", ".mlp.experts.gate_up_proj.bias"},
    {".mlp.experts.down_proj", ".mlp.experts.down_proj.weight"},
    {".mlp.experts.gate_up_proj", ".mlp.experts.gate_up_proj.weight"},
    {NULL, NULL},
};
static const hf_tensor_map gpt_oss_tensors[] = {
    {"model.layers.{bid}.self_attn.sinks", "blk.{bid}.attn_sinks", HF_X_NONE},
    {"model.layers.{bid}.mlp.router", "blk.{bid}.ffn_gate_inp", HF_X_NONE},
    {"model.layers.{bid}.mlp.experts.down_proj", "blk.{bid}.ffn_down_exps", HF_X_EXPERT_T},
    {"model.layers.{bid}.mlp.experts.gate_up_proj", "blk.{bid}.ffn_gate_up_exps", HF_X_GATE_UP_ALT},
    {"model.layers.{bid}.mlp.experts.gate_proj", "blk.{bid}.ffn_gate_exps", HF_X_NONE},
    {"model.layers.{bid}.mlp.experts.up_proj", "blk.{bid}.ffn_up_exps", HF_X_NONE},
    {NULL, NULL, 0},
};
static const char *const gpt_oss_names[] = {"GptOssForCausalLM", NULL};
static const hf_tensor_map *const gpt_oss_maps[] = {decoder_common, pre_norm, qk_post_norm,
                                                    gpt_oss_tensors, NULL};

static const char *const llama_names[] = {"LlamaForCausalLM", "LLaMAForCausalLM",
                                          "MistralForCausalLM", "MixtralForCausalLM", NULL};
static const hf_tensor_map *const llama_maps[] = {decoder_common, pre_norm, qk_permuted, moe_router,
                                                  NULL};

/* SmolLM3Model: LlamaModel's conversion under its own GGUF name (llama.cpp
 * skips RoPE in every fourth layer itself) */
static const char *const smollm3_names[] = {"SmolLM3ForCausalLM", NULL};
static const hf_tensor_map *const smollm3_maps[] = {decoder_common, pre_norm, qk_permuted, NULL};
/* (Granite's too) */

/* GraniteModel: LlamaModel's conversion, head_dim ignored, four scales */
static const char *const granite_names[] = {"GraniteForCausalLM", NULL};

/* Olmo2Model (OLMo 2 and 3): no norm before attention or the FFN (no
 * pre_norm: input_layernorm has no place in its tensor list), one after
 * each; q / k norms over the whole projection. */
static const char *const olmo2_names[] = {"Olmo2ForCausalLM", "Olmo3ForCausalLM", NULL};
static const hf_tensor_map *const olmo2_maps[] = {decoder_common, qk_post_norm, post_ffw_norm,
                                                  qk_norms, NULL};

static const char *const qwen2_names[] = {"Qwen2ForCausalLM", NULL};
static const hf_tensor_map *const qwen2_maps[] = {decoder_common, pre_norm, qk_plain, NULL};

static const char *const qwen3_names[] = {"Qwen3ForCausalLM", NULL};
static const hf_tensor_map *const qwen3_maps[] = {decoder_common, pre_norm, qk_plain, qk_norms,
                                                  NULL};

static const char *const qwen2moe_names[] = {"Qwen2MoeForCausalLM", NULL};
static const hf_tensor_map *const qwen2moe_maps[] = {decoder_common, pre_norm, qk_plain, qwen_moe,
                                                     NULL};

static const char *const qwen3moe_names[] = {"Qwen3MoeForCausalLM", NULL};
static const hf_tensor_map *const qwen3moe_maps[] = {decoder_common, pre_norm, qk_plain,
                                                     qk_norms,       qwen_moe, NULL};

static const char *const gemma_names[] = {"GemmaForCausalLM", NULL};
static const hf_tensor_map *const gemma_maps[] = {decoder_common, pre_norm, qk_plain, NULL};

static const char *const gemma2_names[] = {"Gemma2ForCausalLM", NULL};
static const hf_tensor_map *const gemma2_maps[] = {decoder_common, pre_norm,      qk_post_norm,
                                                   gemma2_norms,   post_ffw_norm, NULL};

static const char *const gemma3_names[] = {"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration",
                                           NULL};
static const hf_tensor_map *const gemma3_maps[] = {
    decoder_common, pre_norm, qk_post_norm, gemma2_norms, post_ffw_norm, qk_norms, NULL};

static const char *const phi3_names[] = {"Phi3ForCausalLM", NULL};
static const hf_tensor_map *const phi3_maps[] = {phi3_tensors, NULL};

static const hf_arch archs[] = {
    {"llama", llama_names, llama_maps, HF_A_VOCAB_SIZE_KV | HF_A_ROPE_DIM_KV | HF_A_LLAMA3_ROPE,
     "llama", HF_P_TEXT, &mixtral_experts, NULL},
    {"smollm3", smollm3_names, smollm3_maps,
     HF_A_VOCAB_SIZE_KV | HF_A_ROPE_DIM_KV | HF_A_LLAMA3_ROPE, "llama", HF_P_TEXT, NULL, NULL},
    {"granite", granite_names, smollm3_maps,
     HF_A_VOCAB_SIZE_KV | HF_A_ROPE_DIM_KV | HF_A_LLAMA3_ROPE, "llama", HF_P_GRANITE, NULL, NULL},
    {"qwen2", qwen2_names, qwen2_maps, 0, "qwen2", HF_P_TEXT, NULL, NULL},
    {"qwen3", qwen3_names, qwen3_maps, 0, "qwen2", HF_P_TEXT, NULL, NULL},
    /* Qwen2MoeModel is a TextModel: _set_vocab_gpt2, no SentencePiece */
    {"qwen2moe", qwen2moe_names, qwen2moe_maps, 0, "gpt2", HF_P_QWENMOE, &qwen_experts, NULL},
    {"qwen3moe", qwen3moe_names, qwen3moe_maps, 0, "gpt2", HF_P_QWENMOE, &qwen_experts, NULL},
    {"gemma", gemma_names, gemma_maps, HF_A_NORM_PLUS1 | HF_A_SKIP_LM_HEAD, "gemma", HF_P_GEMMA,
     NULL, NULL},
    {"gemma2", gemma2_names, gemma2_maps, HF_A_NORM_PLUS1 | HF_A_SKIP_LM_HEAD, "gemma2",
     HF_P_GEMMA2, NULL, NULL},
    {"gemma3", gemma3_names, gemma3_maps, HF_A_NORM_PLUS1 | HF_A_TRIM_VOCAB, "gemma3", HF_P_GEMMA3,
     NULL, NULL},
    {"phi3", phi3_names, phi3_maps, 0, "phi3", HF_P_PHI3, NULL, NULL},
    /* a TextModel: _set_vocab_gpt2 */
    {"olmo2", olmo2_names, olmo2_maps, 0, "gpt2", HF_P_OLMO2, NULL, NULL},
    /* _set_vocab_gpt2 (Kimi K2's tiktoken vocabulary has no table) */
    {"deepseek2", deepseek2_names, deepseek2_maps, HF_A_SKIP_MTP | HF_A_TIED_LM_HEAD | HF_A_MLA,
     "gpt2", HF_P_DEEPSEEK2, &deepseek2_experts, NULL},
    /* a TextModel: _set_vocab_gpt2 */
    {"gpt-oss", gpt_oss_names, gpt_oss_maps, HF_A_MXFP4_FIRST, "gpt2", HF_P_GPT_OSS, NULL,
     gpt_oss_renames},
};

const hf_arch *hf_arch_find(const char *hf_name) {
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        for (const char *const *n = archs[i].hf_names; *n; n++)
            if (strcmp(*n, hf_name) == 0) return &archs[i];
    return NULL;
}

void hf_arch_list(char *buf, size_t size) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        for (const char *const *n = archs[i].hf_names; *n; n++) {
            int w = snprintf(buf + at, size - at, "%s%s", at ? ", " : "", *n);
            if (w < 0 || (size_t)w >= size - at) return;
            at += (size_t)w;
        }
}

/* name (without suffix) against a pattern with at most one "{bid}"; *bid
 * gets the digits it stood for. */
static bool match(const char *pat, const char *name, size_t len, const char **bid,
                  size_t *bid_len) {
    const char *b = strstr(pat, "{bid}");
    if (!b) return strlen(pat) == len && memcmp(pat, name, len) == 0;
    const size_t pre = (size_t)(b - pat), post = strlen(b + 5);
    if (len < pre + post + 1 || memcmp(name, pat, pre) != 0 ||
        memcmp(name + len - post, b + 5, post) != 0)
        return false;
    const size_t n = len - pre - post;
    for (size_t i = 0; i < n; i++)
        if (name[pre + i] < '0' || name[pre + i] > '9') return false;
    *bid = name + pre;
    *bid_len = n;
    return true;
}

/* One direction of the family's tables: Hugging Face -> GGUF names, or
 * (reverse) GGUF -> Hugging Face. */
static bool map_dir(const hf_arch *a, const char *name, bool reverse, char *out, size_t size,
                    uint8_t *xform) {
    static const char *const suffixes[] = {".weight", ".bias"};
    const size_t n = strlen(name);
    for (size_t s = 0; s < 2; s++) {
        const size_t sl = strlen(suffixes[s]);
        if (n <= sl || strcmp(name + n - sl, suffixes[s]) != 0) continue;
        for (const hf_tensor_map *const *t = a->maps; *t; t++)
            for (const hf_tensor_map *m = *t; m->hf; m++) {
                const char *from = reverse ? m->gguf : m->hf, *to = reverse ? m->hf : m->gguf;
                const char *bid = NULL;
                size_t bl = 0;
                if (!match(from, name, n - sl, &bid, &bl)) continue;
                const char *g = strstr(to, "{bid}");
                int w = g ? snprintf(out, size, "%.*s%.*s%s%s", (int)(g - to), to, (int)bl, bid,
                                     g + 5, suffixes[s])
                          : snprintf(out, size, "%s%s", to, suffixes[s]);
                if (w < 0 || (size_t)w >= size) return false;
                *xform = m->xform;
                return true;
            }
    }
    return false;
}

bool hf_arch_map(const hf_arch *a, const char *hf_name, char *out, size_t size, uint8_t *xform) {
    return map_dir(a, hf_name, false, out, size, xform);
}

bool hf_arch_unmap(const hf_arch *a, const char *gguf_name, char *out, size_t size,
                   uint8_t *xform) {
    return map_dir(a, gguf_name, true, out, size, xform);
}

/* The families a GGUF converts back from: one table entry each. */
static const char *const reversible[] = {"llama",    "smollm3",  "granite",   "qwen2", "qwen3",
                                         "qwen2moe", "qwen3moe", "phi3",      "gemma", "gemma2",
                                         "gemma3",   "olmo2",    "deepseek2", NULL};

const hf_arch *hf_arch_by_gguf(const char *gguf_arch) {
    for (const char *const *r = reversible; *r; r++)
        if (strcmp(*r, gguf_arch) == 0)
            for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
                if (strcmp(archs[i].gguf_arch, gguf_arch) == 0) return &archs[i];
    return NULL;
}

void hf_arch_gguf_list(char *buf, size_t size) {
    size_t at = 0;
    buf[0] = '\0';
    for (const char *const *r = reversible; *r; r++) {
        int w = snprintf(buf + at, size - at, "%s%s", at ? ", " : "", *r);
        if (w < 0 || (size_t)w >= size - at) return;
        at += (size_t)w;
    }
}
