/* Row-level quantization, with or without an importance matrix: what
 * ggml_quantize_chunk does for each type given quant_weights (src/ggml-
 * quants.c, ggml-org/ggml d99724f2 = llama.cpp 3af988fab).
 *
 * Without weights every type takes gguf_quantize's block path (ggml's
 * quantize_row_*_ref). With weights, the types whose ggml quantizer reads
 * them take their _impl path here: the legacy Q4_0 / Q4_1 / Q5_0 / Q5_1
 * (whose weights also depend on sigma2 = sum(x^2) / n_per_row over the
 * whole row, so they need whole rows), the k-quants, IQ4_NL, IQ4_XS and
 * IQ3_S (sigma2 over each super-block). The others (Q8_0, Q1_0, Q2_0,
 * MXFP4, TQ1_0, TQ2_0, the plain types) ignore the weights in ggml and here. */
#include <math.h>
#include <string.h>

#include "amn/error.h"
#include "gguf_dequant.h"
#include "gguf_quant.h"
#include "gguf_quant_impl.h"
#include "gguf_quant_iqlow.h"
#include "gguf_types.h"

/* sum(x^2) / n over one row, in ggml's order (the legacy _impl's sigma2). */
static float row_sigma2(const float *x, int64_t n) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
    return sum_x2 / n;
}

static void legacy_weights(const float *restrict xb, const float *restrict qw, float sigma2,
                           float *restrict weight) {
    for (int j = 0; j < 32; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
}

/* Q4_0 / Q5_0's 5-bit high bits: bit 4 of codes j and j + 16 into qh. */
static uint32_t high_bits(const uint8_t *L) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        qh |= ((L[j] & 0x10u) >> 4) << j;
        qh |= ((L[j + 16] & 0x10u) >> 4) << (j + 16);
    }
    return qh;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (uint8_t)(v >> 8 * k);
}

/* quantize_row_q4_0_impl / q5_0_impl: make_qx_quants over each block. */
static inline void rows_q4_0_q5_0(const float *x, uint8_t *y, int64_t nrows, int64_t n,
                                  const float *qw, int nmax, gq_qx_search_w_fn search) {
    const size_t bb = nmax == 8 ? 18 : 22;
    for (int64_t r = 0; r < nrows; r++, x += n) {
        const float sigma2 = row_sigma2(x, n);
        for (int64_t ib = 0; ib < n / 32; ++ib, y += bb) {
            float weight[32];
            int8_t L[32];
            legacy_weights(x + 32 * ib, qw + 32 * ib, sigma2, weight);
            gq_put_f16(y, search(32, nmax, x + 32 * ib, L, weight));
            uint8_t *qs = y + (nmax == 8 ? 2 : 6);
            for (int j = 0; j < 16; ++j) qs[j] = (uint8_t)((L[j] & 0x0F) | (L[j + 16] & 0x0F) << 4);
            if (nmax == 16) put_u32(y + 2, high_bits((const uint8_t *)L));
        }
    }
}

typedef void (*search8_fn)(int n, int nmax, const float *restrict x, const float *restrict w,
                           uint8_t *restrict L, float *restrict the_min, float *restrict scale,
                           float rmin, float rdelta, int nstep, bool use_mad);

/* quantize_row_q4_1_impl / q5_1_impl: make_qkx3_quants over each block,
 * which with weights is make_qkx2_quants without use_mad (see
 * gguf_quant_k.c): eight blocks at a time through search8, the rest one
 * by one. */
static inline void rows_q4_1_q5_1(const float *x, uint8_t *y, int64_t nrows, int64_t n,
                                  const float *qw, int nmax, search8_fn search8) {
    const size_t bb = nmax == 15 ? 20 : 24;
    const int64_t nb = n / 32;
    for (int64_t r = 0; r < nrows; r++, x += n) {
        const float sigma2 = row_sigma2(x, n);
        for (int64_t ib = 0; ib < nb; ib += 8) {
            const int k = nb - ib >= 8 ? 8 : (int)(nb - ib);
            float weight[256], d[8], min[8];
            uint8_t L[256];
            for (int g = 0; g < k; g++)
                legacy_weights(x + 32 * (ib + g), qw + 32 * (ib + g), sigma2, weight + 32 * g);
            if (k == 8)
                search8(32, nmax, x + 32 * ib, weight, L, min, d, -0.9f, 0.05f, 36, false);
            else
                for (int g = 0; g < k; g++)
                    d[g] = gq_qkx3_search(32, nmax, x + 32 * (ib + g), weight + 32 * g, L + 32 * g,
                                          &min[g], -0.9f, 0.05f, 36);
            for (int g = 0; g < k; g++, y += bb) {
                const uint8_t *Lg = L + 32 * g;
                gq_put_f16(y, d[g]);
                gq_put_f16(y + 2, -min[g]);
                uint8_t *qs = y + (nmax == 15 ? 4 : 8);
                for (int j = 0; j < 16; ++j)
                    qs[j] = (uint8_t)((Lg[j] & 0x0F) | (Lg[j + 16] & 0x0F) << 4);
                if (nmax == 31) put_u32(y + 4, high_bits(Lg));
            }
        }
    }
}

/* One row function per type and path, a body given its constants. */
#define GQ_ROWS(name, body, nmax, search)                                                          \
    static void name(const float *x, uint8_t *y, int64_t nrows, int64_t n, const float *qw) {      \
        body(x, y, nrows, n, qw, nmax, search);                                                    \
    }
GQ_ROWS(gq_q4_0_rows, rows_q4_0_q5_0, 8, gq_qx_search_w)
GQ_ROWS(gq_q5_0_rows, rows_q4_0_q5_0, 16, gq_qx_search_w)
GQ_ROWS(gq_q4_1_rows, rows_q4_1_q5_1, 15, gq_qkx2_search8)
GQ_ROWS(gq_q5_1_rows, rows_q4_1_q5_1, 31, gq_qkx2_search8)
#if AMN_GGUF_QUANT_AVX2
GQ_ROWS(gq_q4_0_rows_avx2, rows_q4_0_q5_0, 8, gq_qx_search_w_avx2)
GQ_ROWS(gq_q5_0_rows_avx2, rows_q4_0_q5_0, 16, gq_qx_search_w_avx2)
GQ_ROWS(gq_q4_1_rows_avx2, rows_q4_1_q5_1, 15, gq_qkx2_search8_avx2)
GQ_ROWS(gq_q5_1_rows_avx2, rows_q4_1_q5_1, 31, gq_qkx2_search8_avx2)
#endif

/* A type whose blocks each depend on their own values and weights only:
 * the block function over every block of every row. */
typedef void (*wblock_fn)(const float *restrict x, uint8_t *restrict y, const float *restrict qw);

static inline void rows_by_block(const float *x, uint8_t *y, int64_t nrows, int64_t n,
                                 const float *qw, wblock_fn fn, int be, size_t bb) {
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t c = 0; c < n; c += be, x += be, y += bb) fn(x, y, qw + c);
}

#define GQ_BLOCK_ROWS(name, fn, be, bb)                                                            \
    static void name(const float *x, uint8_t *y, int64_t nrows, int64_t n, const float *qw) {      \
        rows_by_block(x, y, nrows, n, qw, fn, be, bb);                                             \
    }
GQ_BLOCK_ROWS(gq_q2_k_rows, gq_q2_k_w, 256, 84)
GQ_BLOCK_ROWS(gq_q3_k_rows, gq_q3_k_w, 256, 110)
GQ_BLOCK_ROWS(gq_q4_k_rows, gq_q4_k_w, 256, 144)
GQ_BLOCK_ROWS(gq_q5_k_rows, gq_q5_k_w, 256, 176)
GQ_BLOCK_ROWS(gq_q6_k_rows, gq_q6_k_w, 256, 210)
GQ_BLOCK_ROWS(gq_iq4_nl_rows, gq_iq4_nl_w, 32, 18)
GQ_BLOCK_ROWS(gq_iq4_xs_rows, gq_iq4_xs_w, 256, 136)
GQ_BLOCK_ROWS(gq_iq3_s_rows, gq_iq3_s_w, 256, 110)
#if AMN_GGUF_QUANT_AVX2
GQ_BLOCK_ROWS(gq_iq3_s_rows_avx2, gq_iq3_s_w_avx2, 256, 110)
GQ_BLOCK_ROWS(gq_iq3_s_rows_avx512, gq_iq3_s_w_avx512, 256, 110)
GQ_BLOCK_ROWS(gq_iq4_nl_rows_avx2, gq_iq4_nl_w_avx2, 32, 18)
GQ_BLOCK_ROWS(gq_iq4_xs_rows_avx2, gq_iq4_xs_w_avx2, 256, 136)
GQ_BLOCK_ROWS(gq_q2_k_rows_avx2, gq_q2_k_w_avx2, 256, 84)
GQ_BLOCK_ROWS(gq_q4_k_rows_avx2, gq_q4_k_w_avx2, 256, 144)
GQ_BLOCK_ROWS(gq_q5_k_rows_avx2, gq_q5_k_w_avx2, 256, 176)
GQ_BLOCK_ROWS(gq_q3_k_rows_avx2, gq_q3_k_w_avx2, 256, 110)
GQ_BLOCK_ROWS(gq_q6_k_rows_avx2, gq_q6_k_w_avx2, 256, 210)
#endif
#if AMN_GGUF_QUANT_AVX512
GQ_ROWS(gq_q4_0_rows_avx512, rows_q4_0_q5_0, 8, gq_qx_search_w_avx512)
GQ_ROWS(gq_q5_0_rows_avx512, rows_q4_0_q5_0, 16, gq_qx_search_w_avx512)
GQ_BLOCK_ROWS(gq_q3_k_rows_avx512, gq_q3_k_w_avx512, 256, 110)
GQ_BLOCK_ROWS(gq_q6_k_rows_avx512, gq_q6_k_w_avx512, 256, 210)

/* The AVX-512 paths with weights (make_qx_quants' users). */
static gguf_qrow_fn qrow_weighted_avx512(uint32_t type) {
    switch (type) {
    case GGUF_TYPE_Q3_K:
        return gq_q3_k_rows_avx512;
    case GGUF_TYPE_Q6_K:
        return gq_q6_k_rows_avx512;
    case GGUF_TYPE_Q4_0:
        return gq_q4_0_rows_avx512;
    case GGUF_TYPE_Q5_0:
        return gq_q5_0_rows_avx512;
    default:
        return NULL;
    }
}
#endif
#if AMN_GGUF_QUANT_AVX2

/* The vector paths with weights (the same bytes as the scalar ones). */
static gguf_qrow_fn qrow_weighted_avx2(uint32_t type) {
    switch (type) {
    case GGUF_TYPE_IQ3_S:
        return gq_iq3_s_rows_avx2;
    case GGUF_TYPE_IQ4_NL:
        return gq_iq4_nl_rows_avx2;
    case GGUF_TYPE_IQ4_XS:
        return gq_iq4_xs_rows_avx2;
    case GGUF_TYPE_Q2_K:
        return gq_q2_k_rows_avx2;
    case GGUF_TYPE_Q4_K:
        return gq_q4_k_rows_avx2;
    case GGUF_TYPE_Q5_K:
        return gq_q5_k_rows_avx2;
    case GGUF_TYPE_Q3_K:
        return gq_q3_k_rows_avx2;
    case GGUF_TYPE_Q6_K:
        return gq_q6_k_rows_avx2;
    case GGUF_TYPE_Q4_0:
        return gq_q4_0_rows_avx2;
    case GGUF_TYPE_Q5_0:
        return gq_q5_0_rows_avx2;
    case GGUF_TYPE_Q4_1:
        return gq_q4_1_rows_avx2;
    case GGUF_TYPE_Q5_1:
        return gq_q5_1_rows_avx2;
    default:
        return NULL;
    }
}
#endif

gguf_qrow_fn gguf_qrow_weighted(uint32_t type, amn_simd level) {
#if AMN_GGUF_QUANT_AVX512
    if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX512 && gguf_simd_max() >= AMN_SIMD_AVX512 &&
        qrow_weighted_avx512(type))
        return qrow_weighted_avx512(type);
#endif
#if AMN_GGUF_QUANT_AVX2
    if (AMN_SIMD_X86 && type == GGUF_TYPE_IQ3_S && level >= AMN_SIMD_AVX512 &&
        gguf_simd_max() >= AMN_SIMD_AVX512)
        return gq_iq3_s_rows_avx512;
    if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX2 && gguf_simd_max() >= AMN_SIMD_AVX2 &&
        qrow_weighted_avx2(type))
        return qrow_weighted_avx2(type);
#endif
    (void)level;
    switch (type) {
    case GGUF_TYPE_Q4_0:
        return gq_q4_0_rows;
    case GGUF_TYPE_Q4_1:
        return gq_q4_1_rows;
    case GGUF_TYPE_Q5_0:
        return gq_q5_0_rows;
    case GGUF_TYPE_Q5_1:
        return gq_q5_1_rows;
    case GGUF_TYPE_Q2_K:
        return gq_q2_k_rows;
    case GGUF_TYPE_Q3_K:
        return gq_q3_k_rows;
    case GGUF_TYPE_Q4_K:
        return gq_q4_k_rows;
    case GGUF_TYPE_Q5_K:
        return gq_q5_k_rows;
    case GGUF_TYPE_Q6_K:
        return gq_q6_k_rows;
    case GGUF_TYPE_IQ4_NL:
        return gq_iq4_nl_rows;
    case GGUF_TYPE_IQ4_XS:
        return gq_iq4_xs_rows;
    case GGUF_TYPE_IQ3_S:
        return gq_iq3_s_rows;
    case GGUF_TYPE_IQ2_XXS:
        return gq_iq2_xxs_rows;
    case GGUF_TYPE_IQ2_XS:
        return gq_iq2_xs_rows;
    case GGUF_TYPE_IQ2_S:
        return gq_iq2_s_rows;
    case GGUF_TYPE_IQ3_XXS:
        return gq_iq3_xxs_rows;
    case GGUF_TYPE_IQ1_S:
        return gq_iq1_s_rows;
    case GGUF_TYPE_IQ1_M:
        return gq_iq1_m_rows;
    default:
        return NULL;
    }
}

/* Types quantized only row by row even without weights: the low-bit
 * i-quants that ggml runs without weights (IQ3_XXS, IQ2_S, IQ1_M), the same
 * functions then called with qw NULL. */
static gguf_qrow_fn gguf_qrow_unweighted(uint32_t type) {
    switch (type) {
    case GGUF_TYPE_IQ3_XXS:
        return gq_iq3_xxs_rows;
    case GGUF_TYPE_IQ2_S:
        return gq_iq2_s_rows;
    case GGUF_TYPE_IQ1_M:
        return gq_iq1_m_rows;
    default:
        return NULL;
    }
}

static bool is_iqlow(uint32_t type) {
    return type == GGUF_TYPE_IQ2_XXS || type == GGUF_TYPE_IQ2_XS || type == GGUF_TYPE_IQ2_S ||
           type == GGUF_TYPE_IQ3_XXS || type == GGUF_TYPE_IQ1_S || type == GGUF_TYPE_IQ1_M;
}

bool gguf_type_needs_rows(uint32_t type) {
    return gguf_qrow_unweighted(type) != NULL;
}

bool gguf_type_can_quantize_rows(uint32_t type, bool weighted) {
    if (weighted && gguf_qrow_weighted(type, AMN_SIMD_SCALAR)) return true;
    if (!weighted && gguf_type_needs_imatrix(type)) return false;
    return gguf_type_can_quantize(type) || gguf_qrow_unweighted(type) != NULL;
}

bool gguf_type_needs_imatrix(uint32_t type) {
    /* ggml_quantize_chunk GGML_ASSERTs quant_weights for these. */
    return type == GGUF_TYPE_IQ2_XXS || type == GGUF_TYPE_IQ2_XS || type == GGUF_TYPE_IQ1_S;
}

int gguf_quantize_rows(uint32_t type, const float *x, int64_t nrows, int64_t n_per_row,
                       const float *qw, void *dst, amn_simd level) {
    const gguf_type_traits *tr = gguf_type_traits_get(type);
    if (!tr || nrows < 0 || n_per_row <= 0 || n_per_row % tr->block_elems != 0)
        return tr ? AMN_E_INVALID : AMN_E_UNSUPPORTED;
    if (nrows > INT64_MAX / n_per_row) return AMN_E_INVALID;
    gguf_qrow_fn fn = qw ? gguf_qrow_weighted(type, level) : gguf_qrow_unweighted(type);
    if (!fn && qw == NULL && gguf_type_needs_imatrix(type)) return AMN_E_INVALID;
    if (!fn) return gguf_quantize_simd(type, x, (uint64_t)(nrows * n_per_row), dst, level);
    if (type == GGUF_TYPE_IQ3_S && !gguf_quant_iq3_ready()) return AMN_E_NOMEM;
    /* The low-bit i-quants pick their vector path themselves: given the
     * level, so a capped level (AMN_SIMD, tests) reaches them too. */
    if (is_iqlow(type)) {
        if (!gguf_quant_iqlow_type_ready(type)) return AMN_E_NOMEM;
        gq_iqlow_rows_simd(type, x, dst, nrows, n_per_row, qw, level);
        return AMN_OK;
    }
    fn(x, dst, nrows, n_per_row, qw);
    return AMN_OK;
}
