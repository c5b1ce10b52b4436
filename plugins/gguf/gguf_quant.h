/* Quantization of f32 rows into ggml blocks, byte-identical with ggml's
 * ggml_quantize_chunk called without an importance matrix (what
 * llama-quantize does without --imatrix): quantize_row_*_ref for the legacy
 * types, the k-quants, Q1_0 / Q2_0, TQ1_0 / TQ2_0 and MXFP4, and the
 * quantize_iq4_nl / quantize_iq4_xs / quantize_iq3_s paths for the i-quants.
 *
 * Every block depends only on its own input values, so a row may be cut at
 * any block boundary and the pieces quantized separately (by any number of
 * threads) with the same bytes. */
#ifndef AMN_GGUF_QUANT_H
#define AMN_GGUF_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "amn/simd.h"

/* True when gguf_quantize produces the type: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0
 * Q2_K..Q6_K IQ4_NL IQ4_XS IQ3_S TQ1_0 TQ2_0 MXFP4 Q1_0 Q2_0, and the plain
 * F32 / F16 / BF16. */
bool gguf_type_can_quantize(uint32_t ggml_type);

/* Quantize n_elems f32 values at x (a whole number of the type's blocks)
 * into dst (gguf_type_nbytes(n_elems) writable bytes). Returns AMN_OK;
 * AMN_E_UNSUPPORTED for a type gguf_type_can_quantize refuses;
 * AMN_E_INVALID when n_elems is not a whole number of blocks. Reentrant. */
int gguf_quantize(uint32_t ggml_type, const float *x, uint64_t n_elems, void *dst);

/* Same on a given path (clamped to the CPU; IQ4_NL, IQ4_XS and Q6_K have
 * AVX2 searches, the rest run scalar everywhere): for tests and benchmarks. */
int gguf_quantize_simd(uint32_t ggml_type, const float *x, uint64_t n_elems, void *dst,
                       amn_simd level);

/* Row-level quantizer: nrows rows of n_per_row values at x (whole blocks)
 * into y (nrows * row bytes), qw the importance-matrix weights of one row
 * (n_per_row values, the same for every row; NULL without an importance
 * matrix), as ggml_quantize_chunk(type, x, y, 0, nrows, n_per_row, qw). */
typedef void (*gguf_qrow_fn)(const float *x, uint8_t *y, int64_t nrows, int64_t n_per_row,
                             const float *qw /* imatrix weights of length n_per_row, or NULL */);

/* The row quantizer a type uses when given weights (at most the level's
 * vector path), or NULL when ggml ignores the weights for it (Q8_0, Q1_0,
 * Q2_0, MXFP4, TQ1_0, TQ2_0, the plain types: gguf_quantize makes the same
 * bytes) or amn does not make the type. */
gguf_qrow_fn gguf_qrow_weighted(uint32_t ggml_type, amn_simd level);

/* True for the types ggml cannot quantize without weights (it asserts):
 * IQ2_XXS, IQ2_XS, IQ1_S. */
bool gguf_type_needs_imatrix(uint32_t ggml_type);

/* True for a type whose quantizer works on whole rows even without
 * weights (callers then stage whole rows for gguf_quantize_rows rather
 * than blocks for gguf_quantize). */
bool gguf_type_needs_rows(uint32_t ggml_type);

/* True when gguf_quantize_rows makes the type, with weights or without. */
bool gguf_type_can_quantize_rows(uint32_t ggml_type, bool weighted);

/* nrows rows of n_per_row values with weights qw (or NULL) into dst, as
 * ggml_quantize_chunk does, on the given path (clamped to the CPU).
 * AMN_E_UNSUPPORTED for a type amn does not make; AMN_E_INVALID for rows
 * that are not whole blocks or a type that needs weights without them;
 * AMN_E_NOMEM when IQ3_S's tables cannot be built. Reentrant. */
int gguf_quantize_rows(uint32_t ggml_type, const float *x, int64_t nrows, int64_t n_per_row,
                       const float *qw, void *dst, amn_simd level);

#endif
