/* gguf_dequantize: picks a path and an output conversion for a run of blocks. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/error.h"
#include "gguf_dequant.h"
#include "gguf_kernels.h"
#include "gguf_types.h"

/* Elements per step of the F16 staging buffer: 16 KiB of stack. */
#define STAGE_ELEMS 4096

/* amn_f32_to_bf16 as a select rather than a branch, in runs of 32 (n is 32
 * or 256), so the compiler's cheapest vectorizer takes the loop. */
static void store_bf16(const float *src, uint8_t *dst, size_t n) {
    uint16_t h[256];
    for (size_t c = 0; c < n; c += 32)
        for (size_t i = c; i < c + 32; i++) {
            const uint32_t u = amn_f32_bits(src[i]);
            const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, q = (u >> 16) | 0x40u;
            h[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
        }
    memcpy(dst, h, n * 2);
}

/* Scalar path: decode a block into a float buffer, then narrow it. */
static void run_scalar(gguf_block_fn fn, const gguf_type_traits *tr, const uint8_t *src,
                       size_t nblocks, amn_dtype out, uint8_t *dst) {
    float y[256];
    const size_t qk = tr->block_elems, esize = amn_dtype_size(out);
    for (size_t i = 0; i < nblocks; i++, src += tr->block_bytes, dst += qk * esize) {
        fn(src, y);
        if (out == AMN_DTYPE_F32) {
            memcpy(dst, y, qk * sizeof(float));
            amn_le_to_host_n(dst, 4, qk); /* host floats to little-endian bytes */
        } else if (out == AMN_DTYPE_BF16) {
            store_bf16(y, dst, qk);
            amn_le_to_host_n(dst, 2, qk);
        } else {
            /* Per value: a block is too short for amn_store_f32's dispatch. */
            for (size_t k = 0; k < qk; k++) amn_store_le16(dst + 2 * k, amn_f32_to_f16(y[k]));
        }
    }
}

/* The highest path the CPU runs, from the core's detection
 * (amn_simd_cpu_level): gguf_dequantize_simd clamps an explicit level to the
 * CPU, not to AMN_SIMD (gguf_dequantize applies that), so tests and the
 * benchmark can run each path in turn. The test build that runs the AVX-512
 * kernels through SIMDe's emulation needs only AVX2. */
amn_simd gguf_simd_max(void) {
    const amn_simd cpu = amn_simd_cpu_level();
#ifdef AMN_GGUF_AVX512_EMULATE
    if (cpu >= AMN_SIMD_AVX2) return AMN_SIMD_AVX512;
#endif
    return cpu;
}

static int dequantize_plain(const gguf_type_traits *tr, const void *src, uint64_t n, amn_dtype out,
                            void *dst) {
    if (n > SIZE_MAX / 8) return AMN_E_INVALID; /* bytes of either side must be addressable */
    if (tr->plain == out) {
        memcpy(dst, src, (size_t)n * amn_dtype_size(out));
        return AMN_OK;
    }
    return amn_convert_elems(tr->plain, src, out, dst, (size_t)n) == 0 ? AMN_OK : AMN_E_UNSUPPORTED;
}

int gguf_dequantize_simd(uint32_t ggml_type, const void *blocks, uint64_t n_elems, amn_dtype out,
                         void *dst, amn_simd level) {
    const gguf_type_traits *tr = gguf_type_traits_get(ggml_type);
    if (!gguf_type_can_dequantize(tr)) return AMN_E_UNSUPPORTED;
    if (out != AMN_DTYPE_F32 && out != AMN_DTYPE_F16 && out != AMN_DTYPE_BF16) return AMN_E_INVALID;
    if (n_elems % tr->block_elems != 0) return AMN_E_INVALID;
    if (n_elems == 0) return AMN_OK;
    if (tr->kind == GGUF_KIND_PLAIN) return dequantize_plain(tr, blocks, n_elems, out, dst);

    const uint64_t nblocks = n_elems / tr->block_elems;
    /* Byte counts of both sides must be addressable; SIZE_MAX bounds either. */
    if (nblocks > SIZE_MAX / tr->block_bytes || n_elems > SIZE_MAX / sizeof(float))
        return AMN_E_INVALID;
    const uint8_t *src = blocks;
    uint8_t *d = dst;
    const amn_simd cpu = gguf_simd_max();
    if (level > cpu) level = cpu;
    gguf_rows_fn vec = NULL;
    if (AMN_SIMD_X86 && level >= AMN_SIMD_AVX512) vec = gguf_avx512_kernel(ggml_type);
    if (!vec && AMN_SIMD_X86 && level >= AMN_SIMD_AVX2) vec = gguf_avx2_kernel(ggml_type);
    if (!vec) {
        run_scalar(gguf_scalar_kernel(ggml_type), tr, src, (size_t)nblocks, out, d);
        return AMN_OK;
    }
    if (out != AMN_DTYPE_F16) {
        vec(src, (size_t)nblocks, d, out == AMN_DTYPE_BF16);
        return AMN_OK;
    }
    /* F16 is rare: stage F32 through the stack and narrow it with F16C, as
     * the core's amn_store_f32 does on this path (same bytes as
     * amn_f32_to_f16), without its per-call CPUID. */
    float stage[STAGE_ELEMS];
    const size_t step = STAGE_ELEMS / tr->block_elems;
    for (size_t i = 0; i < (size_t)nblocks; i += step) {
        const size_t nb = (size_t)nblocks - i < step ? (size_t)nblocks - i : step;
        vec(src + i * tr->block_bytes, nb, stage, 0);
        gguf_avx2_f32_to_f16(stage, d + i * tr->block_elems * 2, nb * tr->block_elems);
    }
    return AMN_OK;
}

int gguf_dequantize(uint32_t ggml_type, const void *blocks, uint64_t n_elems, amn_dtype out,
                    void *dst) {
    return gguf_dequantize_simd(ggml_type, blocks, n_elems, out, dst, amn_simd_level());
}
