/* Where a compressed archive's model files are decompressed
 * (core/src/spill_dir.c, compiled in): TMPDIR first, then /var/tmp where
 * /tmp is held in memory and /var/tmp is not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spill_dir.h"

static void test_choose(void **state) {
    (void)state;
    assert_string_equal(amni_spill_dir_choose("/scratch", true, true), "/scratch");
    assert_string_equal(amni_spill_dir_choose("/scratch", false, false), "/scratch");
    /* a relative TMPDIR names no one folder: ignored, as mkstemp users do */
    assert_string_equal(amni_spill_dir_choose("rel", true, true), "/var/tmp");
    assert_string_equal(amni_spill_dir_choose("", false, true), "/tmp");
    assert_string_equal(amni_spill_dir_choose(NULL, true, true), "/var/tmp");
    assert_string_equal(amni_spill_dir_choose(NULL, true, false), "/tmp");
    assert_string_equal(amni_spill_dir_choose(NULL, false, true), "/tmp");
    assert_string_equal(amni_spill_dir_choose(NULL, false, false), "/tmp");
}

static void test_env_first(void **state) {
    (void)state;
    const char *old = getenv("TMPDIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("TMPDIR", "/somewhere/else", 1);
    assert_string_equal(amni_spill_dir(), "/somewhere/else");
    unsetenv("TMPDIR");
    const char *d = amni_spill_dir();
    assert_true(strcmp(d, "/tmp") == 0 || strcmp(d, "/var/tmp") == 0);
    if (saved) setenv("TMPDIR", saved, 1);
    free(saved);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choose),
        cmocka_unit_test(test_env_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
