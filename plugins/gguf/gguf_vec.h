/* Private to the vector dequantizers (gguf_dequant_avx2.c and
 * gguf_dequant_avx512.c, both built with at least -mavx2 -mf16c -mbmi2):
 * the store modes, the per-call wrapper, the scale scans and the AVX2-level
 * helpers both paths use. */
#ifndef AMN_GGUF_VEC_H
#define AMN_GGUF_VEC_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf_kernels.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* How a kernel stores: F32, or BF16 with or without the NaN check. A block
 * whose f16 scales are all finite cannot produce a NaN (every product and sum
 * of finite scales and small integers is finite or, for MXFP4, infinite), so
 * its BF16 rounding needs no NaN lane: the wrappers scan the scales first. */
enum { OUT_F32 = 0, OUT_BF16 = 1, OUT_BF16_NONAN = 2 };

/* Each kernel body is instantiated per store mode so the choice is made once
 * per call, outside the loops; `finite` is the scale scan of the blocks. */
#define ROWS_FN(name, finite)                                                                      \
    static void name(const uint8_t *b, size_t nb, void *dst, int bf16) {                           \
        if (!bf16)                                                                                 \
            name##_impl(b, nb, dst, OUT_F32);                                                      \
        else if (finite)                                                                           \
            name##_impl(b, nb, dst, OUT_BF16_NONAN);                                               \
        else                                                                                       \
            name##_impl(b, nb, dst, OUT_BF16);                                                     \
    }

/* The types with a kernel on both vector paths, as X(GGUF_TYPE_ suffix,
 * kernel): each path's table is a switch over this list (and, for AVX2,
 * the types only it has). */
#define GGUF_VEC_COMMON_TYPES(X)                                                                   \
    X(Q4_0, q4_0)                                                                                  \
    X(Q4_1, q4_1)                                                                                  \
    X(Q5_0, q5_0)                                                                                  \
    X(Q5_1, q5_1)                                                                                  \
    X(Q8_0, q8_0)                                                                                  \
    X(IQ4_NL, iq4_nl)                                                                              \
    X(MXFP4, mxfp4)                                                                                \
    X(Q2_K, q2_k)                                                                                  \
    X(Q3_K, q3_k)                                                                                  \
    X(Q4_K, q4_k)                                                                                  \
    X(Q5_K, q5_k)                                                                                  \
    X(Q6_K, q6_k)                                                                                  \
    X(IQ4_XS, iq4_xs)
#define GGUF_VEC_CASE(type, fn)                                                                    \
    case GGUF_TYPE_##type:                                                                         \
        return fn;

/* True when the f16 at byte `off` of each of nb blocks of `size` bytes is
 * finite (exponent field not all ones). The early exit keeps the compiler
 * from vectorizing the scan with word inserts: as scalar code it runs on the
 * integer pipes, which the kernels leave idle, instead of the vector ones. */
static inline bool f16_finite(const uint8_t *b, size_t nb, size_t size, size_t off) {
    for (size_t i = 0; i < nb; i++, b += size)
        if ((gguf_le16(b + off) & 0x7c00u) == 0x7c00u) return false;
    return true;
}

/* Same for the two f16 at off and off + 2 (d and dmin / m). */
static inline bool f16x2_finite(const uint8_t *b, size_t nb, size_t size, size_t off) {
    for (size_t i = 0; i < nb; i++, b += size) {
        const uint32_t w = gguf_le32(b + off);
        if ((w & 0x7c00u) == 0x7c00u || (w & 0x7c000000u) == 0x7c000000u) return false;
    }
    return true;
}

ALWAYS_INLINE float h2f(const uint8_t *p) {
    return _cvtsh_ss(gguf_le16(p));
}

/* Low 8 bytes of x, signed / unsigned, as 8 floats (exact). */
ALWAYS_INLINE __m256 i8lo(__m128i x) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(x));
}
ALWAYS_INLINE __m256 i8hi(__m128i x) {
    return i8lo(_mm_unpackhi_epi64(x, x));
}
ALWAYS_INLINE __m256 u8lo(__m128i x) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(x));
}
ALWAYS_INLINE __m256 u8hi(__m128i x) {
    return u8lo(_mm_unpackhi_epi64(x, x));
}

ALWAYS_INLINE __m128i load16(const uint8_t *p) {
    return _mm_loadu_si128((const __m128i *)p);
}
ALWAYS_INLINE __m256i load32(const uint8_t *p) {
    return _mm256_loadu_si256((const __m256i *)p);
}
/* Software prefetch of the input PF_AHEAD bytes ahead of block b (size
 * bytes, one hint per cache line), for the BF16 stores only. There the
 * kernels are compute-bound and the hardware prefetcher alone left them
 * waiting on the streamed input: measured 10-25 % faster per row on the
 * loaded test host, output in cache or not. Writing F32 (twice the bytes),
 * or with the fastest kernels (TQ1_0, TQ2_0: none here), the stores bound
 * the time and extra requests only slowed them. Prefetch never faults, so
 * the hints may point past the end of the blocks. */
#define PF_AHEAD 4096
ALWAYS_INLINE void prefetch_block(const uint8_t *b, size_t size, const int out) {
    if (out == OUT_F32) return;
    for (size_t k = 0; k < size; k += 64) _mm_prefetch((const char *)b + PF_AHEAD + k, _MM_HINT_T0);
}

ALWAYS_INLINE __m128i lo128(__m256i x) {
    return _mm256_castsi256_si128(x);
}
ALWAYS_INLINE __m128i hi128(__m256i x) {
    return _mm256_extracti128_si256(x, 1);
}

/* Byte k of the result is 0xFF when bit k of `bits` is set. */
ALWAYS_INLINE __m256i bits_to_bytes(uint32_t bits) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
}

/* Low nibbles of the 16 bytes at q in lane 0 (bytes 0-15), their high
 * nibbles in lane 1: the 32 codes of a 32-element block in output order. */
ALWAYS_INLINE __m256i nibbles_lo_hi(const uint8_t *q) {
    const __m256i v = _mm256_broadcastsi128_si256(load16(q));
    return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)),
                            _mm256_set1_epi8(15));
}

/* d * sc and dmin * mn for the 8 sub-blocks of a Q4_K / Q5_K super-block.
 * The 6-bit pairs are unpacked four at a time in 32-bit words (the bytes of
 * get_scale_min_k4), avoiding byte stores that a vector load would reread. */
ALWAYS_INLINE void k4_scales(const uint8_t *b, float dl[8], float ml[8]) {
    const uint32_t u0 = gguf_le32(b + 4), u1 = gguf_le32(b + 8), u2 = gguf_le32(b + 12);
    const uint32_t sc_lo = u0 & 0x3f3f3f3fu, mn_lo = u1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 6) & 0x03030303u) << 4;
    const uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 6) & 0x03030303u) << 4;
    const __m256 scf = u8lo(_mm_cvtsi64_si128((long long)((uint64_t)sc_hi << 32 | sc_lo)));
    const __m256 mnf = u8lo(_mm_cvtsi64_si128((long long)((uint64_t)mn_hi << 32 | mn_lo)));
    _mm256_storeu_ps(dl, _mm256_mul_ps(_mm256_set1_ps(h2f(b)), scf));
    _mm256_storeu_ps(ml, _mm256_mul_ps(_mm256_set1_ps(h2f(b + 2)), mnf));
}

/* The 128 six-bit values of half n of a Q6_K block, minus 32, as signed
 * bytes: q[k] holds outputs 32k .. 32k + 31 of that half (low nibbles of ql
 * plus two bits of qh each). */
ALWAYS_INLINE void q6k_values(const uint8_t *b, int n, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30),
                  m32 = _mm256_set1_epi8(32);
    const __m256i l0 = load32(b + 64 * n), l1 = load32(b + 64 * n + 32);
    const __m256i qh = load32(b + 128 + 32 * n);
    q[0] =
        _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
    q[1] =
        _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
    q[2] =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
    for (int k = 0; k < 4; k++) q[k] = _mm256_sub_epi8(q[k], m32);
}

/* Table codes of 32 Q3_K outputs (two sub-blocks of 16, bit plane j of the
 * 32 quant bytes q, hmask bit 4n + j of hm): v + 4 in 0..7 for the first 16,
 * v + 12 for the next 16, where v = ((q >> 2j) & 3) - (hmask bit clear ? 4 : 0). */
ALWAYS_INLINE __m256i q3k_codes(__m256i hm, __m256i q, int n, int j) {
    const __m256i bit = _mm256_set1_epi8((char)(1 << (4 * n + j)));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit);
    const __m256i c = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), _mm256_set1_epi8(3));
    const __m256i second = _mm256_set_m128i(_mm_set1_epi8(8), _mm_setzero_si128());
    return _mm256_or_si256(_mm256_or_si256(c, _mm256_and_si256(set, _mm256_set1_epi8(4))), second);
}

/* Base-3 digits of 16 bytes held in 16-bit lanes: ((x * p) & 255) * 3 >> 8,
 * in 0..2; p holds the power of 3 of each lane. */
ALWAYS_INLINE __m256i tq1_digits(__m256i x16, __m256i p) {
    const __m256i q = _mm256_and_si256(_mm256_mullo_epi16(x16, p), _mm256_set1_epi16(255));
    return _mm256_srli_epi16(_mm256_mullo_epi16(q, _mm256_set1_epi16(3)), 8);
}

/* The 16 six-bit Q3_K scales minus 32, as signed bytes (ggml's aux words). */
ALWAYS_INLINE __m128i q3k_scales(const uint8_t *p) {
    const uint32_t k1 = 0x03030303u, k2 = 0x0f0f0f0fu;
    const uint32_t a0 = gguf_le32(p), a1 = gguf_le32(p + 4), a2 = gguf_le32(p + 8);
    const __m128i s = _mm_setr_epi32((int)((a0 & k2) | ((a2 & k1) << 4)),
                                     (int)((a1 & k2) | (((a2 >> 2) & k1) << 4)),
                                     (int)(((a0 >> 4) & k2) | (((a2 >> 4) & k1) << 4)),
                                     (int)(((a1 >> 4) & k2) | (((a2 >> 6) & k1) << 4)));
    return _mm_sub_epi8(s, _mm_set1_epi8(32));
}

#endif
