/* FP8 kernels against the reference goldens (every file of fp8_reference/), on every
 * SIMD path, output dtype and row split; and the vector path against the
 * scalar one on every byte value and awkward scales. */
#include "fp8_kernels.h"
#include "quant_golden.h"

static const amn_dtype outs[3] = {AMN_DTYPE_BF16, AMN_DTYPE_F32, AMN_DTYPE_F16};

static void check_file(const char *path, size_t *values) {
    size_t size = 0;
    uint8_t *buf = amn_test_read_file(path, &size);
    assert_non_null(buf);
    assert_true(size >= 40);
    assert_memory_equal(buf, "AMNF", 4);
    assert_int_equal(qg_u32(buf, 4), 2);
    const uint32_t scheme = qg_u32(buf, 8), sdt = qg_u32(buf, 12);
    const uint64_t rows = qg_u32(buf, 16), cols = qg_u32(buf, 20);
    const uint64_t wl = qg_u32(buf, 24), sl = qg_u32(buf, 28), bl = qg_u32(buf, 32),
                   fl = qg_u32(buf, 36);
    assert_int_equal(40 + wl + sl + bl + fl, size);
    assert_int_equal(wl, rows * cols);
    assert_int_equal(bl, rows * cols * 2);
    assert_int_equal(fl, rows * cols * 4);
    fp8_layout l = {.weight = buf + 40,
                    .wtype = AMN_DTYPE_F8_E4M3,
                    .rows = rows,
                    .cols = cols,
                    .scale = buf + 40 + wl,
                    .stype = qg_scale_dtype(sdt)};
    const size_t ss = amn_dtype_size(l.stype);
    switch (scheme) {
    case 0:
        l.block_rows = l.block_cols = 128;
        l.grid_cols = (cols + 127) / 128;
        assert_int_equal(sl, (rows + 127) / 128 * l.grid_cols * ss);
        break;
    case 1:
        l.block_rows = rows;
        l.block_cols = cols;
        l.grid_cols = 1;
        assert_int_equal(sl, ss);
        break;
    default:
        assert_int_equal(scheme, 2);
        l.block_rows = 1;
        l.block_cols = cols;
        l.grid_cols = 1;
        assert_int_equal(sl, rows * ss);
        break;
    }
    const uint8_t *gbf = buf + 40 + wl + sl, *gf32 = gbf + bl;
    amn_simd lv[2];
    const size_t nl = qg_levels(lv);
    for (size_t li = 0; li < nl; li++)
        for (size_t oi = 0; oi < 3; oi++) {
            const size_t es = amn_dtype_size(outs[oi]);
            uint8_t *exp = qg_expected(gf32, gbf, rows, cols, false, outs[oi]);
            uint8_t *got = malloc(rows * cols * es);
            assert_non_null(got);
            /* Whole tensor, then odd row splits: results must not depend on them. */
            const uint64_t steps[3] = {rows, 37, 1};
            for (int si = 0; si < 3; si++) {
                memset(got, 0xa5, rows * cols * es);
                for (uint64_t r = 0; r < rows; r += steps[si]) {
                    const uint64_t n = rows - r < steps[si] ? rows - r : steps[si];
                    fp8_dequant_rows(&l, r, n, outs[oi], got + r * cols * es, lv[li]);
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

static void test_fp8_goldens(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/fp8_reference", ref);
    static char paths[QG_MAX_FILES][1024];
    const size_t n = qg_list(dir, paths);
    assert_true(n >= 6);
    size_t values = 0;
    for (size_t i = 0; i < n; i++) check_file(paths[i], &values);
    fprintf(stderr, "fp8: %zu files, %zu values compared bit for bit\n", n, values);
}

/* x86-64 only (AMN_SIMD_X86): the vector paths compared with the scalar one. */
#if AMN_SIMD_X86
/* Every byte, both formats, every output dtype, scales that stress NaN, Inf,
 * signed zero, subnormal and overflow; runs of every length up to 40 so the
 * vector body and the scalar tail both see each byte. */
static void test_fp8_paths_agree(void **state) {
    (void)state;
    if (amn_simd_level() < AMN_SIMD_AVX2) skip();
    const uint32_t scale_bits[] = {0x3f800000, 0x3e000000, 0x40490fdb, 0xc0000000, 0x00000000,
                                   0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f812345,
                                   0xffc00001, 0x00000001, 0x00400000, 0x7f7fffff, 0x43e00000,
                                   0x3b800000,
                                   /* 2^120 and above: the scale times 256
                                    * would overflow; just below it does not */
                                   0x7b800000, 0xfb800000, 0x7b7fffff, 0x7c000000,
                                   /* NaNs whose payload fills the low 16 bits:
                                    * rounding them without the NaN test would
                                    * carry into the exponent */
                                   0x7f80ffff, 0xffbf8001};
    uint8_t src[256 + 40];
    for (int i = 0; i < 256 + 40; i++) src[i] = (uint8_t)(i * 7 + 3);
    for (int i = 0; i < 256; i++) src[i] = (uint8_t)i;
    uint8_t a[(256 + 40) * 4], b[(256 + 40) * 4];
    for (int fmt = 0; fmt < 2; fmt++)
        for (size_t si = 0; si < sizeof scale_bits / sizeof *scale_bits; si++)
            for (int oi = 0; oi < 3; oi++) {
                float s;
                memcpy(&s, &scale_bits[si], 4);
                const amn_dtype wt = fmt ? AMN_DTYPE_F8_E5M2 : AMN_DTYPE_F8_E4M3;
                const size_t es = amn_dtype_size(outs[oi]);
                for (size_t off = 0; off < 256; off += 16) {
                    for (size_t n = 0; n <= 40; n++) {
                        fp8_layout l = {.weight = src + off,
                                        .wtype = wt,
                                        .rows = 1,
                                        .cols = n,
                                        .scale = (const uint8_t *)&scale_bits[si],
                                        .stype = AMN_DTYPE_F32,
                                        .block_rows = 1,
                                        .block_cols = n ? n : 1,
                                        .grid_cols = 1};
                        fp8_dequant_rows(&l, 0, 1, outs[oi], a, AMN_SIMD_SCALAR);
                        fp8_dequant_rows(&l, 0, 1, outs[oi], b, AMN_SIMD_AVX2);
                        if (memcmp(a, b, n * es) != 0) {
                            for (size_t k = 0; k < n; k++)
                                if (memcmp(a + k * es, b + k * es, es))
                                    fail_msg("fmt %d scale 0x%08x out %s byte 0x%02x differs", fmt,
                                             scale_bits[si], amn_dtype_name(outs[oi]),
                                             src[off + k]);
                        }
                    }
                }
                /* The scalar decode itself is the core's, value for value. */
                for (int v = 0; v < 256; v++) {
                    float w = fmt ? amn_f8e5m2_to_f32((uint8_t)v) : amn_f8e4m3_to_f32((uint8_t)v);
                    float y = fp8_apply(w, s);
                    if (w == w && s == s) {
                        float ref = w * s;
                        assert_memory_equal(&y, &ref, 4);
                    }
                }
            }
}
#endif /* AMN_SIMD_X86 */

/* A 128x128-block layout with partial edge blocks (rows and cols not
 * multiples of 128): each element must use the scale of its own block. */
static void test_fp8_partial_blocks(void **state) {
    (void)state;
    const uint64_t rows = 300, cols = 200, gr = 3, gc = 2;
    uint8_t *w = malloc(rows * cols);
    const float sc[6] = {0.5f, 2.0f, -4.0f, 0.25f, 8.0f, 1.5f};
    uint8_t scb[6 * 4]; /* the scales as a checkpoint stores them */
    for (int i = 0; i < 6; i++) amn_store_le_f32(scb + i * 4, sc[i]);
    assert_non_null(w);
    for (uint64_t i = 0; i < rows * cols; i++) w[i] = (uint8_t)((i * 31 + 7) & 0xff);
    fp8_layout l = {.weight = w,
                    .wtype = AMN_DTYPE_F8_E4M3,
                    .rows = rows,
                    .cols = cols,
                    .scale = scb,
                    .stype = AMN_DTYPE_F32,
                    .block_rows = 128,
                    .block_cols = 128,
                    .grid_cols = gc};
    (void)gr;
    uint8_t *out = malloc(rows * cols * 4);
    assert_non_null(out);
    amn_simd lv[2];
    const size_t nl = qg_levels(lv);
    for (size_t li = 0; li < nl; li++) {
        fp8_dequant_rows(&l, 0, rows, AMN_DTYPE_F32, out, lv[li]);
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t c = 0; c < cols; c++) {
                const float x = amn_f8e4m3_to_f32(w[r * cols + c]);
                const float e = x != x ? x : x * sc[(r / 128) * gc + c / 128];
                assert_int_equal(amn_load_le32(out + (r * cols + c) * 4), amn_f32_bits(e));
            }
    }
    free(out);
    free(w);
}

/* Blocks narrower than a vector step and rows of more blocks than the
 * vector path takes scales for at once (334 of 3 columns, in spans of 256):
 * every element scaled by its own block's scale on every path, to every
 * output dtype; block rows of finite scales and ones with an infinite or a
 * NaN scale (whose payload fills the low 16 bits). */
static void test_fp8_narrow_blocks(void **state) {
    (void)state;
    const uint64_t rows = 7, cols = 1000, br = 2, bc = 3, gc = (cols + bc - 1) / bc;
    const uint64_t gr = (rows + br - 1) / br;
    uint8_t *w = malloc(rows * cols);
    float *sc = malloc(gr * gc * 4);
    uint8_t *scb = malloc(gr * gc * 4); /* sc as a checkpoint stores it */
    assert_true(w && sc && scb);
    for (uint64_t i = 0; i < rows * cols; i++) w[i] = (uint8_t)((i * 97 + 11) & 0xff);
    for (uint64_t i = 0; i < gr * gc; i++) sc[i] = (float)((int)(i % 17) - 8) * 0.375f;
    sc[1 * gc + 300] = amn_bits_f32(0x7f800000u);
    sc[2 * gc + 5] = amn_bits_f32(0x7f80ffffu);
    for (uint64_t i = 0; i < gr * gc; i++) amn_store_le_f32(scb + i * 4, sc[i]);
    for (int fmt = 0; fmt < 2; fmt++)
        for (size_t oi = 0; oi < 3; oi++) {
            const fp8_layout l = {.weight = w,
                                  .wtype = fmt ? AMN_DTYPE_F8_E5M2 : AMN_DTYPE_F8_E4M3,
                                  .rows = rows,
                                  .cols = cols,
                                  .scale = scb,
                                  .stype = AMN_DTYPE_F32,
                                  .block_rows = br,
                                  .block_cols = bc,
                                  .grid_cols = gc};
            const size_t es = amn_dtype_size(outs[oi]), len = rows * cols * es;
            uint8_t *want = malloc(len), *got = malloc(len);
            assert_true(want && got);
            for (uint64_t r = 0; r < rows; r++)
                for (uint64_t c = 0; c < cols; c++) {
                    const float x = fmt ? amn_f8e5m2_to_f32(w[r * cols + c])
                                        : amn_f8e4m3_to_f32(w[r * cols + c]);
                    qs_store1(fp8_apply(x, sc[(r / br) * gc + c / bc]), outs[oi],
                              want + (r * cols + c) * es);
                }
            amn_simd lv[2];
            const size_t nl = qg_levels(lv);
            for (size_t li = 0; li < nl; li++) {
                memset(got, 0xa5, len);
                fp8_dequant_rows(&l, 0, rows, outs[oi], got, lv[li]);
                if (memcmp(want, got, len) != 0)
                    fail_msg("fmt %d out %s level %d: differs", fmt, amn_dtype_name(outs[oi]),
                             (int)lv[li]);
            }
            free(want);
            free(got);
        }
    free(sc);
    free(scb);
    free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp8_goldens),
#if AMN_SIMD_X86
        cmocka_unit_test(test_fp8_paths_agree),
#endif
        cmocka_unit_test(test_fp8_partial_blocks),
        cmocka_unit_test(test_fp8_narrow_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
