/* AVX2 versions of the quantizers' scale searches, with the scalar path's
 * bytes.
 *
 * ggml's searches try a list of scales one after another, each try summing
 * over the group's values in order. The sums of one try must keep that
 * order (binary32 addition is not associative), but the tries themselves are
 * independent, so here the lanes hold the tries: lane k accumulates try k
 * over the values in ggml's order, with ggml's operations (each product
 * rounded, no FMA: built with -mavx2 -mf16c -mbmi2 only), and the choice of
 * the best try is then made in try order in scalar code, as ggml makes it.
 * Used for IQ4_NL / IQ4_XS (quantize_row_iq4_nl_impl's 15 tries) and Q6_K
 * (make_qx_quants' 18 tries). Q3_K's make_q3_quants refines one value at a
 * time, so there the lanes hold the block's groups instead. Called only
 * after the run-time CPU check. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "gguf_quant_impl.h"
#include "gguf_tables.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* ---- IQ4: nearest codebook value, 8 lanes ---------------------------------- */

typedef struct iq4_tab {
    __m256 lo, hi; /* the 16 values as floats: 0-7, 8-15 */
    __m256 v[16];  /* each value broadcast */
} iq4_tab;

static void iq4_tab_init(iq4_tab *t) {
    float f[16];
    for (int i = 0; i < 16; i++) f[i] = (float)gguf_kvalues_iq4nl[i];
    t->lo = _mm256_loadu_ps(f);
    t->hi = _mm256_loadu_ps(f + 8);
    for (int i = 0; i < 16; i++) t->v[i] = _mm256_set1_ps(f[i]);
}

/* The value at index idx (0..15) per lane. */
ALWAYS_INLINE __m256 iq4_value(const iq4_tab *t, __m256i idx) {
    const __m256 a = _mm256_permutevar8x32_ps(t->lo, idx);
    const __m256 b = _mm256_permutevar8x32_ps(t->hi, idx);
    const __m256i high = _mm256_cmpgt_epi32(idx, _mm256_set1_epi32(7));
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(high));
}

/* ggml's best_index_int8(16, kvalues_iq4nl, x) per lane. Its bisection
 * ends at ml = the largest k with val[k] <= x (x strictly inside the
 * range), which is the count of k in 1..14 with val[k] <= x; then the same
 * float comparison picks ml or ml + 1. A NaN fails every comparison of the
 * bisection and ends at 15. */
ALWAYS_INLINE __m256i iq4_best_index(const iq4_tab *t, __m256 x) {
    __m256i ml = _mm256_setzero_si256();
    for (int k = 1; k < 15; k++)
        ml = _mm256_sub_epi32(ml, _mm256_castps_si256(_mm256_cmp_ps(x, t->v[k], _CMP_GE_OQ)));
    const __m256i mu = _mm256_add_epi32(ml, _mm256_set1_epi32(1));
    const __m256 lo = iq4_value(t, ml), hi = iq4_value(t, mu);
    const __m256 take_lo = _mm256_cmp_ps(_mm256_sub_ps(x, lo), _mm256_sub_ps(hi, x), _CMP_LT_OQ);
    __m256i r = _mm256_blendv_epi8(mu, ml, _mm256_castps_si256(take_lo));
    const __m256 below = _mm256_cmp_ps(x, t->v[0], _CMP_LE_OQ);
    const __m256 above =
        _mm256_or_ps(_mm256_cmp_ps(x, t->v[15], _CMP_GE_OQ), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    r = _mm256_andnot_si256(_mm256_castps_si256(below), r);
    return _mm256_blendv_epi8(r, _mm256_set1_epi32(15), _mm256_castps_si256(above));
}

/* Codes of n values (n a multiple of 8): best_index(id * x[j]). */
void gq_iq4_codes_avx2(const float *x, int n, float id, uint8_t *L) {
    iq4_tab t;
    iq4_tab_init(&t);
    const __m256 vid = _mm256_set1_ps(id);
    for (int j = 0; j < n; j += 8) {
        const __m256i idx = iq4_best_index(&t, _mm256_mul_ps(vid, _mm256_loadu_ps(x + j)));
        const __m128i p =
            _mm_packs_epi32(_mm256_castsi256_si128(idx), _mm256_extracti128_si256(idx, 1));
        _mm_storel_epi64((__m128i *)(L + j), _mm_packus_epi16(p, p));
    }
}

/* quantize_row_iq4_nl_impl's per-block search (ntry 7) with the block's
 * weights: returns the block's scale, codes of the first pass in Lb. */
float gq_iq4_block_scale_w_avx2(const float *restrict xb, const float *restrict weight,
                                uint8_t *restrict Lb) {
    const int8_t *values = gguf_kvalues_iq4nl;
    iq4_tab t;
    iq4_tab_init(&t);
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
        const float ax = fabsf(xb[j]);
        if (ax > amax) {
            amax = ax;
            max = xb[j];
        }
    }
    if (amax < GQ_GROUP_MAX_EPS) return 0;
    float d = -max / values[0];
    const float id0 = 1 / d;
    gq_iq4_codes_avx2(xb, 32, id0, Lb);
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
        const float q = values[Lb[j]], w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    /* Tries itry = -7..7 in lanes: a = itry -7..0, b = itry 1..7 (lane 7 unused). */
    float ida[8], idb[8];
    for (int k = 0; k < 8; k++) {
        ida[k] = (float)(k - 7 + values[0]) / max;
        idb[k] = (float)(k + 1 + values[0]) / max;
    }
    const __m256 va = _mm256_loadu_ps(ida), vb = _mm256_loadu_ps(idb);
    __m256 qxa = _mm256_setzero_ps(), q2a = _mm256_setzero_ps();
    __m256 qxb = _mm256_setzero_ps(), q2b = _mm256_setzero_ps();
    for (int j = 0; j < 32; ++j) {
        const __m256 xj = _mm256_set1_ps(xb[j]), wj = _mm256_set1_ps(weight[j]);
        const __m256 qa = iq4_value(&t, iq4_best_index(&t, _mm256_mul_ps(va, xj)));
        const __m256 qb = iq4_value(&t, iq4_best_index(&t, _mm256_mul_ps(vb, xj)));
        const __m256 wqa = _mm256_mul_ps(wj, qa), wqb = _mm256_mul_ps(wj, qb);
        qxa = _mm256_add_ps(qxa, _mm256_mul_ps(wqa, xj));
        q2a = _mm256_add_ps(q2a, _mm256_mul_ps(wqa, qa));
        qxb = _mm256_add_ps(qxb, _mm256_mul_ps(wqb, xj));
        q2b = _mm256_add_ps(q2b, _mm256_mul_ps(wqb, qb));
    }
    float sx[16], s2[16];
    _mm256_storeu_ps(sx, qxa);
    _mm256_storeu_ps(sx + 8, qxb);
    _mm256_storeu_ps(s2, q2a);
    _mm256_storeu_ps(s2 + 8, q2b);
    for (int k = 0; k < 15; k++)
        if (s2[k] > 0 && sx[k] * sx[k] > best * s2[k]) {
            d = sx[k] / s2[k];
            best = d * sx[k];
        }
    return d;
}

/* ---- Q6_K: make_qx_quants(16, 32, x, L, rmse_type 1, NULL) ----------------- */

/* nearest_int per lane, clamped to [-nmax, nmax - 1]. */
ALWAYS_INLINE __m256i nearest_clamped(__m256 f, int nmax) {
    const __m256i i = _mm256_castps_si256(_mm256_add_ps(f, _mm256_set1_ps(12582912.f)));
    const __m256i l = _mm256_sub_epi32(_mm256_and_si256(i, _mm256_set1_epi32(0x007fffff)),
                                       _mm256_set1_epi32(0x00400000));
    return _mm256_max_epi32(_mm256_set1_epi32(-nmax),
                            _mm256_min_epi32(_mm256_set1_epi32(nmax - 1), l));
}

/* make_qx_quants (rmse_type 1): weights qw, or x^2 when qw is NULL. */
ALWAYS_INLINE float qx_search_body(int n, int nmax, const float *restrict x, int8_t *restrict L,
                                   const float *restrict qw) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = gq_nearest_int(iscale * x[i]);
        l = GQ_MAX(-nmax, GQ_MIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        const float w = qw ? qw[i] : x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    /* The 18 tries is = -9..-1, 1..9 in lanes: a = -9..-2, b = -1, 1..7, c = 8, 9. */
    float isc[24];
    for (int k = 0, is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        isc[k++] = -(nmax + 0.1f * is) / max;
    }
    for (int k = 18; k < 24; k++) isc[k] = 0.f;
    const __m256 ia = _mm256_loadu_ps(isc), ib = _mm256_loadu_ps(isc + 8),
                 ic = _mm256_loadu_ps(isc + 16);
    __m256 lxa = _mm256_setzero_ps(), l2a = lxa, lxb = lxa, l2b = lxa, lxc = lxa, l2c = lxa;
    for (int i = 0; i < n; ++i) {
        const __m256 xi = _mm256_set1_ps(x[i]);
        const __m256 w = _mm256_set1_ps(qw ? qw[i] : x[i] * x[i]);
        const __m256 wx = _mm256_mul_ps(w, xi);
        const __m256 la = _mm256_cvtepi32_ps(nearest_clamped(_mm256_mul_ps(ia, xi), nmax));
        const __m256 lb = _mm256_cvtepi32_ps(nearest_clamped(_mm256_mul_ps(ib, xi), nmax));
        const __m256 lc = _mm256_cvtepi32_ps(nearest_clamped(_mm256_mul_ps(ic, xi), nmax));
        lxa = _mm256_add_ps(lxa, _mm256_mul_ps(wx, la));
        l2a = _mm256_add_ps(l2a, _mm256_mul_ps(_mm256_mul_ps(w, la), la));
        lxb = _mm256_add_ps(lxb, _mm256_mul_ps(wx, lb));
        l2b = _mm256_add_ps(l2b, _mm256_mul_ps(_mm256_mul_ps(w, lb), lb));
        lxc = _mm256_add_ps(lxc, _mm256_mul_ps(wx, lc));
        l2c = _mm256_add_ps(l2c, _mm256_mul_ps(_mm256_mul_ps(w, lc), lc));
    }
    float sx[24], s2[24];
    _mm256_storeu_ps(sx, lxa);
    _mm256_storeu_ps(sx + 8, lxb);
    _mm256_storeu_ps(sx + 16, lxc);
    _mm256_storeu_ps(s2, l2a);
    _mm256_storeu_ps(s2 + 8, l2b);
    _mm256_storeu_ps(s2 + 16, l2c);
    for (int k = 0; k < 18; k++) {
        if (s2[k] > 0 && sx[k] * sx[k] > best * s2[k]) {
            for (int i = 0; i < n; ++i) {
                const int l = gq_nearest_int(isc[k] * x[i]);
                L[i] = (int8_t)(nmax + GQ_MAX(-nmax, GQ_MIN(nmax - 1, l)));
            }
            scale = sx[k] / s2[k];
            best = scale * sx[k];
        }
    }
    return scale;
}

float gq_qx_search_avx2(int n, int nmax, const float *restrict x, int8_t *restrict L) {
    return qx_search_body(n, nmax, x, L, NULL);
}

float gq_qx_search_w_avx2(int n, int nmax, const float *restrict x, int8_t *restrict L,
                          const float *restrict qw) {
    return qx_search_body(n, nmax, x, L, qw);
}

/* ---- Q3_K: make_q3_quants(16, 4, x, L, do_rmse) of 8 groups at once ------- */

/* Group j of the 8 in lane j, each lane running ggml's loops over its group
 * (as gq_q3_search16_avx512 does with 16, whose comment says why the bytes
 * are the scalar search's); blends stand for the masks. */
static void q3_search8(const float *restrict x, int8_t *restrict L, float *restrict sc) {
    float t[128]; /* t[8 * i + j] = element i of group j */
    for (int j = 0; j < 8; ++j)
        for (int i = 0; i < 16; ++i) t[8 * i + j] = x[16 * j + i];
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 zero = _mm256_setzero_ps();
    __m256 amax = zero, max = zero;
    for (int i = 0; i < 16; ++i) { /* the first value of largest magnitude */
        const __m256 v = _mm256_loadu_ps(t + 8 * i), a = _mm256_and_ps(v, absmask);
        const __m256 gt = _mm256_cmp_ps(a, amax, _CMP_GT_OQ);
        amax = _mm256_blendv_ps(amax, a, gt);
        max = _mm256_blendv_ps(max, v, gt);
    }
    const __m256 live = _mm256_cmp_ps(amax, _mm256_set1_ps(GQ_GROUP_MAX_EPS), _CMP_NLT_UQ);
    const __m256 iscale = _mm256_div_ps(_mm256_set1_ps(-4.f), max);
    __m256i l[16];
    __m256 lx = zero, l2 = zero;
    for (int i = 0; i < 16; ++i) {
        const __m256 v = _mm256_loadu_ps(t + 8 * i), w = _mm256_mul_ps(v, v);
        l[i] = nearest_clamped(_mm256_mul_ps(iscale, v), 4);
        const __m256 lf = _mm256_cvtepi32_ps(l[i]);
        lx = _mm256_add_ps(lx, _mm256_mul_ps(_mm256_mul_ps(w, v), lf));
        l2 = _mm256_add_ps(l2, _mm256_mul_ps(_mm256_mul_ps(w, lf), lf));
    }
    for (int itry = 0; itry < 5; ++itry) {
        __m256 changed = zero;
        for (int i = 0; i < 16; ++i) {
            const __m256 v = _mm256_loadu_ps(t + 8 * i), w = _mm256_mul_ps(v, v);
            const __m256 wv = _mm256_mul_ps(w, v), lf = _mm256_cvtepi32_ps(l[i]);
            const __m256 slx = _mm256_sub_ps(lx, _mm256_mul_ps(wv, lf));
            const __m256 sl2 = _mm256_sub_ps(l2, _mm256_mul_ps(_mm256_mul_ps(w, lf), lf));
            const __m256i nl = nearest_clamped(_mm256_div_ps(_mm256_mul_ps(v, sl2), slx), 4);
            const __m256 same = _mm256_castsi256_ps(_mm256_cmpeq_epi32(nl, l[i]));
            const __m256 nf = _mm256_cvtepi32_ps(nl);
            const __m256 slx2 = _mm256_add_ps(slx, _mm256_mul_ps(wv, nf));
            const __m256 sl22 = _mm256_add_ps(sl2, _mm256_mul_ps(_mm256_mul_ps(w, nf), nf));
            __m256 m = _mm256_andnot_ps(same, _mm256_cmp_ps(slx, zero, _CMP_GT_OQ));
            m = _mm256_and_ps(m, _mm256_cmp_ps(sl22, zero, _CMP_GT_OQ));
            m = _mm256_and_ps(m, _mm256_cmp_ps(_mm256_mul_ps(_mm256_mul_ps(slx2, slx2), l2),
                                               _mm256_mul_ps(_mm256_mul_ps(lx, lx), sl22),
                                               _CMP_GT_OQ));
            l[i] = _mm256_castps_si256(
                _mm256_blendv_ps(_mm256_castsi256_ps(l[i]), _mm256_castsi256_ps(nl), m));
            lx = _mm256_blendv_ps(lx, slx2, m);
            l2 = _mm256_blendv_ps(l2, sl22, m);
            changed = _mm256_or_ps(changed, m);
        }
        if (!_mm256_movemask_ps(changed)) break;
    }
    const __m256 pos = _mm256_cmp_ps(l2, zero, _CMP_GT_OQ);
    const __m256 s = _mm256_and_ps(pos, _mm256_div_ps(lx, l2));
    _mm256_storeu_ps(sc, _mm256_and_ps(live, s));
    const int lv = _mm256_movemask_ps(live);
    for (int i = 0; i < 16; ++i) {
        int32_t c[8];
        _mm256_storeu_si256((__m256i *)c, l[i]);
        for (int j = 0; j < 8; ++j) L[16 * j + i] = (int8_t)(lv >> j & 1 ? c[j] + 4 : 0);
    }
}

void gq_q3_search16_avx2(const float *restrict x, int8_t *restrict L, float *restrict sc) {
    q3_search8(x, L, sc);
    q3_search8(x + 128, L + 128, sc + 8);
}

/* ---- Q2_K / Q4_K / Q5_K: make_qkx2_quants, eight groups at once ---------- */

/* A try that wins changes `min`, which the following tries read, so the
 * tries of one group cannot run side by side. The groups of a super-block
 * can: lane g runs group g's whole search (its min and max, its tries in
 * order, its winner updates) on values transposed to xt[i][g]. Every lane
 * does exactly the scalar operations, with a blend where the scalar code
 * branches. */
ALWAYS_INLINE __m256 codes_f(__m256 iscale, __m256 xm, __m256i top) {
    const __m256i b =
        _mm256_castps_si256(_mm256_add_ps(_mm256_mul_ps(iscale, xm), _mm256_set1_ps(12582912.f)));
    const __m256i l = _mm256_sub_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x007fffff)),
                                       _mm256_set1_epi32(0x00400000));
    return _mm256_cvtepi32_ps(_mm256_max_epi32(_mm256_setzero_si256(), _mm256_min_epi32(top, l)));
}

ALWAYS_INLINE __m256 err_term(__m256 d, bool use_mad) {
    return use_mad ? _mm256_and_ps(d, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)))
                   : _mm256_mul_ps(d, d);
}

/* Groups g = 0..7 of n (<= 32) values: x + g * n, weights w + g * n; codes
 * to L + g * n, scales and mins (-min) to scale[g], the_min[g]. */
void gq_qkx2_search8_avx2(int n, int nmax, const float *restrict x, const float *restrict w,
                          uint8_t *restrict L, float *restrict the_min, float *restrict scale_out,
                          float rmin, float rdelta, int nstep, bool use_mad) {
    /* Zeroed only because GCC's -O3 flow analysis cannot see that n >= 1
     * rows are written before they are read (callers pass 16 or 32). */
    float xt[32][8] = {{0}}, wt[32][8] = {{0}}, lt[32][8], laux[32][8];
    for (int g = 0; g < 8; g++)
        for (int i = 0; i < n; i++) {
            xt[i][g] = x[g * n + i];
            wt[i][g] = w[g * n + i];
        }
    const __m256i top = _mm256_set1_epi32(nmax);
    const __m256 zero = _mm256_setzero_ps(), vnmax = _mm256_set1_ps((float)nmax);
    __m256 min = _mm256_loadu_ps(xt[0]), max = min, sum_w = _mm256_loadu_ps(wt[0]);
    __m256 sum_x = _mm256_mul_ps(sum_w, min);
    for (int i = 1; i < n; ++i) {
        const __m256 xi = _mm256_loadu_ps(xt[i]), wi = _mm256_loadu_ps(wt[i]);
        min = _mm256_blendv_ps(min, xi, _mm256_cmp_ps(xi, min, _CMP_LT_OQ));
        max = _mm256_blendv_ps(max, xi, _mm256_cmp_ps(xi, max, _CMP_GT_OQ));
        sum_w = _mm256_add_ps(sum_w, wi);
        sum_x = _mm256_add_ps(sum_x, _mm256_mul_ps(wi, xi));
    }
    min = _mm256_blendv_ps(min, zero, _mm256_cmp_ps(min, zero, _CMP_GT_OQ));
    const __m256 flat = _mm256_cmp_ps(max, min, _CMP_EQ_OQ);
    const __m256 range = _mm256_sub_ps(max, min);
    __m256 iscale = _mm256_div_ps(vnmax, range);
    __m256 scale = _mm256_div_ps(_mm256_set1_ps(1.f), iscale);
    __m256 best_error = zero;
    for (int i = 0; i < n; ++i) {
        const __m256 xi = _mm256_loadu_ps(xt[i]);
        const __m256 lf = codes_f(iscale, _mm256_sub_ps(xi, min), top);
        _mm256_storeu_ps(lt[i], lf);
        const __m256 diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(scale, lf), min), xi);
        best_error = _mm256_add_ps(best_error,
                                   _mm256_mul_ps(_mm256_loadu_ps(wt[i]), err_term(diff, use_mad)));
    }
    for (int is = 0; is <= nstep; ++is) {
        /* (rmin + rdelta * is + nmax) / (max - min), min per lane */
        const float c = rmin + rdelta * is + nmax;
        iscale = _mm256_div_ps(_mm256_set1_ps(c), _mm256_sub_ps(max, min));
        __m256 sl = zero, sl2 = zero, sxl = zero;
        for (int i = 0; i < n; ++i) {
            const __m256 xi = _mm256_loadu_ps(xt[i]), wi = _mm256_loadu_ps(wt[i]);
            const __m256 lf = codes_f(iscale, _mm256_sub_ps(xi, min), top);
            _mm256_storeu_ps(laux[i], lf); /* ggml's Laux: read again below */
            const __m256 wl = _mm256_mul_ps(wi, lf);
            sl = _mm256_add_ps(sl, wl);
            sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(wl, lf));
            sxl = _mm256_add_ps(sxl, _mm256_mul_ps(wl, xi));
        }
        const __m256 D = _mm256_sub_ps(_mm256_mul_ps(sum_w, sl2), _mm256_mul_ps(sl, sl));
        __m256 ts =
            _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sum_w, sxl), _mm256_mul_ps(sum_x, sl)), D);
        __m256 tm =
            _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sl2, sum_x), _mm256_mul_ps(sl, sxl)), D);
        const __m256 pos = _mm256_cmp_ps(tm, zero, _CMP_GT_OQ);
        tm = _mm256_andnot_ps(pos, tm);
        ts = _mm256_blendv_ps(ts, _mm256_div_ps(sxl, sl2), pos);
        __m256 err = zero;
        for (int i = 0; i < n; ++i) {
            const __m256 xi = _mm256_loadu_ps(xt[i]);
            const __m256 lf = _mm256_loadu_ps(laux[i]);
            const __m256 diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(ts, lf), tm), xi);
            err =
                _mm256_add_ps(err, _mm256_mul_ps(_mm256_loadu_ps(wt[i]), err_term(diff, use_mad)));
        }
        const __m256 win =
            _mm256_andnot_ps(flat, _mm256_and_ps(_mm256_cmp_ps(D, zero, _CMP_GT_OQ),
                                                 _mm256_cmp_ps(err, best_error, _CMP_LT_OQ)));
        if (_mm256_testz_ps(win, win)) continue;
        /* The winners' codes: this try's. */
        for (int i = 0; i < n; ++i)
            _mm256_storeu_ps(
                lt[i], _mm256_blendv_ps(_mm256_loadu_ps(lt[i]), _mm256_loadu_ps(laux[i]), win));
        best_error = _mm256_blendv_ps(best_error, err, win);
        scale = _mm256_blendv_ps(scale, ts, win);
        min = _mm256_blendv_ps(min, tm, win);
    }
    /* Flat groups: codes 0, scale 0, the_min = -min. */
    scale = _mm256_andnot_ps(flat, scale);
    float vs[8], vm[8], fl[8];
    _mm256_storeu_ps(vs, scale);
    _mm256_storeu_ps(vm, min);
    _mm256_storeu_ps(fl, flat);
    for (int g = 0; g < 8; g++) {
        scale_out[g] = vs[g];
        the_min[g] = -vm[g];
        uint32_t is_flat;
        memcpy(&is_flat, &fl[g], 4);
        for (int i = 0; i < n; i++) L[g * n + i] = is_flat ? 0 : (uint8_t)lt[i][g];
    }
}

/* ---- MXFP4: best_index_mxfp4 for 8 values at a time ------------------------ */

/* For each value the first code of least |KM[i] * d - x|, the codes tried in
 * order with a strict compare, as ggml does; 32 values into 16 bytes. */
void gq_mxfp4_codes_avx2(const float *x, float d, uint8_t *qs) {
    __m256 kd[16];
    const __m256 vd = _mm256_set1_ps(d);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int i = 0; i < 16; i++)
        kd[i] = _mm256_mul_ps(_mm256_set1_ps((float)gguf_kvalues_mxfp4[i]), vd);
    int32_t idx[32];
    for (int j = 0; j < 32; j += 8) {
        const __m256 xv = _mm256_loadu_ps(x + j);
        __m256 best_err = _mm256_and_ps(_mm256_sub_ps(kd[0], xv), absmask);
        __m256i best = _mm256_setzero_si256();
        for (int i = 1; i < 16; i++) {
            const __m256 err = _mm256_and_ps(_mm256_sub_ps(kd[i], xv), absmask);
            const __m256 lt = _mm256_cmp_ps(err, best_err, _CMP_LT_OQ);
            best_err = _mm256_blendv_ps(best_err, err, lt);
            best = _mm256_blendv_epi8(best, _mm256_set1_epi32(i), _mm256_castps_si256(lt));
        }
        _mm256_storeu_si256((__m256i *)(idx + j), best);
    }
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(idx[j] | idx[j + 16] << 4);
}

/* ---- Q8_0 and the ternary types: finite blocks, codes rounded in lanes ----- */

/* Whether the n values (a multiple of 8) are all finite, and then their
 * largest magnitude: ggml's running max from 0, whose result does not depend
 * on the order once no NaN is among them. */
bool gq_finite_absmax_avx2(const float *x, int n, float *amax) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 m = _mm256_setzero_ps(), ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    for (int j = 0; j < n; j += 8) {
        const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + j), absmask);
        ok = _mm256_and_ps(ok, _mm256_cmp_ps(a, inf, _CMP_LT_OQ)); /* false for NaN too */
        m = _mm256_max_ps(m, a);
    }
    if (_mm256_movemask_ps(ok) != 0xff) return false;
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    *amax = _mm_cvtss_f32(h);
    return true;
}

bool gq_all_finite_avx2(const float *x, int n) {
    const __m256i expo = _mm256_set1_epi32(0x7F800000);
    __m256i bad = _mm256_setzero_si256();
    for (int j = 0; j < n; j += 8) {
        const __m256i e = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + j)), expo);
        bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, expo));
    }
    return _mm256_testz_si256(bad, bad);
}

/* gq_round per lane: ties away from zero below 2^23; from there on, and for
 * NaN, the truncating conversion (INT32_MIN out of range, as gq_cvtt). */
ALWAYS_INLINE __m256i round_away(__m256 f) {
    const __m256i t = _mm256_cvttps_epi32(f);
    const __m256 r = _mm256_sub_ps(f, _mm256_cvtepi32_ps(t));
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 small =
        _mm256_cmp_ps(_mm256_and_ps(f, absmask), _mm256_set1_ps(8388608.0f), _CMP_LT_OQ);
    const __m256 up = _mm256_and_ps(small, _mm256_cmp_ps(r, _mm256_set1_ps(0.5f), _CMP_GE_OQ));
    const __m256 down = _mm256_and_ps(small, _mm256_cmp_ps(r, _mm256_set1_ps(-0.5f), _CMP_LE_OQ));
    return _mm256_sub_epi32(_mm256_add_epi32(t, _mm256_castps_si256(down)),
                            _mm256_castps_si256(up)); /* a true mask is -1 */
}

/* dst[i] = the low byte of gq_round(x[i] * id) + add, n a multiple of 8. */
void gq_round_codes_avx2(const float *x, int n, float id, int add, int8_t *dst) {
    const __m256 vid = _mm256_set1_ps(id);
    const __m256i vadd = _mm256_set1_epi32(add);
    const __m256i low =
        _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12,
                         -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i join = _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1);
    for (int j = 0; j < n; j += 8) {
        const __m256i q =
            _mm256_add_epi32(round_away(_mm256_mul_ps(_mm256_loadu_ps(x + j), vid)), vadd);
        const __m256i b = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(q, low), join);
        _mm_storel_epi64((__m128i *)(dst + j), _mm256_castsi256_si128(b));
    }
}

/* ---- Q4_0 / Q4_1 / Q5_0 / Q5_1: codes in lanes -------------------------- */

/* Whether the 32 values are all finite with neither extreme a zero, and
 * then their least and greatest: ggml's strict compares from +-FLT_MAX
 * give the extremes themselves, whatever the order, except that a zero
 * extreme keeps the sign of the first zero it meets (the scalar path's
 * case). */
bool gq_finite_min_max_avx2(const float *x, float *mn, float *mx) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 lo = _mm256_loadu_ps(x), hi = lo, ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    for (int j = 0; j < 32; j += 8) {
        const __m256 v = _mm256_loadu_ps(x + j);
        ok = _mm256_and_ps(ok, _mm256_cmp_ps(_mm256_and_ps(v, absmask), inf, _CMP_LT_OQ));
        lo = _mm256_min_ps(lo, v);
        hi = _mm256_max_ps(hi, v);
    }
    if (_mm256_movemask_ps(ok) != 0xff) return false;
    float l[8], h[8];
    _mm256_storeu_ps(l, lo);
    _mm256_storeu_ps(h, hi);
    float a = l[0], b = h[0];
    for (int k = 1; k < 8; k++) {
        a = l[k] < a ? l[k] : a;
        b = h[k] > b ? h[k] : b;
    }
    if (a == 0.0f || b == 0.0f) return false;
    *mn = a;
    *mx = b;
    return true;
}

/* c[i] = the low byte, sign-extended, of gq_cvtt((x[i] - sub) * id + add)
 * (cvttps2dq gives INT32_MIN where gq_cvtt does), for 32 values; with top
 * >= 0 then at most top. */
void gq_legacy_codes_avx2(const float *x, float sub, float id, float add, int top, int32_t *c) {
    const __m256 vs = _mm256_set1_ps(sub), vi = _mm256_set1_ps(id), va = _mm256_set1_ps(add);
    for (int j = 0; j < 32; j += 8) {
        const __m256 f =
            _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), vs), vi), va);
        __m256i q = _mm256_srai_epi32(_mm256_slli_epi32(_mm256_cvttps_epi32(f), 24), 24);
        if (top >= 0) q = _mm256_min_epi32(q, _mm256_set1_epi32(top));
        _mm256_storeu_si256((__m256i *)(c + j), q);
    }
}
