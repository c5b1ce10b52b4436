/* NVFP4 with AVX-512 (F, BW, VL, DQ): the 16-entry E2M1 table is one
 * register, looked up by vpermps. Row layout: 16 bytes are two blocks, 32
 * elements; their low and high nibbles are interleaved back into element
 * order by one two-source permute each, and each half is multiplied by its
 * block's scale. Batched layout: 16 outputs per step, each with its own
 * scale. Same binary32 products as the scalar path, rounded as it rounds;
 * F32 and BF16 outputs (F16 runs the AVX2 path). Built against SIMDe's
 * portable AVX-512 for the emulated test (AMN_SCHEME_AVX512_EMULATE). */
#ifdef AMN_SCHEME_AVX512_EMULATE
#include "avx512_emulate.h"
#else
#include <immintrin.h>
#endif

#include "nvfp4_kernels.h"

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

static inline void store16(uint8_t *d, __m512 v, amn_dtype out) {
    if (out == AMN_DTYPE_F32)
        _mm512_storeu_ps(d, v);
    else
        _mm256_storeu_si256((__m256i *)d,
                            _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16_high16(v), 16)));
}

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
        store16(d + 16 * b * es, _mm512_mul_ps(v0, _mm512_set1_ps(bs[b])), out);
        store16(d + 16 * (b + 1) * es, _mm512_mul_ps(v1, _mm512_set1_ps(bs[b + 1])), out);
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
        store16(d + o * es, _mm512_mul_ps(_mm512_permutexvar_ps(code, t), _mm512_loadu_ps(bs + o)),
                out);
    }
    if (o < n) nvfp4_bmm_row_scalar(w + o, shift, bs + o, n - o, table, out, d + o * es);
}
