/* gguf_bench: GGUF dequantization speed per type, to F32 and to BF16, against
 * ggml's own dequantizers.
 *
 * Method of the anchor (so the figures compare): a 4096 x 4096 tensor of
 * random valid blocks, one call per 4096-element row, one thread, best of
 * several passes, into a 64 MiB F32 buffer. The same run also times the
 * core's F16 -> F32 and BF16 -> F32 conversions, which have anchors too, as
 * a calibration of this machine against the anchor machine.
 *
 * Two destinations: the anchor's 64 MiB buffer, where a fast kernel is bound
 * by DRAM write bandwidth (each line is read for ownership, then written
 * back), and rows written round one 1 MiB buffer, as the core's conversion
 * pipeline does (CHUNK_BYTES per worker, then handed to write(2) while still
 * in cache). The second is the realistic one for `amn remember`.
 *
 * The anchors were recorded on another machine. --ggml LIB loads a shared
 * library that exports ggml's dequantize_row_* (libggml-base.so, or
 * ggml-quants.c built alone with -O3 -march=native and stubs for ggml_abort
 * and friends) and times them in the same run, same method, both
 * destinations: the fair baseline.
 *
 *   gguf_bench [--quick] [--rounds N] [--simd scalar|avx2|avx512] [--ggml LIB] [TYPE...]
 *
 * The path defaults to the best the CPU (and AMN_SIMD) offers; on the AVX-512
 * path, the types without an AVX-512 kernel run their AVX2 one.
 */
#include <ctype.h>
#include <dlfcn.h>
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
/* The core converts through one 1 MiB chunk per worker (CHUNK_BYTES). */
#define RING (1u << 20)

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

/* ggml's dequantize_row_<type>(blocks, y, k), f32 out only. */
typedef void (*ggml_row_fn)(const void *x, float *y, int64_t k);

/* One pass over the tensor, one call per row (amn: gguf_dequantize_simd, or
 * ggml's row function when g is set); rows go to consecutive places in dst,
 * or round a RING-byte buffer. Seconds. */
static double pass(const gguf_type_traits *tr, ggml_row_fn g, const uint8_t *raw, uint8_t *dst,
                   amn_dtype out, amn_simd level, int ring) {
    const size_t row_bytes = COLS / tr->block_elems * tr->block_bytes;
    const size_t es = amn_dtype_size(out), row_out = COLS * es;
    const double t0 = now();
    for (size_t i = 0; i < ROWS; i++) {
        uint8_t *y = dst + (ring ? i % (RING / row_out) : i) * row_out;
        if (g)
            g(raw + i * row_bytes, (float *)y, COLS);
        else if (gguf_dequantize_simd(tr->id, raw + i * row_bytes, COLS, out, y, level) != 0) {
            fprintf(stderr, "dequantize failed for %s\n", tr->name);
            exit(1);
        }
    }
    return now() - t0;
}

/* Best of `reps` passes; ns/elem. */
static double time_type(const gguf_type_traits *tr, ggml_row_fn g, const uint8_t *raw, uint8_t *dst,
                        amn_dtype out, amn_simd level, int reps, int ring) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t = pass(tr, g, raw, dst, out, level, ring);
        if (t < best) best = t;
    }
    return best * 1e9 / ((double)ROWS * COLS);
}

/* ggml's row dequantizer for a type name ("Q4_K" -> dequantize_row_q4_K),
 * or NULL. */
static ggml_row_fn ggml_lookup(void *lib, const char *name) {
    char sym[64] = "dequantize_row_";
    size_t n = strlen(sym);
    for (const char *p = name; *p && n + 1 < sizeof sym; p++)
        sym[n++] = *p == 'K' && p > name && p[-1] == '_' ? 'K' : (char)tolower((unsigned char)*p);
    sym[n] = '\0';
    ggml_row_fn f;
    void *v = dlsym(lib, sym);
    memcpy(&f, &v, sizeof f); /* object pointer to function pointer, as POSIX allows */
    return f;
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
    const char *only[64], *ggml_path = NULL;
    int n_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            reps = 2, rounds = 1;
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 1;
        else if (strcmp(argv[i], "--ggml") == 0 && i + 1 < argc)
            ggml_path = argv[++i];
        else if (strcmp(argv[i], "--simd") == 0 && i + 1 < argc) {
            const char *s = argv[++i];
            level = strcmp(s, "scalar") == 0 ? AMN_SIMD_SCALAR
                    : strcmp(s, "avx2") == 0 ? AMN_SIMD_AVX2
                                             : AMN_SIMD_AVX512;
        } else if (n_only < 64)
            only[n_only++] = argv[i];
    }
    if (level > amn_simd_level()) level = amn_simd_level();
    void *lib = NULL;
    if (ggml_path && !(lib = dlopen(ggml_path, RTLD_NOW | RTLD_LOCAL))) {
        fprintf(stderr, "gguf_bench: %s\n", dlerror());
        return 1;
    }

    const size_t out_bytes = (size_t)ROWS * COLS * 4;
    uint8_t *dst = malloc(out_bytes);
    /* Holds the largest block tensor (Q8_1 36 B per 32) and the F16 calibration input. */
    uint8_t *raw = malloc((size_t)ROWS * COLS * 2);
    if (!dst || !raw) return 1;
    memset(dst, 0, out_bytes); /* fault the pages in before timing */

    enum { NA = sizeof anchors / sizeof anchors[0] };
    const gguf_type_traits *types[NA] = {0};
    ggml_row_fn ggml_fn[NA] = {0};
    for (size_t a = 0; a < NA; a++) {
        int want = !n_only;
        for (int k = 0; k < n_only; k++) want |= strcmp(only[k], anchors[a].name) == 0;
        for (uint32_t id = 0; want && id < GGUF_TYPE_COUNT && !types[a]; id++) {
            const gguf_type_traits *t = gguf_type_traits_get(id);
            if (t->kind == GGUF_KIND_QUANT && strcmp(t->name, anchors[a].name) == 0) types[a] = t;
        }
        if (lib && types[a] && !(ggml_fn[a] = ggml_lookup(lib, anchors[a].name)))
            fprintf(stderr, "gguf_bench: %s has no dequantizer for %s\n", ggml_path,
                    anchors[a].name);
    }
    /* The machine is shared: every figure is the best over rounds spread out
     * in time, each round the best of `reps` passes. Columns: amn F32, BF16
     * into 64 MiB; the same round 1 MiB; ggml F32 into 64 MiB, round 1 MiB. */
    enum { NCOL = 6 };
    double wbest = 1e30, cf16 = 1e30, cbf16 = 1e30, res[NA][NCOL];
    for (size_t a = 0; a < NA; a++)
        for (int k = 0; k < NCOL; k++) res[a][k] = 1e30;
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
            for (int k = 0; k < NCOL; k++) {
                ggml_row_fn g = k >= 4 ? ggml_fn[a] : NULL;
                if (k >= 4 && !g) continue;
                const amn_dtype out = k < 4 && k % 2 ? AMN_DTYPE_BF16 : AMN_DTYPE_F32;
                res[a][k] = min2(res[a][k], time_type(tr, g, raw, dst, out, level, reps,
                                                      k >= 4 ? k == 5 : k >= 2));
            }
        }
    }

    printf("gguf_bench: %dx%d, one call per row, best of %d x %d rounds, path %s\n", ROWS, COLS,
           reps, rounds, amn_simd_name(level));
    printf("calibration: memset of the 64 MiB output %.1f GB/s (anchor machine: write-only 56.9)\n",
           (double)out_bytes / wbest * 1e-9);
    printf("calibration (core amn_convert_elems): F16->F32 %.3f ns/elem (ggml %.3f, x%.2f), "
           "BF16->F32 %.3f ns/elem (ggml %.3f, x%.2f)\n",
           cf16, anchor_f16, anchor_f16 / cf16, cbf16, anchor_bf16, anchor_bf16 / cbf16);
    printf("ns/elem; \"64M\": rows into a 64 MiB buffer (the anchor's method), \"1M\": round a "
           "1 MiB chunk (the core's pipeline)\n");
    printf("ratios: ggml time / amn time (> 1: amn faster), against %s\n",
           lib ? "ggml measured in this run (same buffer)" : "the recorded anchor (other machine)");
    printf("%-8s %7s %7s %7s %7s | %6s %7s %7s | %6s %6s %6s %6s\n", "type", "F32 64M", "BF16 64M",
           "F32 1M", "BF16 1M", "anchor", "ggml64M", "ggml1M", "F32 64", "BF16 64", "F32 1M",
           "BF16 1M");
    for (size_t a = 0; a < NA; a++) {
        if (!types[a]) continue;
        const double *r = res[a];
        const double b64 = ggml_fn[a] ? r[4] : anchors[a].ggml_ns;
        const double b1 = ggml_fn[a] ? r[5] : anchors[a].ggml_ns;
        char g64[16] = "-", g1[16] = "-";
        if (ggml_fn[a]) {
            snprintf(g64, sizeof g64, "%.3f", r[4]);
            snprintf(g1, sizeof g1, "%.3f", r[5]);
        }
        printf("%-8s %7.3f %8.3f %7.3f %7.3f | %6.3f %7s %7s | %5.2fx %6.2fx %5.2fx %6.2fx\n",
               types[a]->name, r[0], r[1], r[2], r[3], anchors[a].ggml_ns, g64, g1, b64 / r[0],
               b64 / r[1], b1 / r[2], b1 / r[3]);
    }
    free(dst);
    free(raw);
    if (lib) dlclose(lib);
    return 0;
}
