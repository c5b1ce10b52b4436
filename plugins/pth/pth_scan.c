/* pth_scan.c — `amn scan` of PyTorch checkpoints: the ZIP container (its
 * ambiguities, TorchScript and stray pickle members, unreferenced records)
 * and every pickle in it through the kit's scanner, which never runs them.
 * Legacy (pre-1.6) checkpoints and raw pickles are scanned pickle by
 * pickle. Tensor data is never read: only the directory, the pickles and
 * the first bytes of records no tensor references. */
#include "pth_scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/kit/pickle_scan.h"
#include "amn/kit/zip_reader.h"

#define LEGACY_PICKLES 5

static bool starts_fold(const char *s, size_t n, const char *prefix) {
    size_t k = strlen(prefix);
    if (n < k) return false;
    for (size_t i = 0; i < k; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c + 32);
        if (c != prefix[i]) return false;
    }
    return true;
}

const char *pth_member_anomaly(const char *rel, size_t n) {
    if (n == 13 && starts_fold(rel, n, "constants.pkl"))
        return "a TorchScript archive (constants.pkl): torch.load would run it through "
               "torch.jit.load";
    if (starts_fold(rel, n, "code/")) return "TorchScript code (code/)";
    if (starts_fold(rel, n, "extra/")) return "TorchScript extra files (extra/)";
    if (zip_name_ends_fold(rel, n, ".pkl") || zip_name_ends_fold(rel, n, ".debug_pkl"))
        return "a second pickle member";
    if (zip_name_ends_fold(rel, n, ".py")) return "Python source";
    return NULL;
}

/* ---- storage keys the pickle references ------------------------------------ */

typedef struct keyset {
    char **keys;
    size_t n, cap;
    bool oom;
} keyset;

static void on_key(void *ctx, const char *k, size_t len) {
    keyset *ks = ctx;
    if (ks->oom) return;
    if (ks->n == ks->cap) {
        size_t cap = ks->cap ? ks->cap * 2 : 64;
        char **a = realloc(ks->keys, cap * sizeof *a);
        if (!a) {
            ks->oom = true;
            return;
        }
        ks->keys = a;
        ks->cap = cap;
    }
    char *d = malloc(len + 1);
    if (!d) {
        ks->oom = true;
        return;
    }
    memcpy(d, k, len);
    d[len] = '\0';
    ks->keys[ks->n++] = d;
}

static int cmp_key(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* After the pickle: sorted once, then searched per record. */
static void keyset_sort(keyset *ks) {
    if (ks->n) qsort(ks->keys, ks->n, sizeof *ks->keys, cmp_key);
}

static bool keyset_has(const keyset *ks, const char *k) {
    return ks->n && bsearch(&k, ks->keys, ks->n, sizeof *ks->keys, cmp_key) != NULL;
}

static void keyset_free(keyset *ks) {
    for (size_t i = 0; i < ks->n; i++) free(ks->keys[i]);
    free(ks->keys);
}

/* ---- pickles ------------------------------------------------------------------- */

/* A read failure of one member is a finding; only running out of memory
 * stops the scan. */
static int finding_from_error(amn_scan_report *r, const char *where, const amn_error *e,
                              amn_error *err) {
    if (e->code == AMN_E_NOMEM) return amn_error_set(err, AMN_E_NOMEM, "%s", e->msg);
    return amn_scan_add(r, true, e->code == AMN_E_DISALLOWED ? "container" : "malformed", where,
                        AMN_SCAN_NO_OFFSET, err, "%s", e->msg);
}

static int scan_member(const amn_source *src, const zip_dir *d, const zip_entry *e,
                       const amn_limits *lim, keyset *keys, amn_scan_report *r, amn_error *err) {
    uint8_t *data = NULL;
    amn_error e2 = {0};
    if (zip_read_member(src, d, e, lim->max_header_bytes, &data, &e2) != AMN_OK)
        return finding_from_error(r, e->name, &e2, err);
    pk_scan_opts o = {.where = e->name, .on_storage_key = keys ? on_key : NULL, .key_ctx = keys};
    int rc = pk_scan(data, (size_t)e->usize, lim, &o, r, err);
    free(data);
    if (rc == AMN_OK && keys && keys->oom) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    return rc;
}

/* ---- ZIP checkpoints ----------------------------------------------------------- */

/* The directory is ambiguous, so there is no one list of members: walk the
 * local headers from the start instead (what a streaming reader sees) and
 * scan every pickle found, so the report still names their globals. */
static int scan_local_walk(const uint8_t *p, uint64_t size, const amn_limits *lim,
                           amn_scan_report *r, amn_error *err) {
    uint64_t pos = 0;
    int rc = AMN_OK;
    for (unsigned members = 0; rc == AMN_OK && size - pos >= 30 && zip_is_local_header(p + pos, 4);
         members++) {
        if (members >= lim->max_tensors) break;
        const uint8_t *h = p + pos;
        uint16_t flags = (uint16_t)(h[6] | h[7] << 8), method = (uint16_t)(h[8] | h[9] << 8);
        uint64_t csize =
            (uint64_t)h[18] | (uint64_t)h[19] << 8 | (uint64_t)h[20] << 16 | (uint64_t)h[21] << 24;
        uint64_t usize =
            (uint64_t)h[22] | (uint64_t)h[23] << 8 | (uint64_t)h[24] << 16 | (uint64_t)h[25] << 24;
        size_t nlen = (size_t)(h[26] | h[27] << 8), xlen = (size_t)(h[28] | h[29] << 8);
        uint64_t data = pos + 30 + nlen + xlen;
        if (data > size || (flags & 8u) || csize > size - data) break;
        char name[512];
        snprintf(name, sizeof name, "%.*s (local header at %llu)", (int)(nlen < 400 ? nlen : 400),
                 (const char *)h + 30, (unsigned long long)pos);
        bool pkl = zip_name_ends_fold((const char *)h + 30, nlen, ".pkl") ||
                   (method == ZIP_STORED && pk_looks_like_pickle(p + data, (size_t)csize));
        if (pkl && method == ZIP_STORED && csize <= lim->max_header_bytes) {
            pk_scan_opts o = {.where = name};
            rc = pk_scan(p + data, (size_t)csize, lim, &o, r, err);
        } else if (pkl && method == ZIP_DEFLATED && usize <= lim->max_header_bytes) {
            zip_entry e = {.name = name, .method = method, .csize = csize, .usize = usize};
            e.crc32 = (uint32_t)h[14] | (uint32_t)h[15] << 8 | (uint32_t)h[16] << 16 |
                      (uint32_t)h[17] << 24;
            uint8_t *buf = malloc(usize ? (size_t)usize : 1);
            if (!buf) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
            amn_error e2 = {0};
            if (zip_inflate_all(&e, p + data, buf, &e2) == AMN_OK) {
                pk_scan_opts o = {.where = name};
                rc = pk_scan(buf, (size_t)usize, lim, &o, r, err);
            } else {
                rc = finding_from_error(r, name, &e2, err);
            }
            free(buf);
        }
        pos = data + csize;
    }
    return rc;
}

static int scan_records(const amn_source *src, const zip_dir *d, const char *prefix,
                        const amn_limits *lim, const keyset *keys, amn_scan_report *r,
                        amn_error *err) {
    size_t plen = strlen(prefix);
    int rc = AMN_OK;
    for (size_t i = 0; rc == AMN_OK && i < d->count; i++) {
        const zip_entry *e = &d->entries[i];
        if (e->name_len < plen + 5 || memcmp(e->name, prefix, plen) != 0 ||
            memcmp(e->name + plen, "data/", 5) != 0 || keyset_has(keys, e->name + plen + 5))
            continue;
        uint8_t head[4] = {0};
        size_t got = 0;
        amn_error e2 = {0};
        if (zip_inflate_prefix(src, e, e->data_off, head, sizeof head, &got, &e2) != AMN_OK) {
            rc = finding_from_error(r, e->name, &e2, err);
            continue;
        }
        if (pk_looks_like_pickle(head, got)) {
            rc = amn_scan_add(r, true, "container", e->name, 0, err, "%s",
                              "a record no tensor references holds a pickle");
            if (rc == AMN_OK) rc = scan_member(src, d, e, lim, NULL, r, err);
        } else if (zip_is_local_header(head, got)) {
            rc = amn_scan_add(r, true, "container", e->name, 0, err, "%s",
                              "a record no tensor references holds a ZIP archive");
        } else {
            rc = amn_scan_add(r, false, "container", e->name, AMN_SCAN_NO_OFFSET, err, "%s",
                              "a record no tensor references (never read by torch.load)");
        }
    }
    return rc;
}

static int scan_zip(const amn_scan_args *a, const uint8_t *p, uint64_t size, amn_scan_report *r,
                    amn_error *err) {
    zip_memsrc ms;
    zip_memsrc_init(&ms, p, size, a->path);
    zip_dir d;
    amn_error e2 = {0};
    int rc = zip_dir_read(&ms.src, a->limits, &d, &e2);
    if (rc == AMN_E_DISALLOWED) {
        rc = amn_scan_add(r, true, "container", "", AMN_SCAN_NO_OFFSET, err, "%s", e2.msg);
        return rc == AMN_OK ? scan_local_walk(p, size, a->limits, r, err) : rc;
    }
    if (rc != AMN_OK) {
        if (err) *err = e2;
        return rc;
    }
    const zip_entry *pkl = NULL;
    for (size_t i = 0; rc == AMN_OK && i < d.count; i++) {
        const zip_entry *e = &d.entries[i];
        if (!zip_name_is_pickle(e->name, e->name_len)) continue;
        if (pkl)
            rc = amn_scan_add(r, true, "container", e->name, AMN_SCAN_NO_OFFSET, err,
                              "a second data.pkl (the first is '%s')", pkl->name);
        else
            pkl = e;
    }
    if (rc == AMN_OK && !pkl)
        rc = amn_error_set(err, AMN_E_PARSE,
                           "%s: ZIP archive without <root>/data.pkl: not a PyTorch checkpoint",
                           a->path);
    if (rc != AMN_OK) {
        zip_dir_free(&d);
        return rc;
    }
    char prefix[4096];
    size_t plen = pkl->name_len - 8;
    snprintf(prefix, sizeof prefix, "%.*s", (int)plen, pkl->name);
    rc = amn_scan_add(r, false, "container", "", AMN_SCAN_NO_OFFSET, err,
                      "PyTorch ZIP checkpoint: %zu members under '%s'", d.count, prefix);
    keyset keys = {0};
    if (rc == AMN_OK) rc = scan_member(&ms.src, &d, pkl, a->limits, &keys, r, err);
    for (size_t i = 0; rc == AMN_OK && i < d.count; i++) {
        const zip_entry *e = &d.entries[i];
        if (e == pkl) continue;
        bool inside = e->name_len >= plen && memcmp(e->name, prefix, plen) == 0;
        const char *why = inside ? pth_member_anomaly(e->name + plen, e->name_len - plen) : NULL;
        if (!inside)
            rc = amn_scan_add(r, true, "container", e->name, AMN_SCAN_NO_OFFSET, err,
                              "a member outside the checkpoint's root '%s'", prefix);
        else if (why)
            rc = amn_scan_add(r, true, "container", e->name, AMN_SCAN_NO_OFFSET, err, "%s", why);
        if (rc == AMN_OK && zip_name_ends_fold(e->name, e->name_len, ".pkl"))
            rc = scan_member(&ms.src, &d, e, a->limits, NULL, r, err);
    }
    keyset_sort(&keys);
    if (rc == AMN_OK) rc = scan_records(&ms.src, &d, prefix, a->limits, &keys, r, err);
    keyset_free(&keys);
    zip_dir_free(&d);
    return rc;
}

/* ---- legacy checkpoints and raw pickles ------------------------------------------ */

/* Pre-1.6: five pickles (magic, protocol, system info, the object, the
 * storage keys), then raw storages, which are not read. */
static int scan_legacy(const uint8_t *p, uint64_t size, const amn_limits *lim, amn_scan_report *r,
                       amn_error *err) {
    int rc = amn_scan_add(r, false, "container", "", AMN_SCAN_NO_OFFSET, err, "%s",
                          "legacy (pre-1.6) PyTorch checkpoint: pickles, then raw storages");
    uint64_t pos = 0;
    for (int i = 0; rc == AMN_OK && i < LEGACY_PICKLES && pos < size; i++) {
        char where[32];
        snprintf(where, sizeof where, "pickle %d at %llu", i + 1, (unsigned long long)pos);
        size_t used = 0;
        uint64_t n = size - pos;
        if (n > lim->max_header_bytes) n = lim->max_header_bytes;
        pk_scan_opts o = {.where = where, .stop_at_stop = 1, .consumed = &used};
        size_t before = amn_scan_count(r);
        rc = pk_scan(p + pos, (size_t)n, lim, &o, r, err);
        pos += used;
        /* A malformed pickle ends the walk: what follows cannot be placed. */
        for (size_t k = before; k < amn_scan_count(r); k++)
            if (strcmp(amn_scan_get(r, k)->kind, "malformed") == 0) return rc;
    }
    return rc;
}

static int scan_raw(const uint8_t *p, uint64_t size, const amn_limits *lim, amn_scan_report *r,
                    amn_error *err) {
    if (size > lim->max_header_bytes)
        return amn_error_set(err, AMN_E_LIMIT, "pickle of %llu bytes exceeds %llu",
                             (unsigned long long)size, (unsigned long long)lim->max_header_bytes);
    int rc = amn_scan_add(r, false, "container", "", AMN_SCAN_NO_OFFSET, err, "%s",
                          "a raw pickle (torch.load would unpickle it as a legacy file)");
    size_t used = 0;
    pk_scan_opts o = {.where = "", .consumed = &used};
    if (rc == AMN_OK) rc = pk_scan(p, (size_t)size, lim, &o, r, err);
    if (rc == AMN_OK && used < size && size - used >= 4 && zip_is_local_header(p + used, 4))
        rc = amn_scan_add(r, true, "container", "", used, err, "%s",
                          "a ZIP archive follows the pickle (pickle/ZIP polyglot): torch.load "
                          "runs the pickle");
    return rc;
}

int pth_scan(const amn_scan_args *a, amn_scan_report *r, amn_error *err) {
    if (!a->map) return amn_error_set(err, AMN_E_INVALID, "pth: a directory is not a checkpoint");
    const uint8_t *p = amn_map_data(a->map);
    uint64_t size = amn_map_size(a->map);
    if (pth_is_legacy(p, size)) return scan_legacy(p, size, a->limits, r, err);
    if (size >= 4 && zip_is_local_header(p, 4)) return scan_zip(a, p, size, r, err);
    return scan_raw(p, size, a->limits, r, err);
}
