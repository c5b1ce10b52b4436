/* llama-quantize's choice of a ggml type per tensor, as a pure function.
 *
 * Follows llama.cpp src/llama-quant.cpp (EAddario/llama.cpp 3af988fab):
 * tensor_allows_quantization, llama_tensor_get_type, _impl and
 * tensor_type_fallback, the counters of init_quantize_state_counters, the
 * walk order of llama_model_loader::weights_map (weight_name_comparer), the
 * importance-matrix refusal of tensor_requires_imatrix, and the file types
 * of tools/quantize/quantize.cpp (QUANT_OPTIONS) with
 * llama_ftype_get_default_type; with has_imatrix, the rules that depend on
 * an importance matrix being given (qs.has_imatrix). */
#ifndef AMN_GGUF_QPOLICY_H
#define AMN_GGUF_QPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/error.h"

/* llama_ftype numbers (include/llama.h), as general.file_type stores them. */
enum {
    GGUF_FTYPE_ALL_F32 = 0,
    GGUF_FTYPE_F16 = 1,
    GGUF_FTYPE_Q4_0 = 2,
    GGUF_FTYPE_Q4_1 = 3,
    GGUF_FTYPE_Q8_0 = 7,
    GGUF_FTYPE_Q5_0 = 8,
    GGUF_FTYPE_Q5_1 = 9,
    GGUF_FTYPE_Q2_K = 10,
    GGUF_FTYPE_Q3_K_S = 11,
    GGUF_FTYPE_Q3_K_M = 12,
    GGUF_FTYPE_Q3_K_L = 13,
    GGUF_FTYPE_Q4_K_S = 14,
    GGUF_FTYPE_Q4_K_M = 15,
    GGUF_FTYPE_Q5_K_S = 16,
    GGUF_FTYPE_Q5_K_M = 17,
    GGUF_FTYPE_Q6_K = 18,
    GGUF_FTYPE_IQ2_XXS = 19,
    GGUF_FTYPE_IQ2_XS = 20,
    GGUF_FTYPE_Q2_K_S = 21,
    GGUF_FTYPE_IQ3_XS = 22,
    GGUF_FTYPE_IQ3_XXS = 23,
    GGUF_FTYPE_IQ1_S = 24,
    GGUF_FTYPE_IQ4_NL = 25,
    GGUF_FTYPE_IQ3_S = 26,
    GGUF_FTYPE_IQ3_M = 27,
    GGUF_FTYPE_IQ2_S = 28,
    GGUF_FTYPE_IQ2_M = 29,
    GGUF_FTYPE_IQ4_XS = 30,
    GGUF_FTYPE_IQ1_M = 31,
    GGUF_FTYPE_BF16 = 32,
    GGUF_FTYPE_TQ1_0 = 36,
    GGUF_FTYPE_TQ2_0 = 37,
    GGUF_FTYPE_MXFP4_MOE = 38,
    GGUF_FTYPE_NVFP4 = 39,
    GGUF_FTYPE_Q1_0 = 40,
    GGUF_FTYPE_Q2_0 = 41,
    GGUF_FTYPE_GUESSED = 1024, /* or'ed in: not in the file, guessed from its tensors */
};

/* A file type by llama-quantize's name (QUANT_OPTIONS, case-insensitive,
 * aliases Q3_K / Q4_K / Q5_K included). False for an unknown name. */
bool gguf_ftype_parse(const char *name, int *ftype);
/* llama-quantize's name of a file type, or NULL. */
const char *gguf_ftype_name(int ftype);
/* llama_ftype_get_default_type; GGUF_TYPE_COUNT for an unknown file type. */
uint32_t gguf_ftype_default_type(int ftype);

/* What the rules read from the model's metadata. */
typedef struct gguf_qpolicy_model {
    const char *arch;   /* general.architecture ("llama", "falcon", ...) */
    char arch_buf[64];  /* gguf_qpolicy_read_model's copy, arch points here */
    uint32_t n_layer;   /* {arch}.block_count */
    uint32_t n_head;    /* {arch}.attention.head_count (layer 0) */
    uint32_t n_head_kv; /* {arch}.attention.head_count_kv (layer 0; = n_head if absent) */
    uint32_t n_expert;  /* {arch}.expert_count (0 if absent) */
} gguf_qpolicy_model;

typedef struct gguf_qpolicy_tensor {
    const char *name;
    uint32_t type; /* its ggml type in the input */
    int64_t ne[4]; /* GGUF order: ne[0] is the row length; absent dims 1 */
} gguf_qpolicy_tensor;

/* --tensor-type PATTERN=TYPE: PATTERN as llama-quantize takes it (lowered,
 * searched in the tensor name; POSIX extended syntax here, with \d \w \s
 * and their negations as in ECMAScript). */
typedef struct gguf_qpolicy_override {
    const char *pattern;
    uint32_t type;
} gguf_qpolicy_override;

typedef struct gguf_qpolicy_options {
    int ftype;
    bool pure;                              /* --pure */
    bool leave_output_tensor;               /* --leave-output-tensor */
    bool allow_requantize;                  /* --allow-requantize */
    bool has_imatrix;                       /* --imatrix given (with entries) */
    uint32_t output_tensor_type;            /* --output-tensor-type; GGUF_TYPE_COUNT: none */
    uint32_t token_embedding_type;          /* --token-embedding-type; GGUF_TYPE_COUNT: none */
    const gguf_qpolicy_override *overrides; /* --tensor-type, in command-line order */
    size_t n_overrides;
    /* --keep-split: the walk takes the tensors in the order given (the
     * input's: by shard, then offset, as llama-quantize sorts them then),
     * not weights_map's; the counters of the rules follow it. */
    bool input_order;
    /* COPY: no tensor may be quantized; each keeps its type and bytes. */
    bool only_copy;
} gguf_qpolicy_options;

/* The options llama-quantize starts from for a file type. */
gguf_qpolicy_options gguf_qpolicy_defaults(int ftype);

/* Per-tensor types for the n tensors: order[k] is the index of the k-th
 * tensor in llama-quantize's walk (its output order), types[i] the ggml
 * type tensor i is written as (its own type when it is copied). Errors, as
 * llama-quantize raises them: AMN_E_INVALID for an unknown file type or a
 * bad pattern; AMN_E_UNSUPPORTED "this quantization requires an importance
 * matrix" (naming the first offending tensor in walk order and its target
 * type), "no tensor type fallback is defined for type X", "requantizing
 * from type X is disabled" (a quantized input without allow_requantize),
 * "cannot dequantize/convert tensor type X"; AMN_E_PARSE for an expert
 * tensor whose layer cannot be read from its name. */
int gguf_qpolicy_choose(const gguf_qpolicy_model *model, const gguf_qpolicy_tensor *tensors,
                        size_t n, const gguf_qpolicy_options *opt, size_t *order, uint32_t *types,
                        amn_error *err);

/* tensor_requires_imatrix (lq:785-804): a tensor quantized to dst in a
 * file of ftype needs importance-matrix data (the low-bit i-quants, Q2_K in
 * Q2_K_S; never token_embd.weight or output.weight). */
bool gguf_qpolicy_requires_imatrix(const char *name, uint32_t dst, int ftype);

/* The file type llama.cpp's loader guesses from the tensors' types
 * (llama_model_loader, with LLAMA_FTYPE_GUESSED or'ed in): the type most
 * tensors have, the first to reach that count in the walk order winning a
 * tie; GGUF_FTYPE_ALL_F32 for a type without a file type of its own.
 * GGUF_TYPE_COUNT (as a file type) when out of memory. */
uint32_t gguf_qpolicy_guess_ftype(const gguf_qpolicy_tensor *tensors, size_t n);

/* llama-quantize's walk (and output) order of tensors by name:
 * order[k] = index of the k-th name. False when out of memory. */
bool gguf_qpolicy_walk_order(const char *const *names, size_t n, size_t *order);

#endif
