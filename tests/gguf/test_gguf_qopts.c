/* llama-quantize's file-shaping options (plugins/gguf/gguf_qopts.c): the
 * layer renumbering of --prune-layers on models of 12 layers (where the
 * walk order is numeric, not lexical), the syntax checks of --override-kv
 * and --prune-layers, the key order --override-kv leaves, the words of a
 * --tensor-type-file, and the substring filter of --include-weights /
 * --exclude-weights. The file-level comparison with llama-quantize's own
 * outputs is tests/gguf/forget_gguf_qopts.sh. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn_test.h"

#include "gguf_format.h"
#include "gguf_qopts.h"

enum { NL = 12, PER = 2, NT = NL * PER + 2 };

/* A 12-layer model's names, listed lexically (blk.10 before blk.2), as a
 * file may hold them. */
static size_t names12(char (*buf)[48], const char **names) {
    size_t n = 0;
    const char *lex[NL] = {"0", "1", "10", "11", "2", "3", "4", "5", "6", "7", "8", "9"};
    snprintf(buf[n], 48, "token_embd.weight");
    names[n] = buf[n], n++;
    for (int l = 0; l < NL; l++) {
        snprintf(buf[n], 48, "blk.%s.attn_q.weight", lex[l]);
        names[n] = buf[n], n++;
        snprintf(buf[n], 48, "blk.%s.ffn_up.weight", lex[l]);
        names[n] = buf[n], n++;
    }
    snprintf(buf[n], 48, "output.weight");
    names[n] = buf[n], n++;
    return n;
}

/* Pruning `prune` from 12 layers: every kept layer L is renamed to its
 * rank among the kept layers, the pruned ones dropped. */
static void check_prune(const int32_t *prune, size_t n_prune) {
    char buf[NT][48];
    const char *names[NT];
    char *renamed[NT];
    const size_t n = names12(buf, names);
    uint32_t n_layers = 0;
    amn_error err = {0};
    assert_int_equal(gguf_qopts_prune(names, n, prune, n_prune, renamed, &n_layers, &err), 0);
    int rank[NL], kept = 0;
    for (int l = 0; l < NL; l++) {
        bool p = false;
        for (size_t k = 0; k < n_prune; k++) p |= prune[k] == l;
        rank[l] = p ? -1 : kept++;
    }
    assert_int_equal(n_layers, kept);
    for (size_t i = 0; i < n; i++) {
        int l = -1;
        char rest[32] = "";
        if (sscanf(names[i], "blk.%d.%31s", &l, rest) != 2) {
            assert_non_null(renamed[i]);
            assert_string_equal(renamed[i], names[i]);
        } else if (rank[l] < 0)
            assert_null(renamed[i]);
        else {
            char want[48];
            snprintf(want, sizeof want, "blk.%d.%s", rank[l], rest);
            assert_non_null(renamed[i]);
            assert_string_equal(renamed[i], want);
        }
        free(renamed[i]);
    }
}

static void test_prune_renumbering(void **state) {
    (void)state;
    const int32_t middle[] = {1, 5}, first[] = {0}, last[] = {10, 11}, many[] = {0, 2, 3, 9, 11};
    const int32_t absent[] = {40};
    check_prune(middle, 2);
    check_prune(first, 1);
    check_prune(last, 2);
    check_prune(many, 5);
    check_prune(absent, 1);
}

static void test_prune_list(void **state) {
    (void)state;
    int32_t *v;
    size_t n;
    amn_error err = {0};
    assert_int_equal(gguf_qopts_parse_prune("7,2,7,0", &v, &n, &err), 0);
    assert_int_equal(n, 3);
    assert_int_equal(v[0], 0);
    assert_int_equal(v[1], 2);
    assert_int_equal(v[2], 7);
    free(v);
    const char *bad[] = {"", "1,", ",1", "-1", "a", "1.5", "2147483648", " 1", "1 "};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(gguf_qopts_parse_prune(bad[i], &v, &n, &err), AMN_E_INVALID);
        assert_non_null(strstr(err.msg, "invalid layer id"));
    }
}

static void test_override_syntax(void **state) {
    (void)state;
    amn_error err = {0};
    const char *good[] = {"a.b=int:-3", "a=float:1e-3", "a=bool:false", "a=str:", "a=str:x=y"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        assert_int_equal(gguf_qopts_check_kv(good[i], &err), 0);
    const char *bad[] = {"a",       "=int:1",   "a=int:",    "a=int:1x",
                         "a=u32:1", "a=bool:1", "a=float:x", "a=int:99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(gguf_qopts_check_kv(bad[i], &err), AMN_E_INVALID);
    char longkey[200];
    memset(longkey, 'k', 128);
    snprintf(longkey + 128, sizeof longkey - 128, "=int:1");
    assert_int_equal(gguf_qopts_check_kv(longkey, &err), AMN_E_INVALID);
}

/* gguf_set_val_*: an existing key is removed and appended; int as u32 |v|. */
static void test_override_order(void **state) {
    (void)state;
    gguf_kvlist l;
    amn_error err = {0};
    assert_int_equal(gguf_kvlist_init(&l, &err), 0);
    assert_int_equal(gguf_qopts_apply_kv("a=str:one", &l, &err), 0);
    assert_int_equal(gguf_qopts_apply_kv("b=bool:true", &l, &err), 0);
    assert_int_equal(gguf_qopts_apply_kv("a=int:-4294967297", &l, &err), 0);
    assert_int_equal(gguf_qopts_apply_kv("c=float:0.1", &l, &err), 0);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.items[0].key, "b");
    assert_string_equal(l.items[1].key, "a");
    assert_int_equal(l.items[1].type, AMN_KV_U32);
    uint32_t u;
    memcpy(&u, l.items[1].data, 4);
    assert_int_equal(u, 1); /* |-4294967297| mod 2^32 */
    float f;
    memcpy(&f, l.items[2].data, 4);
    assert_true(l.items[2].type == AMN_KV_F32 && f == (float)0.1);
    gguf_kvlist_free(&l);
}

static void test_type_file(void **state) {
    (void)state;
    assert_int_equal(amn_test_scratch_make("qopts"), 0);
    const char *path = amn_test_scratch_path("t.txt");
    FILE *f = fopen(path, "wb");
    fputs("  a=q8_0\n\tb=Q4_K  \r\nc=f16", f);
    fclose(f);
    char **w;
    size_t n;
    amn_error err = {0};
    assert_int_equal(gguf_qopts_read_type_file(path, &w, &n, &err), 0);
    assert_int_equal(n, 3);
    assert_string_equal(w[0], "a=q8_0");
    assert_string_equal(w[1], "b=Q4_K");
    assert_string_equal(w[2], "c=f16");
    free(w);
    assert_int_equal(gguf_qopts_read_type_file(amn_test_scratch_path("none"), &w, &n, &err),
                     AMN_E_IO);
    amn_test_scratch_remove();
}

static void test_imatrix_filter(void **state) {
    (void)state;
    const char *ex[] = {"output.weight"}, *in[] = {"blk.0.", "token_embd"};
    assert_false(gguf_qopts_imatrix_keeps("output.weight", NULL, 0, ex, 1));
    assert_false(gguf_qopts_imatrix_keeps("blk.3.attn_output.weight", NULL, 0, ex, 1));
    assert_true(gguf_qopts_imatrix_keeps("blk.3.attn_q.weight", NULL, 0, ex, 1));
    assert_true(gguf_qopts_imatrix_keeps("blk.0.ffn_up.weight", in, 2, NULL, 0));
    assert_false(gguf_qopts_imatrix_keeps("blk.10.ffn_up.weight", in, 2, NULL, 0));
    assert_true(gguf_qopts_imatrix_keeps("anything", NULL, 0, NULL, 0));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prune_renumbering), cmocka_unit_test(test_prune_list),
        cmocka_unit_test(test_override_syntax),   cmocka_unit_test(test_override_order),
        cmocka_unit_test(test_type_file),         cmocka_unit_test(test_imatrix_filter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
