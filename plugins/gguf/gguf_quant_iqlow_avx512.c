/* The neighbour search and scale search of IQ2_XXS / IQ2_XS / IQ2_S /
 * IQ3_XXS / IQ3_S in AVX-512, with the scalar paths' results (see
 * gguf_quant_iqlow_avx2.c for the discipline this file keeps: every sum in
 * ggml's order with ggml's operations, no FMA, first least on ties).
 *
 * The neighbour search holds 16 candidates in the lanes (two of the tables'
 * runs of 8). The scale search holds 16 tries in the lanes from the start:
 * value i's code in every try is one vector (id in lanes, x broadcast), so
 * the codes come out already transposed for the tries' sums, and the group
 * map indices accumulate in lanes too. Called only after the run-time CPU
 * check; built into the *_avx512emu tests against SIMDe as well. */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "gguf_quant_iqlow_impl.h"

/* One list's best candidate (index into the list), dim a constant after
 * inlining. T[k] lane l: coordinate k's term w * diff * diff at level l. */
static inline int neighbour16(const gq_lowgrid *g, int32_t map_value, const float *xval,
                              const float *weight, float scale, int dim) {
    const __m512 q = _mm512_setr_ps(1, 3, 5, 7, 9, 11, 13, 15, 0, 0, 0, 0, 0, 0, 0, 0);
    const size_t off = (size_t)(-map_value - 1);
    const uint16_t *nb = g->neighbours + off;
    const uint8_t *coords = g->coords + (size_t)dim * (off + 1);
    const int num = nb[0], run = 8 * dim;
    const __m512 sq = _mm512_mul_ps(_mm512_set1_ps(scale), q);
    __m512 T[8];
    for (int k = 0; k < dim; ++k) {
        const __m512 diff = _mm512_sub_ps(sq, _mm512_set1_ps(xval[k]));
        T[k] = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(weight[k]), diff), diff);
    }
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 fmax = _mm512_set1_ps(FLT_MAX);
    __m512 best = _mm512_set1_ps(INFINITY);
    __m512i best_at = _mm512_setzero_si512();
    for (int j = 0; j < num; j += 16, coords += 2 * run) {
        /* The second run only where the list has one (the last list's
         * would lie past the table). */
        const bool two = j + 8 < num;
        __m512 d2 = _mm512_setzero_ps();
        for (int k = 0; k < dim; ++k) {
            __m128i c = _mm_loadl_epi64((const __m128i *)(coords + 8 * k));
            if (two)
                c = _mm_unpacklo_epi64(c, _mm_loadl_epi64((const __m128i *)(coords + run + 8 * k)));
            d2 = _mm512_add_ps(d2, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(c), T[k]));
        }
        const __m512i at = _mm512_add_epi32(lane, _mm512_set1_epi32(j));
        const __mmask16 take = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(num), at) &
                               _mm512_cmp_ps_mask(d2, best, _CMP_LT_OQ) &
                               _mm512_cmp_ps_mask(d2, fmax, _CMP_LT_OQ);
        best = _mm512_mask_mov_ps(best, take, d2);
        best_at = _mm512_mask_mov_epi32(best_at, take, at);
    }
    /* best holds no NaN (a lane takes only values less than its best). */
    __m512 m = best;
    for (int d = 8; d; d /= 2) /* lane l against lane l ^ d */
        m = _mm512_min_ps(m,
                          _mm512_permutexvar_ps(_mm512_xor_si512(lane, _mm512_set1_epi32(d)), m));
    /* Every lane holds the least now. Nothing below FLT_MAX: the first
     * listed point. */
    if (!(_mm_cvtss_f32(_mm512_castps512_ps128(m)) < INFINITY)) return 0;
    unsigned hit = _mm512_cmp_ps_mask(best, m, _CMP_EQ_OQ);
    if (num <= 16) return __builtin_ctz(hit);
    int pos[16], at = num;
    _mm512_storeu_si512(pos, best_at);
    for (; hit; hit &= hit - 1) at = GQ_MIN(at, pos[__builtin_ctz(hit)]);
    return at;
}

static inline int neighbour_index(const gq_lowgrid *g, int32_t map_value, const float *xval,
                                  const float *weight, float scale) {
    const uint16_t *nb = g->neighbours + (-map_value - 1);
    const int at = g->dim == 4 ? neighbour16(g, map_value, xval, weight, scale, 4)
                               : neighbour16(g, map_value, xval, weight, scale, 8);
    return nb[1 + at];
}

int gq_low_best_neighbour_avx512(const gq_lowgrid *g, int32_t map_value, const float *xval,
                                 const float *weight, float scale, int8_t *L) {
    const int grid_index = neighbour_index(g, map_value, xval, weight, scale);
    gq_low_codes(g, grid_index, L);
    return grid_index;
}

enum { TRIES = 32 };

/* Every try's codes, tries in lanes: Lt[TRIES * i + c] the code of value i
 * in try c (nearest_int(0.5 * (id * x - 1)) clamped to 0..top, the scalar
 * path's operations and magic-number rounding), U[k][c] group k's map
 * index (code i of the group at bit bits * i). */
static inline void codes_by_try(const float *xval, int n, const __m512 *vid, int nv, int top,
                                int dim, int bits, int8_t *Lt, int32_t (*U)[TRIES]) {
    const __m512 one = _mm512_set1_ps(1), half = _mm512_set1_ps(0.5f);
    const __m512 magic = _mm512_set1_ps(12582912.f);
    const __m512i mant = _mm512_set1_epi32(0x007fffff), bias = _mm512_set1_epi32(0x00400000);
    const __m512i zero = _mm512_setzero_si512(), vtop = _mm512_set1_epi32(top);
    __m512i u[2] = {zero, zero};
    for (int i = 0; i < n; ++i) {
        const __m512 x = _mm512_set1_ps(xval[i]);
        const __m512i sh = _mm512_set1_epi32(bits * (i % dim));
        for (int v = 0; v < nv; ++v) {
            const __m512 t = _mm512_mul_ps(half, _mm512_sub_ps(_mm512_mul_ps(vid[v], x), one));
            __m512i l = _mm512_castps_si512(_mm512_add_ps(t, magic));
            l = _mm512_sub_epi32(_mm512_and_si512(l, mant), bias);
            l = _mm512_min_epi32(_mm512_max_epi32(l, zero), vtop);
            _mm_storeu_si128((__m128i *)(Lt + TRIES * i + 16 * v), _mm512_cvtepi32_epi8(l));
            u[v] = _mm512_or_si512(u[v], _mm512_sllv_epi32(l, sh));
        }
        if (i % dim == dim - 1) {
            for (int v = 0; v < nv; ++v) {
                _mm512_storeu_si512(U[i / dim] + 16 * v, u[v]);
                u[v] = zero;
            }
        }
    }
}

float gq_low_scale_search_avx512(const gq_lowgrid *g, int n, const float *xval, const float *weight,
                                 const float *waux, float top, int nis, float step, int kmaxq,
                                 float scale, int8_t *L, bool none_on, bool *on_grid) {
    const int nt = 2 * nis + 1, ng = n / g->dim, dim = g->dim;
    const int nv = (nt + 15) / 16;
    float id_of[TRIES];
    /* Lanes past the last try get id 0 (codes 0): computed, never read. */
    for (int c = 0; c < 16 * nv; ++c) {
        const int is = c - nis;
        id_of[c] = c < nt ? (2 * kmaxq - 1 + is * step) / top : 0;
    }
    __m512 vid[2];
    for (int v = 0; v < nv; ++v) vid[v] = _mm512_loadu_ps(id_of + 16 * v);
    int8_t Lt[32 * TRIES];
    int32_t U[8][TRIES];
    codes_by_try(xval, n, vid, nv, kmaxq - 1, dim, g->bits, Lt, U);
    /* The lookups first, the groups off the grid gathered without a branch
     * (which group is off is a coin toss) and their lists fetched ahead
     * (scattered over a table larger than the caches), then the searches,
     * whose codes (the levels the tables keep beside the lists) replace the
     * group's in its try's lane. */
    int32_t map[8][TRIES];
    uint16_t off_grid[8 * TRIES];
    int noff = 0;
    for (int k = 0; k < ng; ++k)
        for (int c = 0; c < nt; ++c) {
            const int32_t m = map[k][c] = g->map[U[k][c]];
            off_grid[noff] = (uint16_t)(TRIES * k + c);
            noff += m < 0;
        }
    for (int j = 0; j < noff; ++j) {
        const size_t off = (size_t)(-map[off_grid[j] / TRIES][off_grid[j] % TRIES] - 1);
        _mm_prefetch((const char *)(g->neighbours + off), _MM_HINT_T0);
        _mm_prefetch((const char *)(g->coords + (size_t)dim * (off + 1)), _MM_HINT_T0);
    }
    for (int j = 0; j < noff; ++j) {
        const int k = off_grid[j] / TRIES, c = off_grid[j] % TRIES;
        const int32_t m = map[k][c];
        const int at = dim == 4 ? neighbour16(g, m, xval + 4 * k, waux + 4 * k, 1 / id_of[c], 4)
                                : neighbour16(g, m, xval + 8 * k, waux + 8 * k, 1 / id_of[c], 8);
        const uint8_t *levels = g->coords + (size_t)dim * ((size_t)(-m - 1) + 1) +
                                (size_t)(8 * dim) * (size_t)(at / 8) + at % 8;
        for (int i = 0; i < dim; ++i) Lt[TRIES * (dim * k + i) + c] = (int8_t)levels[8 * i];
    }
    /* sumqx, sumq2 of every try, each over the values in order: (w * x) * q
     * and (w * q) * q as the scalar path rounds them. */
    __m512 qx[2], q2[2];
    for (int v = 0; v < nv; ++v) qx[v] = q2[v] = _mm512_setzero_ps();
    const __m512i one = _mm512_set1_epi32(1);
    for (int i = 0; i < n; ++i) {
        const __m512 w = _mm512_set1_ps(weight[i]), wx = _mm512_set1_ps(weight[i] * xval[i]);
        for (int v = 0; v < nv; ++v) {
            const __m512i l =
                _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(Lt + TRIES * i + 16 * v)));
            const __m512 q = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_add_epi32(l, l), one));
            qx[v] = _mm512_add_ps(qx[v], _mm512_mul_ps(wx, q));
            q2[v] = _mm512_add_ps(q2[v], _mm512_mul_ps(_mm512_mul_ps(w, q), q));
        }
    }
    float sqx[TRIES], sq2[TRIES];
    for (int v = 0; v < nv; ++v) {
        _mm512_storeu_ps(sqx + 16 * v, qx[v]);
        _mm512_storeu_ps(sq2 + 16 * v, q2[v]);
    }
    const int chosen = gq_low_pick_try(nt, sqx, sq2, &scale);
    for (int k = 0; k < ng; ++k) on_grid[k] = chosen < 0 ? none_on : map[k][chosen] >= 0;
    if (chosen >= 0)
        for (int i = 0; i < n; ++i) L[i] = Lt[TRIES * i + chosen];
    return scale;
}
