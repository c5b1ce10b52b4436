/* The npz plugin: the Gemma Scope reference archive (fixtures README §8),
 * the generated fixtures in fixtures/npz (numpy.load's bytes recorded by
 * gen_fixtures.py) through open, inspect and `amn remember`, the NPY header
 * parser on its own, and malformed archives. */
#include "zip_test_util.h"

#include "amn/kit/sha256.h"
#include "npy_header.h"

static uint32_t rd32le(const uint8_t *p) {
    return amn_test_u32(p);
}
static void wr32le(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void test_reference_gemma(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    char path[4096];
    snprintf(path, sizeof path, "%s/npz_reference/gemma_scope_reference.bin", ref);
    size_t size = 0;
    uint8_t *r = amn_test_read_file(path, &size);
    assert_non_null(r);
    snprintf(path, sizeof path, "%s/npz_reference/gemma_scope_small.npz", ref);
    amn_error err = {0};
    amn_model *m = NULL, *mi = NULL;
    if (amn_open(zt_ctx, path, NULL, NULL, &m, &err) != AMN_OK) fail_msg("%s", err.msg);
    assert_int_equal(amn_inspect(zt_ctx, path, NULL, NULL, &mi, &err), AMN_OK);
    static const amn_dtype ids[] = {AMN_DTYPE_BOOL, AMN_DTYPE_U8,  AMN_DTYPE_I8,   AMN_DTYPE_U16,
                                    AMN_DTYPE_I16,  AMN_DTYPE_U32, AMN_DTYPE_I32,  AMN_DTYPE_U64,
                                    AMN_DTYPE_I64,  AMN_DTYPE_F16, AMN_DTYPE_BF16, AMN_DTYPE_F32,
                                    AMN_DTYPE_F64};
    size_t pos = 0;
    assert_true(size >= 4);
    uint32_t n = rd32le(r);
    pos = 4;
    assert_int_equal(amn_model_tensor_count(m), n);
    size_t compared = 0;
    for (uint32_t i = 0; i < n; i++) {
        assert_true(pos + 4 <= size);
        uint32_t nl = rd32le(r + pos);
        pos += 4;
        assert_true(pos + nl <= size);
        char name[256];
        assert_true(nl < sizeof name);
        memcpy(name, r + pos, nl);
        name[nl] = '\0';
        pos += nl;
        uint32_t ndim = rd32le(r + pos);
        pos += 4 + 8 * (size_t)ndim; /* the original (large) shape: not this file's */
        uint32_t dtype_id = rd32le(r + pos);
        uint32_t len = rd32le(r + pos + 4);
        pos += 8;
        assert_true(pos + len <= size);
        assert_true(dtype_id < sizeof ids / sizeof ids[0]);
        int64_t k = amn_model_find(m, name);
        if (k < 0) fail_msg("array %s missing", name);
        const amn_tensor *t = amn_model_tensor(m, (size_t)k);
        assert_int_equal(t->dtype, ids[dtype_id]);
        uint64_t numel;
        assert_true(amn_tensor_numel(t, &numel));
        assert_int_equal(numel, 8);
        assert_int_equal(t->nbytes, len);
        uint8_t *got = zt_tensor_bytes(t);
        assert_memory_equal(got, r + pos, len);
        free(got);
        compared += len;
        /* inspect: same header facts, no data */
        const amn_tensor *ti = amn_model_tensor(mi, (size_t)amn_model_find(mi, name));
        assert_null(ti->data);
        assert_int_equal(ti->dtype, t->dtype);
        assert_int_equal(ti->nbytes, t->nbytes);
        assert_int_equal(ti->file_offset, t->file_offset);
        pos += len;
    }
    assert_int_equal(pos, size);
    assert_int_equal(compared, 160);
    amn_model_free(m);
    amn_model_free(mi);
    free(r);
}

static void test_fixtures(void **state) {
    (void)state;
    zt_run_expected(AMN_SOURCE_DIR "/fixtures/npz", "npz");
}

/* ---- the header parser alone --------------------------------------------- */

/* The message of the last parse_hdr call. */
static char hdr_msg[AMN_ERROR_MSG_MAX];

static int parse_hdr(const char *dict, npy_header *h) {
    uint8_t buf[512];
    size_t n = strlen(dict);
    assert_true(n + 11 < sizeof buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(n + 1);
    buf[9] = 0;
    memcpy(buf + 10, dict, n);
    buf[10 + n] = '\n';
    amn_error err = {0};
    int rc = npy_parse_header(buf, n + 11, "x", h, &err);
    memcpy(hdr_msg, err.msg, sizeof hdr_msg);
    return rc;
}

static void test_npy_header(void **state) {
    (void)state;
    npy_header h;
    assert_int_equal(parse_hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", &h),
                     AMN_OK);
    assert_int_equal(h.dtype, AMN_DTYPE_F32);
    assert_int_equal(h.ndim, 2);
    assert_int_equal(h.nbytes, 48);
    assert_int_equal(parse_hdr("{\"shape\": (), \"fortran_order\": True, \"descr\": \">i8\"}", &h),
                     AMN_OK);
    assert_int_equal(h.ndim, 0);
    assert_true(h.big_endian);
    assert_int_equal(h.nbytes, 8);
    assert_int_equal(parse_hdr("{'descr': '|b1', 'fortran_order': False, 'shape': (2L, 0L), }", &h),
                     AMN_OK);
    assert_int_equal(h.nbytes, 0);
    assert_int_equal(parse_hdr("{'descr': '|V2', 'fortran_order': False, 'shape': (5,)}", &h),
                     AMN_OK);
    assert_int_equal(h.dtype, AMN_DTYPE_BF16);
    /* complex64 / complex128, either byte order. */
    assert_int_equal(parse_hdr("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", &h),
                     AMN_OK);
    assert_int_equal(h.dtype, AMN_DTYPE_C64);
    assert_int_equal(h.nbytes, 24);
    assert_int_equal(parse_hdr("{'descr': '>c16', 'fortran_order': False, 'shape': (3,), }", &h),
                     AMN_OK);
    assert_int_equal(h.dtype, AMN_DTYPE_C128);
    assert_true(h.big_endian);
    assert_int_equal(h.nbytes, 48);

    static const struct {
        const char *dict;
        int code;
        const char *words; /* in the message */
    } bad[] = {
        {"{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", AMN_E_DISALLOWED,
         "object array (descr '|O') needs pickle"},
        {"{'descr': '<c32', 'fortran_order': False, 'shape': (3,), }", AMN_E_UNSUPPORTED,
         "NPY dtype '<c32' is not supported"},
        {"{'descr': '<U5', 'fortran_order': False, 'shape': (3,), }", AMN_E_UNSUPPORTED,
         "NPY dtype '<U5' is not supported"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", AMN_E_UNSUPPORTED,
         "structured NPY dtypes are not supported"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }",
         AMN_E_UNSUPPORTED, "more than 8 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, }", AMN_E_PARSE,
         "lacks descr, fortran_order or shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", AMN_E_PARSE,
         "unexpected key 'x'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,", AMN_E_PARSE,
         "bad dimension in NPY shape"},
        {"{'descr': '<f4', 'fortran_order': maybe, 'shape': (3,)}", AMN_E_PARSE,
         "bad NPY fortran_order"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}", AMN_E_PARSE,
         "bad dimension in NPY shape"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", AMN_E_PARSE,
         "NPY shape overflows"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
         AMN_E_PARSE, "bad dimension in NPY shape"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", AMN_E_PARSE,
         "unexpected key 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} junk", AMN_E_PARSE,
         "junk after the NPY header dict"},
        {"[1, 2]", AMN_E_PARSE, "NPY header is not a dict"},
        {"{'descr': '<f4\\x00', 'fortran_order': False, 'shape': (3,)}", AMN_E_PARSE,
         "bad NPY descr"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse_hdr(bad[i].dict, &h);
        if (rc != bad[i].code) fail_msg("'%s' gave %d, expected %d", bad[i].dict, rc, bad[i].code);
        if (!strstr(hdr_msg, bad[i].words))
            fail_msg("'%s': \"%s\" lacks \"%s\"", bad[i].dict, hdr_msg, bad[i].words);
    }
    /* Preamble lies: header length past the buffer, unknown version. */
    uint8_t p[16] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xff, 0xff, '{', '}'};
    amn_error err = {0};
    assert_int_equal(npy_parse_header(p, 12, "x", &h, &err), AMN_E_PARSE);
    assert_non_null(strstr(err.msg, "NPY header (65545 bytes) truncated"));
    p[6] = 4;
    assert_int_equal(npy_parse_header(p, 12, "x", &h, &err), AMN_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "NPY format version 4.0"));
}

/* ---- malformed archives ----------------------------------------------------- */

static uint8_t *load_fixture(const char *name, size_t *n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/fixtures/npz/%s", AMN_SOURCE_DIR, name);
    uint8_t *b = amn_test_read_file(path, n);
    assert_non_null(b);
    return b;
}

static size_t find_last(const uint8_t *b, size_t n, const char *sig) {
    for (size_t i = n - 4; i-- > 0;)
        if (memcmp(b + i, sig, 4) == 0) return i;
    fail_msg("signature not found");
    return 0;
}

/* Words each corruption's message must hold, by its description. */
static const amn_test_words malformed_words[] = {
    {"truncated to half", "no end of central directory"},
    {"end record cut", "no end of central directory"},
    {"no end record", "no end of central directory"},
    {"directory offset past EOF",
     "central directory (offset 5669, 1153 bytes) lies outside the archive"},
    {"directory size past EOF", "lies outside the archive"},
    {"entry count lies", "255 entries cannot fit a 1153-byte central directory"},
    {"bad directory header", "bad central directory header 0"},
    {"local header offset past EOF", "local header offset 4294967280 lies past the data area"},
    {"member size past EOF", "runs past the data area"},
    {"bad local header", "unrecognised file format"},
    {"unknown compression method", "uses compression method 12"},
    {"encrypted member", "entry 'f16.npy' is encrypted"},
    {"CRC mismatch", "disagree (CRC-32)"},
    {"stored data damaged", "entry 'f16.npy': CRC-32 mismatch"},
    {"corrupt DEFLATE stream", "corrupt DEFLATE data"},
    {"inflated size lie", "disagree (sizes)"},
};

static void expect_code(const uint8_t *b, size_t n, int code, const char *what) {
    amn_error err = {0};
    int rc = zt_try_bytes(b, n, ".npz", &err);
    if (rc != code) fail_msg("%s: got %d (%s), expected %d", what, rc, err.msg, code);
    amn_test_expect_words(malformed_words, sizeof malformed_words / sizeof *malformed_words, what,
                          err.msg);
}

static void test_malformed(void **state) {
    (void)state;
    size_t n = 0;
    uint8_t *orig = load_fixture("stored.npz", &n);
    uint8_t *b = malloc(n);
    assert_non_null(b);
    size_t eocd = find_last(orig, n, "PK\x05\x06");
    uint32_t cd_off = rd32le(orig + eocd + 16);

#define RESET() memcpy(b, orig, n)
    RESET();
    expect_code(b, n / 2, AMN_E_PARSE, "truncated to half");
    expect_code(b, n - 10, AMN_E_PARSE, "end record cut");
    RESET();
    b[eocd] = 'X';
    expect_code(b, n, AMN_E_PARSE, "no end record");
    RESET();
    wr32le(b + eocd + 16, (uint32_t)n + 100);
    expect_code(b, n, AMN_E_PARSE, "directory offset past EOF");
    RESET();
    wr32le(b + eocd + 12, 0x7fffffff);
    expect_code(b, n, AMN_E_PARSE, "directory size past EOF");
    RESET();
    b[eocd + 10] = 0xff;
    b[eocd + 8] = 0xff;
    expect_code(b, n, AMN_E_PARSE, "entry count lies");
    RESET();
    b[cd_off] = 'X';
    expect_code(b, n, AMN_E_PARSE, "bad directory header");
    RESET();
    wr32le(b + cd_off + 42, 0xfffffff0u);
    expect_code(b, n, AMN_E_PARSE, "local header offset past EOF");
    RESET();
    wr32le(b + cd_off + 20, 0x7ffffff0u); /* compressed size */
    wr32le(b + cd_off + 24, 0x7ffffff0u);
    expect_code(b, n, AMN_E_PARSE, "member size past EOF");
    RESET();
    b[0] = 'X'; /* first local header */
    expect_code(b, n, AMN_E_PARSE, "bad local header");
    RESET();
    b[cd_off + 10] = 12; /* method: bzip2 */
    expect_code(b, n, AMN_E_UNSUPPORTED, "unknown compression method");
    RESET();
    b[cd_off + 8] |= 1; /* encrypted */
    expect_code(b, n, AMN_E_UNSUPPORTED, "encrypted member");
    RESET();
    /* A stored member is used in place: a changed byte of its data is told
     * by its CRC-32 alone (numpy's zipfile refuses it too). */
    uint32_t lo0 = rd32le(b + cd_off + 42);
    size_t data0 = lo0 + 30 + (b[lo0 + 26] | b[lo0 + 27] << 8) + (b[lo0 + 28] | b[lo0 + 29] << 8);
    b[data0 + rd32le(b + cd_off + 20) - 1] ^= 1;
    expect_code(b, n, AMN_E_PARSE, "stored data damaged");
    free(orig);

    /* A DEFLATE member whose stream is damaged, or whose CRC disagrees. */
    orig = load_fixture("compressed.npz", &n);
    b = realloc(b, n);
    assert_non_null(b);
    RESET();
    eocd = find_last(orig, n, "PK\x05\x06");
    cd_off = rd32le(orig + eocd + 16);
    uint32_t crc = rd32le(b + cd_off + 16);
    wr32le(b + cd_off + 16, crc ^ 1u);
    expect_code(b, n, AMN_E_PARSE, "CRC mismatch");
    RESET();
    uint32_t lo = rd32le(b + cd_off + 42);
    size_t data = lo + 30 + (b[lo + 26] | b[lo + 27] << 8) + (b[lo + 28] | b[lo + 29] << 8);
    memset(b + data, 0xff, 8);
    expect_code(b, n, AMN_E_PARSE, "corrupt DEFLATE stream");
    RESET();
    wr32le(b + cd_off + 24, rd32le(b + cd_off + 24) + 1); /* usize one too big */
    expect_code(b, n, AMN_E_PARSE, "inflated size lie");
#undef RESET
    free(orig);
    free(b);
}

static void test_limits(void **state) {
    (void)state;
    amn_limits lim;
    amn_limits_default(&lim);
    lim.max_tensors = 3;
    amn_error err = {0};
    amn_model *m = NULL;
    assert_int_equal(
        amn_open(zt_ctx, AMN_SOURCE_DIR "/fixtures/npz/stored.npz", NULL, &lim, &m, &err),
        AMN_E_LIMIT);
    amn_limits_default(&lim);
    lim.max_alloc = 100; /* inflating the compressed archive needs more */
    assert_int_equal(
        amn_open(zt_ctx, AMN_SOURCE_DIR "/fixtures/npz/compressed.npz", NULL, &lim, &m, &err),
        AMN_E_LIMIT);
    amn_limits_default(&lim);
    lim.max_header_bytes = 64; /* the central directory is larger */
    assert_int_equal(
        amn_inspect(zt_ctx, AMN_SOURCE_DIR "/fixtures/npz/stored.npz", NULL, &lim, &m, &err),
        AMN_E_LIMIT);
    /* The ratio cap spares members of at most ratio_min_size bytes: with a
     * 1:1 cap every DEFLATE member is over it, and the largest member (its
     * size read from the central directory) just passes or just fails. */
    size_t n = 0;
    uint8_t *b = load_fixture("compressed.npz", &n);
    const size_t eocd = find_last(b, n, "PK\x05\x06");
    const unsigned count = b[eocd + 10] | b[eocd + 11] << 8;
    uint64_t largest = 0;
    for (size_t at = rd32le(b + eocd + 16), k = 0; k < count; k++) {
        const uint32_t usize = rd32le(b + at + 24), csize = rd32le(b + at + 20);
        assert_true(usize > csize);
        if (usize > largest) largest = usize;
        at += 46 + (b[at + 28] | b[at + 29] << 8) + (b[at + 30] | b[at + 31] << 8) +
              (b[at + 32] | b[at + 33] << 8);
    }
    free(b);
    const char *c = AMN_SOURCE_DIR "/fixtures/npz/compressed.npz";
    amn_limits_default(&lim);
    lim.max_ratio = 1;
    lim.ratio_min_size = largest;
    if (amn_open(zt_ctx, c, NULL, &lim, &m, &err) != AMN_OK) fail_msg("%s", err.msg);
    amn_model_free(m);
    m = NULL;
    lim.ratio_min_size = largest - 1;
    assert_int_equal(amn_open(zt_ctx, c, NULL, &lim, &m, &err), AMN_E_LIMIT);
    assert_non_null(strstr(err.msg, "1:1 ratio cap"));
    lim.max_ratio = 0; /* off */
    if (amn_open(zt_ctx, c, NULL, &lim, &m, &err) != AMN_OK) fail_msg("%s", err.msg);
    amn_model_free(m);
}

/* Open files of this process whose path starts with dir (a scratch file
 * shows as "DIR/#INODE (deleted)"). */
static int open_files_in(const char *dir) {
    int n = 0;
    for (int fd = 0; fd < 1024; fd++) {
        char link[64], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        const ssize_t k = readlink(link, target, sizeof target - 1);
        if (k <= 0) continue;
        target[k] = '\0';
        if (strncmp(target, dir, strlen(dir)) == 0 && target[strlen(dir)] == '/') n++;
    }
    return n;
}

/* Each array's bytes against the SHA-256 gen_fixtures.py recorded of
 * numpy.load's. */
static void check_spill_digests(const amn_model *m) {
    FILE *f = fopen(AMN_SOURCE_DIR "/fixtures/npz/spill.npz.sha256", "r");
    assert_non_null(f);
    char name[64], want[65];
    size_t seen = 0;
    while (fscanf(f, "%63s %64s", name, want) == 2) {
        const int64_t k = amn_model_find(m, name);
        if (k < 0) fail_msg("spill.npz: no array %s", name);
        const amn_tensor *t = amn_model_tensor(m, (size_t)k);
        uint8_t *got = zt_tensor_bytes(t), digest[32];
        char hex[65];
        kit_sha256_of(got, (size_t)t->nbytes, digest);
        kit_sha256_hex(digest, hex);
        free(got);
        if (strcmp(hex, want) != 0)
            fail_msg("spill.npz: %s: sha256 %s, numpy's %s", name, hex, want);
        seen++;
    }
    fclose(f);
    assert_int_equal(seen, 2);
    assert_int_equal(amn_model_tensor_count(m), 2);
}

/* A deflated member over 1 MiB is inflated into a scratch file in $TMPDIR
 * (open while the model lives), the small one onto the heap; where no
 * scratch file can be made, both onto the heap. Same bytes either way. */
static void test_spilled(void **state) {
    (void)state;
    const char *path = AMN_SOURCE_DIR "/fixtures/npz/spill.npz";
    const char *old = getenv("TMPDIR");
    char *saved = old ? strdup(old) : NULL;
    char dir[] = "/tmp/amn-test-npz-XXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("TMPDIR", dir, 1);
    amn_error err = {0};
    amn_model *m = NULL;
    if (amn_open(zt_ctx, path, NULL, NULL, &m, &err) != AMN_OK) fail_msg("%s", err.msg);
    assert_int_equal(open_files_in(dir), 1);
    check_spill_digests(m);
    amn_model_free(m);
    assert_int_equal(open_files_in(dir), 0);
    setenv("TMPDIR", "/nonexistent-amn-folder", 1);
    if (amn_open(zt_ctx, path, NULL, NULL, &m, &err) != AMN_OK) fail_msg("%s", err.msg);
    check_spill_digests(m);
    amn_model_free(m);
    assert_int_equal(rmdir(dir), 0); /* nothing was left in it */
    if (saved)
        setenv("TMPDIR", saved, 1);
    else
        unsetenv("TMPDIR");
    free(saved);
}

static void test_fuzz(void **state) {
    (void)state;
    zt_fuzz(AMN_SOURCE_DIR "/fixtures/npz/stored.npz", ".npz", 200);
    zt_fuzz(AMN_SOURCE_DIR "/fixtures/npz/compressed.npz", ".npz", 200);
    zt_fuzz(AMN_SOURCE_DIR "/fixtures/npz/zip64.npz", ".npz", 100);
    zt_fuzz(AMN_SOURCE_DIR "/fixtures/npz/spill.npz", ".npz", 100); /* a scratch file */
    zt_fuzz(AMN_SOURCE_DIR "/fixtures/npz/v2.npy", ".npy", 100);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_gemma),
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_npy_header),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_spilled),
        cmocka_unit_test(test_fuzz),
    };
    return cmocka_run_group_tests(tests, zt_setup, zt_teardown);
}
