/* The "gptq" scheme through the core: detect() on models built over the
 * reference goldens (gptq_reference/) and the independent packer's data
 * (fixtures/gptq/), dequantize() through amn_convert on every SIMD path,
 * output dtype and thread count, compared transposed ([out, in] against the
 * [in, out] goldens); configs beside the model; malformed companions; and
 * `amn remember` on safetensors written from a golden. */
#include "quant_e2e.h"

#define P "model.layers.0.mlp.gate_proj"

typedef struct golden {
    uint8_t *buf;
    unsigned bits;
    uint64_t gs, in, out, G;
    amn_dtype stype;
    bool has_g, act_order;
    uint64_t qwl, scl, qzl;
    const uint8_t *qw, *sc, *qz, *gi, *bf16, *f32;
} golden;

static size_t load_dir(const char *dir, golden *g, size_t max) {
    static char paths[QG_MAX_FILES][1024];
    size_t n = qg_list(dir, paths);
    if (n > max) n = max;
    for (size_t i = 0; i < n; i++) {
        size_t size;
        uint8_t *b = amn_test_read_file(paths[i], &size);
        assert_non_null(b);
        assert_true(size >= 56 && memcmp(b, "AMNQ", 4) == 0);
        golden *x = &g[i];
        *x = (golden){.buf = b,
                      .bits = qg_u32(b, 8),
                      .gs = qg_u32(b, 12),
                      .in = qg_u32(b, 16),
                      .out = qg_u32(b, 20),
                      .stype = qg_scale_dtype(qg_u32(b, 24)),
                      .has_g = qg_u32(b, 28) != 0,
                      .qwl = qg_u32(b, 32),
                      .scl = qg_u32(b, 36),
                      .qzl = qg_u32(b, 40)};
        x->G = x->in / x->gs;
        const uint64_t gil = qg_u32(b, 44), bl = qg_u32(b, 48);
        assert_int_equal(56 + x->qwl + x->scl + x->qzl + gil + bl + qg_u32(b, 52), size);
        x->qw = b + 56;
        x->sc = x->qw + x->qwl;
        x->qz = x->sc + x->scl;
        x->gi = x->qz + x->qzl;
        x->bf16 = x->gi + gil;
        x->f32 = x->bf16 + bl;
        for (uint64_t k = 0; x->has_g && k < x->in; k++)
            if (amn_test_u32(x->gi + 4 * k) != k / x->gs) x->act_order = true;
    }
    return n;
}

static size_t golden_tensors(const golden *g, qe_tensor *t, bool with_gidx) {
    static uint16_t bias[4096];
    size_t n = 0;
    t[n++] =
        (qe_tensor){P ".qweight", AMN_DTYPE_I32, 2, {g->qwl / 4 / g->out, g->out}, g->qw, g->qwl};
    t[n++] = (qe_tensor){P ".scales", g->stype, 2, {g->G, g->out}, g->sc, g->scl};
    t[n++] = (qe_tensor){P ".qzeros", AMN_DTYPE_I32, 2, {g->G, g->qzl / 4 / g->G}, g->qz, g->qzl};
    if (with_gidx && g->has_g)
        t[n++] = (qe_tensor){P ".g_idx", AMN_DTYPE_I32, 1, {g->in}, g->gi, g->in * 4};
    t[n++] = (qe_tensor){P ".bias", AMN_DTYPE_F16, 1, {g->out}, bias, g->out * 2};
    return n;
}

static void compare(const char *path, const golden *g, amn_dtype out, const char *what) {
    const uint64_t shape[2] = {g->out, g->in};
    size_t nb;
    uint8_t *got = qe_read(path, P ".weight", out, 2, shape, &nb);
    uint8_t *exp = qg_expected(g->f32, g->bf16, g->out, g->in, true, out);
    assert_int_equal(nb, g->out * g->in * amn_dtype_size(out));
    assert_int_equal(qg_diff(what, got, exp, g->out * g->in, amn_dtype_size(out), g->in), 0);
    free(got);
    free(exp);
}

static void expected_label(const golden *g, bool with_gidx, char *buf, size_t size) {
    int k = g->G == 1 ? snprintf(buf, size, "GPTQ %u-bit, per-channel", g->bits)
                      : snprintf(buf, size, "GPTQ %u-bit, group %llu", g->bits,
                                 (unsigned long long)g->gs);
    if (with_gidx && g->act_order) snprintf(buf + k, size - (size_t)k, ", act-order");
}

static void run_dir(const char *dir, size_t min_files, size_t *values) {
    golden g[QG_MAX_FILES];
    const size_t n = load_dir(dir, g, QG_MAX_FILES);
    assert_true(n >= min_files);
    amn_simd lv[2];
    const size_t nl = qg_levels(lv);
    const amn_dtype outs[3] = {AMN_DTYPE_BF16, AMN_DTYPE_F32, AMN_DTYPE_F16};
    for (size_t i = 0; i < n; i++)
        for (int with = 0; with < 2; with++) {
            /* Without g_idx only where the groups are sequential anyway. */
            if (!with && g[i].act_order) continue;
            if (with && !g[i].has_g) continue;
            qe_tensor t[8];
            const size_t nt = golden_tensors(&g[i], t, with);
            char label[128], want[128];
            amn_error err = {0};
            if (qe_plan(t, nt, &err, label, sizeof label)) fail_msg("%s", err.msg);
            expected_label(&g[i], with, want, sizeof want);
            assert_string_equal(label, want);
            for (size_t li = 0; li < nl; li++)
                for (int oi = 0; oi < 3; oi++)
                    for (unsigned th = 1; th <= 2; th++) {
                        char path[512], what[256];
                        qe_path(path, sizeof path, "gptq-%zu.safetensors", i);
                        qe_set_simd(lv[li]);
                        qe_convert(t, nt, outs[oi], th, path);
                        unsetenv("AMN_SIMD");
                        snprintf(what, sizeof what, "%s #%zu %s %s threads %u%s", dir, i,
                                 amn_simd_name(lv[li]), amn_dtype_name(outs[oi]), th,
                                 with ? " g_idx" : "");
                        compare(path, &g[i], outs[oi], what);
                        assert_int_equal(qe_count(path), 2); /* weight and bias */
                        *values += g[i].out * g[i].in;
                    }
        }
    for (size_t i = 0; i < n; i++) free(g[i].buf);
}

static void test_gptq_goldens_through_core(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    if (!qe_have_writer()) skip();
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/gptq_reference", ref);
    size_t values = 0;
    run_dir(dir, 3, &values);
    fprintf(stderr, "gptq reference through the core: %zu values compared bit for bit\n", values);
}

static void test_gptq_lowbit_through_core(void **state) {
    (void)state;
    if (!qe_have_writer()) skip();
    size_t values = 0;
    run_dir(AMN_SOURCE_DIR "/fixtures/gptq", 8, &values);
    fprintf(stderr, "gptq packer data through the core: %zu values compared bit for bit\n", values);
}

/* amn_plan_dequantize: one group's rows outside a conversion, in two
 * uneven ranges, equal the goldens; its argument checks. */
static void test_gptq_plan_dequantize(void **state) {
    (void)state;
    golden g[QG_MAX_FILES];
    const size_t n = load_dir(AMN_SOURCE_DIR "/fixtures/gptq", g, QG_MAX_FILES);
    assert_true(n >= 8);
    for (size_t i = 0; i < n; i++) {
        qe_tensor t[8];
        const size_t nt = golden_tensors(&g[i], t, true);
        amn_model *m = qe_model(t, nt);
        amn_plan *p = NULL;
        amn_error err = {0};
        if (amn_plan_new(qe_ctx, m, &p, &err) != AMN_OK) fail_msg("plan: %s", err.msg);
        assert_int_equal(amn_plan_group_count(p), 1);
        uint64_t rows = 0, re = 0;
        assert_int_equal(amn_plan_group_rows(p, 0, &rows, &re, &err), AMN_OK);
        assert_int_equal(rows * re, g[i].out * g[i].in);
        const amn_dtype outs[2] = {AMN_DTYPE_F32, AMN_DTYPE_BF16};
        for (int oi = 0; oi < 2; oi++) {
            const size_t es = amn_dtype_size(outs[oi]);
            uint8_t *got = malloc(rows * re * es);
            assert_non_null(got);
            const uint64_t split = rows / 3;
            assert_int_equal(amn_plan_dequantize(p, 0, 0, split, outs[oi], got, &err), AMN_OK);
            assert_int_equal(amn_plan_dequantize(p, 0, split, rows - split, outs[oi],
                                                 got + split * re * es, &err),
                             AMN_OK);
            uint8_t *exp = qg_expected(g[i].f32, g[i].bf16, g[i].out, g[i].in, true, outs[oi]);
            assert_int_equal(qg_diff("plan_dequantize", got, exp, rows * re, es, g[i].in), 0);
            free(got);
            free(exp);
        }
        uint8_t one[8];
        assert_int_equal(amn_plan_dequantize(p, 1, 0, 1, AMN_DTYPE_F32, one, &err), AMN_E_INVALID);
        assert_non_null(strstr(err.msg, "out of range"));
        assert_int_equal(amn_plan_dequantize(p, 0, rows, 1, AMN_DTYPE_F32, one, &err),
                         AMN_E_INVALID);
        assert_non_null(strstr(err.msg, "outside"));
        assert_int_equal(amn_plan_dequantize(p, 0, 0, 1, AMN_DTYPE_I32, one, &err), AMN_E_INVALID);
        assert_non_null(strstr(err.msg, "only F32"));
        amn_plan_free(p);
        amn_model_free(m);
    }
    for (size_t i = 0; i < n; i++) free(g[i].buf);
}

static const golden *first_4bit(golden *g, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (g[i].bits == 4) return &g[i];
    fail_msg("no 4-bit golden");
    return NULL;
}

static void expect_error(const qe_tensor *t, size_t n, int code, const char *needle) {
    amn_error err = {0};
    int rc = qe_plan(t, n, &err, NULL, 0);
    if (rc != code || !strstr(err.msg, needle))
        fail_msg("expected %s naming \"%s\", got %s: %s", amn_error_class(code), needle,
                 amn_error_class(rc), err.msg);
}

/* The model's config beside it: bits and group size checked against the
 * shapes, checkpoint_format gptq_v2 stores zero points without the -1. */
static void test_gptq_config(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    if (!qe_have_writer()) skip();
    char dir[1200], cdir[512], cfg[600], model[600], path[512];
    snprintf(dir, sizeof dir, "%s/gptq_reference", ref);
    golden g[QG_MAX_FILES];
    const size_t n = load_dir(dir, g, QG_MAX_FILES);
    const golden *x = first_4bit(g, n);
    qe_tensor t[8];
    const size_t nt = golden_tensors(x, t, true);
    qe_path(cdir, sizeof cdir, "gptq-config");
    assert_int_equal(mkdir(cdir, 0700), 0);
    snprintf(cfg, sizeof cfg, "%s/quantize_config.json", cdir);
    snprintf(model, sizeof model, "%s/model.safetensors", cdir);
    qe_model_path = model;

    qe_write_text(cfg, "{\"bits\": 8, \"group_size\": 128, \"desc_act\": false}");
    expect_error(t, nt, AMN_E_PARSE, P ".qweight");
    qe_write_text(cfg, "{\"bits\": 4, \"group_size\": 64}");
    expect_error(t, nt, AMN_E_PARSE, P ".scales");
    qe_write_text(cfg, "{\"bits\": 6, \"group_size\": 128}");
    expect_error(t, nt, AMN_E_UNSUPPORTED, "6-bit");
    qe_write_text(cfg, "{\"bits\": 4, \"group_size\": 128, \"checkpoint_format\": \"marlin\"}");
    expect_error(t, nt, AMN_E_UNSUPPORTED, "marlin");
    qe_write_text(cfg, "not json at all {");
    char label[128];
    amn_error err = {0};
    assert_int_equal(qe_plan(t, nt, &err, label, sizeof label), AMN_OK);

    /* v2: the same zero points stored one higher give the same weights. */
    uint8_t *qz2 = malloc(x->qzl);
    assert_non_null(qz2);
    for (uint64_t k = 0; k < x->qzl; k += 4) {
        amn_store_le32(qz2 + k, amn_test_u32(x->qz + k) + 0x11111111u);
    }
    t[2].data = qz2;
    qe_write_text(cfg, "{\"bits\": 4, \"group_size\": 128, \"checkpoint_format\": \"gptq_v2\"}");
    assert_int_equal(qe_plan(t, nt, &err, label, sizeof label), AMN_OK);
    assert_string_equal(label, "GPTQ 4-bit, group 128, v2 zero points");
    qe_convert(t, nt, AMN_DTYPE_F32, 2, qe_path(path, sizeof path, "gptq-v2.safetensors"));
    compare(path, x, AMN_DTYPE_F32, "gptq v2");
    /* ... and read as v1 they do not. */
    unlink(cfg);
    qe_convert(t, nt, AMN_DTYPE_F32, 2, path);
    const uint64_t shape[2] = {x->out, x->in};
    size_t nb;
    uint8_t *got = qe_read(path, P ".weight", AMN_DTYPE_F32, 2, shape, &nb);
    uint8_t *exp = qg_expected(x->f32, x->bf16, x->out, x->in, true, AMN_DTYPE_F32);
    assert_true(memcmp(got, exp, nb) != 0);
    free(got);
    free(exp);
    free(qz2);
    qe_model_path = NULL;
    for (size_t i = 0; i < n; i++) free(g[i].buf);
}

static void test_gptq_malformed(void **state) {
    (void)state;
    static int32_t qw[32 * 256], qz[2 * 40], gi[256];
    static uint16_t sc[3 * 256];
    /* tensor bytes are little-endian, as in a checkpoint */
    for (int i = 0; i < 256; i++) amn_store_le32(&gi[i], (uint32_t)(i / 128));
    /* 4-bit, in 256, out 256, two groups: the well-formed base. */
    qe_tensor ok[4] = {{"l.qweight", AMN_DTYPE_I32, 2, {32, 256}, qw, 32 * 256 * 4},
                       {"l.scales", AMN_DTYPE_F16, 2, {2, 256}, sc, 2 * 256 * 2},
                       {"l.qzeros", AMN_DTYPE_I32, 2, {2, 32}, qz, 2 * 32 * 4},
                       {"l.g_idx", AMN_DTYPE_I32, 1, {256}, gi, 256 * 4}};
    amn_error err = {0};
    char label[128];
    if (qe_plan(ok, 4, &err, label, sizeof label) != AMN_OK) fail_msg("%s", err.msg);
    assert_string_equal(label, "GPTQ 4-bit, group 128");
    qe_tensor t[4];

    memcpy(t, ok, sizeof t); /* zero points of no supported width */
    t[2].shape[1] = 33;
    t[2].nbytes = 2 * 33 * 4;
    expect_error(t, 4, AMN_E_PARSE, "l.qzeros");
    memcpy(t, ok, sizeof t); /* 5-bit planar */
    t[2].shape[1] = 40;
    t[2].nbytes = 2 * 40 * 4;
    expect_error(t, 4, AMN_E_UNSUPPORTED, "l.qzeros");
    memcpy(t, ok, sizeof t); /* scales for another out_features */
    t[1].shape[1] = 128;
    t[1].nbytes = 2 * 128 * 2;
    expect_error(t, 4, AMN_E_PARSE, "l.scales");
    memcpy(t, ok, sizeof t); /* three groups do not divide 256 inputs */
    t[1].shape[0] = 3;
    t[1].nbytes = 3 * 256 * 2;
    t[2].shape[0] = 3;
    t[2].nbytes = 3 * 32 * 4;
    expect_error(t, 4, AMN_E_PARSE, "l.scales");
    memcpy(t, ok, sizeof t); /* qzeros with another group count */
    t[2].shape[0] = 1;
    t[2].nbytes = 32 * 4;
    expect_error(t, 4, AMN_E_PARSE, "l.qzeros");
    memcpy(t, ok, sizeof t); /* g_idx of the wrong length */
    t[3].shape[0] = 128;
    t[3].nbytes = 128 * 4;
    expect_error(t, 4, AMN_E_PARSE, "l.g_idx");
    memcpy(t, ok, sizeof t); /* a g_idx value past the last group */
    amn_store_le32(&gi[77], 2);
    expect_error(t, 4, AMN_E_PARSE, "l.g_idx");
    amn_store_le32(&gi[77], UINT32_MAX); /* -1 */
    expect_error(t, 4, AMN_E_PARSE, "l.g_idx");
    amn_store_le32(&gi[77], 0);
    memcpy(t, ok, sizeof t); /* 3-bit zero points with qweight rows not a multiple of 3 */
    t[0].shape[0] = 31;
    t[0].nbytes = 31 * 256 * 4;
    t[2].shape[1] = 24;
    t[2].nbytes = 2 * 24 * 4;
    t[3].shape[0] = 248;
    expect_error(t, 3, AMN_E_PARSE, "l.qweight");
    memcpy(t, ok, sizeof t); /* qweight without qzeros */
    t[2] = t[3];
    expect_error(t, 3, AMN_E_PARSE, "l.qweight");
    memcpy(t, ok, sizeof t); /* qzeros without qweight */
    t[0] = (qe_tensor){"k.qzeros", AMN_DTYPE_I32, 2, {2, 32}, qz, 2 * 32 * 4};
    qe_tensor u[5];
    memcpy(u, ok, sizeof ok);
    u[4] = t[0];
    expect_error(u, 5, AMN_E_PARSE, "k.qzeros");
    memcpy(t, ok, sizeof t); /* a float qweight */
    t[0].dtype = AMN_DTYPE_F32;
    expect_error(t, 4, AMN_E_PARSE, "l.qweight");
    /* The output name taken by a plain tensor. */
    memcpy(u, ok, sizeof ok);
    u[4] = (qe_tensor){"l.weight", AMN_DTYPE_F16, 1, {256}, sc, 512};
    expect_error(u, 5, AMN_E_PARSE, "l.weight");
}

static void test_gptq_cli(void **state) {
    (void)state;
    if (!qe_have_writer()) skip();
    golden g[QG_MAX_FILES];
    const size_t n = load_dir(AMN_SOURCE_DIR "/fixtures/gptq", g, QG_MAX_FILES);
    assert_true(n >= 1);
    for (size_t i = 0; i < n; i++) {
        if (g[i].bits != 3 && i + 1 < n) continue; /* one 3-bit file through the CLI */
        qe_tensor t[8];
        const size_t nt = golden_tensors(&g[i], t, true);
        char cdir[512], in[600], cfg[600], out[512], args[2048], text[256];
        snprintf(cdir, sizeof cdir, "%s/gptq-cli-%zu", amn_test_scratch(), i);
        assert_int_equal(mkdir(cdir, 0700), 0);
        snprintf(in, sizeof in, "%s/model.safetensors", cdir);
        snprintf(cfg, sizeof cfg, "%s/config.json", cdir);
        snprintf(text, sizeof text,
                 "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": %u, "
                 "\"group_size\": %llu, \"desc_act\": %s}}",
                 g[i].bits, g[i].G == 1 ? (unsigned long long)-1 : (unsigned long long)g[i].gs,
                 g[i].act_order ? "true" : "false");
        if (g[i].G == 1)
            snprintf(text, sizeof text,
                     "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": %u, "
                     "\"group_size\": -1}}",
                     g[i].bits);
        qe_write_text(cfg, text);
        qe_write_st(in, t, nt, "{\"format\":\"pt\"}");
        qe_path(out, sizeof out, "gptq-cli-%zu.safetensors", i);
        snprintf(args, sizeof args, "remember '%s' -o '%s' --force", in, out);
        assert_int_equal(qe_cli(args), 0);
        compare(out, &g[i], AMN_DTYPE_BF16, "cli bf16");
        snprintf(args, sizeof args, "remember '%s' --to f32 -o '%s' --force", in, out);
        assert_int_equal(qe_cli(args), 0);
        compare(out, &g[i], AMN_DTYPE_F32, "cli f32");
        break;
    }
    for (size_t i = 0; i < n; i++) free(g[i].buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gptq_goldens_through_core),
        cmocka_unit_test(test_gptq_lowbit_through_core),
        cmocka_unit_test(test_gptq_plan_dequantize),
        cmocka_unit_test(test_gptq_config),
        cmocka_unit_test(test_gptq_malformed),
        cmocka_unit_test(test_gptq_cli),
    };
    return cmocka_run_group_tests(tests, qe_setup, qe_teardown);
}
