/* Benchmark of the mxfp4, ctensors and nvfp4 kernels (one thread, each
 * SIMD path, to BF16 and F32) and of whole-file `amn remember` of a model
 * of each family against cp of the output. Prints Gelem/s and ratios
 * measured in the same run. Kernel times are the thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), so a loaded machine skews them less than wall
 * time; the whole-file rows give wall time and the children's CPU time.
 * Not a test: it times things. Run from the build tree:
 * bin/scheme_bench [--no-cli | --cli-only | --only TEXT] (--only: the
 * kernel rows whose name contains TEXT, no whole-file rows and no scalar
 * rows, as for `perf record`; AMN_SIMD=avx2 caps the path). The whole-file rows work in
 * $TMPDIR (default /tmp): TMPDIR=/dev/shm times them on tmpfs.
 * MXFP4_BENCH_NO_CACHE=1 runs the MXFP4 kernel rows without the plugin's
 * cache of transposed scales. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "amn/dtype.h"
#include "amn/simd.h"
#include "ct_kernels.h"
#include "mxfp4_kernels.h"
#include "nvfp4_kernels.h"

#define REPS 3

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time (user + system) of the waited-for children so far. */
static double children_cpu(void) {
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static uint32_t rnd(void) {
    static uint32_t x = 2463534242u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
}

static uint8_t *fill(size_t n) {
    uint8_t *p = malloc(n + 4);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rnd();
    return p;
}

/* An act-order g_idx: groups of gs columns each, the columns shuffled. */
static int32_t *act_order(uint64_t in, uint64_t gs) {
    int32_t *g = malloc(in * sizeof *g);
    if (!g) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (uint64_t i = 0; i < in; i++) g[i] = (int32_t)(i / gs);
    for (uint64_t i = in - 1; i > 0; i--) {
        const uint64_t j = rnd() % (i + 1);
        const int32_t t = g[i];
        g[i] = g[j], g[j] = t;
    }
    return g;
}

/* Scale-like bytes: BF16 / F16 values, E8M0 exponents, positive E4M3. */
static uint8_t *scales16(size_t n, amn_dtype t) {
    uint16_t *s = malloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        const float f = (float)(rnd() % 1000 + 1) * 1e-5f;
        s[i] = t == AMN_DTYPE_F16 ? amn_f32_to_f16(f) : amn_f32_to_bf16(f);
    }
    return (uint8_t *)s;
}
static uint8_t *bytes_in(size_t n, unsigned lo, unsigned hi) {
    uint8_t *s = malloc(n);
    for (size_t i = 0; i < n; i++) s[i] = (uint8_t)(lo + rnd() % (hi - lo));
    return s;
}

/* The converter hands each worker CHUNK output bytes at a time, in one
 * buffer it reuses (core/src/convert.c's CHUNK_BYTES), so a kernel writes
 * into cache there; the whole-tensor rows write a buffer far larger than
 * the caches and so measure the memory's write bandwidth as well. */
#define CHUNK (1u << 20)

typedef struct bench {
    const char *name;
    uint64_t rows, row_elems; /* output rows, and elements in each */
    uint64_t quantum;         /* the scheme's row_quantum (chunks are cut at its multiples) */
    void (*run)(const void *l, amn_simd lv, amn_dtype out, uint64_t row0, uint64_t n, void *dst);
    const void *layout;
} bench;

static void run_mx(const void *l, amn_simd lv, amn_dtype out, uint64_t row0, uint64_t n,
                   void *dst) {
    mxfp4_dequant_rows(l, row0, n, out, dst, lv);
}
static void run_ct(const void *l, amn_simd lv, amn_dtype out, uint64_t row0, uint64_t n,
                   void *dst) {
    if (ct_dequant_rows(l, row0, n, out, dst, lv)) exit(1);
}
static void run_nv(const void *l, amn_simd lv, amn_dtype out, uint64_t row0, uint64_t n,
                   void *dst) {
    nvfp4_dequant_rows(l, row0, n, out, dst, lv);
}
static void run_bmm(const void *l, amn_simd lv, amn_dtype out, uint64_t row0, uint64_t n,
                    void *dst) {
    if (nvfp4_bmm_rows(l, row0, n, out, dst, lv)) exit(1);
}

/* The whole tensor into dst, or CHUNK bytes of rows at a time into its start
 * (rounded down to whole quanta, as the converter rounds one worker's). */
static void run_all(const bench *b, amn_simd lv, amn_dtype out, bool chunked, void *dst) {
    uint64_t step = chunked ? CHUNK / (b->row_elems * amn_dtype_size(out)) : b->rows;
    if (chunked && b->quantum > 1 && step >= b->quantum) step -= step % b->quantum;
    for (uint64_t r = 0; r < b->rows; r += step)
        b->run(b->layout, lv, out, r, b->rows - r < step ? b->rows - r : step, dst);
}

static void report(const bench *b, bool only, void *dst) {
    const amn_dtype outs[2] = {AMN_DTYPE_BF16, AMN_DTYPE_F32};
    const double elems = (double)b->rows * (double)b->row_elems;
    for (int oi = 0; oi < 2; oi++) {
        double scalar = 0;
        /* --only also skips the scalar rows (what perf record wants) */
        for (int lv = only ? (int)amn_simd_level() : AMN_SIMD_SCALAR; lv <= (int)amn_simd_level();
             lv++) {
            double t[2] = {1e30, 1e30};
            for (int r = 0; r < REPS; r++)
                for (int chunked = 0; chunked < 2; chunked++) {
                    const double t0 = cpu_now();
                    run_all(b, (amn_simd)lv, outs[oi], chunked, dst);
                    const double d = cpu_now() - t0;
                    if (d < t[chunked]) t[chunked] = d;
                }
            if (lv == AMN_SIMD_SCALAR) scalar = t[0];
            char vs[32] = "";
            if (scalar > 0) snprintf(vs, sizeof vs, "x%5.2f scalar", scalar / t[0]);
            printf("%-28s %-4s %-6s %8.2f ms CPU %6.2f Gelem/s  %-13s  %6.2f Gelem/s "
                   "in 1 MiB chunks\n",
                   b->name, amn_dtype_name(outs[oi]), amn_simd_name((amn_simd)lv), t[0] * 1e3,
                   elems / t[0] * 1e-9, vs, elems / t[1] * 1e-9);
        }
    }
}

/* A safetensors file from (name, dtype, shape, bytes) entries. */
typedef struct entry {
    char name[64];
    const char *dtype;
    int ndim;
    unsigned long long shape[4];
    const uint8_t *data;
    size_t n;
} entry;

static int write_st(const char *path, const entry *e, int count) {
    char header[16384];
    size_t len = 0;
    unsigned long long off = 0;
    len += (size_t)snprintf(header + len, sizeof header - len, "{");
    for (int k = 0; k < count; k++) {
        len += (size_t)snprintf(header + len, sizeof header - len,
                                "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", k ? "," : "", e[k].name,
                                e[k].dtype);
        for (int d = 0; d < e[k].ndim; d++)
            len += (size_t)snprintf(header + len, sizeof header - len, "%s%llu", d ? "," : "",
                                    e[k].shape[d]);
        len += (size_t)snprintf(header + len, sizeof header - len,
                                "],\"data_offsets\":[%llu,%llu]}", off, off + e[k].n);
        off += e[k].n;
    }
    len += (size_t)snprintf(header + len, sizeof header - len, "}");
    while (len % 8) header[len++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint8_t le[8];
    for (int k = 0; k < 8; k++) le[k] = (uint8_t)((uint64_t)len >> (8 * k));
    fwrite(le, 1, 8, f);
    fwrite(header, 1, len, f);
    for (int k = 0; k < count; k++) fwrite(e[k].data, 1, e[k].n, f);
    return fclose(f);
}

/* Wall time of cmd; *cpu gets its CPU time (with the shell's). */
static double run_cmd(const char *cmd, const char *fresh, double *cpu) {
    unlink(fresh);
    sync();
    const double c0 = children_cpu(), t0 = now();
    if (system(cmd) != 0) {
        fprintf(stderr, "failed: %s\n", cmd);
        return -1;
    }
    const double t = now() - t0;
    if (cpu) *cpu = children_cpu() - c0;
    return t;
}

/* Best-of-REPS `amn remember --threads 2` against cp of its output,
 * interleaved, like with like: as users run it (the output fsynced) against
 * `cp && sync FILE` (coreutils' sync FILE fsyncs it), and with --no-sync
 * against plain cp. */
static void cli_case(const char *what, const char *dir, const entry *e, int count) {
    char in[256], out[256], copy[256], cmd[2][1024], cpcmd[2][1024];
    snprintf(in, sizeof in, "%s/model.safetensors", dir);
    snprintf(out, sizeof out, "%s/out.safetensors", dir);
    snprintf(copy, sizeof copy, "%s/copy.bin", dir);
    if (write_st(in, e, count)) return;
    for (int k = 0; k < 2; k++)
        snprintf(cmd[k], sizeof cmd[k],
                 "'%s/bin/amn' remember '%s' -o '%s' --threads 2%s >/dev/null", AMN_BINARY_DIR, in,
                 out, k ? " --no-sync" : "");
    snprintf(cpcmd[0], sizeof cpcmd[0], "cp '%s' '%s' && sync '%s'", out, copy, copy);
    snprintf(cpcmd[1], sizeof cpcmd[1], "cp '%s' '%s'", out, copy);
    double tr[2] = {1e30, 1e30}, tc[2] = {1e30, 1e30}, cr[2] = {0, 0}, cc[2] = {0, 0};
    if (run_cmd(cmd[1], out, NULL) < 0) return; /* warm-up, and the file cp copies */
    for (int r = 0; r < REPS; r++) {
        double c, t;
        for (int k = 0; k < 2; k++) {
            t = run_cmd(cmd[k], out, &c);
            if (t >= 0 && t < tr[k]) tr[k] = t, cr[k] = c;
            t = run_cmd(cpcmd[k], copy, &c);
            if (t >= 0 && t < tc[k]) tc[k] = t, cc[k] = c;
        }
    }
    struct stat st;
    const double bytes = stat(out, &st) == 0 ? (double)st.st_size : 0;
    printf("remember %s -> BF16 (%.0f MB), 2 threads:\n"
           "  %.3f s wall (%.3f s CPU) against cp + sync %.3f s (%.3f s CPU): rate x%.2f\n"
           "  --no-sync %.3f s wall (%.3f s CPU) against cp %.3f s (%.3f s CPU): rate x%.2f\n",
           what, bytes * 1e-6, tr[0], cr[0], tc[0], cc[0], tc[0] / tr[0], tr[1], cr[1], tc[1],
           cc[1], tc[1] / tr[1]);
    if (getenv("SCHEME_BENCH_KEEP")) { /* keep each input, e.g. for perf record */
        static int kept;
        char keep[300];
        snprintf(keep, sizeof keep, "%s/model-%d.safetensors", dir, kept++);
        if (rename(in, keep) == 0) printf("  input kept: %s\n", keep);
    }
    unlink(in);
    unlink(out);
    unlink(copy);
}

int main(int argc, char **argv) {
    /* gpt-oss-20b's gate_up_proj: 32 experts [5760, 2880]; 4 of them here. */
    const uint64_t E = 4, R = 5760, G = 90, K = G * 32;
    uint8_t *blocks = fill(E * R * G * 16), *e8 = bytes_in(E * R * G, 110, 135);
    /* With the plugin's cache of transposed scales (MXFP4_BENCH_NO_CACHE=1: without). */
    const mxfp4_layout mx = {
        .blocks = blocks,
        .scales = e8,
        .experts = E,
        .rows = R,
        .groups = G,
        .cache = getenv("MXFP4_BENCH_NO_CACHE") ? NULL : mxfp4_scale_cache_new(E, R, G)};
    /* An 11008 x 4096 linear layer for the others. */
    const uint64_t O = 11008, I = 4096;
    uint8_t *w4 = fill(O * I / 2), *w8 = fill(O * I), *s128 = scales16(O * I / 128, AMN_DTYPE_BF16);
    uint8_t *zp = fill((O / 8) * (I / 128) * 4), *sch = scales16(O, AMN_DTYPE_BF16);
    int32_t *gidx = act_order(I, 128);
    const ct_layout c4 = {.weight = w4,
                          .packed = true,
                          .bits = 4,
                          .out = O,
                          .in = I,
                          .words = I / 8,
                          .scales = s128,
                          .stype = AMN_DTYPE_BF16,
                          .groups = I / 128,
                          .group_size = 128};
    ct_layout c4z = c4;
    c4z.zeros = zp, c4z.zkind = CT_ZERO_PACKED;
    ct_layout c4a = c4;
    c4a.gidx = gidx;
    const ct_layout c8 = {.weight = w8,
                          .packed = false,
                          .bits = 8,
                          .out = O,
                          .in = I,
                          .scales = sch,
                          .stype = AMN_DTYPE_BF16,
                          .groups = 1,
                          .group_size = I};
    uint8_t *e4 = bytes_in(O * I / 16, 0x30, 0x70);
    const float second = 1.5e-4f;
    const nvfp4_layout nv = {
        .weight = w4, .scales = e4, .rows = O, .in = I, .second = &second, .rows_per_second = O};
    nvfp4_layout nvc = nv;
    nvc.divide = nvc.neg_zero = true;
    /* Llama4-style fused experts in the batched layout: 4 x [4096 in, 2752 out]. */
    const nvfp4_bmm_layout nvb = {.weight = w4,
                                  .scales = e4,
                                  .experts = 4,
                                  .in = I,
                                  .outs = O / 4,
                                  .second = &second,
                                  .n_second = 1};
    ct_layout c4b = c4; /* block strategy, 128 x 128 */
    c4b.groups = I / 128, c4b.block_rows = 128;
    /* int2 g128 over the same buffers: [O / 2, 2 I], I / 8 words a row, so
     * the weight and the scales ([O / 2][2 I / 128]) stay within them. */
    ct_layout c2 = c4;
    c2.bits = 2, c2.out = O / 2, c2.in = 2 * I, c2.groups = 2 * I / 128;
    /* Act-order over a down projection's 14336 inputs (112 groups), [3072,
     * 14336] within the same buffers. */
    const uint64_t I112 = 14336;
    int32_t *gidx112 = act_order(I112, 128);
    ct_layout c4a112 = c4a;
    c4a112.out = 3072, c4a112.in = I112, c4a112.words = I112 / 8, c4a112.groups = I112 / 128;
    c4a112.gidx = gidx112;
    const bench benches[] = {
        {"mxfp4 4x[5760,2880]", E * K, R, 32, run_mx, &mx}, /* mxfp4_detect.c's quantum */
        {"ctensors int4 g128", O, I, 1, run_ct, &c4},
        {"ctensors int4 g128 asym", O, I, 1, run_ct, &c4z},
        {"ctensors int4 act-order", O, I, ct_row_quantum(&c4a), run_ct, &c4a},
        {"ctensors int4 act-order 112 groups", 3072, I112, ct_row_quantum(&c4a112), run_ct,
         &c4a112},
        {"ctensors int8 channel", O, I, 1, run_ct, &c8},
        {"ctensors int4 block 128x128", O, I, 1, run_ct, &c4b},
        {"ctensors int2 g128", O / 2, 2 * I, 1, run_ct, &c2},
        {"nvfp4 modelopt", O, I, 1, run_nv, &nv},
        {"nvfp4 compressed-tensors", O, I, 1, run_nv, &nvc},
        {"nvfp4 fused experts [E,I,O]", 4 * I, O / 4, 1, run_bmm, &nvb},
    };
    const size_t most = (size_t)(E * R * K > O * I ? E * R * K : O * I);
    /* 64-byte aligned, as the Python package allocates whole tensors. */
    uint8_t *dst = aligned_alloc(64, most * 4);
    memset(dst, 0, most * 4);
    printf("one thread, best of %d, CPU time; the machine may be loaded: compare rows of one "
           "run\n",
           REPS);
    const bool cli_only = argc > 1 && strcmp(argv[1], "--cli-only") == 0;
    const char *only = argc > 2 && strcmp(argv[1], "--only") == 0 ? argv[2] : NULL;
    for (size_t b = 0; !cli_only && b < sizeof benches / sizeof *benches; b++)
        if (!only || strstr(benches[b].name, only)) report(&benches[b], only != NULL, dst);
    free(dst);

    if (!only && !(argc > 1 && strcmp(argv[1], "--no-cli") == 0)) {
        const char *tmp = getenv("TMPDIR");
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/amn-scheme-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (mkdtemp(dir)) {
            entry mxe[4];
            for (int k = 0; k < 2; k++) {
                const char *proj = k ? "down_proj" : "gate_up_proj";
                mxe[2 * k] = (entry){.dtype = "U8",
                                     .ndim = 4,
                                     .shape = {E, R, G, 16},
                                     .data = blocks,
                                     .n = E * R * G * 16};
                snprintf(mxe[2 * k].name, sizeof mxe[0].name, "l.experts.%s_blocks", proj);
                mxe[2 * k + 1] = (entry){
                    .dtype = "U8", .ndim = 3, .shape = {E, R, G}, .data = e8, .n = E * R * G};
                snprintf(mxe[2 * k + 1].name, sizeof mxe[0].name, "l.experts.%s_scales", proj);
            }
            cli_case("MXFP4, 2 x 4 experts [5760, 2880]", dir, mxe, 4);
            const int64_t shape[2] = {(int64_t)O, (int64_t)I};
            entry ce[12];
            for (int k = 0; k < 4; k++) {
                ce[3 * k] = (entry){
                    .dtype = "I32", .ndim = 2, .shape = {O, I / 8}, .data = w4, .n = O * I / 2};
                snprintf(ce[3 * k].name, sizeof ce[0].name, "l%d.weight_packed", k);
                ce[3 * k + 1] = (entry){.dtype = "BF16",
                                        .ndim = 2,
                                        .shape = {O, I / 128},
                                        .data = s128,
                                        .n = O * I / 128 * 2};
                snprintf(ce[3 * k + 1].name, sizeof ce[0].name, "l%d.weight_scale", k);
                ce[3 * k + 2] = (entry){.dtype = "I64",
                                        .ndim = 1,
                                        .shape = {2},
                                        .data = (const uint8_t *)shape,
                                        .n = 16};
                snprintf(ce[3 * k + 2].name, sizeof ce[0].name, "l%d.weight_shape", k);
            }
            cli_case("compressed-tensors int4 g128, 4 x [11008, 4096]", dir, ce, 12);
            const float s2 = 1.5e-4f;
            entry ne[12];
            for (int k = 0; k < 4; k++) {
                ne[3 * k] = (entry){
                    .dtype = "U8", .ndim = 2, .shape = {O, I / 2}, .data = w4, .n = O * I / 2};
                snprintf(ne[3 * k].name, sizeof ne[0].name, "l%d.weight", k);
                ne[3 * k + 1] = (entry){.dtype = "F8_E4M3",
                                        .ndim = 2,
                                        .shape = {O, I / 16},
                                        .data = e4,
                                        .n = O * I / 16};
                snprintf(ne[3 * k + 1].name, sizeof ne[0].name, "l%d.weight_scale", k);
                ne[3 * k + 2] =
                    (entry){.dtype = "F32", .ndim = 0, .data = (const uint8_t *)&s2, .n = 4};
                snprintf(ne[3 * k + 2].name, sizeof ne[0].name, "l%d.weight_scale_2", k);
            }
            cli_case("ModelOpt NVFP4, 4 x [11008, 4096]", dir, ne, 12);
            if (!getenv("SCHEME_BENCH_KEEP")) rmdir(dir);
        }
    }
    mxfp4_scale_cache_free(mx.cache);
    free(blocks), free(e8), free(w4), free(w8), free(s128), free(zp), free(sch), free(gidx),
        free(gidx112);
    free(e4);
    return 0;
}
