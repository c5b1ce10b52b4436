/* AVX2 dequantizers: same arithmetic as gguf_dequant_scalar.c, eight lanes at
 * a time, with the F32 -> BF16 narrowing fused into the stores.
 *
 * Built with -mavx2 -mf16c -mbmi2 (no FMA: every a * b + c stays two rounded
 * operations) and only called after the run-time CPU check. Each kernel keeps
 * the scalar operation order per element; since IEEE operations are
 * deterministic per lane, the bytes equal the scalar path's, which the tests
 * check on random blocks. Loads never reach past the block they belong to. */
#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#include "amn/bf16_avx2.h"
#include "gguf_kernels.h"
#include "gguf_vec.h"
#include "gguf_tables.h"
#include "gguf_types.h"

/* ---- output: F32 or BF16 ------------------------------------------------ */

/* Round-to-nearest-even to BF16 in the low 16 bits of each lane, NaN quieted
 * unless the caller knows there is none (amn/bf16_avx2.h). */
ALWAYS_INLINE __m256i bf16_lanes(__m256 v, const int out) {
    return out == OUT_BF16_NONAN ? amn_bf16_lanes_finite_avx2(v) : amn_bf16_lanes_avx2(v);
}

/* Store 16 values (a then b) at element index i of dst. */
ALWAYS_INLINE void emit16(uint8_t *dst, size_t i, __m256 a, __m256 b, const int out) {
    if (out) {
        /* packus interleaves 128-bit lanes: a0-3 b0-3 a4-7 b4-7; 0xD8 reorders. */
        const __m256i p = _mm256_packus_epi32(bf16_lanes(a, out), bf16_lanes(b, out));
        _mm256_storeu_si256((__m256i *)(dst + 2 * i), _mm256_permute4x64_epi64(p, 0xD8));
    } else {
        _mm256_storeu_ps((float *)(dst + 4 * i), a);
        _mm256_storeu_ps((float *)(dst + 4 * i + 32), b);
    }
}

/* ---- stride-4 BF16 stores ---------------------------------------------- */

/* BF16 of 32 outputs given in "stride-4" order: lane j of f[k] is output
 * 4j + k, which is how the 32 bytes of a register split into dwords by
 * shifts, without crossing a 128-bit lane. Each value is rounded as
 * bf16_lanes but left in the high half of its dword; word blends pair
 * outputs 4j, 4j + 1 and 4j + 2, 4j + 3, and dword unpacks order them
 * (outputs 0-7 | 16-23 and 8-15 | 24-31), stored as four 16-byte halves:
 * no pack, no lane crossing (vpermq and vpmovsx from a register cost
 * twice a shuffle on Zen 3, and stores are not the bottleneck here). The
 * tie bit is found by compare rather than shift: shifts and shuffles share
 * two of the four vector pipes, adds and compares have all four. */
ALWAYS_INLINE __m256i bf16_high(__m256 v, const int out) {
    const __m256i u = _mm256_castps_si256(v), bit = _mm256_set1_epi32(0x10000);
    const __m256i odd = _mm256_cmpeq_epi32(_mm256_and_si256(u, bit), bit); /* -1: round up a tie */
    const __m256i r = _mm256_sub_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd);
    if (out == OUT_BF16_NONAN) return r;
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x400000)), nan);
}

ALWAYS_INLINE void emit32_s4(uint8_t *dst, size_t at, __m256 f0, __m256 f1, __m256 f2, __m256 f3,
                             const int out) {
    const __m256i w01 =
        _mm256_blend_epi16(_mm256_srli_epi32(bf16_high(f0, out), 16), bf16_high(f1, out), 0xAA);
    const __m256i w23 =
        _mm256_blend_epi16(_mm256_srli_epi32(bf16_high(f2, out), 16), bf16_high(f3, out), 0xAA);
    const __m256i lo = _mm256_unpacklo_epi32(w01, w23); /* outputs 0-7 | 16-23 */
    const __m256i hi = _mm256_unpackhi_epi32(w01, w23); /* outputs 8-15 | 24-31 */
    __m128i *y = (__m128i *)(dst + 2 * at);
    _mm_storeu_si128(y, lo128(lo));
    _mm_storeu_si128(y + 1, lo128(hi));
    _mm_storeu_si128(y + 2, hi128(lo));
    _mm_storeu_si128(y + 3, hi128(hi));
}

/* Byte k of each dword of x (k a constant): signed as 8 floats, unsigned
 * as 8 ints or floats (exact). Three shifts for the unsigned bytes against
 * seven for the signed ones. */
ALWAYS_INLINE __m256 s8_at(__m256i x, int k) {
    const __m256i v = k == 3 ? x : _mm256_slli_epi32(x, 24 - 8 * k);
    return _mm256_cvtepi32_ps(_mm256_srai_epi32(v, 24));
}
ALWAYS_INLINE __m256i u8i_at(__m256i x, int k) {
    const __m256i v = k == 0 ? x : _mm256_srli_epi32(x, 8 * k);
    return k == 3 ? v : _mm256_and_si256(v, _mm256_set1_epi32(255));
}
ALWAYS_INLINE __m256 u8_at(__m256i x, int k) {
    return _mm256_cvtepi32_ps(u8i_at(x, k));
}

/* Negate lane k where bit k of s is set (ggml's "* -1.f": sign flip). */
ALWAYS_INLINE __m256 apply_signs(__m256 v, uint32_t s) {
    const __m256i sh = _mm256_setr_epi32(31, 30, 29, 28, 27, 26, 25, 24);
    const __m256i m = _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32((int)s), sh),
                                       _mm256_set1_epi32(INT32_MIN));
    return _mm256_xor_ps(v, _mm256_castsi256_ps(m));
}

/* BF16 by table lookup. When 32 or more outputs share one scale and take at
 * most 16 distinct codes, computing and rounding the 16 possible values once
 * and gathering them with pshufb costs far less than rounding every output;
 * each table entry is computed exactly as the direct path computes that code,
 * so the bytes are the same. The table is split into low and high bytes,
 * each 16 bytes repeated in both 128-bit lanes. */
typedef struct lut16 {
    __m256i lo, hi;
} lut16;

/* t0: the values of codes 0..7, t1: codes 8..15. */
ALWAYS_INLINE lut16 lut16_make(__m256 t0, __m256 t1, const int out) {
    /* lane 0: codes 0-3 8-11, lane 1: codes 4-7 12-15, as 16-bit words */
    const __m256i w = _mm256_packus_epi32(bf16_lanes(t0, out), bf16_lanes(t1, out));
    const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0,
                                           2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    /* dwords: lo(0-3) lo(8-11) hi(0-3) hi(8-11) | lo(4-7) lo(12-15) hi(4-7) hi(12-15) */
    const __m256i s = _mm256_shuffle_epi8(w, split);
    return (lut16){_mm256_permutevar8x32_epi32(s, _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5)),
                   _mm256_permutevar8x32_epi32(s, _mm256_setr_epi32(2, 6, 3, 7, 2, 6, 3, 7))};
}

/* Same for 8 codes 0..7 (t0); codes 8..15 repeat them. */
ALWAYS_INLINE lut16 lut8_make(__m256 t0, const int out) {
    const __m256i h = bf16_lanes(t0, out);
    const __m256i w = _mm256_packus_epi32(h, h); /* lane 0: codes 0-3 twice, lane 1: 4-7 twice */
    const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0,
                                           2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i s = _mm256_shuffle_epi8(w, split);
    return (lut16){_mm256_permutevar8x32_epi32(s, _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4)),
                   _mm256_permutevar8x32_epi32(s, _mm256_setr_epi32(2, 6, 2, 6, 2, 6, 2, 6))};
}

/* x[k] and x[k + 1] of a float array as {x[k] x4, x[k+1] x4}. */
ALWAYS_INLINE __m256 pair_splat(const float *x) {
    const __m256 v = _mm256_castps128_ps256(_mm_castpd_ps(_mm_load_sd((const double *)x)));
    return _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}

/* Store the BF16 values of 32 codes (bytes 0..15: outputs at..at+15, bytes
 * 16..31: the next 16) at element index at. */
ALWAYS_INLINE void lut16_emit32(uint8_t *dst, size_t at, lut16 t, __m256i codes) {
    const __m256i lo = _mm256_shuffle_epi8(t.lo, codes), hi = _mm256_shuffle_epi8(t.hi, codes);
    const __m256i p0 = _mm256_unpacklo_epi8(lo, hi); /* outputs 0-7 | 16-23 */
    const __m256i p1 = _mm256_unpackhi_epi8(lo, hi); /* outputs 8-15 | 24-31 */
    _mm256_storeu_si256((__m256i *)(dst + 2 * at), _mm256_permute2x128_si256(p0, p1, 0x20));
    _mm256_storeu_si256((__m256i *)(dst + 2 * at + 32), _mm256_permute2x128_si256(p0, p1, 0x31));
}

/* BF16 by paired lookup. Two groups A and B of 32 outputs, each with its
 * own 16 values: lane 0 of every register serves A and lane 1 B, so neither
 * building the tables nor using them crosses a 128-bit lane (lut16 needs
 * four lane crossings per 32 outputs, which cost twice a shuffle on Zen 3).
 * Each entry is computed exactly as the direct path computes that code. */
typedef struct lutp {
    __m256i lo, hi; /* low and high bytes of the 16 BF16 values, per lane */
} lutp;

/* v[k] holds the values of codes 4k .. 4k+3: A's in lane 0, B's in lane 1. */
ALWAYS_INLINE lutp lutp_make(__m256 v0, __m256 v1, __m256 v2, __m256 v3, const int out) {
    /* words per lane: codes 0 4 1 5 2 6 3 7, and 8 12 9 13 10 14 11 15 */
    const __m256i w01 =
        _mm256_blend_epi16(_mm256_srli_epi32(bf16_high(v0, out), 16), bf16_high(v1, out), 0xAA);
    const __m256i w23 =
        _mm256_blend_epi16(_mm256_srli_epi32(bf16_high(v2, out), 16), bf16_high(v3, out), 0xAA);
    const __m256i sort = _mm256_setr_epi8(0, 4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15, 0,
                                          4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15);
    const __m256i x = _mm256_shuffle_epi8(w01, sort), y = _mm256_shuffle_epi8(w23, sort);
    return (lutp){_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y)};
}

/* 16 outputs of A at ya and 16 of B at yb (BF16), from codes 0..15: A's in
 * lane 0, B's in lane 1. */
ALWAYS_INLINE void lutp_emit(uint8_t *ya, uint8_t *yb, lutp t, __m256i codes) {
    const __m256i lo = _mm256_shuffle_epi8(t.lo, codes), hi = _mm256_shuffle_epi8(t.hi, codes);
    const __m256i p0 = _mm256_unpacklo_epi8(lo, hi), p1 = _mm256_unpackhi_epi8(lo, hi);
    _mm_storeu_si128((__m128i *)ya, lo128(p0));
    _mm_storeu_si128((__m128i *)ya + 1, lo128(p1));
    _mm_storeu_si128((__m128i *)yb, hi128(p0));
    _mm_storeu_si128((__m128i *)yb + 1, hi128(p1));
}

/* Codes 4k .. 4k+3 plus `base`, as floats, in both lanes. */
ALWAYS_INLINE __m256 codes4(int k, float base) {
    const float c = base + (float)(4 * k);
    return _mm256_setr_ps(c, c + 1, c + 2, c + 3, c, c + 1, c + 2, c + 3);
}

/* The f16 at pa in lane 0 and the one at pb in lane 1, as floats. */
ALWAYS_INLINE __m256 h2f_pair(const uint8_t *pa, const uint8_t *pb) {
    const __m128i w = _mm_cvtsi32_si128((int)(gguf_le16(pa) | (uint32_t)gguf_le16(pb) << 16));
    return _mm256_cvtph_ps(
        _mm_shuffle_epi8(w, _mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3)));
}

/* a in lane 0, b in lane 1. */
ALWAYS_INLINE __m256 pair_ps(float a, float b) {
    return _mm256_blend_ps(_mm256_set1_ps(a), _mm256_set1_ps(b), 0xF0);
}

/* Nibble codes of two 16-byte runs: qa's in lane 0 and qb's in lane 1; low
 * nibbles (lo) or high nibbles. */
ALWAYS_INLINE __m256i nibbles2(const uint8_t *qa, const uint8_t *qb, int high) {
    __m256i q = _mm256_loadu2_m128i((const __m128i *)qb, (const __m128i *)qa);
    if (high) q = _mm256_srli_epi16(q, 4);
    return _mm256_and_si256(q, _mm256_set1_epi8(15));
}

/* Pairs of 32-element blocks of `size` bytes with their 16 nibble bytes at
 * `qs`: A is block i, B block i + 1 (or a copy of A into scratch for an odd
 * last block). make(b, bb) returns the table of blocks b and bb. */
#define PAIRED_BLOCKS32(b, nb, dst, size, qs, make)                                                \
    do {                                                                                           \
        size_t i_ = 0;                                                                             \
        for (; i_ + 2 <= (nb); i_ += 2, (b) += 2 * (size), (dst) += 128) {                         \
            prefetch_block((b), 2 * (size), OUT_BF16);                                             \
            const lutp t_ = make((b), (b) + (size));                                               \
            lutp_emit((dst), (dst) + 64, t_, nibbles2((b) + (qs), (b) + (size) + (qs), 0));        \
            lutp_emit((dst) + 32, (dst) + 96, t_, nibbles2((b) + (qs), (b) + (size) + (qs), 1));   \
        }                                                                                          \
        if (i_ < (nb)) {                                                                           \
            uint8_t scratch_[64];                                                                  \
            const lutp t_ = make((b), (b));                                                        \
            lutp_emit((dst), scratch_, t_, nibbles2((b) + (qs), (b) + (qs), 0));                   \
            lutp_emit((dst) + 32, scratch_ + 32, t_, nibbles2((b) + (qs), (b) + (qs), 1));         \
        }                                                                                          \
    } while (0)

/* ---- legacy 32-element blocks ------------------------------------------- */

/* (float)(c - 8) * d for blocks a and b. */
ALWAYS_INLINE lutp q4_0_table(const uint8_t *a, const uint8_t *b, const int out) {
    const __m256 d = h2f_pair(a, b);
    return lutp_make(_mm256_mul_ps(codes4(0, -8), d), _mm256_mul_ps(codes4(1, -8), d),
                     _mm256_mul_ps(codes4(2, -8), d), _mm256_mul_ps(codes4(3, -8), d), out);
}

ALWAYS_INLINE void q4_0_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    if (out != OUT_F32) {
#define MAKE(x, y) q4_0_table(x, y, out)
        PAIRED_BLOCKS32(b, nb, dst, 18, 2, MAKE);
#undef MAKE
        return;
    }
    const __m128i m4 = _mm_set1_epi8(15), off = _mm_set1_epi8(8);
    for (size_t i = 0; i < nb; i++, b += 18, dst += 128) {
        prefetch_block(b, 18, out);
        const __m256 d = _mm256_set1_ps(h2f(b));
        const __m128i q = load16(b + 2);
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(q, m4), off);
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), m4), off);
        emit16(dst, 0, _mm256_mul_ps(i8lo(lo), d), _mm256_mul_ps(i8hi(lo), d), out);
        emit16(dst, 16, _mm256_mul_ps(i8lo(hi), d), _mm256_mul_ps(i8hi(hi), d), out);
    }
}
ROWS_FN(q4_0, f16_finite(b, nb, 18, 0))

/* (float)c * d + m for blocks a and b. */
ALWAYS_INLINE lutp q4_1_table(const uint8_t *a, const uint8_t *b, const int out) {
    const __m256 d = h2f_pair(a, b), m = h2f_pair(a + 2, b + 2);
    return lutp_make(_mm256_add_ps(_mm256_mul_ps(codes4(0, 0), d), m),
                     _mm256_add_ps(_mm256_mul_ps(codes4(1, 0), d), m),
                     _mm256_add_ps(_mm256_mul_ps(codes4(2, 0), d), m),
                     _mm256_add_ps(_mm256_mul_ps(codes4(3, 0), d), m), out);
}

ALWAYS_INLINE void q4_1_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    if (out != OUT_F32) {
#define MAKE(x, y) q4_1_table(x, y, out)
        PAIRED_BLOCKS32(b, nb, dst, 20, 4, MAKE);
#undef MAKE
        return;
    }
    const __m128i m4 = _mm_set1_epi8(15);
    for (size_t i = 0; i < nb; i++, b += 20, dst += 128) {
        prefetch_block(b, 20, out);
        const __m256 d = _mm256_set1_ps(h2f(b)), m = _mm256_set1_ps(h2f(b + 2));
        const __m128i q = load16(b + 4);
        const __m128i lo = _mm_and_si128(q, m4), hi = _mm_and_si128(_mm_srli_epi16(q, 4), m4);
        emit16(dst, 0, _mm256_add_ps(_mm256_mul_ps(u8lo(lo), d), m),
               _mm256_add_ps(_mm256_mul_ps(u8hi(lo), d), m), out);
        emit16(dst, 16, _mm256_add_ps(_mm256_mul_ps(u8lo(hi), d), m),
               _mm256_add_ps(_mm256_mul_ps(u8hi(hi), d), m), out);
    }
}
ROWS_FN(q4_1, f16x2_finite(b, nb, 20, 0))

/* The 32 five-bit values of a Q5 block, output order: nibbles of qs (low
 * nibbles first) with bit k of qh as bit 4 of value k. The nibbles come
 * from one broadcast load shifted by 0 | 4 per lane: no lane crossing. */
ALWAYS_INLINE __m256i q5_values(const uint8_t *qs, const uint8_t *qh) {
    const __m256i q = _mm256_broadcastsi128_si256(load16(qs));
    const __m256i nib = _mm256_and_si256(_mm256_srlv_epi64(q, _mm256_setr_epi64x(0, 0, 4, 4)),
                                         _mm256_set1_epi8(15));
    return _mm256_or_si256(nib,
                           _mm256_and_si256(bits_to_bytes(gguf_le32(qh)), _mm256_set1_epi8(16)));
}

ALWAYS_INLINE void q5_0_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    for (size_t i = 0; i < nb; i++, b += 22, dst += out ? 64 : 128) {
        prefetch_block(b, 22, out);
        const __m256 d = _mm256_set1_ps(h2f(b));
        if (out != OUT_F32) { /* (float)(x - 16) * d */
            const __m256i x = q5_values(b + 6, b + 2), o = _mm256_set1_epi32(16);
#define V(k) _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(u8i_at(x, k), o)), d)
            emit32_s4(dst, 0, V(0), V(1), V(2), V(3), out);
#undef V
            continue;
        }
        const __m256i x = _mm256_sub_epi8(q5_values(b + 6, b + 2), _mm256_set1_epi8(16));
        const __m128i lo = lo128(x), hi = hi128(x);
        emit16(dst, 0, _mm256_mul_ps(i8lo(lo), d), _mm256_mul_ps(i8hi(lo), d), out);
        emit16(dst, 16, _mm256_mul_ps(i8lo(hi), d), _mm256_mul_ps(i8hi(hi), d), out);
    }
}
ROWS_FN(q5_0, f16_finite(b, nb, 22, 0))

ALWAYS_INLINE void q5_1_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    for (size_t i = 0; i < nb; i++, b += 24, dst += out ? 64 : 128) {
        prefetch_block(b, 24, out);
        const __m256 d = _mm256_set1_ps(h2f(b)), m = _mm256_set1_ps(h2f(b + 2));
        if (out != OUT_F32) { /* (float)x * d + m */
            const __m256i x = q5_values(b + 8, b + 4);
            emit32_s4(dst, 0, _mm256_add_ps(_mm256_mul_ps(u8_at(x, 0), d), m),
                      _mm256_add_ps(_mm256_mul_ps(u8_at(x, 1), d), m),
                      _mm256_add_ps(_mm256_mul_ps(u8_at(x, 2), d), m),
                      _mm256_add_ps(_mm256_mul_ps(u8_at(x, 3), d), m), out);
            continue;
        }
        const __m256i x = q5_values(b + 8, b + 4);
        const __m128i lo = lo128(x), hi = hi128(x);
        emit16(dst, 0, _mm256_add_ps(_mm256_mul_ps(u8lo(lo), d), m),
               _mm256_add_ps(_mm256_mul_ps(u8hi(lo), d), m), out);
        emit16(dst, 16, _mm256_add_ps(_mm256_mul_ps(u8lo(hi), d), m),
               _mm256_add_ps(_mm256_mul_ps(u8hi(hi), d), m), out);
    }
}
ROWS_FN(q5_1, f16x2_finite(b, nb, 24, 0))

ALWAYS_INLINE void q8_0_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    for (size_t i = 0; i < nb; i++, b += 34, dst += out ? 64 : 128) {
        prefetch_block(b, 34, out);
        const __m256 d = _mm256_set1_ps(h2f(b));
        if (out != OUT_F32) { /* (float)q * d */
            const __m256i x = load32(b + 2);
            emit32_s4(dst, 0, _mm256_mul_ps(s8_at(x, 0), d), _mm256_mul_ps(s8_at(x, 1), d),
                      _mm256_mul_ps(s8_at(x, 2), d), _mm256_mul_ps(s8_at(x, 3), d), out);
            continue;
        }
        const __m128i lo = load16(b + 2), hi = load16(b + 18);
        emit16(dst, 0, _mm256_mul_ps(i8lo(lo), d), _mm256_mul_ps(i8hi(lo), d), out);
        emit16(dst, 16, _mm256_mul_ps(i8lo(hi), d), _mm256_mul_ps(i8hi(hi), d), out);
    }
}
ROWS_FN(q8_0, f16_finite(b, nb, 34, 0))

/* IQ4_NL (d * KV[q]) and MXFP4 (KM[q] * d): a 16-entry codebook by pshufb.
 * F32 only: BF16 goes through the paired tables. */
ALWAYS_INLINE void codebook32(const uint8_t *qs, __m128i book, __m256 d, uint8_t *dst) {
    const __m128i m4 = _mm_set1_epi8(15);
    const __m128i q = load16(qs);
    const __m128i lo = _mm_shuffle_epi8(book, _mm_and_si128(q, m4));
    const __m128i hi = _mm_shuffle_epi8(book, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
    emit16(dst, 0, _mm256_mul_ps(d, i8lo(lo)), _mm256_mul_ps(d, i8hi(lo)), OUT_F32);
    emit16(dst, 16, _mm256_mul_ps(d, i8lo(hi)), _mm256_mul_ps(d, i8hi(hi)), OUT_F32);
}

/* The 16 codebook values as floats, codes 4k .. 4k+3 in both lanes of bk[k]. */
ALWAYS_INLINE void book4(const int8_t *book, __m256 bk[4]) {
    for (int k = 0; k < 4; k++) {
        const __m128 v = _mm_setr_ps((float)book[4 * k], (float)book[4 * k + 1],
                                     (float)book[4 * k + 2], (float)book[4 * k + 3]);
        bk[k] = _mm256_set_m128(v, v);
    }
}

/* d * (float)book[c] (the product commutes exactly), d per lane. */
ALWAYS_INLINE lutp book_table(const __m256 bk[4], __m256 d, const int out) {
    return lutp_make(_mm256_mul_ps(d, bk[0]), _mm256_mul_ps(d, bk[1]), _mm256_mul_ps(d, bk[2]),
                     _mm256_mul_ps(d, bk[3]), out);
}

ALWAYS_INLINE void iq4_nl_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    if (out != OUT_F32) {
        __m256 bk[4];
        book4(gguf_kvalues_iq4nl, bk);
#define MAKE(x, y) book_table(bk, h2f_pair(x, y), out)
        PAIRED_BLOCKS32(b, nb, dst, 18, 2, MAKE);
#undef MAKE
        return;
    }
    const __m128i book = load16((const uint8_t *)gguf_kvalues_iq4nl);
    for (size_t i = 0; i < nb; i++, b += 18, dst += 128) {
        prefetch_block(b, 18, out);
        codebook32(b + 2, book, _mm256_set1_ps(h2f(b)), dst);
    }
}
ROWS_FN(iq4_nl, f16_finite(b, nb, 18, 0))

ALWAYS_INLINE void mxfp4_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    if (out != OUT_F32) {
        __m256 bk[4];
        book4(gguf_kvalues_mxfp4, bk);
#define MAKE(x, y) book_table(bk, pair_ps(gguf_e8m0_half((x)[0]), gguf_e8m0_half((y)[0])), out)
        PAIRED_BLOCKS32(b, nb, dst, 17, 1, MAKE);
#undef MAKE
        return;
    }
    const __m128i book = load16((const uint8_t *)gguf_kvalues_mxfp4);
    for (size_t i = 0; i < nb; i++, b += 17, dst += 128) {
        prefetch_block(b, 17, out);
        codebook32(b + 1, book, _mm256_set1_ps(gguf_e8m0_half(b[0])), dst);
    }
}
ROWS_FN(mxfp4, true)

/* ---- k-quants ----------------------------------------------------------- */

/* out[i] = d * (float)s[i] for 16 signed bytes s: the per-sub-block scales. */
ALWAYS_INLINE void scale16(float out[16], float d, __m128i s) {
    const __m256 dv = _mm256_set1_ps(d);
    _mm256_storeu_ps(out, _mm256_mul_ps(dv, i8lo(s)));
    _mm256_storeu_ps(out + 8, _mm256_mul_ps(dv, i8hi(s)));
}

ALWAYS_INLINE void q2_k_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m128i m3 = _mm_set1_epi8(3), m4 = _mm_set1_epi8(15);
    for (size_t i = 0; i < nb; i++, b += 84, dst += out ? 512 : 1024) {
        prefetch_block(b, 84, out);
        float dl[16], ml[16];
        const __m128i sc = load16(b);
        scale16(dl, h2f(b + 80), _mm_and_si128(sc, m4));
        scale16(ml, h2f(b + 82), _mm_and_si128(_mm_srli_epi16(sc, 4), m4));
        if (out != OUT_F32) {
            /* Two sub-blocks of 16 per table: codes 0..3 and 4..7. */
            const __m256i second = _mm256_set_m128i(_mm_set1_epi8(4), _mm_setzero_si128());
            const __m256 codes = _mm256_setr_ps(0, 1, 2, 3, 0, 1, 2, 3);
            for (int n = 0; n < 2; n++) {
                const __m256i q = load32(b + 16 + 32 * n);
                for (int j = 0; j < 4; j++) {
                    const int is = 8 * n + 2 * j;
                    const lut16 t =
                        lut8_make(_mm256_sub_ps(_mm256_mul_ps(pair_splat(dl + is), codes),
                                                pair_splat(ml + is)),
                                  out);
                    const __m256i c =
                        _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), _mm256_set1_epi8(3));
                    lut16_emit32(dst, (size_t)(128 * n + 32 * j), t, _mm256_or_si256(c, second));
                }
            }
            continue;
        }
        for (int n = 0; n < 2; n++) {
            const __m128i q[2] = {load16(b + 16 + 32 * n), load16(b + 32 + 32 * n)};
            for (int j = 0; j < 4; j++)
                for (int h = 0; h < 2; h++) {
                    const int is = 8 * n + 2 * j + h;
                    const __m256 d = _mm256_set1_ps(dl[is]), m = _mm256_set1_ps(ml[is]);
                    const __m128i v = _mm_and_si128(_mm_srli_epi16(q[h], 2 * j), m3);
                    emit16(dst, (size_t)(128 * n + 32 * j + 16 * h),
                           _mm256_sub_ps(_mm256_mul_ps(d, u8lo(v)), m),
                           _mm256_sub_ps(_mm256_mul_ps(d, u8hi(v)), m), out);
                }
        }
    }
}
ROWS_FN(q2_k, f16x2_finite(b, nb, 84, 80))

ALWAYS_INLINE void q3_k_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m128i m3 = _mm_set1_epi8(3), four = _mm_set1_epi8(4);
    for (size_t i = 0; i < nb; i++, b += 110, dst += out ? 512 : 1024) {
        prefetch_block(b, 110, out);
        float dl[16];
        scale16(dl, h2f(b + 108), q3k_scales(b + 96));
        if (out != OUT_F32) {
            /* Two sub-blocks of 16 per table: v + 4 in 0..7, and + 8. */
            const __m256 codes = _mm256_setr_ps(-4, -3, -2, -1, 0, 1, 2, 3);
            const __m256i hm = load32(b);
            for (int n = 0; n < 2; n++) {
                const __m256i q = load32(b + 32 + 32 * n);
                for (int j = 0; j < 4; j++) {
                    const int is = 8 * n + 2 * j;
                    const lut16 t =
                        lut16_make(_mm256_mul_ps(_mm256_set1_ps(dl[is]), codes),
                                   _mm256_mul_ps(_mm256_set1_ps(dl[is + 1]), codes), out);
                    lut16_emit32(dst, (size_t)(128 * n + 32 * j), t, q3k_codes(hm, q, n, j));
                }
            }
            continue;
        }
        const __m128i hm[2] = {load16(b), load16(b + 16)};
        for (int n = 0; n < 2; n++) {
            const __m128i q[2] = {load16(b + 32 + 32 * n), load16(b + 48 + 32 * n)};
            for (int j = 0; j < 4; j++) {
                const __m128i bit = _mm_set1_epi8((char)(1 << (4 * n + j)));
                for (int h = 0; h < 2; h++) {
                    const __m256 d = _mm256_set1_ps(dl[8 * n + 2 * j + h]);
                    /* (q >> 2j) & 3, minus 4 where the hmask bit is clear */
                    const __m128i set = _mm_cmpeq_epi8(_mm_and_si128(hm[h], bit), bit);
                    const __m128i v = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q[h], 2 * j), m3),
                                                   _mm_andnot_si128(set, four));
                    emit16(dst, (size_t)(128 * n + 32 * j + 16 * h), _mm256_mul_ps(d, i8lo(v)),
                           _mm256_mul_ps(d, i8hi(v)), out);
                }
            }
        }
    }
}
ROWS_FN(q3_k, f16_finite(b, nb, 110, 108))

/* 32 unsigned byte values x: y = d * x - m, stored at element index at. */
ALWAYS_INLINE void affine32(uint8_t *dst, size_t at, __m256i x, float dl, float ml, const int out) {
    const __m256 d = _mm256_set1_ps(dl), m = _mm256_set1_ps(ml);
    const __m128i lo = lo128(x), hi = hi128(x);
    emit16(dst, at, _mm256_sub_ps(_mm256_mul_ps(d, u8lo(lo)), m),
           _mm256_sub_ps(_mm256_mul_ps(d, u8hi(lo)), m), out);
    emit16(dst, at + 16, _mm256_sub_ps(_mm256_mul_ps(d, u8lo(hi)), m),
           _mm256_sub_ps(_mm256_mul_ps(d, u8hi(hi)), m), out);
}

ALWAYS_INLINE void q4_k_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m256i m4 = _mm256_set1_epi8(15);
    for (size_t i = 0; i < nb; i++, b += 144, dst += out ? 512 : 1024) {
        prefetch_block(b, 144, out);
        float dl[8], ml[8];
        k4_scales(b, dl, ml);
        if (out != OUT_F32) {
            /* Sub-block 2j (low nibbles, lane 0) and 2j + 1 (high nibbles, lane 1)
             * of the same 32 bytes: dl * (float)c - ml. */
            for (int j = 0; j < 4; j++) {
                const __m256 d = pair_ps(dl[2 * j], dl[2 * j + 1]);
                const __m256 m = pair_ps(ml[2 * j], ml[2 * j + 1]);
                const lutp t = lutp_make(_mm256_sub_ps(_mm256_mul_ps(d, codes4(0, 0)), m),
                                         _mm256_sub_ps(_mm256_mul_ps(d, codes4(1, 0)), m),
                                         _mm256_sub_ps(_mm256_mul_ps(d, codes4(2, 0)), m),
                                         _mm256_sub_ps(_mm256_mul_ps(d, codes4(3, 0)), m), out);
                const uint8_t *q = b + 16 + 32 * j;
                uint8_t *y = dst + 128 * j;
                lutp_emit(y, y + 64, t, nibbles_lo_hi(q));
                lutp_emit(y + 32, y + 96, t, nibbles_lo_hi(q + 16));
            }
            continue;
        }
        for (int j = 0; j < 4; j++) {
            const __m256i q = load32(b + 16 + 32 * j);
            affine32(dst, (size_t)(64 * j), _mm256_and_si256(q, m4), dl[2 * j], ml[2 * j], out);
            affine32(dst, (size_t)(64 * j + 32), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                     dl[2 * j + 1], ml[2 * j + 1], out);
        }
    }
}
ROWS_FN(q4_k, f16x2_finite(b, nb, 144, 0))

/* Bit (4 - sh) of each byte of x moved to bit 4 and isolated (sh a constant
 * in -3..4 after unrolling): qh bit planes as the 16 added to a Q5_K value. */
ALWAYS_INLINE __m256i bit_to_16(__m256i x, int sh) {
    const __m256i v = sh > 0 ? _mm256_slli_epi16(x, sh) : sh < 0 ? _mm256_srli_epi16(x, -sh) : x;
    return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

/* dl * (float)x - ml for 32 byte values x, as BF16 through emit32_s4. */
ALWAYS_INLINE void affine32_s4(uint8_t *dst, size_t at, __m256i x, float dl, float ml,
                               const int out) {
    const __m256 d = _mm256_set1_ps(dl), m = _mm256_set1_ps(ml);
    emit32_s4(dst, at, _mm256_sub_ps(_mm256_mul_ps(d, u8_at(x, 0)), m),
              _mm256_sub_ps(_mm256_mul_ps(d, u8_at(x, 1)), m),
              _mm256_sub_ps(_mm256_mul_ps(d, u8_at(x, 2)), m),
              _mm256_sub_ps(_mm256_mul_ps(d, u8_at(x, 3)), m), out);
}

ALWAYS_INLINE void q5_k_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m256i m4 = _mm256_set1_epi8(15), sixteen = _mm256_set1_epi8(16);
    for (size_t i = 0; i < nb; i++, b += 176, dst += out ? 512 : 1024) {
        prefetch_block(b, 176, out);
        float dl[8], ml[8];
        k4_scales(b, dl, ml);
        if (out != OUT_F32) {
            const __m256i qh = load32(b + 16);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                const __m256i q = load32(b + 48 + 32 * j);
                affine32_s4(dst, (size_t)(64 * j),
                            _mm256_or_si256(_mm256_and_si256(q, m4), bit_to_16(qh, 4 - 2 * j)),
                            dl[2 * j], ml[2 * j], out);
                affine32_s4(dst, (size_t)(64 * j + 32),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                            bit_to_16(qh, 3 - 2 * j)),
                            dl[2 * j + 1], ml[2 * j + 1], out);
            }
            continue;
        }
        const __m256i qh = load32(b + 16);
        for (int j = 0; j < 4; j++) {
            const __m256i q = load32(b + 48 + 32 * j);
            const __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * j)));
            const __m256i b1 = _mm256_set1_epi8((char)(2 << (2 * j)));
            const __m256i h0 =
                _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), sixteen);
            const __m256i h1 =
                _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), sixteen);
            affine32(dst, (size_t)(64 * j), _mm256_or_si256(_mm256_and_si256(q, m4), h0), dl[2 * j],
                     ml[2 * j], out);
            affine32(dst, (size_t)(64 * j + 32),
                     _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1),
                     dl[2 * j + 1], ml[2 * j + 1], out);
        }
    }
}
ROWS_FN(q5_k, f16x2_finite(b, nb, 176, 0))

/* 32 signed values x at element index at: first 16 scaled by s0, next 16 by s1. */
ALWAYS_INLINE void scaled32(uint8_t *dst, size_t at, __m256i x, float s0, float s1, const int out) {
    const __m256 a = _mm256_set1_ps(s0), c = _mm256_set1_ps(s1);
    const __m128i lo = lo128(x), hi = hi128(x);
    emit16(dst, at, _mm256_mul_ps(a, i8lo(lo)), _mm256_mul_ps(a, i8hi(lo)), out);
    emit16(dst, at + 16, _mm256_mul_ps(c, i8lo(hi)), _mm256_mul_ps(c, i8hi(hi)), out);
}

/* Same as BF16 through emit32_s4: outputs 0-15 sit in lane 0, 16-31 in
 * lane 1 of every stride-4 register. */
ALWAYS_INLINE void scaled32_s4(uint8_t *dst, size_t at, __m256i x, float s0, float s1,
                               const int out) {
    const __m256 s = _mm256_blend_ps(_mm256_set1_ps(s0), _mm256_set1_ps(s1), 0xF0);
    emit32_s4(dst, at, _mm256_mul_ps(s, s8_at(x, 0)), _mm256_mul_ps(s, s8_at(x, 1)),
              _mm256_mul_ps(s, s8_at(x, 2)), _mm256_mul_ps(s, s8_at(x, 3)), out);
}

ALWAYS_INLINE void q6_k_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    for (size_t i = 0; i < nb; i++, b += 210, dst += out ? 512 : 1024) {
        prefetch_block(b, 210, out);
        float ds[16]; /* (d * scale): ggml multiplies d by the scale first */
        scale16(ds, h2f(b + 208), load16(b + 192));
        for (int n = 0; n < 2; n++) {
            __m256i q[4];
            q6k_values(b, n, q);
            const float *s = ds + 8 * n;
            uint8_t *y = dst + (size_t)(128 * n) * (out ? 2 : 4);
            for (int k = 0; k < 4; k++) {
                if (out != OUT_F32)
                    scaled32_s4(y, (size_t)(32 * k), q[k], s[2 * k], s[2 * k + 1], out);
                else
                    scaled32(y, (size_t)(32 * k), q[k], s[2 * k], s[2 * k + 1], out);
            }
        }
    }
}
ROWS_FN(q6_k, f16_finite(b, nb, 210, 208))

ALWAYS_INLINE void iq4_xs_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m128i book = load16((const uint8_t *)gguf_kvalues_iq4nl);
    __m256 bk[4];
    book4(gguf_kvalues_iq4nl, bk);
    for (size_t i = 0; i < nb; i++, b += 136, dst += out ? 512 : 1024) {
        prefetch_block(b, 136, out);
        const float d = h2f(b);
        const uint32_t sh = gguf_le16(b + 2);
        float dl[8];
        for (int ib = 0; ib < 8; ib++) {
            const int ls =
                ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (int)(((sh >> (2 * ib)) & 3) << 4);
            dl[ib] = d * (float)(ls - 32);
        }
        if (out == OUT_F32) {
            for (int ib = 0; ib < 8; ib++)
                codebook32(b + 8 + 16 * ib, book, _mm256_set1_ps(dl[ib]), dst + 128 * ib);
            continue;
        }
        /* Sub-blocks 2p (lane 0) and 2p + 1 (lane 1): their 16 + 16 bytes are adjacent. */
        for (int p = 0; p < 4; p++) {
            const lutp t = book_table(bk, pair_ps(dl[2 * p], dl[2 * p + 1]), out);
            const __m256i q = load32(b + 8 + 32 * p), m4 = _mm256_set1_epi8(15);
            uint8_t *y = dst + 128 * p;
            lutp_emit(y, y + 64, t, _mm256_and_si256(q, m4));
            lutp_emit(y + 32, y + 96, t, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
        }
    }
}
ROWS_FN(iq4_xs, f16_finite(b, nb, 136, 0))

/* ---- i-quants ----------------------------------------------------------- */

/* The IQ2 / IQ3 kernels first gather, per 32 outputs, the four 8-byte grid
 * entries (gv: unsigned magnitudes in output order), the 32 sign bits (bit k
 * negates output k) and the scale of each half, in registers; then store.
 *
 * F32: y = +/-(db * g), the sign flipped after the product as ggml does. */
ALWAYS_INLINE void iq_grid_f32(uint8_t *dst, size_t at, __m256i gv, uint32_t s32, float db0,
                               float db1) {
    const __m256 d0 = _mm256_set1_ps(db0), d1 = _mm256_set1_ps(db1);
    const __m128i lo = lo128(gv), hi = hi128(gv);
    emit16(dst, at, apply_signs(_mm256_mul_ps(d0, u8lo(lo)), s32),
           apply_signs(_mm256_mul_ps(d0, u8hi(lo)), s32 >> 8), OUT_F32);
    emit16(dst, at + 16, apply_signs(_mm256_mul_ps(d1, u8lo(hi)), s32 >> 16),
           apply_signs(_mm256_mul_ps(d1, u8hi(hi)), s32 >> 24), OUT_F32);
}

/* BF16 by lookup: `codes` gives each output's magnitude code 0..7, whose
 * value (db * magnitude) is in `pos`; codes 8..15 hold the negated values. */
ALWAYS_INLINE void iq_grid_bf16(uint8_t *dst, size_t at, __m256i codes, uint32_t s32, __m256 pos,
                                const int out) {
    const lut16 t = lut16_make(pos, _mm256_xor_ps(pos, _mm256_set1_ps(-0.0f)), out);
    const __m256i neg = _mm256_and_si256(bits_to_bytes(s32), _mm256_set1_epi8(8));
    lut16_emit32(dst, at, t, _mm256_or_si256(codes, neg));
}

ALWAYS_INLINE __m256i grid4(uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3) {
    return _mm256_setr_epi64x((long long)g0, (long long)g1, (long long)g2, (long long)g3);
}

/* Four sign bytes as 32 sign bits. */
ALWAYS_INLINE uint32_t signs4(uint8_t s0, uint8_t s1, uint8_t s2, uint8_t s3) {
    return (uint32_t)s0 | (uint32_t)s1 << 8 | (uint32_t)s2 << 16 | (uint32_t)s3 << 24;
}

/* IQ2 grids hold 8, 25 and 43 only: their low nibbles 8, 9, 11 select codes
 * 0, 1, 2 for outputs 0..15 (scale db0) and 3, 4, 5 for 16..31 (db1). */
ALWAYS_INLINE void iq2_emit32(uint8_t *dst, size_t at, __m256i gv, uint32_t s32, float db0,
                              float db1, const int out) {
    if (out == OUT_F32) {
        iq_grid_f32(dst, at, gv, s32, db0, db1);
        return;
    }
    const __m256i map = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 3, 3, 3, 3,
                                         3, 3, 3, 3, 3, 4, 3, 5, 3, 3, 3, 3);
    const __m256 pos = _mm256_mul_ps(_mm256_setr_ps(db0, db0, db0, db1, db1, db1, 0, 0),
                                     _mm256_setr_ps(8, 25, 43, 8, 25, 43, 0, 0));
    iq_grid_bf16(dst, at, _mm256_shuffle_epi8(map, gv), s32, pos, out);
}

ALWAYS_INLINE void iq2_xxs_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const uint64_t *grid = gguf_iq2xxs_grid;
    const uint8_t *ks = gguf_ksigns_iq2xs;
    for (size_t i = 0; i < nb; i++, b += 66, dst += out ? 512 : 1024) {
        prefetch_block(b, 66, out);
        const float d = h2f(b);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = b + 2 + 8 * ib;
            const uint32_t a = gguf_le32(q + 4);
            const float db = d * (0.5f + (float)(a >> 28)) * 0.25f;
            iq2_emit32(
                dst, (size_t)(32 * ib), grid4(grid[q[0]], grid[q[1]], grid[q[2]], grid[q[3]]),
                signs4(ks[a & 127], ks[(a >> 7) & 127], ks[(a >> 14) & 127], ks[(a >> 21) & 127]),
                db, db, out);
        }
    }
}
ROWS_FN(iq2_xxs, f16_finite(b, nb, 66, 0))

ALWAYS_INLINE void iq2_xs_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const uint64_t *grid = gguf_iq2xs_grid;
    const uint8_t *ks = gguf_ksigns_iq2xs;
    for (size_t i = 0; i < nb; i++, b += 74, dst += out ? 512 : 1024) {
        prefetch_block(b, 74, out);
        const float d = h2f(b);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t sc = b[66 + ib];
            const uint8_t *w = b + 2 + 8 * ib;
            const uint16_t w0 = gguf_le16(w), w1 = gguf_le16(w + 2), w2 = gguf_le16(w + 4),
                           w3 = gguf_le16(w + 6);
            iq2_emit32(dst, (size_t)(32 * ib),
                       grid4(grid[w0 & 511], grid[w1 & 511], grid[w2 & 511], grid[w3 & 511]),
                       signs4(ks[w0 >> 9], ks[w1 >> 9], ks[w2 >> 9], ks[w3 >> 9]),
                       d * (0.5f + (float)(sc & 15)) * 0.25f, d * (0.5f + (float)(sc >> 4)) * 0.25f,
                       out);
        }
    }
}
ROWS_FN(iq2_xs, f16_finite(b, nb, 74, 0))

ALWAYS_INLINE void iq2_s_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const uint64_t *grid = gguf_iq2s_grid;
    for (size_t i = 0; i < nb; i++, b += 82, dst += out ? 512 : 1024) {
        prefetch_block(b, 82, out);
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
        for (int ib = 0; ib < 8; ib++, qs += 4) {
            const unsigned h = qh[ib];
            iq2_emit32(dst, (size_t)(32 * ib),
                       grid4(grid[qs[0] | ((h << 8) & 0x300u)], grid[qs[1] | ((h << 6) & 0x300u)],
                             grid[qs[2] | ((h << 4) & 0x300u)], grid[qs[3] | ((h << 2) & 0x300u)]),
                       gguf_le32(signs + 4 * ib), d * (0.5f + (float)(scales[ib] & 15)) * 0.25f,
                       d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f, out);
        }
    }
}
ROWS_FN(iq2_s, f16_finite(b, nb, 82, 0))

/* IQ3 grids: 8 magnitudes `mags`, code = (byte >> shift) & 7. */
ALWAYS_INLINE void iq3_emit32(uint8_t *dst, size_t at, __m256i gv, uint32_t s32, float db,
                              __m256 mags, int shift, const int out) {
    if (out == OUT_F32) {
        iq_grid_f32(dst, at, gv, s32, db, db);
        return;
    }
    const __m256i codes = _mm256_and_si256(_mm256_srli_epi16(gv, shift), _mm256_set1_epi8(7));
    iq_grid_bf16(dst, at, codes, s32, _mm256_mul_ps(_mm256_set1_ps(db), mags), out);
}

/* Two 4-byte grid entries as one 8-byte group. */
ALWAYS_INLINE uint64_t pair32(uint32_t lo, uint32_t hi) {
    return (uint64_t)hi << 32 | lo;
}

ALWAYS_INLINE void iq3_xxs_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m256 mags = _mm256_setr_ps(4, 12, 20, 28, 36, 44, 52, 62); /* byte >> 3 */
    const uint32_t *grid = gguf_iq3xxs_grid;
    const uint8_t *ks = gguf_ksigns_iq2xs;
    for (size_t i = 0; i < nb; i++, b += 98, dst += out ? 512 : 1024) {
        prefetch_block(b, 98, out);
        const float d = h2f(b);
        const uint8_t *q = b + 2;
        for (int ib = 0; ib < 8; ib++, q += 8) {
            const uint32_t a = gguf_le32(b + 66 + 4 * ib);
            iq3_emit32(
                dst, (size_t)(32 * ib),
                grid4(pair32(grid[q[0]], grid[q[1]]), pair32(grid[q[2]], grid[q[3]]),
                      pair32(grid[q[4]], grid[q[5]]), pair32(grid[q[6]], grid[q[7]])),
                signs4(ks[a & 127], ks[(a >> 7) & 127], ks[(a >> 14) & 127], ks[(a >> 21) & 127]),
                d * (0.5f + (float)(a >> 28)) * 0.5f, mags, 3, out);
        }
    }
}
ROWS_FN(iq3_xxs, f16_finite(b, nb, 98, 0))

ALWAYS_INLINE void iq3_s_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    const __m256 mags = _mm256_setr_ps(1, 3, 5, 7, 9, 11, 13, 15); /* byte >> 1 */
    const uint32_t *grid = gguf_iq3s_grid;
    for (size_t i = 0; i < nb; i++, b += 110, dst += out ? 512 : 1024) {
        prefetch_block(b, 110, out);
        const float d = h2f(b);
        const uint8_t *q = b + 2, *qh = b + 66, *signs = b + 74, *scales = b + 106;
        for (int ib = 0; ib < 8; ib++, q += 8) {
            const unsigned nib = ib % 2 ? scales[ib / 2] >> 4 : scales[ib / 2] & 15u;
            /* bit 2l and 2l + 1 of qh are bit 8 of indices 2l and 2l + 1 */
            const unsigned h = qh[ib];
            iq3_emit32(
                dst, (size_t)(32 * ib),
                grid4(pair32(grid[q[0] | ((h << 8) & 256u)], grid[q[1] | ((h << 7) & 256u)]),
                      pair32(grid[q[2] | ((h << 6) & 256u)], grid[q[3] | ((h << 5) & 256u)]),
                      pair32(grid[q[4] | ((h << 4) & 256u)], grid[q[5] | ((h << 3) & 256u)]),
                      pair32(grid[q[6] | ((h << 2) & 256u)], grid[q[7] | ((h << 1) & 256u)])),
                gguf_le32(signs + 4 * ib), d * (float)(1 + 2 * (int)nib), mags, 1, out);
        }
    }
}
ROWS_FN(iq3_s, f16_finite(b, nb, 110, 0))

/* IQ1S_DELTA, negated when bit 0 of `neg` is set: built from bits rather than
 * chosen by a branch, which random data would mispredict half the time. */
ALWAYS_INLINE __m256 iq1_delta(uint32_t neg) {
    return _mm256_castsi256_ps(_mm256_set1_epi32((int)(0x3e000000u | (neg & 1u) << 31)));
}

/* dl * ((float)g + delta) for the 8 signed bytes of an IQ1S grid entry. */
ALWAYS_INLINE __m256 iq1_group(uint64_t g, __m256 dl, __m256 delta) {
    return _mm256_mul_ps(dl, _mm256_add_ps(i8lo(_mm_cvtsi64_si128((long long)g)), delta));
}

ALWAYS_INLINE void iq1_s_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    for (size_t i = 0; i < nb; i++, b += 50, dst += out ? 512 : 1024) {
        prefetch_block(b, 50, out);
        const float d = h2f(b);
        const uint8_t *qs = b + 2;
        for (int ib = 0; ib < 8; ib++) {
            const uint32_t hw = gguf_le16(b + 34 + 2 * ib);
            const __m256 dl = _mm256_set1_ps(d * (float)(2 * ((hw >> 12) & 7) + 1));
            const __m256 delta = iq1_delta(hw >> 15);
            __m256 v[4];
            for (int l = 0; l < 4; l++)
                v[l] = iq1_group(gguf_iq1s_grid[qs[4 * ib + l] | ((hw >> (3 * l)) & 7) << 8], dl,
                                 delta);
            emit16(dst, (size_t)(32 * ib), v[0], v[1], out);
            emit16(dst, (size_t)(32 * ib + 16), v[2], v[3], out);
        }
    }
}
ROWS_FN(iq1_s, f16_finite(b, nb, 50, 0))

/* IQ1_M's scale is assembled from the top nibbles of its 4 scale words: its
 * exponent (bits 10..14) is bits 14..15 of word 2 and bits 12..14 of word 3. */
static inline bool iq1m_finite(const uint8_t *b, size_t nb) {
    unsigned bad = 0;
    for (size_t i = 0; i < nb; i++, b += 56) bad |= ((b[53] >> 6) | (b[55] >> 4 & 7) << 2) == 31;
    return !bad;
}

ALWAYS_INLINE void iq1_m_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    for (size_t i = 0; i < nb; i++, b += 56, dst += out ? 512 : 1024) {
        prefetch_block(b, 56, out);
        uint32_t sc[4];
        for (int t = 0; t < 4; t++) sc[t] = gguf_le16(b + 48 + 2 * t);
        const uint32_t dbits =
            (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000);
        const float d = _cvtsh_ss((unsigned short)dbits);
        const uint8_t *qs = b, *qh = b + 32;
        for (int ib = 0; ib < 8; ib++) {
            const uint32_t s = sc[ib / 2], sft = 6 * (ib % 2);
            const __m256 dl1 = _mm256_set1_ps(d * (float)(2 * ((s >> sft) & 7) + 1));
            const __m256 dl2 = _mm256_set1_ps(d * (float)(2 * ((s >> (sft + 3)) & 7) + 1));
            const uint32_t qa = qh[2 * ib], qb = qh[2 * ib + 1];
            const uint8_t *q = qs + 4 * ib;
            const __m256 v0 =
                iq1_group(gguf_iq1s_grid[q[0] | ((qa << 8) & 0x700)], dl1, iq1_delta(qa >> 3));
            const __m256 v1 =
                iq1_group(gguf_iq1s_grid[q[1] | ((qa << 4) & 0x700)], dl1, iq1_delta(qa >> 7));
            const __m256 v2 =
                iq1_group(gguf_iq1s_grid[q[2] | ((qb << 8) & 0x700)], dl2, iq1_delta(qb >> 3));
            const __m256 v3 =
                iq1_group(gguf_iq1s_grid[q[3] | ((qb << 4) & 0x700)], dl2, iq1_delta(qb >> 7));
            emit16(dst, (size_t)(32 * ib), v0, v1, out);
            emit16(dst, (size_t)(32 * ib + 16), v2, v3, out);
        }
    }
}
ROWS_FN(iq1_m, iq1m_finite(b, nb))

/* ---- ternary ------------------------------------------------------------ */

/* Store 16 digits t (16-bit lanes) as (float)(t - 1) * d. */
ALWAYS_INLINE void tq1_emit16(uint8_t *dst, size_t at, __m256i t, __m256 d, const int out) {
    const __m256i v = _mm256_sub_epi16(t, _mm256_set1_epi16(1));
    const __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(lo128(v)));
    const __m256 c = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(hi128(v)));
    emit16(dst, at, _mm256_mul_ps(a, d), _mm256_mul_ps(c, d), out);
}

/* Store 16 + 16 digits: F32 directly, BF16 from the 3-entry table. */
ALWAYS_INLINE void tq1_emit32(uint8_t *dst, size_t at, __m256i ta, __m256i tb, __m256 d, lut16 t,
                              const int out) {
    if (out == OUT_F32) {
        tq1_emit16(dst, at, ta, d, out);
        tq1_emit16(dst, at + 16, tb, d, out);
    } else {
        lut16_emit32(dst, at, t, _mm256_permute4x64_epi64(_mm256_packus_epi16(ta, tb), 0xD8));
    }
}

ALWAYS_INLINE void tq1_0_impl(const uint8_t *b, size_t nb, uint8_t *dst, const int out) {
    /* The 4 qh bytes repeated for digits 0..3: those outputs are n-major. */
    const __m256i qh_pow = _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27);
    const __m256 codes = _mm256_setr_ps(-1, 0, 1, 0, 0, 0, 0, 0); /* (float)(t - 1) */
    for (size_t i = 0; i < nb; i++, b += 54, dst += out ? 512 : 1024) {
        const __m256 d = _mm256_set1_ps(h2f(b + 52));
        lut16 t = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        if (out != OUT_F32) t = lut16_make(_mm256_mul_ps(codes, d), _mm256_setzero_ps(), out);
        const __m256i x0 = _mm256_cvtepu8_epi16(load16(b)),
                      x1 = _mm256_cvtepu8_epi16(load16(b + 16));
        const __m256i x2 = _mm256_cvtepu8_epi16(load16(b + 32));
        const __m256i qh = _mm256_cvtepu8_epi16(_mm_set1_epi32((int)gguf_le32(b + 48)));
        __m256i p = _mm256_set1_epi16(1);
        __m256i t2[6];
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
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    const __m256 codes = _mm256_setr_ps(-1, 0, 1, 2, 0, 0, 0, 0); /* (float)(c - 1) */
    for (size_t i = 0; i < nb; i++, b += 66, dst += out ? 512 : 1024) {
        const __m256 d = _mm256_set1_ps(h2f(b + 64));
        lut16 t = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        if (out != OUT_F32) t = lut16_make(_mm256_mul_ps(codes, d), _mm256_setzero_ps(), out);
        for (int c = 0; c < 2; c++) {
            const __m256i q = load32(b + 32 * c);
            for (int l = 0; l < 4; l++) {
                const __m256i code = _mm256_and_si256(_mm256_srli_epi16(q, 2 * l), m3);
                const size_t at = (size_t)(128 * c + 32 * l);
                if (out != OUT_F32) {
                    lut16_emit32(dst, at, t, code);
                    continue;
                }
                const __m256i v = _mm256_sub_epi8(code, one);
                const __m128i lo = lo128(v), hi = hi128(v);
                emit16(dst, at, _mm256_mul_ps(i8lo(lo), d), _mm256_mul_ps(i8hi(lo), d), out);
                emit16(dst, at + 16, _mm256_mul_ps(i8lo(hi), d), _mm256_mul_ps(i8hi(hi), d), out);
            }
        }
    }
}
ROWS_FN(tq2_0, f16_finite(b, nb, 66, 64))

void gguf_avx2_f32_to_f16(const float *src, uint8_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + 2 * i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) {
        const uint16_t h = amn_f32_to_f16(src[i]);
        memcpy(dst + 2 * i, &h, 2);
    }
}

gguf_rows_fn gguf_avx2_kernel(uint32_t ggml_type) {
    switch (ggml_type) {
        GGUF_VEC_COMMON_TYPES(GGUF_VEC_CASE)
    case GGUF_TYPE_IQ2_XXS:
        return iq2_xxs;
    case GGUF_TYPE_IQ2_XS:
        return iq2_xs;
    case GGUF_TYPE_IQ2_S:
        return iq2_s;
    case GGUF_TYPE_IQ3_XXS:
        return iq3_xxs;
    case GGUF_TYPE_IQ3_S:
        return iq3_s;
    case GGUF_TYPE_IQ1_S:
        return iq1_s;
    case GGUF_TYPE_IQ1_M:
        return iq1_m;
    case GGUF_TYPE_TQ1_0:
        return tq1_0;
    case GGUF_TYPE_TQ2_0:
        return tq2_0;
    case GGUF_TYPE_Q1_0:
    case GGUF_TYPE_Q2_0:
        return gguf_avx2_lowbit_kernel(ggml_type);
    default:
        return NULL;
    }
}
