/* AWQ dequantization: scale lookup, the scalar path and the choice of path. */
#include <stdlib.h>

#include "amn/error.h"
#include "awq_kernels.h"
#include "amn/kit/quant_common.h"

float awq_scale(const awq_layout *l, uint64_t g, uint64_t o) {
    return quant_scale_at(l->scales, l->stype, g * l->out + o);
}

int awq_dequant_rows_scalar(const awq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                            void *dst) {
    const uint64_t G = l->groups, in = l->in, wrow = l->out / 8 * 4;
    float *s = malloc(G * sizeof *s);
    int32_t *z = malloc(G * sizeof *z);
    if (!s || !z) {
        free(s);
        free(z);
        return AMN_E_NOMEM;
    }
    const size_t es = amn_dtype_size(out);
    uint8_t *d = dst;
    for (uint64_t o = row0; o < row0 + nrows; o++) {
        for (uint64_t g = 0; g < G; g++) {
            s[g] = awq_scale(l, g, o);
            z[g] = awq_nibble(l->qzeros + g * wrow, o);
        }
        for (uint64_t i = 0; i < in; i++) {
            const uint64_t g = i / l->group_size;
            const int32_t q = awq_nibble(l->qweight + i * wrow, o);
            qs_store1((float)(q - z[g]) * s[g], out, d + i * es);
        }
        d += in * es;
    }
    free(s);
    free(z);
    return 0;
}

int awq_dequant_rows(const awq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst,
                     amn_simd level) {
    if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX2)
        return awq_dequant_rows_avx2(l, row0, nrows, out, dst);
    return awq_dequant_rows_scalar(l, row0, nrows, out, dst);
}
