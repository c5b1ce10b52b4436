/* Malformed GGUF: every truncation of valid v1-v3 files, a corpus of
 * targeted corruptions (each with its error class), every cap of amn_limits,
 * and deterministic random mutations. Each input runs through the mapped
 * path (an exact-size heap copy, so AddressSanitizer sees any over-read) and
 * the header-only path, which must agree. */
#include "amn/amn.h"
#include "amn_test.h"
#include "gguf_format.h"
#include "gguf_rich.h"

static amn_limits defaults(void) {
    amn_limits l;
    amn_limits_default(&l);
    return l;
}

/* Every tensor of a parsed model lies inside the buffer it came from. */
static void check_model(const amn_model *m, const uint8_t *buf, size_t n) {
    for (size_t i = 0; i < amn_model_tensor_count(m); i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        if (!t->data || !t->nbytes) continue;
        const uint8_t *d = t->data;
        if (d >= buf && d <= buf + n) { /* copied tensors (misaligned) live elsewhere */
            assert_true(t->nbytes <= (uint64_t)(buf + n - d));
        }
    }
}

/* Run both paths; returns the code, which they must share. */
static int parse_both(const uint8_t *p, size_t n, const amn_limits *l, amn_error *err) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, p, n);
    amn_source src;
    amn_source_memory(&src, copy, n, "corpus.gguf");
    amn_model *m = amn_model_new("gguf");
    amn_error e1 = {0}, e2 = {0};
    int rc = gguf_read(&src, copy, l, m, &e1);
    if (!rc) check_model(m, copy, n);
    amn_model_free(m);
    if (rc) assert_true(e1.msg[0]);
    amn_model *h = NULL;
    amn_inspect_args a = {.struct_size = sizeof a, .src = &src, .limits = l};
    int rc2 = amn_gguf_format.inspect(&a, &h, &e2);
    if (rc2 != rc) fail_msg("mapped gave %d (%s), header-only %d (%s)", rc, e1.msg, rc2, e2.msg);
    assert_true(rc2 ? h == NULL : h != NULL);
    amn_model_free(h);
    free(copy);
    if (err) *err = e1;
    return rc;
}

/* Words each case's message must hold, by the case's description: the
 * class alone would pass a parser that refuses for the wrong reason. */
static const amn_test_words malformed_words[] = {
    {"5 dimensions", "5 dimensions (GGUF allows 4)"},
    {"NUL in a name", "contains a NUL byte"},
    {"NUL in key", "contains a NUL byte"},
    {"alignment as a string", "general.alignment must be a u32"},
    {"alignment as u64", "general.alignment must be a u32"},
    {"alignment not a power of two", "is not a power of two"},
    {"array element type", "unknown array element type"},
    {"array over the cap", "elements exceeds the cap of 67108864"},
    {"bad magic", "not a GGUF file (bad magic)"},
    {"data section past the end", "past the end of the file"},
    {"duplicate key", "duplicate key a"},
    {"duplicate tensor name", "duplicate tensor name a"},
    {"element count overflow", "element count overflows"},
    {"empty key", "key 0 is empty"},
    {"empty name", "has an empty name"},
    {"key length", "exceeds the 16777216-byte cap"},
    {"key past the end", "truncated: key/values"},
    {"misaligned offset", "is not a multiple of the alignment 32"},
    {"n_dims huge", "truncated: tensor infos"},
    {"n_kv overflowing", "key/value count 18446744073709551615 is impossible"},
    {"n_kv past the end", "is impossible"},
    {"n_kv too few (key/values read as tensor infos)", "element count overflows"},
    {"n_kv too many", "truncated: key/values"},
    {"n_tensors huge", "tensors exceed the cap of 1048576"},
    {"n_tensors over the cap", "tensors exceed the cap of 1048576"},
    {"n_tensors too many", "truncated: tensor infos"},
    {"negative dimension", "dimension 0 is negative"},
    {"nested array count past the end", "truncated: k at offset"},
    {"nesting", "arrays nested deeper than 64"},
    {"offset + size overflows", "run past the end of the file"},
    {"partial overlap", "tensors a and b overlap"},
    {"row not a multiple of the block", "are not a multiple of the Q4_K block (256)"},
    {"runs past the end", "32 bytes at data offset 32 run past the end of the file"},
    {"same offset", "tensors b and a overlap"},
    {"short f64", "truncated: k at offset"},
    {"string array past the end", "truncated: k at offset"},
    {"string value over the cap", "exceeds the 16777216-byte cap"},
    {"tensor larger than the file", "element count overflows"},
    {"type id negative", "invalid ggml type 2147483648"},
    {"u32 array past the end", "truncated: k at offset"},
    {"value type", "unknown value type"},
    {"version", "version"},
};

static void expect(const gb *b, int code, const char *what) {
    amn_limits l = defaults();
    amn_error err = {0};
    int rc = parse_both(b->p, b->n, &l, &err);
    if (rc != code) fail_msg("%s: got %d (%s), wanted %d", what, rc, err.msg, code);
    if (rc == AMN_OK) return;
    amn_test_expect_words(malformed_words, sizeof malformed_words / sizeof *malformed_words, what,
                          err.msg);
}

/* ---- truncation ---------------------------------------------------------------- */

static void truncated_everywhere(void **state) {
    (void)state;
    for (int be = 0; be <= 1; be++)
        for (uint32_t v = 1; v <= 3; v++) {
            gb b = {.be = be};
            rich_layout lay;
            build_rich(&b, v, v == 2 ? 64 : 32, true, &lay);
            uint64_t need = 0; /* the end of the last tensor's bytes */
            size_t k = 0;
            for (size_t i = 0; i < RICH_N_TENSORS; i++) {
                uint64_t end = lay.data_start + lay.offset[k++] + rich_tensors[i].nbytes;
                if (end > need) need = end;
            }
            amn_limits l = defaults();
            for (size_t cut = 0; cut <= b.n; cut++) {
                amn_error err = {0};
                int rc = parse_both(b.p, cut, &l, &err);
                int want = cut < need ? AMN_E_PARSE : AMN_OK;
                if (rc != want)
                    fail_msg("v%u cut at %zu of %zu: %d (%s)", v, cut, b.n, rc, err.msg);
            }
            gb_free(&b);
        }
}

/* ---- targeted corruptions --------------------------------------------------------- */

/* One F32 tensor of 8 elements, given fields. */
static void one_tensor(gb *b, uint32_t version, const char *name, uint32_t ndim, const uint64_t *ne,
                       uint32_t type, uint64_t offset, size_t data) {
    gb_header(b, version, 1, 0);
    gb_tensor(b, name, ndim, ne, type, offset);
    gb_pad(b, 32);
    for (size_t i = 0; i < data; i++) gb_u8(b, 0);
}

static void corrupt_header(void **state) {
    (void)state;
    gb b = {0};
    build_rich(&b, 3, 32, true, &(rich_layout){0});
    gb c = {0};
    gb_bytes(&c, b.p, b.n);
    c.p[0] = 'X';
    expect(&c, AMN_E_PARSE, "bad magic");
    static const struct {
        uint32_t version;
        int code;
    } versions[] = {{0, AMN_E_PARSE},
                    {4, AMN_E_UNSUPPORTED},
                    {0x04000000u, AMN_E_UNSUPPORTED}, /* big-endian v4 */
                    {0x00010000u, AMN_E_UNSUPPORTED}, /* big-endian 256 */
                    {0x12340000u, AMN_E_UNSUPPORTED}, /* big-endian 0x3412 */
                    {0xffffffffu, AMN_E_PARSE}};
    for (size_t i = 0; i < sizeof versions / sizeof *versions; i++) {
        memcpy(c.p, b.p, b.n);
        gb_put_u32_at(&c, 4, versions[i].version);
        expect(&c, versions[i].code, "version");
    }
    /* counts: v3 n_tensors at 8, n_kv at 16 */
    static const struct {
        size_t at;
        uint64_t v;
        int code;
        const char *what;
    } counts[] = {
        {16, 1ull << 62, AMN_E_PARSE, "n_kv past the end"},
        {16, UINT64_MAX, AMN_E_PARSE, "n_kv overflowing"},
        {16, 1000, AMN_E_PARSE, "n_kv too many"},
        {16, 3, AMN_E_PARSE, "n_kv too few (key/values read as tensor infos)"},
        {8, 1ull << 40, AMN_E_LIMIT, "n_tensors over the cap"},
        {8, UINT64_MAX, AMN_E_LIMIT, "n_tensors huge"},
        {8, 1000, AMN_E_PARSE, "n_tensors too many"},
    };
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        memcpy(c.p, b.p, b.n);
        gb_put_u64_at(&c, counts[i].at, counts[i].v);
        expect(&c, counts[i].code, counts[i].what);
    }
    gb_free(&c);
    gb_free(&b);
}

/* A big-endian file: its counts are read most significant byte first, so
 * the same corruptions give the same refusals; a little-endian body under a
 * big-endian version reads as impossible counts, never as a model. */
static void corrupt_big_endian(void **state) {
    (void)state;
    gb b = {.be = true};
    build_rich(&b, 3, 32, true, &(rich_layout){0});
    gb c = {.be = true};
    gb_bytes(&c, b.p, b.n);
    expect(&c, AMN_OK, "big-endian");
    static const struct {
        size_t at;
        uint64_t v;
        int code;
        const char *what;
    } counts[] = {
        {16, 1ull << 62, AMN_E_PARSE, "n_kv past the end"},
        {16, UINT64_MAX, AMN_E_PARSE, "n_kv overflowing"},
        {16, 1000, AMN_E_PARSE, "n_kv too many"},
        {8, 1ull << 40, AMN_E_LIMIT, "n_tensors over the cap"},
        {8, UINT64_MAX, AMN_E_LIMIT, "n_tensors huge"},
        {8, 1000, AMN_E_PARSE, "n_tensors too many"},
    };
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        memcpy(c.p, b.p, b.n);
        gb_put_u64_at(&c, counts[i].at, counts[i].v);
        expect(&c, counts[i].code, counts[i].what);
    }
    /* the key length of the first key, then its value type */
    memcpy(c.p, b.p, b.n);
    gb_put_u64_at(&c, 24, 1ull << 40);
    expect(&c, AMN_E_LIMIT, "key length");
    gb_free(&c);
    gb_free(&b);

    gb le = {0};
    build_rich(&le, 3, 32, true, &(rich_layout){0});
    gb_put_u32_at(&le, 4, 0x03000000u); /* v3, big-endian */
    expect(&le, AMN_E_PARSE, "n_kv past the end");
    gb_free(&le);

    /* an array count of 2^32 elements in the big-endian file */
    gb a = {.be = true};
    gb_header(&a, 3, 0, 1);
    gb_key(&a, "k", T_ARR);
    gb_arr(&a, T_U32, 1ull << 32);
    gb_u32(&a, 1);
    expect(&a, AMN_E_LIMIT, "array over the cap");
    gb_free(&a);
}

static void corrupt_kvs(void **state) {
    (void)state;
    for (uint32_t v = 1; v <= 3; v++) {
        gb b = {0};
        /* key length over the string cap */
        gb_header(&b, v, 0, 1);
        gb_count(&b, v == 1 ? 0xffffffffu : 1ull << 40);
        for (int i = 0; i < 16; i++) gb_u8(&b, 0);
        expect(&b, AMN_E_LIMIT, "key length");
        gb_free(&b);
        /* key longer than the file */
        gb_header(&b, v, 0, 1);
        gb_count(&b, 1000);
        gb_bytes(&b, "abc", 3);
        expect(&b, AMN_E_PARSE, "key past the end");
        gb_free(&b);
        /* empty key */
        gb_header(&b, v, 0, 1);
        gb_kv_u32(&b, "", 1);
        expect(&b, AMN_E_PARSE, "empty key");
        gb_free(&b);
        /* NUL in a key */
        gb_header(&b, v, 0, 1);
        gb_strn(&b, "a\0b", 3);
        gb_u32(&b, T_U8);
        gb_u8(&b, 1);
        expect(&b, AMN_E_PARSE, "NUL in key");
        gb_free(&b);
        /* duplicate key */
        gb_header(&b, v, 0, 2);
        gb_kv_u32(&b, "a", 1);
        gb_kv_str(&b, "a", "x");
        expect(&b, AMN_E_PARSE, "duplicate key");
        gb_free(&b);
        /* unknown value types */
        static const uint32_t bad_types[] = {13, 255, 0xffffffffu};
        for (size_t i = 0; i < 3; i++) {
            gb_header(&b, v, 0, 1);
            gb_key(&b, "k", bad_types[i]);
            gb_u64(&b, 0);
            expect(&b, AMN_E_PARSE, "value type");
            gb_free(&b);
            gb_header(&b, v, 0, 1);
            gb_key(&b, "k", T_ARR);
            gb_arr(&b, bad_types[i], 1);
            gb_u64(&b, 0);
            expect(&b, AMN_E_PARSE, "array element type");
            gb_free(&b);
        }
        /* a scalar cut short */
        gb_header(&b, v, 0, 1);
        gb_key(&b, "k", T_F64);
        gb_u32(&b, 0);
        expect(&b, AMN_E_PARSE, "short f64");
        gb_free(&b);
        /* array counts: over the cap, past the end, strings past the end */
        gb_header(&b, v, 0, 1);
        gb_key(&b, "k", T_ARR);
        gb_arr(&b, T_U8, v == 1 ? 0xffffffffu : 1ull << 40);
        expect(&b, AMN_E_LIMIT, "array over the cap");
        gb_free(&b);
        gb_header(&b, v, 0, 1);
        gb_key(&b, "k", T_ARR);
        gb_arr(&b, T_U32, 1u << 20);
        gb_u32(&b, 1);
        expect(&b, AMN_E_PARSE, "u32 array past the end");
        gb_free(&b);
        gb_header(&b, v, 0, 1);
        gb_key(&b, "k", T_ARR);
        gb_arr(&b, T_STR, 1u << 25);
        gb_str(&b, "x");
        expect(&b, AMN_E_PARSE, "string array past the end");
        gb_free(&b);
        gb_header(&b, v, 0, 1);
        gb_key(&b, "k", T_ARR);
        gb_arr(&b, T_ARR, 1u << 24);
        gb_arr(&b, T_U8, 0);
        expect(&b, AMN_E_PARSE, "nested array count past the end");
        gb_free(&b);
        /* string value over the cap */
        gb_header(&b, v, 0, 1);
        gb_key(&b, "k", T_STR);
        gb_count(&b, v == 1 ? 0x80000000u : 1ull << 63);
        expect(&b, AMN_E_LIMIT, "string value over the cap");
        gb_free(&b);
        /* nesting deeper than the cap */
        gb_header(&b, v, 0, 1);
        gb_key(&b, "k", T_ARR);
        for (int d = 0; d < 70; d++) gb_arr(&b, T_ARR, 1);
        gb_arr(&b, T_U8, 0);
        expect(&b, AMN_E_LIMIT, "nesting");
        gb_free(&b);
    }
}

static void corrupt_alignment(void **state) {
    (void)state;
    gb b = {0};
    gb_header(&b, 3, 0, 1);
    gb_kv_str(&b, "general.alignment", "32");
    expect(&b, AMN_E_PARSE, "alignment as a string");
    gb_free(&b);
    static const uint32_t bad[] = {0, 3, 48, 0x80000001u};
    for (size_t i = 0; i < 4; i++) {
        gb_header(&b, 3, 0, 1);
        gb_kv_u32(&b, "general.alignment", bad[i]);
        expect(&b, AMN_E_PARSE, "alignment not a power of two");
        gb_free(&b);
    }
    gb_header(&b, 3, 0, 1);
    gb_key(&b, "general.alignment", T_U64);
    gb_u64(&b, 32);
    expect(&b, AMN_E_PARSE, "alignment as u64");
    gb_free(&b);
    /* a huge alignment puts the data section past the end */
    gb_header(&b, 3, 1, 1);
    gb_kv_u32(&b, "general.alignment", 1u << 31);
    const uint64_t ne[1] = {8};
    gb_tensor(&b, "t", 1, ne, 0, 0);
    for (int i = 0; i < 64; i++) gb_u8(&b, 0);
    expect(&b, AMN_E_PARSE, "data section past the end");
    gb_free(&b);
}

static void corrupt_tensors(void **state) {
    (void)state;
    gb b = {0};
    const uint64_t ne8[1] = {8};
    for (uint32_t v = 1; v <= 3; v++) {
        one_tensor(&b, v, "t", 1, ne8, 0, 0, 32);
        expect(&b, AMN_OK, "valid one-tensor file");
        gb_free(&b);
        const uint64_t ne5[5] = {1, 1, 1, 1, 8};
        one_tensor(&b, v, "t", 5, ne5, 0, 0, 32);
        expect(&b, AMN_E_PARSE, "5 dimensions");
        gb_free(&b);
        gb_header(&b, v, 1, 0);
        gb_str(&b, "t");
        gb_u32(&b, 0xffffffffu); /* n_dims */
        expect(&b, AMN_E_PARSE, "n_dims huge");
        gb_free(&b);
        if (v > 1) {
            const uint64_t neg[1] = {1ull << 63};
            one_tensor(&b, v, "t", 1, neg, 0, 0, 32);
            expect(&b, AMN_E_PARSE, "negative dimension");
            gb_free(&b);
            const uint64_t big[2] = {1ull << 32, 1ull << 32};
            one_tensor(&b, v, "t", 2, big, 0, 0, 32);
            expect(&b, AMN_E_PARSE, "element count overflow");
            gb_free(&b);
        }
        const uint64_t huge[2] = {0xffffffffu, 0xffffffffu}; /* fits, but not in the file */
        one_tensor(&b, v, "t", 2, huge, 0, 0, 32);
        expect(&b, AMN_E_PARSE, "tensor larger than the file");
        gb_free(&b);
        const uint64_t ne100[1] = {100};
        one_tensor(&b, v, "t", 1, ne100, 12 /* Q4_K */, 0, 256);
        expect(&b, AMN_E_PARSE, "row not a multiple of the block");
        gb_free(&b);
        one_tensor(&b, v, "t", 1, ne8, 0x80000000u, 0, 32);
        expect(&b, AMN_E_PARSE, "type id negative");
        gb_free(&b);
        one_tensor(&b, v, "t", 1, ne8, 0, 4, 64);
        expect(&b, AMN_E_PARSE, "misaligned offset");
        gb_free(&b);
        one_tensor(&b, v, "t", 1, ne8, 0, 32, 32);
        expect(&b, AMN_E_PARSE, "runs past the end");
        gb_free(&b);
        one_tensor(&b, v, "t", 1, ne8, 0, UINT64_MAX - 31, 32);
        expect(&b, AMN_E_PARSE, "offset + size overflows");
        gb_free(&b);
        one_tensor(&b, v, "", 1, ne8, 0, 0, 32);
        expect(&b, AMN_E_PARSE, "empty name");
        gb_free(&b);
        gb_header(&b, v, 1, 0);
        gb_strn(&b, "a\0b", 3);
        gb_u32(&b, 1);
        gb_count(&b, 8);
        gb_u32(&b, 0);
        gb_u64(&b, 0);
        gb_pad(&b, 32);
        for (int i = 0; i < 32; i++) gb_u8(&b, 0);
        expect(&b, AMN_E_PARSE, "NUL in a name");
        gb_free(&b);
        /* two tensors: duplicate name, overlap, partial overlap, same offset */
        static const struct {
            const char *n1, *n2;
            uint64_t o2, ne2;
            int code;
            const char *what;
        } pairs[] = {
            {"a", "a", 64, 8, AMN_E_PARSE, "duplicate tensor name"},
            {"a", "b", 0, 8, AMN_E_PARSE, "same offset"},
            {"a", "b", 32, 8, AMN_E_PARSE, "partial overlap"},
            {"a", "b", 64, 8, AMN_OK, "adjacent"},
            {"a", "b", 96, 8, AMN_OK, "gap between"},
            {"a", "b", 32, 0, AMN_OK, "an empty tensor inside another"},
        };
        for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
            gb_header(&b, v, 2, 0);
            const uint64_t first[1] = {16}, second[1] = {pairs[i].ne2};
            gb_tensor(&b, pairs[i].n1, 1, first, 0, 0);
            gb_tensor(&b, pairs[i].n2, 1, second, 0, pairs[i].o2);
            gb_pad(&b, 32);
            for (int k = 0; k < 128; k++) gb_u8(&b, 0);
            expect(&b, pairs[i].code, pairs[i].what);
            gb_free(&b);
        }
        /* a zero-tensor file needs no data section */
        gb_header(&b, v, 0, 1);
        gb_kv_str(&b, "general.architecture", "llama");
        expect(&b, AMN_OK, "no tensors, no padding");
        gb_free(&b);
        /* but one tensor needs its data section to exist */
        gb_header(&b, v, 1, 0);
        const uint64_t zero[1] = {0};
        gb_tensor(&b, "t", 1, zero, 0, 0);
        gb_u8(&b, 0); /* header not a multiple of 32: data would start past the end */
        expect(&b, AMN_E_PARSE, "data section past the end");
        gb_free(&b);
    }
}

/* Each cap of amn_limits, at a value the rich file exceeds. */
static void limits_enforced(void **state) {
    (void)state;
    gb b = {0};
    rich_layout lay;
    build_rich(&b, 3, 32, true, &lay);
    struct {
        const char *what;
        amn_limits l;
    } cases[5];
    for (int i = 0; i < 5; i++) cases[i].l = defaults();
    cases[0].what = "max_tensors", cases[0].l.max_tensors = 3;
    cases[1].what = "max_string", cases[1].l.max_string = 4;
    cases[2].what = "max_array", cases[2].l.max_array = 2;
    cases[3].what = "max_depth", cases[3].l.max_depth = 2;
    cases[4].what = "max_header_bytes", cases[4].l.max_header_bytes = 100;
    for (int i = 0; i < 5; i++) {
        amn_error err = {0};
        int rc = parse_both(b.p, b.n, &cases[i].l, &err);
        if (rc != AMN_E_LIMIT) fail_msg("%s: got %d (%s)", cases[i].what, rc, err.msg);
    }
    amn_limits l = defaults();
    l.max_depth = 3; /* k.arr.nested is exactly 3 deep */
    assert_int_equal(parse_both(b.p, b.n, &l, NULL), AMN_OK);
    l = defaults();
    l.max_alloc = 4096; /* the 200 KB string below needs more */
    gb s = {0};
    gb_header(&s, 3, 0, 1);
    gb_key(&s, "k", T_STR);
    gb_count(&s, 200000);
    for (int i = 0; i < 200000; i++) gb_u8(&s, 'a');
    assert_int_equal(parse_both(s.p, s.n, &l, NULL), AMN_E_LIMIT);
    gb_free(&s);
    gb_free(&b);
}

/* ---- random mutations ---------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void random_mutations(void **state) {
    (void)state;
    gb bases[5] = {[4] = {.be = true}};
    rich_layout lay;
    for (uint32_t v = 1; v <= 3; v++) build_rich(&bases[v - 1], v, 32, true, &lay);
    size_t fn = 0;
    uint8_t *fx = amn_test_read_file(AMN_SOURCE_DIR "/fixtures/gguf/tiny-quant.gguf", &fn);
    assert_non_null(fx);
    gb_bytes(&bases[3], fx, fn);
    free(fx);
    build_rich(&bases[4], 3, 32, true, &lay);
    static const uint64_t extremes[] = {0,          1,          0x7f,       0xff,
                                        0xffff,     0x7fffffff, 0xffffffff, 1ull << 32,
                                        1ull << 62, INT64_MAX,  UINT64_MAX};
    const int iterations =
        getenv("AMN_GGUF_MUTATIONS") ? atoi(getenv("AMN_GGUF_MUTATIONS")) : 20000;
    amn_limits l = defaults();
    size_t counts[8] = {0};
    for (int it = 0; it < iterations; it++) {
        const gb *base = &bases[rnd() % 5];
        uint8_t *p = malloc(base->n);
        memcpy(p, base->p, base->n);
        size_t n = base->n;
        const int edits = 1 + (int)(rnd() % 4);
        for (int e = 0; e < edits && n > 0; e++) {
            /* mostly in the header, where the structure is */
            const size_t span = rnd() % 4 ? (n < 600 ? n : 600) : n;
            const size_t at = (size_t)(rnd() % span);
            switch (rnd() % 4) {
            case 0:
                p[at] ^= (uint8_t)(1u << (rnd() % 8));
                break;
            case 1:
                p[at] = (uint8_t)rnd();
                break;
            case 2: { /* a field set to an extreme value */
                uint64_t x = extremes[rnd() % (sizeof extremes / sizeof *extremes)];
                for (size_t k = 0; k < 8 && at + k < n; k++) p[at + k] = (uint8_t)(x >> (8 * k));
                break;
            }
            default: /* truncate */
                n = at;
                break;
            }
        }
        int rc = parse_both(p, n, &l, NULL);
        assert_true(rc == AMN_OK || rc == AMN_E_PARSE || rc == AMN_E_UNSUPPORTED ||
                    rc == AMN_E_LIMIT);
        counts[-rc]++;
        free(p);
    }
    fprintf(stderr, "mutations: %d runs, ok %zu, parse %zu, unsupported %zu, limit %zu\n",
            iterations, counts[0], counts[1], counts[2], counts[3]);
    for (int i = 0; i < 5; i++) gb_free(&bases[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(truncated_everywhere), cmocka_unit_test(corrupt_header),
        cmocka_unit_test(corrupt_kvs),          cmocka_unit_test(corrupt_alignment),
        cmocka_unit_test(corrupt_tensors),      cmocka_unit_test(limits_enforced),
        cmocka_unit_test(random_mutations),     cmocka_unit_test(corrupt_big_endian),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
