/* The arena, the ordered key/value list and the capped file readers the
 * vocabulary builders share (hf_vocab_int.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "amn/kit/json_file.h"
#include "hf_vocab_int.h"

void *hf_alloc(hf_arena *a, uint64_t count, uint64_t size, amn_error *err) {
    if (size && count > UINT64_MAX / size)
        return amn_error_set(err, AMN_E_LIMIT, "vocabulary: allocation size overflows"), NULL;
    uint64_t bytes = count * size;
    if (bytes > SIZE_MAX - 1 || bytes > a->lim->max_alloc_one ||
        a->bytes + bytes > a->lim->max_alloc) {
        amn_error_set(err, AMN_E_LIMIT, "vocabulary: %llu bytes exceed the allocation cap",
                      (unsigned long long)bytes);
        return NULL;
    }
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 64;
        void **nb = realloc(a->blocks, nc * sizeof *nb);
        if (!nb) return amn_error_set(err, AMN_E_NOMEM, "out of memory"), NULL;
        a->blocks = nb;
        a->cap = nc;
    }
    void *p = calloc(1, bytes ? (size_t)bytes : 1);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory"), NULL;
    a->blocks[a->n++] = p;
    a->bytes += bytes;
    return p;
}

char *hf_strdup(hf_arena *a, const char *s, size_t n, amn_error *err) {
    char *p = hf_alloc(a, (uint64_t)n + 1, 1, err);
    if (p && n) memcpy(p, s, n);
    return p;
}

void hf_arena_free(hf_arena *a) {
    for (size_t i = 0; i < a->n; i++) free(a->blocks[i]);
    free(a->blocks);
    a->blocks = NULL;
    a->n = a->cap = 0;
    a->bytes = 0;
}

int hf_vkv_set(hf_vkvs *k, const amn_kv *kv, amn_error *err) {
    for (size_t i = 0; i < k->n; i++)
        if (strcmp(k->v[i].key, kv->key) == 0) {
            k->v[i] = *kv; /* GGUFWriter: a dict update keeps the key's place */
            return AMN_OK;
        }
    if (k->n == k->cap) {
        size_t nc = k->cap ? k->cap * 2 : 16;
        amn_kv *nv = realloc(k->v, nc * sizeof *nv);
        if (!nv) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        k->v = nv;
        k->cap = nc;
    }
    k->v[k->n++] = *kv;
    return AMN_OK;
}

void hf_vkv_remove(hf_vkvs *k, const char *key) {
    for (size_t i = 0; i < k->n; i++)
        if (strcmp(k->v[i].key, key) == 0) {
            memmove(&k->v[i], &k->v[i + 1], (k->n - i - 1) * sizeof *k->v);
            k->n--;
            return;
        }
}

static int set_scalar(hf_vkvs *k, const char *key, amn_kv_type t, const void *v, size_t size,
                      amn_error *err) {
    void *p = hf_alloc(k->arena, 1, size, err);
    if (!p) return err ? err->code : AMN_E_NOMEM;
    memcpy(p, v, size);
    amn_kv kv = {.key = key, .type = t, .data = p};
    return hf_vkv_set(k, &kv, err);
}

int hf_vkv_str(hf_vkvs *k, const char *key, const char *s, size_t n, amn_error *err) {
    char *copy = hf_strdup(k->arena, s, n, err);
    if (!copy) return err ? err->code : AMN_E_NOMEM;
    amn_str str = {copy, n};
    return set_scalar(k, key, AMN_KV_STRING, &str, sizeof str, err);
}

int hf_vkv_u32(hf_vkvs *k, const char *key, uint32_t v, amn_error *err) {
    return set_scalar(k, key, AMN_KV_U32, &v, sizeof v, err);
}

int hf_vkv_bool(hf_vkvs *k, const char *key, bool v, amn_error *err) {
    uint8_t b = v ? 1 : 0;
    return set_scalar(k, key, AMN_KV_BOOL, &b, 1, err);
}

int hf_vkv_array(hf_vkvs *k, const char *key, amn_kv_type elem, uint64_t count, const void *data,
                 amn_error *err) {
    if (count == 0) return AMN_OK;
    amn_kv kv = {.key = key, .type = AMN_KV_ARRAY, .elem_type = elem, .count = count, .data = data};
    return hf_vkv_set(k, &kv, err);
}

void hf_vkv_free(hf_vkvs *k) {
    free(k->v);
    k->v = NULL;
    k->n = k->cap = 0;
}

static int join(char *buf, size_t size, const char *dir, const char *name) {
    int n = snprintf(buf, size, "%s/%s", dir, name);
    return n > 0 && (size_t)n < size;
}

bool hf_file_exists(const char *dir, const char *name) {
    char path[4096];
    struct stat st;
    return join(path, sizeof path, dir, name) && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int hf_json_load(const char *dir, const char *name, const amn_limits *lim, json_object **out,
                 amn_error *err) {
    *out = NULL;
    char path[4096];
    if (!join(path, sizeof path, dir, name))
        return amn_error_set(err, AMN_E_INVALID, "%s: path too long", dir);
    if (!hf_file_exists(dir, name)) return AMN_OK;
    amn_kit_json_caps caps = {lim->max_header_bytes, (int)lim->max_depth, AMN_E_PARSE};
    return amn_kit_json_read_object(path, name, &caps, out, err);
}

int hf_file_load(hf_arena *a, const char *dir, const char *name, uint64_t cap, char **out,
                 size_t *n, amn_error *err) {
    char path[4096];
    if (!join(path, sizeof path, dir, name))
        return amn_error_set(err, AMN_E_INVALID, "%s: path too long", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return amn_error_set(err, AMN_E_IO, "%s: %s", name, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return amn_error_set(err, AMN_E_IO, "%s: not a regular file", name);
    }
    if ((uint64_t)st.st_size > cap) {
        fclose(f);
        return amn_error_set(err, AMN_E_LIMIT, "%s: %llu bytes exceed the %llu-byte cap", name,
                             (unsigned long long)st.st_size, (unsigned long long)cap);
    }
    char *buf = hf_alloc(a, (uint64_t)st.st_size + 1, 1, err);
    if (!buf) {
        fclose(f);
        return err ? err->code : AMN_E_NOMEM;
    }
    size_t got = fread(buf, 1, (size_t)st.st_size, f);
    fclose(f);
    if (got != (size_t)st.st_size) return amn_error_set(err, AMN_E_IO, "%s: short read", name);
    *out = buf;
    *n = got;
    return AMN_OK;
}

bool hf_json_truthy(json_object *o) {
    if (!o) return false;
    switch (json_object_get_type(o)) {
    case json_type_null:
        return false;
    case json_type_boolean:
        return json_object_get_boolean(o);
    case json_type_int:
        return json_object_get_int64(o) != 0;
    case json_type_double:
        return json_object_get_double(o) != 0.0;
    case json_type_string:
        return json_object_get_string_len(o) > 0;
    case json_type_array:
        return json_object_array_length(o) > 0;
    case json_type_object:
        return json_object_object_length(o) > 0;
    }
    return false;
}

json_object *hf_json_get(json_object *obj, const char *key) {
    json_object *v = NULL;
    if (!obj || !json_object_is_type(obj, json_type_object)) return NULL;
    return json_object_object_get_ex(obj, key, &v) ? v : NULL;
}

bool hf_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xE0) == 0xC0)
            len = 2, cp = c & 0x1F;
        else if ((c & 0xF0) == 0xE0)
            len = 3, cp = c & 0x0F;
        else if ((c & 0xF8) == 0xF0)
            len = 4, cp = c & 0x07;
        else
            return false;
        if (n - i < len) return false;
        for (size_t j = 1; j < len; j++) {
            if ((p[i + j] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (p[i + j] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

static bool starts(const char *s, size_t n, const char *p) {
    size_t m = strlen(p);
    return n >= m && memcmp(s, p, m) == 0;
}

static bool ends(const char *s, size_t n, const char *p) {
    size_t m = strlen(p);
    return n >= m && memcmp(s + n - m, p, m) == 0;
}

static bool equals(const char *s, size_t n, const char *p) {
    return strlen(p) == n && memcmp(s, p, n) == 0;
}

bool hf_token_looks_special(const char *s, size_t n) {
    if (equals(s, n, "<pad>") || equals(s, n, "<mask>") || equals(s, n, "<2mass>") ||
        equals(s, n, "[@BOS@]"))
        return true;
    /* as Python's startswith/endswith: the two may overlap ("<|>") */
    if (starts(s, n, "<|") && ends(s, n, "|>")) return true;
    if (starts(s, n, "<\xef\xbd\x9c") && ends(s, n, "\xef\xbd\x9c>")) return true;
    return starts(s, n, "<unused") && ends(s, n, ">");
}
