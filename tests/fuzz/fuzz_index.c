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

#include "fuzz_common.h"

static void copy_in(const char *src, const char *name) {
    char from[4096], to[128];
    snprintf(from, sizeof from, "%s/%s", AMN_SOURCE_DIR, src);
    snprintf(to, sizeof to, "%s/%s", fuzz_dir_, name);
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
    if (fuzz_dir_[0]) return fuzz_dir_;
    fuzz_folder("amn-fuzz-index");
    copy_in("fixtures/pth/dtypes.pth", "pytorch_model-00001-of-00002.bin");
    copy_in("fixtures/pth/deflated.pth", "pytorch_model-00002-of-00002.bin");
    copy_in("fixtures/example/tiny-f32.safetensors", "model-00001-of-00002.safetensors");
    copy_in("fixtures/example/tiny-fp8.safetensors", "model-00002-of-00002.safetensors");
    char link[128];
    snprintf(link, sizeof link, "%s/out.bin", fuzz_dir_);
    if (symlink("/etc/hostname", link) != 0) abort();
    snprintf(link, sizeof link, "%s/out.safetensors", fuzz_dir_);
    if (symlink("../x.safetensors", link) != 0) abort();
    return fuzz_dir_;
}

static void open_index(const char *name, const uint8_t *data, size_t size) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", folder(), name);
    fuzz_write_file(path, data, size);
    amn_ctx *ctx = fuzz_ctx();
    amn_model *m = fuzz_open_path(ctx, path);
    if (m) {
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
