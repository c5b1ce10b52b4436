/* The read-ahead thread (ahead.c, private to libamn, so it is compiled in
 * with io.c): it maps the spans in order, stops at the window past the
 * start of the reader's span, goes on when the reader moves to a later
 * span (an empty one starts where the next does), and stops when told,
 * even while it waits. Whether a page is mapped is read from /proc/self/pagemap
 * (bit 63: present). */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ahead_internal.h"
#include "amn_test.h"

#define MIB (1u << 20)

static int setup(void **state) {
    (void)state;
    return amn_test_scratch_make("test-ahead");
}

static int teardown(void **state) {
    (void)state;
    return amn_test_scratch_remove();
}

/* How many of the pages of [p, p + n) are mapped in this process. */
static size_t mapped_pages(const uint8_t *p, size_t n) {
    const long page = sysconf(_SC_PAGESIZE);
    int fd = open("/proc/self/pagemap", O_RDONLY);
    assert_true(fd >= 0);
    size_t count = 0;
    for (size_t off = 0; off < n; off += (size_t)page) {
        uint64_t e = 0;
        const off_t at = (off_t)(((uintptr_t)p + off) / (uintptr_t)page * 8);
        assert_int_equal(pread(fd, &e, 8, at), 8);
        count += (size_t)(e >> 63);
    }
    close(fd);
    return count;
}

/* Wait (up to 5 s) until `want` pages of the range are mapped. */
static size_t settle(const uint8_t *p, size_t n, size_t want) {
    size_t got = 0;
    for (int i = 0; i < 500 && (got = mapped_pages(p, n)) < want; i++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    return got;
}

/* Whether pagemap tells this process's pages and MADV_POPULATE_READ maps
 * them: a populated page present, another not (qemu-user accepts the
 * advice and does nothing, so there the thread has no effect to see). */
static bool populate_works(void) {
#ifdef MADV_POPULATE_READ
    if (access("/proc/self/pagemap", R_OK) != 0) return false;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *q = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED) return false;
    const bool ok = madvise(q, page, MADV_POPULATE_READ) == 0 && mapped_pages(q, page) == 1 &&
                    mapped_pages(q + page, page) == 0;
    munmap(q, 2 * page);
    return ok;
#else
    return false;
#endif
}

/* A file of `size` bytes mapped read-only, none of its pages mapped yet;
 * the test is skipped where populating cannot be seen. */
static uint8_t *map_file(size_t size) {
    if (!populate_works()) skip();
    char path[512];
    snprintf(path, sizeof path, "%s/in.bin", amn_test_scratch());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    uint8_t *chunk = malloc(MIB);
    memset(chunk, 0x5a, MIB);
    for (size_t off = 0; off < size; off += MIB) assert_int_equal(write(fd, chunk, MIB), MIB);
    free(chunk);
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    assert_true(p != MAP_FAILED);
    assert_int_equal(mapped_pages(p, size), 0);
    return p;
}

static void maps_within_the_window(void **state) {
    (void)state;
    const size_t size = 16 * MIB, per_mib = MIB / (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *p = map_file(size);
    /* spans: [0, 8) MiB, nothing, [8, 16) MiB; a 4 MiB window */
    const amni_span spans[3] = {{p, 8 * MIB}, {NULL, 0}, {p + 8 * MIB, 8 * MIB}};
    amni_ahead *a = NULL;
    amn_error err = {0};
    int rc = amni_ahead_start(spans, 3, 4 * MIB, &a, &err);
    if (rc == AMN_E_UNSUPPORTED) skip();
    assert_int_equal(rc, AMN_OK);
    /* the reader is in span 0: the first 4 MiB, and no page past them */
    assert_int_equal(settle(p, 4 * MIB, 4 * per_mib), 4 * per_mib);
    nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    assert_int_equal(mapped_pages(p + 4 * MIB, 12 * MIB), 0);
    /* the reader is done with span 0: the window runs from 8 MiB to 12 */
    amni_ahead_at(a, 1);
    assert_int_equal(settle(p, 12 * MIB, 12 * per_mib), 12 * per_mib);
    nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    assert_int_equal(mapped_pages(p + 12 * MIB, 4 * MIB), 0);
    /* the empty span held no bytes: span 2 starts where it did */
    amni_ahead_at(a, 2);
    nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    assert_int_equal(mapped_pages(p + 12 * MIB, 4 * MIB), 0);
    amni_ahead_stop(a); /* while it waits for the reader */
    assert_int_equal(mapped_pages(p + 12 * MIB, 4 * MIB), 0);
    munmap(p, size);
}

static void maps_everything_with_a_wide_window(void **state) {
    (void)state;
    const size_t size = 16 * MIB, per_mib = MIB / (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *p = map_file(size);
    const amni_span spans[2] = {{p + 3 * MIB, 5 * MIB + 4096}, {p + 9 * MIB, 7 * MIB}};
    amni_ahead *a = NULL;
    amn_error err = {0};
    int rc = amni_ahead_start(spans, 2, 64 * MIB, &a, &err);
    if (rc == AMN_E_UNSUPPORTED) skip();
    assert_int_equal(rc, AMN_OK);
    assert_int_equal(settle(p + 9 * MIB, 7 * MIB, 7 * per_mib), 7 * per_mib);
    assert_int_equal(settle(p + 3 * MIB, 5 * MIB + 4096, 5 * per_mib + 1), 5 * per_mib + 1);
    amni_ahead_stop(a);
    /* nothing below the spans' first folio (a large folio of the page
     * cache may be mapped whole, so 2 MiB aligned) */
    assert_int_equal(mapped_pages(p, 2 * MIB), 0);
    amni_ahead_stop(NULL);
    munmap(p, size);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(maps_within_the_window),
        cmocka_unit_test(maps_everything_with_a_wide_window),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
