/* bitsandbytes decode with AVX2 + F16C: the same binary32 products as the
 * scalar path, stored by the kit's exact F16 / BF16 conversions. */
#include <immintrin.h>

#include "bnb_kernels.h"
#include "amn/kit/store_avx2.h"

/* 8 nibble indices (one per 32-bit lane) -> codebook values: two 8-entry
 * halves looked up by the low 3 bits, chosen by bit 3 moved to the sign. */
static inline __m256 lookup8(__m256 lo, __m256 hi, __m256i idx) {
    const __m256 a = _mm256_permutevar8x32_ps(lo, idx);
    const __m256 b = _mm256_permutevar8x32_ps(hi, idx);
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

/* 2 * nbytes elements of one block scaled by s; out fixed by the callers
 * (always inlined) so the store's dtype test folds. */
static inline __attribute__((always_inline)) void run256(const float cb[16], __m256 lo, __m256 hi,
                                                         const uint8_t *w, size_t nbytes,
                                                         float scale, amn_dtype out, uint8_t *dst) {
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    const __m256 s = _mm256_set1_ps(scale);
    const __m128i m15 = _mm_set1_epi8(15);
    size_t i = 0;
    for (; i + 16 <= nbytes; i += 16) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(w + i));
        const __m128i h = _mm_and_si128(_mm_srli_epi16(v, 4), m15), l = _mm_and_si128(v, m15);
        /* element order: high nibble first */
        const __m128i n0 = _mm_unpacklo_epi8(h, l), n1 = _mm_unpackhi_epi8(h, l);
        uint8_t *d = dst + 2 * i * es;
        qs_store8(out, d, _mm256_mul_ps(lookup8(lo, hi, _mm256_cvtepu8_epi32(n0)), s));
        qs_store8(out, d + 8 * es,
                  _mm256_mul_ps(lookup8(lo, hi, _mm256_cvtepu8_epi32(_mm_srli_si128(n0, 8))), s));
        qs_store8(out, d + 16 * es, _mm256_mul_ps(lookup8(lo, hi, _mm256_cvtepu8_epi32(n1)), s));
        qs_store8(out, d + 24 * es,
                  _mm256_mul_ps(lookup8(lo, hi, _mm256_cvtepu8_epi32(_mm_srli_si128(n1, 8))), s));
    }
    for (; i < nbytes; i++) {
        qs_store1(cb[w[i] >> 4] * scale, out, dst + 2 * i * es);
        qs_store1(cb[w[i] & 15] * scale, out, dst + (2 * i + 1) * es);
    }
}

#define BY_OUT(CALL)                                                                               \
    do {                                                                                           \
        if (out == AMN_DTYPE_F32)                                                                  \
            CALL(AMN_DTYPE_F32);                                                                   \
        else if (out == AMN_DTYPE_F16)                                                             \
            CALL(AMN_DTYPE_F16);                                                                   \
        else                                                                                       \
            CALL(AMN_DTYPE_BF16);                                                                  \
    } while (0)

void bnb4_blocks_avx2(const float cb[16], const uint8_t *w, size_t n, size_t bbytes, const float *s,
                      amn_dtype out, uint8_t *dst) {
    const __m256 lo = _mm256_loadu_ps(cb), hi = _mm256_loadu_ps(cb + 8);
#define BLOCKS(OUT)                                                                                \
    for (size_t j = 0; j < n; j++)                                                                 \
    run256(cb, lo, hi, w + j * bbytes, bbytes, s[j], OUT,                                          \
           dst + 2 * j * bbytes * (OUT == AMN_DTYPE_F32 ? 4 : 2))
    BY_OUT(BLOCKS);
#undef BLOCKS
}

void bnb8_row_avx2(const int8_t *w, size_t n, float scb, amn_dtype out, uint8_t *dst) {
    const size_t es = amn_dtype_size(out);
    float c;
    const uint32_t cbits = BNB_INT8_C_BITS;
    memcpy(&c, &cbits, 4);
    const __m256 s = _mm256_set1_ps(scb), cv = _mm256_set1_ps(c);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(w + i));
        const __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
        const __m256 b = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));
        qs_store8(out, dst + i * es, _mm256_mul_ps(_mm256_mul_ps(a, s), cv));
        qs_store8(out, dst + (i + 8) * es, _mm256_mul_ps(_mm256_mul_ps(b, s), cv));
    }
    for (; i < n; i++) {
        const float p = (float)w[i] * scb;
        qs_store1(p * c, out, dst + i * es);
    }
}
