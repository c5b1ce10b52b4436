/* amn/kit/zip_reader.h — plugin kit: a bounds-checked ZIP central-directory
 * reader shared by the npz and pth plugins.
 *
 * Why not libarchive: both formats want stored members as zero-copy views
 * into the core's mapping, which needs each member's exact data offset; and
 * inspect wants the central directory alone. Both fall out of reading the
 * directory directly. DEFLATE members are inflated with zlib.
 *
 * Everything here reads through an amn_source, so the same code serves the
 * mapped file (open) and the read callback (inspect). Of the core it uses
 * errors, amn_map_scan and scratch files (amn_spill) for what it inflates.
 */
#ifndef AMN_ZIP_READER_H
#define AMN_ZIP_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/error.h"
#include "amn/format.h"
#include "amn/io.h"
#include "amn/model.h"

#define ZIP_STORED   0
#define ZIP_DEFLATED 8

typedef struct zip_entry {
    const char *name; /* NUL-terminated, in the directory's name pool */
    size_t name_len;
    uint16_t method;
    uint16_t flags;
    uint32_t crc32;
    uint64_t csize;     /* compressed bytes */
    uint64_t usize;     /* uncompressed bytes */
    uint64_t local_off; /* local file header */
    uint64_t data_off;  /* first byte of its data (after the local header) */
} zip_entry;

typedef struct zip_dir {
    zip_entry *entries;
    size_t count;
    char *pool;
    uint64_t file_size;
    uint64_t cd_offset; /* where the central directory starts */
} zip_dir;

/* A source over memory the caller keeps alive (the core's mapping); the
 * struct is its own context, so it must stay put while src is used. */
typedef struct zip_memsrc {
    amn_source src;
    const uint8_t *p;
    uint64_t n;
} zip_memsrc;
void zip_memsrc_init(zip_memsrc *m, const uint8_t *p, uint64_t n, const char *name);

/* True when the bytes at p (at least 4) open a local file header. */
bool zip_is_local_header(const uint8_t *p, size_t n);

/* What a probe can tell from the head's first local header and from any
 * central-directory headers inside the tail (cheap and approximate: it
 * only decides a score, open() checks everything). */
typedef struct zip_probe {
    bool is_zip;            /* a local header at 0, or an empty archive */
    bool empty;             /* an end record alone */
    const char *first_name; /* the first local header's name, in pd->head */
    size_t first_len;
    size_t cd_seen; /* directory headers found in the tail */
    size_t cd_npy;  /* ... named *.npy */
    size_t cd_pkl;  /* ... named <root>/data.pkl */
} zip_probe;
void zip_probe_scan(const amn_probe_data *pd, zip_probe *out);

/* name ends with suffix (lengths explicit: names are not NUL-terminated). */
bool zip_name_ends(const char *name, size_t len, const char *suffix);
/* The same ignoring ASCII case; suffix given in lower case. */
bool zip_name_ends_fold(const char *name, size_t len, const char *suffix);
/* name is "<root>/data.pkl" with a single-level root, in any case (PyTorch's
 * reader finds records ignoring case). */
bool zip_name_is_pickle(const char *name, size_t len);

/* Read the end record(s), the whole central directory and every local
 * header. Entry count and directory size are capped by the limits. An
 * archive that ZIP readers could resolve differently is AMN_E_DISALLOWED,
 * naming what was found: more than one end record in the search window,
 * bytes after it, names equal but for ASCII case, a local header that
 * disagrees with the directory, or bytes that belong to no member (before
 * the first local header, between members, before the central directory,
 * between it and the end record). */
int zip_dir_read(const amn_source *src, const amn_limits *lim, zip_dir *out, amn_error *err);
void zip_dir_free(zip_dir *d);

/* Find an entry by exact name; NULL if absent. Linear; callers needing many
 * look-ups build their own index. */
const zip_entry *zip_dir_find(const zip_dir *d, const char *name);

/* Offset of the entry's data (read by zip_dir_read) once its method and
 * flags are ones this reader handles. */
int zip_entry_data_offset(const amn_source *src, const zip_dir *d, const zip_entry *e,
                          uint64_t *out, amn_error *err);

/* Inflate a whole raw-DEFLATE member held in memory into dst (exactly
 * e->usize bytes) and check its CRC-32 (zip_inflate_each, one window). */
int zip_inflate_all(const zip_entry *e, const uint8_t *src, uint8_t *dst, amn_error *err);

/* Where zip_inflate_each puts what it inflates: a window of `size` bytes
 * that `full` empties each time it fills, and once more at the end (full
 * NULL: the window holds the whole member). */
typedef struct zip_window {
    uint8_t *win;
    uint64_t size;
    int (*full)(void *ctx, const uint8_t *piece, size_t n, amn_error *err);
    void *ctx;
} zip_window;
/* Inflate a whole raw-DEFLATE member held in memory (e->csize bytes at src)
 * to exactly e->usize bytes through the window, and check its CRC-32. */
int zip_inflate_each(const zip_entry *e, const uint8_t *src, const zip_window *w, amn_error *err);

/* Deflated members a reader keeps (tensors point into them for the model's
 * life), inflated by zip_inflate_keep_all (zip_keep.c): small ones onto the
 * model's heap (amn_model_alloc), counted in *heap_used against
 * lim->max_alloc; one over 1 MiB, or any once 64 MiB are held, into a
 * scratch file (amn_spill) whose map the model adopts, so memory does not
 * grow with the model, its compressed bytes dropped from the process once
 * read (amn_map_drop). Where no scratch file can be made, the heap as for
 * a small member. The members are inflated on up to 4 threads at once
 * (as many as the CPUs online), each whole on one thread, so the bytes do
 * not depend on it; an error is the first member's in job order. */
typedef struct zip_keep_job {
    const zip_entry *e;
    uint64_t off;       /* its data in the map */
    const uint8_t *out; /* set on success: its bytes */
    /* private to zip_keep.c */
    uint8_t *heap;
    amn_map *kept;
    int rc;
    bool spill, fallback;
    amn_error err;
} zip_keep_job;
int zip_inflate_keep_all(zip_keep_job *jobs, size_t n, const amn_map *map, amn_model *m,
                         const amn_limits *lim, uint64_t *heap_used, amn_error *err);
/* One member the same way. */
int zip_inflate_keep(const zip_entry *e, const amn_map *map, uint64_t off, amn_model *m,
                     const amn_limits *lim, uint64_t *heap_used, const uint8_t **out,
                     amn_error *err);

/* Check a STORED member at data_off in a mapped file against its recorded
 * CRC-32 (zip_inflate_all checks what it inflates): a member read in place,
 * where nothing else would notice data that is not what was packed. Read
 * once, the way cheapest for how the page cache holds it (amn_map_scan). */
int zip_check_crc_map(const zip_entry *e, const amn_map *map, uint64_t data_off, amn_error *err);

/* Inflate only the first `want` bytes of a member through the source (for
 * header-only inspection); *got may be less at the end of the member. */
int zip_inflate_prefix(const amn_source *src, const zip_entry *e, uint64_t data_off, uint8_t *dst,
                       size_t want, size_t *got, amn_error *err);

/* Read a member (stored or deflated) whole into a malloc'd buffer, at most
 * `cap` bytes uncompressed (AMN_E_LIMIT beyond). Caller frees *out. */
int zip_read_member(const amn_source *src, const zip_dir *d, const zip_entry *e, uint64_t cap,
                    uint8_t **out, amn_error *err);

/* Exact read through a source; short reads are AMN_E_PARSE ("truncated"). */
int zip_read_exact(const amn_source *src, uint64_t off, void *buf, size_t n, amn_error *err);

#endif
