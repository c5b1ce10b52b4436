/* amn/scheme.h — the quant-scheme vtable a kernel-family plugin registers.
 *
 * detect() looks at a whole model and claims groups of tensors that together
 * form one quantized weight (a GPTQ qweight with its scales, zeros and g_idx;
 * an FP8 weight with its scale; a GGUF block tensor alone). Each claimed group
 * becomes one output tensor. dequantize() then fills any range of that
 * tensor's rows, so the core can stream and thread the work.
 */
#ifndef AMN_SCHEME_H
#define AMN_SCHEME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/dtype.h"
#include "amn/error.h"
#include "amn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct amn_claimset amn_claimset;
struct amn_encoder;

typedef enum amn_role {
    AMN_ROLE_WEIGHT = 1,  /* the packed / low-precision values */
    AMN_ROLE_SCALE,       /* scale factors */
    AMN_ROLE_ZERO,        /* zero points */
    AMN_ROLE_GROUP_INDEX, /* g_idx */
    AMN_ROLE_AUX,         /* codebooks, nested scales, quant_state blobs */
    AMN_ROLE_ACT_SCALE,   /* activation scales: metadata, dropped from outputs */
} amn_role;

#define AMN_GROUP_MAX_MEMBERS 8

/* struct_size first (sizeof(amn_group_spec) as the plugin was built): the
 * claimset reads only the fields it covers, later ones zero, so ABI minors
 * may append fields. */
typedef struct amn_group_spec {
    uint32_t struct_size;
    /* Output tensor name; NULL when the members are only dropped (an
     * input_scale with no weight to dequantize). */
    const char *out_name;
    uint32_t ndim;
    uint64_t shape[AMN_MAX_DIMS];
    /* Elements per row for dequantize(); divides product(shape). */
    uint64_t row_elems;
    size_t n_members;
    size_t members[AMN_GROUP_MAX_MEMBERS]; /* tensor indices in the model */
    uint8_t roles[AMN_GROUP_MAX_MEMBERS];  /* amn_role of each member */
    const char *label;                     /* "GPTQ 4-bit, group 128, act-order" */
    void *plan;                            /* scheme-private */
    void (*plan_free)(void *plan);         /* may be NULL */
    /* ABI 2.3, optional: dequantize() runs fastest when row0 and nrows are
     * multiples of this (a kernel working on blocks of rows), and the core
     * cuts its chunks and the workers' slices at such multiples where it can
     * (the last slice of a tensor may be short). A hint: 0 and 1 mean any
     * row; output bytes never depend on it. */
    uint64_t row_quantum;
} amn_group_spec;

/* True when another group already claimed tensor i. */
AMN_API bool amn_claimset_is_claimed(const amn_claimset *cs, size_t tensor_index);
/* Add a group. The claimset copies the spec (the fields g->struct_size
 * covers) and owns `plan` from here on, also when this fails (a member out
 * of range or already claimed: AMN_E_PARSE; a struct_size below ABI 2.0's:
 * AMN_E_INVALID). */
AMN_API int amn_claimset_add(amn_claimset *cs, const amn_group_spec *g, amn_error *err);

/* ---- Encoding ("forget", "convert --to <target>") ----
 *
 * A scheme that encodes lists its targets ("bnb-nf4", "q4_k_m", ...). The
 * core drives one model's encoding in steps that keep memory at about one
 * chunk per worker and make the bytes independent of the thread count:
 *
 * 1. begin() sees the options and every logical tensor of the model (what
 *    `remember` would write: names, dtypes, shapes) at once, so a target
 *    whose per-tensor choice depends on the whole model (a GGUF mixture
 *    picks types from the layer names) can decide. Options it cannot honour
 *    (a block size) fail here, before any output exists.
 * 2. tensor() says, per logical tensor, whether it is encoded (n_outs > 0)
 *    and declares each output tensor that replaces it: name, dtype, shape,
 *    byte size and the unit fill() works in. Everything the writer needs is
 *    known before a byte is written. n_outs = 0 passes the tensor through.
 * 3. Writing. Before the first output of an encoded tensor is filled, the
 *    core calls stats() once, on the main thread (optional: a pass over the
 *    values for whole-tensor statistics such as the mean of the block
 *    absmax; it reads the source in chunks and keeps O(1) results in the
 *    tensor state). Then fill() produces units [unit0, unit0 + n) of output
 *    `out` into dst, called from worker threads on disjoint ranges; it reads
 *    the values it needs through `v` and must not depend on the split.
 *
 * Every struct here crosses the plugin boundary and begins with its size. */

/* A tensor's values as F32, whatever the source (plain, cast, dequantized). */
typedef struct amn_values {
    uint32_t struct_size;
    uint64_t numel;
    const void *ctx;
    /* Elements [e0, e0 + n) of the row-major tensor into dst. Reentrant. */
    int (*read)(const void *ctx, uint64_t e0, uint64_t n, float *dst, amn_error *err);
    /* ABI 2.5 (check struct_size): elements of any logical tensor of the
     * model, by its index in begin()'s src, for an output assembled from
     * several sources (a converter stacking experts). Reentrant. */
    const void *all;
    int (*read_source)(const void *all, size_t source, uint64_t e0, uint64_t n, float *dst,
                       amn_error *err);
    /* ABI 2.6 (check struct_size; NULL where the core has none): elements
     * [e0, e0 + n) stored as `to` (F32, F16 or BF16, little-endian) into
     * dst: the bytes amn_store_f32 makes of what read() gives, produced
     * straight from the stored dtype where it differs from `to` (a BF16
     * weight rounded to F16 in one pass, no F32 buffer). Reentrant. */
    int (*read_as)(const void *ctx, uint64_t e0, uint64_t n, amn_dtype to, void *dst,
                   amn_error *err);
} amn_values;

/* A logical tensor of the model, as begin() sees it. */
typedef struct amn_encode_source {
    uint32_t struct_size;
    const char *name;
    amn_dtype dtype; /* as stored, or the dequantized dtype of a quantized weight */
    uint32_t ndim;
    uint64_t shape[AMN_MAX_DIMS];
    bool dequantized; /* a quantized weight of the input, decoded first */
    bool keep;        /* the user asked to keep it (--keep GLOB matched) */
} amn_encode_source;

typedef struct amn_encode_options {
    uint32_t struct_size;
    const char *target;  /* one of the encoder's targets */
    uint64_t block_size; /* 0 = the target's default */
    /* The input model (set by the core): its metadata, for targets whose
     * per-tensor choice reads it (a GGUF file type reads the layer and head
     * counts). Valid until end(). */
    const amn_model *model;
    /* "KEY=VALUE" parameters of the target, in command-line order (a GGUF
     * file type takes llama-quantize's options: pure=1, leave_output_tensor=1,
     * allow_requantize=1, output_tensor_type=T, token_embedding_type=T,
     * tensor_type=PATTERN=T). An encoder refuses a key it does not take
     * (AMN_E_INVALID naming it); one built before these fields never sees
     * them, so callers pass none to such a target. */
    const char *const *params;
    size_t n_params;
    /* Appended (check AMN_HAS_FIELD; a core without it takes
     * AMN_ENCODE_MAX_OUTS): how many outputs one tensor() call may give,
     * at least AMN_ENCODE_MAX_OUTS (a GGUF's stacked experts split back into
     * one tensor per expert: 128 for Qwen3-30B-A3B). */
    size_t max_outs;
} amn_encode_options;

/* One output tensor an encoded tensor turns into. */
typedef struct amn_encode_out {
    uint32_t struct_size;
    const char *name; /* owned by the tensor state, valid until tensor_free */
    amn_dtype dtype;
    uint32_t ndim;
    uint64_t shape[AMN_MAX_DIMS];
    uint64_t nbytes;
    uint64_t unit_bytes; /* fill() granularity, >= 1, divides nbytes */
    uint32_t encoding;   /* for AMN_DTYPE_BLOCK outputs */
    const char *encoding_name;
} amn_encode_out;

#define AMN_ENCODE_MAX_OUTS 8    /* outputs per tensor() any core takes */
#define AMN_ENCODE_OUTS_CAP 4096 /* this core's amn_encode_options.max_outs */
#define AMN_ENCODE_DROP     ((size_t)-1)

typedef struct amn_encoder {
    uint32_t struct_size;
    const char *const *targets; /* NULL-terminated: "bnb-nf4", "bnb-int8", ... */
    /* src[0..n) (and the names in it) stay valid until end(). */
    int (*begin)(const amn_encode_options *o, const amn_encode_source *src, size_t n,
                 void **model_state, amn_error *err);
    /* Up to max_outs outputs of source i (their struct_size set
     * by the core); *n_outs = 0 passes it through; AMN_ENCODE_DROP (ABI
     * 2.5) writes nothing for it (a source another output is assembled
     * from, or one a converter leaves out). */
    int (*tensor)(void *model_state, size_t i, amn_encode_out *outs, size_t *n_outs,
                  void **tensor_state, amn_error *err);
    int (*stats)(void *tensor_state, const amn_values *v, amn_error *err); /* optional */
    /* abs_err, when not NULL, gets the sum of |x - decode(encode(x))| over
     * the source values this call encoded (for "Lethe took"). */
    int (*fill)(const void *tensor_state, size_t out, uint64_t unit0, uint64_t n,
                const amn_values *v, void *dst, double *abs_err, amn_error *err);
    void (*tensor_free)(void *tensor_state);
    /* Optional: the JSON object a model's config.json keeps as
     * "quantization_config" (malloc'd text), or NULL in *json. */
    int (*config)(void *model_state, char **json, amn_error *err);
    void (*end)(void *model_state);
    /* Optional, called after every tensor(): "KEY=VALUE" options the
     * target needs from the output's writer (a GGUF file type: the file-type
     * keys and tensor order llama-quantize writes), applied before the
     * user's own. The strings stay valid until end(). */
    int (*writer_options)(void *model_state, const char *const **options, size_t *n,
                          amn_error *err);
    /* Optional, called after writer_options(): a model whose key/values the
     * output's writer takes as the source's metadata in place of the input
     * model's (a converter that derives a GGUF's keys from a model folder's
     * config.json). *kvs stays owned by the model state, valid until end();
     * NULL keeps the input model. */
    int (*metadata)(void *model_state, const amn_model **kvs, amn_error *err);
} amn_encoder;

/* A necessary condition of a scheme's detect(), as data, so that the core can
 * skip a scheme without loading its plugin (the registry cache): a tensor
 * whose name ends with `suffix` ("" for any name) and, when dtypes is not 0,
 * whose dtype's bit (1 << amn_dtype) is set in it. A scheme that lists keys
 * promises that on a model in which no tensor matches any key its detect()
 * claims nothing and returns AMN_OK. A list ends with {NULL, 0}. Frozen: it
 * sits in arrays. */
typedef struct amn_detect_key {
    const char *suffix;
    uint64_t dtypes;
} amn_detect_key;

typedef struct amn_scheme {
    uint32_t struct_size;
    const char *name;        /* "fp8", "gptq", "awq", "gguf" */
    const char *description; /* "FP8 E4M3/E5M2 with per-tensor, per-channel or block scales" */
    /* Claim the groups of m this scheme understands. detect() also runs on
     * header-only models (amn_inspect: every tensor's data is NULL); then it
     * decides from names, dtypes, shapes and metadata alone and must not
     * dereference data. A malformed companion is
     * AMN_E_PARSE naming the tensor; recognised but unhandled layouts are
     * AMN_E_UNSUPPORTED. Must not claim what amn_claimset_is_claimed reports. */
    int (*detect)(const amn_model *m, amn_claimset *cs, amn_error *err);
    /* Write rows [row0, row0 + nrows) of a group's output, row-major, as `out`
     * (F32, F16 or BF16) into dst. Reentrant: called from several threads on
     * disjoint row ranges. Results must not depend on the range split. */
    int (*dequantize)(const amn_model *m, const void *plan, uint64_t row0, uint64_t nrows,
                      amn_dtype out, void *dst, amn_error *err);
    /* Optional (NULL: the scheme only decodes): the encode direction
     * ("forget"), see amn_encoder above. */
    const struct amn_encoder *encoder;
    /* Optional: detect()'s keys (amn_detect_key above), read through
     * amn_scheme_detect_keys(). NULL: the core loads the plugin to run
     * detect() on every model. A hint only: older cores ignore it. */
    const amn_detect_key *detect_keys;
} amn_scheme;

/* The scheme's encoder, or NULL (none, or a vtable from before the field). */
static inline const amn_encoder *amn_scheme_encoder(const amn_scheme *s) {
    return s->struct_size >= offsetof(amn_scheme, encoder) + sizeof s->encoder ? s->encoder : NULL;
}

/* The detect keys, or NULL (none declared, or a vtable from before the slot). */
static inline const amn_detect_key *amn_scheme_detect_keys(const amn_scheme *s) {
    return s->struct_size >= offsetof(amn_scheme, detect_keys) + sizeof s->detect_keys
               ? s->detect_keys
               : NULL;
}
#ifdef __cplusplus
}
#endif
#endif
