/* The plugin loader: every way a plugin can be broken is reported and
 * skipped, never fatal; shadowing, staging and probe ties behave. */
#include <unistd.h>

#include "amn/amn.h"
#include "amn_test.h"

#define DIR_A AMN_BINARY_DIR "/test-plugins/a"
#define DIR_B AMN_BINARY_DIR "/test-plugins/b"

static const amn_plugin_info *find(amn_ctx *ctx, const char *file_part, amn_plugin_info *pi) {
    for (size_t i = 0; i < amn_ctx_plugin_count(ctx); i++) {
        amn_ctx_plugin(ctx, i, pi);
        if (strstr(pi->file, file_part)) return pi;
    }
    return NULL;
}

static void expect(amn_ctx *ctx, const char *file_part, const char *status, const char *reason) {
    amn_plugin_info pi;
    if (!find(ctx, file_part, &pi)) fail_msg("no record for %s", file_part);
    if (strcmp(pi.status, status) != 0 || (reason && (!pi.reason || !strstr(pi.reason, reason))))
        fail_msg("%s: %s (%s), wanted %s (%s)", file_part, pi.status, pi.reason ? pi.reason : "",
                 status, reason ? reason : "");
}

static void broken_plugins_are_reported_and_skipped(void **state) {
    (void)state;
    const char *dirs[] = {DIR_A, DIR_B};
    amn_ctx_options o = {
        .plugin_dirs = dirs, .n_plugin_dirs = 2, .no_env = true, .no_default = true};
    amn_ctx *ctx;
    amn_error err;
    assert_int_equal(amn_ctx_new(&o, &ctx, &err), AMN_OK);
    expect(ctx, "a/amn-good.so", "loaded", NULL);
    expect(ctx, "b/amn-good.so", "shadowed", "same name");
    expect(ctx, "amn-twin.so", "loaded", NULL);
    expect(ctx, "amn-badmagic.so", "rejected", "magic");
    expect(ctx, "amn-abi2.so", "rejected", "plugin ABI 2.0");
    expect(ctx, "amn-minor9.so", "rejected", "plugin ABI 1.9");
    expect(ctx, "amn-misnamed.so", "rejected", "'other'");
    expect(ctx, "amn-nodesc.so", "rejected", "no amn_plugin_v1");
    /* libltdl would only say "file not found": the real loader error shows. */
    expect(ctx, "amn-unresolved.so", "rejected", "amn_core_missing_symbol");
    expect(ctx, "amn-halfinit.so", "rejected", "init failed");
    expect(ctx, "amn-noprobe.so", "rejected", "without probe");
    expect(ctx, "amn-zdupformat.so", "rejected", "already registered");
    /* Only the loaded plugins' formats exist; the half-initialised one
     * committed nothing. */
    assert_non_null(amn_ctx_find_format(ctx, "fixt"));
    assert_non_null(amn_ctx_find_format(ctx, "fixt2"));
    assert_int_equal(amn_ctx_format_count(ctx), 2);
    assert_null(amn_ctx_find_format(ctx, "f7"));
    amn_ctx_free(ctx);
}

static void probe_ties_are_errors(void **state) {
    (void)state;
    const char *dirs[] = {DIR_A};
    amn_ctx_options o = {
        .plugin_dirs = dirs, .n_plugin_dirs = 1, .no_env = true, .no_default = true};
    amn_ctx *ctx;
    amn_error err;
    assert_int_equal(amn_ctx_new(&o, &ctx, &err), AMN_OK);
    amn_source src;
    static const char data[] = "AMNFIXT!payload";
    amn_source_memory(&src, data, sizeof data, "memory");
    const amn_format *f;
    assert_int_equal(amn_ctx_detect_source(ctx, &src, NULL, &f, &err), AMN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "ambiguous"));
    assert_int_equal(amn_ctx_detect_source(ctx, &src, "fixt2", &f, &err), AMN_OK);
    assert_string_equal(f->name, "fixt2");
    /* An unknown --from names the plugin to install. */
    assert_int_equal(amn_ctx_detect_source(ctx, &src, "gguf", &f, &err), AMN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "install the amn-gguf plugin"));
    amn_ctx_free(ctx);
}

static void environment_search_path(void **state) {
    (void)state;
    amn_ctx *ctx;
    amn_error err;
    setenv("AMN_PLUGIN_PATH", "/nonexistent:" DIR_B, 1);
    setenv("AMN_PLUGIN_SYSTEM_PATH", "", 1); /* empty: no default directory */
    assert_int_equal(amn_ctx_new(NULL, &ctx, &err), AMN_OK);
    assert_int_equal(amn_ctx_plugin_count(ctx), 1);
    expect(ctx, "b/amn-good.so", "loaded", NULL);
    amn_ctx_free(ctx);
    unsetenv("AMN_PLUGIN_SYSTEM_PATH");
    unsetenv("AMN_PLUGIN_PATH");
    /* With no variables, the directory beside libamn: the build tree's, with
     * every format plugin this build made. */
    assert_int_equal(amn_ctx_new(NULL, &ctx, &err), AMN_OK);
    static const char *const formats[] = {"safetensors", "npz", "pth", "gguf"};
    size_t found = 0;
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        if (amn_test_built(formats[i])) {
            if (!amn_ctx_find_format(ctx, formats[i])) fail_msg("format %s not found", formats[i]);
            found++;
        }
    assert_true(found > 0 || amn_ctx_plugin_count(ctx) > 0);
    amn_ctx_free(ctx);
}

static void unknown_files_name_the_missing_plugin(void **state) {
    (void)state;
    const char *dirs[] = {DIR_B};
    amn_ctx_options o = {
        .plugin_dirs = dirs, .n_plugin_dirs = 1, .no_env = true, .no_default = true};
    amn_ctx *ctx;
    amn_error err;
    assert_int_equal(amn_ctx_new(&o, &ctx, &err), AMN_OK);
    const struct {
        const char *bytes;
        size_t n;
        const char *name, *plugin;
    } cases[] = {
        {"GGUF\3\0\0\0", 8, "m.bin", "amn-gguf"},
        {"PK\3\4rest", 8, "w.npz", "amn-npz"},
        {"PK\3\4rest", 8, "w.pth", "amn-pth"},
        {"\x93NUMPY\1\0", 8, "a.npy", "amn-npz"},
        {"\x02\0\0\0\0\0\0\0{}", 10, "x", "amn-safetensors"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        amn_source src;
        amn_source_memory(&src, cases[i].bytes, cases[i].n, cases[i].name);
        const amn_format *f;
        assert_int_equal(amn_ctx_detect_source(ctx, &src, NULL, &f, &err), AMN_E_UNSUPPORTED);
        assert_non_null(strstr(err.msg, cases[i].plugin));
    }
    amn_source src;
    amn_source_memory(&src, "garbage!", 8, "x.dat");
    const amn_format *f;
    assert_int_equal(amn_ctx_detect_source(ctx, &src, NULL, &f, &err), AMN_E_PARSE);
    amn_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(broken_plugins_are_reported_and_skipped),
        cmocka_unit_test(probe_ties_are_errors),
        cmocka_unit_test(environment_search_path),
        cmocka_unit_test(unknown_files_name_the_missing_plugin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
