/* `amn remember` and `amn convert`: open, plan, stream to a new file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "folder.h"
#include "gguf_split.h"

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cli_input_open(const amn_ctx *ctx, const cli_args *a, const amn_limits *limits, cli_input *in) {
    memset(in, 0, sizeof *in);
    int rc = cli_resolve_input(ctx, a->input, in->path, sizeof in->path, &in->resolved);
    if (rc) return rc;
    in->t0 = cli_now();
    amn_error err = {0};
    rc = amn_open(ctx, in->path, a->from, limits, &in->m, &err);
    if (!rc) rc = amn_plan_new(ctx, in->m, &in->p, &err);
    if (rc) {
        cli_input_free(in);
        return cli_fail(&err);
    }
    return EXIT_OK;
}

void cli_input_free(cli_input *in) {
    amn_plan_free(in->p);
    amn_model_free(in->m);
    in->p = NULL;
    in->m = NULL;
}

/* First extension a format declares ("safetensors,sft" -> "safetensors"). */
static void first_ext(const amn_format *f, char *buf, size_t size) {
    const char *e = f->extensions ? f->extensions : f->name;
    size_t n = strcspn(e, ",");
    if (n >= size) n = size - 1;
    memcpy(buf, e, n);
    buf[n] = '\0';
}

/* The --json report of a finished run (schema in doc/json.md). */
static void print_json(const cli_args *a, bool convert, const amn_model *m, const amn_plan *p,
                       const char *target, const char *output, amn_dtype out,
                       const amn_convert_stats *st, const cli_folder_result *fr, double seconds) {
    json_object *root = json_object_new_object();
    json_object_object_add(root, "command",
                           json_object_new_string(convert ? "convert" : "remember"));
    json_object_object_add(root, "input", cli_json_str(a->input));
    json_object_object_add(root, "input_format", cli_json_str(amn_model_format(m)));
    json_object_object_add(root, "output", cli_json_str(output));
    json_object_object_add(root, "target", cli_json_str(target));
    json_object_object_add(root, "out_dtype", json_object_new_string(amn_dtype_name(out)));
    json_object *groups = json_object_new_array(), *labels = json_object_new_object();
    for (size_t i = 0; i < amn_plan_group_count(p); i++) {
        amn_group_info gi = {.struct_size = sizeof(amn_group_info)};
        if (amn_plan_group(p, i, &gi) || !gi.out_name) continue;
        json_object *g = json_object_new_object();
        json_object_object_add(g, "name", cli_json_str(gi.out_name));
        json_object_object_add(g, "label", cli_json_str(gi.label));
        json_object_object_add(g, "scheme", cli_json_str(gi.scheme));
        json_object_array_add(groups, g);
        /* labels: how many groups carry each label */
        json_object *key = cli_json_str(gi.label ? gi.label : gi.scheme ? gi.scheme : "");
        const char *k = json_object_get_string(key);
        json_object *n = NULL;
        if (json_object_object_get_ex(labels, k, &n))
            json_object_set_int64(n, json_object_get_int64(n) + 1);
        else
            json_object_object_add(labels, k, json_object_new_int64(1));
        json_object_put(key);
    }
    json_object_object_add(root, "labels", labels);
    json_object_object_add(root, "groups", groups);
    json_object_object_add(root, "tensors", json_object_new_uint64(st->tensors_written));
    json_object_object_add(root, "dequantized", json_object_new_uint64(st->dequantized));
    json_object_object_add(root, "cast", json_object_new_uint64(st->cast));
    json_object_object_add(root, "dropped", json_object_new_uint64(st->dropped));
    json_object_object_add(root, "bytes", json_object_new_uint64(st->bytes_written));
    if (fr) { /* a model folder */
        json_object_object_add(root, "shards", json_object_new_uint64(fr->shards));
        json_object_object_add(root, "total_shards", json_object_new_uint64(fr->total_shards));
        json_object_object_add(root, "files_copied", json_object_new_uint64(fr->copied));
        json_object_object_add(root, "config_written", json_object_new_boolean(fr->config));
        json_object_object_add(root, "shards_resumed", json_object_new_uint64(fr->resumed));
        if (fr->tied[0])
            json_object_object_add(root, "tied_dropped", json_object_new_string(fr->tied));
    }
    json_object_object_add(root, "seconds", json_object_new_double(seconds));
    cli_json_print(root);
}

/* What remember / convert is asked to make. */
typedef struct remember_req {
    bool convert;
    bool keep; /* --out-dtype keep */
    const char *target;
    const amn_format *tf; /* the target's format, which has a writer */
    amn_dtype out;
    amn_mode mode;
    bool copy; /* a GGUF copied to GGUF: every tensor as stored (keep_quantized) */
} remember_req;

/* The target and output dtype from the command line; an exit code. */
static int parse_request(const amn_ctx *ctx, const cli_args *a, bool convert, remember_req *rq) {
    *rq = (remember_req){.convert = convert, .target = "safetensors"};
    const char *dtype_arg = convert ? a->out_dtype : a->to;
    if (convert) {
        if (!a->to) return cli_usage_fail(a->command, "--to TARGET is required");
        rq->target = strcmp(a->to, "bf16") == 0 ? "safetensors" : a->to;
    }
    /* --out-dtype keep: every tensor in its own dtype; quantized weights,
     * which have none, become BF16 as `remember` makes them. */
    rq->keep = convert && dtype_arg && strcmp(dtype_arg, "keep") == 0;
    rq->out = dtype_arg && !rq->keep ? amn_dtype_from_cli(dtype_arg) : AMN_DTYPE_BF16;
    if (rq->out == AMN_DTYPE_INVALID) {
        char msg[256];
        snprintf(msg, sizeof msg, "unknown dtype '%s' (use bf16, f16 or f32%s)", dtype_arg,
                 convert ? ", or keep" : "");
        return cli_usage_fail(a->command, msg);
    }
    rq->tf = amn_ctx_find_format(ctx, rq->target);
    if (!rq->tf || !rq->tf->writer) {
        amn_error err = {0};
        amn_error_set(
            &err, AMN_E_UNSUPPORTED,
            "unsupported: no loaded plugin writes '%s'; install the amn-plugin-%s package",
            rq->target, rq->target);
        return cli_fail(&err);
    }
    return EXIT_OK;
}

/* Conversions from or to a full-precision checkpoint format (npz, pth) are
 * lossless unless an output dtype is asked for, as is any conversion with
 * --out-dtype keep; everything else casts floats on convert. */
static amn_mode choose_mode(const amn_ctx *ctx, const cli_args *a, const remember_req *rq,
                            const amn_model *m) {
    const amn_format *in_fmt = amn_ctx_find_format(ctx, amn_model_format(m));
    const bool lossless = (in_fmt && (amn_format_flags(in_fmt) & AMN_FORMAT_LOSSLESS)) ||
                          (amn_format_flags(rq->tf) & AMN_FORMAT_LOSSLESS);
    return rq->convert && !rq->keep && !(lossless && !a->out_dtype) ? AMN_MODE_CONVERT
                                                                    : AMN_MODE_REMEMBER;
}

/* A merge (a split GGUF input) or a split (--split-max-*) of a GGUF to GGUF
 * is a container copy, as llama-gguf-split's: every tensor as stored,
 * quantized ones included, unless --out-dtype names a float dtype. Not for a
 * big-endian GGUF with block tensors (their stored bytes are not the
 * little-endian layout written). */
static void gguf_copy(const cli_args *a, remember_req *rq, const amn_model *m) {
    if (!rq->convert || strcmp(rq->target, "gguf") != 0 || strcmp(amn_model_format(m), "gguf"))
        return;
    const amn_kv *kv = amn_model_find_kv(m, "split.count");
    uint16_t count = 0;
    if (kv && kv->type == AMN_KV_U16) memcpy(&count, kv->data, 2);
    if (count <= 1 && !a->split_max_tensors && !a->split_max_size) return;
    if (a->out_dtype && !rq->keep) return;
    for (size_t i = 0; i < amn_model_tensor_count(m); i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        if (t->dtype == AMN_DTYPE_BLOCK && (t->flags & AMN_TENSOR_BIG_ENDIAN)) return;
    }
    rq->copy = rq->keep = true;
}

/* <stem>-<dtype>.<ext>, naming the dtype when something becomes it; a
 * lossless copy of a non-safetensors file is just <stem>.safetensors.
 * NULL when it does not fit. */
static const char *default_output(const cli_args *a, const remember_req *rq, const cli_input *in,
                                  const amn_plan_summary *s, char *buf, size_t size) {
    char ext[64], tag[16] = "";
    first_ext(rq->tf, ext, sizeof ext);
    if (rq->copy) {
        snprintf(tag, sizeof tag, "copy");
    } else if (rq->mode == AMN_MODE_CONVERT || s->groups ||
               strcmp(amn_model_format(in->m), rq->target) == 0) {
        snprintf(tag, sizeof tag, "%s", amn_dtype_name(rq->out));
        for (char *c = tag; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    }
    return cli_default_output(a->input, in->resolved, tag, ext, buf, size) ? buf : NULL;
}

static void announce(const cli_args *a, const remember_req *rq, const char *output,
                     const amn_plan_summary *s) {
    if (a->json || a->quiet) return;
    printf("%s %s -> %s\n", rq->convert ? "Converting" : "Remembering", a->input, output);
    if (s->groups)
        printf("  %s%s\n", s->label ? s->label : s->scheme,
               s->labels_differ ? " (and others)" : "");
    fflush(stdout);
}

/* What every file of the request is written with (the output, and a
 * shard's selection, set per file); progress through prog. */
static amn_convert_options base_options(const cli_args *a, const remember_req *rq,
                                        cli_progress *prog) {
    return (amn_convert_options){
        .struct_size = sizeof(amn_convert_options),
        .mode = rq->mode,
        .target = rq->target,
        .out_dtype = rq->out,
        .overwrite = a->force,
        .threads = a->threads,
        .options = a->opts,
        .n_options = a->n_opts,
        .progress = prog->mode != CLI_PROGRESS_OFF ? cli_progress_update : NULL,
        .progress_user = prog,
        .no_sync = a->no_sync,
        .keep_quantized = rq->copy,
    };
}

/* Stream the output (with progress), and the --json report on success; an
 * exit code. */
static int run(const amn_ctx *ctx, const cli_args *a, const remember_req *rq, const cli_input *in,
               const char *output, amn_convert_stats *st, double *seconds) {
    cli_progress prog;
    cli_progress_begin(&prog, a);
    amn_convert_options o = base_options(a, rq, &prog);
    o.output = output;
    cli_truncate_hook hook;
    if (cli_truncate_hook_init(&hook, in->path, o.progress, o.progress_user)) {
        o.progress = cli_truncate_hook_progress;
        o.progress_user = &hook;
    }
    cli_signals_input(in->path);
    amn_error err = {0};
    int rc = amn_convert(ctx, in->m, in->p, &o, st, &err);
    cli_progress_end(&prog);
    *seconds = cli_now() - in->t0;
    if (rc) return cli_fail(&err);
    if (a->json)
        print_json(a, rq->convert, in->m, in->p, rq->target, output, rq->out, st, NULL, *seconds);
    return EXIT_OK;
}

/* --split-max-tensors / --split-max-size into rq (the mode and limit); a
 * message for a bad request, or NULL. */
static const char *split_request(const cli_args *a, const remember_req *rq, bool folder,
                                 cli_gguf_split_req *sr) {
    if (a->split_max_tensors && a->split_max_size)
        return "either --split-max-tensors or --split-max-size can be given, not both";
    if (!rq->convert || strcmp(rq->target, "gguf") != 0 || folder)
        return "--split-max-tensors and --split-max-size write a split GGUF (convert --to gguf)";
    if (a->split_max_tensors) {
        char *end;
        const unsigned long long n = strtoull(a->split_max_tensors, &end, 10);
        if (a->split_max_tensors[0] < '1' || a->split_max_tensors[0] > '9' || *end || n > INT32_MAX)
            return "bad --split-max-tensors (want a tensor count from 1)";
        sr->max_tensors = n;
    } else if (!cli_gguf_split_size(a->split_max_size, &sr->max_bytes)) {
        return "bad --split-max-size (want N followed by M or G, as 500M or 2G)";
    }
    return NULL;
}

/* The same as a split GGUF (gguf_split_out.c); an exit code. */
static int run_split(const amn_ctx *ctx, const cli_args *a, const remember_req *rq,
                     const cli_input *in, const char *output, cli_gguf_split_req *sr,
                     amn_convert_stats *st, double *seconds) {
    char prefix[4096];
    if (!cli_gguf_split_prefix(output, prefix, sizeof prefix))
        return cli_usage_fail(a->command, "bad -o for a split GGUF (want NAME or NAME.gguf)");
    cli_progress prog;
    cli_progress_begin(&prog, a);
    sr->base = base_options(a, rq, &prog);
    sr->prefix = prefix;
    cli_signals_input(in->path);
    cli_gguf_split_result res;
    amn_error err = {0};
    int rc = cli_gguf_split_run(ctx, in->m, in->p, sr, &res, &err);
    cli_progress_end(&prog);
    *seconds = cli_now() - in->t0;
    if (rc) return cli_fail(&err);
    *st = res.st;
    if (a->json)
        print_json(a, rq->convert, in->m, in->p, rq->target, output, rq->out, st, NULL, *seconds);
    else if (!a->quiet)
        printf("  %u shard%s: %s-%05u-of-%05u.gguf ...\n", res.shards, res.shards == 1 ? "" : "s",
               prefix, 1u, res.shards);
    return EXIT_OK;
}

/* torch_dtype's name for an output dtype. */
static const char *torch_dtype_name(amn_dtype d) {
    return d == AMN_DTYPE_F32 ? "float32" : d == AMN_DTYPE_F16 ? "float16" : "bfloat16";
}

/* The same into a model folder; an exit code. */
static int run_folder(const amn_ctx *ctx, const cli_args *a, const remember_req *rq,
                      const cli_input *in, const char *output, bool dequantizes,
                      amn_convert_stats *st, double *seconds) {
    cli_progress prog;
    cli_progress_begin(&prog, a);
    char in_dir[4096];
    amn_convert_options base = base_options(a, rq, &prog);
    base.progress = NULL; /* the folder's own, over every shard */
    base.progress_user = NULL;
    cli_folder_req fr = {
        .base = base,
        .progress = prog.mode != CLI_PROGRESS_OFF ? cli_progress_update : NULL,
        .progress_user = &prog,
        .out_dir = output,
        .in_dir = cli_folder_input_dir(in->path, in->resolved, in_dir, sizeof in_dir),
        .in_path = in->path,
        /* torch_dtype names what the weights became; a copy keeps it. */
        .torch_dtype = !rq->keep && (dequantizes || rq->mode == AMN_MODE_CONVERT)
                           ? torch_dtype_name(rq->out)
                           : NULL,
        .drop_quant = true,
    };
    cli_folder_args(a, &fr); /* checked by cmd_remember */
    cli_folder_result res = {0};
    cli_signals_input(in->path);
    amn_error err = {0};
    /* A packed folder's other files come out of the archive first. */
    amn_kit_model_dir side;
    const char *side_dir = NULL;
    int rc = fr.in_dir ? AMN_OK : cli_archive_side_dir(in->m, &side, &side_dir, &err);
    if (side_dir) fr.in_dir = side_dir;
    if (!rc) rc = cli_folder_run(ctx, in->m, in->p, &fr, &res, &err);
    if (side_dir) cli_archive_side_done(&side);
    cli_progress_end(&prog);
    *seconds = cli_now() - in->t0;
    if (rc) return cli_fail(&err);
    *st = res.st;
    if (a->json)
        print_json(a, rq->convert, in->m, in->p, rq->target, output, rq->out, st, &res, *seconds);
    else if (!a->quiet)
        printf("  %zu of %zu shard%s, %zu other file%s copied%s\n", res.shards, res.total_shards,
               res.total_shards == 1 ? "" : "s", res.copied, res.copied == 1 ? "" : "s",
               res.config ? ", config.json rewritten" : "");
    if (!a->json && !a->quiet && res.resumed)
        printf("  %zu shard%s kept from the interrupted run\n", res.resumed,
               res.resumed == 1 ? "" : "s");
    if (!a->json && !a->quiet && res.tied[0])
        printf("  lm_head.weight left out (tied to %s)\n", res.tied);
    return EXIT_OK;
}

static void print_report(const cli_args *a, const remember_req *rq, const amn_convert_stats *st,
                         double seconds) {
    if (a->json || a->quiet) return;
    char b1[32];
    const char *out = amn_dtype_name(rq->out);
    if (st->dequantized) printf("  %zu dequantized to %s\n", st->dequantized, out);
    if (st->cast) printf("  %zu cast to %s\n", st->cast, out);
    if (st->dropped) printf("  %zu activation scales dropped\n", st->dropped);
    printf("  Wrote %zu tensors, %s in %.2f s\n", st->tensors_written,
           cli_size(st->bytes_written, b1, sizeof b1), seconds);
}

int cmd_remember(const amn_ctx *ctx, const cli_args *a, bool convert) {
    if (convert) {
        const int enc = cli_convert_encode(ctx, a);
        if (enc >= 0) return enc;
    }
    if (a->n_enc_params)
        return cli_usage_fail(a->command, "llama-quantize's options (--pure, --tensor-type, ...) "
                                          "need a GGUF file type (--to gguf-Q4_K_M)");
    remember_req rq;
    int rc = parse_request(ctx, a, convert, &rq);
    if (rc) return rc;
    cli_input in;
    if ((rc = cli_input_open(ctx, a, cli_limits(a), &in))) return rc;
    gguf_copy(a, &rq, in.m);
    rq.mode = choose_mode(ctx, a, &rq, in.m);
    amn_plan_summary s = {.struct_size = sizeof(amn_plan_summary)};
    amn_plan_summarize(in.p, rq.out, &s);
    char outbuf[4096];
    const bool folder = cli_folder_wanted(a, in.path, in.resolved);
    const char *output = NULL, *bad_arg = cli_folder_args(a, NULL);
    if (folder) {
        char tag[16];
        snprintf(tag, sizeof tag, "%s", amn_dtype_name(rq.out));
        for (char *c = tag; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
        output = cli_folder_output(a, in.resolved, tag, outbuf, sizeof outbuf) ? outbuf : NULL;
    } else {
        output = a->output ? a->output : default_output(a, &rq, &in, &s, outbuf, sizeof outbuf);
    }
    amn_convert_stats st = {.struct_size = sizeof(amn_convert_stats)};
    double seconds = 0;
    cli_gguf_split_req sr = {0};
    const bool gsplit = a->split_max_tensors || a->split_max_size;
    const char *bad_split = gsplit ? split_request(a, &rq, folder, &sr) : NULL;
    if (!output) {
        rc = cli_usage_fail(a->command, "output path too long; pass -o");
    } else if (bad_arg || bad_split) {
        rc = cli_usage_fail(a->command, bad_arg ? bad_arg : bad_split);
    } else if (!folder && (a->only_shards || a->write_index || a->resume || a->dedup_tied)) {
        rc = cli_usage_fail(
            a->command,
            "--only-shards, --write-index, --resume and --dedup-tied write a model folder");
    } else if (folder && strcmp(rq.target, "safetensors") != 0) {
        rc = cli_usage_fail(a->command,
                            "a model folder is written as safetensors (--to safetensors)");
    } else {
        announce(a, &rq, output, &s);
        rc = folder   ? run_folder(ctx, a, &rq, &in, output, s.groups > 0, &st, &seconds)
             : gsplit ? run_split(ctx, a, &rq, &in, output, &sr, &st, &seconds)
                      : run(ctx, a, &rq, &in, output, &st, &seconds);
    }
    cli_input_free(&in);
    if (!rc) print_report(a, &rq, &st, seconds);
    return rc;
}
