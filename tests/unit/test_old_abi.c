/* A plugin built against the frozen ABI 2.0 headers (tests/plugins/abi_2_0)
 * loads into this core and works: its format reads, inspects and writes, its
 * scheme claims and dequantizes, and its writer, whose vtable is smaller
 * than this core's, is used only up to its struct_size. */
#include <unistd.h>

#include "amn/byteorder.h"
#include "amn/amn.h"
#include "amn/plugin.h"
#include "amn_test.h"

#define DIR_OLD AMN_BINARY_DIR "/test-plugins/old"

static amn_ctx *ctx;
static char input[256], out_old[256], out_st[256];

/* rows 2, cols 3: codes {1,-2,3 | 4,5,-6}, scales {0.5, 2}. */
static const uint8_t file_bytes[] = {'A', 'M',  'N', 'O', 'L', 'D',  '2', '0',  2, 0,
                                     0,   0,    3,   0,   0,   0,    1,   0xfe, 3, 4,
                                     5,   0xfa, 0,   0,   0,   0x3f, 0,   0,    0, 0x40};
static const float expect_w[6] = {0.5f, -1.0f, 1.5f, 8.0f, 10.0f, -12.0f};

/* expect_w as a file holds it: little-endian bytes. */
static const uint8_t *expect_w_bytes(void) {
    static uint8_t b[sizeof expect_w];
    for (int i = 0; i < 6; i++) amn_store_le_f32(b + 4 * i, expect_w[i]);
    return b;
}

static int setup(void **state) {
    (void)state;
    const char *dirs[] = {DIR_OLD};
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options),
                         .plugin_dirs = dirs,
                         .n_plugin_dirs = 1,
                         .no_env = true};
    amn_error err;
    if (amn_ctx_new(&o, &ctx, &err)) return -1;
    snprintf(input, sizeof input, "/tmp/amn-oldabi-%d.old", (int)getpid());
    snprintf(out_old, sizeof out_old, "/tmp/amn-oldabi-%d-out.old", (int)getpid());
    snprintf(out_st, sizeof out_st, "/tmp/amn-oldabi-%d.safetensors", (int)getpid());
    FILE *f = fopen(input, "wb");
    if (!f || fwrite(file_bytes, 1, sizeof file_bytes, f) != sizeof file_bytes) return -1;
    return fclose(f);
}

static int teardown(void **state) {
    (void)state;
    unlink(input), unlink(out_old), unlink(out_st);
    amn_ctx_free(ctx);
    return 0;
}

static void loads_as_abi_2_0(void **state) {
    (void)state;
    amn_plugin_info pi = {.struct_size = sizeof(amn_plugin_info)};
    bool found = false;
    for (size_t i = 0; i < amn_ctx_plugin_count(ctx); i++) {
        amn_ctx_plugin(ctx, i, &pi);
        if (strcmp(pi.name, "oldabi") == 0 && strstr(pi.file, "test-plugins/old")) {
            found = true;
            break;
        }
    }
    assert_true(found);
    assert_string_equal(pi.status, "loaded");
    assert_int_equal(pi.abi_major, 2);
    assert_int_equal(pi.abi_minor, 0);
    assert_int_equal(pi.n_formats, 1);
    assert_int_equal(pi.n_schemes, 1);
    /* The point of the test: this core is newer than the plugin's headers. */
    assert_true(AMN_PLUGIN_ABI_MINOR > 0);
    assert_true(pi.formats[0]->writer->struct_size < sizeof(amn_writer));
}

static void reads_and_inspects(void **state) {
    (void)state;
    amn_model *m;
    amn_error err;
    assert_int_equal(amn_inspect(ctx, input, NULL, NULL, &m, &err), AMN_OK);
    assert_string_equal(amn_model_format(m), "oldabi");
    assert_int_equal(amn_model_tensor_count(m), 2);
    assert_null(amn_model_tensor(m, 0)->data);
    amn_plan *p;
    assert_int_equal(amn_plan_new(ctx, m, &p, &err), AMN_OK);
    amn_plan_summary s = {.struct_size = sizeof(amn_plan_summary)};
    amn_plan_summarize(p, AMN_DTYPE_F32, &s);
    assert_int_equal(s.groups, 1);
    assert_string_equal(s.scheme, "oldq");
    assert_string_equal(s.label, "old-ABI int8 rows");
    assert_int_equal(s.after_bytes, 6 * 4);
    amn_plan_free(p);
    amn_model_free(m);
}

static int convert_to(const char *target, const char *out, const char *const *opts, size_t n,
                      amn_error *err) {
    amn_model *m;
    amn_plan *p;
    int rc = amn_open(ctx, input, NULL, NULL, &m, err);
    if (rc) return rc;
    if ((rc = amn_plan_new(ctx, m, &p, err))) {
        amn_model_free(m);
        return rc;
    }
    amn_convert_options o = {.struct_size = sizeof(amn_convert_options),
                             .mode = AMN_MODE_REMEMBER,
                             .target = target,
                             .out_dtype = AMN_DTYPE_F32,
                             .output = out,
                             .overwrite = true,
                             .threads = 2,
                             .options = opts,
                             .n_options = n};
    rc = amn_convert(ctx, m, p, &o, NULL, err);
    amn_plan_free(p);
    amn_model_free(m);
    return rc;
}

static void dequantizes_through_the_old_scheme(void **state) {
    (void)state;
    amn_error err;
    if (!amn_ctx_find_format(ctx, "safetensors")) skip(); /* a build without it */
    int rc = convert_to("safetensors", out_st, NULL, 0, &err);
    if (rc) fail_msg("%s", err.msg);
    amn_model *m;
    assert_int_equal(amn_open(ctx, out_st, NULL, NULL, &m, &err), AMN_OK);
    assert_int_equal(amn_model_tensor_count(m), 1);
    const amn_tensor *w = amn_model_tensor(m, 0);
    assert_string_equal(w->name, "w");
    assert_int_equal(w->dtype, AMN_DTYPE_F32);
    assert_memory_equal(w->data, expect_w_bytes(), sizeof expect_w);
    amn_model_free(m);
}

static void writes_through_the_old_writer(void **state) {
    (void)state;
    amn_error err;
    int rc = convert_to("oldabi", out_old, NULL, 0, &err);
    if (rc) fail_msg("%s", err.msg);
    size_t n = 0;
    uint8_t *b = amn_test_read_file(out_old, &n);
    assert_non_null(b);
    static const uint8_t head[] = {
        'A', 'M', 'N', 'O', 'L', 'D', 'W', '1', 1, 0, 0, 0, 1, 'w', AMN_DTYPE_F32, 2, 2, 0,
        0,   0,   0,   0,   0,   0,   3,   0,   0, 0, 0, 0, 0, 0};
    assert_int_equal(n, sizeof head + sizeof expect_w + 4);
    assert_memory_equal(b, head, sizeof head);
    assert_memory_equal(b + sizeof head, expect_w_bytes(), sizeof expect_w);
    assert_memory_equal(b + n - 4, "END!", 4);
    free(b);
    /* Its 2.0 writer declared no options: any --opt is refused by name. */
    const char *opts[] = {"level=3"};
    unlink(out_old);
    assert_int_equal(convert_to("oldabi", out_old, opts, 1, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "unknown option 'level' for format oldabi (it accepts none)"));
    assert_int_equal(access(out_old, F_OK), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(loads_as_abi_2_0),
        cmocka_unit_test(reads_and_inspects),
        cmocka_unit_test(dequantizes_through_the_old_scheme),
        cmocka_unit_test(writes_through_the_old_writer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
