/* NVFP4 dequantization kernels (ModelOpt and compressed-tensors): pure
 * functions over bytes (no model access), so tests can drive them.
 *
 * Both producers store weight U8 [rows][in/2], element 2j of a row in the
 * low nibble of byte j and 2j+1 in the high one (E2M1 codes), and one
 * F8_E4M3 scale per 16 elements [rows][in/16], with a binary32 second-level
 * scale. The block's scale is, in binary32:
 *  - ModelOpt (NVFP4QTensor.dequantize): f32(e4m3) * weight_scale_2;
 *  - compressed-tensors (_dequantize with global_scale): f32(e4m3) /
 *    weight_global_scale (the reciprocal of ModelOpt's, a divide).
 * The value is the E2M1 code's value times that, one binary32 multiply,
 * then one rounding to the output dtype. Code 8 is +0.0 in ModelOpt's
 * table and -0.0 in compressed-tensors' (magnitude times -1.0), which the
 * sign of a zero output keeps. */
#ifndef AMN_NVFP4_KERNELS_H
#define AMN_NVFP4_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "amn/dtype.h"
#include "amn/kit/store.h"
#include "amn/simd.h"

typedef struct nvfp4_layout {
    const uint8_t *weight; /* [rows][in / 2] */
    const uint8_t *scales; /* [rows][in / 16], E4M3 bytes */
    uint64_t rows, in;     /* in: a multiple of 16 */
    const float *second;   /* second-level scales, one per rows_per_second rows */
    uint64_t rows_per_second;
    bool divide;   /* compressed-tensors: e4m3 / second; ModelOpt: e4m3 * second */
    bool neg_zero; /* code 8 is -0.0 (compressed-tensors) */
} nvfp4_layout;

/* Rows [row0, row0 + nrows) as `out` (F32, F16, BF16) into dst. */
void nvfp4_dequant_rows(const nvfp4_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                        void *dst, amn_simd level);

/* Fused experts in the batched-matmul layout ModelOpt exports for
 * Llama4TextExperts and GptOssExperts (maybe_transpose_expert_weight_
 * dimensions after quantizing): weight U8 [experts][in / 2][outs], element
 * (e, i, o) in nibble i & 1 of byte [e][i / 2][o], its scale E4M3
 * [experts][in / 16][outs]. The output is [experts][in][outs] (the model's
 * own layout), one output row per (e, i). Same arithmetic as above. */
typedef struct nvfp4_bmm_layout {
    const uint8_t *weight, *scales;
    uint64_t experts, in, outs; /* in: a multiple of 16 */
    const float *second;        /* one per expert, or one for all (n_second 1) */
    uint64_t n_second;
} nvfp4_bmm_layout;

/* Rows [row0, row0 + nrows) of [experts * in][outs]. Returns 0, or -1 when
 * out of memory (one row of block scales is allocated). */
int nvfp4_bmm_rows(const nvfp4_bmm_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                   void *dst, amn_simd level);

/* Internal: the scalar and vector row loops, block scales given. */
void nvfp4_row_scalar(const uint8_t *w, const float *bs, uint64_t in, const float *table,
                      amn_dtype out, uint8_t *d);
/* finite: every bs[] is finite, so no product is NaN (a hint; false is
 * always right). */
void nvfp4_row_avx2(const uint8_t *w, const float *bs, uint64_t in, const float *table,
                    amn_dtype out, bool finite, uint8_t *d);
/* F32 and BF16 only (F16 takes the AVX2 loop). */
void nvfp4_row_avx512(const uint8_t *w, const float *bs, uint64_t in, const float *table,
                      amn_dtype out, uint8_t *d);

/* One output row of the batched layout: codes in nibble `shift` / 4 of
 * bytes w[0..n), each times its own scale bs[o]. */
void nvfp4_bmm_row_scalar(const uint8_t *w, unsigned shift, const float *bs, uint64_t n,
                          const float *table, amn_dtype out, uint8_t *d);
void nvfp4_bmm_row_avx2(const uint8_t *w, unsigned shift, const float *bs, uint64_t n,
                        const float *table, amn_dtype out, bool finite, uint8_t *d);
/* Rows 2k and 2k + 1, which share their bytes (low and high nibbles) and
 * their scales, in one pass: d0 and d1. */
void nvfp4_bmm_pair_avx2(const uint8_t *w, const float *bs, uint64_t n, const float *table,
                         amn_dtype out, bool finite, uint8_t *d0, uint8_t *d1);
void nvfp4_bmm_row_avx512(const uint8_t *w, unsigned shift, const float *bs, uint64_t n,
                          const float *table, amn_dtype out, uint8_t *d);

#endif
