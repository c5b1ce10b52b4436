/* GGUF quantizers against ggml's own bytes: every file of
 * ../shared/fixtures/gguf_quant_reference (fixtures README section 13):
 * the rows quantized equal <TYPE>_<n>.bin byte for byte, and the .bin
 * dequantized (every SIMD path) equals <TYPE>_<n>.dequant.f32 bit for bit.
 * Also: quantizing at any block split gives the same bytes, and the
 * argument checks. */
#include <stdbool.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amn_test.h"

#include "amn/byteorder.h"
#include "amn/dtype.h"
#include "amn/error.h"
#include "amn/simd.h"
#include "gguf_dequant.h"
#include "gguf_quant.h"
#include "gguf_quant_impl.h"
#include "gguf_types.h"

/* Every type of the reference set, and whether a _384 file exists. */
static const struct {
    uint32_t type;
    bool has_384;
} ref_types[] = {
    {GGUF_TYPE_Q4_0, true},   {GGUF_TYPE_Q4_1, true},   {GGUF_TYPE_Q5_0, true},
    {GGUF_TYPE_Q5_1, true},   {GGUF_TYPE_Q8_0, true},   {GGUF_TYPE_Q1_0, true},
    {GGUF_TYPE_Q2_0, true},   {GGUF_TYPE_IQ4_NL, true}, {GGUF_TYPE_MXFP4, true},
    {GGUF_TYPE_Q2_K, false},  {GGUF_TYPE_Q3_K, false},  {GGUF_TYPE_Q4_K, false},
    {GGUF_TYPE_Q5_K, false},  {GGUF_TYPE_Q6_K, false},  {GGUF_TYPE_IQ4_XS, false},
    {GGUF_TYPE_IQ3_S, false}, {GGUF_TYPE_TQ1_0, false}, {GGUF_TYPE_TQ2_0, false},
};
#define N_REF_TYPES (sizeof ref_types / sizeof ref_types[0])

static uint8_t *read_ref(const char *dir, const char *name, size_t *size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/gguf_quant_reference/%s", dir, name);
    uint8_t *b = amn_test_read_file(path, size);
    if (!b) fail_msg("cannot read %s", path);
    return b;
}

/* One reference file pair: quantize rows (n values each) and compare with
 * the .bin per row; dequantize the .bin on every path and compare with
 * the .dequant.f32. */
static void check_one(const char *dir, uint32_t type, int n) {
    const gguf_type_traits *tr = gguf_type_traits_get(type);
    char name[256];
    size_t rows_size, bin_size, deq_size;
    snprintf(name, sizeof name, "rows_%d.f32", n);
    uint8_t *rows_raw = read_ref(dir, name, &rows_size);
    snprintf(name, sizeof name, "%s_%d.bin", tr->name, n);
    uint8_t *bin = read_ref(dir, name, &bin_size);
    snprintf(name, sizeof name, "%s_%d.dequant.f32", tr->name, n);
    uint8_t *deq = read_ref(dir, name, &deq_size);

    const size_t nrows = rows_size / (4 * (size_t)n);
    const size_t row_bytes = (size_t)n / tr->block_elems * tr->block_bytes;
    assert_int_equal(bin_size, nrows * row_bytes);
    assert_int_equal(deq_size, rows_size);
    float *rows = malloc(rows_size);
    memcpy(rows, rows_raw, rows_size);
    amn_le_to_host_n(rows, 4, rows_size / 4); /* the file's floats in host order */

    uint8_t *out = malloc(bin_size);
    for (amn_simd lv = AMN_SIMD_SCALAR; lv <= gguf_simd_max() && lv <= AMN_SIMD_AVX2; lv++) {
        memset(out, 0xA5, bin_size);
        size_t bad_rows = 0;
        int first_bad = -1;
        for (size_t r = 0; r < nrows; r++) {
            assert_int_equal(gguf_quantize_simd(type, rows + r * (size_t)n, (uint64_t)n,
                                                out + r * row_bytes, lv),
                             AMN_OK);
            if (memcmp(out + r * row_bytes, bin + r * row_bytes, row_bytes) != 0) {
                if (first_bad < 0) first_bad = (int)r;
                bad_rows++;
            }
        }
        if (bad_rows)
            fprintf(stderr, "%s_%d on %s: %zu of %zu rows differ from ggml (first: row %d)\n",
                    tr->name, n, amn_simd_name(lv), bad_rows, nrows, first_bad);
        assert_int_equal(bad_rows, 0);
    }

    /* Whole file in one call: the same bytes. */
    memset(out, 0x5A, bin_size);
    assert_int_equal(gguf_quantize(type, rows, (uint64_t)nrows * (uint64_t)n, out), AMN_OK);
    assert_memory_equal(out, bin, bin_size);

    /* ggml's dequantization of its own bytes, on every path. */
    float *y = malloc(deq_size);
    for (amn_simd lv = AMN_SIMD_SCALAR; lv <= gguf_simd_max(); lv++) {
        memset(y, 0xEE, deq_size);
        assert_int_equal(
            gguf_dequantize_simd(type, bin, (uint64_t)nrows * (uint64_t)n, AMN_DTYPE_F32, y, lv),
            AMN_OK);
        if (memcmp(y, deq, deq_size) != 0)
            fail_msg("%s_%d: dequantization differs from ggml on path %d", tr->name, n, (int)lv);
    }
    free(y);
    free(out);
    free(rows);
    free(rows_raw);
    free(bin);
    free(deq);
}

static void test_reference_files(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(dir);
    for (size_t i = 0; i < N_REF_TYPES; i++) {
        check_one(dir, ref_types[i].type, 512);
        if (ref_types[i].has_384) check_one(dir, ref_types[i].type, 384);
    }
}

/* Blocks are independent: quantizing a row block by block, or in uneven
 * runs of blocks, gives the bytes of the whole row. */
static void test_split_invariance(void **state) {
    (void)state;
    enum { N = 1024 };
    float *x = malloc(N * sizeof(float));
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * (float)(1 + (i % 7));
    }
    for (size_t t = 0; t < N_REF_TYPES; t++) {
        const gguf_type_traits *tr = gguf_type_traits_get(ref_types[t].type);
        const size_t nbytes = N / tr->block_elems * tr->block_bytes;
        uint8_t *whole = malloc(nbytes), *parts = malloc(nbytes);
        assert_int_equal(gguf_quantize(tr->id, x, N, whole), AMN_OK);
        size_t at = 0, step = 1;
        while (at < N / tr->block_elems) {
            const size_t nb = at + step <= N / tr->block_elems ? step : N / tr->block_elems - at;
            assert_int_equal(gguf_quantize(tr->id, x + at * tr->block_elems, nb * tr->block_elems,
                                           parts + at * tr->block_bytes),
                             AMN_OK);
            at += nb;
            step = step % 3 + 1;
        }
        assert_memory_equal(whole, parts, nbytes);
        free(whole);
        free(parts);
    }
    free(x);
}

/* Every path gives the scalar path's bytes on random rows, hostile values
 * included (infinities, NaN, huge finite values, subnormals, blocks so small
 * that 1 / d overflows, signed zeros, zero extremes of either sign, ties):
 * nothing to compare with ggml there, but the paths must agree. */
static void test_paths_agree(void **state) {
    (void)state;
    enum { N = 256 * 64 };
    float *x = malloc(N * sizeof(float));
    uint32_t s = 777;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        const int blk = i / 256;
        float v = ((float)(s >> 8) / 16777216.0f - 0.5f) * ldexpf(1.0f, blk % 40 - 20);
        if (blk % 7 == 3 && i % 13 == 0) v = (i % 2) ? INFINITY : -3.4e38f;
        if (blk % 11 == 5 && i % 17 == 0) v = NAN;
        if (blk % 5 == 1 && i % 3 == 0) v = 1e-40f;
        if (blk % 9 == 2) v = (float)((int)(s >> 28) - 8) / 8.0f; /* ties */
        if (blk == 6) v = (i % 2) ? -0.0f : 0.0f;
        if (blk == 8 || blk == 10) v = ldexpf(v, blk == 8 ? -128 : -140); /* 1 / d overflows */
        /* A zero least (greatest) value, its first zero -0.0 (+0.0) and
         * later ones of the other sign: ggml keeps the first one's sign. */
        if (blk == 12) v = i % 8 == 0 ? (i % 64 == 0 ? -0.0f : 0.0f) : fabsf(v);
        if (blk == 14) v = i % 8 == 0 ? (i % 64 == 0 ? 0.0f : -0.0f) : -fabsf(v);
        x[i] = v;
    }
    for (size_t t = 0; t < N_REF_TYPES; t++) {
        const gguf_type_traits *tr = gguf_type_traits_get(ref_types[t].type);
        const size_t nbytes = N / tr->block_elems * tr->block_bytes;
        uint8_t *a = malloc(nbytes), *b = malloc(nbytes);
        assert_int_equal(gguf_quantize_simd(tr->id, x, N, a, AMN_SIMD_SCALAR), AMN_OK);
        for (amn_simd lv = AMN_SIMD_AVX2; lv <= gguf_simd_max(); lv++) {
            memset(b, 0x33, nbytes);
            assert_int_equal(gguf_quantize_simd(tr->id, x, N, b, lv), AMN_OK);
            if (memcmp(a, b, nbytes) != 0)
                fail_msg("%s: %s differs from scalar", tr->name, amn_simd_name(lv));
        }
        free(a);
        free(b);
    }
    free(x);
}

/* The scales' F32 -> F16 (ggml's software rounding) equals the core's
 * amn_f32_to_f16 on every non-NaN value tried: all exponents, every
 * mantissa pattern near the rounding points, ties, subnormals, overflow. */
static void test_scale_rounding(void **state) {
    (void)state;
    size_t checked = 0;
    for (uint32_t e = 0; e < 256; e++)
        for (uint32_t m = 0; m < (1u << 23);
             m += (m & 0x1fff) == 0x1000 ? 0xfff : 1 + (m & 0x1ff)) {
            for (uint32_t s = 0; s < 2; s++) {
                const uint32_t u = s << 31 | e << 23 | m;
                const float f = amn_bits_f32(u);
                if (f != f) continue;
                const uint16_t a = gq_f32_to_f16(f), b = amn_f32_to_f16(f);
                if (a != b) fail_msg("f32 0x%08x: 0x%04x against amn_f32_to_f16 0x%04x", u, a, b);
                checked++;
            }
        }
    assert_int_equal(gq_f32_to_f16(NAN), 0x7E00);
    assert_true(checked > 1000000);
}

/* Plain rows: F32 copied, F16 / BF16 rounded to nearest even. */
static void test_plain_rows(void **state) {
    (void)state;
    const float x[4] = {1.0f, -0.0f, 65520.0f, 1.00048828125f};
    uint8_t out[16];
    assert_int_equal(gguf_quantize(GGUF_TYPE_F32, x, 4, out), AMN_OK);
    for (int i = 0; i < 4; i++) assert_true(amn_load_le32(out + 4 * i) == amn_f32_bits(x[i]));
    assert_int_equal(gguf_quantize(GGUF_TYPE_F16, x, 4, out), AMN_OK);
    const uint8_t f16[8] = {0x00, 0x3c, 0x00, 0x80, 0x00, 0x7c, 0x00, 0x3c};
    assert_memory_equal(out, f16, 8);
    assert_int_equal(gguf_quantize(GGUF_TYPE_BF16, x, 4, out), AMN_OK);
    const uint8_t bf16[8] = {0x80, 0x3f, 0x00, 0x80, 0x80, 0x47, 0x80, 0x3f};
    assert_memory_equal(out, bf16, 8);
}

static void test_bad_arguments(void **state) {
    (void)state;
    float x[256] = {0};
    uint8_t out[512];
    assert_int_equal(gguf_quantize(GGUF_TYPE_Q4_0, x, 33, out), AMN_E_INVALID);
    assert_int_equal(gguf_quantize(GGUF_TYPE_Q4_K, x, 128, out), AMN_E_INVALID);
    /* Types ggml cannot make without an importance matrix, and non-weights. */
    const uint32_t refused[] = {GGUF_TYPE_IQ2_XXS,
                                GGUF_TYPE_IQ2_XS,
                                GGUF_TYPE_IQ1_S,
                                GGUF_TYPE_IQ3_XXS,
                                GGUF_TYPE_IQ2_S,
                                GGUF_TYPE_IQ1_M,
                                GGUF_TYPE_Q8_K,
                                GGUF_TYPE_I32,
                                GGUF_TYPE_Q4_2,
                                GGUF_TYPE_NVFP4,
                                999};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        assert_false(gguf_type_can_quantize(refused[i]));
        assert_int_equal(gguf_quantize(refused[i], x, 256, out), AMN_E_UNSUPPORTED);
    }
    assert_int_equal(gguf_quantize(GGUF_TYPE_Q4_0, x, 0, out), AMN_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_files), cmocka_unit_test(test_split_invariance),
        cmocka_unit_test(test_paths_agree),     cmocka_unit_test(test_scale_rounding),
        cmocka_unit_test(test_plain_rows),      cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
