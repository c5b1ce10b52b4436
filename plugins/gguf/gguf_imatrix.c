/* Importance-matrix files (see gguf_imatrix.h). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/dtype.h"
#include "amn/format.h"
#include "amn/io.h"
#include "amn/model.h"
#include "gguf_format.h"
#include "gguf_imatrix.h"

/* A legacy entry name longer than this is refused (GGUF tensor names are at
 * most 63 bytes; llama.cpp allocates whatever length the file claims). */
#define IM_NAME_MAX    4096
#define IM_ENTRIES_MAX (1u << 20)

typedef struct im_entry {
    char *name;
    float *w;
    uint64_t n;
} im_entry;

struct gguf_imatrix {
    im_entry *e;
    size_t n, cap;
    char *dataset;
    int64_t chunks;
};

void gguf_imatrix_free(gguf_imatrix *im) {
    if (!im) return;
    for (size_t i = 0; i < im->n; i++) {
        free(im->e[i].name);
        free(im->e[i].w);
    }
    free(im->e);
    free(im->dataset);
    free(im);
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const im_entry *)a)->name, ((const im_entry *)b)->name);
}

const float *gguf_imatrix_find(const gguf_imatrix *im, const char *name, uint64_t *n) {
    const im_entry key = {.name = (char *)name};
    const im_entry *e = im->n ? bsearch(&key, im->e, im->n, sizeof *im->e, cmp_entry) : NULL;
    *n = e ? e->n : 0;
    return e ? e->w : NULL;
}

void gguf_imatrix_filter(gguf_imatrix *im, bool (*keep)(const char *name, void *ctx), void *ctx) {
    size_t kept = 0;
    for (size_t i = 0; i < im->n; i++) {
        if (keep(im->e[i].name, ctx)) {
            im->e[kept++] = im->e[i];
            continue;
        }
        free(im->e[i].name);
        free(im->e[i].w);
    }
    im->n = kept;
}

size_t gguf_imatrix_count(const gguf_imatrix *im) {
    return im->n;
}
const char *gguf_imatrix_dataset(const gguf_imatrix *im) {
    return im->dataset;
}
int64_t gguf_imatrix_chunks(const gguf_imatrix *im) {
    return im->chunks;
}

/* A new entry named name[0..len) with n weights (uninitialised). */
static int add_entry(gguf_imatrix *im, const char *name, size_t len, uint64_t n, float **w,
                     amn_error *err) {
    if (im->n == im->cap) {
        const size_t cap = im->cap ? 2 * im->cap : 64;
        im_entry *e = realloc(im->e, cap * sizeof *e);
        if (!e) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        im->e = e, im->cap = cap;
    }
    im_entry *e = &im->e[im->n];
    e->name = malloc(len + 1);
    e->w = n <= SIZE_MAX / sizeof(float) ? malloc((size_t)n * sizeof(float)) : NULL;
    if (!e->name || !e->w) {
        free(e->name), free(e->w);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    memcpy(e->name, name, len);
    e->name[len] = 0;
    e->n = n;
    im->n++;
    *w = e->w;
    return AMN_OK;
}

/* Sorted for lookup; a name twice is refused (llama.cpp keeps the last). */
static int finish(gguf_imatrix *im, const char *path, amn_error *err) {
    if (im->n) qsort(im->e, im->n, sizeof *im->e, cmp_entry);
    for (size_t i = 1; i < im->n; i++)
        if (strcmp(im->e[i].name, im->e[i - 1].name) == 0)
            return amn_error_set(err, AMN_E_PARSE, "imatrix %s: entry %s appears twice", path,
                                 im->e[i].name);
    /* llama_model_quantize_impl: "imatrix contains non-finite value". */
    for (size_t i = 0; i < im->n; i++)
        for (uint64_t k = 0; k < im->e[i].n; k++)
            if (!isfinite(im->e[i].w[k]))
                return amn_error_set(err, AMN_E_INVALID,
                                     "imatrix %s: entry %s: non-finite value at %llu", path,
                                     im->e[i].name, (unsigned long long)k);
    return AMN_OK;
}

/* ---- legacy .dat ------------------------------------------------------------ */

typedef struct cursor {
    const uint8_t *p;
    uint64_t left;
} cursor;

static bool take(cursor *c, void *dst, uint64_t n) {
    if (c->left < n) return false;
    memcpy(dst, c->p, (size_t)n);
    c->p += n, c->left -= n;
    return true;
}

static bool take_i32(cursor *c, int32_t *v) {
    uint8_t b[4];
    if (!take(c, b, 4)) return false;
    *v = (int32_t)amn_load_le32(b);
    return true;
}

/* common_imatrix_load_legacy: int32 n_entries, then per entry int32 len,
 * the name, int32 ncall, int32 nval, nval f32; then optionally int32
 * chunk count, int32 length and a dataset name. */
static int load_legacy(const char *path, const uint8_t *data, uint64_t size, gguf_imatrix *im,
                       amn_error *err) {
    cursor c = {data, size};
    int32_t n_entries;
    if (!take_i32(&c, &n_entries) || n_entries < 1)
        return amn_error_set(err, AMN_E_PARSE, "imatrix %s: no data (not GGUF, no legacy entries)",
                             path);
    /* Each entry takes at least 16 bytes. */
    if ((uint64_t)n_entries > c.left / 16 || (uint32_t)n_entries > IM_ENTRIES_MAX)
        return amn_error_set(err, AMN_E_PARSE, "imatrix %s: %d entries cannot fit its %llu bytes",
                             path, n_entries, (unsigned long long)size);
    for (int32_t i = 0; i < n_entries; i++) {
        int32_t len, ncall, nval;
        if (!take_i32(&c, &len) || len < 0 || len > IM_NAME_MAX || c.left < (uint64_t)len)
            return amn_error_set(err, AMN_E_PARSE, "imatrix %s: entry %d: bad name length", path,
                                 i + 1);
        const char *name = (const char *)c.p;
        if (memchr(name, 0, (size_t)len))
            return amn_error_set(err, AMN_E_PARSE, "imatrix %s: entry %d: NUL in its name", path,
                                 i + 1);
        c.p += len, c.left -= (uint64_t)len;
        if (!take_i32(&c, &ncall) || !take_i32(&c, &nval) || nval < 1 ||
            (uint64_t)nval > c.left / 4)
            return amn_error_set(err, AMN_E_PARSE,
                                 "imatrix %s: entry %.*s: bad or truncated value count", path,
                                 (int)len, name);
        float *w;
        int rc = add_entry(im, name, (size_t)len, (uint64_t)nval, &w, err);
        if (rc) return rc;
        for (int32_t k = 0; k < nval; k++) {
            const float s = amn_bits_f32(amn_load_le32(c.p + 4 * (size_t)k));
            /* load_imatrix: the stored sums are (raw / count) * ncall. */
            w[k] = ncall > 0 ? s / (float)ncall : s;
        }
        c.p += 4 * (uint64_t)nval, c.left -= 4 * (uint64_t)nval;
    }
    if (c.left) { /* the optional trailer: chunk count, dataset name */
        int32_t chunks, len;
        if (!take_i32(&c, &chunks))
            return amn_error_set(err, AMN_E_PARSE, "imatrix %s: truncated chunk count", path);
        im->chunks = chunks;
        if (c.left) {
            if (!take_i32(&c, &len) || len < 0 || (uint64_t)len > c.left)
                return amn_error_set(err, AMN_E_PARSE, "imatrix %s: truncated dataset name", path);
            if (len > 0) {
                /* llama.cpp keeps the name up to its first NUL. */
                const size_t n = strnlen((const char *)c.p, (size_t)len);
                if (!(im->dataset = malloc(n + 1)))
                    return amn_error_set(err, AMN_E_NOMEM, "out of memory");
                memcpy(im->dataset, c.p, n);
                im->dataset[n] = 0;
            }
        }
    }
    return AMN_OK;
}

/* ---- GGUF ------------------------------------------------------------------- */

static const amn_kv *find_key(const amn_model *m, const char *key) {
    return amn_model_find_kv(m, key);
}

static bool ends_with(const char *s, const char *suffix, size_t *stem) {
    const size_t n = strlen(s), k = strlen(suffix);
    if (n < k || strcmp(s + n - k, suffix) != 0) return false;
    *stem = n - k;
    return true;
}

/* The f32 values of t (an F32 tensor) into a new array of *n. */
static int tensor_f32(const char *path, const amn_tensor *t, float **out, uint64_t *n,
                      amn_error *err) {
    *out = NULL;
    if (t->dtype != AMN_DTYPE_F32)
        return amn_error_set(err, AMN_E_PARSE, "imatrix %s: %s must be F32", path, t->name);
    if (!amn_tensor_numel(t, n) || *n == 0 || *n > SIZE_MAX / 4)
        return amn_error_set(err, AMN_E_PARSE, "imatrix %s: %s: bad size", path, t->name);
    float *v = malloc((size_t)*n * 4);
    if (!v) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = amn_tensor_read(t, 0, v, *n * 4, err);
    if (rc) {
        free(v);
        return rc;
    }
    amn_le_to_host_n(v, 4, (size_t)*n);
    *out = v;
    return AMN_OK;
}

/* One entry from its in_sum2 and counts tensors (load_imatrix's GGUF
 * branch). */
static int gguf_entry(const char *path, gguf_imatrix *im, const char *name, size_t len,
                      const amn_tensor *sums_t, const amn_tensor *counts_t, amn_error *err) {
    float *sums = NULL, *counts = NULL, *w;
    uint64_t nval, ncounts;
    int rc = tensor_f32(path, sums_t, &sums, &nval, err);
    if (!rc) rc = tensor_f32(path, counts_t, &counts, &ncounts, err);
    /* llama.cpp divides by the count of counts and indexes per expert: a
     * zero or non-dividing count would fault or leave zeros. */
    if (!rc && nval % ncounts != 0)
        rc = amn_error_set(err, AMN_E_PARSE,
                           "imatrix %s: entry %.*s: %llu sums do not divide into %llu counts", path,
                           (int)len, name, (unsigned long long)nval, (unsigned long long)ncounts);
    for (uint64_t j = 0; !rc && j < ncounts; j++)
        if (!isfinite(counts[j]) || fabsf(counts[j]) > 9.2e18f)
            rc = amn_error_set(err, AMN_E_PARSE, "imatrix %s: entry %.*s: bad count", path,
                               (int)len, name);
    if (!rc) rc = add_entry(im, name, len, nval, &w, err);
    if (!rc) {
        const uint64_t ne0 = nval / ncounts;
        for (uint64_t j = 0; j < ncounts; j++) {
            const float count = (float)lroundf(counts[j]);
            for (uint64_t i = 0; i < ne0; i++)
                w[j * ne0 + i] = count > 0.0f ? sums[j * ne0 + i] / count : 1;
        }
    }
    free(sums);
    free(counts);
    return rc;
}

static int load_gguf_model(const char *path, const amn_model *m, gguf_imatrix *im, amn_error *err) {
    const size_t nt = amn_model_tensor_count(m);
    if (nt < 1) return amn_error_set(err, AMN_E_PARSE, "imatrix %s: no data", path);
    const amn_kv *ds = find_key(m, "imatrix.datasets");
    const amn_kv *cc = find_key(m, "imatrix.chunk_count");
    const amn_kv *cs = find_key(m, "imatrix.chunk_size");
    if (!ds || !cc || !cs)
        return amn_error_set(err, AMN_E_PARSE, "imatrix %s: missing imatrix metadata", path);
    /* llama.cpp reads both as u32 (gguf_get_val_u32 aborts on another type). */
    if (cc->type != AMN_KV_U32 || cs->type != AMN_KV_U32)
        return amn_error_set(err, AMN_E_PARSE,
                             "imatrix %s: imatrix.chunk_count / chunk_size must be u32", path);
    uint32_t chunks;
    memcpy(&chunks, cc->data, 4);
    im->chunks = (int32_t)chunks; /* quantize.cpp keeps it in an int */
    if (ds->type == AMN_KV_ARRAY && ds->elem_type == AMN_KV_STRING && ds->count > 0) {
        const amn_str *s = ds->data;
        const size_t n = strnlen(s->ptr, s->len);
        if (!(im->dataset = malloc(n + 1))) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        memcpy(im->dataset, s->ptr, n);
        im->dataset[n] = 0;
    }
    /* Pairs by name: for each .in_sum2, its .counts. */
    int rc = AMN_OK;
    for (size_t i = 0; !rc && i < nt; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        size_t stem;
        const bool is_sums = ends_with(t->name, ".in_sum2", &stem);
        if (!is_sums && !ends_with(t->name, ".counts", &stem)) continue;
        char other[256];
        snprintf(other, sizeof other, "%.*s%s", (int)stem, t->name,
                 is_sums ? ".counts" : ".in_sum2");
        const int64_t j = amn_model_find(m, other);
        if (j < 0) {
            rc = amn_error_set(err, AMN_E_PARSE, "imatrix %s: mismatched sums and counts for %.*s",
                               path, (int)stem, t->name);
            break;
        }
        if (!is_sums) continue; /* taken with its sums */
        rc = gguf_entry(path, im, t->name, stem, t, amn_model_tensor(m, (size_t)j), err);
    }
    return rc;
}

static int load_gguf(const char *path, const uint8_t *data, uint64_t size, gguf_imatrix *im,
                     amn_error *err) {
    amn_source src;
    amn_source_memory(&src, data, (size_t)size, path);
    amn_limits lim;
    amn_limits_default(&lim);
    amn_model *m = amn_model_new("gguf");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = gguf_read(&src, data, &lim, m, err);
    if (rc) amn_error_prefix(err, "imatrix %s: ", path);
    if (!rc) rc = load_gguf_model(path, m, im, err);
    amn_model_free(m);
    return rc;
}

int gguf_imatrix_load(const char *path, gguf_imatrix **out, amn_error *err) {
    *out = NULL;
    amn_map *map = NULL;
    int rc = amn_map_open(path, &map, err);
    if (rc) return amn_error_prefix(err, "imatrix: ");
    gguf_imatrix *im = calloc(1, sizeof *im);
    if (!im) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    const uint8_t *data = amn_map_data(map);
    const uint64_t size = amn_map_size(map);
    if (!rc) {
        if (size >= 4 && memcmp(data, "GGUF", 4) == 0)
            rc = load_gguf(path, data, size, im, err);
        else
            rc = load_legacy(path, data, size, im, err);
    }
    if (!rc) rc = finish(im, path, err);
    amn_map_close(map);
    if (rc) {
        gguf_imatrix_free(im);
        return rc;
    }
    *out = im;
    return AMN_OK;
}
