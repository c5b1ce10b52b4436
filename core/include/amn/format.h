/* amn/format.h — the container vtable a format plugin registers.
 *
 * A format is found by probing: the core reads the head and tail of the file
 * and every registered probe scores it from 0 to 100 (about "how many bits of
 * structure were verified"). The strictly highest score above
 * AMN_PROBE_WEAK wins; a tie at the top is an error asking for --from.
 * Capabilities follow from which slots are filled: READ needs `open`,
 * INSPECT needs `inspect`, WRITE needs `writer`.
 */
#ifndef AMN_FORMAT_H
#define AMN_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/dtype.h"
#include "amn/error.h"
#include "amn/io.h"
#include "amn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMN_PROBE_NONE     0
#define AMN_PROBE_WEAK     25  /* at or below: not recognised */
#define AMN_PROBE_POSSIBLE 50  /* a generic container matched (e.g. "is a ZIP") */
#define AMN_PROBE_LIKELY   80  /* magic and structure */
#define AMN_PROBE_MAX      100 /* magic, version and a self-consistent header */

#define AMN_PROBE_HEAD    65536 /* bytes of head and tail the core reads at most */
#define AMN_PROBE_PADDING 32    /* zero bytes after head and tail, for cheap over-reads */

typedef struct amn_probe_data {
    const char *path;    /* may be NULL (memory / stream) */
    const uint8_t *head; /* first head_size bytes, then AMN_PROBE_PADDING zeros */
    size_t head_size;
    const uint8_t *tail; /* last tail_size bytes, then AMN_PROBE_PADDING zeros */
    size_t tail_size;
    uint64_t file_size;
    bool is_directory; /* path is a directory (sharded models); head/tail empty */
} amn_probe_data;

/* Caps every parser honours before it allocates or loops on a count read from
 * a file. amn_limits_default() gives generous values for real models. */
typedef struct amn_limits {
    uint64_t max_header_bytes; /* JSON header, pickle, GGUF header: 100 MiB */
    uint64_t max_tensors;      /* 1 << 20 */
    uint64_t max_string;       /* one string: 16 MiB */
    uint64_t max_array;        /* one metadata array: 1 << 26 elements */
    uint32_t max_depth;        /* nesting (JSON, pickle, GGUF arrays): 64 */
    uint64_t max_alloc;        /* bytes a parser may allocate for one model: 64 GiB */
} amn_limits;

AMN_API void amn_limits_default(amn_limits *l);

typedef struct amn_open_args {
    const char *path; /* file or directory */
    /* The whole file, mapped; NULL for a directory. The core owns it and hands
     * it to the model open() returns, so tensor data may point into it. Other
     * files a format maps (shards) it adopts into the model itself. */
    const amn_map *map;
    const amn_limits *limits; /* never NULL */
} amn_open_args;

typedef struct amn_inspect_args {
    const amn_source *src;    /* the file, through a read callback; NULL for a directory */
    const char *path;         /* may be NULL (memory / transport) */
    const amn_limits *limits; /* never NULL */
} amn_inspect_args;

/* A tensor as an output file will hold it. */
typedef struct amn_out_tensor {
    const char *name;
    amn_dtype dtype;
    uint32_t ndim;
    uint64_t shape[AMN_MAX_DIMS];
    uint64_t nbytes;
    uint32_t encoding; /* for AMN_DTYPE_BLOCK */
    const char *encoding_name;
} amn_out_tensor;

typedef struct amn_write_args {
    const char *path; /* final output path (the sink writes a temporary file) */
    amn_sink *sink;
    const amn_out_tensor *tensors;
    size_t n_tensors;
    const amn_model *source;         /* metadata to carry over; may be NULL */
    const char *const *kv_overrides; /* "KEY=VALUE" (--gguf-kv) */
    size_t n_kv_overrides;
    const char *metadata_file; /* JSON key/values (--gguf-metadata); may be NULL */
} amn_write_args;

/* A streaming writer: begin() writes everything before the first tensor's data
 * and fills order[0..n_tensors) with the order the data must follow; the core
 * then writes each tensor's nbytes to the sink in that order, calling
 * tensor_begin() first when set (alignment padding); finish() completes the
 * file. abort() releases the state after a failure. */
typedef struct amn_writer {
    uint32_t struct_size;
    uint64_t dtypes; /* bit (1 << amn_dtype) for each dtype it stores */
    int (*begin)(const amn_write_args *a, void **state, size_t *order, amn_error *err);
    int (*tensor_begin)(void *state, size_t index, amn_error *err); /* optional */
    int (*finish)(void *state, amn_error *err);
    void (*abort)(void *state);
} amn_writer;

struct amn_scan_args;   /* amn/scan.h */
struct amn_scan_report; /* amn/scan.h */

typedef struct amn_format {
    uint32_t struct_size;
    const char *name;        /* "safetensors": the --from / --to token */
    const char *description; /* "Hugging Face safetensors" */
    const char *extensions;  /* "safetensors,sft": +1 tie-break only */
    int (*probe)(const amn_probe_data *pd);
    int (*open)(const amn_open_args *a, amn_model **out, amn_error *err);
    int (*inspect)(const amn_inspect_args *a, amn_model **out, amn_error *err);
    const amn_writer *writer;
    uint32_t flags; /* AMN_FORMAT_*; read it through amn_format_flags() */
    /* Optional audit without loading (amn/scan.h), for formats that can
     * carry code; read it through amn_format_scan(). */
    int (*scan)(const struct amn_scan_args *a, struct amn_scan_report *r, amn_error *err);
} amn_format;

/* Full-precision checkpoints (npz, pth): `convert` keeps their float dtypes
 * unless the user asks for an output dtype. */
#define AMN_FORMAT_LOSSLESS (1u << 0)

/* flags, or 0 for a plugin built before the field existed. */
static inline uint32_t amn_format_flags(const amn_format *f) {
    return f->struct_size >= offsetof(amn_format, flags) + sizeof f->flags ? f->flags : 0;
}

/* The scan slot, or NULL for a plugin built before it existed. */
typedef int (*amn_format_scan_fn_t)(const struct amn_scan_args *, struct amn_scan_report *,
                                    amn_error *);
static inline amn_format_scan_fn_t amn_format_scan(const amn_format *f) {
    return f->struct_size >= offsetof(amn_format, scan) + sizeof f->scan ? f->scan : NULL;
}

#ifdef __cplusplus
}
#endif
#endif
