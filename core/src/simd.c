/* Run-time choice of vector instruction set. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "amn/simd.h"

#if defined(__x86_64__) && defined(__GLIBC__) && __has_include(<sys/platform/x86.h>)
/* glibc (2.33+) hands out what its dynamic loader found at start-up, usable
 * by this process (OS support included). __builtin_cpu_supports links
 * libgcc's __cpu_indicator_init into libamn, a constructor that executes
 * CPUID ten times in every process that loads libamn, whether or not it ever
 * asks; CPUID traps to the hypervisor in a VM (15-16 us each on a KVM guest),
 * so that constructor cost ~0.15 ms of every `amn` start. */
#include <sys/platform/x86.h>
#define AMN_CPU_FROM_GLIBC 1
/* CPU_FEATURE_ACTIVE's lookup with an unsigned shift: glibc 2.36's inline
 * shifts 1 << 31 in an int, which UBSan rejects. */
static int cpu_active(unsigned index) {
    const struct cpuid_feature *f = __x86_get_cpuid_feature_leaf(index / 128);
    return (f->active_array[index % 128 / 32] >> (index % 32)) & 1u;
}
#define CPU_ACTIVE(name) cpu_active(x86_cpu_##name)
#elif defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
/* clang before 16 rejects __builtin_cpu_supports("f16c"): read CPUID.1:ECX
 * bit 29 directly (YMM state is already checked by the "avx2" builtin). */
static int cpu_has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

/* What the CPU offers never changes, and CPUID traps to the hypervisor in a
 * VM (microseconds each): ask once per process. */
static amn_simd cpu_level_value = AMN_SIMD_SCALAR;
static pthread_once_t cpu_level_once = PTHREAD_ONCE_INIT;

/* AVX-512 counts only on top of the AVX2 level: the AVX-512 kernels fall
 * back to AVX2 ones for some types and use F16C and BMI2 themselves. */
static void detect_cpu_level(void) {
#if defined(AMN_CPU_FROM_GLIBC)
    if (!CPU_ACTIVE(AVX2) || !CPU_ACTIVE(F16C) || !CPU_ACTIVE(BMI2)) return;
    cpu_level_value = AMN_SIMD_AVX2;
    if (CPU_ACTIVE(AVX512F) && CPU_ACTIVE(AVX512BW) && CPU_ACTIVE(AVX512VL) && CPU_ACTIVE(AVX512DQ))
        cpu_level_value = AMN_SIMD_AVX512;
#elif defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !cpu_has_f16c() || !__builtin_cpu_supports("bmi2"))
        return;
    cpu_level_value = AMN_SIMD_AVX2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        cpu_level_value = AMN_SIMD_AVX512;
#endif
}

amn_simd amn_simd_cpu_level(void) {
    pthread_once(&cpu_level_once, detect_cpu_level);
    return cpu_level_value;
}

amn_simd amn_simd_level(void) {
    amn_simd lvl = amn_simd_cpu_level();
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
