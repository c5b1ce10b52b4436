/* The mxfp4, ctensors and nvfp4 kernels driven directly on random data:
 * the AVX2 path gives the scalar path's bytes for every output dtype, odd
 * shapes, any row range (partial MXFP4 groups, ranges across experts),
 * special scales (E8M0 0/254/255, E4M3 NaN and subnormals, non-finite and
 * overflowing integer scales), and writes nothing outside its range
 * (guard bytes on both sides). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/dtype.h"
#include "amn/simd.h"
#include "amn_test.h"
#include "ct_kernels.h"
#include "mxfp4_kernels.h"
#include "nvfp4_kernels.h"

#define GUARD 64

static uint32_t rs = 12345u;
static uint32_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 17;
    rs ^= rs << 5;
    return rs;
}
static uint8_t *rbytes(size_t n) {
    uint8_t *p = malloc(n + 8);
    for (size_t i = 0; i < n + 8; i++) p[i] = (uint8_t)rnd();
    return p;
}

typedef void (*runner)(const void *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst,
                       amn_simd lv);

/* The AVX-512 path runs natively where the CPU has it, and always in the
 * build against SIMDe's portable AVX-512 (test_scheme_kernels_avx512emu). */
#ifdef AMN_SCHEME_AVX512_EMULATE
#define HAVE_AVX512() true
#else
#define HAVE_AVX512() (amn_simd_level() >= AMN_SIMD_AVX512)
#endif

/* Rows [row0, row0 + nrows) of `rowelems` each on every path, compared. */
static void both(const char *what, runner run, const void *l, uint64_t rows, uint64_t rowelems) {
    if (amn_simd_level() < AMN_SIMD_AVX2) {
        fprintf(stderr, "SKIP %s: no AVX2\n", what);
        return;
    }
    const int levels = HAVE_AVX512() ? 2 : 1;
    static const amn_dtype outs[3] = {AMN_DTYPE_BF16, AMN_DTYPE_F16, AMN_DTYPE_F32};
    for (int k = 0; k < 6; k++) {
        const uint64_t row0 = k == 0 ? 0 : rnd() % rows;
        const uint64_t nrows = k == 0 ? rows : 1 + rnd() % (rows - row0);
        for (int o = 0; o < 3; o++) {
            const size_t n = (size_t)(nrows * rowelems * amn_dtype_size(outs[o]));
            uint8_t *a = malloc(n + 2 * GUARD), *b = malloc(n + 2 * GUARD);
            memset(a, 0xA5, n + 2 * GUARD);
            memset(b, 0xA5, n + 2 * GUARD);
            run(l, row0, nrows, outs[o], a + GUARD, AMN_SIMD_SCALAR);
            for (int lv = 1; lv <= levels; lv++) {
                memset(b, 0xA5, n + 2 * GUARD);
                run(l, row0, nrows, outs[o], b + GUARD, (amn_simd)(AMN_SIMD_SCALAR + lv));
                for (size_t i = 0; i < GUARD; i++)
                    if (b[i] != 0xA5 || b[GUARD + n + i] != 0xA5 || a[i] != 0xA5 ||
                        a[GUARD + n + i] != 0xA5)
                        fail_msg("%s: write outside rows %llu+%llu", what, (unsigned long long)row0,
                                 (unsigned long long)nrows);
                for (size_t i = 0; i < n; i++)
                    if (a[GUARD + i] != b[GUARD + i])
                        fail_msg("%s to %s, rows %llu+%llu: byte %zu differs (scalar 0x%02x, %s "
                                 "0x%02x)",
                                 what, amn_dtype_name(outs[o]), (unsigned long long)row0,
                                 (unsigned long long)nrows, i, a[GUARD + i],
                                 lv == 1 ? "avx2" : "avx512", b[GUARD + i]);
            }
            free(a);
            free(b);
        }
    }
}

static void run_mx(const void *l, uint64_t r0, uint64_t n, amn_dtype out, void *dst, amn_simd lv) {
    mxfp4_dequant_rows(l, r0, n, out, dst, lv);
}
static void run_ct(const void *l, uint64_t r0, uint64_t n, amn_dtype out, void *dst, amn_simd lv) {
    assert_int_equal(ct_dequant_rows(l, r0, n, out, dst, lv), 0);
}
static void run_nv(const void *l, uint64_t r0, uint64_t n, amn_dtype out, void *dst, amn_simd lv) {
    nvfp4_dequant_rows(l, r0, n, out, dst, lv);
}

static void run_bmm(const void *l, uint64_t r0, uint64_t n, amn_dtype out, void *dst, amn_simd lv) {
    assert_int_equal(nvfp4_bmm_rows(l, r0, n, out, dst, lv), 0);
}

/* Scale modes: 0 any byte; 1 bytes 2..252 (the AVX2 path's 16-row tiles)
 * with 0, 1, 253, 254 and 255 in a few tiles; 2 byte = input row % 256,
 * so every scale meets every code. */
static void test_mxfp4(void **state) {
    (void)state;
    static const uint64_t shapes[][4] = {{1, 8, 1, 0},
                                         {2, 13, 3, 0},
                                         {3, 24, 2, 0},
                                         {1, 67, 5, 0},
                                         {2, 5, 1, 0},
                                         {1, 16, 1, 1},
                                         {2, 32, 2, 1},
                                         {1, 59, 3, 1},
                                         {2, 48, 2, 1},
                                         {3, 96, 1, 1},
                                         {1, 256, 2, 2},
                                         /* several bands of input rows and windows of groups */
                                         {2, 600, 6, 1},
                                         {1, 523, 5, 0},
                                         {2, 528, 5, 1},
                                         /* 16 x 16 blocks of scales transposed, and tails */
                                         {1, 48, 18, 1},
                                         {2, 37, 33, 1},
                                         {1, 64, 16, 2}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const uint64_t E = shapes[s][0], R = shapes[s][1], G = shapes[s][2], n = E * R * G;
        uint8_t *blocks = rbytes(n * 16), *scales = rbytes(n);
        if (shapes[s][3] == 0) {
            scales[0] = 0, scales[1 % n] = 255, scales[2 % n] = 254;
        } else if (shapes[s][3] == 1) {
            for (uint64_t i = 0; i < n; i++) scales[i] = (uint8_t)(2 + rnd() % 251);
            static const uint8_t special[5] = {0, 1, 253, 254, 255};
            for (uint64_t i = 0; i < n; i += 37) scales[i] = special[rnd() % 5];
        } else {
            for (uint64_t i = 0; i < n; i++) scales[i] = (uint8_t)((i / G) % R);
        }
        const mxfp4_layout l = {
            .blocks = blocks, .scales = scales, .experts = E, .rows = R, .groups = G};
        char what[64];
        snprintf(what, sizeof what, "mxfp4 [%llu,%llu,%llu] scales %d", (unsigned long long)E,
                 (unsigned long long)R, (unsigned long long)G, (int)shapes[s][3]);
        both(what, run_mx, &l, E * G * 32, R);
        /* The same with each expert's scales transposed once (the plugin's
         * cache): random ranges pass the end of the tensor several times,
         * which frees the buffers, and ranges across experts hold two. */
        mxfp4_layout lc = l;
        lc.cache = mxfp4_scale_cache_new(E, R, G);
        if (R >= 16) assert_non_null(lc.cache);
        strncat(what, ", cached", sizeof what - strlen(what) - 1);
        both(what, run_mx, &lc, E * G * 32, R);
        mxfp4_scale_cache_free(lc.cache);
        /* The streaming copy (whole tensors) into a 64-byte aligned buffer,
         * where rows are 32-byte multiples: every dtype, one expert at a
         * time from a row inside the first group. */
        for (int o = 0; o < 3 && AMN_SIMD_X86 && amn_simd_level() >= AMN_SIMD_AVX2 && R % 16 == 0;
             o++) {
            static const amn_dtype outs[3] = {AMN_DTYPE_BF16, AMN_DTYPE_F16, AMN_DTYPE_F32};
            const size_t rowbytes = R * amn_dtype_size(outs[o]), K = G * 32;
            const size_t len = E * K * rowbytes;
            uint8_t *want = malloc(len), *got = aligned_alloc(64, (len + 63) / 64 * 64);
            mxfp4_dequant_rows(&l, 0, E * K, outs[o], want, AMN_SIMD_SCALAR);
            for (uint64_t e = 0; e < E; e++)
                mxfp4_expert_rows_avx2(&l, e, NULL, 5, K, outs[o], got + (e * K + 5) * rowbytes,
                                       true);
            for (uint64_t e = 0; e < E; e++)
                if (memcmp(want + (e * K + 5) * rowbytes, got + (e * K + 5) * rowbytes,
                           (K - 5) * rowbytes) != 0)
                    fail_msg("%s to %s, streamed: expert %llu differs", what,
                             amn_dtype_name(outs[o]), (unsigned long long)e);
            free(want), free(got);
        }
        free(blocks), free(scales);
    }
}

typedef struct mx_job {
    const mxfp4_layout *l;
    uint64_t row0, nrows, step;
    uint8_t *dst;
} mx_job;

/* Rows [row0, row0 + nrows) in calls of `step` rows, as one worker of the
 * converter takes its slices. */
static void *mx_worker(void *arg) {
    const mx_job *j = arg;
    const size_t rowbytes = j->l->rows * 2;
    for (uint64_t q = j->row0; q < j->row0 + j->nrows; q += j->step) {
        const uint64_t n = j->row0 + j->nrows - q < j->step ? j->row0 + j->nrows - q : j->step;
        mxfp4_dequant_rows(j->l, q, n, AMN_DTYPE_BF16, j->dst + (q - j->row0) * rowbytes,
                           amn_simd_level());
    }
    return NULL;
}

/* The cache shared by threads, and full: four threads decode interleaved
 * 32-row slices of five experts at once (so experts are being filled while
 * others read them, and calls find every slot taken), then one expert with
 * every slot held by a caller that has not released it: the bytes are the
 * scalar path's whichever way each call read its scales. */
static void test_mxfp4_cache_threads(void **state) {
    (void)state;
    if (amn_simd_level() < AMN_SIMD_AVX2) {
        fprintf(stderr, "SKIP mxfp4 cache: no AVX2\n");
        return;
    }
    const uint64_t E = 5, R = 80, G = 4, K = G * 32, n = E * R * G;
    uint8_t *blocks = rbytes(n * 16), *scales = rbytes(n);
    for (uint64_t i = 0; i < n; i++) scales[i] = (uint8_t)(2 + rnd() % 251);
    mxfp4_layout l = {.blocks = blocks, .scales = scales, .experts = E, .rows = R, .groups = G};
    const size_t len = E * K * R * 2;
    uint8_t *want = malloc(len), *got = malloc(len);
    mxfp4_dequant_rows(&l, 0, E * K, AMN_DTYPE_BF16, want, AMN_SIMD_SCALAR);
    l.cache = mxfp4_scale_cache_new(E, R, G);
    assert_non_null(l.cache);
    for (int round = 0; round < 3; round++) {
        memset(got, 0, len);
        pthread_t t[4];
        mx_job jobs[4];
        const uint64_t per = E * K / 4;
        for (int i = 0; i < 4; i++) {
            jobs[i] = (mx_job){&l, (uint64_t)i * per, per, 32, got + (size_t)i * per * R * 2};
            assert_int_equal(pthread_create(&t[i], NULL, mx_worker, &jobs[i]), 0);
        }
        for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
        if (memcmp(want, got, len) != 0)
            fail_msg("mxfp4 cache, 4 threads, round %d differs", round);
    }
    const uint8_t *held[4];
    for (uint64_t e = 0; e < 4; e++) {
        held[e] = mxfp4_scales_acquire(l.cache, &l, e);
        assert_non_null(held[e]);
    }
    assert_null(mxfp4_scales_acquire(l.cache, &l, 4)); /* every slot in use */
    memset(got, 0, len);
    mxfp4_dequant_rows(&l, 4 * K, K, AMN_DTYPE_BF16, got + 4 * K * R * 2, amn_simd_level());
    if (memcmp(want + 4 * K * R * 2, got + 4 * K * R * 2, K * R * 2) != 0)
        fail_msg("mxfp4 cache full: expert 4 differs");
    for (uint64_t e = 0; e < 4; e++) mxfp4_scales_release(l.cache, held[e], 0);
    mxfp4_scale_cache_free(l.cache);
    free(want), free(got), free(blocks), free(scales);
}

static void test_ctensors(void **state) {
    (void)state;
    static const amn_dtype stypes[3] = {AMN_DTYPE_BF16, AMN_DTYPE_F16, AMN_DTYPE_F32};
    static const struct {
        bool packed;
        unsigned bits;
        uint64_t out, in, gs;
        int zkind;
        bool act;
        uint64_t br; /* block strategy: rows per scale row (0: one each) */
    } cases[] = {{true, 4, 9, 96, 32, 0, false, 0},
                 {true, 4, 20, 100, 100, 1, false, 0},
                 {true, 4, 17, 64, 16, 2, true, 0},
                 {true, 8, 11, 36, 12, 1, false, 0},
                 {true, 4, 5, 48, 12, 0, false, 0},
                 {true, 2, 7, 64, 32, 1, false, 0},
                 {true, 2, 9, 40, 8, 2, false, 0},
                 {true, 2, 6, 72, 24, 0, true, 0},
                 {false, 8, 13, 40, 8, 2, false, 0},
                 {false, 8, 6, 24, 24, 0, false, 0},
                 {false, 8, 21, 40, 16, 2, false, 8},
                 {true, 4, 20, 40, 32, 0, false, 16},
                 {true, 2, 11, 56, 12, 0, false, 3},
                 {true, 4, 24, 204, 40, 1, true, 0},
                 {false, 8, 16, 44, 11, 2, true, 0},
                 {true, 8, 19, 40, 8, 0, true, 0},
                 {true, 2, 12, 72, 24, 1, true, 0},
                 {true, 4, 32, 64, 12, 2, false, 5},
                 /* per-column groups on the AVX-512 path: up to 32 groups (one
                  * permute), 33-64 (two), 65-128 (four), and 129 (the AVX2
                  * path's), with rows whose length is not a multiple of 16 */
                 {true, 4, 5, 1000, 40, 0, true, 0},
                 {true, 4, 6, 1032, 24, 1, true, 0},
                 {true, 4, 3, 2048, 32, 2, true, 0},
                 {true, 4, 3, 520, 8, 1, true, 0},
                 {true, 4, 3, 1792, 16, 2, true, 0},
                 {true, 4, 4, 1032, 8, 0, true, 0},
                 {false, 8, 3, 1290, 10, 2, true, 0},
                 {true, 2, 3, 1280, 10, 1, false, 0},
                 {true, 2, 4, 608, 19, 1, false, 0},
                 {true, 8, 5, 330, 10, 2, true, 0},
                 {false, 8, 4, 712, 12, 2, true, 0},
                 {true, 4, 7, 400, 13, 0, false, 0},
                 /* per-column groups to BF16 on AVX2 (whole runs of 8 words of
                  * 8 rows by columns): each encoding and zero-point layout,
                  * rows past the first 8 (which hold the special scales), a
                  * remainder of columns for the row path */
                 {true, 4, 27, 1000, 40, 2, true, 0},
                 {true, 4, 16, 128, 32, 0, true, 0},
                 {true, 8, 19, 330, 10, 1, true, 0},
                 {true, 2, 17, 300, 20, 1, true, 0},
                 {true, 2, 24, 256, 32, 0, true, 0},
                 {false, 8, 18, 100, 25, 2, true, 0},
                 {false, 8, 16, 96, 12, 0, true, 0},
                 /* uniform groups of 8k columns, the last one short */
                 {true, 4, 10, 100, 32, 1, false, 0},
                 {false, 8, 7, 51, 16, 2, false, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int st = 0; st < 3; st++) {
            const uint64_t O = cases[c].out, I = cases[c].in,
                           G = (I + cases[c].gs - 1) / cases[c].gs;
            const unsigned pf = 32 / cases[c].bits;
            const uint64_t words = (I + pf - 1) / pf;
            uint8_t *w = rbytes(cases[c].packed ? O * words * 4 : O * I);
            const size_t es = amn_dtype_size(stypes[st]);
            uint8_t *s = malloc(O * G * es);
            for (uint64_t i = 0; i < O * G; i++) {
                const float f = (float)((int)(rnd() % 2001) - 1000) * 1e-4f;
                const uint16_t h =
                    stypes[st] == AMN_DTYPE_F16 ? amn_f32_to_f16(f) : amn_f32_to_bf16(f);
                if (es == 4)
                    memcpy(s + 4 * i, &f, 4);
                else
                    memcpy(s + 2 * i, &h, 2);
            }
            /* An overflowing scale, an infinite one and a NaN one (rows 0..2);
             * the overflowing one at row 9 too, in a block of finite rows. */
            const float special[3] = {60000.0f, amn_bits_f32(0x7f800000u),
                                      amn_bits_f32(0x7fc00001u)};
            for (int k = 0; k < 3 && (uint64_t)k < O; k++) {
                const uint16_t h = stypes[st] == AMN_DTYPE_F16 ? amn_f32_to_f16(special[k])
                                                               : amn_f32_to_bf16(special[k]);
                if (es == 4)
                    memcpy(s + 4 * (uint64_t)k * G, &special[k], 4);
                else
                    memcpy(s + 2 * (uint64_t)k * G, &h, 2);
                if (k == 0 && O > 9) memcpy(s + 9 * G * es, s, es);
            }
            uint8_t *z = rbytes(((O + pf - 1) / pf) * G * 4 + O * G);
            int32_t *gidx = NULL;
            if (cases[c].act) {
                gidx = malloc(I * 4);
                for (uint64_t i = 0; i < I; i++) gidx[i] = (int32_t)(i / cases[c].gs);
                for (uint64_t i = I - 1; i > 0; i--) {
                    const uint64_t j = rnd() % (i + 1);
                    const int32_t t = gidx[i];
                    gidx[i] = gidx[j], gidx[j] = t;
                }
            }
            const ct_layout l = {.weight = w,
                                 .packed = cases[c].packed,
                                 .bits = cases[c].bits,
                                 .out = O,
                                 .in = I,
                                 .words = words,
                                 .scales = s,
                                 .stype = stypes[st],
                                 .groups = G,
                                 .group_size = cases[c].gs,
                                 .block_rows = cases[c].br,
                                 .zeros = z,
                                 .zkind = (ct_zkind)cases[c].zkind,
                                 .gidx = gidx};
            char what[96];
            snprintf(what, sizeof what, "ctensors %s%u [%llu,%llu] g%llu z%d%s %s",
                     cases[c].packed ? "packed " : "I8 ", cases[c].bits, (unsigned long long)O,
                     (unsigned long long)I, (unsigned long long)cases[c].gs, cases[c].zkind,
                     cases[c].act ? " act-order" : "", amn_dtype_name(stypes[st]));
            both(what, run_ct, &l, O, I);
            free(w), free(s), free(z), free(gidx);
        }
}

static void test_nvfp4(void **state) {
    (void)state;
    static const uint64_t shapes[][2] = {{1, 16}, {7, 48}, {13, 8224}, {3, 32}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int ct = 0; ct < 2; ct++) {
            const uint64_t R = shapes[s][0], I = shapes[s][1];
            uint8_t *w = rbytes(R * I / 2), *sc = rbytes(R * I / 16);
            sc[0] = 0x7f; /* NaN */
            if (R * I / 16 > 3) sc[1] = 0x01, sc[2] = 0x80, sc[3] = 0x7e;
            /* A normal second scale, inf (0 * inf is the default NaN), and a
             * NaN whose payload fills the low 16 bits (rounding it without
             * the NaN test would carry into the sign). */
            const float second[3] = {ct ? 2688.0f : 3.7e-4f, amn_bits_f32(0x7f800000u),
                                     amn_bits_f32(0x7fbfffffu)};
            const nvfp4_layout l = {.weight = w,
                                    .scales = sc,
                                    .rows = R,
                                    .in = I,
                                    .second = second,
                                    .rows_per_second = (R + 2) / 3,
                                    .divide = ct,
                                    .neg_zero = ct};
            char what[64];
            snprintf(what, sizeof what, "nvfp4 %s [%llu,%llu]", ct ? "ctensors" : "modelopt",
                     (unsigned long long)R, (unsigned long long)I);
            both(what, run_nv, &l, R, I);
            free(w), free(sc);
        }
}

/* Fused experts in the batched layout [E][in / 2][outs]: one scale per
 * expert or one for all, output widths with and without a vector tail. */
static void test_nvfp4_bmm(void **state) {
    (void)state;
    static const uint64_t shapes[][3] = {{1, 16, 1}, {3, 32, 40}, {2, 48, 13}, {2, 64, 517}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (uint64_t ns = 1; ns <= 3; ns++) {
            const uint64_t E = shapes[s][0], I = shapes[s][1], O = shapes[s][2];
            uint8_t *w = rbytes(E * I / 2 * O), *sc = rbytes(E * I / 16 * O);
            sc[0] = 0x7f; /* NaN */
            if (E * I / 16 * O > 3) sc[1] = 0x01, sc[2] = 0x80, sc[3] = 0x7e;
            float second[3] = {3.7e-4f, 2.5e-3f, 1.0f};
            if (ns > 1) /* inf, or a NaN with a payload in its low 16 bits */
                second[E - 1] = amn_bits_f32(ns == 2 ? 0x7f800000u : 0x7fbfffffu);
            const nvfp4_bmm_layout l = {.weight = w,
                                        .scales = sc,
                                        .experts = E,
                                        .in = I,
                                        .outs = O,
                                        .second = second,
                                        .n_second = ns == 1 ? 1 : E};
            char what[64];
            snprintf(what, sizeof what, "nvfp4 batched [%llu,%llu,%llu]", (unsigned long long)E,
                     (unsigned long long)I, (unsigned long long)O);
            both(what, run_bmm, &l, E * I, O);
            free(w), free(sc);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mxfp4), cmocka_unit_test(test_mxfp4_cache_threads),
        cmocka_unit_test(test_ctensors), cmocka_unit_test(test_nvfp4),
        cmocka_unit_test(test_nvfp4_bmm)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
