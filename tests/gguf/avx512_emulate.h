/* Tests only: the AVX-512 intrinsics of plugins/gguf/gguf_dequant_avx512.c
 * on a machine without AVX-512, from SIMDe's portable implementations
 * (Debian's libsimde-dev), so that file is checked against the scalar path
 * and the goldens on every build host, not only on AVX-512 hardware.
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

/* (float) of an int32 rounds to nearest even, as vcvtdq2ps under the
 * default MXCSR. */
static inline simde__m512 amn_emu_cvtepi32_ps(simde__m512i a) {
    simde__m512i_private x = simde__m512i_to_private(a);
    simde__m512_private r;
    for (int i = 0; i < 16; i++) r.f32[i] = (float)x.i32[i];
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
#undef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps amn_emu_cvtepi32_ps

#endif
