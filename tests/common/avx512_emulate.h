/* Tests only: the AVX-512 intrinsics of the plugins' *_avx512.c kernels on
 * a machine without AVX-512, from SIMDe's portable implementations (Debian's
 * libsimde-dev), so those files are checked against the scalar path and the
 * goldens on every build host, not only on AVX-512 hardware. The build
 * force-includes this header (amn_simd_sources EMULATE_AVX512) into sources
 * compiled at the AVX2 level; their own #include <immintrin.h> then adds
 * nothing, and tests/common/check_no_evex.py checks that no AVX-512
 * instruction reached the binary.
 *
 * SIMDe 0.7.4 (Debian 12) lacks a few widening conversions, and for some
 * intrinsics it has, no alias from the Intel name; those are defined here.
 * The ones written out below are lane-wise conversions with one possible
 * result each (the same C conversions the scalar kernels use); everything
 * with lane-crossing or mask semantics (permutes, tests, masked operations)
 * comes from SIMDe. */
#ifndef AMN_TESTS_AVX512_EMULATE_H
#define AMN_TESTS_AVX512_EMULATE_H

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>
#include <stdint.h>
#include <string.h>

static inline simde__m512i amn_emu_cvtepu8_epi32(simde__m128i a) {
    simde__m128i_private x = simde__m128i_to_private(a);
    simde__m512i_private r;
    for (int i = 0; i < 16; i++) r.i32[i] = (int32_t)x.u8[i];
    return simde__m512i_from_private(r);
}

static inline simde__m512i amn_emu_cvtepi8_epi32(simde__m128i a) {
    simde__m128i_private x = simde__m128i_to_private(a);
    simde__m512i_private r;
    for (int i = 0; i < 16; i++) r.i32[i] = (int32_t)x.i8[i];
    return simde__m512i_from_private(r);
}

static inline simde__m512i amn_emu_cvtepu8_epi16(simde__m256i a) {
    simde__m256i_private x = simde__m256i_to_private(a);
    simde__m512i_private r;
    for (int i = 0; i < 32; i++) r.i16[i] = (int16_t)x.u8[i];
    return simde__m512i_from_private(r);
}

static inline simde__m512i amn_emu_cvtepu16_epi32(simde__m256i a) {
    simde__m256i_private x = simde__m256i_to_private(a);
    simde__m512i_private r;
    for (int i = 0; i < 16; i++) r.i32[i] = (int32_t)x.u16[i];
    return simde__m512i_from_private(r);
}

/* vpmovdw: the low 16 bits of each dword. */
static inline simde__m256i amn_emu_cvtepi32_epi16(simde__m512i a) {
    simde__m512i_private x = simde__m512i_to_private(a);
    simde__m256i_private r;
    for (int i = 0; i < 16; i++) r.i16[i] = (int16_t)(uint16_t)(uint32_t)x.i32[i];
    return simde__m256i_from_private(r);
}

/* vpmovdb: the low 8 bits of each dword. */
static inline simde__m128i amn_emu_cvtepi32_epi8(simde__m512i a) {
    simde__m512i_private x = simde__m512i_to_private(a);
    simde__m128i_private r;
    for (int i = 0; i < 16; i++) r.i8[i] = (int8_t)(uint8_t)(uint32_t)x.i32[i];
    return simde__m128i_from_private(r);
}

/* (float) of an int32 rounds to nearest even, as vcvtdq2ps under the
 * default MXCSR. */
static inline simde__m512 amn_emu_cvtepi32_ps(simde__m512i a) {
    simde__m512i_private x = simde__m512i_to_private(a);
    simde__m512_private r;
    for (int i = 0; i < 16; i++) r.f32[i] = (float)x.i32[i];
    return simde__m512_from_private(r);
}

/* vextractf32x8: eight floats, the low (imm 0) or high (imm 1) half. */
static inline simde__m256 amn_emu_extractf32x8_ps(simde__m512 a, int imm) {
    simde__m512_private x = simde__m512_to_private(a);
    simde__m256_private r;
    for (int i = 0; i < 8; i++) r.f32[i] = x.f32[8 * (imm & 1) + i];
    return simde__m256_from_private(r);
}

/* vpmovqb: the low byte of each qword into the low 8 bytes, the rest 0. */
static inline simde__m128i amn_emu_cvtepi64_epi8(simde__m512i a) {
    simde__m512i_private x = simde__m512i_to_private(a);
    simde__m128i_private r;
    for (int i = 0; i < 16; i++) r.u8[i] = i < 8 ? (uint8_t)(uint64_t)x.i64[i] : 0;
    return simde__m128i_from_private(r);
}

/* vmovdqu32 {z}: lanes whose mask bit is clear are zero and their memory is
 * not read (the instruction suppresses faults there, and callers rely on it
 * at the end of a buffer). */
static inline simde__m512i amn_emu_maskz_loadu_epi32(simde__mmask16 k, const void *p) {
    simde__m512i_private r;
    for (int i = 0; i < 16; i++) {
        int32_t v = 0;
        if ((k >> i) & 1) memcpy(&v, (const char *)p + 4 * i, 4);
        r.i32[i] = v;
    }
    return simde__m512i_from_private(r);
}

/* vcvtph2ps: sixteen halves to floats, as two F16C conversions of eight
 * (exact, quiet NaNs as the instruction makes them). */
static inline simde__m512 amn_emu_cvtph_ps(simde__m256i a) {
    simde__m256i_private x = simde__m256i_to_private(a);
    simde__m512_private r;
    for (int h = 0; h < 2; h++) {
        simde__m256_private y = simde__m256_to_private(
            simde_mm256_cvtph_ps(simde__m128i_from_private(x.m128i_private[h])));
        for (int i = 0; i < 8; i++) r.f32[8 * h + i] = y.f32[i];
    }
    return simde__m512_from_private(r);
}

/* Intel names over SIMDe's (or the conversions above), also where SIMDe
 * defines no alias: the native declarations in <immintrin.h> would
 * otherwise be called and fail to inline without -mavx512f. */
#undef _mm512_cvtepu8_epi32
#define _mm512_cvtepu8_epi32 amn_emu_cvtepu8_epi32
#undef _mm512_cvtepi8_epi32
#define _mm512_cvtepi8_epi32 amn_emu_cvtepi8_epi32
#undef _mm512_cvtepu8_epi16
#define _mm512_cvtepu8_epi16 amn_emu_cvtepu8_epi16
#undef _mm512_cvtepu16_epi32
#define _mm512_cvtepu16_epi32 amn_emu_cvtepu16_epi32
#undef _mm512_cvtepi32_epi16
#define _mm512_cvtepi32_epi16 amn_emu_cvtepi32_epi16
#undef _mm512_cvtepi32_epi8
#define _mm512_cvtepi32_epi8 amn_emu_cvtepi32_epi8
#undef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps amn_emu_cvtepi32_ps
#undef _mm512_extractf32x8_ps
#define _mm512_extractf32x8_ps amn_emu_extractf32x8_ps
#undef _mm512_cvtepi64_epi8
#define _mm512_cvtepi64_epi8 amn_emu_cvtepi64_epi8
#undef _mm512_cvtph_ps
#define _mm512_cvtph_ps amn_emu_cvtph_ps
#undef _mm512_maskz_loadu_epi32
#define _mm512_maskz_loadu_epi32 amn_emu_maskz_loadu_epi32

#endif
