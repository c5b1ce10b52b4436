/* amn/bf16_avx2.h — amn_f32_to_bf16 (amn/dtype.h) on 8 AVX2 lanes, header-only.
 *
 * The one vector definition of the project's BF16 rounding: round to nearest
 * even, a NaN quieted (its top 16 bits with the quiet bit set), infinities
 * and overflow rounding right without a check. The core's conversions, the
 * scheme kernels and the GGUF kernels all use it, and a third-party kernel
 * that includes it writes the same bytes as the scalar amn_f32_to_bf16.
 *
 * Include only from a file built with -mavx2 (and call it only after
 * amn_simd_level() said AVX2, see amn/simd.h). */
#ifndef AMN_BF16_AVX2_H
#define AMN_BF16_AVX2_H

#ifndef __AVX2__
#error "amn/bf16_avx2.h needs a file built with -mavx2"
#endif

#include <immintrin.h>

#if defined(__GNUC__) || defined(__clang__)
#define AMN_BF16_AVX2_INLINE static inline __attribute__((always_inline))
#else
#define AMN_BF16_AVX2_INLINE static inline
#endif

/* Each lane's BF16 in the low 16 bits of its 32-bit lane (high bits zero),
 * for lanes known to hold no NaN: the rounding alone. */
AMN_BF16_AVX2_INLINE __m256i amn_bf16_lanes_finite_avx2(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    return _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb),
                             16);
}

/* Each lane's BF16 in the low 16 bits of its 32-bit lane, NaN quieted. */
AMN_BF16_AVX2_INLINE __m256i amn_bf16_lanes_avx2(__m256 v) {
    const __m256i top = _mm256_srli_epi32(_mm256_castps_si256(v), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(amn_bf16_lanes_finite_avx2(v),
                              _mm256_or_si256(top, _mm256_set1_epi32(0x40)), nan);
}

/* The 8 results of amn_bf16_lanes_avx2 as 8 consecutive 16-bit values. */
AMN_BF16_AVX2_INLINE __m128i amn_bf16_pack8_avx2(__m256i lanes) {
    const __m256i packed = _mm256_packus_epi32(lanes, lanes); /* lanes 0-3 0-3 | 4-7 4-7 */
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

/* amn_f32_to_bf16 of 8 floats as 8 consecutive 16-bit values. */
AMN_BF16_AVX2_INLINE __m128i amn_bf16x8_avx2(__m256 v) {
    return amn_bf16_pack8_avx2(amn_bf16_lanes_avx2(v));
}

#undef AMN_BF16_AVX2_INLINE
#endif
