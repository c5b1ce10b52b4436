/* `amn remember` and `amn convert`: open, plan, stream to a new file. */
#include <stdio.h>
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

int cmd_remember(const amn_ctx *ctx, const cli_args *a, bool convert) {
    amn_error err = {0};
    const char *target = "safetensors";
    const char *dtype_arg = convert ? a->out_dtype : a->to;
    if (convert) {
        if (!a->to) {
            fprintf(stderr, "amn convert: --to TARGET is required\n");
            return EXIT_USAGE;
        }
        target = strcmp(a->to, "bf16") == 0 ? "safetensors" : a->to;
        if (cli_is_encode_target(ctx, a->to)) return cmd_forget(ctx, a);
    }
    amn_dtype out = dtype_arg ? amn_dtype_from_cli(dtype_arg) : AMN_DTYPE_BF16;
    if (out == AMN_DTYPE_INVALID) {
        fprintf(stderr, "amn: unknown dtype '%s' (use bf16, f16 or f32)\n", dtype_arg);
        return EXIT_USAGE;
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
    rc = amn_open(ctx, path, a->from, NULL, &m, &err);
    if (!rc) rc = amn_plan_new(ctx, m, &p, &err);
    if (rc) {
        amn_model_free(m);
        return cli_fail(&err);
    }
    /* Full-precision checkpoints (npz, pth) convert losslessly unless an
     * output dtype is asked for; everything else casts floats on convert. */
    const amn_format *in_fmt = amn_ctx_find_format(ctx, amn_model_format(m));
    const bool lossless_input = in_fmt && (amn_format_flags(in_fmt) & AMN_FORMAT_LOSSLESS);
    amn_mode mode =
        convert && !(lossless_input && !a->out_dtype) ? AMN_MODE_CONVERT : AMN_MODE_REMEMBER;
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
            fprintf(stderr, "amn: output path too long; pass -o\n");
            amn_plan_free(p);
            amn_model_free(m);
            return EXIT_USAGE;
        }
        output = outbuf;
    }
    if (!a->json) {
        printf("%s %s -> %s\n", convert ? "Converting" : "Remembering", a->input, output);
        if (s.groups)
            printf("  %s%s\n", s.label ? s.label : s.scheme,
                   s.labels_differ ? " (and others)" : "");
        fflush(stdout);
    }
    amn_convert_options o = {
        .mode = mode,
        .target = target,
        .out_dtype = out,
        .output = output,
        .overwrite = a->force,
        .threads = a->threads,
        .kv_overrides = a->kv,
        .n_kv_overrides = a->n_kv,
        .metadata_file = a->metadata_file,
    };
    amn_convert_stats st;
    rc = amn_convert(ctx, m, p, &o, &st, &err);
    amn_plan_free(p);
    amn_model_free(m);
    if (rc) return cli_fail(&err);
    double dt = now() - t0;
    char b1[32];
    if (a->json) {
        printf("{\"input\": \"%s\", \"output\": \"%s\", \"tensors\": %zu, \"dequantized\": %zu, "
               "\"cast\": %zu, \"dropped\": %zu, \"bytes\": %llu, \"seconds\": %.3f}\n",
               a->input, output, st.tensors_written, st.dequantized, st.cast, st.dropped,
               (unsigned long long)st.bytes_written, dt);
        return EXIT_OK;
    }
    if (st.dequantized) printf("  %zu dequantized to %s\n", st.dequantized, amn_dtype_name(out));
    if (st.cast) printf("  %zu cast to %s\n", st.cast, amn_dtype_name(out));
    if (st.dropped) printf("  %zu activation scales dropped\n", st.dropped);
    printf("  Wrote %zu tensors, %s in %.2f s\n", st.tensors_written,
           cli_size(st.bytes_written, b1, sizeof b1), dt);
    return EXIT_OK;
}
