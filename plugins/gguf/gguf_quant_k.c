/* k-quant quantizers (256-element super-blocks), following ggml's
 * quantize_row_q{2,3,4,5,6}_K_ref and their searches make_qkx2_quants,
 * make_q3_quants and make_qx_quants (src/ggml-quants.c, ggml-org/ggml
 * d99724f2). Every sum runs in ggml's order, in binary32, each product
 * rounded before its add (-ffp-contract=off); integers come from
 * gq_nearest_int and narrow as ggml's assignments narrow them. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "gguf_quant_impl.h"

/* ---- searches ------------------------------------------------------------- */

/* make_qkx2_quants: codes 0..nmax with a scale and a min (returned as -min,
 * >= 0) minimising the weighted error, trying nstep + 1 scales around
 * nmax / (max - min). */
static float qkx2_search(int n, int nmax, const float *restrict x, const float *restrict w,
                         uint8_t *restrict L, float *restrict the_min, float rmin, float rdelta,
                         int nstep, bool use_mad) {
    uint8_t Laux[32];
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = gq_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)GQ_MAX(0, GQ_MIN(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = gq_nearest_int(iscale * (x[i] - min));
            l = GQ_MAX(0, GQ_MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += w[i] * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* The value of largest magnitude (first on ties) and that magnitude. */
static float signed_max(int n, const float *x, float *amax_out) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    *amax_out = amax;
    return max;
}

/* make_q3_quants with do_rmse: codes -nmax..nmax-1 (stored + nmax), refined
 * one element at a time for up to five passes, weights x^2. */
static float q3_search(int n, int nmax, const float *restrict x, int8_t *restrict L) {
    float amax;
    const float max = signed_max(n, x, &amax);
    if (amax < GQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = gq_nearest_int(iscale * x[i]);
        l = GQ_MAX(-nmax, GQ_MIN(nmax - 1, l));
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int new_l = gq_nearest_int(x[i] * sl2 / slx);
                new_l = GQ_MAX(-nmax, GQ_MIN(nmax - 1, new_l));
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* make_qx_quants with rmse_type 1: codes -nmax..nmax-1 (stored + nmax),
 * 18 scales tried around -nmax / max; weights qw, or x^2 without an
 * importance matrix (qw NULL; inlined, the test folds away). */
static inline float qx_search_body(int n, int nmax, const float *restrict x, int8_t *restrict L,
                                   const float *restrict qw) {
    float amax;
    const float max = signed_max(n, x, &amax);
    if (amax < GQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = gq_nearest_int(iscale * x[i]);
        l = GQ_MAX(-nmax, GQ_MIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        const float w = qw ? qw[i] : x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = gq_nearest_int(iscale * x[i]);
            l = GQ_MAX(-nmax, GQ_MIN(nmax - 1, l));
            const float w = qw ? qw[i] : x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = gq_nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + GQ_MAX(-nmax, GQ_MIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

static float qx_search(int n, int nmax, const float *restrict x, int8_t *restrict L) {
    return qx_search_body(n, nmax, x, L, NULL);
}

/* ---- Q2_K: 16 groups of 16, 2-bit codes, 4-bit scales and mins ---------- */

/* Four codes of 2 bits per byte: byte l of each 32-byte run holds elements
 * j + l, +32, +64, +96 (Q2_K and Q3_K). */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < 256; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] =
                (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

/* Eight groups of n values searched at once (x, w, L: group g at g * n):
 * the scalar version runs qkx2_search on each, the AVX2 one in lanes. */
typedef void (*qkx2_search_fn)(int n, int nmax, const float *restrict x, const float *restrict w,
                               uint8_t *restrict L, float *restrict the_min, float *restrict scale,
                               float rmin, float rdelta, int nstep, bool use_mad);

void gq_qkx2_search8(int n, int nmax, const float *restrict x, const float *restrict w,
                     uint8_t *restrict L, float *restrict the_min, float *restrict scale,
                     float rmin, float rdelta, int nstep, bool use_mad) {
    for (int g = 0; g < 8; g++)
        scale[g] = qkx2_search(n, nmax, x + g * n, w + g * n, L + g * n, &the_min[g], rmin, rdelta,
                               nstep, use_mad);
}

static inline void q2_k_body(const float *restrict x, uint8_t *restrict y, qkx2_search_fn qkx2) {
    uint8_t *scales = y, *qs = y + 16, *d_at = y + 80, *dmin_at = y + 82;
    uint8_t L[256];
    float weights[256], mins[16], sc[16];
    const float q4scale = 15.f;
    float max_scale = 0, max_min = 0;
    for (int l = 0; l < 256; ++l) weights[l] = fabsf(x[l]);
    for (int j = 0; j < 16; j += 8)
        qkx2(16, 3, x + 16 * j, weights + 16 * j, L + 16 * j, &mins[j], &sc[j], -0.5f, 0.1f, 15,
             true);
    for (int j = 0; j < 16; ++j) {
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
        const float iscale = q4scale / max_scale;
        for (int j = 0; j < 16; ++j) scales[j] = (uint8_t)gq_nearest_int(iscale * sc[j]);
        gq_put_f16(d_at, max_scale / q4scale);
    } else {
        memset(scales, 0, 16);
        gq_put_f16(d_at, 0.f);
    }
    if (max_min > 0) {
        const float iscale = q4scale / max_min;
        for (int j = 0; j < 16; ++j)
            scales[j] = (uint8_t)(scales[j] | (unsigned)gq_nearest_int(iscale * mins[j]) << 4);
        gq_put_f16(dmin_at, max_min / q4scale);
    } else {
        gq_put_f16(dmin_at, 0.f);
    }
    for (int j = 0; j < 16; ++j) {
        const float d = gq_get_f16(d_at) * (scales[j] & 0xF);
        if (!d) continue;
        const float dm = gq_get_f16(dmin_at) * (scales[j] >> 4);
        for (int ii = 0; ii < 16; ++ii) {
            const int l = gq_nearest_int((x[16 * j + ii] + dm) / d);
            L[16 * j + ii] = (uint8_t)GQ_MAX(0, GQ_MIN(3, l));
        }
    }
    pack_2bit(L, qs);
}

/* ---- Q3_K: 16 groups of 16, 3-bit codes, 6-bit signed scales ------------- */

/* The final codes of a group of 16 from its stored scale d (Q3_K, Q6_K):
 * clamp(nearest_int(x[i] / d), -nmax, nmax - 1) + nmax. */
void gq_codes16(const float *restrict x, float d, int nmax, int8_t *restrict L) {
    for (int ii = 0; ii < 16; ++ii) {
        const int l = gq_nearest_int(x[ii] / d);
        L[ii] = (int8_t)(GQ_MAX(-nmax, GQ_MIN(nmax - 1, l)) + nmax);
    }
}

/* Both Q3_K paths once the scales and d are stored: every code again from
 * the stored (rounded) scales (a group whose scale is 0 keeps the search's
 * codes in L, as ggml's does), the high bits into hmask, the rest packed. */
static void q3_k_finish(const float *restrict x, const uint8_t *scales, const uint8_t *d_at,
                        int8_t *restrict L, uint8_t *restrict hmask, uint8_t *restrict qs,
                        gq_codes16_fn codes16) {
    for (int j = 0; j < 16; ++j) {
        int8_t s = (int8_t)(j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4);
        s = (int8_t)((s | ((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32);
        const float d = gq_get_f16(d_at) * s;
        if (!d) continue;
        codes16(x + 16 * j, d, 4, L + 16 * j);
    }
    /* High bit of element j goes to bit j / 32 of hmask[j % 32]. Without a
     * branch: the bit is as often set as not, and a mispredicted branch per
     * value cost more than the rest of the block. */
    memset(hmask, 0, 32);
    uint8_t U[256];
    for (int j = 0; j < 256; ++j) {
        const uint8_t l = (uint8_t)L[j], high = l > 3;
        hmask[j % 32] = (uint8_t)(hmask[j % 32] | high << (j / 32));
        U[j] = (uint8_t)(l - 4 * high);
    }
    pack_2bit(U, qs);
}

/* The 16 groups' make_q3_quants, one after another. */
static void q3_search16(const float *restrict x, int8_t *restrict L, float *restrict sc) {
    for (int j = 0; j < 16; ++j) sc[j] = q3_search(16, 4, x + 16 * j, L + 16 * j);
}

typedef void (*q3_search16_fn)(const float *restrict x, int8_t *restrict L, float *restrict sc);

static inline void q3_k_body(const float *restrict x, uint8_t *restrict y, q3_search16_fn search,
                             gq_codes16_fn codes16) {
    uint8_t *hmask = y, *qs = y + 32, *scales = y + 96, *d_at = y + 108;
    int8_t L[256];
    float sc[16];
    float max_scale = 0, amax = 0;
    search(x, L, sc);
    for (int j = 0; j < 16; ++j) {
        const float scale = fabsf(sc[j]);
        if (scale > amax) {
            amax = scale;
            max_scale = sc[j];
        }
    }
    memset(scales, 0, 12);
    if (max_scale) {
        const float iscale = -32.f / max_scale;
        for (int j = 0; j < 16; ++j) {
            int8_t l = (int8_t)gq_nearest_int(iscale * sc[j]);
            l = (int8_t)(GQ_MAX(-32, GQ_MIN(31, l)) + 32);
            if (j < 8)
                scales[j] = (uint8_t)(l & 0xF);
            else
                scales[j - 8] = (uint8_t)(scales[j - 8] | (l & 0xF) << 4);
            l = (int8_t)(l >> 4);
            scales[j % 4 + 8] = (uint8_t)(scales[j % 4 + 8] | l << (2 * (j / 4)));
        }
        gq_put_f16(d_at, 1 / iscale);
    } else {
        gq_put_f16(d_at, 0.f);
    }
    q3_k_finish(x, scales, d_at, L, hmask, qs, codes16);
}

void gq_q3_k(const float *restrict x, uint8_t *restrict y) {
    q3_k_body(x, y, q3_search16, gq_codes16);
}
#if AMN_GGUF_QUANT_AVX2
void gq_q3_k_avx2(const float *restrict x, uint8_t *restrict y) {
    q3_k_body(x, y, gq_q3_search16_avx2, gq_codes16);
}
#endif
#if AMN_GGUF_QUANT_AVX512
void gq_q3_k_avx512(const float *restrict x, uint8_t *restrict y) {
    q3_k_body(x, y, gq_q3_search16_avx512, gq_codes16_avx512);
}
#endif

/* ---- Q4_K / Q5_K: 8 groups of 32, 6-bit scales and mins ------------------ */

/* The 12-byte 6-bit scale/min packing of Q4_K and Q5_K (ggml's layout read
 * by get_scale_min_k4). */
static void pack_scales_k4(const float *sc, const float *mins, float max_scale, float max_min,
                           uint8_t *scales) {
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; ++j) {
        uint8_t ls = (uint8_t)gq_nearest_int(inv_scale * sc[j]);
        uint8_t lm = (uint8_t)gq_nearest_int(inv_min * mins[j]);
        ls = GQ_MIN(63, ls);
        lm = GQ_MIN(63, lm);
        if (j < 4) {
            scales[j] = ls;
            scales[j + 4] = lm;
        } else {
            scales[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
            scales[j - 4] = (uint8_t)(scales[j - 4] | (ls >> 4) << 6);
            scales[j] = (uint8_t)(scales[j] | (lm >> 4) << 6);
        }
    }
}

static void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4);
        *m = (uint8_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
    }
}

/* Shared body of Q4_K (nmax 15) and Q5_K (nmax 31): L gets the codes. */
static inline void qk45_codes(const float *restrict x, uint8_t *restrict y, int nmax, float rmin,
                              int nstep, uint8_t *restrict L, qkx2_search_fn qkx2) {
    float weights[256], mins[8], sc[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[32 * j + l] = av_x + fabsf(x[32 * j + l]);
    }
    qkx2(32, nmax, x, weights, L, mins, sc, rmin, 0.1f, nstep, false);
    for (int j = 0; j < 8; ++j) {
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    pack_scales_k4(sc, mins, max_scale, max_min, y + 4);
    gq_put_f16(y, max_scale / 63.f);
    gq_put_f16(y + 2, max_min / 63.f);
    for (int j = 0; j < 8; ++j) {
        uint8_t s, m;
        scale_min_k4(j, y + 4, &s, &m);
        const float d = gq_get_f16(y) * s;
        if (!d) continue;
        const float dm = gq_get_f16(y + 2) * m;
        for (int ii = 0; ii < 32; ++ii) {
            const int l = gq_nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)GQ_MAX(0, GQ_MIN(nmax, l));
        }
    }
}

static inline void q4_k_body(const float *restrict x, uint8_t *restrict y, qkx2_search_fn qkx2) {
    uint8_t L[256];
    qk45_codes(x, y, 15, -1.f, 20, L, qkx2);
    uint8_t *q = y + 16;
    for (int j = 0; j < 256; j += 64, q += 32)
        for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
}

/* Q5_K's codes L into qh (fifth bits) and ql. */
static void q5_k_pack(const uint8_t *restrict L, uint8_t *restrict y) {
    uint8_t *qh = y + 16, *ql = y + 48;
    memset(qh, 0, 32);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < 256; n += 64, ql += 32) {
        for (int j = 0; j < 32; ++j) {
            int l1 = L[n + j], l2 = L[n + j + 32];
            if (l1 > 15) {
                l1 -= 16;
                qh[j] |= m1;
            }
            if (l2 > 15) {
                l2 -= 16;
                qh[j] |= m2;
            }
            ql[j] = (uint8_t)(l1 | l2 << 4);
        }
        m1 = (uint8_t)(m1 << 2);
        m2 = (uint8_t)(m2 << 2);
    }
}

static inline void q5_k_body(const float *restrict x, uint8_t *restrict y, qkx2_search_fn qkx2) {
    uint8_t L[256];
    qk45_codes(x, y, 31, -0.5f, 15, L, qkx2);
    q5_k_pack(L, y);
}

/* ---- Q6_K: 16 groups of 16, 6-bit codes, 8-bit signed scales ------------- */

typedef float (*qx_search_fn)(int n, int nmax, const float *restrict x, int8_t *restrict L);

/* The rest of a Q6_K block once each group's scale sc and codes L are
 * searched (shared by quantize_row_q6_K_ref and _impl). */
static void q6_k_finish(const float *restrict x, uint8_t *restrict y, int8_t *restrict L,
                        const float *restrict sc, gq_codes16_fn codes16) {
    uint8_t *ql = y, *qh = y + 128, *scales = y + 192, *d_at = y + 208;
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
        const float abs_scale = fabsf(sc[ib]);
        if (abs_scale > max_abs_scale) {
            max_abs_scale = abs_scale;
            max_scale = sc[ib];
        }
    }
    if (max_abs_scale < GQ_GROUP_MAX_EPS) {
        memset(y, 0, 210);
        return;
    }
    const float iscale = -128.f / max_scale;
    gq_put_f16(d_at, 1 / iscale);
    for (int ib = 0; ib < 16; ++ib)
        scales[ib] = (uint8_t)(int8_t)GQ_MIN(127, gq_nearest_int(iscale * sc[ib]));
    for (int j = 0; j < 16; ++j) {
        const float d = gq_get_f16(d_at) * (int8_t)scales[j];
        if (!d) continue;
        codes16(x + 16 * j, d, 32, L + 16 * j);
    }
    for (int j = 0; j < 256; j += 128, ql += 64, qh += 32)
        for (int l = 0; l < 32; ++l) {
            const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
            const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
            ql[l] = (uint8_t)(q1 | q3 << 4);
            ql[l + 32] = (uint8_t)(q2 | q4 << 4);
            qh[l] = (uint8_t)((L[j + l] >> 4) | (L[j + l + 32] >> 4) << 2 |
                              (L[j + l + 64] >> 4) << 4 | (L[j + l + 96] >> 4) << 6);
        }
}

static inline void q6_k_body(const float *restrict x, uint8_t *restrict y, qx_search_fn search,
                             gq_codes16_fn codes16) {
    int8_t L[256];
    float sc[16];
    for (int ib = 0; ib < 16; ++ib) sc[ib] = search(16, 32, x + 16 * ib, L + 16 * ib);
    q6_k_finish(x, y, L, sc, codes16);
}

void gq_q2_k(const float *restrict x, uint8_t *restrict y) {
    q2_k_body(x, y, gq_qkx2_search8);
}
void gq_q4_k(const float *restrict x, uint8_t *restrict y) {
    q4_k_body(x, y, gq_qkx2_search8);
}
void gq_q5_k(const float *restrict x, uint8_t *restrict y) {
    q5_k_body(x, y, gq_qkx2_search8);
}
void gq_q6_k(const float *restrict x, uint8_t *restrict y) {
    q6_k_body(x, y, qx_search, gq_codes16);
}
#if AMN_GGUF_QUANT_AVX2
void gq_q2_k_avx2(const float *restrict x, uint8_t *restrict y) {
    q2_k_body(x, y, gq_qkx2_search8_avx2);
}
void gq_q4_k_avx2(const float *restrict x, uint8_t *restrict y) {
    q4_k_body(x, y, gq_qkx2_search8_avx2);
}
void gq_q5_k_avx2(const float *restrict x, uint8_t *restrict y) {
    q5_k_body(x, y, gq_qkx2_search8_avx2);
}
void gq_q6_k_avx2(const float *restrict x, uint8_t *restrict y) {
    q6_k_body(x, y, gq_qx_search_avx2, gq_codes16);
}
#endif
#if AMN_GGUF_QUANT_AVX512
void gq_q6_k_avx512(const float *restrict x, uint8_t *restrict y) {
    q6_k_body(x, y, gq_qx_search_avx512, gq_codes16_avx512);
}
#endif

/* ---- with an importance matrix (ggml's quantize_row_q*_K_impl) ------------ */

/* make_qx_quants with rmse_type 1 and weights qw (given, never x^2). */
float gq_qx_search_w(int n, int nmax, const float *restrict x, int8_t *restrict L,
                     const float *restrict qw) {
    return qx_search_body(n, nmax, x, L, qw);
}

/* make_qkx3_quants with given weights: codes 0..nmax, a scale and a min
 * (returned as -min), nstep + 1 scales tried. With weights it is
 * make_qkx2_quants without use_mad (its zero-range test max <= min is
 * make_qkx2_quants' max == min: min <= max unless one is NaN, when both
 * are false). */
float gq_qkx3_search(int n, int nmax, const float *restrict x, const float *restrict w,
                     uint8_t *restrict L, float *restrict the_min, float rmin, float rdelta,
                     int nstep) {
    return qkx2_search(n, nmax, x, w, L, the_min, rmin, rdelta, nstep, false);
}

/* make_qp_quants: non-negative codes 0..nmax for the n values x (scales or
 * mins of the groups), weights qw; L is uint8_t as in ggml, so a negative
 * code wraps as its assignment does. */
float gq_qp_search(int n, int nmax, const float *restrict x, uint8_t *restrict L,
                   const float *restrict qw) {
    float max = 0;
    for (int i = 0; i < n; ++i) max = GQ_MAX(max, x[i]);
    if (max < GQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; ++i) L[i] = (uint8_t)gq_nearest_int(iscale * x[i]);
    const float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        const float diff = x[i] - scale * L[i];
        best_mse += qw[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * is + nmax) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            int l = gq_nearest_int(iscale_is * x[i]);
            l = GQ_MIN(nmax, l);
            const float diff = x[i] - scale_is * l;
            mse += qw[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = gq_nearest_int(iscale * x[i]);
        l = GQ_MIN(nmax, l);
        L[i] = (uint8_t)l;
        const float w = qw[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = qw[i];
            float slx = sumlx - w * x[i] * L[i];
            float sl2 = suml2 - w * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                int new_l = gq_nearest_int(x[i] * sl2 / slx);
                new_l = GQ_MIN(nmax, new_l);
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* sum of x^2 over one 256-value super-block, in ggml's order. */
static float sum_sq256(const float *x) {
    float s = 0;
    for (int j = 0; j < 256; ++j) s += x[j] * x[j];
    return s;
}

/* make_qkx3_quants with weights and nstep >= 1 is make_qkx2_quants with
 * the same weights and use_mad false (its "max <= min" is "max == min",
 * min being at most 0 and at most max): the groups of a super-block are
 * searched eight at a time by qkx2_search8 or its AVX2 lanes. */
static inline void q2_k_w_body(const float *restrict x, uint8_t *restrict y,
                               const float *restrict qw, qkx2_search_fn qkx2) {
    uint8_t *scales = y, *qs = y + 16, *d_at = y + 80, *dmin_at = y + 82;
    uint8_t L[256], Ls[16], Lm[16];
    float mins[16], sc[16], sw[16], weight[256];
    const float sigma2 = sum_sq256(x) / 256;
    for (int j = 0; j < 16; ++j) {
        const float *q = qw + 16 * j;
        float *wj = weight + 16 * j;
        for (int l = 0; l < 16; ++l) wj[l] = q[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
        sw[j] = 0;
        for (int l = 0; l < 16; ++l) sw[j] += wj[l];
    }
    for (int j = 0; j < 16; j += 8)
        qkx2(16, 3, x + 16 * j, weight + 16 * j, L + 16 * j, &mins[j], &sc[j], -0.9f, 0.05f, 36,
             false);
    const float dm0 = gq_qp_search(16, 15, sc, Ls, sw);
    const float mm0 = gq_qp_search(16, 15, mins, Lm, sw);
    gq_put_f16(d_at, dm0);
    gq_put_f16(dmin_at, mm0);
    const float dm = gq_get_f16(d_at), mm = gq_get_f16(dmin_at);
    for (int j = 0; j < 16; ++j) scales[j] = (uint8_t)(Ls[j] | Lm[j] << 4);
    for (int j = 0; j < 16; ++j) {
        const float d = dm * (scales[j] & 0xF);
        if (!d) continue;
        const float m = mm * (scales[j] >> 4);
        for (int ii = 0; ii < 16; ++ii) {
            const int l = gq_nearest_int((x[16 * j + ii] + m) / d);
            L[16 * j + ii] = (uint8_t)GQ_MAX(0, GQ_MIN(3, l));
        }
    }
    pack_2bit(L, qs);
}

static inline void q3_k_w_body(const float *restrict x, uint8_t *restrict y,
                               const float *restrict qw, gq_qx_search_w_fn search,
                               gq_codes16_fn codes16) {
    uint8_t *hmask = y, *qs = y + 32, *scales = y + 96, *d_at = y + 108;
    int8_t L[256], Ls[16];
    float sc[16], sw[16], weight[16];
    const float sigma2 = 2 * sum_sq256(x) / 256;
    for (int j = 0; j < 16; ++j) {
        const float *q = qw + 16 * j;
        for (int l = 0; l < 16; ++l)
            weight[l] = q[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 16; ++l) sumw += weight[l];
        sw[j] = sumw;
        sc[j] = search(16, 4, x + 16 * j, L + 16 * j, weight);
    }
    memset(scales, 0, 12);
    const float d_block = search(16, 32, sc, Ls, sw);
    for (int j = 0; j < 16; ++j) {
        int l = Ls[j];
        if (j < 8)
            scales[j] = (uint8_t)(l & 0xF);
        else
            scales[j - 8] = (uint8_t)(scales[j - 8] | (l & 0xF) << 4);
        l >>= 4;
        scales[j % 4 + 8] = (uint8_t)(scales[j % 4 + 8] | l << (2 * (j / 4)));
    }
    gq_put_f16(d_at, d_block);
    q3_k_finish(x, scales, d_at, L, hmask, qs, codes16);
}

/* Q4_K / Q5_K _impl: the codes into L; clamp63 is Q5_K's MIN(63, ...) on
 * the packed scales (Q4_K's _impl packs them unclamped). */
static inline void qk45_codes_w(const float *restrict x, uint8_t *restrict y, int nmax,
                                bool clamp63, const float *restrict qw, uint8_t *restrict L,
                                qkx2_search_fn qkx2) {
    uint8_t Ls[8], Lm[8];
    float weights[256], sw[8], mins[8], sc[8];
    const float sigma2 = 2 * sum_sq256(x) / 256;
    for (int j = 0; j < 8; ++j) {
        const float *q = qw + 32 * j;
        float *wj = weights + 32 * j;
        for (int l = 0; l < 32; ++l) wj[l] = q[l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 32; ++l) sumw += wj[l];
        sw[j] = sumw;
    }
    qkx2(32, nmax, x, weights, L, mins, sc, -0.9f, 0.05f, 36, false);
    const float d_block = gq_qp_search(8, 63, sc, Ls, sw);
    const float m_block = gq_qp_search(8, 63, mins, Lm, sw);
    uint8_t *scales = y + 4;
    for (int j = 0; j < 8; ++j) {
        uint8_t ls = Ls[j], lm = Lm[j];
        if (clamp63) {
            ls = GQ_MIN(63, ls);
            lm = GQ_MIN(63, lm);
        }
        if (j < 4) {
            scales[j] = ls;
            scales[j + 4] = lm;
        } else {
            scales[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
            scales[j - 4] = (uint8_t)(scales[j - 4] | (ls >> 4) << 6);
            scales[j] = (uint8_t)(scales[j] | (lm >> 4) << 6);
        }
    }
    gq_put_f16(y, d_block);
    gq_put_f16(y + 2, m_block);
    for (int j = 0; j < 8; ++j) {
        uint8_t s, m;
        scale_min_k4(j, scales, &s, &m);
        const float d = gq_get_f16(y) * s;
        if (!d) continue;
        const float dm = gq_get_f16(y + 2) * m;
        for (int ii = 0; ii < 32; ++ii) {
            const int l = gq_nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)GQ_MAX(0, GQ_MIN(nmax, l));
        }
    }
}

static inline void q4_k_w_body(const float *restrict x, uint8_t *restrict y,
                               const float *restrict qw, qkx2_search_fn qkx2) {
    uint8_t L[256];
    qk45_codes_w(x, y, 15, false, qw, L, qkx2);
    uint8_t *q = y + 16;
    for (int j = 0; j < 256; j += 64, q += 32)
        for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
}

static inline void q5_k_w_body(const float *restrict x, uint8_t *restrict y,
                               const float *restrict qw, qkx2_search_fn qkx2) {
    uint8_t L[256];
    qk45_codes_w(x, y, 31, true, qw, L, qkx2);
    q5_k_pack(L, y);
}

/* The exported block functions with weights: a body and its search. */
#define GQ_K_W(name, body, search)                                                                 \
    void name(const float *restrict x, uint8_t *restrict y, const float *restrict qw) {            \
        body(x, y, qw, search);                                                                    \
    }
GQ_K_W(gq_q2_k_w, q2_k_w_body, gq_qkx2_search8)
GQ_K_W(gq_q4_k_w, q4_k_w_body, gq_qkx2_search8)
GQ_K_W(gq_q5_k_w, q5_k_w_body, gq_qkx2_search8)
#if AMN_GGUF_QUANT_AVX2
GQ_K_W(gq_q2_k_w_avx2, q2_k_w_body, gq_qkx2_search8_avx2)
GQ_K_W(gq_q4_k_w_avx2, q4_k_w_body, gq_qkx2_search8_avx2)
GQ_K_W(gq_q5_k_w_avx2, q5_k_w_body, gq_qkx2_search8_avx2)
#endif

static inline void q6_k_w_body(const float *restrict x, uint8_t *restrict y,
                               const float *restrict qw, gq_qx_search_w_fn search,
                               gq_codes16_fn codes16) {
    int8_t L[256];
    float sc[16];
    for (int ib = 0; ib < 16; ++ib) sc[ib] = search(16, 32, x + 16 * ib, L + 16 * ib, qw + 16 * ib);
    q6_k_finish(x, y, L, sc, codes16);
}

/* Q3_K and Q6_K: a body, its search and its final codes. */
#define GQ_K_W2(name, body, search, codes16)                                                       \
    void name(const float *restrict x, uint8_t *restrict y, const float *restrict qw) {            \
        body(x, y, qw, search, codes16);                                                           \
    }
GQ_K_W2(gq_q3_k_w, q3_k_w_body, gq_qx_search_w, gq_codes16)
GQ_K_W2(gq_q6_k_w, q6_k_w_body, gq_qx_search_w, gq_codes16)
#if AMN_GGUF_QUANT_AVX2
GQ_K_W2(gq_q3_k_w_avx2, q3_k_w_body, gq_qx_search_w_avx2, gq_codes16)
GQ_K_W2(gq_q6_k_w_avx2, q6_k_w_body, gq_qx_search_w_avx2, gq_codes16)
#endif
#if AMN_GGUF_QUANT_AVX512
GQ_K_W2(gq_q3_k_w_avx512, q3_k_w_body, gq_qx_search_w_avx512, gq_codes16_avx512)
GQ_K_W2(gq_q6_k_w_avx512, q6_k_w_body, gq_qx_search_w_avx512, gq_codes16_avx512)
#endif
