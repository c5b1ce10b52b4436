/* fuzz_common.h — what every fuzz target shares: the plugin context, one
 * buffer run through the whole public pipeline, and the deterministic driver
 * that replaces libFuzzer's main in a plain build.
 *
 * Each target defines LLVMFuzzerTestOneInput and, for the plain build,
 * calls fuzz_driver_main() from its main(). Header-only on purpose: every
 * target is one translation unit. */
#ifndef AMN_FUZZ_COMMON_H
#define AMN_FUZZ_COMMON_H

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amn/amn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static amn_ctx *fuzz_ctx_;

/* Load the plugins before the first input: libFuzzer counts coverage only of
 * modules present when it starts. */
static amn_ctx *fuzz_ctx(void) {
    if (fuzz_ctx_) return fuzz_ctx_;
    const char *dirs[] = {AMN_BINARY_DIR "/lib/amn/plugins"};
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options),
                         .plugin_dirs = dirs,
                         .n_plugin_dirs = 1,
                         .no_env = true,
                         .no_default = true};
    if (amn_ctx_new(&o, &fuzz_ctx_, NULL)) abort();
    /* Listing the plugins loads every one (the registry loads lazily). */
    (void)amn_ctx_plugin_count(fuzz_ctx_);
    return fuzz_ctx_;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_ctx();
    return 0;
}

/* Tight caps keep hostile sizes from exhausting memory while fuzzing. With
 * AMN_FUZZ_DEFAULT_LIMITS set, the defaults the CLI uses apply instead: run a
 * corpus that way under -malloc_limit_mb to find small inputs that make a
 * parser allocate far more than they hold. */
static void fuzz_limits(amn_limits *lim) {
    amn_limits_default(lim);
    if (getenv("AMN_FUZZ_DEFAULT_LIMITS")) return;
    lim->max_alloc = 64u << 20;
    lim->max_header_bytes = 16u << 20;
}

/* Invariants every call keeps on any input; a broken one aborts, as a crash
 * would, so the fuzzers and the smoke runs report it. */
static void fuzz_fail(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "fuzz invariant broken: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
    abort();
}

/* A failure returns the code it recorded in err, with a message. err starts
 * each call poisoned (fuzz_err_reset) so that a stale record cannot pass. */
static void fuzz_err_reset(amn_error *err) {
    err->code = 0x7eadbeef;
    err->msg[0] = '\0';
}

static void fuzz_check_rc(const char *call, int rc, const amn_error *err) {
    if (rc == AMN_OK) return;
    if (err->code != rc)
        fuzz_fail("%s failed with a code other than the one it recorded (%s)", call, err->msg);
    if (!err->msg[0]) fuzz_fail("%s failed without a message%s", call, "");
}

/* Header-only inspect and the full open list the same tensors: names,
 * dtypes and shapes, in the same order. */
static void fuzz_check_same_tensors(const amn_model *in, const amn_model *op) {
    if (amn_model_tensor_count(in) != amn_model_tensor_count(op))
        fuzz_fail("inspect and open disagree on the tensor count (%s format%s)",
                  amn_model_format(op) ? amn_model_format(op) : "?", "");
    for (size_t i = 0; i < amn_model_tensor_count(op); i++) {
        const amn_tensor *a = amn_model_tensor(in, i), *b = amn_model_tensor(op, i);
        if (strcmp(a->name, b->name) != 0)
            fuzz_fail("inspect lists tensor %s where open lists %s", a->name, b->name);
        bool same = a->dtype == b->dtype && a->ndim == b->ndim;
        for (uint32_t k = 0; same && k < a->ndim && k < AMN_MAX_DIMS; k++)
            same = a->shape[k] == b->shape[k];
        if (!same)
            fuzz_fail("inspect and open disagree on the dtype or shape of %s%s", a->name, "");
    }
}

/* One conversion as o says (target, mode, dtype, encoding), written to a
 * scratch file that is removed again. */
static void fuzz_convert_as(const amn_model *m, const amn_plan *p, amn_convert_options o) {
    char out[96];
    snprintf(out, sizeof out, "/tmp/amn-fuzz-%d.%s", (int)getpid(),
             o.target ? o.target : "safetensors");
    o.struct_size = sizeof(amn_convert_options);
    o.output = out;
    o.overwrite = true;
    o.threads = 1;
    o.no_sync = true;
    amn_error err;
    fuzz_err_reset(&err);
    int rc = amn_convert(fuzz_ctx(), m, p, &o, NULL, &err);
    fuzz_check_rc("amn_convert", rc, &err);
    if (rc == AMN_OK) unlink(out);
}

static void fuzz_convert(const amn_model *m, const amn_plan *p, const char *target) {
    fuzz_convert_as(m, p, (amn_convert_options){.mode = AMN_MODE_CONVERT, .target = target});
}

/* The plan of a model that opened, checked (NULL when planning failed). */
static amn_plan *fuzz_plan_new(amn_ctx *ctx, const amn_model *m) {
    amn_error err;
    fuzz_err_reset(&err);
    amn_plan *p = NULL;
    int rc = amn_plan_new(ctx, m, &p, &err);
    fuzz_check_rc("amn_plan_new", rc, &err);
    return rc == AMN_OK ? p : NULL;
}

/* Planning a model that opened: checked, then freed. */
static void fuzz_plan(amn_ctx *ctx, const amn_model *m, bool convert) {
    amn_plan *p = fuzz_plan_new(ctx, m);
    if (!p) return;
    if (convert && amn_model_total_bytes(m) < (4u << 20)) {
        fuzz_convert(m, p, "safetensors");
        const char *fmt = amn_model_format(m);
        if (fmt && strcmp(fmt, "gguf") == 0 && amn_ctx_find_format(ctx, "gguf"))
            fuzz_convert(m, p, "gguf");
    }
    amn_plan_free(p);
}

/* path (in a scratch folder) holds exactly data. */
static inline void fuzz_write_file(const char *path, const uint8_t *data, size_t size) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size)) abort();
    close(fd);
}

/* amn_open of a path under the fuzzing limits, checked; NULL when it failed. */
static inline amn_model *fuzz_open_path(amn_ctx *ctx, const char *path) {
    amn_limits lim;
    fuzz_limits(&lim);
    amn_error err;
    fuzz_err_reset(&err);
    amn_model *m = NULL;
    int rc = amn_open(ctx, path, NULL, &lim, &m, &err);
    fuzz_check_rc("amn_open", rc, &err);
    return rc == AMN_OK ? m : NULL;
}

/* A scratch folder for the run (a target that writes files into one),
 * removed with its contents at exit. */
static char fuzz_dir_[64];

static inline int fuzz_rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)ftw;
    return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static inline void fuzz_remove_dir(void) {
    if (fuzz_dir_[0]) nftw(fuzz_dir_, fuzz_rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static inline const char *fuzz_folder(const char *prefix) {
    if (fuzz_dir_[0]) return fuzz_dir_;
    snprintf(fuzz_dir_, sizeof fuzz_dir_, "/tmp/%s.XXXXXX", prefix);
    if (!mkdtemp(fuzz_dir_)) abort();
    atexit(fuzz_remove_dir);
    return fuzz_dir_;
}

/* name in folder `dir` holds data (NULL: the file is absent). */
static inline void fuzz_put(const char *dir, const char *name, const uint8_t *data, size_t size) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (data)
        fuzz_write_file(path, data, size);
    else
        unlink(path);
}

static inline uint32_t fuzz_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Probe + header-only inspect over a memory source, then the mapped open
 * (through a memfd), planning, and for small models whole conversions: to
 * safetensors always, and to GGUF when the input was GGUF (metadata carries
 * over). `from` forces a format (NULL: probe). Every failing call must
 * return the code it recorded, with a message, and when both inspect and
 * open succeed they must list the same tensors. */
static void fuzz_pipeline(const uint8_t *data, size_t size, const char *from) {
    amn_ctx *ctx = fuzz_ctx();
    amn_limits lim;
    fuzz_limits(&lim);
    /* Both reads get the same name (a lone .npy names its tensor after it). */
    int fd = memfd_create("amn-fuzz", MFD_CLOEXEC);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    amn_error err;
    amn_source src;
    amn_source_memory(&src, data, size, path);
    amn_model *inspected = NULL, *m = NULL;
    fuzz_err_reset(&err);
    int rc = amn_inspect_source(ctx, &src, NULL, from, &lim, &inspected, &err);
    fuzz_check_rc("amn_inspect_source", rc, &err);
    if (rc == AMN_OK) fuzz_plan(ctx, inspected, false);
    if (fd >= 0 && write(fd, data, size) == (ssize_t)size) {
        fuzz_err_reset(&err);
        rc = amn_open(ctx, path, from, &lim, &m, &err);
        fuzz_check_rc("amn_open", rc, &err);
        if (rc == AMN_OK) {
            if (inspected) fuzz_check_same_tensors(inspected, m);
            fuzz_plan(ctx, m, true);
            amn_model_free(m);
        }
    }
    if (fd >= 0) close(fd);
    amn_model_free(inspected);
}

#ifndef AMN_LIBFUZZER
static uint32_t fuzz_rng(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

/* Flip bits, overwrite bytes with boundary values, truncate, duplicate. */
static size_t fuzz_mutate(uint8_t *buf, size_t size, size_t cap, uint64_t *s) {
    int rounds = 1 + fuzz_rng(s) % 4;
    for (int r = 0; r < rounds && size; r++) {
        size_t at = fuzz_rng(s) % size;
        switch (fuzz_rng(s) % 6) {
        case 0:
            buf[at] ^= (uint8_t)(1u << (fuzz_rng(s) % 8));
            break;
        case 1:
            buf[at] = (uint8_t[]){0, 0xff, 0x7f, 0x80, '{', '"', '9', 0x01}[fuzz_rng(s) % 8];
            break;
        case 2:
            size = at + 1;
            break;
        case 3:
            if (size + 8 <= cap) {
                memmove(buf + at + 8, buf + at, size - at);
                size += 8;
            }
            break;
        case 4: { /* a large little-endian number over 8 bytes */
            uint64_t v = (uint64_t)fuzz_rng(s) << 32 | fuzz_rng(s);
            size_t n = size - at < 8 ? size - at : 8;
            memcpy(buf + at, &v, n);
            break;
        }
        default:
            if (at + 4 <= size) memset(buf + at, 0xff, 4);
        }
    }
    return size;
}

/* Hand the target an allocation of exactly the input's size, as libFuzzer
 * does, so that ASan sees a read past its end. */
static void fuzz_run_exact(const uint8_t *data, size_t n) {
    uint8_t *p = malloc(n ? n : 1);
    if (!p) return;
    if (n) memcpy(p, data, n);
    LLVMFuzzerTestOneInput(p, n);
    free(p);
}

/* Run one seed (orig, n bytes) as it is, then `iterations` mutations of it
 * in buf (cap bytes). */
static void fuzz_seed_buffer(const uint8_t *orig, size_t n, long iterations, uint8_t *buf,
                             size_t cap, uint64_t *rs) {
    fuzz_run_exact(orig, n);
    for (long i = 0; i < iterations; i++) {
        memcpy(buf, orig, n);
        size_t m = fuzz_mutate(buf, n, cap, rs);
        fuzz_run_exact(buf, m);
    }
}

static int fuzz_seed_file(const char *path, long iterations, uint8_t *buf, uint8_t *orig,
                          size_t cap, uint64_t *rs) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(orig, 1, cap / 2, f);
    fclose(f);
    fuzz_seed_buffer(orig, n, iterations, buf, cap, rs);
    return 1;
}

/* fuzz_X [iterations] [seed files or directories...]: a directory stands for
 * every regular file in it (tests/fuzz/regressions). Returns the number of
 * seeds run, -1 on a setup failure. */
static int fuzz_driver_main(int argc, char **argv, long *iterations_out) {
    long iterations = argc > 1 ? atol(argv[1]) : 2000;
    if (iterations_out) *iterations_out = iterations;
    uint64_t seed = 0x5eed;
    size_t cap = 1 << 20;
    uint8_t *buf = malloc(cap), *orig = malloc(cap);
    if (!buf || !orig) {
        free(buf);
        free(orig);
        return -1;
    }
    fuzz_ctx();
    int seeds = 0;
    for (int a = 2; a < argc; a++) {
        struct stat st;
        if (stat(argv[a], &st) != 0) continue;
        if (!S_ISDIR(st.st_mode)) {
            seeds += fuzz_seed_file(argv[a], iterations, buf, orig, cap, &seed);
            continue;
        }
        struct dirent **names;
        int k = scandir(argv[a], &names, NULL, alphasort);
        for (int i = 0; i < k; i++) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", argv[a], names[i]->d_name);
            if (names[i]->d_name[0] != '.' && stat(p, &st) == 0 && S_ISREG(st.st_mode))
                seeds += fuzz_seed_file(p, iterations, buf, orig, cap, &seed);
            free(names[i]);
        }
        if (k >= 0) free(names);
    }
    free(buf);
    free(orig);
    return seeds;
}

/* ---- targets whose input packs a model folder (fuzz_model, fuzz_hf) ---- */

/* The whole file appended to *buf (grown); false when it cannot be read. */
static inline bool fuzz_slurp(const char *path, uint8_t **buf, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    uint8_t chunk[1 << 14];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        uint8_t *g = realloc(*buf, *len + n);
        if (!g) abort();
        memcpy(g + *len, chunk, n);
        *buf = g, *len += n;
    }
    fclose(f);
    return true;
}

/* The packed seed as it is, then `iterations` mutations of its first
 * `span` bytes (the rest kept as it is), byte how_at of each set to
 * i * how_step first: every mode of the target in turn. */
static inline void fuzz_run_head_mutations(const uint8_t *orig, size_t n, size_t span,
                                           size_t how_at, unsigned how_step, long iterations,
                                           uint64_t *rs) {
    fuzz_run_exact(orig, n);
    const size_t cap = 2 * n + 64;
    uint8_t *buf = malloc(cap);
    if (!buf) abort();
    for (long i = 0; i < iterations; i++) {
        memcpy(buf, orig, span);
        if (how_at < span) buf[how_at] = (uint8_t)((unsigned long)i * how_step);
        size_t m = fuzz_mutate(buf, span, span + 64, rs);
        memcpy(buf + m, orig + span, n - span);
        fuzz_run_exact(buf, m + (n - span));
    }
    free(buf);
}

typedef struct fuzz_packer {
    const char *name; /* "model", "hf": the summary line's */
    /* The packed input of a model folder, or NULL when dir is not one. */
    uint8_t *(*pack)(const char *dir, size_t *size);
    /* Optional: a file packed by the target itself (true), else it is read
     * as a packed input. */
    bool (*pack_file)(const char *path, uint8_t **buf, size_t *size);
    /* The seed as it is, then `iterations` mutations of it. */
    void (*run)(const uint8_t *b, size_t n, long iterations, uint64_t *rs);
} fuzz_packer;

static inline int fuzz_pack_dir(const fuzz_packer *k, const char *dir, long iterations,
                                uint64_t *rs, const char *pack_to);

/* A model folder, a folder of them, or a file (packed input, or one the
 * target packs). Returns the number of seeds run or written. */
static inline int fuzz_pack_path(const fuzz_packer *k, const char *path, long iterations,
                                 uint64_t *rs, const char *pack_to) {
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    size_t n = 0;
    uint8_t *b = NULL;
    if (S_ISDIR(st.st_mode)) {
        if (!(b = k->pack(path, &n))) return fuzz_pack_dir(k, path, iterations, rs, pack_to);
    } else if (!(k->pack_file && k->pack_file(path, &b, &n)) &&
               (!fuzz_slurp(path, &b, &n) || (!b && !(b = malloc(1))))) {
        free(b);
        return 0;
    }
    if (pack_to) {
        /* Named parent-leaf: leaves repeat across families (bad_orphan). */
        char out[4096], name[512];
        snprintf(name, sizeof name, "%s", path);
        char *leaf = strrchr(name, '/');
        if (leaf) {
            *leaf = '\0';
            char *parent = strrchr(name, '/');
            snprintf(out, sizeof out, "%s/%s-%s", pack_to, parent ? parent + 1 : name, leaf + 1);
        } else {
            snprintf(out, sizeof out, "%s/%s", pack_to, name);
        }
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(b, 1, n, f) != n) abort();
        fclose(f);
    } else {
        k->run(b, n, iterations, rs);
    }
    free(b);
    return 1;
}

static inline int fuzz_pack_dir(const fuzz_packer *k, const char *dir, long iterations,
                                uint64_t *rs, const char *pack_to) {
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort), seeds = 0;
    for (int i = 0; i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]->d_name);
        struct stat st;
        if (names[i]->d_name[0] != '.' && stat(p, &st) == 0 && S_ISDIR(st.st_mode))
            seeds += fuzz_pack_path(k, p, iterations, rs, pack_to);
        free(names[i]);
    }
    if (n >= 0) free(names);
    return seeds;
}

/* fuzz_X [iterations] [model folders, folders of them, files...], or
 * fuzz_X --pack OUTDIR FOLDER...: each packed into OUTDIR (a libFuzzer
 * corpus). The plain build's main. */
static inline int fuzz_packer_main(const fuzz_packer *k, int argc, char **argv,
                                   long default_iterations) {
    const bool packing = argc > 2 && strcmp(argv[1], "--pack") == 0;
    const long iterations = packing ? 0 : argc > 1 ? atol(argv[1]) : default_iterations;
    uint64_t rs = 0x5eed;
    int seeds = 0;
    if (!packing) fuzz_ctx();
    for (int a = 2 + packing; a < argc; a++)
        seeds += fuzz_pack_path(k, argv[a], iterations, &rs, packing ? argv[2] : NULL);
    printf("fuzz %s: %d folders %s\n", k->name, seeds,
           packing ? "packed" : "x mutations: no crash");
    if (!packing) amn_ctx_free(fuzz_ctx());
    return seeds ? 0 : 1;
}
#endif

#endif
