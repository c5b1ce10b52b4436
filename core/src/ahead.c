/* Mapping an input's pages ahead of the workers.
 *
 * A conversion reads its sources in the writer's order. From a disk whose
 * pages are not cached, a thread that maps a tensor's pages before the
 * workers convert it waits for the disk while no one converts, then
 * converts while the disk rests (the kernel reads ahead only a few MiB past
 * a fault). Here a thread of its own maps the ranges in the order they
 * will be read, a step at a time, so the disk reads the next tensors while
 * the workers convert this one; the workers then find their pages mapped
 * (no fault per page inside the kernels). With the pages cached it costs
 * the same page-table work the workers would have done, on a thread that
 * runs beside them. It stays within a window of the reader so that an
 * input larger than memory does not push out pages before they are read. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ahead_internal.h"
#include "io_internal.h"

#define AHEAD_STEP (2u << 20) /* bytes per populate call: a 2 MiB folio, readahead-sized */

struct amni_ahead {
    pthread_t tid;
    amni_span *spans;
    uint64_t *start; /* spans' offsets in the sequence of all their bytes */
    size_t n;
    uint64_t window;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t reader; /* where the reader's span starts, in that sequence */
    bool quit;
};

/* Wait until mapping up to `end` stays within the window; false: stop. */
static bool may_map(amni_ahead *a, uint64_t end) {
    pthread_mutex_lock(&a->mu);
    while (!a->quit && end > a->reader + a->window) pthread_cond_wait(&a->cv, &a->mu);
    const bool go = !a->quit;
    pthread_mutex_unlock(&a->mu);
    return go;
}

static void *ahead_main(void *arg) {
    amni_ahead *a = arg;
    for (size_t i = 0; i < a->n; i++) {
        const amni_span *s = &a->spans[i];
        for (uint64_t off = 0; off < s->n; off += AHEAD_STEP) {
            const uint64_t k = s->n - off < AHEAD_STEP ? s->n - off : AHEAD_STEP;
            if (!may_map(a, a->start[i] + off + k)) return NULL;
            /* EFAULT: the file shrank; the reader reports it */
            if (amni_prefault(s->p + off, (size_t)k) == EINVAL) return NULL;
        }
    }
    return NULL;
}

static void ahead_free(amni_ahead *a) {
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a->spans);
    free(a->start);
    free(a);
}

int amni_ahead_start(const amni_span *spans, size_t n, uint64_t window, amni_ahead **out,
                     amn_error *err) {
    *out = NULL;
    if (n == 0) return AMN_E_UNSUPPORTED;
    amni_ahead *a = calloc(1, sizeof *a);
    if (a) a->spans = malloc(n * sizeof *a->spans), a->start = malloc(n * sizeof *a->start);
    if (!a || !a->spans || !a->start) {
        if (a) free(a->spans), free(a->start);
        free(a);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    memcpy(a->spans, spans, n * sizeof *spans);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) a->start[i] = at, at += spans[i].n; /* mapped sizes: no wrap */
    a->n = n;
    a->window = window;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    sigset_t old; /* asynchronous signals stay with the program's own threads */
    amni_block_signals(&old);
    const int e = pthread_create(&a->tid, NULL, ahead_main, a);
    amni_restore_signals(&old);
    if (e != 0) {
        ahead_free(a);
        return AMN_E_UNSUPPORTED;
    }
    *out = a;
    return AMN_OK;
}

void amni_ahead_at(amni_ahead *a, size_t i) {
    if (!a || i >= a->n) return;
    pthread_mutex_lock(&a->mu);
    a->reader = a->start[i];
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

void amni_ahead_stop(amni_ahead *a) {
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    a->quit = true;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->tid, NULL);
    ahead_free(a);
}
