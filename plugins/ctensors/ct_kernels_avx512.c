/* compressed-tensors integers with AVX-512 (F, BW, VL, DQ): per-column
 * groups (act-order g_idx, or group sizes that are not a multiple of 8)
 * when a row has at most 128 groups (g128 over inputs up to 16384: every
 * projection of 7-8B models). A row's scales and zero points then fit in
 * registers, 32 per pair, and one two-source permute per pair and 16
 * columns (with blends between pairs) fetches each column's own, where the
 * AVX2 path transposes 8 rows' tables 8 x 8 (24 shuffles per 64 values,
 * the shuffle port being what it waits on). Values, products and
 * roundings are the scalar path's: (q - z) exact in binary32, one
 * multiply, rounded to the scale's dtype, then to the output dtype (F16
 * through F16C, as the AVX2 path). Rows whose scales are not all finite
 * take the scalar path. Built against SIMDe's portable AVX-512 for the
 * emulated test (AMN_SCHEME_AVX512_EMULATE). */
#include <immintrin.h>
#include <stdlib.h>

#include "ct_kernels.h"

bool ct_avx512_takes(const ct_layout *l) {
    const bool per_column = l->gidx || l->group_size % 8 != 0;
    const bool bits_ok = !l->packed || l->bits == 2 || l->bits == 4 || l->bits == 8;
    return per_column && bits_ok && !l->per_tensor && l->groups <= CT_AVX512_MAX_GROUPS;
}

/* The signed values of columns i..i+15 (i a multiple of 16) of a row. */
static inline __attribute__((always_inline)) __m512i load_q16(unsigned kind, const uint8_t *row,
                                                              uint64_t i) {
    if (kind == CT_Q_I8) return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(row + i)));
    if (kind == CT_Q_P8) {
        const __m512i u = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + i)));
        return _mm512_sub_epi32(u, _mm512_set1_epi32(128));
    }
    if (kind == CT_Q_P2) { /* word i / 16: 16 fields of 2 bits */
        const __m512i sh =
            _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i f =
            _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32((int)ct_ld32(row + i / 4)), sh),
                             _mm512_set1_epi32(3));
        return _mm512_sub_epi32(f, _mm512_set1_epi32(2));
    }
    /* 4-bit: words i / 8 and i / 8 + 1, each in 8 lanes */
    const __m512i two = _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)(row + i / 2)));
    const __m512i w = _mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), two);
    const __m512i sh = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    const __m512i f = _mm512_and_si512(_mm512_srlv_epi32(w, sh), _mm512_set1_epi32(15));
    return _mm512_sub_epi32(f, _mm512_set1_epi32(8));
}

/* A row's table of up to 128 entries, 16 per register. */
typedef struct table128 {
    __m512i t[8];
} table128;

/* src: CT_AVX512_MAX_GROUPS entries, 64-byte aligned (see row_tables). */
static table128 load_table(const void *src) {
    table128 t;
    for (int k = 0; k < 8; k++) t.t[k] = _mm512_load_si512((const int32_t *)src + 16 * k);
    return t;
}

/* Entries gi of t, whose entries past 32 * pairs are never asked for
 * (pairs: 1, 2 or 4, a constant of each instance). */
static inline __attribute__((always_inline)) __m512i lookup(const table128 *t, __m512i gi,
                                                            unsigned pairs) {
    const __m512i a = _mm512_permutex2var_epi32(t->t[0], gi, t->t[1]);
    if (pairs == 1) return a;
    const __mmask16 b5 = _mm512_test_epi32_mask(gi, _mm512_set1_epi32(32));
    const __m512i ab =
        _mm512_mask_blend_epi32(b5, a, _mm512_permutex2var_epi32(t->t[2], gi, t->t[3]));
    if (pairs == 2) return ab;
    const __m512i c = _mm512_permutex2var_epi32(t->t[4], gi, t->t[5]);
    const __m512i cd =
        _mm512_mask_blend_epi32(b5, c, _mm512_permutex2var_epi32(t->t[6], gi, t->t[7]));
    return _mm512_mask_blend_epi32(_mm512_test_epi32_mask(gi, _mm512_set1_epi32(64)), ab, cd);
}

/* Finite binary32 lanes rounded to BF16 (nearest even), in the high halves. */
static inline __m512i bf16_high(__m512 y) {
    const __m512i u = _mm512_castps_si512(y);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    return _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
}

/* 16 lanes to F16 (nearest even) and 16 F16 back to binary32, through
 * F16C 8 at a time: the AVX2 path's conversions (SIMDe has no 512-bit
 * ones). */
static inline __m256i to_f16(__m512 y) {
    const __m128i a = _mm256_cvtps_ph(_mm512_castps512_ps256(y), _MM_FROUND_TO_NEAREST_INT);
    const __m128i b = _mm256_cvtps_ph(_mm512_extractf32x8_ps(y, 1), _MM_FROUND_TO_NEAREST_INT);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
}
static inline __m512 from_f16(__m256i h) {
    const __m256 a = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    const __m256 b = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
    return _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1);
}

/* (q - z) * s rounded to the scale's dtype, stored as out. */
static inline __attribute__((always_inline)) void store16(__m512 y, amn_dtype out, amn_dtype stype,
                                                          uint8_t *p) {
    if (stype == AMN_DTYPE_F16) y = from_f16(to_f16(y));
    if (out == AMN_DTYPE_BF16) {
        /* A BF16 or F16 value rounds to BF16 once more: BF16 exactly, F16
         * as `.to(torch.bfloat16)` does. */
        const __m512i h = _mm512_srli_epi32(bf16_high(y), 16);
        _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(h));
        return;
    }
    if (stype == AMN_DTYPE_BF16)
        y = _mm512_castsi512_ps(
            _mm512_and_si512(bf16_high(y), _mm512_set1_epi32((int)0xffff0000u)));
    if (out == AMN_DTYPE_F16) {
        _mm256_storeu_si256((__m256i *)p, to_f16(y));
        return;
    }
    _mm512_storeu_ps((float *)p, y);
}

static inline __attribute__((always_inline)) void
row16(const ct_layout *l, uint64_t o, const float *st, const int32_t *zt, const int32_t *gt,
      unsigned kind, unsigned pairs, amn_dtype out, amn_dtype stype, uint8_t *d) {
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    const uint8_t *row = l->weight + o * (l->packed ? l->words * 4 : l->in);
    const bool zk = l->zkind != CT_ZERO_NONE;
    const uint64_t in = l->in, in16 = in - in % 16; /* locals: the stores may alias *l */
    const table128 ts = load_table(st), tz = load_table(zt);
    for (uint64_t i = 0; i < in16; i += 16) {
        const __m512i gi = _mm512_loadu_si512(gt + i);
        __m512i q = load_q16(kind, row, i);
        if (zk) q = _mm512_sub_epi32(q, lookup(&tz, gi, pairs));
        const __m512 s = _mm512_castsi512_ps(lookup(&ts, gi, pairs));
        store16(_mm512_mul_ps(_mm512_cvtepi32_ps(q), s), out, stype, d + i * es);
    }
    for (uint64_t i = in16; i < in; i++) {
        const uint64_t g = (uint64_t)gt[i];
        qs_store1(ct_apply(ct_q(l, o, i) - zt[g], st[g], stype), out, d + i * es);
    }
}

/* One instance per (encoding, width, output, scale dtype), so that every
 * choice is a constant inside the loop. */
#define ROW(K, W, OUT, ST) row16(l, o, st, zt, gt, K, W, OUT, ST, d)
#define BY_ST(K, W, OUT)                                                                           \
    do {                                                                                           \
        if (l->stype == AMN_DTYPE_BF16)                                                            \
            ROW(K, W, OUT, AMN_DTYPE_BF16);                                                        \
        else if (l->stype == AMN_DTYPE_F16)                                                        \
            ROW(K, W, OUT, AMN_DTYPE_F16);                                                         \
        else                                                                                       \
            ROW(K, W, OUT, AMN_DTYPE_F32);                                                         \
    } while (0)
#define BY_OUT(K, W)                                                                               \
    do {                                                                                           \
        if (out == AMN_DTYPE_BF16)                                                                 \
            BY_ST(K, W, AMN_DTYPE_BF16);                                                           \
        else if (out == AMN_DTYPE_F16)                                                             \
            BY_ST(K, W, AMN_DTYPE_F16);                                                            \
        else                                                                                       \
            BY_ST(K, W, AMN_DTYPE_F32);                                                            \
    } while (0)
#define BY_WIDTH(K)                                                                                \
    do {                                                                                           \
        if (l->groups > 64)                                                                        \
            BY_OUT(K, 4);                                                                          \
        else if (l->groups > 32)                                                                   \
            BY_OUT(K, 2);                                                                          \
        else                                                                                       \
            BY_OUT(K, 1);                                                                          \
    } while (0)

static void row_dispatch(const ct_layout *l, uint64_t o, const float *st, const int32_t *zt,
                         const int32_t *gt, amn_dtype out, uint8_t *d) {
    switch (ct_q_kind(l)) {
    case CT_Q_P4:
        BY_WIDTH(CT_Q_P4);
        break;
    case CT_Q_P2:
        BY_WIDTH(CT_Q_P2);
        break;
    case CT_Q_P8:
        BY_WIDTH(CT_Q_P8);
        break;
    default:
        BY_WIDTH(CT_Q_I8);
        break;
    }
}

/* ct_row_tables for row o (step 1) 16 groups at a time, into tables of
 * CT_AVX512_MAX_GROUPS entries whose entries past the row's groups stay
 * as the caller zeroed them; returns whether every scale is finite. Value by
 * value (a libamn call per F16 scale, a switch per zero point) the tables
 * took a tenth of a 4096-column row. */
static bool row_tables(const ct_layout *l, uint64_t o, float *st, int32_t *zt) {
    const uint64_t G = l->groups, srow = ct_scale_row(l, o);
    const size_t es = amn_dtype_size(l->stype);
    _Alignas(64) uint8_t raw[CT_AVX512_MAX_GROUPS * 4] = {0};
    memcpy(raw, l->scales + srow * G * es, G * es);
    _Alignas(64) int32_t zw[CT_AVX512_MAX_GROUPS] = {0};
    _Alignas(64) int8_t z8[CT_AVX512_MAX_GROUPS] = {0};
    unsigned zshift = 0, zbits = 0;
    if (l->zkind == CT_ZERO_PACKED) {
        const unsigned pf = 32 / l->bits;
        memcpy(zw, l->zeros + (o / pf) * G * 4, G * 4);
        zshift = l->bits * (unsigned)(o % pf), zbits = l->bits;
    } else if (l->zkind == CT_ZERO_I8) {
        memcpy(z8, l->zeros + srow * G, G);
    }
    __mmask16 bad = 0;
    for (uint64_t g = 0; g < G; g += 16) {
        __m512 s;
        if (l->stype == AMN_DTYPE_BF16) {
            const __m256i h = _mm256_load_si256((const __m256i *)(raw + 2 * g));
            s = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        } else if (l->stype == AMN_DTYPE_F16) {
            s = from_f16(_mm256_load_si256((const __m256i *)(raw + 2 * g)));
        } else {
            s = _mm512_load_ps((const float *)(const void *)(raw + 4 * g));
        }
        _mm512_store_ps(st + g, s);
        /* exponent all ones: inf or NaN (the zero padding never is) */
        const __m512i ex = _mm512_set1_epi32(0x7f800000);
        bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(s), ex), ex);
        __m512i z = _mm512_setzero_si512();
        if (l->zkind == CT_ZERO_PACKED) {
            const __m512i w = _mm512_srli_epi32(_mm512_load_si512(zw + g), zshift);
            z = _mm512_sub_epi32(_mm512_and_si512(w, _mm512_set1_epi32((int)((1u << zbits) - 1))),
                                 _mm512_set1_epi32((int)(1u << (zbits - 1))));
        } else if (l->zkind == CT_ZERO_I8) {
            z = _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(z8 + g)));
        }
        _mm512_store_si512(zt + g, z);
    }
    return bad == 0;
}

int ct_rows_avx512(const ct_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst) {
    int32_t *own_gt = l->gidx ? NULL : malloc(l->in * sizeof *own_gt);
    if (!l->gidx && !own_gt) return -1;
    for (uint64_t i = 0; own_gt && i < l->in; i++) own_gt[i] = (int32_t)(i / l->group_size);
    const int32_t *gt = l->gidx ? l->gidx : own_gt;
    /* Zeroed once: row_tables writes the row's groups rounded up to 16, and
     * the rest, loaded into the lookup registers, is never selected. */
    _Alignas(64) float st[CT_AVX512_MAX_GROUPS] = {0};
    _Alignas(64) int32_t zt[CT_AVX512_MAX_GROUPS] = {0};
    const size_t rowbytes = (size_t)l->in * amn_dtype_size(out);
    uint8_t *d = dst;
    for (uint64_t o = row0; o < row0 + nrows; o++, d += rowbytes) {
        if (row_tables(l, o, st, zt))
            row_dispatch(l, o, st, zt, gt, out, d);
        else
            ct_rows_scalar(l, o, 1, out, d);
    }
    free(own_gt);
    return 0;
}
