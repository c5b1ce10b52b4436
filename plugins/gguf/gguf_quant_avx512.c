/* AVX-512 version of make_qx_quants (rmse_type 1), the search of Q6_K and
 * Q3_K with an importance matrix, of Q6_K without one and of Q4_0 / Q5_0
 * with one, the final codes of Q3_K and Q6_K, and make_q3_quants (Q3_K
 * without an importance matrix, at the end of the file), with the scalar
 * path's bytes.
 *
 * As in gguf_quant_avx2.c the lanes hold the tries, each summing over the
 * group's values in ggml's order with ggml's operations (each product
 * rounded, no FMA), and the best try is then chosen in try order in scalar
 * code. The 19 tries (the first at -nmax / max, then is = -9..9 without 0)
 * take one 16-lane vector and one of 4 lanes instead of three of 8. Two
 * steps differ in form, not in result:
 * - codes are rounded in the float domain (roundscale to nearest even, then
 *   the clamp as floats) instead of through nearest_int's integer bits. For
 *   a group of finite values with max != 0 every product iscale * x[i] has
 *   magnitude at most (nmax + 0.9) / |max| * |x[i]| <= nmax + 1 (plus
 *   rounding), far below 2^22, where nearest_int is round-to-nearest-even
 *   of the same value; a group holding a NaN or an infinity takes the AVX2
 *   search, which reproduces nearest_int bit by bit;
 * - ggml rewrites the codes at every try that wins; the last winner's are
 *   the ones it returns, so they are computed once, at the end.
 * Called only after the run-time CPU check (or built against the portable
 * emulation for the avx512emu tests). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "gguf_quant_impl.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* clamp(round-to-nearest-even(f), -nmax, nmax - 1), as floats. */
ALWAYS_INLINE __m512 codes16(__m512 f, __m512 lo, __m512 hi) {
    const __m512 r = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_max_ps(lo, _mm512_min_ps(hi, r));
}

ALWAYS_INLINE __m128 codes4(__m128 f, __m128 lo, __m128 hi) {
    const __m128 r = _mm_round_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm_max_ps(lo, _mm_min_ps(hi, r));
}

/* True when the n values (a multiple of 16) are all finite; then *amax is
 * the largest magnitude and *max the first value of that magnitude (the
 * scalar loop's `ax > amax` keeps the first). */
ALWAYS_INLINE bool finite_max(int n, const float *restrict x, float *amax, float *max) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512 inf = _mm512_set1_ps(INFINITY);
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        const __m512 a = _mm512_and_ps(_mm512_loadu_ps(x + i), absmask);
        if (_mm512_cmp_ps_mask(a, inf, _CMP_LT_OQ) != 0xFFFF) return false;
        m = _mm512_max_ps(m, a);
    }
    float lanes[16], am = 0; /* all finite: no NaN to order */
    _mm512_storeu_ps(lanes, m);
    for (int k = 0; k < 16; k++) am = lanes[k] > am ? lanes[k] : am;
    const __m512 vam = _mm512_set1_ps(am);
    for (int i = 0; i < n; i += 16) {
        const __mmask16 eq =
            _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(x + i), absmask), vam, _CMP_EQ_OQ);
        if (eq) {
            *max = x[i + __builtin_ctz(eq)];
            break;
        }
    }
    *amax = am;
    return true;
}

/* The tries' numerators -(nmax + 0.1f * is) in lanes: a = is -9..-1, 1..7;
 * b = the first try (-nmax), is 8, 9 and an unused lane. */
ALWAYS_INLINE void try_numerators(int nmax, __m512 *a, __m128 *b) {
    float na[16], nb[4];
    for (int k = 0, is = -9; is <= 7; ++is) {
        if (is == 0) continue;
        na[k++] = -(nmax + 0.1f * is);
    }
    nb[0] = (float)-nmax;
    nb[1] = -(nmax + 0.1f * 8);
    nb[2] = -(nmax + 0.1f * 9);
    nb[3] = 0.f;
    *a = _mm512_loadu_ps(na);
    *b = _mm_loadu_ps(nb);
}

/* The codes of try iscale, + nmax, for the n values. */
ALWAYS_INLINE void store_codes(int n, int nmax, const float *restrict x, float iscale,
                               int8_t *restrict L) {
    const __m512 lo = _mm512_set1_ps((float)-nmax), hi = _mm512_set1_ps((float)(nmax - 1));
    const __m512 vi = _mm512_set1_ps(iscale);
    /* l + nmax + 2^23 holds the code in its low mantissa bits (exact). */
    const __m512 off = _mm512_set1_ps(8388608.f + (float)nmax);
    for (int i = 0; i < n; i += 16) {
        const __m512 l = codes16(_mm512_mul_ps(vi, _mm512_loadu_ps(x + i)), lo, hi);
        const __m512i q =
            _mm512_and_si512(_mm512_castps_si512(_mm512_add_ps(l, off)), _mm512_set1_epi32(0xff));
        _mm_storeu_si128((__m128i *)(L + i), _mm512_cvtepi32_epi8(q));
    }
}

/* make_qx_quants (rmse_type 1): weights qw, or x^2 when qw is NULL; n a
 * multiple of 16. */
ALWAYS_INLINE float qx_search_body(int n, int nmax, const float *restrict x, int8_t *restrict L,
                                   const float *restrict qw) {
    float amax = 0, max = 0;
    if (!finite_max(n, x, &amax, &max))
        return qw ? gq_qx_search_w_avx2(n, nmax, x, L, qw) : gq_qx_search_avx2(n, nmax, x, L);
    if (amax < GQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    __m512 na;
    __m128 nb;
    try_numerators(nmax, &na, &nb);
    /* -(nmax + 0.1f * is) / max, each lane one division as in ggml. */
    const __m512 ia = _mm512_div_ps(na, _mm512_set1_ps(max));
    const __m128 ib = _mm_div_ps(nb, _mm_set1_ps(max));
    const __m512 loa = _mm512_set1_ps((float)-nmax), hia = _mm512_set1_ps((float)(nmax - 1));
    const __m128 lob = _mm_set1_ps((float)-nmax), hib = _mm_set1_ps((float)(nmax - 1));
    __m512 lxa = _mm512_setzero_ps(), l2a = lxa;
    __m128 lxb = _mm_setzero_ps(), l2b = lxb;
    for (int i = 0; i < n; ++i) {
        const float wi = qw ? qw[i] : x[i] * x[i];
        const __m512 xa = _mm512_set1_ps(x[i]), wa = _mm512_set1_ps(wi);
        const __m512 wxa = _mm512_mul_ps(wa, xa);
        const __m512 la = codes16(_mm512_mul_ps(ia, xa), loa, hia);
        lxa = _mm512_add_ps(lxa, _mm512_mul_ps(wxa, la));
        l2a = _mm512_add_ps(l2a, _mm512_mul_ps(_mm512_mul_ps(wa, la), la));
        const __m128 xb = _mm512_castps512_ps128(xa), wb = _mm512_castps512_ps128(wa);
        const __m128 lb = codes4(_mm_mul_ps(ib, xb), lob, hib);
        lxb = _mm_add_ps(lxb, _mm_mul_ps(_mm512_castps512_ps128(wxa), lb));
        l2b = _mm_add_ps(l2b, _mm_mul_ps(_mm_mul_ps(wb, lb), lb));
    }
    float sx[20], s2[20], isc[20];
    _mm512_storeu_ps(sx, lxa);
    _mm512_storeu_ps(s2, l2a);
    _mm512_storeu_ps(isc, ia);
    _mm_storeu_ps(sx + 16, lxb);
    _mm_storeu_ps(s2 + 16, l2b);
    _mm_storeu_ps(isc + 16, ib);
    /* Try order: the first (lane 16), is -9..-1, 1..7 (0..15), 8, 9 (17, 18). */
    float scale = s2[16] ? sx[16] / s2[16] : 0.0f;
    float best = scale * sx[16];
    int win = 16;
    for (int t = 0; t < 18; t++) {
        const int k = t < 16 ? t : t + 1;
        if (s2[k] > 0 && sx[k] * sx[k] > best * s2[k]) {
            scale = sx[k] / s2[k];
            best = scale * sx[k];
            win = k;
        }
    }
    store_codes(n, nmax, x, isc[win], L);
    return scale;
}

float gq_qx_search_avx512(int n, int nmax, const float *restrict x, int8_t *restrict L) {
    return qx_search_body(n, nmax, x, L, NULL);
}

float gq_qx_search_w_avx512(int n, int nmax, const float *restrict x, int8_t *restrict L,
                            const float *restrict qw) {
    return qx_search_body(n, nmax, x, L, qw);
}

/* gq_codes16: x / d per lane (one IEEE division each, as ggml's), then
 * nearest_int's own integer steps (the magic add keeps its bits for any
 * quotient, NaN and infinity included). */
void gq_codes16_avx512(const float *restrict x, float d, int nmax, int8_t *restrict L) {
    const __m512 q = _mm512_div_ps(_mm512_loadu_ps(x), _mm512_set1_ps(d));
    const __m512i b = _mm512_castps_si512(_mm512_add_ps(q, _mm512_set1_ps(12582912.f)));
    const __m512i l = _mm512_sub_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x007fffff)),
                                       _mm512_set1_epi32(0x00400000));
    const __m512i c = _mm512_max_epi32(_mm512_set1_epi32(-nmax),
                                       _mm512_min_epi32(_mm512_set1_epi32(nmax - 1), l));
    _mm_storeu_si128((__m128i *)L,
                     _mm512_cvtepi32_epi8(_mm512_add_epi32(c, _mm512_set1_epi32(nmax))));
}

/* nearest_int's integer steps on 16 lanes (its bits for any value). */
ALWAYS_INLINE __m512i nearest16(__m512 f) {
    const __m512i b = _mm512_castps_si512(_mm512_add_ps(f, _mm512_set1_ps(12582912.f)));
    return _mm512_sub_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x007fffff)),
                            _mm512_set1_epi32(0x00400000));
}

ALWAYS_INLINE __m512i clamp_q3(__m512i l) {
    return _mm512_max_epi32(_mm512_set1_epi32(-4), _mm512_min_epi32(_mm512_set1_epi32(3), l));
}

/* make_q3_quants (do_rmse, nmax 4) of the 16 groups of 16 values of a Q3_K
 * block at once, group j in lane j. Each lane runs ggml's loops over its
 * group in ggml's order with ggml's operations (each product rounded, no
 * FMA), its own running sums, and nearest_int's integer steps, so its codes
 * and scale are the scalar search's for any values, NaN and infinity
 * included. The lanes run the refinement passes together until none
 * changes (at most five): a pass that changes nothing in a lane leaves its
 * state as it was, so a further pass there changes nothing either. */
void gq_q3_search16_avx512(const float *restrict x, int8_t *restrict L, float *restrict sc) {
    float t[256]; /* t[16 * i + j] = element i of group j */
    for (int j = 0; j < 16; ++j)
        for (int i = 0; i < 16; ++i) t[16 * i + j] = x[16 * j + i];
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512 zero = _mm512_setzero_ps();
    __m512 amax = zero, max = zero;
    for (int i = 0; i < 16; ++i) { /* the first value of largest magnitude */
        const __m512 v = _mm512_loadu_ps(t + 16 * i);
        const __mmask16 gt = _mm512_cmp_ps_mask(_mm512_and_ps(v, absmask), amax, _CMP_GT_OQ);
        amax = _mm512_mask_mov_ps(amax, gt, _mm512_and_ps(v, absmask));
        max = _mm512_mask_mov_ps(max, gt, v);
    }
    const __mmask16 live =
        (__mmask16)~_mm512_cmp_ps_mask(amax, _mm512_set1_ps(GQ_GROUP_MAX_EPS), _CMP_LT_OQ);
    const __m512 iscale = _mm512_div_ps(_mm512_set1_ps(-4.f), max);
    __m512i l[16];
    __m512 lx = zero, l2 = zero;
    for (int i = 0; i < 16; ++i) {
        const __m512 v = _mm512_loadu_ps(t + 16 * i), w = _mm512_mul_ps(v, v);
        l[i] = clamp_q3(nearest16(_mm512_mul_ps(iscale, v)));
        const __m512 lf = _mm512_cvtepi32_ps(l[i]);
        lx = _mm512_add_ps(lx, _mm512_mul_ps(_mm512_mul_ps(w, v), lf));
        l2 = _mm512_add_ps(l2, _mm512_mul_ps(_mm512_mul_ps(w, lf), lf));
    }
    for (int itry = 0; itry < 5; ++itry) {
        __mmask16 changed = 0;
        for (int i = 0; i < 16; ++i) {
            const __m512 v = _mm512_loadu_ps(t + 16 * i), w = _mm512_mul_ps(v, v);
            const __m512 wv = _mm512_mul_ps(w, v), lf = _mm512_cvtepi32_ps(l[i]);
            const __m512 slx = _mm512_sub_ps(lx, _mm512_mul_ps(wv, lf));
            const __m512 sl2 = _mm512_sub_ps(l2, _mm512_mul_ps(_mm512_mul_ps(w, lf), lf));
            const __m512i nl = clamp_q3(nearest16(_mm512_div_ps(_mm512_mul_ps(v, sl2), slx)));
            __mmask16 m = _mm512_cmp_ps_mask(slx, zero, _CMP_GT_OQ) &
                          (__mmask16)~_mm512_cmpeq_epi32_mask(nl, l[i]);
            const __m512 nf = _mm512_cvtepi32_ps(nl);
            const __m512 slx2 = _mm512_add_ps(slx, _mm512_mul_ps(wv, nf));
            const __m512 sl22 = _mm512_add_ps(sl2, _mm512_mul_ps(_mm512_mul_ps(w, nf), nf));
            m &= _mm512_cmp_ps_mask(sl22, zero, _CMP_GT_OQ) &
                 _mm512_cmp_ps_mask(_mm512_mul_ps(_mm512_mul_ps(slx2, slx2), l2),
                                    _mm512_mul_ps(_mm512_mul_ps(lx, lx), sl22), _CMP_GT_OQ);
            l[i] = _mm512_mask_mov_epi32(l[i], m, nl);
            lx = _mm512_mask_mov_ps(lx, m, slx2);
            l2 = _mm512_mask_mov_ps(l2, m, sl22);
            changed |= m;
        }
        if (!changed) break;
    }
    const __m512 s = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(l2, zero, _CMP_GT_OQ), lx, l2);
    _mm512_storeu_ps(sc, _mm512_maskz_mov_ps(live, s));
    int8_t c[256]; /* c[16 * i + j]: code of element i of group j, + 4; 0 in a group of zeros */
    for (int i = 0; i < 16; ++i)
        _mm_storeu_si128((__m128i *)(c + 16 * i),
                         _mm512_cvtepi32_epi8(_mm512_maskz_mov_epi32(
                             live, _mm512_add_epi32(l[i], _mm512_set1_epi32(4)))));
    for (int j = 0; j < 16; ++j)
        for (int i = 0; i < 16; ++i) L[16 * j + i] = c[16 * i + j];
}
