/* The registry cache parser (core/src/registry_cache.c, compiled in): a
 * written cache reads back to the same text; every truncation, every
 * flipped byte and every hostile field (with a checksum recomputed so that
 * the field checks themselves are reached) is refused as a whole. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/amn.h"
#include "amn_test.h"
#include "registry_cache.h"

static amni_cached_plugin *sample_plugin(const char *name) {
    amni_cached_plugin *p = calloc(1, sizeof *p);
    char file[64];
    snprintf(file, sizeof file, "/usr/lib/amn/plugins/amn-%s.so", name);
    p->file = strdup(file);
    p->key = (amni_file_key){.size = 4096, .mtime_ns = 1700000000123456789ull, .ino = 42, .dev = 7};
    p->name = strdup(name);
    p->version = strdup("1.0");
    p->description = strdup("A sample: with spaces, 'quotes' and \"more\"");
    p->license = strdup("MIT");
    p->abi_major = 2;
    p->abi_minor = 2;
    p->n_formats = 2;
    p->formats = calloc(2, sizeof *p->formats);
    p->formats[0].name = strdup("fmt");
    p->formats[0].extensions = strdup("fmt,f");
    p->formats[0].sigs_known = true;
    p->formats[0].n_sigs = 2;
    p->formats[0].sigs = calloc(2, sizeof(amn_probe_sig));
    p->formats[0].sigs[0] = (amn_probe_sig){.offset = 8, .length = 4, .bytes = "AB\x00\xff"};
    p->formats[0].sigs[1] = (amn_probe_sig){.flags = AMN_PROBE_SIG_DIRECTORY};
    p->formats[1].name = strdup("opaque");
    p->formats[1].extensions = strdup("");
    p->n_schemes = 1;
    p->schemes = calloc(1, sizeof *p->schemes);
    p->schemes[0].name = strdup("sch");
    p->schemes[0].keys_known = true;
    p->schemes[0].n_keys = 2;
    p->schemes[0].keys = calloc(2, sizeof *p->schemes[0].keys);
    p->schemes[0].keys[0] = (amni_cached_key){strdup(".qweight"), 0};
    p->schemes[0].keys[1] = (amni_cached_key){strdup(""), 1ull << AMN_DTYPE_BLOCK};
    p->schemes[0].targets_known = true;
    p->schemes[0].n_targets = 2;
    p->schemes[0].targets = calloc(2, sizeof *p->schemes[0].targets);
    p->schemes[0].targets[0] = strdup("sch-4bit");
    p->schemes[0].targets[1] = strdup("Q4_K_M");
    p->n_resolvers = 1;
    p->resolvers = calloc(1, sizeof *p->resolvers);
    p->resolvers[0] = strdup("proto");
    return p;
}

static char *sample_text(size_t *len) {
    amni_cached_plugin *ps[2] = {sample_plugin("one"), sample_plugin("two")};
    char *text = amni_cache_format((const amni_cached_plugin *const *)ps, 2, len);
    amni_cached_plugin_free(ps[0]);
    amni_cached_plugin_free(ps[1]);
    return text;
}

static void round_trip(void **state) {
    (void)state;
    size_t len = 0;
    char *text = sample_text(&len);
    assert_non_null(text);
    amni_cache c;
    assert_true(amni_cache_parse(text, len, &c));
    assert_int_equal(c.n, 2);
    const amni_cached_plugin *p = c.plugins[1];
    assert_string_equal(p->name, "two");
    assert_int_equal(p->key.mtime_ns, 1700000000123456789ull);
    assert_int_equal(p->formats[0].sigs[0].length, 4);
    assert_memory_equal(p->formats[0].sigs[0].bytes, "AB\x00\xff", 4);
    assert_true(p->formats[0].sigs[1].flags & AMN_PROBE_SIG_DIRECTORY);
    assert_false(p->formats[1].sigs_known);
    assert_string_equal(p->schemes[0].keys[1].suffix, "");
    assert_int_equal(p->schemes[0].keys[1].dtypes, 1ull << AMN_DTYPE_BLOCK);
    assert_true(p->schemes[0].targets_known);
    assert_int_equal(p->schemes[0].n_targets, 2);
    assert_string_equal(p->schemes[0].targets[1], "Q4_K_M");
    assert_string_equal(p->resolvers[0], "proto");
    size_t len2 = 0;
    char *again = amni_cache_format((const amni_cached_plugin *const *)c.plugins, c.n, &len2);
    assert_int_equal(len2, len);
    assert_memory_equal(again, text, len);
    free(again);
    amni_cache_clear(&c);
    free(text);
}

static void truncated_and_flipped(void **state) {
    (void)state;
    size_t len = 0;
    char *text = sample_text(&len);
    amni_cache c;
    for (size_t n = 0; n < len; n++) {
        assert_false(amni_cache_parse(text, n, &c));
        assert_int_equal(c.n, 0);
    }
    for (size_t i = 0; i < len; i++) {
        const char keep = text[i];
        text[i] = (char)(keep ^ 0x20);
        assert_false(amni_cache_parse(text, len, &c));
        text[i] = keep;
    }
    assert_true(amni_cache_parse(text, len, &c));
    amni_cache_clear(&c);
    free(text);
}

/* The sample's text with `line` inserted after line `after` (0: after the
 * identity line) or, when replace is set, in its place; checksum recomputed. */
static char *with_line(const char *line, int after, bool replace, size_t *out_len) {
    size_t len = 0;
    char *text = sample_text(&len);
    char *end = strstr(text, "end\t");
    *end = '\0';
    char *p = text;
    for (int i = 0; i <= after; i++) p = strchr(p, '\n') + 1;
    char *q = replace ? strchr(p, '\n') + 1 : p;
    const size_t body_max = len + strlen(line) + 64;
    char *body = malloc(body_max + 64);
    int w = snprintf(body, body_max, "%.*s%s\n%s", (int)(p - text), text, line, q);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < w; i++) h = (h ^ (uint8_t)body[i]) * 0x100000001b3ull;
    w += snprintf(body + w, 64, "end\t%016" PRIx64 "\n", h);
    free(text);
    *out_len = (size_t)w;
    return body;
}

static void hostile_fields(void **state) {
    (void)state;
    /* The identity line is line 0; the first P is line 1, its first F line
     * 2, that F's signatures lines 3-4, the second F line 5, the C line 6,
     * its keys lines 7-8 and its targets lines 9-10. */
    static const struct {
        const char *line;
        int after;
        bool replace;
    } bad[] = {
        {"X\tunknown tag", 1, false},
        {"P\trelative/amn-x.so\t1\t2\t3\t4\tx\t2\t2\tv\td\tl", 0, false},
        {"P\t/a/amn-x.so\t1\t2\t3\t4\t\t2\t2\tv\td\tl", 0, false},   /* empty name */
        {"P\t/a/amn-x.so\t-1\t2\t3\t4\tx\t2\t2\tv\td\tl", 0, false}, /* sign */
        {"P\t/a/amn-x.so\t+1\t2\t3\t4\tx\t2\t2\tv\td\tl", 0, false},
        {"P\t/a/amn-x.so\t 1\t2\t3\t4\tx\t2\t2\tv\td\tl", 0, false},
        {"P\t/a/amn-x.so\t99999999999999999999\t2\t3\t4\tx\t2\t2\tv\td\tl", 0, false},
        {"P\t/a/amn-x.so\t1\t2\t3\t4\tx\t70000\t2\tv\td\tl", 0, false}, /* ABI > 16 bits */
        {"P\t/a/amn-x.so\t1\t2\t3\t4\tx\t2\t2\tv\td", 0, false},        /* a field short */
        {"P\t/a/amn-x.so\t1\t2\t3\t4\tx\t2\t2\tv\td\tl\textra", 0, false},
        {"P\t/a/amn-x.so\t1\t2\t3\t4\tx\t2\t2\tv\td\tl\r", 0, false}, /* control char */
        {"F\tfmt\text\t1", 0, false},                                 /* before any P */
        {"S\t0\t0\t41", 1, false},                                    /* S after P, no F */
        {"K\t0\t.x", 1, false},                                       /* K with no C */
        {"S\t0\t0\t4", 2, false},                                     /* odd hex */
        {"S\t0\t0\t4g", 2, false},                                    /* not hex */
        {"S\t0\t0\t4A", 2, false},                                    /* upper case */
        {"S\t0\t0\t000102030405060708090a0b0c0d0e0f10", 2, false},    /* 17 bytes */
        {"S\t65536\t0\t41", 2, false},                                /* past the probe head */
        {"S\t0\t2\t41", 2, false},                                    /* unknown flag */
        {"S\t0\t0\t", 2, false},                                      /* no bytes, no flag */
        {"S\t0\t0\t41", 5, false},                                    /* sigs of an F without */
        {"F\tfmt\text\t2", 1, false},                                 /* not 0/1 */
        {"C\tsch\tyes", 1, false},
        {"C\tsch\t1", 1, false},            /* version 1's scheme line: no targets flag */
        {"C\tsch\t1\t2", 1, false},         /* not 0/1 */
        {"C\tsch\t1\t1\tx", 1, false},      /* a field too many */
        {"T\tq4", 1, false},                /* T with no C */
        {"T\t", 10, false},                 /* empty target */
        {"T\tq4\tx", 10, false},            /* a field too many */
        {"C\tsch\t1\t0\nT\tq4", 10, false}, /* a target of a C whose targets are unknown */
        {"K\tzz\t.x", 6, false},            /* bad mask */
        {"K\t10000000000000000\t.x", 6, false},
        {"R\t", 1, false},
        {"", 1, false}, /* empty line */
        {"amn-registry-cache\t999\tx\t2.2", 0, true},
        {"amn-registry-cache\t1\t0.1.0\t2.3", 0, true}, /* a version 1 cache */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        size_t len;
        char *text = with_line(bad[i].line, bad[i].after, bad[i].replace, &len);
        amni_cache c;
        if (amni_cache_parse(text, len, &c)) fail_msg("accepted hostile line %zu: %s", i, text);
        assert_int_equal(c.n, 0);
        free(text);
    }
    /* The control: a harmless extra line with a good checksum is read. */
    size_t len;
    char *text = with_line("R\tanother", 1, false, &len);
    amni_cache c;
    assert_true(amni_cache_parse(text, len, &c));
    assert_int_equal(c.plugins[0]->n_resolvers, 2);
    amni_cache_clear(&c);
    free(text);
}

static void caps(void **state) {
    (void)state;
    /* More items per parent than AMNI_CACHE_MAX_ITEMS: refused. */
    size_t cap = 1 << 16, n = 0;
    char *lines = calloc(1, cap);
    for (int i = 0; i <= AMNI_CACHE_MAX_ITEMS; i++)
        n += (size_t)snprintf(lines + n, cap - n, "%sR\tr%d", i ? "\n" : "", i);
    size_t len;
    char *text = with_line(lines, 1, false, &len);
    amni_cache c;
    assert_false(amni_cache_parse(text, len, &c));
    free(text);
    /* the same for one scheme's targets (the sample's two and 63 more) */
    n = 0;
    for (int i = 0; i <= AMNI_CACHE_MAX_ITEMS - 2; i++)
        n += (size_t)snprintf(lines + n, cap - n, "%sT\tt%d", i ? "\n" : "", i);
    text = with_line(lines, 10, false, &len);
    assert_false(amni_cache_parse(text, len, &c));
    free(text);
    n = 0; /* the control: 64 in all are read */
    for (int i = 0; i < AMNI_CACHE_MAX_ITEMS - 2; i++)
        n += (size_t)snprintf(lines + n, cap - n, "%sT\tt%d", i ? "\n" : "", i);
    text = with_line(lines, 10, false, &len);
    assert_true(amni_cache_parse(text, len, &c));
    assert_int_equal(c.plugins[0]->schemes[0].n_targets, AMNI_CACHE_MAX_ITEMS);
    amni_cache_clear(&c);
    free(text);
    /* Over the size cap: refused before parsing. */
    char *big = malloc(AMNI_CACHE_MAX_BYTES + 2);
    memset(big, 'x', AMNI_CACHE_MAX_BYTES + 1);
    big[AMNI_CACHE_MAX_BYTES] = '\n';
    assert_false(amni_cache_parse(big, AMNI_CACHE_MAX_BYTES + 1, &c));
    free(big);
    free(lines);
    /* A plugin whose strings cannot be written is left out, not mangled. */
    amni_cached_plugin *ps[2] = {sample_plugin("tab"), sample_plugin("ok")};
    free(ps[0]->description);
    ps[0]->description = strdup("has\ta tab");
    char *out = amni_cache_format((const amni_cached_plugin *const *)ps, 2, &len);
    assert_true(amni_cache_parse(out, len, &c));
    assert_int_equal(c.n, 1);
    assert_string_equal(c.plugins[0]->name, "ok");
    amni_cache_clear(&c);
    free(out);
    amni_cached_plugin_free(ps[0]);
    amni_cached_plugin_free(ps[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(truncated_and_flipped),
        cmocka_unit_test(hostile_fields),
        cmocka_unit_test(caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
