/* GPTQ kernels against the reference goldens (every file of gptq_reference/, 4- and
 * 8-bit) and against the independent numpy packer's data (every file of fixtures/gptq/:
 * 2-, 3-, 4-, 8-bit, act-order, per-channel, every scale dtype, wrapping zero
 * points), on every SIMD path, output dtype and row split. Goldens are
 * [in][out]; the kernels write [out][in]. */
#include "gptq_kernels.h"
#include "quant_golden.h"

static const amn_dtype outs[3] = {AMN_DTYPE_BF16, AMN_DTYPE_F32, AMN_DTYPE_F16};

/* The paths to check: scalar, AVX2, and AVX-512 where the CPU has it or in
 * the build against SIMDe's portable AVX-512 (test_gptq_kernels_avx512emu). */
#ifdef AMN_GPTQ_AVX512_EMULATE
#define HAVE_AVX512() true
#else
#define HAVE_AVX512() (amn_simd_level() >= AMN_SIMD_AVX512)
#endif

static size_t gptq_levels(amn_simd *lv) {
    size_t n = qg_levels(lv);
    if (HAVE_AVX512() && n == 2) lv[n++] = AMN_SIMD_AVX512;
    return n;
}

static void run_layout(const char *path, const gptq_layout *l, const uint8_t *gf32,
                       const uint8_t *gbf, size_t *values) {
    const uint64_t rows = l->out, cols = l->in;
    amn_simd lv[3];
    const size_t nl = gptq_levels(lv);
    for (size_t li = 0; li < nl; li++)
        for (size_t oi = 0; oi < 3; oi++) {
            const size_t es = amn_dtype_size(outs[oi]);
            uint8_t *exp = qg_expected(gf32, gbf, rows, cols, true, outs[oi]);
            uint8_t *got = malloc(rows * cols * es);
            assert_non_null(got);
            const uint64_t steps[4] = {rows, 17, 5, 1};
            for (int si = 0; si < 4; si++) {
                memset(got, 0xa5, rows * cols * es);
                for (uint64_t r = 0; r < rows; r += steps[si]) {
                    const uint64_t n = rows - r < steps[si] ? rows - r : steps[si];
                    assert_int_equal(
                        gptq_dequant_rows(l, r, n, outs[oi], got + r * cols * es, lv[li]), 0);
                }
                char what[1200];
                snprintf(what, sizeof what, "%s %s %s%s step %llu", path, amn_simd_name(lv[li]),
                         amn_dtype_name(outs[oi]), l->gidx ? " g_idx" : "",
                         (unsigned long long)steps[si]);
                assert_int_equal(qg_diff(what, got, exp, rows * cols, es, cols), 0);
                *values += rows * cols;
            }
            free(got);
            free(exp);
        }
}

static void check_file(const char *path, size_t *values, unsigned *bits_seen) {
    size_t size = 0;
    uint8_t *buf = amn_test_read_file(path, &size);
    assert_non_null(buf);
    assert_true(size >= 56);
    assert_memory_equal(buf, "AMNQ", 4);
    assert_int_equal(qg_u32(buf, 4), 2);
    const unsigned bits = qg_u32(buf, 8);
    const uint64_t gs = qg_u32(buf, 12), in = qg_u32(buf, 16), out = qg_u32(buf, 20);
    const uint32_t sdt = qg_u32(buf, 24), has_g = qg_u32(buf, 28);
    const uint64_t qwl = qg_u32(buf, 32), scl = qg_u32(buf, 36), qzl = qg_u32(buf, 40),
                   gil = qg_u32(buf, 44), bl = qg_u32(buf, 48), fl = qg_u32(buf, 52);
    assert_int_equal(56 + qwl + scl + qzl + gil + bl + fl, size);
    assert_true(bits == 2 || bits == 3 || bits == 4 || bits == 8);
    assert_true(gs > 0 && in % gs == 0);
    const uint64_t G = in / gs;
    const amn_dtype st = qg_scale_dtype(sdt);
    assert_int_equal(qwl, in * bits / 32 * out * 4);
    assert_int_equal(scl, G * out * amn_dtype_size(st));
    assert_int_equal(qzl, G * (out * bits / 32) * 4);
    assert_int_equal(gil, has_g ? in * 4 : 0);
    assert_int_equal(bl, in * out * 2);
    assert_int_equal(fl, in * out * 4);
    const uint8_t *p = buf + 56;
    gptq_layout l = {.bits = bits,
                     .in = in,
                     .out = out,
                     .groups = G,
                     .group_size = gs,
                     .qweight = p,
                     .scales = p + qwl,
                     .qzeros = p + qwl + scl,
                     .stype = st,
                     .zeros_v1 = true};
    const uint8_t *gbf = p + qwl + scl + qzl + gil, *gf32 = gbf + bl;
    int32_t *gidx = NULL;
    bool sequential = true;
    if (has_g) {
        gidx = malloc(in * 4);
        assert_non_null(gidx);
        memcpy(gidx, p + qwl + scl + qzl, in * 4);
        amn_le_to_host_n(gidx, 4, in); /* the file's int32 in host order */
        for (uint64_t i = 0; i < in; i++) {
            assert_true(gidx[i] >= 0 && (uint64_t)gidx[i] < G);
            if ((uint64_t)gidx[i] != i / gs) sequential = false;
        }
    }
    /* Act-order data goes through g_idx only; sequential data both ways. */
    if (sequential) run_layout(path, &l, gf32, gbf, values);
    if (gidx) {
        l.gidx = gidx;
        run_layout(path, &l, gf32, gbf, values);
    }
    *bits_seen |= 1u << bits;
    free(gidx);
    free(buf);
}

static void test_gptq_goldens(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/gptq_reference", ref);
    static char paths[QG_MAX_FILES][1024];
    const size_t n = qg_list(dir, paths);
    assert_true(n >= 3);
    size_t values = 0;
    unsigned bits = 0;
    for (size_t i = 0; i < n; i++) check_file(paths[i], &values, &bits);
    assert_int_equal(bits, (1u << 4) | (1u << 8));
    fprintf(stderr, "gptq: %zu reference files, %zu values compared bit for bit\n", n, values);
}

static void test_gptq_lowbit_packer(void **state) {
    (void)state;
    static char paths[QG_MAX_FILES][1024];
    const size_t n = qg_list(AMN_SOURCE_DIR "/fixtures/gptq", paths);
    assert_true(n >= 8);
    size_t values = 0;
    unsigned bits = 0;
    for (size_t i = 0; i < n; i++) check_file(paths[i], &values, &bits);
    assert_int_equal(bits, (1u << 2) | (1u << 3) | (1u << 4) | (1u << 8));
    fprintf(stderr, "gptq: %zu packer files, %zu values compared bit for bit\n", n, values);
}

/* v2 checkpoints store zero points as they are: no +1. The tensors are
 * written little-endian, as in a checkpoint, so that the kernel reads the
 * values the expected results are computed from on any host. */
static void test_gptq_v2_zeros(void **state) {
    (void)state;
    const uint64_t in = 16, out = 8;
    uint32_t qw[2 * 8], qz = 0xfedcba98u, idx;
    uint16_t sc[8];
    uint8_t qwb[sizeof qw], qzb[4], scb[sizeof sc];
    for (idx = 0; idx < 16; idx++) {
        qw[idx] = 0x76543210u * (idx + 1);
        amn_store_le32(qwb + idx * 4, qw[idx]);
    }
    amn_store_le32(qzb, qz);
    for (idx = 0; idx < 8; idx++) {
        sc[idx] = amn_f32_to_f16(0.5f + (float)idx);
        amn_store_le16(scb + idx * 2, sc[idx]);
    }
    gptq_layout l = {.bits = 4,
                     .in = in,
                     .out = out,
                     .groups = 1,
                     .group_size = in,
                     .qweight = qwb,
                     .qzeros = qzb,
                     .scales = scb,
                     .stype = AMN_DTYPE_F16,
                     .zeros_v1 = false};
    uint8_t got[16 * 8 * 4];
    amn_simd lv[3];
    const size_t nl = gptq_levels(lv);
    for (size_t li = 0; li < nl; li++) {
        assert_int_equal(gptq_dequant_rows(&l, 0, out, AMN_DTYPE_F32, got, lv[li]), 0);
        for (uint64_t o = 0; o < out; o++)
            for (uint64_t i = 0; i < in; i++) {
                const int32_t q = (int32_t)((qw[(i / 8) * out + o] >> (4 * (i % 8))) & 15);
                const int32_t z = (int32_t)((qz >> (4 * o)) & 15);
                const float e = amn_f16_to_f32(sc[o]) * (float)(q - z);
                assert_int_equal(amn_load_le32(got + (o * in + i) * 4), amn_f32_bits(e));
            }
    }
}

/* x86-64 only (AMN_SIMD_X86): the vector paths compared with the scalar one. */
#if AMN_SIMD_X86
/* The vector path against the scalar path on random data and scales (with
 * and without NaN, infinite, huge and subnormal ones), for every bit width,
 * with g_idx and without, group sizes that are and are not a multiple of 8,
 * row counts that leave partial blocks (8-bit: 4 rows), 8-bit inputs that
 * leave 4 values after the last whole unit, qweight at every alignment, and
 * row splits that cut blocks; every call writes into a buffer between guards. */
static void test_gptq_paths_random(void **state) {
    (void)state;
    if (amn_simd_level() < AMN_SIMD_AVX2) skip();
    amn_simd lv[3];
    const size_t nl = gptq_levels(lv);
    /* bits, in, out, group size, act-order */
    const unsigned shapes[][5] = {{4, 64, 72, 32, 0},   {4, 64, 72, 32, 1},   {4, 48, 40, 12, 0},
                                  {4, 40, 16, 40, 0},   {2, 48, 48, 16, 1},   {2, 64, 80, 64, 0},
                                  {3, 64, 96, 32, 0},   {3, 96, 64, 8, 1},    {3, 64, 32, 64, 0},
                                  {8, 36, 76, 12, 0},   {8, 36, 76, 12, 1},   {8, 64, 44, 16, 0},
                                  {4, 256, 160, 32, 1}, {4, 128, 48, 128, 0}, {8, 36, 32, 12, 1}};
    const amn_dtype stypes[3] = {AMN_DTYPE_BF16, AMN_DTYPE_F16, AMN_DTYPE_F32};
    const uint64_t steps[6] = {0, 11, 47, 1, 7, 130}; /* 0: all rows at once */
    uint32_t x = 24681357u;
    size_t values = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
        for (size_t si = 0; si < 6; si++) {
            const unsigned bits = shapes[k][0];
            const uint64_t in = shapes[k][1], out = shapes[k][2], gs = shapes[k][3], G = in / gs;
            const amn_dtype st = stypes[si % 3];
            const bool specials = si >= 3;
            const uint64_t qwn = in * bits / 32 * out, qzn = G * (out * bits / 32);
            /* qweight at every offset from 32-byte alignment, 4-aligned or not. */
            const size_t qoff = (4 * (k + si)) % 32 + (k % 5 == 4 ? 2 : 0);
            uint8_t *qwbuf = aligned_alloc(64, (qwn * 4 + 64 + 63) / 64 * 64);
            uint32_t *qw = malloc(qwn * 4), *qz = malloc(qzn * 4);
            uint8_t *sc = malloc(G * out * 4);
            int32_t *gidx = malloc(in * 4);
            assert_true(qwbuf && qw && qz && sc && gidx);
            for (uint64_t i = 0; i < qwn; i++) qw[i] = qg_lcg(&x);
            memcpy(qwbuf + qoff, qw, qwn * 4);
            for (uint64_t i = 0; i < qzn; i++) qz[i] = qg_lcg(&x);
            for (uint64_t i = 0; i < G * out; i++) qg_put_scale(sc, i, st, specials, &x);
            for (uint64_t i = 0; i < in; i++) gidx[i] = (int32_t)(qg_lcg(&x) % G);
            const gptq_layout l = {.bits = bits,
                                   .in = in,
                                   .out = out,
                                   .groups = G,
                                   .group_size = gs,
                                   .qweight = qwbuf + qoff,
                                   .qzeros = (const uint8_t *)qz,
                                   .scales = sc,
                                   .stype = st,
                                   .gidx = shapes[k][4] ? gidx : NULL,
                                   .zeros_v1 = (k + si) % 2 == 0};
            for (size_t oi = 0; oi < 3; oi++) {
                const size_t es = amn_dtype_size(outs[oi]);
                uint8_t *a = malloc(in * out * es), *b = malloc(in * out * es);
                assert_true(a && b);
                assert_int_equal(gptq_dequant_rows(&l, 0, out, outs[oi], a, AMN_SIMD_SCALAR), 0);
                for (size_t pv = 0; pv < (nl - 1) * (sizeof steps / sizeof *steps); pv++) {
                    const size_t pi = pv % (sizeof steps / sizeof *steps);
                    const amn_simd level = lv[1 + pv / (sizeof steps / sizeof *steps)];
                    const uint64_t step = steps[pi] ? steps[pi] : out;
                    memset(b, 0xa5, in * out * es);
                    for (uint64_t r0 = 0; r0 < out; r0 += step) {
                        const uint64_t n = out - r0 < step ? out - r0 : step;
                        const size_t len = n * in * es;
                        uint8_t *g = qg_guarded(len);
                        assert_int_equal(gptq_dequant_rows(&l, r0, n, outs[oi], g, level), 0);
                        qg_guarded_done(g, len, b + r0 * in * es);
                    }
                    if (memcmp(a, b, in * out * es) != 0) {
                        char what[200];
                        snprintf(
                            what, sizeof what,
                            "%s: %u-bit in %llu out %llu group %llu%s scales %s%s qweight+%zu -> "
                            "%s step %llu",
                            amn_simd_name(level), bits, (unsigned long long)in,
                            (unsigned long long)out, (unsigned long long)gs, l.gidx ? " g_idx" : "",
                            amn_dtype_name(st), specials ? " (specials)" : "", qoff,
                            amn_dtype_name(outs[oi]), (unsigned long long)step);
                        assert_int_equal(qg_diff(what, b, a, in * out, es, in), 0);
                    }
                    values += in * out;
                }
                free(a);
                free(b);
            }
            free(qwbuf);
            free(qw);
            free(qz);
            free(sc);
            free(gidx);
        }
    fprintf(stderr, "gptq: %zu random values compared with the scalar path\n", values);
}
#endif /* AMN_SIMD_X86 */

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gptq_goldens),
        cmocka_unit_test(test_gptq_lowbit_packer),
        cmocka_unit_test(test_gptq_v2_zeros),
#if AMN_SIMD_X86
        cmocka_unit_test(test_gptq_paths_random),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
