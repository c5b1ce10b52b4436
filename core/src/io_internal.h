/* Private to core: I/O shortcuts the conversion pipeline uses. */
#ifndef AMN_IO_INTERNAL_H
#define AMN_IO_INTERNAL_H

#include <stdint.h>

#include "amn/io.h"
#include "amn/model.h"

/* Fault in the pages of [p, p+n) of a read-only mapping in one call, so that
 * a write() from it does not fault them one by one; a hint, ignored where the
 * kernel lacks MADV_POPULATE_READ. */
void amni_prefault(const void *p, size_t n);

/* amn_map_open without the read-ahead hint over the whole file: for scans,
 * which read the directory and the pickle of a large file and nothing else
 * (MADV_WILLNEED alone costs milliseconds on a 300 MB file). */
int amni_map_open_lazy(const char *path, amn_map **out, amn_error *err);

/* The mapping adopted by m that holds [p, p+n), or NULL. */
const amn_map *amni_model_map_for(const amn_model *m, const void *p, uint64_t n);

#endif
