/* The plugin ABI's struct_size rules as the core applies them to structs a
 * plugin hands over: too small is refused by name, larger (a newer minor's
 * struct seen by an older core) is read up to what the core knows. */
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
    amn_ctx_options o = {.no_env = true};
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tensor_struct_size),
        cmocka_unit_test(limits_struct_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
