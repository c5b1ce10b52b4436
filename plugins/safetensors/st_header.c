/* The safetensors header: u64 length, then a JSON object of
 * name -> {dtype, shape, data_offsets} plus an optional __metadata__ map.
 * Everything in it is checked before a tensor is admitted: known dtype,
 * shape product without overflow, offsets matching the shape, and offsets
 * tiling the data area exactly (no overlap, no gap). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "amn/checked.h"
#include "amn/kit/json_file.h"
#include "st_internal.h"

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
    static const char *const names[] = {"F4", "F6_E2M3", "F6_E3M2", "F8_E8M0", "C64"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(s, names[i]) == 0) return true;
    return false;
}

static bool get_u64(json_object *o, uint64_t *out) {
    if (!json_object_is_type(o, json_type_int)) return false;
    int64_t v = json_object_get_int64(o);
    if (v < 0) return false;
    if (v == INT64_MAX) { /* json-c saturates: read the unsigned value instead */
        uint64_t u = json_object_get_uint64(o);
        *out = u;
        return true;
    }
    *out = (uint64_t)v;
    return true;
}

static int parse_entry(const char *src, const char *name, json_object *v, entry *e,
                       amn_error *err) {
    json_object *dt, *shape, *offs;
    if (!json_object_is_type(v, json_type_object) || !json_object_object_get_ex(v, "dtype", &dt) ||
        !json_object_object_get_ex(v, "shape", &shape) ||
        !json_object_object_get_ex(v, "data_offsets", &offs))
        return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: needs dtype, shape and data_offsets",
                             src, name);
    if (!json_object_is_type(dt, json_type_string))
        return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: dtype is not a string", src, name);
    const char *dts = json_object_get_string(dt);
    e->name = name;
    e->dtype = amn_dtype_from_name(dts);
    if (e->dtype == AMN_DTYPE_INVALID) {
        if (known_foreign_dtype(dts))
            return amn_error_set(err, AMN_E_UNSUPPORTED, "%s: tensor %s: dtype %s is not supported",
                                 src, name, dts);
        return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: unknown dtype '%.32s'", src, name,
                             dts);
    }
    if (!json_object_is_type(shape, json_type_array))
        return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: shape is not an array", src, name);
    size_t nd = json_object_array_length(shape);
    if (nd > AMN_MAX_DIMS)
        return amn_error_set(err, AMN_E_LIMIT, "%s: tensor %s: %zu dimensions (max %d)", src, name,
                             nd, AMN_MAX_DIMS);
    e->ndim = (uint32_t)nd;
    uint64_t numel = 1;
    for (size_t i = 0; i < nd; i++) {
        if (!get_u64(json_object_array_get_idx(shape, i), &e->shape[i]))
            return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: bad dimension", src, name);
        if (!amn_mul_u64(numel, e->shape[i], &numel))
            return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: shape product overflows", src,
                                 name);
    }
    uint64_t bytes;
    if (!amn_mul_u64(numel, amn_dtype_size(e->dtype), &bytes))
        return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: byte size overflows", src, name);
    if (!json_object_is_type(offs, json_type_array) || json_object_array_length(offs) != 2 ||
        !get_u64(json_object_array_get_idx(offs, 0), &e->begin) ||
        !get_u64(json_object_array_get_idx(offs, 1), &e->end) || e->end < e->begin)
        return amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: bad data_offsets", src, name);
    if (e->end - e->begin != bytes)
        return amn_error_set(
            err, AMN_E_PARSE, "%s: tensor %s: data_offsets span %llu bytes, shape needs %llu", src,
            name, (unsigned long long)(e->end - e->begin), (unsigned long long)bytes);
    return AMN_OK;
}

static int parse_metadata(const char *src, json_object *meta, amn_model *m, amn_error *err) {
    if (!json_object_is_type(meta, json_type_object))
        return amn_error_set(err, AMN_E_PARSE, "%s: __metadata__ is not an object", src);
    json_object_object_foreach(meta, k, v) {
        if (!json_object_is_type(v, json_type_string))
            return amn_error_set(err, AMN_E_PARSE, "%s: __metadata__ value of %s is not a string",
                                 src, k);
        int rc = amn_model_set_meta(m, k, json_object_get_string(v), err);
        if (rc) return rc;
    }
    return AMN_OK;
}

/* json-c spends about half a KiB to a KiB on every object or array it
 * builds, so a header of empty containers ("[[],[],...]", "{\"a\":{},...}")
 * would take ~100x its size in memory: several GB for a header under the
 * cap. A safetensors header nests three deep (header, entry, shape) and
 * holds at most three containers per top-level key (entry, shape,
 * data_offsets; __metadata__ one). Checking that on the raw text first bounds
 * the tree by what a valid header with as many keys needs, and the keys by
 * max_tensors. */
/* json-c hands keys out as C strings, so "a\u0000x" would reach us as "a":
 * two distinct names in the file, one here. Refused rather than truncated. */
static bool escaped_nul_at(const char *t, size_t n, size_t i) {
    return i + 5 < n && t[i + 1] == 'u' && memcmp(t + i + 2, "0000", 4) == 0;
}

static int check_structure(const char *src, const char *t, size_t n, const amn_limits *lim,
                           uint64_t *keys_out, amn_error *err) {
    uint64_t containers = 0, top_keys = 0, keys = 0;
    unsigned depth = 0;
    for (size_t i = 0; i < n; i++) {
        switch (t[i]) {
        case '"': /* skip the string; a backslash escapes the next byte */
            for (i++; i < n && t[i] != '"'; i++)
                if (t[i] == '\\') {
                    if (escaped_nul_at(t, n, i))
                        return amn_error_set(err, AMN_E_PARSE,
                                             "%s: header string holds an escaped NUL (\\u0000)",
                                             src);
                    i++;
                }
            break;
        case '{':
        case '[':
            if (++depth > lim->max_depth) /* a caller's tighter cap (--max-depth) */
                return amn_error_set(err, AMN_E_LIMIT, "%s: header nests deeper than %u", src,
                                     lim->max_depth);
            if (depth > 3)
                return amn_error_set(err, AMN_E_PARSE,
                                     "%s: header nests deeper than a safetensors header does", src);
            containers++;
            break;
        case '}':
        case ']':
            if (depth) depth--;
            break;
        case ':':
            top_keys += depth == 1;
            keys++;
            break;
        }
    }
    *keys_out = keys;
    if (top_keys > lim->max_tensors + 1)
        return amn_error_set(err, AMN_E_LIMIT, "%s: %llu header entries exceed the cap", src,
                             (unsigned long long)top_keys);
    if (containers > 1 + 3 * top_keys)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: header holds %llu objects and arrays for %llu entries", src,
                             (unsigned long long)containers, (unsigned long long)top_keys);
    return AMN_OK;
}

/* Keys of every object in the tree. A safetensors header nests at most three
 * deep, which check_structure has already enforced. */
static uint64_t count_keys(json_object *o) {
    uint64_t k = 0;
    if (json_object_is_type(o, json_type_object)) {
        json_object_object_foreach(o, key, v) {
            (void)key;
            k += 1 + count_keys(v);
        }
    } else if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++)
            k += count_keys(json_object_array_get_idx(o, i));
    }
    return k;
}

static int parse_json(const char *src, const char *text, size_t n, const amn_limits *lim,
                      json_object **out, amn_error *err) {
    size_t i = 0;
    while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) i++;
    if (i == n || text[i] != '{')
        return amn_error_set(err, AMN_E_PARSE, "%s: header is not a JSON object", src);
    uint64_t text_keys = 0;
    int rc = check_structure(src, text + i, n - i, lim, &text_keys, err);
    if (rc) return rc;
    /* json-c counts the top level as one more: depth 3 needs 4 (check_structure
     * above has already applied the cap itself). */
    char label[4200];
    snprintf(label, sizeof label, "%s: header", src);
    const amn_kit_json_caps caps = {.max_bytes = lim->max_header_bytes,
                                    .max_depth = lim->max_depth < 31 ? (int)lim->max_depth + 1 : 32,
                                    .bad_code = AMN_E_PARSE};
    json_object *o;
    if ((rc = amn_kit_json_parse_object(label, text, n, &caps, &o, err))) return rc;
    /* json-c keeps the last of two equal keys; a reader that keeps the first
     * would see another tensor. Every ':' outside strings ends a key, so
     * fewer keys in the tree than in the text means a repeated one. */
    if (count_keys(o) != text_keys) {
        json_object_put(o);
        return amn_error_set(err, AMN_E_PARSE, "%s: header repeats a key", src);
    }
    *out = o;
    return AMN_OK;
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
    const uint64_t data_start = 8 + n, data_size = s->size - data_start;
    char *text = malloc((size_t)n + 1);
    if (!text) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if ((rc = amn_source_read(s, 8, text, (size_t)n, err))) {
        free(text);
        return rc;
    }
    text[n] = '\0';
    json_object *root = NULL;
    rc = parse_json(src, text, (size_t)n, lim, &root, err);
    free(text);
    if (rc) return rc;
    size_t count = (size_t)json_object_object_length(root);
    /* __metadata__ is no tensor */
    const size_t tensors = count - (json_object_object_get_ex(root, "__metadata__", NULL) ? 1 : 0);
    entry *entries = calloc(count ? count : 1, sizeof *entries);
    size_t k = 0;
    if (!entries)
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    else if (tensors > lim->max_tensors)
        rc = amn_error_set(err, AMN_E_LIMIT, "%s: %zu tensors exceed the cap of %llu", src, tensors,
                           (unsigned long long)lim->max_tensors);
    if (!rc) {
        json_object_object_foreach(root, key, val) {
            if (strcmp(key, "__metadata__") == 0) {
                if ((rc = parse_metadata(src, val, m, err))) break;
                continue;
            }
            if ((rc = parse_entry(src, key, val, &entries[k], err))) break;
            k++;
        }
    }
    if (!rc) {
        qsort(entries, k, sizeof *entries, cmp_begin);
        uint64_t at = 0;
        for (size_t i = 0; !rc && i < k; i++) {
            if (entries[i].begin != at)
                rc = amn_error_set(err, AMN_E_PARSE, "%s: tensor %s: data_offsets %s byte %llu",
                                   src, entries[i].name,
                                   entries[i].begin < at ? "overlap at" : "leave a gap before",
                                   (unsigned long long)entries[i].begin);
            at = entries[i].end;
        }
        if (!rc && at != data_size)
            rc = amn_error_set(err, AMN_E_PARSE,
                               "%s: tensors cover %llu bytes but the data area holds %llu", src,
                               (unsigned long long)at, (unsigned long long)data_size);
    }
    for (size_t i = 0; !rc && i < k; i++) {
        const entry *e = &entries[i];
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
    free(entries);
    json_object_put(root);
    return rc;
}
