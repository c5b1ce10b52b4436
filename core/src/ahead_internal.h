/* Private to core: mapping an input's pages ahead of the threads that read
 * them (see ahead.c). */
#ifndef AMN_AHEAD_INTERNAL_H
#define AMN_AHEAD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "amn/error.h"

/* A range of a read-only file mapping; n == 0: nothing to map. */
typedef struct amni_span {
    const uint8_t *p;
    uint64_t n;
} amni_span;

typedef struct amni_ahead amni_ahead;

/* Start a thread that maps spans[0..n) in order (MADV_POPULATE_READ, a
 * step at a time), never more than `window` bytes past the start of the
 * span the reader is in. The spans are copied. AMN_E_NOMEM, or
 * AMN_E_UNSUPPORTED when no thread could be made or the kernel cannot
 * populate: then *out is NULL and the reader faults its own pages. */
int amni_ahead_start(const amni_span *spans, size_t n, uint64_t window, amni_ahead **out,
                     amn_error *err);
/* The reader begins span i (spans are begun in order). */
void amni_ahead_at(amni_ahead *a, size_t i);
/* Stop the thread, wait for it and free a; NULL is a no-op. */
void amni_ahead_stop(amni_ahead *a);

#endif
