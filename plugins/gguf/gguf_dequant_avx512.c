/* AVX-512 dequantizers (F, BW, VL, DQ) for 15 of the 22 block types: Q4_0,
 * Q4_1, Q5_0, Q5_1, Q8_0, the k-quants Q2_K to Q6_K, IQ4_NL, IQ4_XS, MXFP4,
 * TQ1_0 and TQ2_0, which make up nearly every GGUF download. The grid types
 * (IQ1_S, IQ1_M, IQ2_*, IQ3_*) keep their AVX2 kernels on AVX-512 machines:
 * gguf_avx512_kernel returns NULL for them and the caller falls back.
 *
 * Same rules as gguf_dequant_avx2.c: the scalar operation order per element,
 * no FMA, no load past the block. F32 outputs are computed directly, sixteen
 * lanes at a time. BF16 outputs are too for Q8_0, Q5_K and Q6_K: the tie bit
 * goes into a mask register and one two-source word permute keeps the high
 * halves of 32 results, so 32 outputs take one 64-byte store; the types whose
 * 32 outputs take at most 32 values round those once into a table instead
 * and pick from it with one word permute (lut16, lut32).
 *
 * The tests run this file natively where the CPU has AVX-512 and, on any
 * AVX2 machine, built against SIMDe's portable AVX-512
 * (test_gguf_kernels_avx512emu), so the path is
 * checked against the scalar one and the goldens on every build host. */
#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#include "gguf_kernels.h"
#include "gguf_tables.h"
#include "gguf_types.h"
#include "gguf_vec.h"

/* ---- output: F32 or BF16 ------------------------------------------------ */

/* Round-to-nearest-even to BF16 in the high half of each dword, NaN quieted,
 * as amn_f32_to_bf16: add 0x7fff, plus one where the kept LSB is set. */
ALWAYS_INLINE __m512i bf16_high16(__m512 v, const int out) {
    const __m512i u = _mm512_castps_si512(v);
    const __mmask16 odd = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x10000));
    const __m512i t = _mm512_add_epi32(u, _mm512_set1_epi32(0x7fff));
    const __m512i r = _mm512_mask_add_epi32(t, odd, t, _mm512_set1_epi32(1));
    if (out == OUT_BF16_NONAN) return r;
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x400000)));
}

/* Word i of the permute below: word 2i + 1 of (a, b), the high half of
 * dword i of the pair. */
static const uint16_t odd_words[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21,
                                       23, 25, 27, 29, 31, 33, 35, 37, 39, 41, 43,
                                       45, 47, 49, 51, 53, 55, 57, 59, 61, 63};

/* Store 32 outputs at element index at: a holds outputs 0-15, b 16-31. */
ALWAYS_INLINE void emit32(uint8_t *dst, size_t at, __m512 a, __m512 b, const int out) {
    if (out == OUT_F32) {
        _mm512_storeu_ps(dst + 4 * at, a);
        _mm512_storeu_ps(dst + 4 * at + 64, b);
        return;
    }
    const __m512i idx = _mm512_loadu_si512(odd_words);
    _mm512_storeu_si512(dst + 2 * at,
                        _mm512_permutex2var_epi16(bf16_high16(a, out), idx, bf16_high16(b, out)));
}

/* 16 bytes as 16 dwords, unsigned / signed, and as floats (exact). */
ALWAYS_INLINE __m512i u8x16(__m128i x) {
    return _mm512_cvtepu8_epi32(x);
}
ALWAYS_INLINE __m512 u8f(__m128i x) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(x));
}
ALWAYS_INLINE __m512 s8f(__m128i x) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(x));
}
ALWAYS_INLINE __m512 i32f(__m512i x) {
    return _mm512_cvtepi32_ps(x);
}

/* d * x - m and d * x + m, rounded after each operation as the scalar code. */
ALWAYS_INLINE __m512 mul_sub(__m512 d, __m512 x, __m512 m) {
    return _mm512_sub_ps(_mm512_mul_ps(d, x), m);
}
ALWAYS_INLINE __m512 mul_add(__m512 x, __m512 d, __m512 m) {
    return _mm512_add_ps(_mm512_mul_ps(x, d), m);
}

/* ---- BF16 by table lookup ----------------------------------------------- */

/* When 32 outputs take at most 32 distinct values, rounding those values
 * once and picking them with one word permute (vpermw) costs less than
 * rounding every output. Each entry is computed exactly as the direct path
 * computes that code, so the bytes are the same. */

/* The BF16 of 16 values, as the low 16 words of a table. */
ALWAYS_INLINE __m512i lut16(__m512 vals, const int out) {
    return _mm512_castsi256_si512(
        _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16_high16(vals, out), 16)));
}

/* The BF16 of 32 values: codes 0-15 in a, 16-31 in b. */
ALWAYS_INLINE __m512i lut32(__m512 a, __m512 b, const int out) {
    return _mm512_permutex2var_epi16(bf16_high16(a, out), _mm512_loadu_si512(odd_words),
                                     bf16_high16(b, out));
}

/* Store the table entries of 32 codes (bytes, in output order) at element
 * index at. */
ALWAYS_INLINE void lut_emit32(uint8_t *dst, size_t at, __m512i table, __m256i codes) {
    _mm512_storeu_si512(dst + 2 * at, _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(codes), table));
}

/* Codes as floats: ramp + 16 + k holds k, k + 1, ... for k in -16..16. */
static const float ramp[48] = {-16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5,
                               -4,  -3,  -2,  -1,  0,   1,   2,   3,  4,  5,  6,  7,
                               8,   9,   10,  11,  12,  13,  14,  15, 16, 17, 18, 19,
                               20,  21,  22,  23,  24,  25,  26,  27, 28, 29, 30, 31};
ALWAYS_INLINE __m512 ramp16(int k) {
    return _mm512_loadu_ps(ramp + 16 + k);
}

/* ---- legacy 32-element blocks ------------------------------------------- */

ALWAYS_INLINE void q4_0_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m512i m4 = _mm512_set1_epi32(15), eight = _mm512_set1_epi32(8);
    for (size_t i = 0; i < nb; i++, b += 18, dst += out ? 64 : 128) {
        prefetch_block(b, 18, out);
        const __m512 d = _mm512_set1_ps(h2f(b)); /* (c - 8) * d */
        if (out != OUT_F32) {
            lut_emit32(dst, 0, lut16(_mm512_mul_ps(ramp16(-8), d), out), nibbles_lo_hi(b + 2));
            continue;
        }
        const __m512i x = u8x16(load16(b + 2));
        emit32(dst, 0, _mm512_mul_ps(i32f(_mm512_sub_epi32(_mm512_and_si512(x, m4), eight)), d),
               _mm512_mul_ps(i32f(_mm512_sub_epi32(_mm512_srli_epi32(x, 4), eight)), d), out);
    }
}
ROWS_FN(q4_0, f16_finite(b, nb, 18, 0))

ALWAYS_INLINE void q4_1_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m512i m4 = _mm512_set1_epi32(15);
    for (size_t i = 0; i < nb; i++, b += 20, dst += out ? 64 : 128) {
        prefetch_block(b, 20, out);
        const __m512 d = _mm512_set1_ps(h2f(b)), m = _mm512_set1_ps(h2f(b + 2)); /* c * d + m */
        if (out != OUT_F32) {
            lut_emit32(dst, 0, lut16(mul_add(ramp16(0), d, m), out), nibbles_lo_hi(b + 4));
            continue;
        }
        const __m512i x = u8x16(load16(b + 4));
        emit32(dst, 0, mul_add(i32f(_mm512_and_si512(x, m4)), d, m),
               mul_add(i32f(_mm512_srli_epi32(x, 4)), d, m), out);
    }
}
ROWS_FN(q4_1, f16x2_finite(b, nb, 20, 0))

/* The five-bit values of a Q5 block: nibbles of x (low for the first 16
 * outputs, high for the next 16), plus 16 where the matching bit of qh is
 * set (bits 0-15 and 16-31). */
ALWAYS_INLINE void q5_values(const uint8_t *qs, uint32_t qh, __m512i *lo, __m512i *hi) {
    const __m512i x = u8x16(load16(qs)), sixteen = _mm512_set1_epi32(16);
    const __m512i l = _mm512_and_si512(x, _mm512_set1_epi32(15)), h = _mm512_srli_epi32(x, 4);
    *lo = _mm512_mask_or_epi32(l, (__mmask16)qh, l, sixteen);
    *hi = _mm512_mask_or_epi32(h, (__mmask16)(qh >> 16), h, sixteen);
}

/* The same 32 values as bytes in output order (table codes). */
ALWAYS_INLINE __m256i q5_codes(const uint8_t *qs, uint32_t qh) {
    return _mm256_or_si256(nibbles_lo_hi(qs),
                           _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(16)));
}

ALWAYS_INLINE void q5_0_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m512i sixteen = _mm512_set1_epi32(16);
    for (size_t i = 0; i < nb; i++, b += 22, dst += out ? 64 : 128) {
        prefetch_block(b, 22, out);
        const __m512 d = _mm512_set1_ps(h2f(b)); /* (x - 16) * d */
        if (out != OUT_F32) {
            const __m512i t =
                lut32(_mm512_mul_ps(ramp16(-16), d), _mm512_mul_ps(ramp16(0), d), out);
            lut_emit32(dst, 0, t, q5_codes(b + 6, gguf_le32(b + 2)));
            continue;
        }
        __m512i lo, hi;
        q5_values(b + 6, gguf_le32(b + 2), &lo, &hi);
        emit32(dst, 0, _mm512_mul_ps(i32f(_mm512_sub_epi32(lo, sixteen)), d),
               _mm512_mul_ps(i32f(_mm512_sub_epi32(hi, sixteen)), d), out);
    }
}
ROWS_FN(q5_0, f16_finite(b, nb, 22, 0))

ALWAYS_INLINE void q5_1_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    for (size_t i = 0; i < nb; i++, b += 24, dst += out ? 64 : 128) {
        prefetch_block(b, 24, out);
        const __m512 d = _mm512_set1_ps(h2f(b)), m = _mm512_set1_ps(h2f(b + 2)); /* x * d + m */
        if (out != OUT_F32) {
            const __m512i t = lut32(mul_add(ramp16(0), d, m), mul_add(ramp16(16), d, m), out);
            lut_emit32(dst, 0, t, q5_codes(b + 8, gguf_le32(b + 4)));
            continue;
        }
        __m512i lo, hi;
        q5_values(b + 8, gguf_le32(b + 4), &lo, &hi);
        emit32(dst, 0, mul_add(i32f(lo), d, m), mul_add(i32f(hi), d, m), out);
    }
}
ROWS_FN(q5_1, f16x2_finite(b, nb, 24, 0))

ALWAYS_INLINE void q8_0_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    for (size_t i = 0; i < nb; i++, b += 34, dst += out ? 64 : 128) {
        prefetch_block(b, 34, out);
        const __m512 d = _mm512_set1_ps(h2f(b)); /* q * d */
        emit32(dst, 0, _mm512_mul_ps(s8f(load16(b + 2)), d), _mm512_mul_ps(s8f(load16(b + 18)), d),
               out);
    }
}
ROWS_FN(q8_0, f16_finite(b, nb, 34, 0))

/* 32 outputs book[c] * d (the product commutes exactly) from the 16 nibble
 * bytes at qs: low nibbles first. */
ALWAYS_INLINE void codebook32(uint8_t *dst, size_t at, const uint8_t *qs, __m128i book, __m512 d,
                              const int out) {
    if (out != OUT_F32) {
        lut_emit32(dst, at, lut16(_mm512_mul_ps(s8f(book), d), out), nibbles_lo_hi(qs));
        return;
    }
    const __m128i m4 = _mm_set1_epi8(15), q = load16(qs);
    const __m128i lo = _mm_shuffle_epi8(book, _mm_and_si128(q, m4));
    const __m128i hi = _mm_shuffle_epi8(book, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
    emit32(dst, at, _mm512_mul_ps(s8f(lo), d), _mm512_mul_ps(s8f(hi), d), out);
}

ALWAYS_INLINE void iq4_nl_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m128i book = load16((const uint8_t *)gguf_kvalues_iq4nl);
    for (size_t i = 0; i < nb; i++, b += 18, dst += out ? 64 : 128) {
        prefetch_block(b, 18, out);
        codebook32(dst, 0, b + 2, book, _mm512_set1_ps(h2f(b)), out);
    }
}
ROWS_FN(iq4_nl, f16_finite(b, nb, 18, 0))

ALWAYS_INLINE void mxfp4_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m128i book = load16((const uint8_t *)gguf_kvalues_mxfp4);
    for (size_t i = 0; i < nb; i++, b += 17, dst += out ? 64 : 128) {
        prefetch_block(b, 17, out);
        codebook32(dst, 0, b + 1, book, _mm512_set1_ps(gguf_e8m0_half(b[0])), out);
    }
}
ROWS_FN(mxfp4, true)

/* ---- k-quants ----------------------------------------------------------- */

/* out[i] = d * (float)s[i] for 16 bytes s, signed or not. */
ALWAYS_INLINE void scale16s(float out[16], float d, __m128i s) {
    _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_set1_ps(d), s8f(s)));
}
ALWAYS_INLINE void scale16u(float out[16], float d, __m128i s) {
    _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_set1_ps(d), u8f(s)));
}

/* Table codes of Q2_K (c and c + 4: 0-3) and Q3_K (v + 4 and v + 12: -4..3). */
static const float codes_0_3[16] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
static const float codes_m4_3[16] = {-4, -3, -2, -1, 0, 1, 2, 3, -4, -3, -2, -1, 0, 1, 2, 3};

ALWAYS_INLINE void q2_k_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m128i m4 = _mm_set1_epi8(15);
    const __m512i m3 = _mm512_set1_epi32(3);
    for (size_t i = 0; i < nb; i++, b += 84, dst += out ? 512 : 1024) {
        prefetch_block(b, 84, out);
        float dl[16], ml[16];
        const __m128i sc = load16(b);
        scale16u(dl, h2f(b + 80), _mm_and_si128(sc, m4));
        scale16u(ml, h2f(b + 82), _mm_and_si128(_mm_srli_epi16(sc, 4), m4));
        if (out != OUT_F32) {
            /* Per 32 outputs, two sub-blocks of 16: codes 0-3 and 4-7 of one table. */
            const __m512 c4 = _mm512_loadu_ps(codes_0_3);
            const __m256i second = _mm256_set_m128i(_mm_set1_epi8(4), _mm_setzero_si128());
            for (int n = 0; n < 2; n++) {
                const __m256i q = load32(b + 16 + 32 * n);
                for (int j = 0; j < 4; j++) {
                    const int is = 8 * n + 2 * j;
                    const __m512 d = _mm512_mask_blend_ps(0xFFF0, _mm512_set1_ps(dl[is]),
                                                          _mm512_set1_ps(dl[is + 1]));
                    const __m512 m = _mm512_mask_blend_ps(0xFFF0, _mm512_set1_ps(ml[is]),
                                                          _mm512_set1_ps(ml[is + 1]));
                    const __m256i c =
                        _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), _mm256_set1_epi8(3));
                    lut_emit32(dst, (size_t)(128 * n + 32 * j), lut16(mul_sub(d, c4, m), out),
                               _mm256_or_si256(c, second));
                }
            }
            continue;
        }
        for (int n = 0; n < 2; n++) {
            const __m512i x0 = u8x16(load16(b + 16 + 32 * n)), x1 = u8x16(load16(b + 32 + 32 * n));
            for (int j = 0; j < 4; j++) {
                const int is = 8 * n + 2 * j; /* dl * ((q >> 2j) & 3) - ml, 16 per scale */
                const __m512 v0 = i32f(_mm512_and_si512(_mm512_srli_epi32(x0, 2 * j), m3));
                const __m512 v1 = i32f(_mm512_and_si512(_mm512_srli_epi32(x1, 2 * j), m3));
                emit32(dst, (size_t)(128 * n + 32 * j),
                       mul_sub(_mm512_set1_ps(dl[is]), v0, _mm512_set1_ps(ml[is])),
                       mul_sub(_mm512_set1_ps(dl[is + 1]), v1, _mm512_set1_ps(ml[is + 1])), out);
            }
        }
    }
}
ROWS_FN(q2_k, f16x2_finite(b, nb, 84, 80))

ALWAYS_INLINE void q3_k_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m512i m3 = _mm512_set1_epi32(3), four = _mm512_set1_epi32(4);
    for (size_t i = 0; i < nb; i++, b += 110, dst += out ? 512 : 1024) {
        prefetch_block(b, 110, out);
        float dl[16];
        scale16s(dl, h2f(b + 108), q3k_scales(b + 96));
        if (out != OUT_F32) {
            /* Per 32 outputs, two sub-blocks of 16: v + 4 (0-7) and v + 12 of one table. */
            const __m512 v8 = _mm512_loadu_ps(codes_m4_3);
            const __m256i hm = load32(b);
            for (int n = 0; n < 2; n++) {
                const __m256i q = load32(b + 32 + 32 * n);
                for (int j = 0; j < 4; j++) {
                    const int is = 8 * n + 2 * j;
                    const __m512 d = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(dl[is]),
                                                          _mm512_set1_ps(dl[is + 1]));
                    lut_emit32(dst, (size_t)(128 * n + 32 * j), lut16(_mm512_mul_ps(d, v8), out),
                               q3k_codes(hm, q, n, j));
                }
            }
            continue;
        }
        const __m512i hm[2] = {u8x16(load16(b)), u8x16(load16(b + 16))};
        for (int n = 0; n < 2; n++) {
            const __m512i q[2] = {u8x16(load16(b + 32 + 32 * n)), u8x16(load16(b + 48 + 32 * n))};
            for (int j = 0; j < 4; j++) {
                const __m512i bit = _mm512_set1_epi32(1 << (4 * n + j));
                __m512 v[2]; /* dl * (((q >> 2j) & 3) - (hmask bit clear ? 4 : 0)) */
                for (int h = 0; h < 2; h++) {
                    const __m512i c = _mm512_and_si512(_mm512_srli_epi32(q[h], 2 * j), m3);
                    const __mmask16 clear = (__mmask16)~_mm512_test_epi32_mask(hm[h], bit);
                    v[h] = _mm512_mul_ps(_mm512_set1_ps(dl[8 * n + 2 * j + h]),
                                         i32f(_mm512_mask_sub_epi32(c, clear, c, four)));
                }
                emit32(dst, (size_t)(128 * n + 32 * j), v[0], v[1], out);
            }
        }
    }
}
ROWS_FN(q3_k, f16_finite(b, nb, 110, 108))

ALWAYS_INLINE void q4_k_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m512i m4 = _mm512_set1_epi32(15);
    for (size_t i = 0; i < nb; i++, b += 144, dst += out ? 512 : 1024) {
        prefetch_block(b, 144, out);
        float dl[8], ml[8];
        k4_scales(b, dl, ml);
        if (out != OUT_F32) { /* one table per sub-block of 32 */
            const __m256i m4 = _mm256_set1_epi8(15);
            for (int j = 0; j < 4; j++) {
                const __m256i q = load32(b + 16 + 32 * j);
                const __m512 c = ramp16(0);
                lut_emit32(
                    dst, (size_t)(64 * j),
                    lut16(mul_sub(_mm512_set1_ps(dl[2 * j]), c, _mm512_set1_ps(ml[2 * j])), out),
                    _mm256_and_si256(q, m4));
                lut_emit32(
                    dst, (size_t)(64 * j + 32),
                    lut16(mul_sub(_mm512_set1_ps(dl[2 * j + 1]), c, _mm512_set1_ps(ml[2 * j + 1])),
                          out),
                    _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
            }
            continue;
        }
        for (int j = 0; j < 4; j++) { /* dl * c - ml: low nibbles, then high */
            const uint8_t *q = b + 16 + 32 * j;
            const __m512i x0 = u8x16(load16(q)), x1 = u8x16(load16(q + 16));
            const __m512 d1 = _mm512_set1_ps(dl[2 * j]), m1 = _mm512_set1_ps(ml[2 * j]);
            const __m512 d2 = _mm512_set1_ps(dl[2 * j + 1]), m2 = _mm512_set1_ps(ml[2 * j + 1]);
            emit32(dst, (size_t)(64 * j), mul_sub(d1, i32f(_mm512_and_si512(x0, m4)), m1),
                   mul_sub(d1, i32f(_mm512_and_si512(x1, m4)), m1), out);
            emit32(dst, (size_t)(64 * j + 32), mul_sub(d2, i32f(_mm512_srli_epi32(x0, 4)), m2),
                   mul_sub(d2, i32f(_mm512_srli_epi32(x1, 4)), m2), out);
        }
    }
}
ROWS_FN(q4_k, f16x2_finite(b, nb, 144, 0))

ALWAYS_INLINE void q5_k_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m512i m4 = _mm512_set1_epi32(15), sixteen = _mm512_set1_epi32(16);
    for (size_t i = 0; i < nb; i++, b += 176, dst += out ? 512 : 1024) {
        prefetch_block(b, 176, out);
        float dl[8], ml[8];
        k4_scales(b, dl, ml);
        const __m512i qh[2] = {u8x16(load16(b + 16)), u8x16(load16(b + 32))};
        for (int j = 0; j < 4; j++) { /* dl * (nibble + 16 * bit) - ml */
            const uint8_t *q = b + 48 + 32 * j;
            const __m512i x[2] = {u8x16(load16(q)), u8x16(load16(q + 16))};
            const __m512i b0 = _mm512_set1_epi32(1 << (2 * j)),
                          b1 = _mm512_set1_epi32(2 << (2 * j));
            __m512 lo[2], hi[2];
            for (int h = 0; h < 2; h++) {
                const __m512i l = _mm512_and_si512(x[h], m4), u = _mm512_srli_epi32(x[h], 4);
                const __mmask16 k0 = _mm512_test_epi32_mask(qh[h], b0);
                const __mmask16 k1 = _mm512_test_epi32_mask(qh[h], b1);
                lo[h] = mul_sub(_mm512_set1_ps(dl[2 * j]),
                                i32f(_mm512_mask_or_epi32(l, k0, l, sixteen)),
                                _mm512_set1_ps(ml[2 * j]));
                hi[h] = mul_sub(_mm512_set1_ps(dl[2 * j + 1]),
                                i32f(_mm512_mask_or_epi32(u, k1, u, sixteen)),
                                _mm512_set1_ps(ml[2 * j + 1]));
            }
            emit32(dst, (size_t)(64 * j), lo[0], lo[1], out);
            emit32(dst, (size_t)(64 * j + 32), hi[0], hi[1], out);
        }
    }
}
ROWS_FN(q5_k, f16x2_finite(b, nb, 176, 0))

/* 32 signed byte values x at element index at: the first 16 times s0, the
 * next 16 times s1 ((d * scale) * q, as ggml). */
ALWAYS_INLINE void scaled32(uint8_t *dst, size_t at, __m256i x, float s0, float s1, const int out) {
    emit32(dst, at, _mm512_mul_ps(_mm512_set1_ps(s0), s8f(lo128(x))),
           _mm512_mul_ps(_mm512_set1_ps(s1), s8f(hi128(x))), out);
}

ALWAYS_INLINE void q6_k_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    for (size_t i = 0; i < nb; i++, b += 210, dst += out ? 512 : 1024) {
        prefetch_block(b, 210, out);
        float ds[16]; /* d * scale: ggml multiplies d by the scale first */
        scale16s(ds, h2f(b + 208), load16(b + 192));
        for (int n = 0; n < 2; n++) {
            __m256i q[4];
            q6k_values(b, n, q);
            const float *s = ds + 8 * n;
            uint8_t *y = dst + (size_t)(128 * n) * (out ? 2 : 4);
            for (int k = 0; k < 4; k++)
                scaled32(y, (size_t)(32 * k), q[k], s[2 * k], s[2 * k + 1], out);
        }
    }
}
ROWS_FN(q6_k, f16_finite(b, nb, 210, 208))

ALWAYS_INLINE void iq4_xs_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m128i book = load16((const uint8_t *)gguf_kvalues_iq4nl);
    for (size_t i = 0; i < nb; i++, b += 136, dst += out ? 512 : 1024) {
        prefetch_block(b, 136, out);
        const float d = h2f(b);
        const uint32_t sh = gguf_le16(b + 2);
        for (int ib = 0; ib < 8; ib++) {
            const int ls =
                ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (int)(((sh >> (2 * ib)) & 3) << 4);
            codebook32(dst, (size_t)(32 * ib), b + 8 + 16 * ib, book,
                       _mm512_set1_ps(d * (float)(ls - 32)), out);
        }
    }
}
ROWS_FN(iq4_xs, f16_finite(b, nb, 136, 0))

/* ---- ternary ------------------------------------------------------------ */

/* Store 16 + 16 digits t (16-bit lanes, 0..2) as (float)(t - 1) * d: F32
 * directly, BF16 by indexing the table with the digits as words. */
ALWAYS_INLINE void tq1_emit32(uint8_t *dst, size_t at, __m256i ta, __m256i tb, __m512 d,
                              __m512i table, const int out) {
    if (out == OUT_F32) {
        const __m512i one = _mm512_set1_epi32(1);
        emit32(dst, at, _mm512_mul_ps(i32f(_mm512_sub_epi32(_mm512_cvtepu16_epi32(ta), one)), d),
               _mm512_mul_ps(i32f(_mm512_sub_epi32(_mm512_cvtepu16_epi32(tb), one)), d), out);
        return;
    }
    const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(ta), tb, 1);
    _mm512_storeu_si512(dst + 2 * at, _mm512_permutexvar_epi16(w, table));
}

ALWAYS_INLINE void tq1_0_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    /* The 4 qh bytes repeated for digits 0..3: those outputs are n-major. */
    const __m256i qh_pow = _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27);
    for (size_t i = 0; i < nb; i++, b += 54, dst += out ? 512 : 1024) {
        const __m512 d = _mm512_set1_ps(h2f(b + 52));
        const __m512i t =
            out != OUT_F32 ? lut16(_mm512_mul_ps(ramp16(-1), d), out) : _mm512_setzero_si512();
        const __m256i x0 = _mm256_cvtepu8_epi16(load16(b)),
                      x1 = _mm256_cvtepu8_epi16(load16(b + 16));
        const __m256i x2 = _mm256_cvtepu8_epi16(load16(b + 32));
        const __m256i qh = _mm256_cvtepu8_epi16(_mm_set1_epi32((int)gguf_le32(b + 48)));
        __m256i p = _mm256_set1_epi16(1), t2[6];
        for (int n = 0; n < 5; n++) {
            tq1_emit32(dst, (size_t)(32 * n), tq1_digits(x0, p), tq1_digits(x1, p), d, t, out);
            t2[n] = tq1_digits(x2, p);
            p = _mm256_mullo_epi16(p, _mm256_set1_epi16(3));
        }
        t2[5] = tq1_digits(qh, qh_pow);
        for (int k = 0; k < 3; k++)
            tq1_emit32(dst, (size_t)(160 + 32 * k), t2[2 * k], t2[2 * k + 1], d, t, out);
    }
}
ROWS_FN(tq1_0, f16_finite(b, nb, 54, 52))

ALWAYS_INLINE void tq2_0_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m512i m3 = _mm512_set1_epi32(3), one = _mm512_set1_epi32(1);
    for (size_t i = 0; i < nb; i++, b += 66, dst += out ? 512 : 1024) {
        const __m512 d = _mm512_set1_ps(h2f(b + 64)); /* (c - 1) * d */
        const __m512i t =
            out != OUT_F32 ? lut16(_mm512_mul_ps(ramp16(-1), d), out) : _mm512_setzero_si512();
        for (int c = 0; c < 2; c++) {
            const __m256i q = load32(b + 32 * c);
            const __m512i x0 = u8x16(lo128(q)), x1 = u8x16(hi128(q));
            for (int l = 0; l < 4; l++) {
                const size_t at = (size_t)(128 * c + 32 * l);
                if (out != OUT_F32) {
                    lut_emit32(dst, at, t,
                               _mm256_and_si256(_mm256_srli_epi16(q, 2 * l), _mm256_set1_epi8(3)));
                    continue;
                }
                const __m512i c0 = _mm512_and_si512(_mm512_srli_epi32(x0, 2 * l), m3);
                const __m512i c1 = _mm512_and_si512(_mm512_srli_epi32(x1, 2 * l), m3);
                emit32(dst, at, _mm512_mul_ps(i32f(_mm512_sub_epi32(c0, one)), d),
                       _mm512_mul_ps(i32f(_mm512_sub_epi32(c1, one)), d), out);
            }
        }
    }
}
ROWS_FN(tq2_0, f16_finite(b, nb, 66, 64))

gguf_rows_fn gguf_avx512_kernel(uint32_t ggml_type) {
    switch (ggml_type) {
        GGUF_VEC_COMMON_TYPES(GGUF_VEC_CASE)
    case GGUF_TYPE_TQ1_0:
        return tq1_0;
    case GGUF_TYPE_TQ2_0:
        return tq2_0;
    default:
        return NULL;
    }
}
