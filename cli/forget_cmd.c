/* `amn forget` (alias quantize), and `amn convert --to <encode target>`:
 * open, plan, stream every tensor the target's encoder chooses encoded and
 * the rest as remember would write them; report what was quantized and the
 * error it introduced; write config.json's quantization_config beside the
 * output when the input sits in a model folder. */
#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cli.h"
#include "folder.h"
#include "gguf_split.h"

bool cli_is_encode_target(const amn_ctx *ctx, const char *to) {
    return to && amn_ctx_find_encoder(ctx, to) != NULL;
}

/* The container an encode target writes: the format named like the scheme
 * that encodes it when that format has a writer (the "gguf" scheme's file
 * types make GGUF files), else safetensors (bnb). */
const char *cli_encode_container(const amn_ctx *ctx, const char *to) {
    if (strncmp(to, "hf-", 3) == 0) return "gguf"; /* amn-hf: a model folder made a GGUF */
    const amn_scheme *sc = amn_ctx_find_encoder(ctx, to);
    const amn_format *f = sc ? amn_ctx_find_format(ctx, sc->name) : NULL;
    return f && f->writer ? f->name : "safetensors";
}

static bool names_folder(const char *path);

/* A model folder, or one packed as an archive (which opens as the folder):
 * safetensors, or anything beside a config.json. A packed GGUF, npz or pth
 * converts as the file it holds. The archive's headers are read here; one
 * that fails to open takes the folder's route, which reports why. */
static bool folder_input(const amn_ctx *ctx, const char *path) {
    if (names_folder(path)) return true;
    if (!amn_path_is_archive(path)) return false;
    amn_model *m = NULL;
    /* An archive that does not open takes the plain route, which reports
     * the archive's own error rather than a folder route's usage checks. */
    if (amn_inspect(ctx, path, NULL, NULL, &m, NULL) != AMN_OK) return false;
    const uint8_t *data;
    uint64_t size;
    const bool hf = amn_model_archive_file(m, "config.json", &data, &size) ||
                    strcmp(amn_model_format(m), "safetensors") == 0;
    amn_model_free(m);
    return hf;
}

/* A model folder to GGUF: the hf plugin's encoder writes what llama.cpp's
 * convert_hf_to_gguf.py --outtype T writes (T = --out-dtype, f16 by default
 * as there). An exit code, or -1 when the request is not that. */
static int folder_to_gguf(const amn_ctx *ctx, const cli_args *a) {
    if (strcasecmp(a->to, "gguf") != 0 || !a->input || a->from || !folder_input(ctx, a->input))
        return -1;
    if (a->via)
        return cli_usage_fail(a->command, "--via names the first step of a GGUF file type "
                                          "(--to gguf-Q4_K_M); --to gguf takes --out-dtype");
    const char *dt = a->out_dtype ? a->out_dtype : "f16";
    char target[32];
    if (strlen(dt) > 16) return -1;
    snprintf(target, sizeof target, "hf-%s", dt);
    for (char *c = target; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    if (!cli_is_encode_target(ctx, target)) {
        if (!cli_is_encode_target(ctx, "hf-f16")) return -1; /* no amn-hf: as before */
        fprintf(stderr,
                "amn %s: --out-dtype %s: a model folder converts to GGUF as f32, f16, "
                "bf16, q8_0, tq1_0, tq2_0 or auto\n",
                a->command, dt);
        return EXIT_USAGE;
    }
    cli_args b = *a;
    b.to = target;
    b.out_dtype = NULL;
    return cmd_forget(ctx, &b);
}

/* A model folder to a GGUF file type in one pass (gguf-Q4_K_M): the
 * converter's GGUF at --via (f16 by default), quantized on the way as
 * llama-quantize quantizes that file. An exit code, or -1 when the request
 * is not that. */
static int folder_to_gguf_type(const amn_ctx *ctx, const cli_args *a) {
    /* (the input first: asking for a target loads the plugins that have it) */
    if (strncasecmp(a->to, "gguf-", 5) != 0 || !a->input || a->from ||
        !folder_input(ctx, a->input) || !cli_is_encode_target(ctx, "hf-f16") ||
        !cli_is_encode_target(ctx, a->to + 5))
        return -1;
    const char *via = a->via ? a->via : "f16";
    char target[16];
    if (strcasecmp(via, "f32") && strcasecmp(via, "f16") && strcasecmp(via, "bf16") &&
        strcasecmp(via, "auto"))
        return cli_usage_fail(a->command, "--via takes f32, f16, bf16 or auto");
    if (a->out_dtype)
        return cli_usage_fail(a->command, "--out-dtype: a GGUF file type is its own output type "
                                          "(--via names the first step's)");
    snprintf(target, sizeof target, "hf-%s", via);
    for (char *c = target; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    cli_args b = *a;
    b.to = target;
    b.then = a->to + 5;
    return cmd_forget(ctx, &b);
}

int cli_convert_encode(const amn_ctx *ctx, const cli_args *a) {
    if (!a->to) return -1;
    const int hf = folder_to_gguf(ctx, a);
    if (hf >= 0) return hf;
    const int hq = folder_to_gguf_type(ctx, a);
    if (hq >= 0) return hq;
    if (a->via)
        return cli_usage_fail(a->command, "--via needs a model folder and a GGUF file type "
                                          "(amn convert DIR --to gguf-Q4_K_M)");
    const int to_hf = cli_convert_to_hf(ctx, a);
    if (to_hf >= 0) return to_hf;
    /* gguf-Q4_K_M: the GGUF file type Q4_K_M. A bare file type is not taken
     * here: bf16 / f16 / f32 name convert's safetensors output. */
    if (strncasecmp(a->to, "gguf-", 5) == 0 && cli_is_encode_target(ctx, a->to + 5) &&
        strcmp(cli_encode_container(ctx, a->to + 5), "gguf") == 0) {
        cli_args b = *a;
        b.to = a->to + 5;
        return cmd_forget(ctx, &b);
    }
    if (cli_is_encode_target(ctx, a->to) && strcmp(cli_encode_container(ctx, a->to), "gguf") != 0)
        return cmd_forget(ctx, a);
    return -1;
}

/* llama-quantize's flags (tools/quantize/quantize.cpp) and the encoder
 * parameter each becomes; has_value: the flag takes the next argument. */
static const struct {
    const char *flag, *param;
    bool has_value;
} encode_flags[] = {
    {"--pure", "pure=1", false},
    {"--leave-output-tensor", "leave_output_tensor=1", false},
    {"--allow-requantize", "allow_requantize=1", false},
    {"--output-tensor-type", "output_tensor_type=", true},
    {"--token-embedding-type", "token_embedding_type=", true},
    {"--tensor-type", "tensor_type=", true},
    {"--imatrix", "imatrix=", true},
    /* file-shaping options (plugins/gguf/gguf_qopts.h) */
    {"--tensor-type-file", "tensor_type_file=", true},
    {"--override-kv", "override_kv=", true},
    {"--prune-layers", "prune_layers=", true},
    {"--include-weights", "include_weights=", true},
    {"--exclude-weights", "exclude_weights=", true},
    {"--dry-run", "dry_run=1", false}, /* also read by cmd_forget: cli_dry_run */
    /* the policy walks the input's order; cmd_forget writes the shards */
    {"--keep-split", "keep_split=1", false},
};

bool cli_keep_split(const cli_args *a) {
    for (size_t i = 0; i < a->n_enc_params; i++)
        if (strcmp(a->enc_params[i], "keep_split=1") == 0) return true;
    return false;
}

/* --keep-split's refusals, before the input is opened: a message, or NULL. */
static const char *keep_split_refusal(const amn_ctx *ctx, const cli_args *a) {
    if (a->split_max_tensors || a->split_max_size)
        return "--split-max-tensors and --split-max-size belong to convert --to gguf (a file "
               "type keeps the input's shards with --keep-split)";
    if (!cli_keep_split(a)) return NULL;
    if (strcmp(cli_encode_container(ctx, a->to), "gguf") != 0 || a->then)
        return "--keep-split writes a split GGUF from a GGUF input (a GGUF file type)";
    if (cli_dry_run(a)) return "--keep-split and --dry-run: the dry run prints one file's sizes";
    for (size_t i = 0; i < a->n_enc_params; i++)
        if (strncmp(a->enc_params[i], "prune_layers=", 13) == 0)
            return "--keep-split with --prune-layers is not supported (a renamed tensor's shard "
                   "is unknown)";
    if (a->output && names_folder(a->output)) return "--keep-split: -o names a folder";
    return NULL;
}

int cli_encode_option(cli_args *a, const char *opt, const char *value) {
    for (size_t k = 0; k < sizeof encode_flags / sizeof *encode_flags; k++) {
        if (strcmp(opt, encode_flags[k].flag) != 0) continue;
        if (encode_flags[k].has_value && !value) {
            char msg[128];
            snprintf(msg, sizeof msg, "%s needs a value", opt);
            return -cli_usage_fail(a->command, msg);
        }
        const char *v = encode_flags[k].has_value ? value : "";
        const size_t need = strlen(encode_flags[k].param) + strlen(v) + 1;
        char *dst = a->n_enc_params == sizeof a->enc_params / sizeof *a->enc_params
                        ? NULL
                        : cli_arg_text(&a->enc_text, &a->enc_used, CLI_ENC_TEXT_MAX, need);
        if (!dst) {
            char msg[128];
            snprintf(msg, sizeof msg, "too many options (at %s)", opt);
            return -cli_usage_fail(a->command, msg);
        }
        snprintf(dst, need, "%s%s", encode_flags[k].param, v);
        a->enc_params[a->n_enc_params++] = dst;
        return encode_flags[k].has_value ? 2 : 1;
    }
    return 0;
}

/* The directory holding path (path itself when it is a directory). */
static void dir_of(const char *path, char *buf, size_t size) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(buf, size, "%s", path);
        return;
    }
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, size, ".");
    else if (slash == path)
        snprintf(buf, size, "/");
    else
        snprintf(buf, size, "%.*s", (int)(slash - path), path);
}

static bool names_folder(const char *path) {
    struct stat st;
    const size_t n = strlen(path);
    return (n && path[n - 1] == '/') || (stat(path, &st) == 0 && S_ISDIR(st.st_mode));
}

/* config.json of the input's folder with quantization_config replaced,
 * written beside the output. Returns a note for the report, or NULL. */
static const char *write_config(const char *input, const char *output, const char *qc, bool force,
                                char *note, size_t note_size) {
    char in_dir[PATH_MAX], out_dir[PATH_MAX], src[PATH_MAX + 16], dst[PATH_MAX + 16];
    dir_of(input, in_dir, sizeof in_dir);
    dir_of(output, out_dir, sizeof out_dir);
    snprintf(src, sizeof src, "%s/config.json", in_dir);
    snprintf(dst, sizeof dst, "%s/config.json", out_dir);
    struct stat st;
    if (!qc || stat(src, &st) != 0 || !S_ISREG(st.st_mode)) return NULL;
    char r1[PATH_MAX], r2[PATH_MAX];
    if (realpath(in_dir, r1) && realpath(out_dir, r2) && strcmp(r1, r2) == 0) {
        snprintf(note, note_size,
                 "config.json not written: the output is beside the input's own config.json "
                 "(use -o in another folder)");
        return note;
    }
    if (!force && stat(dst, &st) == 0) {
        snprintf(note, note_size, "config.json not written: %s exists (use --force)", dst);
        return note;
    }
    amn_error err = {0};
    if (cli_config_rewrite(src, dst, qc, NULL, false, true, &err))
        snprintf(note, note_size, "config.json not written: %s", err.msg);
    else
        snprintf(note, note_size, "wrote %s with its quantization_config", dst);
    return note;
}

/* The encode target and --block-size (0: the target's default); an exit
 * code. */
static int parse_request(const amn_ctx *ctx, const cli_args *a, uint64_t *block) {
    *block = 0;
    if (!a->to) {
        fprintf(stderr,
                "amn %s: --to TARGET is required (bnb-nf4, bnb-nf4-dq, bnb-fp4, "
                "bnb-fp4-dq, bnb-int8, or a GGUF file type: Q4_K_M, Q8_0, ...)\n",
                a->command);
        return EXIT_USAGE;
    }
    if (!cli_is_encode_target(ctx, a->to)) {
        amn_error err = {0};
        amn_error_set(&err, AMN_E_UNSUPPORTED, "unsupported: no loaded plugin encodes '%s'%s",
                      a->to,
                      strncmp(a->to, "bnb-", 4) == 0 ? "; install the amn-plugin-bnb package" : "");
        return cli_fail(&err);
    }
    if (a->n_enc_params && strcmp(cli_encode_container(ctx, a->to), "gguf") != 0) {
        fprintf(stderr,
                "amn %s: llama-quantize's options (--pure, --tensor-type, ...) apply to GGUF "
                "file types only, not %s\n",
                a->command, a->to);
        return EXIT_USAGE;
    }
    if (a->block_size) {
        char *end;
        errno = 0;
        const unsigned long long v = strtoull(a->block_size, &end, 10);
        if (!*a->block_size || *end || errno || a->block_size[0] == '-' || v == 0) {
            fprintf(stderr, "amn %s: bad --block-size %s\n", a->command, a->block_size);
            return EXIT_USAGE;
        }
        *block = v;
    }
    const char *bad = cli_folder_args(a, NULL);
    if (!bad) bad = keep_split_refusal(ctx, a);
    if (bad) return cli_usage_fail(a->command, bad);
    return EXIT_OK;
}

/* Encode to the target's container; *qc gets the encoder's quantization_config (the
 * caller frees it). An exit code. */
static int run(const amn_ctx *ctx, const cli_args *a, const cli_input *in, const char *output,
               bool folder, uint64_t block, amn_convert_stats *st, char **qc) {
    /* With `then`, llama-quantize's options belong to the second step. */
    const amn_encode_options eo = {.struct_size = sizeof eo,
                                   .target = a->to,
                                   .block_size = block,
                                   .params = a->then ? NULL : a->enc_params,
                                   .n_params = a->then ? 0 : a->n_enc_params};
    const amn_encode_options then = {.struct_size = sizeof then,
                                     .target = a->then,
                                     .params = a->enc_params,
                                     .n_params = a->n_enc_params};
    amn_convert_options o = {.struct_size = sizeof(amn_convert_options),
                             .mode = AMN_MODE_REMEMBER,
                             .target = cli_encode_container(ctx, a->to),
                             .out_dtype = AMN_DTYPE_BF16,
                             .output = output,
                             .overwrite = a->force,
                             .threads = a->threads,
                             .encode = &eo,
                             .keep = a->keep,
                             .n_keep = a->n_keep,
                             .options = a->opts,
                             .n_options = a->n_opts,
                             .quant_config = qc,
                             .no_sync = a->no_sync,
                             .encode_then = a->then ? &then : NULL};
    amn_error err = {0};
    if (cli_dry_run(a)) return cli_forget_dry_run(ctx, a, in, &o); /* forget_dry.c */
    if (folder) {                                                  /* folder_out.c */
        cli_folder_result res = {0};
        char in_dir[4096];
        cli_folder_req fr = {
            .base = o,
            .out_dir = output,
            .in_dir = cli_folder_input_dir(in->path, in->resolved, in_dir, sizeof in_dir),
            .in_path = in->path,
            .forget = true,
            .side_files = strncmp(a->to, "hfdir", 5) == 0};
        cli_folder_args(a, &fr); /* checked by parse_request */
        /* A packed folder's other files come out of the archive first. */
        amn_kit_model_dir side;
        const char *side_dir = NULL;
        int rc = fr.in_dir ? AMN_OK : cli_archive_side_dir(in->m, &side, &side_dir, &err);
        if (side_dir) fr.in_dir = side_dir;
        if (!rc) rc = cli_folder_run(ctx, in->m, in->p, &fr, &res, &err);
        if (side_dir) cli_archive_side_done(&side);
        *st = res.st;
        return rc ? cli_fail(&err) : EXIT_OK;
    }
    if (cli_keep_split(a)) { /* gguf_split_out.c */
        cli_gguf_split_req sr = {.base = o, .keep_split = true};
        char prefix[4096];
        if (!cli_gguf_split_prefix(output, prefix, sizeof prefix))
            return cli_usage_fail(a->command, "--keep-split: bad -o (want NAME or NAME.gguf)");
        sr.prefix = prefix;
        cli_gguf_split_result res;
        const int rc = cli_gguf_split_run(ctx, in->m, in->p, &sr, &res, &err);
        *st = res.st;
        return rc ? cli_fail(&err) : EXIT_OK;
    }
    return amn_convert(ctx, in->m, in->p, &o, st, &err) ? cli_fail(&err) : EXIT_OK;
}

static void print_report(const cli_args *a, const char *output, const amn_convert_stats *st,
                         const char *note, double dt) {
    const double mae = st->abs_err_values ? st->abs_err_sum / (double)st->abs_err_values : 0.0;
    if (a->json) {
        json_object *j = json_object_new_object();
        json_object_object_add(j, "input", json_object_new_string(a->input));
        json_object_object_add(j, "output", json_object_new_string(output));
        json_object_object_add(j, "target", json_object_new_string(a->then ? a->then : a->to));
        json_object_object_add(j, "quantized", json_object_new_int64((int64_t)st->encoded));
        json_object_object_add(j, "passed_through",
                               json_object_new_int64((int64_t)st->encode_passed));
        json_object_object_add(j, "dequantized_first",
                               json_object_new_int64((int64_t)st->dequantized));
        json_object_object_add(j, "quantized_values",
                               json_object_new_int64((int64_t)st->abs_err_values));
        json_object_object_add(j, "mean_abs_error", json_object_new_double(mae));
        json_object_object_add(j, "tensors", json_object_new_int64((int64_t)st->tensors_written));
        json_object_object_add(j, "bytes", json_object_new_int64((int64_t)st->bytes_written));
        json_object_object_add(j, "seconds", json_object_new_double(dt));
        if (note) json_object_object_add(j, "config", json_object_new_string(note));
        printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_SPACED));
        json_object_put(j);
        return;
    }
    char b1[32];
    /* A model folder made a GGUF, or a GGUF a model folder: nothing forgotten. */
    if ((strncmp(a->to, "hf-", 3) == 0 && !a->then) || strncmp(a->to, "hfdir", 5) == 0) {
        printf("  Wrote %zu tensors, %s in %.2f s\n", st->tensors_written,
               cli_size(st->bytes_written, b1, sizeof b1), dt);
        return;
    }
    printf("  %zu quantized to %s, %zu passed through\n", st->encoded, a->then ? a->then : a->to,
           st->encode_passed);
    if (st->dequantized) printf("  %zu quantized inputs dequantized first\n", st->dequantized);
    printf("  Lethe took: mean |error| %.4g over %llu values\n", mae,
           (unsigned long long)st->abs_err_values);
    if (note) printf("  %s\n", note);
    printf("  Wrote %zu tensors, %s in %.2f s\n", st->tensors_written,
           cli_size(st->bytes_written, b1, sizeof b1), dt);
}

int cmd_forget(const amn_ctx *ctx, const cli_args *a) {
    uint64_t block;
    int rc = parse_request(ctx, a, &block);
    if (rc) return rc;
    cli_input in;
    if ((rc = cli_input_open(ctx, a, cli_limits(a), &in))) return rc;
    char outbuf[4096];
    /* A model folder holds safetensors shards; a GGUF file type is one file. */
    const char *container = cli_encode_container(ctx, a->to);
    const bool one_file = strcmp(container, "safetensors") != 0;
    const bool folder = cli_folder_wanted(a, in.path, in.resolved);
    if (one_file && a->output && names_folder(a->output)) {
        fprintf(stderr, "amn forget: %s writes one %s file: -o %s names a folder\n", a->to,
                container, a->output);
        cli_input_free(&in);
        return EXIT_USAGE;
    }
    const bool to_folder = folder && !one_file;
    if (!to_folder && (a->only_shards || a->write_index || a->resume || a->dedup_tied)) {
        cli_input_free(&in);
        return cli_usage_fail(
            a->command,
            "--only-shards, --write-index, --resume and --dedup-tied write a model folder");
    }
    const char *output = to_folder ? NULL : a->output;
    if (to_folder ? !cli_folder_output(a, in.resolved, a->to, outbuf, sizeof outbuf)
                  : !output && !cli_default_output(a->input, in.resolved, a->then ? a->then : a->to,
                                                   container, outbuf, sizeof outbuf)) {
        fprintf(stderr, "amn: output path too long; pass -o\n");
        cli_input_free(&in);
        return EXIT_USAGE;
    }
    if (!output) output = outbuf;
    const bool dry = cli_dry_run(a); /* prints its own lines, writes nothing */
    if (!a->json && !a->quiet && !dry) {
        if (strncmp(a->to, "hf-", 3) == 0) {
            printf("Converting %s -> %s (GGUF as convert_hf_to_gguf.py --outtype %s", a->input,
                   output, a->to + 3);
            if (a->then) printf(" then llama-quantize %s", a->then);
        } else if (strncmp(a->to, "hfdir", 5) == 0)
            printf("Converting %s -> %s (a Hugging Face model folder", a->input, output);
        else
            printf("Forgetting %s -> %s (%s", a->input, output, a->to);
        if (block) printf(", block %llu", (unsigned long long)block);
        printf(")\n");
        fflush(stdout);
    }
    amn_convert_stats st = {.struct_size = sizeof(amn_convert_stats)};
    char *qc = NULL;
    rc = run(ctx, a, &in, output, to_folder, block, &st, &qc);
    cli_input_free(&in);
    if (rc || dry) return rc;
    char note_buf[PATH_MAX + 128];
    const char *note =
        to_folder ? NULL : write_config(in.path, output, qc, a->force, note_buf, sizeof note_buf);
    free(qc);
    if (!a->quiet || a->json) print_report(a, output, &st, note, cli_now() - in.t0);
    return EXIT_OK;
}
