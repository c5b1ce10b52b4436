/* Private to core: the vector paths behind amn_convert_elems. */
#ifndef AMN_DTYPE_INTERNAL_H
#define AMN_DTYPE_INTERNAL_H

#include <stdbool.h>

#include "amn/dtype.h"
#include "amn/simd.h"

typedef amn_simd amni_simd_level;
#define AMNI_SIMD_AVX2      AMN_SIMD_AVX2
#define AMNI_SIMD_AVX512    AMN_SIMD_AVX512
#define amni_simd_level_get amn_simd_level

void amni_convert_scalar(amn_dtype from, const void *src, amn_dtype to, void *dst, size_t n);
/* Handles the hot pairs; returns false (having written nothing) for any other. */
bool amni_convert_avx2(amn_dtype from, const void *src, amn_dtype to, void *dst, size_t n);
bool amni_convert_avx512(amn_dtype from, const void *src, amn_dtype to, void *dst, size_t n);

#endif
