/* gguf_quant_bench: speed of the GGUF quantizers (f32 rows -> ggml blocks,
 * byte-identical with ggml's reference quantizers), one thread.
 *
 * Method: ROWS x COLS f32 values shaped like LLM weights (Student-t-like
 * tails: a normal divided by the root of a chi-square-ish mix, per-row
 * scales), one gguf_quantize call per row, the output written round a
 * 1 MiB ring (what a streaming writer hands to write(2)), best of --rounds
 * passes. Prints ns per element and Gelem/s per type, from the thread's CPU
 * time (CLOCK_THREAD_CPUTIME_ID: on a loaded machine wall time counts the
 * time other processes hold the core) and, for reference, wall time; the
 * input and output
 * bytes are the same on every run (fixed seed), so runs compare.
 *
 * llama-quantize is not linked here; its figures in doc/performance.md
 * come from /work/shared/perf/peers.md (whole-model wall time, 2 threads).
 *
 *   gguf_quant_bench [--rounds N] [--rows N] [TYPE...]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "amn/error.h"
#include "gguf_quant.h"
#include "gguf_types.h"

#define COLS 4096
#define RING (1u << 20)

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double uniform(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) * 0x1p-53;
}

static double normal(void) {
    return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform());
}

static const uint32_t all_types[] = {
    GGUF_TYPE_Q4_0,  GGUF_TYPE_Q4_1,  GGUF_TYPE_Q5_0,   GGUF_TYPE_Q5_1,   GGUF_TYPE_Q8_0,
    GGUF_TYPE_Q1_0,  GGUF_TYPE_Q2_0,  GGUF_TYPE_Q2_K,   GGUF_TYPE_Q3_K,   GGUF_TYPE_Q4_K,
    GGUF_TYPE_Q5_K,  GGUF_TYPE_Q6_K,  GGUF_TYPE_IQ4_NL, GGUF_TYPE_IQ4_XS, GGUF_TYPE_IQ3_S,
    GGUF_TYPE_TQ1_0, GGUF_TYPE_TQ2_0, GGUF_TYPE_MXFP4,  GGUF_TYPE_F16,    GGUF_TYPE_BF16,
};

static uint32_t type_named(const char *s) {
    for (uint32_t id = 0; id < GGUF_TYPE_COUNT; id++) {
        const gguf_type_traits *tr = gguf_type_traits_get(id);
        if (tr->name && strcasecmp(tr->name, s) == 0) return id;
    }
    return GGUF_TYPE_COUNT;
}

int main(int argc, char **argv) {
    int rounds = 3, rows = 256;
    uint32_t chosen[64];
    size_t n_chosen = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc)
            rows = atoi(argv[++i]);
        else if (n_chosen < 64 && type_named(argv[i]) < GGUF_TYPE_COUNT &&
                 gguf_type_can_quantize(type_named(argv[i])))
            chosen[n_chosen++] = type_named(argv[i]);
        else {
            fprintf(stderr, "usage: %s [--rounds N] [--rows N] [TYPE...]\n", argv[0]);
            return 2;
        }
    }
    if (rounds < 1 || rows < 1) return 2;
    if (!n_chosen)
        for (size_t i = 0; i < sizeof all_types / sizeof all_types[0]; i++)
            chosen[n_chosen++] = all_types[i];

    const size_t n = (size_t)rows * COLS;
    float *x = malloc(n * sizeof(float));
    uint8_t *ring = malloc(RING);
    if (!x || !ring) return 1;
    for (int r = 0; r < rows; r++) {
        const double scale = 0.02 * exp(normal() * 0.5);
        for (int c = 0; c < COLS; c++) {
            /* t with 4 degrees of freedom: normal / sqrt(chi2_4 / 4) */
            double chi = 0;
            for (int k = 0; k < 4; k++) {
                const double z = normal();
                chi += z * z;
            }
            x[(size_t)r * COLS + c] = (float)(normal() / sqrt(chi / 4) * scale);
        }
    }
    printf("gguf_quant_bench: %d x %d f32 values, one thread, best of %d\n", rows, COLS, rounds);
    printf("%-8s %10s %10s %12s\n", "type", "ns/elem", "Gelem/s", "wall ns/elem");
    for (size_t t = 0; t < n_chosen; t++) {
        const gguf_type_traits *tr = gguf_type_traits_get(chosen[t]);
        uint64_t row_bytes;
        if (!gguf_type_nbytes(tr, COLS, &row_bytes) || row_bytes > RING) return 1;
        double best = 1e30, best_wall = 1e30;
        for (int k = 0; k < rounds; k++) {
            size_t at = 0;
            const double t0 = clock_s(CLOCK_THREAD_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
            for (int r = 0; r < rows; r++) {
                if (at + row_bytes > RING) at = 0;
                if (gguf_quantize(chosen[t], x + (size_t)r * COLS, COLS, ring + at) != AMN_OK)
                    return 1;
                at += row_bytes;
            }
            const double dt = clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
            const double dw = clock_s(CLOCK_MONOTONIC) - w0;
            if (dt < best) best = dt;
            if (dw < best_wall) best_wall = dw;
        }
        printf("%-8s %10.2f %10.4f %12.2f\n", tr->name, best * 1e9 / (double)n,
               (double)n / best * 1e-9, best_wall * 1e9 / (double)n);
        fflush(stdout);
    }
    free(x);
    free(ring);
    return 0;
}
