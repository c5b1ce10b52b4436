/* The bnb encoder through the core (amn_convert with encode options) and the
 * CLI (`amn forget`, `amn quantize`, `amn convert --to bnb-*`): every output
 * tensor byte for byte against fixtures/bnb/expect-*.safetensors, which
 * fixtures/bnb/gen_fixtures.py computes in numpy from bitsandbytes' kernels,
 * at every thread count and SIMD level; passthrough tensors unchanged; block
 * sizes outside bitsandbytes' set refused before any output; config.json
 * written beside the output. */
#include <json-c/json.h>

#include "quant_e2e.h"

#define FIX   AMN_SOURCE_DIR "/fixtures/bnb"
#define MODEL FIX "/model/model.safetensors"

static int encode_from(const char *in, const char *target, uint64_t bs, unsigned threads,
                       const char *out, amn_convert_stats *st, amn_error *err) {
    amn_model *m = NULL;
    amn_plan *p = NULL;
    int rc = amn_open(qe_ctx, in, NULL, NULL, &m, err);
    if (!rc) rc = amn_plan_new(qe_ctx, m, &p, err);
    const amn_encode_options eo = {.struct_size = sizeof eo, .target = target, .block_size = bs};
    const char *keep[1] = {"*.nothing"};
    amn_convert_options o = {.struct_size = sizeof(amn_convert_options),
                             .mode = AMN_MODE_REMEMBER,
                             .out_dtype = AMN_DTYPE_BF16,
                             .output = out,
                             .overwrite = true,
                             .threads = threads,
                             .encode = &eo,
                             .keep = keep,
                             .n_keep = 1};
    if (!rc) rc = amn_convert(qe_ctx, m, p, &o, st, err);
    amn_plan_free(p);
    amn_model_free(m);
    return rc;
}

static int encode(const char *target, uint64_t bs, unsigned threads, const char *out,
                  amn_convert_stats *st, amn_error *err) {
    return encode_from(MODEL, target, bs, threads, out, st, err);
}

/* Every tensor of `exp` is in `got` with the same dtype, shape and bytes;
 * every other tensor of `got` is the source's. */
static void compare_files(const char *got_path, const char *exp_path, const char *what) {
    amn_model *g = NULL, *e = NULL, *s = NULL;
    amn_error err = {0};
    assert_int_equal(amn_open(qe_ctx, got_path, NULL, NULL, &g, &err), AMN_OK);
    assert_int_equal(amn_open(qe_ctx, exp_path, NULL, NULL, &e, &err), AMN_OK);
    assert_int_equal(amn_open(qe_ctx, MODEL, NULL, NULL, &s, &err), AMN_OK);
    size_t from_exp = 0;
    for (size_t i = 0; i < amn_model_tensor_count(g); i++) {
        const amn_tensor *t = amn_model_tensor(g, i);
        int64_t k = amn_model_find(e, t->name);
        const amn_tensor *x = k >= 0 ? amn_model_tensor(e, (size_t)k) : NULL;
        if (x) {
            from_exp++;
        } else {
            k = amn_model_find(s, t->name);
            if (k < 0) fail_msg("%s: unexpected tensor %s", what, t->name);
            x = amn_model_tensor(s, (size_t)k);
        }
        if (t->dtype != x->dtype || t->ndim != x->ndim || t->nbytes != x->nbytes ||
            memcmp(t->shape, x->shape, t->ndim * sizeof *t->shape) != 0)
            fail_msg("%s: %s: dtype/shape differ", what, t->name);
        if (memcmp(t->data, x->data, t->nbytes) != 0) {
            size_t bad = 0;
            for (uint64_t b = 0; b < t->nbytes; b++)
                bad += ((const uint8_t *)t->data)[b] != ((const uint8_t *)x->data)[b];
            fail_msg("%s: %s: %zu of %llu bytes differ", what, t->name, bad,
                     (unsigned long long)t->nbytes);
        }
    }
    assert_int_equal(from_exp, amn_model_tensor_count(e));
    amn_model_free(g);
    amn_model_free(e);
    amn_model_free(s);
}

static const struct {
    const char *target;
    uint64_t bs;
    const char *file;
    size_t encoded;
} cases[] = {
    {"bnb-nf4", 0, "expect-bnb-nf4", 3},
    {"bnb-nf4-dq", 64, "expect-bnb-nf4-dq", 3},
    {"bnb-fp4", 0, "expect-bnb-fp4", 3},
    {"bnb-fp4-dq", 0, "expect-bnb-fp4-dq", 3},
    {"bnb-int8", 0, "expect-bnb-int8", 4},
    {"bnb-nf4", 32, "expect-bnb-nf4-b32", 3},
    {"bnb-fp4-dq", 128, "expect-bnb-fp4-dq-b128", 3},
    {"bnb-nf4-dq", 4096, "expect-bnb-nf4-dq-b4096", 2},
};

static void test_bnb_encode_expectations(void **state) {
    (void)state;
    if (!qe_have_writer()) skip();
    amn_simd lv[3];
    size_t nlv = qg_levels(lv);
    if (amn_simd_level() >= AMN_SIMD_AVX512) lv[nlv++] = AMN_SIMD_AVX512;
    char out[512], exp[512], what[256];
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (size_t li = 0; li < nlv; li++)
            for (unsigned th = 1; th <= 4; th++) {
                qe_set_simd(lv[li]);
                qe_path(out, sizeof out, "enc%zu.safetensors", c);
                snprintf(exp, sizeof exp, FIX "/%s.safetensors", cases[c].file);
                amn_convert_stats st = {.struct_size = sizeof(amn_convert_stats)};
                amn_error err = {0};
                if (encode(cases[c].target, cases[c].bs, th, out, &st, &err) != AMN_OK)
                    fail_msg("%s: %s", cases[c].target, err.msg);
                assert_int_equal(st.encoded, cases[c].encoded);
                assert_int_equal(st.encoded + st.encode_passed, 8);
                assert_true(st.abs_err_values > 0 && st.abs_err_sum > 0);
                snprintf(what, sizeof what, "%s block %llu, %s, %u threads", cases[c].target,
                         (unsigned long long)cases[c].bs, amn_simd_name(lv[li]), th);
                compare_files(out, exp, what);
                /* and the output decodes through the bnb scheme */
                amn_model *m = NULL;
                amn_plan *p = NULL;
                assert_int_equal(amn_open(qe_ctx, out, NULL, NULL, &m, &err), AMN_OK);
                assert_int_equal(amn_plan_new(qe_ctx, m, &p, &err), AMN_OK);
                assert_int_equal(amn_plan_group_count(p), cases[c].encoded);
                amn_plan_free(p);
                amn_model_free(m);
            }
    unsetenv("AMN_SIMD");
}

static void test_bnb_encode_bad_block(void **state) {
    (void)state;
    const uint64_t bad[] = {16, 48, 96, 8192, 1};
    char out[512];
    qe_path(out, sizeof out, "bad.safetensors");
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        amn_convert_stats st = {.struct_size = sizeof(amn_convert_stats)};
        amn_error err = {0};
        assert_int_equal(encode("bnb-nf4", bad[k], 2, out, &st, &err), AMN_E_INVALID);
        assert_non_null(strstr(err.msg, "power of two from 32 to 4096"));
        assert_int_not_equal(access(out, F_OK), 0);
    }
    amn_convert_stats st = {.struct_size = sizeof(amn_convert_stats)};
    amn_error err = {0};
    assert_int_equal(encode("bnb-int8", 64, 2, out, &st, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "4-bit only"));
    assert_int_equal(encode("bnb-nf5", 0, 2, out, &st, &err), AMN_E_UNSUPPORTED);
    assert_int_not_equal(access(out, F_OK), 0);
}

static uint8_t *slurp(const char *path, size_t *n) {
    uint8_t *b = amn_test_read_file(path, n);
    assert_non_null(b);
    return b;
}

static void test_bnb_forget_cli(void **state) {
    (void)state;
    char dir[512], out[512], out2[512], out3[512], cfg[600], args[2048];
    qe_path(dir, sizeof dir, "cli");
    mkdir(dir, 0755);
    qe_path(out, sizeof out, "cli/m-nf4.safetensors");
    qe_path(out2, sizeof out2, "cli/m-nf4-convert.safetensors");
    qe_path(out3, sizeof out3, "cli/m-nf4-quantize.safetensors");
    snprintf(args, sizeof args, "forget '%s' --to bnb-nf4-dq --threads 3 -o '%s'", MODEL, out);
    assert_int_equal(qe_cli(args), 0);
    snprintf(args, sizeof args, "convert '%s' --to bnb-nf4-dq -o '%s'", MODEL, out2);
    assert_int_equal(qe_cli(args), 0);
    snprintf(args, sizeof args, "quantize '%s' --to bnb-nf4-dq --json -o '%s'", MODEL, out3);
    assert_int_equal(qe_cli(args), 0);
    size_t n1, n2, n3;
    uint8_t *a = slurp(out, &n1), *b = slurp(out2, &n2), *c = slurp(out3, &n3);
    assert_int_equal(n1, n2);
    assert_int_equal(n1, n3);
    assert_memory_equal(a, b, n1);
    assert_memory_equal(a, c, n1);
    free(a), free(b), free(c);
    compare_files(out, FIX "/expect-bnb-nf4-dq.safetensors", "cli");
    /* config.json beside the output, the source's keys kept */
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    json_object *root = json_object_from_file(cfg), *q, *v;
    assert_non_null(root);
    assert_true(json_object_object_get_ex(root, "hidden_size", &v));
    assert_true(json_object_object_get_ex(root, "quantization_config", &q));
    assert_true(json_object_object_get_ex(q, "quant_method", &v));
    assert_string_equal(json_object_get_string(v), "bitsandbytes");
    assert_true(json_object_object_get_ex(q, "load_in_4bit", &v) && json_object_get_boolean(v));
    assert_true(json_object_object_get_ex(q, "bnb_4bit_use_double_quant", &v) &&
                json_object_get_boolean(v));
    assert_true(json_object_object_get_ex(q, "bnb_4bit_quant_type", &v));
    assert_string_equal(json_object_get_string(v), "nf4");
    assert_true(json_object_object_get_ex(q, "llm_int8_skip_modules", &v));
    bool has_lm_head = false, has_odd = false;
    for (size_t i = 0; i < json_object_array_length(v); i++) {
        const char *s = json_object_get_string(json_object_array_get_idx(v, i));
        has_lm_head |= strcmp(s, "lm_head") == 0;
        has_odd |= strcmp(s, "model.layers.0.mlp.odd_proj") == 0;
    }
    assert_true(has_lm_head && has_odd);
    json_object_put(root);
    /* errors before any output: a bad block size, an unknown target */
    snprintf(args, sizeof args, "forget '%s' --to bnb-nf4 --block-size 100 -o '%s/x.st'", MODEL,
             dir);
    assert_int_equal(qe_cli(args), 2);
    snprintf(args, sizeof args, "forget '%s' --to bnb-nf4 --block-size abc -o '%s/x.st'", MODEL,
             dir);
    assert_int_equal(qe_cli(args), 2);
    snprintf(args, sizeof args, "forget '%s' --to bnb-q3 -o '%s/x.st'", MODEL, dir);
    assert_int_equal(qe_cli(args), 3);
    snprintf(args, sizeof args, "%s/x.st", dir);
    assert_int_not_equal(access(args, F_OK), 0);
    /* --keep keeps a weight as it is */
    snprintf(args, sizeof args,
             "forget '%s' --to bnb-int8 --keep '*.up_proj.weight' --keep '*k_proj*' --force -o "
             "'%s'",
             MODEL, out);
    assert_int_equal(qe_cli(args), 0);
    amn_model *m = NULL;
    amn_error err = {0};
    assert_int_equal(amn_open(qe_ctx, out, NULL, NULL, &m, &err), AMN_OK);
    const int64_t up = amn_model_find(m, "model.layers.0.mlp.up_proj.weight");
    assert_true(up >= 0);
    assert_int_equal(amn_model_tensor(m, (size_t)up)->dtype, AMN_DTYPE_F32);
    assert_true(amn_model_find(m, "model.layers.0.self_attn.q_proj.SCB") >= 0);
    assert_true(amn_model_find(m, "model.layers.0.self_attn.k_proj.SCB") < 0);
    amn_model_free(m);
}

/* A quantized input is dequantized first: a bnb NF4 model re-encoded as
 * INT8 and as FP4 double quant; the outputs decode. */
static void test_bnb_encode_quantized_input(void **state) {
    (void)state;
    char out[512];
    qe_path(out, sizeof out, "requant.safetensors");
    const char *targets[2] = {"bnb-int8", "bnb-fp4-dq"};
    for (int k = 0; k < 2; k++) {
        amn_convert_stats st = {.struct_size = sizeof(amn_convert_stats)};
        amn_error err = {0};
        if (encode_from(FIX "/expect-bnb-nf4.safetensors", targets[k], 0, 2, out, &st, &err))
            fail_msg("%s: %s", targets[k], err.msg);
        assert_int_equal(st.dequantized, 3); /* every weight decoded, then encoded again */
        assert_int_equal(st.encoded, 3);
        assert_int_equal(st.encode_passed, 0);
        amn_model *m = NULL;
        amn_plan *p = NULL;
        assert_int_equal(amn_open(qe_ctx, out, NULL, NULL, &m, &err), AMN_OK);
        assert_int_equal(amn_plan_new(qe_ctx, m, &p, &err), AMN_OK);
        assert_int_equal(amn_plan_group_count(p), 3);
        amn_group_info gi = {.struct_size = sizeof(amn_group_info)};
        assert_int_equal(amn_plan_group(p, 0, &gi), AMN_OK);
        assert_non_null(strstr(gi.label, k ? "FP4, block 64, double quant" : "LLM.int8"));
        amn_plan_free(p);
        amn_model_free(m);
    }
}

/* An input that already has a tensor named like an output (here layer.SCB
 * beside an F32 layer.weight) is refused before any output: the bnb
 * detector sees a broken INT8 layer (the core's duplicate-name check is
 * behind it for encoders whose names no detector claims). */
static void test_bnb_encode_name_clash(void **state) {
    (void)state;
    static float w[64 * 64], scb[64];
    const qe_tensor t[2] = {
        {"layer.weight", AMN_DTYPE_F32, 2, {64, 64}, w, sizeof w},
        {"layer.SCB", AMN_DTYPE_F32, 1, {64}, scb, sizeof scb},
    };
    char in[512], out[512];
    qe_path(in, sizeof in, "clash.safetensors");
    qe_path(out, sizeof out, "clash-out.safetensors");
    qe_write_st(in, t, 2, NULL);
    amn_convert_stats st = {.struct_size = sizeof(amn_convert_stats)};
    amn_error err = {0};
    assert_int_equal(encode_from(in, "bnb-int8", 0, 1, out, &st, &err), AMN_E_PARSE);
    assert_non_null(strstr(err.msg, "layer.weight: an LLM.int8 weight must be 2-D I8"));
    assert_int_not_equal(access(out, F_OK), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bnb_encode_expectations),
        cmocka_unit_test(test_bnb_encode_bad_block),
        cmocka_unit_test(test_bnb_forget_cli),
        cmocka_unit_test(test_bnb_encode_quantized_input),
        cmocka_unit_test(test_bnb_encode_name_clash),
    };
    return cmocka_run_group_tests(tests, qe_setup, qe_teardown);
}
