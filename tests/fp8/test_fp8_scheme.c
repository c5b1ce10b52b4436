/* The "fp8" scheme through the core: detect() on models built over the
 * reference goldens (every file of fp8_reference/, with each scale naming and
 * shape convention), dequantize() through amn_convert on every SIMD path,
 * output dtype and thread count, malformed companions, and `amn remember`
 * on single-file and sharded safetensors written from the goldens. */
#include "quant_e2e.h"

#define WNAME "model.layers.0.mlp.down_proj.weight"

typedef struct golden {
    uint8_t *buf;
    uint32_t scheme;
    amn_dtype stype;
    uint64_t rows, cols, sl;
    const uint8_t *w, *s, *bf16, *f32;
} golden;

static size_t load_goldens(golden *g, size_t max) {
    const char *ref = amn_test_reference_dir();
    if (!ref) return 0;
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/fp8_reference", ref);
    static char paths[QG_MAX_FILES][1024];
    size_t n = qg_list(dir, paths);
    if (n > max) n = max;
    for (size_t i = 0; i < n; i++) {
        size_t size;
        uint8_t *b = amn_test_read_file(paths[i], &size);
        assert_non_null(b);
        assert_true(size >= 40 && memcmp(b, "AMNF", 4) == 0);
        g[i] = (golden){.buf = b,
                        .scheme = qg_u32(b, 8),
                        .stype = qg_scale_dtype(qg_u32(b, 12)),
                        .rows = qg_u32(b, 16),
                        .cols = qg_u32(b, 20),
                        .sl = qg_u32(b, 28)};
        const uint64_t wl = qg_u32(b, 24), bl = qg_u32(b, 32);
        assert_int_equal(40 + wl + g[i].sl + bl + qg_u32(b, 36), size);
        g[i].w = b + 40;
        g[i].s = g[i].w + wl;
        g[i].bf16 = g[i].s + g[i].sl;
        g[i].f32 = g[i].bf16 + bl;
    }
    return n;
}

/* The golden as a checkpoint stores it, plus a norm, CLIP's logit_scale (a
 * real parameter that ends in _scale) and an activation input_scale. */
static size_t golden_tensors(const golden *g, qe_tensor *t, int variant) {
    /* tensor bytes are little-endian, as in a checkpoint */
    static uint8_t act[4], logit[4];
    static uint16_t norm[256];
    amn_store_le_f32(act, 0.0123f);
    amn_store_le_f32(logit, 4.6052f);
    for (int i = 0; i < 256; i++)
        amn_store_le16(&norm[i], amn_f32_to_bf16(1.0f + (float)i / 256.0f));
    size_t n = 0;
    t[n++] = (qe_tensor){WNAME, AMN_DTYPE_F8_E4M3, 2, {g->rows, g->cols}, g->w, g->rows * g->cols};
    qe_tensor s = {NULL, g->stype, 0, {0}, g->s, g->sl};
    if (g->scheme == 0) {
        s.name = WNAME "_scale_inv";
        s.ndim = 2;
        s.shape[0] = (g->rows + 127) / 128;
        s.shape[1] = (g->cols + 127) / 128;
    } else if (g->scheme == 1) {
        /* Per-tensor scales come as 0-d scalars, [1] (both names are used). */
        s.name = variant ? WNAME "_scale_inv" : WNAME "_scale";
        s.ndim = variant ? 1 : 0;
        s.shape[0] = 1;
    } else {
        s.name = WNAME "_scale";
        s.ndim = 2;
        s.shape[0] = g->rows;
        s.shape[1] = 1;
    }
    t[n++] = s;
    t[n++] = (qe_tensor){"model.layers.0.mlp.down_proj.input_scale", AMN_DTYPE_F32, 0, {0}, act, 4};
    t[n++] = (qe_tensor){"model.norm.weight", AMN_DTYPE_BF16, 1, {256}, norm, 512};
    t[n++] = (qe_tensor){"logit_scale", AMN_DTYPE_F32, 0, {0}, logit, 4};
    return n;
}

static void compare(const char *path, const golden *g, amn_dtype out, const char *what) {
    const uint64_t shape[2] = {g->rows, g->cols};
    size_t nb;
    uint8_t *got = qe_read(path, WNAME, out, 2, shape, &nb);
    uint8_t *exp = qg_expected(g->f32, g->bf16, g->rows, g->cols, false, out);
    assert_int_equal(nb, g->rows * g->cols * amn_dtype_size(out));
    assert_int_equal(qg_diff(what, got, exp, g->rows * g->cols, amn_dtype_size(out), g->cols), 0);
    free(got);
    free(exp);
}

static void test_fp8_goldens_through_core(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    (void)ref;
    if (!qe_have_writer()) skip();
    golden g[QG_MAX_FILES];
    const size_t n = load_goldens(g, QG_MAX_FILES);
    assert_true(n >= 6);
    amn_simd lv[2];
    const size_t nl = qg_levels(lv);
    const amn_dtype outs[3] = {AMN_DTYPE_BF16, AMN_DTYPE_F32, AMN_DTYPE_F16};
    size_t values = 0;
    for (size_t i = 0; i < n; i++) {
        qe_tensor t[8];
        const size_t nt = golden_tensors(&g[i], t, (int)(i & 1));
        char label[128];
        amn_error err = {0};
        assert_int_equal(qe_plan(t, nt, &err, label, sizeof label), AMN_OK);
        const char *want = g[i].scheme == 0   ? "Fine-grained FP8 (E4M3), 128x128 blocks"
                           : g[i].scheme == 1 ? "FP8 (E4M3), per-tensor scale"
                                              : "FP8 (E4M3), per-channel scale";
        assert_string_equal(label, want);
        for (size_t li = 0; li < nl; li++)
            for (int oi = 0; oi < 3; oi++)
                for (unsigned th = 1; th <= 2; th++) {
                    char path[512], what[256];
                    qe_path(path, sizeof path, "fp8-%zu.safetensors", i);
                    qe_set_simd(lv[li]);
                    qe_convert(t, nt, outs[oi], th, path);
                    unsetenv("AMN_SIMD");
                    snprintf(what, sizeof what, "golden %zu %s %s threads %u", i,
                             amn_simd_name(lv[li]), amn_dtype_name(outs[oi]), th);
                    compare(path, &g[i], outs[oi], what);
                    /* weight, norm, logit_scale: the scale and input_scale are gone */
                    assert_int_equal(qe_count(path), 3);
                    values += g[i].rows * g[i].cols;
                }
        free(g[i].buf);
    }
    fprintf(stderr, "fp8 through the core: %zu values compared bit for bit\n", values);
}

/* E5M2 has no golden: its decode is the core's amn_f8e5m2_to_f32 (itself
 * tested against the reference libraries), times the scale, with every byte
 * value present once per row. */
static void test_fp8_e5m2(void **state) {
    (void)state;
    if (!qe_have_writer()) skip();
    static uint8_t w[4][256];
    static uint16_t sc[4], le[4]; /* le: the scales as the file stores them */
    for (int r = 0; r < 4; r++) {
        for (int c = 0; c < 256; c++) w[r][c] = (uint8_t)(c + 37 * r);
        sc[r] = amn_f32_to_f16(0.75f * (float)(r + 1));
        amn_store_le16(&le[r], sc[r]);
    }
    const qe_tensor t[2] = {{"e.weight", AMN_DTYPE_F8_E5M2, 2, {4, 256}, w, sizeof w},
                            {"e.weight_scale", AMN_DTYPE_F16, 2, {4, 1}, le, sizeof le}};
    char label[128], path[512];
    amn_error err = {0};
    assert_int_equal(qe_plan(t, 2, &err, label, sizeof label), AMN_OK);
    assert_string_equal(label, "FP8 (E5M2), per-channel scale");
    qe_convert(t, 2, AMN_DTYPE_F32, 1, qe_path(path, sizeof path, "e5m2.safetensors"));
    const uint64_t shape[2] = {4, 256};
    size_t nb;
    uint8_t *y = qe_read(path, "e.weight", AMN_DTYPE_F32, 2, shape, &nb);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 256; c++) {
            const float x = amn_f8e5m2_to_f32(w[r][c]);
            const float e = x != x ? x : x * amn_f16_to_f32(sc[r]);
            assert_int_equal(amn_load_le32(y + (r * 256 + c) * 4), amn_f32_bits(e));
        }
    free(y);
}

static void expect_error(const qe_tensor *t, size_t n, int code, const char *needle) {
    amn_error err = {0};
    int rc = qe_plan(t, n, &err, NULL, 0);
    if (rc != code || !strstr(err.msg, needle))
        fail_msg("expected %s naming \"%s\", got %s: %s", amn_error_class(code), needle,
                 amn_error_class(rc), err.msg);
}

static void test_fp8_malformed(void **state) {
    (void)state;
    static uint8_t w[256 * 256];
    static float s[9];
    static int32_t bad[4];
    /* A scale grid that fits no layout. */
    const qe_tensor a[2] = {{"l.weight", AMN_DTYPE_F8_E4M3, 2, {256, 256}, w, sizeof w},
                            {"l.weight_scale_inv", AMN_DTYPE_F32, 2, {3, 3}, s, 36}};
    expect_error(a, 2, AMN_E_PARSE, "l.weight_scale_inv");
    /* Both scale names for one weight. */
    const qe_tensor b[3] = {{"l.weight", AMN_DTYPE_F8_E4M3, 2, {256, 256}, w, sizeof w},
                            {"l.weight_scale_inv", AMN_DTYPE_F32, 0, {0}, s, 4},
                            {"l.weight_scale", AMN_DTYPE_F32, 0, {0}, s, 4}};
    expect_error(b, 3, AMN_E_PARSE, "l.weight");
    /* A scale of the wrong dtype. */
    const qe_tensor c[2] = {{"l.weight", AMN_DTYPE_F8_E4M3, 2, {256, 256}, w, sizeof w},
                            {"l.weight_scale", AMN_DTYPE_I32, 1, {4}, bad, 16}};
    expect_error(c, 2, AMN_E_PARSE, "l.weight_scale");
    /* A scale without its weight, in an FP8 model. */
    const qe_tensor d[3] = {{"l.weight", AMN_DTYPE_F8_E4M3, 2, {256, 256}, w, sizeof w},
                            {"l.weight_scale", AMN_DTYPE_F32, 0, {0}, s, 4},
                            {"k.weight_scale_inv", AMN_DTYPE_F32, 2, {2, 2}, s, 16}};
    expect_error(d, 3, AMN_E_PARSE, "k.weight_scale_inv");
    /* Per-channel of the wrong length. */
    const qe_tensor e[2] = {{"l.weight", AMN_DTYPE_F8_E4M3, 2, {256, 256}, w, sizeof w},
                            {"l.weight_scale", AMN_DTYPE_F32, 2, {9, 1}, s, 36}};
    expect_error(e, 2, AMN_E_PARSE, "l.weight_scale");
    /* A block scale for a 3-D weight is recognised but not handled. */
    const qe_tensor f[2] = {{"l.weight", AMN_DTYPE_F8_E4M3, 3, {4, 128, 128}, w, 65536},
                            {"l.weight_scale_inv", AMN_DTYPE_F32, 3, {4, 1, 1}, s, 16}};
    expect_error(f, 2, AMN_E_UNSUPPORTED, "l.weight");
}

/* logit_scale, an input_scale with no weight, and a weight_scale beside a
 * BF16 weight are ordinary tensors: nothing is claimed. */
static void test_fp8_not_scales(void **state) {
    (void)state;
    static uint16_t w[16];
    static uint8_t s[4] = {0, 0, 0, 0x40}; /* 2.0f, little-endian */
    const qe_tensor t[4] = {{"logit_scale", AMN_DTYPE_F32, 0, {0}, s, 4},
                            {"a.input_scale", AMN_DTYPE_F32, 0, {0}, s, 4},
                            {"b.weight", AMN_DTYPE_BF16, 2, {4, 4}, w, 32},
                            {"b.weight_scale", AMN_DTYPE_F32, 0, {0}, s, 4}};
    amn_model *m = qe_model(t, 4);
    amn_plan *p = NULL;
    amn_error err = {0};
    assert_int_equal(amn_plan_new(qe_ctx, m, &p, &err), AMN_OK);
    amn_plan_summary sum = {.struct_size = sizeof(amn_plan_summary)};
    amn_plan_summarize(p, AMN_DTYPE_BF16, &sum);
    assert_int_equal(sum.groups, 0);
    assert_int_equal(sum.passthrough, 4);
    amn_plan_free(p);
    amn_model_free(m);
}

/* `amn remember` on files written from a golden: one file, then shards
 * with an index, default BF16 and --to f32. */
static void test_fp8_cli(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    (void)ref;
    if (!qe_have_writer()) skip();
    golden g[QG_MAX_FILES];
    const size_t n = load_goldens(g, QG_MAX_FILES);
    assert_true(n >= 1);
    size_t gi = 0;
    while (gi < n && g[gi].scheme != 0) gi++;
    assert_true(gi < n);
    qe_tensor t[8];
    const size_t nt = golden_tensors(&g[gi], t, 0);
    char in[512], out[512], args[2048];
    qe_write_st(qe_path(in, sizeof in, "fp8-in.safetensors"), t, nt, "{\"format\":\"pt\"}");
    qe_path(out, sizeof out, "fp8-out.safetensors");
    snprintf(args, sizeof args, "remember '%s' -o '%s' --force", in, out);
    assert_int_equal(qe_cli(args), 0);
    compare(out, &g[gi], AMN_DTYPE_BF16, "cli bf16");
    assert_int_equal(qe_count(out), 3);
    snprintf(args, sizeof args, "remember '%s' --to f32 -o '%s' --force", in, out);
    assert_int_equal(qe_cli(args), 0);
    compare(out, &g[gi], AMN_DTYPE_F32, "cli f32");

    /* Sharded: the weight in one shard, its scales in the other. */
    char dir[512], p1[600], p2[600], idx[600], text[2048];
    qe_path(dir, sizeof dir, "fp8-sharded");
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(p1, sizeof p1, "%s/model-00001-of-00002.safetensors", dir);
    snprintf(p2, sizeof p2, "%s/model-00002-of-00002.safetensors", dir);
    qe_write_st(p1, t, 1, NULL);
    qe_write_st(p2, t + 1, nt - 1, NULL);
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    snprintf(
        text, sizeof text,
        "{\"metadata\":{},\"weight_map\":{\"%s\":\"model-00001-of-00002.safetensors\","
        "\"%s\":\"model-00002-of-00002.safetensors\",\"%s\":\"model-00002-of-00002.safetensors\","
        "\"%s\":\"model-00002-of-00002.safetensors\",\"%s\":\"model-00002-of-00002.safetensors\"}}",
        t[0].name, t[1].name, t[2].name, t[3].name, t[4].name);
    qe_write_text(idx, text);
    snprintf(args, sizeof args, "remember '%s' -o '%s' --force", dir, out);
    assert_int_equal(qe_cli(args), 0);
    compare(out, &g[gi], AMN_DTYPE_BF16, "cli sharded bf16");
    for (size_t i = 0; i < n; i++) free(g[i].buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp8_goldens_through_core),
        cmocka_unit_test(test_fp8_e5m2),
        cmocka_unit_test(test_fp8_malformed),
        cmocka_unit_test(test_fp8_not_scales),
        cmocka_unit_test(test_fp8_cli),
    };
    return cmocka_run_group_tests(tests, qe_setup, qe_teardown);
}
