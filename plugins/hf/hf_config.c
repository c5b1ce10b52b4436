/* config.json lookups (hf_config.h). */
#include "hf_config.h"

/* The value and the key it was found under. */
static json_object *find_key(json_object *o, const char *const *keys, const char **key) {
    for (; *keys; keys++) {
        json_object *v;
        if (json_object_object_get_ex(o, *keys, &v)) { /* v is NULL for a JSON null */
            *key = *keys;
            return v;
        }
    }
    return NULL;
}

json_object *hf_find(json_object *o, const char *const *keys) {
    const char *key;
    return find_key(o, keys, &key);
}

int hf_get_u32(json_object *o, const char *const *keys, uint32_t *v, amn_error *err) {
    const char *key = NULL;
    json_object *j = find_key(o, keys, &key);
    if (!j) return 0;
    const int64_t x = json_object_get_int64(j);
    if (!json_object_is_type(j, json_type_int) || x < 0 || x > (int64_t)UINT32_MAX)
        return amn_error_set(err, AMN_E_PARSE,
                             "config.json: %s must be an integer in [0, 2^32): %s", key,
                             json_object_to_json_string(j));
    *v = (uint32_t)x;
    return 1;
}

int hf_get_f32(json_object *o, const char *const *keys, float *v, amn_error *err) {
    const char *key = NULL;
    json_object *j = find_key(o, keys, &key);
    if (!j) return 0;
    if (!json_object_is_type(j, json_type_int) && !json_object_is_type(j, json_type_double))
        return amn_error_set(err, AMN_E_PARSE, "config.json: %s must be a number: %s", key,
                             json_object_to_json_string(j));
    *v = json_object_is_type(j, json_type_int) ? (float)json_object_get_int64(j)
                                               : (float)json_object_get_double(j);
    return 1;
}
