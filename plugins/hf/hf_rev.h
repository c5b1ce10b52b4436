/* hf_rev.h — a GGUF made back into a Hugging Face model folder: the
 * reverse of hf_convert.h, planned from the GGUF's key/values and tensor
 * list with the same family tables (hf_arch.h).
 *
 * Each GGUF tensor becomes its Hugging Face tensor (the llama q / k row
 * permutation undone; stacked experts (Mixtral, Qwen MoE) split back into
 * one tensor per expert); generated tensors (rope_freqs) are left out. The folder's
 * other files (config.json, generation_config.json, tokenizer_config.json,
 * tokenizer.json) come from the key/values (hf_rev_files.c). */
#ifndef HF_REV_H
#define HF_REV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/dtype.h"
#include "amn/error.h"
#include "amn/model.h"
#include "amn/scheme.h"
#include "hf_arch.h"

#define HF_REV_NAME_MAX 160

typedef struct hf_rout {
    char name[HF_REV_NAME_MAX];
    amn_dtype dtype;
    uint8_t xform;   /* HF_X_PERMUTE_Q / _K undone, else HF_X_NONE */
    uint32_t n_head; /* the permutation's head count */
    bool minus1;     /* Gemma's norm weights, stored plus one */
    uint32_t ndim;
    uint64_t shape[AMN_MAX_DIMS];
    uint64_t rows, cols; /* along dim 0; 1-D: numel rows of 1 */
    uint64_t row0;       /* first source row (an expert's slice of a stack) */
    uint64_t nbytes;
    /* DeepSeek's kv_b_proj made again (mla): from this source, attn_k_b
     * [heads, rank, nope] transposed back, and source mla_v, attn_v_b
     * [heads, v, rank]: each head's nope k rows, then its v rows */
    bool mla;
    size_t mla_v;
    uint64_t mla_nope, mla_vd;
} hf_rout;

typedef struct hf_rslot {
    hf_rout *o; /* n of them */
    size_t n;   /* 0: dropped */
} hf_rslot;

typedef struct hf_rev {
    const hf_arch *arch;
    const amn_model *model; /* the GGUF */
    amn_dtype dtype;        /* the folder's torch_dtype */
    hf_rslot *slots;        /* per source tensor */
    size_t n_src;
    uint64_t vocab_rows;       /* token_embd's rows */
    uint64_t n_experts;        /* stacked experts per layer (hf_experts), else 0 */
    size_t max_outs;           /* outputs one source may give (the core's) */
    uint64_t n_outs, cap_outs; /* outputs planned, and at most (the model's max_tensors) */
    bool tied;                 /* no output.weight: lm_head tied to the embeddings */
} hf_rev;

/* Plan the reverse conversion (target "hfdir", "hfdir-f32", "hfdir-f16",
 * "hfdir-bf16"); AMN_E_UNSUPPORTED names the supported families. */
int hf_rev_new(const amn_encode_options *o, const amn_encode_source *src, size_t n, hf_rev **out,
               amn_error *err);
void hf_rev_free(hf_rev *r);
int hf_rev_fill(const hf_rout *t, uint64_t unit0, uint64_t n, const amn_values *v, void *dst,
                amn_error *err);
/* The folder's other files as one JSON object, file name -> content (a
 * JSON value written as the file; a string is the file's text, an object
 * {"base64": "..."} its bytes), malloc'd text. */
int hf_rev_files(const hf_rev *r, char **json, amn_error *err);

/* hf_rev_spm.c: the tokenizer.model of a SentencePiece vocabulary (its
 * bytes, malloc'd), how many tokens are its pieces (the rest are added
 * tokens), and base64 for the side files' binary values. */
int hf_rev_spm(const amn_model *m, const amn_kv *toks, const amn_kv *types, const amn_kv *scores,
               uint8_t **out, size_t *out_len, amn_error *err);
uint64_t hf_rev_spm_pieces(const amn_kv *toks, const amn_kv *types);
/* The tokens without the converter's trailing [PAD<i>] filler. */
uint64_t hf_rev_spm_tokens(const amn_kv *toks, const amn_kv *types);
char *hf_rev_base64(const uint8_t *d, size_t n);

/* hf_rev_pre.c: the normalizer, pre-tokenizer and BPE ignore_merges of the
 * tokenizer.json written for the GGUF's tokenizer.ggml.pre, as llama.cpp
 * splits text for that name (json-c objects, the caller's); an unknown
 * name, or one llama.cpp does not split by regexes on GPT-2's bytes, is
 * AMN_E_UNSUPPORTED naming it. hf_rev_pre_check: only that check. */
struct json_object;
typedef struct hf_rev_pre_out {
    struct json_object *normalizer; /* NULL: none */
    struct json_object *pre_tokenizer;
    bool ignore_merges;
    /* Gemma's BPE on raw UTF-8 with spaces as U+2581: byte fallback, the
     * decoder of hf_rev_escaped_decoder, user-defined tokens' spaces
     * escaped back (the converter wrote them unescaped) */
    bool escaped;
} hf_rev_pre_out;
#define HF_REV_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's escaped space */
int hf_rev_pre(const amn_model *m, hf_rev_pre_out *out, amn_error *err);
int hf_rev_pre_check(const amn_model *m, amn_error *err);
struct json_object *hf_rev_byte_level(bool prefix, bool use_regex);
struct json_object *hf_rev_escaped_decoder(void);

/* Key/value readers (hf_rev_files.c). */
const amn_kv *hf_rev_kv(const amn_model *m, const char *arch, const char *suffix);
bool hf_rev_num(const amn_kv *kv, double *v);

#endif
