/* AVX2/F16C paths of amn_convert_elems; bit-identical to the scalar ones.
 * Built with -mavx2 -mf16c and only called after a run-time CPU check. */
#include <immintrin.h>
#include <string.h>

#include "dtype_internal.h"

/* Round-to-nearest-even F32 -> BF16 of 8 lanes, NaN quieted, as amn_f32_to_bf16. */
static inline __m128i f32x8_to_bf16(__m256i u) {
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i absu = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i isnan = _mm256_cmpgt_epi32(absu, _mm256_set1_epi32(0x7f800000));
    const __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i v = _mm256_blendv_epi8(r, qnan, isnan);
    const __m256i packed = _mm256_packus_epi32(v, v); /* lanes: 0-3 0-3 | 4-7 4-7 */
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
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
