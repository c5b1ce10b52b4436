/* The quantization engine on a whole model against llama-quantize itself:
 * ../shared/fixtures/gguf_quant_reference/model_l4_f16.gguf and its
 * .expect.json (fixtures README 13.3) list, for 26 file types, the tensors
 * llama-quantize wrote in its order, the ggml type of each and the SHA-256
 * of its data. The model is opened through the gguf plugin; the policy
 * (gguf_qpolicy_read_model + gguf_qpolicy_choose) must give the same order
 * and types, and gguf_quantize_tensor_rows the same data, whatever the
 * split of rows into calls and threads. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "amn_test.h"
#include "sha256.h"

#include "amn/amn.h"
#include "gguf_qpolicy.h"
#include "gguf_quant.h"
#include "gguf_quant_model.h"
#include "gguf_types.h"

static amn_ctx *ctx;
static amn_model *model;
static json_object *expect;

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
    const char *ref = amn_test_reference_dir();
    if (!ref) return 0; /* each test skips (or fails under CI) */
    char path[4096];
    snprintf(path, sizeof path, "%s/gguf_quant_reference/model_l4_f16.gguf", ref);
    if (amn_open(ctx, path, NULL, NULL, &model, &err) != AMN_OK) {
        fprintf(stderr, "amn_open %s: %s\n", path, err.msg);
        return -1;
    }
    snprintf(path, sizeof path, "%s/gguf_quant_reference/model_l4_f16.expect.json", ref);
    expect = json_object_from_file(path);
    return expect ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    json_object_put(expect);
    amn_model_free(model);
    amn_ctx_free(ctx);
    return 0;
}

static uint32_t type_by_name(const char *name) {
    for (uint32_t id = 0; id < GGUF_TYPE_COUNT; id++)
        if (strcmp(gguf_type_traits_get(id)->name, name) == 0) return id;
    fail_msg("unknown ggml type %s", name);
    return GGUF_TYPE_COUNT;
}

static json_object *get(json_object *o, const char *key) {
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v)) fail_msg("expect.json: no key %s", key);
    return v;
}

/* The tensors of one file type: order, types (and shapes) as llama-quantize
 * wrote them, against the policy. */
static void check_types(const char *fname, json_object *ft, const gguf_qpolicy_model *pm,
                        const gguf_qpolicy_tensor *ts, size_t n, size_t *order, uint32_t *types) {
    int ftype;
    assert_true(gguf_ftype_parse(fname, &ftype));
    assert_int_equal(json_object_get_int(get(ft, "file_type")), ftype);
    const gguf_qpolicy_options opt = gguf_qpolicy_defaults(ftype);
    amn_error err = {0};
    if (gguf_qpolicy_choose(pm, ts, n, &opt, order, types, &err) != AMN_OK)
        fail_msg("%s: %s", fname, err.msg);
    json_object *list = get(ft, "tensors");
    assert_int_equal(json_object_array_length(list), n);
    for (size_t k = 0; k < n; k++) {
        json_object *e = json_object_array_get_idx(list, k);
        const char *name = json_object_get_string(get(e, "name"));
        const char *type = json_object_get_string(get(e, "type"));
        const gguf_qpolicy_tensor *t = &ts[order[k]];
        if (strcmp(t->name, name) != 0)
            fail_msg("%s: tensor %zu is %s, llama-quantize wrote %s", fname, k, t->name, name);
        if (types[order[k]] != type_by_name(type))
            fail_msg("%s: %s is %s, llama-quantize chose %s", fname, name,
                     gguf_type_traits_get(types[order[k]])->name, type);
    }
}

typedef struct job {
    const amn_tensor *t;
    uint32_t type;
    uint64_t row0, nrows, row_bytes;
    uint8_t *dst;
    int rc;
} job;

static void *run_job(void *p) {
    job *j = p;
    amn_error err = {0};
    j->rc = gguf_quantize_tensor_rows(j->t, j->type, j->row0, j->nrows, j->dst, &err);
    if (j->rc) fprintf(stderr, "%s: %s\n", j->t->name, err.msg);
    return NULL;
}

/* The data of tensor t as `type`, its rows split among nthreads threads
 * (each thread's share in calls of at most 3 rows when `small`). */
static uint8_t *quantize_tensor(const amn_tensor *t, uint32_t type, int nthreads, uint64_t *size) {
    const uint64_t ne0 = t->shape[t->ndim - 1];
    uint64_t numel, row_bytes;
    assert_true(amn_tensor_numel(t, &numel));
    assert_true(gguf_quant_row_bytes(type, ne0, &row_bytes));
    const uint64_t nrows = numel / ne0;
    uint8_t *out = malloc(nrows * row_bytes);
    assert_non_null(out);
    pthread_t th[4];
    job jobs[4];
    uint64_t at = 0;
    for (int i = 0; i < nthreads; i++) {
        const uint64_t share =
            nrows / (uint64_t)nthreads + ((uint64_t)i < nrows % (uint64_t)nthreads);
        jobs[i] = (job){t, type, at, share, row_bytes, out + at * row_bytes, 0};
        at += share;
        assert_int_equal(pthread_create(&th[i], NULL, run_job, &jobs[i]), 0);
    }
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].rc, AMN_OK);
    }
    *size = nrows * row_bytes;
    return out;
}

static void test_reference_model(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    (void)ref;
    gguf_qpolicy_model pm;
    gguf_qpolicy_tensor *ts;
    amn_error err = {0};
    assert_int_equal(gguf_qpolicy_read_model(model, &pm, &ts, &err), AMN_OK);
    assert_string_equal(pm.arch, "llama");
    assert_int_equal(pm.n_layer, 4);
    assert_int_equal(pm.n_head, 4);
    assert_int_equal(pm.n_head_kv, 1);
    assert_int_equal(pm.n_expert, 0);
    const size_t n = amn_model_tensor_count(model);
    size_t *order = malloc(n * sizeof *order);
    uint32_t *types = malloc(n * sizeof *types);
    json_object *fts = get(expect, "ftypes");
    size_t nft = 0, ntensors = 0;
    json_object_object_foreach(fts, fname, ft) {
        check_types(fname, ft, &pm, ts, n, order, types);
        json_object *list = get(ft, "tensors");
        for (size_t k = 0; k < n; k++) {
            json_object *e = json_object_array_get_idx(list, k);
            const amn_tensor *t = amn_model_tensor(model, order[k]);
            /* 1, 2 or 3 threads by tensor: the bytes never depend on it. */
            uint64_t size;
            uint8_t *data = quantize_tensor(t, types[order[k]], 1 + (int)(k % 3), &size);
            assert_int_equal(size, json_object_get_int64(get(e, "nbytes")));
            char hex[65];
            sha256_of(data, (size_t)size, hex);
            if (strcmp(hex, json_object_get_string(get(e, "sha256"))) != 0)
                fail_msg("%s: data of %s (%s) differs from llama-quantize's", fname, t->name,
                         gguf_type_traits_get(types[order[k]])->name);
            free(data);
            ntensors++;
        }
        nft++;
    }
    assert_int_equal(nft, 26);
    fprintf(stderr,
            "model_l4_f16: %zu file types, %zu tensors: types and data equal to "
            "llama-quantize's\n",
            nft, ntensors);
    free(order);
    free(types);
    free(ts);
}

/* Requantizing: a quantized tensor is refused without --allow-requantize
 * and read back exactly with it (its rows widened by ggml's own
 * dequantization: here Q8_0 -> Q4_0 equals Q4_0 of the Q8_0 values). */
static void test_requantize_rows(void **state) {
    (void)state;
    enum { NE0 = 512, NROWS = 3 };
    float x[NE0 * NROWS];
    for (int i = 0; i < NE0 * NROWS; i++) x[i] = (float)((i * 37) % 101 - 50) / 64.0f;
    uint8_t q8[NE0 * NROWS / 32 * 34];
    assert_int_equal(gguf_quantize(GGUF_TYPE_Q8_0, x, NE0 * NROWS, q8), AMN_OK);
    amn_tensor t = {.struct_size = sizeof(amn_tensor),
                    .name = "blk.0.ffn_up.weight",
                    .dtype = AMN_DTYPE_BLOCK,
                    .ndim = 2,
                    .shape = {NROWS, NE0},
                    .nbytes = sizeof q8,
                    .data = q8,
                    .extent = sizeof q8,
                    .encoding = GGUF_TYPE_Q8_0};
    /* The policy refuses it without allow_requantize. */
    gguf_qpolicy_model pm = {.arch = "llama", .n_layer = 1, .n_head = 1, .n_head_kv = 1};
    gguf_qpolicy_tensor qt = {"blk.0.ffn_up.weight", GGUF_TYPE_Q8_0, {NE0, NROWS, 1, 1}};
    gguf_qpolicy_options opt = gguf_qpolicy_defaults(GGUF_FTYPE_Q4_0);
    size_t order;
    uint32_t type;
    amn_error err = {0};
    assert_int_equal(gguf_qpolicy_choose(&pm, &qt, 1, &opt, &order, &type, &err),
                     AMN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "requantizing from type Q8_0 is disabled"));
    opt.allow_requantize = true;
    assert_int_equal(gguf_qpolicy_choose(&pm, &qt, 1, &opt, &order, &type, &err), AMN_OK);
    assert_int_equal(type, GGUF_TYPE_Q4_0);
    /* The data path: dequantized exactly, then quantized. */
    float back[NE0 * NROWS];
    for (int b = 0; b < NE0 * NROWS / 32; b++) {
        uint16_t h = (uint16_t)(q8[34 * b] | q8[34 * b + 1] << 8);
        const float d = amn_f16_to_f32(h);
        for (int j = 0; j < 32; j++) back[32 * b + j] = (float)(int8_t)q8[34 * b + 2 + j] * d;
    }
    uint8_t want[NE0 * NROWS / 32 * 18], got[sizeof want];
    assert_int_equal(gguf_quantize(GGUF_TYPE_Q4_0, back, NE0 * NROWS, want), AMN_OK);
    assert_int_equal(gguf_quantize_tensor_rows(&t, GGUF_TYPE_Q4_0, 0, NROWS, got, &err), AMN_OK);
    assert_memory_equal(got, want, sizeof want);
    /* Same type: the bytes copied. */
    uint8_t same[sizeof q8];
    assert_int_equal(gguf_quantize_tensor_rows(&t, GGUF_TYPE_Q8_0, 1, 2, same, &err), AMN_OK);
    assert_memory_equal(same, q8 + NE0 / 32 * 34, 2 * NE0 / 32 * 34);
    /* Bad requests. */
    assert_int_equal(gguf_quantize_tensor_rows(&t, GGUF_TYPE_Q4_0, 2, 2, got, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "rows out of range"));
    assert_int_equal(gguf_quantize_tensor_rows(&t, GGUF_TYPE_IQ2_XXS, 0, 1, got, &err),
                     AMN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "cannot quantize to IQ2_XXS"));
    t.extent = 100; /* data shorter than the shape says */
    assert_int_equal(gguf_quantize_tensor_rows(&t, GGUF_TYPE_Q4_0, 0, 3, got, &err), AMN_E_PARSE);
    assert_non_null(strstr(err.msg, "out of range"));
    t.extent = sizeof q8;
    t.shape[1] = 500; /* not whole Q4_0 / Q8_0 blocks */
    assert_int_equal(gguf_quantize_tensor_rows(&t, GGUF_TYPE_Q4_0, 0, 1, got, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "not whole Q4_0 blocks"));
}

/* Metadata the policy needs, missing or of the wrong kind: a parse error
 * naming the key, never a guess. */
static void add_str(amn_model *m, const char *key, const char *v) {
    amn_str str = {v, strlen(v)};
    amn_kv kv = {.key = key, .type = AMN_KV_STRING, .data = &str};
    assert_int_equal(amn_model_add_kv(m, &kv, NULL), AMN_OK);
}

static void add_u32(amn_model *m, const char *key, amn_kv_type type, const void *v) {
    amn_kv kv = {.key = key, .type = type, .data = v};
    assert_int_equal(amn_model_add_kv(m, &kv, NULL), AMN_OK);
}

static int read_err(amn_model *m, const char *words) {
    gguf_qpolicy_model pm;
    gguf_qpolicy_tensor *ts = NULL;
    amn_error err = {0};
    const int rc = gguf_qpolicy_read_model(m, &pm, &ts, &err);
    if (rc == AMN_OK) {
        free(ts);
        return rc;
    }
    assert_null(ts);
    if (!strstr(err.msg, words)) fail_msg("message '%s' lacks '%s'", err.msg, words);
    return rc;
}

static void test_malformed_metadata(void **state) {
    (void)state;
    const uint32_t four = 4;
    const int32_t minus = -1;
    amn_model *m = amn_model_new("gguf");
    assert_int_equal(read_err(m, "general.architecture: missing"), AMN_E_PARSE);
    amn_kv num = {.key = "general.architecture", .type = AMN_KV_U32, .data = &four};
    assert_int_equal(amn_model_add_kv(m, &num, NULL), AMN_OK);
    assert_int_equal(read_err(m, "general.architecture: missing or not a string"), AMN_E_PARSE);
    amn_model_free(m);

    m = amn_model_new("gguf");
    add_str(m, "general.architecture", "llama");
    assert_int_equal(read_err(m, "llama.block_count: missing"), AMN_E_PARSE);
    add_str(m, "llama.block_count", "four");
    assert_int_equal(read_err(m, "llama.block_count: not a non-negative 32-bit integer"),
                     AMN_E_PARSE);
    amn_model_free(m);

    m = amn_model_new("gguf");
    add_str(m, "general.architecture", "llama");
    add_u32(m, "llama.block_count", AMN_KV_U32, &four);
    add_u32(m, "llama.attention.head_count", AMN_KV_I32, &minus);
    assert_int_equal(read_err(m, "llama.attention.head_count: not a non-negative"), AMN_E_PARSE);
    amn_model_free(m);

    /* A per-layer array is read at layer 0; head_count_kv defaults to
     * head_count; a tensor of an integer dtype cannot be quantized. */
    m = amn_model_new("gguf");
    add_str(m, "general.architecture", "llama");
    add_u32(m, "llama.block_count", AMN_KV_U32, &four);
    const uint32_t heads[2] = {8, 16};
    amn_kv arr = {.key = "llama.attention.head_count",
                  .type = AMN_KV_ARRAY,
                  .elem_type = AMN_KV_U32,
                  .count = 2,
                  .data = heads};
    assert_int_equal(amn_model_add_kv(m, &arr, NULL), AMN_OK);
    int32_t ids[4] = {0};
    amn_tensor t = {.struct_size = sizeof(amn_tensor),
                    .name = "blk.0.ids.weight",
                    .dtype = AMN_DTYPE_I32,
                    .ndim = 2,
                    .shape = {2, 2},
                    .nbytes = 16,
                    .data = ids,
                    .extent = 16};
    assert_int_equal(amn_model_add_tensor(m, &t, NULL), AMN_OK);
    assert_int_equal(read_err(m, "blk.0.ids.weight: I32 with 2 dimensions cannot be quantized"),
                     AMN_E_UNSUPPORTED);
    amn_model_free(m);
    m = amn_model_new("gguf");
    add_str(m, "general.architecture", "llama");
    add_u32(m, "llama.block_count", AMN_KV_U32, &four);
    assert_int_equal(amn_model_add_kv(m, &arr, NULL), AMN_OK);
    gguf_qpolicy_model pm;
    gguf_qpolicy_tensor *ts = NULL;
    assert_int_equal(gguf_qpolicy_read_model(m, &pm, &ts, NULL), AMN_OK);
    assert_int_equal(pm.n_head, 8);
    assert_int_equal(pm.n_head_kv, 8);
    assert_int_equal(pm.n_expert, 0);
    free(ts);
    amn_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_model),
        cmocka_unit_test(test_requantize_rows),
        cmocka_unit_test(test_malformed_metadata),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
