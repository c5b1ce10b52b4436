/* Private to core: I/O shortcuts the conversion pipeline uses. */
#ifndef AMN_IO_INTERNAL_H
#define AMN_IO_INTERNAL_H

#include <stdint.h>

#include "amn/io.h"
#include "amn/model.h"

int amni_map_fd(const amn_map *m);

/* Append bytes [off, off+n) of file fd to the sink inside the kernel
 * (copy_file_range). AMN_E_UNSUPPORTED, with nothing written, when the file
 * systems cannot; the caller then writes the bytes itself. */
int amni_sink_copy_range(amn_sink *s, int fd, uint64_t off, uint64_t n, amn_error *err);

/* The mapping adopted by m that holds [p, p+n), or NULL. */
const amn_map *amni_model_map_for(const amn_model *m, const void *p, uint64_t n);

#endif
