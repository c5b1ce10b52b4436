/* bitsandbytes kernels: pure functions over bytes (no model access), so tests
 * drive them directly.
 *
 * 4-bit (NF4, FP4): element e of the flat weight is nibble e of the packed
 * bytes, high nibble first; y = cb[nibble] * absmax(e / block), one binary32
 * multiply. cb is the checkpoint's quant_map with one fix: an entry that is
 * +0.0 at an index with the sign bit (>= 8) decodes as -0.0, because
 * bitsandbytes' CUDA FP4 kernel applies the sign bit itself. With double
 * quant the block scale is RN(RN(nested_map[code] * nested_absmax[b / nbs])
 * + offset): two roundings, never fused.
 *
 * INT8 (LLM.int8, row-wise): y[r][c] = ((float)w[r][c] * SCB[r]) * C with C
 * the binary32 nearest 1/127, in exactly that order (hoisting SCB[r] * C
 * changes F32 results).
 */
#ifndef AMN_BNB_KERNELS_H
#define AMN_BNB_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/dtype.h"
#include "amn/kit/store.h"
#include "amn/simd.h"

#define BNB_INT8_C_BITS 0x3C010204u /* 7.874015718698502e-3f, bitsandbytes' 1/127 */

typedef struct bnb4_layout {
    const uint8_t *weight; /* (n + 1) / 2 bytes */
    uint64_t n;            /* elements */
    uint64_t block;        /* elements per absmax */
    float codebook[16];    /* quant_map with the -0.0 rule applied */
    /* Plain: absmax f32[ceil(n / block)]. Double quant: absmax holds u8
     * codes, nested_absmax f32[ceil(blocks / nested_block)]. */
    const uint8_t *absmax;
    bool nested;
    const uint8_t *nested_absmax;
    const float *nested_map; /* 256 entries */
    uint64_t nested_block;
    float nested_offset;
} bnb4_layout;

/* The codebook a quant_map decodes to (the -0.0 rule). */
void bnb4_codebook(const float quant_map[16], float cb[16]);

/* Scale of block b under double quantization, whose nested block is nb. */
static inline float bnb4_nested_scale(const bnb4_layout *l, uint64_t b, uint64_t nb) {
    const float na = amn_load_le_f32(l->nested_absmax + nb * 4);
    const float prod = l->nested_map[l->absmax[b]] * na; /* separate statements: */
    return prod + l->nested_offset;                      /* two roundings */
}

/* Scale of block b. */
static inline float bnb4_block_scale(const bnb4_layout *l, uint64_t b) {
    if (!l->nested) return amn_load_le_f32(l->absmax + b * 4);
    return bnb4_nested_scale(l, b, b / l->nested_block);
}

/* Elements [e0, e0 + count) as `out` (F32, F16, BF16) into dst. */
void bnb4_dequant(const bnb4_layout *l, uint64_t e0, uint64_t count, amn_dtype out, void *dst,
                  amn_simd level);

typedef struct bnb8_layout {
    const int8_t *weight; /* rows * cols */
    const uint8_t *scb;   /* f32[rows] */
    uint64_t rows, cols;
} bnb8_layout;

void bnb8_dequant_rows(const bnb8_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                       void *dst, amn_simd level);

/* Vector paths: n blocks of bbytes bytes each (2 * bbytes elements from
 * whole bytes), block j scaled by s[j], into dst; a partial block is one
 * block of its own length. AVX2 (bnb_kernels_avx2.c) for every output
 * dtype, AVX-512 (bnb_kernels_avx512.c) for F32 and BF16 only. One row of
 * INT8 each. */
void bnb4_blocks_avx2(const float cb[16], const uint8_t *w, size_t n, size_t bbytes, const float *s,
                      amn_dtype out, uint8_t *dst);
void bnb4_blocks_avx512(const float cb[16], const uint8_t *w, size_t n, size_t bbytes,
                        const float *s, amn_dtype out, uint8_t *dst);
void bnb8_row_avx2(const int8_t *w, size_t n, float scb, amn_dtype out, uint8_t *dst);
void bnb8_row_avx512(const int8_t *w, size_t n, float scb, amn_dtype out, uint8_t *dst);

/* ---- encode (the arithmetic of bitsandbytes' CUDA kernels) ---- */

typedef enum bnb_kind { BNB_NF4 = 0, BNB_FP4 = 1, BNB_INT8 = 2 } bnb_kind;

/* The signed dynamic map of double quant, as real checkpoints store it
 * (nested_quant_map). */
extern const float bnb_dynamic_map[256];
/* NF4 and FP4 quant_map as transformers saves it. */
extern const float bnb_nf4_map[16], bnb_fp4_map[16];

/* max |x| over n values, NaN ignored (fmaxf), 0 for none. */
float bnb_absmax(const float *x, size_t n);
/* Nibble of a value already multiplied by 1/absmax. */
uint8_t bnb_nf4_code(float x);
uint8_t bnb_fp4_code(float x);
/* Pack n values (one block, scale = the block's absmax) into nibbles
 * starting at element parity `odd` (0: high nibble of dst[0]); only the
 * nibbles of these elements are written. */
void bnb4_encode(bnb_kind k, const float *x, size_t n, float absmax, unsigned odd, uint8_t *dst);
/* dQuantize<0> over the dynamic map: the index of the code for x. */
uint8_t bnb_dynamic_code(const float map[256], float x);
/* The vector encoders (bnb_encode_avx2.c): identical bytes to the scalar
 * ones. bnb4_encode_avx2 packs n values (a multiple of 16) of one block from
 * an even element; with abs_err it adds sum |x - cb[q] * absmax| (summed in
 * binary32 per call: an estimate for the report, never output bytes). */
float bnb_absmax_avx2(const float *x, size_t n);
void bnb4_encode_avx2(bnb_kind k, const float *x, size_t n, float absmax, uint8_t *dst,
                      const float cb[16], double *abs_err);
/* The same with AVX-512 (bnb_encode_avx512.c); n a multiple of 16. */
float bnb_absmax_avx512(const float *x, size_t n);
void bnb4_encode_avx512(bnb_kind k, const float *x, size_t n, float absmax, uint8_t *dst,
                        const float cb[16], double *abs_err);
/* One INT8 row: x are values already rounded to F16; scb the row's max |x|. */
void bnb8_encode_row(const float *x, size_t n, float scb, int8_t *dst);

#endif
