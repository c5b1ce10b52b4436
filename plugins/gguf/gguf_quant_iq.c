/* i-quant quantizers without an importance matrix: IQ4_NL and IQ4_XS
 * (ggml's quantize_iq4_nl / quantize_iq4_xs -> quantize_row_iq4_nl_impl
 * with ntry 7, as ggml_quantize_chunk calls them) and IQ3_S
 * (quantize_iq3_s -> quantize_row_iq3_s_impl, block size 32, on the
 * 512-entry grid with the index map and neighbour lists iq3xs_init_impl
 * builds). Source: src/ggml-quants.c, ggml-org/ggml d99724f2. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_quant_impl.h"
#include "gguf_tables.h"

/* ---- IQ4_NL / IQ4_XS ------------------------------------------------------ */

/* Index of the codebook value nearest x, the lower one on ties (ggml's
 * best_index_int8: bisection, then one comparison). */
static int best_index_iq4(float x) {
    const int8_t *val = gguf_kvalues_iq4nl;
    if (x <= val[0]) return 0;
    if (x >= val[15]) return 15;
    int ml = 0, mu = 15;
    while (mu - ml > 1) {
        const int mav = (ml + mu) / 2;
        if (x < val[mav])
            mu = mav;
        else
            ml = mav;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/* Scale of one 32-value block (0 for a block below GROUP_MAX_EPS), codes in
 * Lb: the least-squares scale of the first pass, then 15 tries from
 * (itry - 127) / max, the best kept. Weights x^2. */
static float iq4_block_scale_w(const float *restrict xb, const float *restrict weight,
                               uint8_t *restrict Lb) {
    const int8_t *values = gguf_kvalues_iq4nl;
    const int ntry = 7;
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
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
        const int l = best_index_iq4(id * xb[j]);
        Lb[j] = (uint8_t)l;
        const float q = values[l], w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
        id = (itry + values[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
            const float q = values[best_index_iq4(id * xb[j])], w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

float gq_iq4_block_scale(const float *restrict xb, uint8_t *restrict Lb) {
    float weight[32];
    for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
    return iq4_block_scale_w(xb, weight, Lb);
}

/* Nibbles: byte j of each 16-byte run holds elements j (low) and j + 16. */
static void pack_iq4(const uint8_t *L, int n, uint8_t *q4) {
    for (int i = 0; i < n / 32; ++i)
        for (int j = 0; j < 16; ++j)
            q4[16 * i + j] = (uint8_t)(L[32 * i + j] | L[32 * i + 16 + j] << 4);
}

/* The block bodies, given the per-block search and the coding of values
 * (scalar or AVX2: the same results). */
typedef float (*iq4_search_fn)(const float *restrict, uint8_t *restrict);
typedef void (*iq4_codes_fn)(const float *x, int n, float id, uint8_t *L);

static void iq4_codes(const float *x, int n, float id, uint8_t *L) {
    for (int j = 0; j < n; ++j) L[j] = (uint8_t)best_index_iq4(id * x[j]);
}

static inline void iq4_nl_body(const float *restrict x, uint8_t *restrict y, iq4_search_fn search,
                               iq4_codes_fn codes) {
    uint8_t L[32] = {0};
    const float scale = search(x, L);
    gq_put_f16(y, scale);
    const float id = scale ? 1 / scale : 0;
    codes(x, 32, id, L);
    pack_iq4(L, 32, y + 2);
}

/* The rest of an IQ4_XS super-block once the 8 block scales are searched
 * (every code is recomputed from them). */
static void iq4_xs_finish(const float *restrict x, uint8_t *restrict y, const float *scales,
                          iq4_codes_fn codes) {
    uint8_t L[256] = {0};
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < 8; ++ib) {
        const float abs_d = fabsf(scales[ib]);
        if (abs_d > amax_scale) {
            amax_scale = abs_d;
            max_scale = scales[ib];
        }
    }
    uint16_t scales_h = 0;
    uint8_t *scales_l = y + 4;
    memset(scales_l, 0, 4);
    const float d = -max_scale / 32;
    gq_put_f16(y, d);
    const float id = d ? 1 / d : 0.f;
    for (int ib = 0; ib < 8; ++ib) {
        int l = gq_nearest_int(id * scales[ib]);
        l = GQ_MAX(-32, GQ_MIN(31, l));
        const float dl = d * l;
        const float idl = dl ? 1 / dl : 0.f;
        codes(x + 32 * ib, 32, idl, L + 32 * ib);
        l += 32;
        const uint8_t l_l = (uint8_t)(l & 0xf), l_h = (uint8_t)(l >> 4);
        if (ib % 2 == 0)
            scales_l[ib / 2] = l_l;
        else
            scales_l[ib / 2] = (uint8_t)(scales_l[ib / 2] | l_l << 4);
        scales_h = (uint16_t)(scales_h | l_h << 2 * (ib % 8));
    }
    y[2] = (uint8_t)scales_h;
    y[3] = (uint8_t)(scales_h >> 8);
    pack_iq4(L, 256, y + 8);
}

static inline void iq4_xs_body(const float *restrict x, uint8_t *restrict y, iq4_search_fn search,
                               iq4_codes_fn codes) {
    uint8_t L[256];
    float scales[8];
    for (int ib = 0; ib < 8; ++ib) scales[ib] = search(x + 32 * ib, L + 32 * ib);
    iq4_xs_finish(x, y, scales, codes);
}

/* quantize_row_iq4_nl_impl's weights with an importance matrix: qw times
 * sqrt(sigma2 + x^2), sigma2 = 2 * sum(x^2) / n over the super-block. */
static void iq4_weights(const float *restrict xb, const float *restrict qw, float sigma2,
                        float *restrict weight) {
    for (int j = 0; j < 32; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
}

static float iq4_sigma2(const float *x, int n) {
    float sigma2 = 0;
    for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
    return sigma2 * (2.f / n);
}

void gq_iq4_nl_w(const float *restrict x, uint8_t *restrict y, const float *restrict qw) {
    float weight[32];
    uint8_t L[32] = {0};
    iq4_weights(x, qw, iq4_sigma2(x, 32), weight);
    const float scale = iq4_block_scale_w(x, weight, L);
    gq_put_f16(y, scale);
    const float id = scale ? 1 / scale : 0;
    iq4_codes(x, 32, id, L);
    pack_iq4(L, 32, y + 2);
}

void gq_iq4_xs_w(const float *restrict x, uint8_t *restrict y, const float *restrict qw) {
    float weight[32], scales[8];
    uint8_t L[32];
    const float sigma2 = iq4_sigma2(x, 256);
    for (int ib = 0; ib < 8; ++ib) {
        iq4_weights(x + 32 * ib, qw + 32 * ib, sigma2, weight);
        scales[ib] = iq4_block_scale_w(x + 32 * ib, weight, L);
    }
    iq4_xs_finish(x, y, scales, iq4_codes);
}

void gq_iq4_nl(const float *restrict x, uint8_t *restrict y) {
    iq4_nl_body(x, y, gq_iq4_block_scale, iq4_codes);
}
void gq_iq4_xs(const float *restrict x, uint8_t *restrict y) {
    iq4_xs_body(x, y, gq_iq4_block_scale, iq4_codes);
}
#if AMN_GGUF_QUANT_AVX2
void gq_iq4_nl_avx2(const float *restrict x, uint8_t *restrict y) {
    iq4_nl_body(x, y, gq_iq4_block_scale_avx2, gq_iq4_codes_avx2);
}
void gq_iq4_xs_avx2(const float *restrict x, uint8_t *restrict y) {
    iq4_xs_body(x, y, gq_iq4_block_scale_avx2, gq_iq4_codes_avx2);
}
#endif

/* ---- IQ3_S ---------------------------------------------------------------- */

/* iq3xs_init_impl(512): for each of the 4096 points of {0..7}^4 (3 bits per
 * coordinate), its grid index if on the grid, else a list of the grid
 * points nearest it in the three smallest squared distances (ties ordered
 * by index, as ggml's qsort comparator orders them). Built once; read-only
 * afterwards, so threads share it. */
static gq_iq3_tables iq3;
static pthread_once_t iq3_once = PTHREAD_ONCE_INIT;
static bool iq3_ok;

static int grid_coord(uint32_t g, int k) {
    return (int)((g >> 8 * k) & 0xff);
}

/* Squared distances from point i of {0..7}^4 (coordinates 2l + 1) to every
 * grid point. */
static void distances(int i, int *dist2) {
    int pos[4];
    for (int k = 0; k < 4; ++k) pos[k] = 2 * ((i >> 3 * k) & 7) + 1;
    for (int j = 0; j < IQ3_GRID; ++j) {
        int d2 = 0;
        for (int k = 0; k < 4; ++k) {
            const int dk = grid_coord(gguf_iq3s_grid[j], k) - pos[k];
            d2 += dk * dk;
        }
        dist2[j] = d2;
    }
}

/* ggml sorts the (distance, index) pairs with qsort and keeps the leading
 * entries of the three smallest distances (nwant 3 for the 512-entry grid):
 * that is every grid point at one of those three distances, by distance,
 * then by index, which a scan per distance gives without sorting. Writes
 * the list to out (NULL: count only); returns its length. */
static int neighbour_list(const int *dist2, uint16_t *out) {
    int level[3] = {INT32_MAX, INT32_MAX, INT32_MAX};
    for (int j = 0; j < IQ3_GRID; ++j) {
        const int d = dist2[j];
        if (d == level[0] || d == level[1] || d == level[2]) continue;
        if (d < level[0]) {
            level[2] = level[1], level[1] = level[0], level[0] = d;
        } else if (d < level[1]) {
            level[2] = level[1], level[1] = d;
        } else if (d < level[2]) {
            level[2] = d;
        }
    }
    int n = 0;
    for (int l = 0; l < 3 && level[l] != INT32_MAX; ++l)
        for (int j = 0; j < IQ3_GRID; ++j)
            if (dist2[j] == level[l]) {
                if (out) out[n] = (uint16_t)j;
                n++;
            }
    return n;
}

/* iq3.coords from the finished lists. */
static bool iq3_build_lanes(void) {
    size_t runs = 0;
    for (int i = 0; i < IQ3_KMAP; ++i)
        if (iq3.map[i] < 0) runs += (iq3.neighbours[-iq3.map[i] - 1] + 7u) / 8u;
    uint8_t *c = calloc(runs, 32);
    if (!c) return false;
    size_t at = 0;
    for (int i = 0; i < IQ3_KMAP; ++i) {
        if (iq3.map[i] >= 0) continue;
        const uint16_t *list = iq3.neighbours + (-iq3.map[i] - 1);
        iq3.lanes_at[i] = (int)at;
        for (int j = 0; j < list[0]; ++j)
            for (int k = 0; k < 4; ++k)
                c[at + 32 * (j / 8) + 8 * k + j % 8] =
                    (uint8_t)grid_coord(gguf_iq3s_grid[list[1 + j]], k);
        at += 32 * ((list[0] + 7u) / 8u);
    }
    iq3.coords = c;
    return true;
}

static void iq3_build(void) {
    for (int i = 0; i < IQ3_KMAP; ++i) iq3.map[i] = -1;
    for (int g = 0; g < IQ3_GRID; ++g) {
        int index = 0;
        for (int k = 0; k < 4; ++k) index |= ((grid_coord(gguf_iq3s_grid[g], k) - 1) / 2) << 3 * k;
        iq3.map[index] = g;
    }
    /* Two passes, as ggml's: the lengths, then the lists. */
    int dist2[IQ3_GRID];
    size_t total = 0;
    for (int i = 0; i < IQ3_KMAP; ++i) {
        if (iq3.map[i] >= 0) continue;
        distances(i, dist2);
        total += 1 + (size_t)neighbour_list(dist2, NULL);
    }
    uint16_t *nb = malloc(total * sizeof(uint16_t));
    if (!nb) return;
    size_t used = 0;
    for (int i = 0; i < IQ3_KMAP; ++i) {
        if (iq3.map[i] >= 0) continue;
        distances(i, dist2);
        iq3.map[i] = -(int)(used + 1);
        const int n = neighbour_list(dist2, nb + used + 1);
        nb[used] = (uint16_t)n;
        used += 1 + (size_t)n;
    }
    iq3.neighbours = nb;
    iq3_ok = iq3_build_lanes();
}

/* The table lives as long as the code that uses it: freed when the plugin
 * is unloaded (amn_ctx_free dlcloses it; left allocated, the block would
 * outlive the only pointer to it, which LeakSanitizer reports). */
__attribute__((destructor)) static void iq3_release(void) {
    free(iq3.neighbours);
    iq3.neighbours = NULL;
    free(iq3.coords);
    iq3.coords = NULL;
}

const gq_iq3_tables *gq_iq3_tables_get(void) {
    return &iq3;
}

bool gguf_quant_iq3_ready(void) {
    pthread_once(&iq3_once, iq3_build);
    return iq3_ok;
}

/* ggml's iq3_find_best_neighbour: the listed grid point of least weighted
 * distance to xval at this scale (first on ties); its codes into L. */
static int iq3_best_neighbour(const uint16_t *neighbours, const float *xval, const float *weight,
                              float scale, int8_t *L) {
    const int num = neighbours[0];
    float best_d2 = FLT_MAX;
    int grid_index = -1;
    for (int j = 1; j <= num; ++j) {
        const uint32_t g = gguf_iq3s_grid[neighbours[j]];
        float d2 = 0;
        for (int i = 0; i < 4; ++i) {
            const float q = (float)grid_coord(g, i);
            const float diff = scale * q - xval[i];
            d2 += weight[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            grid_index = neighbours[j];
        }
    }
    /* Every distance NaN or infinite (values near FLT_MAX, Inf, NaN): ggml
     * aborts (GGML_ASSERT); amn takes the first listed point, so hostile
     * input gets defined bytes, never a read before the grid. */
    if (grid_index < 0) grid_index = neighbours[1];
    const uint32_t g = gguf_iq3s_grid[grid_index];
    for (int i = 0; i < 4; ++i) L[i] = (int8_t)((grid_coord(g, i) - 1) / 2);
    return grid_index;
}

/* Grid index of the 4 codes (0..7) at L, or the neighbours to search. */
static int iq3_point(const int8_t *L) {
    int u = 0;
    for (int i = 0; i < 4; ++i) u |= L[i] << 3 * i;
    return iq3.map[u];
}

static const uint16_t *iq3_neighbours(int map_value) {
    return iq3.neighbours + (-map_value - 1);
}

/* Codes L (0..7) of 4 values at inverse scale id, ggml's
 * nearest_int(0.5 * (id * x - 1)) clamped. */
static void iq3_codes(const float *xval, float id, int8_t *L) {
    for (int i = 0; i < 4; ++i) {
        const int l = gq_nearest_int(0.5f * (id * xval[i] - 1));
        L[i] = (int8_t)GQ_MAX(0, GQ_MIN(7, l));
    }
}

/* One 32-value block: scale, codes L, sign bytes; *zero when every |x| is
 * zero (then nothing else is meaningful). */
static float iq3_block(const float *restrict xb, const float *restrict qw, float sigma2,
                       int8_t *restrict L, uint8_t *restrict signs, bool *zero) {
    const int kMaxQ = 8;
    float weight[32], waux[32], xval[32];
    int8_t Laux[32];
    bool on_grid[8], on_grid_aux[8];
    const float max = gq_iq3_block_prepare(xb, qw, sigma2, weight, waux, xval, signs, L);
    *zero = !max;
    if (*zero) return 0;
    float best = 0;
    float scale = max / (2 * kMaxQ - 1);
    for (int k = 0; k < 8; ++k) on_grid[k] = false;
    for (int is = -9; is <= 9; ++is) {
        const float id = (2 * kMaxQ - 1 + is * 0.2f) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 8; ++k) {
            iq3_codes(xval + 4 * k, id, Laux + 4 * k);
            const int gi = iq3_point(Laux + 4 * k);
            on_grid_aux[k] = gi >= 0;
            if (gi < 0)
                iq3_best_neighbour(iq3_neighbours(gi), xval + 4 * k, waux + 4 * k, this_scale,
                                   Laux + 4 * k);
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < 32; ++i) {
            const float w = weight[i], q = (float)(2 * Laux[i] + 1);
            sumqx += w * xval[i] * q;
            sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, 32);
            memcpy(on_grid, on_grid_aux, sizeof on_grid);
        }
    }
    int n_not_on_grid = 0;
    for (int k = 0; k < 8; ++k) n_not_on_grid += !on_grid[k];
    if (n_not_on_grid > 0 && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 8; ++k) {
            int8_t Lk[4];
            iq3_codes(xval + 4 * k, id, Lk);
            int gi = iq3_point(Lk);
            if (gi < 0)
                gi = iq3_best_neighbour(iq3_neighbours(gi), xval + 4 * k, waux + 4 * k, scale,
                                        L + 4 * k);
            const uint32_t g = gguf_iq3s_grid[gi];
            for (int i = 0; i < 4; ++i) L[4 * k + i] = (int8_t)((grid_coord(g, i) - 1) / 2);
        }
        scale = gq_iq3_refit(weight, xval, L, scale);
    }
    if (scale < 0) {
        /* ggml: "should never happen"; flip the scale and the signs. */
        scale = -scale;
        for (int k = 0; k < 4; ++k) signs[k] = (uint8_t)~signs[k];
    }
    return scale;
}

/* Layout: d (F16), qs[64], qh[8], signs[32], scales[4]. A block whose values
 * are all zero writes no qs / signs and, as in ggml, the next block's go
 * where its would have gone (ggml advances those pointers only past
 * non-zero blocks); qh is indexed by block and stays right. */
typedef float (*iq3_block_fn)(const float *restrict xb, const float *restrict qw, float sigma2,
                              int8_t *restrict L, uint8_t *restrict signs, bool *zero);

static inline void iq3_s_body(const float *restrict x, uint8_t *restrict y, const float *qw,
                              iq3_block_fn block) {
    memset(y, 0, 110);
    float sigma2 = 0;
    if (qw) {
        for (int i = 0; i < 256; ++i) sigma2 += x[i] * x[i];
        sigma2 = 2 * sigma2 / 256;
    }
    uint8_t *qs = y + 2, *qh = y + 66, *signs = y + 74, *scales_out = y + 106;
    float scales[8];
    float max_scale = 0;
    for (int ib = 0; ib < 8; ++ib) {
        int8_t L[32];
        uint8_t bsigns[4];
        bool zero;
        const float scale = block(x + 32 * ib, qw ? qw + 32 * ib : NULL, sigma2, L, bsigns, &zero);
        if (zero) {
            scales[ib] = 0;
            continue;
        }
        for (int k = 0; k < 8; ++k) {
            const int gi = iq3_point(L + 4 * k);
            /* ggml aborts on an off-grid point; the search never leaves one. */
            const int g = gi < 0 ? 0 : gi;
            qs[k] = (uint8_t)(g & 255);
            qh[(ib * 8 + k) / 8] = (uint8_t)(qh[(ib * 8 + k) / 8] | (g >> 8) << ((ib * 8 + k) % 8));
        }
        qs += 8;
        memcpy(signs, bsigns, 4);
        signs += 4;
        scales[ib] = scale;
        max_scale = GQ_MAX(max_scale, scale);
    }
    if (!max_scale) return;
    const float d = max_scale / 31;
    gq_put_f16(y, d * 1.033f);
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ib += 2) {
        int l1 = gq_nearest_int(0.5f * (id * scales[ib] - 1));
        l1 = GQ_MAX(0, GQ_MIN(15, l1));
        int l2 = gq_nearest_int(0.5f * (id * scales[ib + 1] - 1));
        l2 = GQ_MAX(0, GQ_MIN(15, l2));
        scales_out[ib / 2] = (uint8_t)(l1 | l2 << 4);
    }
}

void gq_iq3_s(const float *restrict x, uint8_t *restrict y) {
    iq3_s_body(x, y, NULL, iq3_block);
}
void gq_iq3_s_w(const float *restrict x, uint8_t *restrict y, const float *restrict qw) {
    iq3_s_body(x, y, qw, iq3_block);
}
#if AMN_GGUF_QUANT_AVX2
void gq_iq3_s_avx2(const float *restrict x, uint8_t *restrict y) {
    iq3_s_body(x, y, NULL, gq_iq3_block_avx2);
}
void gq_iq3_s_w_avx2(const float *restrict x, uint8_t *restrict y, const float *restrict qw) {
    iq3_s_body(x, y, qw, gq_iq3_block_avx2);
}
#endif
