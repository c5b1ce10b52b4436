/* amn/simd.h — which vector instruction set the kernels may use.
 *
 * Kernels pick their path per call from amn_simd_level(). Every path must
 * produce the same bytes as the scalar one; tests force each level in turn
 * through the AMN_SIMD environment variable ("scalar", "avx2", "avx512"),
 * which can only lower the level the CPU offers, never raise it.
 */
#ifndef AMN_SIMD_H
#define AMN_SIMD_H

#include "amn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum amn_simd {
    AMN_SIMD_SCALAR = 0,
    AMN_SIMD_AVX2 = 1,   /* AVX2 + F16C + BMI2 */
    AMN_SIMD_AVX512 = 2, /* AVX-512 F/BW/VL/DQ */
} amn_simd;

/* 1 where the x86 vector kernels are built (x86-64), 0 elsewhere: there
 * only the scalar paths exist and amn_simd_level() is AMN_SIMD_SCALAR. A
 * dispatch writes `if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX2)` so that a
 * build for another CPU never refers to a vector kernel. */
#if defined(__x86_64__)
#define AMN_SIMD_X86 1
#else
#define AMN_SIMD_X86 0
#endif

/* The level kernels use: what the CPU offers, lowered by AMN_SIMD. */
AMN_API amn_simd amn_simd_level(void);
/* What the CPU offers, ignoring AMN_SIMD: for callers that name a level
 * themselves (a kernel test or benchmark running each path in turn) and
 * must only be kept from one the CPU lacks. */
AMN_API amn_simd amn_simd_cpu_level(void);
AMN_API const char *amn_simd_name(amn_simd s);

#ifdef __cplusplus
}
#endif
#endif
