/* GPTQ dequantization kernels: pure functions over the packed tensors (no
 * model access), so tests can drive them directly.
 *
 * Packing (GPTQModel, 32-bit words, little-endian): qweight [in*bits/32][out]
 * holds input rows packed along the input dimension, value i of column o at
 * bit bits*i of the column's bit stream (words qweight[0][o], qweight[1][o],
 * ..., least significant bit first; 3-bit values straddle words). qzeros
 * [groups][out*bits/32] packs along the output dimension the same way, and
 * scales is [groups][out].
 *
 * Output is nn.Linear's [out][in], the transpose of GPTQModel's
 * dequantize_weight():  y[o][i] = scale[g][o] * (float)(q[i][o] - zero[g][o])
 * with g = g_idx[i] (or i / group_size), an integer difference then one
 * binary32 multiply.
 */
#ifndef AMN_GPTQ_KERNELS_H
#define AMN_GPTQ_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/dtype.h"
#include "amn/kit/store.h"
#include "amn/simd.h"

typedef struct gptq_layout {
    unsigned bits;       /* 2, 3, 4 or 8 */
    uint64_t in, out;    /* in: a multiple of 32/bits (of 32 for 3-bit); out likewise */
    uint64_t groups;     /* rows of scales and qzeros, >= 1 */
    uint64_t group_size; /* g(i) = i / group_size when gidx is NULL */
    const uint8_t *qweight;
    const uint8_t *qzeros;
    const uint8_t *scales;
    amn_dtype stype;     /* F16, BF16 or F32 */
    const int32_t *gidx; /* [in], every value in [0, groups); NULL: sequential */
    bool zeros_v1;       /* GPTQ v1 checkpoint: stored zero = zero - 1 */
} gptq_layout;

/* Rows [row0, row0 + nrows) of the [out][in] output, as `out` (F32, F16,
 * BF16), into dst. The layout must be valid (the detector checked every size
 * and g_idx value). Returns 0, or AMN_E_NOMEM. */
int gptq_dequant_rows(const gptq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst,
                      amn_simd level);

/* Internal to the kernels. */
int gptq_dequant_rows_scalar(const gptq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                             void *dst);
int gptq_dequant_rows_avx2(const gptq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                           void *dst);
/* Whether the AVX-512 path takes l to out (BF16 output in the arithmetic
 * path's cases: g_idx, straddled groups, 2/3/8 bits), and that path (it
 * hands partial blocks and blocks with non-finite scales to the AVX2 one). */
bool gptq_avx512_takes(const gptq_layout *l, amn_dtype out);
int gptq_dequant_rows_avx512(const gptq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                             void *dst);
/* Effective zero point and scale of (group g, output column o). */
int32_t gptq_zero(const gptq_layout *l, uint64_t g, uint64_t o);
float gptq_scale(const gptq_layout *l, uint64_t g, uint64_t o);
/* Quantized value q[i][o]. */
uint32_t gptq_q(const gptq_layout *l, uint64_t i, uint64_t o);

static inline uint32_t gptq_ld32(const uint8_t *p) {
    return amn_load_le32(p); /* little-endian words, need not be aligned */
}

#endif
