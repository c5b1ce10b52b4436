/* Input mappings, read callbacks and atomic output sinks. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "amn/checked.h"
#include "amn/io.h"
#include "io_internal.h"

/* ---- mapping ------------------------------------------------------------ */

struct amn_map {
    const uint8_t *data;
    uint64_t size;
    char *path;
    int fd;    /* kept open for reads that bypass the mapping (input.c), -1 when empty */
    bool view; /* amni_map_view: borrowed bytes, nothing to unmap */
    amni_input_probe probe;
};

/* The map of an open file descriptor, which it takes (closed on error). */
static int map_fd(int fd, const char *path, bool willneed, amn_map **out, amn_error *err) {
    *out = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return amn_error_set(err, AMN_E_IO, "%s: not a regular file", path);
    }
    amn_map *m = calloc(1, sizeof *m);
    size_t plen = strlen(path) + 1;
    if (m) m->path = malloc(plen);
    if (!m || !m->path) {
        free(m);
        close(fd);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    memcpy(m->path, path, plen);
    m->size = (uint64_t)st.st_size;
    m->fd = -1;
    if (m->size > 0) {
        void *p = mmap(NULL, (size_t)m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(m->path);
            free(m);
            return amn_error_set(err, AMN_E_IO, "%s: mmap: %s", path, strerror(e));
        }
        if (willneed) madvise(p, (size_t)m->size, MADV_WILLNEED);
        m->data = p;
        m->fd = fd; /* pread and splice read through it (input.c) */
    } else {
        static const uint8_t empty[1];
        m->data = empty;
        close(fd);
    }
    *out = m;
    return AMN_OK;
}

static int map_open(const char *path, bool willneed, amn_map **out, amn_error *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(errno));
    return map_fd(fd, path, willneed, out, err);
}

int amni_map_open_fd(int fd, const char *name, amn_map **out, amn_error *err) {
    return map_fd(fd, name, false, out, err);
}

int amn_map_open(const char *path, amn_map **out, amn_error *err) {
    return map_open(path, true, out, err);
}

int amni_map_open_lazy(const char *path, amn_map **out, amn_error *err) {
    return map_open(path, false, out, err);
}

const uint8_t *amn_map_data(const amn_map *m) {
    return m->data;
}
uint64_t amn_map_size(const amn_map *m) {
    return m->size;
}
const char *amn_map_path(const amn_map *m) {
    return m->path;
}

int amni_map_view(const uint8_t *data, uint64_t size, const char *path, amn_map **out,
                  amn_error *err) {
    *out = NULL;
    amn_map *m = calloc(1, sizeof *m);
    size_t plen = strlen(path) + 1;
    if (m) m->path = malloc(plen);
    if (!m || !m->path) {
        free(m);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    memcpy(m->path, path, plen);
    m->data = data;
    m->size = size;
    m->fd = -1;
    m->view = true;
    *out = m;
    return AMN_OK;
}

void amn_map_close(amn_map *m) {
    if (!m) return;
    if (m->size && !m->view) munmap((void *)m->data, (size_t)m->size);
    if (m->fd >= 0) close(m->fd);
    free(m->path);
    free(m);
}

void amn_map_release(void *m) {
    amn_map_close(m);
}

void amni_map_drop_resident(const amn_map *m) {
    if (m->size && !m->view) madvise((void *)m->data, (size_t)m->size, MADV_DONTNEED);
}

static uintptr_t page_size(void) {
    const long sz = sysconf(_SC_PAGESIZE);
    return sz > 0 ? (uintptr_t)sz : 4096;
}

void amni_map_drop_range(const amn_map *m, const void *p, size_t n) {
    if (m->view || !n || !m->data) return;
    /* Never past the mapping: MADV_DONTNEED zeroes whatever memory it is given. */
    const uintptr_t lo = (uintptr_t)m->data, hi = lo + (uintptr_t)m->size;
    uintptr_t from = (uintptr_t)p, to = from + n;
    if (from < lo) from = lo;
    if (to > hi) to = hi;
    if (from >= to) return;
    const uintptr_t page = page_size();
    const uintptr_t a = (from + page - 1) & ~(page - 1), b = to & ~(page - 1);
    if (a < b) madvise((void *)a, b - a, MADV_DONTNEED);
}

void amn_map_drop(const amn_map *m, uint64_t off, uint64_t n) {
    if (!m || off >= m->size) return;
    if (n > m->size - off) n = m->size - off;
    if (n <= SIZE_MAX) amni_map_drop_range(m, m->data + off, (size_t)n);
}

int amni_map_fd(const amn_map *m) {
    return m->fd;
}

amni_input_probe *amni_map_probe(const amn_map *m) {
    return (amni_input_probe *)&m->probe; /* the map's only mutable part: see input.c */
}

int amni_prefault(const void *p, size_t n) {
#ifdef MADV_POPULATE_READ
    const uintptr_t page = page_size(); /* once per 2 MiB */
    const uintptr_t a = (uintptr_t)p & ~(page - 1);
    if (n && madvise((void *)a, (uintptr_t)p + n - a, MADV_POPULATE_READ) != 0) return errno;
    return 0;
#else
    (void)p, (void)n;
    return EINVAL;
#endif
}

/* ---- sources -------------------------------------------------------------- */

int amn_source_read(const amn_source *s, uint64_t off, void *buf, size_t n, amn_error *err) {
    size_t got = 0, want = n;
    if (s->size != UINT64_MAX) /* clip to the source so read_at never sees a range past it */
        want = off >= s->size ? 0 : (s->size - off < n ? (size_t)(s->size - off) : n);
    int rc = want ? s->read_at(s->ctx, off, buf, want, &got) : AMN_OK;
    if (rc)
        return amn_error_set(err, rc, "%s: read failed at offset %llu", s->name ? s->name : "input",
                             (unsigned long long)off);
    if (got < n)
        return amn_error_set(err, AMN_E_PARSE, "%s: truncated (wanted %zu bytes at offset %llu)",
                             s->name ? s->name : "input", n, (unsigned long long)off);
    return AMN_OK;
}

static int file_read_at(void *ctx, uint64_t off, void *buf, size_t n, size_t *got) {
    int fd = (int)(intptr_t)ctx;
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            *got = done;
            return AMN_E_IO;
        }
        if (r == 0) break;
        done += (size_t)r;
    }
    *got = done;
    return AMN_OK;
}

int amn_source_file_open(const char *path, amn_source *out, amn_error *err) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return amn_error_set(err, AMN_E_IO, "%s: not a regular file", path);
    }
    out->ctx = (void *)(intptr_t)fd;
    out->size = (uint64_t)st.st_size;
    out->read_at = file_read_at;
    out->name = path;
    return AMN_OK;
}

void amn_source_file_close(amn_source *s) {
    if (s && s->read_at == file_read_at) close((int)(intptr_t)s->ctx);
    if (s) memset(s, 0, sizeof *s);
}

/* Memory sources keep the buffer in ctx; amn_source_read has already clipped
 * the range to the source's size, so no bound is needed here. */
static int mem_read_at(void *ctx, uint64_t off, void *buf, size_t n, size_t *got) {
    memcpy(buf, (const uint8_t *)ctx + off, n);
    *got = n;
    return AMN_OK;
}

void amn_source_memory(amn_source *out, const void *buf, size_t n, const char *name) {
    out->ctx = (void *)buf;
    out->size = n;
    out->read_at = mem_read_at;
    out->name = name;
}

/* ---- sinks ----------------------------------------------------------------
 *
 * An output appears whole under its name or not at all. Where the file
 * system supports O_TMPFILE (ext4, xfs, btrfs, tmpfs) the data goes to an
 * anonymous inode in the target's directory, which the kernel frees however
 * the process ends (kill -9 included); commit links it in with linkat(). A
 * replaced output (--force) is linked under a temporary name first and
 * renamed over the old file, so readers see the old or the new file, never
 * neither. Elsewhere the data goes to a named temporary file beside the
 * target, registered in the pending list below so that a program's signal
 * handler can remove it (amn_sink_unlink_pending). The file is fsynced
 * before it takes its name and the directory after, unless
 * amn_sink_set_sync(s, false). Files are created with mode 0666 through
 * open(), so the process umask (and a default ACL) applies exactly as for
 * any new file, and the umask is never changed. */

#define SINK_BUF (1u << 20)
/* Writes this long skip the buffer: copying them costs more than the
 * system call they would share (a 1 MiB chunk of a one-thread conversion
 * was copied whole, 6 % of its CPU samples). */
#define SINK_DIRECT (64u << 10)
#define TAP_PIECE   (256u << 10) /* fits a core's L2 */

struct amn_sink {
    int fd;
    bool anonymous; /* O_TMPFILE: no name until commit */
    bool overwrite, sync;
    int slot;         /* pending-list slot of tmp_path, or -1 */
    char *tmp_path;   /* the named temporary (fallback), NULL when anonymous */
    char *final_path; /* the name the output takes */
    char *dir, *base; /* final_path split */
    uint64_t fail_at; /* test hook: ENOSPC once this many bytes are on disk */
    size_t copy_max;  /* test hook: in-kernel copies ask for at most this much per call */
    uint64_t on_disk; /* bytes handed to write() */
    uint8_t *buf;
    size_t used;
    uint64_t written;
    amn_sink_tap_fn tap;
    amn_sink_digest_fn digest; /* with fold: the tap folds (writes in place allowed) */
    amn_sink_fold_fn fold;
    void *tap_ctx;
    int pipe[2];        /* for splice, made on first use; -1 until then */
    bool no_copy_range; /* copy_file_range refused between these files */
    uint64_t wb_from;   /* start of the bytes not yet handed to early writeback */
};

/* ---- pending temporary names: read from signal handlers ---- */

#define PENDING_SLOTS 64
#define PENDING_PATH  4096
enum { SLOT_FREE, SLOT_BUSY, SLOT_ARMED };

/* The one piece of process-wide state besides the plugin registry: a signal
 * handler cannot take a lock or follow pointers another thread may free, so
 * the paths are copied into fixed slots whose state is an atomic. */
static struct {
    atomic_int state;
    char path[PENDING_PATH];
} pending[PENDING_SLOTS];

static int pending_add(const char *path) {
    size_t n = strlen(path);
    if (n >= PENDING_PATH) return -1;
    for (int i = 0; i < PENDING_SLOTS; i++) {
        int expect = SLOT_FREE;
        if (atomic_compare_exchange_strong(&pending[i].state, &expect, SLOT_BUSY)) {
            memcpy(pending[i].path, path, n + 1);
            atomic_store(&pending[i].state, SLOT_ARMED);
            return i;
        }
    }
    return -1; /* more than PENDING_SLOTS outputs at once: these are not cleaned on signals */
}

static void pending_remove(int slot) {
    if (slot >= 0) atomic_store(&pending[slot].state, SLOT_FREE);
}

void amn_sink_unlink_pending(void) {
    for (int i = 0; i < PENDING_SLOTS; i++)
        if (atomic_load(&pending[i].state) == SLOT_ARMED) (void)unlink(pending[i].path);
}

size_t amn_sink_pending_count(void) {
    size_t n = 0;
    for (int i = 0; i < PENDING_SLOTS; i++) n += atomic_load(&pending[i].state) == SLOT_ARMED;
    return n;
}

/* Asynchronous signals are held off the calling thread while a name is
 * created and registered (or linked and renamed), so that a handler never
 * sees a file without its registration nor a registration of a name that is
 * not ours. Synchronous faults stay deliverable. */
void amni_block_signals(sigset_t *old) {
    sigset_t all;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    pthread_sigmask(SIG_BLOCK, &all, old);
}

void amni_restore_signals(const sigset_t *old) {
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* "<dir>/.<base>.amn-XXXXXXXX" with fresh random letters. */
static void temp_name(const amn_sink *s, char *buf, size_t size) {
    static const char az[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint8_t r[10];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        static atomic_uint counter;
        uint64_t x = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL) ^
                     (uint64_t)atomic_fetch_add(&counter, 1) << 40 ^ (uintptr_t)s;
        for (size_t i = 0; i < sizeof r;
             i++, x = x * 6364136223846793005ull + 1442695040888963407ull)
            r[i] = (uint8_t)(x >> 56);
    }
    char suffix[sizeof r + 1];
    for (size_t i = 0; i < sizeof r; i++) suffix[i] = az[r[i] % (sizeof az - 1)];
    suffix[sizeof r] = '\0';
    snprintf(buf, size, "%s/.%s.amn-%s", s->dir, s->base, suffix);
}

static bool same_file(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static bool tmpfile_disabled(void) {
    const char *v = getenv("AMN_NO_TMPFILE");
    return v && *v && strcmp(v, "0") != 0;
}

/* An anonymous file in s->dir, if the file system and /proc allow linking it
 * in later; false means use a named temporary instead. */
static bool open_anonymous(amn_sink *s) {
#ifdef O_TMPFILE
    if (tmpfile_disabled()) return false;
    int fd = open(s->dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0) return false; /* EOPNOTSUPP, EISDIR (old kernels), ... */
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (access(proc, F_OK) != 0) { /* no /proc: linkat would need CAP_DAC_READ_SEARCH */
        close(fd);
        return false;
    }
    s->fd = fd;
    s->anonymous = true;
    return true;
#else
    (void)s;
    return false;
#endif
}

static int open_named(amn_sink *s, amn_error *err) {
    const size_t size = strlen(s->dir) + strlen(s->base) + 32;
    if (!(s->tmp_path = malloc(size))) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (int attempt = 0; attempt < 100; attempt++) {
        temp_name(s, s->tmp_path, size);
        sigset_t old;
        amni_block_signals(&old);
        s->fd = open(s->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        int e = errno;
        if (s->fd >= 0) s->slot = pending_add(s->tmp_path);
        amni_restore_signals(&old);
        if (s->fd >= 0) return AMN_OK;
        if (e != EEXIST) {
            free(s->tmp_path);
            s->tmp_path = NULL;
            return amn_error_set(err, AMN_E_IO, "%s: cannot create a temporary file: %s",
                                 s->final_path, strerror(e));
        }
    }
    free(s->tmp_path);
    s->tmp_path = NULL;
    return amn_error_set(err, AMN_E_IO, "%s: cannot find a free temporary name", s->final_path);
}

static char *dup_str(const char *p) {
    size_t n = strlen(p) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, p, n);
    return d;
}

int amn_sink_open(const char *final_path, bool overwrite, const char *const *inputs,
                  size_t n_inputs, amn_sink **out, amn_error *err) {
    *out = NULL;
    struct stat fst;
    if (stat(final_path, &fst) == 0) {
        for (size_t i = 0; i < n_inputs; i++) {
            struct stat ist;
            if (inputs[i] && stat(inputs[i], &ist) == 0 && same_file(&fst, &ist))
                return amn_error_set(err, AMN_E_INVALID,
                                     "output %s is the input file; choose another output",
                                     final_path);
        }
        if (S_ISDIR(fst.st_mode))
            return amn_error_set(err, AMN_E_INVALID, "output %s is a directory", final_path);
        if (!overwrite)
            return amn_error_set(err, AMN_E_INVALID,
                                 "output %s already exists; pass --force to overwrite it",
                                 final_path);
    }
    amn_sink *s = calloc(1, sizeof *s);
    if (!s) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    s->fd = -1;
    s->pipe[0] = s->pipe[1] = -1;
    s->slot = -1;
    s->overwrite = overwrite;
    s->sync = true;
    s->final_path = dup_str(final_path);
    char *dircopy = dup_str(final_path), *basecopy = dup_str(final_path);
    if (dircopy && basecopy) {
        s->dir = dup_str(dirname(dircopy));
        s->base = dup_str(basename(basecopy));
    }
    free(dircopy);
    free(basecopy);
    s->buf = malloc(SINK_BUF);
    if (!s->final_path || !s->dir || !s->base || !s->buf) {
        amn_sink_abort(s);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    /* Test hook: a disk that fills up after this many bytes. */
    const char *full = getenv("AMN_TEST_ENOSPC_AFTER");
    if (full && *full) s->fail_at = strtoull(full, NULL, 10) + 1;
    /* Test hook: in-kernel copies move at most this many bytes per call, as
     * a kernel may (a signal, a file system's own limit): short returns. */
    const char *piece = getenv("AMN_TEST_COPY_MAX");
    if (piece && *piece) s->copy_max = (size_t)strtoull(piece, NULL, 10);
    if (!open_anonymous(s)) {
        int rc = open_named(s, err);
        if (rc) {
            amn_sink_abort(s);
            return rc;
        }
    }
    *out = s;
    return AMN_OK;
}

void amn_sink_set_sync(amn_sink *s, bool sync) {
    s->sync = sync;
}

/* When the output is to be fsynced, start the disk writing what is already
 * written every WRITEBACK_STEP bytes (sync_file_range without waiting), so
 * that the fsync at the end waits for the last steps only and the disk
 * works while amn still copies. Without fsync the kernel's own writeback
 * timing is kept. */
#define WRITEBACK_STEP (8u << 20)
static void early_writeback(amn_sink *s) {
    if (!s->sync || s->on_disk - s->wb_from < WRITEBACK_STEP) return;
    (void)sync_file_range(s->fd, (off_t)s->wb_from, (off_t)(s->on_disk - s->wb_from),
                          SYNC_FILE_RANGE_WRITE);
    s->wb_from = s->on_disk;
}

/* n bytes from p at file offset at: by write() at the file position (which
 * must be at) when positional is false, else by pwrite() (threads may call
 * that at once: it reads only fd, fail_at and final_path). The ENOSPC test
 * hook cuts by offset. *done: the bytes written. */
static int put_all(const amn_sink *s, bool positional, uint64_t at, const void *p, size_t n,
                   uint64_t *done, amn_error *err) {
    const uint8_t *b = p;
    *done = 0;
    while (n) {
        size_t k = n > (1u << 30) ? (1u << 30) : n;
        if (s->fail_at && at + k >= s->fail_at) {
            k = at + 1 >= s->fail_at ? 0 : (size_t)(s->fail_at - 1 - at);
            if (k == 0)
                return amn_error_set(err, AMN_E_IO, "%s: write: %s", s->final_path,
                                     strerror(ENOSPC));
        }
        ssize_t w = positional ? pwrite(s->fd, b, k, (off_t)at) : write(s->fd, b, k);
        if (w < 0) {
            if (errno == EINTR) continue;
            return amn_error_set(err, AMN_E_IO, "%s: write: %s", s->final_path, strerror(errno));
        }
        b += w;
        n -= (size_t)w;
        at += (uint64_t)w;
        *done += (uint64_t)w;
    }
    return AMN_OK;
}

static int write_all(amn_sink *s, const void *p, size_t n, amn_error *err) {
    uint64_t done;
    int rc = put_all(s, false, s->on_disk, p, n, &done, err);
    s->on_disk += done;
    early_writeback(s);
    return rc;
}

static int flush(amn_sink *s, amn_error *err) {
    int rc = write_all(s, s->buf, s->used, err);
    s->used = 0;
    return rc;
}

int amn_sink_write(amn_sink *s, const void *buf, size_t n, amn_error *err) {
    s->written += n;
    if (n < SINK_DIRECT && s->used + n <= SINK_BUF) {
        if (s->tap) s->tap(s->tap_ctx, buf, n);
        memcpy(s->buf + s->used, buf, n);
        s->used += n;
        return AMN_OK;
    }
    int rc = flush(s, err);
    if (rc) return rc;
    if (n >= SINK_DIRECT) {
        /* Large blocks skip the copy. A tap runs after each TAP_PIECE is
         * written, while the piece is still in the core's cache from the
         * kernel's copy; before the write, the tap would be the one to wait
         * for memory. */
        if (!s->tap) return write_all(s, buf, n, err);
        for (const uint8_t *p = buf; n && !rc;) {
            const size_t k = n < TAP_PIECE ? n : TAP_PIECE;
            rc = write_all(s, p, k, err);
            if (!rc) s->tap(s->tap_ctx, p, k);
            p += k;
            n -= k;
        }
        return rc;
    }
    if (s->tap) s->tap(s->tap_ctx, buf, n);
    memcpy(s->buf, buf, n);
    s->used = n;
    return AMN_OK;
}

int amn_sink_pad(amn_sink *s, size_t n, amn_error *err) {
    static const uint8_t zeros[256];
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        int rc = amn_sink_write(s, zeros, k, err);
        if (rc) return rc;
        n -= k;
    }
    return AMN_OK;
}

void amn_sink_set_tap(amn_sink *s, amn_sink_tap_fn tap, void *ctx) {
    amn_sink_set_folding_tap(s, tap, NULL, NULL, ctx);
}

void amn_sink_set_folding_tap(amn_sink *s, amn_sink_tap_fn tap, amn_sink_digest_fn digest,
                              amn_sink_fold_fn fold, void *ctx) {
    s->tap = tap;
    s->digest = tap && digest && fold ? digest : NULL;
    s->fold = tap && digest && fold ? fold : NULL;
    s->tap_ctx = ctx;
}

bool amni_sink_tapped(const amn_sink *s) {
    return s->tap != NULL;
}

bool amni_sink_in_place_ok(const amn_sink *s) {
    return !s->tap || s->fold;
}

uint64_t amni_sink_digest(const amn_sink *s, const void *buf, size_t n) {
    return s->digest ? s->digest(buf, n) : 0;
}

void amni_sink_fold(amn_sink *s, uint64_t digest, uint64_t n) {
    if (s->fold) s->fold(s->tap_ctx, digest, n);
}

/* The pipe splice moves pages through, as large as the system lets us make
 * it (fewer round trips); made once per sink. */
#define SPLICE_PIPE (1u << 20)
static bool make_pipe(amn_sink *s) {
    if (s->pipe[0] >= 0) return true;
    if (pipe2(s->pipe, O_CLOEXEC) != 0) return false;
    (void)fcntl(s->pipe[1], F_SETPIPE_SZ, SPLICE_PIPE);
    return true;
}

/* Drain `n` bytes the pipe holds into the output. */
static int drain_pipe(amn_sink *s, size_t n, amn_error *err) {
    while (n) {
        ssize_t w = splice(s->pipe[0], NULL, s->fd, NULL, n, SPLICE_F_MOVE);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return amn_error_set(err, AMN_E_IO, "%s: write: %s", s->final_path,
                                 w < 0 ? strerror(errno) : "no progress");
        n -= (size_t)w;
        s->on_disk += (uint64_t)w;
    }
    return AMN_OK;
}

/* A source that ended before the range did. */
static int shrank(const char *in_name, uint64_t n, uint64_t off, amn_error *err) {
    return amn_error_set(err, AMN_E_IO,
                         "%s: file shrank while being read (%llu bytes missing at offset %llu)",
                         in_name, (unsigned long long)n, (unsigned long long)off);
}

static int splice_range(amn_sink *s, int fd, uint64_t off, uint64_t n, const char *in_name,
                        amn_error *err) {
    if (!make_pipe(s)) return AMN_E_UNSUPPORTED;
    int rc = flush(s, err);
    if (rc) return rc;
    bool moved = false;
    while (n) {
        loff_t at = (loff_t)off;
        size_t want = n < SPLICE_PIPE ? (size_t)n : SPLICE_PIPE;
        if (s->copy_max && want > s->copy_max) want = s->copy_max;
        ssize_t r = splice(fd, &at, s->pipe[1], NULL, want, SPLICE_F_MOVE | SPLICE_F_MORE);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && !moved && (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP))
            return AMN_E_UNSUPPORTED; /* this pair of files cannot splice: nothing written */
        if (r < 0)
            return amn_error_set(err, AMN_E_IO, "%s: read at offset %llu: %s", in_name,
                                 (unsigned long long)off, strerror(errno));
        if (r == 0) return shrank(in_name, n, off, err);
        moved = true;
        if ((rc = drain_pipe(s, (size_t)r, err))) return rc;
        s->written += (uint64_t)r;
        off += (uint64_t)r;
        n -= (uint64_t)r;
        early_writeback(s);
    }
    return AMN_OK;
}

/* copy_file_range: one system call per range and no pipe; the kernel copies
 * page-cache pages (or shares blocks where the file system can). Errors
 * that mean "not between these two files" (another file system on older
 * kernels, a file system without it, a seccomp filter) before anything
 * moved make this sink stop trying it. */
static int copy_range(amn_sink *s, int fd, uint64_t off, uint64_t n, const char *in_name,
                      amn_error *err) {
    if (s->no_copy_range) return AMN_E_UNSUPPORTED;
    int rc = flush(s, err);
    if (rc) return rc;
    bool moved = false;
    while (n) {
        loff_t at = (loff_t)off;
        size_t want = n < (1u << 30) ? (size_t)n : (1u << 30);
        if (s->copy_max && want > s->copy_max) want = s->copy_max;
        ssize_t r = copy_file_range(fd, &at, s->fd, NULL, want, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && !moved &&
            (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP ||
             errno == EPERM || errno == EBADF)) {
            s->no_copy_range = true;
            return AMN_E_UNSUPPORTED; /* nothing written: the caller takes another way */
        }
        if (r < 0)
            return amn_error_set(err, AMN_E_IO, "%s: copy at offset %llu: %s", in_name,
                                 (unsigned long long)off, strerror(errno));
        if (r == 0) return shrank(in_name, n, off, err);
        moved = true;
        s->on_disk += (uint64_t)r;
        s->written += (uint64_t)r;
        off += (uint64_t)r;
        n -= (uint64_t)r; /* a short copy: the loop asks for the rest */
        early_writeback(s);
    }
    return AMN_OK;
}

int amni_sink_copy(amn_sink *s, bool copy_file, int fd, uint64_t off, uint64_t n, bool tap_fed,
                   const char *in_name, amn_error *err) {
    if ((s->tap && !tap_fed) || s->fail_at) return AMN_E_UNSUPPORTED;
    return copy_file ? copy_range(s, fd, off, n, in_name, err)
                     : splice_range(s, fd, off, n, in_name, err);
}

void amni_sink_feed_tap(amn_sink *s, const void *buf, size_t n) {
    if (s->tap) s->tap(s->tap_ctx, buf, n);
}

int amni_sink_claim(amn_sink *s, uint64_t n, uint64_t *at, amn_error *err) {
    if (!amni_sink_in_place_ok(s)) return AMN_E_UNSUPPORTED;
    int rc = flush(s, err);
    if (rc) return rc;
    uint64_t end;
    if (!amn_add_u64(s->on_disk, n, &end) || end > (uint64_t)INT64_MAX)
        return amn_error_set(err, AMN_E_LIMIT, "%s: output too large", s->final_path);
    if (lseek(s->fd, (off_t)end, SEEK_SET) < 0)
        return amn_error_set(err, AMN_E_IO, "%s: seek: %s", s->final_path, strerror(errno));
    *at = s->on_disk;
    s->on_disk = s->wb_from = end;
    s->written += n;
    return AMN_OK;
}

/* Reads only what no call changes while a claimed region is being written
 * (fd, sync, fail_at, final_path), so threads may call it at once. */
int amni_sink_write_at(amn_sink *s, uint64_t at, const void *buf, size_t n, amn_error *err) {
    uint64_t done;
    int rc = put_all(s, true, at, buf, n, &done, err);
    /* early_writeback's job for this piece: start the disk on it now */
    if (s->sync && done)
        (void)sync_file_range(s->fd, (off_t)at, (off_t)done, SYNC_FILE_RANGE_WRITE);
    return rc;
}

uint64_t amn_sink_tell(const amn_sink *s) {
    return s->written;
}

/* Allocating the blocks up front spares a disk file system its per-page
 * delayed-allocation work during the writes (ext4, Skylake-SP, 5 rounds:
 * FP8 -> BF16 45-49 ms against 52-55 without, .pth -> safetensors 83-85
 * against 94-98); failing only loses that. tmpfs has no blocks: there the
 * call allocates the file's pages one by one before the first write, while
 * the converter's workers wait, and the writes would have allocated them as
 * cheaply (6 rounds, ms: F32 -> BF16 cast 94-103 with it, 76-94 without;
 * FP8 70-76 / 61-73; AWQ 73-86 / 67-77; .pth 131-138 / 125-131; npz and
 * GGUF the same either way). */
void amn_sink_reserve(amn_sink *s, uint64_t bytes) {
    struct statfs fs;
    if (!bytes || (fstatfs(s->fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC)) return;
    (void)fallocate(s->fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes);
}

static int sync_dir(const amn_sink *s, amn_error *err) {
    int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return amn_error_set(err, AMN_E_IO, "%s: %s", s->dir, strerror(errno));
    int rc = fsync(dfd) != 0 && errno != EINVAL && errno != EROFS
                 ? amn_error_set(err, AMN_E_IO, "%s: fsync: %s", s->dir, strerror(errno))
                 : AMN_OK;
    close(dfd);
    return rc;
}

/* Give the anonymous file its name: straight under final_path when that is
 * free, else under a temporary name renamed over the old file. Signals are
 * held meanwhile, so the temporary name is registered before it exists. */
static int link_anonymous(amn_sink *s, amn_error *err) {
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", s->fd);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, s->final_path, AT_SYMLINK_FOLLOW) == 0) return AMN_OK;
    if (errno != EEXIST)
        return amn_error_set(err, AMN_E_IO, "%s: link: %s", s->final_path, strerror(errno));
    if (!s->overwrite) /* created by someone else while we wrote */
        return amn_error_set(err, AMN_E_INVALID,
                             "output %s already exists; pass --force to overwrite it",
                             s->final_path);
    const size_t size = strlen(s->dir) + strlen(s->base) + 32;
    if (!(s->tmp_path = malloc(size))) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (int attempt = 0; attempt < 100; attempt++) {
        temp_name(s, s->tmp_path, size);
        sigset_t old;
        amni_block_signals(&old);
        int rc = AMN_OK;
        if (linkat(AT_FDCWD, proc, AT_FDCWD, s->tmp_path, AT_SYMLINK_FOLLOW) != 0) {
            int e = errno;
            amni_restore_signals(&old);
            if (e == EEXIST) continue;
            return amn_error_set(err, AMN_E_IO, "%s: link: %s", s->final_path, strerror(e));
        }
        s->slot = pending_add(s->tmp_path);
        if (rename(s->tmp_path, s->final_path) != 0)
            rc = amn_error_set(err, AMN_E_IO, "%s: rename: %s", s->final_path, strerror(errno));
        else
            free(s->tmp_path), s->tmp_path = NULL; /* nothing left to remove */
        amni_restore_signals(&old);
        return rc; /* on failure abort() unlinks tmp_path */
    }
    return amn_error_set(err, AMN_E_IO, "%s: cannot find a free temporary name", s->final_path);
}

int amn_sink_commit(amn_sink *s, amn_error *err) {
    int rc = flush(s, err);
    if (!rc && s->sync && fsync(s->fd) != 0)
        rc = amn_error_set(err, AMN_E_IO, "%s: fsync: %s", s->final_path, strerror(errno));
    if (!rc && s->anonymous) {
        rc = link_anonymous(s, err);
    } else if (!rc) {
        if (rename(s->tmp_path, s->final_path) != 0)
            rc = amn_error_set(err, AMN_E_IO, "%s: rename: %s", s->final_path, strerror(errno));
        else
            free(s->tmp_path), s->tmp_path = NULL;
    }
    pending_remove(s->slot);
    s->slot = -1;
    if (!rc) {
        int fd = s->fd;
        s->fd = -1;
        if (close(fd) != 0)
            rc = amn_error_set(err, AMN_E_IO, "%s: close: %s", s->final_path, strerror(errno));
    }
    if (!rc && s->sync) rc = sync_dir(s, err);
    amn_sink_abort(s);
    return rc;
}

void amn_sink_abort(amn_sink *s) {
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    if (s->pipe[0] >= 0) close(s->pipe[0]), close(s->pipe[1]);
    if (s->tmp_path) unlink(s->tmp_path);
    pending_remove(s->slot);
    free(s->tmp_path);
    free(s->final_path);
    free(s->dir);
    free(s->base);
    free(s->buf);
    free(s);
}
