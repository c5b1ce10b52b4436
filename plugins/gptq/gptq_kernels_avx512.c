/* GPTQ dequantization to BF16 with AVX-512 (F, BW, VL, DQ): the arithmetic
 * path (act-order g_idx, groups that runs of 8 inputs straddle, 2-, 3- and
 * 8-bit weights) for blocks of 16 output rows; 4-bit sequential groups keep
 * the AVX2 tables (block_lut4), which do less work per value, and F32
 * output the AVX2 path, which its output stores bound (this path ran at
 * 0.7x it over whole tensors and tied it in 1 MiB chunks).
 *
 * One 64-byte load takes a packed row's words for the 16 rows (a whole
 * cache line when the block is aligned), constant shifts pull out each
 * input's value for the 16 rows, and the input's group entry of the 16
 * rows' scales and zero points is one load each from per-block tables, as
 * on AVX2. The values are rounded to BF16 in their 32-bit lanes and two
 * inputs' halves merged into one lane by a masked blend, which is not a
 * shuffle: 8 inputs of 16 rows are then 4 vectors of 16 dwords, and two
 * rounds of unpacks (8 shuffles per 128 values) leave each 128-bit lane
 * holding 16 bytes of one row, stored from the lane. Same bytes as the
 * scalar path: (q - z) exact in binary32, one multiply, rounded to nearest
 * even. Blocks with a non-finite scale and the rows of a call that do not
 * fill a block take the AVX2 path. Built against SIMDe's portable AVX-512
 * for the emulated test (AMN_GPTQ_AVX512_EMULATE). */
#include <immintrin.h>
#include <stdlib.h>

#include "amn/error.h"
#include "gptq_kernels.h"

#define RB 16 /* output rows per block: the lanes */
#define PF 8  /* units prefetched ahead */

bool gptq_avx512_takes(const gptq_layout *l, amn_dtype out) {
    const bool lut4 = l->bits == 4 && !l->gidx && l->group_size % 8 == 0;
    return out == AMN_DTYPE_BF16 && !lut4 && l->out >= RB;
}

/* Value j (0..7) of run ch of a unit whose packed rows are w[]. */
static inline __attribute__((always_inline)) __m512i value(const __m512i *w, unsigned bits,
                                                           unsigned ch, unsigned j) {
    const unsigned pos = bits * (8 * ch + j), k = pos / 32, sh = pos % 32;
    __m512i q = _mm512_srli_epi32(w[k], sh);
    if (sh + bits > 32) q = _mm512_or_si512(q, _mm512_slli_epi32(w[k + 1], 32 - sh));
    return _mm512_and_si512(q, _mm512_set1_epi32((int)((1u << bits) - 1)));
}

/* RNE to BF16 of finite lanes, the result in the high half of each lane. */
static inline __m512i bf16_high(__m512 y) {
    const __m512i u = _mm512_castps_si512(y);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    return _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
}

/* 128-bit lane `lane` of v at d. */
static inline __attribute__((always_inline)) void store_lane(__m512i v, int lane, uint8_t *d) {
    switch (lane) {
    case 0:
        _mm_storeu_si128((__m128i *)d, _mm512_castsi512_si128(v));
        break;
    case 1:
        _mm_storeu_si128((__m128i *)d, _mm512_extracti32x4_epi32(v, 1));
        break;
    case 2:
        _mm_storeu_si128((__m128i *)d, _mm512_extracti32x4_epi32(v, 2));
        break;
    default:
        _mm_storeu_si128((__m128i *)d, _mm512_extracti32x4_epi32(v, 3));
        break;
    }
}

/* Rows o0..o0+15, 8 inputs from i0: y[j] holds input i0 + j of the 16 rows.
 * The vector holding row r after the unpacks is x[(r % 4)], in 128-bit lane
 * r / 4 (the unpacks work within lanes: lane L holds rows 4L..4L+3). */
static inline __attribute__((always_inline)) void store_bf16(const __m512 y[8], uint8_t *d,
                                                             size_t rowbytes) {
    __m512i p[4], a[4], x[4];
    for (int k = 0; k < 4; k++) /* lane r: input 2k in the low half, 2k + 1 in the high */
        p[k] = _mm512_mask_blend_epi16(0xaaaaaaaau, _mm512_srli_epi32(bf16_high(y[2 * k]), 16),
                                       bf16_high(y[2 * k + 1]));
    a[0] = _mm512_unpacklo_epi32(p[0], p[1]); /* rows 4L, 4L+1: inputs 0-3 */
    a[1] = _mm512_unpackhi_epi32(p[0], p[1]); /* rows 4L+2, 4L+3 */
    a[2] = _mm512_unpacklo_epi32(p[2], p[3]); /* inputs 4-7 */
    a[3] = _mm512_unpackhi_epi32(p[2], p[3]);
    x[0] = _mm512_unpacklo_epi64(a[0], a[2]); /* row 4L: inputs 0-7 */
    x[1] = _mm512_unpackhi_epi64(a[0], a[2]); /* row 4L+1 */
    x[2] = _mm512_unpacklo_epi64(a[1], a[3]); /* row 4L+2 */
    x[3] = _mm512_unpackhi_epi64(a[1], a[3]); /* row 4L+3 */
#pragma GCC unroll 16
    for (int r = 0; r < RB; r++) store_lane(x[r % 4], r / 4, d + (size_t)r * rowbytes);
}

typedef struct block16 {
    const gptq_layout *l;
    const float *st;   /* [groups][RB] */
    const int32_t *zt; /* [groups][RB] */
    const int32_t *gi; /* [in]: the group of each input */
    uint64_t o0;
    uint8_t *d; /* output row o0 */
    size_t rowbytes;
} block16;

/* Bytes per row of the stage. The 16 rows' values go to a small buffer
 * first and then out as 16 runs of SPAN bytes (512 values), whose output
 * lines are prefetched as the span starts, so that its copy finds them in
 * L1. Output rows lie a multiple of 4 KiB apart in real models, so the 16
 * lines a step would store to share one L1 set of 8 ways: stored
 * directly, the rows ran at 0.9x the AVX2 path. */
#define SPAN 1024

static inline __attribute__((always_inline)) void block(const block16 *cp, unsigned bits) {
    const block16 c = *cp; /* locals: the stores may alias anything */
    const uint64_t in = c.l->in, outs = c.l->out;
    const size_t es = 2;
    const size_t pitch = SPAN + 64; /* not a multiple of 4 KiB: rows in distinct sets */
    _Alignas(64) uint8_t stage[RB * (SPAN + 64)];
    const unsigned wpu = bits == 3 ? 3 : bits == 8 ? 2 : 1;   /* words per unit */
    const unsigned vpu = bits == 3 ? 32 : bits == 2 ? 16 : 8; /* values per unit */
    const uint64_t units = in / vpu, upspan = SPAN / es / vpu;
    const size_t stride = (size_t)outs * 4;
    const uint8_t *words = c.l->qweight + c.o0 * 4;
    for (uint64_t u0 = 0; u0 < units; u0 += upspan) {
        const uint64_t u1 = units - u0 < upspan ? units : u0 + upspan;
        /* The lines this span's copy will write. */
        for (unsigned r = 0; r < RB; r++)
            for (size_t b = 0; b < (size_t)(u1 - u0) * vpu * es; b += 64)
                _mm_prefetch((const char *)(c.d + r * c.rowbytes + u0 * vpu * es + b), _MM_HINT_T0);
        for (uint64_t u = u0; u < u1; u++) {
            __m512i w[3];
            if (u + PF < units)
#pragma GCC unroll 3
                for (unsigned k = 0; k < wpu; k++)
                    _mm_prefetch((const char *)(words + ((u + PF) * wpu + k) * stride),
                                 _MM_HINT_T0);
#pragma GCC unroll 3
            for (unsigned k = 0; k < wpu; k++)
                w[k] = _mm512_loadu_si512((const void *)(words + (u * wpu + k) * stride));
#pragma GCC unroll 4
            for (unsigned ch = 0; ch < vpu / 8; ch++) {
                const uint64_t i0 = u * vpu + 8 * ch;
                __m512 y[8];
#pragma GCC unroll 8
                for (unsigned j = 0; j < 8; j++) {
                    const uint64_t g = (uint64_t)c.gi[i0 + j];
                    const __m512i z = _mm512_load_si512((const void *)(c.zt + g * RB));
                    const __m512 s = _mm512_load_ps(c.st + g * RB);
                    y[j] = _mm512_mul_ps(
                        s, _mm512_cvtepi32_ps(_mm512_sub_epi32(value(w, bits, ch, j), z)));
                }
                store_bf16(y, stage + (i0 - u0 * vpu) * es, pitch);
            }
        }
        const size_t run = (size_t)(u1 - u0) * vpu * es; /* a multiple of 16 bytes */
        for (unsigned r = 0; r < RB; r++) {
            uint8_t *d = c.d + r * c.rowbytes + u0 * vpu * es;
            const uint8_t *sp = stage + r * pitch;
            size_t b = 0;
            for (; b + 64 <= run; b += 64)
                _mm512_storeu_si512((void *)(d + b), _mm512_load_si512((const void *)(sp + b)));
            for (; b < run; b += 16)
                _mm_storeu_si128((__m128i *)(d + b), _mm_load_si128((const __m128i *)(sp + b)));
        }
    }
    /* 8-bit with an odd number of packed rows leaves 4 values per row. */
    for (unsigned r = 0; r < RB; r++)
        for (uint64_t i = units * vpu; i < in; i++) {
            const uint64_t g = (uint64_t)c.gi[i] * RB + r;
            const int32_t q = (int32_t)gptq_q(c.l, i, c.o0 + r);
            qs_store1(c.st[g] * (float)(q - c.zt[g]), AMN_DTYPE_BF16,
                      c.d + r * c.rowbytes + i * es);
        }
}

static void block_any(const block16 *c) {
    switch (c->l->bits) {
    case 2:
        block(c, 2);
        break;
    case 3:
        block(c, 3);
        break;
    case 4:
        block(c, 4);
        break;
    default:
        block(c, 8);
        break;
    }
}

/* The 16 scales of rows o..o+15 in group g as binary32, exactly as
 * quant_scale_at reads each. */
static inline __m512 scales16(const gptq_layout *l, uint64_t g, uint64_t o) {
    const uint8_t *p = l->scales + (g * l->out + o) * amn_dtype_size(l->stype);
    switch (l->stype) {
    case AMN_DTYPE_F32:
        return _mm512_loadu_ps(p);
    case AMN_DTYPE_BF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p)), 16));
    default:
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
    }
}

/* 4-bit zero points of rows o..o+15 in group g (gptq_zero for each): the
 * 2 or 3 words that hold them, each plus the v1 offset as gptq_zero adds
 * it, then lane r's field o % 8 + r. */
static inline __m512i zeros16_4bit(const gptq_layout *l, uint64_t g, uint64_t o) {
    const uint8_t *row = l->qzeros + g * (l->out / 8) * 4 + (o / 8) * 4;
    const uint64_t left = l->out / 8 - o / 8; /* words from row on: 2 or more */
    const __mmask16 m = left >= 3 ? 0x7 : 0x3;
    __m512i v = _mm512_maskz_loadu_epi32(m, row);
    if (l->zeros_v1) v = _mm512_add_epi32(v, _mm512_set1_epi32(0x11111111));
    const __m512i f =
        _mm512_add_epi32(_mm512_set1_epi32((int)(o % 8)),
                         _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __m512i word = _mm512_permutexvar_epi32(_mm512_srli_epi32(f, 3), v);
    return _mm512_and_si512(
        _mm512_srlv_epi32(word, _mm512_slli_epi32(_mm512_and_si512(f, _mm512_set1_epi32(7)), 2)),
        _mm512_set1_epi32(15));
}

/* The tables of rows o0..o0+15; whether every scale is finite. */
static bool fill_tables(const gptq_layout *l, uint64_t o0, float *st, int32_t *zt) {
    const __m512i ex = _mm512_set1_epi32(0x7f800000);
    __mmask16 bad = 0;
    for (uint64_t g = 0; g < l->groups; g++) {
        const __m512 s = scales16(l, g, o0);
        _mm512_store_ps(st + g * RB, s);
        bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(s), ex), ex);
        if (l->bits == 4)
            _mm512_store_si512((void *)(zt + g * RB), zeros16_4bit(l, g, o0));
        else
            for (unsigned r = 0; r < RB; r++) zt[g * RB + r] = gptq_zero(l, g, o0 + r);
    }
    return bad == 0;
}

int gptq_dequant_rows_avx512(const gptq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                             void *dst) {
    const uint64_t G = l->groups, in = l->in, end = row0 + nrows;
    const size_t rowbytes = (size_t)in * amn_dtype_size(out);
    float *st = aligned_alloc(64, G * RB * sizeof *st);
    int32_t *zt = aligned_alloc(64, G * RB * sizeof *zt);
    int32_t *gt = l->gidx ? NULL : malloc(in * sizeof *gt);
    if (!st || !zt || (!l->gidx && !gt)) {
        free(st), free(zt), free(gt);
        return AMN_E_NOMEM;
    }
    /* Group by group: a division per input cost as much as the rows of a
     * 1 MiB call. */
    for (uint64_t g = 0, i = 0; gt && i < in; g++)
        for (uint64_t k = 0; k < l->group_size && i < in; k++) gt[i++] = (int32_t)g;
    block16 c = {.l = l, .st = st, .zt = zt, .gi = l->gidx ? l->gidx : gt, .rowbytes = rowbytes};
    /* Blocks start where a packed row's 16 words are one cache line, the
     * same boundaries in every call (see the AVX2 path). */
    uint64_t o = row0;
    if (((uintptr_t)l->qweight & 3) == 0) {
        const uint64_t phase = ((0 - (uintptr_t)l->qweight) & 63) / 4;
        o = row0 <= phase ? phase : row0 + (RB - (row0 - phase) % RB) % RB;
    }
    if (o > end) o = end;
    int rc = o > row0 ? gptq_dequant_rows_avx2(l, row0, o - row0, out, dst) : 0;
    uint8_t *d = (uint8_t *)dst + (o - row0) * rowbytes;
    for (; !rc && o + RB <= end && o + RB <= l->out; o += RB, d += RB * rowbytes) {
        if (!fill_tables(l, o, st, zt)) {
            rc = gptq_dequant_rows_avx2(l, o, RB, out, d);
            continue;
        }
        c.o0 = o;
        c.d = d;
        block_any(&c);
    }
    if (!rc && o < end) rc = gptq_dequant_rows_avx2(l, o, end - o, out, d);
    free(st), free(zt), free(gt);
    return rc;
}
