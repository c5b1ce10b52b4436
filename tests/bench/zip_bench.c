/* zip_bench — in-process timings for the npz / pth plugins (not a test).
 *
 *   zip_bench FILE...
 *
 * For each file: amn_inspect (best of 50) and how many bytes it read through
 * a counting source; amn_open (best of 5); and an in-process `remember` to
 * safetensors (best of 5) against a plain read+write copy of the same bytes
 * measured in the same run. Nothing is fsync'd: page-cache rates, as cp. tests/bench/zip_bench.sh
 * makes the inputs and adds the Python baselines. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "amn/amn.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct counting {
    amn_source inner;
    uint64_t bytes, calls;
} counting;

static int count_read(void *ctx, uint64_t off, void *buf, size_t n, size_t *got) {
    counting *c = ctx;
    int rc = c->inner.read_at(c->inner.ctx, off, buf, n, got);
    c->bytes += *got;
    c->calls++;
    return rc;
}

/* The baseline: copy the file with read/write, as cp does. */
static double copy_seconds(const char *in, const char *out) {
    static char buf[1 << 20];
    double t0 = now();
    int fi = open(in, O_RDONLY), fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fi < 0 || fo < 0) return -1;
    ssize_t k;
    while ((k = read(fi, buf, sizeof buf)) > 0)
        if (write(fo, buf, (size_t)k) != k) return -1;
    close(fi);
    close(fo);
    return now() - t0;
}

static double remember_seconds(amn_ctx *ctx, const char *in, const char *out) {
    double t0 = now();
    amn_error err = {0};
    amn_model *m = NULL;
    amn_plan *plan = NULL;
    if (amn_open(ctx, in, NULL, NULL, &m, &err) != AMN_OK ||
        amn_plan_new(ctx, m, &plan, &err) != AMN_OK) {
        fprintf(stderr, "%s: %s\n", in, err.msg);
        exit(1);
    }
    amn_convert_options o = {.struct_size = sizeof(amn_convert_options),
                             .mode = AMN_MODE_REMEMBER,
                             .output = out,
                             .overwrite = true};
    amn_convert_stats st = {.struct_size = sizeof(amn_convert_stats)};
    if (amn_convert(ctx, m, plan, &o, &st, &err) != AMN_OK) {
        fprintf(stderr, "%s: %s\n", in, err.msg);
        exit(1);
    }
    amn_plan_free(plan);
    amn_model_free(m);
    return now() - t0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: zip_bench FILE...\n");
        return 2;
    }
    amn_ctx *ctx;
    amn_error err = {0};
    if (amn_ctx_new(NULL, &ctx, &err) != AMN_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *path = argv[i];
        struct stat st;
        if (stat(path, &st) != 0) {
            perror(path);
            return 1;
        }
        double best = 1e9;
        size_t tensors = 0;
        for (int r = 0; r < 50; r++) {
            double t0 = now();
            amn_model *m = NULL;
            if (amn_inspect(ctx, path, NULL, NULL, &m, &err) != AMN_OK) {
                fprintf(stderr, "%s: %s\n", path, err.msg);
                return 1;
            }
            double dt = now() - t0;
            tensors = amn_model_tensor_count(m);
            amn_model_free(m);
            if (dt < best) best = dt;
        }
        counting c = {0};
        if (amn_source_file_open(path, &c.inner, &err) != AMN_OK) return 1;
        amn_source src = {.ctx = &c, .size = c.inner.size, .read_at = count_read, .name = path};
        amn_model *m = NULL;
        if (amn_inspect_source(ctx, &src, path, NULL, NULL, &m, &err) != AMN_OK) {
            fprintf(stderr, "%s: %s\n", path, err.msg);
            return 1;
        }
        amn_model_free(m);
        amn_source_file_close(&c.inner);
        printf("%s: %.1f MB, %zu tensors\n", path, (double)st.st_size / 1e6, tensors);
        printf(
            "  inspect      %8.3f ms (best of 50), read %llu bytes in %llu calls (incl. probe)\n",
            best * 1e3, (unsigned long long)c.bytes, (unsigned long long)c.calls);

        double best_open = 1e9;
        for (int r = 0; r < 5; r++) {
            double t0 = now();
            if (amn_open(ctx, path, NULL, NULL, &m, &err) != AMN_OK) return 1;
            double dt = now() - t0;
            amn_model_free(m);
            if (dt < best_open) best_open = dt;
        }
        printf("  open         %8.3f ms (best of 5)\n", best_open * 1e3);

        char out[4096], cp[4096];
        snprintf(out, sizeof out, "%s.bench.safetensors", path);
        snprintf(cp, sizeof cp, "%s.bench.copy", path);
        double best_copy = 1e9, best_rem = 1e9;
        for (int r = 0; r < 5; r++) {
            sync(); /* each run starts with no dirty pages queued */
            double a = copy_seconds(path, cp);
            sync();
            double b = remember_seconds(ctx, path, out);
            if (a < best_copy) best_copy = a;
            if (b < best_rem) best_rem = b;
        }
        unlink(cp);
        unlink(out);
        double mb = (double)st.st_size / 1e6;
        printf("  copy         %8.1f ms  %7.0f MB/s (read+write, same bytes, as cp)\n",
               best_copy * 1e3, mb / best_copy);
        printf("  remember     %8.1f ms  %7.0f MB/s  = %.0f %% of the copy rate\n", best_rem * 1e3,
               mb / best_rem, 100.0 * best_copy / best_rem);
        fflush(stdout);
    }
    amn_ctx_free(ctx);
    return 0;
}
