/* amn/convert.h — planning and running remember / convert.
 *
 * A plan runs every registered scheme's detect() over a model and sorts its
 * tensors into quantized groups (one output tensor each), dropped activation
 * scales, and passthrough tensors. Tensors that look quantized but that no
 * loaded scheme claimed are counted as unhandled (inspect reports them), and
 * amn_convert refuses them with AMN_E_UNSUPPORTED naming the tensors and the
 * plugin to install. amn_convert streams the output: tensor by
 * tensor, in chunks, so memory stays about one chunk per thread.
 */
#ifndef AMN_CONVERT_H
#define AMN_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/context.h"
#include "amn/dtype.h"
#include "amn/error.h"
#include "amn/model.h"
#include "amn/scheme.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct amn_plan amn_plan;

AMN_API int amn_plan_new(const amn_ctx *ctx, const amn_model *m, amn_plan **out, amn_error *err);
AMN_API void amn_plan_free(amn_plan *p);

/* struct_size first, set by the caller (amn/context.h, "Application ABI"). */
typedef struct amn_plan_summary {
    uint32_t struct_size;
    size_t groups;    /* quantized weights (output tensors from a scheme) */
    size_t quantized; /* member tensors with role WEIGHT */
    size_t scales, zeros, group_indices, aux;
    size_t dropped;             /* activation scales left out of outputs */
    size_t passthrough;         /* tensors copied as they are */
    uint64_t current_bytes;     /* all tensors as stored */
    uint64_t after_bytes;       /* after remember at `out` */
    const char *scheme;         /* scheme name of the groups, "mixed", or NULL */
    const char *label;          /* label of the first group, or NULL */
    bool labels_differ;         /* groups carry more than one label */
    size_t unhandled;           /* tensors that look quantized but no scheme claimed */
    const char *missing_plugin; /* the plugin that would claim them ("fp8", ...), or NULL */
} amn_plan_summary;

/* Sizes computed as if dequantizing to `out`. AMN_E_INVALID when
 * s->struct_size is too small. */
AMN_API int amn_plan_summarize(const amn_plan *p, amn_dtype out, amn_plan_summary *s);

/* Per group: name, label, scheme, output shape. */
AMN_API size_t amn_plan_group_count(const amn_plan *p);
typedef struct amn_group_info {
    uint32_t struct_size; /* set by the caller */
    const char *out_name;
    const char *label;
    const char *scheme;
    uint32_t ndim;
    const uint64_t *shape;
    size_t n_members;
    const size_t *members;
    const uint8_t *roles;
} amn_group_info;
AMN_API int amn_plan_group(const amn_plan *p, size_t i, amn_group_info *out);
/* Dequantizing one group outside a conversion (language bindings, a
 * reader that wants one weight). Group i's output is rows x row_elems
 * elements, row-major, rows = product(shape) / row_elems; *row_elems gets
 * the second (AMN_E_INVALID for a group index out of range or a dropped
 * group without output). */
AMN_API int amn_plan_group_rows(const amn_plan *p, size_t i, uint64_t *rows, uint64_t *row_elems,
                                amn_error *err);
/* Write rows [row0, row0 + nrows) of group i's output as `out` (F32, F16 or
 * BF16) into dst, which holds nrows * row_elems elements of `out`. The model
 * the plan was made from must have been opened with amn_open (tensor data
 * mapped; an inspected model is AMN_E_INVALID). Reentrant: threads may fill
 * disjoint row ranges at once; the bytes do not depend on the split. */
AMN_API int amn_plan_dequantize(const amn_plan *p, size_t i, uint64_t row0, uint64_t nrows,
                                amn_dtype out, void *dst, amn_error *err);
/* The role of tensor i: 0 for passthrough, else an amn_role. */
AMN_API int amn_plan_tensor_role(const amn_plan *p, size_t tensor_index);
/* True when tensor i looks quantized (a known quantized layout by its name,
 * dtype and companions, or an integer / FP8 tensor of a model whose
 * config.json / hf_quant_config.json declares a quantization method) but no
 * loaded scheme claimed it: amn_convert refuses such a model. *what gets the
 * layout or method ("MXFP4 (gpt-oss)"), *plugin the amn plugin that reads it
 * or NULL when none does; either pointer may be NULL. */
AMN_API bool amn_plan_tensor_unhandled(const amn_plan *p, size_t tensor_index, const char **what,
                                       const char **plugin);

typedef enum amn_mode {
    /* Dequantize quantized groups to out_dtype; copy all else as it is
     * (the CLI's `convert --out-dtype keep`, and its default from or to a
     * format flagged AMN_FORMAT_LOSSLESS). */
    AMN_MODE_REMEMBER = 0,
    /* Also cast every floating tensor to out_dtype; integers and bools copied. */
    AMN_MODE_CONVERT = 1,
} amn_mode;

/* Where a conversion stands, for a progress display. */
typedef struct amn_progress {
    uint32_t struct_size; /* set by libamn: check it before reading a field appended later */
    uint64_t bytes_done;  /* bytes of the output written so far */
    uint64_t bytes_total; /* the output's size */
    size_t tensor_index;  /* the tensor being written, 0-based; tensor_count when done */
    size_t tensor_count;
    const char *tensor_name; /* the tensor being written, NULL when done; valid in the call */
} amn_progress;

/* Called on the thread that runs amn_convert: once before the first tensor,
 * at each tensor's start, after every output chunk (about 1 MiB per worker,
 * or 2 MiB of a copied tensor), and once at the end with bytes_done ==
 * bytes_total. Keep it cheap (rate-limit any display yourself); it cannot
 * stop the conversion. */
typedef void (*amn_progress_fn)(void *user, const amn_progress *p);

typedef struct amn_convert_options {
    uint32_t struct_size; /* sizeof(amn_convert_options) (amn/context.h, "Application ABI") */
    amn_mode mode;
    const char *target;  /* format name; NULL = "safetensors" */
    amn_dtype out_dtype; /* F32, F16 or BF16; INVALID = BF16 */
    const char *output;  /* output path (required) */
    bool overwrite;
    unsigned threads; /* 0 = min(cores, 4) */
    /* Options for the target's writer, "KEY=VALUE" each (amn convert --opt;
     * --gguf-kv V is "kv=V", --gguf-metadata F is "metadata=F"). A key the
     * writer does not declare, or an entry without '=', is AMN_E_INVALID
     * naming it, before any output is created. */
    const char *const *options;
    size_t n_options;
    /* Fields below were appended; zero-initialise the struct. */
    amn_progress_fn progress; /* NULL: none */
    void *progress_user;
    bool no_sync; /* skip the fsyncs of the output and its directory (scratch files) */
    /* Encode ("forget"): when set, tensors the target's encoder chooses are
     * written encoded (amn/scheme.h, amn_encoder); the rest as `mode` says. */
    const amn_encode_options *encode;
    const char *const *keep; /* fnmatch globs of tensors never encoded */
    size_t n_keep;
    char **quant_config; /* if not NULL: the encoder's quantization_config JSON
                            (malloc'd, the caller frees), or NULL */
    /* When set, only the outputs select(select_user, name) keeps are written
     * (one shard of a model folder); the plan and the encoder still see the
     * whole model, so each output's bytes do not depend on the selection. */
    bool (*select)(void *user, const char *name);
    void *select_user;
    /* ABI 2.5: a second encoder chained after `encode` (which must be set):
     * its sources are `encode`'s outputs, named, typed and shaped as
     * `encode` declares them, their values read back through `encode`'s
     * fill() in its output dtype (F32, F16 or BF16), so the result is what
     * writing `encode`'s output and encoding that file would give, without
     * the file. Its model is `encode`'s metadata (amn_encoder.metadata), and
     * its writer options replace `encode`'s: the file is the second step's.
     * NULL: one encoder. */
    const amn_encode_options *encode_then;
    /* Every tensor written as it is stored, quantized ones too (no
     * dequantization; with AMN_MODE_REMEMBER, nothing cast): a container
     * copy, for a target that stores what the input holds (a GGUF's block
     * types to GGUF, as llama-gguf-split copies them); a tensor the target
     * cannot store is AMN_E_UNSUPPORTED naming it. Quantized tensors stored
     * big-endian (a big-endian GGUF's blocks) are dequantized as without it.
     * Not with encode. */
    bool keep_quantized;
} amn_convert_options;

typedef struct amn_convert_stats {
    uint32_t struct_size; /* set by the caller */
    size_t tensors_written;
    size_t dequantized;
    size_t cast;
    size_t dropped;
    uint64_t bytes_written;
    size_t encoded;          /* source tensors written encoded */
    size_t encode_passed;    /* source tensors the encoder passed through */
    double abs_err_sum;      /* sum of |x - decode(encode(x))| over encoded values */
    uint64_t abs_err_values; /* how many values that sum covers */
} amn_convert_stats;

/* The scheme whose encoder lists `target` ("bnb-nf4"), or NULL. */
AMN_API const amn_scheme *amn_ctx_find_encoder(const amn_ctx *ctx, const char *target);

/* Run a conversion of m (opened with amn_open) to opts->output. The output
 * appears whole, and only on success (see amn_sink in amn/io.h: an anonymous
 * O_TMPFILE file linked in at the end, or a named temporary file that a
 * signal handler can remove with amn_sink_unlink_pending). */
AMN_API int amn_convert(const amn_ctx *ctx, const amn_model *m, const amn_plan *plan,
                        const amn_convert_options *opts, amn_convert_stats *stats, amn_error *err);

/* The outputs amn_convert would write for opts (its `output` need not be
 * set and nothing is written), in the model's order, with their sizes:
 * fn(user, t) for each; t is valid during the call. */
typedef void (*amn_output_fn)(void *user, const amn_out_tensor *t);
AMN_API int amn_convert_outputs(const amn_ctx *ctx, const amn_model *m, const amn_plan *plan,
                                const amn_convert_options *opts, amn_output_fn fn, void *user,
                                amn_error *err);

/* The (input format x target) matrix the registry supports: reader formats x
 * writer formats; a cell reason is NULL when feasible. */
AMN_API size_t amn_matrix_inputs(const amn_ctx *ctx);
AMN_API size_t amn_matrix_targets(const amn_ctx *ctx);
AMN_API const char *amn_matrix_input(const amn_ctx *ctx, size_t i);
AMN_API const char *amn_matrix_target(const amn_ctx *ctx, size_t j);

#ifdef __cplusplus
}
#endif
#endif
