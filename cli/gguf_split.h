/* Split GGUF out (private to the CLI, gguf_split_out.c): a GGUF written as
 * NAME-0000K-of-0000N.gguf shards with llama.cpp's split.* keys. */
#ifndef AMN_CLI_GGUF_SPLIT_H
#define AMN_CLI_GGUF_SPLIT_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"

typedef struct cli_gguf_split_req {
    /* target "gguf", mode, encode, threads...; output, select and the split
     * option are set per shard. */
    amn_convert_options base;
    const char *prefix;   /* NAME of NAME-0000K-of-0000N.gguf */
    bool keep_split;      /* one shard per input shard (llama-quantize --keep-split) */
    uint64_t max_tensors; /* else llama-gguf-split's limits: tensors per shard, */
    uint64_t max_bytes;   /* or bytes per shard (0: by tensors) */
} cli_gguf_split_req;

typedef struct cli_gguf_split_result {
    amn_convert_stats st; /* summed over the shards */
    uint32_t shards;
} cli_gguf_split_result;

/* Write every shard, whole or not at all (see gguf_split_out.c for the
 * order of the renames); an AMN_E_* code with err set. */
int cli_gguf_split_run(const amn_ctx *ctx, const amn_model *m, const amn_plan *ap,
                       const cli_gguf_split_req *rq, cli_gguf_split_result *res, amn_error *err);
/* -o OUT's NAME: OUT without -0000K-of-0000N.gguf, else without .gguf;
 * false when nothing is left or it does not fit. */
bool cli_gguf_split_prefix(const char *out, char *buf, size_t size);
/* --split-max-size N(M|G) as llama-gguf-split reads it (decimal megabytes
 * or gigabytes, N > 0). */
bool cli_gguf_split_size(const char *s, uint64_t *out);
/* Async-signal-safe: remove the shards being written. */
void cli_gguf_split_on_signal(void);

#endif
