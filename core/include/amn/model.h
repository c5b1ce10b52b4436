/* amn/model.h — a parsed file: its tensors, metadata and the memory behind them.
 *
 * A model owns everything it points to: tensor names, metadata strings, and the
 * mappings or buffers that hold tensor bytes (adopted by the format plugin that
 * built it). Pointers returned by the accessors stay valid until amn_model_free.
 */
#ifndef AMN_MODEL_H
#define AMN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "amn/error.h"
#include "amn/export.h"
#include "amn/tensor.h"

typedef struct amn_limits amn_limits; /* amn/format.h */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct amn_model amn_model;

/* Typed key/value (GGUF metadata and the like). */
typedef enum amn_kv_type {
    AMN_KV_U8,
    AMN_KV_I8,
    AMN_KV_U16,
    AMN_KV_I16,
    AMN_KV_U32,
    AMN_KV_I32,
    AMN_KV_F32,
    AMN_KV_BOOL,
    AMN_KV_STRING,
    AMN_KV_ARRAY,
    AMN_KV_U64,
    AMN_KV_I64,
    AMN_KV_F64,
} amn_kv_type; /* numbered as GGUF numbers its value types */

/* amn_str and amn_kv are frozen for all of plugin ABI 2.x: they sit in arrays
 * (an array metadata value is an array of them) whose stride is the size a
 * plugin was built with, so they can never grow. A richer value would be a
 * new type. */
typedef struct amn_str {
    const char *ptr; /* not NUL-terminated in general */
    uint64_t len;
} amn_str;

typedef struct amn_kv {
    const char *key;
    amn_kv_type type;
    /* Scalars: `data` points at one value of the type (bool: one byte).
     * STRING: `data` points at one amn_str.
     * ARRAY: `elem_type` and `count` describe `data`, an array of values (of
     * amn_str for strings; nested arrays are stored as arrays of amn_kv). */
    amn_kv_type elem_type;
    uint64_t count;
    const void *data;
} amn_kv;

/* Bytes of one value of type t as stored in amn_kv.data: the scalar's size,
 * sizeof(amn_str) for STRING, sizeof(amn_kv) for ARRAY; 0 if unknown. */
AMN_API size_t amn_kv_type_size(amn_kv_type t);

/* `format` is the registered format name ("safetensors"). */
AMN_API amn_model *amn_model_new(const char *format);
AMN_API void amn_model_free(amn_model *m);

AMN_API const char *amn_model_format(const amn_model *m);
/* Human label of the container ("safetensors", "GGUF v3", "PyTorch state_dict"). */
AMN_API const char *amn_model_label(const amn_model *m);
AMN_API int amn_model_set_label(amn_model *m, const char *label, amn_error *err);
/* Path the model was opened from (NULL for a stream). */
AMN_API const char *amn_model_path(const amn_model *m);
AMN_API int amn_model_set_path(amn_model *m, const char *path, amn_error *err);
/* A model amn_open made of a packed model folder (a .tar, .tar.gz, .zip, ...
 * holding one, doc/archives.md): the archive's path; else NULL. */
AMN_API const char *amn_model_archive(const amn_model *m);
/* That folder's other files (config.json, tokenizer files, ...: every plain
 * file beside its model files, none of a subfolder, none hidden) written
 * byte for byte into the existing folder dir, each a new file, in one more
 * pass over the archive (under the limits it was opened with); their count
 * in *count. AMN_E_INVALID for a model not from an archive. A file that
 * fails is removed; those written before it are the caller's to remove. */
AMN_API int amn_model_archive_extract(const amn_model *m, const char *dir, size_t *count,
                                      amn_error *err);
/* The files of that folder the library holds whole once the model is open:
 * its model files (shards, index files) and its settings files
 * (config.json, hf_quant_config.json, quantize_config.json,
 * quant_config.json; at most 4 MiB each). The one of plain file name
 * `name` into *data and *size (valid as long as m), and true; false when
 * the folder holds no such file, holds it otherwise, or m is not from an
 * archive. Readers of a model folder's companion files read them here. */
AMN_API bool amn_model_archive_file(const amn_model *m, const char *name, const uint8_t **data,
                                    uint64_t *size);
/* The file name of its i-th model file, in the order they were joined
 * (shards in their index's order, else by name); NULL past the last. */
AMN_API const char *amn_model_archive_model_file(const amn_model *m, size_t i);
/* The packed folder's own name: its folder in the archive ("model" of
 * model/config.json), or for files packed at the top level the archive's
 * file name without its archive extension; NULL when m is not from an
 * archive. */
AMN_API const char *amn_model_archive_folder(const amn_model *m);
/* Whether amn_open takes path for a packed model folder (doc/archives.md):
 * decided from its first bytes, the first member header of a compressed
 * stream, and a ZIP's member names, without reading the members. */
AMN_API bool amn_path_is_archive(const char *path);
/* The limits the model was opened with (amn_open / amn_inspect set them), for
 * a reader of its companion files (a folder's tokenizer files); NULL when it
 * was built otherwise. set_limits copies *lim (NULL clears). */
AMN_API const amn_limits *amn_model_limits(const amn_model *m);
AMN_API void amn_model_set_limits(amn_model *m, const amn_limits *lim);

/* Tensors, in file order. add_tensor copies *t (names included): the fields
 * t->struct_size covers, later fields zero (a t->struct_size below ABI 2.0's
 * amn_tensor is AMN_E_INVALID). It validates the extent and rejects a
 * duplicate name with AMN_E_PARSE. The tensors amn_model_tensor returns carry
 * struct_size = the core's sizeof(amn_tensor). */
AMN_API int amn_model_add_tensor(amn_model *m, const amn_tensor *t, amn_error *err);
AMN_API size_t amn_model_tensor_count(const amn_model *m);
AMN_API const amn_tensor *amn_model_tensor(const amn_model *m, size_t i);
/* Index of a tensor by name, or -1. O(1) on average. */
AMN_API int64_t amn_model_find(const amn_model *m, const char *name);

/* String metadata (safetensors __metadata__), in insertion order; set replaces. */
AMN_API int amn_model_set_meta(amn_model *m, const char *key, const char *value, amn_error *err);
AMN_API const char *amn_model_get_meta(const amn_model *m, const char *key);
AMN_API size_t amn_model_meta_count(const amn_model *m);
AMN_API const char *amn_model_meta_key(const amn_model *m, size_t i);
AMN_API const char *amn_model_meta_value(const amn_model *m, size_t i);

/* Typed key/values, deep-copied. */
AMN_API int amn_model_add_kv(amn_model *m, const amn_kv *kv, amn_error *err);
AMN_API size_t amn_model_kv_count(const amn_model *m);
AMN_API const amn_kv *amn_model_kv(const amn_model *m, size_t i);
AMN_API const amn_kv *amn_model_find_kv(const amn_model *m, const char *key);

/* Non-tensor entries a file holds (a training checkpoint's "epoch"): listed by
 * parse, skipped by conversion. */
AMN_API int amn_model_add_note(amn_model *m, const char *name, const char *value, amn_error *err);
AMN_API size_t amn_model_note_count(const amn_model *m);
AMN_API const char *amn_model_note_name(const amn_model *m, size_t i);
AMN_API const char *amn_model_note_value(const amn_model *m, size_t i);

/* Memory owned by the model: freed by amn_model_free. */
AMN_API void *amn_model_alloc(amn_model *m, size_t n);
/* Hand a resource to the model; free_fn(ptr) runs at amn_model_free (in reverse
 * order of adoption). On failure free_fn(ptr) has already run. */
AMN_API int amn_model_adopt(amn_model *m, void *ptr, void (*free_fn)(void *), amn_error *err);

/* Sum of the tensors' nbytes. */
AMN_API uint64_t amn_model_total_bytes(const amn_model *m);

/* Bytes [p, p + n) of the model's input (p inside one of its tensors' data),
 * readable at the returned pointer: p itself where reading through the
 * mapping is the cheaper way (short ranges, memory the model owns, an input
 * the page cache holds in large folios, or AMN_INPUT=map in the
 * environment), else a buffer of the calling thread filled by pread() —
 * mapping a file the page cache holds in 4 KiB folios (tmpfs, a file
 * written in small blocks) costs more than a pread of it, where large
 * folios map for a fraction of it; samples of what is fetched from each
 * input decide (see core/src/input.c). Each slot (0 .. AMN_FETCH_SLOTS - 1)
 * is its own buffer, valid until the same thread fetches into that slot
 * again. NULL with err set when the read fails or the file shrank since it
 * was opened (where the mapping would have raised SIGBUS). Kernels call it
 * on the range a call reads, not on a whole tensor: memory stays O(chunk). */
#define AMN_FETCH_SLOTS 4
AMN_API const void *amn_model_fetch(const amn_model *m, const void *p, size_t n, unsigned slot,
                                    amn_error *err);

#ifdef __cplusplus
}
#endif
#endif
