/* amn/kit/store_avx512.h — plugin kit: storing binary32 lanes of AVX-512
 * (F, BW, VL, DQ) registers as F32 or BF16 with the exact bytes of the
 * scalar conversions in amn/dtype.h (F16 outputs run the AVX2 paths).
 * Include after <immintrin.h>, or after the SIMDe emulation header of the
 * emulated tests, from files built with the AVX-512 flags. */
#ifndef AMN_KIT_STORE_AVX512_H
#define AMN_KIT_STORE_AVX512_H

#include <stdint.h>

#include "amn/dtype.h"

/* amn_f32_to_bf16 in the high half of each dword: round to nearest even, a
 * NaN quieted. */
static inline __m512i qs_bf16_high16_avx512(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __mmask16 odd = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x10000));
    const __m512i t = _mm512_add_epi32(u, _mm512_set1_epi32(0x7fff));
    const __m512i r = _mm512_mask_add_epi32(t, odd, t, _mm512_set1_epi32(1));
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x400000)));
}

/* 16 outputs at d (no alignment needed), F32 or BF16. */
static inline void qs_store16_avx512(uint8_t *d, __m512 v, amn_dtype out) {
    if (out == AMN_DTYPE_F32)
        _mm512_storeu_ps(d, v);
    else
        _mm256_storeu_si256((__m256i *)d,
                            _mm512_cvtepi32_epi16(_mm512_srli_epi32(qs_bf16_high16_avx512(v), 16)));
}

/* 32 outputs at d, a holding 0-15 and b 16-31, F32 or BF16: one two-source
 * word permute packs the 32 BF16 results into a single store. */
static inline void qs_store32_avx512(uint8_t *d, __m512 a, __m512 b, amn_dtype out) {
    static const uint16_t odd_words[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21,
                                           23, 25, 27, 29, 31, 33, 35, 37, 39, 41, 43,
                                           45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
    if (out == AMN_DTYPE_F32) {
        _mm512_storeu_ps(d, a);
        _mm512_storeu_ps(d + 64, b);
        return;
    }
    const __m512i idx = _mm512_loadu_si512(odd_words);
    _mm512_storeu_si512(
        d, _mm512_permutex2var_epi16(qs_bf16_high16_avx512(a), idx, qs_bf16_high16_avx512(b)));
}

#endif
