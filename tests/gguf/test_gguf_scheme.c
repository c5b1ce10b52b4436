/* The "gguf" scheme through the core: detect() on hand-built models (good
 * and malformed block tensors) and, when the safetensors writer is loaded,
 * end-to-end conversion of golden blocks with the output compared bit for
 * bit against the AMNG goldens (fixtures README section 7). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "amn_test.h"

#include "amn/amn.h"

static amn_ctx *ctx;

static int setup(void **state) {
    (void)state;
    const char *dirs[1] = {AMN_BINARY_DIR "/lib/amn/plugins"};
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options),
                         .plugin_dirs = dirs,
                         .n_plugin_dirs = 1,
                         .no_env = true,
                         .no_default = true};
    amn_error err = {0};
    if (amn_ctx_new(&o, &ctx, &err) != AMN_OK) {
        fprintf(stderr, "amn_ctx_new: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    amn_ctx_free(ctx);
    return 0;
}

static const amn_scheme *find_scheme(const char *name) {
    for (size_t i = 0; i < amn_ctx_scheme_count(ctx); i++)
        if (strcmp(amn_ctx_scheme(ctx, i)->name, name) == 0) return amn_ctx_scheme(ctx, i);
    return NULL;
}

/* A block tensor viewing `data` (nbytes of it). */
static amn_tensor block_tensor(const char *name, uint32_t type, const char *type_name,
                               uint32_t ndim, const uint64_t *shape, const void *data,
                               uint64_t nbytes) {
    amn_tensor t = {.struct_size = sizeof(amn_tensor),
                    .name = name,
                    .dtype = AMN_DTYPE_BLOCK,
                    .ndim = ndim,
                    .nbytes = nbytes,
                    .data = data,
                    .extent = nbytes,
                    .encoding = type,
                    .encoding_name = type_name};
    memcpy(t.shape, shape, ndim * sizeof *shape);
    return t;
}

static void test_plugin_loaded(void **state) {
    (void)state;
    const amn_scheme *s = find_scheme("gguf");
    assert_non_null(s);
    assert_non_null(s->detect);
    assert_non_null(s->dequantize);
    bool found = false;
    for (size_t i = 0; i < amn_ctx_plugin_count(ctx); i++) {
        amn_plugin_info info = {.struct_size = sizeof(amn_plugin_info)};
        assert_int_equal(amn_ctx_plugin(ctx, i, &info), AMN_OK);
        if (strcmp(info.name, "gguf") == 0) {
            found = true;
            assert_string_equal(info.status, "loaded");
            assert_int_equal(info.n_schemes, 1);
        }
    }
    assert_true(found);
}

/* Plan a one-tensor model; returns the plan's rc and copies the message. */
static int plan_one(const amn_tensor *t, amn_error *err) {
    amn_model *m = amn_model_new("gguf");
    assert_non_null(m);
    int rc = amn_model_add_tensor(m, t, err);
    assert_int_equal(rc, AMN_OK);
    amn_plan *p = NULL;
    rc = amn_plan_new(ctx, m, &p, err);
    if (rc == AMN_OK) {
        /* A type with no kernel is left unclaimed: inspect still describes
         * the file, and conversion refuses the tensor by name. */
        amn_plan_summary s = {.struct_size = sizeof(amn_plan_summary)};
        amn_plan_summarize(p, AMN_DTYPE_BF16, &s);
        if (s.unhandled) {
            amn_convert_options o = {.struct_size = sizeof(amn_convert_options),
                                     .target = "gguf",
                                     .output = "/nonexistent/out.gguf"};
            rc = amn_convert(ctx, m, p, &o, NULL, err);
        }
    }
    amn_plan_free(p);
    amn_model_free(m);
    return rc;
}

static void test_detect_groups(void **state) {
    (void)state;
    static uint8_t q4k[2 * 144 * 3], q8[34 * 4];
    const uint64_t s_q4k[3] = {2, 3, 256}, s_q8[1] = {128}, s_f32[2] = {2, 2};
    const float plain[4] = {1, 2, 3, 4};
    amn_model *m = amn_model_new("gguf");
    amn_error err = {0};
    amn_tensor a = block_tensor("blk.0.ffn_up.weight", 12, "Q4_K", 3, s_q4k, q4k, sizeof q4k);
    amn_tensor b = block_tensor("token_embd.weight", 8, "Q8_0", 1, s_q8, q8, sizeof q8);
    amn_tensor c = {.struct_size = sizeof(amn_tensor),
                    .name = "norm.weight",
                    .dtype = AMN_DTYPE_F32,
                    .ndim = 2,
                    .shape = {s_f32[0], s_f32[1]},
                    .nbytes = 16,
                    .data = plain,
                    .extent = 16};
    assert_int_equal(amn_model_add_tensor(m, &a, &err), AMN_OK);
    assert_int_equal(amn_model_add_tensor(m, &c, &err), AMN_OK);
    assert_int_equal(amn_model_add_tensor(m, &b, &err), AMN_OK);
    amn_plan *p = NULL;
    if (amn_plan_new(ctx, m, &p, &err) != AMN_OK) fail_msg("plan: %s", err.msg);
    assert_int_equal(amn_plan_group_count(p), 2);
    amn_group_info g = {.struct_size = sizeof(amn_group_info)};
    assert_int_equal(amn_plan_group(p, 0, &g), AMN_OK);
    assert_string_equal(g.out_name, "blk.0.ffn_up.weight");
    assert_string_equal(g.label, "GGUF Q4_K");
    assert_string_equal(g.scheme, "gguf");
    assert_int_equal(g.ndim, 3);
    assert_int_equal(g.shape[0], 2);
    assert_int_equal(g.shape[1], 3);
    assert_int_equal(g.shape[2], 256);
    assert_int_equal(g.n_members, 1);
    assert_int_equal(g.members[0], 0);
    assert_int_equal(g.roles[0], AMN_ROLE_WEIGHT);
    assert_int_equal(amn_plan_group(p, 1, &g), AMN_OK);
    assert_string_equal(g.label, "GGUF Q8_0");
    assert_int_equal(g.members[0], 2);
    assert_int_equal(amn_plan_tensor_role(p, 1), 0); /* passthrough */
    amn_plan_summary s = {.struct_size = sizeof(amn_plan_summary)};
    amn_plan_summarize(p, AMN_DTYPE_BF16, &s);
    assert_int_equal(s.groups, 2);
    assert_int_equal(s.passthrough, 1);
    assert_string_equal(s.scheme, "gguf");
    assert_true(s.labels_differ);
    amn_plan_free(p);
    amn_model_free(m);
}

static void expect_error(const amn_tensor *t, int code, const char *needle1, const char *needle2) {
    amn_error err = {0};
    const int rc = plan_one(t, &err);
    if (rc != code) fail_msg("%s: rc %d (%s), want %d", t->name, rc, err.msg, code);
    if (!strstr(err.msg, needle1) || (needle2 && !strstr(err.msg, needle2)))
        fail_msg("%s: message '%s' lacks '%s' / '%s'", t->name, err.msg, needle1,
                 needle2 ? needle2 : "");
}

static void test_detect_malformed(void **state) {
    (void)state;
    static uint8_t buf[4096];
    const uint64_t s256[2] = {2, 256}, s48[2] = {2, 48}, s32[1] = {32};

    /* nbytes one block short, one byte long. */
    amn_tensor t = block_tensor("short.weight", 12, "Q4_K", 2, s256, buf, 144);
    expect_error(&t, AMN_E_PARSE, "short.weight", "Q4_K");
    t = block_tensor("long.weight", 12, "Q4_K", 2, s256, buf, 289);
    expect_error(&t, AMN_E_PARSE, "long.weight", NULL);
    /* A row that is not whole blocks, although the total is (96 = 3 x 32). */
    t = block_tensor("ragged.weight", 2, "Q4_0", 2, s48, buf, 54);
    expect_error(&t, AMN_E_PARSE, "ragged.weight", "block size");
    /* Retired, activation-only, and never-assigned types. */
    t = block_tensor("old.weight", 4, "Q4_2", 1, s32, buf, 20);
    expect_error(&t, AMN_E_UNSUPPORTED, "old.weight", "Q4_2");
    t = block_tensor("repacked.weight", 31, "Q4_0_4_4", 1, s32, buf, 18);
    expect_error(&t, AMN_E_UNSUPPORTED, "repacked.weight", "Q4_0_4_4");
    const uint64_t s256b[1] = {256};
    t = block_tensor("act.weight", 15, "Q8_K", 1, s256b, buf, 292);
    expect_error(&t, AMN_E_UNSUPPORTED, "act.weight", "Q8_K");
    t = block_tensor("future.weight", 4000, "type 4000 (unknown)", 1, s32, buf, 18);
    expect_error(&t, AMN_E_UNSUPPORTED, "future.weight", "4000");
    t = block_tensor("future2.weight", UINT32_MAX, "type 4294967295 (unknown)", 1, s32, buf, 18);
    expect_error(&t, AMN_E_UNSUPPORTED, "future2.weight", NULL);
    /* A scalar block tensor has no row. */
    t = block_tensor("scalar.weight", 8, "Q8_0", 0, s32, buf, 34);
    expect_error(&t, AMN_E_PARSE, "scalar.weight", NULL);
    /* Element count overflowing the byte size. */
    const uint64_t huge[2] = {UINT64_MAX / 32, 32};
    t = block_tensor("huge.weight", 8, "Q8_0", 2, huge, NULL, 34);
    expect_error(&t, AMN_E_PARSE, "huge.weight", NULL);
}

/* ---- end to end through the safetensors writer -------------------------- */

typedef struct golden {
    uint8_t *file;
    uint32_t type, n;
    const uint8_t *raw, *bf16, *f32;
    uint32_t raw_len;
} golden;

static bool load_golden(const char *ref, const char *name, golden *g) {
    char path[4300];
    size_t size = 0;
    snprintf(path, sizeof path, "%s/gguf_reference/%s", ref, name);
    g->file = amn_test_read_file(path, &size);
    if (!g->file || size < 28 || memcmp(g->file, "AMNG", 4) != 0) return false;
    g->type = amn_test_u32(g->file + 8);
    g->n = amn_test_u32(g->file + 12);
    g->raw_len = amn_test_u32(g->file + 16);
    g->raw = g->file + 28;
    g->bf16 = g->raw + g->raw_len;
    g->f32 = g->bf16 + (size_t)g->n * 2;
    return 28 + (uint64_t)g->raw_len + (uint64_t)g->n * 6 == size;
}

/* Data section of a one-tensor safetensors file. */
static const uint8_t *st_data(const uint8_t *file, size_t size, size_t *len) {
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)file[i] << (8 * i);
    assert_true(hl <= size - 8);
    *len = size - 8 - (size_t)hl;
    return file + 8 + hl;
}

static void test_convert_goldens(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    if (!amn_ctx_find_format(ctx, "safetensors")) {
        fprintf(stderr, "SKIP %s: safetensors plugin not built (AMN_PLUGINS)\n", __func__);
        skip();
    }
    /* Multi-block rows (Q4_0: 32 blocks a row), one-block rows (Q4_K), and an
     * i-quant; tiled x16 so the core splits rows over two threads. */
    static const struct {
        const char *file;
        uint64_t row;
    } cases[] = {{"smollm2_q4_0.bin", 1024},
                 {"smollm2_q4_k.bin", 256},
                 {"mistral_7b_iq2_xxs.bin", 2048},
                 {"smollm2_q6_k.bin", 512}};
    enum { TILE = 16 };
    char saved[32] = "";
    const char *env = getenv("AMN_SIMD");
    if (env) snprintf(saved, sizeof saved, "%s", env);
    char dir[] = "/tmp/amn-gguf-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        golden g = {0};
        assert_true(load_golden(ref, cases[c].file, &g));
        uint8_t *raw = malloc((size_t)g.raw_len * TILE);
        assert_non_null(raw);
        for (int k = 0; k < TILE; k++) memcpy(raw + (size_t)k * g.raw_len, g.raw, g.raw_len);
        const uint64_t n = (uint64_t)g.n * TILE;
        /* 2-D as the model has it, and as one long 1-D row, which the scheme
         * hands to the core in runs of blocks. */
        const bool flat = c % 2 == 1;
        const uint64_t shape[2] = {flat ? n : n / cases[c].row, cases[c].row};
        amn_model *m = amn_model_new("gguf");
        amn_error err = {0};
        amn_tensor t =
            block_tensor("w", g.type, "?", flat ? 1 : 2, shape, raw, (uint64_t)g.raw_len * TILE);
        assert_int_equal(amn_model_add_tensor(m, &t, &err), AMN_OK);
        amn_plan *p = NULL;
        if (amn_plan_new(ctx, m, &p, &err) != AMN_OK) fail_msg("plan: %s", err.msg);
        const amn_dtype outs[2] = {AMN_DTYPE_BF16, AMN_DTYPE_F32};
        /* Each output on each kernel path, chosen as users do: AMN_SIMD. */
        for (int k = 0; k < 4; k++) {
            const int o = k % 2;
            assert_int_equal(setenv("AMN_SIMD", k < 2 ? "avx2" : "scalar", 1), 0);
            char out[128];
            snprintf(out, sizeof out, "%s/out-%zu-%d.safetensors", dir, c, k);
            amn_convert_options co = {.struct_size = sizeof(amn_convert_options),
                                      .mode = AMN_MODE_REMEMBER,
                                      .out_dtype = outs[o],
                                      .output = out,
                                      .overwrite = true,
                                      .threads = 2};
            amn_convert_stats st = {.struct_size = sizeof(amn_convert_stats)};
            if (amn_convert(ctx, m, p, &co, &st, &err) != AMN_OK) fail_msg("convert: %s", err.msg);
            assert_int_equal(st.dequantized, 1);
            size_t size = 0, len = 0;
            uint8_t *file = amn_test_read_file(out, &size);
            assert_non_null(file);
            const uint8_t *data = st_data(file, size, &len);
            const size_t es = amn_dtype_size(outs[o]);
            assert_int_equal(len, n * es);
            const uint8_t *gold = outs[o] == AMN_DTYPE_BF16 ? g.bf16 : g.f32;
            for (int tile = 0; tile < TILE; tile++)
                if (memcmp(data + (size_t)tile * g.n * es, gold, (size_t)g.n * es) != 0)
                    fail_msg("%s to %s (AMN_SIMD=%s): tile %d differs from the golden",
                             cases[c].file, amn_dtype_name(outs[o]), getenv("AMN_SIMD"), tile);
            free(file);
            unlink(out);
        }
        if (env)
            setenv("AMN_SIMD", saved, 1);
        else
            unsetenv("AMN_SIMD");
        fprintf(stderr, "ok %s: %llu values%s x BF16/F32 x avx2/scalar through amn_convert\n",
                cases[c].file, (unsigned long long)n, flat ? " in one row" : "");
        amn_plan_free(p);
        amn_model_free(m);
        free(raw);
        free(g.file);
    }
    rmdir(dir);
}

/* A legal tensor with one huge row (2^24 Q8_0 elements, 64 MiB as F32)
 * converts in buffers of the pipeline's size, not of the row: the peak
 * resident set grows by far less than the row (before units, the core sized its
 * buffers by the row: the peak grew by 64 MiB). */
static void test_long_row_memory(void **state) {
    (void)state;
    if (!amn_ctx_find_format(ctx, "safetensors")) {
        fprintf(stderr, "SKIP %s: safetensors plugin not built (AMN_PLUGINS)\n", __func__);
        skip();
    }
    const uint64_t n = 1u << 24, blocks = n / 32;
    uint8_t *raw = malloc((size_t)blocks * 34);
    assert_non_null(raw);
    uint32_t s = 12345;
    for (size_t i = 0; i < (size_t)blocks * 34; i++) {
        s = s * 1664525u + 1013904223u;
        raw[i] = (uint8_t)(s >> 24);
    }
    for (size_t b = 0; b < blocks; b++) raw[b * 34 + 1] &= 0x3f; /* finite f16 scales */
    amn_model *m = amn_model_new("gguf");
    amn_error err = {0};
    amn_tensor t = block_tensor("w", 8, "Q8_0", 1, &n, raw, (uint64_t)blocks * 34);
    assert_int_equal(amn_model_add_tensor(m, &t, &err), AMN_OK);
    amn_plan *p = NULL;
    if (amn_plan_new(ctx, m, &p, &err) != AMN_OK) fail_msg("plan: %s", err.msg);
    char dir[] = "/tmp/amn-gguf-test-XXXXXX", out[64];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/long.safetensors", dir);
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    amn_convert_options co = {.struct_size = sizeof(amn_convert_options),
                              .mode = AMN_MODE_REMEMBER,
                              .out_dtype = AMN_DTYPE_F32,
                              .output = out,
                              .threads = 2};
    if (amn_convert(ctx, m, p, &co, NULL, &err) != AMN_OK) fail_msg("convert: %s", err.msg);
    getrusage(RUSAGE_SELF, &after);
    const long grew_kib = after.ru_maxrss - before.ru_maxrss;
    fprintf(stderr, "long row: peak resident set grew by %ld KiB converting 64 MiB of F32\n",
            grew_kib);
    assert_true(grew_kib < 32 * 1024);
    unlink(out);
    rmdir(dir);
    amn_plan_free(p);
    amn_model_free(m);
    free(raw);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plugin_loaded),
        cmocka_unit_test(test_long_row_memory), /* first: before other tests raise the peak */
        cmocka_unit_test(test_detect_groups),
        cmocka_unit_test(test_detect_malformed),
        cmocka_unit_test(test_convert_goldens),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
