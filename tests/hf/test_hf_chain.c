/* amn_convert_options.encode_then through the core: the GGUF encoder chained
 * after amn-hf's (a model folder quantized in the same pass) writes the
 * bytes and the statistics of the two steps it stands for (the folder made
 * an F16 GGUF, that file quantized), at 1 and 3 threads; a chain the core
 * cannot read (an upstream writing Q8_0 blocks) and a second step without a
 * first are refused before any output exists. */
#include "quant_e2e.h"

#define FOLDER AMN_SOURCE_DIR "/fixtures/hf/Qwen2.5-Tiny-Instruct"

static bool have_plugins(void) {
    return amn_ctx_find_encoder(qe_ctx, "hf-f16") && amn_ctx_find_encoder(qe_ctx, "Q4_K_M");
}

/* in encoded by `first` (then by `then` when not NULL) into out. */
static int run(const char *in, const char *first, const char *then, unsigned threads,
               const char *out, amn_convert_stats *st, amn_error *err) {
    amn_model *m = NULL;
    amn_plan *p = NULL;
    int rc = amn_open(qe_ctx, in, NULL, NULL, &m, err);
    if (!rc) rc = amn_plan_new(qe_ctx, m, &p, err);
    const amn_encode_options e1 = {.struct_size = sizeof e1, .target = first};
    const amn_encode_options e2 = {.struct_size = sizeof e2, .target = then};
    amn_convert_options o = {.struct_size = sizeof(amn_convert_options),
                             .mode = AMN_MODE_REMEMBER,
                             .target = "gguf",
                             .out_dtype = AMN_DTYPE_BF16,
                             .output = out,
                             .overwrite = true,
                             .threads = threads,
                             .encode = first ? &e1 : NULL,
                             .encode_then = then ? &e2 : NULL,
                             .no_sync = true};
    if (st) *st = (amn_convert_stats){.struct_size = sizeof *st};
    if (!rc) rc = amn_convert(qe_ctx, m, p, &o, st, err);
    amn_plan_free(p);
    amn_model_free(m);
    return rc;
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n ? *n : 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void same_file(const char *a, const char *b) {
    size_t na, nb;
    uint8_t *x = slurp(a, &na), *y = slurp(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(x, y, na);
    free(x);
    free(y);
}

static void one_pass_is_two_steps(void **state) {
    (void)state;
    if (!have_plugins()) skip();
    char f16[512], ref[512], one[512];
    qe_path(f16, sizeof f16, "chain-f16.gguf");
    qe_path(ref, sizeof ref, "chain-ref.gguf");
    qe_path(one, sizeof one, "chain-one.gguf");
    amn_error err = {0};
    amn_convert_stats s1, s2, so;
    if (run(FOLDER, "hf-f16", NULL, 1, f16, &s1, &err)) fail_msg("step one: %s", err.msg);
    for (unsigned threads = 1; threads <= 3; threads += 2) {
        if (run(f16, "Q4_K_M", NULL, threads, ref, &s2, &err)) fail_msg("step two: %s", err.msg);
        if (run(FOLDER, "hf-f16", "Q4_K_M", threads, one, &so, &err))
            fail_msg("one pass: %s", err.msg);
        same_file(ref, one);
        /* the statistics are the second step's: the first is not counted */
        assert_int_equal(so.tensors_written, s2.tensors_written);
        assert_int_equal(so.encoded, s2.encoded);
        assert_int_equal(so.encode_passed, s2.encode_passed);
        assert_int_equal(so.abs_err_values, s2.abs_err_values);
        assert_true(so.abs_err_sum == s2.abs_err_sum);
        assert_int_equal(so.bytes_written, s2.bytes_written);
    }
}

static void refused_before_output(void **state) {
    (void)state;
    if (!have_plugins()) skip();
    char out[512];
    qe_path(out, sizeof out, "chain-bad.gguf");
    amn_error err = {0};
    struct stat st;
    /* Q8_0 blocks are no values a second encoder reads */
    assert_int_equal(run(FOLDER, "hf-q8_0", "Q4_K_M", 1, out, NULL, &err), AMN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "F32, F16 or BF16"));
    assert_int_equal(stat(out, &st), -1);
    /* a second step needs a first */
    assert_int_equal(run(FOLDER, NULL, "Q4_K_M", 1, out, NULL, &err), AMN_E_INVALID);
    assert_int_equal(stat(out, &st), -1);
    /* so is a second step no plugin encodes */
    assert_int_not_equal(run(FOLDER, "hf-f16", "NO_SUCH_TYPE", 1, out, NULL, &err), AMN_OK);
    assert_int_equal(stat(out, &st), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_pass_is_two_steps),
        cmocka_unit_test(refused_before_output),
    };
    return cmocka_run_group_tests(tests, qe_setup, qe_teardown);
}
