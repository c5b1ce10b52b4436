/* The kit's ZIP writer and CRC-32 (see CMakeLists.txt). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "amn/amn.h"
#include "amn/kit/crc32.h"
#include "amn/kit/zip_reader.h"
#include "amn/kit/zip_writer.h"
#include "amn_test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* n bytes from rnd(), the caller's to free. */
static uint8_t *random_bytes(size_t n) {
    uint8_t *b = malloc(n);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)rnd();
    return b;
}

/* Every length 0..1100 at every offset 0..63 (the 16/64/256-byte block
 * boundaries and tails of each path), then random long runs and chained
 * calls, against zlib. */
static void test_crc_matches_zlib(void **state) {
    (void)state;
    const size_t n = 3u << 20;
    uint8_t *b = random_bytes(n);
    for (size_t off = 0; off < 64; off += 7)
        for (size_t len = 0; len <= 1100; len++) {
            const uint32_t seed = rnd();
            assert_int_equal(kit_crc32(seed, b + off, len), (uint32_t)crc32_z(seed, b + off, len));
        }
    for (int k = 0; k < 50; k++) {
        const size_t off = rnd() % 4096, len = rnd() % (n - 4096);
        assert_int_equal(kit_crc32(0, b + off, len), (uint32_t)crc32_z(0, b + off, len));
    }
    uint32_t chained = 0;
    for (size_t at = 0; at < n;) {
        size_t len = rnd() % 70000;
        if (len > n - at) len = n - at;
        chained = kit_crc32(chained, b + at, len);
        at += len;
    }
    assert_int_equal(chained, (uint32_t)crc32_z(0, b, n));
    /* Known value: CRC-32 of "123456789". */
    assert_int_equal(kit_crc32(0, "123456789", 9), 0xcbf43926u);
    memset(b, 0xff, 4096);
    assert_int_equal(kit_crc32(0, b, 4096), (uint32_t)crc32_z(0, b, 4096));
    free(b);
}

static void test_name_rules(void **state) {
    (void)state;
    static const char *const ok[] = {"a",
                                     "model.layers.0.weight",
                                     "params/dense/kernel",
                                     "kernel:0",
                                     "naïve",
                                     "日本",
                                     "a.b..c",
                                     "...x"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (zip_name_problem(ok[i], strlen(ok[i]), 100))
            fail_msg("'%s' refused: %s", ok[i], zip_name_problem(ok[i], strlen(ok[i]), 100));
    static const struct {
        const char *name;
        size_t len;
        const char *why;
    } bad[] = {
        {"", 0, "empty"},
        {"/etc/passwd", 11, "absolute"},
        {"../x", 4, "'..'"},
        {"a/../../x", 9, "'..'"},
        {"a/./b", 5, "'.'"},
        {"..", 2, "'..'"},
        {"a//b", 4, "empty path component"},
        {"a/", 2, "empty path component"},
        {"a\\..\\b", 6, "backslash"},
        {"C:x", 3, "drive letter"},
        {"a\nb", 3, "control character"},
        {"a\0b", 3, "NUL"},
        {"\xff\xfe", 2, "not UTF-8"},
        {"\xc0\xaf", 2, "not UTF-8"},     /* overlong '/' */
        {"\xed\xa0\x80", 3, "not UTF-8"}, /* surrogate */
        {"\xe6\x97", 2, "not UTF-8"},     /* cut sequence */
        {"abcdefghijklmnopqrstu", 21, "too long"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *why = zip_name_problem(bad[i].name, bad[i].len, 20);
        if (!why || !strstr(why, bad[i].why))
            fail_msg("case %zu: got '%s', wanted '%s'", i, why ? why : "(accepted)", bad[i].why);
    }
    assert_true(zip_utf8_valid("plain", 5));
    assert_false(zip_utf8_valid("\xf4\x90\x80\x80", 4)); /* past U+10FFFF */
}

/* Write members through a real sink, read the archive back with the kit's
 * reader, check offsets, alignment, sizes, CRCs and the bytes. */
static void write_and_check(const zipw_options *o, size_t n_members, bool expect_z64_end) {
    char dir[] = "/tmp/amn-zipw.XXXXXX", path[4096];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.zip", dir);
    amn_error err = {0};
    amn_sink *sink = NULL;
    assert_int_equal(amn_sink_open(path, false, NULL, 0, &sink, &err), AMN_OK);
    zipw *z = NULL;
    assert_int_equal(zipw_new(sink, o, &z, &err), AMN_OK);
    uint8_t data[3000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)rnd();
    for (size_t k = 0; k < n_members; k++) {
        char name[32];
        snprintf(name, sizeof name, "dir/m%zu", k);
        const size_t len = (k * 997) % sizeof data;
        if (k % 2) {
            assert_int_equal(zipw_add(z, name, data, len, &err), AMN_OK);
        } else { /* streamed in pieces, as the core writes */
            assert_int_equal(zipw_member_begin(z, name, len, &err), AMN_OK);
            for (size_t at = 0; at < len; at += 100)
                assert_int_equal(
                    amn_sink_write(sink, data + at, len - at < 100 ? len - at : 100, &err), AMN_OK);
        }
    }
    assert_int_equal(zipw_finish(z, &err), AMN_OK);
    zipw_free(z);
    assert_int_equal(amn_sink_commit(sink, &err), AMN_OK);

    size_t size = 0;
    uint8_t *f = amn_test_read_file(path, &size);
    assert_non_null(f);
    zip_memsrc ms;
    zip_memsrc_init(&ms, f, size, path);
    amn_limits lim;
    amn_limits_default(&lim);
    zip_dir d;
    if (zip_dir_read(&ms.src, &lim, &d, &err)) fail_msg("%s", err.msg);
    assert_int_equal(d.count, n_members);
    for (size_t k = 0; k < n_members; k++) {
        const zip_entry *e = &d.entries[k];
        char name[32];
        snprintf(name, sizeof name, "dir/m%zu", k);
        assert_string_equal(e->name, name);
        const size_t len = (k * 997) % sizeof data;
        assert_int_equal(e->method, ZIP_STORED);
        assert_int_equal(e->flags, 0x0808);
        assert_int_equal(e->usize, len);
        assert_int_equal(e->csize, len);
        assert_int_equal(e->crc32, (uint32_t)crc32_z(0, data, len));
        uint64_t off = 0;
        if (zip_entry_data_offset(&ms.src, &d, e, &off, &err)) fail_msg("%s", err.msg);
        assert_int_equal(off % (o->align ? o->align : 1), 0);
        assert_memory_equal(f + off, data, len);
        /* The data descriptor follows the data. */
        assert_memory_equal(f + off + len, "PK\x07\x08", 4);
        assert_int_equal(amn_test_u32(f + off + len + 4), e->crc32);
    }
    const bool z64_end = size >= 98 && memcmp(f + size - 98, "PK\x06\x06", 4) == 0;
    assert_int_equal(z64_end, expect_z64_end);
    zip_dir_free(&d);
    free(f);
    unlink(path);
    rmdir(dir);
}

/* Pieces checksummed apart and combined in order give the CRC of the
 * whole, for empty, short and long pieces. */
static void test_crc_combine(void **state) {
    (void)state;
    const size_t n = 3u << 20;
    uint8_t *b = random_bytes(n);
    const uint32_t whole = (uint32_t)crc32_z(0, b, n);
    for (int k = 0; k < 4; k++) {
        uint32_t crc = 0;
        for (size_t at = 0; at < n;) {
            size_t len = k == 0 ? rnd() % 17 : k == 1 ? rnd() % 5000 : rnd() % (1u << 20);
            if (len > n - at) len = n - at;
            crc = kit_crc32_combine(crc, kit_crc32(0, b + at, len), len);
            at += len;
        }
        assert_int_equal(crc, whole);
    }
    assert_int_equal(kit_crc32_combine(whole, 0, 0), whole);
    assert_int_equal(kit_crc32_combine(0, whole, n), whole);
    free(b);
}

static void test_archive_read_back(void **state) {
    (void)state;
    const zipw_options npz = {.align = 64, .pad_id = 0xD935, .pad_has_align = true};
    const zipw_options pth = {
        .align = 64, .pad_id = 0x4246, .pad_byte = 'Z', .zip64_end_always = true};
    const zipw_options none = {0};
    write_and_check(&npz, 9, false);
    write_and_check(&pth, 9, true);
    write_and_check(&none, 3, false);
    write_and_check(&npz, 0, false);
    /* 65535 members need the ZIP64 end records (the 16-bit count saturates). */
    write_and_check(&none, 65535, true);
}

static void test_errors(void **state) {
    (void)state;
    amn_error err = {0};
    zipw *z = NULL;
    const zipw_options bad = {.align = 48};
    assert_int_equal(zipw_new(NULL, &bad, &z, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "power of two"));
    char dir[] = "/tmp/amn-zipw.XXXXXX", path[4096];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.zip", dir);
    amn_sink *sink = NULL;
    assert_int_equal(amn_sink_open(path, false, NULL, 0, &sink, &err), AMN_OK);
    const zipw_options o = {.align = 64};
    assert_int_equal(zipw_new(sink, &o, &z, &err), AMN_OK);
    assert_int_equal(zipw_member_begin(z, "short", 10, &err), AMN_OK);
    assert_int_equal(amn_sink_write(sink, "abc", 3, &err), AMN_OK);
    assert_int_equal(zipw_member_end(z, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "3 bytes written, 10 declared"));
    char *long_name = malloc(70000);
    assert_non_null(long_name);
    memset(long_name, 'a', 69999);
    long_name[69999] = '\0';
    assert_int_equal(zipw_member_begin(z, long_name, 1, &err), AMN_E_LIMIT);
    assert_non_null(strstr(err.msg, "at most 65535"));
    free(long_name);
    zipw_free(z);
    amn_sink_abort(sink);
    assert_int_equal(access(path, F_OK), -1); /* nothing left behind */
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc_matches_zlib), cmocka_unit_test(test_crc_combine),
        cmocka_unit_test(test_name_rules),       cmocka_unit_test(test_archive_read_back),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
