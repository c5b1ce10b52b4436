/* NVFP4: block scales, the scalar path and the choice of path. */
#include <stdlib.h>

#include "nvfp4_kernels.h"

static const float e2m1_pos0[16] = {0.0f, 0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                    0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
static const float e2m1_neg0[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

void nvfp4_row_scalar(const uint8_t *w, const float *bs, uint64_t in, const float *table,
                      amn_dtype out, uint8_t *d) {
    const size_t es = amn_dtype_size(out);
    for (uint64_t i = 0; i < in; i++) {
        const unsigned code = (w[i / 2] >> (4 * (unsigned)(i & 1))) & 15u;
        qs_store1(table[code] * bs[i / 16], out, d + i * es);
    }
}

/* The 256 E4M3 values: a call per block scale (one per 16 elements) cost
 * more than decoding the block. */
static void e4m3_table(float t[256]) {
    for (unsigned c = 0; c < 256; c++) t[c] = amn_f8e4m3_to_f32((uint8_t)c);
}

/* Whether every one of bs[0..n) is finite (no inf, no NaN). */
static bool all_finite(const float *bs, uint64_t n) {
    uint32_t worst = 0; /* the largest exponent field seen */
    for (uint64_t i = 0; i < n; i++) {
        const uint32_t e = amn_f32_bits(bs[i]) & 0x7f800000u;
        worst = e > worst ? e : worst;
    }
    return worst != 0x7f800000u;
}

void nvfp4_dequant_rows(const nvfp4_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                        void *dst, amn_simd level) {
    const uint64_t nb = l->in / 16;
    const size_t rowbytes = (size_t)l->in * amn_dtype_size(out);
    const float *table = l->neg_zero ? e2m1_neg0 : e2m1_pos0;
    float bs[512], e4m3[256];
    e4m3_table(e4m3);
    const bool divide = l->divide;
    uint8_t *d = dst;
    for (uint64_t r = row0; r < row0 + nrows; r++, d += rowbytes) {
        const float second = l->second[r / l->rows_per_second];
        const uint8_t *sc = l->scales + r * nb;
        const uint8_t *w = l->weight + r * (l->in / 2);
        /* Block scales a chunk at a time (rows may be long). */
        for (uint64_t b0 = 0; b0 < nb; b0 += 512) {
            const uint64_t n = nb - b0 < 512 ? nb - b0 : 512;
            if (divide)
                for (uint64_t b = 0; b < n; b++) bs[b] = e4m3[sc[b0 + b]] / second;
            else
                for (uint64_t b = 0; b < n; b++) bs[b] = e4m3[sc[b0 + b]] * second;
            const uint64_t i0 = b0 * 16;
            if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX512 && out == AMN_DTYPE_BF16)
                nvfp4_row_avx512(w + i0 / 2, bs, n * 16, table, out, d + i0 * amn_dtype_size(out));
            else if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX2)
                nvfp4_row_avx2(w + i0 / 2, bs, n * 16, table, out, all_finite(bs, n),
                               d + i0 * amn_dtype_size(out));
            else
                nvfp4_row_scalar(w + i0 / 2, bs, n * 16, table, out, d + i0 * amn_dtype_size(out));
        }
    }
}

void nvfp4_bmm_row_scalar(const uint8_t *w, unsigned shift, const float *bs, uint64_t n,
                          const float *table, amn_dtype out, uint8_t *d) {
    const size_t es = amn_dtype_size(out);
    for (uint64_t o = 0; o < n; o++)
        qs_store1(table[(w[o] >> shift) & 15u] * bs[o], out, d + o * es);
}

int nvfp4_bmm_rows(const nvfp4_bmm_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                   void *dst, amn_simd level) {
    const uint64_t O = l->outs;
    const size_t rowbytes = (size_t)O * amn_dtype_size(out);
    float *bs = malloc((size_t)O * sizeof *bs);
    if (!bs) return -1;
    uint64_t have = UINT64_MAX; /* the (expert, block row) whose scales bs holds */
    bool finite = false;
    float e4m3[256];
    e4m3_table(e4m3);
    uint8_t *d = dst;
    for (uint64_t r = row0; r < row0 + nrows; r++, d += rowbytes) {
        const uint64_t e = r / l->in, i = r % l->in;
        const uint64_t brow = e * (l->in / 16) + i / 16;
        if (brow != have) {
            /* ModelOpt's per_block = f32(e4m3) * weight_scale_2, once per 16 rows. */
            const float second = l->second[l->n_second == 1 ? 0 : e];
            const uint8_t *sc = l->scales + brow * O;
            for (uint64_t o = 0; o < O; o++) bs[o] = e4m3[sc[o]] * second;
            finite = all_finite(bs, O);
            have = brow;
        }
        const uint8_t *w = l->weight + (e * (l->in / 2) + i / 2) * O;
        const unsigned shift = 4 * (unsigned)(i & 1);
        const bool avx512 = AMN_SIMD_X86 && level >= AMN_SIMD_AVX512 && out == AMN_DTYPE_BF16;
        if (!avx512 && AMN_SIMD_X86 && level >= AMN_SIMD_AVX2 && shift == 0 &&
            r + 1 < row0 + nrows) {
            nvfp4_bmm_pair_avx2(w, bs, O, e2m1_pos0, out, finite, d, d + rowbytes);
            r++, d += rowbytes; /* i + 1 shares the block row: i is even */
            continue;
        }
        if (avx512)
            nvfp4_bmm_row_avx512(w, shift, bs, O, e2m1_pos0, out, d);
        else if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX2)
            nvfp4_bmm_row_avx2(w, shift, bs, O, e2m1_pos0, out, finite, d);
        else
            nvfp4_bmm_row_scalar(w, shift, bs, O, e2m1_pos0, out, d);
    }
    free(bs);
    return 0;
}
