/* The conversion pipeline: plan -> writer header -> each tensor streamed in
 * chunks (dequantized by its scheme on worker threads, cast, or copied
 * straight from the mapping) -> writer trailer -> atomic rename. */
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "amn/byteorder.h"
#include "amn/checked.h"
#include "amn/convert.h"
#include "ahead_internal.h"
#include "archive_internal.h"
#include "abi_internal.h"
#include "input_internal.h"
#include "io_internal.h"
#include "plan_internal.h"
#include "split_internal.h"

#define CHUNK_BYTES (1u << 20) /* output bytes per piece or per worker's slice: cache-sized */
#define MAX_THREADS 64

typedef struct out_entry {
    size_t tensor;      /* source tensor (passthrough) */
    int64_t group;      /* or group index, -1 for passthrough */
    amn_dtype dtype;    /* as written */
    amn_out_tensor out; /* what the writer sees */
    int64_t enc;        /* encoded: index into the encoded sources, else -1 */
    size_t enc_out;     /* which of that source's outputs */
    bool chained;       /* enc indexes the chained encoder's sources (encode_then) */
    uint64_t unit_bytes;
} out_entry;

/* ---- streaming: workers fill chunk k+1 while the main thread writes k ----
 *
 * A tensor's output is cut into units (rows of a dequantized group, elements
 * of a cast); a chunk of units is split among `threads` workers, each filling
 * a disjoint slice, so the bytes never depend on the thread count. Two chunk
 * buffers let production and the write system calls overlap. */

typedef int (*produce_fn)(const void *ctx, uint64_t unit0, uint64_t n, uint8_t *dst, double *acc,
                          amn_error *err);

/* Where a piece produced in a thread's own buffer goes: written in place,
 * unit u at base + u * unit_bytes of the sink (stream_in_place). */
typedef struct place {
    amn_sink *sink;
    uint64_t base, unit_bytes;
} place;

typedef struct work {
    produce_fn fn;
    const void *ctx;
    uint64_t unit0, n;
    uint8_t *dst;       /* the units' bytes go here, */
    const place *where; /* or, when dst is NULL, there */
    uint64_t digest;    /* there: the sink's tap's digest of the piece, folded in order */
    double acc;         /* what the producer reports (encode error), summed in order */
    int rc;
    amn_error err;
} work;

/* A thread of the pool (or the calling thread, which has the last one) and
 * the buffer it produces in-place pieces in: its own, so that no thread
 * waits for another's bytes to be written. */
typedef struct worker {
    struct pool *p;
    uint8_t *buf;
    size_t cap;
} worker;

/* Workers live for a whole conversion: creating threads per chunk cost as
 * much as writing the chunk. A batch is handed over under a mutex; each
 * worker takes items until none is left. */
typedef struct pool {
    pthread_t tid[MAX_THREADS];
    worker self[MAX_THREADS + 1]; /* [MAX_THREADS]: the calling thread */
    unsigned n_threads;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    work *items;
    unsigned n_items, next, pending;
    uint64_t bytes_done; /* of the in-place items handed over: those finished */
    bool quit;
    const amn_model *model; /* the input, whose lent mappings a finished batch drops */
} pool;

static int produce_in_place(work *w, worker *me) {
    const place *at = w->where;
    const size_t n = (size_t)(w->n * at->unit_bytes); /* at most a piece: see stream_in_place */
    if (me->cap < n) {
        free(me->buf);
        me->cap = 0;
        if (!(me->buf = aligned_alloc(4096, (n + 4095) & ~(size_t)4095)))
            return amn_error_set(&w->err, AMN_E_NOMEM, "out of memory");
        me->cap = n;
    }
    int rc = w->fn(w->ctx, w->unit0, w->n, me->buf, &w->acc, &w->err);
    if (rc) return rc;
    w->digest =
        amni_sink_digest(at->sink, me->buf, n); /* while the piece is in this core's cache */
    return amni_sink_write_at(at->sink, at->base + w->unit0 * at->unit_bytes, me->buf, n, &w->err);
}

static void run_item(work *w, worker *me) {
    w->acc = 0;
    w->rc =
        w->dst ? w->fn(w->ctx, w->unit0, w->n, w->dst, &w->acc, &w->err) : produce_in_place(w, me);
}

/* Under p->mu: one item finished. */
static void item_done(pool *p, const work *w) {
    if (w->where) p->bytes_done += w->n * w->where->unit_bytes;
    if (--p->pending == 0) pthread_cond_signal(&p->cv_done);
}

static void *pool_main(void *arg) {
    worker *me = arg;
    pool *p = me->p;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->next >= p->n_items) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->quit) break;
        work *w = &p->items[p->next++];
        pthread_mutex_unlock(&p->mu);
        run_item(w, me);
        pthread_mutex_lock(&p->mu);
        item_done(p, w);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Start up to `threads` workers; with none (threads <= 1 or no thread could
 * be made), batches run on the calling thread. Workers start with
 * asynchronous signals blocked, so that the embedding program's handlers
 * (amn's removes temporary outputs) run on its own threads. */
static void pool_init(pool *p, unsigned threads) {
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    sigset_t old;
    amni_block_signals(&old);
    for (unsigned k = 0; k <= MAX_THREADS; k++) p->self[k].p = p;
    for (unsigned k = 0; threads > 1 && k < threads; k++) {
        if (pthread_create(&p->tid[k], NULL, pool_main, &p->self[k]) != 0) break;
        p->n_threads++;
    }
    amni_restore_signals(&old);
}

/* The caller's progress callback and what it is told. */
typedef struct progress {
    amn_progress_fn fn;
    void *user;
    amn_progress info;
} progress;

static void report(progress *pr, const amn_sink *sink) {
    if (!pr->fn) return;
    pr->info.bytes_done = amn_sink_tell(sink);
    pr->fn(pr->user, &pr->info);
}

static void pool_destroy(pool *p) {
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (unsigned k = 0; k < p->n_threads; k++) pthread_join(p->tid[k], NULL);
    for (unsigned k = 0; k <= MAX_THREADS; k++) free(p->self[k].buf);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    pthread_mutex_destroy(&p->mu);
}

typedef struct batch {
    work w[MAX_THREADS];
    unsigned n;
} batch;

/* Split units [unit0, unit0+n) into one slice per worker and hand them to the
 * pool (or run them here when async is false or there are no workers). */
static void batch_start(pool *p, batch *b, produce_fn fn, const void *ctx, uint64_t unit0,
                        uint64_t n, uint64_t unit_bytes, uint64_t quantum, uint8_t *dst,
                        bool async) {
    uint64_t counts[MAX_THREADS];
    unsigned parts = amni_split_units(n, async && p->n_threads ? p->n_threads : 1, quantum, counts);
    uint64_t at = unit0;
    b->n = parts;
    for (unsigned k = 0; k < parts; k++) {
        b->w[k] = (work){.fn = fn,
                         .ctx = ctx,
                         .unit0 = at,
                         .n = counts[k],
                         .dst = dst + (at - unit0) * unit_bytes};
        at += counts[k];
    }
    if (!async || !p->n_threads) {
        for (unsigned k = 0; k < parts; k++) run_item(&b->w[k], &p->self[MAX_THREADS]);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->items = b->w;
    p->n_items = parts;
    p->next = 0;
    p->pending = parts;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
}

static int batch_join(pool *p, batch *b, double *acc, amn_error *err) {
    pthread_mutex_lock(&p->mu);
    if (p->items == b->w)
        while (p->pending) pthread_cond_wait(&p->cv_done, &p->mu);
    p->items = NULL;
    p->n_items = p->next = 0;
    pthread_mutex_unlock(&p->mu);
    int rc = AMN_OK;
    for (unsigned k = 0; k < b->n; k++) {
        if (acc) *acc += b->w[k].acc;
        if (b->w[k].rc && !rc) {
            rc = b->w[k].rc;
            if (err) *err = b->w[k].err;
        }
    }
    b->n = 0;
    return rc;
}

/* ---- in place: every thread produces a piece and writes it itself ----
 *
 * With a writer thread, the writer's copy into the page cache is the one
 * step no other thread can share, and on two cores it waited for workers
 * that had lost their core to it (a Skylake-SP, the F32 -> BF16 cast of
 * 256 MiB: 37 ms of write() and 15-30 ms of waiting a run). Written in
 * place, each piece goes out from the buffer of the thread that produced
 * it, at its own offset, while the other threads produce; the calling
 * thread takes pieces too. Pieces have a fixed number of units, so the
 * bytes (and the order in which encode errors are summed) do not depend on
 * the thread count. A tap that folds (a ZIP member's CRC-32) gets each
 * piece's digest, taken by the thread that made the piece, folded in order
 * by the calling thread; one that does not needs the bytes in order and
 * keeps the writer (stream). */

#define PIECES_PER_HANDOVER MAX_THREADS /* a batch's items, */
/* and their output bytes: the input read through the mapping is unmapped
 * after each batch (amni_model_retire_lent), so this bounds what of it stays
 * mapped (a 256 MiB tensor cast to BF16 kept 131 MiB with 64 pieces of
 * 1 MiB, 43 MiB with 16). */
#define BATCH_BYTES (16u << 20)

/* Run the batch's items on the calling thread too, then wait for those the
 * workers took; report progress after each piece it wrote itself. */
static int batch_help_join(pool *p, batch *b, uint64_t base, progress *pr, double *acc,
                           amn_error *err) {
    pthread_mutex_lock(&p->mu);
    while (p->next < p->n_items) {
        work *w = &p->items[p->next++];
        pthread_mutex_unlock(&p->mu);
        run_item(w, &p->self[MAX_THREADS]);
        pthread_mutex_lock(&p->mu);
        item_done(p, w);
        const uint64_t done = p->bytes_done;
        pthread_mutex_unlock(&p->mu);
        if (pr->fn) {
            pr->info.bytes_done = base + done;
            pr->fn(pr->user, &pr->info);
        }
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return batch_join(p, b, acc, err);
}

/* Units per in-place piece: a piece of CHUNK_BYTES, but at least
 * MIN_PIECES pieces per tensor (each of MIN_PIECE_BYTES or more). A piece
 * measures output bytes, and a low-bit quantizer spends far more per output
 * byte than a cast: at about 2 bits a weight a 1 MiB piece is 4 M weights,
 * so a 2048 x 2048 tensor of IQ2_XXS came in two pieces of 1985 and 63 rows
 * and one thread did nearly all of it (two threads kept 1.6 cores busy).
 * The count does not depend on the thread count, so neither do the pieces,
 * the bytes, or the order in which encode errors are summed. A piece never
 * goes below the scheme's row quantum. */
#define MIN_PIECES      16
#define MIN_PIECE_BYTES (32u << 10)

static uint64_t piece_units(uint64_t units, uint64_t unit_bytes, uint64_t quantum) {
    uint64_t fit = CHUNK_BYTES / unit_bytes;
    uint64_t want = units / MIN_PIECES + (units % MIN_PIECES != 0);
    const uint64_t floor_units = MIN_PIECE_BYTES / unit_bytes;
    if (want < floor_units) want = floor_units;
    if (want < quantum) want = quantum;
    return want < fit ? want : fit;
}

static int stream_in_place(pool *pl, produce_fn fn, const void *ctx, uint64_t units,
                           uint64_t unit_bytes, uint64_t quantum, amn_sink *sink, progress *pr,
                           double *acc, amn_error *err) {
    const uint64_t base = amn_sink_tell(sink);
    uint64_t total;
    if (!amn_mul_u64(units, unit_bytes, &total) || total > SIZE_MAX)
        return amn_error_set(err, AMN_E_LIMIT, "output too large");
    place where = {.sink = sink, .unit_bytes = unit_bytes};
    int rc = amni_sink_claim(sink, total, &where.base, err);
    if (rc) return rc;
    const uint64_t per = amni_round_units(piece_units(units, unit_bytes, quantum), quantum, 1);
    batch b;
    for (uint64_t u = 0; u < units && !rc;) {
        unsigned k = 0;
        for (uint64_t bytes = 0; k < PIECES_PER_HANDOVER && u < units && bytes < BATCH_BYTES; k++) {
            const uint64_t n = units - u < per ? units - u : per;
            b.w[k] = (work){.fn = fn, .ctx = ctx, .unit0 = u, .n = n, .where = &where};
            u += n;
            bytes += n * unit_bytes;
        }
        b.n = k;
        pthread_mutex_lock(&pl->mu);
        if (b.w[0].unit0 == 0) pl->bytes_done = 0; /* the tensor's first pieces */
        pl->items = b.w;
        pl->n_items = k;
        pl->next = 0;
        pl->pending = k;
        pthread_cond_broadcast(&pl->cv_work);
        pthread_mutex_unlock(&pl->mu);
        amni_model_drop_retired(pl->model); /* the last batch's input, while workers start */
        rc = batch_help_join(pl, &b, base, pr, acc, err);
        amni_model_retire_lent(pl->model); /* no piece reads the input now */
        for (unsigned j = 0; !rc && j < k; j++)
            amni_sink_fold(sink, b.w[j].digest, b.w[j].n * unit_bytes);
    }
    amni_model_drop_retired(pl->model);
    if (!rc) report(pr, sink);
    return rc;
}

/* Where a tensor's bytes go: the sink, or the writer's write_data when it
 * stores them otherwise (amn_writer.filters). */
typedef struct data_out {
    amn_sink *sink;
    const amn_writer *w; /* non-NULL: w->write_data takes the bytes */
    void *state;
    size_t index;
} data_out;

static int out_write(const data_out *o, const void *p, size_t n, amn_error *err) {
    return o->w ? o->w->write_data(o->state, o->index, p, n, err)
                : amn_sink_write(o->sink, p, n, err);
}

/* Produce `units` units of `unit_bytes` each through fn and write them: in
 * place when there are workers and the sink has no tap or one that folds
 * (and the writer takes the bytes as they are), else in order by this
 * thread while the workers fill the next round. bufs are two buffers of
 * buf_size bytes. Rounds and the workers' slices start at multiples of
 * `quantum` units (a scheme's row_quantum). */
static int stream(pool *pl, produce_fn fn, const void *ctx, uint64_t units, uint64_t unit_bytes,
                  uint64_t quantum, uint8_t *bufs[2], size_t buf_size, const data_out *out,
                  progress *pr, double *acc, amn_error *err) {
    amn_sink *sink = out->sink;
    if (units == 0) return AMN_OK;
    /* buffers hold at least one unit (sized by the caller) */
    /* Small outputs are not worth the hand-over. */
    const bool async = units * unit_bytes >= (256u << 10);
    if (async && pl->n_threads && !out->w && amni_sink_in_place_ok(sink))
        return stream_in_place(pl, fn, ctx, units, unit_bytes, quantum, sink, pr, acc, err);
    const uint64_t per = amni_round_units(buf_size / unit_bytes, quantum,
                                          async && pl->n_threads ? pl->n_threads : 1);
    batch b[2];
    uint64_t next = 0;
    int k = 0, rc;
    uint64_t n0 = units < per ? units : per;
    batch_start(pl, &b[0], fn, ctx, 0, n0, unit_bytes, quantum, bufs[0], async);
    next = n0;
    uint64_t cur_n = n0;
    for (;;) {
        rc = batch_join(pl, &b[k], acc, err);
        if (rc) return rc;
        amni_model_retire_lent(pl->model); /* none reads the input until the next starts */
        uint64_t nn = 0;
        if (next < units) {
            nn = units - next < per ? units - next : per;
            batch_start(pl, &b[!k], fn, ctx, next, nn, unit_bytes, quantum, bufs[!k], async);
        }
        amni_model_drop_retired(pl->model); /* while the workers fill the next round */
        rc = out_write(out, bufs[k], cur_n * unit_bytes, err);
        if (rc) {
            if (nn) batch_join(pl, &b[!k], NULL, NULL);
            return rc;
        }
        report(pr, sink);
        if (!nn) return AMN_OK;
        next += nn;
        cur_n = nn;
        k = !k;
    }
}

typedef struct group_ctx {
    const amn_model *m;
    const group *g;
    amn_dtype out;
} group_ctx;

static int produce_group(const void *vctx, uint64_t row0, uint64_t n, uint8_t *dst, double *acc,
                         amn_error *err) {
    (void)acc;
    const group_ctx *c = vctx;
    /* Schemes read scales and other short ranges through the mapping. */
    int rc = amni_model_check_inputs(c->m, err);
    if (rc) return rc;
    return c->g->scheme->dequantize(c->m, c->g->spec.plan, row0, n, c->out, dst, err);
}

typedef struct cast_ctx {
    const amn_model *m;
    const amn_tensor *t;
    amn_dtype to;
    size_t ss;
} cast_ctx;

/* Elements [e0, e0+n) of a tensor as `to`: gathered when it is a view,
 * converted when the dtype changes. */
static int cast_error(const cast_ctx *c, amn_error *err) {
    return amn_error_set(err, AMN_E_UNSUPPORTED, "tensor %s: cannot cast %s to %s", c->t->name,
                         amn_dtype_name(c->t->dtype), amn_dtype_name(c->to));
}

/* Source bytes converted per step: the read into this worker's buffer
 * (pread, where that beats the mapping: input.c) and the conversion of it
 * stay in the core's L2 cache. */
#define CAST_PIECE (128u << 10)

/* Elements [e0, e0+n) of a tensor as `to`: gathered when it is a view,
 * converted when the dtype changes. */
static int produce_cast(const void *vctx, uint64_t e0, uint64_t n, uint8_t *dst, double *acc,
                        amn_error *err) {
    (void)acc;
    const cast_ctx *c = vctx;
    const amn_tensor *t = c->t;
    int rc = amni_model_check_tensor(c->m, t, err); /* views are read through the mapping */
    if (rc) return rc;
    /* A plain tensor is fetched (the way input.c finds cheapest, and no
     * more of the input left mapped than a piece), also when it is copied. */
    if (amn_tensor_is_plain(t)) {
        const uint64_t per = CAST_PIECE / c->ss, ds = amn_dtype_size(c->to);
        for (uint64_t done = 0; done < n;) {
            const uint64_t k = n - done < per ? n - done : per;
            const void *from = amn_model_fetch(c->m, (const uint8_t *)t->data + (e0 + done) * c->ss,
                                               (size_t)(k * c->ss), 0, err);
            if (!from) return err ? err->code : AMN_E_IO;
            if (c->to == t->dtype)
                memcpy(dst + done * ds, from, (size_t)(k * ds));
            else if (amn_convert_elems(t->dtype, from, c->to, dst + done * ds, (size_t)k))
                return cast_error(c, err);
            done += k;
        }
        return AMN_OK;
    }
    if (c->to == t->dtype) return amn_tensor_read(t, e0 * c->ss, dst, n * c->ss, err);
    void *scratch = malloc(n * c->ss);
    if (!scratch) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    rc = amn_tensor_read(t, e0 * c->ss, scratch, n * c->ss, err);
    if (!rc && amn_convert_elems(t->dtype, scratch, c->to, dst, (size_t)n)) rc = cast_error(c, err);
    free(scratch);
    return rc;
}

static unsigned default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > 4 ? 4 : (unsigned)n;
}

static int write_group(pool *pl, const amn_model *m, const group *g, amn_dtype out,
                       uint8_t *bufs[2], size_t buf_size, const data_out *to, progress *pr,
                       amn_error *err) {
    uint64_t numel = 1;
    for (uint32_t d = 0; d < g->spec.ndim; d++) numel *= g->spec.shape[d]; /* checked at claim */
    const group_ctx c = {m, g, out};
    return stream(pl, produce_group, &c, numel / g->spec.row_elems,
                  g->spec.row_elems * amn_dtype_size(out), g->spec.row_quantum, bufs, buf_size, to,
                  pr, NULL, err);
}

/* Plain same-dtype tensors pass through a PASS_CHUNK at a time, each chunk
 * by the way input.c finds cheapest for the input (the mapping faulted in by
 * one madvise, pread, or splice). */
#define PASS_CHUNK (2u << 20)
static int write_plain(pool *pl, const amn_model *m, const amn_tensor *t, amn_dtype to,
                       uint8_t *bufs[2], size_t buf_size, const data_out *out, progress *pr,
                       amn_error *err) {
    amn_sink *sink = out->sink;
    if (to == t->dtype && amn_tensor_is_plain(t) && !out->w) {
        const uint8_t *p = t->data;
        for (uint64_t left = t->nbytes; left;) {
            const size_t n = left < PASS_CHUNK ? (size_t)left : PASS_CHUNK;
            int rc = amni_input_pass(m, p, n, sink, err);
            if (rc) return rc;
            report(pr, sink);
            p += n;
            left -= n;
        }
        return AMN_OK;
    }
    const size_t ss = t->dtype == AMN_DTYPE_BLOCK ? 1 : amn_dtype_size(t->dtype);
    const cast_ctx c = {m, t, to, ss};
    return stream(pl, produce_cast, &c, t->nbytes / ss, to == t->dtype ? ss : amn_dtype_size(to), 1,
                  bufs, buf_size, out, pr, NULL, err);
}

/* ---- encoding: logical tensors read as F32 for an encoder ---- */

typedef struct values_ctx {
    const amn_model *m;
    const group *g;      /* a dequantized weight, or NULL */
    const amn_tensor *t; /* a stored tensor */
} values_ctx;

static int read_le_values(const values_ctx *c, uint64_t e0, uint64_t n, float *dst, amn_error *err);

/* Encoders take host floats; tensors and kernels give little-endian bytes. */
static int read_values(const void *vctx, uint64_t e0, uint64_t n, float *dst, amn_error *err) {
    const int rc = read_le_values(vctx, e0, n, dst, err);
    if (!rc) amn_le_to_host_n(dst, 4, (size_t)n);
    return rc;
}

static int read_le_values(const values_ctx *c, uint64_t e0, uint64_t n, float *dst,
                          amn_error *err) {
    if (n == 0) return AMN_OK;
    int rc = c->g ? amni_model_check_inputs(c->m, err) : amni_model_check_tensor(c->m, c->t, err);
    if (rc) return rc;
    if (c->g) {
        /* Whole rows through the scheme, then the asked-for span. */
        const uint64_t re = c->g->spec.row_elems, r0 = e0 / re, r1 = (e0 + n + re - 1) / re;
        if ((r1 - r0) * re > SIZE_MAX / 4) return amn_error_set(err, AMN_E_LIMIT, "rows too large");
        float *rows = malloc((size_t)((r1 - r0) * re) * 4);
        if (!rows) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        rc = c->g->scheme->dequantize(c->m, c->g->spec.plan, r0, r1 - r0, AMN_DTYPE_F32, rows, err);
        if (!rc) memcpy(dst, rows + (e0 - r0 * re), (size_t)n * 4);
        free(rows);
        return rc;
    }
    const amn_tensor *t = c->t;
    const size_t ss = amn_dtype_size(t->dtype);
    if (!amn_dtype_is_float(t->dtype) || t->dtype == AMN_DTYPE_BLOCK)
        return amn_error_set(err, AMN_E_INVALID, "tensor %s: %s values cannot be encoded", t->name,
                             amn_dtype_name(t->dtype));
    if (t->dtype == AMN_DTYPE_F32) return amn_tensor_read(t, e0 * 4, dst, n * 4, err);
    const void *from = (const uint8_t *)t->data + e0 * ss;
    void *scratch = NULL;
    if (!amn_tensor_is_plain(t)) {
        if (!(scratch = malloc((size_t)n * ss)))
            return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        rc = amn_tensor_read(t, e0 * ss, scratch, n * ss, err);
        if (rc) {
            free(scratch);
            return rc;
        }
        from = scratch;
    }
    rc = amn_convert_elems(t->dtype, from, AMN_DTYPE_F32, dst, (size_t)n)
             ? amn_error_set(err, AMN_E_UNSUPPORTED, "tensor %s: cannot read %s as F32", t->name,
                             amn_dtype_name(t->dtype))
             : AMN_OK;
    free(scratch);
    return rc;
}

/* amn_values.read_as: straight from the stored dtype where amn_convert_elems
 * gives what read() then amn_store_f32 would (a float dtype other than
 * `to`: the value widened exactly, then rounded once); else through F32. */
static int read_values_as(const void *vctx, uint64_t e0, uint64_t n, amn_dtype to, void *dst,
                          amn_error *err) {
    const values_ctx *c = vctx;
    if (to != AMN_DTYPE_F32 && to != AMN_DTYPE_F16 && to != AMN_DTYPE_BF16)
        return amn_error_set(err, AMN_E_INVALID, "read_as: values cannot be stored as %s",
                             amn_dtype_name(to));
    const amn_tensor *t = c->g ? NULL : c->t;
    const bool direct =
        t && amn_tensor_is_plain(t) && t->dtype != to &&
        (t->dtype == AMN_DTYPE_F32 || t->dtype == AMN_DTYPE_F16 || t->dtype == AMN_DTYPE_BF16);
    if (direct) {
        int rc = amni_model_check_tensor(c->m, t, err);
        if (rc) return rc;
        const uint8_t *from = (const uint8_t *)t->data + e0 * amn_dtype_size(t->dtype);
        amn_convert_elems(t->dtype, from, to, dst, (size_t)n);
        return AMN_OK;
    }
    if (n > SIZE_MAX / 4) return amn_error_set(err, AMN_E_LIMIT, "read_as: too many values");
    float *tmp = malloc(n ? (size_t)n * 4 : 1);
    if (!tmp) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = read_values(vctx, e0, n, tmp, err);
    if (!rc) amn_store_f32(tmp, to, dst, (size_t)n);
    free(tmp);
    return rc;
}

struct enc_run;

/* A chained encoder's source: output `out` of the upstream encoder's source
 * `src`, read back through its fill() in the upstream's output dtype. */
typedef struct chain_ctx {
    struct enc_run *up;
    size_t src, out;
    amn_dtype dtype;
    uint64_t unit_elems, unit_bytes;
} chain_ctx;

typedef struct enc_source {
    void *state; /* the encoder's tensor state */
    values_ctx vc;
    chain_ctx cc; /* cc.up set: a chained source */
    amn_values values;
    bool stats_done;
} enc_source;

typedef struct enc_run {
    const amn_encoder *e;
    void *ms;
    enc_source *src;
    amn_encode_source *srcs; /* what begin() saw: valid until end() */
    size_t n_src;
    bool upstream; /* another encoder reads its outputs: not counted in the stats */
} enc_run;

/* Elements [e0, e0 + n) of a chained source: the upstream's whole units
 * covering them, filled and widened to F32, as host floats (read_values). */
static int read_upstream(const void *vctx, uint64_t e0, uint64_t n, float *dst, amn_error *err) {
    const chain_ctx *c = vctx;
    if (n == 0) return AMN_OK;
    const uint64_t ue = c->unit_elems, u0 = e0 / ue, u1 = (e0 + n - 1) / ue + 1;
    if ((u1 - u0) > SIZE_MAX / c->unit_bytes)
        return amn_error_set(err, AMN_E_LIMIT, "units too large");
    uint8_t *buf = malloc((size_t)((u1 - u0) * c->unit_bytes));
    if (!buf) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    const enc_source *us = &c->up->src[c->src];
    int rc = c->up->e->fill(us->state, c->out, u0, u1 - u0, &us->values, buf, NULL, err);
    if (!rc && amn_convert_elems(c->dtype, buf + (e0 - u0 * ue) * amn_dtype_size(c->dtype),
                                 AMN_DTYPE_F32, dst, (size_t)n))
        rc = amn_error_set(err, AMN_E_UNSUPPORTED, "cannot read %s as F32",
                           amn_dtype_name(c->dtype));
    if (!rc) amn_le_to_host_n(dst, 4, (size_t)n); /* fill() wrote little-endian bytes */
    free(buf);
    return rc;
}

/* A chained source's values: an upstream output in a plain float dtype. */
static int chain_source(enc_run *up, const out_entry *e, enc_source *es, amn_error *err) {
    const size_t size = amn_dtype_size(e->dtype);
    if (e->dtype != AMN_DTYPE_F32 && e->dtype != AMN_DTYPE_F16 && e->dtype != AMN_DTYPE_BF16)
        return amn_error_set(
            err, AMN_E_UNSUPPORTED,
            "unsupported: %s is %s; a chained encoder reads F32, F16 or BF16", e->out.name,
            e->out.encoding_name ? e->out.encoding_name : amn_dtype_name(e->dtype));
    if (e->unit_bytes % size)
        return amn_error_set(err, AMN_E_INVALID, "encoder: %s: units of %llu bytes", e->out.name,
                             (unsigned long long)e->unit_bytes);
    es->cc = (chain_ctx){.up = up,
                         .src = (size_t)e->enc,
                         .out = e->enc_out,
                         .dtype = e->dtype,
                         .unit_elems = e->unit_bytes / size,
                         .unit_bytes = e->unit_bytes};
    es->values.ctx = &es->cc;
    es->values.read = read_upstream;
    es->values.read_as = NULL; /* values_ctx's: not this source's */
    return AMN_OK;
}

static void enc_run_free(enc_run *r) {
    if (!r->e) return;
    for (size_t i = 0; i < r->n_src; i++)
        if (r->src[i].state) r->e->tensor_free(r->src[i].state);
    free(r->src);
    if (r->ms) r->e->end(r->ms);
    free(r->srcs);
    memset(r, 0, sizeof *r);
}

static bool kept(const amn_convert_options *o, const char *name) {
    for (size_t k = 0; k < o->n_keep; k++)
        if (fnmatch(o->keep[k], name, 0) == 0) return true;
    return false;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* An encoder's output may be named like a tensor the input already has
 * ("x.SCB" beside "x.weight"): refuse rather than write two of a name. */
static int check_unique(const out_entry *e, size_t n, amn_error *err) {
    const char **names = malloc((n ? n : 1) * sizeof *names);
    if (!names) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) names[k] = e[k].out.name;
    qsort(names, n, sizeof *names, cmp_name);
    int rc = AMN_OK;
    for (size_t k = 1; !rc && k < n; k++)
        if (strcmp(names[k - 1], names[k]) == 0)
            rc = amn_error_set(err, AMN_E_INVALID,
                               "encoding would write two tensors named %s (the input already "
                               "has one)",
                               names[k]);
    free(names);
    return rc;
}

/* amn_values.read_source: another source's values, by index. */
static int read_source_values(const void *all, size_t source, uint64_t e0, uint64_t n, float *dst,
                              amn_error *err) {
    const enc_run *run = all;
    if (source >= run->n_src || e0 > run->src[source].values.numel ||
        n > run->src[source].values.numel - e0)
        return amn_error_set(err, AMN_E_INVALID, "encoder: values out of range");
    const amn_values *v = &run->src[source].values;
    return v->read(v->ctx, e0, n, dst, err);
}

/* Replace each entry the encoder encodes by its outputs (none for a
 * source it drops). With `up` (a chained encoder), the entries are up's
 * outputs and `meta` is the model begin() sees. */
static int encode_outputs(const amn_ctx *ctx, const amn_plan *p, const amn_model *m,
                          const amn_convert_options *o, const amn_encode_options *enc, enc_run *up,
                          const amn_model *meta, out_entry **entries, size_t *n_out, enc_run *run,
                          amn_error *err) {
    const amn_scheme *sc = amn_ctx_find_encoder(ctx, enc->target);
    if (!sc)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: no loaded plugin encodes %s; install the plugin "
                             "that provides it",
                             enc->target);
    const size_t n = *n_out;
    out_entry *in = *entries;
    amn_encode_source *srcs = calloc(n ? n : 1, sizeof *srcs);
    run->e = amn_scheme_encoder(sc);
    run->src = calloc(n ? n : 1, sizeof *run->src);
    run->srcs = srcs;
    run->n_src = n;
    if (!srcs || !run->src) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = AMN_OK;
    for (size_t k = 0; !rc && k < n; k++) {
        srcs[k] = (amn_encode_source){.struct_size = sizeof(amn_encode_source),
                                      .name = in[k].out.name,
                                      .dtype = in[k].dtype,
                                      .ndim = in[k].out.ndim,
                                      .dequantized = in[k].group >= 0,
                                      .keep = kept(o, in[k].out.name)};
        memcpy(srcs[k].shape, in[k].out.shape, sizeof srcs[k].shape);
        enc_source *es = &run->src[k];
        es->vc = (values_ctx){.m = m,
                              .g = in[k].group >= 0 ? &p->cs.groups[in[k].group] : NULL,
                              .t = amn_model_tensor(m, in[k].tensor)};
        uint64_t numel = 1;
        for (uint32_t d = 0; d < srcs[k].ndim; d++) numel *= srcs[k].shape[d];
        es->values = (amn_values){.struct_size = sizeof(amn_values),
                                  .numel = numel,
                                  .ctx = &es->vc,
                                  .read = read_values,
                                  .all = run,
                                  .read_source = read_source_values,
                                  .read_as = read_values_as};
        if (up && in[k].enc >= 0) rc = chain_source(up, &in[k], es, err);
    }
    if (rc) return rc;
    amn_encode_options eo = {0};
    memcpy(&eo, enc, enc->struct_size < sizeof eo ? enc->struct_size : sizeof eo);
    eo.struct_size = sizeof eo;
    eo.model = up && meta ? meta : m;
    eo.max_outs = AMN_ENCODE_OUTS_CAP;
    rc = run->e->begin(&eo, srcs, n, &run->ms, err);
    if (rc) {
        run->ms = NULL;
        return rc;
    }
    size_t cap = n + 8, k2 = 0, used = AMN_ENCODE_OUTS_CAP;
    out_entry *outv = calloc(cap, sizeof *outv);
    amn_encode_out *eouts = malloc(AMN_ENCODE_OUTS_CAP * sizeof *eouts);
    if (!outv || !eouts) {
        free(outv);
        free(eouts);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    for (size_t k = 0; !rc && k < n; k++) {
        /* cleared as far as the previous call wrote (all of it at first) */
        memset(eouts, 0, used * sizeof *eouts);
        for (size_t j = 0; j < used; j++) eouts[j].struct_size = sizeof *eouts;
        size_t no = 0;
        rc = run->e->tensor(run->ms, k, eouts, &no, &run->src[k].state, err);
        used = no == AMN_ENCODE_DROP ? 0 : no > AMN_ENCODE_OUTS_CAP ? AMN_ENCODE_OUTS_CAP : no;
        if (rc) break;
        if (no == AMN_ENCODE_DROP) continue;
        if (no > AMN_ENCODE_OUTS_CAP) {
            rc = amn_error_set(err, AMN_E_INVALID, "encoder: too many outputs for %s",
                               in[k].out.name);
            break;
        }
        if (k2 + (no ? no : 1) > cap) {
            cap = (k2 + (no ? no : 1)) * 2;
            out_entry *nv = realloc(outv, cap * sizeof *outv);
            if (!nv) {
                rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
                break;
            }
            outv = nv;
        }
        if (!no) {
            outv[k2++] = in[k];
            continue;
        }
        for (size_t j = 0; j < no; j++) {
            const amn_encode_out *eo2 = &eouts[j];
            if (!eo2->name || !eo2->unit_bytes || eo2->nbytes % eo2->unit_bytes ||
                eo2->ndim > AMN_MAX_DIMS) {
                rc = amn_error_set(err, AMN_E_INVALID, "encoder: bad output %zu of %s", j,
                                   in[k].out.name);
                break;
            }
            out_entry *e = &outv[k2++];
            *e = (out_entry){.tensor = in[k].tensor,
                             .group = -1,
                             .dtype = eo2->dtype,
                             .enc = (int64_t)k,
                             .enc_out = j,
                             .chained = up != NULL,
                             .unit_bytes = eo2->unit_bytes};
            e->out = (amn_out_tensor){.struct_size = sizeof(amn_out_tensor),
                                      .name = eo2->name,
                                      .dtype = eo2->dtype,
                                      .ndim = eo2->ndim,
                                      .nbytes = eo2->nbytes,
                                      .encoding = eo2->encoding,
                                      .encoding_name = eo2->encoding_name};
            memcpy(e->out.shape, eo2->shape, sizeof e->out.shape);
        }
    }
    free(eouts);
    if (!rc) rc = check_unique(outv, k2, err);
    if (rc) {
        free(outv);
        return rc;
    }
    free(in);
    *entries = outv;
    *n_out = k2;
    return AMN_OK;
}

typedef struct encode_ctx {
    const amn_encoder *e;
    const enc_source *src;
    size_t out;
} encode_ctx;

static int produce_encode(const void *vctx, uint64_t unit0, uint64_t n, uint8_t *dst, double *acc,
                          amn_error *err) {
    const encode_ctx *c = vctx;
    return c->e->fill(c->src->state, c->out, unit0, n, &c->src->values, dst, acc, err);
}

/* The mapped bytes a source of an encoder reads, or none (a dequantized
 * weight, a chained source, bytes not in a mapping). */
static amni_span source_span(const enc_source *s) {
    const amn_tensor *t = s->vc.g || s->cc.up ? NULL : s->vc.t;
    if (t && amn_tensor_is_plain(t) && amni_model_map_for(s->vc.m, t->data, t->nbytes))
        return (amni_span){t->data, t->nbytes};
    return (amni_span){NULL, 0};
}

/* mapped: the source's pages are mapped ahead by another thread (ahead.c). */
static int write_encoded(pool *pl, enc_run *run, const out_entry *e, bool mapped, uint8_t *bufs[2],
                         size_t buf_size, const data_out *out, progress *pr, amn_convert_stats *st,
                         amn_error *err) {
    enc_source *s = &run->src[e->enc];
    if (!s->stats_done) {
        /* A stored source is read several times (statistics, each output):
         * fault its pages in once, in large steps, as write_plain does,
         * rather than page by page inside the workers' reads. */
        const amn_tensor *t = source_span(s).n && !mapped ? s->vc.t : NULL;
        if (t)
            for (uint64_t off = 0; off < t->nbytes; off += PASS_CHUNK)
                (void)amni_prefault((const uint8_t *)t->data + off, t->nbytes - off < PASS_CHUNK
                                                                        ? (size_t)(t->nbytes - off)
                                                                        : PASS_CHUNK);
        enc_source *us = s->cc.up ? &s->cc.up->src[s->cc.src] : NULL;
        if (us && !us->stats_done && s->cc.up->e->stats) { /* the upstream's, first */
            int rc = s->cc.up->e->stats(us->state, &us->values, err);
            if (rc) return rc;
        }
        if (us) us->stats_done = true;
        if (run->e->stats) {
            int rc = run->e->stats(s->state, &s->values, err);
            if (rc) return rc;
        }
        s->stats_done = true;
        if (!run->upstream) {
            st->encoded++;
            if (s->vc.g) st->dequantized++; /* a quantized input, decoded first */
            st->abs_err_values += s->values.numel;
        }
    }
    const encode_ctx c = {run->e, s, e->enc_out};
    double ignored = 0;
    return stream(pl, produce_encode, &c, e->out.nbytes / e->unit_bytes, e->unit_bytes, 1, bufs,
                  buf_size, out, pr, run->upstream ? &ignored : &st->abs_err_sum, err);
}

/* A 1-D floating tensor's dtype in a container that keeps them F32
 * (AMN_FORMAT_VECTORS_F32): F32 when convert casts floats (any --out-dtype)
 * or when forget takes it from another format; d otherwise, so a lossless
 * conversion (--out-dtype keep) and llama-quantize's copies of a GGUF input
 * keep it as stored. */
static amn_dtype vector_dtype(const amn_format *f, const amn_model *m, const amn_convert_options *o,
                              uint32_t ndim, amn_dtype d) {
    if (!(amn_format_flags(f) & AMN_FORMAT_VECTORS_F32) || ndim != 1) return d;
    if (d != AMN_DTYPE_F16 && d != AMN_DTYPE_BF16 && d != AMN_DTYPE_F32) return d;
    if (o->mode == AMN_MODE_CONVERT) return AMN_DTYPE_F32;
    if (o->encode && strcmp(amn_model_format(m), f->name) != 0) return AMN_DTYPE_F32;
    return d;
}

static int build_outputs(const amn_format *f, const amn_plan *p, const amn_model *m,
                         const amn_convert_options *o, amn_dtype out, out_entry **entries,
                         size_t *n_out, amn_error *err) {
    const size_t n = amn_model_tensor_count(m);
    out_entry *e = calloc(n ? n : 1, sizeof *e);
    if (!e) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        /* keep_quantized: stored bytes copied, but for blocks stored big-endian
         * (their fields swapped, which only the scheme undoes). */
        const bool copied = o->keep_quantized &&
                            !(t->dtype == AMN_DTYPE_BLOCK && (t->flags & AMN_TENSOR_BIG_ENDIAN));
        const int64_t gi = copied ? -1 : p->cs.owner[i];
        if (gi < 0) {
            amn_dtype d = t->dtype;
            if (o->mode == AMN_MODE_CONVERT && amn_dtype_is_float(d) && d != AMN_DTYPE_F8_E4M3 &&
                d != AMN_DTYPE_F8_E5M2)
                d = out;
            d = vector_dtype(f, m, o, t->ndim, d);
            e[k] = (out_entry){.tensor = i, .group = -1, .dtype = d, .enc = -1};
            e[k].out = (amn_out_tensor){.struct_size = sizeof(amn_out_tensor),
                                        .name = t->name,
                                        .dtype = d,
                                        .ndim = t->ndim,
                                        .encoding = t->encoding,
                                        .encoding_name = t->encoding_name};
            memcpy(e[k].out.shape, t->shape, sizeof t->shape);
            e[k].out.nbytes = d == t->dtype
                                  ? t->nbytes
                                  : t->nbytes / amn_dtype_size(t->dtype) * amn_dtype_size(d);
            k++;
            continue;
        }
        const group *g = &p->cs.groups[gi];
        /* A group is written where its weight (first WEIGHT member) stood. */
        size_t anchor = g->spec.members[0];
        for (size_t j = 0; j < g->spec.n_members; j++)
            if (g->spec.roles[j] == AMN_ROLE_WEIGHT) {
                anchor = g->spec.members[j];
                break;
            }
        if (!g->spec.out_name || anchor != i) continue;
        uint64_t numel = 1;
        for (uint32_t d = 0; d < g->spec.ndim; d++) numel *= g->spec.shape[d];
        const amn_dtype gd = vector_dtype(f, m, o, g->spec.ndim, out);
        e[k] = (out_entry){.tensor = i, .group = gi, .dtype = gd, .enc = -1};
        e[k].out = (amn_out_tensor){.struct_size = sizeof(amn_out_tensor),
                                    .name = g->spec.out_name,
                                    .dtype = gd,
                                    .ndim = g->spec.ndim};
        memcpy(e[k].out.shape, g->spec.shape, sizeof g->spec.shape);
        if (!amn_mul_u64(numel, amn_dtype_size(gd), &e[k].out.nbytes)) {
            free(e);
            return amn_error_set(err, AMN_E_LIMIT, "%s: output too large", g->spec.out_name);
        }
        k++;
    }
    *entries = e;
    *n_out = k;
    return AMN_OK;
}

/* Split "KEY=VALUE" writer options into keys and values (one allocation,
 * *keys then *values), refusing keys the writer does not declare. */
static int split_options(const amn_format *f, const char *const *options, size_t n_options,
                         const char ***keys, const char ***values, amn_error *err) {
    *keys = *values = NULL;
    if (!n_options) return AMN_OK;
    const char *const *accepted = amni_writer_options(f->writer);
    size_t bytes = 0;
    for (size_t i = 0; i < n_options; i++) {
        const char *opt = options[i], *eq = opt ? strchr(opt, '=') : NULL;
        if (!eq || eq == opt)
            return amn_error_set(err, AMN_E_INVALID, "option '%s': want KEY=VALUE",
                                 opt ? opt : "(null)");
        bool known = false;
        for (size_t k = 0; accepted && accepted[k] && !known; k++)
            known = strlen(accepted[k]) == (size_t)(eq - opt) &&
                    strncmp(accepted[k], opt, (size_t)(eq - opt)) == 0;
        if (!known) {
            char list[256] = "";
            for (size_t k = 0; accepted && accepted[k]; k++) {
                size_t used = strlen(list);
                snprintf(list + used, sizeof list - used, "%s%s", k ? ", " : "", accepted[k]);
            }
            return amn_error_set(err, AMN_E_INVALID,
                                 "unknown option '%.*s' for format %s (it accepts %s)",
                                 (int)(eq - opt), opt, f->name, list[0] ? list : "none");
        }
        bytes += (size_t)(eq - opt) + 1;
    }
    int (*check)(const char *, const char *, amn_error *) = amni_writer_check(f->writer);
    for (size_t i = 0; check && i < n_options; i++) {
        const char *opt = options[i], *eq = strchr(opt, '=');
        char key[65];
        snprintf(key, sizeof key, "%.*s", (int)(eq - opt), opt); /* declared keys are <= 64 */
        int rc = check(key, eq + 1, err);
        if (rc) return rc;
    }
    char **kv = malloc(2 * n_options * sizeof *kv + bytes);
    if (!kv) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    char *text = (char *)(kv + 2 * n_options);
    for (size_t i = 0; i < n_options; i++) {
        const char *opt = options[i], *eq = strchr(opt, '=');
        memcpy(text, opt, (size_t)(eq - opt));
        text[eq - opt] = '\0';
        kv[i] = text;
        kv[n_options + i] = (char *)eq + 1;
        text += (eq - opt) + 1;
    }
    *keys = (const char **)kv;
    *values = (const char **)kv + n_options;
    return AMN_OK;
}

/* The writer's options: the encoder's (what its target needs of the
 * container) first, then the user's, so a user's key wins. */
static int writer_options(const amn_format *f, const amn_convert_options *o, const enc_run *run,
                          const char ***keys, const char ***values, size_t *n, amn_error *err) {
    const char *const *eopts = NULL;
    size_t n_e = 0;
    const amn_encoder *e = run->e;
    if (e && e->struct_size >= offsetof(amn_encoder, writer_options) + sizeof e->writer_options &&
        e->writer_options) {
        int rc = e->writer_options(run->ms, &eopts, &n_e, err);
        if (rc) return rc;
    }
    if (n_e > SIZE_MAX / sizeof(char *) - o->n_options)
        return amn_error_set(err, AMN_E_LIMIT, "too many writer options");
    const char **all = malloc((n_e + o->n_options + 1) * sizeof *all);
    if (!all) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n_e; i++) all[i] = eopts[i];
    for (size_t i = 0; i < o->n_options; i++) all[n_e + i] = o->options[i];
    *n = n_e + o->n_options;
    int rc = split_options(f, all, *n, keys, values, err);
    free(all);
    return rc;
}

/* The encoder's own metadata for the writer (amn_encoder.metadata), if any. */
static int encoder_metadata(const enc_run *run, const amn_model **meta, amn_error *err) {
    const amn_encoder *e = run->e;
    *meta = NULL;
    if (!e || e->struct_size < offsetof(amn_encoder, metadata) + sizeof e->metadata || !e->metadata)
        return AMN_OK;
    return e->metadata(run->ms, meta, err);
}

/* One conversion's state. Everything it allocates is released by
 * conv_free() alone, whatever step failed; the writer's state is owned by the
 * writer from begin() until finish() (which frees it on failure too) or
 * abort(). */
typedef struct conv {
    const amn_model *m;
    const amn_plan *p;
    const amn_convert_options *o;
    const char *target;
    amn_dtype out;
    const amn_format *f;
    const char **opt_keys, **opt_values; /* one allocation, from split_options */
    size_t n_options;
    out_entry *entries;
    size_t n_out;
    enc_run run;
    enc_run then;                /* encode_then's, fed run's outputs */
    const amn_out_tensor **outs; /* the writer's view of entries */
    size_t *order;               /* the writer's order of entries */
    unsigned threads;
    uint8_t *buf, *bufs[2];
    size_t buf_size;
    pool pl;
    bool pool_started;
    amni_ahead *ahead;     /* maps the encoders' sources ahead of the workers, or NULL */
    amni_span *done_after; /* per position in the writer's order: a source read for the last time */
    amn_sink *sink;
    const amn_model *meta; /* the encoder's metadata for the writer, or NULL */
    void *state;           /* the writer's */
    bool begun;            /* begin() succeeded and neither finish() nor abort() ran */
    progress pr;
    amn_convert_stats st;
} conv;

/* The target format and output dtype the options ask for. */
static int check_target(const amn_ctx *ctx, conv *c, amn_error *err) {
    const amn_convert_options *o = c->o;
    c->target = o->target ? o->target : "safetensors";
    c->out = o->out_dtype == AMN_DTYPE_INVALID ? AMN_DTYPE_BF16 : o->out_dtype;
    if (c->out != AMN_DTYPE_BF16 && c->out != AMN_DTYPE_F16 && c->out != AMN_DTYPE_F32)
        return amn_error_set(err, AMN_E_INVALID, "output dtype must be bf16, f16 or f32");
    if (!o->output) return amn_error_set(err, AMN_E_INVALID, "no output path");
    c->f = amn_ctx_find_format(ctx, c->target);
    if (!c->f || !c->f->writer)
        return amn_error_set(
            err, AMN_E_UNSUPPORTED,
            "unsupported: no loaded plugin writes %s; install the amn-plugin-%s package", c->target,
            c->target);
    return AMN_OK;
}

/* Refuse an output whose dtype the writer cannot store. */
static int check_storable(const conv *c, amn_error *err) {
    for (size_t k = 0; k < c->n_out; k++) {
        const out_entry *e = &c->entries[k];
        if (!(c->f->writer->dtypes & (1ull << e->dtype)))
            return amn_error_set(
                err, AMN_E_UNSUPPORTED, "unsupported: %s cannot store tensor %s (%s)", c->target,
                e->out.name,
                e->dtype == AMN_DTYPE_BLOCK && e->out.encoding_name ? e->out.encoding_name
                                                                    : amn_dtype_name(e->dtype));
    }
    return AMN_OK;
}

/* Keep the outputs the caller selected (a shard of a model folder). */
static void select_outputs(conv *c) {
    size_t k = 0;
    for (size_t i = 0; i < c->n_out; i++)
        if (c->o->select(c->o->select_user, c->entries[i].out.name))
            c->entries[k++] = c->entries[i];
    c->n_out = k;
}

/* The list of outputs (encoder outputs in place of what they encode), then
 * the writer's options, which may come from the encoder. */
static int plan_outputs(const amn_ctx *ctx, conv *c, amn_error *err) {
    int rc = amni_plan_check_unclaimed(c->p, c->m, err);
    if (!rc) rc = build_outputs(c->f, c->p, c->m, c->o, c->out, &c->entries, &c->n_out, err);
    if (!rc && c->o->encode)
        rc = encode_outputs(ctx, c->p, c->m, c->o, c->o->encode, NULL, NULL, &c->entries, &c->n_out,
                            &c->run, err);
    if (!rc) rc = encoder_metadata(&c->run, &c->meta, err);
    if (!rc && c->o->encode_then && !c->o->encode)
        rc = amn_error_set(err, AMN_E_INVALID, "encode_then without encode");
    if (!rc && c->o->keep_quantized && c->o->encode)
        rc = amn_error_set(err, AMN_E_INVALID, "keep_quantized with encode");
    if (!rc && c->o->encode_then) { /* the second step, on the first's outputs */
        c->run.upstream = true;
        rc = encode_outputs(ctx, c->p, c->m, c->o, c->o->encode_then, &c->run, c->meta, &c->entries,
                            &c->n_out, &c->then, err);
        const amn_model *meta2 = NULL;
        if (!rc) rc = encoder_metadata(&c->then, &meta2, err);
        if (meta2) c->meta = meta2;
    }
    const enc_run *last = c->then.e ? &c->then : &c->run;
    if (!rc)
        rc = writer_options(c->f, c->o, last, &c->opt_keys, &c->opt_values, &c->n_options, err);
    if (!rc) rc = check_storable(c, err);
    if (!rc && c->o->select) select_outputs(c);
    return rc;
}

/* Each of the two chunk buffers holds a round of every worker, and at least
 * one output row or encode unit. */
static int size_buffers(conv *c, amn_error *err) {
    const amn_convert_options *o = c->o;
    c->threads = o->threads ? o->threads : default_threads();
    if (c->threads > MAX_THREADS) c->threads = MAX_THREADS;
    c->buf_size = (size_t)CHUNK_BYTES * c->threads;
    for (size_t g = 0; g < c->p->cs.n_groups; g++) {
        const amn_group_spec *s = &c->p->cs.groups[g].spec;
        if (!s->out_name) continue;
        uint64_t numel = 1;
        for (uint32_t d = 0; d < s->ndim; d++) numel *= s->shape[d]; /* checked at claim */
        /* An empty output streams no rows, and nothing in the file backs
         * its row length (a GGUF [0, 2^31] tensor): it sizes nothing. */
        if (numel == 0) continue;
        /* a 1-D output may be F32 whatever c->out (AMN_FORMAT_VECTORS_F32) */
        const uint64_t rb = s->row_elems * 4;
        if (rb > c->buf_size) c->buf_size = (size_t)rb;
    }
    for (size_t k = 0; k < c->n_out; k++) {
        const out_entry *e = &c->entries[k];
        if (e->enc < 0 || e->unit_bytes <= c->buf_size) continue;
        if (e->unit_bytes > ((size_t)1 << 30))
            return amn_error_set(err, AMN_E_LIMIT, "%s: encode unit too large", e->out.name);
        c->buf_size = (size_t)e->unit_bytes;
    }
    return AMN_OK;
}

static int alloc_buffers(conv *c, amn_error *err) {
    int rc = size_buffers(c, err);
    if (rc) return rc;
    const size_t n = c->n_out ? c->n_out : 1;
    c->outs = calloc(n, sizeof *c->outs);
    c->order = calloc(n, sizeof *c->order);
    c->buf = malloc(2 * c->buf_size);
    if (!c->outs || !c->order || !c->buf) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    c->bufs[0] = c->buf;
    c->bufs[1] = c->buf + c->buf_size;
    for (size_t k = 0; k < c->n_out; k++) c->outs[k] = &c->entries[k].out, c->order[k] = k;
    return AMN_OK;
}

/* The temporary output, the workers and the writer's header. */
static int open_output(conv *c, amn_error *err) {
    const amn_convert_options *o = c->o;
    /* A model from an archive: the archive is the file the output must not replace. */
    const char *inputs[1] = {amni_archive_path(c->m) ? amni_archive_path(c->m)
                                                     : amn_model_path(c->m)};
    int rc = amn_sink_open(o->output, o->overwrite, inputs, inputs[0] ? 1 : 0, &c->sink, err);
    if (!rc && o->no_sync) amn_sink_set_sync(c->sink, false);
    c->pr = (progress){.fn = o->progress, .user = o->progress_user};
    c->pr.info.struct_size = sizeof c->pr.info;
    c->pr.info.tensor_count = c->n_out;
    pool_init(&c->pl, c->threads);
    c->pl.model = c->m;
    c->pool_started = true;
    if (rc) return rc;
    amn_write_args wa = {.struct_size = sizeof wa,
                         .path = o->output,
                         .sink = c->sink,
                         .tensors = c->outs,
                         .n_tensors = c->n_out,
                         .source = c->meta ? c->meta : c->m,
                         .option_keys = c->opt_keys,
                         .option_values = c->opt_values,
                         .n_options = c->n_options};
    rc = c->f->writer->begin(&wa, &c->state, c->order, err);
    if (rc) return rc;
    c->begun = true;
    uint64_t total = amn_sink_tell(c->sink);
    for (size_t k = 0; k < c->n_out; k++) amn_add_u64(total, c->outs[k]->nbytes, &total);
    amn_sink_reserve(c->sink, total);
    c->pr.info.bytes_total = total;
    report(&c->pr, c->sink);
    return AMN_OK;
}

/* The k-th tensor in the writer's order: encoded, dequantized from its group,
 * or cast/copied; it must come to the size announced in the header. */
static int write_entry(conv *c, size_t k, amn_error *err) {
    const size_t idx = c->order[k];
    if (idx >= c->n_out)
        return amn_error_set(err, AMN_E_INVALID, "writer %s returned a bad order", c->target);
    const out_entry *e = &c->entries[idx];
    int rc;
    if (c->f->writer->tensor_begin && (rc = c->f->writer->tensor_begin(c->state, idx, err)))
        return rc;
    amni_ahead_at(c->ahead, k);
    c->pr.info.tensor_index = k;
    c->pr.info.tensor_name = e->out.name;
    report(&c->pr, c->sink);
    const uint64_t before = amn_sink_tell(c->sink);
    data_out out = {.sink = c->sink};
    if (amni_writer_filters(c->f->writer, c->state, idx))
        out = (data_out){.sink = c->sink, .w = c->f->writer, .state = c->state, .index = idx};
    if (e->enc >= 0) {
        rc = write_encoded(&c->pl, e->chained ? &c->then : &c->run, e, c->ahead != NULL, c->bufs,
                           c->buf_size, &out, &c->pr, &c->st, err);
    } else if (e->group >= 0) {
        rc = write_group(&c->pl, c->m, &c->p->cs.groups[e->group], e->dtype, c->bufs, c->buf_size,
                         &out, &c->pr, err);
        c->st.dequantized++;
    } else {
        const amn_tensor *t = amn_model_tensor(c->m, e->tensor);
        rc = write_plain(&c->pl, c->m, t, e->dtype, c->bufs, c->buf_size, &out, &c->pr, err);
        if (e->dtype != t->dtype) c->st.cast++;
    }
    if (!rc && amn_sink_tell(c->sink) - before != e->out.nbytes)
        rc = amn_error_set(err, AMN_E_INVALID, "tensor %s: wrote %llu bytes, expected %llu",
                           e->out.name, (unsigned long long)(amn_sink_tell(c->sink) - before),
                           (unsigned long long)e->out.nbytes);
    c->st.tensors_written++;
    return rc;
}

/* Bytes of the input mapped ahead of the tensor being written: enough for
 * the disk to stay busy while a tensor converts, little against memory. */
#define AHEAD_WINDOW (256u << 20)

/* With an encoder, its sources' pages are mapped ahead of the workers by a
 * thread of their own (ahead.c), in the writer's order: a source's span
 * comes with the first output that reads it. Without one, nothing changes:
 * casts and copies read their input through input.c's chosen way. */
static int start_ahead(conv *c, amn_error *err) {
    if (!c->run.e || !c->n_out) return AMN_OK;
    amni_span *spans = calloc(c->n_out, sizeof *spans);
    bool *seen = calloc(c->run.n_src ? c->run.n_src : 1, sizeof *seen);
    int rc = spans && seen ? AMN_OK : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    bool any = false;
    for (size_t k = 0; !rc && k < c->n_out; k++) {
        const out_entry *e = &c->entries[c->order[k]];
        if (e->enc < 0 || e->chained || (size_t)e->enc >= c->run.n_src || seen[e->enc]) continue;
        seen[e->enc] = true;
        spans[k] = source_span(&c->run.src[e->enc]);
        any |= spans[k].n > 0;
    }
    if (!rc && any) {
        rc = amni_ahead_start(spans, c->n_out, AHEAD_WINDOW, &c->ahead, err);
        if (rc == AMN_E_UNSUPPORTED) rc = AMN_OK; /* the workers fault their own pages */
    }
    free(spans);
    free(seen);
    return rc;
}

/* The encoders' sources stay mapped once read (the thread above maps them
 * and the workers read them several times: statistics, each output), so a
 * conversion through an encoder kept all of its input resident, 272 MiB of
 * a 256 MiB model. Each source's span is unmapped after the last output
 * that reads it, directly or through a chained encoder; the pages stay in
 * the page cache, and a later reader (none in the writers' orders) would
 * fault them back in. */
static int plan_done_after(conv *c, amn_error *err) {
    if (!c->run.e || !c->n_out) return AMN_OK;
    size_t *last = malloc((c->run.n_src ? c->run.n_src : 1) * sizeof *last);
    c->done_after = calloc(c->n_out, sizeof *c->done_after);
    if (!last || !c->done_after) {
        free(last);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    for (size_t s = 0; s < c->run.n_src; s++) last[s] = SIZE_MAX;
    for (size_t k = 0; k < c->n_out; k++) {
        const out_entry *e = &c->entries[c->order[k]];
        if (e->enc < 0) continue;
        size_t s = (size_t)e->enc;
        if (e->chained) {
            if (s >= c->then.n_src || c->then.src[s].cc.up != &c->run) continue;
            s = c->then.src[s].cc.src;
        }
        if (s < c->run.n_src) last[s] = k;
    }
    for (size_t s = 0; s < c->run.n_src; s++)
        if (last[s] != SIZE_MAX) c->done_after[last[s]] = source_span(&c->run.src[s]);
    free(last);
    return AMN_OK;
}

static int write_tensors(conv *c, amn_error *err) {
    int rc = start_ahead(c, err);
    if (!rc) rc = plan_done_after(c, err);
    for (size_t k = 0; !rc && k < c->n_out; k++) {
        rc = write_entry(c, k, err);
        const amni_span *d = c->done_after ? &c->done_after[k] : NULL;
        if (!rc && d && d->n) amni_model_drop(c->m, d->p, d->n);
    }
    return rc;
}

/* The writer's trailer and the atomic rename on success; on failure the
 * writer's abort (unless finish() itself failed: it has freed its state)
 * and the temporary output removed. */
static int finish_output(conv *c, int rc, amn_error *err) {
    if (!rc) {
        c->begun = false;
        rc = c->f->writer->finish(c->state, err);
    }
    amni_ahead_stop(c->ahead);
    c->ahead = NULL;
    if (c->pool_started) pool_destroy(&c->pl);
    c->pool_started = false;
    if (c->begun) c->f->writer->abort(c->state);
    c->begun = false;
    if (!rc) {
        c->st.bytes_written = amn_sink_tell(c->sink);
        c->pr.info.tensor_index = c->n_out;
        c->pr.info.tensor_name = NULL;
        c->pr.info.bytes_total = c->st.bytes_written; /* a trailer may exceed the estimate */
        report(&c->pr, c->sink);
        rc = amn_sink_commit(c->sink, err);
    } else {
        amn_sink_abort(c->sink);
    }
    c->sink = NULL;
    return rc;
}

/* Statistics that need the whole run, and the encoder's quantization
 * config once the output is in place. */
static int finish_stats(conv *c, int rc, amn_error *err) {
    for (size_t i = 0; i < c->p->cs.n_tensors; i++)
        if (c->p->cs.role[i] == AMN_ROLE_ACT_SCALE) c->st.dropped++;
    const enc_run *last = c->then.e ? &c->then : &c->run;
    if (!last->e) return rc;
    c->st.encode_passed = 0;
    for (size_t i = 0; i < last->n_src; i++) c->st.encode_passed += !last->src[i].stats_done;
    if (!rc && c->o->quant_config) {
        *c->o->quant_config = NULL;
        if (last->e->config) rc = last->e->config(last->ms, c->o->quant_config, err);
    }
    return rc;
}

static void conv_free(conv *c) {
    enc_run_free(&c->then); /* reads through run: freed first */
    enc_run_free(&c->run);
    free(c->entries), free(c->outs), free(c->order), free(c->buf), free(c->opt_keys);
    free(c->done_after);
}

static int options_in(amn_convert_options *dst, const amn_convert_options *o, amn_error *err) {
    return amni_struct_in(dst, sizeof *dst, AMNI_CONVERT_OPTIONS_SIZE_1, o, "amn_convert_options",
                          err);
}

int amn_convert(const amn_ctx *ctx, const amn_model *m, const amn_plan *p,
                const amn_convert_options *opts, amn_convert_stats *stats, amn_error *err) {
    amn_convert_options o;
    int rc = options_in(&o, opts, err);
    if (!rc && stats) /* refused before any output, not after */
        rc = amni_struct_check(stats, AMNI_CONVERT_STATS_SIZE_1, "amn_convert_stats", err);
    if (rc) return rc;
    conv c = {.m = m, .p = p, .o = &o};
    rc = check_target(ctx, &c, err);
    if (!rc) rc = plan_outputs(ctx, &c, err);
    if (!rc) rc = alloc_buffers(&c, err);
    if (!rc) {
        rc = open_output(&c, err);
        if (!rc) rc = write_tensors(&c, err);
        rc = finish_output(&c, rc, err); /* commits the output, or removes it */
        rc = finish_stats(&c, rc, err);
    }
    conv_free(&c);
    amni_input_thread_release(); /* the workers' went with them */
    if (!rc && stats) {
        c.st.struct_size = sizeof c.st;
        rc = amni_struct_out(stats, &c.st, sizeof c.st, AMNI_CONVERT_STATS_SIZE_1,
                             "amn_convert_stats", err);
    }
    return rc;
}

int amn_convert_outputs(const amn_ctx *ctx, const amn_model *m, const amn_plan *p,
                        const amn_convert_options *opts, amn_output_fn fn, void *user,
                        amn_error *err) {
    amn_convert_options lo;
    int rc = options_in(&lo, opts, err);
    if (rc) return rc;
    if (!lo.output) lo.output = "";
    conv c = {.m = m, .p = p, .o = &lo};
    rc = check_target(ctx, &c, err);
    if (!rc) rc = plan_outputs(ctx, &c, err);
    for (size_t k = 0; !rc && k < c.n_out; k++) fn(user, &c.entries[k].out);
    conv_free(&c);
    return rc;
}

static size_t count_caps(const amn_ctx *ctx, bool reader) {
    size_t n = 0;
    for (size_t i = 0; i < amn_ctx_format_count(ctx); i++) {
        const amn_format *f = amn_ctx_format(ctx, i);
        if (reader ? f->open != NULL : f->writer != NULL) n++;
    }
    return n;
}

static const char *nth_cap(const amn_ctx *ctx, bool reader, size_t k) {
    for (size_t i = 0; i < amn_ctx_format_count(ctx); i++) {
        const amn_format *f = amn_ctx_format(ctx, i);
        if (reader ? f->open != NULL : f->writer != NULL) {
            if (k == 0) return f->name;
            k--;
        }
    }
    return NULL;
}

size_t amn_matrix_inputs(const amn_ctx *ctx) {
    return count_caps(ctx, true);
}
size_t amn_matrix_targets(const amn_ctx *ctx) {
    return count_caps(ctx, false);
}
const char *amn_matrix_input(const amn_ctx *ctx, size_t i) {
    return nth_cap(ctx, true, i);
}
const char *amn_matrix_target(const amn_ctx *ctx, size_t j) {
    return nth_cap(ctx, false, j);
}
