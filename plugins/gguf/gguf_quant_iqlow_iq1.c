/* Low-bit i-quants with importance weights, part 2: IQ1_S and IQ1_M
 * (quantize_row_iq1_s_impl / quantize_row_iq1_m_impl of
 * ggml/src/ggml-quants.c, llama.cpp 3af988fab), on the 2048-point grid of
 * gguf_quant_iqlow.c.
 *
 * Both solve the weighted least-squares split of a block into the three
 * values -1, 0, +1 (shifted by +-IQ1_DELTA) exhaustively over the values
 * sorted: every pair of boundaries (i1, i2). IQ1_S sums with prefix sums as
 * ggml does. IQ1_M's ggml code re-adds the whole block for every pair; its
 * eight running sums (sumqx and sumq2 of four sign choices) are each a
 * sequence of additions in sorted order, so the sum after the first j terms
 * is the same number however it is reached: the sums up to i1, then up to
 * i2, are carried from pair to pair and only the tail is added per pair,
 * which gives ggml's values with a fraction of its additions. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_dequant.h"
#include "gguf_quant_iqlow_impl.h"

/* ---- glibc's qsort (merge sort) for the value order ------------------------ */

static bool sort_greater(float l, float r) { /* iq1_sort_helper(l, r) > 0 */
    return l > r;
}

static void msort(const float *val, int *b, int n, int *tmp) {
    if (n <= 1) return;
    const int n1 = n / 2, n2 = n - n1;
    int *b1 = b, *b2 = b + n1;
    msort(val, b1, n1, tmp);
    msort(val, b2, n2, tmp);
    int i1 = 0, i2 = 0, t = 0;
    while (i1 < n1 && i2 < n2) {
        if (!sort_greater(val[b1[i1]], val[b2[i2]]))
            tmp[t++] = b1[i1++];
        else
            tmp[t++] = b2[i2++];
    }
    while (i1 < n1) tmp[t++] = b1[i1++];
    /* The rest of b2 is already in place. */
    memcpy(b, tmp, (size_t)t * sizeof *b);
}

/* Without NaN the order is a strict weak one and every stable sort gives
 * msort's result: the values as order-preserving integers (both zeros
 * equal), the index below them for stability, sorted by insertion. */
static bool sort_by_keys(const float *val, int n, int *idx) {
    uint64_t key[32];
    for (int j = 0; j < n; ++j) {
        if (val[j] != val[j]) return false;
        uint32_t u = val[j] == 0 ? 0 : amn_f32_bits(val[j]);
        u = u & 0x80000000u ? ~u : u | 0x80000000u;
        const uint64_t kj = (uint64_t)u << 32 | (uint32_t)j;
        int at = j;
        while (at > 0 && key[at - 1] > kj) {
            key[at] = key[at - 1];
            --at;
        }
        key[at] = kj;
    }
    for (int j = 0; j < n; ++j) idx[j] = (int)(uint32_t)key[j];
    return true;
}

void gq_iq1_sort(const float *val, int n, int *idx) {
    if (sort_by_keys(val, n, idx)) return;
    int tmp[32];
    for (int j = 0; j < n; ++j) idx[j] = j;
    msort(val, idx, n, tmp);
}

/* ---- the neighbour search on the shifted values ----------------------------- */

/* ggml's iq1_find_best_neighbour2: the listed point of least weighted
 * distance, each code l standing for xg[l]. ggml falls back to a scan of
 * the whole grid when no distance is below FLT_MAX (that scan reads past
 * xval: only NaN / Inf / overflowing input reaches it) and aborts when that
 * fails too; here the first listed point is taken. */
static int iq1_best_neighbour(const gq_lowgrid *g, int32_t map_value, const float *xval,
                              const float *weight, float scale, const float *xg, int8_t *L) {
    const uint16_t *nb = gq_low_list(g, map_value);
    const int num = nb[0];
    float best = FLT_MAX;
    int grid_index = -1;
    for (int j = 1; j <= num; ++j) {
        float d2 = 0;
        for (int i = 0; i < 8; ++i) {
            const float q = xg[(gq_low_coord(g, nb[j], i) - 1) / 2];
            const float w = weight[i];
            const float diff = scale * q - xval[i];
            d2 += w * diff * diff;
        }
        if (d2 < best) {
            best = d2;
            grid_index = nb[j];
        }
    }
    if (grid_index < 0) grid_index = nb[1];
    gq_low_codes(g, grid_index, L);
    return grid_index;
}

typedef int (*iq1_nb_fn)(const gq_lowgrid *g, int32_t map_value, const float *xval,
                         const float *weight, float scale, const float *xg, int8_t *L);
typedef void (*iq1_split_fn)(const float *sumx, const float *sumw, gq_iq1s_best *b);

/* The neighbour search of the path: AVX2 where the CPU has it. */
static iq1_nb_fn iq1_neighbour_fn(amn_simd level) {
#if AMN_GGUF_QUANT_AVX2
    if (level >= AMN_SIMD_AVX2 && gguf_simd_max() >= AMN_SIMD_AVX2)
        return gq_iq1_best_neighbour_avx2;
#else
    (void)level;
#endif
    return iq1_best_neighbour;
}

/* Grid indices of the groups of 8 codes in L (n values), off-grid groups
 * replaced by their nearest listed point; xx_of(k) the shifted values of
 * group k. Returns whether all were on the grid. */
static bool iq1_snap(const gq_lowgrid *g, int n, const float *xb, const float *weight, float scale,
                     const float *const *xx, int8_t *L, uint16_t *index, iq1_nb_fn nbf) {
    bool all_on_grid = true;
    for (int k = 0; k < n / 8; ++k) {
        int32_t m = gq_low_lookup(g, L + 8 * k);
        if (m < 0) {
            all_on_grid = false;
            m = nbf(g, m, xb + 8 * k, weight + 8 * k, scale, xx[k], L + 8 * k);
        }
        index[k] = (uint16_t)m;
    }
    return all_on_grid;
}

/* ggml's refit after a snap: sumqx, sumq2 over the chosen points' values. */
static float iq1_refit(const gq_lowgrid *g, int n, const float *xb, const float *weight,
                       const float *const *xx, const uint16_t *index, float scale) {
    float sumqx = 0, sumq2 = 0;
    for (int k = 0; k < n / 8; ++k)
        for (int j = 0; j < 8; ++j) {
            const float w = weight[8 * k + j];
            const float q = xx[k][(gq_low_coord(g, index[k], j) - 1) / 2];
            sumqx += w * q * xb[8 * k + j];
            sumq2 += w * q * q;
        }
    return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : scale;
}

static float sum_squares(const float *x) {
    float s = 0;
    for (int i = 0; i < 256; ++i) s += x[i] * x[i];
    return s;
}

static float abs_max(int n, const float *x) {
    float max = fabsf(x[0]);
    for (int i = 1; i < n; ++i) max = GQ_MAX(max, fabsf(x[i]));
    return max;
}

/* Codes from the best split: 0 below i1, 1 below i2, 2 after (sorted). */
static void split_codes(int n, const int *idx, int i1, int i2, int8_t *L) {
    for (int j = 0; j < n; ++j) L[idx[j]] = (int8_t)(j < i1 ? 0 : j < i2 ? 1 : 2);
}

/* ---- IQ1_S: d (F16), qs[32], qh[8] (u16: 3 x 3 high index bits, 3-bit
 * scale, delta sign) ---------------------------------------------------------- */

static const float x_p[3] = GQ_IQ1_XP;
static const float x_m[3] = GQ_IQ1_XM;

/* ggml's search over every split (i1 <= i2) of the sorted values, from the
 * prefix sums: sumqx and sumq2 of the three groups at each shift. */
static void iq1_s_split(const float *sumx, const float *sumw, gq_iq1s_best *b) {
    for (int i1 = 0; i1 <= 32; ++i1)
        for (int i2 = i1; i2 <= 32; ++i2) {
            const float a = sumx[i1] - sumx[0], m = sumx[i2] - sumx[i1], c = sumx[32] - sumx[i2];
            const float wa = sumw[i1] - sumw[0], wm = sumw[i2] - sumw[i1], wc = sumw[32] - sumw[i2];
            gq_iq1s_pick(b, i1, i2, a * x_p[0] + m * x_p[1] + c * x_p[2],
                         wa * x_p[0] * x_p[0] + wm * x_p[1] * x_p[1] + wc * x_p[2] * x_p[2],
                         a * x_m[0] + m * x_m[1] + c * x_m[2],
                         wa * x_m[0] * x_m[0] + wm * x_m[1] * x_m[1] + wc * x_m[2] * x_m[2]);
        }
}

/* One 32-value block: grid indices, *shift (+1 / -1). Returns the scale
 * (0 for a block stored as zero: then shift 1, no indices). */
static float iq1_s_block(const gq_lowgrid *g, const float *xb, const float *qw, float sigma2,
                         uint16_t *index, int *shift, iq1_nb_fn nbf, iq1_split_fn split) {
    float weight[32], sumx[40], sumw[40]; /* 33 used, the rest for vector loads */
    int idx[32];
    int8_t L[32];
    *shift = 1;
    for (int i = 0; i < 32; ++i) weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    const float max = abs_max(32, xb);
    if (max < 1e-12f) return -1;
    gq_iq1_sort(xb, 32, idx);
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < 32; ++j) {
        const int i = idx[j];
        sumx[j + 1] = sumx[j] + weight[i] * xb[i];
        sumw[j + 1] = sumw[j] + weight[i];
    }
    for (int j = 33; j < 40; ++j) sumx[j] = sumw[j] = 0;
    gq_iq1s_best b = {-FLT_MAX, max, -1, -1, 0};
    split(sumx, sumw, &b);
    float scale = b.scale;
    int best_shift = b.shift;
    if (b.i1 < 0 || b.i2 < 0 || best_shift == 0) return -1;
    split_codes(32, idx, b.i1, b.i2, L);
    if (scale < 0) {
        for (int j = 0; j < 32; ++j) L[j] = (int8_t)(2 - L[j]);
        scale = -scale;
        best_shift = -best_shift;
    }
    const float *xx = best_shift == 1 ? x_p : x_m;
    const float *const xxs[4] = {xx, xx, xx, xx};
    if (!iq1_snap(g, 32, xb, weight, scale, xxs, L, index, nbf))
        scale = iq1_refit(g, 32, xb, weight, xxs, index, scale);
    *shift = best_shift;
    return scale;
}

void gq_iq1_s_row(const float *x, uint8_t *y, int64_t n, const float *qw, amn_simd level) {
    const iq1_nb_fn nbf = iq1_neighbour_fn(level);
    iq1_split_fn split = iq1_s_split;
#if AMN_GGUF_QUANT_AVX2
    if (nbf != iq1_best_neighbour) split = gq_iq1s_split_avx2;
#endif
    const gq_lowgrid *g = gq_lowgrid_get(GQ_LOW_IQ1S);
    for (int64_t ibl = 0; ibl < n / 256; ++ibl, y += 50) {
        memset(y, 0, 50);
        const float *xbl = x + 256 * ibl;
        const float sigma2 = 2 * sum_squares(xbl) / 256;
        float scales[8], max_scale = 0;
        int shifts[8];
        uint16_t qh[8] = {0};
        for (int ib = 0; ib < 8; ++ib) {
            uint16_t index[4];
            const float s = iq1_s_block(g, xbl + 32 * ib, qw + 256 * ibl + 32 * ib, sigma2, index,
                                        &shifts[ib], nbf, split);
            if (s < 0) { /* stored as zero */
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 4; ++k) {
                y[2 + 4 * ib + k] = (uint8_t)(index[k] & 255);
                qh[ib] = (uint16_t)(qh[ib] | (index[k] >> 8) << 3 * k);
            }
            scales[ib] = s;
            max_scale = GQ_MAX(max_scale, s);
        }
        if (max_scale) {
            const float d = max_scale / 15;
            gq_put_f16(y, d * 1.125f);
            const float id = 1 / d;
            for (int ib = 0; ib < 8; ++ib) {
                int l = gq_nearest_int(0.5f * (id * scales[ib] - 1));
                l = GQ_MAX(0, GQ_MIN(7, l));
                if (shifts[ib] == -1) l |= 8;
                qh[ib] = (uint16_t)(qh[ib] | l << 12);
            }
        }
        for (int ib = 0; ib < 8; ++ib) {
            y[34 + 2 * ib] = (uint8_t)qh[ib];
            y[35 + 2 * ib] = (uint8_t)(qh[ib] >> 8);
        }
    }
}

/* ---- IQ1_M: qs[32], qh[16] (2 x 3 high index bits + delta signs), scales[8]
 * (16 x 3-bit scales and the F16 d in the top nibbles) ----------------------- */

/* The eight running sums of ggml's pair search for one block of 16, lanes
 * sumqx[0..3] then sumq2[0..3]; term[c][j] is what sorted value j adds at
 * code c (k = 0..3: sign choice of the first / second 8 values). */
typedef struct {
    float v[8];
} iq1m_acc;

static inline void acc_add(iq1m_acc *a, const float *t) {
    for (int l = 0; l < 8; ++l) a->v[l] += t[l];
}

static void iq1m_terms(const float *xb, const float *weight, const int *idx, float term[3][16][8]) {
    for (int c = 0; c < 3; ++c)
        for (int j = 0; j < 16; ++j) {
            const int i = idx[j];
            const float qxp = weight[i] * x_p[c] * xb[i], qxm = weight[i] * x_m[c] * xb[i];
            const float q2p = weight[i] * x_p[c] * x_p[c], q2m = weight[i] * x_m[c] * x_m[c];
            /* k's first-half sign: + for k < 2; second half: + for even k. */
            const bool first = i < 8;
            for (int k = 0; k < 4; ++k) {
                const bool plus = first ? k < 2 : k % 2 == 0;
                term[c][j][k] = plus ? qxp : qxm;
                term[c][j][4 + k] = plus ? q2p : q2m;
            }
        }
}

/* ggml's choice over (i1, i2, k) in its order, from the sums. */
/* ggml's four tests of one split, k in order (shift holds best_k). */
static void iq1m_pick(const iq1m_acc *s, int i1, int i2, gq_iq1s_best *b) {
    for (int k = 0; k < 4; ++k) {
        const float sqx = s->v[k], sq2 = s->v[4 + k];
        if (sq2 > 0 && sqx * sqx > b->best_score * sq2) {
            b->scale = sqx / sq2;
            b->best_score = b->scale * sqx;
            b->i1 = i1;
            b->i2 = i2;
            b->shift = k;
        }
    }
}

/* Every split (i1 <= i2) of the 16 sorted values, ggml's order. */
static void iq1m_split(const float term[3][16][8], gq_iq1s_best *b) {
    iq1m_acc head = {{0}}; /* the sums over sorted values 0..i1-1 at code 0 */
    for (int i1 = 0; i1 <= 16; ++i1) {
        iq1m_acc mid = head; /* then i1..i2-1 at code 1 */
        for (int i2 = i1; i2 <= 16; ++i2) {
            iq1m_acc s = mid;
            for (int j = i2; j < 16; ++j) acc_add(&s, term[2][j]);
            iq1m_pick(&s, i1, i2, b);
            if (i2 < 16) acc_add(&mid, term[1][i2]);
        }
        if (i1 < 16) acc_add(&head, term[0][i1]);
    }
}

typedef void (*iq1m_split_fn)(const float term[3][16][8], gq_iq1s_best *b);

static float iq1_m_block(const gq_lowgrid *g, const float *xb, const float *weight, uint16_t *index,
                         int *shift, iq1_nb_fn nbf, iq1m_split_fn split) {
    int idx[16];
    int8_t L[16];
    float term[3][16][8];
    *shift = 0;
    const float max = abs_max(16, xb);
    if (max < 1e-7f) return -1;
    gq_iq1_sort(xb, 16, idx);
    iq1m_terms(xb, weight, idx, term);
    gq_iq1s_best b = {-FLT_MAX, max, -1, -1, -1};
    split((const float(*)[16][8])term, &b);
    if (b.i1 < 0 || b.i2 < 0 || b.shift < 0) return -1;
    float scale = b.scale;
    int best_k = b.shift;
    split_codes(16, idx, b.i1, b.i2, L);
    if (scale < 0) {
        for (int j = 0; j < 16; ++j) L[j] = (int8_t)(2 - L[j]);
        scale = -scale;
        best_k = 3 - best_k;
    }
    const float *const xx[2] = {best_k < 2 ? x_p : x_m, best_k % 2 == 0 ? x_p : x_m};
    if (!iq1_snap(g, 16, xb, weight, scale, xx, L, index, nbf))
        scale = iq1_refit(g, 16, xb, weight, xx, index, scale);
    *shift = best_k;
    return scale;
}

static void iq1_m_weights(const float *xb, const float *qw, float sigma2, float *weight) {
    if (qw)
        for (int i = 0; i < 16; ++i) weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    else
        for (int i = 0; i < 16; ++i) weight[i] = xb[i] * xb[i];
}

/* ggml's last step: d refitted over all 16 blocks' chosen points at their
 * 3-bit scales (2l + 1), then stored with the 1.1125 fudge factor. */
static void iq1_m_super(const gq_lowgrid *g, const float *xbl, const float *qw, float sigma2,
                        const float *scales, const int *shifts, float max_scale, uint8_t *y) {
    static const uint8_t masks[4] = {0x00, 0x80, 0x08, 0x88};
    uint8_t *qs = y, *qh = y + 32;
    uint16_t sc[4] = {0};
    float d = max_scale / 15;
    const float id = 1 / d;
    float sumqx_f = 0, sumq2_f = 0;
    for (int ib = 0; ib < 16; ++ib) {
        int l = gq_nearest_int(0.5f * (id * scales[ib] - 1));
        l = GQ_MAX(0, GQ_MIN(7, l));
        sc[ib / 4] = (uint16_t)(sc[ib / 4] | l << 3 * (ib % 4));
        qh[ib] |= masks[shifts[ib]];
        const float *xb = xbl + 16 * ib;
        float weight[16];
        iq1_m_weights(xb, qw ? qw + 16 * ib : NULL, sigma2, weight);
        for (int k = 0; k < 2; ++k) {
            const float *xx = (k == 0 ? shifts[ib] < 2 : shifts[ib] % 2 == 0) ? x_p : x_m;
            const int gi = qs[2 * ib + k] + ((qh[ib] << (8 - 4 * k)) & 0x700);
            for (int j = 0; j < 8; ++j) {
                const float w = weight[8 * k + j];
                const float q = xx[(gq_low_coord(g, gi, j) - 1) / 2] * (float)(2 * l + 1);
                sumqx_f += w * q * xb[8 * k + j];
                sumq2_f += w * q * q;
            }
        }
    }
    if (sumq2_f > 0) d = sumqx_f / sumq2_f;
    const uint16_t h = gq_f32_to_f16(d * 1.1125f);
    sc[0] = (uint16_t)(sc[0] | (h & 0x000f) << 12);
    sc[1] = (uint16_t)(sc[1] | (h & 0x00f0) << 8);
    sc[2] = (uint16_t)(sc[2] | (h & 0x0f00) << 4);
    sc[3] = (uint16_t)(sc[3] | (h & 0xf000));
    for (int i = 0; i < 4; ++i) {
        y[48 + 2 * i] = (uint8_t)sc[i];
        y[49 + 2 * i] = (uint8_t)(sc[i] >> 8);
    }
}

void gq_iq1_m_row(const float *x, uint8_t *y, int64_t n, const float *qw, amn_simd level) {
    const iq1_nb_fn nbf = iq1_neighbour_fn(level);
    iq1m_split_fn split = iq1m_split;
#if AMN_GGUF_QUANT_AVX2
    if (nbf != iq1_best_neighbour) split = gq_iq1m_split_avx2;
#endif
    const gq_lowgrid *g = gq_lowgrid_get(GQ_LOW_IQ1S);
    for (int64_t ibl = 0; ibl < n / 256; ++ibl, y += 56) {
        memset(y, 0, 56);
        const float *xbl = x + 256 * ibl;
        const float *qwb = qw ? qw + 256 * ibl : NULL;
        const float sigma2 = 2 * sum_squares(xbl) / 256;
        float scales[16], max_scale = 0;
        int shifts[16];
        for (int ib = 0; ib < 16; ++ib) {
            float weight[16];
            uint16_t index[2];
            iq1_m_weights(xbl + 16 * ib, qwb ? qwb + 16 * ib : NULL, sigma2, weight);
            const float s = iq1_m_block(g, xbl + 16 * ib, weight, index, &shifts[ib], nbf, split);
            if (s < 0) {
                scales[ib] = 0;
                continue;
            }
            y[2 * ib] = (uint8_t)(index[0] & 255);
            y[2 * ib + 1] = (uint8_t)(index[1] & 255);
            y[32 + ib] = (uint8_t)((index[0] >> 8) | (index[1] >> 8) << 4);
            scales[ib] = s;
            max_scale = GQ_MAX(max_scale, s);
        }
        if (max_scale) iq1_m_super(g, xbl, qwb, sigma2, scales, shifts, max_scale, y);
    }
}
