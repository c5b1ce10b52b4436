/* Benchmark of the fp8, gptq and awq kernels at a 4096x11008 layer (nn.Linear
 * out_features 11008, in_features 4096), single-threaded, each SIMD path,
 * plus a whole-file `amn remember` against cp of the output's size.
 * Prints elements/s, GB/s of output, and ratios against baselines measured in
 * the same run (memcpy of the output, the scalar path, cp). Not a test: it
 * times things. Run from the build tree: bin/quant_bench [--no-cli | --only TEXT]; the
 * whole-file rows work in $TMPDIR (default /tmp): TMPDIR=/dev/shm times them
 * on tmpfs. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "amn/dtype.h"
#include "amn/simd.h"
#include "awq_kernels.h"
#include "fp8_kernels.h"
#include "gptq_kernels.h"

#define OUT  11008u
#define IN   4096u
#define GS   128u
#define REPS 3

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint32_t rnd(void) {
    static uint32_t x = 2463534242u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
}

static void *fill(size_t n) {
    uint32_t *p = malloc((n + 3) / 4 * 4);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < (n + 3) / 4; i++) p[i] = rnd();
    return p;
}

static void *scales(size_t n, amn_dtype t) {
    uint16_t *s = malloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        const float f = (float)(rnd() % 1000 + 1) * 1e-5f;
        s[i] = t == AMN_DTYPE_F16 ? amn_f32_to_f16(f) : amn_f32_to_bf16(f);
    }
    return s;
}

/* The converter hands each worker CHUNK output bytes at a time in one buffer
 * it reuses (core/src/convert.c's CHUNK_BYTES), which the caches hold; the
 * whole-layer rows write far more than the caches and so also time the
 * memory's write bandwidth. */
#define CHUNK (1u << 20)

typedef void (*kernel)(const void *layout, amn_simd lv, amn_dtype out, uint64_t row0, uint64_t n,
                       void *dst);

static void k_fp8(const void *l, amn_simd lv, amn_dtype out, uint64_t row0, uint64_t n, void *dst) {
    fp8_dequant_rows(l, row0, n, out, dst, lv);
}
static void k_gptq(const void *l, amn_simd lv, amn_dtype out, uint64_t row0, uint64_t n,
                   void *dst) {
    if (gptq_dequant_rows(l, row0, n, out, dst, lv)) exit(1);
}
static void k_awq(const void *l, amn_simd lv, amn_dtype out, uint64_t row0, uint64_t n, void *dst) {
    if (awq_dequant_rows(l, row0, n, out, dst, lv)) exit(1);
}

/* Best time of the whole layer into dst, or of CHUNK bytes of rows at a
 * time into its start. */
static double best(kernel k, const void *l, amn_simd lv, amn_dtype out, bool chunked, void *dst) {
    const uint64_t step = chunked ? CHUNK / (IN * amn_dtype_size(out)) : OUT;
    double b = 1e30;
    for (int r = 0; r < REPS; r++) {
        const double t0 = now();
        for (uint64_t o = 0; o < OUT; o += step)
            k(l, lv, out, o, OUT - o < step ? OUT - o : step, dst);
        const double t = now() - t0;
        if (t < b) b = t;
    }
    return b;
}

/* top: the highest SIMD level with a path of its own for this family (a
 * level above it would time the same code again). */
/* --only TEXT: the kernel rows whose name holds TEXT, nothing else. */
static const char *only;

static void row(const char *name, kernel k, const void *l, amn_simd top, void *dst, double t_copy16,
                double t_copy32) {
    if (only && !strstr(name, only)) return;
    const double n = (double)OUT * IN;
    const amn_dtype outs[2] = {AMN_DTYPE_BF16, AMN_DTYPE_F32};
    for (int oi = 0; oi < 2; oi++) {
        const double es = (double)amn_dtype_size(outs[oi]);
        const double base = oi ? t_copy32 : t_copy16;
        double scalar = 0;
        for (int lv = AMN_SIMD_SCALAR; lv <= (int)amn_simd_level(); lv++) {
            if (lv > (int)top) break;
            const double t = best(k, l, (amn_simd)lv, outs[oi], false, dst);
            const double tc = best(k, l, (amn_simd)lv, outs[oi], true, dst);
            if (lv == AMN_SIMD_SCALAR) scalar = t;
            printf("%-22s %-4s %-6s %7.2f ms %6.2f Gelem/s %6.2f GB/s  x%5.2f scalar  "
                   "x%5.2f memcpy  %6.2f Gelem/s in 1 MiB chunks\n",
                   name, amn_dtype_name(outs[oi]), amn_simd_name((amn_simd)lv), t * 1e3,
                   n / t * 1e-9, n * es / t * 1e-9, scalar / t, base / t, n / tc * 1e-9);
        }
    }
}

/* Each command starts on a quiet page cache and writes a fresh file: the
 * previous output is unlinked and earlier dirty pages written back before
 * the clock starts (replacing a file makes ext4 flush the new one at
 * rename, which would time the disk). */
static double run(const char *cmd, const char *fresh) {
    unlink(fresh);
    sync();
    const double t0 = now();
    if (system(cmd) != 0) {
        fprintf(stderr, "failed: %s\n", cmd);
        return -1;
    }
    return now() - t0;
}

/* A safetensors file of `layers` GPTQ 4-bit layers, remembered by the CLI. */
static void cli_bench(void) {
    const char *tmp = getenv("TMPDIR");
    char dir[256];
    snprintf(dir, sizeof dir, "%s/amn-quant-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return;
    char in[300], out[300], copy[300], cmd[1200];
    snprintf(in, sizeof in, "%s/model.safetensors", dir);
    snprintf(out, sizeof out, "%s/out.safetensors", dir);
    snprintf(copy, sizeof copy, "%s/copy.bin", dir);
    const int layers = 4;
    const size_t qwl = (size_t)IN / 8 * OUT * 4, scl = (size_t)IN / GS * OUT * 2,
                 qzl = (size_t)IN / GS * OUT / 8 * 4;
    char header[8192];
    size_t len = 0;
    uint64_t off = 0;
    len += (size_t)snprintf(header + len, sizeof header - len, "{");
    for (int l = 0; l < layers; l++) {
        len += (size_t)snprintf(
            header + len, sizeof header - len,
            "%s\"l%d.qweight\":{\"dtype\":\"I32\",\"shape\":[%u,%u],\"data_offsets\":[%llu,%llu]},"
            "\"l%d.scales\":{\"dtype\":\"F16\",\"shape\":[%u,%u],\"data_offsets\":[%llu,%llu]},"
            "\"l%d.qzeros\":{\"dtype\":\"I32\",\"shape\":[%u,%u],\"data_offsets\":[%llu,%llu]}",
            l ? "," : "", l, IN / 8, OUT, (unsigned long long)off, (unsigned long long)(off + qwl),
            l, IN / GS, OUT, (unsigned long long)(off + qwl), (unsigned long long)(off + qwl + scl),
            l, IN / GS, OUT / 8, (unsigned long long)(off + qwl + scl),
            (unsigned long long)(off + qwl + scl + qzl));
        off += qwl + scl + qzl;
    }
    len += (size_t)snprintf(header + len, sizeof header - len, "}");
    while (len % 8) header[len++] = ' ';
    FILE *f = fopen(in, "wb");
    if (!f) return;
    uint8_t le[8];
    for (int k = 0; k < 8; k++) le[k] = (uint8_t)((uint64_t)len >> (8 * k));
    fwrite(le, 1, 8, f);
    fwrite(header, 1, len, f);
    void *qw = fill(qwl), *sc = scales(scl / 2, AMN_DTYPE_F16), *qz = fill(qzl);
    for (int l = 0; l < layers; l++) {
        fwrite(qw, 1, qwl, f);
        fwrite(sc, 1, scl, f);
        fwrite(qz, 1, qzl, f);
    }
    fclose(f);
    free(qw);
    free(sc);
    free(qz);
    snprintf(cmd, sizeof cmd, "'%s/bin/amn' remember '%s' -o '%s' --threads 1 >/dev/null",
             AMN_BINARY_DIR, in, out);
    double t1 = 1e30, t2 = 1e30, tc = 1e30;
    for (int r = 0; r < REPS; r++) {
        double t = run(cmd, out);
        if (t >= 0 && t < t1) t1 = t;
    }
    snprintf(cmd, sizeof cmd, "'%s/bin/amn' remember '%s' -o '%s' --threads 2 >/dev/null",
             AMN_BINARY_DIR, in, out);
    for (int r = 0; r < REPS; r++) {
        double t = run(cmd, out);
        if (t >= 0 && t < t2) t2 = t;
    }
    struct stat st;
    const double bytes = stat(out, &st) == 0 ? (double)st.st_size : 0;
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", out, copy);
    for (int r = 0; r < REPS; r++) {
        double t = run(cmd, copy);
        if (t >= 0 && t < tc) tc = t;
    }
    printf("remember %d GPTQ 4-bit layers -> BF16 (%.0f MB): 1 thread %.3f s (%.2f GB/s), "
           "2 threads %.3f s (%.2f GB/s); cp of the output %.3f s (%.2f GB/s); "
           "remember/cp time x%.2f (1 thread), x%.2f (2 threads)\n",
           layers, bytes * 1e-6, t1, bytes / t1 * 1e-9, t2, bytes / t2 * 1e-9, tc,
           bytes / tc * 1e-9, t1 / tc, t2 / tc);
    if (getenv("QUANT_BENCH_KEEP")) { /* keep the model, e.g. for perf record */
        printf("  kept: %s\n", in);
        return;
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(int argc, char **argv) {
    const size_t n = (size_t)OUT * IN;
    if (argc > 2 && strcmp(argv[1], "--only") == 0) only = argv[2];
    /* 64-byte aligned, as the Python package allocates whole tensors. */
    uint8_t *dst = aligned_alloc(64, n * 4), *src = malloc(n * 4);
    if (!dst || !src) return 1;
    memset(src, 1, n * 4);
    memset(dst, 0, n * 4);
    double tc16 = 1e30, tc32 = 1e30;
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        memcpy(dst, src, n * 2);
        double t = now() - t0;
        if (t < tc16) tc16 = t;
        t0 = now();
        memcpy(dst, src, n * 4);
        t = now() - t0;
        if (t < tc32) tc32 = t;
    }
    free(src);
    printf("layer [%u, %u] = %.1f M elements, one thread; memcpy of the BF16 output %.2f GB/s\n",
           OUT, IN, (double)n * 1e-6, (double)n * 2 / tc16 * 1e-9);

    uint8_t *w8 = fill(n);
    for (size_t i = 0; i < n; i++)
        if ((w8[i] & 0x7f) == 0x7f) w8[i] ^= 1; /* real checkpoints hold no NaN */
    const uint64_t gr = (OUT + 127) / 128, gc = (IN + 127) / 128;
    void *s8 = scales(gr * gc, AMN_DTYPE_BF16);
    const fp8_layout fl = {.weight = w8,
                           .wtype = AMN_DTYPE_F8_E4M3,
                           .rows = OUT,
                           .cols = IN,
                           .scale = s8,
                           .stype = AMN_DTYPE_BF16,
                           .block_rows = 128,
                           .block_cols = 128,
                           .grid_cols = gc};
    row("fp8 e4m3 128x128", k_fp8, &fl, AMN_SIMD_AVX2, dst, tc16, tc32);

    void *qw = fill((size_t)IN / 8 * OUT * 4), *qz = fill((size_t)IN / GS * OUT / 8 * 4);
    void *sc = scales((size_t)IN / GS * OUT, AMN_DTYPE_F16);
    gptq_layout gl = {.bits = 4,
                      .in = IN,
                      .out = OUT,
                      .groups = IN / GS,
                      .group_size = GS,
                      .qweight = qw,
                      .qzeros = qz,
                      .scales = sc,
                      .stype = AMN_DTYPE_F16,
                      .zeros_v1 = true};
    row("gptq 4-bit g128", k_gptq, &gl, AMN_SIMD_AVX512, dst, tc16, tc32);
    int32_t *gidx = malloc(IN * 4);
    for (uint32_t i = 0; i < IN; i++) gidx[i] = (int32_t)(i / GS);
    for (uint32_t i = IN - 1; i > 0; i--) {
        uint32_t j = rnd() % (i + 1);
        int32_t t = gidx[i];
        gidx[i] = gidx[j];
        gidx[j] = t;
    }
    gl.gidx = gidx;
    row("gptq 4-bit act-order", k_gptq, &gl, AMN_SIMD_AVX512, dst, tc16, tc32);

    const awq_layout al = {.in = IN,
                           .out = OUT,
                           .groups = IN / GS,
                           .group_size = GS,
                           .qweight = qw,
                           .qzeros = qz,
                           .scales = sc,
                           .stype = AMN_DTYPE_F16};
    row("awq 4-bit g128", k_awq, &al, AMN_SIMD_AVX2, dst, tc16, tc32);
    free(gidx);
    free(qw);
    free(qz);
    free(sc);
    free(w8);
    free(s8);
    free(dst);
    if (argc == 1) cli_bench();
    return 0;
}
