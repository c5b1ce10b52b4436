/* amn scan FILE... — audit files without loading them (amn/scan.h): every
 * finding, a verdict per file, exit 0 when all are safe, 5 when any is
 * unsafe, 1 when one could not be read (and none is unsafe). */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"

#define SCAN_MAX_FILES 4096

typedef enum verdict { V_SAFE, V_UNSAFE, V_UNREADABLE } verdict;

static const char *verdict_name(verdict v) {
    return v == V_SAFE ? "safe" : v == V_UNSAFE ? "unsafe" : "unreadable";
}

/* Findings quote file contents: print control bytes escaped. */
static void put_escaped(const char *s) {
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c < 0x20 || *c == 0x7f)
            printf("\\x%02x", *c);
        else
            putchar(*c);
    }
}

static void print_text(const char *path, const amn_scan_report *r, verdict v,
                       const amn_error *err) {
    put_escaped(path);
    if (v == V_UNREADABLE) {
        printf(": unreadable (%s: ", amn_error_class(err->code));
        put_escaped(err->msg);
        printf(")\n");
        return;
    }
    printf(": %s (%s)\n", verdict_name(v), amn_scan_format(r));
    for (size_t i = 0; i < amn_scan_count(r); i++) {
        const amn_scan_finding *f = amn_scan_get(r, i);
        printf("  %-6s %-13s ", f->unsafe ? "UNSAFE" : "ok", f->kind);
        if (f->where[0]) {
            put_escaped(f->where);
            if (f->offset != AMN_SCAN_NO_OFFSET) printf("@%llu", (unsigned long long)f->offset);
            printf(": ");
        } else if (f->offset != AMN_SCAN_NO_OFFSET) {
            printf("@%llu: ", (unsigned long long)f->offset);
        }
        put_escaped(f->what);
        putchar('\n');
    }
    if (amn_scan_dropped(r)) printf("  (%zu more findings not listed)\n", amn_scan_dropped(r));
}

static json_object *file_json(const char *path, const amn_scan_report *r, verdict v,
                              const amn_error *err) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "path", json_object_new_string(path));
    json_object_object_add(o, "verdict", json_object_new_string(verdict_name(v)));
    if (v == V_UNREADABLE) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "class", json_object_new_string(amn_error_class(err->code)));
        json_object_object_add(e, "message", json_object_new_string(err->msg));
        json_object_object_add(o, "error", e);
        return o;
    }
    json_object_object_add(o, "format", json_object_new_string(amn_scan_format(r)));
    json_object *list = json_object_new_array();
    for (size_t i = 0; i < amn_scan_count(r); i++) {
        const amn_scan_finding *f = amn_scan_get(r, i);
        json_object *x = json_object_new_object();
        json_object_object_add(x, "kind", json_object_new_string(f->kind));
        json_object_object_add(x, "what", json_object_new_string(f->what));
        json_object_object_add(x, "where", json_object_new_string(f->where));
        json_object_object_add(x, "offset",
                               f->offset == AMN_SCAN_NO_OFFSET ? NULL
                                                               : json_object_new_uint64(f->offset));
        json_object_object_add(x, "unsafe", json_object_new_boolean(f->unsafe));
        json_object_array_add(list, x);
    }
    json_object_object_add(o, "findings", list);
    json_object_object_add(o, "findings_not_listed", json_object_new_uint64(amn_scan_dropped(r)));
    return o;
}

int cmd_scan(const amn_ctx *ctx, int argc, char **argv) {
    const char *files[SCAN_MAX_FILES], *from = NULL;
    size_t n = 0;
    bool json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--from") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "amn scan: --from needs a value\n(see amn scan --help)\n");
                return EXIT_USAGE;
            }
            from = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "amn scan: unknown option %s\n(see amn scan --help)\n", argv[i]);
            return EXIT_USAGE;
        } else if (n == SCAN_MAX_FILES) {
            fprintf(stderr, "amn scan: more than %d files\n", SCAN_MAX_FILES);
            return EXIT_USAGE;
        } else {
            files[n++] = argv[i];
        }
    }
    if (!n) {
        fprintf(stderr, "amn scan: missing FILE\n(see amn scan --help)\n");
        return EXIT_USAGE;
    }
    json_object *all = json ? json_object_new_array() : NULL;
    bool any_unsafe = false, any_unreadable = false;
    for (size_t i = 0; i < n; i++) {
        amn_scan_report *r = NULL;
        amn_error err = {0};
        int rc = amn_scan(ctx, files[i], from, NULL, &r, &err);
        verdict v = rc != AMN_OK ? V_UNREADABLE : amn_scan_unsafe(r) ? V_UNSAFE : V_SAFE;
        any_unsafe |= v == V_UNSAFE;
        any_unreadable |= v == V_UNREADABLE;
        if (json)
            json_object_array_add(all, file_json(files[i], r, v, &err));
        else
            print_text(files[i], r, v, &err);
        amn_scan_free(r);
    }
    if (json) {
        json_object *top = json_object_new_object();
        json_object_object_add(top, "files", all);
        json_object_object_add(top, "verdict",
                               json_object_new_string(any_unsafe       ? "unsafe"
                                                      : any_unreadable ? "unreadable"
                                                                       : "safe"));
        puts(json_object_to_json_string_ext(top, JSON_C_TO_STRING_PRETTY |
                                                     JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(top);
    }
    return any_unsafe ? EXIT_DISALLOWED : any_unreadable ? EXIT_PARSE : EXIT_OK;
}
