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
    const char *via;       /* convert DIR --to gguf-TYPE: --via f32|f16|bf16 */
    const char *then;      /* a GGUF file type encoded from `to`'s output (encode_then) */
    const char *from;
    bool json, force, full;
    bool quiet, progress, no_sync; /* --quiet, --progress, --no-sync */
    unsigned threads;
    /* Writer options "KEY=VALUE" (--opt; --gguf-kv V is kv=V, --gguf-metadata
     * F is metadata=F), their text in opt_text (cli_arg_text). */
    const char *opts[64];
    size_t n_opts;
    char *opt_text;
    size_t opt_used;
    amn_limits limits; /* --max-*, when limits_set */
    bool limits_set;
    const char *keep[64]; /* forget: --keep GLOB */
    size_t n_keep;
    const char *block_size;        /* forget: --block-size N */
    const char *shard_size;        /* model folders: --shard-size SIZE */
    const char *only_shards;       /* --only-shards K[-L] */
    bool write_index;              /* --write-index */
    bool resume, dedup_tied;       /* --resume, --dedup-tied */
    const char *split_max_tensors; /* convert --to gguf: --split-max-tensors N */
    const char *split_max_size;    /* convert --to gguf: --split-max-size N(M|G) */
    /* Every FILE argument, input first; more than one only for inspect
     * (multi_input). The array belongs to main. */
    const char **inputs;
    size_t n_inputs;
    bool multi_input;
    /* forget: llama-quantize's options as encoder parameters "KEY=VALUE"
     * (cli_encode_option), their text in enc_text (cli_arg_text). */
    const char *enc_params[64];
    size_t n_enc_params;
    char *enc_text;
    size_t enc_used;
} cli_args;

/* Room for need more bytes of option text in *text (cap bytes, allocated at
 * the first option and freed by main), *used advanced past them; NULL when
 * they do not fit or memory is short. The text is not part of cli_args
 * itself: zeroing 24 KiB of stack at every start cost six page faults
 * (10-13 us each on a VM), a tenth of a bare `amn inspect`'s. */
#define CLI_OPT_TEXT_MAX 16384
#define CLI_ENC_TEXT_MAX 8192
char *cli_arg_text(char **text, size_t *used, size_t cap, size_t need);

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

/* Bad command line: "amn CMD: message" (or a JSON error under --json);
 * returns EXIT_USAGE. */
int cli_usage_fail(const char *command, const char *message);

/* ---- --json (json_out.c) ---- */
#include <json-c/json.h>
void cli_json_set(bool on);
bool cli_json_on(void);
/* A JSON string of s, bytes that are not UTF-8 replaced by U+FFFD; NULL -> NULL (null). */
json_object *cli_json_str(const char *s);
json_object *cli_json_strn(const char *s, size_t n); /* may hold NULs (\u0000) */
/* Print a document on stdout and release it. */
void cli_json_print(json_object *o);
/* {"error": {"class", "exit_code", "message"}} on stderr; returns exit_code. */
const char *cli_exit_class(int exit_code); /* "parse", "io", ... of an exit code */
int cli_json_error(int exit_code, const char *message);

/* ---- progress (progress.c) ---- */
enum { CLI_PROGRESS_OFF, CLI_PROGRESS_TTY, CLI_PROGRESS_LINES };
typedef struct cli_progress {
    int mode;
    double interval, start, last;
} cli_progress;
/* Off with --quiet; lines with --progress; else redrawn when stderr is a tty. */
void cli_progress_begin(cli_progress *p, const cli_args *a);
void cli_progress_update(void *user, const amn_progress *info); /* an amn_progress_fn */
void cli_progress_end(cli_progress *p);                         /* clear the line */
void cli_progress_on_signal(void);                              /* async-signal-safe */

/* ---- signals (signals.c) ---- */
/* SIGINT/TERM/HUP/PIPE: remove pending temporary outputs, die by the signal. */
void cli_signals_install(void);
/* The input a conversion reads, named by the SIGBUS message. */
void cli_signals_input(const char *path);
/* Test hook (AMN_TEST_TRUNCATE_AFTER, signals.c): a progress callback that
 * truncates the input mid-conversion, then calls fn. */
typedef struct cli_truncate_hook {
    const char *path;
    uint64_t after, to;
    bool raise_bus, done;
    amn_progress_fn fn;
    void *user;
} cli_truncate_hook;
bool cli_truncate_hook_init(cli_truncate_hook *h, const char *path, amn_progress_fn fn, void *user);
void cli_truncate_hook_progress(void *user, const amn_progress *info);

/* ---- limits (limits.c) ---- */
/* 0: opt is not a limit; 1: consumed `value`; < 0: -(exit code), reported. */
int cli_limit_option(cli_args *a, const char *opt, const char *value);
bool cli_parse_size(const char *s, uint64_t *out);
/* The limits to pass to amn_open / amn_inspect (NULL: the defaults). */
const amn_limits *cli_limits(const cli_args *a);
#define CLI_LIMITS_HELP                                                                            \
    "limits (given explicitly they tighten or raise the default; sizes as 64M or 2G):\n"           \
    "  --max-alloc SIZE   largest single allocation (header, string, inflated member) [64G]\n"     \
    "  --max-total SIZE   sum of a parse's allocations [64G]\n"                                    \
    "  --max-items N      tensors, archive members, key/values, array elements [1048576]\n"        \
    "  --max-ratio N      DEFLATE expansion of a member over 256M, uncompressed:compressed;\n"     \
    "                     0: off [1000]\n"                                                         \
    "  --max-header SIZE  header / central directory / pickle size [100M]\n"                       \
    "  --max-depth N      nesting of JSON, pickles, GGUF arrays (tighten only) [64]\n"

int cmd_parse(const amn_ctx *ctx, const cli_args *a, bool header_only);
/* One file's parse / inspect report (report.c): printed as text, or, when doc
 * is not NULL, returned as its JSON document. An amn code; err on failure. */
int cli_report(const amn_ctx *ctx, const cli_args *a, const char *input, bool header_only,
               json_object **doc, amn_error *err);
int cmd_inspect(const amn_ctx *ctx, const cli_args *a); /* inspect FILE... (inspect_cmd.c) */
int cmd_remember(const amn_ctx *ctx, const cli_args *a, bool convert);
int cmd_plugins(const amn_ctx *ctx, const cli_args *a);
int cmd_scan(const amn_ctx *ctx, int argc, char **argv);
int cmd_forget(const amn_ctx *ctx, const cli_args *a);

/* An input opened and planned, for the commands that stream it to a new
 * file (remember, convert, forget; convert_cmd.c). */
typedef struct cli_input {
    char path[4096]; /* the file opened (a resolver's answer, or the input) */
    bool resolved;   /* a resolver named it (ollama:...) */
    double t0;       /* cli_now() when opening began */
    amn_model *m;
    amn_plan *p;
} cli_input;
/* An exit code; on failure the error is reported and nothing stays open. */
int cli_input_open(const amn_ctx *ctx, const cli_args *a, const amn_limits *limits, cli_input *in);
void cli_input_free(cli_input *in);
double cli_now(void); /* monotonic seconds */
/* forget's llama-quantize options (--pure, --tensor-type P=T, ...): 0 when
 * opt is not one, else how many arguments it took (1 or 2); < 0: -(exit
 * code), reported. */
int cli_encode_option(cli_args *a, const char *opt, const char *value);
/* forget --dry-run (a dry_run=1 encoder parameter): print the sizes
 * llama-quantize's --dry-run prints for o, write nothing; an exit code. */
bool cli_dry_run(const cli_args *a);
/* forget --keep-split (a keep_split=1 encoder parameter). */
bool cli_keep_split(const cli_args *a);
int cli_forget_dry_run(const amn_ctx *ctx, const cli_args *a, const cli_input *in,
                       const amn_convert_options *o);
/* True when a loaded scheme encodes `to`. */
bool cli_is_encode_target(const amn_ctx *ctx, const char *to);
/* The container format an encode target writes ("gguf", "safetensors"). */
const char *cli_encode_container(const amn_ctx *ctx, const char *to);
/* convert --to an encode target (bnb-nf4, gguf-Q4_K_M) runs forget: its
 * exit code, or -1 when `to` is not one. */
int cli_convert_encode(const amn_ctx *ctx, const cli_args *a);

#endif
