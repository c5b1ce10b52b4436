/* bitsandbytes kernels against every golden of bnb_reference/ (NF4, NF4
 * double quant, FP4, INT8) on every SIMD path, output dtype and element /
 * row split; the constant tables against the checkpoints' own; and the
 * encoders' byte-exact round trip: each golden decoded, re-encoded with the
 * golden's own statistics, gives its bytes back. */
#include <math.h>

#include "bnb_kernels.h"
#include "quant_golden.h"
#include "sha256.h"

static const amn_dtype outs[3] = {AMN_DTYPE_BF16, AMN_DTYPE_F32, AMN_DTYPE_F16};

/* The paths to check: scalar, AVX2, and AVX-512 where the CPU has it or
 * when this test is built against SIMDe's emulation. */
static size_t levels(amn_simd *lv) {
    size_t n = qg_levels(lv);
#ifdef AMN_BNB_AVX512_EMULATE
    lv[n++] = AMN_SIMD_AVX512;
#else
    if (amn_simd_level() >= AMN_SIMD_AVX512) lv[n++] = AMN_SIMD_AVX512;
#endif
    return n;
}

static void check_4bit(const char *path, const uint8_t *buf, size_t size, size_t *values) {
    const uint32_t fmt = qg_u32(buf, 8), n = qg_u32(buf, 12), bs = qg_u32(buf, 16);
    const uint32_t wl = qg_u32(buf, 20), al = qg_u32(buf, 24), ql = qg_u32(buf, 28),
                   nal = qg_u32(buf, 32), nql = qg_u32(buf, 36), bl = qg_u32(buf, 40),
                   fl = qg_u32(buf, 44);
    const float offset = amn_load_le_f32(buf + 48);
    assert_int_equal((uint64_t)52 + wl + al + ql + nal + nql + bl + fl, size);
    assert_int_equal(wl, n / 2);
    assert_int_equal(ql, 64);
    assert_int_equal(bl, n * 2);
    assert_int_equal(fl, n * 4);
    const bool nested = fmt == 2;
    const uint64_t blocks = (n + bs - 1) / bs;
    assert_int_equal(al, blocks * (nested ? 1 : 4));
    const uint8_t *w = buf + 52, *a = w + wl, *q = a + al, *na = q + ql, *nq = na + nal,
                  *gbf = nq + nql, *gf = gbf + bl;
    float qm[16], nmap[256];
    memcpy(qm, q, 64);
    amn_le_to_host_n(qm, 4, 16); /* the file's little-endian binary32 */
    bnb4_layout l = {.weight = w, .n = n, .block = bs, .absmax = a, .nested = nested};
    bnb4_codebook(qm, l.codebook);
    /* The stored map is one of the two the encoder writes. */
    const bool fp4 = memcmp(qm, bnb_fp4_map, 64) == 0;
    assert_true(fp4 || memcmp(qm, bnb_nf4_map, 64) == 0);
    if (nested) {
        assert_int_equal(nql, 1024);
        memcpy(nmap, nq, 1024);
        amn_le_to_host_n(nmap, 4, 256);
        assert_memory_equal(nmap, bnb_dynamic_map, 1024);
        /* upstream infers nested blocks as ceil(blocks / K) */
        const uint64_t K = nal / 4;
        l.nested_block = (blocks + K - 1) / K;
        l.nested_absmax = na;
        l.nested_map = nmap;
        l.nested_offset = offset;
    }
    amn_simd lv[3];
    const size_t nlv = levels(lv);
    for (size_t li = 0; li < nlv; li++)
        for (size_t oi = 0; oi < 3; oi++) {
            const size_t es = amn_dtype_size(outs[oi]);
            uint8_t *exp = qg_expected(gf, gbf, 1, n, false, outs[oi]);
            uint8_t *got = malloc((size_t)n * es);
            assert_non_null(got);
            const uint64_t steps[5] = {n, 64, 17, 5, 1};
            for (int si = 0; si < 5; si++) {
                memset(got, 0xa5, (size_t)n * es);
                for (uint64_t e = 0; e < n; e += steps[si]) {
                    const uint64_t c = n - e < steps[si] ? n - e : steps[si];
                    uint8_t *g = qg_guarded((size_t)c * es);
                    bnb4_dequant(&l, e, c, outs[oi], g, lv[li]);
                    qg_guarded_done(g, (size_t)c * es, got + e * es);
                }
                char what[1200];
                snprintf(what, sizeof what, "%s %s %s step %llu", path, amn_simd_name(lv[li]),
                         amn_dtype_name(outs[oi]), (unsigned long long)steps[si]);
                assert_int_equal(qg_diff(what, got, exp, n, es, n), 0);
                *values += n;
            }
            free(got);
            free(exp);
        }
    /* Round trip: the F32 golden re-encoded with the golden's block scales
     * gives the packed bytes back; with double quant the recovered scales
     * re-encode to the stored codes. */
    uint8_t *packed = calloc(n / 2, 1);
    assert_non_null(packed);
    for (uint64_t b = 0; b < blocks; b++) {
        const uint64_t e0 = b * bs, c = n - e0 < bs ? n - e0 : bs;
        float x[4096];
        memcpy(x, gf + e0 * 4, c * 4);
        amn_le_to_host_n(x, 4, c);
        bnb4_encode(fp4 ? BNB_FP4 : BNB_NF4, x, c, bnb4_block_scale(&l, b), 0, packed + e0 / 2);
        if (nested) {
            const float nab = amn_load_le_f32(l.nested_absmax + (b / l.nested_block) * 4);
            const float scaled = (bnb4_block_scale(&l, b) - offset) * (1.0f / nab);
            assert_int_equal(bnb_dynamic_code(bnb_dynamic_map, scaled), a[b]);
        }
    }
    assert_memory_equal(packed, w, n / 2);
    free(packed);
}

static void check_int8(const char *path, const uint8_t *buf, size_t size, size_t *values) {
    const uint32_t rows = qg_u32(buf, 12), cols = qg_u32(buf, 16), wl = qg_u32(buf, 20),
                   sl = qg_u32(buf, 24), bl = qg_u32(buf, 28), fl = qg_u32(buf, 32);
    assert_int_equal((uint64_t)36 + wl + sl + bl + fl, size);
    assert_int_equal(wl, rows * cols);
    assert_int_equal(sl, rows * 4);
    const uint8_t *w = buf + 36, *s = w + wl, *gbf = s + sl, *gf = gbf + bl;
    const bnb8_layout l = {.weight = (const int8_t *)w, .scb = s, .rows = rows, .cols = cols};
    amn_simd lv[3];
    const size_t nlv = levels(lv);
    for (size_t li = 0; li < nlv; li++)
        for (size_t oi = 0; oi < 3; oi++) {
            const size_t es = amn_dtype_size(outs[oi]);
            uint8_t *exp = qg_expected(gf, gbf, rows, cols, false, outs[oi]);
            uint8_t *got = malloc((size_t)rows * cols * es);
            assert_non_null(got);
            const uint64_t steps[4] = {rows, 17, 5, 1};
            for (int si = 0; si < 4; si++) {
                for (uint64_t r = 0; r < rows; r += steps[si]) {
                    const uint64_t c = rows - r < steps[si] ? rows - r : steps[si];
                    uint8_t *g = qg_guarded((size_t)c * cols * es);
                    bnb8_dequant_rows(&l, r, c, outs[oi], g, lv[li]);
                    qg_guarded_done(g, (size_t)c * cols * es, got + r * cols * es);
                }
                char what[1200];
                snprintf(what, sizeof what, "%s %s %s step %llu", path, amn_simd_name(lv[li]),
                         amn_dtype_name(outs[oi]), (unsigned long long)steps[si]);
                assert_int_equal(qg_diff(what, got, exp, (size_t)rows * cols, es, cols), 0);
                *values += (size_t)rows * cols;
            }
            free(got);
            free(exp);
        }
    /* Round trip: the golden through F16 (as the encoder takes its input),
     * quantized with the stored SCB. */
    int8_t *q = malloc((size_t)rows * cols);
    float *x = malloc((size_t)cols * 4);
    assert_true(q && x);
    for (uint32_t r = 0; r < rows; r++) {
        const float scb = amn_load_le_f32(s + r * 4);
        for (uint32_t c = 0; c < cols; c++) {
            const float f = amn_load_le_f32(gf + ((size_t)r * cols + c) * 4);
            x[c] = amn_f16_to_f32(amn_f32_to_f16(f));
        }
        bnb8_encode_row(x, cols, scb, q + (size_t)r * cols);
    }
    assert_memory_equal(q, w, (size_t)rows * cols);
    free(q);
    free(x);
}

static void test_bnb_goldens(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/bnb_reference", ref);
    static char paths[QG_MAX_FILES][1024];
    const size_t n = qg_list(dir, paths);
    assert_int_equal(n, 5);
    size_t values = 0;
    unsigned formats = 0;
    for (size_t i = 0; i < n; i++) {
        size_t size = 0;
        uint8_t *buf = amn_test_read_file(paths[i], &size);
        assert_non_null(buf);
        assert_true(size >= 52);
        assert_memory_equal(buf, "AMNB", 4);
        assert_int_equal(qg_u32(buf, 4), 2);
        const uint32_t fmt = qg_u32(buf, 8);
        if (fmt == 1)
            check_int8(paths[i], buf, size, &values);
        else
            check_4bit(paths[i], buf, size, &values);
        formats |= 1u << fmt;
        free(buf);
    }
    assert_int_equal(formats, 7);
    fprintf(stderr,
            "bnb: %zu reference files, %zu values compared bit for bit, every file "
            "re-encoded byte for byte\n",
            n, values);
}

static void test_bnb_tables(void **state) {
    (void)state;
    char hex[65];
    uint8_t le[1024];
    for (int i = 0; i < 256; i++) {
        const uint32_t b = amn_f32_bits(bnb_dynamic_map[i]);
        for (int k = 0; k < 4; k++) le[4 * i + k] = (uint8_t)(b >> (8 * k));
    }
    sha256_of(le, sizeof le, hex);
    assert_string_equal(hex, "e732639a65f497b4ad684bb166a4467708255edd5207757de8b8f0c7e1fda89c");
    /* The -0.0 rule: FP4's +0.0 at index 8 decodes as -0.0, NF4 unchanged. */
    float cb[16];
    bnb4_codebook(bnb_fp4_map, cb);
    assert_int_equal(amn_f32_bits(cb[8]), 0x80000000u);
    assert_int_equal(amn_f32_bits(cb[0]), 0);
    bnb4_codebook(bnb_nf4_map, cb);
    assert_memory_equal(cb, bnb_nf4_map, 64);
}

/* Every nibble decodes and re-encodes to itself at unit scale, and the
 * special cases of the encoders. */
static void test_bnb_codes(void **state) {
    (void)state;
    float cb[16];
    bnb4_codebook(bnb_fp4_map, cb);
    for (uint8_t k = 0; k < 16; k++) assert_int_equal(bnb_fp4_code(cb[k]), k);
    for (uint8_t k = 0; k < 16; k++) assert_int_equal(bnb_nf4_code(bnb_nf4_map[k]), k);
    assert_int_equal(bnb_fp4_code(-0.0f), 8);
    assert_int_equal(bnb_fp4_code(NAN), 0);
    assert_int_equal(bnb_nf4_code(NAN), 0);
    for (int k = 0; k < 256; k++)
        assert_int_equal(bnb_dynamic_code(bnb_dynamic_map, bnb_dynamic_map[k]), k);
    /* all-zero block: absmax 0, 0 * inf is NaN, nibble 0 (FP4 -0.0 too) */
    const float z[4] = {0.0f, -0.0f, 0.0f, 0.0f};
    uint8_t out[2] = {0xff, 0xff};
    assert_true(bnb_absmax(z, 4) == 0.0f);
    bnb4_encode(BNB_FP4, z, 4, 0.0f, 0, out);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 0);
    int8_t q[4] = {1, 1, 1, 1};
    bnb8_encode_row(z, 4, 0.0f, q);
    for (int k = 0; k < 4; k++) assert_int_equal(q[k], 0);
    /* odd start: only the nibbles of the values are written */
    uint8_t p[2] = {0xab, 0xcd};
    const float one[2] = {1.0f, -1.0f};
    bnb4_encode(BNB_NF4, one, 2, 1.0f, 1, p);
    assert_int_equal(p[0], 0xaf);
    assert_int_equal(p[1], 0x0d);
}

/* x86-64 only (AMN_SIMD_X86): the vector paths compared with the scalar one. */
#if AMN_SIMD_X86
/* Many blocks (more than one vector batch) under double quantization:
 * every path against scalar, from starts inside and at block and nested-block
 * boundaries. */
static void test_bnb_paths_nested_long(void **state) {
    (void)state;
    if (amn_simd_level() < AMN_SIMD_AVX2) skip();
    uint32_t x = 24680u;
    enum { BS = 64, BLOCKS = 700, N = BS * BLOCKS - 29, NB = 256 };
    static uint8_t w[(N + 1) / 2], codes[BLOCKS];
    float nabs[(BLOCKS + NB - 1) / NB], nmap[256];
    for (size_t i = 0; i < sizeof w; i++) w[i] = (uint8_t)qg_lcg(&x);
    for (size_t i = 0; i < BLOCKS; i++) codes[i] = (uint8_t)qg_lcg(&x);
    for (size_t i = 0; i < sizeof nabs / sizeof *nabs; i++)
        nabs[i] = (float)(qg_lcg(&x) % 1000 + 1) * 1e-3f;
    memcpy(nmap, bnb_dynamic_map, sizeof nmap);
    bnb4_layout l = {.weight = w,
                     .n = N,
                     .block = BS,
                     .absmax = codes,
                     .nested = true,
                     .nested_absmax = (const uint8_t *)nabs,
                     .nested_map = nmap,
                     .nested_block = NB,
                     .nested_offset = 0.0123f};
    bnb4_codebook(bnb_nf4_map, l.codebook);
    static const uint64_t starts[] = {0, 1, BS, BS * NB - 3, BS * NB, 5 * BS + 7};
    amn_simd lv[3];
    const size_t nlv = levels(lv);
    for (size_t oi = 0; oi < 3; oi++) {
        const size_t es = amn_dtype_size(outs[oi]);
        uint8_t *s = malloc((size_t)N * es), *v = malloc((size_t)N * es);
        assert_non_null(s);
        assert_non_null(v);
        for (size_t k = 0; k < sizeof starts / sizeof *starts; k++) {
            const uint64_t e0 = starts[k], c = N - e0 - k;
            bnb4_dequant(&l, e0, c, outs[oi], s, AMN_SIMD_SCALAR);
            for (size_t li = 1; li < nlv; li++) {
                bnb4_dequant(&l, e0, c, outs[oi], v, lv[li]);
                assert_memory_equal(s, v, c * es);
            }
        }
        free(s);
        free(v);
    }
}

/* The vector path against scalar on random bytes, odd starts and lengths,
 * partial blocks, and scales with specials. */
static void test_bnb_paths_random(void **state) {
    (void)state;
    if (amn_simd_level() < AMN_SIMD_AVX2) skip();
    uint32_t x = 97531u;
    const uint64_t n = 1000, bs = 64, blocks = (n + bs - 1) / bs;
    uint8_t w[500], a[16 * 4];
    for (size_t i = 0; i < sizeof w; i++) w[i] = (uint8_t)qg_lcg(&x);
    for (uint64_t b = 0; b < blocks; b++) qg_put_scale(a, b, AMN_DTYPE_F32, b % 3 == 0, &x);
    bnb4_layout l = {.weight = w, .n = n, .block = bs, .absmax = a};
    bnb4_codebook(bnb_fp4_map, l.codebook);
    int8_t w8[37 * 53];
    uint8_t s8[37 * 4];
    for (size_t i = 0; i < sizeof w8; i++) w8[i] = (int8_t)qg_lcg(&x);
    for (int r = 0; r < 37; r++) qg_put_scale(s8, (uint64_t)r, AMN_DTYPE_F32, r % 4 == 0, &x);
    const bnb8_layout l8 = {.weight = w8, .scb = s8, .rows = 37, .cols = 53};
    for (size_t oi = 0; oi < 3; oi++) {
        const size_t es = amn_dtype_size(outs[oi]);
        uint8_t s[4000], v[4000];
        for (uint64_t e0 = 0; e0 < 70; e0 += 7) {
            const uint64_t c = n - e0 - (e0 % 5);
            bnb4_dequant(&l, e0, c, outs[oi], s, AMN_SIMD_SCALAR);
            amn_simd lv[3];
            const size_t nlv = levels(lv);
            for (size_t li = 1; li < nlv; li++) {
                bnb4_dequant(&l, e0, c, outs[oi], v, lv[li]);
                assert_memory_equal(s, v, c * es);
            }
        }
        uint8_t s2[37 * 53 * 4], v2[37 * 53 * 4];
        bnb8_dequant_rows(&l8, 0, 37, outs[oi], s2, AMN_SIMD_SCALAR);
        amn_simd lv[3];
        const size_t nlv = levels(lv);
        for (size_t li = 1; li < nlv; li++) {
            bnb8_dequant_rows(&l8, 0, 37, outs[oi], v2, lv[li]);
            assert_memory_equal(s2, v2, 37 * 53 * es);
        }
    }
}

/* The vector encoders against the scalar one: random blocks, every pivot of
 * both trees exactly and one ulp either side, signed zeros, NaN, infinities,
 * all-zero blocks. */
static void test_bnb_encode_paths(void **state) {
    (void)state;
    if (amn_simd_level() < AMN_SIMD_AVX2) skip();
    static const float piv[] = {-0.8480964004993439f,
                                -0.6106329262256622f,
                                -0.4599952697753906f,
                                -0.33967943489551544f,
                                -0.23460740596055984f,
                                -0.13791173323988914f,
                                -0.045525018125772476f,
                                0.03979014977812767f,
                                0.1202552504837513f,
                                0.2035212516784668f,
                                0.2920137718319893f,
                                0.3893125355243683f,
                                0.5016634166240692f,
                                0.6427869200706482f,
                                0.8614784181118011f,
                                0.00260417f,
                                0.0859375f,
                                0.20833333f,
                                0.29166667f,
                                0.4166667f,
                                0.583333f,
                                0.8333333f};
    uint32_t x = 1357911u;
    amn_simd lv[3];
    const bool avx512 = levels(lv) == 3;
    float cbn[16], cbf[16];
    bnb4_codebook(bnb_nf4_map, cbn);
    bnb4_codebook(bnb_fp4_map, cbf);
    for (int blk = 0; blk < 400; blk++) {
        float v[256];
        const size_t n = blk % 3 == 0 ? 256 : blk % 3 == 1 ? 64 : 32;
        for (size_t i = 0; i < n; i++) {
            const uint32_t r = qg_lcg(&x);
            float f = ((float)(r >> 8) * 0x1p-23f - 1.0f) * (blk % 7 == 0 ? 1e-30f : 1.0f);
            switch (blk % 5 == 0 ? r % 16 : 99) {
            case 0:
                f = -0.0f;
                break;
            case 1:
                f = piv[r % 22] * (r & 16 ? -1.0f : 1.0f);
                break;
            case 2:
                f = nextafterf(piv[r % 22], 2.0f);
                break;
            case 3:
                f = nextafterf(piv[r % 22], -2.0f);
                break;
            case 4:
                f = NAN;
                break;
            case 5:
                f = blk % 2 ? INFINITY : -INFINITY;
                break;
            default:
                break;
            }
            v[i] = blk % 11 == 0 ? (i % 2 ? 0.0f : -0.0f) : f;
        }
        if (blk % 5 == 1) v[0] = 1.0f; /* pivots then sit exactly at scale 1 */
        if (blk % 5 == 1)
            for (size_t i = 1; i < n; i++) v[i] = piv[(i + (size_t)blk) % 22];
        const float am = bnb_absmax(v, n);
        assert_memory_equal(&am, &(float){bnb_absmax_avx2(v, n)}, 4);
        if (avx512) assert_memory_equal(&am, &(float){bnb_absmax_avx512(v, n)}, 4);
        for (int k = 0; k < 2; k++) {
            const bnb_kind kind = k ? BNB_FP4 : BNB_NF4;
            uint8_t a[128], b[128];
            memset(a, 0, sizeof a);
            memset(b, 0x77, sizeof b);
            bnb4_encode(kind, v, n, am, 0, a);
            double e = 0;
            bnb4_encode_avx2(kind, v, n, am, b, k ? cbf : cbn, &e);
            assert_memory_equal(a, b, n / 2);
            if (avx512) {
                double e2 = 0;
                memset(b, 0x77, sizeof b);
                bnb4_encode_avx512(kind, v, n, am, b, k ? cbf : cbn, &e2);
                assert_memory_equal(a, b, n / 2);
                /* the error estimate, summed in another order, is close */
                assert_true(e2 == e || fabs(e2 - e) <= 1e-5 * fabs(e) || e != e);
            }
        }
    }
}
#endif /* AMN_SIMD_X86 */

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bnb_goldens),
        cmocka_unit_test(test_bnb_tables),
        cmocka_unit_test(test_bnb_codes),
#if AMN_SIMD_X86
        cmocka_unit_test(test_bnb_paths_random),
        cmocka_unit_test(test_bnb_paths_nested_long),
        cmocka_unit_test(test_bnb_encode_paths),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
