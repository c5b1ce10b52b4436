/* npz_scan.c — `amn scan` of .npz / .npy: the ZIP container's ambiguities,
 * and object arrays, whose data is a pickle numpy.load(allow_pickle=True)
 * would run: scanned (never run) through the kit's pickle scanner. Arrays
 * of plain dtypes are only counted; their data is never read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/kit/pickle_scan.h"
#include "amn/kit/zip_reader.h"

#include "npy_header.h"
#include "npz_scan.h"

#define NPZ_HEADER_PREFIX (65536u + 16u)

typedef struct counts {
    uint64_t plain;
} counts;

/* One array whose first `avail` bytes are at p (the whole member when it
 * is an object array). */
static int scan_array(const uint8_t *head, size_t avail, const char *name,
                      const uint8_t *(*whole)(void *ctx, size_t *n, amn_error *err), void *ctx,
                      const amn_limits *lim, counts *c, amn_scan_report *r, amn_error *err) {
    npy_header h;
    amn_error e2 = {0};
    int rc = npy_parse_header(head, avail, name, &h, &e2);
    if (rc == AMN_OK) {
        c->plain++;
        return AMN_OK;
    }
    if (rc == AMN_E_NOMEM) return amn_error_set(err, rc, "%s", e2.msg);
    if (rc != AMN_E_DISALLOWED) /* not an object array: a dtype or header numpy may refuse */
        return amn_scan_add(r, rc != AMN_E_UNSUPPORTED,
                            rc == AMN_E_UNSUPPORTED ? "structure" : "malformed", name,
                            AMN_SCAN_NO_OFFSET, err, "%s", e2.msg);
    rc = amn_scan_add(r, true, "object", name, AMN_SCAN_NO_OFFSET, err, "%s",
                      "object array: its data is a pickle numpy.load(allow_pickle=True) runs");
    unsigned major, minor;
    uint64_t off;
    if (rc != AMN_OK || npy_read_preamble(head, avail, name, &major, &minor, &off, NULL) != AMN_OK)
        return rc;
    size_t n = 0;
    const uint8_t *all = whole(ctx, &n, &e2);
    if (!all) {
        if (e2.code == AMN_E_NOMEM) return amn_error_set(err, AMN_E_NOMEM, "%s", e2.msg);
        return amn_scan_add(r, true, "malformed", name, AMN_SCAN_NO_OFFSET, err, "%s", e2.msg);
    }
    if (off > n) return AMN_OK;
    pk_scan_opts o = {.where = name};
    return pk_scan(all + off, n - (size_t)off, lim, &o, r, err);
}

/* ---- a lone .npy: the mapping itself ------------------------------------------ */

typedef struct whole_map {
    const uint8_t *p;
    size_t n;
} whole_map;

static const uint8_t *map_whole(void *ctx, size_t *n, amn_error *err) {
    (void)err;
    whole_map *w = ctx;
    *n = w->n;
    return w->p;
}

/* ---- an .npz member: read (inflated) on demand ------------------------------------- */

typedef struct whole_member {
    const amn_source *src;
    const zip_dir *d;
    const zip_entry *e;
    const amn_limits *lim;
    uint8_t *buf;
} whole_member;

static const uint8_t *member_whole(void *ctx, size_t *n, amn_error *err) {
    whole_member *w = ctx;
    if (zip_read_member(w->src, w->d, w->e, w->lim->max_header_bytes, &w->buf, err) != AMN_OK)
        return NULL;
    *n = (size_t)w->e->usize;
    return w->buf;
}

static int scan_npz(const amn_scan_args *a, const uint8_t *p, uint64_t size, counts *c,
                    amn_scan_report *r, amn_error *err) {
    zip_memsrc ms;
    zip_memsrc_init(&ms, p, size, a->path);
    zip_dir d;
    amn_error e2 = {0};
    int rc = zip_dir_read(&ms.src, a->limits, &d, &e2);
    if (rc == AMN_E_DISALLOWED)
        return amn_scan_add(r, true, "container", "", AMN_SCAN_NO_OFFSET, err, "%s", e2.msg);
    if (rc != AMN_OK) {
        if (err) *err = e2;
        return rc;
    }
    uint8_t *head = malloc(NPZ_HEADER_PREFIX);
    if (!head) {
        zip_dir_free(&d);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; rc == AMN_OK && i < d.count; i++) {
        const zip_entry *e = &d.entries[i];
        if (e->name_len && e->name[e->name_len - 1] == '/') continue;
        if (!zip_name_ends(e->name, e->name_len, ".npy")) {
            rc = amn_scan_add(r, false, "structure", e->name, AMN_SCAN_NO_OFFSET, err, "%s",
                              "not an .npy member: numpy.load returns its bytes");
            continue;
        }
        size_t got = 0;
        amn_error e3 = {0};
        if (zip_inflate_prefix(&ms.src, e, e->data_off, head, NPZ_HEADER_PREFIX, &got, &e3) !=
            AMN_OK) {
            rc = amn_scan_add(r, true, "malformed", e->name, AMN_SCAN_NO_OFFSET, err, "%s", e3.msg);
            continue;
        }
        whole_member w = {&ms.src, &d, e, a->limits, NULL};
        rc = scan_array(head, got, e->name, member_whole, &w, a->limits, c, r, err);
        free(w.buf);
    }
    free(head);
    zip_dir_free(&d);
    return rc;
}

int npz_scan(const amn_scan_args *a, amn_scan_report *r, amn_error *err) {
    if (!a->map) return amn_error_set(err, AMN_E_INVALID, "npz: a directory is not an archive");
    const uint8_t *p = amn_map_data(a->map);
    uint64_t size = amn_map_size(a->map);
    counts c = {0};
    int rc;
    if (npy_has_magic(p, size)) {
        whole_map w = {p, (size_t)size};
        const char *base = strrchr(a->path, '/');
        rc = scan_array(p, (size_t)size, base ? base + 1 : a->path, map_whole, &w, a->limits, &c, r,
                        err);
    } else {
        rc = scan_npz(a, p, size, &c, r, err);
    }
    if (rc == AMN_OK && c.plain)
        rc = amn_scan_add(r, false, "structure", "", AMN_SCAN_NO_OFFSET, err,
                          "%llu arrays of plain dtypes (headers checked; no pickle)",
                          (unsigned long long)c.plain);
    return rc;
}
