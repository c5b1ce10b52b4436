/* amn/io.h — the core owns every byte of I/O: read-only mappings of inputs,
 * read callbacks for header-only inspection, and output sinks that write to a
 * temporary file and rename it into place. */
#ifndef AMN_IO_H
#define AMN_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/error.h"
#include "amn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- read-only file mapping -------------------------------------------- */

typedef struct amn_map amn_map;

AMN_API int amn_map_open(const char *path, amn_map **out, amn_error *err);
AMN_API const uint8_t *amn_map_data(const amn_map *m);
AMN_API uint64_t amn_map_size(const amn_map *m);
AMN_API const char *amn_map_path(const amn_map *m);
AMN_API void amn_map_close(amn_map *m);
/* Same as amn_map_close with a void * argument, for amn_model_adopt. */
AMN_API void amn_map_release(void *m);

/* ---- read callback (header-only inspection) ----------------------------- */

typedef struct amn_source {
    void *ctx;
    uint64_t size; /* total bytes, or UINT64_MAX when unknown */
    /* Read up to n bytes at off into buf, *got = bytes read (short only at EOF).
     * Returns AMN_OK or a negative AMN_E_* code. Call it through
     * amn_source_read, which clips every range to `size` first. */
    int (*read_at)(void *ctx, uint64_t off, void *buf, size_t n, size_t *got);
    const char *name; /* path or label for messages; may be NULL */
} amn_source;

/* Read exactly n bytes; a short read is AMN_E_PARSE ("truncated"). */
AMN_API int amn_source_read(const amn_source *s, uint64_t off, void *buf, size_t n, amn_error *err);
/* A source over a file; close with amn_source_file_close. */
AMN_API int amn_source_file_open(const char *path, amn_source *out, amn_error *err);
AMN_API void amn_source_file_close(amn_source *s);
/* A source over caller memory (no copy, nothing to close). */
AMN_API void amn_source_memory(amn_source *out, const void *buf, size_t n, const char *name);

/* ---- output sink -------------------------------------------------------- */

typedef struct amn_sink amn_sink;

/* Create a temporary file next to final_path. Fails with AMN_E_INVALID if
 * final_path exists and !overwrite, or if it is any of the `inputs` (same
 * file, however spelled or linked). */
AMN_API int amn_sink_open(const char *final_path, bool overwrite, const char *const *inputs,
                          size_t n_inputs, amn_sink **out, amn_error *err);
AMN_API int amn_sink_write(amn_sink *s, const void *buf, size_t n, amn_error *err);
AMN_API int amn_sink_pad(amn_sink *s, size_t n, amn_error *err); /* n zero bytes */
AMN_API uint64_t amn_sink_tell(const amn_sink *s);
/* Hand every byte written from now on also to tap(ctx, buf, n), in order,
 * until the tap is set to NULL. A ZIP writer computes each member's CRC-32
 * this way over the bytes the core streams into the member. */
typedef void (*amn_sink_tap_fn)(void *ctx, const void *buf, size_t n);
AMN_API void amn_sink_set_tap(amn_sink *s, amn_sink_tap_fn tap, void *ctx);
/* Hint the final size so the file system can allocate it at once. */
AMN_API void amn_sink_reserve(amn_sink *s, uint64_t bytes);
/* Flush, rename into place, free. On failure the temporary file is removed. */
AMN_API int amn_sink_commit(amn_sink *s, amn_error *err);
/* Remove the temporary file and free. NULL is a no-op. */
AMN_API void amn_sink_abort(amn_sink *s);

#ifdef __cplusplus
}
#endif
#endif
