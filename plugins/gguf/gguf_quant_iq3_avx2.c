/* IQ3_S's block search (quantize_row_iq3_s_impl, no importance) in AVX2,
 * with the scalar path's bytes (gguf_quant_iq.c's iq3_block).
 *
 * The time goes to iq3_find_best_neighbour: for each of the 19 scale tries
 * and each group of 4 values off the grid, the weighted squared distance to
 * every grid point of the group's neighbour list (3 to 38 points, 6.9 on
 * average), the least kept. The points are independent, so the lanes hold
 * them: lane l sums point l's 4 terms in ggml's order with ggml's
 * operations (each product rounded, no FMA: this file is built with -mavx2
 * -mf16c -mbmi2 only), reading the points' coordinates from runs of 8
 * prepared with the lists (no gather), and the choice keeps ggml's rule:
 * the first point, in list order, whose distance is strictly less than
 * every earlier one's (NaN never chosen, nothing at or above FLT_MAX). The
 * tries are independent too until ggml picks the best, so their codes are
 * computed first and their sums sumqx / sumq2 run with the tries in lanes,
 * each over the 32 values in order; the pick is then ggml's, try after try.
 * Called only after the run-time CPU check. */
#include <float.h>
#include <immintrin.h>
#include <math.h>

#include "gguf_quant_impl.h"
#include "gguf_tables.h"

/* Lane l's weighted squared distance from the 4 values to candidate l of
 * one run of 8 (coordinates k at c + 8 * k), ggml's terms in ggml's order:
 * d2 = 0, then d2 += weight[i] * diff * diff for i = 0..3, where diff =
 * scale * q - xval[i]. */
static inline __m256 iq3_run_d2(const uint8_t *c, __m256 vs, const __m256 *x, const __m256 *w) {
    __m256 d2 = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
        const __m128i b = _mm_loadl_epi64((const __m128i *)(c + 8 * i));
        const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
        const __m256 diff = _mm256_sub_ps(_mm256_mul_ps(vs, q), x[i]);
        d2 = _mm256_add_ps(d2, _mm256_mul_ps(_mm256_mul_ps(w[i], diff), diff));
    }
    return d2;
}

/* neighbours: count, then that many grid indices; coords: the same list
 * in runs of 8 (gguf_quant_iq.c). */
static int iq3_best_neighbour(const uint16_t *neighbours, const uint8_t *coords, const float *xval,
                              const float *weight, float scale, int8_t *L) {
    const int num = neighbours[0];
    const __m256 vs = _mm256_set1_ps(scale);
    __m256 x[4], w[4];
    for (int i = 0; i < 4; ++i) {
        x[i] = _mm256_set1_ps(xval[i]);
        w[i] = _mm256_set1_ps(weight[i]);
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 inf = _mm256_set1_ps(INFINITY);
    /* Per lane the least distance below FLT_MAX so far (+Inf: none) and its
     * position in the list; a later run replaces it only when strictly less,
     * so each lane keeps its first least. NaN fails the comparison. */
    __m256 best = inf;
    __m256i best_at = _mm256_setzero_si256();
    for (int j = 0; j < num; j += 8, coords += 32) {
        const __m256 d2 = iq3_run_d2(coords, vs, x, w);
        const __m256i at = _mm256_add_epi32(lane, _mm256_set1_epi32(j));
        const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(num), at);
        const __m256 below = _mm256_and_ps(_mm256_cmp_ps(d2, best, _CMP_LT_OQ),
                                           _mm256_cmp_ps(d2, _mm256_set1_ps(FLT_MAX), _CMP_LT_OQ));
        const __m256 take = _mm256_and_ps(below, _mm256_castsi256_ps(live));
        best = _mm256_blendv_ps(best, d2, take);
        best_at = _mm256_blendv_epi8(best_at, at, _mm256_castps_si256(take));
    }
    /* The overall least (no NaN left: min is exact and order-free), then
     * the lowest position among the lanes holding it: the list's first. */
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
    const int grid_index = neighbours[1 + at];
    const uint32_t gp = gguf_iq3s_grid[grid_index];
    for (int i = 0; i < 4; ++i) L[i] = (int8_t)((((gp >> 8 * i) & 0xff) - 1) / 2);
    return grid_index;
}

/* Codes of the 32 values at inverse scale id, nearest_int(0.5 * (id * x -
 * 1)) clamped to 0..7 as iq3_codes computes them (the same float
 * operations; nearest_int's magic-number add and bit extraction). */
static inline void iq3_codes32(const float *xval, float id, int8_t *L) {
    const __m256 vid = _mm256_set1_ps(id), one = _mm256_set1_ps(1), half = _mm256_set1_ps(0.5f);
    const __m256 magic = _mm256_set1_ps(12582912.f);
    __m256i l[4];
    for (int v = 0; v < 4; ++v) {
        const __m256 t = _mm256_mul_ps(
            half, _mm256_sub_ps(_mm256_mul_ps(vid, _mm256_loadu_ps(xval + 8 * v)), one));
        __m256i i = _mm256_castps_si256(_mm256_add_ps(t, magic));
        i = _mm256_sub_epi32(_mm256_and_si256(i, _mm256_set1_epi32(0x007fffff)),
                             _mm256_set1_epi32(0x00400000));
        l[v] = _mm256_min_epi32(_mm256_max_epi32(i, _mm256_setzero_si256()), _mm256_set1_epi32(7));
    }
    /* Pack to bytes in order: packs interleave 128-bit halves, the permute
     * puts them back. */
    const __m256i w01 = _mm256_packs_epi32(l[0], l[1]), w23 = _mm256_packs_epi32(l[2], l[3]);
    const __m256i b = _mm256_packs_epi16(w01, w23);
    const __m256i ordered =
        _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)L, ordered);
}

/* The 4 codes of group k replaced by the listed grid point nearest at
 * this scale when they are off the grid; whether they were on it. */
static inline bool iq3_snap(const gq_iq3_tables *t, const float *xval, const float *waux,
                            float scale, int8_t *L) {
    int u = 0;
    for (int i = 0; i < 4; ++i) u |= L[i] << 3 * i;
    const int gi = t->map[u];
    if (gi >= 0) return true;
    iq3_best_neighbour(t->neighbours + (-gi - 1), t->coords + t->lanes_at[u], xval, waux, scale, L);
    return false;
}

enum { IQ3_TRIES = 19, IQ3_TRY_LANES = 24 };

float gq_iq3_block_avx2(const float *restrict xb, const float *restrict qw, float sigma2,
                        int8_t *restrict L, uint8_t *restrict signs, bool *zero) {
    const gq_iq3_tables *t = gq_iq3_tables_get();
    const int kMaxQ = 8;
    float weight[32], waux[32], xval[32];
    const float max = gq_iq3_block_prepare(xb, qw, sigma2, weight, waux, xval, signs, L);
    *zero = !max;
    if (*zero) return 0;

    /* Every try's codes first (the tries do not depend on one another),
     * also kept by value then try (Lt[24 * i + try]) for the sums. */
    int8_t Laux[IQ3_TRIES][32];
    int8_t Lt[32 * IQ3_TRY_LANES];
    bool on_grid_aux[IQ3_TRIES][8];
    memset(Lt, 0, sizeof Lt);
    for (int c = 0; c < IQ3_TRIES; ++c) {
        const int is = c - 9;
        const float id = (2 * kMaxQ - 1 + is * 0.2f) / max;
        const float this_scale = 1 / id;
        iq3_codes32(xval, id, Laux[c]);
        for (int k = 0; k < 8; ++k)
            on_grid_aux[c][k] =
                iq3_snap(t, xval + 4 * k, waux + 4 * k, this_scale, Laux[c] + 4 * k);
        for (int i = 0; i < 32; ++i) Lt[i * IQ3_TRY_LANES + c] = Laux[c][i];
    }
    /* sumqx, sumq2 of every try, the tries in lanes, each summed over the
     * values in order: w * xval * q and w * q * q as ggml rounds them. */
    __m256 qx[3], q2[3];
    for (int v = 0; v < 3; ++v) qx[v] = q2[v] = _mm256_setzero_ps();
    const __m256i one = _mm256_set1_epi32(1);
    for (int i = 0; i < 32; ++i) {
        const __m256 w = _mm256_set1_ps(weight[i]), wx = _mm256_mul_ps(w, _mm256_set1_ps(xval[i]));
        for (int v = 0; v < 3; ++v) {
            const __m128i b = _mm_loadl_epi64((const __m128i *)(Lt + i * IQ3_TRY_LANES + 8 * v));
            const __m256i l = _mm256_cvtepi8_epi32(b);
            const __m256 q = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_add_epi32(l, l), one));
            qx[v] = _mm256_add_ps(qx[v], _mm256_mul_ps(wx, q));
            q2[v] = _mm256_add_ps(q2[v], _mm256_mul_ps(_mm256_mul_ps(w, q), q));
        }
    }
    float sqx[IQ3_TRY_LANES], sq2[IQ3_TRY_LANES];
    for (int v = 0; v < 3; ++v) {
        _mm256_storeu_ps(sqx + 8 * v, qx[v]);
        _mm256_storeu_ps(sq2 + 8 * v, q2[v]);
    }
    /* ggml's choice, try after try. */
    float best = 0;
    float scale = max / (2 * kMaxQ - 1);
    int chosen = -1;
    for (int c = 0; c < IQ3_TRIES; ++c) {
        const float sumqx = sqx[c], sumq2 = sq2[c];
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            chosen = c;
        }
    }
    int n_not_on_grid = 8;
    if (chosen >= 0) {
        memcpy(L, Laux[chosen], 32);
        n_not_on_grid = 0;
        for (int k = 0; k < 8; ++k) n_not_on_grid += !on_grid_aux[chosen][k];
    }
    if (n_not_on_grid > 0 && scale > 0) {
        const float id = 1 / scale;
        int8_t Lk[32];
        iq3_codes32(xval, id, Lk);
        for (int k = 0; k < 8; ++k) iq3_snap(t, xval + 4 * k, waux + 4 * k, scale, Lk + 4 * k);
        memcpy(L, Lk, 32);
        scale = gq_iq3_refit(weight, xval, L, scale);
    }
    if (scale < 0) { /* ggml: "should never happen" */
        scale = -scale;
        for (int k = 0; k < 4; ++k) signs[k] = (uint8_t)~signs[k];
    }
    return scale;
}
