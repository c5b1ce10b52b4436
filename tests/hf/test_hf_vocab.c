/* The vocabulary of a Hugging Face folder against what llama.cpp's
 * convert_hf_to_gguf.py wrote for it (fixtures/hf/vocab/<case>.expected.json,
 * made by gen_vocab_fixtures.py): every tokenizer.* key in order, with its
 * GGUF type, element type and count, and the sha256 of its GGUF encoding.
 * Then hostile inputs: truncated and corrupted protobufs, wrong JSON types,
 * caps, unknown pre-tokenizers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "amn/byteorder.h"
#include "hf_vocab.h"
#include "hf_tok_int.h"
#include "hf_tok_regex.h"
#include "hf_vocab_int.h"
#include "sha256.h"

static const char *src_dir(void) {
    const char *d = getenv("HF_VOCAB_FIXTURES");
    return d ? d : "fixtures/hf/vocab";
}

static const char *bpe_dir(void) {
    const char *d = getenv("HF_VOCAB_BPE");
    return d ? d : "vocab-bpe";
}

/* ---- GGUF encoding of a value (type, then the value), as gguf-py writes it ---- */
typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put_u32(buf *b, uint32_t v) {
    uint8_t le[4];
    amn_store_le32(le, v);
    put(b, le, 4);
}

static void put_u64(buf *b, uint64_t v) {
    uint8_t le[8];
    amn_store_le64(le, v);
    put(b, le, 8);
}

static void put_value(buf *b, amn_kv_type t, const void *d) {
    if (t == AMN_KV_STRING) {
        const amn_str *s = d;
        put_u64(b, s->len);
        put(b, s->ptr, (size_t)s->len);
    } else { /* a host-order value (amn_kv), written little-endian */
        const size_t n = amn_kv_type_size(t);
        uint8_t le[8];
        memcpy(le, d, n);
        amn_le_to_host_n(le, n, 1);
        put(b, le, n);
    }
}

static void encode_kv(buf *b, const amn_kv *kv) {
    put_u32(b, (uint32_t)kv->type);
    if (kv->type != AMN_KV_ARRAY) {
        put_value(b, kv->type, kv->data);
        return;
    }
    put_u32(b, (uint32_t)kv->elem_type);
    put_u64(b, kv->count);
    size_t es = amn_kv_type_size(kv->elem_type);
    for (uint64_t i = 0; i < kv->count; i++)
        put_value(b, kv->elem_type, (const uint8_t *)kv->data + i * es);
}

/* ---- comparison with the converter ---- */
static void check_case(const char *dir, const char *name) {
    char path[4096], folder[4096];
    snprintf(path, sizeof path, "%s/%s.expected.json", src_dir(), name);
    snprintf(folder, sizeof folder, "%s/%s", dir, name);
    json_object *exp = json_object_from_file(path);
    assert_non_null(exp);
    const char *family = json_object_get_string(json_object_object_get(exp, "family"));
    uint64_t vocab_size =
        (uint64_t)json_object_get_int64(json_object_object_get(exp, "vocab_size"));
    json_object *kvs = json_object_object_get(exp, "kvs");
    assert_non_null(kvs);
    amn_model *m = amn_model_new("hf");
    amn_error err = {0};
    int rc = hf_vocab_add(m, folder, family, vocab_size, NULL, &err);
    if (rc) fail_msg("%s: %s", name, err.msg);
    size_t n = json_object_array_length(kvs);
    if (amn_model_kv_count(m) != n) {
        for (size_t i = 0; i < amn_model_kv_count(m); i++)
            print_message("  amn: %s\n", amn_model_kv(m, i)->key);
        fail_msg("%s: %zu keys, the converter wrote %zu", name, amn_model_kv_count(m), n);
    }
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(kvs, i);
        const amn_kv *kv = amn_model_kv(m, i);
        const char *key = json_object_get_string(json_object_object_get(e, "key"));
        if (strcmp(kv->key, key) != 0)
            fail_msg("%s: key %zu is %s, expected %s", name, i, kv->key, key);
        assert_int_equal(kv->type, json_object_get_int(json_object_object_get(e, "type")));
        json_object *et = json_object_object_get(e, "elem_type");
        if (et) {
            assert_int_equal(kv->elem_type, json_object_get_int(et));
            assert_int_equal(kv->count, json_object_get_int64(json_object_object_get(e, "count")));
        }
        buf b = {0};
        encode_kv(&b, kv);
        char hx[65];
        sha256_of(b.p, b.n, hx);
        free(b.p);
        const char *want = json_object_get_string(json_object_object_get(e, "sha256"));
        if (strcmp(hx, want) != 0) fail_msg("%s: %s differs from the converter's", name, key);
    }
    amn_model_free(m);
    json_object_put(exp);
}

static void test_spm_llama(void **s) {
    (void)s;
    check_case(src_dir(), "spm_llama");
}
static void test_spm_gemma(void **s) {
    (void)s;
    check_case(src_dir(), "spm_gemma");
}
static void test_spm_phi3(void **s) {
    (void)s;
    check_case(src_dir(), "spm_phi3");
}
static void test_spm_named(void **s) {
    (void)s;
    check_case(src_dir(), "spm_named");
}
static void test_spm_jinja_dir(void **s) {
    (void)s;
    check_case(src_dir(), "spm_jinja_dir");
}
static void test_spm_roberta(void **s) {
    (void)s;
    check_case(src_dir(), "spm_roberta");
}
static void test_spm_template(void **s) {
    (void)s;
    check_case(src_dir(), "spm_template");
}
static void test_spm_bare(void **s) {
    (void)s;
    check_case(src_dir(), "spm_bare");
}
static void test_bpe_llama3(void **s) {
    (void)s;
    check_case(bpe_dir(), "llama3");
}
static void test_bpe_llama3_1(void **s) {
    (void)s;
    check_case(bpe_dir(), "llama3_1");
}
static void test_bpe_llama2(void **s) {
    (void)s;
    check_case(bpe_dir(), "llama2");
}
/* Google's Gemma 3: Replace normalizer, Split merged with the previous
 * piece, a BPE over characters with byte fallback; added tokens (newlines,
 * tabs) in the check text */
static void test_bpe_gemma3(void **s) {
    (void)s;
    check_case(bpe_dir(), "gemma3");
}
static void test_bpe_qwen3(void **s) {
    (void)s;
    check_case(bpe_dir(), "qwen3");
}

/* ---- hostile inputs ---- */
static char tmpdir[256];

static void write_file(const char *name, const void *data, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void write_text(const char *name, const char *text) {
    write_file(name, text, strlen(text));
}

static void clear_dir(void) {
    static const char *const names[] = {"tokenizer.model",       "tokenizer.json",
                                        "tokenizer_config.json", "added_tokens.json",
                                        "config.json",           "chat_template.jinja"};
    char path[512];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, names[i]);
        unlink(path);
    }
}

static int setup(void **s) {
    (void)s;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_hf_vocab.XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **s) {
    (void)s;
    clear_dir();
    return rmdir(tmpdir);
}

/* hf_vocab_add on tmpdir: the code, and nothing added on error */
static int run(const char *family, uint64_t vocab_size, const amn_limits *lim, amn_error *err) {
    amn_model *m = amn_model_new("hf");
    int rc = hf_vocab_add(m, tmpdir, family, vocab_size, lim, err);
    if (rc)
        assert_int_equal(amn_model_kv_count(m), 0);
    else
        assert_true(amn_model_kv_count(m) > 0);
    amn_model_free(m);
    return rc;
}

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(*n ? *n : 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, *n, f), *n);
    fclose(f);
    return p;
}

static uint8_t *real_model(size_t *n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/spm_llama/tokenizer.model", src_dir());
    return read_all(path, n);
}

static void test_spm_truncated(void **s) {
    (void)s;
    size_t n;
    uint8_t *p = real_model(&n);
    clear_dir();
    for (size_t len = 0; len < n; len += 1 + len / 64) {
        write_file("tokenizer.model", p, len);
        amn_error err = {0};
        int rc = run("llama", 0, NULL, &err);
        if (rc != AMN_OK && rc != AMN_E_PARSE) fail_msg("length %zu: %d %s", len, rc, err.msg);
    }
    free(p);
}

static void test_spm_mutated(void **s) {
    (void)s;
    size_t n;
    uint8_t *p = real_model(&n);
    uint8_t *q = malloc(n);
    assert_non_null(q);
    uint64_t r = 0x9E3779B97F4A7C15ull;
    clear_dir();
    for (int it = 0; it < 300; it++) {
        memcpy(q, p, n);
        for (int k = 0; k < 4; k++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            q[(r >> 33) % n] = (uint8_t)(r >> 13);
        }
        write_file("tokenizer.model", q, n);
        amn_error err = {0};
        int rc = run("llama", 0, NULL, &err);
        if (rc != AMN_OK && rc != AMN_E_PARSE && rc != AMN_E_LIMIT)
            fail_msg("iteration %d: %d %s", it, rc, err.msg);
    }
    free(q);
    free(p);
}

/* one piece: field 1 (string), 2 (float), 3 (type) */
static size_t piece(uint8_t *o, const char *text, int type) {
    size_t n = strlen(text), k = 0;
    o[k++] = 0x0A;
    o[k++] = (uint8_t)(n + 2 + 5 + 2);
    o[k++] = 0x0A;
    o[k++] = (uint8_t)n;
    memcpy(o + k, text, n);
    k += n;
    o[k++] = 0x15;
    float f = -1.5f;
    memcpy(o + k, &f, 4);
    k += 4;
    o[k++] = 0x18;
    o[k++] = (uint8_t)type;
    return k;
}

static int spm_rc(const uint8_t *p, size_t n, const amn_limits *lim) {
    clear_dir();
    write_file("tokenizer.model", p, n);
    amn_error err = {0};
    return run("llama", 0, lim, &err);
}

static void test_spm_handmade(void **s) {
    (void)s;
    uint8_t b[256];
    size_t n = piece(b, "<unk>", 2);
    n += piece(b + n, "a", 1);
    assert_int_equal(spm_rc(b, n, NULL), AMN_OK);
    amn_limits lim;
    amn_limits_default(&lim);
    lim.max_array = 1;
    assert_int_equal(spm_rc(b, n, &lim), AMN_E_LIMIT);
    amn_limits_default(&lim);
    lim.max_header_bytes = n - 1;
    assert_int_equal(spm_rc(b, n, &lim), AMN_E_LIMIT);
    /* no UNKNOWN piece; two of them */
    n = piece(b, "a", 1);
    assert_int_equal(spm_rc(b, n, NULL), AMN_E_PARSE);
    n = piece(b, "<unk>", 2);
    n += piece(b + n, "<unk2>", 2);
    assert_int_equal(spm_rc(b, n, NULL), AMN_E_PARSE);
    /* empty piece, bad UTF-8, unknown type */
    n = piece(b, "<unk>", 2);
    size_t m = n + piece(b + n, "", 1);
    assert_int_equal(spm_rc(b, m, NULL), AMN_E_PARSE);
    m = n + piece(b + n, "\xff", 1);
    assert_int_equal(spm_rc(b, m, NULL), AMN_E_PARSE);
    m = n + piece(b + n, "x", 9);
    assert_int_equal(spm_rc(b, m, NULL), AMN_E_PARSE);
    /* a length past the end; an 11-byte varint; a group wire type */
    static const uint8_t past[] = {0x0A, 0x7F, 0x0A, 0x01, 'a'};
    assert_int_equal(spm_rc(past, sizeof past, NULL), AMN_E_PARSE);
    static const uint8_t longv[] = {0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01};
    assert_int_equal(spm_rc(longv, sizeof longv, NULL), AMN_E_PARSE);
    static const uint8_t group[] = {0x0B, 0x0C};
    assert_int_equal(spm_rc(group, sizeof group, NULL), AMN_E_PARSE);
    assert_int_equal(spm_rc(b, 0, NULL), AMN_E_PARSE); /* no pieces at all */
}

/* a SentencePiece model plus one JSON side file */
static int spm_with(const char *name, const char *json, const char *family) {
    uint8_t b[64];
    size_t n = piece(b, "<unk>", 2);
    n += piece(b + n, "a", 1);
    clear_dir();
    write_file("tokenizer.model", b, n);
    write_text(name, json);
    amn_error err = {0};
    return run(family, 0, NULL, &err);
}

static void test_json_side_files(void **s) {
    (void)s;
    assert_int_equal(spm_with("tokenizer_config.json", "{\"added_tokens_decoder\": []}", "llama"),
                     AMN_E_PARSE);
    assert_int_equal(
        spm_with("tokenizer_config.json", "{\"added_tokens_decoder\": {\"x\": {}}}", "llama"),
        AMN_E_PARSE);
    assert_int_equal(
        spm_with("tokenizer_config.json", "{\"added_tokens_decoder\": {\"1\": {}}}", "llama"),
        AMN_E_PARSE);
    assert_int_equal(spm_with("added_tokens.json", "{\"<x>\": \"1\"}", "llama"), AMN_E_PARSE);
    assert_int_equal(spm_with("added_tokens.json", "{\"<x>\": 1", "llama"), AMN_E_PARSE);
    assert_int_equal(spm_with("config.json", "{\"bos_token_id\": -1}", "llama"), AMN_E_PARSE);
    /* a bool is an int to the converter (True: 1); a float is not */
    assert_int_equal(
        spm_with("config.json", "{\"bos_token_id\": true, \"eos_token_id\": 1.0}", "llama"),
        AMN_OK);
    amn_model *m = amn_model_new("hf");
    amn_error err = {0};
    assert_int_equal(hf_vocab_add(m, tmpdir, "llama", 0, NULL, &err), AMN_OK);
    const amn_kv *bos = amn_model_find_kv(m, "tokenizer.ggml.bos_token_id");
    assert_non_null(bos);
    assert_int_equal(*(const uint32_t *)bos->data, 1);
    assert_null(amn_model_find_kv(m, "tokenizer.ggml.eos_token_id"));
    amn_model_free(m);
    /* a named template without text is no template; a list of non-objects is bad */
    assert_int_equal(
        spm_with("tokenizer_config.json", "{\"chat_template\": [{\"name\": \"a\"}]}", "llama"),
        AMN_OK);
    assert_int_equal(spm_with("tokenizer_config.json", "{\"chat_template\": [1]}", "llama"),
                     AMN_E_PARSE);
    /* nesting deeper than the cap */
    char deep[400];
    size_t k = 0;
    k += (size_t)sprintf(deep, "{\"a\":");
    for (int i = 0; i < 150; i++) deep[k++] = '[';
    for (int i = 0; i < 150; i++) deep[k++] = ']';
    deep[k++] = '}';
    deep[k] = 0;
    assert_int_equal(spm_with("tokenizer_config.json", deep, "llama"), AMN_E_LIMIT);
    assert_int_equal(spm_with("config.json", "{}", "no-such-family"), AMN_E_INVALID);
}

/* A byte-level BPE tokenizer.json: the 256 byte characters, no merges, and
 * the given pre-tokenizer. */
static void write_bpe(const char *pre_tokenizer, const char *vocab_override) {
    buf b = {0};
    const char *head = "{\"added_tokens\": [], \"normalizer\": null, \"pre_tokenizer\": ";
    put(&b, head, strlen(head));
    put(&b, pre_tokenizer, strlen(pre_tokenizer));
    const char *mid = ", \"post_processor\": null, \"model\": {\"type\": \"BPE\", \"merges\": [], "
                      "\"vocab\": ";
    put(&b, mid, strlen(mid));
    if (vocab_override) {
        put(&b, vocab_override, strlen(vocab_override));
    } else {
        put(&b, "{", 1);
        for (int i = 0; i < 256; i++) {
            /* GPT-2's byte-to-unicode characters, JSON-escaped */
            int c = i, n = 0;
            if (!((i >= 0x21 && i <= 0x7E) || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE)) {
                for (int x = 0; x < i; x++)
                    if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) n++;
                c = 256 + n;
            }
            char e[32];
            int len = sprintf(e, "%s\"\\u%04x\": %d", i ? ", " : "", c, i);
            put(&b, e, (size_t)len);
        }
        put(&b, "}", 1);
    }
    put(&b, "}}", 2);
    clear_dir();
    write_file("tokenizer.json", b.p, b.n);
    free(b.p);
}

static int bpe_rc(amn_error *err) {
    return run("gpt2", 0, NULL, err);
}

static void test_bpe_hostile(void **s) {
    (void)s;
    amn_error err = {0};
    amn_model *m;
    /* valid, but no tokenizer the converter knows: unsupported, naming the hash */
    write_bpe("{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}", NULL);
    assert_int_equal(bpe_rc(&err), AMN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "chkhsh"));
    /* regex constructs the engine does not have; a pattern that backtracks hard */
    write_bpe("{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
              "{\"Regex\": \"\\\\G\"}, \"behavior\": \"Isolated\", \"invert\": false}, "
              "{\"type\": \"ByteLevel\", \"use_regex\": false}]}",
              NULL);
    assert_int_equal(bpe_rc(&err), AMN_E_UNSUPPORTED);
    write_bpe("{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
              "{\"Regex\": \"(\\\\s*\\\\s*\\\\s*)*x|((((.)*)*)*)*y\"}, \"behavior\": "
              "\"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"use_regex\": false}]}",
              NULL);
    int rc = bpe_rc(&err);
    assert_true(rc == AMN_E_LIMIT || rc == AMN_E_UNSUPPORTED);
    write_bpe("{\"type\": \"Whitespace\"}", NULL);
    assert_int_equal(bpe_rc(&err), AMN_E_UNSUPPORTED);
    /* wrong types */
    write_bpe("null", "[1, 2]");
    assert_int_equal(bpe_rc(&err), AMN_E_PARSE);
    write_bpe("null", "{\"a\": \"1\"}");
    assert_int_equal(bpe_rc(&err), AMN_E_PARSE);
    write_bpe("null", "{\"a\": 5}"); /* id beyond the vocabulary of 1 */
    assert_int_equal(bpe_rc(&err), AMN_E_PARSE);
    clear_dir();
    write_text("tokenizer.json", "[]");
    assert_int_equal(bpe_rc(&err), AMN_E_PARSE);
    /* the LlamaHfVocab path: an id missing from the vocabulary, a special
     * token that is not in it, then a good one with an added token past it */
    static const char llama_hf[] =
        "{\"added_tokens\": [{\"id\": 5, \"content\": \"<x>\", \"special\": true}],"
        " \"decoder\": {\"type\": \"Sequence\"}, \"model\": {\"type\": \"BPE\", "
        "\"byte_fallback\": true, \"vocab\": {\"<unk>\": 0, \"<0x0A>\": 1, \"a\": %d}}}";
    char text[512];
    clear_dir();
    snprintf(text, sizeof text, llama_hf, 3);
    write_text("tokenizer.json", text);
    assert_int_equal(run("llama", 0, NULL, &err), AMN_E_PARSE);
    snprintf(text, sizeof text, llama_hf, 2);
    write_text("tokenizer.json", text);
    write_text("tokenizer_config.json", "{\"bos_token\": \"<s>\"}");
    assert_int_equal(run("llama", 0, NULL, &err), AMN_E_PARSE);
    write_text("tokenizer_config.json", "{\"unk_token\": \"<unk>\", \"eos_token\": \"<x>\"}");
    m = amn_model_new("hf");
    assert_int_equal(hf_vocab_add(m, tmpdir, "llama", 0, NULL, &err), AMN_OK);
    const amn_kv *types = amn_model_find_kv(m, "tokenizer.ggml.token_type");
    assert_non_null(types);
    assert_int_equal(types->count, 4);
    const int32_t *t = types->data;
    assert_int_equal(t[0], HF_TT_CONTROL);
    assert_int_equal(t[1], HF_TT_BYTE);
    assert_int_equal(t[2], HF_TT_NORMAL);
    assert_int_equal(t[3], HF_TT_CONTROL);
    amn_model_free(m);

    /* no tokenizer file at all: no vocabulary, no error */
    clear_dir();
    m = amn_model_new("hf");
    assert_int_equal(hf_vocab_add(m, tmpdir, "llama", 0, NULL, &err), AMN_OK);
    assert_int_equal(amn_model_kv_count(m), 0);
    amn_model_free(m);
}

/* A tokenizer.json over characters, as Gemma 3's: "<unk>", the 256 byte
 * tokens, "\u2581" and "a"; the given normalizer, pre-tokenizer, extra model
 * members and added tokens. */
static int char_bpe(const char *normalizer, const char *pre_tokenizer, const char *model_extra,
                    const char *added, amn_error *err) {
    buf b = {0};
    char t[256];
    int n = snprintf(t, sizeof t, "{\"added_tokens\": %s, \"normalizer\": ", added);
    put(&b, t, (size_t)n);
    put(&b, normalizer, strlen(normalizer));
    put(&b, ", \"pre_tokenizer\": ", 19);
    put(&b, pre_tokenizer, strlen(pre_tokenizer));
    n = snprintf(t, sizeof t, ", \"model\": {\"type\": \"BPE\", \"merges\": [[\"a\", \"a\"]], %s",
                 model_extra);
    put(&b, t, (size_t)n);
    put(&b, "\"vocab\": {\"<unk>\": 0", 20);
    for (int i = 0; i < 256; i++) {
        n = snprintf(t, sizeof t, ", \"<0x%02X>\": %d", i, i + 1);
        put(&b, t, (size_t)n);
    }
    const char *tail = ", \"\\u2581\": 257, \"a\": 258, \"aa\": 259}}}";
    put(&b, tail, strlen(tail));
    clear_dir();
    write_file("tokenizer.json", b.p, b.n);
    free(b.p);
    return run("gemma3", 0, NULL, err);
}

#define REPLACE                                                                                    \
    "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\\u2581\"}"
#define SPLIT(beh)                                                                                 \
    "{\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, \"behavior\": \"" beh                 \
    "\", \"invert\": false}"
#define FALLBACK "\"byte_fallback\": true, \"fuse_unk\": true, \"unk_token\": \"<unk>\", "

/* The components Gemma 3's tokenizer is made of, malformed or hostile:
 * typed errors; built right but unknown to the converter's table: the hash
 * named. */
static void test_bpe_char_hostile(void **s) {
    (void)s;
    amn_error err = {0};
    static const char *const behaviors[] = {"Removed", "Isolated", "MergedWithPrevious",
                                            "MergedWithNext", "Contiguous"};
    for (size_t i = 0; i < 5; i++) {
        char pre[256];
        snprintf(pre, sizeof pre,
                 "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"behavior\": "
                 "\"%s\", \"invert\": %s}",
                 behaviors[i], i % 2 ? "true" : "false");
        assert_int_equal(char_bpe("null", pre, FALLBACK, "[]", &err), AMN_E_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "chkhsh"));
    }
    /* without byte_fallback: unknown characters become one fused <unk> */
    assert_int_equal(char_bpe(REPLACE, SPLIT("MergedWithPrevious"),
                              "\"fuse_unk\": true, \"unk_token\": \"<unk>\", ", "[]", &err),
                     AMN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "chkhsh"));
    /* an added token in the check text, normalized or not */
    assert_int_equal(char_bpe(REPLACE, SPLIT("MergedWithPrevious"), FALLBACK,
                              "[{\"id\": 258, \"content\": \"333\", \"normalized\": true}, "
                              "{\"id\": 257, \"content\": \"\\n\", \"normalized\": false}]",
                              &err),
                     AMN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "chkhsh"));
    assert_int_equal(char_bpe("null", "null", FALLBACK,
                              "[{\"id\": 258, \"content\": \"\\n\", \"lstrip\": true}]", &err),
                     AMN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "lstrip"));
    /* components not known */
    assert_int_equal(char_bpe("{\"type\": \"NFKC\"}", "null", FALLBACK, "[]", &err),
                     AMN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "NFKC"));
    assert_int_equal(char_bpe("{\"type\": \"Sequence\", \"normalizers\": [" REPLACE
                              ", {\"type\": \"NFC\"}]}",
                              "null", FALLBACK, "[]", &err),
                     AMN_E_UNSUPPORTED);
    assert_int_equal(char_bpe("null", SPLIT("Sideways"), FALLBACK, "[]", &err), AMN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "Sideways"));
    assert_int_equal(char_bpe("null", "{\"type\": \"Metaspace\"}", FALLBACK, "[]", &err),
                     AMN_E_UNSUPPORTED);
    assert_int_equal(
        char_bpe("null", "null", FALLBACK "\"continuing_subword_prefix\": \"##\", ", "[]", &err),
        AMN_E_UNSUPPORTED);
    assert_int_equal(char_bpe("null", "null", FALLBACK "\"dropout\": 0.5, ", "[]", &err),
                     AMN_E_UNSUPPORTED);
    /* wrong types and missing members */
    assert_int_equal(char_bpe("{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, "
                              "\"content\": 5}",
                              "null", FALLBACK, "[]", &err),
                     AMN_E_PARSE);
    assert_int_equal(
        char_bpe("{\"type\": \"Replace\", \"content\": \"x\"}", "null", FALLBACK, "[]", &err),
        AMN_E_PARSE);
    assert_int_equal(char_bpe("{\"type\": \"Replace\", \"pattern\": {\"String\": \"\"}, "
                              "\"content\": \"x\"}",
                              "null", FALLBACK, "[]", &err),
                     AMN_E_PARSE);
    assert_int_equal(
        char_bpe("{\"type\": \"Sequence\", \"normalizers\": 3}", "null", FALLBACK, "[]", &err),
        AMN_E_PARSE);
    assert_int_equal(char_bpe("null",
                              "{\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, "
                              "\"behavior\": 1}",
                              FALLBACK, "[]", &err),
                     AMN_E_PARSE);
    assert_int_equal(char_bpe("null",
                              "{\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, "
                              "\"behavior\": \"Isolated\", \"invert\": \"yes\"}",
                              FALLBACK, "[]", &err),
                     AMN_E_PARSE);
    assert_int_equal(char_bpe("null", "null", "\"byte_fallback\": \"yes\", ", "[]", &err),
                     AMN_E_PARSE);
    assert_int_equal(char_bpe("null", "null", "\"unk_token\": 0, ", "[]", &err), AMN_E_PARSE);
    /* an unknown character with an unknown token the vocabulary lacks */
    assert_int_equal(char_bpe("null", "null", "\"unk_token\": \"<nope>\", ", "[]", &err),
                     AMN_E_PARSE);
    assert_int_equal(
        char_bpe("null", "null", FALLBACK, "[{\"id\": \"1\", \"content\": \"x\"}]", &err),
        AMN_E_PARSE);
    assert_int_equal(char_bpe("null", "null", FALLBACK, "{}", &err), AMN_E_PARSE);
    /* huge: a pattern past the cap, a replacement that grows the text past it,
     * normalizers nested past the depth cap */
    size_t big = 5000;
    char *text = malloc(big + 256);
    assert_non_null(text);
    int n = sprintf(text, "{\"type\": \"Replace\", \"pattern\": {\"String\": \"");
    memset(text + n, 'x', 2000);
    sprintf(text + n + 2000, "\"}, \"content\": \"y\"}");
    assert_int_equal(char_bpe(text, "null", FALLBACK, "[]", &err), AMN_E_LIMIT);
    n = sprintf(text, "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"");
    memset(text + n, 'y', 1000);
    sprintf(text + n + 1000, "\"}");
    assert_int_equal(char_bpe(text, "null", FALLBACK, "[]", &err), AMN_E_LIMIT);
    size_t k = 0;
    for (int i = 0; i < 20; i++)
        k += (size_t)sprintf(text + k, "{\"type\": \"Sequence\", \"normalizers\": [");
    k += (size_t)sprintf(text + k, "{\"type\": \"NFC\"}");
    for (int i = 0; i < 20; i++) k += (size_t)sprintf(text + k, "]}");
    assert_int_equal(char_bpe(text, "null", FALLBACK, "[]", &err), AMN_E_LIMIT);
    free(text);
}

/* Split's behaviors with invert on, on the tokenizers library's own test
 * sentence and pattern (its pre_tokenizers::split tests): the pieces each
 * gives. */
static void test_split_behaviors(void **s) {
    (void)s;
    static const struct {
        const char *behavior, *want;
    } cases[] = {
        {"Removed", "How|are|you|doing|?"},
        {"Isolated", "How| |are| |you| |doing|?"},
        {"MergedWithPrevious", "How |are |you |doing|?"},
        {"MergedWithNext", "How| are| you| doing|?"},
        {"Contiguous", "How| |are| |you| |doing?"},
    };
    static const char text[] = "How are you doing?";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char js[256];
        snprintf(js, sizeof js,
                 "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\w+|[^\\\\w\\\\s]+\"}, "
                 "\"behavior\": \"%s\", \"invert\": true}",
                 cases[i].behavior);
        json_object *pt = json_tokener_parse(js);
        assert_non_null(pt);
        uint32_t cp[sizeof text];
        for (size_t k = 0; k < sizeof text - 1; k++) cp[k] = (uint8_t)text[k];
        hf_pieces ps = {.budget = 1000000};
        amn_error err = {0};
        assert_int_equal(hf_push_piece(&ps, cp, sizeof text - 1, &err), AMN_OK);
        assert_int_equal(hf_tok_pre_tokenize(&ps, pt, &err), AMN_OK);
        char got[64];
        size_t o = 0;
        for (size_t j = 0; j < ps.n; j++) {
            if (j) got[o++] = '|';
            for (size_t k = 0; k < ps.v[j].n; k++) got[o++] = (char)ps.v[j].cp[k];
        }
        got[o] = 0;
        assert_string_equal(got, cases[i].want);
        hf_free_pieces(&ps);
        json_object_put(pt);
    }
}

/* Gemma3's token_embd rows: vocab_size with tokenizer.model, else the
 * tokenizer.json vocabulary plus its added tokens */
static void test_real_count(void **s) {
    (void)s;
    char dir[4096];
    uint64_t n = 0;
    amn_error err = {0};
    snprintf(dir, sizeof dir, "%s/spm_llama", src_dir());
    assert_int_equal(hf_vocab_real_count(dir, 410, NULL, &n, &err), AMN_OK);
    assert_int_equal(n, 410);
    assert_int_equal(hf_vocab_real_count(dir, 0, NULL, &n, &err), AMN_OK);
    assert_int_equal(n, 400); /* the pieces of the trained model */
    snprintf(dir, sizeof dir, "%s/llama3_1", bpe_dir());
    assert_int_equal(hf_vocab_real_count(dir, 0, NULL, &n, &err), AMN_OK);
    assert_int_equal(n, 128000 + 256);
}

/* A pattern whose backtracking goes as deep as the text is long, on a long
 * run of one character: a typed limit, not a stack overflow. */
static void test_regex_depth(void **s) {
    (void)s;
    hf_re *re;
    amn_error err = {0};
    assert_int_equal(hf_re_compile("(?:a|b)*(?:a|b)*c", &re, &err), AMN_OK);
    size_t n = 200000;
    uint32_t *t = malloc(n * sizeof *t);
    assert_non_null(t);
    for (size_t i = 0; i < n; i++) t[i] = 'a';
    size_t b, e;
    uint64_t budget = 50000000u;
    assert_int_equal(hf_re_find(re, t, n, 0, &b, &e, &budget, &err), -1);
    assert_int_equal(err.code, AMN_E_LIMIT);
    /* and an ordinary search still works */
    t[3] = 'c';
    budget = 50000000u;
    assert_int_equal(hf_re_find(re, t, 4, 0, &b, &e, &budget, &err), 1);
    assert_int_equal(b, 0);
    assert_int_equal(e, 4);
    hf_re_free(re);
    free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spm_llama),       cmocka_unit_test(test_spm_gemma),
        cmocka_unit_test(test_spm_phi3),        cmocka_unit_test(test_spm_named),
        cmocka_unit_test(test_spm_jinja_dir),   cmocka_unit_test(test_spm_roberta),
        cmocka_unit_test(test_spm_template),    cmocka_unit_test(test_spm_bare),
        cmocka_unit_test(test_bpe_llama3),      cmocka_unit_test(test_bpe_llama3_1),
        cmocka_unit_test(test_bpe_qwen3),       cmocka_unit_test(test_bpe_llama2),
        cmocka_unit_test(test_bpe_gemma3),      cmocka_unit_test(test_bpe_char_hostile),
        cmocka_unit_test(test_split_behaviors), cmocka_unit_test(test_spm_truncated),
        cmocka_unit_test(test_spm_mutated),     cmocka_unit_test(test_spm_handmade),
        cmocka_unit_test(test_json_side_files), cmocka_unit_test(test_bpe_hostile),
        cmocka_unit_test(test_real_count),      cmocka_unit_test(test_regex_depth),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
