/* `amn remember` and `amn convert`: open, plan, stream to a new file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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
                       const amn_convert_stats *st, double seconds) {
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
        amn_group_info gi;
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
    json_object_object_add(root, "seconds", json_object_new_double(seconds));
    cli_json_print(root);
}

int cmd_remember(const amn_ctx *ctx, const cli_args *a, bool convert) {
    amn_error err = {0};
    const char *target = "safetensors";
    const char *dtype_arg = convert ? a->out_dtype : a->to;
    if (convert) {
        if (!a->to) return cli_usage_fail(a->command, "--to TARGET is required");
        target = strcmp(a->to, "bf16") == 0 ? "safetensors" : a->to;
        if (cli_is_encode_target(ctx, a->to)) return cmd_forget(ctx, a);
    }
    /* --out-dtype keep: every tensor in its own dtype; quantized weights,
     * which have none, become BF16 as `remember` makes them. */
    const bool keep = convert && dtype_arg && strcmp(dtype_arg, "keep") == 0;
    amn_dtype out = dtype_arg && !keep ? amn_dtype_from_cli(dtype_arg) : AMN_DTYPE_BF16;
    if (out == AMN_DTYPE_INVALID) {
        char msg[256];
        snprintf(msg, sizeof msg, "unknown dtype '%s' (use bf16, f16 or f32%s)", dtype_arg,
                 convert ? ", or keep" : "");
        return cli_usage_fail(a->command, msg);
    }
    const amn_format *tf = amn_ctx_find_format(ctx, target);
    if (!tf || !tf->writer) {
        amn_error_set(&err, AMN_E_UNSUPPORTED,
                      "unsupported: no loaded plugin writes '%s'; install the amn-%s plugin",
                      target, target);
        return cli_fail(&err);
    }
    char outbuf[4096], ext[64], path[4096];
    bool resolved;
    int rc = cli_resolve_input(ctx, a->input, path, sizeof path, &resolved);
    if (rc) return rc;
    double t0 = now();
    amn_model *m = NULL;
    amn_plan *p = NULL;
    rc = amn_open(ctx, path, a->from, cli_limits(a), &m, &err);
    if (!rc) rc = amn_plan_new(ctx, m, &p, &err);
    if (rc) {
        amn_model_free(m);
        return cli_fail(&err);
    }
    /* Conversions from or to a full-precision checkpoint format (npz, pth)
     * are lossless unless an output dtype is asked for, as is any conversion
     * with --out-dtype keep; everything else casts floats on convert. */
    const amn_format *in_fmt = amn_ctx_find_format(ctx, amn_model_format(m));
    const bool lossless = (in_fmt && (amn_format_flags(in_fmt) & AMN_FORMAT_LOSSLESS)) ||
                          (amn_format_flags(tf) & AMN_FORMAT_LOSSLESS);
    amn_mode mode =
        convert && !keep && !(lossless && !a->out_dtype) ? AMN_MODE_CONVERT : AMN_MODE_REMEMBER;
    amn_plan_summary s;
    amn_plan_summarize(p, out, &s);
    const char *output = a->output;
    if (!output) {
        /* Name the dtype when something becomes it; a lossless copy of a
         * non-safetensors file is just <stem>.safetensors. */
        first_ext(tf, ext, sizeof ext);
        char tag[16] = "";
        if (mode == AMN_MODE_CONVERT || s.groups || strcmp(amn_model_format(m), target) == 0) {
            snprintf(tag, sizeof tag, "%s", amn_dtype_name(out));
            for (char *c = tag; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
        }
        if (!cli_default_output(a->input, resolved, tag, ext, outbuf, sizeof outbuf)) {
            amn_plan_free(p);
            amn_model_free(m);
            return cli_usage_fail(a->command, "output path too long; pass -o");
        }
        output = outbuf;
    }
    if (!a->json && !a->quiet) {
        printf("%s %s -> %s\n", convert ? "Converting" : "Remembering", a->input, output);
        if (s.groups)
            printf("  %s%s\n", s.label ? s.label : s.scheme,
                   s.labels_differ ? " (and others)" : "");
        fflush(stdout);
    }
    cli_progress prog;
    cli_progress_begin(&prog, a);
    amn_convert_options o = {
        .mode = mode,
        .target = target,
        .out_dtype = out,
        .output = output,
        .overwrite = a->force,
        .threads = a->threads,
        .options = a->opts,
        .n_options = a->n_opts,
        .progress = prog.mode != CLI_PROGRESS_OFF ? cli_progress_update : NULL,
        .progress_user = &prog,
        .no_sync = a->no_sync,
    };
    amn_convert_stats st;
    rc = amn_convert(ctx, m, p, &o, &st, &err);
    cli_progress_end(&prog);
    double dt = now() - t0;
    if (!rc && a->json) print_json(a, convert, m, p, target, output, out, &st, dt);
    amn_plan_free(p);
    amn_model_free(m);
    if (rc) return cli_fail(&err);
    if (a->json || a->quiet) return EXIT_OK;
    char b1[32];
    if (st.dequantized) printf("  %zu dequantized to %s\n", st.dequantized, amn_dtype_name(out));
    if (st.cast) printf("  %zu cast to %s\n", st.cast, amn_dtype_name(out));
    if (st.dropped) printf("  %zu activation scales dropped\n", st.dropped);
    printf("  Wrote %zu tensors, %s in %.2f s\n", st.tensors_written,
           cli_size(st.bytes_written, b1, sizeof b1), dt);
    return EXIT_OK;
}
