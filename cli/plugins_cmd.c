/* `amn plugins`: what was found, what it provides, and the conversion
 * matrix that follows. */
#include <stdio.h>
#include <string.h>

#include "amn/plugin.h"
#include "cli.h"

int cmd_plugins(const amn_ctx *ctx, const cli_args *a) {
    (void)a;
    size_t n = amn_ctx_plugin_count(ctx);
    printf("Plugins (%zu found):\n", n);
    for (size_t i = 0; i < n; i++) {
        amn_plugin_info pi;
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
        for (size_t k = 0; k < pi.n_schemes; k++)
            printf("               scheme %-12s %s\n", pi.schemes[k]->name,
                   pi.schemes[k]->description ? pi.schemes[k]->description : "");
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
