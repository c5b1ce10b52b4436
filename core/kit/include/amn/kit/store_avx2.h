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
