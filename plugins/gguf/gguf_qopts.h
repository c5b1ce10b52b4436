/* llama-quantize's options that reshape the output file rather than choose
 * a tensor's type (tools/quantize/quantize.cpp and src/llama-quant.cpp at
 * llama.cpp 3af988fab): --override-kv, --prune-layers, --tensor-type-file,
 * --include-weights / --exclude-weights. Pure functions over names and
 * text; the encoder (gguf_encode.c) and writer (gguf_writer.c) apply them. */
#ifndef AMN_GGUF_QOPTS_H
#define AMN_GGUF_QOPTS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/error.h"
#include "gguf_format.h"
#include "gguf_qpolicy.h"

/* --override-kv KEY=TYPE:VALUE, TYPE one of int, float, bool, str (common.
 * cpp string_parse_kv_override). Checks the syntax only: a key of 1 to 127
 * bytes, a bool true or false, a str of at most 127 bytes, and (stricter
 * than llama-quantize's atol/atof, which read garbage as 0) an int or float
 * that is a whole number. AMN_E_INVALID naming the problem. */
int gguf_qopts_check_kv(const char *spec, amn_error *err);

/* Apply one --override-kv to l as llama-quantize's gguf_set_val_* does: the
 * key removed and appended, int stored as u32 |v| (mod 2^32), float as f32,
 * bool, str. The spec must have passed gguf_qopts_check_kv. */
int gguf_qopts_apply_kv(const char *spec, gguf_kvlist *l, amn_error *err);

/* --prune-layers L0,L1,...: layer numbers (>= 0, decimal), sorted and
 * deduplicated into *out (malloc'd, *n of them). AMN_E_INVALID naming a bad
 * entry (empty, negative, not a number, above INT32_MAX). */
int gguf_qopts_parse_prune(const char *list, int32_t **out, size_t *n, amn_error *err);

/* Layer renumbering of llama-quant.cpp remap_layer, applied to names[0..n)
 * visited in llama-quantize's walk order (gguf_qpolicy_walk_order): a name
 * whose first "blk.N." has N in prune is dropped (renamed[i] = NULL), a
 * layer below the first pruned one keeps its number, every other layer
 * takes the next number in walk order; names without a layer are kept.
 * renamed[i] is malloc'd (the caller frees each) or NULL; *n_layers gets
 * the block count llama-quantize then writes (its next_id). */
int gguf_qopts_prune(const char *const *names, size_t n, const int32_t *prune, size_t n_prune,
                     char **renamed, uint32_t *n_layers, amn_error *err);

/* --tensor-type-file FILE: its whitespace-separated words (each one a
 * --tensor-type PATTERN=TYPE, checked by the caller), as one malloc'd
 * block: *words[0..*n) point into it (free(*words) frees all). A file that
 * cannot be read, larger than 16 MiB, or holding a NUL byte is
 * AMN_E_IO / AMN_E_LIMIT / AMN_E_PARSE naming it. */
int gguf_qopts_read_type_file(const char *path, char ***words, size_t *n, amn_error *err);

/* --include-weights / --exclude-weights: whether an importance-matrix
 * entry named `name` is kept (quantize.cpp prepare_imatrix: a plain
 * substring search, so "output.weight" also names "blk.N.attn_output.
 * weight"). With neither list every entry is kept; they never change a
 * file made without an importance matrix. */
bool gguf_qopts_imatrix_keeps(const char *name, const char *const *include, size_t n_include,
                              const char *const *exclude, size_t n_exclude);

/* The encoder's view of these options, from its "KEY=VALUE" parameters:
 * override_kv=SPEC, prune_layers=LIST, tensor_type_file=PATH,
 * include_weights=NAME, exclude_weights=NAME, dry_run=1 (the caller lists
 * the outputs instead of writing them: nothing for the encoder to do). */
typedef struct gguf_qopts_file {
    size_t param; /* the parameter that named it */
    char *what;   /* "--tensor-type-file PATH", for errors */
    char **words; /* gguf_qopts_read_type_file's block */
    size_t n;
} gguf_qopts_file;

typedef struct gguf_qopts_enc {
    char **kv; /* --override-kv specs, checked, in order (copies) */
    size_t n_kv;
    int32_t *prune; /* sorted, unique */
    size_t n_prune;
    char **include, **exclude; /* copies */
    size_t n_include, n_exclude;
    gguf_qopts_file *files;
    size_t n_files;
    size_t n_file_words, file_bytes; /* totals over files, for the caller's overrides */
    bool dry_run;                    /* --dry-run: no tensor's data is read */
} gguf_qopts_enc;

/* Take parameter number i, p, when it is one of the keys above: *taken
 * says whether it was. Errors name the option. */
int gguf_qopts_enc_param(gguf_qopts_enc *q, size_t i, const char *p, bool *taken, amn_error *err);
/* After every parameter: llama-quantize's refusal of --include-weights with
 * --exclude-weights. */
int gguf_qopts_enc_check(const gguf_qopts_enc *q, amn_error *err);
void gguf_qopts_enc_free(gguf_qopts_enc *q);

/* llama-quantize loads the model with the --override-kv applied, so an
 * int override of {arch}.block_count, .attention.head_count,
 * .attention.head_count_kv or .expert_count is what its type choice reads
 * (the loader's try_override: the value converted to uint32_t). Another
 * type there is ignored by the type choice, as the loader ignores it ("bad
 * metadata override type" warning; the file's value is read), and still
 * written. */
int gguf_qopts_policy_overrides(const gguf_qopts_enc *q, gguf_qpolicy_model *pm, amn_error *err);

/* --prune-layers over the policy's view of a GGUF input's n tensors:
 * renamed[0..n) as gguf_qopts_prune gives them (NULL: pruned), then ts
 * compacted in place to the kept tensors under their new names (pointing
 * into renamed), *n their count, index[k] the model tensor of ts[k]. */
int gguf_qopts_prune_view(const gguf_qopts_enc *q, gguf_qpolicy_tensor *ts, size_t *n,
                          size_t *index, char **renamed, uint32_t *n_layers, amn_error *err);

/* The writer options llama-quantize's metadata takes (gguf_writer.c):
 * llama_ftype=FTYPE, then llama_kv=SPEC for each --override-kv in order,
 * then with pruning llama_kv=ARCH.block_count=int:N_LAYERS (set last, as
 * llama-quantize sets it after the overrides). *opts[0..*n) malloc'd, and
 * the array (gguf_qopts_free_strings frees both). */
int gguf_qopts_writer_options(const gguf_qopts_enc *q, int ftype, const char *arch, bool pruned,
                              uint32_t n_layers, char ***opts, size_t *n, amn_error *err);
void gguf_qopts_free_strings(char **s, size_t n);

#endif
