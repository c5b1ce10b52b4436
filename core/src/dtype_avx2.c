/* AVX2/F16C paths of amn_convert_elems; bit-identical to the scalar ones.
 * Built with -mavx2 -mf16c and only called after a run-time CPU check. */
#include <immintrin.h>
#include <string.h>

#include "amn/bf16_avx2.h"
#include "dtype_internal.h"

/* Round-to-nearest-even F32 -> BF16 of 8 lanes, NaN quieted, as amn_f32_to_bf16. */
static inline __m128i f32x8_to_bf16(__m256i u) {
    return amn_bf16x8_avx2(_mm256_castsi256_ps(u));
}

bool amni_convert_avx2(amn_dtype from, const void *src, amn_dtype to, void *dst, size_t n) {
    size_t i = 0;
    if (from == AMN_DTYPE_F32 && to == AMN_DTYPE_BF16) {
        const float *s = src;
        uint16_t *d = dst;
        for (; i + 16 <= n; i += 16) {
            __m128i a = f32x8_to_bf16(_mm256_loadu_si256((const __m256i *)(s + i)));
            __m128i b = f32x8_to_bf16(_mm256_loadu_si256((const __m256i *)(s + i + 8)));
            _mm_storeu_si128((__m128i *)(d + i), a);
            _mm_storeu_si128((__m128i *)(d + i + 8), b);
        }
        amni_convert_scalar(from, s + i, to, d + i, n - i);
        return true;
    }
    if (from == AMN_DTYPE_BF16 && to == AMN_DTYPE_F32) {
        const uint16_t *s = src;
        float *d = dst;
        for (; i + 8 <= n; i += 8) {
            __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
            _mm256_storeu_si256((__m256i *)(d + i), _mm256_slli_epi32(w, 16));
        }
        amni_convert_scalar(from, s + i, to, d + i, n - i);
        return true;
    }
    if (from == AMN_DTYPE_F16 && to == AMN_DTYPE_F32) {
        const uint16_t *s = src;
        float *d = dst;
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
        amni_convert_scalar(from, s + i, to, d + i, n - i);
        return true;
    }
    if (from == AMN_DTYPE_F32 && to == AMN_DTYPE_F16) {
        /* F16C's conversion is IEEE round-to-nearest-even, like the scalar path. */
        const float *s = src;
        uint16_t *d = dst;
        for (; i + 8 <= n; i += 8)
            _mm_storeu_si128((__m128i *)(d + i),
                             _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
        amni_convert_scalar(from, s + i, to, d + i, n - i);
        return true;
    }
    if (from == AMN_DTYPE_BF16 && to == AMN_DTYPE_F16) {
        /* BF16 -> F32 is exact (the bits moved up), then F16C's rounding as
         * for F32 -> F16: one pass instead of two through an F32 buffer. */
        const uint16_t *s = src;
        uint16_t *d = dst;
        for (; i + 8 <= n; i += 8) {
            __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
            __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
            _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
        }
        amni_convert_scalar(from, s + i, to, d + i, n - i);
        return true;
    }
    if (from == AMN_DTYPE_F16 && to == AMN_DTYPE_BF16) {
        const uint16_t *s = src;
        uint16_t *d = dst;
        for (; i + 8 <= n; i += 8) {
            __m256 f = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i)));
            _mm_storeu_si128((__m128i *)(d + i), f32x8_to_bf16(_mm256_castps_si256(f)));
        }
        amni_convert_scalar(from, s + i, to, d + i, n - i);
        return true;
    }
    return false;
}
