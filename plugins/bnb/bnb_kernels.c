/* bitsandbytes: block walking, the scalar paths, and the encoders. */
#include <math.h>

#include "bnb_kernels.h"

void bnb4_codebook(const float quant_map[16], float cb[16]) {
    for (int k = 0; k < 16; k++) {
        uint32_t bits;
        memcpy(&bits, &quant_map[k], 4);
        cb[k] = k >= 8 && bits == 0 ? -0.0f : quant_map[k];
    }
}

static inline uint8_t nibble_at(const uint8_t *w, uint64_t e) {
    return e & 1 ? w[e >> 1] & 15 : w[e >> 1] >> 4;
}

/* Walks blocks in order and hands out their scales; blocks and nested
 * blocks are counted, not divided out per block: a 64-bit division costs
 * 40-90 cycles on Skylake, as much as decoding a 64-element block. */
typedef struct block_walk {
    uint64_t b, nb, nb_left;
} block_walk;

static float next_scale(const bnb4_layout *l, block_walk *k) {
    float s;
    if (l->nested) {
        if (k->nb_left == 0) k->nb++, k->nb_left = l->nested_block;
        k->nb_left--;
        s = bnb4_nested_scale(l, k->b, k->nb);
    } else {
        s = bnb4_block_scale(l, k->b);
    }
    k->b++;
    return s;
}

#define BATCH 256 /* whole blocks per vector call */

/* Whole blocks [k->b, k->b + n) by one vector call: one call per block (two
 * 16-byte steps for the usual 64 elements) cost as much as the decoding. */
static void whole_blocks(const bnb4_layout *l, block_walk *k, uint64_t n, amn_dtype out,
                         amn_simd level, uint8_t *d) {
    float s[BATCH];
    const uint8_t *w = l->weight + k->b * l->block / 2;
    for (uint64_t j = 0; j < n; j++) s[j] = next_scale(l, k);
    if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX512 && out != AMN_DTYPE_F16)
        bnb4_blocks_avx512(l->codebook, w, (size_t)n, (size_t)l->block / 2, s, out, d);
    else
        bnb4_blocks_avx2(l->codebook, w, (size_t)n, (size_t)l->block / 2, s, out, d);
}

void bnb4_dequant(const bnb4_layout *l, uint64_t e0, uint64_t count, amn_dtype out, void *dst,
                  amn_simd level) {
    const size_t es = amn_dtype_size(out);
    uint8_t *d = dst;
    const uint64_t end = e0 + count;
    const uint64_t b0 = e0 / l->block;
    block_walk k = {.b = b0,
                    .nb = l->nested ? b0 / l->nested_block : 0,
                    .nb_left = l->nested ? l->nested_block - b0 % l->nested_block : 0};
    const bool batch = AMN_SIMD_X86 && level >= AMN_SIMD_AVX2 && l->block % 2 == 0;
    for (uint64_t e = e0; e < end;) {
        const uint64_t bstart = k.b * l->block;
        if (batch && e == bstart && end - e >= 2 * l->block) {
            const uint64_t whole = (end - e) / l->block, n = whole < BATCH ? whole : BATCH;
            whole_blocks(l, &k, n, out, level, d + (e - e0) * es);
            e += n * l->block;
            continue;
        }
        const uint64_t bend = bstart + l->block < end ? bstart + l->block : end;
        const float s = next_scale(l, &k);
        uint64_t i = e;
        if (i & 1) { /* a low nibble first: the vector path takes whole bytes */
            qs_store1(l->codebook[nibble_at(l->weight, i)] * s, out, d + (i - e0) * es);
            i++;
        }
        const uint64_t pairs = (bend - i) / 2;
        if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX512 && out != AMN_DTYPE_F16 && pairs) {
            bnb4_blocks_avx512(l->codebook, l->weight + i / 2, 1, (size_t)pairs, &s, out,
                               d + (i - e0) * es);
            i += 2 * pairs;
        } else if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX2 && pairs) {
            bnb4_blocks_avx2(l->codebook, l->weight + i / 2, 1, (size_t)pairs, &s, out,
                             d + (i - e0) * es);
            i += 2 * pairs;
        }
        for (; i < bend; i++)
            qs_store1(l->codebook[nibble_at(l->weight, i)] * s, out, d + (i - e0) * es);
        e = bend;
    }
}

void bnb8_dequant_rows(const bnb8_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                       void *dst, amn_simd level) {
    const size_t es = amn_dtype_size(out);
    float c;
    const uint32_t cbits = BNB_INT8_C_BITS;
    memcpy(&c, &cbits, 4);
    uint8_t *d = dst;
    for (uint64_t r = row0; r < row0 + nrows; r++, d += l->cols * es) {
        const float s = amn_load_le_f32(l->scb + r * 4);
        const int8_t *w = l->weight + r * l->cols;
        if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX512 && out != AMN_DTYPE_F16) {
            bnb8_row_avx512(w, (size_t)l->cols, s, out, d);
            continue;
        }
        if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX2) {
            bnb8_row_avx2(w, (size_t)l->cols, s, out, d);
            continue;
        }
        for (uint64_t k = 0; k < l->cols; k++) {
            const float p = (float)w[k] * s;
            qs_store1(p * c, out, d + k * es);
        }
    }
}

/* ---- encode ---- */

float bnb_absmax(const float *x, size_t n) {
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

/* The decision tree of kernels.cu's dQuantizeNF4, as the number of its
 * thresholds x is strictly greater than (the tree is a binary search over
 * these sorted pivots). A NaN is greater than none: code 0. */
static const float nf4_pivots[15] = {
    -0.8480964004993439f,  -0.6106329262256622f,  -0.4599952697753906f,   -0.33967943489551544f,
    -0.23460740596055984f, -0.13791173323988914f, -0.045525018125772476f, 0.03979014977812767f,
    0.1202552504837513f,   0.2035212516784668f,   0.2920137718319893f,    0.3893125355243683f,
    0.5016634166240692f,   0.6427869200706482f,   0.8614784181118011f};

uint8_t bnb_nf4_code(float x) {
    uint8_t c = 0;
    for (int k = 0; k < 15; k++) c += x > nf4_pivots[k];
    return c;
}

/* dQuantizeFP4's tree on |x|: codes 0b000 .. 0b111 ordered by magnitude are
 * 0, 1, 6, 7, 4, 5, 2, 3. The sign is the sign bit (so -0.0 gives 8). */
static const float fp4_pivots[7] = {0.00260417f, 0.0859375f, 0.20833333f, 0.29166667f,
                                    0.4166667f,  0.583333f,  0.8333333f};
static const uint8_t fp4_by_rank[8] = {0, 1, 6, 7, 4, 5, 2, 3};

uint8_t bnb_fp4_code(float x) {
    if (x != x) return 0;
    uint32_t bits;
    memcpy(&bits, &x, 4);
    const float a = fabsf(x);
    int r = 0;
    for (int k = 0; k < 7; k++) r += a > fp4_pivots[k];
    return (uint8_t)(fp4_by_rank[r] | (bits >> 31) << 3);
}

void bnb4_encode(bnb_kind k, const float *x, size_t n, float absmax, unsigned odd, uint8_t *dst) {
    const float inv = 1.0f / absmax; /* a multiply by the reciprocal, as the kernel does */
    for (size_t i = 0; i < n; i++) {
        const float v = x[i] * inv;
        const uint8_t c = k == BNB_FP4 ? bnb_fp4_code(v) : bnb_nf4_code(v);
        const size_t e = i + odd;
        if (e & 1)
            dst[e >> 1] = (uint8_t)((dst[e >> 1] & 0xf0) | c);
        else
            dst[e >> 1] = (uint8_t)((dst[e >> 1] & 0x0f) | c << 4);
    }
}

uint8_t bnb_dynamic_code(const float map[256], float x) {
    int pivot = 127, upper_pivot = 255, lower_pivot = 0;
    float lower = -1.0f, upper = 1.0f, val = map[pivot];
    for (int i = 64; i > 0; i >>= 1) {
        if (x > val) {
            lower_pivot = pivot;
            lower = val;
            pivot += i;
        } else {
            upper_pivot = pivot;
            upper = val;
            pivot -= i;
        }
        val = map[pivot];
    }
    if (upper_pivot == 255) upper = map[upper_pivot];
    if (lower_pivot == 0) lower = map[lower_pivot];
    if (x > val) {
        const float mid = (upper + val) * 0.5f;
        return (uint8_t)(x > mid ? upper_pivot : pivot);
    }
    const float mid = (lower + val) * 0.5f;
    return (uint8_t)(x < mid ? lower_pivot : pivot);
}

/* 1.5 * 2^23: adding it rounds a float below 2^22 in magnitude to an
 * integer, half to even (the default rounding mode), as nearbyintf does
 * without a libm call per value (a third of the int8 encode's time). */
#define RNE_MAGIC 12582912.0f

void bnb8_encode_row(const float *x, size_t n, float scb, int8_t *dst) {
    const float scale = 127.0f / scb;
    for (size_t i = 0; i < n; i++) {
        const float v = x[i] * scale;
        /* round half to even; a NaN (an infinity times 0) gives 0 as
         * __float2int_rn does. |v| is 127 and a rounding error at most
         * (|x| <= scb); the guard keeps the trick to its range whatever
         * the caller passes, and the clamp takes the rest. */
        const float r = v != v ? 0.0f : fabsf(v) < 4194304.0f ? (v + RNE_MAGIC) - RNE_MAGIC : v;
        dst[i] = (int8_t)(r > 127.0f ? 127 : r < -128.0f ? -128 : (int)r);
    }
}
