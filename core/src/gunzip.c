/* A gzip stream decompressed for libarchive, its checks kept: see gunzip.h.
 *
 * libarchive's gzip filter (3.6) reads each member's trailer without
 * comparing its CRC-32 and length with the data, and stops reading where
 * the tar inside ends, before the trailer. A .tar.gz damaged in a way that
 * still inflates would then convert to wrong weights. zlib, asked for
 * gzip (windowBits 16 + 15), checks both at each member's end; the rest of
 * the stream is decompressed after the tar's end for that (finish). The
 * CRC-32 libarchive does not compute costs about 5% of the decompression
 * (0.05 s of 1.0 s for 256 MiB of tar). */
#include "gunzip.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

/* The sizes libarchive reads a file and a gzip filter's output with: a
 * 1 MiB output block, larger than a core's L2 cache, made the tar reader
 * behind it 4% slower. */
#define IN_SIZE  (1u << 20)
#define OUT_SIZE (64u << 10)

struct amni_gunzip {
    int fd;
    char *path;
    z_stream z;
    bool z_ready;   /* inflateInit2 done */
    bool in_member; /* a member begun and not yet ended */
    bool zeros;     /* zeros seen after the last member */
    bool eof;       /* read() said the file ends */
    uint8_t *in, *out;
    char msg[200];
};

static int fail(amni_gunzip *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->msg, sizeof g->msg, fmt, ap);
    va_end(ap);
    return -1;
}

static int fill(amni_gunzip *g) {
    if (g->z.avail_in || g->eof) return 0;
    ssize_t r;
    do r = read(g->fd, g->in, IN_SIZE);
    while (r < 0 && errno == EINTR);
    if (r < 0) return fail(g, "gzip: read: %s", strerror(errno));
    g->eof = r == 0;
    g->z.next_in = g->in;
    g->z.avail_in = (uInt)r;
    return 0;
}

/* Between members: another member, or zeros to the end of the file (as
 * gzip allows); anything else is refused (gzip warns, GNU tar then fails,
 * Python's gzip module raises). 1 when a member begins, 0 at the end. */
static int next_member(amni_gunzip *g) {
    for (;;) {
        if (fill(g)) return -1;
        while (g->z.avail_in && *g->z.next_in == 0)
            g->z.next_in++, g->z.avail_in--, g->zeros = true;
        if (g->z.avail_in) break;
        if (g->eof) return 0;
    }
    if (g->zeros || *g->z.next_in != 0x1f)
        return fail(g, "gzip: bytes after the end of the compressed stream");
    if (inflateReset(&g->z) != Z_OK) return fail(g, "gzip: zlib reset failed");
    g->in_member = true;
    return 1;
}

/* The next bytes of the decompressed stream into g->out: *n = 0 at the
 * end of the file, -1 (g->msg) on damage. */
static int inflate_some(amni_gunzip *g, size_t *n) {
    *n = 0;
    for (;;) {
        if (!g->in_member) {
            const int r = next_member(g);
            if (r <= 0) return r;
        }
        if (fill(g)) return -1;
        g->z.next_out = g->out;
        g->z.avail_out = OUT_SIZE;
        const int r = inflate(&g->z, Z_NO_FLUSH);
        *n = OUT_SIZE - g->z.avail_out;
        if (r == Z_STREAM_END) /* zlib has checked the member's CRC-32 and length */
            g->in_member = false;
        else if (r == Z_BUF_ERROR && g->eof && !g->z.avail_in)
            return fail(g, "gzip: the compressed stream ends early");
        else if (r != Z_OK && r != Z_BUF_ERROR)
            return fail(g, "gzip: %s", g->z.msg ? g->z.msg : "damaged compressed stream");
        if (*n) return 0;
    }
}

int amni_gunzip_new(const char *path, amni_gunzip **out, amn_error *err) {
    *out = NULL;
    amni_gunzip *g = calloc(1, sizeof *g);
    if (!g) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    g->fd = -1;
    g->path = strdup(path);
    g->in = malloc(IN_SIZE);
    g->out = malloc(OUT_SIZE);
    if (!g->path || !g->in || !g->out || inflateInit2(&g->z, 16 + MAX_WBITS) != Z_OK) {
        amni_gunzip_free(g);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    g->z_ready = true;
    g->in_member = true;
    if ((g->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        const int e = errno;
        amni_gunzip_free(g);
        return amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(e));
    }
    *out = g;
    return AMN_OK;
}

la_ssize_t amni_gunzip_read(struct archive *a, void *v, const void **buf) {
    amni_gunzip *g = v;
    size_t n;
    if (inflate_some(g, &n)) {
        archive_set_error(a, EIO, "%s", g->msg);
        return -1;
    }
    *buf = g->out;
    return (la_ssize_t)n;
}

int amni_gunzip_finish(amni_gunzip *g, int (*more)(void *ctx, uint64_t n, amn_error *err),
                       void *ctx, amn_error *err) {
    for (;;) {
        size_t n;
        if (inflate_some(g, &n)) return amn_error_set(err, AMN_E_PARSE, "%s: %s", g->path, g->msg);
        if (!n) return AMN_OK;
        const int rc = more ? more(ctx, n, err) : AMN_OK;
        if (rc) return rc;
    }
}

const char *amni_gunzip_error(const amni_gunzip *g) {
    return g && g->msg[0] ? g->msg : NULL;
}

void amni_gunzip_free(amni_gunzip *g) {
    if (!g) return;
    if (g->z_ready) inflateEnd(&g->z);
    if (g->fd >= 0) close(g->fd);
    free(g->in);
    free(g->out);
    free(g->path);
    free(g);
}
