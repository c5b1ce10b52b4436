/* The plugin ABI's struct_size rules as the core applies them to structs a
 * plugin hands over: too small is refused by name, larger (a newer minor's
 * struct seen by an older core) is read up to what the core knows. */
#include <stdlib.h>
#include <unistd.h>

#include "amn/amn.h"
#include "amn_test.h"

static void tensor_struct_size(void **state) {
    (void)state;
    amn_model *m = amn_model_new("test");
    assert_non_null(m);
    amn_error err = {0};
    static const float data[2] = {1, 2};
    amn_tensor t = {.name = "w", .dtype = AMN_DTYPE_F32, .ndim = 1, .shape = {2}, .nbytes = 8};
    t.data = data;
    t.extent = 8;
    /* A plugin that forgot struct_size (or one built before it existed). */
    assert_int_equal(amn_model_add_tensor(m, &t, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "tensor struct_size 0 is smaller than plugin ABI 2.0's"));
    t.struct_size = offsetof(amn_tensor, encoding);
    assert_int_equal(amn_model_add_tensor(m, &t, &err), AMN_E_INVALID);
    /* A struct from a newer minor: fields the core does not know are ignored. */
    struct {
        amn_tensor t;
        uint64_t newer_field;
    } big = {.t = t, .newer_field = 0xdeadbeef};
    big.t.struct_size = sizeof big;
    assert_int_equal(amn_model_add_tensor(m, &big.t, &err), AMN_OK);
    const amn_tensor *got = amn_model_tensor(m, 0);
    assert_int_equal(got->struct_size, sizeof(amn_tensor));
    assert_true(AMN_HAS_FIELD(got, amn_tensor, encoding_name));
    assert_string_equal(got->name, "w");
    assert_ptr_equal(got->data, data);
    amn_model_free(m);
}

static void limits_struct_size(void **state) {
    (void)state;
    amn_ctx *ctx;
    amn_error err = {0};
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options), .no_env = true};
    assert_int_equal(amn_ctx_new(&o, &ctx, &err), AMN_OK);
    if (!amn_ctx_find_format(ctx, "safetensors")) {
        amn_ctx_free(ctx);
        skip(); /* a build without the safetensors plugin */
    }
    amn_limits l = {.max_header_bytes = 1}; /* struct_size left 0 */
    amn_model *m = NULL;
    const char *path = AMN_SOURCE_DIR "/fixtures/example/tiny-f32.safetensors";
    assert_int_equal(amn_inspect(ctx, path, "safetensors", &l, &m, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "amn_limits struct_size 0 is too small"));
    assert_null(m);
    amn_limits_default(&l);
    assert_int_equal(l.struct_size, sizeof l);
    l.max_header_bytes = 4; /* honoured: the header is longer */
    assert_int_equal(amn_inspect(ctx, path, "safetensors", &l, &m, &err), AMN_E_LIMIT);
    amn_ctx_free(ctx);
}

/* The application ABI (amn/context.h): options read up to struct_size,
 * info structs written up to it, and a set field this libamn does not know
 * refused rather than ignored. */
static void ctx_options_struct_size(void **state) {
    (void)state;
    amn_ctx *ctx = NULL;
    amn_error err = {0};
    amn_ctx_options o = {.no_env = true}; /* struct_size left 0 */
    assert_int_equal(amn_ctx_new(&o, &ctx, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "amn_ctx_options: struct_size 0 is below"));
    assert_null(ctx);
    struct {
        amn_ctx_options o;
        uint64_t newer_field;
    } big = {.o = {.no_env = true}};
    big.o.struct_size = sizeof big;
    assert_int_equal(amn_ctx_new(&big.o, &ctx, &err), AMN_OK); /* unknown tail zero */
    amn_ctx_free(ctx);
    ctx = NULL;
    big.newer_field = 1;
    assert_int_equal(amn_ctx_new(&big.o, &ctx, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "a field this libamn does not know is set"));
    assert_null(ctx);
}

static void info_struct_size(void **state) {
    (void)state;
    amn_ctx *ctx;
    amn_error err = {0};
    amn_ctx_options o = {.struct_size = sizeof o, .no_env = true};
    assert_int_equal(amn_ctx_new(&o, &ctx, &err), AMN_OK);
    if (amn_ctx_plugin_count(ctx) == 0) {
        amn_ctx_free(ctx);
        skip();
    }
    amn_plugin_info pi = {0};
    assert_int_equal(amn_ctx_plugin(ctx, 0, &pi), AMN_E_INVALID);
    assert_null(pi.name); /* nothing written */
    /* A caller built with a newer header: libamn fills what it knows, says
     * how much, and leaves the rest alone. */
    struct {
        amn_plugin_info pi;
        uint64_t newer_field;
    } big;
    memset(&big, 0xa5, sizeof big);
    big.pi.struct_size = sizeof big;
    assert_int_equal(amn_ctx_plugin(ctx, 0, &big.pi), AMN_OK);
    assert_int_equal(big.pi.struct_size, sizeof(amn_plugin_info));
    assert_non_null(big.pi.name);
    assert_true(big.newer_field == 0xa5a5a5a5a5a5a5a5u);
    amn_ctx_free(ctx);
}

static void convert_options_struct_size(void **state) {
    (void)state;
    amn_ctx *ctx;
    amn_error err = {0};
    amn_ctx_options co = {.struct_size = sizeof co, .no_env = true};
    assert_int_equal(amn_ctx_new(&co, &ctx, &err), AMN_OK);
    if (!amn_ctx_find_format(ctx, "safetensors")) {
        amn_ctx_free(ctx);
        skip();
    }
    const char *path = AMN_SOURCE_DIR "/fixtures/example/tiny-f32.safetensors";
    amn_model *m;
    amn_plan *p;
    assert_int_equal(amn_open(ctx, path, NULL, NULL, &m, &err), AMN_OK);
    assert_int_equal(amn_plan_new(ctx, m, &p, &err), AMN_OK);
    amn_plan_summary s = {0};
    assert_int_equal(amn_plan_summarize(p, AMN_DTYPE_BF16, &s), AMN_E_INVALID);
    s.struct_size = sizeof s;
    assert_int_equal(amn_plan_summarize(p, AMN_DTYPE_BF16, &s), AMN_OK);
    assert_true(s.passthrough > 0);
    char out[] = "/tmp/amn-abi-XXXXXX";
    int fd = mkstemp(out);
    assert_true(fd >= 0);
    close(fd);
    amn_convert_options o = {.output = out, .overwrite = true, .no_sync = true};
    amn_convert_stats st = {.struct_size = sizeof st};
    assert_int_equal(amn_convert(ctx, m, p, &o, &st, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "amn_convert_options: struct_size 0"));
    o.struct_size = sizeof o;
    amn_convert_stats old = {0}; /* too small: refused before any output */
    assert_int_equal(amn_convert(ctx, m, p, &o, &old, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "amn_convert_stats"));
    assert_int_equal(amn_convert(ctx, m, p, &o, &st, &err), AMN_OK);
    assert_int_equal(st.tensors_written, s.passthrough);
    unlink(out);
    amn_plan_free(p);
    amn_model_free(m);
    amn_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tensor_struct_size),          cmocka_unit_test(limits_struct_size),
        cmocka_unit_test(ctx_options_struct_size),     cmocka_unit_test(info_struct_size),
        cmocka_unit_test(convert_options_struct_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
