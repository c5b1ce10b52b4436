/* Fuzz target over every loaded format: probe, header-only inspect, full
 * open, planning, and (for small inputs) a whole conversion. Built two ways:
 * with -fsanitize=fuzzer it is a libFuzzer target; otherwise a driver runs
 * deterministic mutations of seed files (ctest: fuzz_smoke, under ASan in CI).
 *
 *   fuzz_smoke [iterations] [seed files...] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "amn/amn.h"

static amn_ctx *ctx;

static void init_ctx(void) {
    if (ctx) return;
    const char *dirs[] = {AMN_BINARY_DIR "/lib/amn/plugins"};
    amn_ctx_options o = {
        .plugin_dirs = dirs, .n_plugin_dirs = 1, .no_env = true, .no_default = true};
    if (amn_ctx_new(&o, &ctx, NULL)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init_ctx();
    amn_limits lim;
    amn_limits_default(&lim);
    lim.max_alloc = 64u << 20; /* keep hostile sizes from exhausting memory */
    lim.max_header_bytes = 16u << 20;
    amn_error err;
    amn_source src;
    amn_source_memory(&src, data, size, "fuzz");
    amn_model *m = NULL;
    if (amn_inspect_source(ctx, &src, NULL, NULL, &lim, &m, &err) == AMN_OK) {
        amn_plan *p = NULL;
        if (amn_plan_new(ctx, m, &p, &err) == AMN_OK) amn_plan_free(p);
        amn_model_free(m);
    }
    /* The mapped path needs a file: a memfd, reached through /proc. */
    int fd = memfd_create("amn-fuzz", MFD_CLOEXEC);
    if (fd < 0) return 0;
    if (write(fd, data, size) == (ssize_t)size) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        if (amn_open(ctx, path, NULL, &lim, &m, &err) == AMN_OK) {
            amn_plan *p = NULL;
            if (amn_plan_new(ctx, m, &p, &err) == AMN_OK) {
                uint64_t total = amn_model_total_bytes(m);
                if (total < (4u << 20)) {
                    char out[64];
                    snprintf(out, sizeof out, "/tmp/amn-fuzz-%d.out", (int)getpid());
                    amn_convert_options o = {
                        .mode = AMN_MODE_CONVERT, .output = out, .overwrite = true, .threads = 1};
                    if (amn_convert(ctx, m, p, &o, NULL, &err) == AMN_OK) unlink(out);
                }
                amn_plan_free(p);
            }
            amn_model_free(m);
        }
    }
    close(fd);
    return 0;
}

#ifndef AMN_LIBFUZZER
static uint32_t rng(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

/* Flip bits, overwrite bytes with boundary values, truncate, duplicate. */
static size_t mutate(uint8_t *buf, size_t size, size_t cap, uint64_t *s) {
    int rounds = 1 + rng(s) % 4;
    for (int r = 0; r < rounds && size; r++) {
        size_t at = rng(s) % size;
        switch (rng(s) % 6) {
        case 0:
            buf[at] ^= (uint8_t)(1u << (rng(s) % 8));
            break;
        case 1:
            buf[at] = (uint8_t[]){0, 0xff, 0x7f, 0x80, '{', '"', '9', 0x01}[rng(s) % 8];
            break;
        case 2:
            size = at + 1;
            break;
        case 3:
            if (size + 8 <= cap) {
                memmove(buf + at + 8, buf + at, size - at);
                size += 8;
            }
            break;
        case 4: { /* a large little-endian number over 8 bytes */
            uint64_t v = (uint64_t)rng(s) << 32 | rng(s);
            size_t n = size - at < 8 ? size - at : 8;
            memcpy(buf + at, &v, n);
            break;
        }
        default:
            if (at + 4 <= size) memset(buf + at, 0xff, 4);
        }
    }
    return size;
}

int main(int argc, char **argv) {
    long iterations = argc > 1 ? atol(argv[1]) : 2000;
    uint64_t seed = 0x5eed;
    size_t cap = 1 << 20;
    uint8_t *buf = malloc(cap), *orig = malloc(cap);
    int seeds = 0;
    for (int a = 2; a < argc; a++) {
        FILE *f = fopen(argv[a], "rb");
        if (!f) continue;
        size_t n = fread(orig, 1, cap / 2, f);
        fclose(f);
        seeds++;
        LLVMFuzzerTestOneInput(orig, n);
        for (long i = 0; i < iterations; i++) {
            memcpy(buf, orig, n);
            size_t m = mutate(buf, n, cap, &seed);
            LLVMFuzzerTestOneInput(buf, m);
        }
    }
    /* Random buffers: no format may claim them (FFmpeg's probetest). */
    for (long i = 0; i < iterations; i++) {
        size_t n = 1 + rng(&seed) % 4096;
        for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)rng(&seed);
        amn_source src;
        amn_source_memory(&src, buf, n, "random");
        amn_probe_data pd = {
            .head = buf, .head_size = n, .tail = buf, .tail_size = n, .file_size = n};
        for (size_t f = 0; f < amn_ctx_format_count(ctx); f++) {
            const amn_format *fmt = amn_ctx_format(ctx, f);
            int score = fmt->probe(&pd);
            if (score > AMN_PROBE_WEAK) {
                fprintf(stderr, "format %s scored %d on random bytes (iteration %ld)\n", fmt->name,
                        score, i);
                return 1;
            }
        }
    }
    printf("fuzz smoke: %d seeds x %ld mutations, %ld random probes: no crash\n", seeds, iterations,
           iterations);
    free(buf);
    free(orig);
    amn_ctx_free(ctx);
    return seeds ? 0 : 1;
}
#endif
