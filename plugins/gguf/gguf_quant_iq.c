/* i-quant quantizers without an importance matrix: IQ4_NL and IQ4_XS
 * (ggml's quantize_iq4_nl / quantize_iq4_xs -> quantize_row_iq4_nl_impl
 * with ntry 7, as ggml_quantize_chunk calls them) and IQ3_S
 * (quantize_iq3_s -> quantize_row_iq3_s_impl, block size 32, on the
 * 512-entry grid with the index map and neighbour lists iq3xs_init_impl
 * builds). Source: src/ggml-quants.c, ggml-org/ggml d99724f2. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_quant_impl.h"
#include "gguf_quant_iqlow_impl.h"
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

/* Nibbles: byte j of each 16-byte run holds elements j (low) and j + 16. */
static void pack_iq4(const uint8_t *L, int n, uint8_t *q4) {
    for (int i = 0; i < n / 32; ++i)
        for (int j = 0; j < 16; ++j)
            q4[16 * i + j] = (uint8_t)(L[32 * i + j] | L[32 * i + 16 + j] << 4);
}

/* The block bodies, given the per-block search and the coding of values
 * (scalar or AVX2: the same results). */
typedef float (*iq4_search_fn)(const float *restrict xb, const float *restrict weight,
                               uint8_t *restrict Lb);
typedef void (*iq4_codes_fn)(const float *x, int n, float id, uint8_t *L);

static void iq4_codes(const float *x, int n, float id, uint8_t *L) {
    for (int j = 0; j < n; ++j) L[j] = (uint8_t)best_index_iq4(id * x[j]);
}

/* quantize_row_iq4_nl_impl's weights: with an importance matrix qw times
 * sqrt(sigma2 + x^2) (sigma2 = 2 * sum(x^2) / n over the super-block),
 * else x^2. */
static void iq4_weights(const float *restrict xb, const float *restrict qw, float sigma2,
                        float *restrict weight) {
    if (qw)
        for (int j = 0; j < 32; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
    else
        for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
}

static float iq4_sigma2(const float *x, int n) {
    float sigma2 = 0;
    for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
    return sigma2 * (2.f / n);
}

static inline void iq4_nl_body(const float *restrict x, uint8_t *restrict y,
                               const float *restrict qw, iq4_search_fn search, iq4_codes_fn codes) {
    float weight[32];
    uint8_t L[32] = {0};
    iq4_weights(x, qw, qw ? iq4_sigma2(x, 32) : 0, weight);
    const float scale = search(x, weight, L);
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

static inline void iq4_xs_body(const float *restrict x, uint8_t *restrict y,
                               const float *restrict qw, iq4_search_fn search, iq4_codes_fn codes) {
    float weight[32], scales[8];
    uint8_t L[32];
    const float sigma2 = qw ? iq4_sigma2(x, 256) : 0;
    for (int ib = 0; ib < 8; ++ib) {
        iq4_weights(x + 32 * ib, qw ? qw + 32 * ib : NULL, sigma2, weight);
        scales[ib] = search(x + 32 * ib, weight, L);
    }
    iq4_xs_finish(x, y, scales, codes);
}

void gq_iq4_nl_w(const float *restrict x, uint8_t *restrict y, const float *restrict qw) {
    iq4_nl_body(x, y, qw, iq4_block_scale_w, iq4_codes);
}
void gq_iq4_xs_w(const float *restrict x, uint8_t *restrict y, const float *restrict qw) {
    iq4_xs_body(x, y, qw, iq4_block_scale_w, iq4_codes);
}
void gq_iq4_nl(const float *restrict x, uint8_t *restrict y) {
    iq4_nl_body(x, y, NULL, iq4_block_scale_w, iq4_codes);
}
void gq_iq4_xs(const float *restrict x, uint8_t *restrict y) {
    iq4_xs_body(x, y, NULL, iq4_block_scale_w, iq4_codes);
}
#if AMN_GGUF_QUANT_AVX2
void gq_iq4_nl_avx2(const float *restrict x, uint8_t *restrict y) {
    iq4_nl_body(x, y, NULL, gq_iq4_block_scale_w_avx2, gq_iq4_codes_avx2);
}
void gq_iq4_xs_avx2(const float *restrict x, uint8_t *restrict y) {
    iq4_xs_body(x, y, NULL, gq_iq4_block_scale_w_avx2, gq_iq4_codes_avx2);
}
void gq_iq4_nl_w_avx2(const float *restrict x, uint8_t *restrict y, const float *restrict qw) {
    iq4_nl_body(x, y, qw, gq_iq4_block_scale_w_avx2, gq_iq4_codes_avx2);
}
void gq_iq4_xs_w_avx2(const float *restrict x, uint8_t *restrict y, const float *restrict qw) {
    iq4_xs_body(x, y, qw, gq_iq4_block_scale_w_avx2, gq_iq4_codes_avx2);
}
#endif

/* ---- IQ3_S ---------------------------------------------------------------- */

/* The 512-point grid with its index map and neighbour lists
 * (iq3xs_init_impl(512)) is one of gguf_quant_iqlow.c's grids, built once
 * and shared with the vector path. */
bool gguf_quant_iq3_ready(void) {
    return gq_lowgrid_iq3s_ready();
}

static const gq_lowgrid *iq3_grid(void) {
    return gq_lowgrid_get(GQ_LOW_IQ3S);
}

/* One 32-value block: scale, codes L, sign bytes; *zero when every |x| is
 * zero (then nothing else is meaningful). qw: the importance matrix's
 * weights of the block, or NULL. The search is the low-bit i-quants'
 * (gguf_quant_iqlow.c), scalar, AVX2 or AVX-512. */
static inline float iq3_block_on(const float *restrict xb, const float *restrict qw, float sigma2,
                                 int8_t *restrict L, uint8_t *restrict signs, bool *zero,
                                 amn_simd level) {
    float weight[32], waux[32], xval[32];
    const float max = gq_iq3_block_prepare(xb, qw, sigma2, weight, waux, xval, signs, L);
    *zero = !max;
    if (*zero) return 0;
    float scale = gq_iq3s_search(xval, weight, waux, max, L, level);
    if (scale < 0) {
        /* ggml: "should never happen"; flip the scale and the signs. */
        scale = -scale;
        for (int k = 0; k < 4; ++k) signs[k] = (uint8_t)~signs[k];
    }
    return scale;
}

static float iq3_block(const float *restrict xb, const float *restrict qw, float sigma2,
                       int8_t *restrict L, uint8_t *restrict signs, bool *zero) {
    return iq3_block_on(xb, qw, sigma2, L, signs, zero, AMN_SIMD_SCALAR);
}
#if AMN_GGUF_QUANT_AVX2
static float iq3_block_avx2(const float *restrict xb, const float *restrict qw, float sigma2,
                            int8_t *restrict L, uint8_t *restrict signs, bool *zero) {
    return iq3_block_on(xb, qw, sigma2, L, signs, zero, AMN_SIMD_AVX2);
}
static float iq3_block_avx512(const float *restrict xb, const float *restrict qw, float sigma2,
                              int8_t *restrict L, uint8_t *restrict signs, bool *zero) {
    return iq3_block_on(xb, qw, sigma2, L, signs, zero, AMN_SIMD_AVX512);
}
#endif

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
            const int gi = gq_low_lookup(iq3_grid(), L + 4 * k);
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
    iq3_s_body(x, y, NULL, iq3_block_avx2);
}
void gq_iq3_s_w_avx2(const float *restrict x, uint8_t *restrict y, const float *restrict qw) {
    iq3_s_body(x, y, qw, iq3_block_avx2);
}
void gq_iq3_s_avx512(const float *restrict x, uint8_t *restrict y) {
    iq3_s_body(x, y, NULL, iq3_block_avx512);
}
void gq_iq3_s_w_avx512(const float *restrict x, uint8_t *restrict y, const float *restrict qw) {
    iq3_s_body(x, y, qw, iq3_block_avx512);
}
#endif
