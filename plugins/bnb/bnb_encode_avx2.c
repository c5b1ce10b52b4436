/* bitsandbytes 4-bit encode with AVX2: the same comparisons against the same
 * binary32 thresholds as the scalar path (bnb_kernels.c), eight values at a
 * time, so the bytes are identical. */
#include <immintrin.h>
#include <math.h>

#include "bnb_kernels.h"

/* max |x| over n values (n a multiple of 8), NaN ignored as fmaxf does:
 * maxps returns its second operand when the first is NaN. */
float bnb_absmax_avx2(const float *x, size_t n) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), absmask), m0);
        m1 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i + 8), absmask), m1);
    }
    for (; i + 8 <= n; i += 8)
        m0 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), absmask), m0);
    m0 = _mm256_max_ps(m0, m1);
    /* lanes hold no NaN: the order of the maxima does not matter */
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m0), _mm256_extractf128_ps(m0, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    float m = _mm_cvtss_f32(h);
    for (; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

static const float nf4_pivots[15] = {
    -0.8480964004993439f,  -0.6106329262256622f,  -0.4599952697753906f,   -0.33967943489551544f,
    -0.23460740596055984f, -0.13791173323988914f, -0.045525018125772476f, 0.03979014977812767f,
    0.1202552504837513f,   0.2035212516784668f,   0.2920137718319893f,    0.3893125355243683f,
    0.5016634166240692f,   0.6427869200706482f,   0.8614784181118011f};
static const float fp4_pivots[7] = {0.00260417f, 0.0859375f, 0.20833333f, 0.29166667f,
                                    0.4166667f,  0.583333f,  0.8333333f};

/* Codes of 8 scaled values as int32 lanes. */
static inline __m256i nf4x8(__m256 v) {
    __m256i c = _mm256_setzero_si256();
    for (int k = 0; k < 15; k++)
        c = _mm256_sub_epi32(
            c, _mm256_castps_si256(_mm256_cmp_ps(v, _mm256_set1_ps(nf4_pivots[k]), _CMP_GT_OQ)));
    return c;
}

static inline __m256i fp4x8(__m256 v) {
    const __m256 a = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
    __m256i r = _mm256_setzero_si256();
    for (int k = 0; k < 7; k++)
        r = _mm256_sub_epi32(
            r, _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(fp4_pivots[k]), _CMP_GT_OQ)));
    /* magnitude rank -> code: 0 1 6 7 4 5 2 3 */
    const __m256i code = _mm256_permutevar8x32_epi32(_mm256_setr_epi32(0, 1, 6, 7, 4, 5, 2, 3), r);
    const __m256i sign = _mm256_slli_epi32(_mm256_srli_epi32(_mm256_castps_si256(v), 31), 3);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_andnot_si256(nan, _mm256_or_si256(code, sign));
}

static inline __m256 lookup8(__m256 lo, __m256 hi, __m256i idx) {
    const __m256 a = _mm256_permutevar8x32_ps(lo, idx);
    const __m256 b = _mm256_permutevar8x32_ps(hi, idx);
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

void bnb4_encode_avx2(bnb_kind k, const float *x, size_t n, float absmax, uint8_t *dst,
                      const float cb[16], double *abs_err) {
    const float inv = 1.0f / absmax;
    const __m256 s = _mm256_set1_ps(inv), am = _mm256_set1_ps(absmax);
    const __m256 lo = _mm256_loadu_ps(cb), hi = _mm256_loadu_ps(cb + 8);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 err = _mm256_setzero_ps();
    for (size_t i = 0; i < n; i += 16) {
        const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
        const __m256 v0 = _mm256_mul_ps(x0, s), v1 = _mm256_mul_ps(x1, s);
        const __m256i c0 = k == BNB_FP4 ? fp4x8(v0) : nf4x8(v0);
        const __m256i c1 = k == BNB_FP4 ? fp4x8(v1) : nf4x8(v1);
        if (abs_err) {
            const __m256 y0 = _mm256_mul_ps(lookup8(lo, hi, c0), am);
            const __m256 y1 = _mm256_mul_ps(lookup8(lo, hi, c1), am);
            err = _mm256_add_ps(err, _mm256_and_ps(_mm256_sub_ps(x0, y0), absmask));
            err = _mm256_add_ps(err, _mm256_and_ps(_mm256_sub_ps(x1, y1), absmask));
        }
        /* 16 codes -> 16-bit lanes in order -> byte pairs (first << 4 | second) */
        const __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(c0, c1), 0xd8);
        const __m256i pair =
            _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi32(0xffff)), 4),
                            _mm256_srli_epi32(w, 16));
        /* pair holds one byte per 32-bit lane (8 lanes) */
        const __m128i p16 =
            _mm_packus_epi32(_mm256_castsi256_si128(pair), _mm256_extracti128_si256(pair, 1));
        const __m128i p8 = _mm_packus_epi16(p16, p16);
        _mm_storel_epi64((__m128i *)(dst + i / 2), p8);
    }
    if (abs_err) {
        float lanes[8];
        _mm256_storeu_ps(lanes, err);
        double e = 0;
        for (int j = 0; j < 8; j++) e += lanes[j];
        *abs_err += e;
    }
}
