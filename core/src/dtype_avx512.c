/* AVX-512 path of amn_convert_elems for its hottest pair, F32 -> BF16 (the
 * cast of every F32 checkpoint); bit-identical to amn_f32_to_bf16: round to
 * nearest even, a NaN quieted from its unrounded top bits. Built with the
 * AVX-512 flags and only called after a run-time CPU check. */
#include <immintrin.h>

#include "dtype_internal.h"

static inline __m256i bf16x16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i top = _mm512_srli_epi32(u, 16);
    const __m512i lsb = _mm512_and_si512(top, _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512i quiet = _mm512_or_si512(top, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

bool amni_convert_avx512(amn_dtype from, const void *src, amn_dtype to, void *dst, size_t n) {
    if (from != AMN_DTYPE_F32 || to != AMN_DTYPE_BF16) return false;
    const float *s = src;
    uint16_t *d = dst;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i a = bf16x16(_mm512_loadu_ps(s + i));
        const __m256i b = bf16x16(_mm512_loadu_ps(s + i + 16));
        _mm256_storeu_si256((__m256i *)(d + i), a);
        _mm256_storeu_si256((__m256i *)(d + i + 16), b);
    }
    return amni_convert_avx2(from, s + i, to, d + i, n - i);
}
