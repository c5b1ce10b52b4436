/* dtype conversions: exhaustive round trips, rounding edge cases, the
 * vector paths against the scalar one, and F32 -> BF16 against the BF16
 * goldens PyTorch / bitsandbytes produced (every v2 fixture holds both). */
#include <dirent.h>
#include <math.h>

#include "amn/byteorder.h"
#include "amn/dtype.h"
#include "amn_test.h"

static void use_simd(const char *level) {
    if (level)
        setenv("AMN_SIMD", level, 1);
    else
        unsetenv("AMN_SIMD");
}

static void f16_round_trip_every_pattern(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = amn_f16_to_f32((uint16_t)h);
        uint16_t back = amn_f32_to_f16(f);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            assert_true(isnan(f));
            assert_int_equal(back & 0x7c00, 0x7c00);
            assert_true(back & 0x3ff);
        } else {
            assert_int_equal(back, h);
        }
        /* Through F64 as well, and the bulk paths. */
        assert_int_equal(amn_f64_to_f16((double)f) & 0xffff, isnan(f) ? back : h);
    }
    uint16_t src[65536], out[65536];
    float mid[65536];
    for (uint32_t h = 0; h < 65536; h++) src[h] = amn_htole16((uint16_t)h); /* element bytes */
    const char *levels[] = {"scalar", NULL};
    for (int l = 0; l < 2; l++) {
        use_simd(levels[l]);
        amn_convert_elems(AMN_DTYPE_F16, src, AMN_DTYPE_F32, mid, 65536);
        amn_convert_elems(AMN_DTYPE_F32, mid, AMN_DTYPE_F16, out, 65536);
        amn_le_to_host_n(mid, 4, 65536); /* little-endian bytes to host values */
        amn_le_to_host_n(out, 2, 65536);
        for (uint32_t h = 0; h < 65536; h++) {
            assert_memory_equal(&mid[h], &(float){amn_f16_to_f32((uint16_t)h)}, 4);
            assert_int_equal(out[h], amn_f32_to_f16(mid[h]));
        }
    }
    use_simd(NULL);
}

static void bf16_round_trip_every_pattern(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = amn_bf16_to_f32((uint16_t)h);
        uint16_t back = amn_f32_to_bf16(f);
        if (isnan(f))
            assert_true((back & 0x7f80) == 0x7f80 && (back & 0x7f));
        else
            assert_int_equal(back, h);
        assert_int_equal(amn_f64_to_bf16((double)f), isnan(f) ? back : h);
    }
}

static void f32_to_bf16_rounding(void **state) {
    (void)state;
    /* Ties go to even, above-ties round up, below-ties down. */
    assert_int_equal(amn_f32_to_bf16(amn_bits_f32(0x3f808000)), 0x3f80);
    assert_int_equal(amn_f32_to_bf16(amn_bits_f32(0x3f818000)), 0x3f82);
    assert_int_equal(amn_f32_to_bf16(amn_bits_f32(0x3f808001)), 0x3f81);
    assert_int_equal(amn_f32_to_bf16(amn_bits_f32(0x3f807fff)), 0x3f80);
    /* Infinities stay, the largest finite value rounds up to infinity. */
    assert_int_equal(amn_f32_to_bf16(INFINITY), 0x7f80);
    assert_int_equal(amn_f32_to_bf16(-INFINITY), 0xff80);
    assert_int_equal(amn_f32_to_bf16(amn_bits_f32(0x7f7fffff)), 0x7f80);
    /* NaN stays NaN (quiet), sign kept, never becomes infinity. */
    assert_int_equal(amn_f32_to_bf16(amn_bits_f32(0x7f800001)), 0x7fc0);
    assert_int_equal(amn_f32_to_bf16(amn_bits_f32(0xff800001)), 0xffc0);
    /* Subnormals round like any other value; signed zeros are kept. */
    assert_int_equal(amn_f32_to_bf16(amn_bits_f32(0x00008000)), 0x0000);
    assert_int_equal(amn_f32_to_bf16(amn_bits_f32(0x00018000)), 0x0002);
    assert_int_equal(amn_f32_to_bf16(amn_bits_f32(0x00010001)), 0x0001);
    assert_int_equal(amn_f32_to_bf16(-0.0f), 0x8000);
}

static void f16_rounding_edges(void **state) {
    (void)state;
    assert_int_equal(amn_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(amn_f32_to_f16(65519.0f), 0x7bff); /* below the halfway point */
    assert_int_equal(amn_f32_to_f16(65520.0f), 0x7c00); /* tie to even: overflows */
    assert_int_equal(amn_f32_to_f16(0x1p-24f), 0x0001);
    assert_int_equal(amn_f32_to_f16(0x1p-25f), 0x0000); /* tie to even zero */
    assert_int_equal(amn_f32_to_f16(0x1.8p-25f), 0x0001);
    assert_int_equal(amn_f32_to_f16(0x1.ff8p-15f), 0x03ff); /* largest subnormal */
    assert_int_equal(amn_f32_to_f16(0x1.ffcp-15f), 0x0400); /* tie rounds up to the min normal */
    assert_int_equal(amn_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(amn_f32_to_f16(-INFINITY), 0xfc00);
}

static void f64_rounds_once(void **state) {
    (void)state;
    /* 1 + 2^-8 + 2^-40: via F32 it becomes the tie 1 + 2^-8, then rounds to
     * even (1.0); rounded once it is above the tie, so 1 + 2^-7. */
    double d = 1.0 + 0x1p-8 + 0x1p-40;
    assert_int_equal(amn_f32_to_bf16((float)d), 0x3f80);
    assert_int_equal(amn_f64_to_bf16(d), 0x3f81);
    double e = 1.0 + 0x1p-11 + 0x1p-40; /* the same for F16 */
    assert_int_equal(amn_f64_to_f16(e), 0x3c01);
    assert_int_equal(amn_f64_to_f16(1e300), 0x7c00);
    assert_int_equal(amn_f64_to_bf16(-1e300), 0xff80);
    assert_int_equal(amn_f64_to_f16(1e-300), 0x0000);
}

static void f8_decode(void **state) {
    (void)state;
    assert_true(amn_f8e4m3_to_f32(0x7e) == 448.0f);
    assert_true(amn_f8e4m3_to_f32(0xfe) == -448.0f);
    assert_true(amn_f8e4m3_to_f32(0x38) == 1.0f);
    assert_true(amn_f8e4m3_to_f32(0x01) == 0x1p-9f);
    assert_true(amn_f8e4m3_to_f32(0x08) == 0x1p-6f);
    assert_true(isnan(amn_f8e4m3_to_f32(0x7f)) && isnan(amn_f8e4m3_to_f32(0xff)));
    assert_int_equal(amn_f32_bits(amn_f8e4m3_to_f32(0x80)), 0x80000000u);
    assert_true(amn_f8e5m2_to_f32(0x3c) == 1.0f);
    assert_true(amn_f8e5m2_to_f32(0x7b) == 57344.0f);
    assert_true(amn_f8e5m2_to_f32(0x01) == 0x1p-16f);
    assert_true(isinf(amn_f8e5m2_to_f32(0x7c)) && amn_f8e5m2_to_f32(0xfc) < 0);
    assert_true(isnan(amn_f8e5m2_to_f32(0x7d)));
    /* Every E4M3 value is exact in BF16's neighbour F16? No: check the bulk
     * path agrees with the scalar decoder for all 256 codes of both. */
    uint8_t codes[256];
    float a[256];
    for (int i = 0; i < 256; i++) codes[i] = (uint8_t)i;
    amn_convert_elems(AMN_DTYPE_F8_E5M2, codes, AMN_DTYPE_F32, a, 256);
    amn_le_to_host_n(a, 4, 256);
    for (int i = 0; i < 256; i++) {
        float s = amn_f8e5m2_to_f32((uint8_t)i);
        if (isnan(s))
            assert_true(isnan(a[i]));
        else
            assert_memory_equal(&a[i], &s, 4);
    }
}

static uint32_t xorshift(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void simd_matches_scalar(void **state) {
    (void)state;
    enum { N = 1 << 16 };
    static float f[N];
    static uint16_t a[N], b[N];
    uint32_t seed = 12345;
    for (int i = 0; i < N; i++) f[i] = amn_bits_f32(xorshift(&seed)); /* NaNs, subnormals, all */
    const amn_dtype outs[] = {AMN_DTYPE_BF16, AMN_DTYPE_F16};
    const char *levels[] = {"avx2", NULL}; /* each vector path the CPU has */
    for (int k = 0; k < 2; k++) {
        for (int l = 0; l < 2; l++) {
            for (size_t n = 0; n < 80; n++) { /* every tail length */
                use_simd("scalar");
                amn_convert_elems(AMN_DTYPE_F32, f + 3, outs[k], a, n);
                use_simd(levels[l]);
                amn_convert_elems(AMN_DTYPE_F32, f + 3, outs[k], b, n);
                if (n) assert_memory_equal(a, b, n * 2);
            }
            use_simd("scalar");
            amn_convert_elems(AMN_DTYPE_F32, f, outs[k], a, N);
            use_simd(levels[l]);
            amn_convert_elems(AMN_DTYPE_F32, f, outs[k], b, N);
            assert_memory_equal(a, b, sizeof a);
        }
    }
    use_simd(NULL);
}

/* BF16 -> F16 in one pass (a Hugging Face folder's weights to a GGUF's)
 * gives, for every BF16 pattern and every tail length at every vector
 * level, the bytes of the two steps through F32 on the scalar path, the
 * converter's route (widened to float32, then rounded). */
static void bf16_to_f16_matches_two_steps(void **state) {
    (void)state;
    enum { N = 65536 };
    static uint16_t src[N + 3], want[N], got[N];
    static float mid[N];
    for (uint32_t h = 0; h < N; h++) src[h + 3] = amn_htole16((uint16_t)h);
    src[0] = src[1] = src[2] = amn_htole16(0x7f81); /* a signalling NaN */
    use_simd("scalar");
    amn_convert_elems(AMN_DTYPE_BF16, src, AMN_DTYPE_F32, mid, 3);
    amn_convert_elems(AMN_DTYPE_F32, mid, AMN_DTYPE_F16, want, 3);
    assert_int_equal(amn_load_le16(want), amn_f32_to_f16(amn_bf16_to_f32(0x7f81)));
    amn_convert_elems(AMN_DTYPE_BF16, src + 3, AMN_DTYPE_F32, mid, N);
    amn_convert_elems(AMN_DTYPE_F32, mid, AMN_DTYPE_F16, want, N);
    const char *levels[] = {"scalar", "avx2", NULL}; /* each path the CPU has */
    for (int l = 0; l < 3; l++) {
        use_simd(levels[l]);
        for (size_t n = 1; n < 80; n++) { /* every tail length, from an odd start */
            amn_convert_elems(AMN_DTYPE_BF16, src + 3 + 5, AMN_DTYPE_F16, got, n);
            assert_memory_equal(got, want + 5, n * 2);
        }
        amn_convert_elems(AMN_DTYPE_BF16, src + 3, AMN_DTYPE_F16, got, N);
        assert_memory_equal(got, want, sizeof want);
    }
    use_simd(NULL);
}

/* The BF16 golden of every v2 fixture is PyTorch's / bitsandbytes' RNE of its
 * F32 golden: an independent oracle for our F32 -> BF16 on ~1.5M values. */
static size_t check_goldens_in(const char *dir, size_t hdr_len_off, size_t golden_fields_off) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t checked = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".bin")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t size = 0;
        uint8_t *buf = amn_test_read_file(path, &size);
        assert_non_null(buf);
        uint32_t bf16_len = amn_test_u32(buf + golden_fields_off);
        uint32_t f32_len = amn_test_u32(buf + golden_fields_off + 4);
        assert_int_equal(bf16_len * 2, f32_len);
        assert_true(size >= hdr_len_off + bf16_len + f32_len);
        const uint8_t *f32 = buf + size - f32_len, *bf16 = f32 - bf16_len;
        size_t n = f32_len / 4;
        uint16_t *got = malloc(n * 2);
        amn_convert_elems(AMN_DTYPE_F32, f32, AMN_DTYPE_BF16, got, n);
        assert_memory_equal(got, bf16, n * 2);
        free(got);
        free(buf);
        checked += n;
    }
    closedir(d);
    return checked;
}

static void f32_to_bf16_matches_reference_libraries(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    char dir[4096];
    size_t total = 0;
    /* (folder, header size, offset of bf16_len): see the fixtures README. */
    const struct {
        const char *sub;
        size_t hdr, off;
    } fams[] = {{"fp8_reference", 40, 32},
                {"gptq_reference", 56, 48},
                {"awq_reference", 48, 40},
                {"gguf_reference", 28, 20}};
    for (size_t i = 0; i < sizeof fams / sizeof *fams; i++) {
        snprintf(dir, sizeof dir, "%s/%s", ref, fams[i].sub);
        total += check_goldens_in(dir, fams[i].hdr, fams[i].off);
    }
    fprintf(stderr, "compared %zu F32 -> BF16 values with the reference libraries\n", total);
    assert_true(total > 1000000);
}

static void names(void **state) {
    (void)state;
    for (int t = AMN_DTYPE_BOOL; t < AMN_DTYPE_COUNT; t++)
        if (t != AMN_DTYPE_BLOCK)
            assert_int_equal(amn_dtype_from_name(amn_dtype_name((amn_dtype)t)), t);
    assert_int_equal(amn_dtype_from_name("BLOCK"), AMN_DTYPE_INVALID);
    assert_int_equal(amn_dtype_from_name("F4"), AMN_DTYPE_INVALID);
    /* Complex dtypes come after BLOCK, whose number they must not move. */
    assert_int_equal(AMN_DTYPE_BLOCK, 16);
    assert_string_equal(amn_dtype_name(AMN_DTYPE_C64), "C64");
    assert_int_equal(amn_dtype_size(AMN_DTYPE_C64), 8);
    assert_int_equal(amn_dtype_size(AMN_DTYPE_C128), 16);
    assert_false(amn_dtype_is_float(AMN_DTYPE_C64));
    assert_int_equal(amn_convert_elems(AMN_DTYPE_C64, NULL, AMN_DTYPE_F32, NULL, 0), -1);
    assert_int_equal(amn_dtype_from_cli("bf16"), AMN_DTYPE_BF16);
    assert_int_equal(amn_dtype_size(AMN_DTYPE_F8_E5M2), 1);
    assert_int_equal(amn_dtype_size(AMN_DTYPE_BLOCK), 0);
    assert_int_equal(amn_convert_elems(AMN_DTYPE_I32, NULL, AMN_DTYPE_F32, NULL, 0), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(f16_round_trip_every_pattern),
        cmocka_unit_test(bf16_round_trip_every_pattern),
        cmocka_unit_test(f32_to_bf16_rounding),
        cmocka_unit_test(f16_rounding_edges),
        cmocka_unit_test(f64_rounds_once),
        cmocka_unit_test(f8_decode),
        cmocka_unit_test(simd_matches_scalar),
        cmocka_unit_test(bf16_to_f16_matches_two_steps),
        cmocka_unit_test(f32_to_bf16_matches_reference_libraries),
        cmocka_unit_test(names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
