/* bitsandbytes decode with AVX-512 (F, BW, VL, DQ): the 16-entry codebook is
 * one register, looked up by vpermps; the same binary32 products as the
 * scalar path; F32 and BF16 outputs (F16 runs the AVX2 path). Built against
 * SIMDe's portable AVX-512 for the emulated test (AMN_BNB_AVX512_EMULATE). */
#ifdef AMN_BNB_AVX512_EMULATE
#include "avx512_emulate.h"
#else
#include <immintrin.h>
#endif

#include "bnb_kernels.h"

/* amn_f32_to_bf16 in the high half of each dword: round to nearest even, a
 * NaN quieted. */
static inline __m512i bf16_high16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __mmask16 odd = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x10000));
    const __m512i t = _mm512_add_epi32(u, _mm512_set1_epi32(0x7fff));
    const __m512i r = _mm512_mask_add_epi32(t, odd, t, _mm512_set1_epi32(1));
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x400000)));
}

static const uint16_t odd_words[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21,
                                       23, 25, 27, 29, 31, 33, 35, 37, 39, 41, 43,
                                       45, 47, 49, 51, 53, 55, 57, 59, 61, 63};

/* 32 outputs: a holds 0-15, b 16-31. */
static inline void store32(uint8_t *d, __m512 a, __m512 b, amn_dtype out) {
    if (out == AMN_DTYPE_F32) {
        _mm512_storeu_ps(d, a);
        _mm512_storeu_ps(d + 64, b);
        return;
    }
    const __m512i idx = _mm512_loadu_si512(odd_words);
    _mm512_storeu_si512(d, _mm512_permutex2var_epi16(bf16_high16(a), idx, bf16_high16(b)));
}

/* Output k of 32 from 16 bytes: even k the high nibble of byte k/2, odd k
 * the low one; as indices into (hi, lo) for vpermt2d. */
static const int32_t inter_a[16] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
static const int32_t inter_b[16] = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

void bnb4_run_avx512(const float cb[16], const uint8_t *w, size_t nbytes, float scale,
                     amn_dtype out, uint8_t *dst) {
    const size_t es = amn_dtype_size(out);
    const __m512 table = _mm512_loadu_ps(cb), s = _mm512_set1_ps(scale);
    const __m512i ia = _mm512_loadu_si512(inter_a), ib = _mm512_loadu_si512(inter_b);
    size_t i = 0;
    for (; i + 16 <= nbytes; i += 16) {
        const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w + i)));
        const __m512i hi = _mm512_srli_epi32(x, 4), lo = _mm512_and_si512(x, _mm512_set1_epi32(15));
        const __m512 a = _mm512_permutexvar_ps(_mm512_permutex2var_epi32(hi, ia, lo), table);
        const __m512 b = _mm512_permutexvar_ps(_mm512_permutex2var_epi32(hi, ib, lo), table);
        store32(dst + 2 * i * es, _mm512_mul_ps(a, s), _mm512_mul_ps(b, s), out);
    }
    for (; i < nbytes; i++) {
        qs_store1(cb[w[i] >> 4] * scale, out, dst + 2 * i * es);
        qs_store1(cb[w[i] & 15] * scale, out, dst + (2 * i + 1) * es);
    }
}

void bnb8_row_avx512(const int8_t *w, size_t n, float scb, amn_dtype out, uint8_t *dst) {
    const size_t es = amn_dtype_size(out);
    float c;
    const uint32_t cbits = BNB_INT8_C_BITS;
    memcpy(&c, &cbits, 4);
    const __m512 s = _mm512_set1_ps(scb), cv = _mm512_set1_ps(c);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 a =
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w + i))));
        const __m512 b = _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w + i + 16))));
        store32(dst + i * es, _mm512_mul_ps(_mm512_mul_ps(a, s), cv),
                _mm512_mul_ps(_mm512_mul_ps(b, s), cv), out);
    }
    for (; i < n; i++) {
        const float p = (float)w[i] * scb;
        qs_store1(p * c, out, dst + i * es);
    }
}
