/* CRC-32 by folding with carry-less multiplication, the method of Intel's
 * "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ" (Gopal et
 * al., 2009). The folding constants are x^(k) mod P for the reflected ZIP
 * polynomial, the values the Linux kernel and zlib-ng use:
 * x^(512+32) / x^(512-32) for folding four lanes 64 bytes ahead, x^(128+32) /
 * x^(128-32) for folding one lane 16 bytes ahead. Instead of a Barrett
 * reduction the last 16 folded bytes are finished by zlib's table code: the
 * folded lane has the same remainder as the message it replaces. */
#include "amn/kit/crc32.h"

#include <zlib.h>

#include "amn/simd.h"

uint32_t kit_crc32_zlib(uint32_t crc, const void *buf, size_t n) {
    return (uint32_t)crc32_z(crc, buf, n);
}

uint32_t kit_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    return (uint32_t)crc32_combine64(crc_a, crc_b, (z_off64_t)len_b);
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define CRC_TARGET __attribute__((target("pclmul,sse4.1")))

CRC_TARGET static inline __m128i fold(__m128i x, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* n >= 64. Returns the CRC (zlib convention) of the n & ~15 first bytes. */
CRC_TARGET static uint32_t crc32_pclmul(uint32_t crc, const uint8_t *p, size_t n) {
    const __m128i k4 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4); /* 4 lanes */
    const __m128i k1 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0); /* 1 lane */
    __m128i x0 = _mm_loadu_si128((const __m128i *)p);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    /* The register starts at ~crc: xor it into the first four bytes and the
     * rest of the computation starts from zero. */
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)~crc));
    p += 64;
    n -= 64;
    for (; n >= 64; p += 64, n -= 64) {
        x0 = _mm_xor_si128(fold(x0, k4), _mm_loadu_si128((const __m128i *)p));
        x1 = _mm_xor_si128(fold(x1, k4), _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = _mm_xor_si128(fold(x2, k4), _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = _mm_xor_si128(fold(x3, k4), _mm_loadu_si128((const __m128i *)(p + 48)));
    }
    x0 = _mm_xor_si128(fold(x0, k1), x1);
    x0 = _mm_xor_si128(fold(x0, k1), x2);
    x0 = _mm_xor_si128(fold(x0, k1), x3);
    for (; n >= 16; p += 16, n -= 16)
        x0 = _mm_xor_si128(fold(x0, k1), _mm_loadu_si128((const __m128i *)p));
    uint8_t last[16];
    _mm_storeu_si128((__m128i *)last, x0);
    /* zlib from ~0 runs the register from 0 over the folded lane. */
    return (uint32_t)crc32_z(0xffffffffu, last, 16);
}

/* Every AVX2 CPU has PCLMULQDQ, but a hypervisor may hide it; AMN_SIMD=scalar
 * turns the fast path off like every other vector path. Cheap enough per
 * call: the callers checksum megabytes at a time. */
/* The same with VPCLMULQDQ: four 64-byte accumulators fold 256 bytes a
 * step (constants x^(2048+32), x^(2048-32)), then fold into one 64-byte
 * accumulator (x^(512+32), x^(512-32) per 16-byte lane) whose four lanes the
 * 128-bit code above finishes. n >= 256. */
#define CRC512_TARGET __attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1")))

CRC512_TARGET static inline __m512i fold512(__m512i x, __m512i k) {
    return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, k, 0x00),
                            _mm512_clmulepi64_epi128(x, k, 0x11));
}

CRC512_TARGET static uint32_t crc32_vpclmul(uint32_t crc, const uint8_t *p, size_t n) {
    const __m512i k256 = _mm512_broadcast_i32x4(_mm_set_epi64x(0x1322d1430, 0x11542778a));
    const __m512i k64 = _mm512_broadcast_i32x4(_mm_set_epi64x(0x1c6e41596, 0x154442bd4));
    __m512i z0 = _mm512_loadu_si512(p), z1 = _mm512_loadu_si512(p + 64);
    __m512i z2 = _mm512_loadu_si512(p + 128), z3 = _mm512_loadu_si512(p + 192);
    z0 = _mm512_xor_si512(z0, _mm512_castsi128_si512(_mm_cvtsi32_si128((int)~crc)));
    p += 256;
    n -= 256;
    for (; n >= 256; p += 256, n -= 256) {
        z0 = _mm512_xor_si512(fold512(z0, k256), _mm512_loadu_si512(p));
        z1 = _mm512_xor_si512(fold512(z1, k256), _mm512_loadu_si512(p + 64));
        z2 = _mm512_xor_si512(fold512(z2, k256), _mm512_loadu_si512(p + 128));
        z3 = _mm512_xor_si512(fold512(z3, k256), _mm512_loadu_si512(p + 192));
    }
    z0 = _mm512_xor_si512(fold512(z0, k64), z1);
    z0 = _mm512_xor_si512(fold512(z0, k64), z2);
    z0 = _mm512_xor_si512(fold512(z0, k64), z3);
    for (; n >= 64; p += 64, n -= 64)
        z0 = _mm512_xor_si512(fold512(z0, k64), _mm512_loadu_si512(p));
    const __m128i k1 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
    __m128i x = _mm512_extracti32x4_epi32(z0, 0);
    x = _mm_xor_si128(fold(x, k1), _mm512_extracti32x4_epi32(z0, 1));
    x = _mm_xor_si128(fold(x, k1), _mm512_extracti32x4_epi32(z0, 2));
    x = _mm_xor_si128(fold(x, k1), _mm512_extracti32x4_epi32(z0, 3));
    for (; n >= 16; p += 16, n -= 16)
        x = _mm_xor_si128(fold(x, k1), _mm_loadu_si128((const __m128i *)p));
    uint8_t last[16];
    _mm_storeu_si128((__m128i *)last, x);
    return (uint32_t)crc32_z(0xffffffffu, last, 16);
}

/* From glibc's start-up CPU survey where there is one: __builtin_cpu_supports
 * would link libgcc's constructor into the plugin, ten CPUID instructions
 * (each a trap to the hypervisor in a VM) at every load (see core/src/simd.c). */
#if defined(__x86_64__) && defined(__GLIBC__) && __has_include(<sys/platform/x86.h>)
#include <sys/platform/x86.h>
/* CPU_FEATURE_ACTIVE's lookup with an unsigned shift (glibc 2.36's inline
 * shifts 1 << 31 in an int, which UBSan rejects). */
static int cpu_active(unsigned index) {
    const struct cpuid_feature *f = __x86_get_cpuid_feature_leaf(index / 128);
    return (f->active_array[index % 128 / 32] >> (index % 32)) & 1u;
}
#define CPU_HAS_VPCLMUL() cpu_active(x86_cpu_VPCLMULQDQ)
#define CPU_HAS_PCLMUL()  cpu_active(x86_cpu_PCLMULQDQ)
#else
#define CPU_HAS_VPCLMUL() __builtin_cpu_supports("vpclmulqdq")
#define CPU_HAS_PCLMUL()  __builtin_cpu_supports("pclmul")
#endif

static int have_vpclmul(void) {
    return amn_simd_level() >= AMN_SIMD_AVX512 && CPU_HAS_VPCLMUL();
}

static int have_pclmul(void) {
    return amn_simd_level() >= AMN_SIMD_AVX2 && CPU_HAS_PCLMUL();
}

uint32_t kit_crc32(uint32_t crc, const void *buf, size_t n) {
    const uint8_t *p = buf;
    if (n >= 256 && have_vpclmul()) {
        const size_t body = n & ~(size_t)15;
        crc = crc32_vpclmul(crc, p, body);
        p += body;
        n -= body;
    } else if (n >= 64 && have_pclmul()) {
        const size_t body = n & ~(size_t)15;
        crc = crc32_pclmul(crc, p, body);
        p += body;
        n -= body;
    }
    return (uint32_t)crc32_z(crc, p, n);
}
#else
uint32_t kit_crc32(uint32_t crc, const void *buf, size_t n) {
    return (uint32_t)crc32_z(crc, buf, n);
}
#endif
