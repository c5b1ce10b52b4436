/* The input reader (core/src/input.c): every way of reading a mapped input
 * — the mapping, pread into per-thread buffers, splice, copy_file_range —
 * forced in turn with AMN_INPUT, gives the same output bytes, pass-through
 * and casts, with and without a tap on the sink (npz: the tap fed by a
 * second thread that reads by pread or the mapping), at 1-3 threads, with
 * in-kernel copies cut short (AMN_TEST_COPY_MAX) and where copy_file_range
 * cannot cross file systems (input on tmpfs); a pass-through copy holds the
 * input's own bytes; amn_model_fetch's contract; a file truncated after it
 * was opened is an I/O error, not SIGBUS, where pread, splice or
 * copy_file_range reads it. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amn/amn.h"
#include "amn_test.h"

#define ROWS  1024
#define COLS  1024 /* "big": 4 MiB of F32, two pass-through chunks and more */
#define FP8_N 512  /* an FP8 weight of 256 KiB: fetched by pread in auto */

static const char *const modes[] = {"map", "pread", "splice", "copy", "auto"};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 32);
}

static void put_u64(FILE *f, uint64_t v) {
    for (int i = 0; i < 8; i++) fputc((int)(v >> (8 * i)) & 0xff, f);
}

/* A safetensors file whose data start at an odd offset (the header is not
 * padded to a page): F32 big [1024, 1024] of finite random values, F32
 * small [7, 5], I8 ids [3001], and with fp8 an F8_E4M3 weight [512, 512]
 * beside its 128x128 block scales. Returns the offset of big's bytes. */
static uint64_t write_model(const char *path, bool fp8) {
    const uint64_t big = 4ull * ROWS * COLS, small = 4 * 35, ids = 3001,
                   w = (uint64_t)FP8_N * FP8_N, sc = 4 * 16;
    char hdr[1024];
    int n = snprintf(hdr, sizeof hdr,
                     "{\"big\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[0,%llu]},"
                     "\"small\":{\"dtype\":\"F32\",\"shape\":[7,5],\"data_offsets\":[%llu,%llu]},"
                     "\"ids\":{\"dtype\":\"I8\",\"shape\":[3001],\"data_offsets\":[%llu,%llu]}",
                     ROWS, COLS, (unsigned long long)big, (unsigned long long)big,
                     (unsigned long long)(big + small), (unsigned long long)(big + small),
                     (unsigned long long)(big + small + ids));
    const uint64_t o = big + small + ids;
    if (fp8)
        n += snprintf(hdr + n, sizeof hdr - (size_t)n,
                      ",\"l.weight\":{\"dtype\":\"F8_E4M3\",\"shape\":[%d,%d],\"data_offsets\":"
                      "[%llu,%llu]},\"l.weight_scale_inv\":{\"dtype\":\"F32\",\"shape\":[4,4],"
                      "\"data_offsets\":[%llu,%llu]}",
                      FP8_N, FP8_N, (unsigned long long)o, (unsigned long long)(o + w),
                      (unsigned long long)(o + w), (unsigned long long)(o + w + sc));
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "}");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    put_u64(f, (uint64_t)n);
    fwrite(hdr, 1, (size_t)n, f);
    for (uint64_t i = 0; i < (big + small) / 4; i++) {
        /* sign, exponent 100..163, any mantissa: finite, no NaN payloads */
        uint32_t r = next_u32(), v = (r & 0x807fffffu) | ((100u + (r >> 23 & 63u)) << 23);
        fwrite(&v, 4, 1, f);
    }
    for (uint64_t i = 0; i < ids; i++) fputc((int)(next_u32() & 0xff), f);
    for (uint64_t i = 0; fp8 && i < w; i++) {
        uint8_t b = (uint8_t)next_u32();
        if ((b & 0x7f) == 0x7f) b = 0; /* E4M3's NaN */
        fputc(b, f);
    }
    for (int i = 0; fp8 && i < 16; i++) {
        float s = 0.001f * (float)(i + 1);
        fwrite(&s, 4, 1, f);
    }
    assert_int_equal(fclose(f), 0);
    return 8 + (uint64_t)n;
}

typedef struct opened {
    amn_ctx *ctx;
    amn_model *m;
    amn_plan *p;
} opened;

static bool open_model(const char *path, opened *o) {
    amn_ctx_options co = {.struct_size = sizeof(amn_ctx_options)};
    amn_error err = {0};
    memset(o, 0, sizeof *o);
    if (amn_ctx_new(&co, &o->ctx, NULL) || !amn_ctx_find_format(o->ctx, "safetensors")) {
        amn_ctx_free(o->ctx);
        return false;
    }
    assert_int_equal(amn_open(o->ctx, path, NULL, NULL, &o->m, &err), AMN_OK);
    assert_int_equal(amn_plan_new(o->ctx, o->m, &o->p, &err), AMN_OK);
    return true;
}

static void close_model(opened *o) {
    amn_plan_free(o->p);
    amn_model_free(o->m);
    amn_ctx_free(o->ctx);
}

static int convert(opened *o, const char *target, amn_dtype dt, unsigned threads, const char *out,
                   amn_error *err) {
    amn_convert_options co = {.struct_size = sizeof(amn_convert_options),
                              .mode = AMN_MODE_CONVERT,
                              .target = target,
                              .out_dtype = dt,
                              .output = out,
                              .overwrite = true,
                              .threads = threads,
                              .no_sync = true};
    return amn_convert(o->ctx, o->m, o->p, &co, NULL, err);
}

/* The output of one conversion with AMN_INPUT=mode and the environment
 * settings `env` ("NAME=VALUE" or NULL), read back; *n its size. */
static uint8_t *output_of(opened *o, const char *target, amn_dtype dt, const char *mode,
                          const char *env, unsigned threads, size_t *n) {
    char name[64], var[64] = "";
    snprintf(name, sizeof name, "out-%s-%s-%u", target, mode, threads);
    const char *out = amn_test_scratch_path(name);
    const char *eq = env ? strchr(env, '=') : NULL;
    if (eq) {
        snprintf(var, sizeof var, "%.*s", (int)(eq - env), env);
        setenv(var, eq + 1, 1);
    }
    setenv("AMN_INPUT", mode, 1);
    amn_error err = {0};
    int rc = convert(o, target, dt, threads, out, &err);
    unsetenv("AMN_INPUT");
    if (eq) unsetenv(var);
    if (rc) fail_msg("%s %s %s %u threads: %s", target, mode, env ? env : "", threads, err.msg);
    uint8_t *got = amn_test_read_file(out, n);
    assert_non_null(got);
    unlink(out);
    return got;
}

static void expect_same(const uint8_t *ref, size_t ref_n, uint8_t *got, size_t n, const char *tag,
                        const char *mode, const char *env, unsigned threads) {
    if (n != ref_n || memcmp(got, ref, n) != 0)
        fail_msg("%s: AMN_INPUT=%s %s at %u threads differs from map (%zu bytes, %zu expected)",
                 tag, mode, env ? env : "", threads, n, ref_n);
    free(got);
}

/* Every mode, 1-3 threads: the bytes of the map mode (the way amn read
 * before input.c existed). In-kernel copies also in pieces of an odd size
 * (short returns, each continued where it stopped) and, for a tapped sink,
 * with the tap's thread reading the mapping or by pread. */
static void same_bytes(opened *o, const char *target, amn_dtype dt, const char *tag) {
    static const char *const kernel_env[] = {"AMN_TEST_COPY_MAX=69997", "AMN_TAP_READ=map",
                                             "AMN_TAP_READ=pread"};
    size_t ref_n = 0, n = 0;
    uint8_t *ref = output_of(o, target, dt, "map", NULL, 1, &ref_n);
    for (size_t k = 0; k < sizeof modes / sizeof *modes; k++)
        for (unsigned th = 1; th <= 3; th++) {
            uint8_t *got = output_of(o, target, dt, modes[k], NULL, th, &n);
            expect_same(ref, ref_n, got, n, tag, modes[k], NULL, th);
        }
    for (size_t k = 0; k < sizeof kernel_env / sizeof *kernel_env; k++)
        for (size_t m = 0; m < 2; m++) {
            const char *mode = m ? "splice" : "copy";
            uint8_t *got = output_of(o, target, dt, mode, kernel_env[k], 2, &n);
            expect_same(ref, ref_n, got, n, tag, mode, kernel_env[k], 2);
        }
    free(ref);
}

static void test_paths_same_bytes(void **state) {
    (void)state;
    AMN_REQUIRE_PLUGIN("safetensors");
    const bool fp8 = amn_test_built("fp8");
    char in[512]; /* scratch paths are recycled after 15 calls */
    snprintf(in, sizeof in, "%s", amn_test_scratch_path("in.safetensors"));
    const uint64_t at = write_model(in, fp8);
    opened o;
    if (!open_model(in, &o)) skip();
    same_bytes(&o, "safetensors", AMN_DTYPE_BF16, "bf16"); /* casts, fp8 via amn_model_fetch */
    same_bytes(&o, "safetensors", AMN_DTYPE_F32, "f32");   /* pass-through */
    if (amn_test_built("npz")) same_bytes(&o, "npz", AMN_DTYPE_F32, "npz"); /* a tapped sink */
    /* The pass-through copy holds the input's bytes (checked against the
     * file, not against another path). */
    size_t in_n = 0, out_n = 0;
    uint8_t *src = amn_test_read_file(in, &in_n);
    const char *out = amn_test_scratch_path("out-f32");
    amn_error err = {0};
    setenv("AMN_INPUT", "splice", 1);
    assert_int_equal(convert(&o, "safetensors", AMN_DTYPE_F32, 2, out, &err), AMN_OK);
    unsetenv("AMN_INPUT");
    uint8_t *dst = amn_test_read_file(out, &out_n);
    assert_non_null(src);
    assert_non_null(dst);
    assert_non_null(memmem(dst, out_n, src + at, 4ull * ROWS * COLS));
    free(src);
    free(dst);
    unlink(out);
    close_model(&o);
    unlink(in);
}

/* An input on tmpfs and the output on the scratch directory's file system
 * (another one, where /dev/shm exists): copy_file_range refuses to cross
 * them (EXDEV), and the copy mode falls back to pread with the same bytes,
 * tapped or not. */
static void test_copy_across_file_systems(void **state) {
    (void)state;
    AMN_REQUIRE_PLUGIN("safetensors");
    char in[] = "/dev/shm/amn-test-input-XXXXXX";
    const int fd = mkstemp(in);
    if (fd < 0) skip(); /* no tmpfs here */
    close(fd);
    write_model(in, false);
    opened o;
    const bool opened_ok = open_model(in, &o);
    unlink(in); /* the open model holds it; nothing is left in /dev/shm if a check fails */
    if (!opened_ok) skip();
    static const char *const targets[] = {"safetensors", "npz"}; /* npz: a tapped sink */
    for (size_t k = 0; k < 2; k++) {
        if (!amn_test_built(targets[k])) continue;
        size_t ref_n = 0, n = 0;
        uint8_t *ref = output_of(&o, targets[k], AMN_DTYPE_F32, "map", NULL, 1, &ref_n);
        uint8_t *got = output_of(&o, targets[k], AMN_DTYPE_F32, "copy", NULL, 2, &n);
        expect_same(ref, ref_n, got, n, targets[k], "copy (input on tmpfs)", NULL, 2);
        free(ref);
    }
    close_model(&o);
}

static void test_fetch(void **state) {
    (void)state;
    AMN_REQUIRE_PLUGIN("safetensors");
    const char *in = amn_test_scratch_path("fetch.safetensors");
    write_model(in, false);
    opened o;
    if (!open_model(in, &o)) skip();
    const amn_tensor *t = amn_model_tensor(o.m, (size_t)amn_model_find(o.m, "big"));
    const uint8_t *p = t->data;
    amn_error err = {0};
    /* Short ranges stay in the mapping; long ones read by pread come
     * through a buffer per slot. */
    assert_ptr_equal(amn_model_fetch(o.m, p + 3, 100, 0, &err), p + 3);
    setenv("AMN_INPUT", "pread", 1);
    const uint8_t *a = amn_model_fetch(o.m, p + 1, 1u << 20, 0, &err);
    const uint8_t *b = amn_model_fetch(o.m, p + 5, 300000, AMN_FETCH_SLOTS - 1, &err);
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a != p + 1 && b != a);
    assert_memory_equal(a, p + 1, 1u << 20); /* both slots still hold their bytes */
    assert_memory_equal(b, p + 5, 300000);
    setenv("AMN_INPUT", "map", 1);
    assert_ptr_equal(amn_model_fetch(o.m, p + 1, 1u << 20, 0, &err), p + 1);
    unsetenv("AMN_INPUT");
    /* Memory the model does not map comes back as it is. */
    static uint8_t mine[1u << 17];
    assert_ptr_equal(amn_model_fetch(o.m, mine, sizeof mine, 0, &err), mine);
    assert_null(amn_model_fetch(o.m, p, 10, AMN_FETCH_SLOTS, &err));
    assert_int_equal(err.code, AMN_E_INVALID);
    assert_non_null(strstr(err.msg, "slot"));
    close_model(&o);
    unlink(in);
}

/* Fetches of "big" (4 MiB) in pieces of 256 KiB, ROUNDS times over: the
 * bytes of the file each time; mapped[r] counts the pieces of round r that
 * came back as p itself (through the mapping). The last round starts at the
 * second half, so its first 2 MiB are pages no earlier sample mapped. */
#define ROUNDS 9 /* 36 MiB: into the second 32 MiB window of input.c */
static void fetch_rounds(const opened *o, const uint8_t *file_big, unsigned mapped[ROUNDS]) {
    const amn_tensor *t = amn_model_tensor(o->m, (size_t)amn_model_find(o->m, "big"));
    const uint8_t *p = t->data;
    const size_t piece = 256u << 10;
    for (unsigned r = 0; r < ROUNDS; r++) {
        mapped[r] = 0;
        const size_t start = r == ROUNDS - 1 ? (size_t)t->nbytes / 2 : 0;
        for (size_t k = 0; k < t->nbytes / piece; k++) {
            const size_t off = (start + k * piece) % t->nbytes;
            amn_error err = {0};
            const uint8_t *q = amn_model_fetch(o->m, p + off, piece, 1, &err);
            assert_non_null(q);
            assert_memory_equal(q, file_big + off, piece);
            mapped[r] += q == p + off;
        }
    }
}

/* Whether /dev/shm may hold huge pages (mounted with huge=, or forced for
 * every tmpfs): then a fault maps 2 MiB there too. */
static bool shm_huge_pages(void) {
    bool huge = false;
    char line[4096];
    FILE *f = fopen("/proc/self/mounts", "r");
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, " /dev/shm ") && strstr(line, "huge=") && !strstr(line, "huge=never"))
            huge = true;
    if (f) fclose(f);
    f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");
    if (f && fgets(line, sizeof line, f) && strstr(line, "[force]")) huge = true;
    if (f) fclose(f);
    return huge;
}

/* Whether this kernel populates mappings on request (5.14 and later):
 * without it input.c reads by pread throughout. */
static bool kernel_populates(void) {
#ifdef MADV_POPULATE_READ
    void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    /* ... and did: qemu-user answers 0 to the advice it drops. */
    unsigned char in = 0;
    const bool ok =
        madvise(p, 4096, MADV_POPULATE_READ) == 0 && mincore(p, 4096, &in) == 0 && (in & 1);
    munmap(p, 4096);
    return ok;
#else
    return false;
#endif
}

/* How fetches choose their way (input.c): the first 2 MiB of every 32 MiB
 * fetched go through the mapping with their page faults counted. A file on
 * tmpfs, where every page is 4 KiB and a fault maps 64 KiB at most, is then
 * read by pread for the rest of each window; the same file with its pages
 * already mapped (no fault at all) keeps the mapping. */
static void test_fetch_chooses(void **state) {
    (void)state;
    AMN_REQUIRE_PLUGIN("safetensors");
    if (!kernel_populates()) skip();
    char in[] = "/dev/shm/amn-test-fetch-XXXXXX";
    int fd = mkstemp(in);
    if (fd < 0) skip(); /* no tmpfs here */
    close(fd);
    const uint64_t at = write_model(in, false);
    size_t n = 0;
    uint8_t *file = amn_test_read_file(in, &n);
    assert_non_null(file);
    unsetenv("AMN_INPUT");
    opened o;
    bool ok = open_model(in, &o);
    unsigned mapped[ROUNDS];
    if (ok && !shm_huge_pages()) {
        fetch_rounds(&o, file + at, mapped);
        assert_int_equal(mapped[0], 8); /* the sample, then pread */
        for (unsigned r = 1; r < ROUNDS - 1; r++) assert_int_equal(mapped[r], 0);
        assert_int_equal(mapped[ROUNDS - 1], 8); /* the second window's sample */
        close_model(&o);
        ok = open_model(in, &o);
    }
    if (ok) {
        const amn_tensor *t = amn_model_tensor(o.m, (size_t)amn_model_find(o.m, "big"));
        assert_memory_equal(t->data, file + at, t->nbytes); /* every page mapped */
        fetch_rounds(&o, file + at, mapped);
        for (unsigned r = 0; r < ROUNDS; r++) assert_int_equal(mapped[r], 16);
        close_model(&o);
    }
    unlink(in);
    free(file);
    if (!ok) skip();
}

/* The file loses its tail after it was opened: each way that reads with
 * system calls reports it, and so do the pass-through from the mapping and
 * the cast's reads through it (AMN_INPUT=map): the file's size is checked
 * before each chunk. */
static void test_truncated(void **state) {
    (void)state;
    AMN_REQUIRE_PLUGIN("safetensors");
    static const struct {
        const char *mode;
        amn_dtype dt;
        const char *target; /* npz: a tapped sink, the tap fed by a second thread */
    } cases[] = {{"pread", AMN_DTYPE_BF16, "safetensors"},
                 {"auto", AMN_DTYPE_BF16, "safetensors"}, /* the probe's populate: EFAULT */
                 {"map", AMN_DTYPE_BF16, "safetensors"},
                 {"map", AMN_DTYPE_BF16, "npz"},
                 {"pread", AMN_DTYPE_F32, "safetensors"},
                 {"splice", AMN_DTYPE_F32, "safetensors"},
                 {"copy", AMN_DTYPE_F32, "safetensors"},
                 {"auto", AMN_DTYPE_F32, "safetensors"},
                 {"map", AMN_DTYPE_F32, "safetensors"},
                 {"copy", AMN_DTYPE_F32, "npz"},
                 {"splice", AMN_DTYPE_F32, "npz"},
                 {"auto", AMN_DTYPE_F32, "npz"}};
    unsigned emulated = 0;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        if (strcmp(cases[k].target, "npz") == 0 && !amn_test_built("npz")) continue;
        /* qemu-user drops the populate advice (answering 0), and the SIGBUS
         * a mapping then raises past the new end kills the emulator: the
         * mapped reads are checked on a real CPU only. */
        if (getenv("AMN_TEST_EMULATOR") &&
            (strcmp(cases[k].mode, "auto") == 0 || strcmp(cases[k].mode, "map") == 0)) {
            fprintf(stderr, "SKIP %s to %s: mapped reads under %s\n", cases[k].mode,
                    cases[k].target, getenv("AMN_TEST_EMULATOR"));
            emulated++;
            continue;
        }
        const char *in = amn_test_scratch_path("cut.safetensors");
        const uint64_t at = write_model(in, false);
        opened o;
        if (!open_model(in, &o)) skip();
        assert_int_equal(truncate(in, (off_t)(at + (1u << 20) + 77)), 0);
        setenv("AMN_INPUT", cases[k].mode, 1);
        amn_error err = {0};
        const char *out = amn_test_scratch_path("cut-out");
        int rc = convert(&o, cases[k].target, cases[k].dt, 2, out, &err);
        unsetenv("AMN_INPUT");
        if (rc != AMN_E_IO || !strstr(err.msg, "shrank"))
            fail_msg("%s %s to %s: rc %d, message %s", cases[k].mode, amn_dtype_name(cases[k].dt),
                     cases[k].target, rc, err.msg);
        assert_int_equal(access(out, F_OK), -1); /* no output left */
        close_model(&o);
        unlink(in);
    }
    if (emulated) skip();
}

/* amn_map_scan hands over exactly the range's bytes, in order, every way it
 * reads them; a range past the file is refused and a file that shrank is
 * an i/o error, not a signal. */
typedef struct scanned {
    uint8_t *buf;
    size_t n, cap, calls;
} scanned;

static void take_piece(void *ctx, const void *piece, size_t n) {
    scanned *s = ctx;
    assert_true(n > 0 && s->n + n <= s->cap);
    memcpy(s->buf + s->n, piece, n);
    s->n += n;
    s->calls++;
}

static void test_scan(void **state) {
    (void)state;
    const char *in = amn_test_scratch_path("scan.bin");
    const size_t size = (5u << 20) + 123;
    uint8_t *ref = malloc(size);
    assert_non_null(ref);
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < size; i++) { /* xorshift: no two pieces alike */
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        ref[i] = (uint8_t)x;
    }
    FILE *f = fopen(in, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(ref, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
    const uint64_t off = 4097, n = size - off - 5;
    static const char *const modes[] = {"pread", "map", "auto"};
    scanned s = {.buf = malloc(size), .cap = size};
    assert_non_null(s.buf);
    amn_error err = {0};
    for (size_t k = 0; k < sizeof modes / sizeof *modes; k++) {
        amn_map *map = NULL;
        assert_int_equal(amn_map_open(in, &map, &err), AMN_OK);
        setenv("AMN_INPUT", modes[k], 1);
        s.n = s.calls = 0;
        int rc = amn_map_scan(map, off, n, take_piece, &s, &err);
        unsetenv("AMN_INPUT");
        if (rc != AMN_OK) fail_msg("%s: %s", modes[k], err.msg);
        assert_int_equal(s.n, n);
        assert_true(s.calls > 1);
        assert_memory_equal(s.buf, ref + off, n);
        /* what was mapped and read was unmapped again: the bytes still read */
        assert_memory_equal(amn_map_data(map) + off, ref + off, n);
        s.n = 0;
        assert_int_equal(amn_map_scan(map, size, 0, take_piece, &s, &err), AMN_OK);
        assert_int_equal(s.n, 0);
        assert_int_equal(amn_map_scan(map, off, size, take_piece, &s, &err), AMN_E_INVALID);
        amn_map_close(map);
    }
    for (size_t k = 0; k < sizeof modes / sizeof *modes; k++) {
        if (getenv("AMN_TEST_EMULATOR") && strcmp(modes[k], "pread") != 0)
            continue; /* qemu-user: a mapped read past the end kills it (above) */
        amn_map *map = NULL;
        assert_int_equal(amn_map_open(in, &map, &err), AMN_OK);
        assert_int_equal(truncate(in, (off_t)(3u << 20)), 0);
        setenv("AMN_INPUT", modes[k], 1);
        s.n = 0;
        int rc = amn_map_scan(map, off, n, take_piece, &s, &err);
        unsetenv("AMN_INPUT");
        if (rc != AMN_E_IO || !strstr(err.msg, "shrank"))
            fail_msg("%s, truncated: rc %d, %s", modes[k], rc, err.msg);
        amn_map_close(map);
        f = fopen(in, "wb"); /* whole again for the next mode */
        assert_non_null(f);
        assert_int_equal(fwrite(ref, 1, size, f), size);
        assert_int_equal(fclose(f), 0);
    }
    free(s.buf);
    free(ref);
    unlink(in);
}

static int setup(void **state) {
    (void)state;
    return amn_test_scratch_make("input");
}

static int teardown(void **state) {
    (void)state;
    return amn_test_scratch_remove();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths_same_bytes),
        cmocka_unit_test(test_copy_across_file_systems),
        cmocka_unit_test(test_fetch),
        cmocka_unit_test(test_fetch_chooses),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_scan),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
