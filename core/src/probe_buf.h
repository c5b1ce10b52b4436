/* Zeroed scratch buffers for probing, faulted in with one system call.
 *
 * Process start-up is dominated by page faults on virtual machines where a
 * fault costs 10-25 us: a calloc'd 128 KiB head-and-tail buffer is 32 faults,
 * a third of `amn inspect`'s. An anonymous mapping with MAP_POPULATE brings
 * the same pages in at once, for a few microseconds. */
#ifndef AMN_PROBE_BUF_H
#define AMN_PROBE_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "amn/error.h"

typedef struct amni_probe_buf {
    uint8_t *data;
    size_t size;   /* bytes asked for, all zero */
    size_t mapped; /* bytes mapped, 0 when data came from calloc */
} amni_probe_buf;

int amni_probe_buf_alloc(amni_probe_buf *b, size_t size, amn_error *err);
void amni_probe_buf_free(amni_probe_buf *b);

#endif
