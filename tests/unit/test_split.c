/* How the converter cuts a stream of rows into rounds and worker slices
 * (core/src/split.c): every slice but a tensor's last starts and ends on a
 * multiple of the scheme's row_quantum, the slices cover the rows exactly
 * once, in order, as evenly as whole quanta allow. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "split_internal.h"

static void test_round_units(void **state) {
    (void)state;
    /* MXFP4 rows of 11 520 bytes: 91 fit in a worker's MiB, 182 in two. */
    assert_int_equal(amni_round_units(91, 32, 1), 64);
    assert_int_equal(amni_round_units(182, 32, 2), 128); /* 64 + 64, never 96 + 64 */
    assert_int_equal(amni_round_units(182, 32, 1), 160);
    assert_int_equal(amni_round_units(50, 32, 2), 32); /* one quantum: one worker's */
    assert_int_equal(amni_round_units(128, 32, 4), 128);
    assert_int_equal(amni_round_units(20, 32, 2), 20); /* less than a quantum fits */
    assert_int_equal(amni_round_units(91, 0, 2), 91);
    assert_int_equal(amni_round_units(91, 1, 2), 91);
    assert_int_equal(amni_round_units(0, 32, 2), 1); /* never no progress */
    /* A plugin's quantum is a hint, whatever its size: no product overflows. */
    assert_int_equal(amni_round_units(182, UINT64_MAX, 2), 182);
    assert_int_equal(amni_round_units(UINT64_MAX, 1ull << 63, 2), 1ull << 63);
    assert_int_equal(amni_round_units(UINT64_MAX, 3, 4), UINT64_MAX - UINT64_MAX % 12);
}

static void test_split_units(void **state) {
    (void)state;
    uint64_t counts[8];
    for (uint64_t n = 1; n <= 300; n++)
        for (unsigned parts = 1; parts <= 8; parts++)
            for (uint64_t q = 0; q <= 40; q += (q < 4 ? 1 : 9)) {
                const unsigned got = amni_split_units(n, parts, q, counts);
                const uint64_t qq = q ? q : 1;
                const uint64_t quanta = (n + qq - 1) / qq;
                assert_true(got >= 1 && got <= parts);
                assert_int_equal(got, quanta < parts ? quanta : parts);
                uint64_t sum = 0, lo = UINT64_MAX, hi = 0;
                for (unsigned k = 0; k < got; k++) {
                    assert_true(counts[k] > 0);
                    if (k + 1 < got) {
                        assert_int_equal(counts[k] % qq, 0);
                        lo = counts[k] < lo ? counts[k] : lo;
                        hi = counts[k] > hi ? counts[k] : hi;
                    }
                    sum += counts[k];
                }
                assert_int_equal(sum, n);
                if (got > 2) assert_true(hi - lo <= qq); /* even, to a quantum */
                /* The last slice is never longer than a full one plus a quantum. */
                if (got > 1) assert_true(counts[got - 1] <= hi + qq);
            }
}

static void test_split_examples(void **state) {
    (void)state;
    uint64_t c[8];
    /* MXFP4 on two workers: a round of 128 rows, 64 + 64; an odd number
     * of quanta, 96 + 64 (never 80 + 80). */
    assert_int_equal(amni_split_units(128, 2, 32, c), 2);
    assert_int_equal(c[0], 64);
    assert_int_equal(c[1], 64);
    assert_int_equal(amni_split_units(160, 2, 32, c), 2);
    assert_int_equal(c[0], 96);
    assert_int_equal(c[1], 64);
    /* A tensor's last round: 70 rows, 64 + a short 6. */
    assert_int_equal(amni_split_units(70, 2, 32, c), 2);
    assert_int_equal(c[0], 64);
    assert_int_equal(c[1], 6);
    /* No quantum: as before, 91 + 91. */
    assert_int_equal(amni_split_units(182, 2, 1, c), 2);
    assert_int_equal(c[0], 91);
    assert_int_equal(c[1], 91);
    /* Huge quanta: one slice of everything. */
    assert_int_equal(amni_split_units(182, 2, UINT64_MAX, c), 1);
    assert_int_equal(c[0], 182);
    assert_int_equal(amni_split_units(UINT64_MAX, 2, 1ull << 63, c), 2);
    assert_int_equal(c[0], 1ull << 63);
    assert_int_equal(c[1], UINT64_MAX - (1ull << 63));
    /* Fewer quanta than workers: fewer slices. */
    assert_int_equal(amni_split_units(40, 4, 32, c), 2);
    assert_int_equal(c[0], 32);
    assert_int_equal(c[1], 8);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_round_units),
                                       cmocka_unit_test(test_split_units),
                                       cmocka_unit_test(test_split_examples)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
