/* Low-bit i-quants with importance weights, part 1: the search tables
 * (ggml's iq2xs_init_impl / iq3xs_init_impl), IQ2_XXS, IQ2_XS, IQ2_S and
 * IQ3_XXS (quantize_row_iq2_xxs_impl, quantize_row_iq2_xs_impl,
 * quantize_row_iq2_s_impl, quantize_row_iq3_xxs_impl with grid 256), and the
 * row functions' dispatch. Source: ggml/src/ggml-quants.c, llama.cpp
 * 3af988fab. IQ1_S / IQ1_M are in gguf_quant_iqlow_iq1.c.
 *
 * The grids are not carried over a second time: ggml's kgrid_* tables
 * (levels packed 2 or 3 bits a coordinate) are the dequantization grids of
 * gguf_tables.c with each value replaced by its level, so they are derived
 * from those. Every float operation is ggml's, in ggml's order (this file
 * is built with -ffp-contract=off, as ggml's reference build has no FMA). */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_dequant.h"
#include "gguf_quant_iqlow.h"
#include "gguf_quant_iqlow_impl.h"
#include "gguf_tables.h"
#include "gguf_types.h"

/* ---- tables ---------------------------------------------------------------- */

static gq_lowgrid grids[GQ_LOW_NGRIDS];
/* One build per grid, on first use: a file type needs one or two of them,
 * and the 2048-point grid alone takes most of the time all of them take. */
static pthread_once_t grid_once[GQ_LOW_NGRIDS] = {
    PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
    PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
};
static bool grid_ok[GQ_LOW_NGRIDS];

/* The dequantization grid a search grid comes from, its values by level,
 * and ggml's nwant (how many distinct distances the neighbour lists keep). */
typedef struct {
    const void *table; /* uint64_t[] (8 bytes a point) or uint32_t[] (4) */
    int dim, bits, size, nwant, nlevels;
    uint8_t levels[8];
} grid_source;

static const grid_source sources[GQ_LOW_NGRIDS] = {
    [GQ_LOW_IQ2XXS] = {gguf_iq2xxs_grid, 8, 2, 256, 2, 3, {0x08, 0x19, 0x2b}},
    [GQ_LOW_IQ2XS] = {gguf_iq2xs_grid, 8, 2, 512, 2, 3, {0x08, 0x19, 0x2b}},
    [GQ_LOW_IQ2S] = {gguf_iq2s_grid, 8, 2, 1024, 1, 3, {0x08, 0x19, 0x2b}},
    [GQ_LOW_IQ1S] = {gguf_iq1s_grid, 8, 2, 2048, 3, 3, {0xff, 0x00, 0x01}},
    [GQ_LOW_IQ3XXS] =
        {gguf_iq3xxs_grid, 4, 3, 256, 2, 8, {0x04, 0x0c, 0x14, 0x1c, 0x24, 0x2c, 0x34, 0x3e}},
    [GQ_LOW_IQ3S] = {gguf_iq3s_grid, 4, 3, 512, 3, 8, {1, 3, 5, 7, 9, 11, 13, 15}},
};

/* Point g of the source as coordinates 2l + 1; false on a value that is no
 * level (a table out of step with this file). */
static bool source_point(const grid_source *s, int g, uint64_t *out) {
    uint64_t v = s->dim == 8 ? ((const uint64_t *)s->table)[g] : ((const uint32_t *)s->table)[g];
    uint64_t p = 0;
    for (int k = 0; k < s->dim; ++k) {
        const uint8_t b = (uint8_t)(v >> 8 * k);
        int l = 0;
        while (l < s->nlevels && s->levels[l] != b) ++l;
        if (l == s->nlevels) return false;
        p |= (uint64_t)(2 * l + 1) << 8 * k;
    }
    *out = p;
    return true;
}

/* The searches clamp every code to kMaxQ - 1 (2 for the 2-bit grids, 7 for
 * IQ3_XXS's) and IQ1's codes are 0..2: only such points are ever looked up,
 * so only theirs get lists (ggml builds lists for every index below its
 * kmap_size; the others are never read). */
static bool reachable(const gq_lowgrid *g, int u) {
    const int top = g->bits == 2 ? 2 : 7, mask = (1 << g->bits) - 1;
    for (int k = 0; k < g->dim; ++k)
        if (((u >> g->bits * k) & mask) > top) return false;
    return true;
}

/* ggml sorts (distance, index) pairs and keeps the leading ones of the
 * nwant smallest distances: every grid point at one of those distances, by
 * distance then index. A scan per distance gives that order. cb holds the
 * points' coordinates 2l + 1, coordinate k of point j at cb[size k + j], so
 * the distances are summed a coordinate at a time over every point (loops
 * the compiler vectorizes): the build runs on the first row of a file type
 * while the other threads wait for it. */
static int neighbour_list(const gq_lowgrid *g, const uint8_t *cb, int nwant, int u, int *dist2,
                          uint16_t *out) {
    for (int j = 0; j < g->size; ++j) dist2[j] = 0;
    for (int k = 0; k < g->dim; ++k) {
        const int t = 2 * ((u >> g->bits * k) & ((1 << g->bits) - 1)) + 1;
        const uint8_t *restrict c = cb + (size_t)g->size * k;
        int *restrict d2 = dist2;
        for (int j = 0; j < g->size; ++j) d2[j] += (c[j] - t) * (c[j] - t);
    }
    int level[3] = {INT32_MAX, INT32_MAX, INT32_MAX};
    for (int j = 0; j < g->size; ++j) {
        const int d = dist2[j];
        int at = 0;
        while (at < nwant && level[at] < d) ++at;
        if (at == nwant || level[at] == d) continue;
        for (int m = nwant - 1; m > at; --m) level[m] = level[m - 1];
        level[at] = d;
    }
    int n = 0;
    for (int l = 0; l < nwant && level[l] != INT32_MAX; ++l)
        for (int j = 0; j < g->size; ++j)
            if (dist2[j] == level[l]) out[n++] = (uint16_t)j;
    return n;
}

/* The lists again as runs of 8 candidates for the vector search. */
static bool build_coords(gq_lowgrid *g, size_t used) {
    g->coords = calloc(used, (size_t)g->dim);
    if (!g->coords) return false;
    const int nmap = 1 << (g->dim * g->bits);
    for (int u = 0; u < nmap; ++u) {
        if (g->map[u] >= 0 || !reachable(g, u)) continue;
        const size_t off = (size_t)(-g->map[u] - 1);
        const uint16_t *list = g->neighbours + off;
        uint8_t *c = g->coords + (size_t)g->dim * (off + 1);
        for (int j = 0; j < list[0]; ++j)
            for (int k = 0; k < g->dim; ++k)
                c[8 * g->dim * (j / 8) + 8 * k + j % 8] =
                    (uint8_t)((gq_low_coord(g, list[1 + j], k) - 1) / 2);
    }
    return true;
}

/* A list of n entries at offset off takes 1 + 8 ceil(n / 8) slots of
 * neighbours (padded); coords gives each slot dim bytes, so the list's runs
 * (8 dim bytes per 8 candidates) fill exactly its slots after the count. */
static bool build_grid(int which) {
    const grid_source *s = &sources[which];
    gq_lowgrid *g = &grids[which];
    if (!s->table) return false; /* a grid without a source entry */
    g->dim = s->dim;
    g->bits = s->bits;
    g->size = s->size;
    const int nmap = 1 << (s->dim * s->bits);
    g->grid = malloc((size_t)s->size * sizeof *g->grid);
    g->map = malloc((size_t)nmap * sizeof *g->map);
    int *dist2 = malloc((size_t)s->size * sizeof *dist2);
    uint16_t *list = malloc((size_t)(s->size + 8) * sizeof *list);
    uint8_t *cb = malloc((size_t)s->size * (size_t)s->dim);
    bool ok = g->grid && g->map && dist2 && list && cb;
    for (int j = 0; ok && j < s->size; ++j) ok = source_point(s, j, &g->grid[j]);
    for (int j = 0; ok && j < s->size; ++j)
        for (int k = 0; k < s->dim; ++k)
            cb[(size_t)s->size * k + j] = (uint8_t)gq_low_coord(g, j, k);
    size_t used = 0, cap = 0;
    if (ok) {
        for (int u = 0; u < nmap; ++u) g->map[u] = -1;
        for (int j = 0; j < s->size; ++j) {
            int u = 0;
            for (int k = 0; k < s->dim; ++k) u |= ((gq_low_coord(g, j, k) - 1) / 2) << s->bits * k;
            g->map[u] = j;
        }
    }
    for (int u = 0; ok && u < nmap; ++u) {
        if (g->map[u] >= 0 || !reachable(g, u)) continue;
        const int n = neighbour_list(g, cb, s->nwant, u, dist2, list + 1);
        list[0] = (uint16_t)n;
        /* n + 1 entries, padded to a multiple of 8 so the runs fit. */
        const size_t take = 1 + (size_t)(n + 7) / 8 * 8;
        if (used + take > cap) {
            const size_t ncap = cap ? 2 * cap : 65536;
            uint16_t *nb = realloc(g->neighbours, ncap * sizeof *nb);
            if (!nb) {
                ok = false;
                break;
            }
            g->neighbours = nb;
            cap = ncap;
        }
        memset(g->neighbours + used, 0, take * sizeof *g->neighbours);
        memcpy(g->neighbours + used, list, (size_t)(n + 1) * sizeof *list);
        g->map[u] = -(int32_t)(used + 1);
        used += take;
    }
    free(dist2);
    free(list);
    free(cb);
    return ok && build_coords(g, used);
}

#define GQ_BUILD_ONE(w)                                                                            \
    static void build_##w(void) {                                                                  \
        grid_ok[w] = build_grid(w);                                                                \
    }
GQ_BUILD_ONE(GQ_LOW_IQ2XXS)
GQ_BUILD_ONE(GQ_LOW_IQ2XS)
GQ_BUILD_ONE(GQ_LOW_IQ2S)
GQ_BUILD_ONE(GQ_LOW_IQ1S)
GQ_BUILD_ONE(GQ_LOW_IQ3XXS)
GQ_BUILD_ONE(GQ_LOW_IQ3S)

static void (*const builders[GQ_LOW_NGRIDS])(void) = {
    [GQ_LOW_IQ2XXS] = build_GQ_LOW_IQ2XXS, [GQ_LOW_IQ2XS] = build_GQ_LOW_IQ2XS,
    [GQ_LOW_IQ2S] = build_GQ_LOW_IQ2S,     [GQ_LOW_IQ1S] = build_GQ_LOW_IQ1S,
    [GQ_LOW_IQ3XXS] = build_GQ_LOW_IQ3XXS, [GQ_LOW_IQ3S] = build_GQ_LOW_IQ3S,
};

static bool grid_ready(int which) {
    pthread_once(&grid_once[which], builders[which]);
    return grid_ok[which];
}

bool gq_lowgrid_iq3s_ready(void) {
    return grid_ready(GQ_LOW_IQ3S);
}

/* The tables live as long as the code that uses them: freed when the
 * plugin is unloaded (amn_ctx_free dlcloses it; left allocated, the blocks
 * would outlive the only pointers to them, which LeakSanitizer reports). */
__attribute__((destructor)) static void grids_release(void) {
    for (int w = 0; w < GQ_LOW_NGRIDS; ++w) {
        free(grids[w].grid);
        free(grids[w].map);
        free(grids[w].neighbours);
        free(grids[w].coords);
        memset(&grids[w], 0, sizeof grids[w]);
    }
}

bool gguf_quant_iqlow_ready(void) {
    bool ok = true;
    for (int w = 0; w < GQ_LOW_IQ3S; ++w) ok = grid_ready(w) && ok;
    return ok;
}

bool gguf_quant_iqlow_type_ready(uint32_t type) {
    switch (type) {
    case GGUF_TYPE_IQ2_XXS:
        return grid_ready(GQ_LOW_IQ2XXS);
    case GGUF_TYPE_IQ2_XS:
        return grid_ready(GQ_LOW_IQ2XS);
    case GGUF_TYPE_IQ2_S:
        return grid_ready(GQ_LOW_IQ2S);
    case GGUF_TYPE_IQ3_XXS:
        return grid_ready(GQ_LOW_IQ3XXS);
    case GGUF_TYPE_IQ1_S:
    case GGUF_TYPE_IQ1_M:
        return grid_ready(GQ_LOW_IQ1S);
    default:
        return false;
    }
}

const gq_lowgrid *gq_lowgrid_get(int which) {
    return &grids[which];
}

/* ---- the shared search ------------------------------------------------------ */

int gq_low_best_neighbour(const gq_lowgrid *g, int32_t map_value, const float *xval,
                          const float *weight, float scale, int8_t *L) {
    const uint16_t *nb = gq_low_list(g, map_value);
    const int num = nb[0];
    float best_d2 = FLT_MAX;
    int grid_index = -1;
    for (int j = 1; j <= num; ++j) {
        float d2 = 0;
        for (int i = 0; i < g->dim; ++i) {
            const float q = (float)gq_low_coord(g, nb[j], i);
            const float diff = scale * q - xval[i];
            d2 += weight[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            grid_index = nb[j];
        }
    }
    if (grid_index < 0) grid_index = nb[1];
    gq_low_codes(g, grid_index, L);
    return grid_index;
}

typedef int (*neighbour_fn)(const gq_lowgrid *g, int32_t map_value, const float *xval,
                            const float *weight, float scale, int8_t *L);

/* Codes of one group at inverse scale id: nearest_int(0.5 * (id * x - 1))
 * clamped to 0..kmaxq - 1. */
static void group_codes(int dim, const float *xval, float id, int kmaxq, int8_t *L) {
    for (int i = 0; i < dim; ++i) {
        const int l = gq_nearest_int(0.5f * (id * xval[i] - 1));
        L[i] = (int8_t)GQ_MAX(0, GQ_MIN(kmaxq - 1, l));
    }
}

/* One group snapped to the grid at this scale: its codes, replaced by the
 * nearest listed point's when off the grid. Returns whether they were on. */
static bool snap_group(const gq_lowgrid *g, const float *xval, const float *waux, float id,
                       float scale, int kmaxq, int8_t *L, neighbour_fn nbf) {
    group_codes(g->dim, xval, id, kmaxq, L);
    const int32_t m = gq_low_lookup(g, L);
    if (m >= 0) return true;
    nbf(g, m, xval, waux, scale, L);
    return false;
}

/* sumqx, sumq2 of codes L over n values: q = 2l + 1, w * x * q and w * q * q
 * rounded as ggml rounds them. */
static void fit_sums(int n, const float *weight, const float *xval, const int8_t *L, float *sqx,
                     float *sq2) {
    float sumqx = 0, sumq2 = 0;
    for (int i = 0; i < n; ++i) {
        const float w = weight[i], q = (float)(2 * L[i] + 1);
        sumqx += w * xval[i] * q;
        sumq2 += w * q * q;
    }
    *sqx = sumqx;
    *sq2 = sumq2;
}

/* The scale search of one block of n values (groups of g->dim): for is in
 * [-nis, nis], id = (2 kmaxq - 1 + is * step) / top, every group snapped,
 * the try of largest sumqx^2 / sumq2 kept (ggml's comparison, in order).
 * L and scale hold the starting codes and scale and receive the best;
 * on_grid[k] whether group k of the kept try was on the grid (none_on when
 * no try was kept: true for IQ2 / IQ3_XXS, false for IQ3_S, as ggml
 * starts them). */
static float scale_search(const gq_lowgrid *g, int n, const float *xval, const float *weight,
                          const float *waux, float top, int nis, float step, int kmaxq, float scale,
                          int8_t *L, bool none_on, bool *on_grid, neighbour_fn nbf) {
#if AMN_GGUF_QUANT_AVX2
    /* The vector neighbour search marks the vector path. */
    if (nbf == gq_low_best_neighbour_avx512)
        return gq_low_scale_search_avx512(g, n, xval, weight, waux, top, nis, step, kmaxq, scale, L,
                                          none_on, on_grid);
    if (nbf == gq_low_best_neighbour_avx2)
        return gq_low_scale_search_avx2(g, n, xval, weight, waux, top, nis, step, kmaxq, scale, L,
                                        none_on, on_grid);
#endif
    int8_t Laux[32];
    bool on_aux[8];
    float best = 0;
    const int ng = n / g->dim;
    for (int k = 0; k < ng; ++k) on_grid[k] = none_on;
    for (int is = -nis; is <= nis; ++is) {
        const float id = (2 * kmaxq - 1 + is * step) / top;
        const float this_scale = 1 / id;
        for (int k = 0; k < ng; ++k)
            on_aux[k] = snap_group(g, xval + g->dim * k, waux + g->dim * k, id, this_scale, kmaxq,
                                   Laux + g->dim * k, nbf);
        float sumqx, sumq2;
        fit_sums(n, weight, xval, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, (size_t)n);
            memcpy(on_grid, on_aux, (size_t)ng * sizeof *on_grid);
        }
    }
    return scale;
}

/* ggml's last step: the groups marked in redo snapped again at the chosen
 * scale (codes from the grid point), then the least-squares scale of all
 * codes (unchanged when sumq2 is 0). */
static float refit(const gq_lowgrid *g, int n, const float *xval, const float *weight,
                   const float *waux, float scale, int kmaxq, const bool *redo, int8_t *L,
                   neighbour_fn nbf) {
    const float id = 1 / scale;
    for (int k = 0; k < n / g->dim; ++k) {
        if (!redo[k]) continue;
        int8_t *Lk = L + g->dim * k;
        group_codes(g->dim, xval + g->dim * k, id, kmaxq, Lk);
        const int32_t m = gq_low_lookup(g, Lk);
        if (m < 0) nbf(g, m, xval + g->dim * k, waux + g->dim * k, scale, Lk);
    }
    float sumqx, sumq2;
    fit_sums(n, weight, xval, L, &sumqx, &sumq2);
    return sumq2 > 0 ? sumqx / sumq2 : scale;
}

/* Grid index of final codes; ggml aborts on an off-grid point, which the
 * search never leaves on finite input: 0 here. */
static int final_index(const gq_lowgrid *g, const int8_t *L) {
    const int32_t m = gq_low_lookup(g, L);
    return m >= 0 ? m : 0;
}

/* The block weights: qw[i] * sqrt(sigma2 + x^2) with weights, else the
 * type's own (weights_nw; NULL for the types ggml refuses without). */
static void block_weights(int n, const float *xb, const float *qw, float sigma2, float *weight) {
    for (int i = 0; i < n; ++i) weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
}

/* |x| per value, the sign bits of each 8, and (even) ggml's parity fix: an
 * odd count of negatives flips the value of least w * x * x back to its
 * negative, so the 7 stored bits imply the eighth. */
static void take_signs(int n, const float *xb, const float *weight, bool even, float *xval,
                       uint8_t *signs) {
    for (int k = 0; k < n / 8; ++k) {
        int nflip = 0;
        uint8_t s = 0;
        for (int i = 0; i < 8; ++i) {
            if (xb[8 * k + i] >= 0)
                xval[8 * k + i] = xb[8 * k + i];
            else {
                xval[8 * k + i] = -xb[8 * k + i];
                ++nflip;
                s = (uint8_t)(s | 1u << i);
            }
        }
        if (even && nflip % 2) {
            int imin = 0;
            float min = weight[8 * k] * xb[8 * k] * xb[8 * k];
            for (int i = 1; i < 8; ++i) {
                const float ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                if (ax < min) {
                    min = ax;
                    imin = i;
                }
            }
            xval[8 * k + imin] = -xval[8 * k + imin];
            s = (uint8_t)(s ^ 1u << imin);
        }
        signs[k] = even ? (uint8_t)(s & 127) : s;
    }
}

static float max_of(int n, const float *v) {
    float max = v[0];
    for (int i = 1; i < n; ++i) max = GQ_MAX(max, v[i]);
    return max;
}

static float sum_squares(const float *x) {
    float s = 0;
    for (int i = 0; i < 256; ++i) s += x[i] * x[i];
    return s;
}

/* The 4-bit block scales of IQ2_XXS / IQ2_XS / IQ2_S / IQ3_XXS: l =
 * nearest_int(0.5 * (id * scale - 1)) clamped to 0..15. */
static int scale_code(float id, float scale) {
    return GQ_MAX(0, GQ_MIN(15, gq_nearest_int(0.5f * (id * scale - 1))));
}

/* ---- IQ2_XXS: d (F16), 8 x (4 grid indices, 4 x 7 sign bits, 4-bit scale) -- */

static float iq2_xxs_block(const gq_lowgrid *g, const float *xb, const float *qw, float sigma2,
                           uint32_t *q2, neighbour_fn nbf) {
    const int kMaxQ = 3;
    float weight[32], waux[32], xval[32];
    int8_t L[32];
    uint8_t signs[4];
    bool on_grid[4];
    block_weights(32, xb, qw, sigma2, weight);
    for (int i = 0; i < 32; ++i) waux[i] = sqrtf(weight[i]);
    take_signs(32, xb, weight, true, xval, signs);
    const float max = max_of(32, xval);
    if (max < GQ_GROUP_MAX_EPS) return 0;
    float scale = gq_qp_search(32, kMaxQ + 1, xval, (uint8_t *)L, weight);
    const float eff_max = scale * kMaxQ;
    if (eff_max <= 0) return 0;
    scale = scale_search(g, 32, xval, weight, waux, eff_max, 6, 0.1f, kMaxQ, scale, L, true,
                         on_grid, nbf);
    if (scale > 0) {
        const bool all[4] = {true, true, true, true};
        scale = refit(g, 32, xval, weight, waux, scale, kMaxQ, all, L, nbf);
    }
    if (scale < 0) { /* ggml: "should never happen" */
        scale = -scale;
        for (int k = 0; k < 4; ++k) signs[k] = (uint8_t)(~signs[k] & 127);
    }
    for (int k = 0; k < 4; ++k) {
        q2[0] |= (uint32_t)final_index(g, L + 8 * k) << 8 * k;
        q2[1] |= (uint32_t)signs[k] << 7 * k;
    }
    return scale;
}

static void iq2_xxs_row(const float *x, uint8_t *y, int64_t n, const float *qw, neighbour_fn nbf) {
    const gq_lowgrid *g = &grids[GQ_LOW_IQ2XXS];
    for (int64_t ibl = 0; ibl < n / 256; ++ibl, y += 66) {
        const float *xbl = x + 256 * ibl;
        const float sigma2 = sum_squares(xbl) / 256;
        uint32_t q2[16] = {0};
        float scales[8], max_scale = 0;
        for (int ib = 0; ib < 8; ++ib) {
            scales[ib] =
                iq2_xxs_block(g, xbl + 32 * ib, qw + 256 * ibl + 32 * ib, sigma2, q2 + 2 * ib, nbf);
            max_scale = GQ_MAX(max_scale, scales[ib]);
        }
        memset(y, 0, 66);
        if (!max_scale) continue;
        const float d = max_scale / 31;
        gq_put_f16(y, d);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ++ib) q2[2 * ib + 1] |= (uint32_t)scale_code(id, scales[ib]) << 28;
        for (int i = 0; i < 16; ++i)
            for (int b = 0; b < 4; ++b) y[2 + 4 * i + b] = (uint8_t)(q2[i] >> 8 * b);
    }
}

/* ---- IQ2_XS / IQ2_S: 16-value blocks of two groups ------------------------- */

/* One 16-value block of IQ2_XS (even signs, 7 bits) or IQ2_S (8 sign bits):
 * grid indices into idx, signs into signs. Returns the scale. */
static float iq2_16_block(const gq_lowgrid *g, bool xs, const float *xb, const float *qw,
                          float sigma2, int *idx, uint8_t *signs, neighbour_fn nbf) {
    const int kMaxQ = 3;
    float weight[16], waux[16], xval[16];
    int8_t L[16];
    bool on_grid[2];
    if (qw)
        block_weights(16, xb, qw, sigma2, weight);
    else /* IQ2_S only */
        for (int i = 0; i < 16; ++i) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
    for (int i = 0; i < 16; ++i) waux[i] = sqrtf(weight[i]);
    take_signs(16, xb, weight, xs, xval, signs);
    const float max = max_of(16, xval);
    memset(L, 0, 16);
    idx[0] = idx[1] = -1;
    if (max < (xs ? GQ_GROUP_MAX_EPS : 1e-8f)) return 0;
    float scale = scale_search(g, 16, xval, weight, waux, max, 9, 0.1f, kMaxQ,
                               max / (2 * kMaxQ - 1), L, true, on_grid, nbf);
    const bool redo[2] = {!on_grid[0], !on_grid[1]};
    if ((redo[0] || redo[1]) && scale > 0)
        scale = refit(g, 16, xval, weight, waux, scale, kMaxQ, redo, L, nbf);
    if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 2; ++k) signs[k] = (uint8_t)(xs ? ~signs[k] & 127 : ~signs[k]);
    }
    for (int k = 0; k < 2; ++k) idx[k] = final_index(g, L + 8 * k);
    return scale;
}

static void iq2_xs_row(const float *x, uint8_t *y, int64_t n, const float *qw, neighbour_fn nbf) {
    const gq_lowgrid *g = &grids[GQ_LOW_IQ2XS];
    for (int64_t ibl = 0; ibl < n / 256; ++ibl, y += 74) {
        const float *xbl = x + 256 * ibl;
        const float sigma2 = sum_squares(xbl) / 256;
        uint16_t q2[32] = {0};
        float scales[16], max_scale = 0;
        for (int ib = 0; ib < 16; ++ib) {
            int idx[2];
            uint8_t signs[2];
            scales[ib] = iq2_16_block(g, true, xbl + 16 * ib, qw + 256 * ibl + 16 * ib, sigma2, idx,
                                      signs, nbf);
            if (idx[0] < 0) continue; /* zero block: q2 stays 0 */
            for (int k = 0; k < 2; ++k) q2[2 * ib + k] = (uint16_t)(idx[k] | signs[k] << 9);
            max_scale = GQ_MAX(max_scale, scales[ib]);
        }
        memset(y, 0, 74);
        if (!max_scale) continue;
        const float d = max_scale / 31;
        gq_put_f16(y, d);
        const float id = 1 / d;
        for (int i = 0; i < 32; ++i) {
            y[2 + 2 * i] = (uint8_t)q2[i];
            y[3 + 2 * i] = (uint8_t)(q2[i] >> 8);
        }
        for (int ib = 0; ib < 16; ++ib)
            y[66 + ib / 2] |= (uint8_t)(scale_code(id, scales[ib]) << 4 * (ib % 2));
    }
}

/* IQ2_S: d (F16), qs[32] grid index low bytes, signs[32], qh[8] (2 high
 * bits per index), scales[8]. */
static void iq2_s_row(const float *x, uint8_t *y, int64_t n, const float *qw, neighbour_fn nbf) {
    const gq_lowgrid *g = &grids[GQ_LOW_IQ2S];
    for (int64_t ibl = 0; ibl < n / 256; ++ibl, y += 82) {
        memset(y, 0, 82);
        uint8_t *qs = y + 2, *sg = y + 34, *qh = y + 66, *sc = y + 74;
        const float *xbl = x + 256 * ibl;
        const float sigma2 = 2 * sum_squares(xbl) / 256;
        float scales[16], max_scale = 0;
        for (int ib = 0; ib < 16; ++ib) {
            int idx[2];
            uint8_t signs[2];
            scales[ib] = iq2_16_block(g, false, xbl + 16 * ib, qw ? qw + 256 * ibl + 16 * ib : NULL,
                                      sigma2, idx, signs, nbf);
            if (idx[0] < 0) continue;
            for (int k = 0; k < 2; ++k) {
                const int i8 = 2 * ib + k;
                qs[i8] = (uint8_t)(idx[k] & 255);
                qh[i8 / 4] |= (uint8_t)((idx[k] >> 8) << 2 * (i8 % 4));
                sg[i8] = signs[k];
            }
            max_scale = GQ_MAX(max_scale, scales[ib]);
        }
        if (!max_scale) continue;
        const float d = max_scale / 31;
        gq_put_f16(y, d * 0.9875f);
        const float id = 1 / d;
        for (int ib = 0; ib < 16; ++ib)
            sc[ib / 2] |= (uint8_t)(scale_code(id, scales[ib]) << 4 * (ib % 2));
    }
}

/* ---- IQ3_XXS: d (F16), qs[64] grid indices, 8 x (4 x 7 sign bits, scale) --- */

static float iq3_xxs_block(const gq_lowgrid *g, const float *xb, const float *qw, float sigma2,
                           uint8_t *q3, uint32_t *sas, neighbour_fn nbf) {
    const int kMaxQ = 8;
    float weight[32], waux[32], xval[32];
    int8_t L[32];
    uint8_t signs[4];
    bool on_grid[8], redo[8];
    if (qw)
        block_weights(32, xb, qw, sigma2, weight);
    else
        for (int i = 0; i < 32; ++i) weight[i] = xb[i] * xb[i];
    for (int i = 0; i < 32; ++i) waux[i] = sqrtf(weight[i]);
    take_signs(32, xb, weight, true, xval, signs);
    const float max = max_of(32, xval);
    memset(L, 0, 32);
    if (max < 1e-8f) return 0;
    float scale = scale_search(g, 32, xval, weight, waux, max, 15, 0.2f, kMaxQ,
                               max / (2 * kMaxQ - 1), L, true, on_grid, nbf);
    int n_not_on_grid = 0;
    for (int k = 0; k < 8; ++k) n_not_on_grid += redo[k] = !on_grid[k];
    if (n_not_on_grid > 0 && scale > 0)
        scale = refit(g, 32, xval, weight, waux, scale, kMaxQ, redo, L, nbf);
    if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 4; ++k) signs[k] = (uint8_t)(~signs[k] & 127);
    }
    for (int k = 0; k < 8; ++k) q3[k] = (uint8_t)final_index(g, L + 4 * k);
    *sas = (uint32_t)signs[0] | (uint32_t)signs[1] << 7 | (uint32_t)signs[2] << 14 |
           (uint32_t)signs[3] << 21;
    return scale;
}

static void iq3_xxs_row(const float *x, uint8_t *y, int64_t n, const float *qw, neighbour_fn nbf) {
    const gq_lowgrid *g = &grids[GQ_LOW_IQ3XXS];
    for (int64_t ibl = 0; ibl < n / 256; ++ibl, y += 98) {
        uint8_t q3[64] = {0};
        uint32_t sas[8] = {0};
        const float *xbl = x + 256 * ibl;
        const float sigma2 = 2 * sum_squares(xbl) / 256;
        float scales[8], max_scale = 0;
        for (int ib = 0; ib < 8; ++ib) {
            scales[ib] = iq3_xxs_block(g, xbl + 32 * ib, qw ? qw + 256 * ibl + 32 * ib : NULL,
                                       sigma2, q3 + 8 * ib, sas + ib, nbf);
            max_scale = GQ_MAX(max_scale, scales[ib]);
        }
        memset(y, 0, 98);
        if (!max_scale) continue;
        const float d = max_scale / 31;
        gq_put_f16(y, d * 1.0125f);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ++ib) sas[ib] |= (uint32_t)scale_code(id, scales[ib]) << 28;
        memcpy(y + 2, q3, 64);
        for (int ib = 0; ib < 8; ++ib)
            for (int b = 0; b < 4; ++b) y[66 + 4 * ib + b] = (uint8_t)(sas[ib] >> 8 * b);
    }
}

/* ---- IQ3_S's block search (gguf_quant_iq.c) -------------------------------- */

/* The neighbour search of a level the CPU has (checked by the caller). */
static neighbour_fn neighbour_at(amn_simd level) {
#if AMN_GGUF_QUANT_AVX2
    if (level >= AMN_SIMD_AVX512) return gq_low_best_neighbour_avx512;
    if (level >= AMN_SIMD_AVX2) return gq_low_best_neighbour_avx2;
#else
    (void)level;
#endif
    return gq_low_best_neighbour;
}

/* quantize_row_iq3_s_impl's search for one 32-value block (kMaxQ 8, 19
 * tries of step 0.2 from max / 15, on_grid false when no try is kept, and
 * every group snapped again when one of the kept try's was off the grid).
 * L receives the codes; returns the scale. */
float gq_iq3s_search(const float *xval, const float *weight, const float *waux, float max,
                     int8_t *L, amn_simd level) {
    const gq_lowgrid *g = &grids[GQ_LOW_IQ3S];
    const neighbour_fn nbf = neighbour_at(level);
    const int kMaxQ = 8;
    bool on_grid[8];
    float scale = scale_search(g, 32, xval, weight, waux, max, 9, 0.2f, kMaxQ,
                               max / (2 * kMaxQ - 1), L, false, on_grid, nbf);
    int n_not_on_grid = 0;
    for (int k = 0; k < 8; ++k) n_not_on_grid += !on_grid[k];
    if (n_not_on_grid > 0 && scale > 0) {
        static const bool all[8] = {true, true, true, true, true, true, true, true};
        scale = refit(g, 32, xval, weight, waux, scale, kMaxQ, all, L, nbf);
    }
    return scale;
}

/* ---- rows and dispatch ------------------------------------------------------- */

typedef void (*row_fn)(const float *x, uint8_t *y, int64_t n, const float *qw, neighbour_fn nbf);

static void rows(row_fn fn, size_t row_bytes, bool needs_qw, const float *x, uint8_t *y,
                 int64_t nrows, int64_t n_per_row, const float *qw, amn_simd level) {
    const size_t nb = (size_t)(n_per_row / 256) * row_bytes;
    if (needs_qw && !qw) {
        memset(y, 0, nb * (size_t)nrows);
        return;
    }
    const amn_simd cpu = gguf_simd_max();
    const neighbour_fn nbf = neighbour_at(level < cpu ? level : cpu);
    for (int64_t r = 0; r < nrows; ++r)
        fn(x + r * n_per_row, y + (size_t)r * nb, n_per_row, qw, nbf);
}

bool gq_iqlow_rows_simd(uint32_t type, const float *x, uint8_t *y, int64_t nrows, int64_t n_per_row,
                        const float *qw, amn_simd level) {
    switch (type) {
    case GGUF_TYPE_IQ2_XXS:
        rows(iq2_xxs_row, 66, true, x, y, nrows, n_per_row, qw, level);
        return true;
    case GGUF_TYPE_IQ2_XS:
        rows(iq2_xs_row, 74, true, x, y, nrows, n_per_row, qw, level);
        return true;
    case GGUF_TYPE_IQ2_S:
        rows(iq2_s_row, 82, false, x, y, nrows, n_per_row, qw, level);
        return true;
    case GGUF_TYPE_IQ3_XXS:
        rows(iq3_xxs_row, 98, false, x, y, nrows, n_per_row, qw, level);
        return true;
    case GGUF_TYPE_IQ1_S: {
        const size_t nb = (size_t)(n_per_row / 256) * 50;
        if (!qw)
            memset(y, 0, nb * (size_t)nrows);
        else
            for (int64_t r = 0; r < nrows; ++r)
                gq_iq1_s_row(x + r * n_per_row, y + (size_t)r * nb, n_per_row, qw, level);
        return true;
    }
    case GGUF_TYPE_IQ1_M: {
        const size_t nb = (size_t)(n_per_row / 256) * 56;
        for (int64_t r = 0; r < nrows; ++r)
            gq_iq1_m_row(x + r * n_per_row, y + (size_t)r * nb, n_per_row, qw, level);
        return true;
    }
    default:
        return false;
    }
}

void gq_iq2_xxs_rows(const float *x, uint8_t *y, int64_t nrows, int64_t n_per_row,
                     const float *qw) {
    gq_iqlow_rows_simd(GGUF_TYPE_IQ2_XXS, x, y, nrows, n_per_row, qw, amn_simd_level());
}
void gq_iq2_xs_rows(const float *x, uint8_t *y, int64_t nrows, int64_t n_per_row, const float *qw) {
    gq_iqlow_rows_simd(GGUF_TYPE_IQ2_XS, x, y, nrows, n_per_row, qw, amn_simd_level());
}
void gq_iq2_s_rows(const float *x, uint8_t *y, int64_t nrows, int64_t n_per_row, const float *qw) {
    gq_iqlow_rows_simd(GGUF_TYPE_IQ2_S, x, y, nrows, n_per_row, qw, amn_simd_level());
}
void gq_iq3_xxs_rows(const float *x, uint8_t *y, int64_t nrows, int64_t n_per_row,
                     const float *qw) {
    gq_iqlow_rows_simd(GGUF_TYPE_IQ3_XXS, x, y, nrows, n_per_row, qw, amn_simd_level());
}
void gq_iq1_s_rows(const float *x, uint8_t *y, int64_t nrows, int64_t n_per_row, const float *qw) {
    gq_iqlow_rows_simd(GGUF_TYPE_IQ1_S, x, y, nrows, n_per_row, qw, amn_simd_level());
}
void gq_iq1_m_rows(const float *x, uint8_t *y, int64_t nrows, int64_t n_per_row, const float *qw) {
    gq_iqlow_rows_simd(GGUF_TYPE_IQ1_M, x, y, nrows, n_per_row, qw, amn_simd_level());
}
