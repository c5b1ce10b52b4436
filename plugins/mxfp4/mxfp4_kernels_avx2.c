/* MXFP4 with AVX2: 8 input rows (output columns) at a time. For each of the
 * 8 rows, one 16-byte load gives a group's 32 codes; the low nibbles of
 * bytes 0..7 are elements 0, 2, .., 14 of the group, the high ones 1, ..,
 * 15, and bytes 8..15 likewise from 16 on. Each set of 8 codes becomes 8
 * binary32 values through a 16-entry table (two permutes and a blend), one
 * multiply by the row's power of two, and an 8x8 transpose turns 8 rows x 8
 * elements into 8 output rows of 8 consecutive columns, stored with the
 * scalar path's exact rounding. */
#include <immintrin.h>

#include "mxfp4_kernels.h"
#include "amn/kit/store_avx2.h"

static inline void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {
        u[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
        u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xee);
        u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
        u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xee);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x20);
        r[k + 4] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x31);
    }
}

/* BF16 of 8 products that BF16 holds exactly: every E2M1 value has at most
 * two significant bits and the scale is a power of two, so the binary32
 * product (exact, or inf, or the default NaN 0xffc00000 of 0 * inf) has
 * its low 16 bits clear, and rounding it (amn_f32_to_bf16) is taking the
 * high half. */
static inline __m128i bf16_exact(__m256 y) {
    const __m256i h = _mm256_srli_epi32(_mm256_castps_si256(y), 16);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08));
}

static inline __m256 lookup(__m256 lo, __m256 hi, __m256i code) {
    const __m256 a = _mm256_permutevar8x32_ps(lo, code);
    const __m256 b = _mm256_permutevar8x32_ps(hi, code);
    const __m256 upper = _mm256_castsi256_ps(_mm256_slli_epi32(code, 28)); /* bit 3 -> sign */
    return _mm256_blendv_ps(a, b, upper);
}

static inline __attribute__((always_inline)) void tile(const mxfp4_layout *l, uint64_t e,
                                                       uint64_t g, uint64_t r, uint64_t klo,
                                                       uint64_t khi, uint64_t k0, amn_dtype out,
                                                       uint8_t *dst, size_t rowbytes) {
    const uint64_t R = l->rows, G = l->groups, kb = g * 32;
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    const __m256 lut_lo = _mm256_loadu_ps(mxfp4_e2m1), lut_hi = _mm256_loadu_ps(mxfp4_e2m1 + 8);
    __m256 v[4][8];
    for (int i = 0; i < 8; i++) {
        const uint64_t bg = (e * R + r + (uint64_t)i) * G + g;
        const __m256 p = _mm256_set1_ps(mxfp4_pow2(l->scales[bg]));
        const __m128i bytes = _mm_loadu_si128((const __m128i *)(l->blocks + bg * 16));
        for (int h = 0; h < 2; h++) {
            const __m256i w = _mm256_cvtepu8_epi32(h ? _mm_srli_si128(bytes, 8) : bytes);
            const __m256i lo = _mm256_and_si256(w, _mm256_set1_epi32(15));
            const __m256i hi = _mm256_srli_epi32(w, 4);
            v[2 * h][i] = _mm256_mul_ps(lookup(lut_lo, lut_hi, lo), p);
            v[2 * h + 1][i] = _mm256_mul_ps(lookup(lut_lo, lut_hi, hi), p);
        }
    }
    for (int part = 0; part < 4; part++) {
        transpose8(v[part]);
        for (int j = 0; j < 8; j++) {
            const uint64_t k = kb + (uint64_t)(part >> 1) * 16 + 2 * (uint64_t)j + (part & 1);
            if (k < klo || k >= khi) continue;
            uint8_t *d = dst + (k - k0) * rowbytes + r * es;
            if (out == AMN_DTYPE_BF16)
                _mm_storeu_si128((__m128i *)d, bf16_exact(v[part][j]));
            else
                qs_store8(out, d, v[part][j]);
        }
    }
}

static inline __attribute__((always_inline)) void
rows_out(const mxfp4_layout *l, uint64_t e, uint64_t k0, uint64_t k1, amn_dtype out, uint8_t *dst) {
    const uint64_t R = l->rows;
    const size_t rowbytes = (size_t)R * (out == AMN_DTYPE_F32 ? 4 : 2);
    const uint64_t R8 = R - R % 8;
    for (uint64_t g = k0 / 32; g * 32 < k1; g++) {
        const uint64_t klo = g * 32 > k0 ? g * 32 : k0;
        const uint64_t khi = g * 32 + 32 < k1 ? g * 32 + 32 : k1;
        for (uint64_t r = 0; r < R8; r += 8) tile(l, e, g, r, klo, khi, k0, out, dst, rowbytes);
    }
    if (R8 < R) mxfp4_expert_rows_scalar(l, e, k0, k1, R8, out, dst);
}

void mxfp4_expert_rows_avx2(const mxfp4_layout *l, uint64_t e, uint64_t k0, uint64_t k1,
                            amn_dtype out, uint8_t *dst) {
    switch (out) {
    case AMN_DTYPE_F32:
        rows_out(l, e, k0, k1, AMN_DTYPE_F32, dst);
        break;
    case AMN_DTYPE_F16:
        rows_out(l, e, k0, k1, AMN_DTYPE_F16, dst);
        break;
    default:
        rows_out(l, e, k0, k1, AMN_DTYPE_BF16, dst);
        break;
    }
}
