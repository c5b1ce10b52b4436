/* scan.c — the scan report, and amn_scan: the format's own scan slot, or
 * a structural check (header-only inspection) for formats that carry no
 * code. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "amn/context.h"
#include "amn/scan.h"
#include "archive_internal.h"
#include "io_internal.h"

struct amn_scan_report {
    char *format;
    amn_scan_finding *items;
    size_t n, cap, dropped;
    bool unsafe;
};

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int amn_scan_add(amn_scan_report *r, bool unsafe, const char *kind, const char *where,
                 uint64_t offset, amn_error *err, const char *fmt, ...) {
    if (unsafe) r->unsafe = true;
    if (r->n >= AMN_SCAN_MAX_FINDINGS) {
        r->dropped++;
        return AMN_OK;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        amn_scan_finding *f = realloc(r->items, cap * sizeof *f);
        if (!f) return amn_error_set(err, AMN_E_NOMEM, "scan: out of memory");
        r->items = f;
        r->cap = cap;
    }
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    /* Texts may quote the file: keep them printable. */
    for (char *c = what; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    amn_scan_finding *f = &r->items[r->n];
    f->kind = dup_str(kind);
    f->what = dup_str(what);
    f->where = dup_str(where ? where : "");
    f->offset = offset;
    f->unsafe = unsafe;
    if (!f->kind || !f->what || !f->where) {
        free((char *)f->kind);
        free((char *)f->what);
        free((char *)f->where);
        return amn_error_set(err, AMN_E_NOMEM, "scan: out of memory");
    }
    r->n++;
    return AMN_OK;
}

void amn_scan_free(amn_scan_report *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n; i++) {
        free((char *)r->items[i].kind);
        free((char *)r->items[i].what);
        free((char *)r->items[i].where);
    }
    free(r->items);
    free(r->format);
    free(r);
}

const char *amn_scan_format(const amn_scan_report *r) {
    return r->format ? r->format : "";
}
bool amn_scan_unsafe(const amn_scan_report *r) {
    return r->unsafe;
}
size_t amn_scan_count(const amn_scan_report *r) {
    return r->n;
}
size_t amn_scan_dropped(const amn_scan_report *r) {
    return r->dropped;
}
const amn_scan_finding *amn_scan_get(const amn_scan_report *r, size_t i) {
    return i < r->n ? &r->items[i] : NULL;
}

/* A format that carries no code: safe once its header reads. */
static int scan_structure(const amn_ctx *ctx, const char *path, const amn_format *f,
                          const amn_limits *lim, amn_scan_report *r, amn_error *err) {
    amn_model *m = NULL;
    int rc = amn_inspect(ctx, path, f->name, lim, &m, err);
    if (rc != AMN_OK) return rc;
    rc = amn_scan_add(r, false, "structure", "", AMN_SCAN_NO_OFFSET, err,
                      "%s header checked: %zu tensors; the format carries no code", f->name,
                      amn_model_tensor_count(m));
    amn_model_free(m);
    return rc;
}

/* Each model file of an archive (archive_internal.h) as a file of its own,
 * the findings placed by "<archive>/<member>". */
static int scan_archive(const amn_ctx *ctx, amni_archive *A, const char *from,
                        const amn_limits *lim, amn_scan_report *r, amn_error *err) {
    int rc = AMN_OK;
    for (size_t i = 0; !rc && i < amni_archive_count(A); i++) {
        const char *label = amni_archive_label(A, i);
        const amn_format *f;
        if ((rc = amni_archive_detect(ctx, A, i, from, &f, err))) break;
        if (i == 0 && !(r->format = dup_str(f->name)))
            return amn_error_set(err, AMN_E_NOMEM, "scan: out of memory");
        /* Which member the findings after this one are about. */
        if ((rc = amn_scan_add(r, false, "member", label, AMN_SCAN_NO_OFFSET, err,
                               "a model file of the archive, read as %s", f->name)))
            break;
        amn_format_scan_fn_t scan = amn_format_scan(f);
        if (scan && !amni_archive_whole(A, i)) return AMNI_NEEDS_WHOLE;
        if (scan) {
            amn_map *view;
            if ((rc = amni_map_view(amni_archive_data(A, i), amni_archive_size(A, i), label, &view,
                                    err)))
                break;
            amn_scan_args a = {.path = label, .map = view, .limits = lim};
            rc = scan(&a, r, err);
            amn_map_close(view);
            continue;
        }
        amn_model *m = NULL;
        if (!f->inspect)
            rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                               "unsupported: format %s has no header-only inspection", f->name);
        if (rc || (rc = amni_archive_inspect(A, i, f, &m, err))) break;
        rc = amn_scan_add(r, false, "structure", label, AMN_SCAN_NO_OFFSET, err,
                          "%s header checked: %zu tensors; the format carries no code", f->name,
                          amn_model_tensor_count(m));
        amn_model_free(m);
    }
    return rc;
}

int amn_scan(const amn_ctx *ctx, const char *path, const char *from, const amn_limits *limits,
             amn_scan_report **out, amn_error *err) {
    *out = NULL;
    amn_limits def;
    if (!limits) {
        amn_limits_default(&def);
        limits = &def;
    }
    /* An archive's model files by their headers first (a compressed one's
     * are then never decompressed to disk), loaded whole only when a
     * member must be read further: a format with code to scan (a .pth's
     * pickle), or a header that needs random access. */
    amni_archive *A = NULL;
    int rc = amni_archive_load(path, limits, true, &A, err);
    for (int whole = 0; rc != AMNI_NOT_ARCHIVE; whole++) {
        if (rc) return rc;
        amn_scan_report *r = calloc(1, sizeof *r);
        rc = r ? scan_archive(ctx, A, from, limits, r, err)
               : amn_error_set(err, AMN_E_NOMEM, "scan: out of memory");
        amni_archive_free(A);
        if (rc == AMNI_NEEDS_WHOLE && !whole) {
            amn_scan_free(r);
            rc = amni_archive_load(path, limits, false, &A, err);
            continue;
        }
        if (rc) {
            amn_scan_free(r);
            return rc > 0 ? amn_error_set(err, AMN_E_UNSUPPORTED,
                                          "unsupported: %s: a member needs random access", path)
                          : rc;
        }
        *out = r;
        return AMN_OK;
    }
    const amn_format *f;
    rc = amn_ctx_detect(ctx, path, from, &f, err);
    if (rc) return rc;
    amn_scan_report *r = calloc(1, sizeof *r);
    if (!r || !(r->format = dup_str(f->name))) {
        free(r);
        return amn_error_set(err, AMN_E_NOMEM, "scan: out of memory");
    }
    struct stat st;
    bool is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    amn_format_scan_fn_t scan = amn_format_scan(f);
    if (!scan || is_dir) {
        rc = scan_structure(ctx, path, f, limits, r, err);
    } else {
        amn_map *map = NULL;
        rc = amni_map_open_lazy(path, &map, err);
        if (rc == AMN_OK) {
            amn_scan_args a = {.path = path, .map = map, .limits = limits};
            rc = scan(&a, r, err);
            amn_map_close(map);
        }
    }
    if (rc != AMN_OK) {
        amn_scan_free(r);
        return rc;
    }
    *out = r;
    return AMN_OK;
}
