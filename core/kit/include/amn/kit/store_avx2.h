/* Storing 8 binary32 lanes as F32, F16 or BF16 with the exact bytes of the
 * scalar conversions in amn/dtype.h. Include only from files built with the
 * AVX2 flags (-mavx2 -mf16c). Plugin kit: shared by the scheme kernels. */
#ifndef AMN_QUANT_STORE_AVX2_H
#define AMN_QUANT_STORE_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#include "amn/dtype.h"

/* amn_f32_to_bf16 on 8 lanes: round to nearest even, a NaN quieted. */
static inline __m128i qs_bf16x8(__m256 y) {
    const __m256i u = _mm256_castps_si256(y);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i absu = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i isnan = _mm256_cmpgt_epi32(absu, _mm256_set1_epi32(0x7f800000));
    const __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i v = _mm256_blendv_epi8(r, qnan, isnan);
    const __m256i packed = _mm256_packus_epi32(v, v); /* lanes 0-3 0-3 | 4-7 4-7 */
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

/* qs_bf16x8 for lanes known to hold no NaN: the same rounding, no quieting. */
static inline __m128i qs_bf16x8_finite(__m256 y) {
    const __m256i u = _mm256_castps_si256(y);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
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

#endif
