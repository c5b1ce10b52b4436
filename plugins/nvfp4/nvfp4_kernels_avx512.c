/* NVFP4 with AVX-512 (F, BW, VL, DQ): the 16-entry E2M1 table is one
 * register, looked up by vpermps. Row layout: 16 bytes are two blocks, 32
 * elements; their low and high nibbles are interleaved back into element
 * order by one two-source permute each, and each half is multiplied by its
 * block's scale. Batched layout: 16 outputs per step, each with its own
 * scale. Same binary32 products as the scalar path, rounded as it rounds;
 * F32 and BF16 outputs; the dispatch takes it for BF16 alone (F32 ran at
 * 0.8x the AVX2 loop on a Skylake-SP, where 512-bit work lowers the
 * clock, and tied it on Zen 5; F16 runs the AVX2 path). Built against SIMDe's
 * portable AVX-512 for the emulated test (AMN_SCHEME_AVX512_EMULATE). */
#include <immintrin.h>

#include "amn/kit/store_avx512.h"
#include "nvfp4_kernels.h"

/* Element k of 16 from 8 bytes: even k the low nibble of byte k / 2, odd k
 * the high one; as indices into (lo, hi) for vpermt2d. */
static const int32_t inter_a[16] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
static const int32_t inter_b[16] = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

void nvfp4_row_avx512(const uint8_t *w, const float *bs, uint64_t in, const float *table,
                      amn_dtype out, uint8_t *d) {
    const size_t es = amn_dtype_size(out);
    const __m512 t = _mm512_loadu_ps(table);
    const __m512i ia = _mm512_loadu_si512(inter_a), ib = _mm512_loadu_si512(inter_b);
    const uint64_t nb = in / 16;
    uint64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w + 8 * b)));
        const __m512i lo = _mm512_and_si512(x, _mm512_set1_epi32(15)), hi = _mm512_srli_epi32(x, 4);
        const __m512 v0 = _mm512_permutexvar_ps(_mm512_permutex2var_epi32(lo, ia, hi), t);
        const __m512 v1 = _mm512_permutexvar_ps(_mm512_permutex2var_epi32(lo, ib, hi), t);
        qs_store16_avx512(d + 16 * b * es, _mm512_mul_ps(v0, _mm512_set1_ps(bs[b])), out);
        qs_store16_avx512(d + 16 * (b + 1) * es, _mm512_mul_ps(v1, _mm512_set1_ps(bs[b + 1])), out);
    }
    if (b < nb) nvfp4_row_scalar(w + 8 * b, bs + b, 16, table, out, d + 16 * b * es);
}

void nvfp4_bmm_row_avx512(const uint8_t *w, unsigned shift, const float *bs, uint64_t n,
                          const float *table, amn_dtype out, uint8_t *d) {
    const size_t es = amn_dtype_size(out);
    const __m512 t = _mm512_loadu_ps(table);
    const __m128i sh = _mm_cvtsi32_si128((int)shift);
    uint64_t o = 0;
    for (; o + 16 <= n; o += 16) {
        const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w + o)));
        const __m512i code = _mm512_and_si512(_mm512_srl_epi32(x, sh), _mm512_set1_epi32(15));
        qs_store16_avx512(d + o * es,
                          _mm512_mul_ps(_mm512_permutexvar_ps(code, t), _mm512_loadu_ps(bs + o)),
                          out);
    }
    if (o < n) nvfp4_bmm_row_scalar(w + o, shift, bs + o, n - o, table, out, d + o * es);
}
