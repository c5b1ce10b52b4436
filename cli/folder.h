/* Model folders out (private to the CLI): a model written as a folder that
 * transformers loads, the way save_pretrained lays it out: safetensors shards
 * of at most --shard-size with their index, config.json edited for the
 * result, every other file of the input folder copied unchanged; written
 * under a temporary name beside the target and renamed into place whole. */
#ifndef AMN_CLI_FOLDER_H
#define AMN_CLI_FOLDER_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"

/* transformers' default max_shard_size, "5GB". */
#define CLI_SHARD_SIZE_DEFAULT 5000000000ull

typedef struct cli_folder_req {
    /* mode, target, out_dtype, threads, encode, keep...; output, select and
     * the progress callback are set per shard. */
    amn_convert_options base;
    amn_progress_fn progress; /* the whole job's, or NULL */
    void *progress_user;
    const char *out_dir;     /* the folder to create */
    const char *in_dir;      /* the input's model folder, files copied from it; or NULL */
    const char *torch_dtype; /* config.json's torch_dtype (and dtype) after remember, or NULL */
    bool drop_quant;     /* remember / convert: no quantization_config, no quantize_config.json */
    bool forget;         /* config.json gets the encoder's quantization_config */
    uint64_t shard_size; /* 0: one file */
    /* Scale-out (--only-shards K[-L], --write-index): shards only_first to
     * only_last (1-based; 0: none) and, with write_index, the index,
     * config.json and the copies go straight into out_dir, each file
     * appearing whole; out_dir is made when missing and may exist. */
    size_t only_first, only_last;
    bool write_index;
} cli_folder_req;

typedef struct cli_folder_result {
    amn_convert_stats st;  /* summed over the shards */
    size_t shards, copied; /* shards written, other files copied */
    size_t total_shards;   /* shards of the whole folder */
    bool config;           /* config.json written */
} cli_folder_result;

/* True when the command writes a model folder: -o names a folder (ends with
 * '/' or is a directory), or the input is a folder or a weight index and -o,
 * if given, is not a file name ending in .safetensors. */
bool cli_folder_wanted(const cli_args *a, const char *input_path, bool resolved);
/* The model folder an input sits in when it is a folder or an index file
 * (files are copied from it), else NULL. */
const char *cli_folder_input_dir(const char *input_path, bool resolved, char *buf, size_t size);
/* The output folder: -o without its trailing '/', or <input>-<tag> beside
 * the input folder (its quantization suffix dropped). */
bool cli_folder_output(const cli_args *a, bool resolved, const char *tag, char *buf, size_t size);
/* --shard-size: bytes, or a number with KB/MB/GB/TB (decimal) or
 * KiB/MiB/GiB/TiB, as transformers and huggingface_hub parse it; 0 = one file. */
bool cli_parse_shard_size(const char *s, uint64_t *out);
/* --only-shards K or K-L (1 <= K <= L). */
bool cli_parse_shard_range(const char *s, size_t *first, size_t *last);

/* --shard-size, --only-shards, --write-index from the command line into fr;
 * a message for a bad value (then fr is unchanged), or NULL. */
const char *cli_folder_args(const cli_args *a, cli_folder_req *fr);

/* Write the folder; an AMN_E_* code with err set. */
int cli_folder_run(const amn_ctx *ctx, const amn_model *m, const amn_plan *p,
                   const cli_folder_req *rq, cli_folder_result *res, amn_error *err);
/* Async-signal-safe: remove the temporary folder being written. */
void cli_folder_on_signal(void);

/* ---- folder_files.c ---- */
/* config.json at src edited into dst: with drop_quant its quantization_config
 * removed, with quant_config (JSON text) that one set, with torch_dtype that
 * value in torch_dtype (added when neither it nor dtype is there) and in
 * dtype where present. Key order and every other key kept. */
int cli_config_rewrite(const char *src, const char *dst, const char *quant_config,
                       const char *torch_dtype, bool drop_quant, bool sync, amn_error *err);
/* Copy every regular file of in_dir that is not a weight file, a weight
 * index, config.json (written apart) or, with drop_quant, a quantization
 * config, byte for byte into out_dir. */
int cli_folder_copy_files(const char *in_dir, const char *out_dir, bool drop_quant, bool sync,
                          size_t *copied, amn_error *err);
/* Remove a tree (no symlink followed); best effort. */
void cli_remove_tree(const char *path);

#endif
