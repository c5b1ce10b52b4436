/* GPTQ dequantization: field extraction, zero points, the scalar path and
 * the choice of path. */
#include <stdlib.h>

#include "amn/error.h"
#include "gptq_kernels.h"
#include "amn/kit/quant_common.h"

/* Field of `bits` bits at bit position pos of a stream of 32-bit words that
 * lie `stride` bytes apart. */
static uint32_t stream_field(const uint8_t *base, uint64_t stride, uint64_t pos, unsigned bits) {
    const uint64_t k = pos >> 5;
    const unsigned sh = (unsigned)(pos & 31);
    uint32_t v = gptq_ld32(base + k * stride) >> sh;
    if (sh + bits > 32) v |= gptq_ld32(base + (k + 1) * stride) << (32 - sh);
    return v & ((1u << bits) - 1);
}

uint32_t gptq_q(const gptq_layout *l, uint64_t i, uint64_t o) {
    return stream_field(l->qweight + o * 4, l->out * 4, (uint64_t)l->bits * i, l->bits);
}

int32_t gptq_zero(const gptq_layout *l, uint64_t g, uint64_t o) {
    const unsigned bits = l->bits, mask = (1u << bits) - 1;
    const uint8_t *row = l->qzeros + g * (l->out * bits / 32) * 4;
    if (!l->zeros_v1) return (int32_t)stream_field(row, 4, (uint64_t)bits * o, bits);
    if (bits == 3) {
        /* GPTQModel shifts each 3-bit field on its own (they straddle words). */
        return (int32_t)((stream_field(row, 4, 3 * o, 3) + 1) & mask);
    }
    /* 2/4/8-bit: GPTQModel's convert_gptq_v1_to_v2_format_module adds 1 to
     * every field of the packed word at once (0x55555555, 0x11111111,
     * 0x01010101), so a stored all-ones field wraps to 0 and carries into
     * the next field. Reproduce that word addition. */
    static const uint32_t ones[9] = {[2] = 0x55555555u, [4] = 0x11111111u, [8] = 0x01010101u};
    /* Fields per word 16, 8 or 4: shifts, not a division per call (the
     * AVX2 path calls this once per group per output row). */
    const unsigned lg = bits == 2 ? 4 : bits == 4 ? 3 : 2;
    const uint32_t w = gptq_ld32(row + (o >> lg) * 4) + ones[bits];
    return (int32_t)((w >> (bits * (o & ((1u << lg) - 1)))) & mask);
}

float gptq_scale(const gptq_layout *l, uint64_t g, uint64_t o) {
    return quant_scale_at(l->scales, l->stype, g * l->out + o);
}

int gptq_dequant_rows_scalar(const gptq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                             void *dst) {
    const uint64_t G = l->groups, in = l->in;
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
            s[g] = gptq_scale(l, g, o);
            z[g] = gptq_zero(l, g, o);
        }
        for (uint64_t i = 0; i < in; i++) {
            const uint64_t g = l->gidx ? (uint64_t)l->gidx[i] : i / l->group_size;
            const int32_t q = (int32_t)gptq_q(l, i, o);
            qs_store1(s[g] * (float)(q - z[g]), out, d + i * es);
        }
        d += in * es;
    }
    free(s);
    free(z);
    return 0;
}

int gptq_dequant_rows(const gptq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst,
                      amn_simd level) {
    if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX512 && gptq_avx512_takes(l, out))
        return gptq_dequant_rows_avx512(l, row0, nrows, out, dst);
    if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX2)
        return gptq_dequant_rows_avx2(l, row0, nrows, out, dst);
    return gptq_dequant_rows_scalar(l, row0, nrows, out, dst);
}
