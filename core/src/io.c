/* Input mappings, read callbacks and atomic output sinks. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amn/io.h"
#include "io_internal.h"

/* ---- mapping ------------------------------------------------------------ */

struct amn_map {
    const uint8_t *data;
    uint64_t size;
    char *path;
};

int amn_map_open(const char *path, amn_map **out, amn_error *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(errno));
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
    if (m->size > 0) {
        void *p = mmap(NULL, (size_t)m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(m->path);
            free(m);
            return amn_error_set(err, AMN_E_IO, "%s: mmap: %s", path, strerror(e));
        }
        madvise(p, (size_t)m->size, MADV_WILLNEED);
        m->data = p;
        close(fd); /* the mapping keeps the file */
    } else {
        static const uint8_t empty[1];
        m->data = empty;
        close(fd);
    }
    *out = m;
    return AMN_OK;
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

void amn_map_close(amn_map *m) {
    if (!m) return;
    if (m->size) munmap((void *)m->data, (size_t)m->size);
    free(m->path);
    free(m);
}

void amn_map_release(void *m) {
    amn_map_close(m);
}

void amni_prefault(const void *p, size_t n) {
#ifdef MADV_POPULATE_READ
    const long sz = sysconf(_SC_PAGESIZE), page = sz > 0 ? sz : 4096; /* once per 2 MiB */
    const uintptr_t a = (uintptr_t)p & ~(uintptr_t)(page - 1);
    if (n) (void)madvise((void *)a, (uintptr_t)p + n - a, MADV_POPULATE_READ);
#else
    (void)p, (void)n;
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

/* ---- sinks ---------------------------------------------------------------- */

#define SINK_BUF  (1u << 20)
#define TAP_PIECE (256u << 10) /* fits a core's L2 */

struct amn_sink {
    int fd;
    char *tmp_path, *final_path;
    uint8_t *buf;
    size_t used;
    uint64_t written;
    amn_sink_tap_fn tap;
    void *tap_ctx;
};

static bool same_file(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
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
    size_t flen = strlen(final_path);
    if (!s) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    s->fd = -1;
    s->final_path = malloc(flen + 1);
    s->tmp_path = malloc(flen + 32);
    s->buf = malloc(SINK_BUF);
    if (!s->final_path || !s->tmp_path || !s->buf) {
        amn_sink_abort(s);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    memcpy(s->final_path, final_path, flen + 1);
    /* The temporary file sits beside the output so the final rename is atomic. */
    char *dircopy = strdup(final_path), *basecopy = strdup(final_path);
    if (!dircopy || !basecopy) {
        free(dircopy);
        free(basecopy);
        amn_sink_abort(s);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    const char *dir = dirname(dircopy), *base = basename(basecopy);
    free(s->tmp_path);
    s->tmp_path = malloc(strlen(dir) + strlen(base) + 32);
    if (s->tmp_path) sprintf(s->tmp_path, "%s/.%s.amn-XXXXXX", dir, base);
    free(dircopy);
    free(basecopy);
    if (!s->tmp_path) {
        amn_sink_abort(s);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    s->fd = mkostemp(s->tmp_path, O_CLOEXEC);
    if (s->fd < 0) {
        int e = errno;
        free(s->tmp_path);
        s->tmp_path = NULL;
        amn_sink_abort(s);
        return amn_error_set(err, AMN_E_IO, "%s: cannot create a temporary file: %s", final_path,
                             strerror(e));
    }
    *out = s;
    return AMN_OK;
}

static int write_all(amn_sink *s, const void *p, size_t n, amn_error *err) {
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(s->fd, b, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return amn_error_set(err, AMN_E_IO, "%s: write: %s", s->final_path, strerror(errno));
        }
        b += w;
        n -= (size_t)w;
    }
    return AMN_OK;
}

static int flush(amn_sink *s, amn_error *err) {
    int rc = write_all(s, s->buf, s->used, err);
    s->used = 0;
    return rc;
}

int amn_sink_write(amn_sink *s, const void *buf, size_t n, amn_error *err) {
    s->written += n;
    if (s->used + n <= SINK_BUF) {
        if (s->tap) s->tap(s->tap_ctx, buf, n);
        memcpy(s->buf + s->used, buf, n);
        s->used += n;
        return AMN_OK;
    }
    int rc = flush(s, err);
    if (rc) return rc;
    if (n >= SINK_BUF) {
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
    s->tap = tap;
    s->tap_ctx = ctx;
}

uint64_t amn_sink_tell(const amn_sink *s) {
    return s->written;
}

void amn_sink_reserve(amn_sink *s, uint64_t bytes) {
    /* Allocating the blocks up front spares the file system its per-page
     * delayed-allocation work during the writes; failing only loses that. */
    if (bytes) (void)fallocate(s->fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes);
}

int amn_sink_commit(amn_sink *s, amn_error *err) {
    int rc = flush(s, err);
    if (!rc) {
        /* mkostemp made the file 0600; give it the mode a plain create would. */
        mode_t mask = umask(0);
        umask(mask);
        fchmod(s->fd, 0666 & ~mask);
        if (close(s->fd) != 0)
            rc = amn_error_set(err, AMN_E_IO, "%s: close: %s", s->final_path, strerror(errno));
        s->fd = -1;
    }
    if (!rc && rename(s->tmp_path, s->final_path) != 0)
        rc = amn_error_set(err, AMN_E_IO, "%s: rename: %s", s->final_path, strerror(errno));
    if (rc) {
        amn_sink_abort(s);
        return rc;
    }
    free(s->tmp_path);
    s->tmp_path = NULL;
    amn_sink_abort(s);
    return AMN_OK;
}

void amn_sink_abort(amn_sink *s) {
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    if (s->tmp_path) unlink(s->tmp_path);
    free(s->tmp_path);
    free(s->final_path);
    free(s->buf);
    free(s);
}
