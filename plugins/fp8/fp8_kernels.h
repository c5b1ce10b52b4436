/* FP8 dequantization kernels: pure functions over bytes (no model access), so
 * tests can drive them directly.
 *
 * y[r][c] = fp8(w[r][c]) * S(r, c), one binary32 multiply, where
 * S(r, c) = scale[(r / block_rows) * grid_cols + c / block_cols]. A per-tensor
 * scale is one block covering the tensor, a per-channel scale blocks of one
 * row; the fine-grained layouts use 128x128 blocks with partial edge blocks.
 * A NaN weight stays that NaN (so every path agrees on the payload when the
 * scale is a NaN too).
 */
#ifndef AMN_FP8_KERNELS_H
#define AMN_FP8_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "amn/dtype.h"
#include "amn/kit/store.h"
#include "amn/simd.h"

typedef struct fp8_layout {
    const uint8_t *weight; /* rows * cols bytes, row-major, from row weight_row0 on */
    uint64_t weight_row0;  /* the row `weight` points at (0: the whole tensor) */
    amn_dtype wtype;       /* AMN_DTYPE_F8_E4M3 or AMN_DTYPE_F8_E5M2 */
    uint64_t rows, cols;
    const uint8_t *scale;            /* little-endian stype values; NULL = 1.0 */
    amn_dtype stype;                 /* F32, BF16 or F16 */
    uint64_t block_rows, block_cols; /* both >= 1 */
    uint64_t grid_cols;              /* ceil(cols / block_cols) */
} fp8_layout;

/* Rows [row0, row0 + nrows) of the output, as `out` (F32, F16, BF16), into
 * dst. The layout must be valid (the detector checked every size). */
void fp8_dequant_rows(const fp8_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst,
                      amn_simd level);

/* The vector path: n weights in runs of block_cols (the last may be
 * shorter), run b scaled by scales[b]; finite: every one of those scales is
 * finite (a hint; false is always right). One call per row, not per block:
 * a call per 128-element block cost a third of the work. Defined in
 * fp8_kernels_avx2.c. */
void fp8_run_avx2(const uint8_t *src, size_t n, size_t block_cols, const float *scales, bool finite,
                  bool e5m2, amn_dtype out, void *dst);

/* Scalar helpers both paths share. */
static inline float fp8_decode(uint8_t b, bool e5m2) {
    return e5m2 ? amn_f8e5m2_to_f32(b) : amn_f8e4m3_to_f32(b);
}

static inline float fp8_apply(float w, float s) {
    return w != w ? w : w * s;
}

#endif
