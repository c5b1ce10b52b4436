/* Storing 8 binary32 lanes as F32, F16 or BF16 with the exact bytes of the
 * scalar conversions in amn/dtype.h (BF16 through amn/bf16_avx2.h). Include only from files built
 * with the AVX2 flags (-mavx2 -mf16c). Plugin kit: shared by the scheme kernels. */
#ifndef AMN_QUANT_STORE_AVX2_H
#define AMN_QUANT_STORE_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#include "amn/bf16_avx2.h"
#include "amn/dtype.h"

/* amn_f32_to_bf16 on 8 lanes: round to nearest even, a NaN quieted. */
static inline __m128i qs_bf16x8(__m256 y) {
    return amn_bf16x8_avx2(y);
}

/* qs_bf16x8 for lanes known to hold no NaN: the same rounding, no quieting. */
static inline __m128i qs_bf16x8_finite(__m256 y) {
    return amn_bf16_pack8_avx2(amn_bf16_lanes_finite_avx2(y));
}

/* Rounded BF16 lanes (32-bit, value in the low half) of y0 then y1 as 16
 * consecutive 16-bit values: one pack and one permute for the 16, where two
 * qs_bf16x8 calls take two of each (BF16 output waits on the shuffle port). */
static inline __m256i qs_pack16(__m256i lanes0, __m256i lanes1) {
    const __m256i h = _mm256_packus_epi32(lanes0, lanes1); /* 0-3 8-11 | 4-7 12-15 */
    return _mm256_permute4x64_epi64(h, 0xd8);
}

/* qs_bf16x8 of 16 lanes, y0 then y1, as 16 consecutive 16-bit values. */
static inline __m256i qs_bf16x16(__m256 y0, __m256 y1) {
    return qs_pack16(amn_bf16_lanes_avx2(y0), amn_bf16_lanes_avx2(y1));
}

/* qs_bf16x16 for lanes known to hold no NaN. */
static inline __m256i qs_bf16x16_finite(__m256 y0, __m256 y1) {
    return qs_pack16(amn_bf16_lanes_finite_avx2(y0), amn_bf16_lanes_finite_avx2(y1));
}

/* BF16 of an 8 x 8 block held by columns (lane r of y[j] is row r, column
 * j; no NaN), turned into rows: two columns' roundings share a 32-bit lane
 * (a shift or a mask and an or, no shuffle), so what is left is a 4 x 8
 * transpose of two unpack rounds, 8 shuffles per 64 values where a binary32
 * 8 x 8 transpose and a pack per row take 40. Afterwards the 128-bit lane L
 * of x[k] holds the 8 values of row 4L + k. */
static inline __attribute__((always_inline)) void qs_bf16_pairs8x8(const __m256 y[8],
                                                                   __m256i x[4]) {
    __m256i p[4], a[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const __m256i e = _mm256_castps_si256(y[2 * k]), o = _mm256_castps_si256(y[2 * k + 1]);
        const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff);
        const __m256i re = _mm256_add_epi32(_mm256_add_epi32(e, half),
                                            _mm256_and_si256(_mm256_srli_epi32(e, 16), one));
        const __m256i ro = _mm256_add_epi32(_mm256_add_epi32(o, half),
                                            _mm256_and_si256(_mm256_srli_epi32(o, 16), one));
        p[k] = _mm256_or_si256(_mm256_srli_epi32(re, 16),
                               _mm256_and_si256(ro, _mm256_set1_epi32((int)0xffff0000u)));
    }
    a[0] = _mm256_unpacklo_epi32(p[0], p[1]); /* rows 4L, 4L+1: columns 0-3 */
    a[1] = _mm256_unpackhi_epi32(p[0], p[1]); /* rows 4L+2, 4L+3 */
    a[2] = _mm256_unpacklo_epi32(p[2], p[3]); /* columns 4-7 */
    a[3] = _mm256_unpackhi_epi32(p[2], p[3]);
    x[0] = _mm256_unpacklo_epi64(a[0], a[2]);
    x[1] = _mm256_unpackhi_epi64(a[0], a[2]);
    x[2] = _mm256_unpacklo_epi64(a[1], a[3]);
    x[3] = _mm256_unpackhi_epi64(a[1], a[3]);
}

/* Row r (0..7) of qs_bf16_pairs8x8's result: 16 bytes. */
static inline __attribute__((always_inline)) __m128i qs_pairs_row(const __m256i x[4], unsigned r) {
    return r < 4 ? _mm256_castsi256_si128(x[r % 4]) : _mm256_extracti128_si256(x[r % 4], 1);
}

/* Write 8 values at d (no alignment needed). F16C rounds to nearest even,
 * as amn_f32_to_f16 does. */
static inline void qs_store8(amn_dtype out, void *d, __m256 y) {
    switch (out) {
    case AMN_DTYPE_F32:
        _mm256_storeu_ps((float *)d, y);
        break;
    case AMN_DTYPE_F16:
        _mm_storeu_si128((__m128i *)d, _mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT));
        break;
    default:
        _mm_storeu_si128((__m128i *)d, qs_bf16x8(y));
        break;
    }
}

/* Transpose 8 rows of 8 32-bit lanes in place (lane j of r[i] becomes lane
 * i of r[j]): packed words of 8 output rows into one register per row. */
static inline void qs_transpose8x8(__m256i r[8]) {
    __m256i t[8], u[8];
    /* GCC at -O2 kept the last loop rolled and took the rows through the
     * stack; unrolled, they stay in registers (the GPTQ AVX2 kernel spent
     * 40 % less CPU time). */
#pragma GCC unroll 8
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_epi32(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_epi32(r[k], r[k + 1]);
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; k += 4) {
        u[k] = _mm256_unpacklo_epi64(t[k], t[k + 2]);
        u[k + 1] = _mm256_unpackhi_epi64(t[k], t[k + 2]);
        u[k + 2] = _mm256_unpacklo_epi64(t[k + 1], t[k + 3]);
        u[k + 3] = _mm256_unpackhi_epi64(t[k + 1], t[k + 3]);
    }
#pragma GCC unroll 8
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x20);
        r[k + 4] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x31);
    }
}

#endif
