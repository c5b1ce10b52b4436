/* NVFP4 with AVX2: one block of 16 elements (8 bytes) per step. The low
 * and high nibbles of the 8 bytes are the even and odd elements; each set
 * goes through the 16-entry table (two permutes and a blend), is multiplied
 * by the block's scale, and the two are interleaved back into element
 * order before the store, which rounds as the scalar path does. BF16 is
 * the shuffle port's work: the interleave leaves the halves in the order
 * one 16-bit pack puts right, and when every block scale is finite (no
 * product can be NaN: the E2M1 values are finite) the rounding skips the
 * NaN test. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "amn/kit/store_avx2.h"
#include "nvfp4_kernels.h"

/* E2M1 values of 8 codes (one per 32-bit lane) from the table's magnitudes
 * (entries 0-7, read by the permute's low 3 index bits) and a sign bit for
 * codes above neg: 7 where code 8 is -0.0, 8 where it is +0.0. Both
 * tables are symmetric (entry c + 8 is minus entry c), so this is the
 * table entry, bit for bit, at one permute where a 16-entry lookup takes
 * two and a blend (the shuffle port is what these loops wait on). */
static inline __m256 lookup(__m256 mag, __m256i neg, __m256i code) {
    const __m256i sign =
        _mm256_and_si256(_mm256_cmpgt_epi32(code, neg), _mm256_set1_epi32((int)0x80000000u));
    return _mm256_or_ps(_mm256_permutevar8x32_ps(mag, code), _mm256_castsi256_ps(sign));
}

/* The lookup threshold of a table: see lookup. */
static inline __m256i sign_from(const float *table) {
    return _mm256_set1_epi32(signbit(table[8]) ? 7 : 8);
}

/* Rounded BF16 lanes (amn/bf16_avx2.h), with the NaN test or without. */
static inline __m256i bf16_lanes(__m256 v, bool finite) {
    return finite ? amn_bf16_lanes_finite_avx2(v) : amn_bf16_lanes_avx2(v);
}

static inline __attribute__((always_inline)) void row(const uint8_t *w, const float *bs,
                                                      uint64_t in, const float *table,
                                                      amn_dtype out, bool finite, uint8_t *d) {
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    const __m256 mag = _mm256_loadu_ps(table);
    const __m256i neg = sign_from(table);
    for (uint64_t b = 0; b < in / 16; b++) {
        const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w + 8 * b)));
        const __m256 s = _mm256_set1_ps(bs[b]);
        const __m256 even =
            _mm256_mul_ps(lookup(mag, neg, _mm256_and_si256(bytes, _mm256_set1_epi32(15))), s);
        const __m256 odd = _mm256_mul_ps(lookup(mag, neg, _mm256_srli_epi32(bytes, 4)), s);
        const __m256 a = _mm256_unpacklo_ps(even, odd); /* 0 1 2 3 | 8 9 10 11 */
        const __m256 c = _mm256_unpackhi_ps(even, odd); /* 4 5 6 7 | 12 13 14 15 */
        if (out == AMN_DTYPE_BF16) {
            /* The pack's lane order is the element order: 0-3 4-7 | 8-11 12-15. */
            _mm256_storeu_si256((__m256i *)(d + 32 * b),
                                _mm256_packus_epi32(bf16_lanes(a, finite), bf16_lanes(c, finite)));
            continue;
        }
        qs_store8(out, d + 16 * b * es, _mm256_permute2f128_ps(a, c, 0x20));
        qs_store8(out, d + (16 * b + 8) * es, _mm256_permute2f128_ps(a, c, 0x31));
    }
}

void nvfp4_row_avx2(const uint8_t *w, const float *bs, uint64_t in, const float *table,
                    amn_dtype out, bool finite, uint8_t *d) {
    switch (out) {
    case AMN_DTYPE_F32:
        row(w, bs, in, table, AMN_DTYPE_F32, false, d);
        break;
    case AMN_DTYPE_F16:
        row(w, bs, in, table, AMN_DTYPE_F16, false, d);
        break;
    default:
        if (finite)
            row(w, bs, in, table, AMN_DTYPE_BF16, true, d);
        else
            row(w, bs, in, table, AMN_DTYPE_BF16, false, d);
        break;
    }
}

/* The batched layout: 8 outputs per step, each with its own scale. */
static inline __attribute__((always_inline)) void bmm_row(const uint8_t *w, unsigned shift,
                                                          const float *bs, uint64_t n,
                                                          const float *table, amn_dtype out,
                                                          bool finite, uint8_t *d) {
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    const __m256 mag = _mm256_loadu_ps(table);
    const __m256i neg = sign_from(table);
    const __m128i sh = _mm_cvtsi32_si128((int)shift);
    uint64_t o = 0;
    if (out == AMN_DTYPE_BF16) /* 16 at a time, one pack and one permute */
        for (; o + 16 <= n; o += 16) {
            const __m256i b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w + o)));
            const __m256i b1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w + o + 8)));
            const __m256i m = _mm256_set1_epi32(15);
            const __m256 y0 =
                _mm256_mul_ps(lookup(mag, neg, _mm256_and_si256(_mm256_srl_epi32(b0, sh), m)),
                              _mm256_loadu_ps(bs + o));
            const __m256 y1 =
                _mm256_mul_ps(lookup(mag, neg, _mm256_and_si256(_mm256_srl_epi32(b1, sh), m)),
                              _mm256_loadu_ps(bs + o + 8));
            _mm256_storeu_si256((__m256i *)(d + 2 * o),
                                finite ? qs_bf16x16_finite(y0, y1) : qs_bf16x16(y0, y1));
        }
    for (; o + 8 <= n; o += 8) {
        const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w + o)));
        const __m256i code = _mm256_and_si256(_mm256_srl_epi32(bytes, sh), _mm256_set1_epi32(15));
        qs_store8(out, d + o * es, _mm256_mul_ps(lookup(mag, neg, code), _mm256_loadu_ps(bs + o)));
    }
    if (o < n) nvfp4_bmm_row_scalar(w + o, shift, bs + o, n - o, table, out, d + o * es);
}

/* Rows 2k (low nibbles, at d0) and 2k + 1 (high nibbles, at d1) of the
 * batched layout from one pass over their shared bytes and scales. */
static inline __attribute__((always_inline)) void bmm_pair(const uint8_t *w, const float *bs,
                                                           uint64_t n, const float *table,
                                                           amn_dtype out, bool finite, uint8_t *d0,
                                                           uint8_t *d1) {
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    const __m256 mag = _mm256_loadu_ps(table);
    const __m256i neg = sign_from(table), m = _mm256_set1_epi32(15);
    uint64_t o = 0;
    if (out == AMN_DTYPE_BF16)
        for (; o + 16 <= n; o += 16) {
            const __m256i b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w + o)));
            const __m256i b1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w + o + 8)));
            const __m256 s0 = _mm256_loadu_ps(bs + o), s1 = _mm256_loadu_ps(bs + o + 8);
            const __m256 e0 = _mm256_mul_ps(lookup(mag, neg, _mm256_and_si256(b0, m)), s0);
            const __m256 e1 = _mm256_mul_ps(lookup(mag, neg, _mm256_and_si256(b1, m)), s1);
            const __m256 h0 = _mm256_mul_ps(lookup(mag, neg, _mm256_srli_epi32(b0, 4)), s0);
            const __m256 h1 = _mm256_mul_ps(lookup(mag, neg, _mm256_srli_epi32(b1, 4)), s1);
            _mm256_storeu_si256((__m256i *)(d0 + 2 * o),
                                finite ? qs_bf16x16_finite(e0, e1) : qs_bf16x16(e0, e1));
            _mm256_storeu_si256((__m256i *)(d1 + 2 * o),
                                finite ? qs_bf16x16_finite(h0, h1) : qs_bf16x16(h0, h1));
        }
    for (; o + 8 <= n; o += 8) {
        const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w + o)));
        const __m256 s = _mm256_loadu_ps(bs + o);
        qs_store8(out, d0 + o * es, _mm256_mul_ps(lookup(mag, neg, _mm256_and_si256(b, m)), s));
        qs_store8(out, d1 + o * es, _mm256_mul_ps(lookup(mag, neg, _mm256_srli_epi32(b, 4)), s));
    }
    if (o < n) {
        nvfp4_bmm_row_scalar(w + o, 0, bs + o, n - o, table, out, d0 + o * es);
        nvfp4_bmm_row_scalar(w + o, 4, bs + o, n - o, table, out, d1 + o * es);
    }
}

void nvfp4_bmm_pair_avx2(const uint8_t *w, const float *bs, uint64_t n, const float *table,
                         amn_dtype out, bool finite, uint8_t *d0, uint8_t *d1) {
    switch (out) {
    case AMN_DTYPE_F32:
        bmm_pair(w, bs, n, table, AMN_DTYPE_F32, false, d0, d1);
        break;
    case AMN_DTYPE_F16:
        bmm_pair(w, bs, n, table, AMN_DTYPE_F16, false, d0, d1);
        break;
    default:
        if (finite)
            bmm_pair(w, bs, n, table, AMN_DTYPE_BF16, true, d0, d1);
        else
            bmm_pair(w, bs, n, table, AMN_DTYPE_BF16, false, d0, d1);
        break;
    }
}

void nvfp4_bmm_row_avx2(const uint8_t *w, unsigned shift, const float *bs, uint64_t n,
                        const float *table, amn_dtype out, bool finite, uint8_t *d) {
    switch (out) {
    case AMN_DTYPE_F32:
        bmm_row(w, shift, bs, n, table, AMN_DTYPE_F32, false, d);
        break;
    case AMN_DTYPE_F16:
        bmm_row(w, shift, bs, n, table, AMN_DTYPE_F16, false, d);
        break;
    default:
        if (finite)
            bmm_row(w, shift, bs, n, table, AMN_DTYPE_BF16, true, d);
        else
            bmm_row(w, shift, bs, n, table, AMN_DTYPE_BF16, false, d);
        break;
    }
}
