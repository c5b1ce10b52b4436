/* ollama:<name> resolution against a fake Ollama store in a temporary
 * directory: the name forms, $OLLAMA_MODELS and the ~/.ollama fallback, and
 * hostile names and manifests. */
#include <sys/stat.h>
#include <unistd.h>

#include "amn_test.h"
#include "ollama.h"

#define HEX_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define HEX_B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

static char root[256];

static void mkdirs(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0755);
            *p = '/';
        }
    mkdir(buf, 0755);
}

static void write_file(const char *path, const char *text) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    mkdirs(dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static const char *manifest(const char *digest_hex) {
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution."
             "manifest.v2+json\",\"config\":{\"mediaType\":\"application/"
             "vnd.docker.container.image.v1+json\",\"digest\":\"sha256:%s\",\"size\":1},"
             "\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.template\","
             "\"digest\":\"sha256:%s\",\"size\":2},"
             "{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":\"sha256:%s\","
             "\"size\":3}]}",
             HEX_B, HEX_B, digest_hex);
    return buf;
}

static void put_manifest(const char *rel, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/manifests/%s", root, rel);
    write_file(path, text);
}

static int setup(void **state) {
    (void)state;
    snprintf(root, sizeof root, "/tmp/amn-ollama-test-XXXXXX");
    if (!mkdtemp(root)) return -1;
    char path[1024];
    snprintf(path, sizeof path, "%s/blobs/sha256-%s", root, HEX_A);
    write_file(path, "GGUF");
    put_manifest("registry.ollama.ai/library/llama3.2/1b", manifest(HEX_A));
    put_manifest("registry.ollama.ai/library/llama3.2/latest", manifest(HEX_A));
    put_manifest("registry.ollama.ai/someone/custom-model/v1.0", manifest(HEX_A));
    put_manifest("hf.co/bartowski/SmolLM2-135M-Instruct-GGUF/Q4_K_M", manifest(HEX_A));
    return setenv("OLLAMA_MODELS", root, 1);
}

static int teardown(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void expect_blob(const char *spec) {
    char path[4096], want[1024];
    amn_error err = {0};
    int rc = amn_ollama_resolve(spec, path, sizeof path, &err);
    if (rc) fail_msg("%s: %s", spec, err.msg);
    snprintf(want, sizeof want, "%s/blobs/sha256-%s", root, HEX_A);
    assert_string_equal(path, want);
}

/* The class and, in the message, `words`. */
static void expect_fail_msg(const char *spec, int code, const char *words) {
    char path[4096] = "untouched";
    amn_error err = {0};
    int rc = amn_ollama_resolve(spec, path, sizeof path, &err);
    if (rc != code) fail_msg("%s: got %d (%s), wanted %d", spec, rc, err.msg, code);
    if (!strstr(err.msg, words)) fail_msg("%s: message \"%s\" lacks \"%s\"", spec, err.msg, words);
}

static void name_forms(void **state) {
    (void)state;
    expect_blob("llama3.2:1b");
    expect_blob("llama3.2"); /* :latest */
    expect_blob("someone/custom-model:v1.0");
    expect_blob("hf.co/bartowski/SmolLM2-135M-Instruct-GGUF:Q4_K_M");
    /* trailing slashes on the store are harmless */
    char with_slash[300];
    snprintf(with_slash, sizeof with_slash, "%s//", root);
    setenv("OLLAMA_MODELS", with_slash, 1);
    expect_blob("llama3.2:1b");
    setenv("OLLAMA_MODELS", root, 1);
    /* the resolver vtable calls the same function */
    char path[4096];
    assert_string_equal(amn_ollama_resolver.scheme, "ollama");
    assert_int_equal(amn_ollama_resolver.resolve("llama3.2", path, sizeof path, NULL), AMN_OK);
}

/* No $OLLAMA_MODELS (or an empty one): ~/.ollama/models. */
static void home_fallback(void **state) {
    (void)state;
    char home[512], link[600], path[4096];
    snprintf(home, sizeof home, "%s/home", root);
    snprintf(link, sizeof link, "%s/.ollama", home);
    mkdirs(link);
    snprintf(link, sizeof link, "%s/.ollama/models", home);
    assert_int_equal(symlink(root, link), 0);
    const char *old_home = getenv("HOME");
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", old_home ? old_home : "");
    setenv("HOME", home, 1);
    for (int empty = 0; empty < 2; empty++) {
        if (empty)
            setenv("OLLAMA_MODELS", "", 1);
        else
            unsetenv("OLLAMA_MODELS");
        amn_error err = {0};
        int rc = amn_ollama_resolve("llama3.2:1b", path, sizeof path, &err);
        if (rc) fail_msg("%s", err.msg);
        char want[1024];
        snprintf(want, sizeof want, "%s/.ollama/models/blobs/sha256-%s", home, HEX_A);
        assert_string_equal(path, want);
    }
    if (old_home)
        setenv("HOME", saved, 1);
    else
        unsetenv("HOME");
    setenv("OLLAMA_MODELS", root, 1);
}

static void hostile_names(void **state) {
    (void)state;
    static const struct {
        const char *spec, *words;
    } bad[] = {
        {"", "invalid model name"},
        {":1b", "invalid model name"},
        {"llama3.2:", "invalid tag"},
        {"../etc:passwd", "invalid model name"},
        {"a/../../b", "invalid model name"},
        {"..", "invalid model name"},
        {"a/b/c/d:tag", "too many '/'"},
        {"a//b:tag", "invalid model name"},
        {"/abs:tag", "invalid model name"},
        {"model:../x", "invalid model name"},
        {".hidden", "invalid model name"},
        {"model:.tag", "invalid tag"},
        {"mo del:tag", "invalid model name"},
        {"model:t/ag", "invalid model name"},
        {"a/b/:tag", "invalid model name"},
        {"mo\\del", "invalid model name"},
        {"model:ta:g", "invalid model name"},
        {"mod\x01l", "invalid model name"},
        {"host:5000/ns/m:tag", "invalid model name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_fail_msg(bad[i].spec, AMN_E_INVALID, bad[i].words);
    char longname[400];
    memset(longname, 'a', 300);
    longname[300] = '\0';
    expect_fail_msg(longname, AMN_E_INVALID, "invalid");
}

static void missing_things(void **state) {
    (void)state;
    expect_fail_msg("nosuchmodel", AMN_E_IO, "no such model in the Ollama store");
    expect_fail_msg("llama3.2:7b", AMN_E_IO, "no such model in the Ollama store");
    /* a manifest whose blob is gone */
    put_manifest("registry.ollama.ai/library/gone/latest", manifest(HEX_B));
    expect_fail_msg("gone", AMN_E_IO, "the model blob");
    /* a manifest that is a directory */
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/manifests/registry.ollama.ai/library/dir/latest", root);
    mkdirs(dir);
    expect_fail_msg("dir", AMN_E_IO, "not a regular file");
    /* a path buffer too small for the answer */
    char small[16];
    amn_error err = {0};
    assert_int_equal(amn_ollama_resolve("llama3.2", small, sizeof small, &err), AMN_E_LIMIT);
    assert_non_null(strstr(err.msg, "blob path too long"));
}

static void hostile_manifests(void **state) {
    (void)state;
    static const struct {
        const char *text, *words;
        int code;
    } bad[] = {
        {"not json", "not valid JSON", AMN_E_PARSE},
        {"[]", "not a JSON object", AMN_E_PARSE},
        {"{}", "has no layers", AMN_E_PARSE},
        {"{\"layers\": {}}", "has no layers", AMN_E_PARSE},
        {"{\"layers\": [1, 2]}", "has no model layer", AMN_E_PARSE},
        {"{\"layers\": [{\"mediaType\": \"application/vnd.ollama.image.template\","
         " \"digest\": \"sha256:" HEX_A "\"}]}",
         "has no model layer", AMN_E_PARSE},
        {"{\"layers\": [{\"mediaType\": \"application/vnd.ollama.image.model\"}]}",
         "digest is not sha256:<64 hex>", AMN_E_PARSE},
        {"{\"layers\": [{\"mediaType\": \"application/vnd.ollama.image.model\", \"digest\": 5}]}",
         "digest is not sha256:<64 hex>", AMN_E_PARSE},
        {"{\"layers\": [{\"mediaType\": \"application/vnd.ollama.image.model\","
         " \"digest\": \"sha256:../../../../etc/passwd\"}]}",
         "digest is not sha256:<64 hex>", AMN_E_PARSE},
        {"{\"layers\": [{\"mediaType\": \"application/vnd.ollama.image.model\","
         " \"digest\": \"sha256:" HEX_A "/../x\"}]}",
         "digest is not sha256:<64 hex>", AMN_E_PARSE},
        {"{\"layers\": [{\"mediaType\": \"application/vnd.ollama.image.model\","
         " \"digest\": \"sha512:" HEX_A "\"}]}",
         "digest is not sha256:<64 hex>", AMN_E_PARSE},
        {"{\"layers\": [{\"mediaType\": \"application/vnd.ollama.image.model\","
         " \"digest\": \"sha256:0123\"}]}",
         "digest is not sha256:<64 hex>", AMN_E_PARSE},
        {"{\"layers\": [{\"mediaType\": \"application/vnd.ollama.image.model\","
         " \"digest\": \"sha256:" HEX_A "0\"}]}",
         "digest is not sha256:<64 hex>", AMN_E_PARSE},
        {"{\"layers\": [{\"mediaType\": \"application/vnd.ollama.image.model\","
         " \"digest\": "
         "\"sha256:g123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}]}",
         "digest is not sha256:<64 hex>", AMN_E_PARSE},
        {"{\"layers\": [{\"mediaType\": \"application/vnd.ollama.image.model\","
         " \"digest\": \"sha256:" HEX_A "\"}]} trailing",
         "not valid JSON", AMN_E_PARSE},
        /* nesting is a safety cap, like every other one */
        {"{\"layers\": "
         "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
         "]]]]]]]]]]]]]]]]]]]]]]]]]}",
         "nests deeper than 16 levels", AMN_E_LIMIT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        put_manifest("registry.ollama.ai/library/hostile/latest", bad[i].text);
        expect_fail_msg("hostile", bad[i].code, bad[i].words);
    }
    /* a manifest over the size cap */
    char *huge = malloc(2u << 20);
    memset(huge, ' ', 2u << 20);
    huge[(2u << 20) - 1] = '\0';
    huge[0] = '{';
    huge[(2u << 20) - 2] = '}';
    put_manifest("registry.ollama.ai/library/hostile/latest", huge);
    free(huge);
    expect_fail_msg("hostile", AMN_E_LIMIT, "exceed the 1048576-byte cap");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(name_forms),        cmocka_unit_test(home_fallback),
        cmocka_unit_test(hostile_names),     cmocka_unit_test(missing_things),
        cmocka_unit_test(hostile_manifests),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
