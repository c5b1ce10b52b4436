/* The pth plugin: the AlgZoo reference checkpoints (fixtures README §9),
 * the generated fixtures in fixtures/pth (torch.load's tensors recorded by
 * gen_fixtures.py) through open, inspect and `amn remember`, the pickle VM
 * on hand-written and mutated pickles, and malformed archives. */
#include "../npz/zip_test_util.h"

#include "pickle_vm.h"
#include "amn/kit/zip_reader.h"
#include "amn/byteorder.h"

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
    {"tensor class called", "is not supported"},
    {"unknown layout", "_get_layout of an unknown layout"},
    {"_codecs.encode of a character above U+00FF", "character above U+00FF"},
    {"dtype alias torch.float (not str(dtype))", "'torch.float' is not allowed"},
    {"a byte after STOP", "bytes after the STOP opcode"},
    {"a second pickle after STOP", "bytes after the STOP opcode"},
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
        {PK("\x80\x02N.N."), AMN_E_DISALLOWED, "a second pickle after STOP"},
        {PK("\x80\x02N.\x00"), AMN_E_DISALLOWED, "a byte after STOP"},
        {PK("\x80\x02"
            "ctorch\nfloat\n."),
         AMN_E_DISALLOWED, "dtype alias torch.float (not str(dtype))"},
        {PK("\x80\x02"
            "c__builtin__\nset\n]K\x01"
            "a\x85R."),
         AMN_OK, "__builtin__.set"},
        {PK("\x80\x02"
            "c_codecs\nencode\nX\x02\x00\x00\x00\xc3\xbfX\x06\x00\x00\x00latin1\x86R."),
         AMN_OK, "_codecs.encode"},
        {PK("\x80\x02"
            "c_codecs\nencode\nX\x03\x00\x00\x00\xe2\x82\xacX\x06\x00\x00\x00latin1\x86R."),
         AMN_E_PARSE, "_codecs.encode of a character above U+00FF"},
        {PK("\x80\x02"
            "c__builtin__\ncomplex\nK\x01K\x02\x86R."),
         AMN_OK, "complex"},
        {PK("\x80\x02"
            "ctorch\ndevice\nX\x04\x00\x00\x00"
            "cudaK\x01\x86R."),
         AMN_OK, "torch.device('cuda', 1)"},
        {PK("\x80\x02"
            "ctorch.serialization\n_get_layout\nX\x03\x00\x00\x00"
            "bad\x85R."),
         AMN_E_PARSE, "unknown layout"},
        {PK("\x80\x02"
            "ctorch\nFloatTensor\n]\x85R."),
         AMN_E_UNSUPPORTED, "tensor class called"},
        {PK("\x80\x02"
            "ccollections\nCounter\n}\x85R."),
         AMN_OK, "Counter"},
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

/* ---- hostile containers, weights-only values, amn scan ------------------- */

#include <dirent.h>

#define FX AMN_SOURCE_DIR "/fixtures/pth/"

/* Each container bypass: refused as disallowed, the message naming what
 * was found; and amn scan calls the file unsafe with a finding of that
 * kind whose text holds the same words. */
static const struct {
    const char *file, *words, *scan_kind, *scan_words;
} bypasses[] = {
    {"bypass_two_eocd.pth", "two end-of-central-directory records", "container",
     "two end-of-central-directory"},
    {"bypass_case_variant.pth", "same name (ignoring case)", "container", "ignoring case"},
    {"bypass_torchscript.pth", "TorchScript archive (constants.pkl)", "container", "TorchScript"},
    {"bypass_polyglot.pth", "starts with a pickle", "container", "polyglot"},
    {"bypass_after_stop.pth", "bytes after the STOP opcode", "trailing", "after the STOP"},
    {"bypass_second_pkl.pth", "a second pickle member", "container", "second pickle member"},
    {"bypass_unreferenced.pth", "referenced by no tensor and holds a pickle", "container",
     "holds a pickle"},
    {"bypass_hidden_member.pth", "belong to no member", "container", "belong to no member"},
    {"bypass_local_name.pth", "disagrees with the central directory (name)", "container",
     "disagrees"},
    {"bypass_two_names.pth", "disagrees with the central directory", "container", "disagrees"},
    {"bypass_trailing.pth", "bytes after the end of central directory", "container",
     "after the end of central directory"},
};

static bool has_finding(const amn_scan_report *r, const char *kind, const char *words,
                        bool unsafe) {
    for (size_t i = 0; i < amn_scan_count(r); i++) {
        const amn_scan_finding *f = amn_scan_get(r, i);
        if (strcmp(f->kind, kind) == 0 && strstr(f->what, words) && f->unsafe == unsafe)
            return true;
    }
    return false;
}

static amn_scan_report *scan_file(const char *path, const char *from) {
    amn_scan_report *r = NULL;
    amn_error err = {0};
    if (amn_scan(zt_ctx, path, from, NULL, &r, &err) != AMN_OK) fail_msg("%s: %s", path, err.msg);
    return r;
}

static void test_bypasses_refused(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bypasses / sizeof *bypasses; i++) {
        char path[4096];
        snprintf(path, sizeof path, FX "%s", bypasses[i].file);
        for (int forced = 0; forced < 2; forced++) {
            amn_error err = {0};
            amn_model *m = NULL;
            int rc = amn_open(zt_ctx, path, forced ? "pth" : NULL, NULL, &m, &err);
            if (rc != AMN_E_DISALLOWED || !strstr(err.msg, bypasses[i].words))
                fail_msg("%s%s: %d '%s'", bypasses[i].file, forced ? " --from pth" : "", rc,
                         err.msg);
            rc = amn_inspect(zt_ctx, path, forced ? "pth" : NULL, NULL, &m, &err);
            if (rc != AMN_E_DISALLOWED)
                fail_msg("%s: inspect gave %d '%s'", bypasses[i].file, rc, err.msg);
        }
        amn_scan_report *r = scan_file(path, NULL);
        if (!amn_scan_unsafe(r) ||
            !has_finding(r, bypasses[i].scan_kind, bypasses[i].scan_words, true))
            fail_msg("%s: scan does not report %s '%s'", bypasses[i].file, bypasses[i].scan_kind,
                     bypasses[i].scan_words);
        /* Wherever the payload's pickle is reachable, its global is named. */
        bool payload_listed = has_finding(r, "global", "builtins.open", true);
        bool reachable = strcmp(bypasses[i].file, "bypass_torchscript.pth") != 0 &&
                         strcmp(bypasses[i].file, "bypass_local_name.pth") != 0 &&
                         strcmp(bypasses[i].file, "bypass_two_names.pth") != 0 &&
                         strcmp(bypasses[i].file, "bypass_trailing.pth") != 0;
        if (reachable && !payload_listed)
            fail_msg("%s: scan does not name the payload's global", bypasses[i].file);
        amn_scan_free(r);
    }
}

/* Values and tensors torch.load(weights_only=True) accepts: they load (the
 * values as notes, fixtures/pth/expected.json) and scan as safe. */
static void test_weights_only_values(void **state) {
    (void)state;
    static const char *safe[] = {
        "fp_bytes.pth",    "fp_bytearray.pth",  "fp_set.pth",          "fp_complex.pth",
        "fp_counter.pth",  "fp_device.pth",     "fp_dtype_layout.pth", "fp_values_p4.pth",
        "fp_training.pth", "fp_sparse_coo.pth", "fp_sparse_csr.pth",   "fp_complex_tensor.pth",
        "state_dict.pth",  "checkpoint.pth",    "views.pth",           "protocol4.pth",
        "protocol5.pth",   "objects.pth",       "from_type_v2.pth",    "v3_uint16.pth",
        "big_endian.pth",  "deflated.pth",      "named_prefix.pth",    "legacy.pth",
        "legacy_p4.pt",    "root_tensor.pth",
    };
    for (size_t i = 0; i < sizeof safe / sizeof *safe; i++) {
        char path[4096];
        snprintf(path, sizeof path, FX "%s", safe[i]);
        amn_scan_report *r = scan_file(path, NULL);
        if (amn_scan_unsafe(r)) {
            for (size_t k = 0; k < amn_scan_count(r); k++)
                if (amn_scan_get(r, k)->unsafe)
                    fprintf(stderr, "  %s: %s\n", amn_scan_get(r, k)->kind,
                            amn_scan_get(r, k)->what);
            fail_msg("%s: scanned unsafe", safe[i]);
        }
        assert_true(has_finding(r, "global", "(allowed;", false) || strstr(safe[i], "legacy"));
        amn_scan_free(r);
    }
    /* A complex tensor (ComplexFloatStorage): C64, real and imaginary parts
     * as torch.tensor([1 + 2j, 3 - 1j]) stores them. */
    amn_error err = {0};
    amn_model *m = NULL;
    if (amn_open(zt_ctx, FX "fp_complex_tensor.pth", NULL, NULL, &m, &err) != AMN_OK)
        fail_msg("%s", err.msg);
    const int64_t k = amn_model_find(m, "ct");
    assert_true(k >= 0);
    const amn_tensor *t = amn_model_tensor(m, (size_t)k);
    assert_int_equal(t->dtype, AMN_DTYPE_C64);
    assert_int_equal(t->ndim, 1);
    assert_int_equal(t->shape[0], 2);
    uint8_t v[16], want[16]; /* tensor bytes: little-endian binary32 pairs */
    assert_int_equal(amn_tensor_read(t, 0, v, sizeof v, &err), AMN_OK);
    const float parts[4] = {1, 2, 3, -1};
    for (int i = 0; i < 4; i++) amn_store_le_f32(want + 4 * i, parts[i]);
    assert_memory_equal(v, want, sizeof v);
    amn_model_free(m);
}

/* Each unsafe pickle class, reported by the scanner and named. */
static void test_scan_pickle_classes(void **state) {
    (void)state;
    static const struct {
        const char *p;
        size_t n;
        const char *kind, *words;
    } cases[] = {
        {PK("\x80\x02"
            "cos\nsystem\nX\x02\x00\x00\x00lsq\x00\x85R."),
         "call", "REDUCE of os.system"},
        {PK("\x80\x04\x8c\x08"
            "builtins\x8c\x04"
            "exec\x93)R."),
         "global", "builtins.exec"},
        {PK("\x80\x02(X\x01\x00\x00\x00xios\nsystem\n."), "object", "INST"},
        {PK("\x80\x02(cos\nsystem\nX\x01\x00\x00\x00xo."), "object", "OBJ"},
        {PK("\x80\x02\x82\x01)R."), "extension", "EXT1"},
        {PK("\x80\x02(X\x06\x00\x00\x00moduleK\x01K\x02K\x03K\x04tQ."), "persid",
         "unexpected shape"},
        {PK("\x80\x02P1\n."), "persid", "PERSID"},
        {PK("\x80\x02}}b."), "build", "BUILD with state"},
        {PK("\x80\x02"
            "ccollections\nOrderedDict\n)R}X\x01\x00\x00\x00"
            "xK\x01sb."),
         "build", "BUILD on collections.OrderedDict"},
        {PK("\x80\x02"
            "C\x05\x80\x02N.."),
         "nested-pickle", "inside a string"},
        {PK("\x80\x02X\x07\x00\x00\x00\xc2\x80\x02N.N.."), "nested-pickle", "inside a string"},
        {PK("\x80\x02N.\x80\x02N."), "trailing", "after the STOP"},
        {PK("\x80\x02N"), "malformed", "no STOP"},
        {PK("\x80\x02\xff."), "malformed", "unknown opcode"},
        {PK("\x80\x02"
            "ctorch\nfloat\n."),
         "global", "torch.float (not on"},
        {PK("\x80\x02X\x02\x00\x00\x00osX\x06\x00\x00\x00system\x93."), "global", "os.system"},
    };
    amn_limits lim;
    amn_limits_default(&lim);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        amn_scan_report *r = NULL;
        /* a scan report is made by amn_scan; reach the scanner through a
         * raw pickle file */
        char path[4096];
        snprintf(path, sizeof path, "%s/zt_scan_%d.pkl", AMN_BINARY_DIR, (int)getpid());
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(cases[i].p, 1, cases[i].n, f), cases[i].n);
        fclose(f);
        r = scan_file(path, "pth");
        unlink(path);
        bool unsafe_expected = strncmp(cases[i].words, "BUILD on", 8) != 0;
        if (!has_finding(r, cases[i].kind, cases[i].words, unsafe_expected))
            fail_msg("case %zu: no %s finding '%s'", i, cases[i].kind, cases[i].words);
        if (unsafe_expected != amn_scan_unsafe(r)) fail_msg("case %zu: wrong verdict", i);
        amn_scan_free(r);
    }
}

static bool dir_has_marker(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    bool found = false;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "amn-marker-", 11) == 0) found = true;
    closedir(d);
    return found;
}

/* No command ever runs a payload: parse, inspect, remember, convert and
 * scan of every hostile file, each forced to pth too, inside an empty
 * directory where a payload would leave its marker; and the CLI's exit
 * codes (5 refused or unsafe, 0 safe, 1 unreadable). */
static void test_cli_no_marker(void **state) {
    (void)state;
    AMN_REQUIRE_PLUGIN("safetensors");
    char dir[] = "/tmp/amn-pthsec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    const char *cmds[] = {"parse '" FX "%s'",
                          "parse --from pth '" FX "%s'",
                          "inspect '" FX "%s'",
                          "remember '" FX "%s' -o out.safetensors",
                          "convert '" FX "%s' --to gguf -o out.gguf",
                          "scan '" FX "%s'",
                          "scan --json '" FX "%s'"};
    size_t n = 0;
    for (size_t i = 0; i < sizeof bypasses / sizeof *bypasses + 3; i++) {
        const char *file =
            i < sizeof bypasses / sizeof *bypasses
                ? bypasses[i].file
                : (const char *[]){"hostile_system.pth", "hostile_eval.pth",
                                   "hostile_nested.pth"}[i - sizeof bypasses / sizeof *bypasses];
        for (size_t c = 0; c < sizeof cmds / sizeof *cmds; c++) {
            char sub[4200], cmd[9000];
            snprintf(sub, sizeof sub, cmds[c], file);
            snprintf(cmd, sizeof cmd, "cd '%s' && '%s/bin/amn' %s >/dev/null 2>&1", dir,
                     AMN_BINARY_DIR, sub);
            int rc = zt_run(cmd);
            if (rc != 5) fail_msg("%s: exit %d, expected 5", cmd, rc);
            n++;
        }
        assert_false(dir_has_marker(dir));
    }
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%s/bin/amn' scan '%s' '%s' >/dev/null", AMN_BINARY_DIR,
             FX "state_dict.pth", FX "fp_training.pth");
    assert_int_equal(zt_run(cmd), 0);
    snprintf(cmd, sizeof cmd, "'%s/bin/amn' scan '%s' '%s' >/dev/null 2>&1", AMN_BINARY_DIR,
             FX "state_dict.pth", FX "expected.json");
    assert_int_equal(zt_run(cmd), 1);
    snprintf(cmd, sizeof cmd, "'%s/bin/amn' scan '%s' '%s' '%s' >/dev/null 2>&1", AMN_BINARY_DIR,
             FX "state_dict.pth", FX "expected.json", FX "bypass_two_eocd.pth");
    assert_int_equal(zt_run(cmd), 5);
    /* --json is one JSON document with a verdict per file. */
    char out[4200];
    snprintf(out, sizeof out, "%s/scan.json", dir);
    snprintf(cmd, sizeof cmd, "'%s/bin/amn' scan --json '%s' '%s' '%s' > '%s'", AMN_BINARY_DIR,
             FX "state_dict.pth", FX "expected.json", FX "hostile_system.pth", out);
    assert_int_equal(zt_run(cmd), 5);
    json_object *j = json_object_from_file(out);
    assert_non_null(j);
    json_object *files = json_object_object_get(j, "files");
    assert_int_equal(json_object_array_length(files), 3);
    static const char *verdicts[] = {"safe", "unreadable", "unsafe"};
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(json_object_get_string(json_object_object_get(
                                json_object_array_get_idx(files, i), "verdict")),
                            verdicts[i]);
    json_object_put(j);
    unlink(out);
    assert_false(dir_has_marker(dir));
    rmdir(dir);
    fprintf(stderr, "no marker after %zu runs of hostile files\n", n);
}

/* Other formats scan as safe after a structural check; npz object arrays
 * have their pickle scanned. */
static void test_scan_other_formats(void **state) {
    (void)state;
    AMN_REQUIRE_PLUGIN("safetensors");
    amn_scan_report *r = scan_file(AMN_SOURCE_DIR "/fixtures/npz/stored.npz", NULL);
    assert_false(amn_scan_unsafe(r));
    amn_scan_free(r);
    r = scan_file(AMN_SOURCE_DIR "/fixtures/npz/object.npz", NULL);
    assert_true(amn_scan_unsafe(r));
    assert_true(has_finding(r, "object", "object array", true));
    assert_true(has_finding(r, "global", "numpy", true));
    amn_scan_free(r);
    r = scan_file(AMN_SOURCE_DIR "/fixtures/example/tiny-f32.safetensors", NULL);
    assert_false(amn_scan_unsafe(r));
    assert_true(has_finding(r, "structure", "header checked", false));
    amn_scan_free(r);
    amn_error err = {0};
    assert_int_equal(
        amn_scan(zt_ctx, AMN_SOURCE_DIR "/fixtures/pth/expected.json", NULL, NULL, &r, &err),
        AMN_E_PARSE);
}

/* Scan caps: a pickle past max_header_bytes is a limit, not a read. */
static void test_scan_limits(void **state) {
    (void)state;
    amn_limits lim;
    amn_limits_default(&lim);
    lim.max_header_bytes = 1500; /* the directory (1.3 kB) fits, data.pkl (1.8 kB) not */
    amn_scan_report *r = NULL;
    amn_error err = {0};
    assert_int_equal(amn_scan(zt_ctx, FX "checkpoint.pth", NULL, &lim, &r, &err), AMN_OK);
    assert_true(amn_scan_unsafe(r));
    assert_true(has_finding(r, "malformed", "exceeds", true));
    amn_scan_free(r);
    lim.max_header_bytes = 100; /* nor does the directory: unreadable */
    assert_int_equal(amn_scan(zt_ctx, FX "checkpoint.pth", NULL, &lim, &r, &err), AMN_E_LIMIT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference),           cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_views_share_storage), cmocka_unit_test(test_pickle_vm),
        cmocka_unit_test(test_pickle_fuzz),         cmocka_unit_test(test_archive_fuzz),
        cmocka_unit_test(test_extensions),          cmocka_unit_test(test_limits),
        cmocka_unit_test(test_bypasses_refused),    cmocka_unit_test(test_weights_only_values),
        cmocka_unit_test(test_scan_pickle_classes), cmocka_unit_test(test_cli_no_marker),
        cmocka_unit_test(test_scan_other_formats),  cmocka_unit_test(test_scan_limits),
    };
    return cmocka_run_group_tests(tests, zt_setup, zt_teardown);
}
