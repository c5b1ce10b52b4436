/* Output naming: <stem>-<dtype>.safetensors next to the input. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* Suffixes quantized checkpoints carry in their names, longest first so that
 * "-GPTQ-Int4" wins over "-Int4". */
static const char *const quant_suffixes[] = {
    "-FP8-Dynamic", "-FP8-dynamic", "-fp8-dynamic", "-GPTQ-Int4", "-GPTQ-Int8", "-GPTQ-int4",
    "-GPTQ-int8",   "-gptq-int4",   "-gptq-int8",   "-bnb-4bit",  "-bnb-8bit",  "-bnb-int8",
    "-bnb-nf4",     "-GPTQ",        "-gptq",        "-AWQ",       "-awq",       "-FP8",
    "-fp8",         "-4bit",        "-8bit",        "-int4",      "-int8",      "-Int4",
    "-Int8",        "-nf4",         "-NF4",
};

bool cli_default_output(const char *input, bool resolved, const char *tag, const char *ext,
                        char *buf, size_t size) {
    char path[4096];
    const char *colon = strchr(input, ':');
    if (resolved && colon) {
        /* A resolved name (ollama:llama3.2:1b): output in the current
         * directory, never inside the store it came from. */
        if ((size_t)snprintf(path, sizeof path, "./%s", colon + 1) >= sizeof path) return false;
        for (char *c = path + 2; *c; c++)
            if (*c == ':' || *c == '/') *c = '-';
    } else if ((size_t)snprintf(path, sizeof path, "%s", input) >= sizeof path) {
        return false;
    }
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') path[--n] = '\0';
    char *slash = strrchr(path, '/');
    char *base = slash ? slash + 1 : path;
    const char *dir = slash ? path : ".";
    if (slash) *slash = '\0';
    if (slash == path) dir = "/";
    static const char *const exts[] = {
        ".tar.gz",      ".tar.xz", ".tar.zst", ".tar.bz2", ".tgz",
        ".txz",         ".tzst",   ".tar",     ".zip",     ".safetensors.index.json",
        ".safetensors", ".gguf",   ".pth",     ".pt",      ".bin",
        ".npz",         ".npy",    ".sft"};
    for (size_t i = 0; i < sizeof exts / sizeof *exts; i++) {
        size_t bl = strlen(base), el = strlen(exts[i]);
        if (bl > el && strcmp(base + bl - el, exts[i]) == 0) {
            base[bl - el] = '\0';
            break;
        }
    }
    /* A shard of a split GGUF names the whole model without -0000K-of-0000N. */
    size_t bl = strlen(base);
    unsigned sk, sn;
    char tail[24];
    if (bl > 15 && sscanf(base + bl - 15, "-%5u-of-%5u", &sk, &sn) == 2 &&
        (size_t)snprintf(tail, sizeof tail, "-%05u-of-%05u", sk, sn) == 15 &&
        strcmp(base + bl - 15, tail) == 0)
        base[bl - 15] = '\0';
    for (size_t i = 0; i < sizeof quant_suffixes / sizeof *quant_suffixes; i++) {
        size_t bl = strlen(base), sl = strlen(quant_suffixes[i]);
        if (bl > sl && strcmp(base + bl - sl, quant_suffixes[i]) == 0) {
            base[bl - sl] = '\0';
            break;
        }
    }
    return (size_t)snprintf(buf, size, "%s/%s%s%s.%s", dir, base, *tag ? "-" : "", tag, ext) < size;
}

const char *cli_size(uint64_t bytes, char *buf, size_t size) {
    static const char *const units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
    if (bytes < 1000) {
        snprintf(buf, size, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes;
    int u = 0;
    while (v >= 1000 && u < 5) v /= 1000, u++;
    snprintf(buf, size, v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, units[u]);
    return buf;
}

int cli_resolve_input(const amn_ctx *ctx, const char *input, char *path, size_t size,
                      bool *resolved) {
    amn_error err = {0};
    if (amn_ctx_resolve(ctx, input, path, size, resolved, &err)) return cli_fail(&err);
    if (!*resolved) snprintf(path, size, "%s", input);
    return EXIT_OK;
}
