/* AVX-512 paths of amn_convert_elems for its hottest pairs: F32 -> BF16 (the
 * cast of every F32 checkpoint), bit-identical to amn_f32_to_bf16: round to
 * nearest even, a NaN quieted from its unrounded top bits; and BF16 -> F16
 * (below). Built with the AVX-512 flags (F16C included) and only called
 * after a run-time CPU check. */
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

/* BF16 -> F16 (a Hugging Face folder's weights to a GGUF's): the BF16 bits
 * moved up are the exact F32, then rounded to nearest even as F16C does
 * for F32 -> F16 (the AVX2 path's instruction, 16 lanes at a time). */
static void bf16_to_f16(const uint16_t *s, uint16_t *d, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512i w = _mm512_loadu_si512((const void *)(s + i));
        const __m512i lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(w));
        const __m512i hi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(w, 1));
        const __m256i a = _mm512_cvtps_ph(_mm512_castsi512_ps(_mm512_slli_epi32(lo, 16)),
                                          _MM_FROUND_TO_NEAREST_INT);
        const __m256i b = _mm512_cvtps_ph(_mm512_castsi512_ps(_mm512_slli_epi32(hi, 16)),
                                          _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_si256((__m256i *)(d + i), a);
        _mm256_storeu_si256((__m256i *)(d + i + 16), b);
    }
    amni_convert_avx2(AMN_DTYPE_BF16, s + i, AMN_DTYPE_F16, d + i, n - i);
}

bool amni_convert_avx512(amn_dtype from, const void *src, amn_dtype to, void *dst, size_t n) {
    if (from == AMN_DTYPE_BF16 && to == AMN_DTYPE_F16) {
        bf16_to_f16(src, dst, n);
        return true;
    }
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
