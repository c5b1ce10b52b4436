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
/* Hand bytes [off, off + n) of the mapped file to fn, in order, a piece at a
 * time: for one pass over a range, such as checking a checksum. Each piece
 * is read the way amn_model_fetch would read it (through the mapping where
 * the page cache holds the file in large folios, else by pread(), which is
 * cheaper for 4 KiB folios and tmpfs), and what was mapped is unmapped
 * behind, so the resident set stays a few MiB. AMN_E_INVALID for a range
 * past the file, AMN_E_IO naming the file where it shrank since it was
 * mapped (where the mapping would have raised SIGBUS). */
typedef void (*amn_map_scan_fn)(void *ctx, const void *piece, size_t n);
AMN_API int amn_map_scan(const amn_map *m, uint64_t off, uint64_t n, amn_map_scan_fn fn, void *ctx,
                         amn_error *err);

/* ---- scratch files (ABI 2.8) ---------------------------------------------
 *
 * Bytes a reader makes rather than finds (a deflated member inflated, a
 * compressed archive's model file decompressed) would take the process's
 * memory, as much as the model. A scratch file holds them instead: an
 * unlinked temporary file no other process can open, in $TMPDIR (else
 * /tmp, or /var/tmp where /tmp is a tmpfs and /var/tmp is not), that
 * vanishes with the process however it ends. amn_spill_open reserves its
 * `size` bytes (a disk too small fails at once, AMN_E_IO naming the
 * folder); amn_spill_write appends to it, in order; amn_spill_map maps the
 * whole (all `size` bytes written, else AMN_E_INVALID) and frees the
 * spill, also on error. The map is read as an input file's is (pread,
 * copy_file_range, splice or the mapping; amn_model_adopt it with
 * amn_map_release), and `label` names it in messages. amn_spill_free
 * abandons a spill; NULL is a no-op. Errors name neither the label nor
 * the member: callers prefix what the bytes are. */
typedef struct amn_spill amn_spill;
AMN_API int amn_spill_open(uint64_t size, const char *label, amn_spill **out, amn_error *err);
AMN_API int amn_spill_write(amn_spill *s, const void *buf, size_t n, amn_error *err);
AMN_API int amn_spill_map(amn_spill *s, amn_map **out, amn_error *err);
AMN_API void amn_spill_free(amn_spill *s);

/* (ABI 2.8) Unmap the whole pages inside bytes [off, off + n) of the map
 * from the process, clipped to the map: for bytes read once and not again
 * (a deflated member, once inflated), so they do not stay resident. They
 * stay in the page cache; reading them again faults them back in. A no-op
 * for a map that borrows its bytes (a member of an uncompressed tar). */
AMN_API void amn_map_drop(const amn_map *m, uint64_t off, uint64_t n);

/* ---- read callback (header-only inspection) ----------------------------- */

/* Frozen for all of plugin ABI 2.x: plugins allocate amn_source themselves
 * and the core's constructors below fill it, so it can never grow. */
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

/* ---- output sink --------------------------------------------------------
 *
 * An output appears whole under its final name, or not at all. Where the
 * file system supports O_TMPFILE (ext4, xfs, btrfs, tmpfs, ...) the data is
 * written to an anonymous file in the target's directory that the kernel
 * frees however the process ends, SIGKILL included, and commit links it in
 * (linkat through /proc/self/fd). An existing output that may be replaced
 * is linked under a temporary name ".<name>.amn-XXXXXXXXXX" beside it and
 * renamed over it; only a SIGKILL in those two system calls can leave that
 * (complete) temporary file. Elsewhere (or with AMN_NO_TMPFILE=1 in the
 * environment) the data goes to such a named temporary file from the start.
 *
 * Named temporaries are recorded in a process-wide list that
 * amn_sink_unlink_pending() empties. The library installs no signal
 * handler: a program that wants interrupted runs to leave nothing behind
 * calls amn_sink_unlink_pending() from its own SIGINT / SIGTERM / SIGHUP /
 * SIGPIPE handler (amn's CLI does), then dies by the signal. The
 * conversion's worker threads block asynchronous signals, so they reach the
 * program's own threads.
 *
 * Files are created by open() with mode 0666, so the process umask (and a
 * default ACL) applies as for any new file; the umask is never changed.
 * Commit fsyncs the file before it takes its name and the directory after,
 * unless amn_sink_set_sync(s, false).
 *
 * Test hook: AMN_TEST_ENOSPC_AFTER=N makes writes fail with ENOSPC once N
 * bytes of the output have been written (for machines where a small file
 * system cannot be mounted). */

typedef struct amn_sink amn_sink;

/* Create the (anonymous or temporary) file next to final_path. Fails with
 * AMN_E_INVALID if final_path exists and !overwrite, or if it is any of the
 * `inputs` (same file, however spelled or linked). */
AMN_API int amn_sink_open(const char *final_path, bool overwrite, const char *const *inputs,
                          size_t n_inputs, amn_sink **out, amn_error *err);
AMN_API int amn_sink_write(amn_sink *s, const void *buf, size_t n, amn_error *err);
AMN_API int amn_sink_pad(amn_sink *s, size_t n, amn_error *err); /* n zero bytes */
AMN_API uint64_t amn_sink_tell(const amn_sink *s);
/* Hand every byte written from now on also to tap(ctx, buf, n), in order,
 * until the tap is set to NULL. A ZIP writer computes each member's CRC-32
 * this way over the bytes the core streams into the member. While the core
 * copies an input range into the file inside the kernel, the tap may be
 * called on another thread, with the same bytes read from the input; such
 * calls end before the sink call that caused them returns, so the tap never
 * runs concurrently with itself or with the caller's next sink call. */
typedef void (*amn_sink_tap_fn)(void *ctx, const void *buf, size_t n);
AMN_API void amn_sink_set_tap(amn_sink *s, amn_sink_tap_fn tap, void *ctx);
/* (ABI 2.4) A tap that can also take the bytes as pieces seen apart:
 * digest(buf, n) of any piece, on any thread and concurrently, then
 * fold(ctx, digest, n) of each piece in the order of the stream, on the
 * thread that calls the sink, as if tap had seen the piece's bytes. A CRC
 * folds (crc32_combine). With such a tap the core writes a tensor in
 * place, every thread its own pieces (see amn_convert), instead of passing
 * every byte through one thread. */
typedef uint64_t (*amn_sink_digest_fn)(const void *buf, size_t n);
typedef void (*amn_sink_fold_fn)(void *ctx, uint64_t digest, uint64_t n);
AMN_API void amn_sink_set_folding_tap(amn_sink *s, amn_sink_tap_fn tap, amn_sink_digest_fn digest,
                                      amn_sink_fold_fn fold, void *ctx);
/* Hint the final size so the file system can allocate it at once. */
AMN_API void amn_sink_reserve(amn_sink *s, uint64_t bytes);
/* Whether commit fsyncs the file and its directory (default true). */
AMN_API void amn_sink_set_sync(amn_sink *s, bool sync);
/* Flush, fsync, give the file its name, free. On failure nothing is left
 * under any name and final_path keeps what it held. */
AMN_API int amn_sink_commit(amn_sink *s, amn_error *err);
/* Remove the temporary file and free. NULL is a no-op. */
AMN_API void amn_sink_abort(amn_sink *s);

/* Async-signal-safe: unlink every named temporary output file of this
 * process that has not been committed or aborted yet. For a program's own
 * signal handlers; the sinks stay usable only for amn_sink_abort after. */
AMN_API void amn_sink_unlink_pending(void);
/* How many named temporaries are pending (tests). */
AMN_API size_t amn_sink_pending_count(void);

#ifdef __cplusplus
}
#endif
#endif
