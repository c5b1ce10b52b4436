/* GGUF through the core: probing, header-only inspect, the gguf scheme's
 * plan, remember to safetensors, gguf -> gguf, safetensors -> gguf, and
 * ollama: inputs resolved by the registered resolver. */
#include <sys/stat.h>
#include <unistd.h>

#include "amn/amn.h"
#include "amn/byteorder.h"
#include "amn_test.h"

#define FIXTURE(name) AMN_SOURCE_DIR "/fixtures/gguf/" name

static amn_ctx *ctx;

static int make_ctx(const char *const *dirs, size_t n) {
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options),
                         .plugin_dirs = dirs,
                         .n_plugin_dirs = n,
                         .no_env = true,
                         .no_default = true};
    return amn_ctx_new(&o, &ctx, NULL);
}

static int setup(void **state) {
    (void)state;
    /* The build's own plugin once it registers the format, else the test build. */
    const char *build[] = {AMN_BINARY_DIR "/lib/amn/plugins"};
    if (make_ctx(build, 1)) return -1;
    if (!amn_ctx_find_format(ctx, "gguf")) {
        amn_ctx_free(ctx);
        const char *both[] = {AMN_GGUF_TEST_PLUGIN_DIR, AMN_BINARY_DIR "/lib/amn/plugins"};
        if (make_ctx(both, 2)) return -1;
    }
    if (!amn_ctx_find_format(ctx, "gguf") || !amn_ctx_find_format(ctx, "safetensors")) return -1;
    return amn_test_scratch_make("gguf-e2e");
}

static int teardown(void **state) {
    (void)state;
    amn_ctx_free(ctx);
    return amn_test_scratch_remove();
}

static const char *tmp(const char *name) {
    return amn_test_scratch_path(name);
}

static amn_model *open_ok(const char *path, const char *format) {
    amn_model *m = NULL;
    amn_error err = {0};
    int rc = amn_open(ctx, path, NULL, NULL, &m, &err);
    if (rc) fail_msg("%s: %s", path, err.msg);
    assert_string_equal(amn_model_format(m), format);
    return m;
}

static int convert(const amn_model *m, const char *target, amn_mode mode, const char *out,
                   const char *const *opts, size_t n_opts, amn_error *err) {
    amn_plan *p = NULL;
    int rc = amn_plan_new(ctx, m, &p, err);
    if (rc) return rc;
    amn_convert_options o = {.struct_size = sizeof(amn_convert_options),
                             .mode = mode,
                             .target = target,
                             .out_dtype = AMN_DTYPE_F32,
                             .output = out,
                             .overwrite = true,
                             .threads = 2,
                             .options = opts,
                             .n_options = n_opts};
    rc = amn_convert(ctx, m, p, &o, NULL, err);
    amn_plan_free(p);
    return rc;
}

/* The Q8_0 weight of tiny-quant.gguf, decoded here from its blocks, as the
 * little-endian F32 bytes a written tensor holds. */
static void expected_q8(const amn_tensor *t, uint8_t *out) {
    const uint8_t *b = t->data;
    for (size_t blk = 0; blk < 4; blk++, b += 34) {
        const float d = amn_f16_to_f32((uint16_t)(b[0] | b[1] << 8));
        for (int j = 0; j < 32; j++)
            amn_store_le_f32(out + (blk * 32 + j) * 4, (float)(int8_t)b[2 + j] * d);
    }
}

static void probe_and_plan(void **state) {
    (void)state;
    amn_model *m = open_ok(FIXTURE("tiny-quant.gguf"), "gguf");
    assert_string_equal(amn_model_label(m), "GGUF v3");
    amn_plan *p = NULL;
    amn_error err = {0};
    assert_int_equal(amn_plan_new(ctx, m, &p, &err), AMN_OK);
    amn_plan_summary s = {.struct_size = sizeof(amn_plan_summary)};
    amn_plan_summarize(p, AMN_DTYPE_F32, &s);
    assert_int_equal(s.groups, 1);
    assert_int_equal(s.passthrough, 2);
    assert_string_equal(s.scheme, "gguf");
    assert_int_equal(s.unhandled, 0);
    assert_int_equal(s.current_bytes, 32 * 5 * 4 + 136 + 32 * 4);
    assert_int_equal(s.after_bytes, 32 * 5 * 4 + 128 * 4 + 32 * 4);
    amn_plan_free(p);
    amn_model_free(m);
    /* header-only, by path */
    assert_int_equal(amn_inspect(ctx, FIXTURE("tiny-v1.gguf"), NULL, NULL, &m, &err), AMN_OK);
    assert_string_equal(amn_model_label(m), "GGUF v1");
    assert_null(amn_model_tensor(m, 0)->data);
    amn_model_free(m);
}

static void remember_to_safetensors(void **state) {
    (void)state;
    amn_model *m = open_ok(FIXTURE("tiny-quant.gguf"), "gguf");
    const char *out = tmp("remember.safetensors");
    amn_error err = {0};
    int rc = convert(m, "safetensors", AMN_MODE_REMEMBER, out, NULL, 0, &err);
    if (rc) fail_msg("%s", err.msg);
    amn_model *st = open_ok(out, "safetensors");
    assert_int_equal(amn_model_tensor_count(st), 3);
    const amn_tensor *q = amn_model_tensor(st, (size_t)amn_model_find(st, "blk.0.attn_q.weight"));
    assert_int_equal(q->dtype, AMN_DTYPE_F32);
    assert_int_equal(q->ndim, 2);
    assert_int_equal(q->shape[0], 4);
    assert_int_equal(q->shape[1], 32);
    uint8_t want[128 * 4];
    expected_q8(amn_model_tensor(m, (size_t)amn_model_find(m, "blk.0.attn_q.weight")), want);
    assert_memory_equal(q->data, want, sizeof want);
    const amn_tensor *e = amn_model_tensor(st, (size_t)amn_model_find(st, "token_embd.weight"));
    const amn_tensor *e0 = amn_model_tensor(m, (size_t)amn_model_find(m, "token_embd.weight"));
    assert_int_equal(e->shape[0], 5);
    assert_int_equal(e->shape[1], 32);
    assert_memory_equal(e->data, e0->data, e0->nbytes);
    /* the metadata that fits a string map */
    assert_string_equal(amn_model_get_meta(st, "general.architecture"), "llama");
    assert_string_equal(amn_model_get_meta(st, "llama.context_length"), "128");
    amn_model_free(st);
    amn_model_free(m);
}

static void gguf_to_gguf(void **state) {
    (void)state;
    amn_model *m = open_ok(FIXTURE("tiny-quant.gguf"), "gguf");
    const char *out = tmp("dequant.gguf");
    amn_error err = {0};
    int rc = convert(m, "gguf", AMN_MODE_REMEMBER, out, NULL, 0, &err);
    if (rc) fail_msg("%s", err.msg);
    amn_model *g = open_ok(out, "gguf");
    assert_string_equal(amn_model_label(g), "GGUF v3");
    assert_int_equal(amn_model_kv_count(g), amn_model_kv_count(m));
    for (size_t i = 0; i < amn_model_kv_count(m); i++) {
        const amn_kv *a = amn_model_kv(m, i), *b = amn_model_kv(g, i);
        assert_string_equal(a->key, b->key);
        assert_int_equal(a->type, b->type);
    }
    assert_int_equal(*(const uint32_t *)amn_model_find_kv(g, "general.file_type")->data, 0);
    const amn_tensor *q = amn_model_tensor(g, (size_t)amn_model_find(g, "blk.0.attn_q.weight"));
    assert_int_equal(q->dtype, AMN_DTYPE_F32);
    assert_int_equal(q->shape[0], 4);
    assert_int_equal(q->shape[1], 32);
    uint8_t want[128 * 4];
    expected_q8(amn_model_tensor(m, (size_t)amn_model_find(m, "blk.0.attn_q.weight")), want);
    assert_memory_equal(q->data, want, sizeof want);
    for (size_t i = 0; i < amn_model_tensor_count(g); i++)
        assert_int_equal(amn_model_tensor(g, i)->file_offset % 32, 0);
    amn_model_free(g);
    amn_model_free(m);
}

static void safetensors_to_gguf(void **state) {
    (void)state;
    amn_model *st = open_ok(AMN_SOURCE_DIR "/fixtures/example/tiny-f32.safetensors", "safetensors");
    const char *out = tmp("from-st.gguf");
    const char *kv[] = {"kv=general.architecture=llama", "kv=general.name=tiny"};
    amn_error err = {0};
    /* Writer options are checked against what each writer declares. */
    const char *unknown[] = {"kv=general.name=x", "compression=9"};
    assert_int_equal(convert(st, "gguf", AMN_MODE_REMEMBER, out, unknown, 2, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "unknown option 'compression' for format gguf"));
    assert_non_null(strstr(err.msg, "accepts kv, metadata"));
    assert_int_equal(
        convert(st, "safetensors", AMN_MODE_REMEMBER, tmp("opt.safetensors"), kv, 1, &err),
        AMN_E_INVALID);
    assert_non_null(
        strstr(err.msg, "unknown option 'kv' for format safetensors (it accepts none)"));
    const char *bare[] = {"novalue"};
    assert_int_equal(convert(st, "gguf", AMN_MODE_REMEMBER, out, bare, 1, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "option 'novalue': want KEY=VALUE"));
    /* The GGUF writer's check_option (ABI 2.1) refuses a kv without a value
     * before any output exists. */
    const char *half[] = {"kv=general.name"};
    assert_int_equal(convert(st, "gguf", AMN_MODE_REMEMBER, out, half, 1, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "option kv (--gguf-kv) general.name: expected KEY=VALUE"));
    assert_int_equal(access(out, F_OK), -1);
    int rc = convert(st, "gguf", AMN_MODE_REMEMBER, out, kv, 2, &err);
    if (rc) fail_msg("%s", err.msg);
    amn_model *g = open_ok(out, "gguf");
    assert_int_equal(amn_model_kv_count(g), 2);
    assert_int_equal(amn_model_tensor_count(g), amn_model_tensor_count(st));
    for (size_t i = 0; i < amn_model_tensor_count(st); i++) {
        const amn_tensor *a = amn_model_tensor(st, i);
        const int64_t j = amn_model_find(g, a->name);
        assert_true(j >= 0);
        const amn_tensor *b = amn_model_tensor(g, (size_t)j);
        assert_int_equal(a->dtype, b->dtype);
        assert_int_equal(a->ndim, b->ndim);
        assert_memory_equal(a->shape, b->shape, sizeof a->shape);
        assert_int_equal(a->nbytes, b->nbytes);
        if (a->nbytes) assert_memory_equal(a->data, b->data, a->nbytes);
    }
    amn_model_free(g);
    amn_model_free(st);
}

static void ollama_input(void **state) {
    (void)state;
    char store[600], path[4096];
    snprintf(store, sizeof store, "%s/ollama", amn_test_scratch());
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/blobs' '%s/manifests/registry.ollama.ai/library/tiny' && "
             "cp '%s' '%s/blobs/sha256-%064d' && "
             "printf '{\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\","
             "\"digest\":\"sha256:%064d\"}]}' > '%s/manifests/registry.ollama.ai/library/tiny/q8'",
             store, store, FIXTURE("tiny-quant.gguf"), store, 7, 7, store);
    assert_int_equal(system(cmd), 0);
    setenv("OLLAMA_MODELS", store, 1);
    bool resolved = false;
    amn_error err = {0};
    int rc = amn_ctx_resolve(ctx, "ollama:tiny:q8", path, sizeof path, &resolved, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_true(resolved);
    amn_model *m = open_ok(path, "gguf");
    assert_int_equal(amn_model_tensor_count(m), 3);
    amn_model_free(m);
    rc = amn_ctx_resolve(ctx, "ollama:missing", path, sizeof path, &resolved, &err);
    assert_int_equal(rc, AMN_E_IO);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(probe_and_plan), cmocka_unit_test(remember_to_safetensors),
        cmocka_unit_test(gguf_to_gguf),   cmocka_unit_test(safetensors_to_gguf),
        cmocka_unit_test(ollama_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
