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
#include <unistd.h>

#ifndef AMN_BINARY_DIR
#define AMN_BINARY_DIR "."
#endif

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double best_of(int runs, const char *cmd) {
    double best = 1e30;
    for (int i = 0; i < runs; i++) {
        double t0 = now();
        if (system(cmd) != 0) {
            fprintf(stderr, "failed: %s\n", cmd);
            exit(1);
        }
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

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
        float *row = malloc(cols * 4);
        uint32_t s = 2463534242u;
        for (uint64_t r = 0; r < rows; r++) {
            for (uint64_t c = 0; c < cols; c++) {
                s ^= s << 13, s ^= s >> 17, s ^= s << 5;
                row[c] = (float)(int32_t)s * 0x1p-31f;
            }
            fwrite(row, 4, cols, f);
        }
        free(row);
    }
    fclose(f);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    const char *amn = AMN_BINARY_DIR "/bin/amn";
    char in[512], out[512], ref[512], small[512], big[512], cmd[2048];
    snprintf(in, sizeof in, "%s/amn-bench-f32.safetensors", dir);
    snprintf(out, sizeof out, "%s/amn-bench-bf16.safetensors", dir);
    snprintf(ref, sizeof ref, "%s/amn-bench-copy", dir);
    snprintf(small, sizeof small, "%s/amn-bench-16m.safetensors", dir);
    snprintf(big, sizeof big, "%s/amn-bench-2g.safetensors", dir);
    write_f32(in, 4096, 4096, 0);
    write_f32(small, 2048, 2048, 1);
    write_f32(big, 16384, 32768, 1);

    /* cp of the bytes convert writes (the BF16 output), then convert itself. */
    /* Fresh destinations for both: replacing an existing file makes ext4 flush
     * the new one at rename (auto_da_alloc), which would time the disk. */
    snprintf(cmd, sizeof cmd, "rm -f %s && %s convert %s --to safetensors -o %s >/dev/null", out,
             amn, in, out);
    double t_conv = best_of(7, cmd);
    snprintf(cmd, sizeof cmd, "rm -f %s && cp %s %s", ref, out, ref);
    double t_cp_out = best_of(7, cmd);
    snprintf(cmd, sizeof cmd, "rm -f %s && cp %s %s", ref, in, ref);
    double t_cp_in = best_of(7, cmd);
    const double mb_out = 4096.0 * 4096 * 2 / 1e6, mb_in = 4096.0 * 4096 * 4 / 1e6;
    printf("convert F32->BF16 4096x4096: %.1f ms (%.0f MB/s read, %.0f MB/s written)\n",
           t_conv * 1e3, mb_in / t_conv, mb_out / t_conv);
    printf("cp of the output (32 MiB):   %.1f ms -> convert runs at %.0f%% of the copy rate "
           "(target >= 70%%)\n",
           t_cp_out * 1e3, 100.0 * t_cp_out / t_conv);
    printf("cp of the input (64 MiB):    %.1f ms -> convert / cp(input) time ratio %.2f\n",
           t_cp_in * 1e3, t_conv / t_cp_in);

    snprintf(cmd, sizeof cmd, "%s inspect %s >/dev/null", amn, small);
    double t_small = best_of(21, cmd);
    snprintf(cmd, sizeof cmd, "%s inspect %s >/dev/null", amn, big);
    double t_big = best_of(21, cmd);
    snprintf(cmd, sizeof cmd, "%s --version >/dev/null", amn);
    double t_start = best_of(21, cmd);
    printf("inspect 16 MiB: %.2f ms, 2 GiB: %.2f ms (ratio %.2f, target <= 2); "
           "process start alone %.2f ms\n",
           t_small * 1e3, t_big * 1e3, t_big / t_small, t_start * 1e3);
    unlink(in), unlink(out), unlink(ref), unlink(small), unlink(big);
    return 0;
}
