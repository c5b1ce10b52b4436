/* Scratch files (amn/io.h, core/src/spill.c): what is written is what the
 * map holds; writing more than announced, mapping less than announced, a
 * folder where no file can be made and a reservation the disk cannot hold
 * are errors naming the folder; nothing is left in the folder. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "amn/io.h"

static char dir[] = "/tmp/amn-test-spill-XXXXXX";

static int setup(void **state) {
    (void)state;
    if (!mkdtemp(dir)) return -1;
    return setenv("TMPDIR", dir, 1);
}

static int teardown(void **state) {
    (void)state;
    return rmdir(dir); /* fails unless the folder is empty */
}

static int entries(const char *path) {
    DIR *d = opendir(path);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void test_round_trip(void **state) {
    (void)state;
    enum { N = 3 << 20 };
    uint8_t *want = malloc(N);
    assert_non_null(want);
    for (size_t i = 0; i < N; i++) want[i] = (uint8_t)(i * 2654435761u >> 13);
    amn_error err = {0};
    amn_spill *s;
    assert_int_equal(amn_spill_open(N, "x.npz/big.npy", &s, &err), AMN_OK);
    assert_int_equal(entries(dir), 0); /* no name while it is written either */
    for (size_t at = 0; at < N; at += 1000000)
        assert_int_equal(amn_spill_write(s, want + at, N - at < 1000000 ? N - at : 1000000, &err),
                         AMN_OK);
    amn_map *m;
    assert_int_equal(amn_spill_map(s, &m, &err), AMN_OK);
    assert_int_equal(amn_map_size(m), N);
    assert_string_equal(amn_map_path(m), "x.npz/big.npy");
    assert_memory_equal(amn_map_data(m), want, N);
    amn_map_drop(m, 4096, N); /* clipped to the map; the bytes read back */
    assert_memory_equal(amn_map_data(m), want, N);
    amn_map_close(m);
    free(want);
    assert_int_equal(entries(dir), 0);
}

static void test_sizes_enforced(void **state) {
    (void)state;
    amn_error err = {0};
    amn_spill *s;
    assert_int_equal(amn_spill_open(4, "four", &s, &err), AMN_OK);
    assert_int_equal(amn_spill_write(s, "abc", 3, &err), AMN_OK);
    assert_int_equal(amn_spill_write(s, "de", 2, &err), AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "more than the 4 bytes announced"));
    amn_map *m = (amn_map *)&err;
    assert_int_equal(amn_spill_map(s, &m, &err), AMN_E_INVALID); /* 3 of 4: frees s */
    assert_null(m);
    assert_non_null(strstr(err.msg, "3 bytes written of 4"));
    assert_int_equal(amn_spill_open(0, "empty", &s, &err), AMN_OK);
    assert_int_equal(amn_spill_map(s, &m, &err), AMN_OK);
    assert_int_equal(amn_map_size(m), 0);
    amn_map_close(m);
    amn_spill_free(NULL);
}

static void test_no_room(void **state) {
    (void)state;
    amn_error err = {0};
    amn_spill *s = (amn_spill *)&err;
    /* More than any file system holds: the reservation fails at once. */
    assert_int_equal(amn_spill_open(UINT64_MAX / 2, "huge", &s, &err), AMN_E_IO);
    assert_null(s);
    assert_non_null(strstr(err.msg, "no room for its"));
    assert_non_null(strstr(err.msg, dir));
    setenv("TMPDIR", "/nonexistent-amn-folder", 1);
    assert_int_equal(amn_spill_open(10, "x", &s, &err), AMN_E_IO);
    assert_non_null(strstr(err.msg, "no temporary file in /nonexistent-amn-folder"));
    setenv("TMPDIR", dir, 1);
    assert_int_equal(entries(dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_sizes_enforced),
        cmocka_unit_test(test_no_room),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
