/* Benchmark of the core paths (not a test): `amn convert` F32 -> BF16 of a
 * 4096x4096 tensor against `cp` of the same bytes, and `amn inspect` of a
 * 16 MiB and a 2 GiB file. Prints ratios measured in this run; best of N.
 *
 *   build/bin/bench_core [workdir]   (default /tmp) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef AMN_BINARY_DIR
#define AMN_BINARY_DIR "."
#endif

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Run argv (stdout to /dev/null) and return its wall time. The caller's
 * cleanup (unlinking the previous output) and a sync happen before the clock
 * starts, so neither the unlink nor the write-back of earlier runs' dirty
 * pages is timed: each command runs on a quiet page cache and disk. */
static double run_once(char *const argv[], const char *unlink_first) {
    if (unlink_first) unlink(unlink_first);
    sync();
    fflush(stdout);
    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout)) _exit(127);
        execvp(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "failed: %s\n", argv[0]);
        exit(1);
    }
    return now() - t0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define ROUNDS 11

/* An F32 safetensors file of one rows x cols tensor; `sparse` leaves the data
 * as a hole (inspect never reads it). */
static void write_f32(const char *path, uint64_t rows, uint64_t cols, int sparse) {
    char header[256];
    uint64_t bytes = rows * cols * 4;
    int n = snprintf(header, sizeof header,
                     "{\"w\":{\"dtype\":\"F32\",\"shape\":[%llu,%llu],\"data_offsets\":[0,%llu]}}",
                     (unsigned long long)rows, (unsigned long long)cols, (unsigned long long)bytes);
    while (n % 8) header[n++] = ' ';
    header[n] = '\0';
    FILE *f = fopen(path, "wb");
    uint64_t len = (uint64_t)n;
    fwrite(&len, 8, 1, f);
    fwrite(header, 1, (size_t)n, f);
    if (sparse) {
        fflush(f);
        if (ftruncate(fileno(f), (off_t)(8 + len + bytes)) != 0) exit(1);
    } else {
        /* Written in 4 MiB blocks, as a download or a cold read would fill
         * the page cache: 4 KiB writes (stdio's buffer) leave the file in
         * 4 KiB folios, which make every reader's page faults about ten
         * times dearer (mapping 64 MiB: 8 ms against 0.9 ms here). */
        const uint64_t block_rows = (4u << 20) / (cols * 4) ? (4u << 20) / (cols * 4) : 1;
        float *block = malloc(block_rows * cols * 4);
        if (!block) exit(1);
        uint32_t s = 2463534242u;
        for (uint64_t r = 0; r < rows; r += block_rows) {
            const uint64_t n = rows - r < block_rows ? rows - r : block_rows;
            for (uint64_t i = 0; i < n * cols; i++) {
                s ^= s << 13, s ^= s >> 17, s ^= s << 5;
                block[i] = (float)(int32_t)s * 0x1p-31f;
            }
            fflush(f);
            if (write(fileno(f), block, n * cols * 4) != (ssize_t)(n * cols * 4)) exit(1);
        }
        free(block);
    }
    fflush(f);
    fsync(fileno(f)); /* no write-back of the input during the timed runs */
    fclose(f);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    const char *amn = AMN_BINARY_DIR "/bin/amn";
    char in[512], out[512], ref[512], small[512], big[512];
    snprintf(in, sizeof in, "%s/amn-bench-f32.safetensors", dir);
    snprintf(out, sizeof out, "%s/amn-bench-bf16.safetensors", dir);
    snprintf(ref, sizeof ref, "%s/amn-bench-copy", dir);
    snprintf(small, sizeof small, "%s/amn-bench-16m.safetensors", dir);
    snprintf(big, sizeof big, "%s/amn-bench-2g.safetensors", dir);
    write_f32(in, 4096, 4096, 0);
    write_f32(small, 2048, 2048, 1);
    write_f32(big, 16384, 32768, 1);

    /* convert, cp of the bytes it writes (the BF16 output) and cp of its
     * input, interleaved round by round so that all three see the same
     * machine; best and median of each. Destinations are fresh files:
     * replacing an existing one makes ext4 flush the new one at rename
     * (auto_da_alloc), which would time the disk. */
    char *conv_argv[] = {(char *)amn, "convert", in, "--to", "safetensors", "-o", out, NULL};
    char *cpo_argv[] = {"cp", out, ref, NULL};
    char *cpi_argv[] = {"cp", in, ref, NULL};
    run_once(conv_argv, out); /* warm-up: page cache, and `out` for cp */
    double t_conv[ROUNDS], t_cpo[ROUNDS], t_cpi[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        t_conv[r] = run_once(conv_argv, out);
        t_cpo[r] = run_once(cpo_argv, ref);
        t_cpi[r] = run_once(cpi_argv, ref);
    }
    qsort(t_conv, ROUNDS, sizeof *t_conv, cmp_double);
    qsort(t_cpo, ROUNDS, sizeof *t_cpo, cmp_double);
    qsort(t_cpi, ROUNDS, sizeof *t_cpi, cmp_double);
    const int med = ROUNDS / 2;
    const double mb_out = 4096.0 * 4096 * 2 / 1e6, mb_in = 4096.0 * 4096 * 4 / 1e6;
    printf("convert F32->BF16 4096x4096: best %.1f ms, median %.1f ms (%.0f MB/s read, %.0f MB/s "
           "written, median)\n",
           t_conv[0] * 1e3, t_conv[med] * 1e3, mb_in / t_conv[med], mb_out / t_conv[med]);
    printf("cp of the output (32 MiB):   best %.1f ms, median %.1f ms -> convert runs at %.0f%% "
           "(best) / %.0f%% (median) of the copy rate (target >= 70%%)\n",
           t_cpo[0] * 1e3, t_cpo[med] * 1e3, 100.0 * t_cpo[0] / t_conv[0],
           100.0 * t_cpo[med] / t_conv[med]);
    printf("cp of the input (64 MiB):    best %.1f ms, median %.1f ms -> convert / cp(input) time "
           "ratio %.2f (median)\n",
           t_cpi[0] * 1e3, t_cpi[med] * 1e3, t_conv[med] / t_cpi[med]);

    char *small_argv[] = {(char *)amn, "inspect", small, NULL};
    char *big_argv[] = {(char *)amn, "inspect", big, NULL};
    char *start_argv[] = {(char *)amn, "--version", NULL};
    double t_small = 1e30, t_big = 1e30, t_start = 1e30;
    for (int r = 0; r < 21; r++) {
        double a = run_once(small_argv, NULL), b = run_once(big_argv, NULL),
               c = run_once(start_argv, NULL);
        t_small = a < t_small ? a : t_small;
        t_big = b < t_big ? b : t_big;
        t_start = c < t_start ? c : t_start;
    }
    printf("inspect 16 MiB: %.2f ms, 2 GiB: %.2f ms (ratio %.2f, target <= 2); "
           "process start alone %.2f ms\n",
           t_small * 1e3, t_big * 1e3, t_big / t_small, t_start * 1e3);
    unlink(in), unlink(out), unlink(ref), unlink(small), unlink(big);
    return 0;
}
