/* Scalar dequantizers, one block per call: the reference path. Each follows
 * ggml's dequantize_row_* (src/ggml-quants.c) operation for operation, since
 * binary32 results depend on the order: e.g. Q6_K is (d * scale) * q, never
 * d * (scale * q). Products are rounded before any add (-ffp-contract=off). */
#include "gguf_kernels.h"
#include "gguf_tables.h"
#include "gguf_types.h"

/* ---- legacy 32-element blocks ------------------------------------------- */

static void dq_q4_0(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((qs[j] & 15) - 8) * d;
        y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
    }
}

static void dq_q4_1(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b), m = gguf_f16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(qs[j] & 15) * d + m;
        y[j + 16] = (float)(qs[j] >> 4) * d + m;
    }
}

static void dq_q5_0(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b);
    const uint32_t qh = gguf_le32(b + 2);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        const int x0 = (int)((qs[j] & 15u) | ((qh >> j) & 1u) << 4);
        const int x1 = (int)((qs[j] >> 4) | ((qh >> (j + 16)) & 1u) << 4);
        y[j] = (float)(x0 - 16) * d;
        y[j + 16] = (float)(x1 - 16) * d;
    }
}

static void dq_q5_1(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b), m = gguf_f16(b + 2);
    const uint32_t qh = gguf_le32(b + 4);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        const uint32_t x0 = (qs[j] & 15u) | ((qh >> j) & 1u) << 4;
        const uint32_t x1 = (qs[j] >> 4) | ((qh >> (j + 16)) & 1u) << 4;
        y[j] = (float)x0 * d + m;
        y[j + 16] = (float)x1 * d + m;
    }
}

static void dq_q8_0(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

static void dq_iq4_nl(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)gguf_kvalues_iq4nl[qs[j] & 15];
        y[j + 16] = d * (float)gguf_kvalues_iq4nl[qs[j] >> 4];
    }
}

static void dq_mxfp4(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_e8m0_half(b[0]);
    const uint8_t *qs = b + 1;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)gguf_kvalues_mxfp4[qs[j] & 15] * d;
        y[j + 16] = (float)gguf_kvalues_mxfp4[qs[j] >> 4] * d;
    }
}

/* Q1_0 (ggml type 41): 128 signs, y = bit ? d : -d. Q2_0 (42): 64 codes of
 * 2 bits, y = (q - 1) * d. Both d = F16 at byte 0 (ggml's
 * dequantize_row_q1_0 / _q2_0). */
static void dq_q1_0(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b), neg_d = -d;
    for (int j = 0; j < 128; j++) y[j] = (b[2 + j / 8] >> (j % 8)) & 1 ? d : neg_d;
}

static void dq_q2_0(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b);
    for (int j = 0; j < 64; j++) y[j] = (float)(((b[2 + j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
}

/* ---- k-quants (256-element super-blocks) -------------------------------- */

static void dq_q2_k(const uint8_t *restrict b, float *restrict y) {
    const uint8_t *scales = b, *q = b + 16;
    const float d = gguf_f16(b + 80), dmin = gguf_f16(b + 82);
    for (int n = 0; n < 2; n++, q += 32) {
        for (int j = 0; j < 4; j++) {
            for (int half = 0; half < 2; half++) {
                const uint8_t sc = *scales++;
                const float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
                const uint8_t *qq = q + 16 * half;
                for (int l = 0; l < 16; l++) *y++ = dl * (float)((qq[l] >> (2 * j)) & 3) - ml;
            }
        }
    }
}

/* The 16 six-bit scales of Q3_K, unpacked as ggml does through 32-bit words. */
static void q3k_scales(const uint8_t *p, int8_t s[16]) {
    const uint32_t k1 = 0x03030303u, k2 = 0x0f0f0f0fu;
    const uint32_t a0 = gguf_le32(p), a1 = gguf_le32(p + 4), a2 = gguf_le32(p + 8);
    const uint32_t t[4] = {
        (a0 & k2) | ((a2 & k1) << 4),
        (a1 & k2) | (((a2 >> 2) & k1) << 4),
        ((a0 >> 4) & k2) | (((a2 >> 4) & k1) << 4),
        ((a1 >> 4) & k2) | (((a2 >> 6) & k1) << 4),
    };
    for (int i = 0; i < 16; i++) s[i] = (int8_t)(t[i / 4] >> (8 * (i % 4)));
}

static void dq_q3_k(const uint8_t *restrict b, float *restrict y) {
    const uint8_t *hm = b, *q = b + 32;
    const float d = gguf_f16(b + 108);
    int8_t sc[16];
    q3k_scales(b + 96, sc);
    int is = 0;
    for (int n = 0; n < 2; n++, q += 32) {
        for (int j = 0; j < 4; j++) {
            const uint8_t bit = (uint8_t)(1u << (4 * n + j));
            for (int half = 0; half < 2; half++) {
                const float dl = d * (float)(sc[is++] - 32);
                for (int l = 16 * half; l < 16 * half + 16; l++) {
                    const int v = ((q[l] >> (2 * j)) & 3) - ((hm[l] & bit) ? 0 : 4);
                    *y++ = dl * (float)v;
                }
            }
        }
    }
}

/* Scale and min k (0..7) of a Q4_K / Q5_K super-block (get_scale_min_k4). */
static inline void k4_scale_min(const uint8_t *s, int k, int *sc, int *mn) {
    if (k < 4) {
        *sc = s[k] & 63;
        *mn = s[k + 4] & 63;
    } else {
        *sc = (s[k + 4] & 15) | ((s[k - 4] >> 6) << 4);
        *mn = (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
    }
}

static void dq_q4_k(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b), dmin = gguf_f16(b + 2);
    const uint8_t *s = b + 4, *q = b + 16;
    for (int j = 0; j < 4; j++, q += 32) {
        int sc, mn;
        k4_scale_min(s, 2 * j, &sc, &mn);
        const float d1 = d * (float)sc, m1 = dmin * (float)mn;
        k4_scale_min(s, 2 * j + 1, &sc, &mn);
        const float d2 = d * (float)sc, m2 = dmin * (float)mn;
        for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 15) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
    }
}

static void dq_q5_k(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b), dmin = gguf_f16(b + 2);
    const uint8_t *s = b + 4, *qh = b + 16, *ql = b + 48;
    for (int j = 0; j < 4; j++, ql += 32) {
        int sc, mn;
        k4_scale_min(s, 2 * j, &sc, &mn);
        const float d1 = d * (float)sc, m1 = dmin * (float)mn;
        k4_scale_min(s, 2 * j + 1, &sc, &mn);
        const float d2 = d * (float)sc, m2 = dmin * (float)mn;
        for (int l = 0; l < 32; l++)
            *y++ = d1 * (float)((ql[l] & 15) + (((qh[l] >> (2 * j)) & 1) << 4)) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * (float)((ql[l] >> 4) + (((qh[l] >> (2 * j + 1)) & 1) << 4)) - m2;
    }
}

static void dq_q6_k(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b + 208);
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    for (int n = 0; n < 2; n++, y += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = (d * (float)sc[is]) * (float)q1;
            y[l + 32] = (d * (float)sc[is + 2]) * (float)q2;
            y[l + 64] = (d * (float)sc[is + 4]) * (float)q3;
            y[l + 96] = (d * (float)sc[is + 6]) * (float)q4;
        }
    }
}

static void dq_iq4_xs(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b);
    const uint32_t sh = gguf_le16(b + 2);
    const uint8_t *sl = b + 4, *qs = b + 8;
    for (int ib = 0; ib < 8; ib++, y += 32, qs += 16) {
        const int ls =
            (int)((sl[ib / 2] >> (4 * (ib % 2))) & 15) | (int)(((sh >> (2 * ib)) & 3) << 4);
        const float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            y[j] = dl * (float)gguf_kvalues_iq4nl[qs[j] & 15];
            y[j + 16] = dl * (float)gguf_kvalues_iq4nl[qs[j] >> 4];
        }
    }
}

/* ---- i-quants ----------------------------------------------------------- */

/* y[k] = +/-(db * grid byte k) for the 8 bytes of a grid entry; sign bit k of
 * `signs` negates output k. ggml multiplies by -1.f, which is this negation;
 * flipping the sign bit keeps it free of branches on random sign data. */
static inline void grid8(float *y, float db, uint64_t grid, uint8_t signs) {
    for (int k = 0; k < 8; k++) {
        const float v = db * (float)(uint8_t)(grid >> (8 * k));
        y[k] = amn_bits_f32(amn_f32_bits(v) ^ (uint32_t)((signs >> k) & 1) << 31);
    }
}

static void dq_iq2_xxs(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b);
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = b + 2 + 8 * ib;
        const uint32_t a = gguf_le32(q + 4);
        const float db = d * (0.5f + (float)(a >> 28)) * 0.25f;
        for (int l = 0; l < 4; l++, y += 8)
            grid8(y, db, gguf_iq2xxs_grid[q[l]], gguf_ksigns_iq2xs[(a >> (7 * l)) & 127]);
    }
}

static void dq_iq2_xs(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b);
    const uint8_t *scales = b + 66;
    for (int ib = 0; ib < 8; ib++) {
        const float db[2] = {d * (0.5f + (float)(scales[ib] & 15)) * 0.25f,
                             d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f};
        for (int l = 0; l < 4; l++, y += 8) {
            const uint16_t w = gguf_le16(b + 2 + 2 * (4 * ib + l));
            grid8(y, db[l / 2], gguf_iq2xs_grid[w & 511], gguf_ksigns_iq2xs[w >> 9]);
        }
    }
}

static void dq_iq2_s(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b);
    const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
    for (int ib = 0; ib < 8; ib++) {
        const float db[2] = {d * (0.5f + (float)(scales[ib] & 15)) * 0.25f,
                             d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f};
        for (int l = 0; l < 4; l++, y += 8) {
            const unsigned idx = qs[4 * ib + l] | ((unsigned)(qh[ib] << (8 - 2 * l)) & 0x300u);
            grid8(y, db[l / 2], gguf_iq2s_grid[idx], signs[4 * ib + l]);
        }
    }
}

static void dq_iq3_xxs(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b);
    const uint8_t *qs = b + 2;
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t a = gguf_le32(b + 66 + 4 * ib);
        const float db = d * (0.5f + (float)(a >> 28)) * 0.5f;
        for (int l = 0; l < 4; l++, y += 8) {
            const uint64_t g = gguf_iq3xxs_grid[qs[8 * ib + 2 * l]] |
                               (uint64_t)gguf_iq3xxs_grid[qs[8 * ib + 2 * l + 1]] << 32;
            grid8(y, db, g, gguf_ksigns_iq2xs[(a >> (7 * l)) & 127]);
        }
    }
}

static void dq_iq3_s(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b);
    const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *scales = b + 106;
    for (int ib = 0; ib < 8; ib++) {
        const unsigned nib = ib % 2 ? scales[ib / 2] >> 4 : scales[ib / 2] & 15u;
        const float db = d * (float)(1 + 2 * (int)nib);
        for (int l = 0; l < 4; l++, y += 8) {
            const unsigned i1 = qs[8 * ib + 2 * l] | ((unsigned)(qh[ib] << (8 - 2 * l)) & 256u);
            const unsigned i2 = qs[8 * ib + 2 * l + 1] | ((unsigned)(qh[ib] << (7 - 2 * l)) & 256u);
            const uint64_t g = gguf_iq3s_grid[i1] | (uint64_t)gguf_iq3s_grid[i2] << 32;
            grid8(y, db, g, signs[4 * ib + l]);
        }
    }
}

/* IQ1S_DELTA, negated when bit 0 of neg is set (built from bits: no branch). */
static inline float iq1_delta(unsigned neg) {
    return amn_bits_f32(0x3e000000u | (neg & 1u) << 31);
}

/* y[k] = dl * ((float)g[k] + delta), g the signed bytes of an IQ1S grid entry. */
static inline void grid8_iq1(float *y, float dl, uint64_t grid, float delta) {
    for (int k = 0; k < 8; k++) y[k] = dl * ((float)(int8_t)(uint8_t)(grid >> (8 * k)) + delta);
}

static void dq_iq1_s(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b);
    const uint8_t *qs = b + 2;
    for (int ib = 0; ib < 8; ib++) {
        const uint16_t hw = gguf_le16(b + 34 + 2 * ib);
        const float dl = d * (float)(2 * ((hw >> 12) & 7) + 1);
        const float delta = iq1_delta(hw >> 15);
        for (int l = 0; l < 4; l++, y += 8) {
            const unsigned idx = qs[4 * ib + l] | ((unsigned)(hw >> (3 * l)) & 7u) << 8;
            grid8_iq1(y, dl, gguf_iq1s_grid[idx], delta);
        }
    }
}

static void dq_iq1_m(const uint8_t *restrict b, float *restrict y) {
    const uint8_t *qs = b, *qh = b + 32;
    uint16_t sc[4];
    for (int t = 0; t < 4; t++) sc[t] = gguf_le16(b + 48 + 2 * t);
    const uint16_t dbits = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                      ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    const float d = gguf_f16_to_f32(dbits);
    for (int ib = 0; ib < 8; ib++, qs += 4, qh += 2) {
        const unsigned s = sc[ib / 2], sft = 6 * (ib % 2);
        const float dl1 = d * (float)(2 * ((s >> sft) & 7) + 1);
        const float dl2 = d * (float)(2 * ((s >> (sft + 3)) & 7) + 1);
        const unsigned qa = qh[0], qb = qh[1];
        grid8_iq1(y, dl1, gguf_iq1s_grid[qs[0] | ((qa << 8) & 0x700)], iq1_delta(qa >> 3));
        grid8_iq1(y + 8, dl1, gguf_iq1s_grid[qs[1] | ((qa << 4) & 0x700)], iq1_delta(qa >> 7));
        grid8_iq1(y + 16, dl2, gguf_iq1s_grid[qs[2] | ((qb << 8) & 0x700)], iq1_delta(qb >> 3));
        grid8_iq1(y + 24, dl2, gguf_iq1s_grid[qs[3] | ((qb << 4) & 0x700)], iq1_delta(qb >> 7));
        y += 32;
    }
}

/* ---- ternary ------------------------------------------------------------ */

/* Base-3 digit n of a TQ1_0 byte, stored as a fixed-point fraction. */
static inline float tq1_digit(uint8_t x, unsigned pow3, float d) {
    const uint8_t q = (uint8_t)(x * pow3);
    return (float)((int)(((unsigned)q * 3) >> 8) - 1) * d;
}

static void dq_tq1_0(const uint8_t *restrict b, float *restrict y) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t *qs = b, *qh = b + 48;
    const float d = gguf_f16(b + 52);
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 32; m++) *y++ = tq1_digit(qs[m], pow3[n], d);
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 16; m++) *y++ = tq1_digit(qs[32 + m], pow3[n], d);
    for (int n = 0; n < 4; n++)
        for (int j = 0; j < 4; j++) *y++ = tq1_digit(qh[j], pow3[n], d);
}

static void dq_tq2_0(const uint8_t *restrict b, float *restrict y) {
    const float d = gguf_f16(b + 64);
    for (int c = 0; c < 64; c += 32)
        for (int l = 0; l < 4; l++)
            for (int m = 0; m < 32; m++) *y++ = (float)(((b[c + m] >> (2 * l)) & 3) - 1) * d;
}

gguf_block_fn gguf_scalar_kernel(uint32_t ggml_type) {
    switch (ggml_type) {
    case GGUF_TYPE_Q4_0:
        return dq_q4_0;
    case GGUF_TYPE_Q4_1:
        return dq_q4_1;
    case GGUF_TYPE_Q5_0:
        return dq_q5_0;
    case GGUF_TYPE_Q5_1:
        return dq_q5_1;
    case GGUF_TYPE_Q8_0:
        return dq_q8_0;
    case GGUF_TYPE_IQ4_NL:
        return dq_iq4_nl;
    case GGUF_TYPE_MXFP4:
        return dq_mxfp4;
    case GGUF_TYPE_Q1_0:
        return dq_q1_0;
    case GGUF_TYPE_Q2_0:
        return dq_q2_0;
    case GGUF_TYPE_Q2_K:
        return dq_q2_k;
    case GGUF_TYPE_Q3_K:
        return dq_q3_k;
    case GGUF_TYPE_Q4_K:
        return dq_q4_k;
    case GGUF_TYPE_Q5_K:
        return dq_q5_k;
    case GGUF_TYPE_Q6_K:
        return dq_q6_k;
    case GGUF_TYPE_IQ4_XS:
        return dq_iq4_xs;
    case GGUF_TYPE_IQ2_XXS:
        return dq_iq2_xxs;
    case GGUF_TYPE_IQ2_XS:
        return dq_iq2_xs;
    case GGUF_TYPE_IQ2_S:
        return dq_iq2_s;
    case GGUF_TYPE_IQ3_XXS:
        return dq_iq3_xxs;
    case GGUF_TYPE_IQ3_S:
        return dq_iq3_s;
    case GGUF_TYPE_IQ1_S:
        return dq_iq1_s;
    case GGUF_TYPE_IQ1_M:
        return dq_iq1_m;
    case GGUF_TYPE_TQ1_0:
        return dq_tq1_0;
    case GGUF_TYPE_TQ2_0:
        return dq_tq2_0;
    default:
        return NULL;
    }
}
