/* Fuzz target: the registry cache parser (core/src/registry_cache.c,
 * compiled in). Each input is parsed as it is and again with a checksum
 * line appended, so that mutations reach the field checks behind the
 * checksum. Invariants: no crash or leak; whatever parses writes back to a
 * text that parses to the same text. */
#include <inttypes.h>

#include "fuzz_common.h"
#include "registry_cache.h"

static void check_round_trip(const amni_cache *c) {
    size_t len = 0, len2 = 0;
    char *text = amni_cache_format((const amni_cached_plugin *const *)c->plugins, c->n, &len);
    if (!text) return; /* an unwritable string is left out, by design */
    amni_cache again;
    if (!amni_cache_parse(text, len, &again))
        fuzz_fail("a written cache does not parse%s%s", "", "");
    char *text2 =
        amni_cache_format((const amni_cached_plugin *const *)again.plugins, again.n, &len2);
    if (!text2 || len2 != len || memcmp(text, text2, len) != 0)
        fuzz_fail("a cache does not read back to the same text%s%s", "", "");
    free(text2);
    amni_cache_clear(&again);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)fuzz_pipeline; /* fuzz_common.h's model pipeline: not this target's */
    amni_cache c;
    if (amni_cache_parse((const char *)data, size, &c)) check_round_trip(&c);
    amni_cache_clear(&c);
    if (size > AMNI_CACHE_MAX_BYTES - 64) return 0;
    /* The same bytes as a body, with the checksum the parser wants. */
    char *text = malloc(size + 64);
    if (!text) return 0;
    memcpy(text, data, size);
    size_t n = size;
    if (!n || text[n - 1] != '\n') text[n++] = '\n';
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)text[i]) * 0x100000001b3ull;
    n += (size_t)snprintf(text + n, 64, "end\t%016" PRIx64 "\n", h);
    if (amni_cache_parse(text, n, &c)) check_round_trip(&c);
    amni_cache_clear(&c);
    free(text);
    return 0;
}

#ifndef AMN_LIBFUZZER
/* The seed: a cache as the core writes it, body only (the target appends
 * the checksum), describing one plugin with a format and a scheme. */
#define STR_(x) #x
#define STR(x)  STR_(x)
static const char seed[] =
    "amn-registry-cache\t2\t" AMN_VERSION_STRING "\t" STR(AMN_PLUGIN_ABI_MAJOR) "." STR(
        AMN_PLUGIN_ABI_MINOR) "\n"
                              "P\t/lib/amn/plugins/"
                              "amn-x.so\t4096\t1700000000123456789\t42\t7\tx\t2\t2\t1."
                              "0\tdesc\tMIT\n"
                              "F\tfmt\tfmt,f\t1\nS\t8\t0\t414200ff\nS\t0\t1\t\nF\topaque\t\t0\n"
                              "C\tsch\t1\t1\nK\t0\t.qweight\nK\t10000\t\nT\tsch-4bit\nT\tQ4_K_M\n"
                              "C\tother\t0\t0\nR\tproto\n";

int main(int argc, char **argv) {
    char path[] = "/tmp/amn-fuzz-regcache.XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0 || write(fd, seed, sizeof seed - 1) != (ssize_t)(sizeof seed - 1)) return 1;
    close(fd);
    char iters[32];
    snprintf(iters, sizeof iters, "%s", argc > 1 ? argv[1] : "2000");
    char *args[] = {argv[0], iters, path};
    const int seeds = fuzz_driver_main(3, args, NULL);
    unlink(path);
    if (seeds < 0) return 1;
    printf("fuzz registry cache: %d seeds: no crash\n", seeds);
    amn_ctx_free(fuzz_ctx());
    return seeds ? 0 : 1;
}
#endif
