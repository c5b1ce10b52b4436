/* amn/dtype.h — element types and exact conversions between them.
 *
 * Names are spelled as safetensors spells them ("F32", "BF16", "F8_E4M3").
 * Narrowing conversions round to nearest, ties to even, with subnormals, signed
 * zeros and infinities handled as IEEE 754 says; a NaN stays a NaN (quieted).
 * Every conversion is a single rounding from the exact source value, so F64 ->
 * BF16 is not F64 -> F32 -> BF16.
 */
#ifndef AMN_DTYPE_H
#define AMN_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "amn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum amn_dtype {
    AMN_DTYPE_INVALID = 0,
    AMN_DTYPE_BOOL,
    AMN_DTYPE_U8,
    AMN_DTYPE_I8,
    AMN_DTYPE_U16,
    AMN_DTYPE_I16,
    AMN_DTYPE_U32,
    AMN_DTYPE_I32,
    AMN_DTYPE_U64,
    AMN_DTYPE_I64,
    AMN_DTYPE_F8_E4M3,
    AMN_DTYPE_F8_E5M2,
    AMN_DTYPE_F16,
    AMN_DTYPE_BF16,
    AMN_DTYPE_F32,
    AMN_DTYPE_F64,
    /* Opaque block-quantized bytes (e.g. a GGUF Q4_K tensor): the element count
     * comes from the shape, the byte count from the tensor's encoding. */
    AMN_DTYPE_BLOCK,
    /* Complex: real then imaginary part, each an IEEE binary32 (C64, NumPy
     * complex64, torch.complex64) or binary64 (C128). Appended after BLOCK
     * so that the values above keep their numbers. Never cast to a real
     * dtype: conversions copy them unchanged, as integers. */
    AMN_DTYPE_C64,
    AMN_DTYPE_C128,
    AMN_DTYPE_COUNT
} amn_dtype;

/* Bytes per element (C64: 8, C128: 16); 0 for AMN_DTYPE_INVALID and AMN_DTYPE_BLOCK. */
AMN_API size_t amn_dtype_size(amn_dtype t);
/* "F32", "BF16", ...; "INVALID" for an unknown value. */
AMN_API const char *amn_dtype_name(amn_dtype t);
/* Inverse of amn_dtype_name (exact, case-sensitive); AMN_DTYPE_INVALID if unknown. */
AMN_API amn_dtype amn_dtype_from_name(const char *name);
/* Lower-case CLI spelling ("bf16", "f16", "f32") -> dtype; INVALID otherwise. */
AMN_API amn_dtype amn_dtype_from_cli(const char *name);
AMN_API bool amn_dtype_is_float(amn_dtype t); /* F8*, F16, BF16, F32, F64 */

/* Scalar conversions (inline so kernels can use them in their tail loops). */

static inline uint32_t amn_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float amn_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float amn_bf16_to_f32(uint16_t h) {
    return amn_bits_f32((uint32_t)h << 16);
}

static inline uint16_t amn_f32_to_bf16(float f) {
    uint32_t u = amn_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

AMN_API float amn_f16_to_f32(uint16_t h);
AMN_API uint16_t amn_f32_to_f16(float f);
AMN_API uint16_t amn_f64_to_f16(double d);
AMN_API uint16_t amn_f64_to_bf16(double d);
AMN_API float amn_f8e4m3_to_f32(uint8_t b);
AMN_API float amn_f8e5m2_to_f32(uint8_t b);

/* Convert n elements between float dtypes (F8 only as a source; BLOCK never).
 * src and dst must not overlap. Returns 0, or -1 if the pair is not supported.
 * Chooses an AVX2 / scalar path at run time; every path gives the same bytes. */
AMN_API int amn_convert_elems(amn_dtype from, const void *src, amn_dtype to, void *dst, size_t n);

/* Write n F32 values as `to` (F32, F16 or BF16). The common tail of every
 * dequantization kernel. Returns 0 or -1 for another dtype. */
AMN_API int amn_store_f32(const float *src, amn_dtype to, void *dst, size_t n);
/* Element bytes (src of amn_convert_elems, dst of both) are little-endian on
 * every host (amn/byteorder.h); amn_store_f32 reads host floats. */

#ifdef __cplusplus
}
#endif
#endif
