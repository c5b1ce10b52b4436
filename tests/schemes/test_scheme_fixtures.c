/* The generated fixtures of one scheme family (fixtures/<FAMILY>/, made by
 * its gen_fixtures.py with expected outputs computed in numpy / torch from
 * the producer's own code): every "ok" case remembered to BF16, F16 and F32
 * on the scalar and the AVX2 path, with 1 and 3 threads, equals its
 * expected-<dtype>.safetensors tensor for tensor (0 ULP, signed zeros; a NaN
 * must be a NaN, its payload free) and every run gives the same bytes;
 * every "bad" case fails to plan with its error class and the words
 * cases.txt lists. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amn/byteorder.h"
#include "amn/amn.h"
#include "amn_test.h"

static amn_ctx *ctx;
static char tmp[256];
static char fixdir[1024];

static int setup(void **state) {
    (void)state;
    const char *dirs[1] = {AMN_BINARY_DIR "/lib/amn/plugins"};
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options),
                         .plugin_dirs = dirs,
                         .n_plugin_dirs = 1,
                         .no_env = true,
                         .no_default = true};
    amn_error err = {0};
    if (amn_ctx_new(&o, &ctx, &err) != AMN_OK) return -1;
    snprintf(fixdir, sizeof fixdir, "%s/fixtures/%s", AMN_SOURCE_DIR, FAMILY);
    snprintf(tmp, sizeof tmp, "/tmp/amn-%s-XXXXXX", FAMILY);
    return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    amn_ctx_free(ctx);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static amn_model *open_or_fail(const char *path) {
    amn_model *m = NULL;
    amn_error err = {0};
    if (amn_open(ctx, path, NULL, NULL, &m, &err) != AMN_OK) fail_msg("open %s: %s", path, err.msg);
    return m;
}

static bool is_nan_elem(amn_dtype t, const uint8_t *p) {
    switch (t) {
    case AMN_DTYPE_BF16:
        return (amn_load_le16(p) & 0x7fff) > 0x7f80;
    case AMN_DTYPE_F16:
        return (amn_load_le16(p) & 0x7fff) > 0x7c00;
    case AMN_DTYPE_F32:
        return (amn_load_le32(p) & 0x7fffffff) > 0x7f800000;
    default:
        return false;
    }
}

/* Every tensor of `want` is in `got` with the same dtype, shape and bytes. */
static void compare(const char *gotp, const char *wantp, const char *what) {
    amn_model *got = open_or_fail(gotp), *want = open_or_fail(wantp);
    if (amn_model_tensor_count(got) != amn_model_tensor_count(want))
        fail_msg("%s: %zu tensors, expected %zu", what, amn_model_tensor_count(got),
                 amn_model_tensor_count(want));
    for (size_t i = 0; i < amn_model_tensor_count(want); i++) {
        const amn_tensor *w = amn_model_tensor(want, i);
        const int64_t j = amn_model_find(got, w->name);
        if (j < 0) fail_msg("%s: no tensor %s in the output", what, w->name);
        const amn_tensor *g = amn_model_tensor(got, (size_t)j);
        if (g->dtype != w->dtype || g->ndim != w->ndim || g->nbytes != w->nbytes)
            fail_msg("%s: %s is %s, %u dims, %llu bytes; expected %s, %u, %llu", what, w->name,
                     amn_dtype_name(g->dtype), g->ndim, (unsigned long long)g->nbytes,
                     amn_dtype_name(w->dtype), w->ndim, (unsigned long long)w->nbytes);
        for (uint32_t d = 0; d < w->ndim; d++)
            if (g->shape[d] != w->shape[d]) fail_msg("%s: %s: shape differs", what, w->name);
        const size_t es = amn_dtype_size(w->dtype);
        const uint8_t *a = g->data, *b = w->data;
        for (uint64_t k = 0; k < w->nbytes; k += es) {
            if (memcmp(a + k, b + k, es) == 0) continue;
            if (is_nan_elem(w->dtype, b + k) && is_nan_elem(w->dtype, a + k)) continue;
            uint32_t x = 0, y = 0;
            memcpy(&x, a + k, es < 4 ? es : 4);
            memcpy(&y, b + k, es < 4 ? es : 4);
            fail_msg("%s: %s element %llu: 0x%x, expected 0x%x", what, w->name,
                     (unsigned long long)(k / es), x, y);
        }
    }
    amn_model_free(got);
    amn_model_free(want);
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void run_ok(const char *name) {
    static const struct {
        const char *cli;
        amn_dtype t;
    } outs[] = {{"bf16", AMN_DTYPE_BF16}, {"f16", AMN_DTYPE_F16}, {"f32", AMN_DTYPE_F32}};
    static const char *const simds[] = {"scalar", "avx2", "avx512"};
    char model[1400], expected[1400], out[512], first[512], what[256];
    snprintf(model, sizeof model, "%s/%s/model.safetensors", fixdir, name);
    for (size_t o = 0; o < 3; o++) {
        snprintf(expected, sizeof expected, "%s/%s/expected-%s.safetensors", fixdir, name,
                 outs[o].cli);
        first[0] = '\0';
        for (size_t s = 0; s < 3; s++) {
            setenv("AMN_SIMD", simds[s], 1);
            if (s > 0 && amn_simd_level() < (amn_simd)(AMN_SIMD_SCALAR + s)) continue;
            for (unsigned threads = 1; threads <= 3; threads += 2) {
                snprintf(out, sizeof out, "%s/%s-%s-%s-%u.safetensors", tmp, name, outs[o].cli,
                         simds[s], threads);
                snprintf(what, sizeof what, "%s to %s, %s, %u thread%s", name, outs[o].cli,
                         simds[s], threads, threads == 1 ? "" : "s");
                amn_model *m = open_or_fail(model);
                amn_plan *p = NULL;
                amn_error err = {0};
                if (amn_plan_new(ctx, m, &p, &err) != AMN_OK)
                    fail_msg("%s: plan: %s", what, err.msg);
                amn_convert_options opt = {.struct_size = sizeof(amn_convert_options),
                                           .mode = AMN_MODE_REMEMBER,
                                           .out_dtype = outs[o].t,
                                           .output = out,
                                           .overwrite = true,
                                           .threads = threads};
                amn_convert_stats st = {.struct_size = sizeof(amn_convert_stats)};
                if (amn_convert(ctx, m, p, &opt, &st, &err) != AMN_OK)
                    fail_msg("%s: convert: %s", what, err.msg);
                amn_plan_free(p);
                amn_model_free(m);
                compare(out, expected, what);
                if (!first[0]) {
                    snprintf(first, sizeof first, "%s", out);
                    continue;
                }
                size_t na, nb;
                uint8_t *a = slurp(first, &na), *b = slurp(out, &nb);
                if (na != nb || memcmp(a, b, na) != 0)
                    fail_msg("%s: bytes differ from %s", what, first);
                free(a);
                free(b);
            }
        }
    }
    unsetenv("AMN_SIMD");
}

static void run_bad(const char *name, const char *cls, char *words) {
    char model[1400];
    snprintf(model, sizeof model, "%s/%s/model.safetensors", fixdir, name);
    amn_model *m = open_or_fail(model);
    amn_plan *p = NULL;
    amn_error err = {0};
    const int rc = amn_plan_new(ctx, m, &p, &err);
    amn_plan_free(p);
    amn_model_free(m);
    const int want = strcmp(cls, "parse") == 0 ? AMN_E_PARSE : AMN_E_UNSUPPORTED;
    if (rc != want) fail_msg("%s: rc %d (%s), expected %s", name, rc, err.msg, cls);
    for (char *save = NULL, *w = strtok_r(words, "|\n", &save); w; w = strtok_r(NULL, "|\n", &save))
        if (!strstr(err.msg, w)) fail_msg("%s: \"%s\" lacks \"%s\"", name, err.msg, w);
}

static void test_cases(void **state) {
    (void)state;
    char path[1200], line[1024];
    snprintf(path, sizeof path, "%s/cases.txt", fixdir);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("no %s", path);
    size_t ok = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        char kind[8], name[128], cls[32];
        int used = 0;
        if (line[0] == '#' || sscanf(line, "%7s %127s%n", kind, name, &used) != 2) continue;
        if (strcmp(kind, "ok") == 0) {
            run_ok(name);
            ok++;
        } else if (sscanf(line + used, " %31s%n", cls, &used) == 1) {
            char *words = strchr(line, ' ');
            words = strchr(words + 1, ' ');
            words = strchr(words + 1, ' ') + 1;
            run_bad(name, cls, words);
            bad++;
        }
    }
    fclose(f);
    printf("%s: %zu cases checked, %zu malformed files refused\n", FAMILY, ok, bad);
    assert_true(ok > 0 && bad > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cases)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
