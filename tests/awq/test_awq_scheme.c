/* The "awq" scheme through the core: detect() on models built over the
 * reference golden (awq_reference/), dequantize() through amn_convert on
 * every SIMD path, output dtype and thread count, compared transposed
 * ([out, in] against the [in, out] golden); other AWQ layouts refused by
 * name; malformed companions; and `amn remember` on a safetensors file
 * written from the golden. */
#include "quant_e2e.h"

#define P "model.layers.0.mlp.gate_proj"

typedef struct golden {
    uint8_t *buf;
    uint64_t gs, in, out, G;
    amn_dtype stype;
    uint64_t qwl, scl, qzl;
    const uint8_t *qw, *sc, *qz, *bf16, *f32;
} golden;

static void load(golden *x) {
    const char *ref = amn_test_reference_dir();
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/awq_reference", ref);
    static char paths[QG_MAX_FILES][1024];
    assert_true(qg_list(dir, paths) >= 1);
    size_t size;
    uint8_t *b = amn_test_read_file(paths[0], &size);
    assert_non_null(b);
    assert_true(size >= 48 && memcmp(b, "AMNA", 4) == 0);
    *x = (golden){.buf = b,
                  .gs = qg_u32(b, 12),
                  .in = qg_u32(b, 16),
                  .out = qg_u32(b, 20),
                  .stype = qg_scale_dtype(qg_u32(b, 24)),
                  .qwl = qg_u32(b, 28),
                  .scl = qg_u32(b, 32),
                  .qzl = qg_u32(b, 36)};
    x->G = x->in / x->gs;
    const uint64_t bl = qg_u32(b, 40);
    assert_int_equal(48 + x->qwl + x->scl + x->qzl + bl + qg_u32(b, 44), size);
    x->qw = b + 48;
    x->sc = x->qw + x->qwl;
    x->qz = x->sc + x->scl;
    x->bf16 = x->qz + x->qzl;
    x->f32 = x->bf16 + bl;
}

static size_t golden_tensors(const golden *g, qe_tensor *t) {
    static uint16_t norm[4096];
    size_t n = 0;
    t[n++] = (qe_tensor){P ".qweight", AMN_DTYPE_I32, 2, {g->in, g->out / 8}, g->qw, g->qwl};
    t[n++] = (qe_tensor){P ".qzeros", AMN_DTYPE_I32, 2, {g->G, g->out / 8}, g->qz, g->qzl};
    t[n++] = (qe_tensor){P ".scales", g->stype, 2, {g->G, g->out}, g->sc, g->scl};
    t[n++] = (qe_tensor){"model.norm.weight", AMN_DTYPE_F16, 1, {g->in}, norm, g->in * 2};
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

static void test_awq_golden_through_core(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    (void)ref;
    if (!qe_have_writer()) skip();
    golden g;
    load(&g);
    qe_tensor t[8];
    const size_t nt = golden_tensors(&g, t);
    char label[128];
    amn_error err = {0};
    assert_int_equal(qe_plan(t, nt, &err, label, sizeof label), AMN_OK);
    assert_string_equal(label, "AWQ 4-bit GEMM, group 128");
    amn_simd lv[2];
    const size_t nl = qg_levels(lv);
    const amn_dtype outs[3] = {AMN_DTYPE_BF16, AMN_DTYPE_F32, AMN_DTYPE_F16};
    size_t values = 0;
    for (size_t li = 0; li < nl; li++)
        for (int oi = 0; oi < 3; oi++)
            for (unsigned th = 1; th <= 2; th++) {
                char path[512], what[256];
                qe_path(path, sizeof path, "awq.safetensors");
                qe_set_simd(lv[li]);
                qe_convert(t, nt, outs[oi], th, path);
                unsetenv("AMN_SIMD");
                snprintf(what, sizeof what, "awq %s %s threads %u", amn_simd_name(lv[li]),
                         amn_dtype_name(outs[oi]), th);
                compare(path, &g, outs[oi], what);
                assert_int_equal(qe_count(path), 2);
                values += g.out * g.in;
            }
    fprintf(stderr, "awq through the core: %zu values compared bit for bit\n", values);
    free(g.buf);
}

static void expect_error(const qe_tensor *t, size_t n, int code, const char *needle) {
    amn_error err = {0};
    int rc = qe_plan(t, n, &err, NULL, 0);
    if (rc != code || !strstr(err.msg, needle))
        fail_msg("expected %s naming \"%s\", got %s: %s", amn_error_class(code), needle,
                 amn_error_class(rc), err.msg);
}

static void test_awq_refused_layouts(void **state) {
    (void)state;
    static int32_t qw[256 * 32], qz[2 * 32];
    static uint16_t sc[2 * 256];
    const qe_tensor ok[3] = {{"l.qweight", AMN_DTYPE_I32, 2, {256, 32}, qw, sizeof qw},
                             {"l.qzeros", AMN_DTYPE_I32, 2, {2, 32}, qz, 2 * 32 * 4},
                             {"l.scales", AMN_DTYPE_F16, 2, {2, 256}, sc, 2 * 256 * 2}};
    char cdir[512], cfg[600], model[600];
    qe_path(cdir, sizeof cdir, "awq-config");
    assert_int_equal(mkdir(cdir, 0700), 0);
    snprintf(cfg, sizeof cfg, "%s/config.json", cdir);
    snprintf(model, sizeof model, "%s/model.safetensors", cdir);
    qe_model_path = model;
    qe_write_text(cfg, "{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, "
                       "\"group_size\": 128, \"version\": \"gemv\"}}");
    expect_error(ok, 3, AMN_E_UNSUPPORTED, "gemv");
    qe_write_text(cfg, "{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 8, "
                       "\"group_size\": 128, \"version\": \"gemm\"}}");
    expect_error(ok, 3, AMN_E_UNSUPPORTED, "8-bit");
    qe_write_text(cfg, "{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, "
                       "\"group_size\": 64, \"version\": \"gemm\"}}");
    expect_error(ok, 3, AMN_E_PARSE, "l.scales");
    qe_write_text(cfg, "{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, "
                       "\"group_size\": 128, \"version\": \"GEMM\"}}");
    char label[128];
    amn_error err = {0};
    assert_int_equal(qe_plan(ok, 3, &err, label, sizeof label), AMN_OK);
    assert_string_equal(label, "AWQ 4-bit GEMM, group 128");
    /* AutoAWQ's GEMV layout: qweight [out, in/8], scales [out, groups]. */
    const qe_tensor gemv[3] = {{"l.qweight", AMN_DTYPE_I32, 2, {256, 32}, qw, sizeof qw},
                               {"l.qzeros", AMN_DTYPE_I32, 2, {256, 1}, qz, 256 * 4},
                               {"l.scales", AMN_DTYPE_F16, 2, {256, 2}, sc, 256 * 2 * 2}};
    expect_error(gemv, 3, AMN_E_UNSUPPORTED, "GEMV");
    qe_model_path = NULL;
    expect_error(gemv, 3, AMN_E_UNSUPPORTED, "GEMV");
}

static void test_awq_malformed(void **state) {
    (void)state;
    static int32_t qw[256 * 32], qz[3 * 32];
    static uint16_t sc[3 * 256];
    const qe_tensor ok[3] = {{"l.qweight", AMN_DTYPE_I32, 2, {256, 32}, qw, sizeof qw},
                             {"l.qzeros", AMN_DTYPE_I32, 2, {2, 32}, qz, 2 * 32 * 4},
                             {"l.scales", AMN_DTYPE_F16, 2, {2, 256}, sc, 2 * 256 * 2}};
    qe_tensor t[4];
    memcpy(t, ok, sizeof ok); /* zero points of another width */
    t[1].shape[1] = 16;
    t[1].nbytes = 2 * 16 * 4;
    expect_error(t, 3, AMN_E_PARSE, "l.qzeros");
    memcpy(t, ok, sizeof ok); /* three groups do not divide 256 inputs */
    t[1].shape[0] = 3;
    t[1].nbytes = 3 * 32 * 4;
    t[2].shape[0] = 3;
    t[2].nbytes = 3 * 256 * 2;
    expect_error(t, 3, AMN_E_PARSE, "l.scales");
    memcpy(t, ok, sizeof ok); /* scales of an integer dtype */
    t[2].dtype = AMN_DTYPE_I16;
    expect_error(t, 3, AMN_E_PARSE, "l.scales");
    memcpy(t, ok, sizeof ok); /* no qzeros */
    expect_error((const qe_tensor[]){ok[0], ok[2]}, 2, AMN_E_PARSE, "l.qweight");
    memcpy(t, ok, sizeof ok); /* qzeros without qweight */
    t[3] = (qe_tensor){"k.qzeros", AMN_DTYPE_I32, 2, {2, 32}, qz, 2 * 32 * 4};
    expect_error(t, 4, AMN_E_PARSE, "k.qzeros");
}

static void test_awq_cli(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    (void)ref;
    if (!qe_have_writer()) skip();
    golden g;
    load(&g);
    qe_tensor t[8];
    const size_t nt = golden_tensors(&g, t);
    char cdir[512], in[600], out[512], args[2048];
    qe_path(cdir, sizeof cdir, "awq-cli");
    assert_int_equal(mkdir(cdir, 0700), 0);
    snprintf(in, sizeof in, "%s/model.safetensors", cdir);
    qe_write_st(in, t, nt, "{\"format\":\"pt\"}");
    snprintf(args, sizeof args, "%s/quant_config.json", cdir);
    qe_write_text(args, "{\"zero_point\": true, \"q_group_size\": 128, \"w_bit\": 4, "
                        "\"version\": \"GEMM\"}");
    qe_path(out, sizeof out, "awq-cli.safetensors");
    snprintf(args, sizeof args, "remember '%s' -o '%s' --force", in, out);
    assert_int_equal(qe_cli(args), 0);
    compare(out, &g, AMN_DTYPE_BF16, "cli bf16");
    snprintf(args, sizeof args, "remember '%s' --to f32 -o '%s' --force", in, out);
    assert_int_equal(qe_cli(args), 0);
    compare(out, &g, AMN_DTYPE_F32, "cli f32");
    free(g.buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_awq_golden_through_core),
        cmocka_unit_test(test_awq_refused_layouts),
        cmocka_unit_test(test_awq_malformed),
        cmocka_unit_test(test_awq_cli),
    };
    return cmocka_run_group_tests(tests, qe_setup, qe_teardown);
}
