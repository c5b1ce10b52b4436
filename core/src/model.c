/* A parsed model: tensors with a name index, metadata, and owned resources. */
#include <stdlib.h>
#include <string.h>

#include "abi_internal.h"
#include "input_internal.h"
#include "io_internal.h"
#include "util_internal.h"
#include "amn/checked.h"
#include "amn/model.h"

typedef struct resource {
    void *ptr;
    void (*free_fn)(void *);
} resource;

typedef struct pair {
    char *key, *value;
} pair;

struct amn_model {
    char *format, *label, *path;
    amn_tensor *tensors;
    size_t n_tensors, cap_tensors;
    int64_t *index; /* open addressing over tensor indices, -1 = empty */
    size_t index_cap;
    pair *meta, *notes;
    size_t n_meta, cap_meta, n_notes, cap_notes;
    amn_kv *kvs;
    size_t n_kvs, cap_kvs;
    resource *res;
    size_t n_res, cap_res;
    /* Which res are mappings: checked on every read of a conversion, so
     * not found among a vocabulary's thousands of allocations each time. */
    size_t *maps;
    size_t n_maps, cap_maps;
    amn_limits lim; /* the caps it was opened with (has_lim) */
    bool has_lim;
};

static bool grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, nc * elem);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

amn_model *amn_model_new(const char *format) {
    amn_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->format = amni_strdup(format ? format : "");
    if (!m->format) {
        free(m);
        return NULL;
    }
    return m;
}

void amn_model_free(amn_model *m) {
    if (!m) return;
    for (size_t i = m->n_res; i-- > 0;) m->res[i].free_fn(m->res[i].ptr);
    for (size_t i = 0; i < m->n_tensors; i++) {
        free((char *)m->tensors[i].name);
        free((char *)m->tensors[i].encoding_name);
    }
    for (size_t i = 0; i < m->n_meta; i++) free(m->meta[i].key), free(m->meta[i].value);
    for (size_t i = 0; i < m->n_notes; i++) free(m->notes[i].key), free(m->notes[i].value);
    free(m->res);
    free(m->maps);
    free(m->tensors);
    free(m->index);
    free(m->meta);
    free(m->notes);
    free(m->kvs);
    free(m->format);
    free(m->label);
    free(m->path);
    free(m);
}

const char *amn_model_format(const amn_model *m) {
    return m->format;
}
const char *amn_model_label(const amn_model *m) {
    return m->label ? m->label : m->format;
}
const char *amn_model_path(const amn_model *m) {
    return m->path;
}
/* Only the fields lim->struct_size covers are read (a plugin built against
 * an older header passes a smaller struct); the rest keep their defaults. */
void amn_model_set_limits(amn_model *m, const amn_limits *lim) {
    m->has_lim = lim != NULL && lim->struct_size >= AMNI_LIMITS_SIZE_2_0;
    if (!m->has_lim) return;
    amn_limits_default(&m->lim);
    memcpy(&m->lim, lim, lim->struct_size < sizeof m->lim ? lim->struct_size : sizeof m->lim);
    m->lim.struct_size = sizeof m->lim;
}
const amn_limits *amn_model_limits(const amn_model *m) {
    return m && m->has_lim ? &m->lim : NULL;
}

static int set_string(char **slot, const char *s, amn_error *err) {
    char *d = amni_strdup(s);
    if (s && !d) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    free(*slot);
    *slot = d;
    return AMN_OK;
}

int amn_model_set_label(amn_model *m, const char *label, amn_error *err) {
    return set_string(&m->label, label, err);
}
int amn_model_set_path(amn_model *m, const char *path, amn_error *err) {
    return set_string(&m->path, path, err);
}

/* FNV-1a: names are short and this index is rebuilt only on growth. */
static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static void index_insert(int64_t *index, size_t cap, const amn_tensor *tensors, int64_t i) {
    size_t slot = hash_name(tensors[i].name) & (cap - 1);
    while (index[slot] >= 0) slot = (slot + 1) & (cap - 1);
    index[slot] = i;
}

static bool index_reserve(amn_model *m, size_t n) {
    if (n * 2 <= m->index_cap) return true;
    size_t cap = m->index_cap ? m->index_cap : 64;
    while (cap < n * 2) cap *= 2;
    int64_t *idx = malloc(cap * sizeof *idx);
    if (!idx) return false;
    memset(idx, 0xff, cap * sizeof *idx);
    for (size_t i = 0; i < m->n_tensors; i++) index_insert(idx, cap, m->tensors, (int64_t)i);
    free(m->index);
    m->index = idx;
    m->index_cap = cap;
    return true;
}

int64_t amn_model_find(const amn_model *m, const char *name) {
    if (!m->index_cap || !name) return -1;
    size_t slot = hash_name(name) & (m->index_cap - 1);
    for (; m->index[slot] >= 0; slot = (slot + 1) & (m->index_cap - 1))
        if (strcmp(m->tensors[m->index[slot]].name, name) == 0) return m->index[slot];
    return -1;
}

int amn_model_add_tensor(amn_model *m, const amn_tensor *in, amn_error *err) {
    if (in->struct_size < AMNI_TENSOR_SIZE_2_0)
        return amn_error_set(err, AMN_E_INVALID,
                             "tensor struct_size %u is smaller than plugin ABI 2.0's (%zu)",
                             in->struct_size, (size_t)AMNI_TENSOR_SIZE_2_0);
    amn_tensor full;
    amni_copy_sized(&full, sizeof full, in);
    const amn_tensor *t = &full;
    if (!t->name || !*t->name) return amn_error_set(err, AMN_E_PARSE, "tensor with an empty name");
    if (amn_model_find(m, t->name) >= 0)
        return amn_error_set(err, AMN_E_PARSE, "duplicate tensor name %s", t->name);
    int rc = amn_tensor_validate(t, err);
    if (rc) return rc;
    if (!grow((void **)&m->tensors, &m->cap_tensors, m->n_tensors + 1, sizeof *m->tensors) ||
        !index_reserve(m, m->n_tensors + 1))
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    amn_tensor c = *t;
    c.name = amni_strdup(t->name);
    c.encoding_name = amni_strdup(t->encoding_name);
    if (!c.name || (t->encoding_name && !c.encoding_name)) {
        free((char *)c.name);
        free((char *)c.encoding_name);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    m->tensors[m->n_tensors] = c;
    index_insert(m->index, m->index_cap, m->tensors, (int64_t)m->n_tensors);
    m->n_tensors++;
    return AMN_OK;
}

size_t amn_model_tensor_count(const amn_model *m) {
    return m->n_tensors;
}
const amn_tensor *amn_model_tensor(const amn_model *m, size_t i) {
    return i < m->n_tensors ? &m->tensors[i] : NULL;
}

uint64_t amn_model_total_bytes(const amn_model *m) {
    uint64_t sum = 0;
    for (size_t i = 0; i < m->n_tensors; i++) amn_add_u64(sum, m->tensors[i].nbytes, &sum);
    return sum;
}

static int add_pair(pair **arr, size_t *n, size_t *cap, const char *k, const char *v, bool replace,
                    amn_error *err) {
    if (replace)
        for (size_t i = 0; i < *n; i++)
            if (strcmp((*arr)[i].key, k) == 0) {
                char *d = amni_strdup(v);
                if (!d) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
                free((*arr)[i].value);
                (*arr)[i].value = d;
                return AMN_OK;
            }
    if (!grow((void **)arr, cap, *n + 1, sizeof **arr))
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    pair p = {amni_strdup(k), amni_strdup(v)};
    if (!p.key || !p.value) {
        free(p.key);
        free(p.value);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    (*arr)[(*n)++] = p;
    return AMN_OK;
}

int amn_model_set_meta(amn_model *m, const char *key, const char *value, amn_error *err) {
    if (!key || !value) return amn_error_set(err, AMN_E_INVALID, "metadata needs a key and value");
    return add_pair(&m->meta, &m->n_meta, &m->cap_meta, key, value, true, err);
}
const char *amn_model_get_meta(const amn_model *m, const char *key) {
    for (size_t i = 0; i < m->n_meta; i++)
        if (strcmp(m->meta[i].key, key) == 0) return m->meta[i].value;
    return NULL;
}
size_t amn_model_meta_count(const amn_model *m) {
    return m->n_meta;
}
const char *amn_model_meta_key(const amn_model *m, size_t i) {
    return i < m->n_meta ? m->meta[i].key : NULL;
}
const char *amn_model_meta_value(const amn_model *m, size_t i) {
    return i < m->n_meta ? m->meta[i].value : NULL;
}

int amn_model_add_note(amn_model *m, const char *name, const char *value, amn_error *err) {
    if (!name || !value) return amn_error_set(err, AMN_E_INVALID, "a note needs a name and value");
    return add_pair(&m->notes, &m->n_notes, &m->cap_notes, name, value, false, err);
}
size_t amn_model_note_count(const amn_model *m) {
    return m->n_notes;
}
const char *amn_model_note_name(const amn_model *m, size_t i) {
    return i < m->n_notes ? m->notes[i].key : NULL;
}
const char *amn_model_note_value(const amn_model *m, size_t i) {
    return i < m->n_notes ? m->notes[i].value : NULL;
}

void *amn_model_alloc(amn_model *m, size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) return NULL;
    if (amn_model_adopt(m, p, free, NULL) != AMN_OK) return NULL;
    return p;
}

int amn_model_adopt(amn_model *m, void *ptr, void (*free_fn)(void *), amn_error *err) {
    const bool is_map = free_fn == amn_map_release;
    if (!grow((void **)&m->res, &m->cap_res, m->n_res + 1, sizeof *m->res) ||
        (is_map && !grow((void **)&m->maps, &m->cap_maps, m->n_maps + 1, sizeof *m->maps))) {
        free_fn(ptr);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    if (is_map) m->maps[m->n_maps++] = m->n_res;
    m->res[m->n_res++] = (resource){ptr, free_fn};
    return AMN_OK;
}

void *amni_model_resource(const amn_model *m, void (*free_fn)(void *)) {
    for (size_t i = 0; i < m->n_res; i++)
        if (m->res[i].free_fn == free_fn) return m->res[i].ptr;
    return NULL;
}

const amn_map *amni_model_map_for(const amn_model *m, const void *p, uint64_t n) {
    for (size_t k = 0; k < m->n_maps; k++) {
        const amn_map *map = m->res[m->maps[k]].ptr;
        const uint8_t *base = amn_map_data(map), *q = p;
        if (q >= base && (uint64_t)(q - base) <= amn_map_size(map) &&
            n <= amn_map_size(map) - (uint64_t)(q - base))
            return map;
    }
    return NULL;
}

void amni_model_drop(const amn_model *m, const void *p, uint64_t n) {
    const amn_map *map = n ? amni_model_map_for(m, p, n) : NULL;
    if (map && n <= SIZE_MAX) amni_map_drop_range(map, p, (size_t)n);
}

void amni_model_retire_lent(const amn_model *m) {
    for (size_t k = 0; k < m->n_maps; k++) amni_input_retire_lent(m->res[m->maps[k]].ptr);
}

void amni_model_drop_retired(const amn_model *m) {
    for (size_t k = 0; k < m->n_maps; k++) amni_input_drop_retired(m->res[m->maps[k]].ptr);
}

int amni_model_check_inputs(const amn_model *m, amn_error *err) {
    for (size_t k = 0; k < m->n_maps; k++) {
        int rc = amni_map_check(m->res[m->maps[k]].ptr, err);
        if (rc) return rc;
    }
    return AMN_OK;
}

int amni_model_check_tensor(const amn_model *m, const amn_tensor *t, amn_error *err) {
    const uint64_t span = t->extent > t->nbytes ? t->extent : t->nbytes;
    const amn_map *map = t->data && span ? amni_model_map_for(m, t->data, span) : NULL;
    return map ? amni_map_check(map, err) : amni_model_check_inputs(m, err);
}

/* ---- typed key/values: deep copies live in model-owned memory ----------- */

size_t amn_kv_type_size(amn_kv_type t) {
    switch (t) {
    case AMN_KV_U8:
    case AMN_KV_I8:
    case AMN_KV_BOOL:
        return 1;
    case AMN_KV_U16:
    case AMN_KV_I16:
        return 2;
    case AMN_KV_U32:
    case AMN_KV_I32:
    case AMN_KV_F32:
        return 4;
    case AMN_KV_U64:
    case AMN_KV_I64:
    case AMN_KV_F64:
        return 8;
    case AMN_KV_STRING:
        return sizeof(amn_str);
    case AMN_KV_ARRAY:
        return sizeof(amn_kv);
    default:
        return 0;
    }
}

static int copy_str(amn_model *m, const amn_str *src, amn_str *dst, amn_error *err) {
    char *p = amn_model_alloc(m, src->len + 1);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (src->len) memcpy(p, src->ptr, src->len);
    p[src->len] = '\0';
    dst->ptr = p;
    dst->len = src->len;
    return AMN_OK;
}

static int copy_kv_value(amn_model *m, const amn_kv *src, amn_kv *dst, unsigned depth,
                         amn_error *err) {
    if (depth > 64) return amn_error_set(err, AMN_E_LIMIT, "metadata nested too deeply");
    *dst = *src;
    dst->key = NULL;
    if (src->type == AMN_KV_STRING) {
        amn_str *s = amn_model_alloc(m, sizeof *s);
        if (!s) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        dst->data = s;
        return copy_str(m, src->data, s, err);
    }
    if (src->type != AMN_KV_ARRAY) {
        size_t sz = amn_kv_type_size(src->type);
        if (!sz) return amn_error_set(err, AMN_E_INVALID, "unknown metadata type %d", src->type);
        void *p = amn_model_alloc(m, sz);
        if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        memcpy(p, src->data, sz);
        dst->data = p;
        return AMN_OK;
    }
    size_t es = amn_kv_type_size(src->elem_type);
    uint64_t bytes;
    if (!es) return amn_error_set(err, AMN_E_INVALID, "unknown array type %d", src->elem_type);
    if (!amn_mul_u64(src->count, es, &bytes) || bytes > SIZE_MAX)
        return amn_error_set(err, AMN_E_LIMIT, "metadata array too large");
    void *p = amn_model_alloc(m, (size_t)bytes);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    dst->data = p;
    if (src->elem_type == AMN_KV_STRING) {
        for (uint64_t i = 0; i < src->count; i++) {
            int rc = copy_str(m, &((const amn_str *)src->data)[i], &((amn_str *)p)[i], err);
            if (rc) return rc;
        }
    } else if (src->elem_type == AMN_KV_ARRAY) {
        for (uint64_t i = 0; i < src->count; i++) {
            int rc = copy_kv_value(m, &((const amn_kv *)src->data)[i], &((amn_kv *)p)[i], depth + 1,
                                   err);
            if (rc) return rc;
        }
    } else if (bytes) {
        memcpy(p, src->data, (size_t)bytes);
    }
    return AMN_OK;
}

int amn_model_add_kv(amn_model *m, const amn_kv *kv, amn_error *err) {
    if (!kv->key) return amn_error_set(err, AMN_E_INVALID, "metadata without a key");
    if (!grow((void **)&m->kvs, &m->cap_kvs, m->n_kvs + 1, sizeof *m->kvs))
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    amn_kv c;
    int rc = copy_kv_value(m, kv, &c, 0, err);
    if (rc) return rc;
    char *key = amn_model_alloc(m, strlen(kv->key) + 1);
    if (!key) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    strcpy(key, kv->key);
    c.key = key;
    m->kvs[m->n_kvs++] = c;
    return AMN_OK;
}

size_t amn_model_kv_count(const amn_model *m) {
    return m->n_kvs;
}
const amn_kv *amn_model_kv(const amn_model *m, size_t i) {
    return i < m->n_kvs ? &m->kvs[i] : NULL;
}
const amn_kv *amn_model_find_kv(const amn_model *m, const char *key) {
    for (size_t i = 0; i < m->n_kvs; i++)
        if (strcmp(m->kvs[i].key, key) == 0) return &m->kvs[i];
    return NULL;
}
