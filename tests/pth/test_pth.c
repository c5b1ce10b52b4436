/* The pth plugin: the AlgZoo reference checkpoints (fixtures README §9),
 * the generated fixtures in fixtures/pth (torch.load's tensors recorded by
 * gen_fixtures.py) through open, inspect and `amn remember`, the pickle VM
 * on hand-written and mutated pickles, and malformed archives. */
#include "../npz/zip_test_util.h"

#include "pickle_vm.h"
#include "amn/kit/zip_reader.h"

static void test_reference(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    static const char *names[] = {"algzoo_rnn_small", "algzoo_transformer_small",
                                  "algzoo_rnn_blog"};
    size_t bytes = 0, tensors = 0;
    for (size_t i = 0; i < 3; i++) {
        char pth[4096], js[4096];
        snprintf(pth, sizeof pth, "%s/pth_reference/%s.pth", ref, names[i]);
        snprintf(js, sizeof js, "%s/pth_reference/%s_reference.json", ref, names[i]);
        json_object *rec = json_object_from_file(js);
        assert_non_null(rec);
        assert_int_equal(json_object_get_int(json_object_object_get(rec, "num_tensors")),
                         json_object_array_length(json_object_object_get(rec, "tensors")));
        amn_error err = {0};
        amn_model *m = NULL;
        if (amn_open(zt_ctx, pth, NULL, NULL, &m, &err) != AMN_OK) fail_msg("%s", err.msg);
        bytes += zt_check_model(names[i], m, rec, false);
        tensors += amn_model_tensor_count(m);
        amn_model_free(m);
        assert_int_equal(amn_inspect(zt_ctx, pth, NULL, NULL, &m, &err), AMN_OK);
        zt_check_model(names[i], m, rec, true);
        amn_model_free(m);
        /* The round trip upstream also checks: to safetensors, same bytes. */
        if (!amn_test_built("safetensors")) {
            json_object_put(rec);
            continue;
        }
        char out[4096], cmd[9000];
        snprintf(out, sizeof out, "%s/zt_ref_%d.safetensors", AMN_BINARY_DIR, (int)getpid());
        snprintf(cmd, sizeof cmd, "'%s/bin/amn' remember '%s' -o '%s' --force >/dev/null",
                 AMN_BINARY_DIR, pth, out);
        assert_int_equal(zt_run(cmd), 0);
        bytes += zt_check_safetensors(names[i], out, rec);
        unlink(out);
        json_object_put(rec);
    }
    assert_int_equal(tensors, 13);
    fprintf(stderr, "pth_reference: 13 tensors, %zu bytes compared\n", bytes);
    if (!amn_test_built("safetensors")) {
        fprintf(stderr, "SKIP %s: the CLI round trips need the safetensors plugin\n", __func__);
        skip();
    }
}

static void test_fixtures(void **state) {
    (void)state;
    zt_run_expected(AMN_SOURCE_DIR "/fixtures/pth", "pth");
}

/* The shared-storage and strided views really are views, not copies. */
static void test_views_share_storage(void **state) {
    (void)state;
    amn_error err = {0};
    amn_model *m = NULL;
    assert_int_equal(
        amn_open(zt_ctx, AMN_SOURCE_DIR "/fixtures/pth/views.pth", NULL, NULL, &m, &err), AMN_OK);
    const amn_tensor *a = amn_model_tensor(m, (size_t)amn_model_find(m, "shared_a"));
    const amn_tensor *b = amn_model_tensor(m, (size_t)amn_model_find(m, "shared_b"));
    const amn_tensor *t = amn_model_tensor(m, (size_t)amn_model_find(m, "transposed"));
    const amn_tensor *e = amn_model_tensor(m, (size_t)amn_model_find(m, "expanded"));
    assert_ptr_equal(a->data, b->data);
    assert_ptr_equal(a->data, t->data);
    assert_true(amn_tensor_is_plain(a));
    assert_false(amn_tensor_is_plain(t));
    assert_true(t->flags & AMN_TENSOR_STRIDED);
    assert_int_equal(t->strides[0], 1);
    assert_int_equal(t->strides[1], 6);
    assert_int_equal(e->strides[0], 0);
    amn_model_free(m);
    assert_int_equal(
        amn_open(zt_ctx, AMN_SOURCE_DIR "/fixtures/pth/big_endian.pth", NULL, NULL, &m, &err),
        AMN_OK);
    const amn_tensor *f = amn_model_tensor(m, (size_t)amn_model_find(m, "f32"));
    assert_true(f->flags & AMN_TENSOR_BIG_ENDIAN);
    amn_model_free(m);
}

/* ---- the pickle VM alone ------------------------------------------------- */

static int run_pickle(const char *bytes, size_t n, amn_error *err) {
    amn_limits lim;
    amn_limits_default(&lim);
    pk_vm *vm = NULL;
    int rc = pk_run((const uint8_t *)bytes, n, &lim, &vm, err);
    pk_free(vm);
    return rc;
}

#define PK(s) s, sizeof(s) - 1

/* Words each refused pickle's message must hold, by its description. */
static const amn_test_words refusal_words[] = {
    {"REDUCE on an empty stack", "stack underflow"},
    {"STOP on an empty stack", "stack underflow"},
    {"SETITEM underflow", "stack underflow"},
    {"TUPLE2 across a MARK", "stack underflow"},
    {"TUPLE without a MARK", "no MARK on the stack"},
    {"unknown opcode", "unknown opcode 0xff"},
    {"memo miss", "memo reference to missing key 3"},
    {"long memo miss", "missing key 65536"},
    {"no STOP", "no STOP opcode"},
    {"string past the end", "truncated data"},
    {"truncated argument", "truncated data"},
    {"APPEND to an int", "stack underflow"},
    {"SETITEMS without its MARK", "no MARK on the stack"},
    {"protocol 6", "pickle protocol above 5"},
    {"os.system", "'os.system' is not allowed"},
    {"builtins.eval is never resolved", "'builtins.eval' is not allowed"},
    {"STACK_GLOBAL exec", "'builtins.exec' is not allowed"},
    {"torch.load", "'torch.load' is not allowed"},
    {"calling a storage class", "'torch.FloatStorage' is not callable"},
    {"INST", "'os.system' is not allowed"},
    {"EXT1", "copyreg extension codes are not allowed"},
    {"calling an int", "not an allowed global"},
    {"OrderedDict(1)", "OrderedDict with unexpected arguments"},
    {"rebuild without a storage", "tensor rebuild without a storage"},
    {"unknown persistent id", "persistent id is not a storage"},
    {"out-of-band buffer", "out-of-band pickle buffers"},
};

static void test_pickle_vm(void **state) {
    (void)state;
    static const struct {
        const char *p;
        size_t n;
        int code;
        const char *what;
    } cases[] = {
        {PK("\x80\x02}q\x00X\x01\x00\x00\x00"
            "aK\x05s."),
         AMN_OK, "dict"},
        {PK("\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01"
            "a\x94K\x01s."),
         AMN_OK, "protocol 4 frame"},
        {PK("\x80\x02(K\x01K\x02l."), AMN_OK, "list"},
        {PK("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19."), AMN_OK, "big int"},
        {PK("\x80\x02G?\xf0\x00\x00\x00\x00\x00\x00."), AMN_OK, "float"},
        {PK("(I01\nI42\nF1.5\nl."), AMN_OK, "protocol 0 numbers"},
        {PK("\x80\x02R."), AMN_E_PARSE, "REDUCE on an empty stack"},
        {PK("\x80\x02."), AMN_E_PARSE, "STOP on an empty stack"},
        {PK("\x80\x02K\x01s."), AMN_E_PARSE, "SETITEM underflow"},
        {PK("\x80\x02(K\x01\x86."), AMN_E_PARSE, "TUPLE2 across a MARK"},
        {PK("\x80\x02t."), AMN_E_PARSE, "TUPLE without a MARK"},
        {PK("\x80\x02\xff."), AMN_E_PARSE, "unknown opcode"},
        {PK("\x80\x02h\x03."), AMN_E_PARSE, "memo miss"},
        {PK("\x80\x02j\x00\x00\x01\x00."), AMN_E_PARSE, "long memo miss"},
        {PK("\x80\x02]"), AMN_E_PARSE, "no STOP"},
        {PK("\x80\x02X\xff\xff\xff\x00"
            "ab."),
         AMN_E_PARSE, "string past the end"},
        {PK("\x80\x02K"), AMN_E_PARSE, "truncated argument"},
        {PK("\x80\x02K\x01"
            "a."),
         AMN_E_PARSE, "APPEND to an int"},
        {PK("\x80\x02}K\x01K\x02K\x03u."), AMN_E_PARSE, "SETITEMS without its MARK"},
        {PK("\x80\x06}."), AMN_E_UNSUPPORTED, "protocol 6"},
        {PK("\x80\x02"
            "cos\nsystem\nX\x02\x00\x00\x00lsq\x00\x85R."),
         AMN_E_DISALLOWED, "os.system"},
        {PK("\x80\x02"
            "cbuiltins\neval\n."),
         AMN_E_DISALLOWED, "builtins.eval is never resolved"},
        {PK("\x80\x04\x8c\x08"
            "builtins\x8c\x04"
            "exec\x93."),
         AMN_E_DISALLOWED, "STACK_GLOBAL exec"},
        {PK("\x80\x02"
            "ctorch\nload\n."),
         AMN_E_DISALLOWED, "torch.load"},
        {PK("\x80\x02"
            "ctorch\nFloatStorage\n)R."),
         AMN_E_DISALLOWED, "calling a storage class"},
        {PK("\x80\x02(cos\nsystem\ni."), AMN_E_DISALLOWED, "INST"},
        {PK("\x80\x02\x82\x01."), AMN_E_DISALLOWED, "EXT1"},
        {PK("\x80\x02K\x01)R."), AMN_E_DISALLOWED, "calling an int"},
        {PK("\x80\x02"
            "ccollections\nOrderedDict\nK\x01\x85R."),
         AMN_E_PARSE, "OrderedDict(1)"},
        {PK("\x80\x02"
            "ctorch._utils\n_rebuild_tensor_v2\n(K\x00K\x00)))\x89tR."),
         AMN_E_PARSE, "rebuild without a storage"},
        {PK("\x80\x02(X\x06\x00\x00\x00moduleK\x01K\x02K\x03K\x04tQ."), AMN_E_PARSE,
         "unknown persistent id"},
        {PK("\x80\x02\x97."), AMN_E_UNSUPPORTED, "out-of-band buffer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        amn_error err = {0};
        int rc = run_pickle(cases[i].p, cases[i].n, &err);
        if (rc != cases[i].code)
            fail_msg("%s: got %d (%s), expected %d", cases[i].what, rc, err.msg, cases[i].code);
        if (rc == AMN_OK) continue;
        amn_test_expect_words(refusal_words, sizeof refusal_words / sizeof *refusal_words,
                              cases[i].what, err.msg);
    }
    /* The disallowed global is named in the message. */
    amn_error err = {0};
    assert_int_equal(run_pickle(PK("\x80\x02"
                                   "csubprocess\nPopen\n."),
                                &err),
                     AMN_E_DISALLOWED);
    assert_non_null(strstr(err.msg, "subprocess.Popen"));

    /* A nesting bomb of MARKs stops at the depth limit. */
    char *bomb = malloc(100003);
    assert_non_null(bomb);
    memcpy(bomb, "\x80\x02", 2);
    memset(bomb + 2, '(', 100000);
    bomb[100002] = '.';
    assert_int_equal(run_pickle(bomb, 100003, &err), AMN_E_LIMIT);
    assert_non_null(strstr(err.msg, "nesting deeper than the limit"));
    /* So does a flood of values past the value-stack limit. */
    amn_limits lim;
    amn_limits_default(&lim);
    lim.max_array = 1000;
    memset(bomb + 2, 'N', 100000);
    pk_vm *vm = NULL;
    assert_int_equal(pk_run((const uint8_t *)bomb, 100003, &lim, &vm, &err), AMN_E_LIMIT);
    assert_non_null(strstr(err.msg, "value stack too deep"));
    free(bomb);
}

/* Byte flips and truncations of a real data.pkl: never a crash, always a
 * clean result or a typed error. */
static void test_pickle_fuzz(void **state) {
    (void)state;
    size_t n = 0;
    uint8_t *zip = amn_test_read_file(AMN_SOURCE_DIR "/fixtures/pth/checkpoint.pth", &n);
    assert_non_null(zip);
    zip_memsrc ms;
    zip_memsrc_init(&ms, zip, n, "checkpoint.pth");
    amn_limits lim;
    amn_limits_default(&lim);
    zip_dir d;
    assert_int_equal(zip_dir_read(&ms.src, &lim, &d, NULL), AMN_OK);
    const zip_entry *e = zip_dir_find(&d, "archive/data.pkl");
    assert_non_null(e);
    uint8_t *pkl;
    assert_int_equal(zip_read_member(&ms.src, &d, e, 1u << 20, &pkl, NULL), AMN_OK);
    size_t psize = (size_t)e->usize;
    zip_dir_free(&d);
    assert_int_equal(run_pickle((const char *)pkl, psize, NULL), AMN_OK);
    uint8_t *buf = malloc(psize);
    assert_non_null(buf);
    uint32_t seed = 99;
    unsigned ok = 0, failed = 0;
    for (unsigned r = 0; r < 20000; r++) {
        memcpy(buf, pkl, psize);
        int flips = 1 + (int)(r % 3);
        for (int k = 0; k < flips; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t pos = (seed >> 8) % psize;
            seed = seed * 1103515245u + 12345u;
            buf[pos] = (uint8_t)(seed >> 16);
        }
        size_t len = r % 7 == 0 ? (seed >> 4) % psize : psize;
        amn_error err = {0};
        int rc = run_pickle((const char *)buf, len, &err);
        if (rc == AMN_OK)
            ok++;
        else
            failed++;
        assert_true(rc == AMN_OK || rc == AMN_E_PARSE || rc == AMN_E_DISALLOWED ||
                    rc == AMN_E_UNSUPPORTED || rc == AMN_E_LIMIT);
    }
    fprintf(stderr, "pickle fuzz: %u parsed, %u refused\n", ok, failed);
    free(buf);
    free(pkl);
    free(zip);
}

static void test_archive_fuzz(void **state) {
    (void)state;
    zt_fuzz(AMN_SOURCE_DIR "/fixtures/pth/checkpoint.pth", ".pth", 200);
    zt_fuzz(AMN_SOURCE_DIR "/fixtures/pth/views.pth", ".pth", 200);
    zt_fuzz(AMN_SOURCE_DIR "/fixtures/pth/deflated.pth", ".pth", 100);
}

/* The format is found by content whatever the extension (.pt, .bin). */
static void test_extensions(void **state) {
    (void)state;
    size_t n = 0;
    uint8_t *b = amn_test_read_file(AMN_SOURCE_DIR "/fixtures/pth/state_dict.pth", &n);
    assert_non_null(b);
    static const char *ext[] = {".pt", ".bin", ".ckpt", ""};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        amn_error err = {0};
        if (zt_try_bytes(b, n, ext[i], &err) != AMN_OK) fail_msg("%s: %s", ext[i], err.msg);
    }
    free(b);
}

static void test_limits(void **state) {
    (void)state;
    amn_limits lim;
    amn_limits_default(&lim);
    lim.max_tensors = 5;
    amn_error err = {0};
    amn_model *m = NULL;
    assert_int_equal(
        amn_open(zt_ctx, AMN_SOURCE_DIR "/fixtures/pth/checkpoint.pth", NULL, &lim, &m, &err),
        AMN_E_LIMIT);
    amn_limits_default(&lim);
    lim.max_header_bytes = 100; /* data.pkl is larger */
    assert_int_equal(
        amn_inspect(zt_ctx, AMN_SOURCE_DIR "/fixtures/pth/checkpoint.pth", NULL, &lim, &m, &err),
        AMN_E_LIMIT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference),           cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_views_share_storage), cmocka_unit_test(test_pickle_vm),
        cmocka_unit_test(test_pickle_fuzz),         cmocka_unit_test(test_archive_fuzz),
        cmocka_unit_test(test_extensions),          cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, zt_setup, zt_teardown);
}
