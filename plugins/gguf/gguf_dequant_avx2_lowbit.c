/* AVX2 dequantizers of the two newest ggml types, Q1_0 (type 41: 128 signs
 * of d per 18-byte block) and Q2_0 (type 42: 64 codes of 2 bits, (q - 1) * d).
 *
 * Each block has at most four distinct outputs, computed once in binary32
 * exactly as the scalar kernels compute them ((float)(q - 1) * d; d and -d),
 * and rounded once to BF16 when that is the output; the codes then only
 * select among them, so the bytes equal the scalar path's on any input
 * (Inf and NaN scales included: the selected values are the same floats).
 * Built with -mavx2 -mf16c -mbmi2, called after the run-time CPU check. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/dtype.h"
#include "gguf_kernels.h"
#include "gguf_types.h"

/* ---- Q1_0 ------------------------------------------------------------------ */

static void q1_0_rows(const uint8_t *b, size_t nb, void *dst, int bf16) {
    uint8_t *y = dst;
    const __m256i bits32 = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i bits16 = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048,
                                             4096, 8192, 16384, (short)0x8000);
    for (size_t i = 0; i < nb; i++, b += 18) {
        const float d = gguf_f16(b), neg_d = -d;
        if (!bf16) {
            const __m256 vp = _mm256_set1_ps(d), vn = _mm256_set1_ps(neg_d);
            for (int k = 0; k < 16; k++, y += 32) {
                const __m256i m = _mm256_cmpeq_epi32(
                    _mm256_and_si256(_mm256_set1_epi32(b[2 + k]), bits32), bits32);
                _mm256_storeu_ps((float *)y, _mm256_blendv_ps(vn, vp, _mm256_castsi256_ps(m)));
            }
            continue;
        }
        const __m256i hp = _mm256_set1_epi16((short)amn_f32_to_bf16(d));
        const __m256i hn = _mm256_set1_epi16((short)amn_f32_to_bf16(neg_d));
        for (int k = 0; k < 8; k++, y += 32) {
            const __m256i w = _mm256_set1_epi16((short)gguf_le16(b + 2 + 2 * k));
            const __m256i m = _mm256_cmpeq_epi16(_mm256_and_si256(w, bits16), bits16);
            _mm256_storeu_si256((__m256i *)y, _mm256_blendv_epi8(hn, hp, m));
        }
    }
}

/* ---- Q2_0 ------------------------------------------------------------------ */

static void q2_0_rows(const uint8_t *b, size_t nb, void *dst, int bf16) {
    uint8_t *y = dst;
    const __m256i shifts = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256i three = _mm256_set1_epi32(3);
    for (size_t i = 0; i < nb; i++, b += 18) {
        const float d = gguf_f16(b);
        /* The four values (q - 1) * d in lanes 0-3 and again 4-7, for
         * permutevar; a real multiply (the compiler may turn a scalar
         * -1.0f * d into -d, which flips a NaN's sign where mulss keeps it). */
        const __m256 t = _mm256_mul_ps(_mm256_setr_ps(-1, 0, 1, 2, -1, 0, 1, 2), _mm256_set1_ps(d));
        float v[8];
        _mm256_storeu_ps(v, t);
        const __m256i th =
            _mm256_setr_epi32(amn_f32_to_bf16(v[0]), amn_f32_to_bf16(v[1]), amn_f32_to_bf16(v[2]),
                              amn_f32_to_bf16(v[3]), amn_f32_to_bf16(v[0]), amn_f32_to_bf16(v[1]),
                              amn_f32_to_bf16(v[2]), amn_f32_to_bf16(v[3]));
        for (int k = 0; k < 16; k += 4) {
            /* 16 outputs from 4 bytes: codes of bytes k, k+1 then k+2, k+3. */
            const __m256i c0 = _mm256_and_si256(
                _mm256_srlv_epi32(_mm256_set1_epi32(gguf_le16(b + 2 + k)), shifts), three);
            const __m256i c1 = _mm256_and_si256(
                _mm256_srlv_epi32(_mm256_set1_epi32(gguf_le16(b + 4 + k)), shifts), three);
            if (!bf16) {
                _mm256_storeu_ps((float *)y, _mm256_permutevar8x32_ps(t, c0));
                _mm256_storeu_ps((float *)y + 8, _mm256_permutevar8x32_ps(t, c1));
                y += 64;
                continue;
            }
            const __m256i p = _mm256_packus_epi32(_mm256_permutevar8x32_epi32(th, c0),
                                                  _mm256_permutevar8x32_epi32(th, c1));
            _mm256_storeu_si256((__m256i *)y, _mm256_permute4x64_epi64(p, 0xD8));
            y += 32;
        }
    }
}

gguf_rows_fn gguf_avx2_lowbit_kernel(uint32_t ggml_type) {
    switch (ggml_type) {
    case GGUF_TYPE_Q1_0:
        return q1_0_rows;
    case GGUF_TYPE_Q2_0:
        return q2_0_rows;
    default:
        return NULL;
    }
}
