/* zip_keep.c — deflated members a reader keeps: inflated onto the model's
 * heap or into scratch files, several at once (amn/kit/zip_reader.h).
 *
 * numpy.savez_compressed deflates every array, so an npz's members must be
 * inflated before a tensor can point at them. On the heap that took the
 * whole model's size in memory; large members go to scratch files instead
 * (amn_spill: disk, read back as an input file is). Inflating is the cost
 * of opening such a file (one core inflates 300-500 MB/s), so members are
 * inflated on several threads, each member whole on one: the model's
 * bookkeeping (heap buffers, adopted maps, the heap limit) is done before
 * and after, in member order, on the calling thread. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amn/checked.h"
#include "amn/kit/zip_reader.h"

#define KEEP_HEAP_ONE (1u << 20)  /* a larger member goes to a scratch file */
#define KEEP_HEAP_ALL (64u << 20) /* ... as does any once this much is held */
#define KEEP_WINDOW   (1u << 20)  /* what a spilled member inflates through */
#define KEEP_THREADS  4u

static int spill_piece(void *ctx, const uint8_t *piece, size_t n, amn_error *err) {
    return amn_spill_write(ctx, piece, n, err);
}

/* Inflate j into a scratch file named "archive/member" and map it. */
static int inflate_spilled(zip_keep_job *j, const amn_map *map, amn_error *err) {
    const char *path = amn_map_path(map);
    const size_t n = strlen(path) + 1 + j->e->name_len + 1;
    char *label = malloc(n);
    if (!label) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    snprintf(label, n, "%s/%s", path, j->e->name);
    amn_spill *sp;
    int rc = amn_spill_open(j->e->usize, label, &sp, err);
    free(label);
    if (rc != AMN_OK) return amn_error_prefix(err, "%s: entry '%s': ", path, j->e->name);
    uint8_t *win = malloc(KEEP_WINDOW);
    if (!win) {
        amn_spill_free(sp);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    const zip_window w = {win, KEEP_WINDOW, spill_piece, sp};
    rc = zip_inflate_each(j->e, amn_map_data(map) + j->off, &w, err);
    free(win);
    amn_map_drop(map, j->off, j->e->csize); /* read once: not kept resident */
    if (rc != AMN_OK) {
        amn_spill_free(sp);
        return rc;
    }
    return amn_spill_map(sp, &j->kept, err);
}

/* One job, on whichever thread takes it. A scratch file that cannot be made
 * (AMN_E_IO) leaves the job to the heap, after the threads. */
static void run_job(zip_keep_job *j, const amn_map *map) {
    if (j->rc != AMN_OK) return; /* refused when planned */
    if (j->spill) {
        j->rc = inflate_spilled(j, map, &j->err);
        j->fallback = j->rc == AMN_E_IO;
        return;
    }
    j->rc = zip_inflate_all(j->e, amn_map_data(map) + j->off, j->heap, &j->err);
}

typedef struct keep_pool {
    zip_keep_job *jobs;
    size_t n;
    const amn_map *map;
    atomic_size_t next;
} keep_pool;

static void *keep_worker(void *v) {
    keep_pool *p = v;
    for (size_t i; (i = atomic_fetch_add(&p->next, 1)) < p->n;) run_job(&p->jobs[i], p->map);
    return NULL;
}

static unsigned keep_threads(size_t jobs) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t t = cpus < 1 ? 1 : (size_t)cpus;
    if (t > KEEP_THREADS) t = KEEP_THREADS;
    return (unsigned)(t < jobs ? t : jobs);
}

/* A heap buffer for j, within the limit; else j's error. */
static void plan_heap(zip_keep_job *j, amn_model *m, const amn_limits *lim, uint64_t *heap_used) {
    uint64_t total;
    if (!amn_add_u64(*heap_used, j->e->usize, &total) || total > lim->max_alloc ||
        j->e->usize > SIZE_MAX) {
        j->rc = amn_error_set(&j->err, AMN_E_LIMIT,
                              "'%s': inflating %llu bytes exceeds the allocation limit", j->e->name,
                              (unsigned long long)j->e->usize);
        return;
    }
    if (!(j->heap = amn_model_alloc(m, j->e->usize ? (size_t)j->e->usize : 1))) {
        j->rc = amn_error_set(&j->err, AMN_E_NOMEM, "'%s': out of memory", j->e->name);
        return;
    }
    *heap_used = total;
}

int zip_inflate_keep_all(zip_keep_job *jobs, size_t n, const amn_map *map, amn_model *m,
                         const amn_limits *lim, uint64_t *heap_used, amn_error *err) {
    /* Plan, in order: which members go to the heap, and their buffers. */
    size_t stop = n; /* the first job refused: later ones are not inflated */
    for (size_t i = 0; i < n; i++) {
        zip_keep_job *j = &jobs[i];
        j->out = NULL, j->heap = NULL, j->kept = NULL, j->rc = AMN_OK, j->fallback = false;
        j->err.code = 0, j->err.msg[0] = '\0';
        uint64_t total;
        j->spill =
            i < stop && (j->e->usize > KEEP_HEAP_ONE ||
                         !amn_add_u64(*heap_used, j->e->usize, &total) || total > KEEP_HEAP_ALL);
        if (i < stop && !j->spill) plan_heap(j, m, lim, heap_used);
        if (j->rc != AMN_OK && stop == n) stop = i;
    }
    /* Inflate, on threads. */
    keep_pool p = {jobs, stop, map, 0};
    pthread_t tid[KEEP_THREADS];
    unsigned started = 0;
    for (unsigned t = keep_threads(stop); started + 1 < t; started++)
        if (pthread_create(&tid[started], NULL, keep_worker, &p) != 0) break;
    keep_worker(&p); /* the calling thread too; alone where none started */
    for (unsigned t = 0; t < started; t++) pthread_join(tid[t], NULL);
    /* Adopt, fall back, and report, in order. */
    int rc = AMN_OK;
    for (size_t i = 0; i < n; i++) {
        zip_keep_job *j = &jobs[i];
        if (j->kept) {
            j->out = amn_map_data(j->kept);
            const int a = amn_model_adopt(m, j->kept, amn_map_release, err); /* frees on error */
            j->kept = NULL;
            if (a != AMN_OK && rc == AMN_OK) rc = a;
            continue;
        }
        if (rc != AMN_OK || i >= stop) continue;
        if (j->fallback) { /* no scratch file: the heap, as a small member */
            j->rc = AMN_OK;
            plan_heap(j, m, lim, heap_used);
            if (j->rc == AMN_OK)
                j->rc = zip_inflate_all(j->e, amn_map_data(map) + j->off, j->heap, &j->err);
        }
        if (j->rc != AMN_OK) {
            rc = j->rc;
            if (err) *err = j->err;
            continue;
        }
        j->out = j->heap;
    }
    if (rc == AMN_OK && stop < n) { /* refused when planned, nothing before it failed */
        rc = jobs[stop].rc;
        if (err) *err = jobs[stop].err;
    }
    return rc;
}

int zip_inflate_keep(const zip_entry *e, const amn_map *map, uint64_t off, amn_model *m,
                     const amn_limits *lim, uint64_t *heap_used, const uint8_t **out,
                     amn_error *err) {
    zip_keep_job j = {.e = e, .off = off};
    const int rc = zip_inflate_keep_all(&j, 1, map, m, lim, heap_used, err);
    *out = j.out;
    return rc;
}
