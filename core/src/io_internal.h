/* Private to core: I/O shortcuts the conversion pipeline uses. */
#ifndef AMN_IO_INTERNAL_H
#define AMN_IO_INTERNAL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "amn/io.h"
#include "amn/model.h"

/* What input.c learns about one mapped input (see input.c); lives in the
 * amn_map. Passing bytes through: the CPU time each way of reading took,
 * touched only by the thread that writes the output. Reads that feed
 * kernels (any worker): the bytes fetched, the page faults that mapped the
 * current window's sample, and the way chosen from the last sample. */
typedef struct amni_input_probe {
    int chosen;                                   /* an amni_input_path once decided, else 0 */
    unsigned tried;                               /* ways measured so far */
    double ns_per_byte[5];                        /* by amni_input_path */
    _Atomic uint64_t fetched;                     /* bytes */
    _Atomic uint64_t sample_bytes, sample_faults; /* of the current window */
    _Atomic int fetch_way;                        /* AMNI_INPUT_MAP or _PREAD once sampled */
    _Atomic bool fetch_unmappable;                /* no MADV_POPULATE_READ here */
    _Atomic uintptr_t lent_lo, lent_hi;           /* span of mapped ranges lent since a sweep */
    _Atomic uintptr_t retired_lo, retired_hi;     /* swept, to be unmapped */
    _Atomic uintptr_t pass_tail_lo, pass_tail_hi; /* the last pass-through chunk's last grain */
} amni_input_probe;

/* The mapping's file descriptor (open for as long as the map), -1 when the
 * file is empty; and its probe. */
int amni_map_fd(const amn_map *m);
amni_input_probe *amni_map_probe(const amn_map *m);

/* Whether a tap sees the sink's bytes (then they must pass through user
 * memory). */
bool amni_sink_tapped(const amn_sink *s);
/* Move n bytes of fd from offset off into the output inside the kernel,
 * after the bytes already buffered: by copy_file_range (copy_file) or by
 * splice through a pipe. Returns AMN_E_UNSUPPORTED without writing or
 * setting err when this sink or pair of files cannot (a tap the caller does
 * not feed, the ENOSPC test hook, a file system without that call): the
 * caller then writes the bytes itself. With tap_fed the caller hands the
 * same bytes to amni_sink_feed_tap itself, in order. A source that ends
 * early is an AMN_E_IO error naming in_name ("file shrank"). */
int amni_sink_copy(amn_sink *s, bool copy_file, int fd, uint64_t off, uint64_t n, bool tap_fed,
                   const char *in_name, amn_error *err);
/* Writes in place, for threads that each produce a part of a tensor:
 * amni_sink_claim takes the next n bytes of the output, after the bytes
 * already written, and moves the sink past them; *at is where they start
 * in the file. Then any thread may write any part of [*at, *at + n) with
 * amni_sink_write_at, concurrently with the others, until the region is
 * whole; the caller does not touch the sink otherwise meanwhile. A sink
 * whose tap does not fold (a tap needs the bytes in order) refuses with
 * AMN_E_UNSUPPORTED; with a folding tap, each piece's digest (taken on any
 * thread) is folded by the caller, in the order of the region, once the
 * pieces are written. */
bool amni_sink_in_place_ok(const amn_sink *s);
int amni_sink_claim(amn_sink *s, uint64_t n, uint64_t *at, amn_error *err);
int amni_sink_write_at(amn_sink *s, uint64_t at, const void *buf, size_t n, amn_error *err);
uint64_t amni_sink_digest(const amn_sink *s, const void *buf, size_t n);
void amni_sink_fold(amn_sink *s, uint64_t digest, uint64_t n);
/* Hand n bytes to the sink's tap (if any), as if they had been written. */
void amni_sink_feed_tap(amn_sink *s, const void *buf, size_t n);

/* Hold asynchronous signals off the calling thread (synchronous faults
 * stay deliverable), *old receiving the previous mask; and put it back.
 * Around a name's creation and registration (io.c), and around creating
 * threads, which inherit the mask: a program's handlers (amn's removes
 * temporary outputs) then run on its own threads. */
void amni_block_signals(sigset_t *old);
void amni_restore_signals(const sigset_t *old);

/* Fault in the pages of [p, p+n) of a read-only mapping in one call, so that
 * a write() from it does not fault them one by one. 0, or the errno: EFAULT
 * where the file ends before p + n (reading there would raise SIGBUS),
 * EINVAL where the kernel lacks MADV_POPULATE_READ; callers that only want
 * the speed ignore it. */
int amni_prefault(const void *p, size_t n);

/* amn_map_open without the read-ahead hint over the whole file: for scans,
 * which read the directory and the pickle of a large file and nothing else
 * (MADV_WILLNEED alone costs milliseconds on a 300 MB file). */
int amni_map_open_lazy(const char *path, amn_map **out, amn_error *err);

/* The map of a regular file already open (an archive member decompressed
 * into an unlinked temporary file), named `name` in messages; it takes fd,
 * closed on error too. Reads bypass the mapping as a file's do (input.c). */
int amni_map_open_fd(int fd, const char *name, amn_map **out, amn_error *err);

/* Unmap the pages of a read-only file mapping from the process (they stay
 * in the page cache; a later read faults them back in): for a pass over a
 * file through its mapping that should not leave it resident. */
void amni_map_drop_resident(const amn_map *m);
/* The same for the whole pages inside [p, p + n) of the mapping, once they
 * were read: a pass that goes through the mapping leaves no more of the
 * input resident than the range in hand. A view's bytes are not ours to
 * drop (they may be memory, where dropping would zero them): nothing. */
void amni_map_drop_range(const amn_map *m, const void *p, size_t n);

/* A map over bytes someone else owns (an archive member: a range of the
 * archive's own mapping, or a buffer it was decompressed into), for format
 * plugins that read a map. No file descriptor: reads go through `data`.
 * The bytes must outlive it; amn_map_close frees only the struct. */
int amni_map_view(const uint8_t *data, uint64_t size, const char *path, amn_map **out,
                  amn_error *err);

/* The first resource m adopted with free_fn, or NULL. */
void *amni_model_resource(const amn_model *m, void (*free_fn)(void *));

/* The mapping adopted by m that holds [p, p+n), or NULL. */
const amn_map *amni_model_map_for(const amn_model *m, const void *p, uint64_t n);

/* Unmap the whole pages of [p, p + n) in the mapping of m that holds it
 * (amni_map_drop_range; nothing when none does): a range no one reads now. */
void amni_model_drop(const amn_model *m, const void *p, uint64_t n);
/* The sweep of what fetches lent of m's mappings (input.c), in two steps
 * so that the unmapping overlaps work: retire, when no fetched range of m
 * is in use (every piece of a conversion's batch is done), takes the spans
 * lent since the last retire; drop unmaps them, also while the next batch
 * reads other ranges. Unmapping a page still in use (two conversions of
 * one model) costs a fault, never a wrong byte: the maps are read-only. */
void amni_model_retire_lent(const amn_model *m);
void amni_model_drop_retired(const amn_model *m);
void amni_input_retire_lent(const amn_map *map);
void amni_input_drop_retired(const amn_map *map);

#endif
