/* gguf_bench: GGUF dequantization speed per type, to F32 and to BF16, against
 * ggml's own dequantizers.
 *
 * Method of the anchor (so the figures compare): a 4096 x 4096 tensor of
 * random valid blocks, one call per 4096-element row, one thread, best of
 * several passes, into a 64 MiB F32 buffer. The same run also times the
 * core's F16 -> F32 and BF16 -> F32 conversions, which have anchors too, as
 * a calibration of this machine against the anchor machine. The "4MiB"
 * columns write the rows round a 4 MiB buffer instead, as the core's
 * conversion pipeline does (one such chunk per worker, then written out):
 * the kernels' own cost with the output in cache, without the DRAM write
 * bandwidth the 64 MiB figures are bound by.
 *
 *   gguf_bench [--quick] [--rounds N] [--simd scalar|avx2] [TYPE...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "amn/dtype.h"
#include "amn/simd.h"
#include "gguf_dequant.h"
#include "gguf_types.h"

/* ggml's dequantize_row_* (f32 out, ns/elem) from /work/shared/perf/
 * ggml-dequant-anchor.md: llama.cpp 3af988fab / ggml 0.21.0, -march=native,
 * AMD EPYC Zen 5 KVM guest with AVX-512, one thread. */
static const struct {
    const char *name;
    double ggml_ns;
} anchors[] = {
    {"Q4_0", 0.186},    {"Q4_1", 0.264},   {"Q5_0", 0.201},   {"Q5_1", 0.202},    {"Q8_0", 0.149},
    {"Q2_K", 0.361},    {"Q3_K", 0.534},   {"Q4_K", 0.136},   {"Q5_K", 0.132},    {"Q6_K", 0.733},
    {"IQ2_XXS", 3.307}, {"IQ2_XS", 3.286}, {"IQ2_S", 3.488},  {"IQ3_XXS", 3.445}, {"IQ3_S", 3.508},
    {"IQ1_S", 0.347},   {"IQ1_M", 0.723},  {"IQ4_NL", 0.414}, {"IQ4_XS", 0.402},  {"TQ1_0", 0.132},
    {"TQ2_0", 0.136},   {"MXFP4", 0.411},
};
static const double anchor_f16 = 0.167, anchor_bf16 = 0.154;

#define ROWS 4096
#define COLS 4096
/* The core converts through one 4 MiB buffer per worker (CHUNK_BYTES). */
#define RING (4u << 20)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t rng(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Random payload with finite, moderate f16 scales wherever a type has one. */
static void fill_blocks(const gguf_type_traits *tr, uint8_t *raw, size_t nblocks) {
    for (size_t i = 0; i < nblocks * tr->block_bytes; i++) raw[i] = (uint8_t)rng();
    int off[2] = {0, -1};
    switch (tr->id) {
    case GGUF_TYPE_Q4_1:
    case GGUF_TYPE_Q5_1:
    case GGUF_TYPE_Q4_K:
    case GGUF_TYPE_Q5_K:
        off[1] = 2;
        break;
    case GGUF_TYPE_Q2_K:
        off[0] = 80, off[1] = 82;
        break;
    case GGUF_TYPE_Q3_K:
        off[0] = 108;
        break;
    case GGUF_TYPE_Q6_K:
        off[0] = 208;
        break;
    case GGUF_TYPE_TQ1_0:
        off[0] = 52;
        break;
    case GGUF_TYPE_TQ2_0:
        off[0] = 64;
        break;
    case GGUF_TYPE_MXFP4:
    case GGUF_TYPE_IQ1_M:
        off[0] = -1;
        break;
    default:
        break;
    }
    for (size_t b = 0; b < nblocks; b++)
        for (int k = 0; k < 2; k++)
            if (off[k] >= 0) {
                uint8_t *p = raw + b * tr->block_bytes + off[k];
                const uint16_t h = (uint16_t)(0x2000 + rng() % 0x1000); /* ~2^-7 .. 2^-5 */
                p[0] = (uint8_t)h;
                p[1] = (uint8_t)(h >> 8);
            }
}

/* Best time of `reps` passes over the tensor, one call per row; ns/elem. */
static double time_type(const gguf_type_traits *tr, const uint8_t *raw, void *dst, amn_dtype out,
                        amn_simd level, int reps, int ring) {
    const size_t row_bytes = COLS / tr->block_elems * tr->block_bytes;
    const size_t es = amn_dtype_size(out);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t0 = now();
        for (size_t i = 0; i < ROWS; i++)
            if (gguf_dequantize_simd(tr->id, raw + i * row_bytes, COLS, out,
                                     (uint8_t *)dst +
                                         (ring ? i % (RING / (COLS * es)) : i) * COLS * es,
                                     level) != 0) {
                fprintf(stderr, "dequantize failed for %s\n", tr->name);
                exit(1);
            }
        const double t = now() - t0;
        if (t < best) best = t;
    }
    return best * 1e9 / ((double)ROWS * COLS);
}

static double time_convert(amn_dtype from, const void *src, void *dst, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t0 = now();
        for (size_t i = 0; i < ROWS; i++)
            amn_convert_elems(from, (const uint8_t *)src + i * COLS * 2, AMN_DTYPE_F32,
                              (uint8_t *)dst + i * COLS * 4, COLS);
        const double t = now() - t0;
        if (t < best) best = t;
    }
    return best * 1e9 / ((double)ROWS * COLS);
}

static double min2(double a, double b) {
    return a < b ? a : b;
}

int main(int argc, char **argv) {
    int reps = 5, rounds = 3;
    amn_simd level = amn_simd_level();
    const char *only[64];
    int n_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            reps = 2, rounds = 1;
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 1;
        else if (strcmp(argv[i], "--simd") == 0 && i + 1 < argc) {
            const char *s = argv[++i];
            level = strcmp(s, "scalar") == 0 ? AMN_SIMD_SCALAR : AMN_SIMD_AVX2;
        } else if (n_only < 64)
            only[n_only++] = argv[i];
    }
    if (level > amn_simd_level()) level = amn_simd_level();

    const size_t out_bytes = (size_t)ROWS * COLS * 4;
    uint8_t *dst = malloc(out_bytes);
    /* Holds the largest block tensor (Q8_1 36 B per 32) and the F16 calibration input. */
    uint8_t *raw = malloc((size_t)ROWS * COLS * 2);
    if (!dst || !raw) return 1;
    memset(dst, 0, out_bytes); /* fault the pages in before timing */

    enum { NA = sizeof anchors / sizeof anchors[0] };
    const gguf_type_traits *types[NA] = {0};
    for (size_t a = 0; a < NA; a++) {
        int want = !n_only;
        for (int k = 0; k < n_only; k++) want |= strcmp(only[k], anchors[a].name) == 0;
        for (uint32_t id = 0; want && id < GGUF_TYPE_COUNT && !types[a]; id++) {
            const gguf_type_traits *t = gguf_type_traits_get(id);
            if (t->kind == GGUF_KIND_QUANT && strcmp(t->name, anchors[a].name) == 0) types[a] = t;
        }
    }
    /* The machine is shared: every figure is the best over rounds spread out
     * in time, each round the best of `reps` passes. */
    double wbest = 1e30, cf16 = 1e30, cbf16 = 1e30, res[NA][4];
    for (size_t a = 0; a < NA; a++) res[a][0] = res[a][1] = res[a][2] = res[a][3] = 1e30;
    for (int round = 0; round < rounds; round++) {
        for (size_t i = 0; i < (size_t)ROWS * COLS * 2; i++) raw[i] = (uint8_t)rng();
        for (size_t i = 1; i < (size_t)ROWS * COLS * 2; i += 2) raw[i] &= 0x3f; /* finite halves */
        for (int r = 0; r < reps; r++) {
            const double t0 = now();
            memset(dst, r, out_bytes);
            wbest = min2(wbest, now() - t0);
        }
        cf16 = min2(cf16, time_convert(AMN_DTYPE_F16, raw, dst, reps));
        cbf16 = min2(cbf16, time_convert(AMN_DTYPE_BF16, raw, dst, reps));
        for (size_t a = 0; a < NA; a++) {
            const gguf_type_traits *tr = types[a];
            if (!tr) continue;
            rng_state = 0x243F6A8885A308D3ull ^ tr->id;
            fill_blocks(tr, raw, (size_t)ROWS * COLS / tr->block_elems);
            for (int k = 0; k < 4; k++)
                res[a][k] =
                    min2(res[a][k], time_type(tr, raw, dst, k % 2 ? AMN_DTYPE_BF16 : AMN_DTYPE_F32,
                                              level, reps, k / 2));
        }
    }

    printf("gguf_bench: %dx%d, one call per row, best of %d x %d rounds, path %s\n", ROWS, COLS,
           reps, rounds, amn_simd_name(level));
    printf("calibration: memset of the 64 MiB output %.1f GB/s (anchor machine: write-only 56.9)\n",
           (double)out_bytes / wbest * 1e-9);
    printf("calibration (core amn_convert_elems): F16->F32 %.3f ns/elem (ggml %.3f, x%.2f), "
           "BF16->F32 %.3f ns/elem (ggml %.3f, x%.2f)\n",
           cf16, anchor_f16, anchor_f16 / cf16, cbf16, anchor_bf16, anchor_bf16 / cbf16);
    printf("%-8s %10s %10s %10s %9s %9s %9s %9s\n", "type", "F32 ns/el", "BF16 ns/el", "ggml ns/el",
           "ggml/F32", "ggml/BF16", "F32 4MiB", "BF16 4MiB");
    for (size_t a = 0; a < NA; a++) {
        if (!types[a]) continue;
        const double *r = res[a];
        printf("%-8s %10.3f %10.3f %10.3f %8.2fx %8.2fx %9.3f %9.3f\n", types[a]->name, r[0], r[1],
               anchors[a].ggml_ns, anchors[a].ggml_ns / r[0], anchors[a].ggml_ns / r[1], r[2],
               r[3]);
    }
    free(dst);
    free(raw);
    return 0;
}
