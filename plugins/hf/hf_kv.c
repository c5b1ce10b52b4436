/* Ordered key/values with gguf-py's dict semantics (hf_kv.h). */
#include "hf_kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hf_kvs_init(hf_kvs *l, amn_model *arena, amn_error *err) {
    (void)err;
    *l = (hf_kvs){.arena = arena};
    return AMN_OK;
}

void hf_kvs_free(hf_kvs *l) {
    free(l->items);
    l->items = NULL;
    l->n = l->cap = 0;
}

int hf_kvs_flush(const hf_kvs *l, amn_model *m, amn_error *err) {
    for (size_t i = 0; i < l->n; i++) {
        int rc = amn_model_add_kv(m, &l->items[i], err);
        if (rc) return rc;
    }
    return AMN_OK;
}

static char *dup_arena(hf_kvs *l, const char *s) {
    const size_t n = strlen(s) + 1;
    char *p = amn_model_alloc(l->arena, n);
    if (p) memcpy(p, s, n);
    return p;
}

/* Set key to a scalar of type t (size bytes at v) or a string. */
static int set(hf_kvs *l, const char *key, amn_kv_type t, const void *v, size_t size,
               amn_error *err) {
    void *data = amn_model_alloc(l->arena, size ? size : 1);
    if (!data) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (size) memcpy(data, v, size);
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i].key, key) == 0) {
            l->items[i].type = t;
            l->items[i].data = data;
            return AMN_OK;
        }
    if (l->n == l->cap) {
        const size_t cap = l->cap ? l->cap * 2 : 64;
        amn_kv *p = realloc(l->items, cap * sizeof *p);
        if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        l->items = p;
        l->cap = cap;
    }
    const char *k = dup_arena(l, key);
    if (!k) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    l->items[l->n++] = (amn_kv){.key = k, .type = t, .data = data};
    return AMN_OK;
}

int hf_kv_u32(hf_kvs *l, const char *key, uint32_t v, amn_error *err) {
    return set(l, key, AMN_KV_U32, &v, sizeof v, err);
}

int hf_kv_i32(hf_kvs *l, const char *key, int32_t v, amn_error *err) {
    return set(l, key, AMN_KV_I32, &v, sizeof v, err);
}

int hf_kv_f32(hf_kvs *l, const char *key, float v, amn_error *err) {
    return set(l, key, AMN_KV_F32, &v, sizeof v, err);
}

int hf_kv_bool(hf_kvs *l, const char *key, bool v, amn_error *err) {
    const uint8_t b = v ? 1 : 0;
    return set(l, key, AMN_KV_BOOL, &b, 1, err);
}

int hf_kv_str(hf_kvs *l, const char *key, const char *s, amn_error *err) {
    if (!s || !*s) return AMN_OK;
    const char *p = dup_arena(l, s);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    const amn_str str = {.ptr = p, .len = strlen(p)};
    return set(l, key, AMN_KV_STRING, &str, sizeof str, err);
}

/* Set key to an array of n elements of type t at v (arena memory). */
static int set_array(hf_kvs *l, const char *key, amn_kv_type t, void *v, size_t n, amn_error *err) {
    int rc = set(l, key, AMN_KV_ARRAY, NULL, 0, err);
    if (rc) return rc;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i].key, key) == 0) {
            l->items[i].elem_type = t;
            l->items[i].count = n;
            l->items[i].data = v;
        }
    return AMN_OK;
}

int hf_kv_strs(hf_kvs *l, const char *key, char *const *items, size_t n, amn_error *err) {
    if (!n) return AMN_OK;
    amn_str *v = amn_model_alloc(l->arena, n * sizeof *v);
    if (!v) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *p = dup_arena(l, items[i]);
        if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        v[i] = (amn_str){.ptr = p, .len = strlen(p)};
    }
    return set_array(l, key, AMN_KV_STRING, v, n, err);
}

int hf_kv_arch_bools(hf_kvs *l, const char *suffix, const bool *items, size_t n, amn_error *err) {
    if (!n) return AMN_OK;
    uint8_t *v = amn_model_alloc(l->arena, n);
    if (!v) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) v[i] = items[i] ? 1 : 0;
    char key[256];
    snprintf(key, sizeof key, "%s.%s", l->arch, suffix);
    return set_array(l, key, AMN_KV_BOOL, v, n, err);
}

#define ARCH_KEY(fn, type)                                                                         \
    int hf_kv_arch_##fn(hf_kvs *l, const char *suffix, type v, amn_error *err) {                   \
        char key[256];                                                                             \
        snprintf(key, sizeof key, "%s.%s", l->arch, suffix);                                       \
        return hf_kv_##fn(l, key, v, err);                                                         \
    }
ARCH_KEY(u32, uint32_t)
ARCH_KEY(f32, float)
ARCH_KEY(bool, bool)
ARCH_KEY(str, const char *)
