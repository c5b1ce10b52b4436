/* The make_qx_quants users with importance weights (Q3_K, Q6_K, Q4_0, Q5_0)
 * and Q6_K without: every vector path gives the scalar path's bytes, on
 * ordinary rows and on hostile ones (zero, tiny and huge groups, ties,
 * NaN and infinities in values and in weights), which take the vector
 * searches' fallbacks. The goldens against ggml are in test_gguf_quant and
 * the forget tests; this one also runs in the avx512emu build, so the
 * AVX-512 searches are checked on machines without AVX-512. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn_test.h"
#include "amn_test_rows.h"

#include "amn/error.h"
#include "amn/simd.h"
#include "gguf_dequant.h"
#include "gguf_quant.h"
#include "gguf_types.h"

enum { N = 512, R = 24 };

/* Row r's values: kind r % 8 (0 and 7 ordinary; the others hostile in some
 * groups only, so most groups of each row stay finite). */
static void fill(float *x, float *w) {
    for (int r = 0; r < R; r++)
        for (int i = 0; i < N; i++) {
            float v = 0.02f * amn_test_uniform(),
                  q = 0.5f + amn_test_uniform() * amn_test_uniform();
            const bool hit = (i / 16) % 5 == r % 5;
            const int kind = hit ? r % 8 : 0;
            v = amn_test_hostile(kind, i, v);
            if (kind == 6 && i % 11 == 0) q = (i % 2) ? NAN : INFINITY;
            x[r * N + i] = v;
            w[r * N + i] = q;
        }
}

/* Where the f16 scale d sits in each block. A block whose weights hold a NaN
 * gets a NaN d, and the sign of a NaN is not a result: x86 passes on the
 * first operand's NaN, and the compiler may order a commutative operation
 * either way (it does differ between -O0 and -O2). So two blocks agree when
 * their bytes are equal, or when the only difference is the sign of a NaN d. */
static size_t d_offset(uint32_t type) {
    return type == GGUF_TYPE_Q3_K ? 108 : type == GGUF_TYPE_Q6_K ? 208 : 0;
}

static bool rows_agree(uint32_t type, const uint8_t *a, const uint8_t *b, size_t bytes) {
    const size_t bb = gguf_type_traits_get(type)->block_bytes, hi = d_offset(type) + 1;
    for (size_t at = 0; at < bytes; at += bb) {
        if (memcmp(a + at, b + at, bb) == 0) continue;
        const bool nan_d = (a[at + hi] & 0x7e) == 0x7e && (a[at + hi] ^ b[at + hi]) == 0x80;
        if (!nan_d || memcmp(a + at, b + at, hi) != 0 ||
            memcmp(a + at + hi + 1, b + at + hi + 1, bb - hi - 1) != 0)
            return false;
    }
    return true;
}

static void test_paths_agree(void **state) {
    (void)state;
    static const uint32_t types[] = {GGUF_TYPE_Q3_K, GGUF_TYPE_Q6_K, GGUF_TYPE_Q4_0,
                                     GGUF_TYPE_Q5_0};
    float *x = malloc(sizeof(float) * R * N), *w = malloc(sizeof(float) * R * N);
    assert_non_null(x);
    assert_non_null(w);
    fill(x, w);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const gguf_type_traits *tr = gguf_type_traits_get(types[t]);
        const size_t bytes = (size_t)R * N / tr->block_elems * tr->block_bytes;
        uint8_t *a = malloc(bytes), *b = malloc(bytes);
        assert_non_null(a);
        assert_non_null(b);
        /* With the weights: each row against its own weight row. */
        for (int r = 0; r < R; r++)
            assert_int_equal(gguf_quantize_rows(types[t], x + r * N, 1, N, w + r * N,
                                                a + r * bytes / R, AMN_SIMD_SCALAR),
                             AMN_OK);
        for (amn_simd lv = AMN_SIMD_AVX2; lv <= gguf_simd_max(); lv++) {
            memset(b, 0x3C, bytes);
            for (int r = 0; r < R; r++)
                assert_int_equal(
                    gguf_quantize_rows(types[t], x + r * N, 1, N, w + r * N, b + r * bytes / R, lv),
                    AMN_OK);
            if (!rows_agree(types[t], a, b, bytes))
                fail_msg("%s with weights: %s differs from scalar", tr->name, amn_simd_name(lv));
        }
        /* Without: Q6_K's block path (x^2 weights). */
        if (types[t] == GGUF_TYPE_Q6_K) {
            assert_int_equal(gguf_quantize_simd(types[t], x, R * N, a, AMN_SIMD_SCALAR), AMN_OK);
            for (amn_simd lv = AMN_SIMD_AVX2; lv <= gguf_simd_max(); lv++) {
                memset(b, 0x3C, bytes);
                assert_int_equal(gguf_quantize_simd(types[t], x, R * N, b, lv), AMN_OK);
                if (!rows_agree(types[t], a, b, bytes))
                    fail_msg("%s: %s differs from scalar", tr->name, amn_simd_name(lv));
            }
        }
        free(a);
        free(b);
    }
    free(x);
    free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_paths_agree)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
