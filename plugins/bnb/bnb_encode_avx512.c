/* bitsandbytes 4-bit encode with AVX-512: the scalar path's comparisons
 * against the same binary32 thresholds, sixteen values at a time, so the
 * bytes are identical. Built against SIMDe for the emulated test
 * (AMN_BNB_AVX512_EMULATE). */
#include <immintrin.h>
#include <math.h>

#include "bnb_kernels.h"

static const float nf4_pivots[15] = {
    -0.8480964004993439f,  -0.6106329262256622f,  -0.4599952697753906f,   -0.33967943489551544f,
    -0.23460740596055984f, -0.13791173323988914f, -0.045525018125772476f, 0.03979014977812767f,
    0.1202552504837513f,   0.2035212516784668f,   0.2920137718319893f,    0.3893125355243683f,
    0.5016634166240692f,   0.6427869200706482f,   0.8614784181118011f};
static const float fp4_pivots[7] = {0.00260417f, 0.0859375f, 0.20833333f, 0.29166667f,
                                    0.4166667f,  0.583333f,  0.8333333f};
static const int32_t fp4_by_rank[16] = {0, 1, 6, 7, 4, 5, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0};

/* max |x| (n a multiple of 16), NaN ignored: vmaxps returns its second
 * operand when the first is NaN. */
float bnb_absmax_avx512(const float *x, size_t n) {
    __m512 m = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += 16) m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + i)), m);
    float lanes[16], r = 0.0f;
    _mm512_storeu_ps(lanes, m);
    for (int k = 0; k < 16; k++) r = lanes[k] > r ? lanes[k] : r;
    return r;
}

static inline __m512i nf4x16(__m512 v) {
    __m512i c = _mm512_setzero_si512();
    const __m512i one = _mm512_set1_epi32(1);
    for (int k = 0; k < 15; k++)
        c = _mm512_mask_add_epi32(
            c, _mm512_cmp_ps_mask(v, _mm512_set1_ps(nf4_pivots[k]), _CMP_GT_OQ), c, one);
    return c;
}

static inline __m512i fp4x16(__m512 v) {
    const __m512 a = _mm512_abs_ps(v);
    __m512i r = _mm512_setzero_si512();
    const __m512i one = _mm512_set1_epi32(1);
    for (int k = 0; k < 7; k++)
        r = _mm512_mask_add_epi32(
            r, _mm512_cmp_ps_mask(a, _mm512_set1_ps(fp4_pivots[k]), _CMP_GT_OQ), r, one);
    const __m512i code = _mm512_permutexvar_epi32(r, _mm512_loadu_si512(fp4_by_rank));
    const __m512i sign = _mm512_slli_epi32(_mm512_srli_epi32(_mm512_castps_si512(v), 31), 3);
    const __mmask16 ok = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q); /* NaN: code 0 */
    return _mm512_maskz_or_epi32(ok, code, sign);
}

void bnb4_encode_avx512(bnb_kind k, const float *x, size_t n, float absmax, uint8_t *dst,
                        const float cb[16], double *abs_err) {
    const float inv = 1.0f / absmax;
    const __m512 s = _mm512_set1_ps(inv), am = _mm512_set1_ps(absmax);
    const __m512 table = _mm512_loadu_ps(cb);
    __m512 err = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += 16) {
        const __m512 xv = _mm512_loadu_ps(x + i);
        const __m512 v = _mm512_mul_ps(xv, s);
        const __m512i c = k == BNB_FP4 ? fp4x16(v) : nf4x16(v);
        if (abs_err) {
            const __m512 y = _mm512_mul_ps(_mm512_permutexvar_ps(c, table), am);
            err = _mm512_add_ps(err, _mm512_abs_ps(_mm512_sub_ps(xv, y)));
        }
        /* qword j holds codes 2j (low) and 2j + 1 (high): one byte each */
        const __m512i pair = _mm512_or_si512(
            _mm512_slli_epi64(_mm512_and_si512(c, _mm512_set1_epi64(0xffffffff)), 4),
            _mm512_srli_epi64(c, 32));
        _mm_storel_epi64((__m128i *)(dst + i / 2), _mm512_cvtepi64_epi8(pair));
    }
    if (abs_err) {
        float lanes[16];
        _mm512_storeu_ps(lanes, err);
        double e = 0;
        for (int j = 0; j < 16; j++) e += lanes[j];
        *abs_err += e;
    }
}
