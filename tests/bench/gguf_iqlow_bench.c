/* gguf_iqlow_bench: speed of the low-bit i-quant quantizers with an
 * importance matrix (IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ1_S IQ1_M), one thread,
 * against ggml's own quantize functions when a libggml-base is given.
 *
 * Method: ROWS x 4096 f32 values shaped like LLM weights (a normal over the
 * root of a chi-square-ish mix, per-row scales) and a synthetic imatrix
 * (positive, over decades); per type, the rows quantized in one call, best
 * of --rounds passes, timed on the thread's CPU clock. With --ggml PATH
 * (libggml-base.so of llama.cpp 3af988fab, loaded with dlopen; not built or
 * run in CI) the same rows go through ggml_quantize_chunk on one thread,
 * the bytes are compared and both speeds printed (rows/s and the ratio).
 * Table set-up (gguf_quant_iqlow_ready, ggml_quantize_init) is timed apart.
 *
 *   gguf_iqlow_bench [--rounds N] [--rows N] [--ggml PATH] [--scalar] [TYPE...]
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "amn/simd.h"
#include "gguf_quant_iqlow.h"
#include "gguf_types.h"

#define COLS 4096

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
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

static const struct {
    uint32_t type;
    const char *name;
    size_t block_bytes;
} types[] = {
    {GGUF_TYPE_IQ2_XXS, "IQ2_XXS", 66}, {GGUF_TYPE_IQ2_XS, "IQ2_XS", 74},
    {GGUF_TYPE_IQ2_S, "IQ2_S", 82},     {GGUF_TYPE_IQ3_XXS, "IQ3_XXS", 98},
    {GGUF_TYPE_IQ1_S, "IQ1_S", 50},     {GGUF_TYPE_IQ1_M, "IQ1_M", 56},
};
#define NTYPES (sizeof types / sizeof types[0])

typedef size_t (*chunk_fn)(int type, const float *src, void *dst, int64_t start, int64_t nrows,
                           int64_t n_per_row, const float *imatrix);
typedef void (*init_fn)(int type);

int main(int argc, char **argv) {
    int rounds = 3, nrows = 64;
    const char *ggml_path = NULL;
    amn_simd level = amn_simd_level();
    int want[NTYPES] = {0}, any = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            nrows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ggml") && i + 1 < argc)
            ggml_path = argv[++i];
        else if (!strcmp(argv[i], "--scalar"))
            level = AMN_SIMD_SCALAR;
        else {
            size_t t = 0;
            while (t < NTYPES && strcasecmp(types[t].name, argv[i]) != 0) t++;
            if (t == NTYPES) {
                fprintf(stderr,
                        "usage: %s [--rounds N] [--rows N] [--ggml PATH] [--scalar] "
                        "[TYPE...]\n",
                        argv[0]);
                return 2;
            }
            want[t] = any = 1;
        }
    }
    if (rounds < 1 || nrows < 1) return 2;
    chunk_fn chunk = NULL;
    init_fn init = NULL;
    if (ggml_path) {
        void *h = dlopen(ggml_path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        chunk = (chunk_fn)(uintptr_t)dlsym(h, "ggml_quantize_chunk");
        init = (init_fn)(uintptr_t)dlsym(h, "ggml_quantize_init");
        if (!chunk || !init) return 1;
    }
    float *x = malloc(sizeof(float) * COLS * (size_t)nrows), qw[COLS];
    for (int r = 0; r < nrows; r++) {
        const double s = 0.02 * (0.5 + uniform());
        for (int i = 0; i < COLS; i++) {
            const double a = normal(), b = normal(), chi = 0.5 * (a * a + b * b) + 0.2;
            x[(size_t)r * COLS + i] = (float)(s * normal() / sqrt(chi));
        }
    }
    for (int i = 0; i < COLS; i++) qw[i] = (float)(exp(2 * normal()) * 1e-3);
    double t0 = cpu_s();
    if (!gguf_quant_iqlow_ready()) return 1;
    printf("tables: amn %.3f s", cpu_s() - t0);
    if (init) {
        t0 = cpu_s();
        for (size_t t = 0; t < NTYPES; t++) init((int)types[t].type);
        printf(", ggml %.3f s", cpu_s() - t0);
    }
    printf("  (%d rows x %d, %d rounds, path %s)\n", nrows, COLS, rounds, amn_simd_name(level));
    printf("%-8s %12s %12s %8s %s\n", "type", "amn rows/s", "ggml rows/s", "ratio", "bytes");
    for (size_t t = 0; t < NTYPES; t++) {
        if (any && !want[t]) continue;
        const size_t bytes = (size_t)nrows * COLS / 256 * types[t].block_bytes;
        uint8_t *a = malloc(bytes), *b = malloc(bytes);
        double best = 1e30, best_g = 1e30;
        for (int k = 0; k < rounds; k++) {
            t0 = cpu_s();
            gq_iqlow_rows_simd(types[t].type, x, a, nrows, COLS, qw, level);
            const double dt = cpu_s() - t0;
            if (dt < best) best = dt;
        }
        printf("%-8s %12.1f", types[t].name, nrows / best);
        if (chunk) {
            for (int k = 0; k < rounds; k++) {
                t0 = cpu_s();
                chunk((int)types[t].type, x, b, 0, nrows, COLS, qw);
                const double dt = cpu_s() - t0;
                if (dt < best_g) best_g = dt;
            }
            printf(" %12.1f %7.2fx %s", nrows / best_g, best_g / best,
                   memcmp(a, b, bytes) ? "DIFFER" : "equal");
        }
        printf("\n");
        free(a);
        free(b);
    }
    free(x);
    return 0;
}
