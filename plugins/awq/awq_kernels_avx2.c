/* AWQ dequantization with AVX2.
 *
 * qweight packs along the output dimension, so one word holds 8 output rows
 * of one input column. Eight input rows of eight consecutive words (64 output
 * rows) are loaded and transposed 8x8, after which each nibble position gives
 * 8 consecutive inputs of one output row. Scales and zeros of the block are
 * decoded once per group into small tables. */
#include <immintrin.h>
#include <stdlib.h>

#include "amn/error.h"
#include "awq_kernels.h"
#include "quant_store_avx2.h"

#define WB 8 /* words per block: 64 output rows */

static inline void transpose8(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_epi32(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_epi32(r[k], r[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {
        u[k] = _mm256_unpacklo_epi64(t[k], t[k + 2]);
        u[k + 1] = _mm256_unpackhi_epi64(t[k], t[k + 2]);
        u[k + 2] = _mm256_unpacklo_epi64(t[k + 1], t[k + 3]);
        u[k + 3] = _mm256_unpackhi_epi64(t[k + 1], t[k + 3]);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x20);
        r[k + 4] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x31);
    }
}

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
static inline __attribute__((always_inline)) void block(const awq_ctx *c0, const amn_dtype out,
                                                        uint64_t o0, unsigned nw, uint8_t *dblk,
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
            transpose8(r);
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
            awq_store1((float)(q - c->zt[tbase + j]) * c->st[tbase + j], c->out,
                       dblk + j * rowbytes + i0 * c->es);
        }
    }
}

int awq_dequant_rows_avx2(const awq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
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
            block(&c, AMN_DTYPE_F32, o, nw, dblk, rowbytes);
            break;
        case AMN_DTYPE_F16:
            block(&c, AMN_DTYPE_F16, o, nw, dblk, rowbytes);
            break;
        default:
            block(&c, AMN_DTYPE_BF16, o, nw, dblk, rowbytes);
            break;
        }
        o += 8 * (uint64_t)nw;
    }
    free(st);
    free(zt);
    if (o < end) return awq_dequant_rows_scalar(l, o, end - o, out, d + (o - row0) * rowbytes);
    return 0;
}
