/* Quantizers of the low-bit i-quants with an importance matrix: IQ2_XXS,
 * IQ2_XS, IQ2_S, IQ3_XXS, IQ1_S and IQ1_M, byte-identical with ggml's
 * quantize_iq2_xxs / quantize_iq2_xs / quantize_iq2_s / quantize_iq3_xxs /
 * quantize_iq1_s / quantize_iq1_m (src/ggml-quants.c, llama.cpp 3af988fab),
 * as ggml_quantize_chunk calls them.
 *
 * Each function quantizes nrows rows of n_per_row values at x (n_per_row a
 * multiple of 256) into y (nrows * the type's row size bytes). qw holds the
 * importance weights of one row (n_per_row values, the same for every row,
 * llama-quantize's imatrix entry for the tensor), or NULL where ggml accepts
 * NULL: IQ2_S, IQ3_XXS and IQ1_M. IQ2_XXS, IQ2_XS and IQ1_S need weights
 * (ggml_quantize_requires_imatrix; ggml aborts without): given NULL they
 * write all-zero blocks, so callers must refuse those types first.
 *
 * Rows are independent: any split of the rows between calls or threads
 * writes the same bytes. Values ggml aborts on (NaN, Inf, overflowing
 * squares) give defined bytes here, never a crash. The search tables must be
 * built first: gguf_quant_iqlow_ready() or gguf_quant_iqlow_type_ready(). The vector path is chosen
 * at run time (amn_simd_level()); every path writes the same bytes. */
#ifndef AMN_GGUF_QUANT_IQLOW_H
#define AMN_GGUF_QUANT_IQLOW_H

#include <stdbool.h>
#include <stdint.h>

#include "amn/simd.h"

void gq_iq2_xxs_rows(const float *x, uint8_t *y, int64_t nrows, int64_t n_per_row, const float *qw);
void gq_iq2_xs_rows(const float *x, uint8_t *y, int64_t nrows, int64_t n_per_row, const float *qw);
void gq_iq2_s_rows(const float *x, uint8_t *y, int64_t nrows, int64_t n_per_row, const float *qw);
void gq_iq3_xxs_rows(const float *x, uint8_t *y, int64_t nrows, int64_t n_per_row, const float *qw);
void gq_iq1_s_rows(const float *x, uint8_t *y, int64_t nrows, int64_t n_per_row, const float *qw);
void gq_iq1_m_rows(const float *x, uint8_t *y, int64_t nrows, int64_t n_per_row, const float *qw);

/* Builds the search tables once (iq2xs_init_impl for the 256 / 512 / 1024 /
 * 2048-point grids, iq3xs_init_impl for the 256-point one); thread-safe.
 * False when out of memory (then the functions above must not be called). */
bool gguf_quant_iqlow_ready(void);

/* The same for one type's table only (by ggml type id; false for a type
 * not listed above): what a conversion calls, so it builds only the grids
 * its types search. */
bool gguf_quant_iqlow_type_ready(uint32_t ggml_type);

/* The same on a given path (clamped to the CPU), by ggml type id: for tests
 * and benchmarks. False for a type not listed above. */
bool gq_iqlow_rows_simd(uint32_t ggml_type, const float *x, uint8_t *y, int64_t nrows,
                        int64_t n_per_row, const float *qw, amn_simd level);

#endif
