/* compressed-tensors integers with AVX2, one output row at a time: 8
 * consecutive columns per step. A packed 4-bit word is 8 columns, half a
 * 2-bit word 8 (variable shifts), 8-bit fields and I8 weights are 8 bytes widened; the row's
 * scales and zero points are first put in small binary32 / int32 tables,
 * read by broadcast when a run of 8 columns lies in one group and by gather
 * otherwise (act-order, odd group sizes). The product is rounded to the
 * scale's dtype exactly as the scalar path does (BF16: round to nearest
 * even on the bits; F16: through F16C, which rounds the same way), so the
 * bytes match. Rows whose scales are not all finite, and bit widths other
 * than 2, 4 and 8, take the scalar path. */
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

static inline __attribute__((always_inline)) __m256i load_q(const ct_layout *l, const uint8_t *row,
                                                            uint64_t i) {
    if (!l->packed) {
        return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(row + i)));
    }
    if (l->bits == 8) {
        const __m256i u = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + i)));
        return _mm256_sub_epi32(u, _mm256_set1_epi32(128));
    }
    uint32_t w;
    if (l->bits == 2) {
        /* Word i / 16 holds columns i..i+15: these 8 are its low or high half. */
        memcpy(&w, row + (i / 16) * 4, 4);
        const __m256i f = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_set1_epi32((int)w),
                              _mm256_add_epi32(_mm256_set1_epi32((int)(i % 16) * 2),
                                               _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14))),
            _mm256_set1_epi32(3));
        return _mm256_sub_epi32(f, _mm256_set1_epi32(2));
    }
    memcpy(&w, row + i / 2, 4); /* 4-bit: word i / 8 holds columns i..i+7 */
    const __m256i f =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w),
                                           _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                         _mm256_set1_epi32(15));
    return _mm256_sub_epi32(f, _mm256_set1_epi32(8));
}

static inline __attribute__((always_inline)) void row_vec(const ct_layout *l, uint64_t o,
                                                          const float *st, const int32_t *zt,
                                                          const int32_t *gt, amn_dtype out,
                                                          amn_dtype stype, uint8_t *d) {
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    const uint8_t *row = l->weight + o * (l->packed ? l->words * 4 : l->in);
    const bool uniform = !gt && l->group_size % 8 == 0;
    const uint64_t in8 = l->in - l->in % 8;
    for (uint64_t i = 0; i < in8; i += 8) {
        __m256 s;
        __m256i z;
        if (uniform) {
            const uint64_t g = i / l->group_size;
            s = _mm256_set1_ps(st[g]);
            z = _mm256_set1_epi32(zt[g]);
        } else {
            const __m256i gi = _mm256_loadu_si256((const __m256i *)(gt + i));
            s = _mm256_i32gather_ps(st, gi, 4);
            z = l->zkind ? _mm256_i32gather_epi32(zt, gi, 4) : _mm256_setzero_si256();
        }
        __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(load_q(l, row, i), z)), s);
        /* No NaN can arise here (finite scales, integer differences), and a
         * rounding to the scale's dtype followed by the same rounding to
         * the output dtype is that rounding once. */
        uint8_t *p = d + i * es;
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
    for (uint64_t i = in8; i < l->in; i++) {
        const uint64_t g = gt ? (uint64_t)gt[i] : i / l->group_size;
        qs_store1(ct_apply(ct_q(l, o, i) - zt[g], st[g], stype), out, d + i * es);
    }
}

#define ROW_CASE(OUT, ST) row_vec(l, o, st, zt, gt, OUT, ST, d)

static void row_dispatch(const ct_layout *l, uint64_t o, const float *st, const int32_t *zt,
                         const int32_t *gt, amn_dtype out, uint8_t *d) {
    /* Instantiated per output and scale dtype so the rounding folds. */
    if (out == AMN_DTYPE_BF16) {
        if (l->stype == AMN_DTYPE_BF16)
            ROW_CASE(AMN_DTYPE_BF16, AMN_DTYPE_BF16);
        else if (l->stype == AMN_DTYPE_F16)
            ROW_CASE(AMN_DTYPE_BF16, AMN_DTYPE_F16);
        else
            ROW_CASE(AMN_DTYPE_BF16, AMN_DTYPE_F32);
    } else if (out == AMN_DTYPE_F16) {
        if (l->stype == AMN_DTYPE_BF16)
            ROW_CASE(AMN_DTYPE_F16, AMN_DTYPE_BF16);
        else if (l->stype == AMN_DTYPE_F16)
            ROW_CASE(AMN_DTYPE_F16, AMN_DTYPE_F16);
        else
            ROW_CASE(AMN_DTYPE_F16, AMN_DTYPE_F32);
    } else {
        if (l->stype == AMN_DTYPE_BF16)
            ROW_CASE(AMN_DTYPE_F32, AMN_DTYPE_BF16);
        else if (l->stype == AMN_DTYPE_F16)
            ROW_CASE(AMN_DTYPE_F32, AMN_DTYPE_F16);
        else
            ROW_CASE(AMN_DTYPE_F32, AMN_DTYPE_F32);
    }
}

int ct_rows_avx2(const ct_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst) {
    if (l->packed && l->bits != 2 && l->bits != 4 && l->bits != 8)
        return ct_rows_scalar(l, row0, nrows, out, dst);
    const uint64_t G = l->groups;
    float *st = malloc(G * sizeof *st);
    int32_t *zt = malloc(G * sizeof *zt);
    /* Column -> group for the gathers, when runs of 8 may straddle groups. */
    const bool need_gt = !l->gidx && l->group_size % 8 != 0;
    int32_t *own_gt = need_gt ? malloc(l->in * sizeof *own_gt) : NULL;
    if (!st || !zt || (need_gt && !own_gt)) {
        free(st), free(zt), free(own_gt);
        return -1;
    }
    for (uint64_t i = 0; need_gt && i < l->in; i++) own_gt[i] = (int32_t)(i / l->group_size);
    const int32_t *gt = l->gidx ? l->gidx : own_gt;
    const size_t rowbytes = (size_t)l->in * amn_dtype_size(out);
    uint8_t *d = dst;
    for (uint64_t o = row0; o < row0 + nrows; o++, d += rowbytes) {
        bool finite = true;
        for (uint64_t g = 0; g < G; g++) {
            st[g] = ct_scale(l, o, g);
            zt[g] = ct_zero(l, o, g);
            if (!isfinite(st[g])) finite = false;
        }
        if (!finite) {
            ct_rows_scalar(l, o, 1, out, d);
            continue;
        }
        row_dispatch(l, o, st, zt, gt, out, d);
    }
    free(st), free(zt), free(own_gt);
    return 0;
}
