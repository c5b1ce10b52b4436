/* The output sink's promises through the public API: nothing visible
 * before commit, the pending list a signal handler empties, a failed
 * commit keeps the old file, the umask applied without being changed; and
 * the progress callback's contract in amn_convert. */
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "amn/amn.h"
#include "amn_test.h"

static char dir[256];

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/amn-test-sink.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Entries of dir other than . and .. */
static int entries(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d) closedir(d);
    return n;
}

static void read_file(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static void write_then(bool named, bool commit) {
    setenv("AMN_NO_TMPFILE", named ? "1" : "0", 1);
    char out[300];
    snprintf(out, sizeof out, "%s/out.bin", dir);
    amn_sink *s = NULL;
    amn_error err = {0};
    assert_int_equal(amn_sink_open(out, false, NULL, 0, &s, &err), AMN_OK);
    assert_int_equal(amn_sink_write(s, "hello", 5, &err), AMN_OK);
    /* Named: one registered temporary beside the target; O_TMPFILE: nothing. */
    assert_int_equal(entries(), named ? 1 : 0);
    assert_int_equal(amn_sink_pending_count(), named ? 1 : 0);
    if (commit) {
        assert_int_equal(amn_sink_commit(s, &err), AMN_OK);
        assert_int_equal(entries(), 1);
        char buf[16];
        read_file(out, buf, sizeof buf);
        assert_string_equal(buf, "hello");
        unlink(out);
    } else {
        /* What a signal handler does, then the abort a program may still run. */
        amn_sink_unlink_pending();
        assert_int_equal(entries(), 0);
        amn_sink_abort(s);
    }
    assert_int_equal(amn_sink_pending_count(), 0);
    assert_int_equal(entries(), 0);
    unsetenv("AMN_NO_TMPFILE");
}

static void test_named_commit(void **state) {
    (void)state;
    write_then(true, true);
}
static void test_named_signal(void **state) {
    (void)state;
    write_then(true, false);
}
static void test_tmpfile_commit(void **state) {
    (void)state;
    write_then(false, true);
}
static void test_tmpfile_abort(void **state) {
    (void)state;
    write_then(false, false);
}

/* Replacing: before commit the old file is intact; a failed write keeps it. */
static void test_replace(void **state) {
    (void)state;
    for (int named = 0; named < 2; named++) {
        setenv("AMN_NO_TMPFILE", named ? "1" : "0", 1);
        char out[300], buf[16];
        snprintf(out, sizeof out, "%s/keep.bin", dir);
        FILE *f = fopen(out, "wb");
        fputs("old", f);
        fclose(f);
        amn_sink *s = NULL;
        amn_error err = {0};
        assert_int_equal(amn_sink_open(out, false, NULL, 0, &s, &err), AMN_E_INVALID);
        assert_non_null(strstr(err.msg, "--force"));
        assert_int_equal(amn_sink_open(out, true, NULL, 0, &s, &err), AMN_OK);
        assert_int_equal(amn_sink_write(s, "new!", 4, &err), AMN_OK);
        read_file(out, buf, sizeof buf);
        assert_string_equal(buf, "old");
        amn_sink_set_sync(s, named); /* both ways work */
        assert_int_equal(amn_sink_commit(s, &err), AMN_OK);
        read_file(out, buf, sizeof buf);
        assert_string_equal(buf, "new!");
        assert_int_equal(entries(), 1);
        /* ENOSPC from the test hook: exit with an I/O error, old content kept. */
        setenv("AMN_TEST_ENOSPC_AFTER", "2", 1);
        assert_int_equal(amn_sink_open(out, true, NULL, 0, &s, &err), AMN_OK);
        assert_int_equal(amn_sink_write(s, "xyz", 3, &err), AMN_OK); /* buffered */
        assert_int_equal(amn_sink_commit(s, &err), AMN_E_IO);
        assert_non_null(strstr(err.msg, "No space left"));
        unsetenv("AMN_TEST_ENOSPC_AFTER");
        read_file(out, buf, sizeof buf);
        assert_string_equal(buf, "new!");
        assert_int_equal(entries(), 1);
        unlink(out);
    }
    unsetenv("AMN_NO_TMPFILE");
}

/* Mode 0666 under the umask, and the umask left as it was. */
static void test_mode(void **state) {
    (void)state;
    const mode_t old = umask(027);
    for (int named = 0; named < 2; named++) {
        setenv("AMN_NO_TMPFILE", named ? "1" : "0", 1);
        char out[300];
        snprintf(out, sizeof out, "%s/mode.bin", dir);
        amn_sink *s = NULL;
        amn_error err = {0};
        assert_int_equal(amn_sink_open(out, false, NULL, 0, &s, &err), AMN_OK);
        assert_int_equal(amn_sink_commit(s, &err), AMN_OK);
        struct stat st;
        assert_int_equal(stat(out, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0640);
        unlink(out);
    }
    assert_int_equal(umask(old), 027);
    unsetenv("AMN_NO_TMPFILE");
}

/* A reservation: the file holds exactly the bytes written, in order, at its
 * written size, and one abandoned at once leaves nothing. */
static void reserve_then_write(const char *where, uint64_t reserve, size_t total, struct stat *st) {
    uint8_t *want = malloc(total), *got = malloc(total);
    assert_non_null(want);
    assert_non_null(got);
    for (size_t i = 0; i < total; i++) want[i] = (uint8_t)(i * 2654435761u >> 13);
    char out[300];
    snprintf(out, sizeof out, "%s/reserved.bin", where);
    amn_sink *s = NULL;
    amn_error err = {0};
    assert_int_equal(amn_sink_open(out, false, NULL, 0, &s, &err), AMN_OK);
    amn_sink_set_sync(s, false);
    amn_sink_reserve(s, reserve);
    size_t at = 0; /* small writes (buffered), large ones (direct), odd sizes */
    for (size_t step = 1; at < total; step = step * 7 + 3) {
        const size_t k = step % (3u << 20) < total - at ? step % (3u << 20) + 1 : total - at;
        assert_int_equal(amn_sink_write(s, want + at, k, &err), AMN_OK);
        at += k;
    }
    assert_int_equal(amn_sink_commit(s, &err), AMN_OK);
    assert_int_equal(stat(out, st), 0);
    assert_int_equal(st->st_size, total);
    FILE *f = fopen(out, "rb");
    assert_non_null(f);
    assert_int_equal(fread(got, 1, total, f), total);
    fclose(f);
    assert_memory_equal(got, want, total);
    unlink(out);
    assert_int_equal(amn_sink_open(out, false, NULL, 0, &s, &err), AMN_OK);
    amn_sink_reserve(s, reserve);
    amn_sink_abort(s);
    assert_int_equal(amn_sink_pending_count(), 0);
    free(want);
    free(got);
}

static bool on_tmpfs(const char *path) {
    struct statfs fs;
    return statfs(path, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

/* Whether fallocate(KEEP_SIZE) allocates blocks on the file system of dir. */
static bool keeps_blocks(const char *where) {
    char path[300];
    snprintf(path, sizeof path, "%s/probe.bin", where);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    struct stat st = {0};
    bool ok = fd >= 0 && fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 1 << 20) == 0 &&
              fstat(fd, &st) == 0 && st.st_blocks * 512 >= (1 << 20);
    if (fd >= 0) close(fd);
    unlink(path);
    return ok;
}

/* The sink reserves space where that spares a file system work, never on
 * tmpfs, where it only allocates the pages before the writes would (io.c). */
static void test_reserve(void **state) {
    (void)state;
    enum { MIB = 1 << 20 };
    struct stat st;
    for (int named = 0; named < 2; named++) {
        setenv("AMN_NO_TMPFILE", named ? "1" : "0", 1);
        reserve_then_write(dir, 24 * MIB, 1 * MIB, &st);
        if (!on_tmpfs(dir) && keeps_blocks(dir)) /* the reservation past the end stays */
            assert_true((uint64_t)st.st_blocks * 512 >= 24 * MIB);
        assert_int_equal(entries(), 0);
        char shm[] = "/dev/shm/amn-test-sink.XXXXXX";
        if (on_tmpfs("/dev/shm") && mkdtemp(shm)) {
            reserve_then_write(shm, 24 * MIB, 1 * MIB, &st);
            assert_true((uint64_t)st.st_blocks * 512 < 2 * MIB); /* the written pages only */
            rmdir(shm);
        }
    }
    unsetenv("AMN_NO_TMPFILE");
}

typedef struct seen {
    unsigned calls, tensor_starts;
    uint64_t last_done, total;
    size_t last_index;
    const char *last_name;
    bool monotonic, ended;
} seen;

static void on_progress(void *user, const amn_progress *p) {
    seen *s = user;
    if (s->calls && (p->bytes_done < s->last_done || p->tensor_index < s->last_index))
        s->monotonic = false;
    if (p->tensor_name && (p->tensor_name != s->last_name || p->tensor_index != s->last_index))
        s->tensor_starts++;
    s->last_name = p->tensor_name;
    s->calls++;
    s->last_done = p->bytes_done;
    s->last_index = p->tensor_index;
    s->total = p->bytes_total;
    s->ended = p->tensor_name == NULL && p->tensor_index == p->tensor_count;
}

static void test_progress(void **state) {
    (void)state;
    amn_ctx *ctx = NULL;
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options)};
    if (amn_ctx_new(&o, &ctx, NULL) || !amn_ctx_find_format(ctx, "safetensors")) {
        amn_ctx_free(ctx);
        skip();
    }
    amn_model *m = NULL;
    amn_plan *p = NULL;
    amn_error err = {0};
    assert_int_equal(amn_open(ctx, AMN_SOURCE_DIR "/fixtures/example/tiny-f32.safetensors", NULL,
                              NULL, &m, &err),
                     AMN_OK);
    assert_int_equal(amn_plan_new(ctx, m, &p, &err), AMN_OK);
    char out[300];
    snprintf(out, sizeof out, "%s/p.safetensors", dir);
    seen s = {.monotonic = true};
    amn_convert_options co = {.struct_size = sizeof(amn_convert_options),
                              .mode = AMN_MODE_CONVERT,
                              .output = out,
                              .progress = on_progress,
                              .progress_user = &s,
                              .no_sync = true};
    amn_convert_stats st = {.struct_size = sizeof(amn_convert_stats)};
    assert_int_equal(amn_convert(ctx, m, p, &co, &st, &err), AMN_OK);
    assert_true(s.monotonic);
    assert_true(s.ended);
    assert_int_equal(s.tensor_starts, st.tensors_written);
    assert_int_equal(s.last_done, st.bytes_written);
    assert_int_equal(s.total, st.bytes_written);
    unlink(out);
    amn_plan_free(p);
    amn_model_free(m);
    amn_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_named_commit),   cmocka_unit_test(test_named_signal),
        cmocka_unit_test(test_tmpfile_commit), cmocka_unit_test(test_tmpfile_abort),
        cmocka_unit_test(test_replace),        cmocka_unit_test(test_mode),
        cmocka_unit_test(test_progress),       cmocka_unit_test(test_reserve),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
