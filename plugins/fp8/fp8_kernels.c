/* FP8 dequantization: row walking, scale lookup and the scalar path. */
#include <math.h>
#include <string.h>

#include "fp8_kernels.h"

static float scale_at(const fp8_layout *l, uint64_t i) {
    switch (l->stype) {
    case AMN_DTYPE_BF16:
        return amn_bf16_to_f32(amn_load_le16(l->scale + i * 2));
    case AMN_DTYPE_F16:
        return amn_f16_to_f32(amn_load_le16(l->scale + i * 2));
    default:
        return amn_load_le_f32(l->scale + i * 4);
    }
}

static void run_scalar(const float *lut, const uint8_t *src, size_t n, float s, amn_dtype out,
                       uint8_t *dst) {
    const size_t es = amn_dtype_size(out);
    for (size_t i = 0; i < n; i++) qs_store1(fp8_apply(lut[src[i]], s), out, dst + i * es);
}

/* Scales per span of one row's blocks handed to the vector path. */
#define SPAN 256

void fp8_dequant_rows(const fp8_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst,
                      amn_simd level) {
    const bool e5m2 = l->wtype == AMN_DTYPE_F8_E5M2;
    const size_t es = amn_dtype_size(out);
    const bool vec = AMN_SIMD_X86 && level >= AMN_SIMD_AVX2;
    float lut[256];
    if (!vec)
        for (int b = 0; b < 256; b++) lut[b] = fp8_decode((uint8_t)b, e5m2);
    float span[SPAN];
    uint64_t have = UINT64_MAX; /* the block row and first block whose scales span holds */
    bool finite = false;
    uint8_t *d = dst;
    for (uint64_t r = row0; r < row0 + nrows; r++) {
        const uint8_t *w = l->weight + (r - l->weight_row0) * l->cols;
        const uint64_t brow = r / l->block_rows, sbase = brow * l->grid_cols;
        for (uint64_t b0 = 0; b0 < l->grid_cols; b0 += SPAN) {
            const uint64_t nb = l->grid_cols - b0 < SPAN ? l->grid_cols - b0 : SPAN;
            const uint64_t c0 = b0 * l->block_cols;
            const size_t n =
                (size_t)(l->cols - c0 < nb * l->block_cols ? l->cols - c0 : nb * l->block_cols);
            if (!vec) {
                for (uint64_t b = 0; b < nb; b++) {
                    const uint64_t c = c0 + b * l->block_cols;
                    const size_t k =
                        (size_t)(l->cols - c < l->block_cols ? l->cols - c : l->block_cols);
                    const float s = l->scale ? scale_at(l, sbase + b0 + b) : 1.0f;
                    run_scalar(lut, w + c, k, s, out, d + c * es);
                }
                continue;
            }
            if (have != sbase + b0) { /* a new block row, or the next span of it */
                finite = true;
                for (uint64_t b = 0; b < nb; b++) {
                    span[b] = l->scale ? scale_at(l, sbase + b0 + b) : 1.0f;
                    finite &= isfinite(span[b]) != 0;
                }
                have = sbase + b0;
            }
            fp8_run_avx2(w + c0, n, (size_t)l->block_cols, span, finite, e5m2, out, d + c0 * es);
        }
        d += l->cols * es;
    }
}
