/* Reproducible rows for the suites that compare a kernel's paths with each
 * other: a xorshift32 stream (one per test program, so a failing row can be
 * made again) and the hostile values those suites feed every path. */
#ifndef AMN_TEST_ROWS_H
#define AMN_TEST_ROWS_H

#include <math.h>
#include <stdint.h>

static uint32_t amn_test_rng = 2463534242u;

static inline uint32_t amn_test_next(void) {
    amn_test_rng ^= amn_test_rng << 13;
    amn_test_rng ^= amn_test_rng >> 17;
    amn_test_rng ^= amn_test_rng << 5;
    return amn_test_rng;
}

/* Uniform in [-1, 1), 2^-23 apart. */
static inline float amn_test_uniform(void) {
    return (float)(amn_test_next() >> 8) / 8388608.0f - 1.0f;
}

/* Value i of a row of kind `kind` in place of v: 1 infinities of both signs,
 * 2 NaN, 3 huge values whose squares overflow, 4 subnormals and the smallest
 * normals, 5 signed zeros, 6 small multiples of 1/4 (ties between codes);
 * any other kind keeps v. */
static inline float amn_test_hostile(int kind, int i, float v) {
    switch (kind) {
    case 1:
        return i % 13 == 0 ? ((i % 2) ? INFINITY : -INFINITY) : v;
    case 2:
        return i % 7 == 0 ? NAN : v;
    case 3:
        return ldexpf(amn_test_uniform(), 100 + (int)(amn_test_next() % 27));
    case 4:
        return ldexpf(amn_test_uniform(), -144 + (int)(amn_test_next() % 24));
    case 5:
        return (i % 2) ? -0.0f : 0.0f;
    case 6:
        return (float)((int)(amn_test_next() % 9) - 4) * 0.25f;
    default:
        return v;
    }
}

#endif
