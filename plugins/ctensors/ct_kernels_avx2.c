/* compressed-tensors integers with AVX2: 8 consecutive columns per step.
 * A packed 4-bit word is 8 columns, half a 2-bit word 8 (variable shifts),
 * 8-bit fields and I8 weights are 8 bytes widened. When every run of 8
 * columns lies in one group, one output row at a time: its scales and zero
 * points are first put in small binary32 / int32 tables and read by
 * broadcast. Otherwise (act-order, group sizes not a multiple of 8) 8 rows
 * at a time (block_vec), the 8 columns' scales fetched without gather
 * instructions (with them act-order ran at 0.4x the rate of uniform groups;
 * without, 0.7-0.8x); to BF16 those blocks go by columns (block_pairs).
 * The rows whose remainder is fewer than 8 still take the one-row path
 * with gathers (such layouts ask for a row quantum of 8, so the
 * converter's chunks leave only a tensor's last rows). The product is
 * rounded to the scale's dtype exactly as the scalar path does (BF16:
 * round to nearest even on the bits; F16: through F16C, which rounds the
 * same way), so the bytes match.
 * Rows whose scales are not all finite, and bit widths other than 2, 4 and
 * 8, take the scalar path. */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>

#include "amn/kit/store_avx2.h"
#include "ct_kernels.h"

/* Round 8 finite binary32 lanes to BF16 and widen back. */
static inline __m256 round_bf16(__m256 y) {
    const __m256i u = _mm256_castps_si256(y);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
    return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u)));
}

/* The 32-bit word at p in all 8 lanes, by a broadcast load (no shuffle
 * port use, unlike a scalar load moved into a vector). */
static inline __m256i bcast32(const uint8_t *p) {
    return _mm256_castps_si256(_mm256_broadcast_ss((const float *)(const void *)p));
}

static inline __attribute__((always_inline)) __m256i load_q(unsigned kind, const uint8_t *row,
                                                            uint64_t i) {
    if (kind == CT_Q_I8) {
        return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(row + i)));
    }
    if (kind == CT_Q_P8) {
        const __m256i u = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + i)));
        return _mm256_sub_epi32(u, _mm256_set1_epi32(128));
    }
    if (kind == CT_Q_P2) {
        /* Word i / 16 holds columns i..i+15: these 8 are its low or high half. */
        const __m256i f = _mm256_and_si256(
            _mm256_srlv_epi32(bcast32(row + (i / 16) * 4),
                              _mm256_add_epi32(_mm256_set1_epi32((int)(i % 16) * 2),
                                               _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14))),
            _mm256_set1_epi32(3));
        return _mm256_sub_epi32(f, _mm256_set1_epi32(2));
    }
    /* 4-bit: word i / 8 holds columns i..i+7 */
    const __m256i f = _mm256_and_si256(
        _mm256_srlv_epi32(bcast32(row + i / 2), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(15));
    return _mm256_sub_epi32(f, _mm256_set1_epi32(8));
}

/* (q - z) * s of 8 lanes rounded to the scale's dtype and stored as out.
 * No NaN can arise here (finite scales, integer differences), and a
 * rounding to the scale's dtype followed by the same rounding to the
 * output dtype is that rounding once. */
static inline __attribute__((always_inline)) void store8(__m256 y, amn_dtype out, amn_dtype stype,
                                                         uint8_t *p) {
    if (out == AMN_DTYPE_BF16) {
        if (stype == AMN_DTYPE_F16)
            y = _mm256_cvtph_ps(_mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT));
        _mm_storeu_si128((__m128i *)p, qs_bf16x8_finite(y));
    } else if (out == AMN_DTYPE_F16) {
        if (stype == AMN_DTYPE_BF16) y = round_bf16(y);
        _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT));
    } else {
        if (stype == AMN_DTYPE_BF16)
            y = round_bf16(y);
        else if (stype == AMN_DTYPE_F16)
            y = _mm256_cvtph_ps(_mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT));
        _mm256_storeu_ps((float *)p, y);
    }
}

/* store8 of 16 lanes, y0 then y1. To BF16 both halves are rounded into
 * one 16-bit pack (and one permute puts its 128-bit lanes in order): the
 * shuffle port is what BF16 output waits on. */
static inline __attribute__((always_inline)) void store16(__m256 y0, __m256 y1, amn_dtype out,
                                                          amn_dtype stype, uint8_t *p) {
    if (out != AMN_DTYPE_BF16) {
        store8(y0, out, stype, p);
        store8(y1, out, stype, p + (out == AMN_DTYPE_F32 ? 32 : 16));
        return;
    }
    if (stype == AMN_DTYPE_F16) {
        y0 = _mm256_cvtph_ps(_mm256_cvtps_ph(y0, _MM_FROUND_TO_NEAREST_INT));
        y1 = _mm256_cvtph_ps(_mm256_cvtps_ph(y1, _MM_FROUND_TO_NEAREST_INT));
    }
    const __m256i h = _mm256_packus_epi32(
        amn_bf16_lanes_finite_avx2(y0), amn_bf16_lanes_finite_avx2(y1)); /* 0-3 8-11 | 4-7 12-15 */
    _mm256_storeu_si256((__m256i *)p, _mm256_permute4x64_epi64(h, 0xd8));
}

static inline __attribute__((always_inline)) void
row_vec(const ct_layout *l, uint64_t o, const float *st, const int32_t *zt, const int32_t *gt,
        unsigned kind, amn_dtype out, amn_dtype stype, uint8_t *d) {
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    const uint8_t *row = l->weight + o * (l->packed ? l->words * 4 : l->in);
    const uint64_t in8 = l->in - l->in % 8, gs = l->group_size; /* locals: see CT_Q_I8 */
    if (!gt && gs % 8 == 0) {
        /* Group by group: a division per 8 columns costs 40-90 cycles on
         * Skylake, 5x the work it would index. */
        uint64_t i = 0;
        for (uint64_t g = 0; i < in8; g++) {
            const __m256 s = _mm256_set1_ps(st[g]);
            const __m256i z = _mm256_set1_epi32(zt[g]);
            const uint64_t end = i + gs < in8 ? i + gs : in8;
            for (; i + 16 <= end; i += 16) {
                const __m256 y0 =
                    _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(load_q(kind, row, i), z)), s);
                const __m256 y1 = _mm256_mul_ps(
                    _mm256_cvtepi32_ps(_mm256_sub_epi32(load_q(kind, row, i + 8), z)), s);
                store16(y0, y1, out, stype, d + i * es);
            }
            for (; i < end; i += 8) {
                const __m256 y =
                    _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(load_q(kind, row, i), z)), s);
                store8(y, out, stype, d + i * es);
            }
        }
    } else {
        const bool zk = l->zkind != 0;
        for (uint64_t i = 0; i < in8; i += 8) {
            const __m256i gi = _mm256_loadu_si256((const __m256i *)(gt + i));
            const __m256 s = _mm256_i32gather_ps(st, gi, 4);
            const __m256i z = zk ? _mm256_i32gather_epi32(zt, gi, 4) : _mm256_setzero_si256();
            const __m256 y =
                _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(load_q(kind, row, i), z)), s);
            store8(y, out, stype, d + i * es);
        }
    }
    for (uint64_t i = in8; i < l->in; i++) {
        const uint64_t g = gt ? (uint64_t)gt[i] : i / l->group_size;
        qs_store1(ct_apply(ct_q(l, o, i) - zt[g], st[g], stype), out, d + i * es);
    }
}

/* Per-column groups (act-order g_idx, or groups that 8 columns may
 * straddle): 8 rows o..o+7 at a time, so that no gather is needed. stt and
 * ztt hold the 8 rows' scales and zero points group by group ([G][8]): the
 * 8 columns' entries are 8 plain loads, and one 8 x 8 transpose gives each
 * row its 8 scales (and zero points). */
static inline __attribute__((always_inline)) void
block_vec(const ct_layout *l, uint64_t o, const float *stt, const int32_t *ztt, const int32_t *gt,
          unsigned kind, amn_dtype out, amn_dtype stype, uint8_t *d, size_t rowbytes, uint64_t i0) {
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    const size_t wbytes = l->packed ? (size_t)l->words * 4 : (size_t)l->in;
    const bool zk = l->zkind != 0; /* a local: the stores may alias *l */
    const uint8_t *w = l->weight + o * wbytes;
    const uint64_t in8 = l->in - l->in % 8;
    for (uint64_t i = i0; i < in8; i += 8) {
        __m256i s[8], z[8];
        for (int c = 0; c < 8; c++)
            s[c] = _mm256_loadu_si256((const __m256i *)(stt + (size_t)gt[i + c] * 8));
        qs_transpose8x8(s);
        if (zk) {
            for (int c = 0; c < 8; c++)
                z[c] = _mm256_loadu_si256((const __m256i *)(ztt + (size_t)gt[i + c] * 8));
            qs_transpose8x8(z);
        }
        for (int r = 0; r < 8; r++) {
            __m256i q = load_q(kind, w + (size_t)r * wbytes, i);
            if (zk) q = _mm256_sub_epi32(q, z[r]);
            const __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_castsi256_ps(s[r]));
            store8(y, out, stype, d + (size_t)r * rowbytes + i * es);
        }
    }
    for (uint64_t r = 0; r < 8; r++)
        for (uint64_t i = in8; i < l->in; i++) {
            const uint64_t g = (uint64_t)gt[i];
            qs_store1(ct_apply(ct_q(l, o + r, i) - ztt[g * 8 + r], stt[g * 8 + r], stype), out,
                      d + r * rowbytes + i * es);
        }
}

/* Columns per 32-bit word of each encoding. */
static inline unsigned per_word(unsigned kind) {
    return kind == CT_Q_P4 ? 8 : kind == CT_Q_P2 ? 16 : 4;
}

/* Field f of every lane of w (the words of 8 rows), as a signed value
 * before its zero point: the stored unsigned field minus 2^(bits-1), or
 * an I8 byte sign-extended. */
static inline __attribute__((always_inline)) __m256i field(unsigned kind, __m256i w, unsigned f) {
    if (kind == CT_Q_I8) return _mm256_srai_epi32(_mm256_slli_epi32(w, (int)(24 - 8 * f)), 24);
    const unsigned bits = kind;
    const __m256i u =
        _mm256_and_si256(_mm256_srli_epi32(w, (int)(bits * f)), _mm256_set1_epi32((1 << bits) - 1));
    return _mm256_sub_epi32(u, _mm256_set1_epi32(1 << (bits - 1)));
}

/* block_vec's 8 rows to BF16, the other way round: 8 words of each row
 * (64 columns of 4 bits) are transposed once (24 shuffles per 256-512
 * values), so that each column is a vector over the 8 rows. Its scale and
 * zero point are then one plain load from the [G][8] tables, and two
 * columns' BF16 share a lane (qs_bf16_pairs8x8): 8 shuffles per 64
 * values, where block_vec's transposes of scales (and zero points) and
 * per-row packs take 40 (64). Returns the columns done: whole runs of 8
 * words; block_vec takes the rest. */
static inline __attribute__((always_inline)) uint64_t
block_pairs(const ct_layout *l, uint64_t o, const float *stt, const int32_t *ztt, const int32_t *gt,
            unsigned kind, amn_dtype stype, uint8_t *d, size_t rowbytes) {
    const unsigned pw = per_word(kind), span = 8 * pw; /* columns per 8 words */
    const size_t wbytes = l->packed ? (size_t)l->words * 4 : (size_t)l->in;
    const bool zk = l->zkind != 0;
    const uint8_t *w = l->weight + o * wbytes;
    const uint64_t end = l->in - l->in % span;
    for (uint64_t i0 = 0; i0 < end; i0 += span) {
        __m256i q[8];
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++)
            q[r] = _mm256_loadu_si256((const __m256i *)(w + (size_t)r * wbytes + i0 / pw * 4));
        qs_transpose8x8(q); /* q[j]: word j of each row */
#pragma GCC unroll 16
        for (unsigned c8 = 0; c8 < span; c8 += 8) {
            __m256 y[8];
#pragma GCC unroll 8
            for (unsigned t = 0; t < 8; t++) {
                const unsigned c = c8 + t;
                const size_t g = (size_t)gt[i0 + c] * 8;
                __m256i v = field(kind, q[c / pw], c % pw);
                if (zk) v = _mm256_sub_epi32(v, _mm256_loadu_si256((const __m256i *)(ztt + g)));
                y[t] = _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_loadu_ps(stt + g));
                if (stype == AMN_DTYPE_F16) /* the F16 product, then its BF16 */
                    y[t] = _mm256_cvtph_ps(_mm256_cvtps_ph(y[t], _MM_FROUND_TO_NEAREST_INT));
            }
            __m256i x[4];
            qs_bf16_pairs8x8(y, x);
#pragma GCC unroll 8
            for (unsigned r = 0; r < 8; r++)
                _mm_storeu_si128((__m128i *)(d + r * rowbytes + (i0 + c8) * 2), qs_pairs_row(x, r));
        }
    }
    return end;
}

/* CALL(out, scale dtype) instantiated for each pair, so the rounding folds. */
#define BY_DTYPES(CALL)                                                                            \
    do {                                                                                           \
        if (out == AMN_DTYPE_BF16) {                                                               \
            if (l->stype == AMN_DTYPE_BF16)                                                        \
                CALL(AMN_DTYPE_BF16, AMN_DTYPE_BF16);                                              \
            else if (l->stype == AMN_DTYPE_F16)                                                    \
                CALL(AMN_DTYPE_BF16, AMN_DTYPE_F16);                                               \
            else                                                                                   \
                CALL(AMN_DTYPE_BF16, AMN_DTYPE_F32);                                               \
        } else if (out == AMN_DTYPE_F16) {                                                         \
            if (l->stype == AMN_DTYPE_BF16)                                                        \
                CALL(AMN_DTYPE_F16, AMN_DTYPE_BF16);                                               \
            else if (l->stype == AMN_DTYPE_F16)                                                    \
                CALL(AMN_DTYPE_F16, AMN_DTYPE_F16);                                                \
            else                                                                                   \
                CALL(AMN_DTYPE_F16, AMN_DTYPE_F32);                                                \
        } else {                                                                                   \
            if (l->stype == AMN_DTYPE_BF16)                                                        \
                CALL(AMN_DTYPE_F32, AMN_DTYPE_BF16);                                               \
            else if (l->stype == AMN_DTYPE_F16)                                                    \
                CALL(AMN_DTYPE_F32, AMN_DTYPE_F16);                                                \
            else                                                                                   \
                CALL(AMN_DTYPE_F32, AMN_DTYPE_F32);                                                \
        }                                                                                          \
    } while (0)

/* CALL(kind, out, scale dtype) for the layout's encoding. */
#define BY_KIND(CALL, OUT, ST)                                                                     \
    do {                                                                                           \
        switch (ct_q_kind(l)) {                                                                    \
        case CT_Q_P4:                                                                              \
            CALL(CT_Q_P4, OUT, ST);                                                                \
            break;                                                                                 \
        case CT_Q_P2:                                                                              \
            CALL(CT_Q_P2, OUT, ST);                                                                \
            break;                                                                                 \
        case CT_Q_P8:                                                                              \
            CALL(CT_Q_P8, OUT, ST);                                                                \
            break;                                                                                 \
        default:                                                                                   \
            CALL(CT_Q_I8, OUT, ST);                                                                \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

#define ROW_K(K, OUT, ST) row_vec(l, o, st, zt, gt, K, OUT, ST, d)
#define BLOCK_K(K, OUT, ST)                                                                        \
    block_vec(l, o, stt, ztt, gt, K, OUT, ST, d, rowbytes,                                         \
              OUT == AMN_DTYPE_BF16 ? block_pairs(l, o, stt, ztt, gt, K, ST, d, rowbytes) : 0)
#define ROW_CASE(OUT, ST)   BY_KIND(ROW_K, OUT, ST)
#define BLOCK_CASE(OUT, ST) BY_KIND(BLOCK_K, OUT, ST)

static void row_dispatch(const ct_layout *l, uint64_t o, const float *st, const int32_t *zt,
                         const int32_t *gt, amn_dtype out, uint8_t *d) {
    BY_DTYPES(ROW_CASE);
}

static void block_dispatch(const ct_layout *l, uint64_t o, const float *stt, const int32_t *ztt,
                           const int32_t *gt, amn_dtype out, uint8_t *d, size_t rowbytes) {
    BY_DTYPES(BLOCK_CASE);
}

/* One row through its st / zt tables, or the scalar path when a scale is
 * not finite. */
static void one_row(const ct_layout *l, uint64_t o, float *st, int32_t *zt, const int32_t *gt,
                    amn_dtype out, uint8_t *d) {
    bool finite = true;
    ct_row_tables(l, o, st, zt, 1);
    for (uint64_t g = 0; g < l->groups; g++)
        if (!isfinite(st[g])) finite = false;
    if (finite)
        row_dispatch(l, o, st, zt, gt, out, d);
    else
        ct_rows_scalar(l, o, 1, out, d);
}

/* Rows o..o+7 as one block when all their scales are finite. */
static bool block_rows(const ct_layout *l, uint64_t o, float *stt, int32_t *ztt, const int32_t *gt,
                       amn_dtype out, uint8_t *d, size_t rowbytes) {
    for (uint64_t r = 0; r < 8; r++) ct_row_tables(l, o + r, stt + r, ztt + r, 8);
    for (uint64_t k = 0; k < l->groups * 8; k++)
        if (!isfinite(stt[k])) return false;
    block_dispatch(l, o, stt, ztt, gt, out, d, rowbytes);
    return true;
}

int ct_rows_avx2(const ct_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst) {
    if (l->packed && l->bits != 2 && l->bits != 4 && l->bits != 8)
        return ct_rows_scalar(l, row0, nrows, out, dst);
    const uint64_t G = l->groups;
    /* Column -> group, when runs of 8 may straddle groups. */
    const bool need_gt = !l->gidx && l->group_size % 8 != 0;
    const bool blocked = l->gidx || need_gt;
    float *st = malloc(G * sizeof *st * (blocked ? 8 : 1));
    int32_t *zt = malloc(G * sizeof *zt * (blocked ? 8 : 1));
    int32_t *own_gt = need_gt ? malloc(l->in * sizeof *own_gt) : NULL;
    if (!st || !zt || (need_gt && !own_gt)) {
        free(st), free(zt), free(own_gt);
        return -1;
    }
    for (uint64_t i = 0; need_gt && i < l->in; i++) own_gt[i] = (int32_t)(i / l->group_size);
    const int32_t *gt = l->gidx ? l->gidx : own_gt;
    const size_t rowbytes = (size_t)l->in * amn_dtype_size(out);
    uint8_t *d = dst;
    uint64_t o = row0;
    for (; blocked && o + 8 <= row0 + nrows; o += 8, d += 8 * rowbytes)
        if (!block_rows(l, o, st, zt, gt, out, d, rowbytes))
            for (uint64_t r = 0; r < 8; r++) one_row(l, o + r, st, zt, gt, out, d + r * rowbytes);
    for (; o < row0 + nrows; o++, d += rowbytes) one_row(l, o, st, zt, gt, out, d);
    free(st), free(zt), free(own_gt);
    return 0;
}
