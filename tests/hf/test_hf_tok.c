/* amn's check-text encoder (plugins/hf/hf_tok*.c, which names
 * tokenizer.ggml.pre) against Hugging Face tokenizers
 * (fixtures/hf/vocab/tok_ids.expected.json, made by gen_tok_fixtures.py):
 * real tokenizer.json files cut to what their encodings use
 * (tok_real.tar.xz), and the Llama 3.1 vocabulary under every pre-tokenizer
 * amn writes for a tokenizer.ggml.pre name. Per tokenizer: the chkhsh, the
 * name the converter's table gives it (or none), and the ids of extra
 * strings. Then the regex engine's syntax: Oniguruma's answers on small
 * cases, and malformed or hostile patterns refused or bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "amn/model.h"
#include "hf_tok_int.h"
#include "hf_tok_regex.h"
#include "hf_vocab.h"
#include "hf_vocab_int.h"

static json_object *expected;

static const char *src_dir(void) {
    const char *d = getenv("HF_VOCAB_FIXTURES");
    return d ? d : "fixtures/hf/vocab";
}

static const char *tok_dir(void) {
    const char *d = getenv("HF_VOCAB_TOK");
    return d ? d : "vocab-tok";
}

static json_object *load(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_object *o = json_object_from_file(path);
    if (!o) fail_msg("cannot read %s", path);
    return o;
}

static int setup(void **s) {
    (void)s;
    expected = load(src_dir(), "tok_ids.expected.json");
    return 0;
}

static int teardown(void **s) {
    (void)s;
    json_object_put(expected);
    return 0;
}

/* tokenizer.json root against one expected record: chkhsh, name, ids */
static void check_case(const char *label, json_object *root, json_object *want) {
    amn_limits lim;
    amn_limits_default(&lim);
    amn_error err = {0};
    char hex[65];
    if (hf_tok_chkhsh(root, &lim, hex, &err) != AMN_OK) fail_msg("%s: %s", label, err.msg);
    const char *want_hex = json_object_get_string(json_object_object_get(want, "chkhsh"));
    if (strcmp(hex, want_hex) != 0) fail_msg("%s: chkhsh %s, expected %s", label, hex, want_hex);
    json_object *pre = json_object_object_get(want, "pre");
    const char *name = hf_tok_pre_name(hex);
    if (json_object_is_type(pre, json_type_null)
            ? name != NULL
            : !name || strcmp(name, json_object_get_string(pre)))
        fail_msg("%s: named %s, expected %s", label, name ? name : "(none)",
                 json_object_get_string(pre));
    json_object *strings = json_object_object_get(expected, "strings");
    json_object *ids = json_object_object_get(want, "ids");
    assert_int_equal(json_object_array_length(strings), json_object_array_length(ids));
    int64_t got[4 * HF_TOK_MAX_CP];
    for (size_t i = 0; i < json_object_array_length(strings); i++) {
        json_object *str = json_object_array_get_idx(strings, i);
        json_object *w = json_object_array_get_idx(ids, i);
        size_t n = 0;
        if (hf_tok_encode(root, &lim, json_object_get_string(str),
                          (size_t)json_object_get_string_len(str), got, &n,
                          sizeof got / sizeof *got, &err) != AMN_OK)
            fail_msg("%s: string %zu: %s", label, i, err.msg);
        bool same = n == json_object_array_length(w);
        for (size_t j = 0; same && j < n; j++)
            same = got[j] == json_object_get_int64(json_object_array_get_idx(w, j));
        if (!same) fail_msg("%s: ids of string %zu differ", label, i);
    }
}

static void test_real_tokenizers(void **s) {
    (void)s;
    json_object *real = json_object_object_get(expected, "real");
    assert_true(json_object_object_length(real) >= 5);
    json_object_object_foreach(real, pkg, want) {
        char name[256];
        snprintf(name, sizeof name, "%s/tokenizer.json", pkg);
        json_object *root = load(tok_dir(), name);
        snprintf(name, sizeof name, "%s/tokenizer_config.json", pkg);
        json_object *config = load(tok_dir(), name);
        amn_error err = {0};
        if (hf_tok_config_post(root, config, &err) != AMN_OK) fail_msg("%s: %s", pkg, err.msg);
        json_object_put(config);
        check_case(pkg, root, want);
        json_object_put(root);
    }
}

/* The folder as the converter's _set_vocab_gpt2 reads it (tokenizer.json,
 * tokenizer_config.json): tokenizer.ggml.pre is the expected name, or the
 * folder is refused naming the hash. The cut files keep their ids: the
 * vocabulary is padded up to the highest. */
static void test_real_folders(void **s) {
    (void)s;
    json_object *real = json_object_object_get(expected, "real");
    json_object_object_foreach(real, pkg, want) {
        char dir[1024], name[256];
        snprintf(dir, sizeof dir, "%s/%s", tok_dir(), pkg);
        snprintf(name, sizeof name, "%s/tokenizer.json", pkg);
        json_object *root = load(tok_dir(), name);
        int64_t max = 0;
        json_object_object_foreach(
            json_object_object_get(json_object_object_get(root, "model"), "vocab"), k, v) {
            (void)k;
            if (json_object_get_int64(v) > max) max = json_object_get_int64(v);
        }
        json_object *added = json_object_object_get(root, "added_tokens");
        for (size_t i = 0; added && i < json_object_array_length(added); i++) {
            int64_t id = json_object_get_int64(
                json_object_object_get(json_object_array_get_idx(added, i), "id"));
            if (id > max) max = id;
        }
        json_object_put(root);
        amn_model *m = amn_model_new("hf");
        amn_limits lim;
        amn_limits_default(&lim);
        amn_error err = {0};
        int rc = hf_vocab_add(m, dir, "gpt2", (uint64_t)max + 1, &lim, &err);
        json_object *pre = json_object_object_get(want, "pre");
        const char *hex = json_object_get_string(json_object_object_get(want, "chkhsh"));
        if (json_object_is_type(pre, json_type_null)) {
            if (rc != AMN_E_UNSUPPORTED || !strstr(err.msg, hex))
                fail_msg("%s: expected refused naming %s, got %d %s", pkg, hex, rc, err.msg);
        } else {
            if (rc) fail_msg("%s: %s", pkg, err.msg);
            const amn_kv *kv = amn_model_find_kv(m, "tokenizer.ggml.pre");
            assert_non_null(kv);
            const amn_str *str = kv->data;
            const char *w = json_object_get_string(pre);
            if (str->len != strlen(w) || memcmp(str->ptr, w, str->len))
                fail_msg("%s: tokenizer.ggml.pre %.*s, expected %s", pkg, (int)str->len,
                         (const char *)str->ptr, w);
        }
        amn_model_free(m);
    }
}

/* The cut Llama 3.1 vocabulary under one name's written sections */
static void test_pre_tokenizer_forms(void **s) {
    (void)s;
    json_object *forms = json_object_object_get(expected, "forms");
    assert_true(json_object_array_length(forms) >= 20);
    for (size_t i = 0; i < json_object_array_length(forms); i++) {
        json_object *f = json_object_array_get_idx(forms, i);
        json_object *sec = json_object_object_get(f, "sections");
        json_object *root = load(tok_dir(), "llama3_1_cut/tokenizer.json");
        static const char *const keys[] = {"normalizer", "pre_tokenizer"};
        for (size_t k = 0; k < 2; k++)
            json_object_object_add(root, keys[k],
                                   json_object_get(json_object_object_get(sec, keys[k])));
        json_object_object_add(json_object_object_get(root, "model"), "ignore_merges",
                               json_object_get(json_object_object_get(sec, "ignore_merges")));
        const char *label = json_object_get_string(
            json_object_array_get_idx(json_object_object_get(f, "names"), 0));
        check_case(label, root, f);
        json_object_put(root);
    }
}

/* ---- the regex engine ---- */
static int find(const char *pattern, const char *text, size_t *s, size_t *e) {
    hf_re *re;
    amn_error err = {0};
    if (hf_re_compile(pattern, &re, &err) != AMN_OK) fail_msg("%s: %s", pattern, err.msg);
    uint32_t cp[64];
    size_t n = hf_utf8_decode(text, strlen(text), cp, 64);
    uint64_t budget = 1000000;
    int r = hf_re_find(re, cp, n, 0, s, e, &budget, &err);
    hf_re_free(re);
    return r;
}

/* Oniguruma 6.9.8's answers (onig_search, ONIG_SYNTAX_DEFAULT, UTF-8):
 * the first match's code point offsets, or none. */
static void test_regex_syntax(void **s) {
    (void)s;
    static const struct {
        const char *pattern, *text;
        int hit;
        size_t s, e;
    } cases[] = {
        {"a$", "a\nb", 1, 0, 1},
        {"^b", "a\nb", 1, 2, 3},
        {"\\s+$", "a \n", 1, 1, 3},
        {"a\\Z", "a\n", 1, 0, 1},
        {"x\\z", "x\n", 0, 0, 0},
        {"1\\b", "1\xe5\xa4\xa9", 0, 0, 0}, /* 天 is a word character */
        {"[\\b]", "\b", 1, 0, 1},
        {"\\h", "g1", 1, 1, 2},
        {"\\x41", "A", 1, 0, 1},
        {"\\u0041", "A", 1, 0, 1},
        {"a*+a", "aaa", 0, 0, 0},
        {"(?>a*)", "aaa", 1, 0, 3},
        {"\\-", "-", 1, 0, 1},
        {"(?:)", "x", 1, 0, 0},
        {"x{0}", "y", 1, 0, 0},
        {"[\\[-`]+", "a^_[`", 1, 1, 5},
        {"[,\\-./\\\\\\]]+", "a-\\].,b", 1, 1, 6},
        {"\\d{1,3}(?=(?:\\d{3})*\\b)", "1234567 ", 1, 0, 1},
        {"(?=(\\d{3})+(?!\\d))", "12345", 1, 2, 2},
        {"(?<n>ab)+", "abab", 1, 0, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t b = 0, e = 0;
        int r = find(cases[i].pattern, cases[i].text, &b, &e);
        if (r != cases[i].hit || (r == 1 && (b != cases[i].s || e != cases[i].e)))
            fail_msg("%s: got %d [%zu,%zu)", cases[i].pattern, r, b, e);
    }
}

/* Malformed patterns and constructs the engine does not have: refused as
 * unsupported (or a limit), never read some other way. */
static void test_regex_malformed(void **s) {
    (void)s;
    static const char *const bad[] = {
        "(a",          "a)",          "(?:a|b",   "[a",      "[]",          "[^]",     "a{3,2}",
        "a{100001}",   "a{1,100001}", "a**",      "a{2}+",   "\\b+",        "^*",      "(?=a)*",
        "*a",          "a|*",         "\\",       "[a\\",    "\\y",         "\\Q",     "\\G",
        "\\K",         "\\1",         "\\k<a>",   "\\pL",    "\\p{Han}",    "\\p{Xx}", "\\p{L",
        "\\x{110000}", "\\x{}",       "\\xZ",     "\\uD800", "\\u12",       "\\01",    "(?<=a)b",
        "(?<!a)b",     "(?i)a",       "(?<1a>x)", "[[a]]",   "[[:alpha:]]", "[a&&b]",  "[\\d-z]",
        "[a-\\d]",     "[z-a]",       "[\\A]",    "[a-[]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        hf_re *re = NULL;
        amn_error err = {0};
        int rc = hf_re_compile(bad[i], &re, &err);
        if (rc != AMN_E_UNSUPPORTED && rc != AMN_E_LIMIT)
            fail_msg("'%s' compiled (%d)", bad[i], rc);
        assert_null(re);
    }
    /* groups nested past the cap */
    char deep[200];
    size_t k = 0;
    for (int i = 0; i < 40; i++) deep[k++] = '(';
    deep[k++] = 'a';
    for (int i = 0; i < 40; i++) deep[k++] = ')';
    deep[k] = 0;
    hf_re *re = NULL;
    amn_error err = {0};
    assert_int_equal(hf_re_compile(deep, &re, &err), AMN_E_UNSUPPORTED);
}

/* Hostile but valid patterns, exponential in backtracking: the step budget
 * (on a short text) or the depth cap (on a long one) ends them with a typed
 * limit. */
static void test_regex_bounded(void **s) {
    (void)s;
    static const char *const hostile[] = {
        "(?:a|a)*(?:a|a)*b",         "(?>(?:a|a)*)*(?:a|a)*c",   "(?=(?:a*)*b)a",
        "(?:(?:\\b|)a|a(?:\\B|))*c", "(?<x>a{1,1000}){1,1000}c", "(?:(?:a|a)*)*$b",
    };
    static const size_t lens[] = {25, 5000};
    uint32_t *t = malloc(lens[1] * sizeof *t);
    assert_non_null(t);
    for (size_t i = 0; i < lens[1]; i++) t[i] = 'a';
    for (size_t i = 0; i < sizeof hostile / sizeof *hostile; i++)
        for (size_t l = 0; l < 2; l++) {
            hf_re *re;
            amn_error err = {0};
            assert_int_equal(hf_re_compile(hostile[i], &re, &err), AMN_OK);
            size_t b, e;
            uint64_t budget = 2000000;
            int r = hf_re_find(re, t, lens[l], 0, &b, &e, &budget, &err);
            if (r != -1 || err.code != AMN_E_LIMIT)
                fail_msg("%s on %zu characters: %d, not a limit", hostile[i], lens[l], r);
            hf_re_free(re);
        }
    free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_tokenizers),     cmocka_unit_test(test_real_folders),
        cmocka_unit_test(test_pre_tokenizer_forms), cmocka_unit_test(test_regex_syntax),
        cmocka_unit_test(test_regex_malformed),     cmocka_unit_test(test_regex_bounded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
