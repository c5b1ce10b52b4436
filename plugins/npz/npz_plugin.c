/* npz_plugin.c — NumPy .npz archives and lone .npy arrays.
 *
 * Stored members become views into the core's mapping; DEFLATE members
 * (np.savez_compressed) are inflated into model memory. Inspect reads the
 * central directory and each member's NPY header only.
 */
#include <stdlib.h>
#include <string.h>

#include "amn/checked.h"
#include "amn/plugin.h"

#include "npy_header.h"
#include "npz_scan.h"
#include "amn/kit/zip_reader.h"

static int npz_probe(const amn_probe_data *pd) {
    if (npy_has_magic(pd->head, pd->head_size)) {
        unsigned major, minor;
        uint64_t off;
        if (npy_read_preamble(pd->head, pd->head_size, "probe", &major, &minor, &off, NULL) ==
            AMN_OK)
            return AMN_PROBE_MAX;
        return AMN_PROBE_LIKELY;
    }
    zip_probe z;
    zip_probe_scan(pd, &z);
    if (!z.is_zip || z.cd_pkl) return AMN_PROBE_NONE;
    if (z.empty) return AMN_PROBE_WEAK + 5; /* np.savez() of nothing */
    if (z.first_name && zip_name_ends(z.first_name, z.first_len, ".npy"))
        return z.cd_seen && z.cd_npy == z.cd_seen ? AMN_PROBE_MAX - 5 : AMN_PROBE_LIKELY + 5;
    if (z.cd_npy) return AMN_PROBE_POSSIBLE + 10;
    return AMN_PROBE_NONE;
}

/* "dir/w.npy" -> "dir/w"; false for members that are not arrays. */
static bool member_array_name(const zip_entry *e, char *out, size_t cap) {
    if (!zip_name_ends(e->name, e->name_len, ".npy") || e->name_len - 4 >= cap) return false;
    memcpy(out, e->name, e->name_len - 4);
    out[e->name_len - 4] = '\0';
    return true;
}

/* A lone .npy takes its array name from the file name's stem. */
static void stem_of(const char *path, char *out, size_t cap) {
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path;
    if (!base || !*base) base = "array";
    size_t n = strlen(base);
    if (n > 4 && strcmp(base + n - 4, ".npy") == 0) n -= 4;
    if (n >= cap) n = cap - 1;
    memcpy(out, base, n);
    out[n] = '\0';
}

/* Header of one array whose first `avail` bytes (the whole member, or at
 * least the header for inspect) are at p; `size` is the member's size. */
static int parse_array(const uint8_t *p, size_t avail, uint64_t size, const char *name,
                       npy_header *h, amn_error *err) {
    int rc = npy_parse_header(p, avail, name, h, err);
    if (rc != AMN_OK) return rc;
    uint64_t need;
    if (!amn_add_u64(h->data_offset, h->nbytes, &need) || need != size)
        return amn_error_set(
            err, AMN_E_PARSE,
            "'%s': NPY header says %llu data bytes (shape x itemsize) but the "
            "member holds %llu after its header",
            name, (unsigned long long)h->nbytes,
            (unsigned long long)(size >= h->data_offset ? size - h->data_offset : 0));
    return AMN_OK;
}

static int add_array(amn_model *m, const char *name, const npy_header *h, const uint8_t *data,
                     uint64_t file_offset, amn_error *err) {
    amn_tensor t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.name = name;
    npy_header_to_tensor(h, &t);
    t.data = data;
    t.extent = data ? h->nbytes : 0;
    t.file_offset = file_offset;
    return amn_model_add_tensor(m, &t, err);
}

static int open_npy(const amn_open_args *a, const uint8_t *p, uint64_t size, amn_model *m,
                    amn_error *err) {
    char name[NPZ_NAME_MAX];
    stem_of(a->path, name, sizeof name);
    npy_header h;
    size_t avail = size > SIZE_MAX ? SIZE_MAX : (size_t)size;
    int rc = parse_array(p, avail, size, name, &h, err);
    if (rc != AMN_OK) return rc;
    rc = amn_model_set_label(m, "NPY array", err);
    if (rc != AMN_OK) return rc;
    return add_array(m, name, &h, p + h.data_offset, h.data_offset, err);
}

/* An array member: where its data lies, and the inflating job of a
 * deflated one. */
typedef struct npz_member {
    const zip_entry *e;
    uint64_t off;
    size_t job; /* index into the jobs, for a deflated member */
} npz_member;

/* The array members in directory order, each stored one checked against its
 * CRC-32 (numpy's reader, zipfile, refuses a member whose bytes do not
 * match; an inflated one is checked as it is inflated); other members are
 * notes. */
static int list_members(const amn_open_args *a, const amn_source *src, const zip_dir *d,
                        amn_model *m, npz_member *mem, size_t *n_mem, zip_keep_job *jobs,
                        size_t *n_jobs, amn_error *err) {
    char name[NPZ_NAME_MAX];
    for (size_t i = 0; i < d->count; i++) {
        const zip_entry *e = &d->entries[i];
        if (e->name_len && e->name[e->name_len - 1] == '/') continue; /* a directory */
        int rc;
        if (!member_array_name(e, name, sizeof name)) {
            if ((rc = amn_model_add_note(m, e->name, "not an .npy member; skipped", err)))
                return rc;
            continue;
        }
        if (*n_mem >= a->limits->max_tensors)
            return amn_error_set(err, AMN_E_LIMIT, "more than %llu arrays",
                                 (unsigned long long)a->limits->max_tensors);
        uint64_t off;
        if ((rc = zip_entry_data_offset(src, d, e, &off, err))) return rc;
        if (e->method == ZIP_STORED && (rc = zip_check_crc_map(e, a->map, off, err)))
            return amn_error_prefix(err, "%s: ", a->path ? a->path : "npz");
        mem[*n_mem] = (npz_member){e, off, *n_jobs};
        if (e->method == ZIP_DEFLATED) jobs[(*n_jobs)++] = (zip_keep_job){.e = e, .off = off};
        ++*n_mem;
    }
    return AMN_OK;
}

static int open_npz(const amn_open_args *a, const uint8_t *p, uint64_t size, amn_model *m,
                    amn_error *err) {
    zip_memsrc ms;
    zip_memsrc_init(&ms, p, size, a->path);
    zip_dir d;
    int rc = zip_dir_read(&ms.src, a->limits, &d, err);
    if (rc != AMN_OK) return rc;
    npz_member *mem = calloc(d.count ? d.count : 1, sizeof *mem);
    zip_keep_job *jobs = calloc(d.count ? d.count : 1, sizeof *jobs);
    size_t n_mem = 0, n_jobs = 0;
    uint64_t allocated = 0;
    rc = mem && jobs ? amn_model_set_label(m, "NPZ archive", err)
                     : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc) rc = list_members(a, &ms.src, &d, m, mem, &n_mem, jobs, &n_jobs, err);
    if (!rc) rc = zip_inflate_keep_all(jobs, n_jobs, a->map, m, a->limits, &allocated, err);
    char name[NPZ_NAME_MAX];
    for (size_t i = 0; rc == AMN_OK && i < n_mem; i++) {
        const zip_entry *e = mem[i].e;
        const bool stored = e->method == ZIP_STORED;
        const uint8_t *member = stored ? p + mem[i].off : jobs[mem[i].job].out;
        member_array_name(e, name, sizeof name);
        npy_header h;
        size_t avail = e->usize > SIZE_MAX ? SIZE_MAX : (size_t)e->usize;
        rc = parse_array(member, avail, e->usize, name, &h, err);
        if (rc != AMN_OK) break;
        uint64_t file_off = stored ? mem[i].off + h.data_offset : mem[i].off;
        rc = add_array(m, name, &h, member + h.data_offset, file_off, err);
    }
    free(jobs);
    free(mem);
    zip_dir_free(&d);
    return rc;
}

static int npz_open(const amn_open_args *a, amn_model **out, amn_error *err) {
    *out = NULL;
    if (!a->map) return amn_error_set(err, AMN_E_INVALID, "npz: a directory is not an archive");
    const uint8_t *p = amn_map_data(a->map);
    uint64_t size = amn_map_size(a->map);
    amn_model *m = amn_model_new("npz");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = npy_has_magic(p, size) ? open_npy(a, p, size, m, err) : open_npz(a, p, size, m, err);
    if (rc != AMN_OK) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}

/* The first `want` bytes of an array: inflated when e is a DEFLATE member,
 * read as they are otherwise (e NULL is a lone .npy). */
static int read_prefix(const amn_source *src, const zip_entry *e, uint64_t off, uint64_t size,
                       uint8_t *buf, size_t want, size_t *got, amn_error *err) {
    if (e) return zip_inflate_prefix(src, e, off, buf, want, got, err);
    *got = size < want ? (size_t)size : want;
    return zip_read_exact(src, off, buf, *got, err);
}

/* Read the header of an array through the source: the preamble first, then
 * exactly the header; for a DEFLATE member only that much is inflated. */
static int inspect_header(const amn_source *src, const zip_entry *e, uint64_t off, uint64_t size,
                          const char *name, const amn_limits *lim, npy_header *h, amn_error *err) {
    uint8_t pre[NPY_PREAMBLE_MAX];
    size_t got;
    int rc = read_prefix(src, e, off, size, pre, sizeof pre, &got, err);
    if (rc != AMN_OK) return rc;
    unsigned major, minor;
    uint64_t hdr;
    rc = npy_read_preamble(pre, got, name, &major, &minor, &hdr, err);
    if (rc != AMN_OK) return rc;
    if (hdr > size)
        return amn_error_set(err, AMN_E_PARSE, "'%s': NPY header of %llu bytes runs past the array",
                             name, (unsigned long long)hdr);
    if (hdr > lim->max_header_bytes)
        return amn_error_set(err, AMN_E_LIMIT, "'%s': NPY header of %llu bytes exceeds %llu", name,
                             (unsigned long long)hdr, (unsigned long long)lim->max_header_bytes);
    uint8_t *buf = malloc((size_t)hdr);
    if (!buf) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    rc = read_prefix(src, e, off, size, buf, (size_t)hdr, &got, err);
    if (rc == AMN_OK) rc = parse_array(buf, got, size, name, h, err);
    free(buf);
    return rc;
}

static int npz_inspect(const amn_inspect_args *a, amn_model **out, amn_error *err) {
    *out = NULL;
    const amn_source *src = a->src;
    amn_model *m = amn_model_new("npz");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    uint8_t magic[NPY_MAGIC_LEN] = {0};
    size_t got = 0;
    /* read_at must not see a range past the source (a memory source does
     * not bound it): clip to a file shorter than the magic. */
    const size_t want = src->size < sizeof magic ? (size_t)src->size : sizeof magic;
    int rc = want ? src->read_at(src->ctx, 0, magic, want, &got) : AMN_OK;
    char name[NPZ_NAME_MAX];
    if (rc == AMN_OK && npy_has_magic(magic, got)) {
        stem_of(a->path ? a->path : src->name, name, sizeof name);
        npy_header h;
        rc = amn_model_set_label(m, "NPY array", err);
        if (rc == AMN_OK) rc = inspect_header(src, NULL, 0, src->size, name, a->limits, &h, err);
        if (rc == AMN_OK) rc = add_array(m, name, &h, NULL, h.data_offset, err);
    } else if (rc == AMN_OK) {
        zip_dir d;
        rc = zip_dir_read(src, a->limits, &d, err);
        if (rc == AMN_OK) {
            rc = amn_model_set_label(m, "NPZ archive", err);
            for (size_t i = 0; rc == AMN_OK && i < d.count; i++) {
                const zip_entry *e = &d.entries[i];
                if (e->name_len && e->name[e->name_len - 1] == '/') continue;
                if (!member_array_name(e, name, sizeof name)) {
                    rc = amn_model_add_note(m, e->name, "not an .npy member; skipped", err);
                    continue;
                }
                uint64_t off;
                npy_header h;
                rc = zip_entry_data_offset(src, &d, e, &off, err);
                if (rc == AMN_OK)
                    rc = inspect_header(src, e, off, e->usize, name, a->limits, &h, err);
                if (rc == AMN_OK)
                    rc = add_array(m, name, &h, NULL,
                                   e->method == ZIP_STORED ? off + h.data_offset : off, err);
            }
            zip_dir_free(&d);
        }
    } else {
        rc = amn_error_set(err, rc, "%s: read failed", src->name ? src->name : "npz");
    }
    if (rc != AMN_OK) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}

/* probe() scores above WEAK only an NPY magic or a ZIP (a local header,
 * or the end record of an empty archive) at the start. */
static const amn_probe_sig npz_sigs[] = {
    {.offset = 0, .length = 6, .bytes = "\x93NUMPY"},
    {.offset = 0, .length = 4, .bytes = "PK\x03\x04"},
    {.offset = 0, .length = 4, .bytes = "PK\x05\x06"},
    {0},
};

static const amn_format npz_format = {
    .struct_size = sizeof(amn_format),
    .name = "npz",
    .description = "NumPy .npz archive or .npy array",
    .extensions = "npz,npy",
    .probe = npz_probe,
    .open = npz_open,
    .inspect = npz_inspect,
    .writer = &npz_writer,
    .flags = AMN_FORMAT_LOSSLESS,
    .scan = npz_scan,
    .probe_sigs = npz_sigs,
};

static int npz_init(amn_registrar *r) {
    return amn_register_format(r, &npz_format);
}

AMN_PLUGIN_DEFINE(npz, AMN_VERSION_STRING,
                  "NumPy .npz archives and .npy arrays (stored and DEFLATE, ZIP64)", "MIT",
                  npz_init);
