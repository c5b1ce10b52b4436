/* Metadata the GGUF writer is given: an ordered key -> typed value list,
 * filled from the source model, a --gguf-metadata JSON file and --gguf-kv
 * KEY=VALUE overrides, in that order of precedence (later wins, in place).
 *
 * JSON values without an explicit type are typed like this:
 *   "text" -> string, true/false -> bool, 1.5 -> f32,
 *   integers -> u32 when in [0, 2^32), i64 when negative, else u64,
 *   [ ... ] -> an array typed from its first element (an integer array takes
 *   the narrowest of u32 / i64 / u64 holding every element, and becomes f32 if
 *   any element has a fraction), [[...], ...] -> nested arrays, [] -> an empty
 *   string array.
 * Explicit forms: {"type": "i32", "value": 3} and
 *   {"type": "array", "item_type": "u8", "value": [1, 2]}
 * with the types u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool string array
 * (also spelled uint8 ... float64, str).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "amn/checked.h"
#include "amn/kit/json_file.h"
#include "gguf_format.h"

#define MAX_JSON_DEPTH 64
#define MAX_JSON_BYTES (100u << 20)

/* ---- the list -------------------------------------------------------------- */

int gguf_kvlist_init(gguf_kvlist *l, amn_error *err) {
    memset(l, 0, sizeof *l);
    l->arena = amn_model_new("gguf-metadata");
    if (!l->arena) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    return AMN_OK;
}

void gguf_kvlist_free(gguf_kvlist *l) {
    free(l->items);
    amn_model_free(l->arena);
    memset(l, 0, sizeof *l);
}

ptrdiff_t gguf_kvlist_find(const gguf_kvlist *l, const char *key) {
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i].key, key) == 0) return (ptrdiff_t)i;
    return -1;
}

int gguf_kvlist_set(gguf_kvlist *l, const amn_kv *kv, amn_error *err) {
    ptrdiff_t i = gguf_kvlist_find(l, kv->key);
    if (i >= 0) {
        l->items[i] = *kv;
        return AMN_OK;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        amn_kv *p = realloc(l->items, cap * sizeof *p);
        if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        l->items = p;
        l->cap = cap;
    }
    l->items[l->n++] = *kv;
    return AMN_OK;
}

void gguf_kvlist_remove(gguf_kvlist *l, size_t i) {
    if (i >= l->n) return;
    memmove(&l->items[i], &l->items[i + 1], (l->n - i - 1) * sizeof *l->items);
    l->n--;
}

static void *alloc(gguf_kvlist *l, size_t n, amn_error *err) {
    void *p = amn_model_alloc(l->arena, n);
    if (!p) amn_error_set(err, AMN_E_NOMEM, "out of memory");
    return p;
}

static const char *dup_key(gguf_kvlist *l, const char *key, amn_error *err) {
    char *k = alloc(l, strlen(key) + 1, err);
    if (k) strcpy(k, key);
    return k;
}

/* ---- types ----------------------------------------------------------------- */

static const struct {
    const char *name;
    amn_kv_type type;
} type_names[] = {
    {"u8", AMN_KV_U8},         {"uint8", AMN_KV_U8},    {"i8", AMN_KV_I8},
    {"int8", AMN_KV_I8},       {"u16", AMN_KV_U16},     {"uint16", AMN_KV_U16},
    {"i16", AMN_KV_I16},       {"int16", AMN_KV_I16},   {"u32", AMN_KV_U32},
    {"uint32", AMN_KV_U32},    {"i32", AMN_KV_I32},     {"int32", AMN_KV_I32},
    {"u64", AMN_KV_U64},       {"uint64", AMN_KV_U64},  {"i64", AMN_KV_I64},
    {"int64", AMN_KV_I64},     {"f32", AMN_KV_F32},     {"float32", AMN_KV_F32},
    {"f64", AMN_KV_F64},       {"float64", AMN_KV_F64}, {"bool", AMN_KV_BOOL},
    {"string", AMN_KV_STRING}, {"str", AMN_KV_STRING},  {"array", AMN_KV_ARRAY},
};

static bool type_from_name(const char *s, amn_kv_type *out) {
    for (size_t i = 0; i < sizeof type_names / sizeof *type_names; i++)
        if (strcmp(s, type_names[i].name) == 0) {
            *out = type_names[i].type;
            return true;
        }
    return false;
}

static bool is_signed(amn_kv_type t) {
    return t == AMN_KV_I8 || t == AMN_KV_I16 || t == AMN_KV_I32 || t == AMN_KV_I64;
}

/* Store an integer given as sign + magnitude into an integer type. */
static bool store_int(amn_kv_type t, bool neg, uint64_t mag, void *dst) {
    static const uint64_t umax[] = {
        [AMN_KV_U8] = UINT8_MAX,   [AMN_KV_U16] = UINT16_MAX, [AMN_KV_U32] = UINT32_MAX,
        [AMN_KV_U64] = UINT64_MAX, [AMN_KV_I8] = INT8_MAX,    [AMN_KV_I16] = INT16_MAX,
        [AMN_KV_I32] = INT32_MAX,  [AMN_KV_I64] = INT64_MAX};
    const size_t sz = gguf_scalar_size(t);
    if (!sz || t == AMN_KV_BOOL || t == AMN_KV_F32 || t == AMN_KV_F64) return false;
    if (neg && !is_signed(t)) return false;
    /* the most negative value is one more than the largest positive one */
    if (mag > umax[t] + (neg ? 1u : 0u)) return false;
    const uint64_t bits = neg ? (uint64_t)0 - mag : mag; /* two's complement */
    /* the low sz bytes, as a host-order value of that size */
    if (sz == 1) *(uint8_t *)dst = (uint8_t)bits;
    if (sz == 2) memcpy(dst, &(uint16_t){(uint16_t)bits}, 2);
    if (sz == 4) memcpy(dst, &(uint32_t){(uint32_t)bits}, 4);
    if (sz == 8) memcpy(dst, &bits, 8);
    return true;
}

static bool store_float(amn_kv_type t, double d, void *dst) {
    if (t == AMN_KV_F64) {
        memcpy(dst, &d, 8);
        return true;
    }
    if (t != AMN_KV_F32) return false;
    float f = (float)d;
    memcpy(dst, &f, 4);
    return true;
}

/* ---- JSON -> value ----------------------------------------------------------- */

typedef struct jctx {
    gguf_kvlist *l;
    const char *file;
    const char *key;
    amn_error *err;
} jctx;

static int bad(const jctx *c, const char *why) {
    return amn_error_set(c->err, AMN_E_INVALID, "%s: key %s: %s", c->file, c->key, why);
}

static void json_int(json_object *o, bool *neg, uint64_t *mag) {
    int64_t s = json_object_get_int64(o);
    *neg = s < 0;
    /* json-c keeps integers above INT64_MAX as uint64 */
    *mag = s < 0 ? (uint64_t)0 - (uint64_t)s : json_object_get_uint64(o);
}

static int json_scalar(const jctx *c, json_object *o, amn_kv_type t, void *dst) {
    switch (json_object_get_type(o)) {
    case json_type_int: {
        bool neg;
        uint64_t mag;
        json_int(o, &neg, &mag);
        if (store_float(t, neg ? -(double)mag : (double)mag, dst)) return AMN_OK;
        if (!store_int(t, neg, mag, dst)) return bad(c, "integer out of range for its type");
        return AMN_OK;
    }
    case json_type_double:
        if (!store_float(t, json_object_get_double(o), dst))
            return bad(c, "a number with a fraction needs f32 or f64");
        return AMN_OK;
    case json_type_boolean:
        if (t != AMN_KV_BOOL) return bad(c, "a boolean needs the type bool");
        *(uint8_t *)dst = json_object_get_boolean(o) ? 1 : 0;
        return AMN_OK;
    case json_type_string: {
        if (t != AMN_KV_STRING) return bad(c, "a string needs the type string");
        amn_str *s = dst;
        size_t n = (size_t)json_object_get_string_len(o);
        char *p = alloc(c->l, n + 1, c->err);
        if (!p) return AMN_E_NOMEM;
        memcpy(p, json_object_get_string(o), n);
        p[n] = '\0';
        s->ptr = p;
        s->len = n;
        return AMN_OK;
    }
    default:
        return bad(c, "null and objects are not metadata values");
    }
}

/* The element type of a plain JSON array. */
static int infer_array(const jctx *c, json_object *a, amn_kv_type *out) {
    const size_t n = json_object_array_length(a);
    if (n == 0) {
        *out = AMN_KV_STRING;
        return AMN_OK;
    }
    json_object *first = json_object_array_get_idx(a, 0);
    switch (json_object_get_type(first)) {
    case json_type_string:
        *out = AMN_KV_STRING;
        return AMN_OK;
    case json_type_boolean:
        *out = AMN_KV_BOOL;
        return AMN_OK;
    case json_type_double:
        *out = AMN_KV_F32;
        return AMN_OK;
    case json_type_array:
    case json_type_object:
        *out = AMN_KV_ARRAY;
        return AMN_OK;
    case json_type_int: {
        bool any_neg = false, any_frac = false;
        uint64_t max = 0;
        for (size_t i = 0; i < n; i++) {
            json_object *e = json_object_array_get_idx(a, i);
            if (json_object_is_type(e, json_type_double)) {
                any_frac = true;
                continue;
            }
            if (!json_object_is_type(e, json_type_int)) continue; /* reported when stored */
            bool neg;
            uint64_t mag;
            json_int(e, &neg, &mag);
            if (neg)
                any_neg = true;
            else if (mag > max)
                max = mag;
        }
        *out = any_frac           ? AMN_KV_F32
               : any_neg          ? AMN_KV_I64
               : max > UINT32_MAX ? AMN_KV_U64
                                  : AMN_KV_U32;
        return AMN_OK;
    }
    default:
        return bad(c, "arrays of null are not metadata values");
    }
}

static int json_value(const jctx *c, json_object *o, int want, unsigned depth, amn_kv *out);

static int json_array(const jctx *c, json_object *a, amn_kv_type et, unsigned depth, amn_kv *out) {
    if (!json_object_is_type(a, json_type_array)) return bad(c, "an array value must be a list");
    if (depth >= MAX_JSON_DEPTH) return bad(c, "arrays nested too deeply");
    const size_t n = json_object_array_length(a);
    const size_t slot = et == AMN_KV_STRING  ? sizeof(amn_str)
                        : et == AMN_KV_ARRAY ? sizeof(amn_kv)
                                             : gguf_scalar_size(et);
    uint64_t bytes;
    if (!slot) return bad(c, "unknown array element type");
    if (!amn_mul_u64(n, slot, &bytes) || bytes > SIZE_MAX) return bad(c, "array too large");
    uint8_t *p = alloc(c->l, (size_t)bytes, c->err);
    if (!p) return AMN_E_NOMEM;
    memset(p, 0, (size_t)bytes);
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(a, i);
        int rc = et == AMN_KV_ARRAY ? json_value(c, e, AMN_KV_ARRAY, depth + 1, (amn_kv *)p + i)
                                    : json_scalar(c, e, et, p + i * slot);
        if (rc) return rc;
    }
    out->type = AMN_KV_ARRAY;
    out->elem_type = et;
    out->count = n;
    out->data = p;
    return AMN_OK;
}

/* One value: plain (inferred, or converted to `want` when >= 0) or explicit. */
static int json_value(const jctx *c, json_object *o, int want, unsigned depth, amn_kv *out) {
    memset(out, 0, sizeof *out);
    amn_kv_type t;
    json_object *val = o;
    if (json_object_is_type(o, json_type_object)) {
        json_object *jt, *jit;
        if (!json_object_object_get_ex(o, "type", &jt) ||
            !json_object_is_type(jt, json_type_string) ||
            !json_object_object_get_ex(o, "value", &val))
            return bad(c, "an object value needs \"type\" and \"value\"");
        if (!type_from_name(json_object_get_string(jt), &t)) return bad(c, "unknown type name");
        if (want >= 0 && (int)t != want) return bad(c, "element type differs from item_type");
        if (t == AMN_KV_ARRAY) {
            amn_kv_type it;
            if (!json_object_object_get_ex(o, "item_type", &jit) ||
                !json_object_is_type(jit, json_type_string) ||
                !type_from_name(json_object_get_string(jit), &it))
                return bad(c, "an array needs a valid \"item_type\"");
            return json_array(c, val, it, depth, out);
        }
    } else if (want >= 0) {
        t = (amn_kv_type)want;
    } else {
        switch (json_object_get_type(o)) {
        case json_type_string:
            t = AMN_KV_STRING;
            break;
        case json_type_boolean:
            t = AMN_KV_BOOL;
            break;
        case json_type_double:
            t = AMN_KV_F32;
            break;
        case json_type_int: {
            bool neg;
            uint64_t mag;
            json_int(o, &neg, &mag);
            t = neg ? AMN_KV_I64 : mag > UINT32_MAX ? AMN_KV_U64 : AMN_KV_U32;
            break;
        }
        case json_type_array:
            t = AMN_KV_ARRAY;
            break;
        default:
            return bad(c, "null is not a metadata value");
        }
    }
    if (t == AMN_KV_ARRAY) {
        amn_kv_type et = AMN_KV_STRING;
        if (!json_object_is_type(val, json_type_array))
            return bad(c, "an array value must be a list");
        int rc = infer_array(c, val, &et);
        return rc ? rc : json_array(c, val, et, depth, out);
    }
    const size_t sz = t == AMN_KV_STRING ? sizeof(amn_str) : gguf_scalar_size(t);
    void *p = alloc(c->l, sz, c->err);
    if (!p) return AMN_E_NOMEM;
    out->type = t;
    out->data = p;
    return json_scalar(c, val, t, p);
}

int gguf_metadata_load(const char *path, gguf_kvlist *l, amn_error *err) {
    /* A --gguf-metadata file is a command-line argument: malformed is invalid. */
    static const amn_kit_json_caps caps = {
        .max_bytes = MAX_JSON_BYTES, .max_depth = MAX_JSON_DEPTH, .bad_code = AMN_E_INVALID};
    json_object *root = NULL;
    int rc = amn_kit_json_read_object(path, NULL, &caps, &root, err);
    if (rc) return rc;
    json_object_object_foreach(root, key, val) {
        jctx c = {.l = l, .file = path, .key = key, .err = err};
        amn_kv kv;
        if (!*key) {
            rc = amn_error_set(err, AMN_E_INVALID, "%s: empty key", path);
            break;
        }
        if ((rc = json_value(&c, val, -1, 0, &kv))) break;
        if (!(kv.key = dup_key(l, key, err))) {
            rc = AMN_E_NOMEM;
            break;
        }
        if ((rc = gguf_kvlist_set(l, &kv, err))) break;
    }
    json_object_put(root);
    return rc;
}

/* ---- KEY=VALUE ------------------------------------------------------------------ */

static bool parse_uint(const char *s, uint64_t *out) {
    if (*s < '0' || *s > '9') return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

/* VALUE as type t into dst (scalar storage); false if it is not one. */
static bool parse_scalar(const char *s, amn_kv_type t, void *dst) {
    switch (t) {
    case AMN_KV_BOOL:
        if (strcmp(s, "true") == 0 || strcmp(s, "1") == 0)
            *(uint8_t *)dst = 1;
        else if (strcmp(s, "false") == 0 || strcmp(s, "0") == 0)
            *(uint8_t *)dst = 0;
        else
            return false;
        return true;
    case AMN_KV_F32:
    case AMN_KV_F64: {
        char *end;
        errno = 0;
        if (!*s) return false;
        if (t == AMN_KV_F32) {
            float f = strtof(s, &end);
            if (*end || (errno && isinf(f))) return false;
            memcpy(dst, &f, 4);
        } else {
            double d = strtod(s, &end);
            if (*end || (errno && isinf(d))) return false;
            memcpy(dst, &d, 8);
        }
        return true;
    }
    default: {
        bool neg = *s == '-';
        uint64_t mag;
        if (!parse_uint(s + neg, &mag)) return false;
        return store_int(t, neg, mag, dst);
    }
    }
}

int gguf_metadata_override(const char *spec, gguf_kvlist *l, amn_error *err) {
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec)
        return amn_error_set(err, AMN_E_INVALID, "option kv (--gguf-kv) %s: expected KEY=VALUE",
                             spec);
    char *key = alloc(l, (size_t)(eq - spec) + 1, err);
    if (!key) return AMN_E_NOMEM;
    memcpy(key, spec, (size_t)(eq - spec));
    key[eq - spec] = '\0';
    const char *value = eq + 1;
    ptrdiff_t at = gguf_kvlist_find(l, key);
    amn_kv kv = {.key = key, .type = AMN_KV_STRING};
    if (at >= 0)
        kv.type = l->items[at].type;
    else if (strcmp(key, GGUF_KEY_ALIGNMENT) == 0)
        kv.type = AMN_KV_U32;
    if (kv.type == AMN_KV_ARRAY)
        return amn_error_set(
            err, AMN_E_INVALID,
            "option kv (--gguf-kv) %s: the key holds an array; set it with --gguf-metadata", key);
    const size_t sz = kv.type == AMN_KV_STRING ? sizeof(amn_str) : gguf_scalar_size(kv.type);
    void *p = alloc(l, sz, err);
    if (!p) return AMN_E_NOMEM;
    if (kv.type == AMN_KV_STRING) {
        size_t n = strlen(value);
        char *text = alloc(l, n + 1, err);
        if (!text) return AMN_E_NOMEM;
        memcpy(text, value, n + 1);
        *(amn_str *)p = (amn_str){text, n};
    } else if (!parse_scalar(value, kv.type, p)) {
        static const char *const names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                            "bool", "string", "array", "u64", "i64", "f64"};
        return amn_error_set(err, AMN_E_INVALID, "option kv (--gguf-kv) %s: '%s' is not a valid %s",
                             key, value, names[kv.type]);
    }
    kv.data = p;
    return gguf_kvlist_set(l, &kv, err);
}
