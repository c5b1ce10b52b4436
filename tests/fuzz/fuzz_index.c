/* Fuzz target for weight indexes (pytorch_model.bin.index.json,
 * model.safetensors.index.json): the input is the index text, written under
 * each of the two names into a folder that holds two real shards of each
 * kind (small fixtures: fixtures/pth/dtypes.pth and deflated.pth as
 * pytorch_model-0000K-of-00002.bin, fixtures/example/tiny-*.safetensors as
 * model-0000K-of-00002.safetensors) and shard names that are symlinks out of
 * the folder; each index is opened (amn_open of its path: every shard
 * checked, then read) and, when it opens, planned and converted.
 *
 *   fuzz_index [iterations] [index files or directories...] */
#include <fcntl.h>
#include <ftw.h>

#include "fuzz_common.h"

static char fuzz_dir[64];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)ftw;
    return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static void remove_dir(void) {
    if (fuzz_dir[0]) nftw(fuzz_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void copy_in(const char *src, const char *name) {
    char from[4096], to[128];
    snprintf(from, sizeof from, "%s/%s", AMN_SOURCE_DIR, src);
    snprintf(to, sizeof to, "%s/%s", fuzz_dir, name);
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    if (!in || !out) {
        fprintf(stderr, "fuzz_index: cannot copy %s to %s\n", from, to);
        abort();
    }
    char buf[1 << 14];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
    fclose(in);
    fclose(out);
}

/* The folder, made once. */
static const char *folder(void) {
    if (fuzz_dir[0]) return fuzz_dir;
    snprintf(fuzz_dir, sizeof fuzz_dir, "/tmp/amn-fuzz-index.XXXXXX");
    if (!mkdtemp(fuzz_dir)) abort();
    atexit(remove_dir);
    copy_in("fixtures/pth/dtypes.pth", "pytorch_model-00001-of-00002.bin");
    copy_in("fixtures/pth/deflated.pth", "pytorch_model-00002-of-00002.bin");
    copy_in("fixtures/example/tiny-f32.safetensors", "model-00001-of-00002.safetensors");
    copy_in("fixtures/example/tiny-fp8.safetensors", "model-00002-of-00002.safetensors");
    char link[128];
    snprintf(link, sizeof link, "%s/out.bin", fuzz_dir);
    if (symlink("/etc/hostname", link) != 0) abort();
    snprintf(link, sizeof link, "%s/out.safetensors", fuzz_dir);
    if (symlink("../x.safetensors", link) != 0) abort();
    return fuzz_dir;
}

static void open_index(const char *name, const uint8_t *data, size_t size) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", folder(), name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size)) abort();
    close(fd);
    amn_ctx *ctx = fuzz_ctx();
    amn_limits lim;
    fuzz_limits(&lim);
    amn_error err;
    fuzz_err_reset(&err);
    amn_model *m = NULL;
    int rc = amn_open(ctx, path, NULL, &lim, &m, &err);
    fuzz_check_rc("amn_open", rc, &err);
    if (rc == AMN_OK) {
        fuzz_plan(ctx, m, true);
        amn_model_free(m);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)fuzz_pipeline; /* shared header; this target opens indexes only */
    open_index("pytorch_model.bin.index.json", data, size);
    open_index("model.safetensors.index.json", data, size);
    return 0;
}

#ifndef AMN_LIBFUZZER
int main(int argc, char **argv) {
    int seeds = fuzz_driver_main(argc, argv, NULL);
    if (seeds < 0) return 1;
    printf("fuzz index: %d seeds: no crash\n", seeds);
    amn_ctx_free(fuzz_ctx());
    return seeds ? 0 : 1;
}
#endif
