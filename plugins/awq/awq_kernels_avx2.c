/* AWQ dequantization with AVX2.
 *
 * qweight packs along the output dimension, so one word holds 8 output rows
 * of one input column, and writing [out][in] is a transpose.
 *
 * Main path (one group per run of 32 inputs): y = (float)(q - z) * s takes
 * only 16 values per (group, output row), so per block of 128 output rows
 * and per group the 16 results are computed once, rounded to the output
 * dtype exactly as a single value is, and kept as byte planes; vpshufb then
 * turns packed nibbles straight into output bytes. A step takes 32 input
 * rows of the block's words (loads along qweight rows), transposes them 8x8
 * in dwords and 4x4 in bytes so that each nibble position yields 32
 * consecutive inputs of one output row, and writes those as one 64- (BF16,
 * F16) or 128-byte (F32) run of that row.
 *
 * Other group sizes take the per-value arithmetic path (arith_*). */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>

#include "amn/error.h"
#include "awq_kernels.h"
#include "amn/kit/store_avx2.h"

/* ---- arithmetic path: groups that change inside a run of 32 inputs ---- */

#define WB 8 /* words per block: 64 output rows */

#define TI 64 /* inputs per tile */

typedef struct awq_ctx {
    const awq_layout *l;
    const float *st;   /* [groups][WB * 8] */
    const int32_t *zt; /* [groups][WB * 8] */
    amn_dtype out;
    size_t es;
    uint64_t rowbytes; /* of the tile the words are emitted into */
} awq_ctx;

/* The 8 outputs of word column v (lanes = 8 consecutive inputs from i0) for
 * the block's word index w. Nibble p holds output column 8w + ORDER[p]. */
static inline __attribute__((always_inline)) void emit_word(const float *st, const int32_t *zt,
                                                            amn_dtype out, uint64_t stride,
                                                            __m256i v, unsigned w, uint8_t *d) {
    static const unsigned order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    const __m256i m = _mm256_set1_epi32(15);
#define AWQ_NIBBLE(p)                                                                              \
    do {                                                                                           \
        const unsigned j = 8 * w + order[p];                                                       \
        const __m256i q = _mm256_and_si256(_mm256_srli_epi32(v, 4 * (p)), m);                      \
        const __m256i z = _mm256_set1_epi32(zt[j]);                                                \
        const __m256 y =                                                                           \
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, z)), _mm256_set1_ps(st[j]));      \
        qs_store8(out, d + j * stride, y);                                                         \
    } while (0)
    AWQ_NIBBLE(0);
    AWQ_NIBBLE(1);
    AWQ_NIBBLE(2);
    AWQ_NIBBLE(3);
    AWQ_NIBBLE(4);
    AWQ_NIBBLE(5);
    AWQ_NIBBLE(6);
    AWQ_NIBBLE(7);
#undef AWQ_NIBBLE
}

/* Output rows o0 .. o0 + 8*nw (o0 a multiple of 8, nw <= WB) into dblk,
 * whose rows are rowbytes apart. Each run of TI inputs is built in an
 * L1-resident tile and then copied out row by row: writing 16 bytes at a
 * time into 64 rows that lie a multiple of 4 KiB apart would thrash one L1
 * set. */
static inline __attribute__((always_inline)) void arith_block(const awq_ctx *c0,
                                                              const amn_dtype out, uint64_t o0,
                                                              unsigned nw, uint8_t *dblk,
                                                              uint64_t rowbytes) {
    const awq_layout *l = c0->l;
    const uint64_t in = l->in, wrow = l->out / 8 * 4;
    const uint8_t *base = l->qweight + (o0 / 8) * 4;
    _Alignas(64) uint8_t tile[WB * 8 * TI * 4];
    awq_ctx cc = *c0;
    cc.rowbytes = TI * c0->es;
    const awq_ctx *c = &cc;
    uint64_t i0 = 0;
    for (; i0 + 8 <= in; i0 += 8) {
        const uint64_t tbase = i0 / l->group_size * (WB * 8);
        const uint64_t it = i0 % TI;
        uint8_t *d = tile + it * c->es;
        const uint8_t *p = base + i0 * wrow;
        if (nw == WB) {
            __m256i r[8];
            for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_si256((const __m256i *)(p + k * wrow));
            qs_transpose8x8(r);
            for (unsigned w = 0; w < WB; w++)
                emit_word(c->st + tbase, c->zt + tbase, out, cc.rowbytes, r[w], w, d);
        } else {
            for (unsigned w = 0; w < nw; w++) {
                const uint8_t *q = p + w * 4;
                const __m256i v =
                    _mm256_setr_epi32((int)awq_ld32(q), (int)awq_ld32(q + wrow),
                                      (int)awq_ld32(q + 2 * wrow), (int)awq_ld32(q + 3 * wrow),
                                      (int)awq_ld32(q + 4 * wrow), (int)awq_ld32(q + 5 * wrow),
                                      (int)awq_ld32(q + 6 * wrow), (int)awq_ld32(q + 7 * wrow));
                emit_word(c->st + tbase, c->zt + tbase, out, cc.rowbytes, v, w, d);
            }
        }
        if (it + 8 == TI || i0 + 16 > in) {
            /* The tile is full, or this was the last whole chunk. */
            const uint64_t start = i0 + 8 - (it + 8);
            const size_t len = (it + 8) * c->es; /* a multiple of 16 */
            for (uint64_t j = 0; j < 8 * (uint64_t)nw; j++) {
                uint8_t *dst = dblk + j * rowbytes + start * c->es;
                const uint8_t *src = tile + j * cc.rowbytes;
                for (size_t k = 0; k < len; k += 16)
                    _mm_storeu_si128((__m128i *)(dst + k),
                                     _mm_load_si128((const __m128i *)(src + k)));
            }
        }
    }
    for (; i0 < in; i0++) {
        const uint64_t tbase = i0 / l->group_size * (WB * 8);
        for (uint64_t j = 0; j < 8 * (uint64_t)nw; j++) {
            const int32_t q = awq_nibble(l->qweight + i0 * wrow, o0 + j);
            qs_store1((float)(q - c->zt[tbase + j]) * c->st[tbase + j], c->out,
                      dblk + j * rowbytes + i0 * c->es);
        }
    }
}

static int arith_rows(const awq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                      void *dst) {
    /* Groups must not change inside an 8-value chunk. */
    if (l->group_size % 8) return awq_dequant_rows_scalar(l, row0, nrows, out, dst);
    const size_t es = amn_dtype_size(out);
    const uint64_t rowbytes = l->in * es, end = row0 + nrows, G = l->groups;
    uint8_t *d = dst;
    /* Rows before the first word boundary, and after the last, go scalar. */
    uint64_t o = row0;
    const uint64_t head = (8 - row0 % 8) % 8;
    if (head) {
        const uint64_t n = head < nrows ? head : nrows;
        int rc = awq_dequant_rows_scalar(l, o, n, out, d);
        if (rc || n == nrows) return rc;
        o += n;
    }
    float *st = malloc(G * WB * 8 * sizeof *st);
    int32_t *zt = malloc(G * WB * 8 * sizeof *zt);
    if (!st || !zt) {
        free(st);
        free(zt);
        return AMN_E_NOMEM;
    }
    const awq_ctx c = {.l = l, .st = st, .zt = zt, .out = out, .es = es, .rowbytes = rowbytes};
    const uint64_t wrow = l->out / 8 * 4;
    while (end - o >= 8) {
        const unsigned nw = (end - o) / 8 < WB ? (unsigned)((end - o) / 8) : WB;
        for (uint64_t g = 0; g < G; g++)
            for (uint64_t j = 0; j < 8 * (uint64_t)nw; j++) {
                st[g * WB * 8 + j] = awq_scale(l, g, o + j);
                zt[g * WB * 8 + j] = awq_nibble(l->qzeros + g * wrow, o + j);
            }
        uint8_t *dblk = d + (o - row0) * rowbytes;
        switch (out) {
        case AMN_DTYPE_F32:
            arith_block(&c, AMN_DTYPE_F32, o, nw, dblk, rowbytes);
            break;
        case AMN_DTYPE_F16:
            arith_block(&c, AMN_DTYPE_F16, o, nw, dblk, rowbytes);
            break;
        default:
            arith_block(&c, AMN_DTYPE_BF16, o, nw, dblk, rowbytes);
            break;
        }
        o += 8 * (uint64_t)nw;
    }
    free(st);
    free(zt);
    if (o < end) return awq_dequant_rows_scalar(l, o, end - o, out, d + (o - row0) * rowbytes);
    return 0;
}

/* ---- table path ---- */

#define BW 16 /* words per block: 128 output rows */
#define TS 32 /* inputs per step */

/* Output column of nibble p within its word (AutoAWQ's interleave). */
static const unsigned awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

/* Input (within a step) of row k of load group k / 8, chosen so that after
 * the transposes the byte slots come out in the order the final unpacks
 * need: for 16-bit outputs slots 0-7, 16-23, 8-15, 24-31 hold inputs 0-7,
 * 8-15, 16-23, 24-31 (vpunpck{l,h}bw then give inputs 0-15 and 16-31); for
 * F32 the natural order does. */
static const uint8_t step_rows16[TS] = {0,  1,  2,  3,  8,  9,  10, 11, 4,  5,  6,
                                        7,  12, 13, 14, 15, 16, 17, 18, 19, 24, 25,
                                        26, 27, 20, 21, 22, 23, 28, 29, 30, 31};

/* The 16 results of one (group, output row) as byte planes: 16-bit outputs
 * take 32 bytes (low bytes of q = 0..15, then high bytes), F32 64 bytes
 * (byte 0 of each, byte 1, byte 2, byte 3). `finite`: s is finite, so no
 * result is NaN. */
static inline __attribute__((always_inline)) void build_table(amn_dtype out, bool finite, float s,
                                                              int32_t z, uint8_t *t) {
    const __m256 sv = _mm256_set1_ps(s);
    const __m256i zv = _mm256_set1_epi32(z);
    const __m256 y0 = _mm256_mul_ps(
        _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), zv)), sv);
    const __m256 y1 = _mm256_mul_ps(
        _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15), zv)),
        sv);
    if (out == AMN_DTYPE_F32) {
        /* Per lane, gather byte k of the 4 values into dword k. */
        const __m256i m = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0,
                                           4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        const __m256i a = _mm256_shuffle_epi8(_mm256_castps_si256(y0), m); /* q 0-3 | 4-7 */
        const __m256i b = _mm256_shuffle_epi8(_mm256_castps_si256(y1), m); /* q 8-11 | 12-15 */
        const __m256i p = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        _mm256_store_si256((__m256i *)t,
                           _mm256_permutevar8x32_epi32(_mm256_unpacklo_epi32(a, b), p));
        _mm256_store_si256((__m256i *)(t + 32),
                           _mm256_permutevar8x32_epi32(_mm256_unpackhi_epi32(a, b), p));
        return;
    }
    __m128i h0, h1;
    if (out == AMN_DTYPE_F16) {
        h0 = _mm256_cvtps_ph(y0, _MM_FROUND_TO_NEAREST_INT);
        h1 = _mm256_cvtps_ph(y1, _MM_FROUND_TO_NEAREST_INT);
    } else if (finite) {
        h0 = qs_bf16x8_finite(y0);
        h1 = qs_bf16x8_finite(y1);
    } else {
        h0 = qs_bf16x8(y0);
        h1 = qs_bf16x8(y1);
    }
    const __m256i m = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2,
                                       4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set_m128i(h1, h0), m);
    _mm256_store_si256((__m256i *)t, _mm256_permute4x64_epi64(v, _MM_SHUFFLE(3, 1, 2, 0)));
}

/* The tables of the slots of word w (columns 8w .. 8w + 7) in group g whose
 * rows are wanted (dr[p] != NULL), slot p at t + p * tsize. */
static inline __attribute__((always_inline)) void build_word(const awq_layout *l, amn_dtype out,
                                                             uint64_t g, uint64_t w,
                                                             uint8_t *const *dr, uint8_t *t) {
    const size_t tsize = out == AMN_DTYPE_F32 ? 64 : 32;
    const uint64_t at = g * l->out + 8 * w;
    __m256 s8;
    switch (l->stype) {
    case AMN_DTYPE_F16: /* exact, NaN quieted: as amn_f16_to_f32 */
        s8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(l->scales + at * 2)));
        break;
    case AMN_DTYPE_BF16:
        s8 = _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(l->scales + at * 2))), 16));
        break;
    default:
        s8 = _mm256_loadu_ps((const float *)(l->scales + at * 4));
        break;
    }
    /* Slot p is column awq_order[p]; its zero point is nibble p. */
    _Alignas(32) float s[8];
    _Alignas(32) int32_t z[8];
    const __m256 sv = _mm256_permutevar8x32_ps(s8, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
    _mm256_store_ps(s, sv);
    _mm256_store_si256(
        (__m256i *)z,
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)awq_ld32(l->qzeros + at / 2)),
                                           _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                         _mm256_set1_epi32(15)));
    const __m256 absv = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), sv);
    const bool finite =
        _mm256_movemask_ps(_mm256_cmp_ps(absv, _mm256_set1_ps(INFINITY), _CMP_LT_OQ)) == 0xff;
    for (unsigned p = 0; p < 8; p++)
        if (dr[p]) {
            if (finite)
                build_table(out, true, s[p], z[p], t + p * tsize);
            else
                build_table(out, false, s[p], z[p], t + p * tsize);
        }
}

/* 8 words at p, of which `valid` lie inside the qweight row. */
static inline __m256i load_words(const uint8_t *p, unsigned valid) {
    if (valid >= 8) return _mm256_loadu_si256((const __m256i *)p);
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)valid),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_epi32((const int *)p, m);
}

typedef struct tab_block {
    const awq_layout *l;
    uint64_t wa;           /* first word of the block */
    unsigned nw;           /* words in the block, 1..BW */
    uint8_t *drow[BW * 8]; /* output row of slot 8w + p (nibble p of word wa + w), or NULL */
    const int64_t *off;    /* [TS] byte offsets of the step's load rows */
    uint8_t *tab;          /* [BW * 8] tables */
} tab_block;

/* Turn index bytes (slot order as step_rows16 / natural) into outputs. */
static inline __attribute__((always_inline)) void emit(size_t es, const uint8_t *t, __m256i idx,
                                                       uint8_t *d, bool nt) {
    if (es == 2) {
        const __m256i lo = _mm256_shuffle_epi8(
            _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)t)), idx);
        const __m256i hi = _mm256_shuffle_epi8(
            _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)(t + 16))), idx);
        if (nt) {
            _mm256_stream_si256((__m256i *)d, _mm256_unpacklo_epi8(lo, hi));
            _mm256_stream_si256((__m256i *)(d + 32), _mm256_unpackhi_epi8(lo, hi));
            return;
        }
        _mm256_storeu_si256((__m256i *)d, _mm256_unpacklo_epi8(lo, hi));
        _mm256_storeu_si256((__m256i *)(d + 32), _mm256_unpackhi_epi8(lo, hi));
    } else {
        __m256i r[4];
        for (int k = 0; k < 4; k++)
            r[k] = _mm256_shuffle_epi8(
                _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)(t + 16 * k))), idx);
        const __m256i a = _mm256_unpacklo_epi8(r[0], r[1]), b = _mm256_unpackhi_epi8(r[0], r[1]);
        const __m256i c = _mm256_unpacklo_epi8(r[2], r[3]), e = _mm256_unpackhi_epi8(r[2], r[3]);
        const __m256i v[4] = {_mm256_unpacklo_epi16(a, c), _mm256_unpackhi_epi16(a, c),
                              _mm256_unpacklo_epi16(b, e), _mm256_unpackhi_epi16(b, e)};
        for (int k = 0; k < 4; k++) {
            if (nt)
                _mm256_stream_si256((__m256i *)(d + 32 * k), v[k]);
            else
                _mm256_storeu_si256((__m256i *)(d + 32 * k), v[k]);
        }
    }
}

/* Every whole step of TS inputs of one block. */
static inline __attribute__((always_inline)) void tab_run(const tab_block *b, amn_dtype out,
                                                          bool nt) {
    const awq_layout *l = b->l;
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    const uint64_t in = l->in, W = l->out / 8, wrow = W * 4, wa = b->wa;
    const unsigned nw = b->nw, nh = (nw + 7) / 8;
    const __m256i bytes = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0,
                                           4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m256i m4 = _mm256_set1_epi8(15);
    _Alignas(32) __m256i S[BW][4];
    for (uint64_t i0 = 0; i0 + TS <= in; i0 += TS) {
        if (i0 % l->group_size == 0) {
            /* A new group (groups == 1 has only i0 == 0). */
            const uint64_t g = i0 / l->group_size;
            for (unsigned w = 0; w < nw; w++)
                build_word(l, out, g, wa + w, b->drow + 8 * w, b->tab + 8 * w * 16 * es);
        }
        const uint8_t *p = l->qweight + i0 * wrow + wa * 4;
        /* Rows two steps ahead: the loads of a step stride across pages and
         * would otherwise wait out their misses one step at a time. */
        if (i0 + 3 * TS <= in)
            for (unsigned k = 0; k < TS; k++)
                _mm_prefetch((const char *)(p + (2 * TS + k) * wrow), _MM_HINT_T0);
        for (unsigned h = 0; h < nh; h++) {
            const uint64_t left = W - (wa + 8 * h);
            const unsigned valid = left < 8 ? (unsigned)left : 8;
            for (unsigned gi = 0; gi < 4; gi++) {
                __m256i r[8];
                for (int k = 0; k < 8; k++)
                    r[k] = load_words(p + b->off[gi * 8 + k] + 32 * h, valid);
                qs_transpose8x8(r);
                for (int w = 0; w < 8; w++) S[8 * h + w][gi] = r[w];
            }
        }
        /* The output lines of the 128 rows two steps ahead: rows lie 4 KiB
         * multiples apart, and without this whole tensors ran at 0.7x. */
        if (!nt && i0 + 3 * TS <= in)
            for (unsigned t = 0; t < 8 * nw; t++)
                if (b->drow[t])
                    _mm_prefetch((const char *)(b->drow[t] + (i0 + 2 * TS) * es), _MM_HINT_T0);
        for (unsigned w = 0; w < nw; w++) {
            uint8_t *const *dr = b->drow + 8 * w;
            if (!((uintptr_t)dr[0] | (uintptr_t)dr[1] | (uintptr_t)dr[2] | (uintptr_t)dr[3] |
                  (uintptr_t)dr[4] | (uintptr_t)dr[5] | (uintptr_t)dr[6] | (uintptr_t)dr[7]))
                continue;
            const __m256i v0 = _mm256_shuffle_epi8(S[w][0], bytes);
            const __m256i v1 = _mm256_shuffle_epi8(S[w][1], bytes);
            const __m256i v2 = _mm256_shuffle_epi8(S[w][2], bytes);
            const __m256i v3 = _mm256_shuffle_epi8(S[w][3], bytes);
            const __m256i t0 = _mm256_unpacklo_epi32(v0, v1), t1 = _mm256_unpackhi_epi32(v0, v1);
            const __m256i t2 = _mm256_unpacklo_epi32(v2, v3), t3 = _mm256_unpackhi_epi32(v2, v3);
            __m256i B[4];
            B[0] = _mm256_unpacklo_epi64(t0, t2);
            B[1] = _mm256_unpackhi_epi64(t0, t2);
            B[2] = _mm256_unpacklo_epi64(t1, t3);
            B[3] = _mm256_unpackhi_epi64(t1, t3);
            const uint8_t *tw = b->tab + 8 * w * 16 * es;
            for (int k = 0; k < 4; k++) {
                const __m256i lo = _mm256_and_si256(B[k], m4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(B[k], 4), m4);
                if (dr[2 * k]) emit(es, tw + 2 * k * 16 * es, lo, dr[2 * k] + i0 * es, nt);
                if (dr[2 * k + 1])
                    emit(es, tw + (2 * k + 1) * 16 * es, hi, dr[2 * k + 1] + i0 * es, nt);
            }
        }
    }
}

/* Inputs after the last whole step, value by value. */
static void tab_tail(const tab_block *b, amn_dtype out) {
    const awq_layout *l = b->l;
    const size_t es = amn_dtype_size(out);
    const uint64_t in = l->in, wrow = l->out / 8 * 4;
    for (unsigned t = 0; t < 8 * b->nw; t++) {
        if (!b->drow[t]) continue;
        const uint64_t o = 8 * (b->wa + t / 8) + awq_order[t % 8];
        for (uint64_t i = in - in % TS; i < in; i++) {
            const uint64_t g = i / l->group_size;
            const int32_t q = awq_nibble(l->qweight + i * wrow, o);
            const int32_t z = awq_nibble(l->qzeros + g * wrow, o);
            qs_store1((float)(q - z) * awq_scale(l, g, o), out, b->drow[t] + i * es);
        }
    }
}

int awq_dequant_rows_avx2(const awq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                          void *dst) {
    const uint64_t bytes = nrows * l->in * amn_dtype_size(out);
    return awq_rows_avx2(l, row0, nrows, out, dst, bytes >= QS_STREAM_BYTES);
}

int awq_rows_avx2(const awq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst,
                  bool stream) {
    if (l->groups > 1 && l->group_size % TS) return arith_rows(l, row0, nrows, out, dst);
    if (nrows == 0) return 0;
    const size_t es = amn_dtype_size(out);
    const uint64_t rowbytes = l->in * es, end = row0 + nrows, wrow = l->out / 8 * 4;
    int64_t off[TS];
    for (unsigned k = 0; k < TS; k++) off[k] = (int64_t)((es == 2 ? step_rows16[k] : k) * wrow);
    _Alignas(32) uint8_t tab[BW * 8 * 64];
    /* Each step writes whole 64-byte lines (128 with F32) of every row at
     * offsets that are multiples of 64 from the row's start, so streaming
     * stores need only 32-byte aligned rows. */
    const bool nt = stream && qs_stream_aligned(dst, rowbytes);
    tab_block b = {.l = l, .off = off, .tab = tab};
    for (uint64_t wa = row0 / 8; 8 * wa < end; wa += BW) {
        const uint64_t wend = (end + 7) / 8;
        b.wa = wa;
        b.nw = wend - wa < BW ? (unsigned)(wend - wa) : BW;
        for (unsigned t = 0; t < 8 * b.nw; t++) {
            const uint64_t o = 8 * (wa + t / 8) + awq_order[t % 8];
            b.drow[t] = o >= row0 && o < end ? (uint8_t *)dst + (o - row0) * rowbytes : NULL;
        }
        switch (out) {
        case AMN_DTYPE_F32:
            if (nt)
                tab_run(&b, AMN_DTYPE_F32, true);
            else
                tab_run(&b, AMN_DTYPE_F32, false);
            break;
        case AMN_DTYPE_F16:
            if (nt)
                tab_run(&b, AMN_DTYPE_F16, true);
            else
                tab_run(&b, AMN_DTYPE_F16, false);
            break;
        default:
            if (nt)
                tab_run(&b, AMN_DTYPE_BF16, true);
            else
                tab_run(&b, AMN_DTYPE_BF16, false);
            break;
        }
        if (l->in % TS) tab_tail(&b, out);
    }
    if (nt) _mm_sfence();
    return 0;
}
