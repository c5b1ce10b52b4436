/* The sink's writes in place (amni_sink_claim / amni_sink_write_at, private
 * to libamn, so io.c is compiled in): a claimed region written by several
 * threads in any order lands between the bytes written before and after it;
 * a tap that folds sees the region as if fed in order; the ENOSPC test
 * hook, a tap that does not fold and a region past any file size are
 * refused with typed errors; an abandoned claim leaves nothing. */
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amn/amn.h"
#include "amn_test.h"
#include "io_internal.h"

static int setup(void **state) {
    (void)state;
    return amn_test_scratch_make("test-inplace");
}

static int teardown(void **state) {
    (void)state;
    return amn_test_scratch_remove();
}

/* 0 when the scratch directory holds nothing. */
static int entries(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", amn_test_scratch());
    return system(cmd) == 0 ? 0 : 1;
}

enum { HEAD = 37, REGION = 3 << 20, TAIL = 1001, PIECE = 100003 };

static uint8_t byte_at(size_t i) {
    return (uint8_t)(i * 2654435761u >> 11);
}

typedef struct job {
    amn_sink *s;
    uint64_t at;
    const uint8_t *want;
    unsigned self, threads;
    int rc;
} job;

/* Pieces self, self + threads, ... of the region, last first: the threads
 * write out of order and beside each other. */
static void *write_pieces(void *v) {
    job *j = v;
    const size_t n_pieces = (REGION + PIECE - 1) / PIECE;
    amn_error err = {0};
    for (size_t q = n_pieces; q-- > 0;) {
        if (q % j->threads != j->self) continue;
        const size_t off = q * PIECE, k = REGION - off < PIECE ? REGION - off : PIECE;
        int rc = amni_sink_write_at(j->s, j->at + off, j->want + HEAD + off, k, &err);
        if (rc && !j->rc) j->rc = rc;
    }
    return NULL;
}

static void test_region_between(void **state) {
    (void)state;
    const size_t total = HEAD + REGION + TAIL;
    uint8_t *want = malloc(total), *got = malloc(total + 1);
    assert_non_null(want);
    assert_non_null(got);
    for (size_t i = 0; i < total; i++) want[i] = byte_at(i);
    for (int named = 0; named < 2; named++) {
        setenv("AMN_NO_TMPFILE", named ? "1" : "0", 1);
        const char *out = amn_test_scratch_path("placed.bin");
        amn_sink *s = NULL;
        amn_error err = {0};
        assert_int_equal(amn_sink_open(out, false, NULL, 0, &s, &err), AMN_OK);
        amn_sink_set_sync(s, named); /* with sync, each piece starts its writeback */
        assert_int_equal(amn_sink_write(s, want, HEAD, &err), AMN_OK); /* still buffered */
        uint64_t at = 0;
        assert_int_equal(amni_sink_claim(s, REGION, &at, &err), AMN_OK);
        assert_int_equal(at, HEAD);
        assert_int_equal(amn_sink_tell(s), HEAD + REGION);
        job jobs[3];
        pthread_t th[3];
        for (unsigned k = 0; k < 3; k++) {
            jobs[k] = (job){.s = s, .at = at, .want = want, .self = k, .threads = 3};
            assert_int_equal(pthread_create(&th[k], NULL, write_pieces, &jobs[k]), 0);
        }
        for (unsigned k = 0; k < 3; k++) {
            pthread_join(th[k], NULL);
            assert_int_equal(jobs[k].rc, AMN_OK);
        }
        assert_int_equal(amn_sink_write(s, want + HEAD + REGION, TAIL, &err), AMN_OK);
        assert_int_equal(amn_sink_commit(s, &err), AMN_OK);
        struct stat st;
        assert_int_equal(stat(out, &st), 0);
        assert_int_equal(st.st_size, total);
        FILE *f = fopen(out, "rb");
        assert_non_null(f);
        assert_int_equal(fread(got, 1, total + 1, f), total);
        fclose(f);
        assert_memory_equal(got, want, total);
        unlink(out);
        /* a claim abandoned half written leaves nothing */
        assert_int_equal(amn_sink_open(out, false, NULL, 0, &s, &err), AMN_OK);
        assert_int_equal(amni_sink_claim(s, REGION, &at, &err), AMN_OK);
        assert_int_equal(amni_sink_write_at(s, at + PIECE, want, PIECE, &err), AMN_OK);
        amn_sink_abort(s);
        assert_int_equal(entries(), 0);
        assert_int_equal(amn_sink_pending_count(), 0);
    }
    unsetenv("AMN_NO_TMPFILE");
    free(want);
    free(got);
}

/* AMN_TEST_ENOSPC_AFTER=N: the disk holds N bytes, wherever they are written. */
static void test_enospc(void **state) {
    (void)state;
    const char *out = amn_test_scratch_path("full.bin");
    static uint8_t buf[4096];
    amn_sink *s = NULL;
    amn_error err = {0};
    setenv("AMN_TEST_ENOSPC_AFTER", "5000", 1);
    assert_int_equal(amn_sink_open(out, false, NULL, 0, &s, &err), AMN_OK);
    unsetenv("AMN_TEST_ENOSPC_AFTER");
    uint64_t at = 0;
    assert_int_equal(amni_sink_claim(s, 3 * sizeof buf, &at, &err), AMN_OK);
    assert_int_equal(amni_sink_write_at(s, at, buf, sizeof buf, &err), AMN_OK); /* 0-4095 */
    assert_int_equal(amni_sink_write_at(s, at + 2 * sizeof buf, buf, sizeof buf, &err), AMN_E_IO);
    assert_non_null(strstr(err.msg, "No space left"));
    err = (amn_error){0};
    assert_int_equal(amni_sink_write_at(s, at + sizeof buf, buf, sizeof buf, &err), AMN_E_IO);
    assert_non_null(strstr(err.msg, "No space left")); /* 4096-4999 written, then full */
    struct stat st;
    amn_sink_abort(s);
    assert_int_not_equal(stat(out, &st), 0);
    assert_int_equal(entries(), 0);
}

/* A tap that folds: a polynomial hash, h(A B) = h(A) * K^|B| + h(B) mod
 * 2^64, which depends on the order of the bytes. */
#define HASH_K 0x100000001b3ull
static uint64_t hash_from(uint64_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = h * HASH_K + p[i];
    return h;
}
static void hash_tap(void *ctx, const void *buf, size_t n) {
    *(uint64_t *)ctx = hash_from(*(uint64_t *)ctx, buf, n);
}
static uint64_t hash_digest(const void *buf, size_t n) {
    return hash_from(0, buf, n);
}
static void hash_fold(void *ctx, uint64_t digest, uint64_t n) {
    uint64_t kn = 1, k = HASH_K;
    for (uint64_t e = n; e; e >>= 1, k *= k)
        if (e & 1) kn *= k;
    *(uint64_t *)ctx = *(uint64_t *)ctx * kn + digest;
}

/* A folding tap lets a region be claimed: each piece's digest, folded in
 * the region's order after the pieces were written out of order, leaves
 * the tap where feeding it every byte in order would have. */
static void test_folding_tap(void **state) {
    (void)state;
    const size_t total = HEAD + REGION + TAIL;
    uint8_t *want = malloc(total);
    assert_non_null(want);
    for (size_t i = 0; i < total; i++) want[i] = byte_at(i);
    amn_sink *s = NULL;
    amn_error err = {0};
    uint64_t h = 0, at = 0;
    assert_int_equal(amn_sink_open(amn_test_scratch_path("folded.bin"), false, NULL, 0, &s, &err),
                     AMN_OK);
    amn_sink_set_folding_tap(s, hash_tap, hash_digest, hash_fold, &h);
    assert_true(amni_sink_in_place_ok(s));
    assert_int_equal(amn_sink_write(s, want, HEAD, &err), AMN_OK);
    assert_int_equal(amni_sink_claim(s, REGION, &at, &err), AMN_OK);
    const size_t n_pieces = (REGION + PIECE - 1) / PIECE;
    uint64_t *digest = calloc(n_pieces, sizeof *digest);
    assert_non_null(digest);
    for (size_t q = n_pieces; q-- > 0;) { /* last first */
        const size_t off = q * PIECE, k = REGION - off < PIECE ? REGION - off : PIECE;
        digest[q] = amni_sink_digest(s, want + HEAD + off, k);
        assert_int_equal(amni_sink_write_at(s, at + off, want + HEAD + off, k, &err), AMN_OK);
    }
    for (size_t q = 0; q < n_pieces; q++) {
        const size_t off = q * PIECE, k = REGION - off < PIECE ? REGION - off : PIECE;
        amni_sink_fold(s, digest[q], k);
    }
    assert_int_equal(amn_sink_write(s, want + HEAD + REGION, TAIL, &err), AMN_OK);
    amn_sink_set_tap(s, NULL, NULL);
    assert_int_equal(h, hash_from(0, want, total));
    assert_true(amni_sink_in_place_ok(s)); /* no tap */
    amn_sink_set_tap(s, hash_tap, &h);     /* a tap that does not fold */
    assert_false(amni_sink_in_place_ok(s));
    assert_int_equal(amni_sink_claim(s, 4096, &at, &err), AMN_E_UNSUPPORTED);
    amn_sink_abort(s);
    free(digest);
    free(want);
}

static void count_bytes(void *ctx, const void *buf, size_t n) {
    (void)buf;
    *(size_t *)ctx += n;
}

/* A tap sees bytes in order, which writes in place cannot promise; and no
 * region may end past what a file offset can say. */
static void test_refusals(void **state) {
    (void)state;
    const char *out = amn_test_scratch_path("refused.bin");
    amn_sink *s = NULL;
    amn_error err = {0};
    size_t tapped = 0;
    uint64_t at = 0;
    assert_int_equal(amn_sink_open(out, false, NULL, 0, &s, &err), AMN_OK);
    amn_sink_set_tap(s, count_bytes, &tapped);
    assert_int_equal(amni_sink_claim(s, 4096, &at, &err), AMN_E_UNSUPPORTED);
    amn_sink_set_tap(s, NULL, NULL);
    assert_int_equal(amn_sink_write(s, "x", 1, &err), AMN_OK);
    assert_int_equal(amni_sink_claim(s, UINT64_MAX, &at, &err), AMN_E_LIMIT);
    assert_int_equal(amni_sink_claim(s, (uint64_t)INT64_MAX, &at, &err), AMN_E_LIMIT);
    assert_int_equal(amn_sink_tell(s), 1);
    amn_sink_abort(s);
    assert_int_equal(tapped, 0);
    assert_int_equal(entries(), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_region_between),
        cmocka_unit_test(test_enospc),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_folding_tap),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
