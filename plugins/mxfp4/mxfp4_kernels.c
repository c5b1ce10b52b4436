/* MXFP4: the scalar path and the choice of path. */
#include "mxfp4_kernels.h"

const float mxfp4_e2m1[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                              -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

/* Columns [r0, R) of rows k0..k1 of expert e (the vector path leaves the
 * last R % 8 columns to this). */
void mxfp4_expert_rows_scalar(const mxfp4_layout *l, uint64_t e, uint64_t k0, uint64_t k1,
                              uint64_t r0, amn_dtype out, uint8_t *dst) {
    const uint64_t R = l->rows, G = l->groups;
    const size_t es = amn_dtype_size(out);
    for (uint64_t k = k0; k < k1; k++) {
        const uint64_t g = k / 32, j = (k % 32) / 2;
        const unsigned shift = (unsigned)(k & 1) * 4;
        uint8_t *d = dst + (k - k0) * R * es;
        for (uint64_t r = r0; r < R; r++) {
            const uint64_t bg = (e * R + r) * G + g;
            const unsigned code = (l->blocks[bg * 16 + j] >> shift) & 15u;
            qs_store1(mxfp4_e2m1[code] * mxfp4_pow2(l->scales[bg]), out, d + r * es);
        }
    }
}

void mxfp4_dequant_rows(const mxfp4_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                        void *dst, amn_simd level) {
    const uint64_t K = l->groups * 32;
    const size_t rowbytes = (size_t)l->rows * amn_dtype_size(out);
    uint8_t *d = dst;
    for (uint64_t q = row0; q < row0 + nrows;) {
        const uint64_t e = q / K, k0 = q % K;
        const uint64_t k1 = K - k0 < row0 + nrows - q ? K : k0 + (row0 + nrows - q);
        if (level >= AMN_SIMD_AVX2)
            mxfp4_expert_rows_avx2(l, e, k0, k1, out, d);
        else
            mxfp4_expert_rows_scalar(l, e, k0, k1, 0, out, d);
        d += (k1 - k0) * rowbytes;
        q += k1 - k0;
    }
}
