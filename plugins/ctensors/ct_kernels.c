/* compressed-tensors integers: element access, the scalar path and the
 * choice of path. */
#include "amn/kit/quant_common.h"
#include "ct_kernels.h"

int32_t ct_q(const ct_layout *l, uint64_t o, uint64_t i) {
    if (!l->packed) return (int8_t)l->weight[o * l->in + i];
    const unsigned pf = 32 / l->bits;
    const uint32_t w = ct_ld32(l->weight + (o * l->words + i / pf) * 4);
    const uint32_t f = (w >> (l->bits * (unsigned)(i % pf))) & ((1u << l->bits) - 1);
    return (int32_t)f - (int32_t)(1u << (l->bits - 1));
}

/* Where row o's scales and zero points are: the row's divisions (block
 * rows, packed zero fields), done once per row by ct_row_tables. */
typedef struct row_pos {
    uint64_t srow;     /* scale row */
    const uint8_t *zw; /* packed zero points: the row's words, one per group */
    unsigned zshift;   /* and the field's place in them */
} row_pos;

static row_pos row_at(const ct_layout *l, uint64_t o) {
    row_pos p = {.srow = ct_scale_row(l, o)};
    if (l->zkind == CT_ZERO_PACKED) {
        const unsigned pf = 32 / l->bits;
        p.zw = l->zeros + (o / pf) * l->groups * 4;
        p.zshift = l->bits * (unsigned)(o % pf);
    }
    return p;
}

static int32_t zero_at(const ct_layout *l, const row_pos *p, uint64_t g) {
    switch (l->zkind) {
    case CT_ZERO_PACKED: {
        const uint32_t f = (ct_ld32(p->zw + g * 4) >> p->zshift) & ((1u << l->bits) - 1);
        return (int32_t)f - (int32_t)(1u << (l->bits - 1));
    }
    case CT_ZERO_I8:
        return (int8_t)l->zeros[p->srow * l->groups + g];
    default:
        return 0;
    }
}

static float scale_at(const ct_layout *l, const row_pos *p, uint64_t g) {
    return quant_scale_at(l->scales, l->stype, l->per_tensor ? 0 : p->srow * l->groups + g);
}

int32_t ct_zero(const ct_layout *l, uint64_t o, uint64_t g) {
    const row_pos p = row_at(l, o);
    return zero_at(l, &p, g);
}

float ct_scale(const ct_layout *l, uint64_t o, uint64_t g) {
    const row_pos p = row_at(l, o);
    return scale_at(l, &p, g);
}

void ct_row_tables(const ct_layout *l, uint64_t o, float *st, int32_t *zt, size_t step) {
    const row_pos p = row_at(l, o);
    for (uint64_t g = 0; g < l->groups; g++) {
        st[g * step] = scale_at(l, &p, g);
        zt[g * step] = zero_at(l, &p, g);
    }
}

int ct_rows_scalar(const ct_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst) {
    const size_t es = amn_dtype_size(out);
    uint8_t *d = dst;
    for (uint64_t o = row0; o < row0 + nrows; o++) {
        for (uint64_t i = 0; i < l->in; i++) {
            const uint64_t g = l->gidx ? (uint64_t)l->gidx[i] : i / l->group_size;
            const int32_t qz = ct_q(l, o, i) - ct_zero(l, o, g);
            qs_store1(ct_apply(qz, ct_scale(l, o, g), l->stype), out, d + i * es);
        }
        d += l->in * es;
    }
    return 0;
}

int ct_dequant_rows(const ct_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst,
                    amn_simd level) {
    if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX512 && ct_avx512_takes(l))
        return ct_rows_avx512(l, row0, nrows, out, dst);
    if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX2) return ct_rows_avx2(l, row0, nrows, out, dst);
    return ct_rows_scalar(l, row0, nrows, out, dst);
}
