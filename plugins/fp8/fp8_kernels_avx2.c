/* FP8 -> F32/F16/BF16 with AVX2 + F16C.
 *
 * Both FP8 formats widen exactly through binary16: an E5M2 byte is the top
 * byte of the half with the same value, and an E4M3 byte placed at bit 7 of a
 * half (sign moved to bit 15) is its value times 2^-8, subnormals included,
 * which one exact multiply by 256 undoes. Only E4M3's NaN (S.1111.111, which
 * that half reads as 480) needs patching. */
#include <immintrin.h>
#include <math.h>

#include "fp8_kernels.h"
#include "amn/kit/store_avx2.h"

/* 8 E4M3 bytes, each in the high byte of a 16-bit lane (x = b << 8), ->
 * their values times 2^-8 (exact, subnormals included): moving the 7
 * magnitude bits down by one, x - ((x & 0x7f00) >> 1), leaves the sign at
 * bit 15 and the magnitude at bit 7. NaN excluded. */
static inline __m256 e4m3x8_scaled(__m128i x) {
    const __m128i m = _mm_srli_epi16(_mm_and_si128(x, _mm_set1_epi16(0x7f00)), 1);
    return _mm256_cvtph_ps(_mm_sub_epi16(x, m));
}

/* w * s, except that a NaN w is kept as it is (quieted). */
static inline __m256 apply(__m256 w, __m256 s, __m256 nanmask) {
    const __m256 q = _mm256_or_ps(w, _mm256_castsi256_ps(_mm256_set1_epi32(0x00400000)));
    return _mm256_blendv_ps(_mm256_mul_ps(w, s), q, nanmask);
}

/* Two products of 8 lanes, neither NaN, to 16 BF16 values at d. */
static inline void bf16x16_finite(__m256 y0, __m256 y1, uint8_t *d) {
    _mm256_storeu_si256((__m256i *)d, qs_bf16x16_finite(y0, y1));
}

/* 16 elements, s the block's scale. folded: s is the scale times 256,
 * exact and finite (|scale| < 2^120), so (w 2^-8) (256 scale) is the same
 * real product as w scale, rounded once the same way, and the decoding's
 * multiply by 256 goes. finite: the scale is finite, so what a byte that
 * is no NaN gives is no NaN either (E4M3 has no infinity). */
static inline __attribute__((always_inline)) void e4m3_16(const uint8_t *src, __m256 s,
                                                          amn_dtype out, bool finite, bool folded,
                                                          uint8_t *d, size_t es) {
    const __m128i b = _mm_loadu_si128((const __m128i *)src);
    __m256 w0 = e4m3x8_scaled(_mm_unpacklo_epi8(_mm_setzero_si128(), b));
    __m256 w1 = e4m3x8_scaled(_mm_unpackhi_epi8(_mm_setzero_si128(), b));
    if (!folded) {
        w0 = _mm256_mul_ps(w0, _mm256_set1_ps(256.0f));
        w1 = _mm256_mul_ps(w1, _mm256_set1_ps(256.0f));
    }
    const __m128i isnan =
        _mm_cmpeq_epi8(_mm_and_si128(b, _mm_set1_epi8(0x7f)), _mm_set1_epi8(0x7f));
    if (__builtin_expect(_mm_movemask_epi8(isnan) == 0, 1)) {
        if (out == AMN_DTYPE_BF16 && finite) {
            bf16x16_finite(_mm256_mul_ps(w0, s), _mm256_mul_ps(w1, s), d);
            return;
        }
        qs_store8(out, d, _mm256_mul_ps(w0, s));
        qs_store8(out, d + 8 * es, _mm256_mul_ps(w1, s));
        return;
    }
    /* NaN lanes become sign | 0x7fc00000, as amn_f8e4m3_to_f32 decodes them. */
    const __m256 m0 = _mm256_castsi256_ps(_mm256_cvtepi8_epi32(isnan));
    const __m256 m1 = _mm256_castsi256_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(isnan, 8)));
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    const __m256 qnan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
    w0 = _mm256_blendv_ps(w0, _mm256_or_ps(_mm256_and_ps(w0, sign), qnan), m0);
    w1 = _mm256_blendv_ps(w1, _mm256_or_ps(_mm256_and_ps(w1, sign), qnan), m1);
    qs_store8(out, d, apply(w0, s, m0));
    qs_store8(out, d + 8 * es, apply(w1, s, m1));
}

static inline __attribute__((always_inline)) void
e5m2_16(const uint8_t *src, __m256 s, amn_dtype out, bool finite, uint8_t *d, size_t es) {
    const __m128i b = _mm_loadu_si128((const __m128i *)src);
    const __m128i lo = _mm_unpacklo_epi8(_mm_setzero_si128(), b); /* byte << 8 per lane */
    const __m128i hi = _mm_unpackhi_epi8(_mm_setzero_si128(), b);
    const __m256 w0 = _mm256_cvtph_ps(lo), w1 = _mm256_cvtph_ps(hi);
    if (out == AMN_DTYPE_BF16 && finite) {
        /* No test for E5M2's infinities and NaNs: times a finite scale a NaN
         * byte gives itself quieted, whose low 16 bits are 0 (its payload
         * sits in the half's bits), and 0 x inf the default NaN, so the
         * rounding without the NaN test gives the quieted bits too. */
        bf16x16_finite(_mm256_mul_ps(w0, s), _mm256_mul_ps(w1, s), d);
        return;
    }
    qs_store8(out, d, apply(w0, s, _mm256_cmp_ps(w0, w0, _CMP_UNORD_Q)));
    qs_store8(out, d + 8 * es, apply(w1, s, _mm256_cmp_ps(w1, w1, _CMP_UNORD_Q)));
}

/* One instance per (format, output dtype, finite scales). */
static inline __attribute__((always_inline)) void run(const uint8_t *src, size_t n, size_t bc,
                                                      const float *scales, bool e5m2, amn_dtype out,
                                                      bool finite, uint8_t *d) {
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    for (size_t c = 0, b = 0; c < n; c += bc, b++) {
        const size_t end = n - c < bc ? n : c + bc;
        const float scale = scales[b];
        size_t i = c;
        if (e5m2) {
            const __m256 s = _mm256_set1_ps(scale);
            for (; i + 16 <= end; i += 16) e5m2_16(src + i, s, out, finite, d + i * es, es);
        } else if (fabsf(scale) < 0x1p120f) {
            const __m256 s = _mm256_set1_ps(scale * 256.0f);
            for (; i + 16 <= end; i += 16) e4m3_16(src + i, s, out, finite, true, d + i * es, es);
        } else {
            const __m256 s = _mm256_set1_ps(scale);
            for (; i + 16 <= end; i += 16) e4m3_16(src + i, s, out, finite, false, d + i * es, es);
        }
        for (; i < end; i++) qs_store1(fp8_apply(fp8_decode(src[i], e5m2), scale), out, d + i * es);
    }
}

void fp8_run_avx2(const uint8_t *src, size_t n, size_t bc, const float *scales, bool finite,
                  bool e5m2, amn_dtype out, void *dst) {
    uint8_t *d = dst;
    switch (out) {
    case AMN_DTYPE_F32:
        if (e5m2)
            run(src, n, bc, scales, true, AMN_DTYPE_F32, false, d);
        else
            run(src, n, bc, scales, false, AMN_DTYPE_F32, false, d);
        break;
    case AMN_DTYPE_F16:
        if (e5m2)
            run(src, n, bc, scales, true, AMN_DTYPE_F16, false, d);
        else
            run(src, n, bc, scales, false, AMN_DTYPE_F16, false, d);
        break;
    default:
        if (e5m2 && finite)
            run(src, n, bc, scales, true, AMN_DTYPE_BF16, true, d);
        else if (e5m2)
            run(src, n, bc, scales, true, AMN_DTYPE_BF16, false, d);
        else if (finite)
            run(src, n, bc, scales, false, AMN_DTYPE_BF16, true, d);
        else
            run(src, n, bc, scales, false, AMN_DTYPE_BF16, false, d);
        break;
    }
}
