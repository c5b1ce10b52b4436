/* MXFP4: the scalar path and the choice of path. */
#include "mxfp4_kernels.h"

const float mxfp4_e2m1[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                              -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

/* See mxfp4_shifts: BF16 of the E2M1 values times 2^125 (sign in bit 15,
 * +-0 as 0x0000 / 0x8000), low and high bytes: 0.5 * 2^125 is 0x7d80,
 * 1 * 2^125 0x7e00, 1.5 0x7e40, 2 0x7e80, 3 0x7ec0, 4 0x7f00, 6 0x7f40. */
const uint8_t mxfp4_bf16_k_lo[16] = {0x00, 0x80, 0x00, 0x40, 0x80, 0xc0, 0x00, 0x40,
                                     0x00, 0x80, 0x00, 0x40, 0x80, 0xc0, 0x00, 0x40};
const uint8_t mxfp4_bf16_k_hi[16] = {0x00, 0x7d, 0x7e, 0x7e, 0x7e, 0x7e, 0x7f, 0x7f,
                                     0x80, 0xfd, 0xfe, 0xfe, 0xfe, 0xfe, 0xff, 0xff};

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

void mxfp4_shifts(const mxfp4_layout *l, uint64_t e, const uint8_t *ts, uint64_t g, uint64_t r0,
                  uint64_t r1, uint16_t *xs, bool *fast) {
    const uint64_t G = ts ? 1 : l->groups; /* the stride of a group's scales */
    const uint8_t *sp = ts ? ts + g * l->rows + r0 : l->scales + (e * l->rows + r0) * G + g;
    for (uint64_t b = 0; b < (r1 - r0) / 16; b++) {
        unsigned bad = 0;
        for (uint64_t i = 16 * b; i < 16 * b + 16; i++) {
            const unsigned s = sp[i * G];
            xs[i] = (uint16_t)((252u - s) << 7);
            bad |= (s < 2) | (s > 252);
        }
        fast[b] = !bad;
    }
}

void mxfp4_dequant_rows(const mxfp4_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                        void *dst, amn_simd level) {
    const uint64_t K = l->groups * 32;
    const size_t rowbytes = (size_t)l->rows * amn_dtype_size(out);
    const bool stream = nrows * rowbytes >= QS_STREAM_BYTES && qs_stream_aligned(dst, rowbytes);
    uint8_t *d = dst;
    for (uint64_t q = row0; q < row0 + nrows;) {
        const uint64_t e = q / K, k0 = q % K;
        const uint64_t k1 = K - k0 < row0 + nrows - q ? K : k0 + (row0 + nrows - q);
        if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX2) {
            /* F16 outputs take the 8-row tiles, which read no shifts */
            const uint8_t *ts =
                l->cache && out != AMN_DTYPE_F16 ? mxfp4_scales_acquire(l->cache, l, e) : NULL;
            mxfp4_expert_rows_avx2(l, e, ts, k0, k1, out, d, stream);
            if (l->cache && out != AMN_DTYPE_F16) mxfp4_scales_release(l->cache, ts, k1 - k0);
        } else
            mxfp4_expert_rows_scalar(l, e, k0, k1, 0, out, d);
        d += (k1 - k0) * rowbytes;
        q += k1 - k0;
    }
}
