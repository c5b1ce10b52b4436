/* hf_params.h — a family's hyperparameters: read from config.json, checked
 * against the tensors, written as the converter's set_gguf_parameters
 * writes them. */
#ifndef HF_PARAMS_H
#define HF_PARAMS_H

#include <json-c/json.h>

#include "hf_arch.h"
#include "hf_kv.h"

struct hf_out;

typedef struct hf_params {
    json_object *cfg;  /* config.json (text_config merged for multimodal wrappers) */
    json_object *rope; /* rope_parameters as TextModel.__init__ completes it (owned) */
    uint32_t block_count;
    uint32_t n_head, n_head_kv, n_embd;
    bool has_head, has_head_kv, has_embd;
    uint64_t vocab_size; /* 0: absent */
    bool tied;           /* tie_word_embeddings: true */
} hf_params;

int hf_params_read(json_object *cfg, const hf_arch *a, hf_params *p, amn_error *err);
void hf_params_free(hf_params *p);
/* TextModel.set_gguf_parameters and the family's own keys, general.file_type
 * = ftype among them. */
int hf_params_kv(hf_kvs *l, const hf_arch *a, const hf_params *p, uint32_t ftype, amn_error *err);
struct hf_conv;
/* The generated tensors (llama3's rope_freqs; Phi-3's long-context rope
 * factors and their attn_factor key) into c->extra / extra_val / n_extra. */
/* The rope_freqs the converter generates for llama3 rope scaling: n =
 * (dim + 1) / 2 factors into v, in its float arithmetic. */
void hf_llama3_freqs(float base, float factor, float lo, float hi, float old, uint32_t dim,
                     float *v, uint32_t n);
int hf_params_extra(const hf_arch *a, const hf_params *p, struct hf_conv *c, amn_error *err);

#endif
