/* Private to the amn command-line tool. */
#ifndef AMN_CLI_H
#define AMN_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "amn/amn.h"

/* Exit codes, one per error class (documented in README.md). */
enum {
    EXIT_OK = 0,
    EXIT_PARSE = 1,
    EXIT_USAGE = 2, /* bad command line or invalid argument */
    EXIT_UNSUPPORTED = 3,
    EXIT_LIMIT = 4,
    EXIT_DISALLOWED = 5,
    EXIT_IO = 6,
    EXIT_NOMEM = 7,
};

typedef struct cli_args {
    const char *command;
    const char *input;
    const char *output;
    const char *to;        /* remember: dtype; convert: target */
    const char *out_dtype; /* convert */
    const char *from;
    bool json, force, full;
    unsigned threads;
    const char *kv[64];
    size_t n_kv;
    const char *metadata_file;
    const char *keep[64]; /* forget: --keep GLOB */
    size_t n_keep;
    const char *block_size; /* forget: --block-size N */
} cli_args;

int cli_exit_code(int amn_code);
int cli_fail(const amn_error *err);

/* "1.7 KB", "4.35 GB": decimal units like the reference tool. */
const char *cli_size(uint64_t bytes, char *buf, size_t size);

/* Default output path for an input: <dir>/<stem>-<tag>.<ext>, the stem
 * stripped of a quantization suffix; for a resolved input (ollama:m:tag), in
 * the current directory. Returns false if it does not fit. */
bool cli_default_output(const char *input, bool resolved, const char *tag, const char *ext,
                        char *buf, size_t size);

/* Resolve "ollama:..." style inputs through the plugins; path gets the file to
 * open (the input itself when nothing resolves it). */
int cli_resolve_input(const amn_ctx *ctx, const char *input, char *path, size_t size,
                      bool *resolved);

int cmd_parse(const amn_ctx *ctx, const cli_args *a, bool header_only);
int cmd_remember(const amn_ctx *ctx, const cli_args *a, bool convert);
int cmd_plugins(const amn_ctx *ctx, const cli_args *a);
int cmd_forget(const amn_ctx *ctx, const cli_args *a);
/* True when a loaded scheme encodes `to` (convert routes it to forget). */
bool cli_is_encode_target(const amn_ctx *ctx, const char *to);

#endif
