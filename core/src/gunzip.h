/* Private to core: a gzip stream fed to libarchive with its checks kept
 * (gunzip.c). */
#ifndef AMN_GUNZIP_H
#define AMN_GUNZIP_H

#include <stdbool.h>
#include <stdint.h>

#include <archive.h>

#include "amn/error.h"

typedef struct amni_gunzip amni_gunzip;

/* The gzip file at path, to be read by libarchive through amni_gunzip_read
 * (archive_read_open(a, g, NULL, amni_gunzip_read, NULL)) rather than by
 * libarchive's gzip filter: zlib checks each member's CRC-32 and length,
 * which libarchive 3.6 reads without checking. A damaged stream fails the
 * libarchive call that reaches it, with zlib's message. */
int amni_gunzip_new(const char *path, amni_gunzip **out, amn_error *err);
la_ssize_t amni_gunzip_read(struct archive *a, void *g, const void **buf);

/* Decompresses what libarchive left unread (tar stops at its end-of-archive
 * blocks; the gzip trailer lies after them) to the end of the file, so that
 * every member's checks run: AMN_E_PARSE on a damaged stream or on bytes
 * after it that are neither gzip members nor zeros. `more` is told of every block
 * decompressed, and may refuse it (the caller's ratio cap). */
int amni_gunzip_finish(amni_gunzip *g, int (*more)(void *ctx, uint64_t n, amn_error *err),
                       void *ctx, amn_error *err);

/* What went wrong reading g (zlib's message), or NULL. */
const char *amni_gunzip_error(const amni_gunzip *g);

/* After archive_read_free of the archive that read it. */
void amni_gunzip_free(amni_gunzip *g);

#endif
