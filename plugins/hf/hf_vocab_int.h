/* hf_vocab_int.h — internals shared by the hf_vocab*.c / hf_tok*.c files:
 * an ordered key/value list with GGUFWriter's replace-in-place semantics, an
 * arena that owns every value until the list is handed to the model, and the
 * file readers (JSON, raw bytes) capped by amn_limits. */
#ifndef AMN_PLUGIN_HF_VOCAB_INT_H
#define AMN_PLUGIN_HF_VOCAB_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "amn/error.h"
#include "amn/format.h"
#include "amn/model.h"

/* gguf.TokenType / SentencePieceTokenTypes */
enum {
    HF_TT_NORMAL = 1,
    HF_TT_UNKNOWN,
    HF_TT_CONTROL,
    HF_TT_USER_DEFINED,
    HF_TT_UNUSED,
    HF_TT_BYTE
};

typedef struct hf_arena {
    void **blocks;
    size_t n, cap;
    uint64_t bytes; /* allocated so far, capped by max_alloc */
    const amn_limits *lim;
} hf_arena;

/* Zeroed memory owned by the arena; NULL (and err set) past the caps. */
void *hf_alloc(hf_arena *a, uint64_t count, uint64_t size, amn_error *err);
char *hf_strdup(hf_arena *a, const char *s, size_t n, amn_error *err);
void hf_arena_free(hf_arena *a);

/* Keys are string literals; values live in the arena. */
typedef struct hf_vkvs {
    amn_kv *v;
    size_t n, cap;
    hf_arena *arena;
} hf_vkvs;

int hf_vkv_set(hf_vkvs *k, const amn_kv *kv, amn_error *err); /* replaces in place */
void hf_vkv_remove(hf_vkvs *k, const char *key);
int hf_vkv_str(hf_vkvs *k, const char *key, const char *s, size_t n, amn_error *err);
int hf_vkv_u32(hf_vkvs *k, const char *key, uint32_t v, amn_error *err);
int hf_vkv_bool(hf_vkvs *k, const char *key, bool v, amn_error *err);
/* data already in the arena; count 0 adds nothing (GGUFWriter.add_array). */
int hf_vkv_array(hf_vkvs *k, const char *key, amn_kv_type elem, uint64_t count, const void *data,
                 amn_error *err);
void hf_vkv_free(hf_vkvs *k);

/* dir/name exists as a regular file. */
bool hf_file_exists(const char *dir, const char *name);
/* Parse dir/name as a JSON object (caps from lim); *out NULL when absent. */
int hf_json_load(const char *dir, const char *name, const amn_limits *lim, json_object **out,
                 amn_error *err);
/* Read dir/name whole into the arena (NUL added), capped by cap bytes. */
int hf_file_load(hf_arena *a, const char *dir, const char *name, uint64_t cap, char **out,
                 size_t *n, amn_error *err);

/* Python truthiness of an optional JSON value. */
bool hf_json_truthy(json_object *o);
/* obj[key] when obj is an object and the member exists, else NULL. */
json_object *hf_json_get(json_object *obj, const char *key);
/* UTF-8 validity (Python decodes every string the converter handles). */
bool hf_utf8_valid(const char *s, size_t n);
/* The converter's does_token_look_special. */
bool hf_token_looks_special(const char *s, size_t n);

/* --- SentencePiece ModelProto (hf_spm.c) --- */
typedef struct hf_spm_piece {
    const char *piece; /* into the file buffer, not NUL-terminated */
    uint32_t len;
    float score;
    int type; /* sentencepiece ModelProto.SentencePiece.Type, 1..6 */
} hf_spm_piece;

int hf_spm_parse(const uint8_t *buf, size_t n, const amn_limits *lim, hf_arena *a,
                 hf_spm_piece **pieces, uint64_t *count, amn_error *err);

/* --- vocabulary builders (token lists appended to kvs) --- */
typedef struct hf_vctx {
    const char *dir;
    const amn_limits *lim;
    uint64_t vocab_size; /* hparams vocab_size, 0 absent */
    hf_arena *arena;
    hf_vkvs *kvs;
} hf_vctx;

/* _set_vocab_sentencepiece (phi3: Phi3MiniModel's variant). AMN_E_IO with
 * errno ENOENT-like message when tokenizer.model is absent: *missing set. */
int hf_vocab_spm(hf_vctx *c, bool phi3, bool *missing, amn_error *err);
/* _set_vocab_llama_hf over tokenizer.json (root, already parsed) */
int hf_vocab_llama_hf(hf_vctx *c, json_object *root, amn_error *err);
/* _set_vocab_gpt2 */
int hf_vocab_gpt2(hf_vctx *c, amn_error *err);
/* gguf.SpecialVocab(dir, load_merges, types, n_vocab).add_to_gguf; types NULL:
 * the default set; n_vocab 0: None. fixed_* are _set_special_token calls made
 * after construction (in order), chat_template_none drops the template. */
typedef struct hf_special_opts {
    bool load_merges;
    const char *const *types; /* NULL-terminated */
    uint64_t n_vocab;
    const char *const *fixed_types; /* NULL-terminated, parallel to fixed_ids */
    const int64_t *fixed_ids;
    bool chat_template_none;
} hf_special_opts;
int hf_special_vocab(hf_vctx *c, const hf_special_opts *o, amn_error *err);

/* --- BPE check-text encoding (hf_tok*.c) --- */
/* The converter's chkhsh of tokenizer.json (root already parsed): hex into
 * out[65]. */
int hf_tok_chkhsh(json_object *root, const amn_limits *lim, char out[65], amn_error *err);
/* tokenizer.encode(text, add_special_tokens=True) of the same encoder into
 * ids[0, *n) (at most cap): for checking it on other strings than the check
 * text, made of ASCII and the check text's characters (the only code points
 * whose Unicode categories hf_tok_ucat knows); at most HF_TOK_MAX_CP bytes. */
int hf_tok_encode(json_object *root, const amn_limits *lim, const char *text, size_t len,
                  int64_t *ids, size_t *n, size_t cap, amn_error *err);
/* transformers' LlamaTokenizerFast (tokenizer_class LlamaTokenizerFast or
 * LlamaTokenizer in tokenizer_config.json, config may be NULL) replaces the
 * post-processor of tokenizer.json by its own, from add_bos_token (default
 * on) and add_eos_token (default off) with bos_token / eos_token; as it
 * encodes the check text that way, so does the hash. */
int hf_tok_config_post(json_object *root, json_object *config, amn_error *err);
/* get_vocab_base_pre's table: name for a hash, NULL if unknown. */
const char *hf_tok_pre_name(const char *hex);

#endif
