/* The neighbour search of IQ2_XXS / IQ2_XS / IQ2_S / IQ3_XXS in AVX2, with
 * the scalar path's results (gguf_quant_iqlow.c's best_neighbour = ggml's
 * iq2_find_best_neighbour / iq3_find_best_neighbour).
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

#include "gguf_quant_iqlow_impl.h"

static inline __m256 run_d2(const uint8_t *c, int dim, __m256 vs, const __m256 *x,
                            const __m256 *w) {
    __m256 d2 = _mm256_setzero_ps();
    for (int i = 0; i < dim; ++i) {
        const __m128i b = _mm_loadl_epi64((const __m128i *)(c + 8 * i));
        const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
        const __m256 diff = _mm256_sub_ps(_mm256_mul_ps(vs, q), x[i]);
        d2 = _mm256_add_ps(d2, _mm256_mul_ps(_mm256_mul_ps(w[i], diff), diff));
    }
    return d2;
}

int gq_low_best_neighbour_avx2(const gq_lowgrid *g, int32_t map_value, const float *xval,
                               const float *weight, float scale, int8_t *L) {
    const size_t off = (size_t)(-map_value - 1);
    const uint16_t *nb = g->neighbours + off;
    const uint8_t *coords = g->coords + (size_t)g->dim * (off + 1);
    const int num = nb[0], dim = g->dim, run = 8 * dim;
    const __m256 vs = _mm256_set1_ps(scale);
    __m256 x[8], w[8];
    for (int i = 0; i < dim; ++i) {
        x[i] = _mm256_set1_ps(xval[i]);
        w[i] = _mm256_set1_ps(weight[i]);
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 fmax = _mm256_set1_ps(FLT_MAX);
    __m256 best = _mm256_set1_ps(INFINITY);
    __m256i best_at = _mm256_setzero_si256();
    for (int j = 0; j < num; j += 8, coords += run) {
        const __m256 d2 = run_d2(coords, dim, vs, x, w);
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
    for (int i = 0; i < dim; ++i) L[i] = (int8_t)((gq_low_coord(g, grid_index, i) - 1) / 2);
    return grid_index;
}
