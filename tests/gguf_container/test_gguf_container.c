/* The GGUF container: reading v1-v3 (mapped and header-only, from a file, a
 * memory buffer and a caller's callback), the generated fixtures, the v3
 * writer (round trips, alignment, byte identity) and its metadata sources. */
#include <math.h>
#include <unistd.h>

#include "amn/amn.h"
#include "amn/byteorder.h"
#include "amn_test.h"
#include "gguf_endian.h"
#include "gguf_format.h"
#include "gguf_rich.h"

static int setup(void **state) {
    (void)state;
    return amn_test_scratch_make("gguf-test");
}

static int teardown(void **state) {
    (void)state;
    return amn_test_scratch_remove();
}

static const char *tmp(const char *name) {
    return amn_test_scratch_path(name);
}

static void save(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static amn_limits limits(void) {
    amn_limits l;
    amn_limits_default(&l);
    return l;
}

/* Open through the format's open() with a real mapping of path. */
static int open_path(const char *path, amn_model **out, amn_error *err) {
    amn_map *map;
    int rc = amn_map_open(path, &map, err);
    if (rc) return rc;
    amn_limits l = limits();
    amn_open_args a = {.struct_size = sizeof a, .path = path, .map = map, .limits = &l};
    rc = amn_gguf_format.open(&a, out, err);
    if (rc) {
        amn_map_close(map);
        return rc;
    }
    return amn_model_adopt(*out, map, amn_map_release, err);
}

static int inspect_mem(const void *p, size_t n, amn_model **out, amn_error *err) {
    amn_source src;
    amn_source_memory(&src, p, n, "mem.gguf");
    amn_limits l = limits();
    amn_inspect_args a = {.struct_size = sizeof a, .src = &src, .path = NULL, .limits = &l};
    return amn_gguf_format.inspect(&a, out, err);
}

static const amn_kv *kv(const amn_model *m, const char *key) {
    const amn_kv *k = amn_model_find_kv(m, key);
    if (!k) fail_msg("missing key %s", key);
    return k;
}

static void check_rich_kvs(const amn_model *m, uint32_t align) {
    assert_int_equal(amn_model_kv_count(m), rich_n_kv(align));
    const amn_kv *k = kv(m, "general.architecture");
    assert_int_equal(k->type, AMN_KV_STRING);
    assert_int_equal(((const amn_str *)k->data)->len, 5);
    assert_memory_equal(((const amn_str *)k->data)->ptr, "llama", 5);
    if (align != 32) {
        k = kv(m, "general.alignment");
        assert_int_equal(k->type, AMN_KV_U32);
        assert_int_equal(*(const uint32_t *)k->data, align);
    }
    assert_int_equal(kv(m, "k.u8")->type, AMN_KV_U8);
    assert_int_equal(*(const uint8_t *)kv(m, "k.u8")->data, 200);
    assert_int_equal(*(const int8_t *)kv(m, "k.i8")->data, -5);
    assert_int_equal(kv(m, "k.u16")->type, AMN_KV_U16);
    assert_int_equal(*(const uint16_t *)kv(m, "k.u16")->data, 60000);
    assert_int_equal(*(const int16_t *)kv(m, "k.i16")->data, -300);
    assert_int_equal(*(const uint32_t *)kv(m, "k.u32")->data, 4000000000u);
    assert_int_equal(*(const int32_t *)kv(m, "k.i32")->data, -70000);
    assert_true(*(const float *)kv(m, "k.f32")->data == 1.5f);
    assert_int_equal(kv(m, "k.bool")->type, AMN_KV_BOOL);
    assert_int_equal(*(const uint8_t *)kv(m, "k.bool")->data, 1);
    const amn_str *s = kv(m, "k.str")->data;
    assert_int_equal(s->len, 8);
    assert_memory_equal(s->ptr, "h\xc3\xa9llo\0x", 8);
    assert_int_equal(kv(m, "k.u64")->type, AMN_KV_U64);
    assert_true(*(const uint64_t *)kv(m, "k.u64")->data == (1ull << 40) + 3);
    assert_true(*(const int64_t *)kv(m, "k.i64")->data == -(1ll << 40));
    assert_true(*(const double *)kv(m, "k.f64")->data == -2.25);
    k = kv(m, "k.arr.u8");
    assert_int_equal(k->type, AMN_KV_ARRAY);
    assert_int_equal(k->elem_type, AMN_KV_U8);
    assert_int_equal(k->count, 3);
    assert_memory_equal(k->data, "\1\2\3", 3);
    k = kv(m, "k.arr.i32");
    assert_int_equal(k->elem_type, AMN_KV_I32);
    assert_int_equal(((const int32_t *)k->data)[0], -1);
    assert_int_equal(((const int32_t *)k->data)[1], 2);
    k = kv(m, "k.arr.str");
    assert_int_equal(k->elem_type, AMN_KV_STRING);
    assert_int_equal(k->count, 3);
    s = k->data;
    assert_int_equal(s[0].len, 1);
    assert_int_equal(s[1].len, 0);
    assert_int_equal(s[2].len, 3);
    assert_memory_equal(s[2].ptr, "ccc", 3);
    k = kv(m, "k.arr.f64");
    assert_true(((const double *)k->data)[0] == 1.0);
    k = kv(m, "k.arr.bool");
    assert_int_equal(k->elem_type, AMN_KV_BOOL);
    assert_memory_equal(k->data, "\0\1", 2);
    k = kv(m, "k.arr.nested");
    assert_int_equal(k->elem_type, AMN_KV_ARRAY);
    assert_int_equal(k->count, 3);
    const amn_kv *in = k->data;
    assert_int_equal(in[0].type, AMN_KV_ARRAY);
    assert_int_equal(in[0].elem_type, AMN_KV_U32);
    assert_int_equal(in[0].count, 2);
    assert_int_equal(((const uint32_t *)in[0].data)[1], 2);
    assert_int_equal(in[1].elem_type, AMN_KV_STRING);
    assert_memory_equal(((const amn_str *)in[1].data)[0].ptr, "x", 1);
    assert_int_equal(in[2].elem_type, AMN_KV_ARRAY);
    assert_int_equal(in[2].count, 1);
    const amn_kv *deep = in[2].data;
    assert_int_equal(deep[0].type, AMN_KV_ARRAY);
    assert_int_equal(deep[0].elem_type, AMN_KV_U8);
    assert_int_equal(deep[0].count, 0);
    k = kv(m, "k.arr.empty");
    assert_int_equal(k->elem_type, AMN_KV_I16);
    assert_int_equal(k->count, 0);
}

static void check_rich_tensors(const amn_model *m, bool blocks, const rich_layout *lay,
                               bool with_data) {
    assert_int_equal(amn_model_tensor_count(m), lay->n_tensors);
    size_t k = 0;
    for (size_t i = 0; i < RICH_N_TENSORS; i++) {
        const rich_tensor *r = &rich_tensors[i];
        if (!blocks && r->block) continue;
        const amn_tensor *t = amn_model_tensor(m, k);
        assert_string_equal(t->name, r->name);
        assert_int_equal(t->ndim, r->ndim);
        for (uint32_t d = 0; d < r->ndim; d++)
            assert_int_equal(t->shape[d], r->ne[r->ndim - 1 - d]); /* reversed */
        assert_int_equal(t->nbytes, r->nbytes);
        assert_int_equal(t->file_offset, lay->data_start + lay->offset[k]);
        if (r->block) {
            assert_int_equal(t->dtype, AMN_DTYPE_BLOCK);
            assert_int_equal(t->encoding, r->type);
            assert_string_equal(t->encoding_name, r->encoding_name);
        } else {
            static const amn_dtype plain[] = {
                [0] = AMN_DTYPE_F32,  [1] = AMN_DTYPE_F16,  [24] = AMN_DTYPE_I8,
                [25] = AMN_DTYPE_I16, [26] = AMN_DTYPE_I32, [27] = AMN_DTYPE_I64,
                [28] = AMN_DTYPE_F64, [30] = AMN_DTYPE_BF16};
            assert_int_equal(t->dtype, plain[r->type]);
        }
        if (with_data) {
            assert_non_null(t->data);
            for (uint64_t j = 0; j < r->nbytes; j++)
                assert_int_equal(((const uint8_t *)t->data)[j], rich_byte(i, j));
        } else {
            assert_null(t->data);
        }
        k++;
    }
}

/* A big-endian file's tensors say so, except where one byte reads the same. */
static void check_rich_byte_order(const amn_model *m, bool be) {
    for (size_t i = 0; i < amn_model_tensor_count(m); i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        const bool multi = t->dtype == AMN_DTYPE_BLOCK || amn_dtype_size(t->dtype) > 1;
        assert_int_equal(t->flags & AMN_TENSOR_BIG_ENDIAN, be && multi ? AMN_TENSOR_BIG_ENDIAN : 0);
    }
}

/* Every version in both byte orders, mapped and header-only, with and
 * without general.alignment: the same key/values and tensors. */
static void read_rich_all_versions(void **state) {
    (void)state;
    static const uint32_t aligns[] = {32, 64, 1, 8};
    for (int be = 0; be <= 1; be++)
        for (uint32_t v = 1; v <= 3; v++)
            for (size_t ai = 0; ai < sizeof aligns / sizeof *aligns; ai++) {
                const uint32_t align = aligns[ai];
                gb b = {.be = be};
                rich_layout lay;
                build_rich(&b, v, align, true, &lay);
                const char *path = tmp("rich.gguf");
                save(path, b.p, b.n);
                amn_model *m = NULL;
                amn_error err = {0};
                int rc = open_path(path, &m, &err);
                if (rc) fail_msg("v%u align %u: %s", v, align, err.msg);
                char label[32];
                snprintf(label, sizeof label, "GGUF v%u%s", v, be ? " big-endian" : "");
                assert_string_equal(amn_model_label(m), label);
                assert_string_equal(amn_model_format(m), "gguf");
                check_rich_kvs(m, align);
                check_rich_tensors(m, true, &lay, true);
                check_rich_byte_order(m, be);
                amn_model_free(m);

                rc = inspect_mem(b.p, b.n, &m, &err);
                if (rc) fail_msg("inspect v%u align %u: %s", v, align, err.msg);
                assert_string_equal(amn_model_label(m), label);
                check_rich_kvs(m, align);
                check_rich_tensors(m, true, &lay, false);
                amn_model_free(m);
                gb_free(&b);
            }
}

/* A source that records the furthest byte it was asked for. */
typedef struct spy {
    const uint8_t *p;
    size_t n;
    uint64_t max_end;
    size_t calls;
} spy;

static int spy_read(void *ctx, uint64_t off, void *buf, size_t n, size_t *got) {
    spy *s = ctx;
    s->calls++;
    if (off + n > s->max_end) s->max_end = off + n;
    size_t k = off >= s->n ? 0 : (s->n - off < n ? s->n - (size_t)off : n);
    memcpy(buf, s->p + off, k);
    *got = k;
    return AMN_OK;
}

/* Inspect reads nothing of the data section, through a caller's callback of
 * known or unknown size, and through a file source. */
static void inspect_is_header_only(void **state) {
    (void)state;
    gb b = {0};
    rich_layout lay;
    build_rich(&b, 3, 32, true, &lay);
    /* a data section much larger than the read window */
    const size_t big = 1u << 20;
    b.p = realloc(b.p, b.n + big);
    memset(b.p + b.n, 0xAB, big);
    size_t total = b.n + big;
    for (int unknown = 0; unknown < 2; unknown++) {
        spy s = {.p = b.p, .n = total};
        amn_source src = {.ctx = &s,
                          .size = unknown ? UINT64_MAX : total,
                          .read_at = spy_read,
                          .name = "callback"};
        amn_limits l = limits();
        amn_inspect_args a = {.struct_size = sizeof a, .src = &src, .limits = &l};
        amn_model *m = NULL;
        amn_error err = {0};
        int rc = amn_gguf_format.inspect(&a, &m, &err);
        if (rc) fail_msg("%s", err.msg);
        check_rich_kvs(m, 32);
        check_rich_tensors(m, true, &lay, false);
        /* The window may read ahead, but never a whole window past the header. */
        assert_true(s.max_end <= lay.header_end + (64u << 10));
        assert_true(s.calls <= 3);
        amn_model_free(m);
    }
    const char *path = tmp("inspect.gguf");
    save(path, b.p, total);
    amn_source src;
    amn_error err = {0};
    assert_int_equal(amn_source_file_open(path, &src, &err), AMN_OK);
    amn_limits l = limits();
    amn_inspect_args a = {.struct_size = sizeof a, .src = &src, .path = path, .limits = &l};
    amn_model *m = NULL;
    assert_int_equal(amn_gguf_format.inspect(&a, &m, &err), AMN_OK);
    check_rich_tensors(m, true, &lay, false);
    assert_int_equal(amn_model_total_bytes(m), 48 + 16 + 136 + 144 + 32 + 4 + 5 + 6 + 16 + 16);
    amn_model_free(m);
    amn_source_file_close(&src);
    gb_free(&b);
}

/* A string longer than the read window crosses refills intact. */
static void inspect_long_strings(void **state) {
    (void)state;
    const size_t len = 200000;
    char *text = malloc(len);
    for (size_t i = 0; i < len; i++) text[i] = (char)('a' + i % 26);
    gb b = {0};
    gb_header(&b, 3, 0, 2);
    gb_key(&b, "tokenizer.chat_template", T_STR);
    gb_strn(&b, text, len);
    gb_key(&b, "tokenizer.ggml.tokens", T_ARR);
    gb_arr(&b, T_STR, 30000);
    char tok[16];
    for (int i = 0; i < 30000; i++) {
        snprintf(tok, sizeof tok, "t%d", i);
        gb_str(&b, tok);
    }
    amn_model *m = NULL;
    amn_error err = {0};
    assert_int_equal(inspect_mem(b.p, b.n, &m, &err), AMN_OK);
    const amn_str *s = kv(m, "tokenizer.chat_template")->data;
    assert_int_equal(s->len, len);
    assert_memory_equal(s->ptr, text, len);
    const amn_kv *toks = kv(m, "tokenizer.ggml.tokens");
    assert_int_equal(toks->count, 30000);
    s = toks->data;
    assert_int_equal(s[29999].len, 6);
    assert_memory_equal(s[29999].ptr, "t29999", 6);
    assert_int_equal(amn_model_tensor_count(m), 0);
    amn_model_free(m);
    free(text);
    gb_free(&b);
}

/* Retired, unknown and kernel-less ggml types still parse. */
static void unusual_types(void **state) {
    (void)state;
    gb b = {0};
    gb_header(&b, 3, 4, 0);
    const uint64_t ne[2] = {32, 2};
    gb_tensor(&b, "retired", 2, ne, 4, 0);
    gb_tensor(&b, "unknown", 2, ne, 99, 0);
    gb_tensor(&b, "q8_1", 2, ne, 9, 0);
    const uint64_t ne2[1] = {256};
    gb_tensor(&b, "iq2", 1, ne2, 16, 96);
    gb_pad(&b, 32);
    for (int i = 0; i < 96 + 66; i++) gb_u8(&b, (uint8_t)i);
    amn_model *m = NULL;
    amn_error err = {0};
    int rc = inspect_mem(b.p, b.n, &m, &err);
    if (rc) fail_msg("%s", err.msg);
    const amn_tensor *t = amn_model_tensor(m, 0);
    assert_int_equal(t->dtype, AMN_DTYPE_BLOCK);
    assert_int_equal(t->encoding, 4);
    assert_string_equal(t->encoding_name, "type 4 (retired Q4_2)");
    assert_int_equal(t->nbytes, 0);
    t = amn_model_tensor(m, 1);
    assert_string_equal(t->encoding_name, "type 99 (unknown)");
    t = amn_model_tensor(m, 2);
    assert_string_equal(t->encoding_name, "Q8_1");
    assert_int_equal(t->nbytes, 72);
    t = amn_model_tensor(m, 3);
    assert_string_equal(t->encoding_name, "IQ2_XXS");
    assert_int_equal(t->nbytes, 66);
    assert_int_equal(t->shape[0], 256);
    amn_model_free(m);
    gb_free(&b);
}

/* Version 1 strings whose length counts a terminating NUL read as without it;
 * from version 2 on, a NUL in a key is an error. */
static void v1_nul_terminated_strings(void **state) {
    (void)state;
    for (uint32_t v = 1; v <= 2; v++) {
        gb b = {0};
        gb_header(&b, v, 1, 2);
        gb_strn(&b, "general.architecture", 21);
        gb_u32(&b, T_STR);
        gb_strn(&b, "llama", 6);
        gb_strn(&b, "k.strs", 7);
        gb_u32(&b, T_ARR);
        gb_arr(&b, T_STR, 2);
        gb_strn(&b, "ab", 3);
        gb_strn(&b, "", 0);
        const uint64_t ne[1] = {1};
        gb_str(&b, "t");
        gb_u32(&b, 1);
        gb_count(&b, ne[0]);
        gb_u32(&b, 0);
        gb_u64(&b, 0);
        gb_pad(&b, 32);
        gb_u32(&b, 0);
        amn_model *m = NULL;
        amn_error err = {0};
        int rc = inspect_mem(b.p, b.n, &m, &err);
        if (v == 2) {
            assert_int_equal(rc, AMN_E_PARSE);
            gb_free(&b);
            continue;
        }
        if (rc) fail_msg("%s", err.msg);
        const amn_str *s = kv(m, "general.architecture")->data;
        assert_int_equal(s->len, 5);
        assert_memory_equal(s->ptr, "llama", 5);
        const amn_kv *strs = kv(m, "k.strs");
        assert_int_equal(((const amn_str *)strs->data)[0].len, 2);
        assert_int_equal(((const amn_str *)strs->data)[1].len, 0);
        amn_model_free(m);
        /* the mapped path reads strings in place: the same answer */
        const char *path = tmp("v1nul.gguf");
        save(path, b.p, b.n);
        assert_int_equal(open_path(path, &m, &err), AMN_OK);
        s = kv(m, "general.architecture")->data;
        assert_int_equal(s->len, 5);
        amn_model_free(m);
        gb_free(&b);
    }
}

/* The probe: firm on a header, still claiming a bad version so open() can
 * say why, nothing for other files. */
static void probe_scores(void **state) {
    (void)state;
    gb b = {0};
    rich_layout lay;
    build_rich(&b, 3, 32, true, &lay);
    uint8_t *head = calloc(1, b.n + AMN_PROBE_PADDING);
    memcpy(head, b.p, b.n);
    amn_probe_data pd = {.struct_size = sizeof pd,
                         .head = head,
                         .head_size = b.n,
                         .tail = head,
                         .tail_size = b.n,
                         .file_size = b.n};
    assert_true(amn_gguf_format.probe(&pd) > AMN_PROBE_LIKELY);
    head[4] = 7; /* version 7 */
    assert_int_equal(amn_gguf_format.probe(&pd), AMN_PROBE_LIKELY);
    head[0] = 'X';
    assert_int_equal(amn_gguf_format.probe(&pd), AMN_PROBE_NONE);
    pd.head_size = 3;
    assert_int_equal(amn_gguf_format.probe(&pd), AMN_PROBE_NONE);
    free(head);
    gb_free(&b);

    /* big-endian: the same score; its counts read in its own order */
    gb be = {.be = true};
    build_rich(&be, 3, 32, true, &lay);
    head = calloc(1, be.n + AMN_PROBE_PADDING);
    memcpy(head, be.p, be.n);
    pd.head = pd.tail = head;
    pd.head_size = pd.tail_size = pd.file_size = be.n;
    assert_true(amn_gguf_format.probe(&pd) > AMN_PROBE_LIKELY);
    head[21] = 1; /* n_kv + 65536: more than the file holds */
    assert_int_equal(amn_gguf_format.probe(&pd), AMN_PROBE_LIKELY);
    free(head);
    gb_free(&be);
}

/* ---- the fixtures written by fixtures/gguf/make_gguf.py ------------------------- */

static void python_fixtures(void **state) {
    (void)state;
    static const char *const files[] = {"tiny-v1.gguf", "tiny-v2.gguf", "tiny-v3.gguf",
                                        "tiny-align64.gguf", "tiny-quant.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/fixtures/gguf/%s", AMN_SOURCE_DIR, files[i]);
        amn_model *m = NULL, *h = NULL;
        amn_error err = {0};
        int rc = open_path(path, &m, &err);
        if (rc) fail_msg("%s: %s", files[i], err.msg);
        size_t n = 0;
        uint8_t *bytes = amn_test_read_file(path, &n);
        assert_non_null(bytes);
        rc = inspect_mem(bytes, n, &h, &err);
        if (rc) fail_msg("%s: inspect: %s", files[i], err.msg);
        /* header-only and mapped agree */
        assert_int_equal(amn_model_kv_count(m), amn_model_kv_count(h));
        assert_int_equal(amn_model_tensor_count(m), amn_model_tensor_count(h));
        for (size_t t = 0; t < amn_model_tensor_count(m); t++) {
            const amn_tensor *a = amn_model_tensor(m, t), *b = amn_model_tensor(h, t);
            assert_string_equal(a->name, b->name);
            assert_int_equal(a->dtype, b->dtype);
            assert_int_equal(a->nbytes, b->nbytes);
            assert_int_equal(a->file_offset, b->file_offset);
        }
        /* what make_gguf.py writes into every file */
        const amn_str *arch = kv(m, "general.architecture")->data;
        assert_memory_equal(arch->ptr, "llama", 5);
        const amn_kv *toks = kv(m, "tokenizer.ggml.tokens");
        assert_int_equal(toks->elem_type, AMN_KV_STRING);
        assert_int_equal(toks->count, 5);
        assert_memory_equal(((const amn_str *)toks->data)[4].ptr, "world", 5);
        assert_true(*(const float *)kv(m, "llama.attention.layer_norm_rms_epsilon")->data == 1e-5f);
        const int64_t w = amn_model_find(m, "blk.0.attn_q.weight");
        assert_true(w >= 0);
        const amn_tensor *t = amn_model_tensor(m, (size_t)w);
        assert_int_equal(t->ndim, 2);
        assert_int_equal(t->shape[0], 4); /* ne = [32, 4] */
        assert_int_equal(t->shape[1], 32);
        if (strcmp(files[i], "tiny-quant.gguf") == 0) {
            assert_int_equal(t->dtype, AMN_DTYPE_BLOCK);
            assert_string_equal(t->encoding_name, "Q8_0");
        } else {
            assert_int_equal(t->dtype, AMN_DTYPE_F32);
            /* values i * 0.25 - 16 */
            for (size_t j = 0; j < 128; j++)
                assert_true(amn_load_le_f32((const uint8_t *)t->data + j * 4) ==
                            (float)j * 0.25f - 16.0f);
        }
        free(bytes);
        amn_model_free(m);
        amn_model_free(h);
    }
}

/* ---- the writer ------------------------------------------------------------------- */

/* What the core does with a writer: begin, then each tensor's bytes in the
 * order it asks for, tensor_begin() first, then finish and commit. */
static int write_like_core(const amn_model *src, const char *path, const char *const *kv_over,
                           size_t n_over, const char *meta_file, amn_error *err) {
    const size_t n = amn_model_tensor_count(src);
    amn_out_tensor *outs = calloc(n ? n : 1, sizeof *outs);
    const amn_out_tensor **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    size_t *order = calloc(n ? n : 1, sizeof *order);
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(src, i);
        outs[i] = (amn_out_tensor){.struct_size = sizeof outs[i],
                                   .name = t->name,
                                   .dtype = t->dtype,
                                   .ndim = t->ndim,
                                   .nbytes = t->nbytes};
        memcpy(outs[i].shape, t->shape, sizeof t->shape);
        ptrs[i] = &outs[i];
    }
    /* The writer options as the core hands them over: kv=... then metadata=... */
    const char *keys[16], *values[16];
    size_t n_opts = 0;
    for (size_t i = 0; i < n_over && n_opts < 15; i++)
        keys[n_opts] = "kv", values[n_opts++] = kv_over[i];
    if (meta_file) keys[n_opts] = "metadata", values[n_opts++] = meta_file;
    amn_sink *sink = NULL;
    int rc = amn_sink_open(path, true, NULL, 0, &sink, err);
    amn_write_args a = {.struct_size = sizeof a,
                        .path = path,
                        .sink = sink,
                        .tensors = ptrs,
                        .n_tensors = n,
                        .source = src,
                        .option_keys = keys,
                        .option_values = values,
                        .n_options = n_opts};
    void *st = NULL;
    bool begun = false;
    if (!rc) rc = gguf_writer.begin(&a, &st, order, err);
    begun = rc == AMN_OK;
    for (size_t k = 0; !rc && k < n; k++) {
        const amn_tensor *t = amn_model_tensor(src, order[k]);
        rc = gguf_writer.tensor_begin(st, order[k], err);
        if (!rc) rc = amn_sink_write(sink, t->data, (size_t)t->nbytes, err);
    }
    if (!rc) {
        begun = false;
        rc = gguf_writer.finish(st, err);
    }
    if (begun) gguf_writer.abort(st);
    if (!rc)
        rc = amn_sink_commit(sink, err);
    else
        amn_sink_abort(sink);
    free(outs);
    free(ptrs);
    free(order);
    return rc;
}

static bool kv_equal(const amn_kv *a, const amn_kv *b) {
    if (a->type != b->type) return false;
    static const size_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (a->type == AMN_KV_STRING) {
        const amn_str *x = a->data, *y = b->data;
        return x->len == y->len && memcmp(x->ptr, y->ptr, x->len) == 0;
    }
    if (a->type != AMN_KV_ARRAY) return memcmp(a->data, b->data, sz[a->type]) == 0;
    if (a->elem_type != b->elem_type || a->count != b->count) return false;
    for (uint64_t i = 0; i < a->count; i++) {
        bool same;
        if (a->elem_type == AMN_KV_STRING) {
            const amn_str *x = &((const amn_str *)a->data)[i], *y = &((const amn_str *)b->data)[i];
            same = x->len == y->len && memcmp(x->ptr, y->ptr, x->len) == 0;
        } else if (a->elem_type == AMN_KV_ARRAY) {
            same = kv_equal(&((const amn_kv *)a->data)[i], &((const amn_kv *)b->data)[i]);
        } else {
            same = memcmp((const uint8_t *)a->data + i * sz[a->elem_type],
                          (const uint8_t *)b->data + i * sz[a->elem_type], sz[a->elem_type]) == 0;
        }
        if (!same) return false;
    }
    return true;
}

static void assert_same_model(const amn_model *a, const amn_model *b) {
    assert_int_equal(amn_model_kv_count(a), amn_model_kv_count(b));
    for (size_t i = 0; i < amn_model_kv_count(a); i++) {
        const amn_kv *x = amn_model_kv(a, i), *y = amn_model_kv(b, i);
        assert_string_equal(x->key, y->key);
        if (!kv_equal(x, y)) fail_msg("key %s differs", x->key);
    }
    assert_int_equal(amn_model_tensor_count(a), amn_model_tensor_count(b));
    for (size_t i = 0; i < amn_model_tensor_count(a); i++) {
        const amn_tensor *x = amn_model_tensor(a, i), *y = amn_model_tensor(b, i);
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->dtype, y->dtype);
        assert_int_equal(x->ndim, y->ndim);
        assert_memory_equal(x->shape, y->shape, sizeof x->shape);
        assert_int_equal(x->nbytes, y->nbytes);
        if (x->nbytes) assert_memory_equal(x->data, y->data, x->nbytes);
    }
}

/* A canonical file written back is the same file, byte for byte, for every
 * alignment; and so is a v1 / v2 file once upgraded to v3. */
static void writer_round_trip(void **state) {
    (void)state;
    static const uint32_t aligns[] = {32, 64, 1, 8};
    for (size_t ai = 0; ai < sizeof aligns / sizeof *aligns; ai++)
        for (uint32_t v = 1; v <= 3; v++) {
            gb b = {0}, v3 = {0};
            rich_layout lay, lay3;
            build_rich(&b, v, aligns[ai], false, &lay);
            build_rich(&v3, 3, aligns[ai], false, &lay3);
            const char *in = tmp("in.gguf"), *out = tmp("out.gguf");
            save(in, b.p, b.n);
            amn_model *m = NULL, *back = NULL;
            amn_error err = {0};
            assert_int_equal(open_path(in, &m, &err), AMN_OK);
            int rc = write_like_core(m, out, NULL, 0, NULL, &err);
            if (rc) fail_msg("write: %s", err.msg);
            size_t n = 0;
            uint8_t *bytes = amn_test_read_file(out, &n);
            assert_int_equal(n, v3.n);
            assert_memory_equal(bytes, v3.p, n);
            free(bytes);
            assert_int_equal(open_path(out, &back, &err), AMN_OK);
            assert_string_equal(amn_model_label(back), "GGUF v3");
            assert_same_model(m, back);
            for (size_t i = 0; i < amn_model_tensor_count(back); i++)
                assert_int_equal(amn_model_tensor(back, i)->file_offset % aligns[ai], 0);
            amn_model_free(m);
            amn_model_free(back);
            gb_free(&b);
            gb_free(&v3);
        }
}

/* Each fixture written back through the writer is the same file (the
 * fixtures use the layout llama.cpp and gguf-py write). */
static void writer_matches_fixtures(void **state) {
    (void)state;
    static const char *const files[] = {"tiny-v3.gguf", "tiny-align64.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/fixtures/gguf/%s", AMN_SOURCE_DIR, files[i]);
        amn_model *m = NULL;
        amn_error err = {0};
        assert_int_equal(open_path(path, &m, &err), AMN_OK);
        const char *out = tmp("fixture-out.gguf");
        int rc = write_like_core(m, out, NULL, 0, NULL, &err);
        if (rc) fail_msg("%s: %s", files[i], err.msg);
        size_t n1 = 0, n2 = 0;
        uint8_t *a = amn_test_read_file(path, &n1), *b = amn_test_read_file(out, &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(a, b, n1);
        free(a);
        free(b);
        amn_model_free(m);
    }
}

static const char *write_text(const char *name, const char *text) {
    const char *p = tmp(name);
    save(p, text, strlen(text));
    return p;
}

/* source key/values < --gguf-metadata < --gguf-kv, typed as documented. */
static void writer_metadata_precedence(void **state) {
    (void)state;
    gb b = {0};
    rich_layout lay;
    build_rich(&b, 3, 32, false, &lay);
    const char *in = tmp("src.gguf"), *out = tmp("meta.gguf");
    save(in, b.p, b.n);
    const char *meta = write_text(
        "meta.json",
        "{\"general.name\": \"from-file\", \"k.u8\": {\"type\": \"u8\", \"value\": 7},\n"
        " \"m.int\": 3, \"m.neg\": -3, \"m.big\": 5000000000, \"m.float\": 0.5,\n"
        " \"m.bool\": true, \"m.str\": \"s\", \"m.ints\": [1, 2, 4294967295],\n"
        " \"m.mixed\": [1, -2], \"m.floats\": [1, 2.5], \"m.strs\": [\"a\", \"b\"],\n"
        " \"m.nested\": [[1, 2], [\"x\"]], \"m.empty\": [],\n"
        " \"m.i16\": {\"type\": \"i16\", \"value\": -2},\n"
        " \"m.f64\": {\"type\": \"f64\", \"value\": 0.1},\n"
        " \"m.arr\": {\"type\": \"array\", \"item_type\": \"u16\", \"value\": [1, 65535]},\n"
        " \"m.arrarr\": {\"type\": \"array\", \"item_type\": \"array\", \"value\": [[true],\n"
        "    {\"type\": \"array\", \"item_type\": \"i8\", \"value\": [-1]}]},\n"
        " \"general.alignment\": 16}\n");
    const char *over[] = {
        "general.name=from-cli", "k.u32=17", "k.f32=0.25", "k.bool=false", "new.key=x=y",
        "general.alignment=128", "m.neg=-9"};
    amn_model *m = NULL, *w = NULL;
    amn_error err = {0};
    assert_int_equal(open_path(in, &m, &err), AMN_OK);
    int rc = write_like_core(m, out, over, sizeof over / sizeof *over, meta, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_int_equal(open_path(out, &w, &err), AMN_OK);
    const amn_str *s = kv(w, "general.name")->data;
    assert_int_equal(s->len, 8);
    assert_memory_equal(s->ptr, "from-cli", 8);
    /* replaced in place: the source's order is kept */
    assert_string_equal(amn_model_kv(w, 0)->key, "general.architecture");
    assert_string_equal(amn_model_kv(w, 1)->key, "k.u8");
    assert_int_equal(kv(w, "k.u8")->type, AMN_KV_U8);
    assert_int_equal(*(const uint8_t *)kv(w, "k.u8")->data, 7);
    assert_int_equal(kv(w, "k.u32")->type, AMN_KV_U32);
    assert_int_equal(*(const uint32_t *)kv(w, "k.u32")->data, 17);
    assert_true(*(const float *)kv(w, "k.f32")->data == 0.25f);
    assert_int_equal(*(const uint8_t *)kv(w, "k.bool")->data, 0);
    assert_int_equal(kv(w, "m.int")->type, AMN_KV_U32);
    assert_int_equal(kv(w, "m.neg")->type, AMN_KV_I64);
    assert_true(*(const int64_t *)kv(w, "m.neg")->data == -9);
    assert_int_equal(kv(w, "m.big")->type, AMN_KV_U64);
    assert_true(*(const uint64_t *)kv(w, "m.big")->data == 5000000000ull);
    assert_int_equal(kv(w, "m.float")->type, AMN_KV_F32);
    assert_int_equal(kv(w, "m.bool")->type, AMN_KV_BOOL);
    assert_int_equal(kv(w, "m.str")->type, AMN_KV_STRING);
    assert_int_equal(kv(w, "m.ints")->elem_type, AMN_KV_U32);
    assert_int_equal(((const uint32_t *)kv(w, "m.ints")->data)[2], 4294967295u);
    assert_int_equal(kv(w, "m.mixed")->elem_type, AMN_KV_I64);
    assert_true(((const int64_t *)kv(w, "m.mixed")->data)[1] == -2);
    assert_int_equal(kv(w, "m.floats")->elem_type, AMN_KV_F32);
    assert_true(((const float *)kv(w, "m.floats")->data)[1] == 2.5f);
    assert_int_equal(kv(w, "m.strs")->elem_type, AMN_KV_STRING);
    const amn_kv *nested = kv(w, "m.nested");
    assert_int_equal(nested->elem_type, AMN_KV_ARRAY);
    assert_int_equal(((const amn_kv *)nested->data)[0].elem_type, AMN_KV_U32);
    assert_int_equal(((const amn_kv *)nested->data)[1].elem_type, AMN_KV_STRING);
    assert_int_equal(kv(w, "m.empty")->count, 0);
    assert_int_equal(kv(w, "m.i16")->type, AMN_KV_I16);
    assert_int_equal(*(const int16_t *)kv(w, "m.i16")->data, -2);
    assert_int_equal(kv(w, "m.f64")->type, AMN_KV_F64);
    assert_true(*(const double *)kv(w, "m.f64")->data == 0.1);
    assert_int_equal(kv(w, "m.arr")->elem_type, AMN_KV_U16);
    assert_int_equal(((const uint16_t *)kv(w, "m.arr")->data)[1], 65535);
    const amn_kv *aa = kv(w, "m.arrarr")->data;
    assert_int_equal(aa[0].elem_type, AMN_KV_BOOL);
    assert_int_equal(aa[1].elem_type, AMN_KV_I8);
    assert_int_equal(((const int8_t *)aa[1].data)[0], -1);
    s = kv(w, "new.key")->data;
    assert_int_equal(s->len, 3);
    assert_memory_equal(s->ptr, "x=y", 3);
    /* general.alignment: u32 from the file, then 128 from the command line */
    assert_int_equal(kv(w, "general.alignment")->type, AMN_KV_U32);
    assert_int_equal(*(const uint32_t *)kv(w, "general.alignment")->data, 128);
    for (size_t i = 0; i < amn_model_tensor_count(w); i++)
        assert_int_equal(amn_model_tensor(w, i)->file_offset % 128, 0);
    size_t n = 0;
    free(amn_test_read_file(out, &n));
    assert_int_equal(n % 128, 0);
    amn_model_free(m);
    amn_model_free(w);
    gb_free(&b);
}

static void writer_metadata_errors(void **state) {
    (void)state;
    gb b = {0};
    rich_layout lay;
    build_rich(&b, 3, 32, false, &lay);
    char in[512], out[512];
    snprintf(in, sizeof in, "%s", tmp("src2.gguf"));
    snprintf(out, sizeof out, "%s", tmp("never.gguf"));
    save(in, b.p, b.n);
    amn_model *m = NULL;
    amn_error err = {0};
    assert_int_equal(open_path(in, &m, &err), AMN_OK);
    static const char *const bad_json[] = {
        "{",                                              /* not JSON */
        "[1, 2]",                                         /* not an object */
        "{\"a\": null}",                                  /* null */
        "{\"a\": {\"value\": 1}}",                        /* no type */
        "{\"a\": {\"type\": \"u128\", \"value\": 1}}",    /* unknown type */
        "{\"a\": {\"type\": \"u8\", \"value\": 256}}",    /* out of range */
        "{\"a\": {\"type\": \"u32\", \"value\": -1}}",    /* negative unsigned */
        "{\"a\": {\"type\": \"i32\", \"value\": 1.5}}",   /* fraction */
        "{\"a\": {\"type\": \"bool\", \"value\": 1}}",    /* not a boolean */
        "{\"a\": {\"type\": \"array\", \"value\": [1]}}", /* no item_type */
        "{\"a\": [1, \"x\"]}",                            /* mixed array */
        "{\"a\": [[1], 2]}",                              /* array then number */
        "{\"general.alignment\": 48}",                    /* not a power of two */
        "{\"general.alignment\": \"32\"}",                /* not a u32 */
        "{\"a\": 1} trailing",                            /* trailing data */
    };
    /* Words of each one's message, in the same order. */
    static const char *const bad_json_words[] = {
        "not valid JSON",
        "not a JSON object",
        "null is not a metadata value",
        "needs \"type\" and \"value\"",
        "unknown type name",
        "integer out of range for its type",
        "integer out of range for its type",
        "a number with a fraction needs f32 or f64",
        "integer out of range for its type",
        "needs a valid \"item_type\"",
        "a string needs the type string",
        "an array value must be a list",
        "general.alignment must be a u32 power of two",
        "general.alignment must be a u32 power of two",
        "not valid JSON",
    };
    _Static_assert(sizeof bad_json_words == sizeof bad_json, "one message per case");
    for (size_t i = 0; i < sizeof bad_json / sizeof *bad_json; i++) {
        const char *meta = write_text("bad.json", bad_json[i]);
        amn_error_clear(&err);
        int rc = write_like_core(m, out, NULL, 0, meta, &err);
        if (rc != AMN_E_INVALID) fail_msg("%s: got %d (%s)", bad_json[i], rc, err.msg);
        if (!strstr(err.msg, bad_json_words[i]))
            fail_msg("%s: \"%s\" lacks \"%s\"", bad_json[i], err.msg, bad_json_words[i]);
        assert_int_equal(access(out, F_OK), -1); /* nothing left behind */
    }
    amn_error_clear(&err);
    assert_int_equal(write_like_core(m, out, NULL, 0, tmp("missing.json"), &err), AMN_E_IO);
    static const char *const bad_kv[] = {"novalue",
                                         "=x",
                                         "k.u8=256",
                                         "k.u8=-1",
                                         "k.u8=",
                                         "k.i8=12x",
                                         "k.f32=abc",
                                         "k.bool=yes",
                                         "k.arr.u8=1",
                                         "general.alignment=3",
                                         "k.u64=18446744073709551616"};
    /* Words of each one's message, in the same order. */
    static const char *const bad_kv_words[] = {
        "expected KEY=VALUE",
        "expected KEY=VALUE",
        "'256' is not a valid u8",
        "'-1' is not a valid u8",
        "'' is not a valid u8",
        "'12x' is not a valid i8",
        "'abc' is not a valid f32",
        "'yes' is not a valid bool",
        "the key holds an array",
        "general.alignment must be a u32 power of two",
        "'18446744073709551616' is not a valid u64",
    };
    _Static_assert(sizeof bad_kv_words == sizeof bad_kv, "one message per case");
    for (size_t i = 0; i < sizeof bad_kv / sizeof *bad_kv; i++) {
        amn_error_clear(&err);
        int rc = write_like_core(m, out, &bad_kv[i], 1, NULL, &err);
        if (rc != AMN_E_INVALID) fail_msg("%s: got %d (%s)", bad_kv[i], rc, err.msg);
        if (!strstr(err.msg, bad_kv_words[i]))
            fail_msg("%s: \"%s\" lacks \"%s\"", bad_kv[i], err.msg, bad_kv_words[i]);
    }
    amn_model_free(m);
    gb_free(&b);
}

/* Only what is given is written for a non-GGUF source; what the GGUF writer
 * cannot hold is refused; a merged split keeps its split.* keys, a copy its
 * file_type. */
/* Write src with endian=big as the core does: the tensors the writer
 * filters go through write_data() in pieces of `piece` bytes (splitting
 * elements and blocks), the others straight to the sink. */
static int write_big_endian(const amn_model *src, const char *path, size_t piece, amn_error *err) {
    const size_t n = amn_model_tensor_count(src);
    amn_out_tensor *outs = calloc(n, sizeof *outs);
    const amn_out_tensor **ptrs = calloc(n, sizeof *ptrs);
    size_t *order = calloc(n, sizeof *order);
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(src, i);
        outs[i] = (amn_out_tensor){.struct_size = sizeof outs[i],
                                   .name = t->name,
                                   .dtype = t->dtype,
                                   .ndim = t->ndim,
                                   .nbytes = t->nbytes,
                                   .encoding = t->encoding,
                                   .encoding_name = t->encoding_name};
        memcpy(outs[i].shape, t->shape, sizeof t->shape);
        ptrs[i] = &outs[i];
    }
    const char *keys[1] = {"endian"}, *values[1] = {"big"};
    amn_sink *sink = NULL;
    int rc = amn_sink_open(path, true, NULL, 0, &sink, err);
    amn_write_args a = {.struct_size = sizeof a,
                        .path = path,
                        .sink = sink,
                        .tensors = ptrs,
                        .n_tensors = n,
                        .source = src,
                        .option_keys = keys,
                        .option_values = values,
                        .n_options = 1};
    void *st = NULL;
    if (!rc) rc = gguf_writer.begin(&a, &st, order, err);
    bool begun = rc == AMN_OK;
    for (size_t k = 0; !rc && k < n; k++) {
        const amn_tensor *t = amn_model_tensor(src, order[k]);
        rc = gguf_writer.tensor_begin(st, order[k], err);
        if (rc) break;
        if (!gguf_writer.filters(st, order[k])) {
            rc = amn_sink_write(sink, t->data, (size_t)t->nbytes, err);
            continue;
        }
        for (uint64_t off = 0; !rc && off < t->nbytes; off += piece)
            rc = gguf_writer.write_data(st, order[k], (const uint8_t *)t->data + off,
                                        (size_t)(t->nbytes - off < piece ? t->nbytes - off : piece),
                                        err);
    }
    if (!rc) {
        begun = false;
        rc = gguf_writer.finish(st, err);
    }
    if (begun) gguf_writer.abort(st);
    if (!rc)
        rc = amn_sink_commit(sink, err);
    else
        amn_sink_abort(sink);
    free(outs);
    free(ptrs);
    free(order);
    return rc;
}

/* endian=big: the header is the one gguf_build.h writes big-endian, and the
 * file reads back to the same key/values and, swapped back, the same
 * tensor bytes, whatever the pieces the data arrives in. */
static void writer_big_endian(void **state) {
    (void)state;
    gb le = {0}, be = {.be = true};
    rich_layout lay, lay_be;
    build_rich(&le, 3, 32, true, &lay);
    build_rich(&be, 3, 32, true, &lay_be);
    const char *in = tmp("le.gguf"), *out = tmp("be-out.gguf");
    save(in, le.p, le.n);
    amn_model *m = NULL;
    amn_error err = {0};
    assert_int_equal(open_path(in, &m, &err), AMN_OK);
    static const size_t pieces[] = {1, 3, 7, 34, 143, 1 << 20};
    for (size_t pi = 0; pi < sizeof pieces / sizeof *pieces; pi++) {
        int rc = write_big_endian(m, out, pieces[pi], &err);
        if (rc) fail_msg("piece %zu: %s", pieces[pi], err.msg);
        size_t n = 0;
        uint8_t *bytes = amn_test_read_file(out, &n);
        assert_int_equal(n, be.n);
        assert_memory_equal(bytes, be.p, lay_be.data_start);
        free(bytes);
        amn_model *back = NULL;
        assert_int_equal(open_path(out, &back, &err), AMN_OK);
        assert_string_equal(amn_model_label(back), "GGUF v3 big-endian");
        assert_int_equal(amn_model_kv_count(back), amn_model_kv_count(m));
        for (size_t i = 0; i < amn_model_kv_count(m); i++)
            assert_true(kv_equal(amn_model_kv(m, i), amn_model_kv(back, i)));
        for (size_t i = 0; i < amn_model_tensor_count(m); i++) {
            const amn_tensor *x = amn_model_tensor(m, i), *y = amn_model_tensor(back, i);
            uint8_t *got = malloc(x->nbytes + 1);
            if (y->dtype == AMN_DTYPE_BLOCK) {
                memcpy(got, y->data, x->nbytes);
                gguf_endian_swap_blocks(y->encoding, got, x->nbytes);
                /* the swap changed something: these blocks have fp16 fields */
                assert_true(memcmp(got, y->data, x->nbytes) != 0);
            } else {
                assert_int_equal(amn_tensor_read(y, 0, got, x->nbytes, &err), AMN_OK);
            }
            assert_memory_equal(got, x->data, x->nbytes);
            free(got);
        }
        amn_model_free(back);
    }
    amn_model_free(m);
    gb_free(&le);
    gb_free(&be);
}

/* A block type with no big-endian layout is refused by name; a bad value of
 * the option is refused before anything is written. */
static void writer_big_endian_refusals(void **state) {
    (void)state;
    amn_error err = {0};
    assert_int_equal(gguf_writer.check_option("endian", "middle", &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "option endian middle: expected big or little"));
    assert_int_equal(gguf_writer.check_option("endian", "little", &err), AMN_OK);
    gb b = {0};
    gb_header(&b, 3, 1, 0);
    const uint64_t ne[1] = {32};
    gb_tensor(&b, "q5", 1, ne, 6 /* Q5_0 */, 0);
    gb_pad(&b, 32);
    for (int i = 0; i < 22; i++) gb_u8(&b, (uint8_t)i);
    const char *in = tmp("q5.gguf");
    save(in, b.p, b.n);
    amn_model *m = NULL;
    assert_int_equal(open_path(in, &m, &err), AMN_OK);
    assert_int_equal(write_big_endian(m, tmp("q5-be.gguf"), 5, &err), AMN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "tensor q5: GGUF type Q5_0 has no big-endian layout"));
    assert_int_equal(access(tmp("q5-be.gguf"), F_OK), -1);
    amn_model_free(m);
    gb_free(&b);
}

static void writer_sources_and_limits(void **state) {
    (void)state;
    amn_model *st = amn_model_new("safetensors");
    amn_error err = {0};
    assert_int_equal(amn_model_set_meta(st, "format", "pt", &err), AMN_OK);
    uint16_t half[6] = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600};
    amn_tensor t = {.struct_size = sizeof(amn_tensor),
                    .name = "w",
                    .dtype = AMN_DTYPE_F16,
                    .ndim = 2,
                    .shape = {2, 3},
                    .nbytes = 12,
                    .data = half,
                    .extent = 12};
    assert_int_equal(amn_model_add_tensor(st, &t, &err), AMN_OK);
    const char *out = tmp("from-st.gguf");
    const char *over[] = {"general.architecture=llama"};
    assert_int_equal(write_like_core(st, out, over, 1, NULL, &err), AMN_OK);
    amn_model *w = NULL;
    assert_int_equal(open_path(out, &w, &err), AMN_OK);
    assert_int_equal(amn_model_kv_count(w), 1);
    assert_int_equal(amn_model_tensor(w, 0)->shape[0], 2);
    assert_int_equal(amn_model_tensor(w, 0)->shape[1], 3);
    assert_memory_equal(amn_model_tensor(w, 0)->data, half, 12);
    amn_model_free(w);

    /* 5 dimensions */
    amn_tensor t5 = {.struct_size = sizeof(amn_tensor),
                     .name = "five",
                     .dtype = AMN_DTYPE_F16,
                     .ndim = 5,
                     .shape = {1, 1, 1, 2, 3},
                     .nbytes = 12,
                     .data = half,
                     .extent = 12};
    assert_int_equal(amn_model_add_tensor(st, &t5, &err), AMN_OK);
    assert_int_equal(write_like_core(st, tmp("five.gguf"), NULL, 0, NULL, &err), AMN_E_UNSUPPORTED);
    amn_model_free(st);

    /* a GGUF source of one file (a merged split: split.count 0): split.*
     * kept as they are; a copy (every tensor of its source's type) keeps
     * general.file_type */
    gb b = {0};
    gb_header(&b, 3, 1, 4);
    gb_kv_str(&b, "general.architecture", "llama");
    gb_kv_u32(&b, "general.file_type", 15); /* MOSTLY_Q4_K_M */
    gb_key(&b, "split.count", T_U16);
    gb_u16(&b, 0);
    gb_key(&b, "split.no", T_U16);
    gb_u16(&b, 0);
    const uint64_t ne[2] = {3, 2};
    gb_tensor(&b, "w", 2, ne, 1 /* F16 */, 0);
    gb_pad(&b, 32);
    gb_bytes(&b, half, 12);
    gb_pad(&b, 32);
    const char *in = tmp("split.gguf");
    save(in, b.p, b.n);
    amn_model *m = NULL;
    assert_int_equal(open_path(in, &m, &err), AMN_OK);
    assert_int_equal(write_like_core(m, out, NULL, 0, NULL, &err), AMN_OK);
    assert_int_equal(open_path(out, &w, &err), AMN_OK);
    assert_int_equal(amn_model_kv_count(w), 4);
    assert_int_equal(*(const uint16_t *)kv(w, "split.count")->data, 0);
    assert_int_equal(*(const uint32_t *)kv(w, "general.file_type")->data, 15);
    amn_model_free(w);
    amn_model_free(m);
    gb_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(read_rich_all_versions),    cmocka_unit_test(inspect_is_header_only),
        cmocka_unit_test(inspect_long_strings),      cmocka_unit_test(unusual_types),
        cmocka_unit_test(v1_nul_terminated_strings), cmocka_unit_test(probe_scores),
        cmocka_unit_test(python_fixtures),           cmocka_unit_test(writer_round_trip),
        cmocka_unit_test(writer_matches_fixtures),   cmocka_unit_test(writer_metadata_precedence),
        cmocka_unit_test(writer_metadata_errors),    cmocka_unit_test(writer_sources_and_limits),
        cmocka_unit_test(writer_big_endian),         cmocka_unit_test(writer_big_endian_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
