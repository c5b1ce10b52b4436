/* `amn plugins`: what was found, what it provides, and the conversion
 * matrix that follows. */
#include <stdio.h>
#include <string.h>

#include "amn/plugin.h"
#include "cli.h"

static json_object *format_json(const amn_format *f) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "name", cli_json_str(f->name));
    json_object_object_add(o, "description", cli_json_str(f->description));
    json_object_object_add(o, "extensions", cli_json_str(f->extensions));
    json_object_object_add(o, "read", json_object_new_boolean(f->open != NULL));
    json_object_object_add(o, "inspect", json_object_new_boolean(f->inspect != NULL));
    json_object_object_add(o, "write", json_object_new_boolean(f->writer != NULL));
    return o;
}

static int print_json(const amn_ctx *ctx) {
    json_object *root = json_object_new_object(), *plugins = json_object_new_array();
    for (size_t i = 0; i < amn_ctx_plugin_count(ctx); i++) {
        amn_plugin_info pi = {.struct_size = sizeof(amn_plugin_info)};
        amn_ctx_plugin(ctx, i, &pi);
        json_object *o = json_object_new_object();
        json_object_object_add(o, "name", cli_json_str(pi.name));
        json_object_object_add(o, "status", cli_json_str(pi.status));
        json_object_object_add(o, "file", cli_json_str(pi.file));
        json_object_object_add(o, "reason", cli_json_str(pi.reason));
        const bool loaded = strcmp(pi.status, "loaded") == 0;
        json_object_object_add(o, "version", loaded ? cli_json_str(pi.version) : NULL);
        json_object_object_add(o, "description", loaded ? cli_json_str(pi.description) : NULL);
        json_object_object_add(o, "license", loaded ? cli_json_str(pi.license) : NULL);
        if (loaded) {
            json_object *abi = json_object_new_array();
            json_object_array_add(abi, json_object_new_int((int)pi.abi_major));
            json_object_array_add(abi, json_object_new_int((int)pi.abi_minor));
            json_object_object_add(o, "abi", abi);
        }
        json_object *fs = json_object_new_array(), *ss = json_object_new_array(),
                    *rs = json_object_new_array();
        for (size_t k = 0; loaded && k < pi.n_formats; k++)
            json_object_array_add(fs, format_json(pi.formats[k]));
        for (size_t k = 0; loaded && k < pi.n_schemes; k++) {
            json_object *s = json_object_new_object();
            json_object_object_add(s, "name", cli_json_str(pi.schemes[k]->name));
            json_object_object_add(s, "description", cli_json_str(pi.schemes[k]->description));
            json_object *ts = json_object_new_array();
            const amn_encoder *e = amn_scheme_encoder(pi.schemes[k]);
            for (size_t t = 0; e && e->targets[t]; t++)
                json_object_array_add(ts, cli_json_str(e->targets[t]));
            json_object_object_add(s, "encodes", ts);
            json_object_array_add(ss, s);
        }
        for (size_t k = 0; loaded && k < pi.n_resolvers; k++) {
            json_object *r = json_object_new_object();
            json_object_object_add(r, "scheme", cli_json_str(pi.resolvers[k]->scheme));
            json_object_object_add(r, "description", cli_json_str(pi.resolvers[k]->description));
            json_object_array_add(rs, r);
        }
        json_object_object_add(o, "formats", fs);
        json_object_object_add(o, "schemes", ss);
        json_object_object_add(o, "resolvers", rs);
        json_object_array_add(plugins, o);
    }
    json_object_object_add(root, "plugins", plugins);
    json_object *in = json_object_new_array(), *out = json_object_new_array();
    for (size_t i = 0; i < amn_matrix_inputs(ctx); i++)
        json_object_array_add(in, cli_json_str(amn_matrix_input(ctx, i)));
    for (size_t j = 0; j < amn_matrix_targets(ctx); j++)
        json_object_array_add(out, cli_json_str(amn_matrix_target(ctx, j)));
    json_object *matrix = json_object_new_object();
    json_object_object_add(matrix, "inputs", in);
    json_object_object_add(matrix, "targets", out);
    json_object_object_add(root, "matrix", matrix);
    cli_json_print(root);
    return EXIT_OK;
}

int cmd_plugins(const amn_ctx *ctx, const cli_args *a) {
    if (a->json) return print_json(ctx);
    size_t n = amn_ctx_plugin_count(ctx);
    printf("Plugins (%zu found):\n", n);
    for (size_t i = 0; i < n; i++) {
        amn_plugin_info pi = {.struct_size = sizeof(amn_plugin_info)};
        amn_ctx_plugin(ctx, i, &pi);
        if (strcmp(pi.status, "loaded") != 0) {
            printf("  %-12s %-9s %s\n               %s\n", pi.name, pi.status, pi.file,
                   pi.reason ? pi.reason : "");
            continue;
        }
        printf("  %-12s %-9s %s  ABI %u.%u  %s\n", pi.name, pi.version, pi.file, pi.abi_major,
               pi.abi_minor, pi.license);
        for (size_t k = 0; k < pi.n_formats; k++) {
            const amn_format *f = pi.formats[k];
            printf("               format %-12s [%s%s%s] %s\n", f->name, f->open ? "read " : "",
                   f->inspect ? "inspect " : "", f->writer ? "write" : "", f->description);
            const char *const *opts = f->writer && AMN_HAS_FIELD(f->writer, amn_writer, options)
                                          ? f->writer->options
                                          : NULL;
            for (size_t o = 0; opts && opts[o]; o++)
                printf("%s%s%s",
                       o ? ", " : "                      writer options (--opt): ", opts[o],
                       opts[o + 1] ? "" : "\n");
        }
        for (size_t k = 0; k < pi.n_resolvers; k++)
            printf("               input  %-12s %s\n", pi.resolvers[k]->scheme,
                   pi.resolvers[k]->description ? pi.resolvers[k]->description : "");
        for (size_t k = 0; k < pi.n_schemes; k++) {
            printf("               scheme %-12s %s\n", pi.schemes[k]->name,
                   pi.schemes[k]->description ? pi.schemes[k]->description : "");
            const amn_encoder *e = amn_scheme_encoder(pi.schemes[k]);
            if (!e) continue;
            printf("               encode %-12s", pi.schemes[k]->name);
            for (size_t t = 0; e->targets[t]; t++) printf(" %s", e->targets[t]);
            printf("   (amn forget --to TARGET)\n");
        }
    }
    size_t ni = amn_matrix_inputs(ctx), nt = amn_matrix_targets(ctx);
    printf("\nConversion matrix (input x target; every quantized scheme listed above is "
           "dequantized on the way):\n  %-14s",
           "");
    for (size_t j = 0; j < nt; j++) printf(" %-12s", amn_matrix_target(ctx, j));
    printf("\n");
    for (size_t i = 0; i < ni; i++) {
        printf("  %-14s", amn_matrix_input(ctx, i));
        for (size_t j = 0; j < nt; j++) printf(" %-12s", "yes");
        printf("\n");
    }
    if (!ni || !nt) printf("  (none: no readable or no writable format is loaded)\n");
    return EXIT_OK;
}
