/* Model folders out (private to the CLI): a model written as a folder that
 * transformers loads, the way save_pretrained lays it out: safetensors shards
 * of at most --shard-size with their index, config.json edited for the
 * result, every other file of the input folder copied unchanged; written
 * under a temporary name beside the target and renamed into place whole. */
#ifndef AMN_CLI_FOLDER_H
#define AMN_CLI_FOLDER_H

#include <stdbool.h>
#include <stdint.h>

#include "amn/kit/model_dir.h"
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
    const char *in_path; /* the input file or folder (its identity goes in the manifest) */
    /* --resume: adopt a leftover temporary folder whose manifest matches
     * (folder_resume.c), keep its verified shards; a failure or a signal
     * then keeps the temporary folder for the next --resume. */
    bool resume;
    /* --dedup-tied: no lm_head.weight when it holds the input embeddings'
     * bytes and config.json has "tie_word_embeddings": true. */
    bool dedup_tied;
    /* The encoder's config() is the folder's other files, a JSON object of
     * file name -> content (amn-hf's hfdir targets: a GGUF made a folder). */
    bool side_files;
} cli_folder_req;

typedef struct cli_folder_result {
    amn_convert_stats st;  /* summed over the shards */
    size_t shards, copied; /* shards written, other files copied */
    size_t total_shards;   /* shards of the whole folder */
    bool config;           /* config.json written */
    size_t resumed;        /* shards kept from an interrupted run */
    char tied[128];        /* the embeddings lm_head.weight was dropped for, or "" */
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
/* folder_side.c: the encoder's folder files (cli_folder_req.side_files)
 * into dir; and `--to hf` (a GGUF to a folder; -1 when not asked). */
int cli_folder_side_files(const char *dir, const char *json, bool sync, cli_folder_result *res,
                          amn_error *err);
int cli_convert_to_hf(const amn_ctx *ctx, const cli_args *a);
/* Async-signal-safe: remove the temporary folder being written. */
void cli_folder_on_signal(void);

/* ---- folder_resume.c ---- */
#define CLI_MANIFEST_NAME ".amn-resume.json"
typedef struct cli_manifest_shard {
    char name[64];
    uint64_t size;
    uint64_t xxh64; /* XXH64 (seed 0) of the whole file */
} cli_manifest_shard;
typedef struct cli_manifest {
    char *identity; /* what the output depends on, as cli_resume_identity writes it */
    cli_manifest_shard *shards;
    size_t n;
} cli_manifest;
/* Inputs (names, sizes, mtimes), byte-changing options and the plan digest
 * as text; malloc'd, NULL when out of memory. */
char *cli_resume_identity(const cli_folder_req *rq, uint64_t plan_digest);
/* dir/.amn-resume.json written atomically (temporary file, fsync, rename). */
int cli_manifest_write(const char *dir, const cli_manifest *mf, bool sync, amn_error *err);
/* Our manifest from dir; false (mf empty) for anything else. */
bool cli_manifest_read(const char *dir, cli_manifest *mf);
int cli_manifest_add(cli_manifest *mf, const char *name, uint64_t size, uint64_t hash,
                     amn_error *err);
void cli_manifest_free(cli_manifest *mf);
/* True when dir/name is a regular file of the size and XXH64 mf records. */
bool cli_manifest_shard_ok(const cli_manifest *mf, const char *dir, const char *name);
int cli_file_hash(const char *path, uint64_t *size, uint64_t *hash, amn_error *err);
/* An exclusive flock on a folder (held while a run writes it): its fd, or -1
 * when another process holds it. */
int cli_dir_lock(const char *dir);
/* The leftover temporary folders ".<base>.amn-XXXXXX" in parent holding a
 * manifest and not locked by a running amn. Without resume, a note for each.
 * With resume: the first whose identity matches is adopted (1: dir, its lock
 * and manifest returned), every other one removed with a note; 0: none. */
int cli_resume_find(const char *parent, const char *base, const char *identity, bool resume,
                    char *dir, size_t size, int *lock_fd, cli_manifest *mf);

/* ---- folder_tied.c ---- */
#define CLI_TIED_HEAD "lm_head.weight"
/* --dedup-tied: true when in_dir's config.json has "tie_word_embeddings":
 * true and the input's lm_head.weight has the dtype, shape and bytes of its
 * input embeddings (their name into name); else a note on stderr saying why
 * it is kept. */
bool cli_tied_embeddings(const amn_model *m, const char *in_dir, char *name, size_t size);

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
/* A model from an archive (amn_model_archive): its packed folder's other
 * files extracted into a new temporary folder (amn_kit_model_dir_open), its
 * path in *in_dir for cli_folder_req.in_dir, removed by
 * cli_archive_side_done, or by a handled signal (cli_side_on_signal); else
 * *in_dir NULL and nothing made. */
int cli_archive_side_dir(const amn_model *m, amn_kit_model_dir *d, const char **in_dir,
                         amn_error *err);
/* path's folder into dir ("." when none) and its last component in *base. */
void cli_split_path(const char *path, char *dir, size_t dsize, const char **base);
/* fsync a folder (its entries). */
int cli_sync_dir(const char *dir, amn_error *err);
/* A new temporary folder ".<base>.amn-XXXXXX" beside target, its path in dir. */
int cli_make_tmp_dir(const char *target, char *dir, size_t size, amn_error *err);
void cli_archive_side_done(amn_kit_model_dir *d);
void cli_side_on_signal(void); /* async-signal-safe */

#endif
