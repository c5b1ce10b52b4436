/* The safetensors plugin: reference headers, malformed files (each with its
 * error class, through both the mapped and the header-only path), shards,
 * and a writer whose output is byte-identical to the reference library's. */
#include <dirent.h>
#include <unistd.h>

#include <json-c/json.h>

#include "amn/amn.h"
#include "amn_st_build.h"
#include "amn_test.h"

static amn_ctx *ctx;

static int setup(void **state) {
    (void)state;
    const char *dirs[] = {AMN_BINARY_DIR "/lib/amn/plugins"};
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options),
                         .plugin_dirs = dirs,
                         .n_plugin_dirs = 1,
                         .no_env = true,
                         .no_default = true};
    if (amn_ctx_new(&o, &ctx, NULL) || !amn_ctx_find_format(ctx, "safetensors")) return -1;
    return amn_test_scratch_make("st-test");
}

static int teardown(void **state) {
    (void)state;
    amn_ctx_free(ctx);
    return amn_test_scratch_remove();
}

static const char *tmp(const char *name) {
    return amn_test_scratch_path(name);
}

/* Open and inspect must both fail with `code` and a message holding `words`. */
static void expect_error(const char *path, int code, const char *words) {
    amn_model *m = NULL;
    amn_error err = {0};
    int rc = amn_open(ctx, path, "safetensors", NULL, &m, &err);
    if (rc != code) fprintf(stderr, "%s: open gave %d (%s), wanted %d\n", path, rc, err.msg, code);
    assert_int_equal(rc, code);
    assert_null(m);
    if (!strstr(err.msg, words)) fail_msg("open: \"%s\" lacks \"%s\"", err.msg, words);
    amn_error_clear(&err);
    rc = amn_inspect(ctx, path, "safetensors", NULL, &m, &err);
    if (rc != code)
        fprintf(stderr, "%s: inspect gave %d (%s), wanted %d\n", path, rc, err.msg, code);
    assert_int_equal(rc, code);
    assert_null(m);
    if (!strstr(err.msg, words)) fail_msg("inspect: \"%s\" lacks \"%s\"", err.msg, words);
}

static void malformed_files(void **state) {
    (void)state;
    static const uint8_t data[64];
    const char *p = tmp("bad.safetensors");
    FILE *f = fopen(p, "wb");
    fwrite("\x05\0\0", 1, 3, f); /* truncated: not even the length */
    fclose(f);
    expect_error(p, AMN_E_PARSE, "truncated");

    assert_int_equal(amn_test_write_raw(p, 4000, "{}", NULL, 0), 0); /* length past EOF */
    expect_error(p, AMN_E_PARSE, "header length 4000 runs past the end");
    assert_int_equal(amn_test_write_raw(p, 1ull << 40, "{}", NULL, 0), 0); /* over the cap */
    expect_error(p, AMN_E_LIMIT, "exceeds the 104857600 cap");

    const struct {
        const char *header;
        size_t data_len;
        int code;
        const char *words; /* in the message */
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]", 8, AMN_E_PARSE,
         "not valid JSON: the text ends inside a value"},
        {"[1,2,3]", 0, AMN_E_PARSE, "header is not a JSON object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 8, AMN_E_PARSE,
         "not valid JSON: unexpected character"},
        {"{\"a\":{\"dtype\":\"Q9\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "unknown dtype 'Q9'"},
        {"{\"a\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", 1, AMN_E_UNSUPPORTED,
         "dtype F4 is not supported"},
        /* C64 is safetensors' complex64; C128 is amn's name, not a safetensors dtype. */
        {"{\"a\":{\"dtype\":\"C128\",\"shape\":[2],\"data_offsets\":[0,32]}}", 32, AMN_E_PARSE,
         "unknown dtype 'C128'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, AMN_E_PARSE, "tensor b: data_offsets overlap"}, /* overlap */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
         20, AMN_E_PARSE, "tensor b: data_offsets leave a gap"}, /* gap */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, AMN_E_PARSE,
         "tensors cover 16 bytes but the data area holds 8"}, /* out of range */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "data_offsets span 8 bytes, shape needs 12"}, /* offsets do not match the shape */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}",
         8, AMN_E_PARSE, "shape product overflows"}, /* shape product overflows */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "tensor a: bad dimension"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
         AMN_E_LIMIT, "9 dimensions (max 8)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, AMN_E_PARSE,
         "tensor a: bad data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, AMN_E_PARSE,
         "needs dtype, shape and data_offsets"},
        {"{\"__metadata__\":{\"k\":1},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]"
         "}}",
         8, AMN_E_PARSE, "__metadata__ value of k is not a string"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, AMN_E_PARSE,
         "tensors cover 8 bytes but the data area holds 12"}, /* trailing bytes no tensor covers */
        {"{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]"
         "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
         0, AMN_E_PARSE,
         "nests deeper than a safetensors header does"}, /* nesting past the tokenizer's depth */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[[2]],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "nests deeper than a safetensors header does"}, /* deeper than header, entry, shape */
        {"{\"a\":[[],[],[]]}", 0, AMN_E_PARSE,
         "tensor a: needs dtype, shape and data_offsets"}, /* an entry that is no object */
        {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
         8, AMN_E_PARSE, "repeats a key"},
        {"{\"__metadata__\":{},\"__metadata__\":{},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
         8, AMN_E_PARSE, "repeats a key"},
        {"{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "not valid JSON: text is not UTF-8"},
        {"{\"a\xed\xa0\x80\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
         AMN_E_PARSE, "not valid JSON: text is not UTF-8"}, /* a surrogate written as UTF-8 */
        {"{\"a\tb\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "control character in a string"},
        {"{\"a\\ud800\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "lone surrogate"},
        {"{\"a\\udc00x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "lone surrogate"},
        {"{\"a\\q\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "bad escape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "tensor a: bad dimension"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2e0],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "tensor a: bad dimension"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-0],\"data_offsets\":[0,0]}}", 0, AMN_E_PARSE,
         "tensor a: bad dimension"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "tensor a: bad dimension"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[18446744073709551616],\"data_offsets\":[0,8]}}", 8,
         AMN_E_PARSE, "tensor a: bad dimension"}, /* 2^64 */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "not valid JSON: unexpected character"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],}}", 8, AMN_E_PARSE,
         "not valid JSON: unexpected character"}, /* a trailing comma */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,16]}}", 8, AMN_E_PARSE,
         "tensor a: bad data_offsets"},
        {"{\"a\":{\"dtype\":F32,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "not valid JSON: unexpected character"},
        {"{\"a\\u0000x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, AMN_E_PARSE,
         "escaped NUL"}, /* json-c would cut the name at the NUL */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
         8, AMN_E_PARSE, "repeats a key"}, /* two readers could keep different ones */
        {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
         AMN_E_PARSE, "repeats a key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_int_equal(amn_test_write_st(p, cases[i].header, data, cases[i].data_len), 0);
        expect_error(p, cases[i].code, cases[i].words);
    }

    /* Brackets inside strings (escaped quotes included) are not structure. */
    assert_int_equal(amn_test_write_st(p,
                                       "{\"a\":{\"note\":\"{[{[\\\"{[\",\"dtype\":\"F32\","
                                       "\"shape\":[2],\"data_offsets\":[0,8]}}",
                                       data, 8),
                     0);
    amn_model *ok;
    amn_error err;
    assert_int_equal(amn_open(ctx, p, NULL, NULL, &ok, &err), AMN_OK);
    amn_model_free(ok);

    /* A colon in a name and an escaped backslash before "u0000" are text:
     * neither counts as a key nor as a NUL. */
    assert_int_equal(amn_test_write_st(p,
                                       "{\"a:b\\\\u0000\":{\"dtype\":\"F32\","
                                       "\"shape\":[2],\"data_offsets\":[0,8]}}",
                                       data, 8),
                     0);
    assert_int_equal(amn_open(ctx, p, NULL, NULL, &ok, &err), AMN_OK);
    assert_string_equal(amn_model_tensor(ok, 0)->name, "a:b\\u0000");
    amn_model_free(ok);

    /* 8 MB of empty arrays under one key: json-c would build 2.8 M arrays
     * (about 1 GB); the structure check refuses the header before that. */
    const size_t reps = 2800000;
    char *big = malloc(8 + 3 * reps + 2);
    assert_non_null(big);
    size_t at = (size_t)sprintf(big, "{\"a\":[");
    for (size_t i = 0; i < reps; i++) memcpy(big + at, i ? ",[]" : "[] ", 3), at += 3;
    memcpy(big + at, "]}", 3);
    assert_int_equal(amn_test_write_st(p, big, data, 0), 0);
    free(big);
    expect_error(p, AMN_E_PARSE, "tensor a: needs dtype, shape and data_offsets");

    /* 24 MB of numbers in one shape (json-c built an object of ~70 bytes for
     * each: 1.7 GB): the scanner counts them without storing them. */
    const size_t dims = 12000000;
    big = malloc(64 + 2 * dims);
    assert_non_null(big);
    at = (size_t)sprintf(big, "{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,0],\"shape\":[");
    for (size_t i = 0; i < dims; i++) memcpy(big + at, i ? ",0" : "0 ", 2), at += 2;
    memcpy(big + at, "]}}", 4);
    assert_int_equal(amn_test_write_st(p, big, data, 0), 0);
    free(big);
    expect_error(p, AMN_E_LIMIT, "tensor a: 12000000 dimensions (max 8)");

    /* Escapes decode to the name they spell: a surrogate pair to UTF-8, an
     * escaped slash and newline to themselves; unknown fields are skipped. */
    assert_int_equal(amn_test_write_st(p,
                                       "{\"\\ud83d\\ude00\\/\\n\\u00e9\":{\"x\":[1,\"y\",null,"
                                       "true,false,-1.5e3],\"dtype\":\"F32\","
                                       "\"shape\":[2],\"data_offsets\":[0,8]}}",
                                       data, 8),
                     0);
    assert_int_equal(amn_open(ctx, p, NULL, NULL, &ok, &err), AMN_OK);
    assert_string_equal(amn_model_tensor(ok, 0)->name, "\xf0\x9f\x98\x80/\n\xc3\xa9");
    amn_model_free(ok);
}

static void empty_and_scalar_tensors(void **state) {
    (void)state;
    const char *p = tmp("edge.safetensors");
    static const uint8_t data[4] = {0, 0, 0x80, 0x3f};
    assert_int_equal(
        amn_test_write_st(p,
                          "{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                          "\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[4,4]}}",
                          data, 4),
        0);
    amn_model *m;
    amn_error err;
    assert_int_equal(amn_open(ctx, p, NULL, NULL, &m, &err), AMN_OK);
    assert_int_equal(amn_model_tensor_count(m), 2);
    const amn_tensor *s = amn_model_tensor(m, amn_model_find(m, "s"));
    assert_int_equal(s->ndim, 0);
    static const uint64_t zeros[AMN_MAX_DIMS];
    assert_memory_equal(s->shape, zeros, sizeof zeros); /* dimensions past ndim are 0 */
    assert_int_equal(s->nbytes, 4);
    assert_memory_equal(s->data, data, 4);
    assert_int_equal(amn_model_tensor(m, amn_model_find(m, "e"))->nbytes, 0);
    amn_model_free(m);
}

/* Every reference file parses to the names, dtypes, shapes, offsets and
 * metadata its expected.json lists (tensors sorted by name there). */
static void reference_headers(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    const char *names[] = {"fp8", "gptq", "awq", "bnb_nf4"};
    for (size_t k = 0; k < 4; k++) {
        char st[4096], ej[4096];
        snprintf(st, sizeof st, "%s/safetensors_reference/%s.safetensors", ref, names[k]);
        snprintf(ej, sizeof ej, "%s/safetensors_reference/%s.expected.json", ref, names[k]);
        json_object *exp = json_object_from_file(ej);
        assert_non_null(exp);
        for (int pass = 0; pass < 2; pass++) {
            amn_model *m;
            amn_error err;
            int rc = pass ? amn_inspect(ctx, st, NULL, NULL, &m, &err)
                          : amn_open(ctx, st, NULL, NULL, &m, &err);
            assert_int_equal(rc, AMN_OK);
            assert_string_equal(amn_model_format(m), "safetensors");
            const uint64_t header_size =
                (uint64_t)json_object_get_int64(json_object_object_get(exp, "header_size"));
            json_object *tensors = json_object_object_get(exp, "tensors");
            assert_int_equal(json_object_array_length(tensors), amn_model_tensor_count(m));
            for (size_t i = 0; i < json_object_array_length(tensors); i++) {
                json_object *e = json_object_array_get_idx(tensors, i);
                const char *name = json_object_get_string(json_object_object_get(e, "name"));
                int64_t idx = amn_model_find(m, name);
                assert_true(idx >= 0);
                const amn_tensor *t = amn_model_tensor(m, (size_t)idx);
                assert_string_equal(amn_dtype_name(t->dtype),
                                    json_object_get_string(json_object_object_get(e, "dtype")));
                json_object *shape = json_object_object_get(e, "shape");
                assert_int_equal(json_object_array_length(shape), t->ndim);
                for (uint32_t d = 0; d < t->ndim; d++)
                    assert_int_equal(json_object_get_int64(json_object_array_get_idx(shape, d)),
                                     t->shape[d]);
                json_object *offs = json_object_object_get(e, "data_offsets");
                uint64_t begin =
                    (uint64_t)json_object_get_int64(json_object_array_get_idx(offs, 0));
                uint64_t end = (uint64_t)json_object_get_int64(json_object_array_get_idx(offs, 1));
                assert_int_equal(t->file_offset, 8 + header_size + begin);
                assert_int_equal(t->nbytes, end - begin);
                assert_true(pass ? t->data == NULL : t->data != NULL);
            }
            json_object *meta = json_object_object_get(exp, "metadata");
            assert_int_equal(json_object_object_length(meta), amn_model_meta_count(m));
            json_object_object_foreach(meta, key, val) {
                assert_non_null(amn_model_get_meta(m, key));
                assert_string_equal(amn_model_get_meta(m, key), json_object_get_string(val));
            }
            amn_model_free(m);
        }
        json_object_put(exp);
    }
}

/* Rewriting a file the reference library wrote must give the same bytes. */
static void writer_matches_reference_library(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    const amn_format *f = amn_ctx_find_format(ctx, "safetensors");
    const char *names[] = {"fp8", "gptq", "awq", "bnb_nf4"};
    for (size_t k = 0; k < 4; k++) {
        char st[4096];
        snprintf(st, sizeof st, "%s/safetensors_reference/%s.safetensors", ref, names[k]);
        amn_model *m;
        amn_error err;
        assert_int_equal(amn_open(ctx, st, NULL, NULL, &m, &err), AMN_OK);
        size_t n = amn_model_tensor_count(m);
        amn_out_tensor outs[16];
        const amn_out_tensor *ptrs[16];
        size_t order[16];
        assert_true(n <= 16);
        for (size_t i = 0; i < n; i++) {
            const amn_tensor *t = amn_model_tensor(m, i);
            outs[i] = (amn_out_tensor){.struct_size = sizeof outs[i],
                                       .name = t->name,
                                       .dtype = t->dtype,
                                       .ndim = t->ndim,
                                       .nbytes = t->nbytes};
            memcpy(outs[i].shape, t->shape, sizeof t->shape);
            ptrs[i] = &outs[i];
        }
        amn_sink *sink;
        const char *out = tmp("rewrite.safetensors");
        assert_int_equal(amn_sink_open(out, true, NULL, 0, &sink, &err), AMN_OK);
        amn_write_args wa = {.struct_size = sizeof wa,
                             .path = out,
                             .sink = sink,
                             .tensors = ptrs,
                             .n_tensors = n,
                             .source = m};
        void *wstate;
        assert_int_equal(f->writer->begin(&wa, &wstate, order, &err), AMN_OK);
        for (size_t i = 0; i < n; i++) {
            const amn_tensor *t = amn_model_tensor(m, order[i]);
            assert_int_equal(amn_sink_write(sink, t->data, t->nbytes, &err), AMN_OK);
        }
        assert_int_equal(f->writer->finish(wstate, &err), AMN_OK);
        assert_int_equal(amn_sink_commit(sink, &err), AMN_OK);
        size_t a_len, b_len;
        uint8_t *a = amn_test_read_file(st, &a_len), *b = amn_test_read_file(out, &b_len);
        assert_int_equal(a_len, b_len);
        assert_memory_equal(a, b, a_len);
        free(a);
        free(b);
        amn_model_free(m);
    }
}

static void write_shard(const char *name, const char *tensor, float v) {
    char header[256];
    snprintf(header, sizeof header,
             "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", tensor);
    float data[2] = {v, -v};
    assert_int_equal(amn_test_write_st(tmp(name), header, data, 8), 0);
}

/* Indexes naming shards that are missing, outside the folder (by name or by
 * a symlink), or holding a tensor another shard holds: parse errors with
 * words that say which, through the index and the folder. */
static void bad_shard_indexes(const char *dir) {
    static const amn_test_words words[] = {
        {"missing", "shard model-00003-of-00003.safetensors does not exist"},
        {"parent", "names a bad shard (not a .safetensors file inside the model folder)"},
        {"absolute", "names a bad shard (not a .safetensors file inside the model folder)"},
        {"symlink out", "is a symlink leading outside the model folder"},
        {"two shards", "tensor b.weight is in two shards"},
    };
    static const struct {
        const char *what, *map;
    } cases[] = {
        {"missing", "\"a.weight\":\"model-00003-of-00003.safetensors\""},
        {"parent", "\"a.weight\":\"../model-00001-of-00002.safetensors\""},
        {"absolute", "\"a.weight\":\"/tmp/x.safetensors\""},
        {"symlink out", "\"a.weight\":\"out.safetensors\""},
        {"two shards", "\"a.weight\":\"model-00001-of-00002.safetensors\","
                       "\"b.weight\":\"model-00002-of-00002.safetensors\","
                       "\"c.weight\":\"dup.safetensors\""},
    };
    write_shard("outside.safetensors", "a.weight", 1.0f);
    char link[1024];
    snprintf(link, sizeof link, "%s/out.safetensors", dir);
    assert_int_equal(symlink("../outside.safetensors", link), 0);
    write_shard("shards/dup.safetensors", "b.weight", 5.0f);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        for (int via_dir = 0; via_dir < 2; via_dir++) {
            FILE *f = fopen(tmp("shards/model.safetensors.index.json"), "w");
            fprintf(f, "{\"weight_map\":{%s}}", cases[i].map);
            fclose(f);
            amn_model *m = NULL;
            amn_error err = {0};
            const char *path = via_dir ? dir : tmp("shards/model.safetensors.index.json");
            assert_int_equal(amn_open(ctx, path, NULL, NULL, &m, &err), AMN_E_PARSE);
            amn_test_expect_words(words, sizeof words / sizeof *words, cases[i].what, err.msg);
            assert_int_equal(amn_inspect(ctx, path, NULL, NULL, &m, &err), AMN_E_PARSE);
            amn_test_expect_words(words, sizeof words / sizeof *words, cases[i].what, err.msg);
        }
    }
    /* A symlink inside the folder is fine; so is a Hugging Face cache
     * snapshot's link to its repository's blobs. */
    unlink(link);
    unlink(tmp("shards/dup.safetensors"));
    assert_int_equal(symlink("model-00001-of-00002.safetensors", link), 0);
    FILE *f = fopen(tmp("shards/model.safetensors.index.json"), "w");
    fputs("{\"weight_map\":{\"a.weight\":\"out.safetensors\"}}", f);
    fclose(f);
    amn_model *m = NULL;
    amn_error err = {0};
    assert_int_equal(
        amn_open(ctx, tmp("shards/model.safetensors.index.json"), NULL, NULL, &m, &err), AMN_OK);
    amn_model_free(m);
    unlink(link);
    unlink(tmp("shards/model.safetensors.index.json"));
    mkdir(tmp("models--o--m"), 0755);
    mkdir(tmp("models--o--m/blobs"), 0755);
    mkdir(tmp("models--o--m/snapshots"), 0755);
    mkdir(tmp("models--o--m/snapshots/rev"), 0755);
    write_shard("models--o--m/blobs/0123abcd", "a.weight", 1.0f);
    assert_int_equal(
        symlink("../../blobs/0123abcd", tmp("models--o--m/snapshots/rev/model.safetensors")), 0);
    assert_int_equal(amn_open(ctx, tmp("models--o--m/snapshots/rev"), NULL, NULL, &m, &err),
                     AMN_OK);
    amn_model_free(m);
}

static void sharded_models(void **state) {
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/shards", amn_test_scratch());
    mkdir(dir, 0755);
    write_shard("shards/model-00001-of-00002.safetensors", "a.weight", 1.0f);
    write_shard("shards/model-00002-of-00002.safetensors", "b.weight", 2.0f);
    amn_model *m;
    amn_error err;
    /* A directory without an index: every shard, in name order. */
    assert_int_equal(amn_open(ctx, dir, NULL, NULL, &m, &err), AMN_OK);
    assert_int_equal(amn_model_tensor_count(m), 2);
    assert_true(amn_model_find(m, "b.weight") >= 0);
    float b0;
    memcpy(&b0, amn_model_tensor(m, amn_model_find(m, "b.weight"))->data, 4);
    assert_true(b0 == 2.0f);
    amn_model_free(m);
    /* With an index, through the index file and through the directory. */
    FILE *f = fopen(tmp("shards/model.safetensors.index.json"), "w");
    fputs("{\"metadata\":{\"total_size\":16},\"weight_map\":{"
          "\"a.weight\":\"model-00001-of-00002.safetensors\","
          "\"b.weight\":\"model-00002-of-00002.safetensors\"}}",
          f);
    fclose(f);
    assert_int_equal(
        amn_open(ctx, tmp("shards/model.safetensors.index.json"), NULL, NULL, &m, &err), AMN_OK);
    assert_int_equal(amn_model_tensor_count(m), 2);
    amn_model_free(m);
    assert_int_equal(amn_inspect(ctx, dir, NULL, NULL, &m, &err), AMN_OK);
    assert_int_equal(amn_model_tensor_count(m), 2);
    amn_model_free(m);
    /* An index may not point outside its directory, nor at missing tensors. */
    f = fopen(tmp("shards/model.safetensors.index.json"), "w");
    fputs("{\"weight_map\":{\"a.weight\":\"../x.safetensors\"}}", f);
    fclose(f);
    assert_int_equal(amn_open(ctx, dir, NULL, NULL, &m, &err), AMN_E_PARSE);
    assert_non_null(strstr(err.msg, "weight_map entry a.weight names a bad shard"));
    f = fopen(tmp("shards/model.safetensors.index.json"), "w");
    fputs("{\"weight_map\":{\"c.weight\":\"model-00001-of-00002.safetensors\"}}", f);
    fclose(f);
    assert_int_equal(amn_open(ctx, dir, NULL, NULL, &m, &err), AMN_E_PARSE);
    assert_non_null(strstr(err.msg, "weight_map names c.weight, no shard holds it"));
    /* A malformed index: the kit's JSON reader, strict and capped. */
    static const struct {
        const char *text, *words;
        int code;
    } bad_index[] = {
        {"{\"weight_map\":{", "not valid JSON", AMN_E_PARSE},
        {"[]", "not a JSON object", AMN_E_PARSE},
        {"{\"weight_map\":{},}", "not valid JSON", AMN_E_PARSE}, /* trailing comma */
        {"{\"weight_map\":[]}", "no weight_map object", AMN_E_PARSE},
        {"{\"weight_map\":{}} {}", "not valid JSON", AMN_E_PARSE},
    };
    for (size_t i = 0; i < sizeof bad_index / sizeof *bad_index; i++) {
        f = fopen(tmp("shards/model.safetensors.index.json"), "w");
        fputs(bad_index[i].text, f);
        fclose(f);
        assert_int_equal(amn_open(ctx, dir, NULL, NULL, &m, &err), bad_index[i].code);
        if (!strstr(err.msg, bad_index[i].words))
            fail_msg("index %s: \"%s\" lacks \"%s\"", bad_index[i].text, err.msg,
                     bad_index[i].words);
    }
    /* An index over the header cap is refused before it is read. */
    amn_limits lim;
    amn_limits_default(&lim);
    lim.max_header_bytes = 8;
    f = fopen(tmp("shards/model.safetensors.index.json"), "w");
    fputs("{\"weight_map\":{}}", f);
    fclose(f);
    assert_int_equal(
        amn_open(ctx, tmp("shards/model.safetensors.index.json"), NULL, &lim, &m, &err),
        AMN_E_LIMIT);
    assert_non_null(strstr(err.msg, "exceed the 8-byte cap"));
    /* Two shards holding the same tensor name. */
    unlink(tmp("shards/model.safetensors.index.json"));
    write_shard("shards/model-00002-of-00002.safetensors", "a.weight", 3.0f);
    assert_int_equal(amn_open(ctx, dir, NULL, NULL, &m, &err), AMN_E_PARSE);
    assert_non_null(strstr(err.msg, "tensor a.weight is in two shards"));
    write_shard("shards/model-00002-of-00002.safetensors", "b.weight", 2.0f);
    bad_shard_indexes(dir);
}

/* F32 -> BF16 through the whole pipeline, checked against the BF16 golden
 * PyTorch made from the same F32 values (a GGUF fixture's goldens). */
static void convert_f32_to_bf16(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    char path[4096];
    snprintf(path, sizeof path, "%s/gguf_reference/smollm2_q4_0.bin", ref);
    size_t size;
    uint8_t *g = amn_test_read_file(path, &size);
    assert_non_null(g);
    const uint32_t bf16_len = amn_test_u32(g + 20), f32_len = amn_test_u32(g + 24);
    const uint8_t *f32 = g + size - f32_len, *bf16 = f32 - bf16_len;
    char header[256];
    snprintf(header, sizeof header,
             "{\"w\":{\"dtype\":\"F32\",\"shape\":[256,%u],\"data_offsets\":[0,%u]}}",
             f32_len / 4 / 256, f32_len);
    /* Pad the header to 8 bytes like the reference writer would. */
    while (strlen(header) % 8) strcat(header, " ");
    assert_int_equal(amn_test_write_st(tmp("f32.safetensors"), header, f32, f32_len), 0);
    amn_model *m;
    amn_plan *p;
    amn_error err;
    assert_int_equal(amn_open(ctx, tmp("f32.safetensors"), NULL, NULL, &m, &err), AMN_OK);
    assert_int_equal(amn_plan_new(ctx, m, &p, &err), AMN_OK);
    for (unsigned threads = 1; threads <= 3; threads++) {
        amn_convert_options o = {.struct_size = sizeof(amn_convert_options),
                                 .mode = AMN_MODE_CONVERT,
                                 .output = tmp("bf16.safetensors"),
                                 .overwrite = true,
                                 .threads = threads};
        amn_convert_stats st = {.struct_size = sizeof(amn_convert_stats)};
        assert_int_equal(amn_convert(ctx, m, p, &o, &st, &err), AMN_OK);
        assert_int_equal(st.cast, 1);
        amn_model *out;
        assert_int_equal(amn_open(ctx, tmp("bf16.safetensors"), NULL, NULL, &out, &err), AMN_OK);
        const amn_tensor *t = amn_model_tensor(out, 0);
        assert_int_equal(t->dtype, AMN_DTYPE_BF16);
        assert_int_equal(t->nbytes, bf16_len);
        assert_memory_equal(t->data, bf16, bf16_len);
        amn_model_free(out);
    }
    /* remember keeps unquantized tensors as they are. */
    amn_convert_options o = {.struct_size = sizeof(amn_convert_options),
                             .mode = AMN_MODE_REMEMBER,
                             .output = tmp("same.safetensors"),
                             .overwrite = true};
    assert_int_equal(amn_convert(ctx, m, p, &o, NULL, &err), AMN_OK);
    size_t a_len, b_len;
    uint8_t *a = amn_test_read_file(tmp("f32.safetensors"), &a_len);
    uint8_t *b = amn_test_read_file(tmp("same.safetensors"), &b_len);
    assert_int_equal(a_len, b_len);
    assert_memory_equal(a, b, a_len);
    free(a), free(b);
    /* Never over an existing file without overwrite, never over the input. */
    o.overwrite = false;
    assert_int_equal(amn_convert(ctx, m, p, &o, NULL, &err), AMN_E_INVALID);
    o.overwrite = true;
    o.output = tmp("f32.safetensors");
    assert_int_equal(amn_convert(ctx, m, p, &o, NULL, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "input"));
    amn_plan_free(p);
    amn_model_free(m);
    free(g);
    /* No temporary files left behind. */
    DIR *d = opendir(amn_test_scratch());
    struct dirent *e;
    while ((e = readdir(d))) assert_null(strstr(e->d_name, ".amn-"));
    closedir(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(malformed_files),   cmocka_unit_test(empty_and_scalar_tensors),
        cmocka_unit_test(reference_headers), cmocka_unit_test(writer_matches_reference_library),
        cmocka_unit_test(sharded_models),    cmocka_unit_test(convert_f32_to_bf16),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
