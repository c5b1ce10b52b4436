/* Benchmark of the bitsandbytes plugin (not a test):
 *  1. decode kernels, one thread, 4096x4096 values to BF16 (and F32): NF4,
 *     FP4, NF4 double quant, INT8 — Gelem/s, best of 7;
 *  2. encode: `amn convert IN --to bnb-nf4 --threads 2` of four 4096x4096
 *     BF16 weights (128 MiB in, 33 MiB out), against `cp` of its output in
 *     the same run (rounds interleaved, sync before each, best and median).
 *
 *   build/bin/bnb_bench [workdir]   (default /tmp) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bnb_kernels.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint32_t rng = 2463534242u;
static uint32_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return rng;
}

#define N (4096u * 4096u)

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Best of 7 wall times; on a loaded machine the thread's CPU time says more,
 * so both are kept (the second in cpu_rate). */
static double cpu_rate;
static double gelems(void (*fn)(void *), void *arg) {
    double best = 1e9, best_cpu = 1e9;
    for (int r = 0; r < 7; r++) {
        const double t0 = now(), c0 = cpu_now();
        fn(arg);
        const double dt = now() - t0, dc = cpu_now() - c0;
        if (dt < best) best = dt;
        if (dc < best_cpu) best_cpu = dc;
    }
    cpu_rate = (double)N / best_cpu * 1e-9;
    return (double)N / best * 1e-9;
}

typedef struct job4 {
    bnb4_layout *l;
    amn_dtype out;
    void *dst;
} job4;
static void run4(void *a) {
    job4 *j = a;
    /* in 1 MiB output chunks, as the pipeline calls it */
    const uint64_t step = (1u << 20) / amn_dtype_size(j->out);
    for (uint64_t e = 0; e < N; e += step)
        bnb4_dequant(j->l, e, step, j->out, (uint8_t *)j->dst + e * amn_dtype_size(j->out),
                     amn_simd_level());
}
typedef struct job8 {
    bnb8_layout *l;
    amn_dtype out;
    void *dst;
} job8;
static void run8(void *a) {
    job8 *j = a;
    const uint64_t rows = (1u << 20) / amn_dtype_size(j->out) / 4096;
    for (uint64_t r = 0; r < 4096; r += rows)
        bnb8_dequant_rows(j->l, r, rows, j->out,
                          (uint8_t *)j->dst + r * 4096 * amn_dtype_size(j->out), amn_simd_level());
}

static void decode_bench(void) {
    uint8_t *w = malloc(N / 2), *a = malloc(N / 64 * 4), *codes = malloc(N / 64);
    int8_t *w8 = malloc(N);
    uint8_t *scb = malloc(4096 * 4);
    void *dst = malloc((size_t)N * 4);
    float nested[N / 64 / 256];
    if (!w || !a || !codes || !w8 || !scb || !dst) exit(1);
    for (size_t i = 0; i < N / 2; i++) w[i] = (uint8_t)next();
    for (size_t i = 0; i < N; i++) w8[i] = (int8_t)next();
    for (size_t i = 0; i < N / 64; i++) {
        const float f = 0.01f + (float)(next() % 1000) * 1e-4f;
        memcpy(a + i * 4, &f, 4);
        codes[i] = (uint8_t)next();
    }
    for (size_t i = 0; i < N / 64 / 256; i++) nested[i] = 0.05f;
    for (size_t i = 0; i < 4096; i++) {
        const float f = 0.1f + (float)(next() % 1000) * 1e-3f;
        memcpy(scb + i * 4, &f, 4);
    }
    bnb4_layout nf4 = {.weight = w, .n = N, .block = 64, .absmax = a};
    bnb4_codebook(bnb_nf4_map, nf4.codebook);
    bnb4_layout fp4 = nf4;
    bnb4_codebook(bnb_fp4_map, fp4.codebook);
    bnb4_layout dq = nf4;
    dq.absmax = codes;
    dq.nested = true;
    dq.nested_absmax = (const uint8_t *)nested;
    dq.nested_map = bnb_dynamic_map;
    dq.nested_block = 256;
    dq.nested_offset = 0.03f;
    bnb8_layout i8 = {.weight = w8, .scb = scb, .rows = 4096, .cols = 4096};
    printf("decode, one thread, 4096x4096, path %s (Gelem/s by wall time, best of 7; in\n"
           "parentheses by the thread's CPU time):\n",
           amn_simd_name(amn_simd_level()));
    const amn_dtype outs[2] = {AMN_DTYPE_BF16, AMN_DTYPE_F32};
    for (int o = 0; o < 2; o++) {
        job4 j1 = {&nf4, outs[o], dst}, j2 = {&fp4, outs[o], dst}, j3 = {&dq, outs[o], dst};
        job8 j4 = {&i8, outs[o], dst};
        double w[4], c[4];
        w[0] = gelems(run4, &j1), c[0] = cpu_rate;
        w[1] = gelems(run4, &j2), c[1] = cpu_rate;
        w[2] = gelems(run4, &j3), c[2] = cpu_rate;
        w[3] = gelems(run8, &j4), c[3] = cpu_rate;
        printf("  to %-4s  NF4 %.2f (cpu %.2f)  FP4 %.2f (%.2f)  NF4-DQ %.2f (%.2f)  INT8 %.2f "
               "(%.2f)\n",
               amn_dtype_name(outs[o]), w[0], c[0], w[1], c[1], w[2], c[2], w[3], c[3]);
    }
    free(w), free(a), free(codes), free(w8), free(scb), free(dst);
}

static double last_cpu; /* user + system seconds of the last child */
static double run_once(char *const argv[], const char *unlink_first) {
    if (unlink_first) unlink(unlink_first);
    sync();
    fflush(stdout);
    const double t0 = now();
    const pid_t pid = fork();
    if (pid < 0) exit(1);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout)) _exit(127);
        execvp(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "failed: %s\n", argv[0]);
        exit(1);
    }
    last_cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    return now() - t0;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Four 4096x4096 BF16 weights, roughly normal, written in 4 MiB blocks. */
static void write_model(const char *path) {
    char h[1024];
    int n = snprintf(h, sizeof h, "{");
    for (int k = 0; k < 4; k++)
        n += snprintf(h + n, sizeof h - (size_t)n,
                      "%s\"model.layers.%d.mlp.up_proj.weight\":{\"dtype\":\"BF16\",\"shape\":"
                      "[4096,4096],\"data_offsets\":[%llu,%llu]}",
                      k ? "," : "", k, (unsigned long long)k * N * 2,
                      (unsigned long long)(k + 1) * N * 2);
    n += snprintf(h + n, sizeof h - (size_t)n, "}");
    while (n % 8) h[n++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) exit(1);
    const uint64_t len = (uint64_t)n;
    fwrite(&len, 8, 1, f);
    fwrite(h, 1, (size_t)n, f);
    fflush(f);
    uint16_t *block = malloc(2u << 20 << 1);
    for (uint64_t done = 0; done < 4ull * N; done += 2u << 20) {
        for (size_t i = 0; i < (2u << 20); i++) {
            const float x =
                ((float)(next() & 0xffff) + (float)(next() & 0xffff) - 65535.0f) * 3e-7f;
            block[i] = amn_f32_to_bf16(x);
        }
        if (write(fileno(f), block, 4u << 20) != (ssize_t)(4u << 20)) exit(1);
    }
    free(block);
    fsync(fileno(f));
    fclose(f);
}

#define ROUNDS 7

static void encode_bench(const char *dir) {
    char in[512], out[512], ref[512];
    snprintf(in, sizeof in, "%s/amn-bnb-bench-bf16.safetensors", dir);
    snprintf(out, sizeof out, "%s/amn-bnb-bench-nf4.safetensors", dir);
    snprintf(ref, sizeof ref, "%s/amn-bnb-bench-copy", dir);
    write_model(in);
    char *conv[] = {AMN_BINARY_DIR "/bin/amn",
                    "convert",
                    in,
                    "--to",
                    "bnb-nf4",
                    "--threads",
                    "2",
                    "-o",
                    out,
                    "--force",
                    NULL};
    char *cp[] = {"cp", out, ref, NULL};
    run_once(conv, out); /* warm-up */
    double tc[ROUNDS], tp[ROUNDS], cc[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        tc[r] = run_once(conv, out);
        cc[r] = last_cpu;
        tp[r] = run_once(cp, ref);
    }
    qsort(tc, ROUNDS, sizeof *tc, cmp_double);
    qsort(tp, ROUNDS, sizeof *tp, cmp_double);
    qsort(cc, ROUNDS, sizeof *cc, cmp_double);
    printf("encode CPU time (user + system, both threads): best %.0f ms, median %.0f ms\n",
           cc[0] * 1e3, cc[ROUNDS / 2] * 1e3);
    printf("encode NF4, 4 x 4096x4096 BF16 (128 MiB in), `amn convert --to bnb-nf4 --threads 2`:\n"
           "  best %.0f ms, median %.0f ms; cp of its output: best %.0f ms, median %.0f ms "
           "(amn / cp: %.1fx best, %.1fx median)\n"
           "  against the 1.45-1.57 s of the Rust encoder on this machine kind: %.1fx (best), "
           "%.1fx (median) faster\n",
           tc[0] * 1e3, tc[ROUNDS / 2] * 1e3, tp[0] * 1e3, tp[ROUNDS / 2] * 1e3, tc[0] / tp[0],
           tc[ROUNDS / 2] / tp[ROUNDS / 2], 1.45 / tc[0], 1.45 / tc[ROUNDS / 2]);
    unlink(in), unlink(out), unlink(ref);
}

int main(int argc, char **argv) {
    decode_bench();
    encode_bench(argc > 1 ? argv[1] : "/tmp");
    return 0;
}
