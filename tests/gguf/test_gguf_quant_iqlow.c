/* The low-bit i-quant quantizers with importance weights (IQ2_XXS IQ2_XS
 * IQ2_S IQ3_XXS IQ1_S IQ1_M) against ggml's bytes: the fixtures of
 * fixtures/gguf_iqlow (ggml_quantize_chunk on 24 synthetic rows, with the
 * synthetic imatrix and, where ggml accepts it, NULL; gen.sh) on every
 * path and over uneven splits of the rows, and the SHA-256 of ggml's bytes
 * for the reference corpus's rows_512.f32. Then what has no golden: the
 * paths agree on hostile rows, NULL weights where ggml requires them give
 * zero blocks, and the bytes decode (amn's dequantizer) to values near the
 * input. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn_test.h"
#include "amn_test_rows.h"
#include "sha256.h"

#include "amn/byteorder.h"
#include "amn/error.h"
#include "amn/simd.h"
#include "gguf_dequant.h"
#include "gguf_quant_iqlow.h"
#include "gguf_types.h"

enum { N = 512 };

static const struct {
    uint32_t type;
    const char *name;
    bool null_ok;
    size_t row_bytes;   /* for N values */
    double max_rel_err; /* sanity bound of the round trip (weighted RMS) */
} types[] = {
    {GGUF_TYPE_IQ2_XXS, "IQ2_XXS", false, 2 * 66, 0.60},
    {GGUF_TYPE_IQ2_XS, "IQ2_XS", false, 2 * 74, 0.55},
    {GGUF_TYPE_IQ2_S, "IQ2_S", true, 2 * 82, 0.50},
    {GGUF_TYPE_IQ3_XXS, "IQ3_XXS", true, 2 * 98, 0.40},
    {GGUF_TYPE_IQ1_S, "IQ1_S", false, 2 * 50, 0.80},
    {GGUF_TYPE_IQ1_M, "IQ1_M", true, 2 * 56, 0.75},
};
#define NTYPES (sizeof types / sizeof types[0])

/* A whole file; a .f32 file's little-endian floats in host order (the
 * suite also runs on big-endian hosts). */
static void *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = n > 0 ? malloc((size_t)n) : NULL;
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    const size_t len = strlen(path);
    if (p && len > 4 && strcmp(path + len - 4, ".f32") == 0)
        for (size_t i = 0; i + 4 <= (size_t)n; i += 4) {
            const float v = amn_load_le_f32((const uint8_t *)p + i);
            memcpy((uint8_t *)p + i, &v, 4);
        }
    return p;
}

static void *fixture(const char *name, size_t *size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/fixtures/gguf_iqlow/%s", AMN_SOURCE_DIR, name);
    void *p = read_all(path, size);
    if (!p) fail_msg("cannot read %s", path);
    return p;
}

static int setup(void **state) {
    (void)state;
    return gguf_quant_iqlow_ready() ? 0 : -1;
}

/* Quantize rows in runs of 1, 2, 3, 1, 2, 3 ... rows per call. */
static void quantize_split(uint32_t type, const float *x, uint8_t *y, int64_t nrows,
                           size_t row_bytes, const float *qw, amn_simd lv) {
    int64_t at = 0, step = 1;
    while (at < nrows) {
        const int64_t n = at + step <= nrows ? step : nrows - at;
        assert_true(gq_iqlow_rows_simd(type, x + at * N, y + (size_t)at * row_bytes, n, N, qw, lv));
        at += n;
        step = step % 3 + 1;
    }
}

static void test_ggml_fixtures(void **state) {
    (void)state;
    size_t rows_size, w_size;
    float *rows = fixture("rows.f32", &rows_size), *w = fixture("imatrix.f32", &w_size);
    assert_int_equal(w_size, N * sizeof(float));
    const int64_t nrows = (int64_t)(rows_size / (N * sizeof(float)));
    int bad = 0;
    for (size_t t = 0; t < NTYPES; t++)
        for (int with = 1; with >= 0; with--) {
            if (!with && !types[t].null_ok) continue;
            char name[64];
            snprintf(name, sizeof name, "%s.%s.bin", types[t].name, with ? "w" : "nw");
            size_t exp_size;
            uint8_t *exp = fixture(name, &exp_size);
            assert_int_equal(exp_size, (size_t)nrows * types[t].row_bytes);
            uint8_t *got = malloc(exp_size);
            for (amn_simd lv = AMN_SIMD_SCALAR; lv <= gguf_simd_max(); lv++)
                for (int split = 0; split < 2; split++) {
                    memset(got, 0xA5, exp_size);
                    if (split)
                        quantize_split(types[t].type, rows, got, nrows, types[t].row_bytes,
                                       with ? w : NULL, lv);
                    else
                        assert_true(gq_iqlow_rows_simd(types[t].type, rows, got, nrows, N,
                                                       with ? w : NULL, lv));
                    int rows_bad = 0, first = -1;
                    for (int64_t r = 0; r < nrows; r++)
                        if (memcmp(got + r * types[t].row_bytes, exp + r * types[t].row_bytes,
                                   types[t].row_bytes) != 0) {
                            if (first < 0) first = (int)r;
                            rows_bad++;
                        }
                    if (rows_bad)
                        fprintf(stderr,
                                "%s: %d rows differ from ggml, first %d (path %s, split %d)\n",
                                name, rows_bad, first, amn_simd_name(lv), split);
                    bad += rows_bad;
                }
            free(got);
            free(exp);
        }
    free(rows);
    free(w);
    assert_int_equal(bad, 0);
}

/* ggml's bytes for the corpus rows, as sums (fixtures/gguf_iqlow/rows_512.sha256). */
static void test_reference_rows(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/gguf_quant_reference/rows_512.f32", dir);
    size_t rows_size, w_size, sums_size;
    float *rows = read_all(path, &rows_size);
    assert_non_null(rows);
    float *w = fixture("imatrix.f32", &w_size);
    char *sums = fixture("rows_512.sha256", &sums_size);
    sums = realloc(sums, sums_size + 1);
    sums[sums_size] = 0;
    const int64_t nrows = (int64_t)(rows_size / (N * sizeof(float)));
    int checked = 0;
    for (size_t t = 0; t < NTYPES; t++)
        for (int with = 1; with >= 0; with--) {
            if (!with && !types[t].null_ok) continue;
            const size_t bytes = (size_t)nrows * types[t].row_bytes;
            uint8_t *got = malloc(bytes);
            assert_true(gq_iqlow_rows_simd(types[t].type, rows, got, nrows, N, with ? w : NULL,
                                           amn_simd_level()));
            char hex[65], line[128];
            sha256_of(got, bytes, hex);
            snprintf(line, sizeof line, "%s  %s.%s.bin", hex, types[t].name, with ? "w" : "nw");
            if (!strstr(sums, line))
                fail_msg("%s.%s: SHA-256 %s is not ggml's", types[t].name, with ? "w" : "nw", hex);
            checked++;
            free(got);
        }
    assert_int_equal(checked, 9);
    free(rows);
    free(w);
    free(sums);
}

/* Rows ggml aborts on or never sees: NaN, Inf, huge values whose squares
 * overflow, subnormals, signed zeros, ties. Every path writes the scalar
 * path's bytes, and nothing crashes. */
static void test_paths_agree_hostile(void **state) {
    (void)state;
    enum { R = 24 };
    float *x = malloc(sizeof(float) * N * R), w[N];
    for (int i = 0; i < N; i++)
        w[i] = (i % 50 == 7) ? 0.0f : ldexpf(1 + amn_test_uniform() / 2, i % 9 - 4);
    for (int r = 0; r < R; r++)
        for (int i = 0; i < N; i++) {
            float v = amn_test_uniform() * ldexpf(1.0f, r % 12 * 6 - 30);
            v = amn_test_hostile(r % 8, i, v);
            x[(size_t)r * N + i] = v;
        }
    for (size_t t = 0; t < NTYPES; t++)
        for (int with = 1; with >= 0; with--) {
            if (!with && !types[t].null_ok) continue;
            const size_t bytes = R * types[t].row_bytes;
            uint8_t *a = malloc(bytes), *b = malloc(bytes);
            assert_true(
                gq_iqlow_rows_simd(types[t].type, x, a, R, N, with ? w : NULL, AMN_SIMD_SCALAR));
            for (amn_simd lv = AMN_SIMD_AVX2; lv <= gguf_simd_max(); lv++) {
                memset(b, 0x3C, bytes);
                assert_true(gq_iqlow_rows_simd(types[t].type, x, b, R, N, with ? w : NULL, lv));
                if (memcmp(a, b, bytes) != 0)
                    fail_msg("%s: %s differs from scalar", types[t].name, amn_simd_name(lv));
            }
            free(a);
            free(b);
        }
    free(x);
}

/* ggml refuses IQ2_XXS / IQ2_XS / IQ1_S without weights; the functions
 * write zero blocks rather than read through NULL. */
static void test_null_weights_refused(void **state) {
    (void)state;
    float x[N];
    for (int i = 0; i < N; i++) x[i] = amn_test_uniform();
    for (size_t t = 0; t < NTYPES; t++) {
        if (types[t].null_ok) continue;
        uint8_t y[2 * 98];
        memset(y, 0xFF, sizeof y);
        assert_true(gq_iqlow_rows_simd(types[t].type, x, y, 1, N, NULL, amn_simd_level()));
        for (size_t i = 0; i < types[t].row_bytes; i++) assert_int_equal(y[i], 0);
    }
    assert_false(gq_iqlow_rows_simd(GGUF_TYPE_Q4_K, x, NULL, 1, N, NULL, AMN_SIMD_SCALAR));
}

/* A sanity check, not a golden: amn's dequantizer turns the bytes back
 * into values whose weighted RMS error is a fraction of the signal's. */
static void test_round_trip(void **state) {
    (void)state;
    size_t rows_size, w_size;
    float *rows = fixture("rows.f32", &rows_size), *w = fixture("imatrix.f32", &w_size);
    float *back = malloc(N * sizeof(float));
    uint8_t y[2 * 98];
    for (size_t t = 0; t < NTYPES; t++) {
        double err = 0, sig = 0;
        for (int r = 0; r < 2; r++) { /* rows 0 and 1: plain heavy-tailed rows */
            const float *x = rows + (size_t)r * N;
            assert_true(gq_iqlow_rows_simd(types[t].type, x, y, 1, N, w, amn_simd_level()));
            assert_int_equal(gguf_dequantize(types[t].type, y, N, AMN_DTYPE_F32, back), AMN_OK);
            amn_le_to_host_n(back, 4, N); /* amn's F32 output is little-endian */
            for (int i = 0; i < N; i++) {
                const double d = (double)back[i] - x[i];
                err += w[i] * d * d;
                sig += w[i] * (double)x[i] * x[i];
            }
        }
        const double rel = sqrt(err / sig);
        if (!(rel < types[t].max_rel_err))
            fail_msg("%s: relative error %.3f after the round trip", types[t].name, rel);
    }
    free(back);
    free(rows);
    free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ggml_fixtures),       cmocka_unit_test(test_reference_rows),
        cmocka_unit_test(test_paths_agree_hostile), cmocka_unit_test(test_null_weights_refused),
        cmocka_unit_test(test_round_trip),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
