/* amn/format.h — the container vtable a format plugin registers.
 *
 * A format is found by probing: the core reads the head and tail of the file
 * and every registered probe scores it from 0 to 100 (about "how many bits of
 * structure were verified"). The strictly highest score above
 * AMN_PROBE_WEAK wins; a tie at the top is an error asking for --from.
 * A matching file extension only breaks a tie between equal scores; it never
 * lifts a score past another. Capabilities follow from which slots are
 * filled: READ needs `open`, INSPECT needs `inspect`, WRITE needs `writer`.
 *
 * ABI rules (plugin ABI 2): every struct here starts with struct_size.
 * Vtables a plugin registers (amn_format, amn_writer) carry the size the
 * plugin was built with; the core reads only the slots that size covers and
 * treats the others as NULL / 0. Argument structs the core hands to a plugin
 * (amn_probe_data, amn_open_args, amn_inspect_args, amn_write_args and each
 * amn_out_tensor) carry the core's size, which is never smaller than the one
 * the plugin was built with (a plugin built for a newer ABI minor than the
 * core's is refused at load): fields are only ever appended.
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
    uint32_t struct_size;
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
    uint32_t struct_size;      /* set by amn_limits_default */
    uint64_t max_header_bytes; /* JSON header, pickle, GGUF header: 100 MiB */
    uint64_t max_tensors;      /* 1 << 20 */
    uint64_t max_string;       /* one string: 16 MiB */
    uint64_t max_array;        /* one metadata array: 1 << 26 elements */
    uint32_t max_depth;        /* nesting (JSON, pickle, GGUF arrays): 64 */
    uint64_t max_alloc;        /* bytes a parser may allocate for one model: 64 GiB */
    /* Appended fields (amn_limits_default fills them). */
    uint64_t max_alloc_one; /* one allocation (a header, a string, an inflated member): 64 GiB */
    uint32_t max_ratio;     /* DEFLATE expansion, uncompressed / compressed bytes: 1000; 0: off */
    /* max_ratio applies to members expanding to more than this many bytes:
     * 256 MiB. A zip bomb is dangerous by what it expands to; below this an
     * honest all-zero array (about 1030:1) inflates like any other. */
    uint64_t ratio_min_size;
} amn_limits;

AMN_API void amn_limits_default(amn_limits *l);

/* A file beside the one opened, when it is no file on disk (a member of
 * the model folder an archive packs): what amn_siblings.find gives. */
typedef struct amn_sibling {
    uint32_t struct_size;
    amn_source src;      /* its bytes, read_at any offset (inspect: a header's worth may be all) */
    const uint8_t *data; /* open: the whole file in memory; NULL for inspect */
    uint64_t size;
} amn_sibling;

/* The files beside the opened one, for a format that reads more than one
 * file by name (the other shards of a split GGUF). */
typedef struct amn_siblings {
    uint32_t struct_size;
    void *ctx;
    /* The file `name` (a plain file name, no '/') of the opened file's
     * folder: true and *out (the core's, valid while the model open() or
     * inspect() returns lives: tensor data may point into out->data), or
     * false when the folder holds no such file. */
    bool (*find)(void *ctx, const char *name, amn_sibling *out);
} amn_siblings;

typedef struct amn_open_args {
    uint32_t struct_size;
    const char *path; /* file or directory */
    /* The whole file, mapped; NULL for a directory. The core owns it and hands
     * it to the model open() returns, so tensor data may point into it. Other
     * files a format maps (shards) it adopts into the model itself. */
    const amn_map *map;
    const amn_limits *limits; /* never NULL */
    /* Appended (check AMN_HAS_FIELD): the files beside this one when they are
     * not files on disk (path is then "<archive>/<member>"); NULL: they are
     * found by name beside path. */
    const amn_siblings *siblings;
} amn_open_args;

typedef struct amn_inspect_args {
    uint32_t struct_size;
    const amn_source *src;        /* the file, through a read callback; NULL for a directory */
    const char *path;             /* may be NULL (memory / transport) */
    const amn_limits *limits;     /* never NULL */
    const amn_siblings *siblings; /* appended, as amn_open_args.siblings */
} amn_inspect_args;

/* A tensor as an output file will hold it. */
typedef struct amn_out_tensor {
    uint32_t struct_size;
    const char *name;
    amn_dtype dtype;
    uint32_t ndim;
    uint64_t shape[AMN_MAX_DIMS];
    uint64_t nbytes;
    uint32_t encoding; /* for AMN_DTYPE_BLOCK */
    const char *encoding_name;
} amn_out_tensor;

typedef struct amn_write_args {
    uint32_t struct_size;
    const char *path; /* final output path (the sink writes a temporary file) */
    amn_sink *sink;
    /* tensors[i] for i < n_tensors: an array of pointers, so that
     * amn_out_tensor can grow without changing the array's stride. */
    const amn_out_tensor *const *tensors;
    size_t n_tensors;
    const amn_model *source; /* metadata to carry over; may be NULL */
    /* Format-specific options (amn convert --opt KEY=VALUE), in the order
     * given: option_keys[i] = option_values[i]. Every key is one the writer
     * declared in amn_writer.options (the core refuses others); begin()
     * validates the values (AMN_E_INVALID naming the option). */
    const char *const *option_keys;
    const char *const *option_values;
    size_t n_options;
} amn_write_args;

/* A streaming writer.
 *
 * begin() writes everything before the first tensor's data and fills
 * order[0..n_tensors) with the order the data must follow; the core then
 * writes each tensor's nbytes to the sink in that order, calling
 * tensor_begin() first when set (alignment padding); finish() completes the
 * file.
 *
 * Ownership of the state begin() made:
 * - begin() failing must release whatever it allocated itself; the core then
 *   calls neither finish() nor abort().
 * - finish() always releases the state, whether it succeeds or fails; after
 *   finish() the core never calls abort().
 * - abort() releases the state when the conversion fails between a
 *   successful begin() and finish() (a tensor_begin() failure, a write
 *   error, a kernel error). It must not write to the sink.
 * The sink itself belongs to the core: on any failure the core removes the
 * temporary file; a writer never closes, commits or aborts it. */
typedef struct amn_writer {
    uint32_t struct_size;
    uint64_t dtypes; /* bit (1 << amn_dtype) for each dtype it stores */
    int (*begin)(const amn_write_args *a, void **state, size_t *order, amn_error *err);
    int (*tensor_begin)(void *state, size_t index, amn_error *err); /* optional */
    int (*finish)(void *state, amn_error *err);
    void (*abort)(void *state);
    /* Option keys the writer accepts, a NULL-terminated list ("kv",
     * "metadata"); NULL: none. An option with any other key is refused by the
     * core before anything is written: AMN_E_INVALID naming the key. */
    const char *const *options;
    /* ABI 2.1, optional: check one option's value (a key from `options`)
     * when the conversion starts, before any output exists, so a bad value
     * is reported without work done; AMN_E_INVALID naming the option. */
    int (*check_option)(const char *key, const char *value, amn_error *err);
    /* ABI 2.5, optional (both or neither): tensor data a writer stores
     * otherwise than as the little-endian C-order bytes the core produces
     * (a big-endian GGUF swaps them). When filters(state, index) is true,
     * the core hands that tensor's bytes to write_data() instead of writing
     * them to the sink: in order, on the thread that called begin(), in
     * pieces of any length (an element or a block may be split between two
     * calls). write_data writes them to the sink itself, the tensor's nbytes
     * in all once its last piece is in. A tensor it does not filter takes
     * the core's fast paths (written in place, or copied by the kernel). */
    bool (*filters)(void *state, size_t index);
    int (*write_data)(void *state, size_t index, const void *buf, size_t n, amn_error *err);
} amn_writer;

/* A necessary condition of a format's probe, as data, so that the core can
 * rule a format out without loading its plugin (the registry cache, see
 * doc/plugins.md): `length` bytes at `offset` from the start of the
 * file equal `bytes`. A format that lists signatures promises that its probe
 * scores a regular file at most AMN_PROBE_WEAK when none of them matches the
 * file's head, and a directory at most AMN_PROBE_WEAK unless one signature
 * carries AMN_PROBE_SIG_DIRECTORY. A list ends with an entry whose length and
 * flags are 0. Frozen: it sits in arrays. */
typedef struct amn_probe_sig {
    uint32_t offset; /* < AMN_PROBE_HEAD */
    uint16_t length; /* 1 .. 16 */
    uint16_t flags;  /* AMN_PROBE_SIG_* */
    uint8_t bytes[16];
} amn_probe_sig;
#define AMN_PROBE_SIG_DIRECTORY (1u << 0) /* the probe may claim a directory (no bytes) */

struct amn_scan_args;   /* amn/scan.h */
struct amn_scan_report; /* amn/scan.h */

typedef struct amn_format {
    uint32_t struct_size;
    const char *name;        /* "safetensors": the --from / --to token */
    const char *description; /* "Hugging Face safetensors" */
    const char *extensions;  /* "safetensors,sft": breaks ties only */
    int (*probe)(const amn_probe_data *pd);
    int (*open)(const amn_open_args *a, amn_model **out, amn_error *err);
    int (*inspect)(const amn_inspect_args *a, amn_model **out, amn_error *err);
    const amn_writer *writer;
    uint32_t flags; /* AMN_FORMAT_*; read it through amn_format_flags() */
    /* Optional audit without loading (amn/scan.h), for formats that can
     * carry code; read it through amn_format_scan(). */
    int (*scan)(const struct amn_scan_args *a, struct amn_scan_report *r, amn_error *err);
    /* Optional: the probe's signatures (amn_probe_sig above), read through
     * amn_format_probe_sigs(). NULL: the core must run the probe, so it loads
     * the plugin for every file it detects. A hint only: a core that
     * predates the slot ignores it. */
    const amn_probe_sig *probe_sigs;
} amn_format;

/* Full-precision checkpoints (npz, pth): `convert` keeps their float dtypes
 * unless the user asks for an output dtype. */
#define AMN_FORMAT_LOSSLESS (1u << 0)
/* The writer's convention keeps 1-D tensors F32 (GGUF: norms and biases,
 * as llama.cpp writes them): the core writes a 1-D floating output as F32
 * when convert casts floats (--out-dtype f16 narrows nothing 1-D) and when
 * an encoding conversion (forget) takes it from another format; a lossless
 * conversion and a copy from the same format (llama-quantize's) keep the
 * stored dtype. */
#define AMN_FORMAT_VECTORS_F32 (1u << 1)

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

/* The probe signatures, or NULL (none declared, or a plugin built before the slot). */
static inline const amn_probe_sig *amn_format_probe_sigs(const amn_format *f) {
    return f->struct_size >= offsetof(amn_format, probe_sigs) + sizeof f->probe_sigs ? f->probe_sigs
                                                                                     : NULL;
}
#ifdef __cplusplus
}
#endif
#endif
