/* IQ3_S's vector search against its scalar one (ggml's
 * quantize_row_iq3_s_impl step by step; test_gguf_quant compares that with
 * ggml's bytes): on rows built to reach every branch of the search, the
 * AVX2 path (and any path above it) writes the scalar path's bytes, block
 * for block.
 *
 * The rows: LLM-like values at scales from 2^-30 to 2^30; groups of 4 with
 * zeros (zero weights: many candidates at the same distance, the tie rule
 * decides); values on a coarse lattice (exact ties between candidates);
 * constant blocks; one non-zero value per block; tiny values whose squares
 * are subnormal or zero (every distance 0: the first candidate wins);
 * huge values whose squares overflow (distances Inf or NaN: the fallback
 * to the first listed point); NaN and Inf inside a group; signed zeros and
 * all-zero blocks; values at the codes' rounding points; binary32's
 * extremes; and rows at scale steps 2^-20 .. 2^15. */
#include <math.h>
#include <stdbool.h>
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

enum { QK = 256, BYTES = 110, ROWS = 96 };

/* A heavy-tailed value: a uniform sum over a uniform, like weights. */
static float heavy(void) {
    const float n = amn_test_uniform() + amn_test_uniform() + amn_test_uniform();
    return n / (0.25f + fabsf(amn_test_uniform()));
}

/* Superblock r of the test data (QK values at x). */
static void fill(int r, float *x) {
    const float s = ldexpf(1.0f, (int)(amn_test_next() % 61) - 30);
    for (int i = 0; i < QK; i++) x[i] = s * heavy();
    switch (r % 12) {
    case 0: /* plain */
        break;
    case 1: /* zeros in most groups: zero weights, ties */
        for (int i = 0; i < QK; i++)
            if (amn_test_next() % 3 == 0) x[i] = (amn_test_next() & 1) ? 0.0f : -0.0f;
        break;
    case 2: /* a coarse lattice: exact ties */
        for (int i = 0; i < QK; i++) x[i] = (float)((int)(amn_test_next() % 9) - 4) * 0.125f;
        break;
    case 3: /* constant blocks, and one value per block */
        for (int i = 0; i < QK; i++) x[i] = (i / 32) % 2 ? (i % 32 == 5 ? s : 0.0f) : s;
        break;
    case 4: /* squares subnormal or zero */
        for (int i = 0; i < QK; i++) x[i] = ldexpf(heavy(), -75 - (int)(amn_test_next() % 80));
        break;
    case 5: /* squares overflow */
        for (int i = 0; i < QK; i++) x[i] = ldexpf(heavy(), 60 + (int)(amn_test_next() % 68));
        break;
    case 6: /* NaN / Inf inside some groups */
        for (int i = 0; i < QK; i += 1 + (int)(amn_test_next() % 29))
            x[i] = amn_test_next() % 3 == 0 ? NAN : (amn_test_next() & 1 ? INFINITY : -INFINITY);
        break;
    case 7: /* signed zeros, all-zero blocks between non-zero ones */
        for (int i = 0; i < QK; i++)
            if ((i / 32) % 3 != 1) x[i] = (i & 1) ? -0.0f : 0.0f;
        break;
    case 8: /* one large value per group, the rest small: far off the grid */
        for (int i = 0; i < QK; i++) x[i] = i % 4 == 0 ? s * 40 * heavy() : s * 0.01f * heavy();
        break;
    case 9: /* values at the codes' rounding points (x * id = 2l + 1 + 0.5) */
        for (int i = 0; i < QK; i++) x[i] = s * (float)(2 * (int)(amn_test_next() % 8) + 2) / 15.0f;
        break;
    case 10: /* the extremes of binary32 */
        for (int i = 0; i < QK; i++)
            x[i] = (amn_test_next() & 1 ? 3.4e38f : 1.2e-38f) * amn_test_uniform();
        break;
    default: /* a scale step per row */
        for (int i = 0; i < QK; i++) x[i] = ldexpf(heavy(), r / 12 * 5 - 20);
        break;
    }
}

static void test_paths_agree_iq3_s(void **state) {
    (void)state;
    if (gguf_simd_max() < AMN_SIMD_AVX2) skip();
    float *x = malloc((size_t)ROWS * QK * sizeof(float));
    uint8_t *a = malloc((size_t)ROWS * BYTES), *b = malloc((size_t)ROWS * BYTES);
    assert_non_null(x);
    assert_non_null(a);
    assert_non_null(b);
    for (int r = 0; r < ROWS; r++) fill(r, x + (size_t)r * QK);
    assert_int_equal(
        gguf_quantize_simd(GGUF_TYPE_IQ3_S, x, (uint64_t)ROWS * QK, a, AMN_SIMD_SCALAR), AMN_OK);
    for (amn_simd lv = AMN_SIMD_AVX2; lv <= gguf_simd_max(); lv++) {
        memset(b, 0x5A, (size_t)ROWS * BYTES);
        assert_int_equal(gguf_quantize_simd(GGUF_TYPE_IQ3_S, x, (uint64_t)ROWS * QK, b, lv),
                         AMN_OK);
        int bad = 0;
        for (int r = 0; r < ROWS; r++)
            if (memcmp(a + (size_t)r * BYTES, b + (size_t)r * BYTES, BYTES) != 0) {
                if (!bad)
                    fprintf(stderr, "IQ3_S %s: superblock %d (kind %d) differs from scalar\n",
                            amn_simd_name(lv), r, r % 12);
                bad++;
            }
        assert_int_equal(bad, 0);
    }
    free(x);
    free(a);
    free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths_agree_iq3_s),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
