/* hf_kv.h — the GGUF key/values a conversion writes, in order.
 *
 * gguf-py's GGUFWriter keeps its keys in a dict: a key set twice keeps its
 * first place and takes the last value, and add_string skips an empty
 * string. hf_kvs does the same, then hands the list to an amn_model. */
#ifndef HF_KV_H
#define HF_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/error.h"
#include "amn/model.h"

typedef struct hf_kvs {
    amn_model *arena; /* owns every key and value */
    amn_kv *items;
    size_t n, cap;
    const char *arch; /* "{arch}." prefix of hf_kv_arch_* keys */
} hf_kvs;

int hf_kvs_init(hf_kvs *l, amn_model *arena, amn_error *err);
void hf_kvs_free(hf_kvs *l);
/* Append the list to m (amn_model_add_kv), in order. */
int hf_kvs_flush(const hf_kvs *l, amn_model *m, amn_error *err);

int hf_kv_u32(hf_kvs *l, const char *key, uint32_t v, amn_error *err);
int hf_kv_i32(hf_kvs *l, const char *key, int32_t v, amn_error *err);
int hf_kv_f32(hf_kvs *l, const char *key, float v, amn_error *err);
int hf_kv_bool(hf_kvs *l, const char *key, bool v, amn_error *err);
/* Skipped when s is empty, as add_string does. */
int hf_kv_str(hf_kvs *l, const char *key, const char *s, amn_error *err);
/* An array of strings; skipped when n is 0, as add_array does. */
int hf_kv_strs(hf_kvs *l, const char *key, char *const *items, size_t n, amn_error *err);
/* "{arch}.<suffix>" keys. */
int hf_kv_arch_u32(hf_kvs *l, const char *suffix, uint32_t v, amn_error *err);
int hf_kv_arch_f32(hf_kvs *l, const char *suffix, float v, amn_error *err);
int hf_kv_arch_bool(hf_kvs *l, const char *suffix, bool v, amn_error *err);
int hf_kv_arch_str(hf_kvs *l, const char *suffix, const char *s, amn_error *err);
/* An array of booleans; skipped when n is 0, as add_array does. */
int hf_kv_arch_bools(hf_kvs *l, const char *suffix, const bool *items, size_t n, amn_error *err);

#endif
