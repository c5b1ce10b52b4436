/* GPTQ dequantization with AVX2.
 *
 * The output is [out][in] but qweight packs along `in` within one output
 * column, so the lanes run over 8 output rows: one load takes the words of
 * one packed row for 8 consecutive outputs, constant shifts pull out each
 * input's value, the group's scales and zeros for those 8 rows are one load
 * each from small per-block tables (with g_idx the group may change from one
 * input to the next, so this costs no gather), and an 8x8 transpose turns 8
 * inputs x 8 rows into a run of 8 values of each row. Rows are written 16
 * (BF16, F16) or 32 bytes at a time, the 8 rows of a block side by side. */
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

static inline __attribute__((always_inline)) void block_bits(const block_ctx *c, amn_dtype out) {
    switch (c->l->bits) {
    case 2:
        block(c, out, 2);
        break;
    case 3:
        block(c, out, 3);
        break;
    case 4:
        block(c, out, 4);
        break;
    default:
        block(c, out, 8);
        break;
    }
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
    if (per_run)
        for (uint64_t k = 0; k < in / 8; k++) gt[k] = (int32_t)(8 * k / l->group_size);
    else if (!l->gidx)
        for (uint64_t i = 0; i < in; i++) gt[i] = (int32_t)(i / l->group_size);
    const uint64_t rowbytes = in * amn_dtype_size(out);
    block_ctx c = {.l = l,
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
        c.finite = true;
        for (uint64_t g = 0; g < G; g++)
            for (unsigned r = 0; r < AB; r++) {
                const float s = r < c.nl ? gptq_scale(l, g, o0 + r) : 0.0f;
                st[g * AB + r] = s;
                zt[g * AB + r] = r < c.nl ? gptq_zero(l, g, o0 + r) : 0;
                if (!isfinite(s)) c.finite = false;
            }
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
    return 0;
}
