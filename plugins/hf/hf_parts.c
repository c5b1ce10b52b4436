/* The model files of a Hugging Face folder and their tensors in the
 * converter's order (hf_parts.h): ModelBase.index_tensors lists the folder's
 * model*.safetensors files, or where there is none its pytorch_model*.bin
 * files, replaced by the files the format's index maps to where the folder
 * has one; sorted. It reads a safetensors file's names through gguf-py's
 * SafetensorsLocal (sorted) and a .bin file's as torch.load's dict holds
 * them (the pickle's order). */
#include "hf_parts.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "amn/kit/json_file.h"

#define INDEX_MAX_BYTES  (16u << 20)
#define HEADER_MAX_BYTES (100u << 20)
#define MAX_PARTS        4096

amn_kit_json_caps hf_json_caps(const amn_limits *lim, uint64_t cap) {
    return (amn_kit_json_caps){.max_bytes =
                                   lim->max_header_bytes < cap ? lim->max_header_bytes : cap,
                               .max_depth = lim->max_depth < 64 ? (int)lim->max_depth : 64,
                               .bad_code = AMN_E_PARSE};
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void hf_names_free(hf_names *s) {
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    *s = (hf_names){0};
}

static int names_add(hf_names *s, const char *x, amn_error *err) {
    if (s->n == s->cap) {
        const size_t cap = s->cap ? s->cap * 2 : 64;
        char **p = realloc(s->v, cap * sizeof *p);
        if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        s->v = p;
        s->cap = cap;
    }
    if (!(s->v[s->n] = strdup(x))) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    s->n++;
    return AMN_OK;
}

/* The files of one format: their name's prefix and suffix, their index. */
typedef struct part_kind {
    const char *prefix, *suffix, *index;
} part_kind;
static const part_kind SAFETENSORS = {"model", ".safetensors", "model.safetensors.index.json"};
static const part_kind TORCH_BIN = {"pytorch_model", ".bin", "pytorch_model.bin.index.json"};

static bool is_part(const part_kind *k, const char *f) {
    const size_t n = strlen(f), p = strlen(k->prefix), s = strlen(k->suffix);
    return n >= p + s && strncmp(f, k->prefix, p) == 0 && strcmp(f + n - s, k->suffix) == 0;
}

/* A packed model folder's file, held by the core (the folder on disk holds
 * its companion files only): false when m is not from an archive. */
static bool packed(const amn_model *m, const char *file, const uint8_t **data, uint64_t *size) {
    *data = NULL;
    *size = 0;
    if (!m || !amn_model_archive(m)) return false;
    amn_model_archive_file(m, file, data, size);
    return true;
}

/* The folder's files of kind k (os.listdir, filtered). */
static int list_parts(const amn_model *m, const char *dir, const part_kind *k, hf_names *parts,
                      amn_error *err) {
    int rc = AMN_OK;
    if (m && amn_model_archive(m)) {
        const char *f;
        for (size_t i = 0; !rc && (f = amn_model_archive_model_file(m, i)); i++)
            if (is_part(k, f)) rc = names_add(parts, f, err);
        return rc;
    }
    DIR *d = opendir(dir);
    if (!d) return amn_error_set(err, AMN_E_IO, "%s: %s", dir, strerror(errno));
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (is_part(k, e->d_name)) rc = names_add(parts, e->d_name, err);
        if (!rc && parts->n > MAX_PARTS)
            rc = amn_error_set(err, AMN_E_LIMIT, "more than %d shard files", MAX_PARTS);
    }
    closedir(d);
    return rc;
}

/* The folder's index of kind k, or *index NULL where it has none; *wm its
 * weight_map (owned by *index). */
static int read_index(const amn_model *m, const char *dir, const part_kind *k,
                      const amn_limits *lim, json_object **index, json_object **wm,
                      amn_error *err) {
    *index = *wm = NULL;
    const amn_kit_json_caps caps = hf_json_caps(lim, INDEX_MAX_BYTES);
    const uint8_t *data;
    uint64_t size;
    int rc;
    if (packed(m, k->index, &data, &size)) {
        if (!data) return AMN_OK;
        rc = size > caps.max_bytes
                 ? amn_error_set(err, AMN_E_LIMIT, "%s: larger than the cap", k->index)
                 : amn_kit_json_parse_object(k->index, (const char *)data, (size_t)size, &caps,
                                             index, err);
    } else {
        char path[4096];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", dir, k->index) >= (int)sizeof path)
            return amn_error_set(err, AMN_E_INVALID, "%s: path too long", dir);
        if (stat(path, &st) != 0) return AMN_OK;
        rc = amn_kit_json_read_object(path, NULL, &caps, index, err);
    }
    if (rc) return rc;
    if (!json_object_object_get_ex(*index, "weight_map", wm) ||
        !json_object_is_type(*wm, json_type_object)) {
        json_object_put(*index);
        *index = *wm = NULL;
        return amn_error_set(err, AMN_E_PARSE, "%s: no weight_map object", k->index);
    }
    return AMN_OK;
}

/* The files an index's weight_map names, each once. */
static int index_parts(json_object *wm, const part_kind *k, hf_names *parts, amn_error *err) {
    json_object_object_foreach(wm, key, val) {
        if (!json_object_is_type(val, json_type_string))
            return amn_error_set(err, AMN_E_PARSE, "%s: %s: file is not a string", k->index, key);
        const char *f = json_object_get_string(val);
        bool seen = false;
        for (size_t i = 0; i < parts->n && !seen; i++) seen = strcmp(parts->v[i], f) == 0;
        int rc = seen ? AMN_OK : names_add(parts, f, err);
        if (rc) return rc;
        if (parts->n > MAX_PARTS)
            return amn_error_set(err, AMN_E_LIMIT, "more than %d shard files", MAX_PARTS);
    }
    return AMN_OK;
}

/* One safetensors file's tensor names, sorted (gguf-py's SafetensorsLocal). */
static int safetensors_names(const amn_model *m, const char *dir, const char *part,
                             const amn_limits *lim, hf_names *out, amn_error *err) {
    char path[4096];
    if (strchr(part, '/') || snprintf(path, sizeof path, "%s/%s", dir, part) >= (int)sizeof path)
        return amn_error_set(err, AMN_E_PARSE, "shard name %s: not a file of the folder", part);
    const uint8_t *data;
    uint64_t size;
    /* (a packed shard's header is read from the bytes the core holds) */
    errno = ENOENT;
    FILE *f = !packed(m, part, &data, &size) ? fopen(path, "rb")
              : data && size                 ? fmemopen((void *)data, (size_t)size, "rb")
                                             : NULL;
    if (!f) return amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(errno));
    uint8_t len8[8];
    uint64_t len = 0;
    int rc = AMN_OK;
    if (fread(len8, 1, 8, f) != 8)
        rc = amn_error_set(err, AMN_E_PARSE, "%s: truncated safetensors header", path);
    for (int i = 7; !rc && i >= 0; i--) len = len << 8 | len8[i];
    const amn_kit_json_caps caps = hf_json_caps(lim, HEADER_MAX_BYTES);
    if (!rc && len > caps.max_bytes)
        rc = amn_error_set(err, AMN_E_LIMIT, "%s: header of %llu bytes exceeds the cap", path,
                           (unsigned long long)len);
    char *text = rc ? NULL : malloc(len ? (size_t)len : 1);
    if (!rc && !text) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc && fread(text, 1, (size_t)len, f) != len)
        rc = amn_error_set(err, AMN_E_PARSE, "%s: truncated safetensors header", path);
    fclose(f);
    json_object *h = NULL;
    if (!rc) rc = amn_kit_json_parse_object(path, text, (size_t)len, &caps, &h, err);
    free(text);
    const size_t first = out->n;
    if (!rc) {
        json_object_object_foreach(h, key, val) {
            (void)val;
            if (strcmp(key, "__metadata__") != 0 && (rc = names_add(out, key, err))) break;
        }
    }
    json_object_put(h);
    if (!rc) qsort(out->v + first, out->n - first, sizeof *out->v, cmp_str);
    return rc;
}

/* One .bin file's tensor names in its pickle's order: those of m (whose
 * shards the core read in the index's order, each in its pickle's order)
 * that the weight_map puts in `part`; all of them for a folder's one
 * pytorch_model.bin (wm NULL). */
static int bin_names(const amn_model *m, json_object *wm, const char *part, hf_names *out,
                     amn_error *err) {
    for (size_t i = 0; m && i < amn_model_tensor_count(m); i++) {
        const char *name = amn_model_tensor(m, i)->name;
        json_object *f;
        if (wm && (!json_object_object_get_ex(wm, name, &f) ||
                   !json_object_is_type(f, json_type_string) ||
                   strcmp(json_object_get_string(f), part) != 0))
            continue;
        int rc = names_add(out, name, err);
        if (rc) return rc;
    }
    return AMN_OK;
}

int hf_tensor_order(const amn_model *m, const char *dir, const amn_limits *lim, hf_names *out,
                    amn_error *err) {
    hf_names parts = {0};
    const part_kind *k = &SAFETENSORS;
    json_object *index = NULL, *wm = NULL;
    int rc = list_parts(m, dir, k, &parts, err);
    if (!rc && !parts.n) {
        k = &TORCH_BIN;
        rc = list_parts(m, dir, k, &parts, err);
    }
    if (!rc) rc = read_index(m, dir, k, lim, &index, &wm, err);
    if (!rc && index) {
        hf_names_free(&parts);
        rc = index_parts(wm, k, &parts, err);
    }
    if (!rc && !parts.n)
        rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                           "unsupported: %s holds no model*.safetensors or pytorch_model*.bin to "
                           "convert",
                           dir);
    if (!rc) qsort(parts.v, parts.n, sizeof *parts.v, cmp_str);
    /* shards without an index: the core read every pytorch_model*.bin in
     * name order, as the converter does, unless one is pytorch_model.bin
     * itself (transformers' single file, all the core reads then) */
    const bool bin_parts = k == &TORCH_BIN && !index && parts.n > 1;
    for (size_t i = 0; !rc && bin_parts && i < parts.n; i++)
        if (strcmp(parts.v[i], "pytorch_model.bin") == 0)
            rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                               "unsupported: %s: pytorch_model.bin beside %zu other "
                               "pytorch_model*.bin files and no %s",
                               dir, parts.n - 1, k->index);
    if (!rc && bin_parts) rc = bin_names(m, NULL, NULL, out, err);
    for (size_t i = 0; !rc && !bin_parts && i < parts.n; i++)
        rc = k == &SAFETENSORS ? safetensors_names(m, dir, parts.v[i], lim, out, err)
                               : bin_names(m, wm, parts.v[i], out, err);
    json_object_put(index);
    hf_names_free(&parts);
    return rc;
}
