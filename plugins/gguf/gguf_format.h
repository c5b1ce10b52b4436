/* The GGUF container (versions 1-3): reader, header-only inspection and the
 * streaming v3 writer. Private to the gguf plugin. */
#ifndef AMN_GGUF_FORMAT_H
#define AMN_GGUF_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "amn/format.h"
#include "amn/model.h"

#define GGUF_MAGIC             "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_DIMS          4u /* GGML_MAX_DIMS */
#define GGUF_KEY_ALIGNMENT     "general.alignment"

extern const amn_format amn_gguf_format;
extern const amn_writer gguf_writer;

/* Parse a GGUF file from src and fill m: label, key/values, tensors. When
 * `map` is non-NULL it holds the whole file and tensors point into it;
 * otherwise only the header is read (inspect) and the data section is never
 * touched. */
int gguf_read(const amn_source *src, const uint8_t *map, const amn_limits *lim, amn_model *m,
              amn_error *err);

/* m, read from the file at path (NULL: a stream), when it is a model of one
 * file; when it is a shard of a split GGUF (split.count > 1), the whole
 * model its shards make, found by name beside it (gguf_split.c): through
 * sib when given (members of a packed folder), else on disk. Takes m
 * (freed on failure or replaced). */
int gguf_split_resolve(const char *path, const amn_siblings *sib, amn_model *m, bool header_only,
                       const amn_limits *lim, amn_model **out, amn_error *err);

/* ---- writer metadata: an ordered key -> typed value list ---------------- */

typedef struct gguf_kvlist {
    amn_kv *items;
    size_t n, cap;
    amn_model *arena; /* owns values created from JSON and --gguf-kv */
} gguf_kvlist;

int gguf_kvlist_init(gguf_kvlist *l, amn_error *err);
void gguf_kvlist_free(gguf_kvlist *l);
/* Index of key, or -1. */
ptrdiff_t gguf_kvlist_find(const gguf_kvlist *l, const char *key);
/* Replace the value of an existing key in place, else append. kv is stored
 * shallowly: its key and data must outlive the list. */
int gguf_kvlist_set(gguf_kvlist *l, const amn_kv *kv, amn_error *err);
void gguf_kvlist_remove(gguf_kvlist *l, size_t i);

/* --gguf-metadata FILE.json: a JSON object of key -> value, typed as
 * documented in gguf_metadata.c, merged into l (later keys win). */
int gguf_metadata_load(const char *path, gguf_kvlist *l, amn_error *err);
/* --gguf-kv KEY=VALUE: VALUE takes the type the key already has in l (a new
 * key becomes a string, general.alignment a u32). */
int gguf_metadata_override(const char *spec, gguf_kvlist *l, amn_error *err);

/* Bytes of a scalar GGUF value type; 0 for STRING, ARRAY and unknown ids
 * (which the callers parse or refuse themselves). */
static inline size_t gguf_scalar_size(uint32_t t) {
    return t == AMN_KV_STRING || t == AMN_KV_ARRAY || t > AMN_KV_F64
               ? 0
               : amn_kv_type_size((amn_kv_type)t);
}

#endif
