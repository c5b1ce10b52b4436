/* Reading the bytes of a mapped input: through the mapping, by pread() into
 * reusable per-thread buffers, or (pass-through) by copy_file_range() or
 * splice() inside the kernel.
 *
 * Why not always the mapping: the cost of a mapping is per page-cache folio,
 * not per byte. A file the page cache holds in large folios (written in big
 * blocks, or read ahead from disk) maps cheaply, but one in 4 KiB folios
 * (tmpfs, where every page is 4 KiB; a file written 4 KiB at a time) costs a
 * page-table entry, a reference and a mapcount per 4 KiB. On a 2-vCPU KVM
 * guest (256 MiB, doc/performance.md), reading into a 2 MiB buffer through
 * the mapping took 100-120 ms for large folios but 480-640 ms for small ones
 * and 340-540 ms on tmpfs, where pread() took 60-75, 110-115 and 65-78 ms;
 * on another CPU the same gaps were several times smaller. Which way is
 * cheapest depends on the machine and on the file, so it is measured per
 * input, not fixed.
 *
 * Reads that feed kernels (64 KiB and more; shorter ones, such as a block
 * of scales, keep the mapping) measure the folios: the first FETCH_SAMPLE
 * bytes of every FETCH_WINDOW fetched from an input are mapped by
 * MADV_POPULATE_READ and the thread's page faults counted. A fault maps one
 * folio, or 64 KiB of 4 KiB ones (fault-around), so the bytes per fault say
 * what the mapping will cost: a file written in 4 MiB blocks mapped
 * 0.5-1.4 MiB per fault at 0.007-0.033 ns/byte against 0.14-0.16 for pread;
 * 4 KiB folios 43-64 KiB per fault at 0.11-0.18 ns/byte (plus unmapping),
 * against pread's 0.25. A sample per window, not one per input: a file's
 * folios need not be alike (memory reclaim splits large folios, leaving 2 MiB
 * regions of 4 KiB folios among 2 MiB ones). So a window whose sample mapped
 * FOLIO_MIN or more per fault (large folios, or pages already mapped) is
 * read through the mapping, others, mixed ones included, by pread. Pass-through measures: the
 * first full chunks of each input go each way in turn, timed by the thread's
 * CPU clock (a loaded machine's preemptions do not count), and the cheapest
 * way per byte is kept for the rest of that input. copy_file_range is the
 * way cp copies: one call per range and no pipe (between two files of one
 * ext4 the kernel still copies the pages; xfs and btrfs share the blocks);
 * where it cannot (another file system: EXDEV) the range goes by pread.
 * A sink with a tap (a ZIP member's CRC-32) gets in-kernel copies too: a
 * second thread feeds the tap (see copy_tapped). Every way yields the same
 * bytes; AMN_INPUT=map|pread|splice|copy forces one (tests compare them). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "input_internal.h"
#include "io_internal.h"

#define PREAD_MIN    (64u << 10)  /* shorter reads: the system call costs more than the faults */
#define FETCH_WINDOW (32u << 20)  /* fetched bytes per choice of the way */
#define FETCH_SAMPLE (2u << 20)   /* the first of them, mapped with their faults counted */
#define FOLIO_MIN    (512u << 10) /* bytes per fault for the mapping to be chosen */
#define PROBE_MIN    (1u << 20)   /* pass-through chunks this long are timed */
#define DROP_GRAIN   (2u << 20)   /* passed input unmapped in such steps: a large folio */
#define PROBE_ROUNDS 2            /* each way timed this many times, the best kept */

amni_input_path amni_input_forced(void) {
    const char *v = getenv("AMN_INPUT");
    if (!v) return AMNI_INPUT_AUTO;
    if (strcmp(v, "map") == 0) return AMNI_INPUT_MAP;
    if (strcmp(v, "pread") == 0) return AMNI_INPUT_PREAD;
    if (strcmp(v, "splice") == 0) return AMNI_INPUT_SPLICE;
    if (strcmp(v, "copy") == 0) return AMNI_INPUT_COPY;
    return AMNI_INPUT_AUTO;
}

/* ---- per-thread buffers ----------------------------------------------------
 * Workers are the core's, but kernels run inside plugins and reach their
 * bytes through amn_model_fetch with no worker handle: the buffers hang off
 * a thread-specific key (created once; its destructor frees them when a
 * worker exits). This key is the only process-wide state of this file. */

#define PASS_SLOT AMN_FETCH_SLOTS       /* the pass-through's own buffer */
#define TAP_SLOT  (AMN_FETCH_SLOTS + 1) /* lent to the thread that feeds a tap */
#define N_SLOTS   (AMN_FETCH_SLOTS + 2)

typedef struct thread_bufs {
    void *p[N_SLOTS];
    size_t cap[N_SLOTS];
} thread_bufs;

static pthread_key_t bufs_key;
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;
static bool bufs_key_ok;

static void bufs_free(void *v) {
    thread_bufs *b = v;
    if (!b) return;
    for (size_t i = 0; i < N_SLOTS; i++) free(b->p[i]);
    free(b);
}

static void make_key(void) {
    bufs_key_ok = pthread_key_create(&bufs_key, bufs_free) == 0;
}

/* At least n bytes, page-aligned (pread copies whole pages fastest into
 * aligned memory); NULL when out of memory. */
static void *thread_buffer(unsigned slot, size_t n) {
    pthread_once(&bufs_once, make_key);
    if (!bufs_key_ok) return NULL;
    thread_bufs *b = pthread_getspecific(bufs_key);
    if (!b) {
        if (!(b = calloc(1, sizeof *b))) return NULL;
        if (pthread_setspecific(bufs_key, b) != 0) {
            free(b);
            return NULL;
        }
    }
    if (b->cap[slot] < n) {
        const size_t cap = (n + 65535) & ~(size_t)65535;
        if (cap < n) return NULL;
        void *q = aligned_alloc(4096, cap);
        if (!q) return NULL;
        free(b->p[slot]);
        b->p[slot] = q;
        b->cap[slot] = cap;
    }
    return b->p[slot];
}

void amni_input_thread_release(void) {
    if (!bufs_key_ok) return;
    bufs_free(pthread_getspecific(bufs_key));
    pthread_setspecific(bufs_key, NULL);
}

/* ---- reads ---------------------------------------------------------------- */

/* Exactly n bytes at off, or an error: a file that shrank after it was
 * mapped is reported here, where the mapping would have raised SIGBUS. */
static int pread_full(const amn_map *map, uint64_t off, void *dst, size_t n, amn_error *err) {
    const int fd = amni_map_fd(map);
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (uint8_t *)dst + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return amn_error_set(err, AMN_E_IO, "%s: read at offset %llu: %s", amn_map_path(map),
                                 (unsigned long long)(off + done), strerror(errno));
        if (r == 0)
            return amn_error_set(err, AMN_E_IO,
                                 "%s: file shrank while being read (%zu bytes missing at offset "
                                 "%llu)",
                                 amn_map_path(map), n - done, (unsigned long long)(off + done));
        done += (size_t)r;
    }
    return AMN_OK;
}

int amni_map_check(const amn_map *map, amn_error *err) {
    const int fd = amni_map_fd(map);
    struct stat st;
    if (fd < 0) return AMN_OK; /* an empty file: nothing is mapped */
    if (fstat(fd, &st) != 0)
        return amn_error_set(err, AMN_E_IO, "%s: stat: %s", amn_map_path(map), strerror(errno));
    if ((uint64_t)st.st_size < amn_map_size(map))
        return amn_error_set(err, AMN_E_IO,
                             "%s: file shrank while being read (%llu bytes, %llu when opened)",
                             amn_map_path(map), (unsigned long long)st.st_size,
                             (unsigned long long)amn_map_size(map));
    return AMN_OK;
}

static uint64_t thread_faults(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0) return 0;
    return (uint64_t)ru.ru_minflt + (uint64_t)ru.ru_majflt;
}

/* Whether [p, p + n) of this input is read through its mapping (populated
 * first). The first FETCH_SAMPLE bytes of every FETCH_WINDOW fetched are,
 * with the faults that map them counted, and they choose the way for the
 * rest of the window (a file's folios need not all be alike: see above).
 * False: read it by pread — also where the file ends before p + n (the
 * populate fails instead of a later SIGBUS), which pread reports. */
static bool fetch_mapped(const amn_map *map, const void *p, size_t n) {
    amni_input_probe *pr = amni_map_probe(map);
    if (atomic_load_explicit(&pr->fetch_unmappable, memory_order_relaxed)) return false;
    const uint64_t at =
        atomic_fetch_add_explicit(&pr->fetched, n, memory_order_relaxed) % FETCH_WINDOW;
    if (at >= FETCH_SAMPLE)
        return atomic_load_explicit(&pr->fetch_way, memory_order_relaxed) != AMNI_INPUT_PREAD &&
               amni_prefault(p, n) == 0;
    const uint64_t f0 = thread_faults();
    const int e = amni_prefault(p, n);
    if (e == EINVAL) atomic_store_explicit(&pr->fetch_unmappable, true, memory_order_relaxed);
    if (e) return false;
    const uint64_t mine = thread_faults() - f0;
    const uint64_t faults = atomic_fetch_add(&pr->sample_faults, mine) + mine;
    const uint64_t bytes = atomic_fetch_add(&pr->sample_bytes, n) + n;
    if (at + n >= FETCH_SAMPLE) { /* the sample ends here */
        atomic_store(&pr->fetch_way,
                     bytes >= faults * FOLIO_MIN ? AMNI_INPUT_MAP : AMNI_INPUT_PREAD);
        atomic_store(&pr->sample_faults, 0);
        atomic_store(&pr->sample_bytes, 0);
    }
    return true;
}

/* Ranges read through the mapping stay mapped, so a conversion that reads
 * that way would keep as much of its input resident as it read (290 MiB of
 * a 384 MiB file the page cache held in large folios) where the pread way
 * keeps one buffer. Each map keeps the span of what it lent since the last
 * sweep, and the conversion sweeps it once a batch of pieces is done, when
 * no worker reads it, unmapping it while the workers start on the next
 * (amni_model_retire_lent, amni_model_drop_retired): not fetch by fetch,
 * since an unmapping that cuts a large folio's mapping while another worker
 * reads the rest makes the next reads of that folio fault page by page (a
 * cast that unmapped each 128 KiB it fetched took three times as long).
 * Unmapping costs no more than munmap would at the end; a page needed
 * again faults back in. */
static void widen_lent(amni_input_probe *pr, uintptr_t lo, uintptr_t hi) {
    uintptr_t v = atomic_load_explicit(&pr->lent_lo, memory_order_relaxed);
    while ((!v || lo < v) && !atomic_compare_exchange_weak(&pr->lent_lo, &v, lo)) {
    }
    v = atomic_load_explicit(&pr->lent_hi, memory_order_relaxed);
    while (hi > v && !atomic_compare_exchange_weak(&pr->lent_hi, &v, hi)) {
    }
}

void amni_input_drop_retired(const amn_map *map) {
    amni_input_probe *pr = amni_map_probe(map);
    const uintptr_t lo = atomic_exchange(&pr->retired_lo, 0),
                    hi = atomic_exchange(&pr->retired_hi, 0);
    if (lo && lo < hi) amni_map_drop_range(map, (const void *)lo, hi - lo);
}

void amni_input_retire_lent(const amn_map *map) {
    amni_input_drop_retired(map); /* not dropped since the last retire */
    amni_input_probe *pr = amni_map_probe(map);
    const uintptr_t lo = atomic_exchange(&pr->lent_lo, 0), hi = atomic_exchange(&pr->lent_hi, 0);
    if (lo && lo < hi) {
        atomic_store(&pr->retired_lo, lo);
        atomic_store(&pr->retired_hi, hi);
    }
}

const void *amn_model_fetch(const amn_model *m, const void *p, size_t n, unsigned slot,
                            amn_error *err) {
    if (slot >= AMN_FETCH_SLOTS) {
        amn_error_set(err, AMN_E_INVALID, "amn_model_fetch: slot %u (max %d)", slot,
                      AMN_FETCH_SLOTS - 1);
        return NULL;
    }
    if (n == 0) return p;
    const amn_map *map = amni_model_map_for(m, p, n);
    if (!map || amni_map_fd(map) < 0) return p; /* memory the model owns */
    const amni_input_path forced = amni_input_forced();
    if (forced == AMNI_INPUT_MAP || (forced == AMNI_INPUT_AUTO && n < PREAD_MIN) ||
        (forced == AMNI_INPUT_AUTO && fetch_mapped(map, p, n))) {
        /* through the mapping: not past the end of a file that shrank */
        if (amni_map_check(map, err)) return NULL;
        if (n >= PREAD_MIN) widen_lent(amni_map_probe(map), (uintptr_t)p, (uintptr_t)p + n);
        return p;
    }
    void *buf = thread_buffer(slot, n);
    if (!buf) {
        amn_error_set(err, AMN_E_NOMEM, "out of memory");
        return NULL;
    }
    const uint64_t off = (uint64_t)((const uint8_t *)p - amn_map_data(map));
    return pread_full(map, off, buf, n, err) ? NULL : buf;
}

/* ---- one pass over a range ------------------------------------------------- */

#define SCAN_STEP (1u << 20) /* a piece: read into a buffer the caches hold */

static uintptr_t grain_floor(uintptr_t a) {
    return a & ~(uintptr_t)(DROP_GRAIN - 1);
}

int amn_map_scan(const amn_map *map, uint64_t off, uint64_t n, amn_map_scan_fn fn, void *ctx,
                 amn_error *err) {
    const uint64_t size = amn_map_size(map);
    if (off > size || n > size - off)
        return amn_error_set(err, AMN_E_INVALID, "%s: range of %llu bytes at %llu past its %llu",
                             amn_map_path(map), (unsigned long long)n, (unsigned long long)off,
                             (unsigned long long)size);
    const uint8_t *base = amn_map_data(map);
    const bool file = amni_map_fd(map) >= 0; /* else a view of memory: read in place */
    const amni_input_path forced = amni_input_forced();
    uintptr_t drop_from = 0; /* mapped and read, not yet unmapped (a grain's start) */
    for (uint64_t done = 0; done < n;) {
        const size_t k = n - done < SCAN_STEP ? (size_t)(n - done) : SCAN_STEP;
        const uint8_t *p = base + off + done;
        const void *piece = p;
        if (file && forced != AMNI_INPUT_MAP &&
            (forced != AMNI_INPUT_AUTO || !fetch_mapped(map, p, k))) {
            void *buf = thread_buffer(PASS_SLOT, k);
            if (!buf) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
            if (pread_full(map, off + done, buf, k, err)) return AMN_E_IO;
            piece = buf;
        } else if (file) {
            if (amni_map_check(map, err)) return AMN_E_IO;
            if (!drop_from) /* not before the mapping (its start is a page's) */
                drop_from = grain_floor((uintptr_t)p) > (uintptr_t)base ? grain_floor((uintptr_t)p)
                                                                        : (uintptr_t)base;
        }
        fn(ctx, piece, k);
        done += k;
        /* Unmap whole large folios behind: cutting one that is still read
         * would make its other pages fault one by one. */
        const uintptr_t to = done == n ? (uintptr_t)(p + k) : grain_floor((uintptr_t)(p + k));
        if (drop_from && to > drop_from) {
            amni_map_drop_range(map, (const void *)drop_from, to - drop_from);
            drop_from = to;
        }
    }
    return AMN_OK;
}

/* ---- pass-through ----------------------------------------------------------- */

static double wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double thread_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Through the mapping: a file cut shorter since it was mapped would raise
 * SIGBUS inside write(), so its size is checked first (one fstat per chunk;
 * a truncation racing with the copy itself is still a signal). */
static int check_size(const amn_map *map, const uint8_t *p, size_t n, amn_error *err) {
    const uint64_t end = (uint64_t)(p - amn_map_data(map)) + n;
    struct stat st = {0};
    if (fstat(amni_map_fd(map), &st) != 0 || (uint64_t)st.st_size < end)
        return amn_error_set(
            err, AMN_E_IO, "%s: file shrank while being read (%llu bytes, %llu needed)",
            amn_map_path(map), (unsigned long long)st.st_size, (unsigned long long)end);
    return AMN_OK;
}

/* A chunk passed through the mapping: else the input stays mapped, as much
 * of it as passed (above). The whole grains behind the chunk's end go, from
 * the grain it began in (the previous chunk's tail: a tensor's chunks pass
 * in file order); its own last grain, the tail, goes with the next chunk,
 * or when the next chunk is not the following one (another tensor), then.
 * Not with the conversion's sweep: a span from a tail to a later one would
 * cover tensors between them that an encoder's sources were mapped for. */
static void drop_passed(const amn_map *map, const uint8_t *p, size_t n) {
    const uintptr_t base = (uintptr_t)amn_map_data(map), g = DROP_GRAIN - 1;
    uintptr_t lo = (uintptr_t)p & ~g;
    const uintptr_t hi = ((uintptr_t)p + n) & ~g;
    if (lo < base) lo = base;
    amni_input_probe *pr = amni_map_probe(map);
    const uintptr_t tail_lo = atomic_load(&pr->pass_tail_lo),
                    tail_hi = atomic_load(&pr->pass_tail_hi);
    if (tail_lo < tail_hi && tail_hi != (uintptr_t)p) /* a tensor passed before: done */
        amni_map_drop_range(map, (const void *)tail_lo, tail_hi - tail_lo);
    if (lo < hi) amni_map_drop_range(map, (const void *)lo, hi - lo);
    atomic_store(&pr->pass_tail_lo, hi > (uintptr_t)p ? hi : (uintptr_t)p);
    atomic_store(&pr->pass_tail_hi, (uintptr_t)p + n);
}

static int pass_map(const amn_map *map, const uint8_t *p, size_t n, amn_sink *sink,
                    amn_error *err) {
    const int rc = check_size(map, p, n, err);
    if (rc) return rc;
    (void)amni_prefault(p, n); /* one madvise, not a fault per page inside write() */
    return amn_sink_write(sink, p, n, err);
}

static int pass_pread(const amn_map *map, uint64_t off, size_t n, amn_sink *sink, amn_error *err) {
    void *buf = thread_buffer(PASS_SLOT, n);
    if (!buf) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = pread_full(map, off, buf, n, err);
    return rc ? rc : amn_sink_write(sink, buf, n, err);
}

/* ---- in-kernel copies, with a tap fed beside them ------------------------
 * A tapped sink (a ZIP member's CRC-32) needs every byte in user memory,
 * which an in-kernel copy never brings there. So a second thread reads the
 * same range by pread, TAP_PIECE at a time into a buffer that stays in its
 * core's cache, and hands it to the tap while this thread copies in the
 * kernel: on two cores the tap's cost is hidden behind the copy instead of
 * added to it. The tap sees the bytes in order and the helper is joined
 * before the copy returns, so the sink's tap contract (in order, never
 * concurrently with the sink's other calls) holds. */

#define TAP_PIECE (256u << 10)

typedef struct tap_job {
    const amn_map *map;
    amn_sink *sink;
    void *buf; /* TAP_PIECE bytes of the copying thread's, reused: fresh pages would fault */
    const uint8_t *mapped; /* or read the mapping (size checked first, as pass_map does) */
    uint64_t off, n;
    int rc;
    amn_error err;
    double ns; /* the helper's CPU time */
} tap_job;

static void *tap_main(void *v) {
    tap_job *j = v;
    const double t0 = thread_ns();
    if (j->mapped) {
        j->rc = check_size(j->map, j->mapped, (size_t)j->n, &j->err);
        if (!j->rc) (void)amni_prefault(j->mapped, (size_t)j->n);
    }
    for (uint64_t done = 0; !j->rc && done < j->n;) {
        const size_t k = j->n - done < TAP_PIECE ? (size_t)(j->n - done) : TAP_PIECE;
        const void *src = j->mapped ? j->mapped + done : j->buf;
        if (!j->mapped) j->rc = pread_full(j->map, j->off + done, j->buf, k, &j->err);
        if (!j->rc) amni_sink_feed_tap(j->sink, src, k);
        done += k;
    }
    j->ns = thread_ns() - t0;
    return NULL;
}

/* In-kernel copy of [off, off + n) with the tap fed by a helper thread.
 * The first piece goes alone, so that a pair of files the kernel cannot
 * copy between is found before the tap saw anything (then
 * AMN_E_UNSUPPORTED, nothing written). *helper_ns: the helper's CPU time. */
static int copy_tapped(bool copy_file, const amn_map *map, uint64_t off, size_t n, amn_sink *sink,
                       bool from_map, double *helper_ns, amn_error *err) {
    const int fd = amni_map_fd(map);
    const char *name = amn_map_path(map);
    const size_t first = n < TAP_PIECE ? n : TAP_PIECE;
    void *buf = thread_buffer(TAP_SLOT, TAP_PIECE);
    if (!buf) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = amni_sink_copy(sink, copy_file, fd, off, first, true, name, err);
    if (rc) return rc;
    tap_job j = {.map = map,
                 .sink = sink,
                 .buf = buf,
                 .mapped = from_map ? amn_map_data(map) + off : NULL,
                 .off = off,
                 .n = n};
    pthread_t th;
    const bool threaded = n > first && pthread_create(&th, NULL, tap_main, &j) == 0;
    if (n > first)
        rc = amni_sink_copy(sink, copy_file, fd, off + first, n - first, true, name, err);
    if (rc == AMN_E_UNSUPPORTED) /* worked for the first piece, refused after it */
        rc = amn_error_set(err, AMN_E_IO, "%s: in-kernel copy refused at offset %llu", name,
                           (unsigned long long)(off + first));
    if (threaded)
        pthread_join(th, NULL);
    else
        tap_main(&j); /* no thread to be had: the tap still sees every byte */
    *helper_ns = j.ns;
    if (!rc && j.rc) {
        *err = j.err;
        rc = j.rc;
    }
    return rc;
}

/* Whether the thread feeding a tap reads the mapping rather than pread:
 * only when AMN_TAP_READ=map says so (tests, measurements). Reading the
 * mapping skips a copy, but its page-table work, and tearing it down at
 * exit, cost more than the copy: on a Skylake-SP (7 rounds,
 * 256 MiB to npz / pth) the whole conversion took 143-152 ms against
 * 132-143 by pread on tmpfs, and 89-97 against 86-92 on ext4 with the
 * input in large folios, where the probe's figures for the main path (the
 * mapping cheaper per byte than pread in every state) had chosen it. */
static bool tap_from_map(void) {
    const char *v = getenv("AMN_TAP_READ");
    return v && strcmp(v, "map") == 0;
}

/* One range by `path`; *extra_ns: CPU time spent on another thread. */
static int pass_way(amni_input_path path, const amn_map *map, const uint8_t *p, size_t n,
                    amn_sink *sink, double *extra_ns, bool *mapped, amn_error *err) {
    const uint64_t off = (uint64_t)(p - amn_map_data(map));
    *extra_ns = 0;
    *mapped = false;
    if (path == AMNI_INPUT_COPY || path == AMNI_INPUT_SPLICE) {
        const bool cf = path == AMNI_INPUT_COPY, tapped = amni_sink_tapped(sink);
        *mapped = tapped && tap_from_map(); /* the tap's helper reads the mapping */
        int rc = tapped ? copy_tapped(cf, map, off, n, sink, *mapped, extra_ns, err)
                        : amni_sink_copy(sink, cf, amni_map_fd(map), off, n, false,
                                         amn_map_path(map), err);
        if (rc != AMN_E_UNSUPPORTED) return rc;
        path = AMNI_INPUT_PREAD; /* no in-kernel copy between these files or on this sink */
    }
    *mapped = path == AMNI_INPUT_MAP;
    return *mapped ? pass_map(map, p, n, sink, err) : pass_pread(map, off, n, sink, err);
}

/* Passes [p, p + n) by `path`, then unmaps what of it was read through the
 * mapping (drop_passed): after the way's timing, since that unmapping takes
 * the place of the one munmap would make at the end, which no way was
 * charged (charged, it made the probe leave the mapping where it was the
 * fastest way). */
static int pass_by(amni_input_path path, const amn_map *map, const uint8_t *p, size_t n,
                   amn_sink *sink, double *extra_ns, amn_error *err) {
    bool mapped;
    const int rc = pass_way(path, map, p, n, sink, extra_ns, &mapped, err);
    if (mapped) drop_passed(map, p, n);
    return rc;
}

/* The next way to time on this input, or the one chosen. */
static amni_input_path next_path(amni_input_probe *pr, bool *timed) {
    static const amni_input_path ways[] = {AMNI_INPUT_COPY, AMNI_INPUT_SPLICE, AMNI_INPUT_PREAD,
                                           AMNI_INPUT_MAP};
    enum { N_WAYS = sizeof ways / sizeof *ways };
    *timed = false;
    if (pr->chosen) return (amni_input_path)pr->chosen;
    if (pr->tried >= PROBE_ROUNDS * N_WAYS) {
        amni_input_path best = ways[0];
        for (unsigned k = 1; k < N_WAYS; k++)
            if (pr->ns_per_byte[ways[k]] < pr->ns_per_byte[best]) best = ways[k];
        pr->chosen = (int)best;
        return best;
    }
    *timed = true;
    return ways[pr->tried % N_WAYS];
}

int amni_input_pass(const amn_model *m, const uint8_t *p, size_t n, amn_sink *sink,
                    amn_error *err) {
    const amn_map *map = n ? amni_model_map_for(m, p, n) : NULL;
    if (!map || amni_map_fd(map) < 0) return amn_sink_write(sink, p, n, err);
    const amni_input_path forced = amni_input_forced();
    double extra;
    if (forced) return pass_by(forced, map, p, n, sink, &extra, err);
    if (n < PROBE_MIN) return pass_by(AMNI_INPUT_PREAD, map, p, n, sink, &extra, err);
    amni_input_probe *pr = amni_map_probe(map);
    bool timed;
    const amni_input_path path = next_path(pr, &timed);
    const double t0 = timed ? thread_ns() : 0, w0 = timed ? wall_ns() : 0;
    bool mapped;
    int rc = pass_way(path, map, p, n, sink, &extra, &mapped, err);
    if (timed && !rc) {
        /* The CPU time of this thread and of a thread that fed a tap beside
         * it; or the elapsed time if less: when a second core was free, the
         * two threads overlapped and the range cost that much of the
         * conversion's time. A preempted range only costs more elapsed
         * time, so the CPU time bounds it and a loaded machine does not
         * decide. */
        double ns = thread_ns() - t0 + extra;
        const double wall = wall_ns() - w0;
        if (wall < ns) ns = wall;
        const double per = ns / (double)n;
        if (!pr->ns_per_byte[path] || per < pr->ns_per_byte[path]) pr->ns_per_byte[path] = per;
        pr->tried++;
    }
    if (mapped) drop_passed(map, p, n); /* untimed: see pass_by */
    return rc;
}
