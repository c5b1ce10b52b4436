/* IQ3_S's block search (quantize_row_iq3_s_impl, no importance) in AVX2,
 * with the scalar path's bytes (gguf_quant_iq.c's iq3_block).
 *
 * The time goes to iq3_find_best_neighbour: for each of the 19 scale tries
 * and each group of 4 values off the grid, the weighted squared distance to
 * every grid point of the group's neighbour list (3 to 38 points, 6.9 on
 * average), the least kept: gguf_quant_iqlow_avx2.c's search, shared
 * with the low-bit i-quants (the points in lanes, ggml's sums and rule). The
 * tries are independent too until ggml picks the best, so their codes are
 * computed first and their sums sumqx / sumq2 run with the tries in lanes,
 * each over the 32 values in order; the pick is then ggml's, try after try.
 * Called only after the run-time CPU check. */
#include <float.h>
#include <immintrin.h>
#include <math.h>

#include "gguf_quant_impl.h"
#include "gguf_quant_iqlow_impl.h"
#include "gguf_tables.h"

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
static inline bool iq3_snap(const gq_lowgrid *t, const float *xval, const float *waux, float scale,
                            int8_t *L) {
    const int32_t gi = gq_low_lookup(t, L);
    if (gi >= 0) return true;
    gq_low_best_neighbour_avx2(t, gi, xval, waux, scale, L);
    return false;
}

enum { IQ3_TRIES = 19, IQ3_TRY_LANES = 24 };

float gq_iq3_block_avx2(const float *restrict xb, int8_t *restrict L, uint8_t *restrict signs,
                        bool *zero) {
    const gq_lowgrid *t = gq_lowgrid_get(GQ_LOW_IQ3S);
    const int kMaxQ = 8;
    float weight[32], waux[32], xval[32];
    const float max = gq_iq3_block_prepare(xb, weight, waux, xval, signs, L);
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
