/* Shared helpers for the CMocka suites: locating the reference corpus and
 * reading whole files. Header-only so every suite can include it. */
#ifndef AMN_TEST_H
#define AMN_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

/* Honest skips. CMocka counts a skipped test as passed in its exit code, so
 * ctest would list a suite that skipped everything as "Passed". Every suite
 * includes this header, which wraps skip() to count the skips and
 * cmocka_run_group_tests() to exit with AMN_TEST_SKIP_CODE (ctest's
 * SKIP_RETURN_CODE, set by amn_add_test) when nothing failed but something
 * was skipped: ctest then lists the suite as "Skipped", and its output names
 * each skipped test ("[  SKIPPED ]"). A failure still exits 1. */
#define AMN_TEST_SKIP_CODE 77

static inline int *amn_test_skips(void) {
    static int n;
    return &n;
}

static inline int amn_test_exit(int failed) {
    if (failed) return 1;
    if (*amn_test_skips()) {
        fprintf(stderr, "%d test(s) skipped: reporting the suite as skipped\n", *amn_test_skips());
        return AMN_TEST_SKIP_CODE;
    }
    return 0;
}

#undef skip
#define skip() (++*amn_test_skips(), _skip(__FILE__, __LINE__))
#undef cmocka_run_group_tests
#define cmocka_run_group_tests(group_tests, group_setup, group_teardown)                           \
    amn_test_exit(_cmocka_run_group_tests(#group_tests, group_tests,                               \
                                          sizeof(group_tests) / sizeof((group_tests)[0]),          \
                                          group_setup, group_teardown))

/* The reference corpus: $AMN_REFERENCE_DIR, else ../shared/fixtures beside
 * the source tree. Returns NULL when absent; under CI=true a missing corpus
 * fails the calling test instead of skipping it. */
static inline const char *amn_test_reference_dir(void) {
    static char buf[4096];
    const char *env = getenv("AMN_REFERENCE_DIR");
    if (env && *env)
        snprintf(buf, sizeof buf, "%s", env);
    else
        snprintf(buf, sizeof buf, "%s/../shared/fixtures", AMN_SOURCE_DIR);
    struct stat st;
    if (stat(buf, &st) == 0 && S_ISDIR(st.st_mode)) return buf;
    return NULL;
}

/* Use at the top of a test that needs the corpus. */
#define AMN_REQUIRE_REFERENCE(dirvar)                                                              \
    const char *dirvar = amn_test_reference_dir();                                                 \
    do {                                                                                           \
        if (!dirvar) {                                                                             \
            const char *ci = getenv("CI");                                                         \
            if (ci && strcmp(ci, "true") == 0)                                                     \
                fail_msg("reference corpus missing (AMN_REFERENCE_DIR or ../shared/fixtures)");    \
            fprintf(stderr, "SKIP %s: reference corpus not found; set AMN_REFERENCE_DIR\n",        \
                    __func__);                                                                     \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* True when this build made the plugin `name` (AMN_PLUGINS selects a
 * subset): a test that needs a plugin the build left out skips that part. */
static inline int amn_test_built(const char *name) {
#ifdef AMN_BUILT_PLUGINS
    char key[64];
    snprintf(key, sizeof key, ",%s,", name);
    return strstr(AMN_BUILT_PLUGINS, key) != NULL;
#else
    (void)name;
    return 1;
#endif
}

/* Use at the top of a test that needs plugin `name`. */
#define AMN_REQUIRE_PLUGIN(name)                                                                   \
    do {                                                                                           \
        if (!amn_test_built(name)) {                                                               \
            fprintf(stderr, "SKIP %s: needs the %s plugin, not built (AMN_PLUGINS)\n", __func__,   \
                    name);                                                                         \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* Malformed-input tests assert words of each message, not only the error
 * class: a table of case descriptions and the words their messages hold. */
typedef struct amn_test_words {
    const char *what, *words;
} amn_test_words;

/* Fail unless `msg` holds the words the table gives case `what` (a case
 * missing from the table fails too). */
static inline void amn_test_expect_words(const amn_test_words *table, size_t n, const char *what,
                                         const char *msg) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(table[i].what, what) == 0) {
            if (!strstr(msg, table[i].words))
                fail_msg("%s: \"%s\" lacks \"%s\"", what, msg, table[i].words);
            return;
        }
    fail_msg("%s: no expected words for this case (message: %s)", what, msg);
}

/* A scratch directory per suite, /tmp/amn-<tag>-XXXXXX: made in the group
 * setup, removed with everything in it in the teardown. */
static inline char *amn_test_scratch(void) {
    static char dir[256];
    return dir;
}

static inline int amn_test_scratch_make(const char *tag) {
    snprintf(amn_test_scratch(), 256, "/tmp/amn-%s-XXXXXX", tag);
    return mkdtemp(amn_test_scratch()) ? 0 : -1;
}

static inline int amn_test_scratch_remove(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", amn_test_scratch());
    return system(cmd) == 0 ? 0 : -1;
}

/* "<scratch>/<name>"; each result stays valid for the next 15 calls. */
static inline const char *amn_test_scratch_path(const char *name) {
    static char buf[16][512];
    static int k;
    k = (k + 1) % 16;
    snprintf(buf[k], sizeof buf[k], "%s/%s", amn_test_scratch(), name);
    return buf[k];
}

/* Read a whole file; *size gets its length. Caller frees. NULL on failure. */
static inline uint8_t *amn_test_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long n = ftell(f);
    rewind(f);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) *size = (size_t)n;
    return buf;
}

static inline uint32_t amn_test_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif
