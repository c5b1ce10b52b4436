/* amn/kit/zip_writer.h — plugin kit: a streaming ZIP writer on the core's
 * sink, shared by the npz and pth writers.
 *
 * Members are stored (no compression). Each member's data starts at a
 * multiple of `align` in the file (a padding extra field in its local
 * header), so readers can map it in place, as PyTorch and our reader do. The
 * core streams a member's bytes straight into the sink, so the CRC-32 is
 * computed on the way through a sink tap and written after the data in a
 * data descriptor (general purpose bit 3), the layout torch.save writes;
 * Python's zipfile and miniz take sizes and CRCs from the central directory.
 * ZIP64 records appear where a size, an offset or the member count needs
 * them (or always at the end, as torch.save does, when asked).
 *
 * Why not libarchive: see doc/building.md.
 */
#ifndef AMN_KIT_ZIP_WRITER_H
#define AMN_KIT_ZIP_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/error.h"
#include "amn/io.h"

typedef struct zipw_options {
    uint32_t align;        /* member data alignment: a power of two <= 4096 (0: 1) */
    uint16_t pad_id;       /* extra-field id of the alignment padding */
    uint8_t pad_byte;      /* filler of the padding */
    bool pad_has_align;    /* padding starts with the u16 alignment (Android zipalign 0xD935) */
    bool zip64_end_always; /* ZIP64 end records even when nothing needs them */
} zipw_options;

typedef struct zipw zipw;

int zipw_new(amn_sink *sink, const zipw_options *o, zipw **out, amn_error *err);
/* Write the local header of a member of `size` bytes and start checksumming
 * what goes into the sink. The caller (or the core) then writes exactly
 * `size` bytes to the sink. */
int zipw_member_begin(zipw *z, const char *name, uint64_t size, amn_error *err);
/* Stop checksumming, check the size, write the data descriptor. */
int zipw_member_end(zipw *z, amn_error *err);
/* A whole member from memory. */
int zipw_add(zipw *z, const char *name, const void *data, size_t n, amn_error *err);
/* Central directory and end records (ends an open member first). */
int zipw_finish(zipw *z, amn_error *err);
/* Free; NULL is a no-op. Removes the sink tap. */
void zipw_free(zipw *z);

/* s[0..n) is well-formed UTF-8 (no overlong forms, surrogates or code
 * points past U+10FFFF). */
bool zip_utf8_valid(const char *s, size_t n);

/* Why `name` cannot be a member name of an archive that readers extract to
 * disk, or NULL when it can: empty, longer than max_len, not UTF-8, a control
 * character or NUL, a backslash, a drive letter ("C:"), an absolute path, an empty, "." or
 * ".." component. '/' between components is allowed (NumPy writes and reads
 * such keys; they stay inside the archive). */
const char *zip_name_problem(const char *name, size_t len, size_t max_len);

#endif
