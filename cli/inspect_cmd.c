/* amn inspect FILE... — header-only reports of several files in one process,
 * so a batch pays process start and plugin loading once. One file behaves as
 * it always has (report.c); with several, each report starts with "File:",
 * a file that fails is reported (stderr, or its entry under --json) and the
 * rest still run, and the exit code is the first failure's. */
#include <stdlib.h>

#include <json-c/json.h>

#include "cli.h"

/* {"file": ..., "error": {"class", "exit_code", "message"}}, the class names of
 * a --json error object. */
static json_object *error_entry(const char *input, const amn_error *err) {
    json_object *o = json_object_new_object(), *e = json_object_new_object();
    const int code = cli_exit_code(err->code);
    json_object_object_add(o, "file", cli_json_str(input));
    json_object_object_add(e, "class", json_object_new_string(cli_exit_class(code)));
    json_object_object_add(e, "exit_code", json_object_new_int(code));
    json_object_object_add(e, "message", cli_json_str(err->msg));
    json_object_object_add(o, "error", e);
    return o;
}

int cmd_inspect(const amn_ctx *ctx, const cli_args *a) {
    if (a->n_inputs <= 1) return cmd_parse(ctx, a, true);
    json_object *files = a->json ? json_object_new_array() : NULL;
    int status = EXIT_OK;
    for (size_t i = 0; i < a->n_inputs; i++) {
        const char *input = a->inputs[i];
        amn_error err = {0};
        json_object *doc = NULL;
        if (!a->json) {
            if (i) putchar('\n');
            printf("File:        %s\n", input);
        }
        int rc = cli_report(ctx, a, input, true, a->json ? &doc : NULL, &err);
        if (rc) {
            const int code = cli_exit_code(rc);
            if (status == EXIT_OK) status = code;
            if (a->json) {
                doc = error_entry(input, &err);
            } else {
                fflush(stdout); /* the error follows its File: line */
                cli_fail(&err);
            }
        }
        if (doc) json_object_array_add(files, doc);
    }
    if (a->json) {
        json_object *root = json_object_new_object();
        json_object_object_add(root, "files", files);
        cli_json_print(root);
    } else {
        fflush(stdout);
    }
    return status;
}
