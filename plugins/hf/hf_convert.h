/* hf_convert.h — a Hugging Face model folder as llama.cpp's converter
 * (convert_hf_to_gguf.py) would write it: the plan of every output tensor
 * and the GGUF key/values, made before anything is written. */
#ifndef HF_CONVERT_H
#define HF_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/dtype.h"
#include "amn/error.h"
#include "amn/format.h"
#include "amn/model.h"
#include "amn/scheme.h"
#include "hf_arch.h"

/* --outtype */
typedef enum hf_outtype {
    HF_OUT_F32,
    HF_OUT_F16,
    HF_OUT_BF16,
    HF_OUT_Q8_0,
    HF_OUT_TQ1_0,
    HF_OUT_TQ2_0
} hf_outtype;

#define HF_NAME_MAX 128
/* ggml's block types the converter writes (GGML_TYPE_*) */
#define HF_Q8_0  8u
#define HF_TQ1_0 34u
#define HF_TQ2_0 35u
#define HF_MXFP4 39u

/* One output tensor. */
typedef struct hf_out {
    char name[HF_NAME_MAX];
    amn_dtype dtype; /* F32, F16, BF16, or BLOCK (Q8_0, TQ1_0, TQ2_0) */
    uint32_t block;  /* BLOCK: which (HF_Q8_0, ...) */
    amn_dtype src;   /* the source's dtype (the +1 of Gemma's norms depends on it) */
    uint8_t xform;   /* HF_X_* */
    uint32_t n_head; /* rows are permuted in n_head groups (HF_X_PERMUTE_*) */
    uint32_t ndim;
    uint64_t shape[AMN_MAX_DIMS];
    uint64_t rows, cols; /* rows of the last dimension (1-D: numel rows of 1) */
    uint64_t nbytes;
    const float *values; /* a generated tensor (rope_freqs): its values, else NULL */
    bool drop;           /* no output of its own (filtered, or an expert stacked) */
    /* routed experts (hf_experts): a source expert's place, or (n_stack >
     * 0) a stacked output whose dim-0 slices are those sources' values */
    int32_t bid, xid, wid; /* wid 1..3: the family's projection; 0: not an expert */
    uint32_t n_stack;
    const size_t *stack_src;
    /* a part of the source's rows (part_rows > 0): the source is groups
     * of part_stride rows (an expert's, a head's), the part part_rows of
     * each from part_off on, so output row r is source row
     * (r / part_rows) * part_stride + part_off + r % part_rows; with
     * HF_X_TRANSPOSE each group's part is transposed (output [groups,
     * shape[1] = source columns, part_rows]) */
    uint64_t part_rows, part_stride, part_off;
    /* every col_step-th of the source's src_cols columns from col_off on
     * (col_step > 0: gpt-oss's alternating gate and up): output column c,
     * or with HF_X_TRANSPOSE output row c of a group, is source column
     * col_off + c * col_step */
    uint64_t col_step, col_off, src_cols;
    /* MXFP4 repacked (block HF_MXFP4): the checkpoint's packed parts, and
     * the blocks per row (rows picked by part_*, as above) */
    const amn_tensor *mx_blocks, *mx_scales;
    uint64_t mx_groups;
    /* the source as stored, where it is a float tensor of the folder (not
     * a dequantized one): a transposed part's many short reads go to it
     * straight, after one read through the core per fill (its check that
     * the files are whole) */
    const amn_tensor *raw;
} hf_out;

/* What one source tensor becomes: up to 6 outputs (none when dropped). */
typedef struct hf_slot {
    const hf_out *o[6];
    size_t n;
} hf_slot;

typedef struct hf_conv {
    const hf_arch *arch;
    const amn_model *model; /* the folder as opened */
    hf_outtype outtype;
    bool outtype_auto; /* --outtype auto: outtype from the tensors (hf_convert.c) */
    hf_out *outs;      /* per source tensor, in the model's order */
    hf_out *outs2;     /* per source tensor: the second part of a fused one */
    hf_slot *slots;    /* per source tensor: its outputs */
    size_t n_src;
    hf_out extra[2];     /* generated tensors (rope_freqs; Phi-3's rope factors) */
    float *extra_val[2]; /* their values */
    size_t n_extra;
    bool has_attn_factor; /* Phi-3 long context: rope.scaling.attn_factor */
    float attn_factor;
    uint64_t vocab_rows;    /* HF_A_TRIM_VOCAB: the tokenizer's size, else 0 */
    uint32_t n_layers;      /* block count */
    uint64_t cfg_experts;   /* config.json's expert count, else 0 */
    uint64_t n_experts;     /* experts stacked per layer, else 0 */
    const char *expert_key; /* config.json's key of their count */
    hf_out *stacks;         /* stacked experts: 3 per layer */
    size_t *stack_src;      /* their sources: n_experts per stacked output */
    uint8_t *layer_exps;    /* per layer: projections written (bit 0..2) */
    amn_model *kv;          /* format "hf": the GGUF key/values */
    char *order;            /* tensor_order=NAME,... as the converter writes */
    amn_limits lim_own;     /* the caps of every file read (the model's) */
    const amn_limits *lim;  /* &lim_own */
    const char *writer_opts[1];
} hf_conv;

/* Plan the conversion of the model folder behind o->model to o->target
 * ("hf-f16"). */
int hf_conv_new(const amn_encode_options *o, const amn_encode_source *src, size_t n, hf_conv **out,
                amn_error *err);
void hf_conv_free(hf_conv *c);

/* Units [unit0, unit0 + n) (rows along dim 0) of output t into dst. */
int hf_fill(const hf_out *t, uint64_t unit0, uint64_t n, const amn_values *v, void *dst,
            amn_error *err);
/* Bytes of one unit of t. */
uint64_t hf_unit_bytes(const hf_out *t);

#endif
