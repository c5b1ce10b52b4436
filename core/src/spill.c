/* Scratch files (amn/io.h): bytes a reader makes rather than finds — a
 * compressed archive's model file decompressed (archive.c), a deflated npz
 * member inflated (the kit's zip reader) — kept in an unlinked temporary
 * file instead of the process's memory, then mapped and read as an input
 * file is (pread, copy_file_range, splice or the mapping: input.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amn/io.h"
#include "io_internal.h"
#include "spill_dir.h"

struct amn_spill {
    int fd;
    uint64_t size, written;
    char *label;
};

/* A file no other process can open: O_TMPFILE, or where the file system
 * lacks it, a file unlinked as soon as it is made. */
static int anonymous_fd(const char *dir) {
#ifdef O_TMPFILE
    const int t = open(dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
    if (t >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return t;
#endif
    char name[4096];
    if (snprintf(name, sizeof name, "%s/.amn-member-XXXXXX", dir) >= (int)sizeof name) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = mkostemp(name, O_CLOEXEC);
    if (fd >= 0) unlink(name);
    return fd;
}

void amn_spill_free(amn_spill *s) {
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    free(s->label);
    free(s);
}

int amn_spill_open(uint64_t size, const char *label, amn_spill **out, amn_error *err) {
    *out = NULL;
    amn_spill *s = calloc(1, sizeof *s);
    if (!s || !(s->label = strdup(label ? label : "scratch file"))) {
        free(s);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    s->size = size;
    const char *dir = amni_spill_dir();
    if ((s->fd = anonymous_fd(dir)) < 0) {
        const int e = errno;
        amn_spill_free(s);
        return amn_error_set(err, AMN_E_IO,
                             "no temporary file in %s to decompress it into: %s (set TMPDIR)", dir,
                             strerror(e));
    }
    /* Reserve the space first: a disk too small fails now, not after
     * minutes of decompressing. */
    int e = size > (uint64_t)INT64_MAX ? EFBIG : posix_fallocate(s->fd, 0, (off_t)size);
    if (e == EINVAL || e == EOPNOTSUPP) e = 0; /* no reservation here: writes say ENOSPC */
    if (e) {
        amn_spill_free(s);
        return amn_error_set(err, AMN_E_IO,
                             "no room for its %llu bytes in %s, where compressed model files are "
                             "decompressed: %s (set TMPDIR)",
                             (unsigned long long)size, dir, strerror(e));
    }
    *out = s;
    return AMN_OK;
}

int amn_spill_write(amn_spill *s, const void *buf, size_t n, amn_error *err) {
    if (n > s->size - s->written)
        return amn_error_set(err, AMN_E_INVALID, "more than the %llu bytes announced",
                             (unsigned long long)s->size);
    const uint8_t *p = buf;
    while (n) {
        const ssize_t w = pwrite(s->fd, p, n, (off_t)s->written);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return amn_error_set(err, AMN_E_IO, "writing it to %s: %s", amni_spill_dir(),
                                 strerror(w < 0 ? errno : EIO));
        p += w;
        n -= (size_t)w;
        s->written += (uint64_t)w;
    }
    return AMN_OK;
}

int amn_spill_map(amn_spill *s, amn_map **out, amn_error *err) {
    *out = NULL;
    if (s->written != s->size) {
        const int rc = amn_error_set(err, AMN_E_INVALID, "%llu bytes written of %llu",
                                     (unsigned long long)s->written, (unsigned long long)s->size);
        amn_spill_free(s);
        return rc;
    }
    const int fd = s->fd;
    s->fd = -1;
    int rc = amni_map_open_fd(fd, s->label, out, err); /* takes fd */
    if (rc == AMN_OK && amn_map_size(*out) != s->size) {
        amn_map_close(*out);
        *out = NULL;
        rc = amn_error_set(err, AMN_E_IO, "its temporary file changed size");
    }
    amn_spill_free(s);
    return rc;
}
