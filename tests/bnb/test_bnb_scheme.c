/* The "bnb" scheme through the core: detect() on models built over every
 * golden of bnb_reference/ as transformers stores them (quant_state blob,
 * companions), dequantize() through amn_convert on every SIMD path, output
 * dtype and thread count, `amn remember` on a safetensors file written from
 * a golden, inspect of the reference header, and malformed companions (each
 * a parse error naming the tensor). */
#include "quant_e2e.h"

#define P "model.layers.0.mlp.gate_proj"

typedef struct golden {
    uint8_t *buf;
    uint32_t fmt;
    uint64_t n, rows, cols, bs;
    uint32_t wl, al, nal;
    float offset;
    const uint8_t *w, *a, *q, *na, *nq, *bf16, *f32;
} golden;

static size_t load_goldens(golden *g, size_t max) {
    const char *ref = amn_test_reference_dir();
    if (!ref) return 0;
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/bnb_reference", ref);
    static char paths[QG_MAX_FILES][1024];
    size_t n = qg_list(dir, paths);
    if (n > max) n = max;
    for (size_t i = 0; i < n; i++) {
        size_t size = 0;
        uint8_t *b = amn_test_read_file(paths[i], &size);
        assert_non_null(b);
        assert_true(size >= 52 && memcmp(b, "AMNB", 4) == 0);
        golden *x = &g[i];
        *x = (golden){.buf = b, .fmt = qg_u32(b, 8)};
        if (x->fmt == 1) {
            x->rows = qg_u32(b, 12);
            x->cols = qg_u32(b, 16);
            x->n = x->rows * x->cols;
            x->wl = qg_u32(b, 20);
            x->w = b + 36;
            x->a = x->w + x->wl;
            x->bf16 = x->a + qg_u32(b, 24);
            x->f32 = x->bf16 + qg_u32(b, 28);
            continue;
        }
        x->n = qg_u32(b, 12);
        x->bs = qg_u32(b, 16);
        x->wl = qg_u32(b, 20);
        x->al = qg_u32(b, 24);
        x->nal = qg_u32(b, 32);
        x->offset = amn_load_le_f32(b + 48);
        x->rows = 64;
        x->cols = x->n / 64;
        x->w = b + 52;
        x->a = x->w + x->wl;
        x->q = x->a + x->al;
        x->na = x->q + 64;
        x->nq = x->na + x->nal;
        x->bf16 = x->nq + qg_u32(b, 36);
        x->f32 = x->bf16 + qg_u32(b, 40);
    }
    return n;
}

static char blob[512];
static uint8_t fmt_byte;

static const char *kind_of(const golden *g) {
    return memcmp(g->q + 4, "\xab\xaa\xaa\x3b", 4) == 0 ? "fp4" : "nf4";
}

/* The golden as transformers saves it; blob_override replaces the JSON. */
static size_t golden_tensors(const golden *g, qe_tensor *t, const char *blob_override) {
    static uint16_t norm[64];
    for (int i = 0; i < 64; i++) amn_store_le16(&norm[i], amn_f32_to_bf16(1.0f + (float)i / 64.0f));
    size_t n = 0;
    if (g->fmt == 1) {
        t[n++] = (qe_tensor){P ".weight", AMN_DTYPE_I8, 2, {g->rows, g->cols}, g->w, g->n};
        t[n++] = (qe_tensor){P ".SCB", AMN_DTYPE_F32, 1, {g->rows}, g->a, g->rows * 4};
        fmt_byte = 0;
        t[n++] = (qe_tensor){P ".weight_format", AMN_DTYPE_U8, 0, {0}, &fmt_byte, 1};
    } else {
        const bool nested = g->fmt == 2;
        const char *kind = kind_of(g);
        if (blob_override)
            snprintf(blob, sizeof blob, "%s", blob_override);
        else if (nested)
            snprintf(blob, sizeof blob,
                     "{\"quant_type\": \"%s\", \"blocksize\": %llu, \"dtype\": \"bfloat16\", "
                     "\"shape\": [%llu, %llu], \"nested_blocksize\": 256, \"nested_dtype\": "
                     "\"float32\", \"nested_offset\": %.9g}",
                     kind, (unsigned long long)g->bs, (unsigned long long)g->rows,
                     (unsigned long long)g->cols, (double)g->offset);
        else
            snprintf(blob, sizeof blob,
                     "{\"quant_type\": \"%s\", \"blocksize\": %llu, \"dtype\": \"bfloat16\", "
                     "\"shape\": [%llu, %llu]}",
                     kind, (unsigned long long)g->bs, (unsigned long long)g->rows,
                     (unsigned long long)g->cols);
        t[n++] = (qe_tensor){P ".weight", AMN_DTYPE_U8, 2, {g->wl, 1}, g->w, g->wl};
        t[n++] = (qe_tensor){P ".weight.absmax",
                             nested ? AMN_DTYPE_U8 : AMN_DTYPE_F32,
                             1,
                             {nested ? g->al : g->al / 4},
                             g->a,
                             g->al};
        t[n++] = (qe_tensor){P ".weight.quant_map", AMN_DTYPE_F32, 1, {16}, g->q, 64};
        if (nested) {
            t[n++] = (qe_tensor){
                P ".weight.nested_absmax", AMN_DTYPE_F32, 1, {g->nal / 4}, g->na, g->nal};
            t[n++] =
                (qe_tensor){P ".weight.nested_quant_map", AMN_DTYPE_F32, 1, {256}, g->nq, 1024};
        }
        static char bname[128];
        snprintf(bname, sizeof bname, P ".weight.quant_state.bitsandbytes__%s", kind);
        t[n++] = (qe_tensor){bname, AMN_DTYPE_U8, 1, {strlen(blob)}, blob, strlen(blob)};
    }
    t[n++] = (qe_tensor){"model.norm.weight", AMN_DTYPE_BF16, 1, {64}, norm, 128};
    return n;
}

static void compare(const char *path, const golden *g, amn_dtype out, const char *what) {
    size_t nb;
    const uint64_t shape[2] = {g->rows, g->cols};
    uint8_t *got = qe_read(path, P ".weight", out, 2, shape, &nb);
    uint8_t *exp = qg_expected(g->f32, g->bf16, g->rows, g->cols, false, out);
    assert_int_equal(qg_diff(what, got, exp, g->n, amn_dtype_size(out), g->cols), 0);
    assert_int_equal(qe_count(path), 2); /* the weight and the norm */
    free(got);
    free(exp);
}

static void test_bnb_convert_goldens(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    (void)ref;
    if (!qe_have_writer()) skip();
    golden g[8];
    const size_t n = load_goldens(g, 8);
    assert_int_equal(n, 5);
    amn_simd lv[2];
    const size_t nlv = qg_levels(lv);
    const amn_dtype outs[3] = {AMN_DTYPE_BF16, AMN_DTYPE_F32, AMN_DTYPE_F16};
    char path[512], what[256];
    for (size_t i = 0; i < n; i++) {
        qe_tensor t[8];
        const size_t nt = golden_tensors(&g[i], t, NULL);
        char label[128];
        amn_error err = {0};
        assert_int_equal(qe_plan(t, nt, &err, label, sizeof label), AMN_OK);
        assert_non_null(strstr(label, "bitsandbytes"));
        for (size_t li = 0; li < nlv; li++) {
            qe_set_simd(lv[li]);
            for (size_t oi = 0; oi < 3; oi++)
                for (unsigned th = 1; th <= 3; th++) {
                    qe_path(path, sizeof path, "g%zu.safetensors", i);
                    qe_convert(t, nt, outs[oi], th, path);
                    snprintf(what, sizeof what, "golden %zu (%s) %s %s %u threads", i, label,
                             amn_simd_name(lv[li]), amn_dtype_name(outs[oi]), th);
                    compare(path, &g[i], outs[oi], what);
                }
        }
        unsetenv("AMN_SIMD");
        /* The CLI on a file written from the golden. */
        char in[512], out[512], args[1200];
        qe_path(in, sizeof in, "cli%zu-bnb-4bit.safetensors", i);
        qe_path(out, sizeof out, "cli%zu-f32.safetensors", i);
        qe_write_st(in, t, nt, NULL);
        snprintf(args, sizeof args, "remember '%s' --to f32 -o '%s'", in, out);
        assert_int_equal(qe_cli(args), 0);
        compare(out, &g[i], AMN_DTYPE_F32, "cli");
    }
    for (size_t i = 0; i < n; i++) free(g[i].buf);
}

/* The synthetic reference header: detected from names alone (inspect reads
 * no data), and fully when opened. */
static void test_bnb_reference_header(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    char path[1200];
    snprintf(path, sizeof path, "%s/safetensors_reference/bnb_nf4.safetensors", ref);
    amn_model *m = NULL;
    amn_error err = {0};
    assert_int_equal(amn_open(qe_ctx, path, NULL, NULL, &m, &err), AMN_OK);
    amn_plan *p = NULL;
    assert_int_equal(amn_plan_new(qe_ctx, m, &p, &err), AMN_OK);
    amn_group_info gi = {.struct_size = sizeof(amn_group_info)};
    assert_int_equal(amn_plan_group_count(p), 1);
    assert_int_equal(amn_plan_group(p, 0, &gi), AMN_OK);
    assert_string_equal(gi.out_name, "model.layers.0.weight");
    assert_string_equal(gi.label, "bitsandbytes NF4, block 64");
    assert_int_equal(gi.ndim, 2);
    assert_int_equal(gi.shape[0], 8);
    assert_int_equal(gi.shape[1], 8);
    amn_plan_free(p);
    amn_model_free(m);
    char args[1300];
    snprintf(args, sizeof args, "inspect '%s'", path);
    assert_int_equal(qe_cli(args), 0);
}

typedef struct bad_case {
    const char *what;
    int fmt;            /* golden format to start from */
    const char *blob;   /* replaces the JSON, or NULL */
    int edit;           /* see apply_edit */
    int code;           /* expected error class */
    const char *words;  /* expected in the message */
    const char *config; /* config.json beside the model, or NULL */
} bad_case;

/* Each edit breaks one thing of a good golden model. */
static size_t apply_edit(qe_tensor *t, size_t nt, int edit, uint8_t *scratch) {
    switch (edit) {
    case 1: /* absmax one short */
        t[1].shape[0]--;
        t[1].nbytes -= amn_dtype_size(t[1].dtype);
        break;
    case 2: /* a NaN absmax */
        memcpy(scratch, t[1].data, t[1].nbytes);
        memcpy(scratch + 8, "\x00\x00\xc0\x7f", 4);
        t[1].data = scratch;
        break;
    case 3: /* an infinite nested absmax */
        memcpy(scratch, "\x00\x00\x80\x7f", 4);
        t[3].data = scratch;
        break;
    case 4: /* packed weight one byte short */
        t[0].shape[0]--;
        t[0].nbytes--;
        break;
    case 5: /* quant_map of 15 */
        t[2].shape[0] = 15;
        t[2].nbytes = 60;
        break;
    case 6: /* absmax without its quant_state: drop the blob */
        for (size_t i = 0; i < nt; i++)
            if (strstr(t[i].name, "quant_state")) {
                memmove(&t[i], &t[i + 1], (nt - i - 1) * sizeof *t);
                return nt - 1;
            }
        break;
    case 7: /* nested_quant_map without nested_absmax */
        memmove(&t[3], &t[4], (nt - 4) * sizeof *t);
        return nt - 1;
    case 8: /* SCB one short */
        t[1].shape[0]--;
        t[1].nbytes -= 4;
        break;
    case 9: /* a NaN SCB */
        memcpy(scratch, t[1].data, t[1].nbytes);
        memcpy(scratch + 4, "\x00\x00\xc0\x7f", 4);
        t[1].data = scratch;
        break;
    case 10: /* weight_format 1 */
        scratch[0] = 1;
        t[2].data = scratch;
        break;
    case 11: /* INT8 weight as U8 */
        t[0].dtype = AMN_DTYPE_U8;
        break;
    case 12: /* quant_state stored as I32 */
        for (size_t i = 0; i < nt; i++)
            if (strstr(t[i].name, "quant_state")) {
                t[i].dtype = AMN_DTYPE_I32;
                t[i].shape[0] /= 4;
                t[i].nbytes = t[i].shape[0] * 4;
            }
        break;
    default:
        break;
    }
    return nt;
}

static void test_bnb_malformed(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    (void)ref;
    golden g[8];
    const size_t n = load_goldens(g, 8);
    assert_int_equal(n, 5);
    const golden *by_fmt[3] = {NULL, NULL, NULL};
    for (size_t i = 0; i < n; i++)
        if (!by_fmt[g[i].fmt] && (g[i].fmt != 0 || strcmp(kind_of(&g[i]), "nf4") == 0))
            by_fmt[g[i].fmt] = &g[i];
            /* config is given only where a case needs one */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
    const bad_case cases[] = {
        {"absmax wrong length", 0, NULL, 1, AMN_E_PARSE, P ".weight.absmax: expected absmax"},
        {"NaN absmax", 0, NULL, 2, AMN_E_PARSE, P ".weight.absmax: value 2 is NaN"},
        {"Inf nested absmax", 2, NULL, 3, AMN_E_PARSE, "nested_absmax: value 0 is infinite"},
        {"packed length", 0, NULL, 4, AMN_E_PARSE, P ".weight: 2047 packed bytes"},
        {"quant_map length", 0, NULL, 5, AMN_E_PARSE, "quant_map: expected quant_map F32"},
        {"orphan absmax", 0, NULL, 6, AMN_E_PARSE, P ".weight.absmax: a bitsandbytes companion"},
        {"nested map alone", 2, NULL, 7, AMN_E_PARSE, "without nested_absmax"},
        {"SCB length", 1, NULL, 8, AMN_E_PARSE, P ".SCB: expected SCB"},
        {"NaN SCB", 1, NULL, 9, AMN_E_PARSE, P ".SCB: value 1 is NaN"},
        {"weight_format 1", 1, NULL, 10, AMN_E_UNSUPPORTED, "weight_format 1"},
        {"int8 as U8", 1, NULL, 11, AMN_E_PARSE, "must be 2-D I8"},
        {"blob dtype", 0, NULL, 12, AMN_E_PARSE, "must be 1-D U8"},
        {"blob not JSON", 0, "{\"quant_type\": \"nf4\", ", 0, AMN_E_PARSE,
         "bitsandbytes__nf4: quant_state is not a JSON object"},
        {"blob an array", 0, "[1, 2]", 0, AMN_E_PARSE, "not a JSON object"},
        {"blob trailing bytes", 0,
         "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"shape\": [64, 64]} x", 0, AMN_E_PARSE,
         "not a JSON object"},
        {"no blocksize", 0, "{\"quant_type\": \"nf4\", \"shape\": [64, 64]}", 0, AMN_E_PARSE,
         "blocksize missing"},
        {"shape contradicts", 0,
         "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"shape\": [64, 65]}", 0, AMN_E_PARSE,
         "quant_state shape holds 4160 values"},
        {"shape not sizes", 0, "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"shape\": [64, -64]}",
         0, AMN_E_PARSE, "not a size"},
        {"blocksize contradicts absmax", 0,
         "{\"quant_type\": \"nf4\", \"blocksize\": 128, \"shape\": [64, 64]}", 0, AMN_E_PARSE,
         "expected absmax F32 of 32 values"},
        {"quant_type contradicts", 0,
         "{\"quant_type\": \"fp4\", \"blocksize\": 64, \"shape\": [64, 64]}", 0, AMN_E_PARSE,
         "quant_type \"fp4\" in a __nf4"},
        {"nested block does not fit", 2,
         "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"shape\": [64, 64], \"nested_blocksize\": "
         "16, \"nested_offset\": 0.05}",
         0, AMN_E_PARSE, "nested_absmax: expected nested_absmax (one per nested block) F32 of 4"},
        {"no nested_offset", 2,
         "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"shape\": [64, 64], \"nested_blocksize\": "
         "256}",
         0, AMN_E_PARSE, "without a nested_offset"},
        {"config says 8-bit", 0, NULL, 0, AMN_E_PARSE, "says load_in_8bit",
         "{\"quantization_config\": {\"quant_method\": \"bitsandbytes\", \"load_in_8bit\": true}}"},
        {"config says fp4", 0, NULL, 0, AMN_E_PARSE, "bnb_4bit_quant_type says fp4",
         "{\"quantization_config\": {\"quant_method\": \"bitsandbytes\", \"load_in_4bit\": true, "
         "\"bnb_4bit_quant_type\": \"fp4\"}}"},
        {"config says double quant", 0, NULL, 0, AMN_E_PARSE, "bnb_4bit_use_double_quant says true",
         "{\"quantization_config\": {\"quant_method\": \"bitsandbytes\", \"load_in_4bit\": true, "
         "\"bnb_4bit_use_double_quant\": true}}"},
    };
#pragma GCC diagnostic pop
    char cfg_path[512], model_path[512];
    qe_path(cfg_path, sizeof cfg_path, "config.json");
    qe_path(model_path, sizeof model_path, "model.safetensors");
    static uint8_t scratch[1 << 16];
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const bad_case *c = &cases[k];
        qe_tensor t[8];
        size_t nt = golden_tensors(by_fmt[c->fmt], t, c->blob);
        nt = apply_edit(t, nt, c->edit, scratch);
        if (c->config) {
            qe_write_text(cfg_path, c->config);
            qe_model_path = model_path;
        }
        amn_error err = {0};
        const int rc = qe_plan(t, nt, &err, NULL, 0);
        qe_model_path = NULL;
        if (c->config) unlink(cfg_path);
        if (rc != c->code || !strstr(err.msg, c->words))
            fail_msg("%s: rc %d (expected %d), message \"%s\" (expected \"%s\")", c->what, rc,
                     c->code, err.msg, c->words);
    }
    /* A config that agrees is fine. */
    qe_tensor t[8];
    const size_t nt = golden_tensors(by_fmt[2], t, NULL);
    qe_write_text(cfg_path, "{\"quantization_config\": {\"quant_method\": \"bitsandbytes\", "
                            "\"load_in_4bit\": true, \"bnb_4bit_quant_type\": \"nf4\", "
                            "\"bnb_4bit_use_double_quant\": true}}");
    qe_model_path = model_path;
    amn_error err = {0};
    assert_int_equal(qe_plan(t, nt, &err, NULL, 0), AMN_OK);
    qe_model_path = NULL;
    unlink(cfg_path);
    for (size_t i = 0; i < n; i++) free(g[i].buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bnb_convert_goldens),
        cmocka_unit_test(test_bnb_reference_header),
        cmocka_unit_test(test_bnb_malformed),
    };
    return cmocka_run_group_tests(tests, qe_setup, qe_teardown);
}
