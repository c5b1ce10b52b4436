/* Private to the dequantizers: the per-path kernel tables and the scalar
 * helpers every path shares. */
#ifndef AMN_GGUF_KERNELS_H
#define AMN_GGUF_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "amn/dtype.h"

/* A scalar kernel decodes one block into block_elems floats. */
typedef void (*gguf_block_fn)(const uint8_t *restrict b, float *restrict y);

/* A vector kernel decodes nblocks consecutive blocks into dst, as F32 or
 * (bf16 != 0) BF16; dst has any alignment. */
typedef void (*gguf_rows_fn)(const uint8_t *b, size_t nblocks, void *dst, int bf16);

gguf_block_fn gguf_scalar_kernel(uint32_t ggml_type);
/* NULL when the type has no AVX2 kernel (the scalar one is used). */
gguf_rows_fn gguf_avx2_kernel(uint32_t ggml_type);
/* Q1_0 / Q2_0 (gguf_dequant_avx2_lowbit.c), reached through gguf_avx2_kernel. */
gguf_rows_fn gguf_avx2_lowbit_kernel(uint32_t ggml_type);
/* NULL when the type has no AVX-512 kernel (the AVX2 one is used). */
gguf_rows_fn gguf_avx512_kernel(uint32_t ggml_type);

/* n F32 values to F16 (round to nearest even, as amn_f32_to_f16), with F16C:
 * only after the AVX2 check. dst has any alignment. */
void gguf_avx2_f32_to_f16(const float *src, uint8_t *dst, size_t n);

static inline uint16_t gguf_le16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t gguf_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* IEEE half -> binary32, exact. A signalling NaN comes back quieted, as F16C's
 * vcvtph2ps (ggml's GGML_FP16_TO_FP32 on x86) does, so every path agrees. */
static inline float gguf_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return amn_bits_f32(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
    if (exp == 0) {
        /* Subnormal (or zero): man * 2^-24 is exact in binary32. */
        return amn_bits_f32(amn_f32_bits((float)man * 0x1p-24f) | sign);
    }
    return amn_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline float gguf_f16(const uint8_t *p) {
    return gguf_f16_to_f32(gguf_le16(p));
}

/* ggml_e8m0_to_fp32_half: 2^(e-128); the bit patterns for e < 2 are subnormal,
 * and e = 255 gives 2^127 (no NaN). */
static inline float gguf_e8m0_half(uint8_t e) {
    return amn_bits_f32(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

#endif
