/* Helpers shared by the fp8, gptq and awq suites: listing golden files,
 * reading their headers, running a kernel under each SIMD level and output
 * dtype, comparing bit for bit. Header-only. */
#ifndef AMN_QUANT_GOLDEN_H
#define AMN_QUANT_GOLDEN_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/dtype.h"
#include "amn/simd.h"
#include "amn_test.h"

#define QG_MAX_FILES 64

/* Paths of the *.bin files in dir, sorted; returns how many. */
static inline size_t qg_list(const char *dir, char paths[][1024]) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < QG_MAX_FILES) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".bin") == 0)
            snprintf(paths[n++], 1024, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(paths[j - 1], paths[j]) > 0; j--) {
            char t[1024];
            memcpy(t, paths[j], 1024);
            memcpy(paths[j], paths[j - 1], 1024);
            memcpy(paths[j - 1], t, 1024);
        }
    return n;
}

static inline uint32_t qg_u32(const uint8_t *buf, size_t off) {
    return amn_test_u32(buf + off);
}

/* Scale dtype code of the AMN? containers: 0 F32, 1 BF16, 2 F16. */
static inline amn_dtype qg_scale_dtype(uint32_t code) {
    return code == 0 ? AMN_DTYPE_F32 : code == 1 ? AMN_DTYPE_BF16 : AMN_DTYPE_F16;
}

/* The SIMD levels this machine can run, scalar first. */
static inline size_t qg_levels(amn_simd *lv) {
    size_t n = 0;
    lv[n++] = AMN_SIMD_SCALAR;
    if (amn_simd_level() >= AMN_SIMD_AVX2) lv[n++] = AMN_SIMD_AVX2;
    return n;
}

/* The expected bytes of an [rows][cols] output as `out`, from an F32 golden
 * stored [cols][rows] (transposed) or [rows][cols]. BF16 comes from the BF16
 * golden when given, so both goldens are checked; F16 is the single F16
 * rounding of the F32 golden, which is what an F16 output means. */
static inline uint8_t *qg_expected(const uint8_t *f32, const uint8_t *bf16, uint64_t rows,
                                   uint64_t cols, bool transposed, amn_dtype out) {
    const size_t es = amn_dtype_size(out);
    uint8_t *e = malloc(rows * cols * es);
    assert_non_null(e);
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++) {
            const uint64_t src = transposed ? c * rows + r : r * cols + c;
            uint8_t *d = e + (r * cols + c) * es;
            if (out == AMN_DTYPE_F32) {
                memcpy(d, f32 + src * 4, 4);
            } else if (out == AMN_DTYPE_BF16 && bf16) {
                memcpy(d, bf16 + src * 2, 2);
            } else {
                const float f = amn_load_le_f32(f32 + src * 4);
                amn_store_le16(d, out == AMN_DTYPE_F16 ? amn_f32_to_f16(f) : amn_f32_to_bf16(f));
            }
        }
    return e;
}

/* Number of elements that differ; prints the first few. */
static inline size_t qg_diff(const char *what, const uint8_t *got, const uint8_t *exp, size_t n,
                             size_t es, uint64_t cols) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(got + i * es, exp + i * es, es) != 0) {
            if (bad < 5) {
                uint32_t g = 0, x = 0;
                memcpy(&g, got + i * es, es);
                memcpy(&x, exp + i * es, es);
                fprintf(stderr, "%s: [%zu][%zu] got 0x%0*x expected 0x%0*x\n", what,
                        (size_t)(i / cols), (size_t)(i % cols), (int)es * 2, g, (int)es * 2, x);
            }
            bad++;
        }
    return bad;
}

static inline uint32_t qg_lcg(uint32_t *x) {
    return *x = *x * 1664525u + 1013904223u;
}

/* A random scale of dtype st into s + i (little-endian, as in a file); with `specials`, now and
 * then a zero, subnormal, huge (overflows when multiplied), infinite or NaN one. */
static inline void qg_put_scale(uint8_t *s, uint64_t i, amn_dtype st, bool specials, uint32_t *x) {
    uint32_t r = qg_lcg(x);
    if (!specials && (r >> 4) % 32 < 6) r |= 0x1f0; /* an ordinary value */
    float f = (float)(r >> 8) * 0x1p-30f * (r & 1 ? -1.0f : 1.0f);
    uint32_t bits = amn_f32_bits(f);
    switch ((r >> 4) % 32) {
    case 0:
        bits = 0x80000000u;
        break; /* -0 */
    case 1:
        bits = 0x00000001u + (r >> 20);
        break; /* subnormal */
    case 2:
        bits = 0x7f000000u | (r >> 12);
        break; /* huge */
    case 3:
        bits = 0xff800000u;
        break; /* -Inf */
    case 4:
        bits = 0x7fc00000u | (r >> 16);
        break; /* quiet NaN with payload */
    case 5:
        bits = 0x7f800001u + (r >> 12);
        break; /* signalling NaN */
    default:
        break;
    }
    f = amn_bits_f32(bits);
    uint16_t h;
    switch (st) {
    case AMN_DTYPE_F32:
        amn_store_le32(s + i * 4, bits);
        break;
    case AMN_DTYPE_F16:
        h = amn_f32_to_f16(f);
        if ((r >> 4) % 32 == 5) h = (uint16_t)(0x7c01u + (r >> 24)); /* signalling NaN */
        amn_store_le16(s + i * 2, h);
        break;
    default:
        h = (uint16_t)(bits >> 16);
        if ((r >> 4) % 32 == 5) h = (uint16_t)(0x7f81u + (r >> 26)); /* signalling NaN */
        amn_store_le16(s + i * 2, h);
        break;
    }
}

/* A buffer of len bytes between two 64-byte guards, for a kernel call that
 * must write nothing outside its rows. */
static inline uint8_t *qg_guarded(size_t len) {
    uint8_t *g = malloc(len + 128);
    assert_non_null(g);
    memset(g, 0x5a, len + 128);
    return g + 64;
}

/* Check both guards of a qg_guarded buffer, copy its len bytes to dst, free it. */
static inline void qg_guarded_done(uint8_t *b, size_t len, uint8_t *dst) {
    for (size_t j = 0; j < 64; j++) {
        assert_int_equal((b - 64)[j], 0x5a);
        assert_int_equal(b[len + j], 0x5a);
    }
    memcpy(dst, b, len);
    free(b - 64);
}

#endif
