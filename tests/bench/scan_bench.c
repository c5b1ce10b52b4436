/* scan_bench — `amn scan` against reading what it must read (not a test).
 *
 *   scan_bench FILE...      (a ~300 MB checkpoint: tests/bench/zip_bench.sh
 *                            makes /tmp/amn-zip-bench/model.pth)
 *
 * For each PyTorch ZIP checkpoint: amn_scan (best of 50, report freed each
 * time) against the floor any scan has: reading the ZIP directory and
 * data.pkl through the plugin kit's reader (best of 50, same run). The scan
 * target is floor + 5 ms; the tensor data is never touched (the file is
 * mapped, and only the directory, local headers and the pickle are read). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include "amn/amn.h"
#include "amn/kit/zip_reader.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The floor: the directory and the pickle, read through a file source. */
static double read_pickle_seconds(const char *path, size_t *pickle_bytes) {
    double t0 = now();
    amn_source src;
    amn_error err = {0};
    if (amn_source_file_open(path, &src, &err) != AMN_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        exit(1);
    }
    amn_limits lim;
    amn_limits_default(&lim);
    zip_dir d;
    if (zip_dir_read(&src, &lim, &d, &err) != AMN_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        exit(1);
    }
    for (size_t i = 0; i < d.count; i++) {
        if (!zip_name_is_pickle(d.entries[i].name, d.entries[i].name_len)) continue;
        uint8_t *p = NULL;
        if (zip_read_member(&src, &d, &d.entries[i], lim.max_header_bytes, &p, &err) != AMN_OK) {
            fprintf(stderr, "%s: %s\n", path, err.msg);
            exit(1);
        }
        *pickle_bytes = (size_t)d.entries[i].usize;
        free(p);
    }
    zip_dir_free(&d);
    amn_source_file_close(&src);
    return now() - t0;
}

static double scan_seconds(amn_ctx *ctx, const char *path, bool *unsafe, size_t *findings) {
    double t0 = now();
    amn_scan_report *r = NULL;
    amn_error err = {0};
    if (amn_scan(ctx, path, NULL, NULL, &r, &err) != AMN_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        exit(1);
    }
    *unsafe = amn_scan_unsafe(r);
    *findings = amn_scan_count(r);
    amn_scan_free(r);
    return now() - t0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: scan_bench FILE...\n");
        return 2;
    }
    amn_ctx *ctx;
    amn_error err = {0};
    if (amn_ctx_new(NULL, &ctx, &err) != AMN_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    for (int f = 1; f < argc; f++) {
        struct stat st;
        if (stat(argv[f], &st) != 0) continue;
        double best_read = 1e9, best_scan = 1e9;
        size_t pickle = 0, findings = 0;
        bool unsafe = false;
        for (int i = 0; i < 50; i++) {
            double r = read_pickle_seconds(argv[f], &pickle);
            double s = scan_seconds(ctx, argv[f], &unsafe, &findings);
            if (r < best_read) best_read = r;
            if (s < best_scan) best_scan = s;
        }
        printf("%s: %.1f MB, data.pkl %zu bytes: scan %.3f ms (%s, %zu findings); directory + "
               "pickle read %.3f ms; scan - read = %.3f ms (target < 5 ms)\n",
               argv[f], (double)st.st_size / 1e6, pickle, best_scan * 1e3,
               unsafe ? "unsafe" : "safe", findings, best_read * 1e3,
               (best_scan - best_read) * 1e3);
    }
    amn_ctx_free(ctx);
    return 0;
}
