/* Quantizers of the 32-element legacy types, Q1_0 / Q2_0, MXFP4 and the
 * ternary types, and gguf_quantize's dispatch.
 *
 * Each follows ggml's quantize_row_*_ref (src/ggml-quants.c, ggml-org/ggml
 * d99724f2 = llama.cpp 3af988fab) operation for operation: the scale is
 * computed in binary32 (never from the stored F16), the reciprocal multiplied
 * in, and the code taken by the same conversion (see gguf_quant_impl.h).
 * Built with -ffp-contract=off, as ggml's reference build has no FMA. */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/error.h"
#include "amn/kit/ternary.h"
#include "gguf_dequant.h"
#include "gguf_kernels.h"
#include "gguf_quant.h"
#include "gguf_quant_impl.h"
#include "gguf_tables.h"
#include "gguf_types.h"

/* ---- symmetric 4/5-bit: d = max / -8 (or -16), max the signed extreme --- */

/* The value of largest magnitude, the first one on ties (ggml's amax < |v|). */
static float signed_extreme(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static void q_q4_0(const float *restrict x, uint8_t *restrict y) {
    const float d = signed_extreme(x, 32) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    gq_put_f16(y, d);
    for (int j = 0; j < 16; j++) {
        const int x0 = GQ_MIN(15, (int8_t)gq_cvtt(x[j] * id + 8.5f));
        const int x1 = GQ_MIN(15, (int8_t)gq_cvtt(x[j + 16] * id + 8.5f));
        y[2 + j] = (uint8_t)((uint8_t)x0 | (uint8_t)(x1 << 4));
    }
}

static void q_q5_0(const float *restrict x, uint8_t *restrict y) {
    const float d = signed_extreme(x, 32) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    gq_put_f16(y, d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        const uint8_t x0 = (uint8_t)GQ_MIN(31, (int8_t)gq_cvtt(x[j] * id + 16.5f));
        const uint8_t x1 = (uint8_t)GQ_MIN(31, (int8_t)gq_cvtt(x[j + 16] * id + 16.5f));
        y[6 + j] = (uint8_t)((x0 & 15) | (x1 & 15) << 4);
        qh |= ((x0 & 0x10u) >> 4) << j;
        qh |= ((x1 & 0x10u) >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; k++) y[2 + k] = (uint8_t)(qh >> 8 * k);
}

/* ---- asymmetric 4/5-bit: d = (max - min) / (2^bits - 1), m = min -------- */

/* min and max as ggml scans them: from +-FLT_MAX with strict compares, so a
 * block of signed zeros keeps the sign of its first zero. */
static void min_max(const float *x, int n, float *mn, float *mx) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

static void q_q4_1(const float *restrict x, uint8_t *restrict y) {
    float min, max;
    min_max(x, 32, &min, &max);
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    gq_put_f16(y, d);
    gq_put_f16(y + 2, min);
    for (int j = 0; j < 16; j++) {
        const int x0 = GQ_MIN(15, (int8_t)gq_cvtt((x[j] - min) * id + 0.5f));
        const int x1 = GQ_MIN(15, (int8_t)gq_cvtt((x[j + 16] - min) * id + 0.5f));
        y[4 + j] = (uint8_t)((uint8_t)x0 | (uint8_t)(x1 << 4));
    }
}

static void q_q5_1(const float *restrict x, uint8_t *restrict y) {
    float min, max;
    min_max(x, 32, &min, &max);
    const float d = (max - min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    gq_put_f16(y, d);
    gq_put_f16(y + 2, min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        const uint8_t x0 = (uint8_t)gq_cvtt((x[j] - min) * id + 0.5f);
        const uint8_t x1 = (uint8_t)gq_cvtt((x[j + 16] - min) * id + 0.5f);
        y[8 + j] = (uint8_t)((x0 & 15) | (x1 & 15) << 4);
        qh |= ((x0 & 0x10u) >> 4) << j;
        qh |= ((x1 & 0x10u) >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; k++) y[4 + k] = (uint8_t)(qh >> 8 * k);
}

#if AMN_GGUF_QUANT_AVX2
/* The four types with their codes in lanes (gq_legacy_codes_avx2), for
 * blocks of finite values; any other block takes the scalar path. The
 * scales are the scalar path's: the signed extreme is the first value of
 * the largest magnitude (0.0f when every value is a zero, as the scalar
 * loop never moves off its start), the extremes of an asymmetric block
 * those gq_finite_min_max_avx2 accepts. */
static bool signed_extreme_avx2(const float *x, float *max) {
    float amax;
    if (!gq_finite_absmax_avx2(x, 32, &amax)) return false;
    *max = 0.0f;
    for (int j = 0; amax != 0.0f && j < 32; j++)
        if (fabsf(x[j]) == amax) {
            *max = x[j];
            break;
        }
    return true;
}

/* Two codes per byte: element j low, j + 16 high. */
static void pack_nibbles(const int32_t *c, uint8_t *qs) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((c[j] & 15) | (c[j + 16] & 15) << 4);
}

/* Bit 4 of each code, element j at bit j, little-endian. */
static void put_high_bits(const int32_t *c, uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < 32; j++) h |= (uint32_t)((uint8_t)c[j] >> 4 & 1) << j;
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(h >> 8 * k);
}

/* Q4_0 (nmax 8) and Q5_0 (16): d = max / -nmax, codes at most 2 nmax - 1. */
static void sym_avx2(const float *restrict x, uint8_t *restrict y, int nmax,
                     gguf_qblock_fn scalar) {
    float max;
    if (!signed_extreme_avx2(x, &max)) {
        scalar(x, y);
        return;
    }
    const float d = max / -nmax;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    gq_put_f16(y, d);
    int32_t c[32];
    gq_legacy_codes_avx2(x, 0.0f, id, (float)nmax + 0.5f, 2 * nmax - 1, c);
    if (nmax == 16) put_high_bits(c, y + 2);
    pack_nibbles(c, y + (nmax == 16 ? 6 : 2));
}

/* Q4_1 (4 bits, codes at most 15) and Q5_1 (5 bits, unclamped as in ggml):
 * d = (max - min) / (2^bits - 1), m = min. */
static void asym_avx2(const float *restrict x, uint8_t *restrict y, int bits,
                      gguf_qblock_fn scalar) {
    float min, max;
    if (!gq_finite_min_max_avx2(x, &min, &max)) {
        scalar(x, y);
        return;
    }
    const float d = (max - min) / ((1 << bits) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    gq_put_f16(y, d);
    gq_put_f16(y + 2, min);
    int32_t c[32];
    gq_legacy_codes_avx2(x, min, id, 0.5f, bits == 4 ? 15 : -1, c);
    if (bits == 5) put_high_bits(c, y + 4);
    pack_nibbles(c, y + (bits == 5 ? 8 : 4));
}

static void q_q4_0_avx2(const float *restrict x, uint8_t *restrict y) {
    sym_avx2(x, y, 8, q_q4_0);
}
static void q_q5_0_avx2(const float *restrict x, uint8_t *restrict y) {
    sym_avx2(x, y, 16, q_q5_0);
}
static void q_q4_1_avx2(const float *restrict x, uint8_t *restrict y) {
    asym_avx2(x, y, 4, q_q4_1);
}
static void q_q5_1_avx2(const float *restrict x, uint8_t *restrict y) {
    asym_avx2(x, y, 5, q_q5_1);
}
#endif

/* ---- Q8_0: d = amax / 127, codes roundf(x / d) -------------------------- */

static float abs_max(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = GQ_MAX(amax, fabsf(x[j]));
    return amax;
}

static void q_q8_0(const float *restrict x, uint8_t *restrict y) {
    const float d = abs_max(x, 32) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    gq_put_f16(y, d);
    for (int j = 0; j < 32; j++) y[2 + j] = (uint8_t)(int8_t)gq_round(x[j] * id);
}

#if AMN_GGUF_QUANT_AVX2
/* A finite block in lanes, with the scalar path's bytes; any other by the
 * scalar path (a NaN makes ggml's running max depend on where it sits). */
static void q_q8_0_avx2(const float *restrict x, uint8_t *restrict y) {
    float amax;
    if (!gq_finite_absmax_avx2(x, 32, &amax)) {
        q_q8_0(x, y);
        return;
    }
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    gq_put_f16(y, d);
    gq_round_codes_avx2(x, 32, id, 0, (int8_t *)(y + 2));
}
#endif

/* ---- Q1_0 (128 signs, d = mean |x|) and Q2_0 (64 codes -1..2, d = amax) -- */

static void q_q1_0(const float *restrict x, uint8_t *restrict y) {
    float sum_abs = 0.0f;
    for (int j = 0; j < 128; j++) sum_abs += fabsf(x[j]);
    gq_put_f16(y, sum_abs / 128);
    memset(y + 2, 0, 16);
    for (int j = 0; j < 128; j++)
        if (x[j] >= 0.0f) y[2 + j / 8] |= (uint8_t)(1u << (j % 8));
}

static void q_q2_0(const float *restrict x, uint8_t *restrict y) {
    float amax = 0.0f;
    for (int j = 0; j < 64; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
    gq_put_f16(y, amax);
    memset(y + 2, 0, 16);
    for (int j = 0; j < 64; j++) {
        int q = gq_round(x[j] * id) + 1;
        q = GQ_MAX(0, GQ_MIN(3, q));
        y[2 + j / 4] |= (uint8_t)(q << (2 * (j % 4)));
    }
}

/* ---- MXFP4: E8M0 exponent from log2f(amax), nearest E2M1 code ------------ */

/* First code of least |KM[i] * e - x| (ggml's best_index_mxfp4). */
static int mxfp4_best(float x, float e) {
    int best = 0;
    float best_err = fabsf((float)gguf_kvalues_mxfp4[0] * e - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf((float)gguf_kvalues_mxfp4[i] * e - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

/* The block's E8M0 exponent byte; *d the scale it stands for. */
static uint8_t mxfp4_exponent(const float *x, float *d) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(x[j])) amax = fabsf(x[j]);
    /* log2f itself, not an exponent extraction: ggml floors log2f's rounded
     * result, which is the next integer for values just below a power of 2. */
    const uint8_t e = amax > 0.0f ? (uint8_t)gq_cvtt(floorf(log2f(amax)) - 2 + 127) : 0;
    *d = amn_bits_f32(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
    return e;
}

static void q_mxfp4(const float *restrict x, uint8_t *restrict y) {
    float d;
    y[0] = mxfp4_exponent(x, &d);
    for (int j = 0; j < 16; j++)
        y[1 + j] = (uint8_t)(mxfp4_best(x[j], d) | mxfp4_best(x[j + 16], d) << 4);
}

#if AMN_GGUF_QUANT_AVX2
static void q_mxfp4_avx2(const float *restrict x, uint8_t *restrict y) {
    float d;
    y[0] = mxfp4_exponent(x, &d);
    gq_mxfp4_codes_avx2(x, d, y + 1);
}
#endif

/* ---- ternary: TQ1_0 (base-3 digits, 5 per byte) and TQ2_0 (2 bits) ------ */

/* The packings are the kit's (amn-hf's --outtype tq1_0 / tq2_0 writes the
 * same blocks); d follows the codes, as ggml rounds it to F16. */
static void tq1_0_pack(const int8_t *t, float d, uint8_t *y) {
    kit_tq1_0_pack(t, y);
    gq_put_f16(y + KIT_TQ1_0_CODES, d);
}

static void tq2_0_pack(const int8_t *t, float d, uint8_t *y) {
    kit_tq2_0_pack(t, y);
    gq_put_f16(y + KIT_TQ2_0_CODES, d);
}

static float ternary_codes(const float *x, int8_t *t) {
    const float d = abs_max(x, 256);
    kit_tq_codes(x, d != 0.0f ? 1.0f / d : 0.0f, t);
    return d;
}

typedef float (*ternary_codes_fn)(const float *x, int8_t *t);
typedef void (*ternary_pack_fn)(const int8_t *t, float d, uint8_t *y);

/* A ternary block: its codes by either path, packed as its type wants. */
static inline void ternary_block(const float *x, uint8_t *y, ternary_codes_fn codes,
                                 ternary_pack_fn pack) {
    int8_t t[256];
    const float d = codes(x, t);
    pack(t, d, y);
}

static void q_tq1_0(const float *restrict x, uint8_t *restrict y) {
    ternary_block(x, y, ternary_codes, tq1_0_pack);
}

static void q_tq2_0(const float *restrict x, uint8_t *restrict y) {
    ternary_block(x, y, ternary_codes, tq2_0_pack);
}

#if AMN_GGUF_QUANT_AVX2
/* The codes in lanes when the block and 1 / d are finite: every x * id is
 * then within [-1, 1] give or take a rounding, where gq_round is lroundf;
 * any other block by the scalar path. */
static float ternary_codes_avx2(const float *x, int8_t *t) {
    float d;
    const float id = gq_finite_absmax_avx2(x, 256, &d) ? (d != 0.0f ? 1.0f / d : 0.0f) : NAN;
    if (!isfinite(id)) return ternary_codes(x, t);
    gq_round_codes_avx2(x, 256, id, 1, t);
    return d;
}

static void q_tq1_0_avx2(const float *restrict x, uint8_t *restrict y) {
    ternary_block(x, y, ternary_codes_avx2, tq1_0_pack);
}

static void q_tq2_0_avx2(const float *restrict x, uint8_t *restrict y) {
    ternary_block(x, y, ternary_codes_avx2, tq2_0_pack);
}
#endif

/* ---- dispatch ------------------------------------------------------------- */

static gguf_qblock_fn block_quantizer(uint32_t type) {
    switch (type) {
    case GGUF_TYPE_Q4_0:
        return q_q4_0;
    case GGUF_TYPE_Q4_1:
        return q_q4_1;
    case GGUF_TYPE_Q5_0:
        return q_q5_0;
    case GGUF_TYPE_Q5_1:
        return q_q5_1;
    case GGUF_TYPE_Q8_0:
        return q_q8_0;
    case GGUF_TYPE_Q1_0:
        return q_q1_0;
    case GGUF_TYPE_Q2_0:
        return q_q2_0;
    case GGUF_TYPE_MXFP4:
        return q_mxfp4;
    case GGUF_TYPE_TQ1_0:
        return q_tq1_0;
    case GGUF_TYPE_TQ2_0:
        return q_tq2_0;
    case GGUF_TYPE_Q2_K:
        return gq_q2_k;
    case GGUF_TYPE_Q3_K:
        return gq_q3_k;
    case GGUF_TYPE_Q4_K:
        return gq_q4_k;
    case GGUF_TYPE_Q5_K:
        return gq_q5_k;
    case GGUF_TYPE_Q6_K:
        return gq_q6_k;
    case GGUF_TYPE_IQ4_NL:
        return gq_iq4_nl;
    case GGUF_TYPE_IQ4_XS:
        return gq_iq4_xs;
    case GGUF_TYPE_IQ3_S:
        return gq_iq3_s;
    default:
        return NULL;
    }
}

/* The AVX2 block functions, for the types that have one. */
static gguf_qblock_fn block_quantizer_avx2(uint32_t type) {
#if AMN_GGUF_QUANT_AVX2
    switch (type) {
    case GGUF_TYPE_Q4_0:
        return q_q4_0_avx2;
    case GGUF_TYPE_Q4_1:
        return q_q4_1_avx2;
    case GGUF_TYPE_Q5_0:
        return q_q5_0_avx2;
    case GGUF_TYPE_Q5_1:
        return q_q5_1_avx2;
    case GGUF_TYPE_Q8_0:
        return q_q8_0_avx2;
    case GGUF_TYPE_TQ1_0:
        return q_tq1_0_avx2;
    case GGUF_TYPE_TQ2_0:
        return q_tq2_0_avx2;
    case GGUF_TYPE_MXFP4:
        return q_mxfp4_avx2;
    case GGUF_TYPE_IQ4_NL:
        return gq_iq4_nl_avx2;
    case GGUF_TYPE_IQ4_XS:
        return gq_iq4_xs_avx2;
    case GGUF_TYPE_Q6_K:
        return gq_q6_k_avx2;
    case GGUF_TYPE_Q3_K:
        return gq_q3_k_avx2;
    case GGUF_TYPE_Q2_K:
        return gq_q2_k_avx2;
    case GGUF_TYPE_Q4_K:
        return gq_q4_k_avx2;
    case GGUF_TYPE_Q5_K:
        return gq_q5_k_avx2;
    case GGUF_TYPE_IQ3_S:
        return gq_iq3_s_avx2;
    default:
        break;
    }
#endif
    (void)type;
    return NULL;
}

/* The AVX-512 block functions, for the types that have one. */
static gguf_qblock_fn block_quantizer_avx512(uint32_t type) {
#if AMN_GGUF_QUANT_AVX512
    if (type == GGUF_TYPE_Q6_K) return gq_q6_k_avx512;
    if (type == GGUF_TYPE_Q3_K) return gq_q3_k_avx512;
#endif
#if AMN_GGUF_QUANT_AVX2
    if (type == GGUF_TYPE_IQ3_S) return gq_iq3_s_avx512;
#endif
    (void)type;
    return NULL;
}

bool gguf_type_can_quantize(uint32_t type) {
    return type == GGUF_TYPE_F32 || type == GGUF_TYPE_F16 || type == GGUF_TYPE_BF16 ||
           block_quantizer(type) != NULL;
}

/* F16 (ggml_fp32_to_fp16_row: round to nearest even) and BF16
 * (ggml_fp32_to_bf16_row_ref: nearest even, NaN quieted), little-endian. */
static void store_plain(uint32_t type, const float *x, size_t n, uint8_t *dst, amn_simd level) {
    if (type == GGUF_TYPE_F32) {
        if (!AMN_HOST_BIG_ENDIAN)
            memcpy(dst, x, n * sizeof(float));
        else
            for (size_t i = 0; i < n; i++) amn_store_le_f32(dst + 4 * i, x[i]);
        return;
    }
    if (type == GGUF_TYPE_F16 && AMN_SIMD_X86 && level >= AMN_SIMD_AVX2 &&
        gguf_simd_max() >= AMN_SIMD_AVX2) {
        gguf_avx2_f32_to_f16(x, dst, n); /* F16C: amn_f32_to_f16's bytes */
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const uint16_t h = type == GGUF_TYPE_F16 ? amn_f32_to_f16(x[i]) : amn_f32_to_bf16(x[i]);
        dst[2 * i] = (uint8_t)h;
        dst[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

int gguf_quantize_simd(uint32_t type, const float *x, uint64_t n_elems, void *dst, amn_simd level) {
    const gguf_type_traits *tr = gguf_type_traits_get(type);
    if (!tr || !gguf_type_can_quantize(type)) return AMN_E_UNSUPPORTED;
    if (n_elems % tr->block_elems != 0) return AMN_E_INVALID;
    if (n_elems > SIZE_MAX / sizeof(float)) return AMN_E_INVALID;
    if (tr->kind == GGUF_KIND_PLAIN) {
        store_plain(type, x, (size_t)n_elems, dst, level);
        return AMN_OK;
    }
    if (type == GGUF_TYPE_IQ3_S && !gguf_quant_iq3_ready()) return AMN_E_NOMEM;
    gguf_qblock_fn fn = NULL;
    if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX512 && gguf_simd_max() >= AMN_SIMD_AVX512)
        fn = block_quantizer_avx512(type);
    if (!fn && AMN_SIMD_X86 && level >= AMN_SIMD_AVX2 && gguf_simd_max() >= AMN_SIMD_AVX2)
        fn = block_quantizer_avx2(type);
    if (!fn) fn = block_quantizer(type);
    const size_t nb = (size_t)(n_elems / tr->block_elems);
    uint8_t *y = dst;
    for (size_t i = 0; i < nb; i++, x += tr->block_elems, y += tr->block_bytes) fn(x, y);
    return AMN_OK;
}

int gguf_quantize(uint32_t type, const float *x, uint64_t n_elems, void *dst) {
    return gguf_quantize_simd(type, x, n_elems, dst, amn_simd_level());
}
