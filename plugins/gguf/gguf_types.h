/* The ggml tensor types a GGUF file may name, with their block geometry.
 *
 * This is the one table both the block-quant scheme and the GGUF container
 * consult: a type id read from a file is looked up here before anything is
 * sized or allocated from it.
 */
#ifndef AMN_GGUF_TYPES_H
#define AMN_GGUF_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "amn/dtype.h"

/* ggml type ids (GGUF tensor-info `type`), as ggml.h numbers them. */
enum {
    GGUF_TYPE_F32 = 0,
    GGUF_TYPE_F16 = 1,
    GGUF_TYPE_Q4_0 = 2,
    GGUF_TYPE_Q4_1 = 3,
    GGUF_TYPE_Q4_2 = 4, /* retired */
    GGUF_TYPE_Q4_3 = 5, /* retired */
    GGUF_TYPE_Q5_0 = 6,
    GGUF_TYPE_Q5_1 = 7,
    GGUF_TYPE_Q8_0 = 8,
    GGUF_TYPE_Q8_1 = 9,
    GGUF_TYPE_Q2_K = 10,
    GGUF_TYPE_Q3_K = 11,
    GGUF_TYPE_Q4_K = 12,
    GGUF_TYPE_Q5_K = 13,
    GGUF_TYPE_Q6_K = 14,
    GGUF_TYPE_Q8_K = 15,
    GGUF_TYPE_IQ2_XXS = 16,
    GGUF_TYPE_IQ2_XS = 17,
    GGUF_TYPE_IQ3_XXS = 18,
    GGUF_TYPE_IQ1_S = 19,
    GGUF_TYPE_IQ4_NL = 20,
    GGUF_TYPE_IQ3_S = 21,
    GGUF_TYPE_IQ2_S = 22,
    GGUF_TYPE_IQ4_XS = 23,
    GGUF_TYPE_I8 = 24,
    GGUF_TYPE_I16 = 25,
    GGUF_TYPE_I32 = 26,
    GGUF_TYPE_I64 = 27,
    GGUF_TYPE_F64 = 28,
    GGUF_TYPE_IQ1_M = 29,
    GGUF_TYPE_BF16 = 30,
    GGUF_TYPE_Q4_0_4_4 = 31, /* retired: repacked at run time by ggml now */
    GGUF_TYPE_Q4_0_4_8 = 32, /* retired */
    GGUF_TYPE_Q4_0_8_8 = 33, /* retired */
    GGUF_TYPE_TQ1_0 = 34,
    GGUF_TYPE_TQ2_0 = 35,
    GGUF_TYPE_IQ4_NL_4_4 = 36, /* retired */
    GGUF_TYPE_IQ4_NL_4_8 = 37, /* retired */
    GGUF_TYPE_IQ4_NL_8_8 = 38, /* retired */
    GGUF_TYPE_MXFP4 = 39,
    GGUF_TYPE_NVFP4 = 40,
    GGUF_TYPE_Q1_0 = 41,
    GGUF_TYPE_Q2_0 = 42,
    GGUF_TYPE_COUNT = 43,
};

typedef enum gguf_type_kind {
    GGUF_KIND_PLAIN = 1, /* one element per "block": maps to an amn dtype */
    GGUF_KIND_QUANT,     /* block-quantized, dequantized by gguf_dequantize */
    GGUF_KIND_NO_KERNEL, /* a valid type with known geometry but no dequantizer here
                            (Q8_1 / Q8_K are activation types, never weights;
                            NVFP4 is newer than this table's kernels) */
    GGUF_KIND_RETIRED,   /* id once assigned, no longer valid in files; geometry 0 */
} gguf_type_kind;

typedef struct gguf_type_traits {
    uint32_t id;
    const char *name;  /* "Q4_K", as gguf-py spells it */
    const char *label; /* "GGUF Q4_K" */
    gguf_type_kind kind;
    uint32_t block_elems;
    uint32_t block_bytes;
    amn_dtype plain; /* GGUF_KIND_PLAIN: the element dtype; else AMN_DTYPE_BLOCK */
} gguf_type_traits;

/* Traits of a ggml type id, or NULL for an id no ggml release assigned. */
const gguf_type_traits *gguf_type_traits_get(uint32_t ggml_type);

/* True when gguf_dequantize handles the type (the 24 block types, and the
 * plain float types F32 / F16 / BF16 / F64). */
bool gguf_type_can_dequantize(const gguf_type_traits *tr);

/* Encoded bytes of n_elems elements of the type into *out. False when n_elems
 * is not a whole number of blocks, the type has no geometry, or it overflows. */
bool gguf_type_nbytes(const gguf_type_traits *tr, uint64_t n_elems, uint64_t *out);

#endif
