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
    amn_plugin_info pi = {.struct_size = sizeof(amn_plugin_info)};
    if (!find(ctx, file_part, &pi)) fail_msg("no record for %s", file_part);
    if (strcmp(pi.status, status) != 0 || (reason && (!pi.reason || !strstr(pi.reason, reason))))
        fail_msg("%s: %s (%s), wanted %s (%s)", file_part, pi.status, pi.reason ? pi.reason : "",
                 status, reason ? reason : "");
}

static void broken_plugins_are_reported_and_skipped(void **state) {
    (void)state;
    const char *dirs[] = {DIR_A, DIR_B};
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options),
                         .plugin_dirs = dirs,
                         .n_plugin_dirs = 2,
                         .no_env = true,
                         .no_default = true,
                         .no_builtin = true};
    amn_ctx *ctx;
    amn_error err;
    assert_int_equal(amn_ctx_new(&o, &ctx, &err), AMN_OK);
    expect(ctx, "a/amn-good.so", "loaded", NULL);
    expect(ctx, "b/amn-good.so", "shadowed", "same name");
    expect(ctx, "amn-twin.so", "loaded", NULL);
    expect(ctx, "amn-badmagic.so", "rejected", "magic");
    expect(ctx, "amn-abi3.so", "rejected", "built for plugin ABI 3.");
    expect(ctx, "amn-abi1.so", "rejected", "built for plugin ABI 1 (before 2.0");
    expect(ctx, "amn-minor9.so", "rejected", "plugin ABI 2.9");
    expect(ctx, "amn-misnamed.so", "rejected", "'other'");
    expect(ctx, "amn-nodesc.so", "rejected", "no amn_plugin_v2");
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
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options),
                         .plugin_dirs = dirs,
                         .n_plugin_dirs = 1,
                         .no_env = true,
                         .no_default = true,
                         .no_builtin = true};
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
    assert_non_null(strstr(err.msg, "install the amn-plugin-gguf package"));
    amn_ctx_free(ctx);
}

/* The name of the format detected for `name` with only dir's plugins, or NULL. */
static const char *detect_in(const char *dir, const char *name, amn_error *err, int *rc) {
    const char *dirs[] = {dir};
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options),
                         .plugin_dirs = dirs,
                         .n_plugin_dirs = 1,
                         .no_env = true,
                         .no_default = true,
                         .no_builtin = true};
    amn_ctx *ctx;
    assert_int_equal(amn_ctx_new(&o, &ctx, err), AMN_OK);
    static const char data[] = "AMNFIXT!payload";
    amn_source src;
    amn_source_memory(&src, data, sizeof data, name);
    const amn_format *f = NULL;
    *rc = amn_ctx_detect_source(ctx, &src, NULL, &f, err);
    static char winner[32];
    snprintf(winner, sizeof winner, "%s", f ? f->name : "");
    amn_ctx_free(ctx); /* the vtable goes with its plugin: keep the name only */
    return f ? winner : NULL;
}

/* A matching extension breaks a tie; it never makes one: 50 with a matching
 * extension loses to 51, and a weak 25 stays unrecognised. */
static void probe_extension_only_breaks_ties(void **state) {
    (void)state;
    amn_error err;
    int rc;
    const char *w = detect_in(AMN_BINARY_DIR "/test-plugins/p1", "x.fixt", &err, &rc);
    assert_int_equal(rc, AMN_OK);
    assert_string_equal(w, "pb");
    w = detect_in(AMN_BINARY_DIR "/test-plugins/p2", "x.fixt", &err, &rc);
    assert_int_equal(rc, AMN_OK);
    assert_string_equal(w, "pa");
    detect_in(AMN_BINARY_DIR "/test-plugins/p2", "x.dat", &err, &rc);
    assert_int_equal(rc, AMN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "ambiguous format (pa or pc)"));
    detect_in(AMN_BINARY_DIR "/test-plugins/p3", "x.fixt", &err, &rc);
    assert_int_equal(rc, AMN_E_PARSE);
    assert_non_null(strstr(err.msg, "unrecognised file format"));
}

/* Plugins linked into libamn (a -DAMN_STATIC_PLUGINS=ON build), else 0. */
static size_t builtin_count(amn_ctx *ctx) {
    size_t n = 0;
    amn_plugin_info pi = {.struct_size = sizeof(amn_plugin_info)};
    for (size_t i = 0; i < amn_ctx_plugin_count(ctx); i++)
        if (amn_ctx_plugin(ctx, i, &pi) == AMN_OK && strcmp(pi.file, "(built-in)") == 0) n++;
    return n;
}

/* A module named like a built-in plugin is shadowed by it; without
 * built-ins (a build of modules, or no_builtin) it loads. */
static void builtin_plugins_shadow_modules(void **state) {
    (void)state;
    const char *dirs[] = {AMN_BINARY_DIR "/test-plugins/s"};
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options),
                         .plugin_dirs = dirs,
                         .n_plugin_dirs = 1,
                         .no_env = true,
                         .no_default = true};
    amn_ctx *ctx;
    amn_error err;
    assert_int_equal(amn_ctx_new(&o, &ctx, &err), AMN_OK);
    amn_plugin_info pi = {.struct_size = sizeof(amn_plugin_info)};
    bool builtin_safetensors = false;
    for (size_t i = 0; i < amn_ctx_plugin_count(ctx); i++) {
        amn_ctx_plugin(ctx, i, &pi);
        if (strcmp(pi.name, "safetensors") == 0 && strcmp(pi.file, "(built-in)") == 0) {
            assert_string_equal(pi.status, "loaded");
            builtin_safetensors = true;
        }
    }
#ifdef AMN_TEST_STATIC_PLUGINS
    assert_true(builtin_safetensors); /* this build links it into libamn */
#endif
    if (builtin_safetensors) {
        expect(ctx, "s/amn-safetensors.so", "shadowed", "same name");
        assert_null(amn_ctx_find_format(ctx, "fixt9"));
    } else {
        expect(ctx, "s/amn-safetensors.so", "loaded", NULL);
    }
    amn_ctx_free(ctx);
    o.no_builtin = true;
    assert_int_equal(amn_ctx_new(&o, &ctx, &err), AMN_OK);
    expect(ctx, "s/amn-safetensors.so", "loaded", NULL);
    assert_int_equal(builtin_count(ctx), 0);
    assert_non_null(amn_ctx_find_format(ctx, "fixt9"));
    amn_ctx_free(ctx);
}

static void environment_search_path(void **state) {
    (void)state;
    amn_ctx *ctx;
    amn_error err;
    setenv("AMN_PLUGIN_PATH", "/nonexistent:" DIR_B, 1);
    setenv("AMN_PLUGIN_SYSTEM_PATH", "", 1); /* empty: no default directory */
    assert_int_equal(amn_ctx_new(NULL, &ctx, &err), AMN_OK);
    assert_int_equal(amn_ctx_plugin_count(ctx), 1 + builtin_count(ctx));
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
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options),
                         .plugin_dirs = dirs,
                         .n_plugin_dirs = 1,
                         .no_env = true,
                         .no_default = true,
                         .no_builtin = true};
    amn_ctx *ctx;
    amn_error err;
    assert_int_equal(amn_ctx_new(&o, &ctx, &err), AMN_OK);
    const struct {
        const char *bytes;
        size_t n;
        const char *name, *plugin;
    } cases[] = {
        {"GGUF\3\0\0\0", 8, "m.bin", "amn-plugin-gguf package"},
        {"PK\3\4rest", 8, "w.npz", "amn-plugin-npz package"},
        {"PK\3\4rest", 8, "w.pth", "amn-plugin-pth package"},
        {"\x93NUMPY\1\0", 8, "a.npy", "amn-plugin-npz package"},
        {"\x02\0\0\0\0\0\0\0{}", 10, "x", "amn-plugin-safetensors package"},
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

/* amn_ctx_free_keep_modules frees the context but not the modules: a vtable
 * from a plugin still works afterwards (were the module unmapped, calling
 * its probe would crash), and a new context finds the module still loaded
 * (the same vtable). amn_ctx_free afterwards unloads it as usual. */
static void keep_modules_leaves_plugins_loaded(void **state) {
    (void)state;
    const char *dirs[] = {DIR_A};
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options),
                         .plugin_dirs = dirs,
                         .n_plugin_dirs = 1,
                         .no_env = true,
                         .no_default = true,
                         .no_builtin = true};
    amn_ctx *ctx;
    amn_error err;
    assert_int_equal(amn_ctx_new(&o, &ctx, &err), AMN_OK);
    const amn_format *f = amn_ctx_find_format(ctx, "fixt");
    assert_non_null(f);
    static const uint8_t head[8 + AMN_PROBE_PADDING] = "AMNFIXT!";
    amn_probe_data pd = {.struct_size = sizeof pd,
                         .head = head,
                         .head_size = 8,
                         .tail = head,
                         .tail_size = 8,
                         .file_size = 8};
    const int score = f->probe(&pd);
    assert_true(score > AMN_PROBE_WEAK);
    amn_ctx_free_keep_modules(ctx);
    assert_int_equal(f->probe(&pd), score);
    assert_string_equal(f->name, "fixt");
    assert_int_equal(amn_ctx_new(&o, &ctx, &err), AMN_OK);
    assert_ptr_equal(amn_ctx_find_format(ctx, "fixt"), f);
    amn_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(broken_plugins_are_reported_and_skipped),
        cmocka_unit_test(probe_ties_are_errors),
        cmocka_unit_test(probe_extension_only_breaks_ties),
        cmocka_unit_test(builtin_plugins_shadow_modules),
        cmocka_unit_test(environment_search_path),
        cmocka_unit_test(unknown_files_name_the_missing_plugin),
        cmocka_unit_test(keep_modules_leaves_plugins_loaded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
