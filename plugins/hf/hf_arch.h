/* hf_arch.h — what the hf plugin knows of each model family, as tables.
 *
 * One hf_arch per family, as llama.cpp's converter (convert_hf_to_gguf.py
 * with gguf-py's constants.py and tensor_mapping.py) knows it: the Hugging
 * Face architecture names it takes, the GGUF architecture it writes, how
 * each tensor is renamed and transformed, and the family's quirks. */
#ifndef HF_ARCH_H
#define HF_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a tensor's values change on the way (one per tensor). */
enum {
    HF_X_NONE = 0,
    HF_X_PERMUTE_Q,   /* llama's q_proj row permutation (n_head) */
    HF_X_PERMUTE_K,   /* k_proj's (n_head_kv) */
    HF_X_PLUS1,       /* Gemma's norm weights + 1, in the source dtype */
    HF_X_MLA_KV_B,    /* DeepSeek's kv_b_proj: split into k_b (transposed) and v_b */
    HF_X_TRANSPOSE,   /* each group of a part's rows transposed (k_b: hf_out.part_*) */
    HF_X_EXPERT_T,    /* gpt-oss's down_proj weight [experts, ff, hidden]: each expert transposed */
    HF_X_GATE_UP_ALT, /* gpt-oss's gate_up_proj: gate and up alternate along the last
                       * dimension; two outputs, weights' experts transposed */
};

/* A rename the converter makes before mapping (filter_tensors,
 * modify_tensors): a name ending in `from` ends in `to` instead. */
typedef struct hf_rename {
    const char *from;
    const char *to;
} hf_rename;

/* "model.layers.{bid}.self_attn.q_proj" -> "blk.{bid}.attn_q": names without
 * their ".weight" / ".bias" suffix, which carries over. */
typedef struct hf_tensor_map {
    const char *hf;
    const char *gguf;
    uint8_t xform;
} hf_tensor_map;

/* Family quirks. */
#define HF_A_VOCAB_SIZE_KV (1u << 0) /* {arch}.vocab_size after the common keys (LlamaModel) */
#define HF_A_ROPE_DIM_KV   (1u << 1) /* {arch}.rope.dimension_count (LlamaModel) */
#define HF_A_LLAMA3_ROPE   (1u << 2) /* rope_freqs from llama3 rope scaling */
#define HF_A_NORM_PLUS1    (1u << 3) /* every "*norm.weight" + 1 (Gemma's RMSNorm) */
#define HF_A_SKIP_LM_HEAD  (1u << 4) /* lm_head.weight left out (Gemma, Gemma 2) */
#define HF_A_TRIM_VOCAB    (1u << 5) /* token_embd cut to the tokenizer's size (Gemma 3) */
#define HF_A_SKIP_MTP      (1u << 6) /* layers past num_hidden_layers left out (MTP) */
#define HF_A_TIED_LM_HEAD  (1u << 7) /* lm_head.weight left out when tie_word_embeddings */
#define HF_A_MLA           (1u << 8) /* kv_b_proj is GGUF attn_k_b + attn_v_b (HF_X_MLA_KV_B) */
#define HF_A_MXFP4_FIRST   (1u << 9) /* MXFP4 experts repacked, written before all else */

/* transformers 5's layout of the same experts: one 3-D tensor per layer,
 * "model.layers.{bid}.<mid><name>" (".weight" optional) of shape [experts,
 * rows, cols], already stacked; two projections fused in one are the
 * halves of each expert's rows, the first projection first
 * (Qwen2MoeModel.modify_tensors splits "gate_up_proj" so). */
typedef struct hf_fused_experts {
    const char *name; /* "gate_up_proj" */
    uint8_t n;        /* projections held: 1, or 2 (halves of the rows) */
    uint8_t proj[2];  /* which: indices of hf_experts.proj / .gguf */
} hf_fused_experts;

/* Routed experts as checkpoints hold them, one tensor per expert
 * ("model.layers.{bid}.<mid>{xid}.<proj>.weight"), stacked per layer into
 * one 3-D tensor per projection, in the converter's stacking order
 * (LlamaModel.modify_tensors for Mixtral, Qwen2MoeModel's for Qwen MoE). */
typedef struct hf_experts {
    const char *detect;            /* a source name holding this is an expert ("experts") */
    const char *mid;               /* "block_sparse_moe.experts." */
    const char *proj[3];           /* "w1", "w2", "w3", in stacking order */
    const char *gguf[3];           /* their stacks' names: "ffn_gate_exps", ... */
    const char *const *count_keys; /* config.json's expert count, NULL-terminated */
    const char *config_key;        /* the count's key in transformers' config class */
    const hf_fused_experts *fused; /* NULL-name-terminated, or NULL: none taken */
} hf_experts;

/* Which set_gguf_parameters the family runs (hf_params.c). */
typedef enum hf_recipe {
    HF_P_TEXT,      /* TextModel's, with the HF_A_* additions */
    HF_P_GEMMA,     /* GemmaModel's own list */
    HF_P_GEMMA2,    /* Gemma2Model's */
    HF_P_GEMMA3,    /* TextModel's, then Gemma3Model's defaults over it */
    HF_P_PHI3,      /* Phi3MiniModel's own list */
    HF_P_QWENMOE,   /* TextModel's, then Qwen2MoeModel's expert FFN lengths */
    HF_P_GRANITE,   /* LlamaModel's without head_dim, then GraniteModel's four scales */
    HF_P_OLMO2,     /* TextModel's, then (OLMo 3) the sliding window and its layers */
    HF_P_DEEPSEEK2, /* TextModel's with one KV head, then DeepseekV2Model's MLA and MoE keys */
    HF_P_GPT_OSS,   /* TextModel's, then GptOssModel's sliding window and expert FFN length */
} hf_recipe;

typedef struct hf_arch {
    const char *gguf_arch;            /* "llama" */
    const char *const *hf_names;      /* NULL-terminated: "LlamaForCausalLM", ... */
    const hf_tensor_map *const *maps; /* NULL-terminated list of NULL-terminated tables */
    uint32_t flags;                   /* HF_A_* */
    const char *vocab_family;         /* the converter's set_vocab variant (hf_vocab.h) */
    hf_recipe recipe;
    const hf_experts *experts; /* stacked routed experts, or NULL */
    const hf_rename *renames;  /* NULL-from-terminated, or NULL: none */
} hf_arch;

/* The family that takes this Hugging Face architecture name, or NULL. */
const hf_arch *hf_arch_find(const char *hf_name);
/* "LlamaForCausalLM, MistralForCausalLM, ..." into buf (for the unsupported message). */
void hf_arch_list(char *buf, size_t size);
/* The GGUF name of a Hugging Face tensor name into out (size bytes) and its
 * transform; false when the family has no mapping for it. */
bool hf_arch_map(const hf_arch *a, const char *hf_name, char *out, size_t size, uint8_t *xform);

/* The reverse: the Hugging Face name of a GGUF tensor name and the
 * transform its forward direction applied. */
bool hf_arch_unmap(const hf_arch *a, const char *gguf_name, char *out, size_t size, uint8_t *xform);
/* The family a GGUF of this general.architecture converts back from, or
 * NULL; and their list ("llama, qwen2, ...") for the unsupported message. */
const hf_arch *hf_arch_by_gguf(const char *gguf_arch);
void hf_arch_gguf_list(char *buf, size_t size);

#endif
