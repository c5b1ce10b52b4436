/* GPTQ dequantization with AVX2.
 *
 * The output is [out][in] but qweight packs along `in` within one output
 * column, so each packed word already holds consecutive outputs of one row:
 * a broadcast and a variable shift spread it over 8 lanes. Blocks of OB
 * output rows share the cache lines that hold their words (read again from
 * L1/L2 for each row of the block), and per block the scales and zeros of
 * every group are decoded once into small tables (act-order gathers from
 * them by g_idx). */
#include <immintrin.h>
#include <stdlib.h>

#include "amn/error.h"
#include "gptq_kernels.h"
#include "quant_store_avx2.h"

#define OB 16 /* output rows per block: one 64-byte line of 32-bit words */

typedef struct block_ctx {
    const gptq_layout *l;
    const float *st;   /* [groups][OB] scales of this block's rows */
    const int32_t *zt; /* [groups][OB] zero points */
    const int32_t *gb; /* [in]: group of each input times OB */
    amn_dtype out;
    size_t es;
} block_ctx;

/* One block of nb rows starting at output row o0, written at dblk. Inlined
 * once per bit width so the unpacking constants fold. Rows are written one
 * after the other: rows lie a multiple of 4 KiB apart, so interleaving the
 * writes of many rows would thrash one L1 set. */
static inline __attribute__((always_inline)) void block(const block_ctx *c, unsigned bits,
                                                        uint64_t o0, uint64_t nb, uint8_t *dblk) {
    const gptq_layout *l = c->l;
    const uint64_t N = l->out, in = l->in;
    const unsigned wpu = bits == 3 ? 3 : bits == 8 ? 2 : 1;   /* words per unit */
    const unsigned vpu = bits == 3 ? 32 : bits == 2 ? 16 : 8; /* values per unit */
    const unsigned nch = vpu / 8;
    const uint64_t units = in / vpu, rowbytes = in * c->es;
    __m256i shifts;
    switch (bits) {
    case 2:
        shifts = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
        break;
    case 3:
        shifts = _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21);
        break;
    case 4:
        shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
        break;
    default:
        shifts = _mm256_setr_epi32(0, 8, 16, 24, 0, 8, 16, 24);
        break;
    }
    const __m256i mask = _mm256_set1_epi32((int)((1u << bits) - 1));

    for (uint64_t ol = 0; ol < nb; ol++) {
        const uint8_t *wp = l->qweight + (o0 + ol) * 4;
        uint8_t *drow = dblk + ol * rowbytes;
        for (uint64_t u = 0; u < units; u++, wp += wpu * N * 4) {
            const uint64_t ib = u * vpu;
            const uint32_t w0 = gptq_ld32(wp);
            const uint32_t w1 = wpu > 1 ? gptq_ld32(wp + N * 4) : 0;
            const uint32_t w2 = wpu > 2 ? gptq_ld32(wp + 2 * N * 4) : 0;
            for (unsigned ch = 0; ch < nch; ch++) {
                const uint64_t i0 = ib + 8 * ch;
                __m256i v;
                if (bits == 4) {
                    v = _mm256_set1_epi32((int)w0);
                } else if (bits == 2) {
                    v = _mm256_set1_epi32((int)(ch ? w0 >> 16 : w0));
                } else if (bits == 8) {
                    v = _mm256_setr_epi32((int)w0, (int)w0, (int)w0, (int)w0, (int)w1, (int)w1,
                                          (int)w1, (int)w1);
                } else {
                    /* 3-bit: chunk ch is bits 24*ch .. 24*ch+23 of the 96-bit unit. */
                    const uint32_t t = ch == 0   ? w0
                                       : ch == 1 ? (w0 >> 24) | (w1 << 8)
                                       : ch == 2 ? (w1 >> 16) | (w2 << 16)
                                                 : w2 >> 8;
                    v = _mm256_set1_epi32((int)t);
                }
                const __m256i q = _mm256_and_si256(_mm256_srlv_epi32(v, shifts), mask);
                __m256 sv;
                __m256i zv;
                if (l->gidx) {
                    const __m256i gv = _mm256_loadu_si256((const __m256i *)(c->gb + i0));
                    sv = _mm256_i32gather_ps(c->st + ol, gv, 4);
                    zv = _mm256_i32gather_epi32(c->zt + ol, gv, 4);
                } else {
                    const int32_t g = c->gb[i0] + (int32_t)ol;
                    sv = _mm256_set1_ps(c->st[g]);
                    zv = _mm256_set1_epi32(c->zt[g]);
                }
                const __m256 y = _mm256_mul_ps(sv, _mm256_cvtepi32_ps(_mm256_sub_epi32(q, zv)));
                qs_store8(c->out, drow + i0 * c->es, y);
            }
        }
        /* 8-bit with an odd number of packed rows leaves 4 values per row. */
        for (uint64_t i = units * vpu; i < in; i++) {
            const uint64_t g = (uint64_t)c->gb[i] + ol;
            const int32_t q = (int32_t)gptq_q(l, i, o0 + ol);
            gptq_store1(c->st[g] * (float)(q - c->zt[g]), c->out, drow + i * c->es);
        }
    }
}

int gptq_dequant_rows_avx2(const gptq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                           void *dst) {
    /* Sequential groups must not change inside an 8-value chunk. */
    if (!l->gidx && l->group_size % 8) return gptq_dequant_rows_scalar(l, row0, nrows, out, dst);
    const uint64_t G = l->groups;
    float *st = malloc(G * OB * sizeof *st);
    int32_t *zt = malloc(G * OB * sizeof *zt);
    int32_t *gb = malloc(l->in * sizeof *gb);
    if (!st || !zt || !gb) {
        free(st);
        free(zt);
        free(gb);
        return AMN_E_NOMEM;
    }
    for (uint64_t i = 0; i < l->in; i++)
        gb[i] = (int32_t)((l->gidx ? (uint64_t)l->gidx[i] : i / l->group_size) * OB);
    const block_ctx c = {
        .l = l, .st = st, .zt = zt, .gb = gb, .out = out, .es = amn_dtype_size(out)};
    const uint64_t rowbytes = l->in * c.es;
    for (uint64_t o0 = row0; o0 < row0 + nrows; o0 += OB) {
        const uint64_t nb = row0 + nrows - o0 < OB ? row0 + nrows - o0 : OB;
        for (uint64_t g = 0; g < G; g++)
            for (uint64_t ol = 0; ol < nb; ol++) {
                st[g * OB + ol] = gptq_scale(l, g, o0 + ol);
                zt[g * OB + ol] = gptq_zero(l, g, o0 + ol);
            }
        uint8_t *dblk = (uint8_t *)dst + (o0 - row0) * rowbytes;
        switch (l->bits) {
        case 2:
            block(&c, 2, o0, nb, dblk);
            break;
        case 3:
            block(&c, 3, o0, nb, dblk);
            break;
        case 4:
            block(&c, 4, o0, nb, dblk);
            break;
        default:
            block(&c, 8, o0, nb, dblk);
            break;
        }
    }
    free(st);
    free(zt);
    free(gb);
    return 0;
}
