/* Private to the quantizers: one function per block type, and the scalar
 * helpers that reproduce ggml's integer conversions exactly.
 *
 * ggml's quantizers convert floats to integers in three ways, each kept
 * here: nearest_int (a magic-number add, ties to even), C casts such as
 * (int8_t)(x + 8.5f) (truncation; GCC on x86-64 emits cvttss2si, whose
 * out-of-range result is INT32_MIN, then keeps the low bits), and roundf /
 * lroundf (ties away from zero). */
#ifndef AMN_GGUF_QUANT_IMPL_H
#define AMN_GGUF_QUANT_IMPL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "amn/dtype.h"

/* Quantize one block of the type's block_elems values. */
typedef void (*gguf_qblock_fn)(const float *restrict x, uint8_t *restrict y);

/* ggml's nearest_int: exact for |f| <= 2^22, the same bits beyond. */
static inline int gq_nearest_int(float f) {
    const float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* (int32_t)f as cvttss2si computes it, without C's undefined behaviour on
 * NaN or out-of-range values. */
static inline int32_t gq_cvtt(float f) {
    if (!(f >= -2147483648.0f && f < 2147483648.0f)) return INT32_MIN;
    return (int32_t)f;
}

/* gq_cvtt(roundf(f)) (ties away from zero) without the libm call: below
 * 2^23 the fraction f - trunc(f) is exact; from 2^23 on (and for NaN) f is
 * its own roundf. */
static inline int32_t gq_round(float f) {
    if (!(fabsf(f) < 8388608.0f)) return gq_cvtt(f);
    const int32_t t = (int32_t)f;
    const float r = f - (float)t;
    return t + (r >= 0.5f) - (r <= -0.5f); /* no branch: r is random */
}

/* GGML_FP32_TO_FP16 as ggml-base computes it without F16C (the reference
 * build of the fixtures): round to nearest even by letting the FPU round
 * |f| scaled so its F16 ulp lands on the binary32 ulp, every NaN to 0x7E00
 * with its sign. Equal to amn_f32_to_f16 for every non-NaN value (the
 * tests compare them). */
static inline uint16_t gq_f32_to_f16(float f) {
    const uint32_t w = amn_f32_bits(f), shl1 = w + w, sign = w & 0x80000000u;
    float base = (fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
    uint32_t bias = shl1 & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = amn_bits_f32((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = amn_f32_bits(base);
    const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
    return (uint16_t)((sign >> 16) | (shl1 > 0xFF000000u ? 0x7E00u : nonsign));
}

static inline void gq_put_f16(uint8_t *p, float f) {
    const uint16_t h = gq_f32_to_f16(f);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* The stored F16 read back (GGML_FP16_TO_FP32 of what was written). */
static inline float gq_get_f16(const uint8_t *p) {
    const uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    return amn_f16_to_f32(h);
}

#define GQ_MIN(a, b) ((a) < (b) ? (a) : (b))
#define GQ_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ggml's GROUP_MAX_EPS: a group whose largest magnitude is below it is
 * stored as all zeros. */
#define GQ_GROUP_MAX_EPS 1e-15f

/* gguf_quant_k.c */
void gq_q2_k(const float *restrict x, uint8_t *restrict y);
void gq_q3_k(const float *restrict x, uint8_t *restrict y);
void gq_q4_k(const float *restrict x, uint8_t *restrict y);
void gq_q5_k(const float *restrict x, uint8_t *restrict y);
void gq_q6_k(const float *restrict x, uint8_t *restrict y);

/* With an importance matrix: one super-block (256 values) of x, its
 * weights qw (the tensor's imatrix entry at the same columns), ggml's
 * quantize_row_q*_K_impl. */
void gq_q2_k_w(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_q3_k_w(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_q4_k_w(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_q5_k_w(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_q6_k_w(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
/* ggml's make_qx_quants (rmse_type 1) and make_qkx3_quants with given
 * weights (the legacy types' _impl searches too). */
float gq_qx_search_w(int n, int nmax, const float *restrict x, int8_t *restrict L,
                     const float *restrict qw);
typedef float (*gq_qx_search_w_fn)(int n, int nmax, const float *restrict x, int8_t *restrict L,
                                   const float *restrict qw);
/* make_qp_quants: codes 0..nmax of non-negative x with weights qw (uint8_t
 * as ggml's, so a negative code wraps as its assignment does); returns the
 * scale. The k-quants' scale search, and IQ2_XXS's start. */
float gq_qp_search(int n, int nmax, const float *restrict x, uint8_t *restrict L,
                   const float *restrict qw);
/* make_qkx2_quants over 8 groups of n values (x, w, L at g * n), scalar;
 * gq_qkx2_search8_avx2 below gives the same results. */
void gq_qkx2_search8(int n, int nmax, const float *restrict x, const float *restrict w,
                     uint8_t *restrict L, float *restrict the_min, float *restrict scale,
                     float rmin, float rdelta, int nstep, bool use_mad);
float gq_qkx3_search(int n, int nmax, const float *restrict x, const float *restrict w,
                     uint8_t *restrict L, float *restrict the_min, float rmin, float rdelta,
                     int nstep);

/* The final codes of Q3_K / Q6_K for a group of 16 values x from its
 * stored scale d: clamp(nearest_int(x[i] / d), -nmax, nmax - 1) + nmax. */
void gq_codes16(const float *restrict x, float d, int nmax, int8_t *restrict L);
typedef void (*gq_codes16_fn)(const float *restrict x, float d, int nmax, int8_t *restrict L);

/* gguf_quant_iq.c */
/* With an importance matrix: a block of IQ4_NL (32 values) or IQ4_XS /
 * IQ3_S (256), weights qw at the same columns. */
void gq_iq4_nl_w(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_iq4_xs_w(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_iq3_s_w(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_iq4_nl(const float *restrict x, uint8_t *restrict y);
void gq_iq4_xs(const float *restrict x, uint8_t *restrict y);
/* Needs the IQ3_S search tables: gguf_quant_iq3_ready() first (builds them
 * once; false when out of memory). */
void gq_iq3_s(const float *restrict x, uint8_t *restrict y);
bool gguf_quant_iq3_ready(void);

/* The start of an IQ3_S block both paths share (ggml's
 * quantize_row_iq3_s_impl): weights (x^2, or with an importance matrix qw
 * qw * sqrt(sigma2 + x^2)) and their roots, |x|, the sign bits
 * of each 8 values; L cleared. Returns max |x| (0: the block is zero). */
static inline float gq_iq3_block_prepare(const float *restrict xb, const float *restrict qw,
                                         float sigma2, float *restrict weight, float *restrict waux,
                                         float *restrict xval, uint8_t *restrict signs,
                                         int8_t *restrict L) {
    if (qw) /* with an importance matrix */
        for (int i = 0; i < 32; ++i) weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    else
        for (int i = 0; i < 32; ++i) weight[i] = xb[i] * xb[i];
    for (int i = 0; i < 32; ++i) waux[i] = sqrtf(weight[i]);
    for (int k = 0; k < 4; ++k) {
        uint8_t s = 0;
        for (int i = 0; i < 8; ++i) {
            if (xb[8 * k + i] >= 0)
                xval[8 * k + i] = xb[8 * k + i];
            else {
                xval[8 * k + i] = -xb[8 * k + i];
                s = (uint8_t)(s | 1u << i);
            }
        }
        signs[k] = s;
    }
    float max = xval[0];
    for (int i = 1; i < 32; ++i) max = GQ_MAX(max, xval[i]);
    memset(L, 0, 32);
    return max;
}

/* AVX2 variants (gguf_quant_avx2.c, x86-64 only): the same bytes, for
 * gguf_quantize to pick after the CPU check. */
#if defined(__x86_64__)
#define AMN_GGUF_QUANT_AVX2 1
float gq_iq4_block_scale_w_avx2(const float *restrict xb, const float *restrict weight,
                                uint8_t *restrict Lb);
void gq_iq4_codes_avx2(const float *x, int n, float id, uint8_t *L);
float gq_qx_search_avx2(int n, int nmax, const float *restrict x, int8_t *restrict L);
float gq_qx_search_w_avx2(int n, int nmax, const float *restrict x, int8_t *restrict L,
                          const float *restrict qw);
void gq_q3_k_w_avx2(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_q6_k_w_avx2(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_iq4_nl_avx2(const float *restrict x, uint8_t *restrict y);
void gq_iq4_xs_avx2(const float *restrict x, uint8_t *restrict y);
void gq_iq4_nl_w_avx2(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_iq4_xs_w_avx2(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_q6_k_avx2(const float *restrict x, uint8_t *restrict y);
/* Q3_K without an importance matrix: make_q3_quants of the 16 groups of a
 * block in lanes (codes + 4 into L[256], scales into sc[16]). */
void gq_q3_search16_avx2(const float *restrict x, int8_t *restrict L, float *restrict sc);
void gq_q3_k_avx2(const float *restrict x, uint8_t *restrict y);
void gq_qkx2_search8_avx2(int n, int nmax, const float *restrict x, const float *restrict w,
                          uint8_t *restrict L, float *restrict the_min, float *restrict scale_out,
                          float rmin, float rdelta, int nstep, bool use_mad);
void gq_q2_k_avx2(const float *restrict x, uint8_t *restrict y);
void gq_mxfp4_codes_avx2(const float *x, float d, uint8_t *qs);
/* Q8_0 / TQ1_0 / TQ2_0: whether x[0..n) are all finite, and then their
 * largest magnitude; the low bytes of gq_round(x[i] * id) + add. */
bool gq_finite_absmax_avx2(const float *x, int n, float *amax);
/* Whether x[0..n) (a multiple of 8) are all finite (gguf_validate.c). */
bool gq_all_finite_avx2(const float *x, int n);
/* Q4_1 / Q5_1: whether the 32 values are finite with neither extreme 0, and
 * then their extremes; the codes of the four legacy types (see there). */
bool gq_finite_min_max_avx2(const float *x, float *mn, float *mx);
void gq_legacy_codes_avx2(const float *x, float sub, float id, float add, int top, int32_t *c);
void gq_round_codes_avx2(const float *x, int n, float id, int add, int8_t *dst);
void gq_q4_k_avx2(const float *restrict x, uint8_t *restrict y);
void gq_iq3_s_avx2(const float *restrict x, uint8_t *restrict y);
void gq_iq3_s_w_avx2(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_q2_k_w_avx2(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_q4_k_w_avx2(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_q5_k_w_avx2(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_q5_k_avx2(const float *restrict x, uint8_t *restrict y);
/* IQ3_S with the AVX-512 search (gguf_quant_iqlow_avx512.c), for the
 * AVX-512 level after the CPU check. */
void gq_iq3_s_avx512(const float *restrict x, uint8_t *restrict y);
void gq_iq3_s_w_avx512(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
#else
#define AMN_GGUF_QUANT_AVX2 0
#endif

/* AVX-512 variants (gguf_quant_avx512.c, x86-64 only; F, BW, VL, DQ): the
 * same bytes again, picked after the CPU check for AVX-512. The searches
 * take n a multiple of 16. */
#if defined(__x86_64__)
#define AMN_GGUF_QUANT_AVX512 1
float gq_qx_search_avx512(int n, int nmax, const float *restrict x, int8_t *restrict L);
float gq_qx_search_w_avx512(int n, int nmax, const float *restrict x, int8_t *restrict L,
                            const float *restrict qw);
void gq_q3_k_w_avx512(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_q6_k_w_avx512(const float *restrict x, uint8_t *restrict y, const float *restrict qw);
void gq_q6_k_avx512(const float *restrict x, uint8_t *restrict y);
void gq_q3_search16_avx512(const float *restrict x, int8_t *restrict L, float *restrict sc);
void gq_q3_k_avx512(const float *restrict x, uint8_t *restrict y);
void gq_codes16_avx512(const float *restrict x, float d, int nmax, int8_t *restrict L);
#else
#define AMN_GGUF_QUANT_AVX512 0
#endif

#endif
