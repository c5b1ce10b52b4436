/* The conversion pipeline: plan -> writer header -> each tensor streamed in
 * chunks (dequantized by its scheme on worker threads, cast, or copied
 * straight from the mapping) -> writer trailer -> atomic rename. */
#include <pthread.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amn/checked.h"
#include "amn/convert.h"
#include "abi_internal.h"
#include "io_internal.h"
#include "plan_internal.h"

#define CHUNK_BYTES (1u << 20) /* output bytes per worker per round: cache-sized */
#define MAX_THREADS 64

typedef struct out_entry {
    size_t tensor;      /* source tensor (passthrough) */
    int64_t group;      /* or group index, -1 for passthrough */
    amn_dtype dtype;    /* as written */
    amn_out_tensor out; /* what the writer sees */
} out_entry;

/* ---- streaming: workers fill chunk k+1 while the main thread writes k ----
 *
 * A tensor's output is cut into units (rows of a dequantized group, elements
 * of a cast); a chunk of units is split among `threads` workers, each filling
 * a disjoint slice, so the bytes never depend on the thread count. Two chunk
 * buffers let production and the write system calls overlap. */

typedef int (*produce_fn)(const void *ctx, uint64_t unit0, uint64_t n, uint8_t *dst,
                          amn_error *err);

typedef struct work {
    produce_fn fn;
    const void *ctx;
    uint64_t unit0, n;
    uint8_t *dst;
    int rc;
    amn_error err;
} work;

/* Workers live for a whole conversion: creating threads per chunk cost as
 * much as writing the chunk. A batch is handed over under a mutex; each
 * worker takes items until none is left. */
typedef struct pool {
    pthread_t tid[MAX_THREADS];
    unsigned n_threads;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    work *items;
    unsigned n_items, next, pending;
    bool quit;
} pool;

static void run_item(work *w) {
    w->rc = w->fn(w->ctx, w->unit0, w->n, w->dst, &w->err);
}

static void *pool_main(void *arg) {
    pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->next >= p->n_items) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->quit) break;
        work *w = &p->items[p->next++];
        pthread_mutex_unlock(&p->mu);
        run_item(w);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->cv_done);
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
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (unsigned k = 0; threads > 1 && k < threads; k++) {
        if (pthread_create(&p->tid[k], NULL, pool_main, p) != 0) break;
        p->n_threads++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
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
                        uint64_t n, uint64_t unit_bytes, uint8_t *dst, bool async) {
    unsigned parts = async && p->n_threads ? p->n_threads : 1;
    if (n < parts) parts = (unsigned)n;
    if (parts == 0) parts = 1;
    const uint64_t base = n / parts, extra = n % parts;
    uint64_t at = unit0;
    b->n = parts;
    for (unsigned k = 0; k < parts; k++) {
        const uint64_t cnt = base + (k < extra);
        b->w[k] = (work){
            .fn = fn, .ctx = ctx, .unit0 = at, .n = cnt, .dst = dst + (at - unit0) * unit_bytes};
        at += cnt;
    }
    if (!async || !p->n_threads) {
        for (unsigned k = 0; k < parts; k++) run_item(&b->w[k]);
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

static int batch_join(pool *p, batch *b, amn_error *err) {
    pthread_mutex_lock(&p->mu);
    if (p->items == b->w)
        while (p->pending) pthread_cond_wait(&p->cv_done, &p->mu);
    p->items = NULL;
    p->n_items = p->next = 0;
    pthread_mutex_unlock(&p->mu);
    int rc = AMN_OK;
    for (unsigned k = 0; k < b->n; k++)
        if (b->w[k].rc && !rc) {
            rc = b->w[k].rc;
            if (err) *err = b->w[k].err;
        }
    b->n = 0;
    return rc;
}

/* Produce `units` units of `unit_bytes` each through fn and write them in
 * order. bufs are two buffers of buf_size bytes. */
static int stream(pool *pl, produce_fn fn, const void *ctx, uint64_t units, uint64_t unit_bytes,
                  uint8_t *bufs[2], size_t buf_size, amn_sink *sink, progress *pr, amn_error *err) {
    if (units == 0) return AMN_OK;
    uint64_t per = buf_size / unit_bytes;
    if (per == 0) per = 1; /* buffers hold at least one unit (sized by the caller) */
    /* Small outputs are not worth the hand-over. */
    const bool async = units * unit_bytes >= (256u << 10);
    batch b[2];
    uint64_t next = 0;
    int k = 0, rc;
    uint64_t n0 = units < per ? units : per;
    batch_start(pl, &b[0], fn, ctx, 0, n0, unit_bytes, bufs[0], async);
    next = n0;
    uint64_t cur_n = n0;
    for (;;) {
        rc = batch_join(pl, &b[k], err);
        if (rc) return rc;
        uint64_t nn = 0;
        if (next < units) {
            nn = units - next < per ? units - next : per;
            batch_start(pl, &b[!k], fn, ctx, next, nn, unit_bytes, bufs[!k], async);
        }
        rc = amn_sink_write(sink, bufs[k], cur_n * unit_bytes, err);
        if (rc) {
            if (nn) batch_join(pl, &b[!k], NULL);
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

static int produce_group(const void *vctx, uint64_t row0, uint64_t n, uint8_t *dst,
                         amn_error *err) {
    const group_ctx *c = vctx;
    return c->g->scheme->dequantize(c->m, c->g->spec.plan, row0, n, c->out, dst, err);
}

typedef struct cast_ctx {
    const amn_tensor *t;
    amn_dtype to;
    size_t ss;
} cast_ctx;

/* Elements [e0, e0+n) of a tensor as `to`: gathered when it is a view,
 * converted when the dtype changes. */
static int produce_cast(const void *vctx, uint64_t e0, uint64_t n, uint8_t *dst, amn_error *err) {
    const cast_ctx *c = vctx;
    const amn_tensor *t = c->t;
    if (c->to == t->dtype) return amn_tensor_read(t, e0 * c->ss, dst, n * c->ss, err);
    const void *from = (const uint8_t *)t->data + e0 * c->ss;
    void *scratch = NULL;
    if (!amn_tensor_is_plain(t)) {
        if (!(scratch = malloc(n * c->ss))) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        int rc = amn_tensor_read(t, e0 * c->ss, scratch, n * c->ss, err);
        if (rc) {
            free(scratch);
            return rc;
        }
        from = scratch;
    }
    int rc = amn_convert_elems(t->dtype, from, c->to, dst, (size_t)n)
                 ? amn_error_set(err, AMN_E_UNSUPPORTED, "tensor %s: cannot cast %s to %s", t->name,
                                 amn_dtype_name(t->dtype), amn_dtype_name(c->to))
                 : AMN_OK;
    free(scratch);
    return rc;
}

static unsigned default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > 4 ? 4 : (unsigned)n;
}

static int write_group(pool *pl, const amn_model *m, const group *g, amn_dtype out,
                       uint8_t *bufs[2], size_t buf_size, amn_sink *sink, progress *pr,
                       amn_error *err) {
    uint64_t numel = 1;
    for (uint32_t d = 0; d < g->spec.ndim; d++) numel *= g->spec.shape[d]; /* checked at claim */
    const group_ctx c = {m, g, out};
    return stream(pl, produce_group, &c, numel / g->spec.row_elems,
                  g->spec.row_elems * amn_dtype_size(out), bufs, buf_size, sink, pr, err);
}

/* Plain same-dtype tensors are written straight from the mapping, a
 * PASS_CHUNK at a time, each range faulted in first by one madvise: left to
 * write() itself, the source is faulted page by page inside the copy, which
 * took 1.8x as long on 302 MB (108 ms against 60), and copy_file_range
 * between unaligned offsets copies page by page in the kernel (120 ms). */
#define PASS_CHUNK (2u << 20)
static int write_plain(pool *pl, const amn_model *m, const amn_tensor *t, amn_dtype to,
                       uint8_t *bufs[2], size_t buf_size, amn_sink *sink, progress *pr,
                       amn_error *err) {
    if (to == t->dtype && amn_tensor_is_plain(t)) {
        const bool mapped = amni_model_map_for(m, t->data, t->nbytes) != NULL;
        const uint8_t *p = t->data;
        for (uint64_t left = t->nbytes; left;) {
            const size_t n = left < PASS_CHUNK ? (size_t)left : PASS_CHUNK;
            if (mapped) amni_prefault(p, n);
            int rc = amn_sink_write(sink, p, n, err);
            if (rc) return rc;
            report(pr, sink);
            p += n;
            left -= n;
        }
        return AMN_OK;
    }
    const size_t ss = t->dtype == AMN_DTYPE_BLOCK ? 1 : amn_dtype_size(t->dtype);
    const cast_ctx c = {t, to, ss};
    return stream(pl, produce_cast, &c, t->nbytes / ss, to == t->dtype ? ss : amn_dtype_size(to),
                  bufs, buf_size, sink, pr, err);
}

static int build_outputs(const amn_plan *p, const amn_model *m, const amn_convert_options *o,
                         amn_dtype out, out_entry **entries, size_t *n_out, amn_error *err) {
    const size_t n = amn_model_tensor_count(m);
    out_entry *e = calloc(n ? n : 1, sizeof *e);
    if (!e) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        const int64_t gi = p->cs.owner[i];
        if (gi < 0) {
            amn_dtype d = t->dtype;
            if (o->mode == AMN_MODE_CONVERT && amn_dtype_is_float(d) && d != AMN_DTYPE_F8_E4M3 &&
                d != AMN_DTYPE_F8_E5M2)
                d = out;
            e[k] = (out_entry){.tensor = i, .group = -1, .dtype = d};
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
        e[k] = (out_entry){.tensor = i, .group = gi, .dtype = out};
        e[k].out = (amn_out_tensor){.struct_size = sizeof(amn_out_tensor),
                                    .name = g->spec.out_name,
                                    .dtype = out,
                                    .ndim = g->spec.ndim};
        memcpy(e[k].out.shape, g->spec.shape, sizeof g->spec.shape);
        if (!amn_mul_u64(numel, amn_dtype_size(out), &e[k].out.nbytes)) {
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
static int split_options(const amn_format *f, const amn_convert_options *o, const char ***keys,
                         const char ***values, amn_error *err) {
    *keys = *values = NULL;
    if (!o->n_options) return AMN_OK;
    const char *const *accepted = amni_writer_options(f->writer);
    size_t bytes = 0;
    for (size_t i = 0; i < o->n_options; i++) {
        const char *opt = o->options[i], *eq = opt ? strchr(opt, '=') : NULL;
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
    for (size_t i = 0; check && i < o->n_options; i++) {
        const char *opt = o->options[i], *eq = strchr(opt, '=');
        char key[65];
        snprintf(key, sizeof key, "%.*s", (int)(eq - opt), opt); /* declared keys are <= 64 */
        int rc = check(key, eq + 1, err);
        if (rc) return rc;
    }
    char **kv = malloc(2 * o->n_options * sizeof *kv + bytes);
    if (!kv) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    char *text = (char *)(kv + 2 * o->n_options);
    for (size_t i = 0; i < o->n_options; i++) {
        const char *opt = o->options[i], *eq = strchr(opt, '=');
        memcpy(text, opt, (size_t)(eq - opt));
        text[eq - opt] = '\0';
        kv[i] = text;
        kv[o->n_options + i] = (char *)eq + 1;
        text += (eq - opt) + 1;
    }
    *keys = (const char **)kv;
    *values = (const char **)kv + o->n_options;
    return AMN_OK;
}

int amn_convert(const amn_ctx *ctx, const amn_model *m, const amn_plan *p,
                const amn_convert_options *o, amn_convert_stats *stats, amn_error *err) {
    amn_convert_stats st = {0};
    const char *target = o->target ? o->target : "safetensors";
    const amn_dtype out = o->out_dtype == AMN_DTYPE_INVALID ? AMN_DTYPE_BF16 : o->out_dtype;
    if (out != AMN_DTYPE_BF16 && out != AMN_DTYPE_F16 && out != AMN_DTYPE_F32)
        return amn_error_set(err, AMN_E_INVALID, "output dtype must be bf16, f16 or f32");
    if (!o->output) return amn_error_set(err, AMN_E_INVALID, "no output path");
    const amn_format *f = amn_ctx_find_format(ctx, target);
    if (!f || !f->writer)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: no loaded plugin writes %s; install the amn-%s plugin",
                             target, target);
    const char **opt_keys, **opt_values;
    int rc = split_options(f, o, &opt_keys, &opt_values, err);
    if (!rc) rc = amni_plan_check_unclaimed(p, m, err);
    out_entry *entries = NULL;
    size_t n_out = 0;
    if (!rc) rc = build_outputs(p, m, o, out, &entries, &n_out, err);
    if (rc) {
        free(opt_keys);
        return rc;
    }
    for (size_t k = 0; k < n_out; k++)
        if (!(f->writer->dtypes & (1ull << entries[k].dtype))) {
            rc =
                amn_error_set(err, AMN_E_UNSUPPORTED, "unsupported: %s cannot store tensor %s (%s)",
                              target, entries[k].out.name,
                              entries[k].dtype == AMN_DTYPE_BLOCK && entries[k].out.encoding_name
                                  ? entries[k].out.encoding_name
                                  : amn_dtype_name(entries[k].dtype));
            free(entries);
            free(opt_keys);
            return rc;
        }
    const amn_out_tensor **outs = calloc(n_out ? n_out : 1, sizeof *outs);
    size_t *order = calloc(n_out ? n_out : 1, sizeof *order);
    unsigned threads = o->threads ? o->threads : default_threads();
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    /* Each of the two chunk buffers: a round of every worker, and at least one
     * output row. */
    size_t buf_size = (size_t)CHUNK_BYTES * threads;
    for (size_t g = 0; g < p->cs.n_groups; g++) {
        const amn_group_spec *s = &p->cs.groups[g].spec;
        if (!s->out_name) continue;
        uint64_t numel = 1;
        for (uint32_t d = 0; d < s->ndim; d++) numel *= s->shape[d]; /* checked at claim */
        /* An empty output streams no rows, and nothing in the file backs
         * its row length (a GGUF [0, 2^31] tensor): it sizes nothing. */
        if (numel == 0) continue;
        const uint64_t rb = s->row_elems * amn_dtype_size(out);
        if (rb > buf_size) buf_size = (size_t)rb;
    }
    uint8_t *buf = malloc(2 * buf_size);
    uint8_t *bufs[2] = {buf, buf ? buf + buf_size : NULL};
    if (!outs || !order || !buf) {
        free(entries), free(outs), free(order), free(buf), free(opt_keys);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < n_out; k++) outs[k] = &entries[k].out, order[k] = k;
    const char *inputs[1] = {amn_model_path(m)};
    amn_sink *sink = NULL;
    void *state = NULL;
    rc = amn_sink_open(o->output, o->overwrite, inputs, inputs[0] ? 1 : 0, &sink, err);
    if (!rc && o->no_sync) amn_sink_set_sync(sink, false);
    progress pr = {.fn = o->progress, .user = o->progress_user};
    pr.info.tensor_count = n_out;
    amn_write_args wa = {.struct_size = sizeof wa,
                         .path = o->output,
                         .sink = sink,
                         .tensors = outs,
                         .n_tensors = n_out,
                         .source = m,
                         .option_keys = opt_keys,
                         .option_values = opt_values,
                         .n_options = o->n_options};
    bool begun = false;
    pool pl;
    pool_init(&pl, threads);
    if (!rc) rc = f->writer->begin(&wa, &state, order, err);
    if (!rc) {
        begun = true;
        uint64_t total = amn_sink_tell(sink);
        for (size_t k = 0; k < n_out; k++) amn_add_u64(total, outs[k]->nbytes, &total);
        amn_sink_reserve(sink, total);
        pr.info.bytes_total = total;
        report(&pr, sink);
    }
    for (size_t k = 0; !rc && k < n_out; k++) {
        const size_t idx = order[k];
        if (idx >= n_out) {
            rc = amn_error_set(err, AMN_E_INVALID, "writer %s returned a bad order", target);
            break;
        }
        const out_entry *e = &entries[idx];
        if (f->writer->tensor_begin && (rc = f->writer->tensor_begin(state, idx, err))) break;
        pr.info.tensor_index = k;
        pr.info.tensor_name = e->out.name;
        report(&pr, sink);
        const uint64_t before = amn_sink_tell(sink);
        if (e->group >= 0) {
            rc = write_group(&pl, m, &p->cs.groups[e->group], out, bufs, buf_size, sink, &pr, err);
            st.dequantized++;
        } else {
            const amn_tensor *t = amn_model_tensor(m, e->tensor);
            rc = write_plain(&pl, m, t, e->dtype, bufs, buf_size, sink, &pr, err);
            if (e->dtype != t->dtype) st.cast++;
        }
        if (!rc && amn_sink_tell(sink) - before != e->out.nbytes)
            rc = amn_error_set(err, AMN_E_INVALID, "tensor %s: wrote %llu bytes, expected %llu",
                               e->out.name, (unsigned long long)(amn_sink_tell(sink) - before),
                               (unsigned long long)e->out.nbytes);
        st.tensors_written++;
    }
    if (!rc) {
        begun = false;
        rc = f->writer->finish(state, err);
    }
    pool_destroy(&pl);
    if (begun) f->writer->abort(state);
    if (!rc) {
        st.bytes_written = amn_sink_tell(sink);
        pr.info.tensor_index = n_out;
        pr.info.tensor_name = NULL;
        pr.info.bytes_total = st.bytes_written; /* a writer's trailer may exceed the estimate */
        report(&pr, sink);
        rc = amn_sink_commit(sink, err);
    } else {
        amn_sink_abort(sink);
    }
    for (size_t i = 0; i < p->cs.n_tensors; i++)
        if (p->cs.role[i] == AMN_ROLE_ACT_SCALE) st.dropped++;
    free(entries), free(outs), free(order), free(buf), free(opt_keys);
    if (!rc && stats) *stats = st;
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
