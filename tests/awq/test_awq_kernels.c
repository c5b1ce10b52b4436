/* AWQ kernels against the reference golden (every file of awq_reference/), on every
 * SIMD path, output dtype and row split (odd splits exercise the vector
 * path's unaligned head and tail rows). Goldens are [in][out]; the kernels
 * write [out][in]. */
#include "awq_kernels.h"
#include "quant_golden.h"

static const amn_dtype outs[3] = {AMN_DTYPE_BF16, AMN_DTYPE_F32, AMN_DTYPE_F16};

static void check_file(const char *path, size_t *values) {
    size_t size = 0;
    uint8_t *buf = amn_test_read_file(path, &size);
    assert_non_null(buf);
    assert_true(size >= 48);
    assert_memory_equal(buf, "AMNA", 4);
    assert_int_equal(qg_u32(buf, 4), 2);
    assert_int_equal(qg_u32(buf, 8), 4);
    const uint64_t gs = qg_u32(buf, 12), in = qg_u32(buf, 16), out = qg_u32(buf, 20);
    const amn_dtype st = qg_scale_dtype(qg_u32(buf, 24));
    const uint64_t qwl = qg_u32(buf, 28), scl = qg_u32(buf, 32), qzl = qg_u32(buf, 36),
                   bl = qg_u32(buf, 40), fl = qg_u32(buf, 44);
    assert_int_equal(48 + qwl + scl + qzl + bl + fl, size);
    assert_true(gs > 0 && in % gs == 0 && out % 8 == 0);
    const uint64_t G = in / gs;
    assert_int_equal(qwl, in * out / 8 * 4);
    assert_int_equal(scl, G * out * amn_dtype_size(st));
    assert_int_equal(qzl, G * out / 8 * 4);
    const uint8_t *p = buf + 48;
    const awq_layout l = {.in = in,
                          .out = out,
                          .groups = G,
                          .group_size = gs,
                          .qweight = p,
                          .scales = p + qwl,
                          .qzeros = p + qwl + scl,
                          .stype = st};
    const uint8_t *gbf = p + qwl + scl + qzl, *gf32 = gbf + bl;
    const uint64_t rows = out, cols = in;
    amn_simd lv[2];
    const size_t nl = qg_levels(lv);
    for (size_t li = 0; li < nl; li++)
        for (size_t oi = 0; oi < 3; oi++) {
            const size_t es = amn_dtype_size(outs[oi]);
            uint8_t *exp = qg_expected(gf32, gbf, rows, cols, true, outs[oi]);
            uint8_t *got = malloc(rows * cols * es);
            assert_non_null(got);
            const uint64_t steps[5] = {rows, 67, 13, 3, 1};
            for (int si = 0; si < 5; si++) {
                memset(got, 0xa5, rows * cols * es);
                for (uint64_t r = 0; r < rows; r += steps[si]) {
                    const uint64_t n = rows - r < steps[si] ? rows - r : steps[si];
                    assert_int_equal(
                        awq_dequant_rows(&l, r, n, outs[oi], got + r * cols * es, lv[li]), 0);
                }
                char what[1200];
                snprintf(what, sizeof what, "%s %s %s step %llu", path, amn_simd_name(lv[li]),
                         amn_dtype_name(outs[oi]), (unsigned long long)steps[si]);
                assert_int_equal(qg_diff(what, got, exp, rows * cols, es, cols), 0);
                *values += rows * cols;
            }
            free(got);
            free(exp);
        }
    free(buf);
}

static void test_awq_goldens(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/awq_reference", ref);
    static char paths[QG_MAX_FILES][1024];
    const size_t n = qg_list(dir, paths);
    assert_true(n >= 1);
    size_t values = 0;
    for (size_t i = 0; i < n; i++) check_file(paths[i], &values);
    fprintf(stderr, "awq: %zu files, %zu values compared bit for bit\n", n, values);
}

/* x86-64 only (AMN_SIMD_X86): the vector paths compared with the scalar one. */
#if AMN_SIMD_X86
/* Shapes the golden lacks (in not a multiple of 8, a group size that is not,
 * out not a multiple of 64): the vector path must match the scalar path. */
static void test_awq_paths_agree(void **state) {
    (void)state;
    if (amn_simd_level() < AMN_SIMD_AVX2) skip();
    const uint64_t shapes[][3] = {{20, 72, 20}, {20, 72, 4}, {64, 136, 16}, {24, 8, 8}};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        const uint64_t in = shapes[k][0], out = shapes[k][1], gs = shapes[k][2], G = in / gs;
        uint32_t *qw = malloc(in * out / 8 * 4), *qz = malloc(G * out / 8 * 4);
        uint16_t *sc = malloc(G * out * 2);
        assert_true(qw && qz && sc);
        uint32_t x = 12345u;
        for (uint64_t i = 0; i < in * out / 8; i++) qw[i] = x = x * 1664525u + 1013904223u;
        for (uint64_t i = 0; i < G * out / 8; i++) qz[i] = x = x * 1664525u + 1013904223u;
        for (uint64_t i = 0; i < G * out; i++)
            sc[i] = amn_f32_to_bf16((float)((x = x * 1664525u + 1013904223u) >> 8) * 0x1p-30f);
        const awq_layout l = {.in = in,
                              .out = out,
                              .groups = G,
                              .group_size = gs,
                              .qweight = (const uint8_t *)qw,
                              .qzeros = (const uint8_t *)qz,
                              .scales = (const uint8_t *)sc,
                              .stype = AMN_DTYPE_BF16};
        for (size_t oi = 0; oi < 3; oi++) {
            const size_t es = amn_dtype_size(outs[oi]);
            uint8_t *a = malloc(in * out * es), *b = malloc(in * out * es);
            assert_true(a && b);
            assert_int_equal(awq_dequant_rows(&l, 0, out, outs[oi], a, AMN_SIMD_SCALAR), 0);
            for (uint64_t r0 = 0; r0 < out; r0 += 11) {
                const uint64_t n = out - r0 < 11 ? out - r0 : 11;
                assert_int_equal(
                    awq_dequant_rows(&l, r0, n, outs[oi], b + r0 * in * es, AMN_SIMD_AVX2), 0);
            }
            assert_memory_equal(a, b, in * out * es);
            free(a);
            free(b);
        }
        free(qw);
        free(qz);
        free(sc);
    }
}

/* The vector paths against the scalar path on random data and special
 * scales, over shapes that reach every edge of the lookup-table path (word
 * counts that are not a multiple of the 16-word block or of 8, inputs after
 * the last run of 32, one group or many, group sizes of 32 and more) and of
 * the arithmetic path, with row splits that cut words. */
static void test_awq_paths_random(void **state) {
    (void)state;
    if (amn_simd_level() < AMN_SIMD_AVX2) skip();
    const uint64_t shapes[][3] = {{64, 136, 32},  {96, 1032, 96}, {256, 264, 64}, {72, 200, 72},
                                  {128, 8, 128},  {160, 520, 32}, {40, 24, 40},   {32, 64, 32},
                                  {192, 256, 64}, {48, 40, 16},   {24, 88, 8}};
    const amn_dtype stypes[3] = {AMN_DTYPE_BF16, AMN_DTYPE_F16, AMN_DTYPE_F32};
    const uint64_t steps[6] = {0, 11, 47, 1, 7, 130}; /* 0: all rows at once */
    uint32_t x = 987654321u;
    size_t values = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
        for (size_t si = 0; si < 6; si++) {
            const uint64_t in = shapes[k][0], out = shapes[k][1], gs = shapes[k][2], G = in / gs;
            const amn_dtype st = stypes[si % 3];
            const bool specials = si >= 3;
            uint32_t *qw = malloc(in * out / 8 * 4), *qz = malloc(G * out / 8 * 4);
            uint8_t *sc = malloc(G * out * 4);
            assert_true(qw && qz && sc);
            for (uint64_t i = 0; i < in * out / 8; i++) qw[i] = qg_lcg(&x);
            for (uint64_t i = 0; i < G * out / 8; i++) qz[i] = qg_lcg(&x);
            for (uint64_t i = 0; i < G * out; i++) qg_put_scale(sc, i, st, specials, &x);
            const awq_layout l = {.in = in,
                                  .out = out,
                                  .groups = G,
                                  .group_size = gs,
                                  .qweight = (const uint8_t *)qw,
                                  .qzeros = (const uint8_t *)qz,
                                  .scales = sc,
                                  .stype = st};
            for (size_t oi = 0; oi < 3; oi++) {
                const size_t es = amn_dtype_size(outs[oi]);
                uint8_t *a = malloc(in * out * es), *b = malloc(in * out * es);
                assert_true(a && b);
                assert_int_equal(awq_dequant_rows(&l, 0, out, outs[oi], a, AMN_SIMD_SCALAR), 0);
                for (size_t pi = 0; pi < sizeof steps / sizeof *steps; pi++) {
                    const uint64_t step = steps[pi] ? steps[pi] : out;
                    memset(b, 0xa5, in * out * es);
                    for (uint64_t r0 = 0; r0 < out; r0 += step) {
                        /* Each call into its own buffer between guards: no byte
                         * outside its rows may change. */
                        const uint64_t n = out - r0 < step ? out - r0 : step;
                        const size_t len = n * in * es;
                        uint8_t *g = qg_guarded(len);
                        assert_int_equal(awq_dequant_rows(&l, r0, n, outs[oi], g, AMN_SIMD_AVX2),
                                         0);
                        qg_guarded_done(g, len, b + r0 * in * es);
                    }
                    if (memcmp(a, b, in * out * es) != 0) {
                        char what[200];
                        snprintf(what, sizeof what,
                                 "in %llu out %llu group %llu scales %s%s -> %s step %llu",
                                 (unsigned long long)in, (unsigned long long)out,
                                 (unsigned long long)gs, amn_dtype_name(st),
                                 specials ? " (specials)" : "", amn_dtype_name(outs[oi]),
                                 (unsigned long long)step);
                        assert_int_equal(qg_diff(what, b, a, in * out, es, in), 0);
                    }
                    values += in * out;
                }
                /* Streaming stores (what whole tensors take), into a 64-byte
                 * aligned buffer: all rows, then the rows from 11 on. */
                for (uint64_t r0 = 0; r0 < out; r0 += 11) {
                    const size_t len = (out - r0) * in * es;
                    uint8_t *st_out = aligned_alloc(64, (len + 63) / 64 * 64);
                    assert_true(st_out != NULL);
                    assert_int_equal(awq_rows_avx2(&l, r0, out - r0, outs[oi], st_out, true), 0);
                    if (memcmp(a + r0 * in * es, st_out, len) != 0) {
                        char what[200];
                        snprintf(what, sizeof what,
                                 "streamed: in %llu out %llu group %llu scales %s -> %s from row "
                                 "%llu",
                                 (unsigned long long)in, (unsigned long long)out,
                                 (unsigned long long)gs, amn_dtype_name(st),
                                 amn_dtype_name(outs[oi]), (unsigned long long)r0);
                        assert_int_equal(
                            qg_diff(what, st_out, a + r0 * in * es, (out - r0) * in, es, in), 0);
                    }
                    free(st_out);
                    if (r0 == 11) break;
                }
                free(a);
                free(b);
            }
            free(qw);
            free(qz);
            free(sc);
        }
    fprintf(stderr, "awq: %zu random values compared with the scalar path\n", values);
}
#endif /* AMN_SIMD_X86 */

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_awq_goldens),
#if AMN_SIMD_X86
        cmocka_unit_test(test_awq_paths_agree),
        cmocka_unit_test(test_awq_paths_random),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
