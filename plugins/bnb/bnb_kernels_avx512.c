/* bitsandbytes decode with AVX-512 (F, BW, VL, DQ): the 16-entry codebook is
 * one register, looked up by vpermps; the same binary32 products as the
 * scalar path; F32 and BF16 outputs (F16 runs the AVX2 path). Built against
 * SIMDe's portable AVX-512 for the emulated test (AMN_BNB_AVX512_EMULATE). */
#include <immintrin.h>

#include "amn/kit/store_avx512.h"
#include "bnb_kernels.h"

/* Output k of 32 from 16 bytes: even k the high nibble of byte k/2, odd k
 * the low one; as indices into (hi, lo) for vpermt2d. */
static const int32_t inter_a[16] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
static const int32_t inter_b[16] = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

/* 2 * nbytes elements of one block scaled by s; out fixed by the callers
 * (always inlined) so the store's dtype test folds. */
static inline __attribute__((always_inline)) void run512(const float cb[16], __m512 table,
                                                         __m512i ia, __m512i ib, const uint8_t *w,
                                                         size_t nbytes, float scale, amn_dtype out,
                                                         uint8_t *dst) {
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    const __m512 s = _mm512_set1_ps(scale);
    size_t i = 0;
    for (; i + 16 <= nbytes; i += 16) {
        const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w + i)));
        const __m512i hi = _mm512_srli_epi32(x, 4), lo = _mm512_and_si512(x, _mm512_set1_epi32(15));
        const __m512 a = _mm512_permutexvar_ps(_mm512_permutex2var_epi32(hi, ia, lo), table);
        const __m512 b = _mm512_permutexvar_ps(_mm512_permutex2var_epi32(hi, ib, lo), table);
        qs_store32_avx512(dst + 2 * i * es, _mm512_mul_ps(a, s), _mm512_mul_ps(b, s), out);
    }
    for (; i < nbytes; i++) {
        qs_store1(cb[w[i] >> 4] * scale, out, dst + 2 * i * es);
        qs_store1(cb[w[i] & 15] * scale, out, dst + (2 * i + 1) * es);
    }
}

static inline __attribute__((always_inline)) void blocks512(const float cb[16], const uint8_t *w,
                                                            size_t n, size_t bbytes, const float *s,
                                                            amn_dtype out, uint8_t *dst) {
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    const __m512 table = _mm512_loadu_ps(cb);
    const __m512i ia = _mm512_loadu_si512(inter_a), ib = _mm512_loadu_si512(inter_b);
    for (size_t j = 0; j < n; j++)
        run512(cb, table, ia, ib, w + j * bbytes, bbytes, s[j], out, dst + 2 * j * bbytes * es);
}

void bnb4_blocks_avx512(const float cb[16], const uint8_t *w, size_t n, size_t bbytes,
                        const float *s, amn_dtype out, uint8_t *dst) {
    if (out == AMN_DTYPE_F32)
        blocks512(cb, w, n, bbytes, s, AMN_DTYPE_F32, dst);
    else
        blocks512(cb, w, n, bbytes, s, AMN_DTYPE_BF16, dst);
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
        qs_store32_avx512(dst + i * es, _mm512_mul_ps(_mm512_mul_ps(a, s), cv),
                          _mm512_mul_ps(_mm512_mul_ps(b, s), cv), out);
    }
    for (; i < n; i++) {
        const float p = (float)w[i] * scb;
        qs_store1(p * c, out, dst + i * es);
    }
}
