/* Private to the low-bit i-quant quantizers (gguf_quant_iqlow*.c): the
 * search tables ggml's iq2xs_init_impl / iq3xs_init_impl build, and the
 * pieces the scalar and vector paths share. */
#ifndef AMN_GGUF_QUANT_IQLOW_IMPL_H
#define AMN_GGUF_QUANT_IQLOW_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "amn/simd.h"
#include "gguf_quant_impl.h"

/* One grid with its index map and neighbour lists. A point has `dim`
 * coordinates of `bits` bits each (levels l); its map index is the levels
 * packed, coordinate k at bit bits * k. */
typedef struct gq_lowgrid {
    int dim, bits, size;
    /* Point g's coordinates 2l + 1 as bytes (ggml's kgrid_q2xs / q3xs). */
    uint64_t *grid;
    /* By map index: >= 0 the grid point there; < 0 -(offset + 1) into
     * neighbours (built for every point the searches can reach: levels up
     * to 2 for 2-bit grids, all for 3-bit ones); -1 elsewhere. */
    int32_t *map;
    /* At each offset: the count, then that many grid indices, nearest
     * first (the nwant smallest squared distances; ties by index). */
    uint16_t *neighbours;
    /* The same lists for the vector search, at coords + dim * (offset + 1):
     * runs of 8 candidates, byte 8 * k + c of a run the level of coordinate
     * k of its candidate c (8 * dim bytes a run; 0 past the list's end). */
    uint8_t *coords;
} gq_lowgrid;

/* The grids: those of gguf_quant_iqlow_ready(), then IQ3_S's (512 points,
 * built on its own by gq_lowgrid_iq3s_ready for gguf_quant_iq.c). */
enum {
    GQ_LOW_IQ2XXS,
    GQ_LOW_IQ2XS,
    GQ_LOW_IQ2S,
    GQ_LOW_IQ1S,
    GQ_LOW_IQ3XXS,
    GQ_LOW_IQ3S,
    GQ_LOW_NGRIDS
};

bool gq_lowgrid_iq3s_ready(void);

/* Complete once gguf_quant_iqlow_ready() (or, for IQ3_S's,
 * gq_lowgrid_iq3s_ready()) returned true. */
const gq_lowgrid *gq_lowgrid_get(int which);

/* The vector scale searches' choice among nt tries whose sums are sqx and
 * sq2, taken try after try as the scalar search takes them (so ties fall
 * the same way): the winner's index, or -1; a winner's scale replaces
 * *scale. */
static inline int gq_low_pick_try(int nt, const float *sqx, const float *sq2, float *scale) {
    float best = 0;
    int chosen = -1;
    for (int c = 0; c < nt; ++c)
        if (sq2[c] > 0 && sqx[c] * sqx[c] > best * sq2[c]) {
            *scale = sqx[c] / sq2[c];
            best = *scale * sqx[c];
            chosen = c;
        }
    return chosen;
}

static inline int gq_low_coord(const gq_lowgrid *g, int point, int k) {
    return (int)((g->grid[point] >> 8 * k) & 0xff);
}

/* Point g's codes into L[0..dim): each byte 2l + 1 (1..15) halved. */
static inline void gq_low_codes(const gq_lowgrid *g, int point, int8_t *L) {
    const uint64_t v = (g->grid[point] >> 1) & 0x7f7f7f7f7f7f7f7full;
    for (int i = 0; i < g->dim; ++i) L[i] = (int8_t)(v >> 8 * i);
}

/* The grid index, or the neighbour list, of codes L[0..dim). */
static inline int32_t gq_low_lookup(const gq_lowgrid *g, const int8_t *L) {
    int u = 0;
    for (int i = 0; i < g->dim; ++i) u |= L[i] << g->bits * i;
    return g->map[u];
}

static inline const uint16_t *gq_low_list(const gq_lowgrid *g, int32_t map_value) {
    return g->neighbours + (-map_value - 1);
}

/* ggml's iq2_find_best_neighbour / iq3_find_best_neighbour: the listed
 * point of least weighted distance at this scale (the first on ties); its
 * codes into L, its index returned. map_value < 0 is the group's map entry.
 * When every distance is NaN or at least FLT_MAX ggml aborts; here the
 * first listed point is taken. */
int gq_low_best_neighbour(const gq_lowgrid *g, int32_t map_value, const float *xval,
                          const float *weight, float scale, int8_t *L);

/* IQ3_S's block search (quantize_row_iq3_s_impl) on the IQ3_S grid, the
 * AVX2 or AVX-512 path at those levels (the caller has checked the CPU):
 * codes into L, the scale returned. */
float gq_iq3s_search(const float *xval, const float *weight, const float *waux, float max,
                     int8_t *L, amn_simd level);

/* ggml's sort of IQ1's (value, index) pairs: glibc's qsort on 32 or 16
 * elements of 8 bytes is its merge sort (msort_with_tmp: halves n / 2 and
 * n - n / 2, the left element taken unless it compares greater), with
 * iq1_sort_helper's order (NaN equal to everything). Sorts idx by val. */
void gq_iq1_sort(const float *val, int n, int *idx);

/* IQ1's three values per code, shifted up (x_p) or down (x_m) by the
 * delta (IQ1S_DELTA = IQ1M_DELTA). */
#define GQ_IQ1_DELTA 0.125f
#define GQ_IQ1_XP                                                                                  \
    { -1 + GQ_IQ1_DELTA, GQ_IQ1_DELTA, 1 + GQ_IQ1_DELTA }
#define GQ_IQ1_XM                                                                                  \
    { -1 - GQ_IQ1_DELTA, -GQ_IQ1_DELTA, 1 - GQ_IQ1_DELTA }

/* IQ1_S's split search state: ggml's best_score, scale, besti1, besti2,
 * best_shift. */
typedef struct {
    float best_score, scale;
    int i1, i2, shift;
} gq_iq1s_best;

/* ggml's two tests of one split (i1, i2), shift +1 then -1, in order. */
static inline void gq_iq1s_pick(gq_iq1s_best *b, int i1, int i2, float qx_p, float q2_p, float qx_m,
                                float q2_m) {
    if (q2_p > 0 && qx_p * qx_p > b->best_score * q2_p) {
        b->scale = qx_p / q2_p;
        b->best_score = b->scale * qx_p;
        b->i1 = i1;
        b->i2 = i2;
        b->shift = 1;
    }
    if (q2_m > 0 && qx_m * qx_m > b->best_score * q2_m) {
        b->scale = qx_m / q2_m;
        b->best_score = b->scale * qx_m;
        b->i1 = i1;
        b->i2 = i2;
        b->shift = -1;
    }
}

/* gguf_quant_iqlow_iq1.c: one row of IQ1_S (qw required) / IQ1_M. */
void gq_iq1_s_row(const float *x, uint8_t *y, int64_t n, const float *qw, amn_simd level);
void gq_iq1_m_row(const float *x, uint8_t *y, int64_t n, const float *qw, amn_simd level);

#if AMN_GGUF_QUANT_AVX2
/* gguf_quant_iqlow_avx2.c: ggml's iq2_find_best_neighbour over a list, the
 * candidates 8 at a time. */
int gq_low_best_neighbour_avx2(const gq_lowgrid *g, int32_t map_value, const float *xval,
                               const float *weight, float scale, int8_t *L);
/* gguf_quant_iqlow.c's scale_search (the scale tries of IQ2_XXS / IQ2_XS
 * / IQ2_S / IQ3_XXS): every try's codes first, their sums with the tries
 * in lanes, then ggml's pick try after try. */
float gq_low_scale_search_avx2(const gq_lowgrid *g, int n, const float *xval, const float *weight,
                               const float *waux, float top, int nis, float step, int kmaxq,
                               float scale, int8_t *L, bool none_on, bool *on_grid);
/* IQ1_S's search over every split (i1 <= i2) of the 32 sorted values,
 * from the prefix sums sumx / sumw (33 values, readable to index 40): 8
 * values of i2 in lanes, ggml's tests run only for runs where one passes
 * against the best so far (else none would, in order, either). */
void gq_iq1s_split_avx2(const float *sumx, const float *sumw, gq_iq1s_best *b);
/* IQ1_M's search over every split of the 16 sorted values; term[c][j]
 * what sorted value j adds at code c to sumqx[0..3], sumq2[0..3] (lanes
 * 0..7). The splits of one i1 run side by side, each sum in ggml's order;
 * b->shift receives best_k. */
void gq_iq1m_split_avx2(const float term[3][16][8], gq_iq1s_best *b);
/* ggml's iq1_find_best_neighbour2 (IQ1_S / IQ1_M), the same way. */
int gq_iq1_best_neighbour_avx2(const gq_lowgrid *g, int32_t map_value, const float *xval,
                               const float *weight, float scale, const float *xg, int8_t *L);
/* gguf_quant_iqlow_avx512.c: the same neighbour search 16 candidates at a
 * time, and the scale search with 16 tries in the lanes. */
int gq_low_best_neighbour_avx512(const gq_lowgrid *g, int32_t map_value, const float *xval,
                                 const float *weight, float scale, int8_t *L);
float gq_low_scale_search_avx512(const gq_lowgrid *g, int n, const float *xval, const float *weight,
                                 const float *waux, float top, int nis, float step, int kmaxq,
                                 float scale, int8_t *L, bool none_on, bool *on_grid);
#endif

#endif
