/* Run-time choice of vector instruction set. */
#include <stdlib.h>
#include <string.h>

#include "amn/simd.h"

static amn_simd cpu_level(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return AMN_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
        __builtin_cpu_supports("bmi2"))
        return AMN_SIMD_AVX2;
#endif
    return AMN_SIMD_SCALAR;
}

amn_simd amn_simd_level(void) {
    amn_simd lvl = cpu_level();
    const char *cap = getenv("AMN_SIMD");
    if (cap) {
        amn_simd want = lvl;
        if (strcmp(cap, "scalar") == 0)
            want = AMN_SIMD_SCALAR;
        else if (strcmp(cap, "avx2") == 0)
            want = AMN_SIMD_AVX2;
        else if (strcmp(cap, "avx512") == 0)
            want = AMN_SIMD_AVX512;
        if (want < lvl) lvl = want;
    }
    return lvl;
}

const char *amn_simd_name(amn_simd s) {
    switch (s) {
    case AMN_SIMD_AVX512:
        return "avx512";
    case AMN_SIMD_AVX2:
        return "avx2";
    default:
        return "scalar";
    }
}
