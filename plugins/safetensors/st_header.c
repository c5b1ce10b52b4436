/* The safetensors header: u64 length, then a JSON object of
 * name -> {dtype, shape, data_offsets} plus an optional __metadata__ map.
 * Everything in it is checked before a tensor is admitted: known dtype,
 * shape product without overflow, offsets matching the shape, and offsets
 * tiling the data area exactly (no overlap, no gap). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/checked.h"
#include "st_internal.h"
#include "st_json.h"

typedef struct entry {
    const char *name;
    amn_dtype dtype;
    uint32_t ndim;
    uint64_t shape[AMN_MAX_DIMS];
    uint64_t begin, end;
} entry;

static int cmp_begin(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* safetensors names dtypes amn does not handle (yet): recognised, unsupported. */
static bool known_foreign_dtype(const char *s) {
    static const char *const names[] = {"F4", "F6_E2M3", "F6_E3M2", "F8_E8M0"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(s, names[i]) == 0) return true;
    return false;
}

/* "[u64, ...]": the first cap values into out, how many there were in *n,
 * whether every one was an integer in [0, 2^64) in *ok. */
static int parse_u64_array(st_json *j, uint64_t *out, size_t cap, size_t *n, bool *ok) {
    *n = 0;
    *ok = true;
    int rc = stj_expect(j, '[');
    bool more = stj_peek(j) != ']';
    if (!more) j->p++;
    while (!rc && more) {
        const char c = stj_peek(j);
        uint64_t v = 0;
        bool good = false;
        if (c == '-' || (c >= '0' && c <= '9'))
            rc = stj_u64(j, &v, &good);
        else
            rc = stj_skip(j, 0);
        if (rc) break;
        if (*n < cap) out[*n] = v;
        *ok = *ok && good;
        (*n)++;
        rc = stj_next(j, ']', &more);
    }
    return rc;
}

/* The fields of one tensor's object as the text gives them. */
typedef struct raw_entry {
    const char *dtype;
    bool has_dtype, has_shape, has_offsets, dtype_string, shape_array, shape_ok, offsets_ok;
    size_t ndim, noffsets;
    uint64_t shape[AMN_MAX_DIMS], offsets[2];
} raw_entry;

static int repeated_key(const st_json *j) {
    return amn_error_set(j->err, AMN_E_PARSE, "%s: header repeats a key", j->src);
}

/* One field of a tensor's object; keys other than the three are skipped, as
 * the reference reader ignores unknown fields. */
static int scan_field(st_json *j, const char *key, raw_entry *r) {
    const char c = stj_peek(j);
    if (strcmp(key, "dtype") == 0) {
        if (r->has_dtype) return repeated_key(j);
        r->has_dtype = true;
        r->dtype_string = c == '"';
        return c == '"' ? stj_string(j, &r->dtype) : stj_skip(j, 1);
    }
    if (strcmp(key, "shape") == 0) {
        if (r->has_shape) return repeated_key(j);
        r->has_shape = true;
        r->shape_array = c == '[';
        return c == '[' ? parse_u64_array(j, r->shape, AMN_MAX_DIMS, &r->ndim, &r->shape_ok)
                        : stj_skip(j, 1);
    }
    if (strcmp(key, "data_offsets") == 0) {
        if (r->has_offsets) return repeated_key(j);
        r->has_offsets = true;
        if (c != '[') return stj_skip(j, 1);
        return parse_u64_array(j, r->offsets, 2, &r->noffsets, &r->offsets_ok);
    }
    return stj_skip(j, 1);
}

static int scan_entry(st_json *j, raw_entry *r, bool *is_object) {
    *r = (raw_entry){0};
    *is_object = stj_peek(j) == '{';
    if (!*is_object) return stj_skip(j, 2);
    j->p++;
    bool more = stj_peek(j) != '}';
    if (!more) j->p++;
    int rc = AMN_OK;
    while (!rc && more) {
        const char *key;
        if ((rc = stj_string(j, &key)) || (rc = stj_expect(j, ':')) || (rc = scan_field(j, key, r)))
            break;
        rc = stj_next(j, '}', &more);
    }
    return rc;
}

static int parse_entry(st_json *j, const char *name, entry *e) {
    const char *src = j->src;
    amn_error *err = j->err;
    raw_entry r;
    bool is_object;
    *e = (entry){0}; /* shape entries past ndim are zero, as amn_tensor wants them */
    int rc = scan_entry(j, &r, &is_object);
    if (rc) return rc;
    if (!is_object || !r.has_dtype || !r.has_shape || !r.has_offsets)
        return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: needs dtype, shape and data_offsets",
                             src, name);
    if (!r.dtype_string)
        return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: dtype is not a string", src, name);
    e->name = name;
    e->dtype = amn_dtype_from_name(r.dtype);
    if (e->dtype == AMN_DTYPE_C128) e->dtype = AMN_DTYPE_INVALID; /* amn's name, not safetensors' */
    if (e->dtype == AMN_DTYPE_INVALID) {
        if (known_foreign_dtype(r.dtype))
            return amn_error_set(err, AMN_E_UNSUPPORTED, "%s: tensor %s: dtype %s is not supported",
                                 src, name, r.dtype);
        return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: unknown dtype '%.32s'", src, name,
                             r.dtype);
    }
    if (!r.shape_array)
        return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: shape is not an array", src, name);
    if (r.ndim > AMN_MAX_DIMS)
        return amn_error_set(err, AMN_E_LIMIT, "%s: tensor %s: %zu dimensions (max %d)", src, name,
                             r.ndim, AMN_MAX_DIMS);
    if (!r.shape_ok)
        return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: bad dimension", src, name);
    e->ndim = (uint32_t)r.ndim;
    uint64_t numel = 1;
    for (size_t i = 0; i < r.ndim; i++) {
        e->shape[i] = r.shape[i];
        if (!amn_mul_u64(numel, e->shape[i], &numel))
            return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: shape product overflows", src,
                                 name);
    }
    uint64_t bytes;
    if (!amn_mul_u64(numel, amn_dtype_size(e->dtype), &bytes))
        return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: byte size overflows", src, name);
    e->begin = r.offsets[0];
    e->end = r.offsets[1];
    if (r.noffsets != 2 || !r.offsets_ok || e->end < e->begin)
        return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: bad data_offsets", src, name);
    if (e->end - e->begin != bytes)
        return amn_error_set(
            err, AMN_E_PARSE, "%s: tensor %s: data_offsets span %llu bytes, shape needs %llu", src,
            name, (unsigned long long)(e->end - e->begin), (unsigned long long)bytes);
    return AMN_OK;
}

/* Before any parsing, one pass over the raw text: how deep it nests (a
 * safetensors header nests three deep: header, entry, shape; a caller may
 * cap it tighter) and how many top-level keys it has, capped by max_tensors. */
static int check_structure(const char *src, const char *t, size_t n, const amn_limits *lim,
                           amn_error *err) {
    uint64_t top_keys = 0;
    unsigned depth = 0;
    for (size_t i = 0; i < n; i++) {
        switch (t[i]) {
        case '"': /* skip the string; a backslash escapes the next byte */
            for (i++; i < n && t[i] != '"'; i++) i += t[i] == '\\';
            break;
        case '{':
        case '[':
            if (++depth > lim->max_depth) /* a caller's tighter cap (--max-depth) */
                return amn_error_set(err, AMN_E_LIMIT, "%s: header nests deeper than %u", src,
                                     lim->max_depth);
            if (depth > 3)
                return amn_error_set(err, AMN_E_PARSE,
                                     "%s: header nests deeper than a safetensors header does", src);
            break;
        case '}':
        case ']':
            if (depth) depth--;
            break;
        case ':':
            top_keys += depth == 1;
            break;
        }
    }
    if (top_keys > lim->max_tensors + 1)
        return amn_error_set(err, AMN_E_LIMIT, "%s: %llu header entries exceed the cap", src,
                             (unsigned long long)top_keys);
    return AMN_OK;
}

/* What the header holds; names and values point into its text. */
typedef struct header {
    entry *entries;
    size_t n_entries, cap_entries;
    const char **meta; /* key, value, key, value, ... */
    size_t n_meta, cap_meta;
    bool has_meta;
} header;

static void header_free(header *h) {
    free(h->entries);
    free(h->meta);
}

static bool grow(void **items, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap * 2 : 16;
    while (n < need) n *= 2;
    void *p = realloc(*items, n * size);
    if (!p) return false;
    *items = p;
    *cap = n;
    return true;
}

static int parse_metadata(st_json *j, header *h) {
    if (h->has_meta) return repeated_key(j);
    h->has_meta = true;
    if (stj_peek(j) != '{')
        return amn_error_set(j->err, AMN_E_PARSE, "%s: __metadata__ is not an object", j->src);
    j->p++;
    bool more = stj_peek(j) != '}';
    if (!more) j->p++;
    int rc = AMN_OK;
    while (!rc && more) {
        const char *k, *v;
        if ((rc = stj_string(j, &k)) || (rc = stj_expect(j, ':'))) break;
        if (stj_peek(j) != '"')
            return amn_error_set(j->err, AMN_E_PARSE,
                                 "%s: __metadata__ value of %s is not a string", j->src, k);
        if ((rc = stj_string(j, &v))) break;
        if (!grow((void **)&h->meta, &h->cap_meta, h->n_meta + 2, sizeof *h->meta))
            return amn_error_set(j->err, AMN_E_NOMEM, "out of memory");
        h->meta[h->n_meta++] = k;
        h->meta[h->n_meta++] = v;
        rc = stj_next(j, '}', &more);
    }
    return rc;
}

/* The whole header object, every tensor's fields checked as it is read. */
static int parse_header(st_json *j, header *h) {
    int rc = stj_expect(j, '{');
    bool more = !rc && stj_peek(j) != '}';
    if (!rc && !more) j->p++;
    while (!rc && more) {
        const char *key;
        if ((rc = stj_string(j, &key)) || (rc = stj_expect(j, ':'))) break;
        if (strcmp(key, "__metadata__") == 0) {
            rc = parse_metadata(j, h);
        } else if (!grow((void **)&h->entries, &h->cap_entries, h->n_entries + 1,
                         sizeof *h->entries)) {
            rc = amn_error_set(j->err, AMN_E_NOMEM, "out of memory");
        } else if (!(rc = parse_entry(j, key, &h->entries[h->n_entries]))) {
            h->n_entries++;
        }
        if (!rc) rc = stj_next(j, '}', &more);
    }
    if (!rc && stj_more(j)) rc = stj_error(j, "unexpected character after the header object");
    return rc;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Two equal keys: readers that keep the first and the last would see
 * different tensors (or metadata), so the header is refused. Sorted copies
 * of the names, so a hostile header with many keys costs n log n. */
static int check_unique(const char *src, const char **names, size_t n, size_t stride,
                        amn_error *err) {
    const char **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) sorted[i] = names[i * stride];
    qsort(sorted, n, sizeof *sorted, cmp_name);
    bool repeated = false;
    for (size_t i = 1; i < n && !repeated; i++) repeated = strcmp(sorted[i - 1], sorted[i]) == 0;
    free(sorted);
    return repeated ? amn_error_set(err, AMN_E_PARSE, "%s: header repeats a key", src) : AMN_OK;
}

static int check_keys(const char *src, const header *h, amn_error *err) {
    const char **names = malloc((h->n_entries ? h->n_entries : 1) * sizeof *names);
    if (!names) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < h->n_entries; i++) names[i] = h->entries[i].name;
    int rc = check_unique(src, names, h->n_entries, 1, err);
    free(names);
    return rc ? rc : check_unique(src, h->meta, h->n_meta / 2, 2, err);
}

/* The tensors tile the data area: sorted by offset, no gap, no overlap,
 * nothing left over. */
static int check_tiling(const char *src, entry *e, size_t n, uint64_t data_size, amn_error *err) {
    qsort(e, n, sizeof *e, cmp_begin);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i].begin != at)
            return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: data_offsets %s byte %llu", src,
                                 e[i].name, e[i].begin < at ? "overlap at" : "leave a gap before",
                                 (unsigned long long)e[i].begin);
        at = e[i].end;
    }
    if (at != data_size)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: tensors cover %llu bytes but the data area holds %llu", src,
                             (unsigned long long)at, (unsigned long long)data_size);
    return AMN_OK;
}

static int add_to_model(const header *h, const uint8_t *data, uint64_t data_start, amn_model *m,
                        amn_error *err) {
    int rc = AMN_OK;
    for (size_t i = 0; !rc && i + 1 < h->n_meta; i += 2)
        rc = amn_model_set_meta(m, h->meta[i], h->meta[i + 1], err);
    for (size_t i = 0; !rc && i < h->n_entries; i++) {
        const entry *e = &h->entries[i];
        amn_tensor t = {.struct_size = sizeof t,
                        .name = e->name,
                        .dtype = e->dtype,
                        .ndim = e->ndim,
                        .nbytes = e->end - e->begin,
                        .file_offset = data_start + e->begin};
        memcpy(t.shape, e->shape, sizeof t.shape);
        if (data) {
            t.data = data + data_start + e->begin;
            t.extent = t.nbytes;
        }
        rc = amn_model_add_tensor(m, &t, err);
    }
    return rc;
}

static int parse_text(const char *src, char *text, size_t n, const amn_limits *lim,
                      uint64_t data_size, header *h, amn_error *err) {
    size_t i = 0;
    while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) i++;
    if (i == n || text[i] != '{')
        return amn_error_set(err, AMN_E_PARSE, "%s: header is not a JSON object", src);
    int rc = check_structure(src, text + i, n - i, lim, err);
    if (rc) return rc;
    st_json j = {.p = text + i, .end = text + n, .src = src, .err = err};
    if ((rc = parse_header(&j, h))) return rc;
    if (h->n_entries > lim->max_tensors)
        return amn_error_set(err, AMN_E_LIMIT, "%s: %zu tensors exceed the cap of %llu", src,
                             h->n_entries, (unsigned long long)lim->max_tensors);
    if ((rc = check_keys(src, h, err))) return rc;
    return check_tiling(src, h->entries, h->n_entries, data_size, err);
}

int st_read_header(const amn_source *s, const uint8_t *data, const amn_limits *lim, amn_model *m,
                   amn_error *err) {
    const char *src = s->name ? s->name : "safetensors";
    uint8_t lenbuf[8];
    int rc = amn_source_read(s, 0, lenbuf, 8, err);
    if (rc) return rc;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | lenbuf[i];
    if (n > lim->max_header_bytes)
        return amn_error_set(err, AMN_E_LIMIT, "%s: header of %llu bytes exceeds the %llu cap", src,
                             (unsigned long long)n, (unsigned long long)lim->max_header_bytes);
    if (n > s->size - 8)
        return amn_error_set(err, AMN_E_PARSE, "%s: header length %llu runs past the end", src,
                             (unsigned long long)n);
    const uint64_t data_start = 8 + n;
    char *text = malloc((size_t)n + 1);
    if (!text) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    header h = {0};
    if (!(rc = amn_source_read(s, 8, text, (size_t)n, err))) {
        text[n] = '\0';
        rc = parse_text(src, text, (size_t)n, lim, s->size - data_start, &h, err);
    }
    if (!rc) rc = add_to_model(&h, data, data_start, m, err);
    header_free(&h);
    free(text);
    return rc;
}
