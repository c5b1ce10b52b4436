/* The neighbour searches of the low-bit i-quants in AVX2, with the scalar
 * paths' results: IQ2_XXS / IQ2_XS / IQ2_S / IQ3_XXS (gguf_quant_iqlow.c's
 * best_neighbour = ggml's iq2_find_best_neighbour / iq3_find_best_neighbour)
 * and IQ1_S / IQ1_M (gguf_quant_iqlow_iq1.c's iq1_best_neighbour = ggml's
 * iq1_find_best_neighbour2, where code l stands for xg[l]).
 *
 * The candidates of a list are independent, so the lanes hold 8 of them:
 * lane c sums candidate c's dim terms in ggml's order with ggml's
 * operations (d2 = 0; d2 += w * diff * diff with diff = scale * q - x, each
 * product rounded; no FMA: this file is built with -mavx2 -mf16c -mbmi2
 * only), reading coordinates from the runs of 8 the tables keep beside the
 * lists. ggml keeps the first candidate whose distance is strictly less
 * than every earlier one and below FLT_MAX; per lane the first least is
 * kept, then the least over lanes, the earliest in list order among equals.
 * Called only after the run-time CPU check. */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "gguf_quant_iqlow_impl.h"

/* Lane c's distance for candidates whose levels (coordinate k of candidate
 * c at byte 8 * k + c of the run) pick terms from T: T[k] lane l holds
 * coordinate k's term at level l, so the sum is ggml's d2, term by term. */
static inline __m256 run_d2(const uint8_t *c, int dim, const __m256 *T) {
    __m256 d2 = _mm256_setzero_ps();
    for (int k = 0; k < dim; ++k) {
        const __m256i l = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(c + 8 * k)));
        d2 = _mm256_add_ps(d2, _mm256_permutevar8x32_ps(T[k], l));
    }
    return d2;
}

/* A coordinate's term w * diff * diff (diff = scale * q - x) has one value
 * per level, as many as the grid has (3, or 8 for IQ3_XXS): computed once
 * per call with ggml's operations, lane l for level l, q = 2l + 1 or, for
 * IQ1 (by_level), xg[l]. The candidates' sums then add the looked-up terms
 * in ggml's order, so every d2 is the scalar one. */
static inline int best_neighbour(const gq_lowgrid *g, int32_t map_value, const float *xval,
                                 const float *weight, float scale, int8_t *L, bool by_level,
                                 const float *xgv) {
    const __m256 q = by_level ? _mm256_setr_ps(xgv[0], xgv[1], xgv[2], 0, 0, 0, 0, 0)
                              : _mm256_setr_ps(1, 3, 5, 7, 9, 11, 13, 15);
    const size_t off = (size_t)(-map_value - 1);
    const uint16_t *nb = g->neighbours + off;
    const uint8_t *coords = g->coords + (size_t)g->dim * (off + 1);
    const int num = nb[0], dim = g->dim, run = 8 * dim;
    const __m256 sq = _mm256_mul_ps(_mm256_set1_ps(scale), q);
    __m256 T[8];
    for (int k = 0; k < dim; ++k) {
        const __m256 diff = _mm256_sub_ps(sq, _mm256_set1_ps(xval[k]));
        T[k] = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(weight[k]), diff), diff);
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 fmax = _mm256_set1_ps(FLT_MAX);
    __m256 best = _mm256_set1_ps(INFINITY);
    __m256i best_at = _mm256_setzero_si256();
    for (int j = 0; j < num; j += 8, coords += run) {
        const __m256 d2 = run_d2(coords, dim, T);
        const __m256i at = _mm256_add_epi32(lane, _mm256_set1_epi32(j));
        const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(num), at);
        const __m256 below =
            _mm256_and_ps(_mm256_cmp_ps(d2, best, _CMP_LT_OQ), _mm256_cmp_ps(d2, fmax, _CMP_LT_OQ));
        const __m256 take = _mm256_and_ps(below, _mm256_castsi256_ps(live));
        best = _mm256_blendv_ps(best, d2, take);
        best_at = _mm256_blendv_epi8(best_at, at, _mm256_castps_si256(take));
    }
    __m256 m = _mm256_min_ps(best, _mm256_permute2f128_ps(best, best, 1));
    m = _mm256_min_ps(m, _mm256_permute_ps(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm256_min_ps(m, _mm256_permute_ps(m, _MM_SHUFFLE(2, 3, 0, 1)));
    int at = 0; /* nothing below FLT_MAX: the first listed point, as the scalar path */
    if (_mm256_cvtss_f32(m) < INFINITY) {
        unsigned hit = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(best, m, _CMP_EQ_OQ));
        if (num <= 8) {
            at = __builtin_ctz(hit);
        } else {
            int pos[8];
            _mm256_storeu_si256((__m256i *)pos, best_at);
            at = num;
            for (; hit; hit &= hit - 1) at = GQ_MIN(at, pos[__builtin_ctz(hit)]);
        }
    }
    const int grid_index = nb[1 + at];
    gq_low_codes(g, grid_index, L);
    return grid_index;
}

int gq_low_best_neighbour_avx2(const gq_lowgrid *g, int32_t map_value, const float *xval,
                               const float *weight, float scale, int8_t *L) {
    return best_neighbour(g, map_value, xval, weight, scale, L, false, NULL);
}

int gq_iq1_best_neighbour_avx2(const gq_lowgrid *g, int32_t map_value, const float *xval,
                               const float *weight, float scale, const float *xg, int8_t *L) {
    return best_neighbour(g, map_value, xval, weight, scale, L, true, xg);
}

/* sumqx = a x0 + m x1 + c x2 and sumq2 = wa x0 x0 + wm x1 x1 + wc x2 x2 in
 * ggml's order (left to right, each product rounded). */
static inline void iq1s_sums(__m256 a, __m256 m, __m256 c, __m256 wa, __m256 wm, __m256 wc,
                             const float *xv, __m256 *qx, __m256 *q2) {
    const __m256 x0 = _mm256_set1_ps(xv[0]), x1 = _mm256_set1_ps(xv[1]), x2 = _mm256_set1_ps(xv[2]);
    *qx = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(a, x0), _mm256_mul_ps(m, x1)),
                        _mm256_mul_ps(c, x2));
    *q2 = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(wa, x0), x0),
                                      _mm256_mul_ps(_mm256_mul_ps(wm, x1), x1)),
                        _mm256_mul_ps(_mm256_mul_ps(wc, x2), x2));
}

/* Lanes where q2 > 0 and qx * qx > best * q2. */
static inline __m256 iq1s_pass(__m256 qx, __m256 q2, __m256 best) {
    return _mm256_and_ps(_mm256_cmp_ps(q2, _mm256_setzero_ps(), _CMP_GT_OQ),
                         _mm256_cmp_ps(_mm256_mul_ps(qx, qx), _mm256_mul_ps(best, q2), _CMP_GT_OQ));
}

void gq_iq1s_split_avx2(const float *sumx, const float *sumw, gq_iq1s_best *b) {
    static const float xp[3] = GQ_IQ1_XP, xm[3] = GQ_IQ1_XM;
    const __m256 x32 = _mm256_set1_ps(sumx[32]), w32 = _mm256_set1_ps(sumw[32]);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int i1 = 0; i1 <= 32; ++i1) {
        const __m256 s1 = _mm256_set1_ps(sumx[i1]), w1 = _mm256_set1_ps(sumw[i1]);
        const __m256 a = _mm256_set1_ps(sumx[i1] - sumx[0]),
                     wa = _mm256_set1_ps(sumw[i1] - sumw[0]);
        for (int i2 = i1; i2 <= 32; i2 += 8) {
            const __m256 s2 = _mm256_loadu_ps(sumx + i2), w2 = _mm256_loadu_ps(sumw + i2);
            const __m256 m = _mm256_sub_ps(s2, s1), c = _mm256_sub_ps(x32, s2);
            const __m256 wm = _mm256_sub_ps(w2, w1), wc = _mm256_sub_ps(w32, w2);
            __m256 qx_p, q2_p, qx_m, q2_m;
            iq1s_sums(a, m, c, wa, wm, wc, xp, &qx_p, &q2_p);
            iq1s_sums(a, m, c, wa, wm, wc, xm, &qx_m, &q2_m);
            const __m256 best = _mm256_set1_ps(b->best_score);
            const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(33 - i2), lane);
            const __m256 pass = _mm256_and_ps(
                _mm256_or_ps(iq1s_pass(qx_p, q2_p, best), iq1s_pass(qx_m, q2_m, best)),
                _mm256_castsi256_ps(live));
            if (_mm256_testz_ps(pass, pass)) continue; /* no test passes: nothing changes */
            float v[4][8];
            _mm256_storeu_ps(v[0], qx_p);
            _mm256_storeu_ps(v[1], q2_p);
            _mm256_storeu_ps(v[2], qx_m);
            _mm256_storeu_ps(v[3], q2_m);
            const int n = GQ_MIN(8, 33 - i2);
            for (int l = 0; l < n; ++l)
                gq_iq1s_pick(b, i1, i2 + l, v[0][l], v[1][l], v[2][l], v[3][l]);
        }
    }
}

/* Codes of n (16 or 32) values at inverse scale id into L (32 bytes
 * written): nearest_int(0.5 * (id * x - 1)) clamped to 0..top, the scalar
 * path's float operations and magic-number rounding. u[k] receives group
 * k's map index (gq_low_lookup's: code i of the group at bit bits * i;
 * the codes are not negative, so the sum of the shifted codes is it). */
static inline void codes_avx2(const float *xval, int n, float id, int top, int dim, int bits,
                              int8_t *L, int *u) {
    const __m256 vid = _mm256_set1_ps(id), one = _mm256_set1_ps(1), half = _mm256_set1_ps(0.5f);
    const __m256 magic = _mm256_set1_ps(12582912.f);
    const __m256i shift = dim == 8 ? _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)
                                   : _mm256_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3);
    const __m256i sh = _mm256_mullo_epi32(shift, _mm256_set1_epi32(bits));
    __m256i l[4];
    for (int v = 0; v < 4; ++v) {
        if (8 * v >= n) {
            l[v] = _mm256_setzero_si256();
            continue;
        }
        const __m256 t = _mm256_mul_ps(
            half, _mm256_sub_ps(_mm256_mul_ps(vid, _mm256_loadu_ps(xval + 8 * v)), one));
        __m256i i = _mm256_castps_si256(_mm256_add_ps(t, magic));
        i = _mm256_sub_epi32(_mm256_and_si256(i, _mm256_set1_epi32(0x007fffff)),
                             _mm256_set1_epi32(0x00400000));
        l[v] =
            _mm256_min_epi32(_mm256_max_epi32(i, _mm256_setzero_si256()), _mm256_set1_epi32(top));
        /* Each 128-bit half's four shifted codes summed into its lane 0. */
        __m256i p = _mm256_sllv_epi32(l[v], sh);
        p = _mm256_hadd_epi32(p, p);
        p = _mm256_hadd_epi32(p, p);
        const int lo = _mm256_cvtsi256_si32(p),
                  hi = _mm_cvtsi128_si32(_mm256_extracti128_si256(p, 1));
        if (dim == 8) {
            u[v] = lo + hi;
        } else {
            u[2 * v] = lo;
            u[2 * v + 1] = hi;
        }
    }
    /* Packs interleave the 128-bit halves; the permute restores the order. */
    const __m256i w01 = _mm256_packs_epi32(l[0], l[1]), w23 = _mm256_packs_epi32(l[2], l[3]);
    const __m256i b = _mm256_packs_epi16(w01, w23);
    _mm256_storeu_si256((__m256i *)L,
                        _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

enum { TRY_LANES = 32 };

/* The codes of 8 tries (rows of 32) transposed: Lt[TRY_LANES * i + j] =
 * rows[j][i]. Three rounds of unpacks leave, in each vector, the 8 codes
 * of values i0, i0 + 1 (low half) and i0 + 16, i0 + 17 (high half). */
static inline void transpose8(const int8_t (*rows)[32], int8_t *Lt) {
    __m256i r[8], a[8], b[8];
    for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_si256((const __m256i *)rows[j]);
    for (int j = 0; j < 4; ++j) { /* a[2j + h]: rows 2j, 2j + 1; values 8h.. and 16 + 8h.. */
        a[2 * j] = _mm256_unpacklo_epi8(r[2 * j], r[2 * j + 1]);
        a[2 * j + 1] = _mm256_unpackhi_epi8(r[2 * j], r[2 * j + 1]);
    }
    for (int h = 0; h < 2; ++h) /* b[4h + 2q + s]: rows 4q..4q + 3; values 8h + 4s.. */
        for (int q = 0; q < 2; ++q) {
            b[4 * h + 2 * q] = _mm256_unpacklo_epi16(a[4 * q + h], a[4 * q + 2 + h]);
            b[4 * h + 2 * q + 1] = _mm256_unpackhi_epi16(a[4 * q + h], a[4 * q + 2 + h]);
        }
    for (int h = 0; h < 2; ++h)
        for (int s = 0; s < 2; ++s)
            for (int t = 0; t < 2; ++t) {
                const __m256i lo = b[4 * h + s], hi = b[4 * h + 2 + s];
                const __m256i c = t ? _mm256_unpackhi_epi32(lo, hi) : _mm256_unpacklo_epi32(lo, hi);
                const int i0 = 8 * h + 4 * s + 2 * t;
                const __m128i c0 = _mm256_castsi256_si128(c), c1 = _mm256_extracti128_si256(c, 1);
                _mm_storel_epi64((__m128i *)(Lt + TRY_LANES * i0), c0);
                _mm_storel_epi64((__m128i *)(Lt + TRY_LANES * (i0 + 1)),
                                 _mm_unpackhi_epi64(c0, c0));
                _mm_storel_epi64((__m128i *)(Lt + TRY_LANES * (i0 + 16)), c1);
                _mm_storel_epi64((__m128i *)(Lt + TRY_LANES * (i0 + 17)),
                                 _mm_unpackhi_epi64(c1, c1));
            }
}

float gq_low_scale_search_avx2(const gq_lowgrid *g, int n, const float *xval, const float *weight,
                               const float *waux, float top, int nis, float step, int kmaxq,
                               float scale, int8_t *L, bool none_on, bool *on_grid) {
    const int nt = 2 * nis + 1, ng = n / g->dim, dim = g->dim;
    const int nv = (nt + 7) / 8;
    int8_t Laux[TRY_LANES][32];
    bool on_aux[TRY_LANES][8];
    int8_t Lt[32 * TRY_LANES]; /* Lt[TRY_LANES * i + c]: code of value i in try c */
    /* The lanes past the last try are summed too (and never read). */
    memset(Laux[nt], 0, (size_t)(8 * nv - nt) * sizeof Laux[0]);
    /* Every try's codes first: the tries do not depend on one another.
     * The lists are scattered over a table larger than the caches, so all
     * the lookups come first with their lists fetched ahead, then the
     * searches. */
    int32_t map[TRY_LANES][8];
    float id_of[TRY_LANES];
    for (int c = 0; c < nt; ++c) {
        const int is = c - nis;
        int u[8];
        id_of[c] = (2 * kmaxq - 1 + is * step) / top;
        codes_avx2(xval, n, id_of[c], kmaxq - 1, dim, g->bits, Laux[c], u);
        for (int k = 0; k < ng; ++k) {
            const int32_t m = map[c][k] = g->map[u[k]];
            on_aux[c][k] = m >= 0;
            if (m < 0) {
                const size_t off = (size_t)(-m - 1);
                _mm_prefetch((const char *)(g->neighbours + off), _MM_HINT_T0);
                _mm_prefetch((const char *)(g->coords + (size_t)dim * (off + 1)), _MM_HINT_T0);
            }
        }
    }
    for (int c = 0; c < nt; ++c) {
        const float this_scale = 1 / id_of[c];
        for (int k = 0; k < ng; ++k)
            if (map[c][k] < 0)
                best_neighbour(g, map[c][k], xval + dim * k, waux + dim * k, this_scale,
                               Laux[c] + dim * k, false, NULL);
    }
    for (int v = 0; v < nv; ++v) transpose8((const int8_t(*)[32])Laux[8 * v], Lt + 8 * v);
    /* sumqx, sumq2 of every try, tries in lanes, each over the values in
     * order: (w * x) * q and (w * q) * q as the scalar path rounds them. */
    __m256 qx[4], q2[4];
    for (int v = 0; v < nv; ++v) qx[v] = q2[v] = _mm256_setzero_ps();
    const __m256i one = _mm256_set1_epi32(1);
    for (int i = 0; i < n; ++i) {
        const __m256 w = _mm256_set1_ps(weight[i]), wx = _mm256_set1_ps(weight[i] * xval[i]);
        for (int v = 0; v < nv; ++v) {
            const __m128i b = _mm_loadl_epi64((const __m128i *)(Lt + TRY_LANES * i + 8 * v));
            const __m256i l = _mm256_cvtepi8_epi32(b);
            const __m256 q = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_add_epi32(l, l), one));
            qx[v] = _mm256_add_ps(qx[v], _mm256_mul_ps(wx, q));
            q2[v] = _mm256_add_ps(q2[v], _mm256_mul_ps(_mm256_mul_ps(w, q), q));
        }
    }
    float sqx[TRY_LANES], sq2[TRY_LANES];
    for (int v = 0; v < nv; ++v) {
        _mm256_storeu_ps(sqx + 8 * v, qx[v]);
        _mm256_storeu_ps(sq2 + 8 * v, q2[v]);
    }
    const int chosen = gq_low_pick_try(nt, sqx, sq2, &scale);
    for (int k = 0; k < ng; ++k) on_grid[k] = chosen < 0 ? none_on : on_aux[chosen][k];
    if (chosen >= 0) memcpy(L, Laux[chosen], (size_t)n);
    return scale;
}

void gq_iq1m_split_avx2(const float term[3][16][8], gq_iq1s_best *b) {
    const __m256 zero = _mm256_setzero_ps();
    __m256 head = zero; /* the sums over sorted values 0..i1-1 at code 0 */
    for (int i1 = 0; i1 <= 16; ++i1) {
        /* s[i2]: the sums up to i2 (code 1 from i1), then the tail at code
         * 2 added value after value: the splits' chains are independent,
         * so they advance side by side, each in ggml's order. */
        __m256 s[17], mid = head;
        for (int i2 = i1; i2 <= 16; ++i2) {
            s[i2] = mid;
            if (i2 < 16) mid = _mm256_add_ps(mid, _mm256_loadu_ps(term[1][i2]));
        }
        for (int j = i1; j < 16; ++j) {
            const __m256 t = _mm256_loadu_ps(term[2][j]);
            for (int i2 = i1; i2 <= j; ++i2) s[i2] = _mm256_add_ps(s[i2], t);
        }
        /* ggml's tests in order; a split none of whose four passes against
         * the best so far changes nothing. */
        for (int i2 = i1; i2 <= 16; ++i2) {
            const __m256 q2 = _mm256_permute2f128_ps(s[i2], s[i2], 0x01);
            const __m256 pass = _mm256_and_ps(
                _mm256_cmp_ps(q2, zero, _CMP_GT_OQ),
                _mm256_cmp_ps(_mm256_mul_ps(s[i2], s[i2]),
                              _mm256_mul_ps(_mm256_set1_ps(b->best_score), q2), _CMP_GT_OQ));
            if (!(_mm256_movemask_ps(pass) & 0xF)) continue;
            float v[8];
            _mm256_storeu_ps(v, s[i2]);
            for (int k = 0; k < 4; ++k)
                if (v[4 + k] > 0 && v[k] * v[k] > b->best_score * v[4 + k]) {
                    b->scale = v[k] / v[4 + k];
                    b->best_score = b->scale * v[k];
                    b->i1 = i1;
                    b->i2 = i2;
                    b->shift = k;
                }
        }
        if (i1 < 16) head = _mm256_add_ps(head, _mm256_loadu_ps(term[0][i1]));
    }
}
