/* GPTQ dequantization with AVX2.
 *
 * The output is [out][in] but qweight packs along `in` within one output
 * column, so the lanes run over 8 output rows: one load takes the words of
 * one packed row for 8 consecutive outputs, constant shifts pull out each
 * input's value, the group's scales and zeros for those 8 rows are one load
 * each from small per-block tables (with g_idx the group may change from one
 * input to the next, so this costs no gather), and an 8x8 transpose turns 8
 * inputs x 8 rows into a run of 8 values of each row. Rows are written 16
 * (BF16, F16) or 32 bytes at a time, the 8 rows of a block side by side.
 * 4-bit weights with sequential groups to BF16 / F16 take tables instead
 * (block_lut4): 16 results per (group, row), looked up by vpshufb. */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>

#include "amn/error.h"
#include "gptq_kernels.h"
#include "amn/kit/store_avx2.h"

#define AB 8 /* output rows per block: the lanes */
#define PF 8 /* units prefetched ahead */

typedef struct block_ctx {
    const gptq_layout *l;
    const float *st;   /* [groups][AB] scales of the block's rows */
    const int32_t *zt; /* [groups][AB] zero points */
    const int32_t *gi; /* [in] group of each input; or NULL, and then */
    const int32_t *gc; /* [in / 8] the group of each run of 8 inputs */
    uint64_t o0;       /* first row (lane 0) of the block */
    unsigned rlo, rhi; /* rows o0 + [rlo, rhi) are in the range asked for */
    unsigned nl;       /* rows that exist in the tensor (lanes to load), rhi..AB */
    bool finite;       /* every scale of the block is finite: no NaN can come out */
    uint8_t *lut;      /* [groups][LUT_GROUP], 32-aligned: 4-bit tables; or NULL */
    uint8_t *dlo;      /* output row o0 + rlo */
    uint64_t rowbytes;
} block_ctx;

/* The words of packed row k for the block's rows. */
static inline __m256i load_words(const block_ctx *c, uint64_t k) {
    const uint8_t *p = c->l->qweight + (k * c->l->out + c->o0) * 4;
    if (c->nl == AB) return _mm256_loadu_si256((const __m256i *)p);
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)c->nl),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_epi32((const int *)p, m);
}

/* Value j (0..7) of run ch of a unit whose packed rows are w[]. */
static inline __attribute__((always_inline)) __m256i value(const __m256i *w, unsigned bits,
                                                           unsigned ch, unsigned j) {
    const unsigned pos = bits * (8 * ch + j), k = pos / 32, sh = pos % 32;
    __m256i q = _mm256_srli_epi32(w[k], (int)sh);
    if (sh + bits > 32) q = _mm256_or_si256(q, _mm256_slli_epi32(w[k + 1], (int)(32 - sh)));
    return _mm256_and_si256(q, _mm256_set1_epi32((int)((1u << bits) - 1)));
}

static inline __m256i dequant(__m256i q, const block_ctx *c, uint64_t g) {
    const __m256 sv = _mm256_load_ps(c->st + g * AB);
    const __m256i zv = _mm256_load_si256((const __m256i *)(c->zt + g * AB));
    return _mm256_castps_si256(_mm256_mul_ps(sv, _mm256_cvtepi32_ps(_mm256_sub_epi32(q, zv))));
}

/* Rows [rlo, rhi) of y, row rlo at d. */
static inline __attribute__((always_inline)) void store_rows(const block_ctx *c, amn_dtype out,
                                                             const __m256i y[8], uint8_t *d,
                                                             unsigned rlo, unsigned rhi) {
    if (out == AMN_DTYPE_BF16 && c->finite)
#pragma GCC unroll 8
        for (unsigned r = rlo; r < rhi; r++)
            _mm_storeu_si128((__m128i *)(d + (r - rlo) * c->rowbytes),
                             qs_bf16x8_finite(_mm256_castsi256_ps(y[r])));
    else
#pragma GCC unroll 8
        for (unsigned r = rlo; r < rhi; r++)
            qs_store8(out, d + (r - rlo) * c->rowbytes, _mm256_castsi256_ps(y[r]));
}

/* BF16 of finite y[j] (input i0 + j, lanes = the block's 8 rows), rows
 * [rlo, rhi) stored from d, by qs_bf16_pairs8x8. */
static inline __attribute__((always_inline)) void
store_bf16_pairs(const block_ctx *c, const __m256i y[8], uint8_t *d, unsigned rlo, unsigned rhi) {
    __m256 v[8];
    __m256i x[4];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) v[k] = _mm256_castsi256_ps(y[k]);
    qs_bf16_pairs8x8(v, x);
#pragma GCC unroll 8
    for (unsigned r = rlo; r < rhi; r++)
        _mm_storeu_si128((__m128i *)(d + (r - rlo) * c->rowbytes), qs_pairs_row(x, r));
}

/* One block. Inlined per output dtype and bit width so every shift folds. */
static inline __attribute__((always_inline)) void block(const block_ctx *cp, amn_dtype out,
                                                        unsigned bits) {
    /* Local copies: the stores may alias anything reached through a
     * pointer, so fields read through one are reloaded after every store. */
    const gptq_layout lc = *cp->l;
    block_ctx cc = *cp;
    cc.l = &lc;
    const block_ctx *c = &cc;
    const gptq_layout *l = &lc;
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    const unsigned wpu = bits == 3 ? 3 : bits == 8 ? 2 : 1;   /* words per unit */
    const unsigned vpu = bits == 3 ? 32 : bits == 2 ? 16 : 8; /* values per unit */
    const uint64_t units = l->in / vpu;
    /* Packed rows lie l->out * 4 bytes apart, a stride the hardware
     * prefetchers do not follow across pages: ask for the words PF units
     * ahead. The loops are unrolled so every shift is a constant and the
     * eight values stay in registers (GCC -O2 kept them rolled). */
    const uint64_t stride = l->out * 4;
    const uint8_t *words = l->qweight + c->o0 * 4;
    for (uint64_t u = 0; u < units; u++) {
        __m256i w[3];
        if (u + PF < units)
#pragma GCC unroll 3
            for (unsigned k = 0; k < wpu; k++)
                _mm_prefetch((const char *)(words + ((u + PF) * wpu + k) * stride), _MM_HINT_T0);
#pragma GCC unroll 8
        for (unsigned k = 0; k < wpu; k++) w[k] = load_words(c, u * wpu + k);
#pragma GCC unroll 8
        for (unsigned ch = 0; ch < vpu / 8; ch++) {
            const uint64_t i0 = u * vpu + 8 * ch;
            __m256i y[8];
            if (c->gi) {
#pragma GCC unroll 8
                for (unsigned j = 0; j < 8; j++)
                    y[j] = dequant(value(w, bits, ch, j), c, (uint64_t)c->gi[i0 + j]);
            } else {
                const uint64_t g = (uint64_t)c->gc[i0 / 8];
#pragma GCC unroll 8
                for (unsigned j = 0; j < 8; j++) y[j] = dequant(value(w, bits, ch, j), c, g);
            }
            /* The output lines 4 ahead in each row: without, the 8 rows'
             * stores waited out their misses (whole tensors ran at 0.7x). */
            if ((i0 * es) % 64 == 0)
                for (unsigned r = c->rlo; r < c->rhi; r++)
                    _mm_prefetch(
                        (const char *)(c->dlo + (r - c->rlo) * c->rowbytes + i0 * es + 256),
                        _MM_HINT_T0);
            if (out == AMN_DTYPE_BF16 && c->finite) {
                if (c->rlo == 0 && c->rhi == AB)
                    store_bf16_pairs(c, y, c->dlo + i0 * es, 0, AB);
                else
                    store_bf16_pairs(c, y, c->dlo + i0 * es, c->rlo, c->rhi);
                continue;
            }
            qs_transpose8x8(y);
            /* Whole blocks unrolled. */
            if (c->rlo == 0 && c->rhi == AB)
                store_rows(c, out, y, c->dlo + i0 * es, 0, AB);
            else
                store_rows(c, out, y, c->dlo + i0 * es, c->rlo, c->rhi);
        }
    }
    /* 8-bit with an odd number of packed rows leaves 4 values per row. */
    for (unsigned r = c->rlo; r < c->rhi; r++)
        for (uint64_t i = units * vpu; i < l->in; i++) {
            const uint64_t g = (c->gi ? (uint64_t)c->gi[i] : i / l->group_size) * AB + r;
            const int32_t q = (int32_t)gptq_q(l, i, c->o0 + r);
            qs_store1(c->st[g] * (float)(q - c->zt[g]), out,
                      c->dlo + (r - c->rlo) * c->rowbytes + i * es);
        }
}

/* ---- 4-bit, groups that hold whole runs of 8 inputs, 2-byte outputs ----
 *
 * A (group, row) pair has 16 possible results, so they are computed once,
 * rounded to the output dtype as any value is (NaN and all), and kept as a
 * plane of low bytes and one of high bytes; vpshufb then turns each packed
 * row's nibbles into output bytes. Arithmetic per value (block above) cost
 * about 2 instructions an element, this about half of one.
 *
 * The 8 words of a packed row (rows r = 0..7 of the block) become index
 * bytes, in element order, row r in lane r / 4 at qword (r % 2) of vector
 * A (r % 4 < 2) or B: vpshufb looks up in the lane's own 16-byte table, so
 * the tables of rows r and r + 4 share one vector, four vectors per plane. */
enum { LUT_GROUP = 256 }; /* bytes of tables per group: 4 pairs x 2 planes x 32 */

/* The tables of group g, row r (st / zt entries g * AB + r), into t. */
static inline __attribute__((always_inline)) void lut_fill(const block_ctx *c, amn_dtype out,
                                                           uint8_t *t, uint64_t g) {
    const __m256i q0 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i q1 = _mm256_add_epi32(q0, _mm256_set1_epi32(8));
    /* Per 128-bit lane, the low bytes of its 8 values, then the high ones. */
    const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0,
                                           2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (unsigned r = 0; r < AB; r++) {
        const __m256 s = _mm256_set1_ps(c->st[g * AB + r]);
        const __m256i z = _mm256_set1_epi32(c->zt[g * AB + r]);
        const __m256 y0 = _mm256_mul_ps(s, _mm256_cvtepi32_ps(_mm256_sub_epi32(q0, z)));
        const __m256 y1 = _mm256_mul_ps(s, _mm256_cvtepi32_ps(_mm256_sub_epi32(q1, z)));
        __m256i v; /* the 16 results as 16-bit values, in order */
        if (out == AMN_DTYPE_F16)
            v = _mm256_setr_m128i(_mm256_cvtps_ph(y0, _MM_FROUND_TO_NEAREST_INT),
                                  _mm256_cvtps_ph(y1, _MM_FROUND_TO_NEAREST_INT));
        else
            v = qs_bf16x16(y0, y1);
        /* lo plane (values 0-15) | hi plane */
        const __m256i planes = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, split), 0xd8);
        uint8_t *d = t + (r % 4) * 64 + (r / 4) * 16;
        _mm_store_si128((__m128i *)d, _mm256_castsi256_si128(planes));
        _mm_store_si128((__m128i *)(d + 32), _mm256_extracti128_si256(planes, 1));
    }
}

static inline __m256i lut_look(const uint8_t *t, __m256i idx, bool high_qword) {
    const __m256i lo = _mm256_shuffle_epi8(_mm256_load_si256((const __m256i *)t), idx);
    const __m256i hi = _mm256_shuffle_epi8(_mm256_load_si256((const __m256i *)(t + 32)), idx);
    return high_qword ? _mm256_unpackhi_epi8(lo, hi) : _mm256_unpacklo_epi8(lo, hi);
}

static inline __attribute__((always_inline)) void block_lut4(const block_ctx *cp, amn_dtype out,
                                                             uint8_t *tbl) {
    const gptq_layout lc = *cp->l; /* locals: the stores may alias *cp */
    block_ctx cc = *cp;
    cc.l = &lc;
    const block_ctx *c = &cc;
    const uint64_t units = lc.in / 8, G = lc.groups;
    for (uint64_t g = 0; g < G; g++) lut_fill(c, out, tbl + g * LUT_GROUP, g);
    const uint64_t stride = lc.out * 4;
    const uint8_t *words = lc.qweight + c->o0 * 4;
    const __m256i nib = _mm256_set1_epi8(15);
    const bool whole = c->rlo == 0 && c->rhi == AB;
    for (uint64_t u = 0; u < units; u++) {
        if (u + PF < units) _mm_prefetch((const char *)(words + (u + PF) * stride), _MM_HINT_T0);
        const __m256i w = load_words(c, u);
        const __m256i ev = _mm256_and_si256(w, nib),
                      od = _mm256_and_si256(_mm256_srli_epi32(w, 4), nib);
        const __m256i a = _mm256_unpacklo_epi8(ev, od); /* rows 0, 1 | 4, 5 */
        const __m256i b = _mm256_unpackhi_epi8(ev, od); /* rows 2, 3 | 6, 7 */
        const uint8_t *t = tbl + (uint64_t)c->gc[u] * LUT_GROUP;
        __m256i x[4]; /* rows k | k + 4 */
        x[0] = lut_look(t, a, false);
        x[1] = lut_look(t + 64, a, true);
        x[2] = lut_look(t + 128, b, false);
        x[3] = lut_look(t + 192, b, true);
        uint8_t *d = c->dlo + u * 16;
        if (u % 4 == 0)
            for (unsigned r = c->rlo; r < c->rhi; r++)
                _mm_prefetch((const char *)(d + (r - c->rlo) * c->rowbytes + 256), _MM_HINT_T0);
        if (whole) {
#pragma GCC unroll 4
            for (unsigned k = 0; k < 4; k++) {
                _mm_storeu_si128((__m128i *)(d + k * c->rowbytes), _mm256_castsi256_si128(x[k]));
                _mm_storeu_si128((__m128i *)(d + (k + 4) * c->rowbytes),
                                 _mm256_extracti128_si256(x[k], 1));
            }
        } else {
            for (unsigned r = c->rlo; r < c->rhi; r++) {
                const __m128i v =
                    r < 4 ? _mm256_castsi256_si128(x[r]) : _mm256_extracti128_si256(x[r - 4], 1);
                _mm_storeu_si128((__m128i *)(d + (r - c->rlo) * c->rowbytes), v);
            }
        }
    }
}

static inline __attribute__((always_inline)) void block_bits(const block_ctx *c, amn_dtype out) {
    switch (c->l->bits) {
    case 2:
        block(c, out, 2);
        break;
    case 3:
        block(c, out, 3);
        break;
    case 4:
        if (c->lut && out != AMN_DTYPE_F32)
            block_lut4(c, out, c->lut);
        else
            block(c, out, 4);
        break;
    default:
        block(c, out, 8);
        break;
    }
}

/* The 8 scales of rows o..o+7 in group g as binary32, exactly as
 * quant_scale_at reads each. */
static inline __m256 scales8(const gptq_layout *l, uint64_t g, uint64_t o) {
    const uint8_t *p = l->scales + (g * l->out + o) * amn_dtype_size(l->stype);
    switch (l->stype) {
    case AMN_DTYPE_F32:
        return _mm256_loadu_ps((const float *)(const void *)p);
    case AMN_DTYPE_BF16:
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    default:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    }
}

/* 4-bit zero points of rows o..o+7 in group g (gptq_zero for each). */
static inline __m256i zeros8_4bit(const gptq_layout *l, uint64_t g, uint64_t o) {
    const uint8_t *row = l->qzeros + g * (l->out / 8) * 4;
    const uint32_t add = l->zeros_v1 ? 0x11111111u : 0; /* see gptq_zero */
    uint64_t w = gptq_ld32(row + (o / 8) * 4) + add;
    if (o % 8) w |= (uint64_t)(gptq_ld32(row + (o / 8 + 1) * 4) + add) << 32;
    const __m256i v = _mm256_set1_epi32((int)(uint32_t)(w >> (4 * (o % 8))));
    return _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                            _mm256_set1_epi32(15));
}

/* The block's tables: scales st and zero points zt of rows o0..o0+nl-1
 * (lanes past nl zero), group by group. Returns whether every scale is
 * finite. A whole block's 8 scales are one load; called once per block,
 * this cost a fifth of the 4-bit decoding when it went value by value. */
static bool fill_tables(const gptq_layout *l, uint64_t o0, unsigned nl, float *st, int32_t *zt) {
    const uint64_t G = l->groups;
    if (nl == AB) {
        const __m256 ex = _mm256_castsi256_ps(_mm256_set1_epi32(0x7f800000));
        bool finite = true;
        for (uint64_t g = 0; g < G; g++) {
            const __m256 sv = scales8(l, g, o0);
            _mm256_store_ps(st + g * AB, sv);
            /* exponent all ones in some lane: inf or NaN */
            finite &= _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(sv, ex), ex, _CMP_EQ_OQ)) == 0;
            if (l->bits == 4)
                _mm256_store_si256((__m256i *)(zt + g * AB), zeros8_4bit(l, g, o0));
            else
                for (unsigned r = 0; r < AB; r++) zt[g * AB + r] = gptq_zero(l, g, o0 + r);
        }
        return finite;
    }
    bool finite = true;
    for (uint64_t g = 0; g < G; g++)
        for (unsigned r = 0; r < AB; r++) {
            const float s = r < nl ? gptq_scale(l, g, o0 + r) : 0.0f;
            st[g * AB + r] = s;
            zt[g * AB + r] = r < nl ? gptq_zero(l, g, o0 + r) : 0;
            if (!isfinite(s)) finite = false;
        }
    return finite;
}

int gptq_dequant_rows_avx2(const gptq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                           void *dst) {
    const uint64_t G = l->groups, in = l->in;
    float *st = aligned_alloc(32, G * AB * sizeof *st);
    int32_t *zt = aligned_alloc(32, G * AB * sizeof *zt);
    /* Sequential groups: one per run of 8 inputs when runs do not straddle
     * groups, else one per input. */
    const bool per_run = !l->gidx && l->group_size % 8 == 0;
    int32_t *gt = l->gidx ? NULL : malloc((per_run ? in / 8 : in) * sizeof *gt + 1);
    if (!st || !zt || (!l->gidx && !gt)) {
        free(st);
        free(zt);
        free(gt);
        return AMN_E_NOMEM;
    }
    /* Group by group, not a division per entry (one per input cost as much
     * as the rows of a 1 MiB call). per_run: group_size is a multiple of 8. */
    const uint64_t step = per_run ? 8 : 1;
    for (uint64_t k = 0, g = 0, end = l->group_size; !l->gidx && k < in / step; k++) {
        while (k * step >= end) g++, end += l->group_size;
        gt[k] = (int32_t)g;
    }
    const uint64_t rowbytes = in * amn_dtype_size(out);
    /* The 4-bit tables: sequential groups whose runs of 8 inputs stay in one
     * group, 2-byte outputs. */
    uint8_t *lut = NULL;
    if (l->bits == 4 && per_run && out != AMN_DTYPE_F32 &&
        !(lut = aligned_alloc(32, G * LUT_GROUP))) {
        free(st), free(zt), free(gt);
        return AMN_E_NOMEM;
    }
    block_ctx c = {.l = l,
                   .lut = lut,
                   .st = st,
                   .zt = zt,
                   .gi = per_run   ? NULL
                         : l->gidx ? l->gidx
                                   : gt,
                   .gc = per_run ? gt : NULL,
                   .rowbytes = rowbytes};
    /* Blocks start where the 8 words of a packed row are 32-byte aligned:
     * a load that straddles two cache lines costs far more here than the
     * rows computed and dropped at the ends of the range. Every call uses
     * the same boundaries, so neighbouring calls share the words' lines. */
    unsigned phase = 0;
    if (l->out % AB == 0 && ((uintptr_t)l->qweight & 3) == 0)
        phase = (unsigned)(((0 - (uintptr_t)l->qweight) & 31) / 4);
    const uint64_t end = row0 + nrows;
    for (uint64_t o = row0; o < end; o = c.o0 + c.rhi) {
        /* The next boundary after o, and the block that ends there. */
        const uint64_t next = o + AB - (o + AB - phase) % AB;
        c.o0 = next >= AB ? next - AB : 0;
        c.rlo = (unsigned)(o - c.o0);
        c.rhi = (unsigned)((next < end ? next : end) - c.o0);
        c.nl = l->out - c.o0 < AB ? (unsigned)(l->out - c.o0) : AB;
        c.dlo = (uint8_t *)dst + (o - row0) * rowbytes;
        const uint64_t o0 = c.o0;
        c.finite = fill_tables(l, o0, c.nl, st, zt);
        switch (out) {
        case AMN_DTYPE_F32:
            block_bits(&c, AMN_DTYPE_F32);
            break;
        case AMN_DTYPE_F16:
            block_bits(&c, AMN_DTYPE_F16);
            break;
        default:
            block_bits(&c, AMN_DTYPE_BF16);
            break;
        }
    }
    free(st);
    free(zt);
    free(gt);
    free(lut);
    return 0;
}
