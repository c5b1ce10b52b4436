/* Fuzz target over every loaded format: probe, header-only inspect, full
 * open, planning, and (for small inputs) a whole conversion. Built two ways:
 * with -fsanitize=fuzzer it is a libFuzzer target; otherwise a driver runs
 * deterministic mutations of seed files (ctest: fuzz_smoke, under ASan in CI).
 *
 *   fuzz_smoke [iterations] [seed files or directories...]
 *
 * Environment: AMN_FUZZ_FORMAT (see below), AMN_FUZZ_DEFAULT_LIMITS
 * (fuzz_common.h). */
#include "fuzz_common.h"

/* AMN_FUZZ_FORMAT=<name> forces one format (no probing), to aim a run at a
 * single parser with that format's seeds. */
/* A format's probe signatures are a promise the registry cache relies on to
 * leave its plugin unloaded: a probe that scores a file above WEAK when no
 * signature matches its head breaks it. */
static void check_probe_sigs(const uint8_t *data, size_t size) {
    const size_t hn = size < AMN_PROBE_HEAD ? size : AMN_PROBE_HEAD;
    uint8_t *head = calloc(1, hn + AMN_PROBE_PADDING), *tail = calloc(1, hn + AMN_PROBE_PADDING);
    if (!head || !tail) abort();
    if (hn) memcpy(head, data, hn), memcpy(tail, data + size - hn, hn);
    const amn_probe_data pd = {.struct_size = sizeof pd,
                               .head = head,
                               .head_size = hn,
                               .tail = tail,
                               .tail_size = hn,
                               .file_size = size};
    amn_ctx *ctx = fuzz_ctx();
    for (size_t f = 0; f < amn_ctx_format_count(ctx); f++) {
        const amn_format *fmt = amn_ctx_format(ctx, f);
        const amn_probe_sig *sig = amn_format_probe_sigs(fmt);
        if (!sig) continue;
        bool matched = false;
        for (; sig->length || sig->flags; sig++)
            matched |= sig->length && sig->offset + sig->length <= hn &&
                       memcmp(head + sig->offset, sig->bytes, sig->length) == 0;
        if (!matched && fmt->probe(&pd) > AMN_PROBE_WEAK)
            fuzz_fail("format %s scored above WEAK a file none of its probe signatures "
                      "matches%s",
                      fmt->name, "");
    }
    free(head);
    free(tail);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_probe_sigs(data, size);
    fuzz_pipeline(data, size, getenv("AMN_FUZZ_FORMAT"));
    return 0;
}

#ifndef AMN_LIBFUZZER
int main(int argc, char **argv) {
    long iterations;
    int seeds = fuzz_driver_main(argc, argv, &iterations);
    if (seeds < 0) return 1;
    /* Random buffers: no format may claim them (FFmpeg's probetest). */
    amn_ctx *ctx = fuzz_ctx();
    uint64_t seed = 0x5eed;
    uint8_t *buf = malloc(4096);
    if (!buf) return 1;
    for (long i = 0; i < iterations; i++) {
        size_t n = 1 + fuzz_rng(&seed) % 4096;
        for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)fuzz_rng(&seed);
        amn_probe_data pd = {.struct_size = sizeof pd,
                             .head = buf,
                             .head_size = n,
                             .tail = buf,
                             .tail_size = n,
                             .file_size = n};
        for (size_t f = 0; f < amn_ctx_format_count(ctx); f++) {
            const amn_format *fmt = amn_ctx_format(ctx, f);
            int score = fmt->probe(&pd);
            if (score > AMN_PROBE_WEAK) {
                fprintf(stderr, "format %s scored %d on random bytes (iteration %ld)\n", fmt->name,
                        score, i);
                free(buf);
                return 1;
            }
        }
    }
    printf("fuzz smoke: %d seeds x %ld mutations, %ld random probes: no crash\n", seeds, iterations,
           iterations);
    free(buf);
    amn_ctx_free(ctx);
    return seeds ? 0 : 1;
}
#endif
