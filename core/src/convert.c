/* The conversion pipeline: plan -> writer header -> each tensor streamed in
 * chunks (dequantized by its scheme on worker threads, cast, or copied
 * straight from the mapping) -> writer trailer -> atomic rename. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amn/checked.h"
#include "amn/convert.h"
#include "plan_internal.h"

#define CHUNK_BYTES (4u << 20) /* output bytes per worker per round */
#define MAX_THREADS 64

typedef struct out_entry {
    size_t tensor;      /* source tensor (passthrough) */
    int64_t group;      /* or group index, -1 for passthrough */
    amn_dtype dtype;    /* as written */
    amn_out_tensor out; /* what the writer sees */
} out_entry;

typedef struct job {
    const amn_model *m;
    const group *g;
    uint64_t row0, nrows;
    amn_dtype out;
    uint8_t *dst;
    int rc;
    amn_error err;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    j->rc =
        j->g->scheme->dequantize(j->m, j->g->spec.plan, j->row0, j->nrows, j->out, j->dst, &j->err);
    return NULL;
}

static unsigned default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > 4 ? 4 : (unsigned)n;
}

/* Dequantize one group's rows into the sink, `threads` workers per round.
 * Each worker fills a disjoint row range, so the bytes never depend on the
 * thread count. */
static int write_group(const amn_model *m, const group *g, amn_dtype out, unsigned threads,
                       uint8_t *buf, size_t buf_size, amn_sink *sink, amn_error *err) {
    uint64_t numel = 1;
    for (uint32_t d = 0; d < g->spec.ndim; d++) numel *= g->spec.shape[d]; /* checked at claim */
    const uint64_t rows = numel / g->spec.row_elems;
    const uint64_t row_bytes = g->spec.row_elems * amn_dtype_size(out);
    uint64_t per_round = buf_size / row_bytes;
    if (per_round == 0) per_round = 1; /* buf was sized for at least one row */
    job jobs[MAX_THREADS];
    pthread_t tids[MAX_THREADS];
    for (uint64_t r = 0; r < rows;) {
        uint64_t n = rows - r < per_round ? rows - r : per_round;
        unsigned t = threads;
        if (n * row_bytes < (1u << 20) || n < t) t = 1;
        uint64_t base = n / t, extra = n % t, at = r;
        for (unsigned k = 0; k < t; k++) {
            uint64_t cnt = base + (k < extra);
            jobs[k] = (job){.m = m,
                            .g = g,
                            .row0 = at,
                            .nrows = cnt,
                            .out = out,
                            .dst = buf + (at - r) * row_bytes};
            at += cnt;
        }
        unsigned started = 1;
        for (unsigned k = 1; k < t; k++, started++)
            if (pthread_create(&tids[k], NULL, run_job, &jobs[k]) != 0) break;
        for (unsigned k = started; k < t; k++) run_job(&jobs[k]); /* could not spawn: inline */
        run_job(&jobs[0]);
        for (unsigned k = 1; k < started; k++) pthread_join(tids[k], NULL);
        for (unsigned k = 0; k < t; k++)
            if (jobs[k].rc) {
                if (err) *err = jobs[k].err;
                return jobs[k].rc ? jobs[k].rc : AMN_E_INVALID;
            }
        int rc = amn_sink_write(sink, buf, n * row_bytes, err);
        if (rc) return rc;
        r += n;
    }
    return AMN_OK;
}

/* Copy or cast one tensor into the sink. Plain same-dtype tensors go straight
 * from the mapping to the file; views are gathered and casts converted in
 * chunks through buf. */
static int write_plain(const amn_tensor *t, amn_dtype to, uint8_t *buf, size_t buf_size,
                       amn_sink *sink, amn_error *err) {
    if (to == t->dtype && amn_tensor_is_plain(t))
        return amn_sink_write(sink, t->data, t->nbytes, err);
    const size_t ss = t->dtype == AMN_DTYPE_BLOCK ? 1 : amn_dtype_size(t->dtype);
    const size_t ds = to == t->dtype ? ss : amn_dtype_size(to);
    /* Half the buffer holds source elements, half converted ones. */
    size_t per = (buf_size / 2) / (ss > ds ? ss : ds);
    if (per == 0) per = 1;
    const uint64_t count = t->nbytes / ss;
    uint8_t *src = buf, *dst = buf + buf_size / 2;
    for (uint64_t e = 0; e < count;) {
        uint64_t n = count - e < per ? count - e : per;
        int rc;
        const void *from = (const uint8_t *)t->data + e * ss;
        if (!amn_tensor_is_plain(t)) {
            if ((rc = amn_tensor_read(t, e * ss, src, n * ss, err))) return rc;
            from = src;
        }
        if (to == t->dtype) {
            rc = amn_sink_write(sink, from, n * ss, err);
        } else {
            if (amn_convert_elems(t->dtype, from, to, dst, (size_t)n) != 0)
                return amn_error_set(err, AMN_E_UNSUPPORTED, "tensor %s: cannot cast %s to %s",
                                     t->name, amn_dtype_name(t->dtype), amn_dtype_name(to));
            rc = amn_sink_write(sink, dst, n * ds, err);
        }
        if (rc) return rc;
        e += n;
    }
    return AMN_OK;
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
            e[k].out = (amn_out_tensor){.name = t->name,
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
        e[k].out = (amn_out_tensor){.name = g->spec.out_name, .dtype = out, .ndim = g->spec.ndim};
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
    int rc = amni_plan_check_unclaimed(p, m, err);
    if (rc) return rc;
    out_entry *entries = NULL;
    size_t n_out = 0;
    rc = build_outputs(p, m, o, out, &entries, &n_out, err);
    if (rc) return rc;
    for (size_t k = 0; k < n_out; k++)
        if (!(f->writer->dtypes & (1ull << entries[k].dtype))) {
            rc =
                amn_error_set(err, AMN_E_UNSUPPORTED, "unsupported: %s cannot store tensor %s (%s)",
                              target, entries[k].out.name,
                              entries[k].dtype == AMN_DTYPE_BLOCK && entries[k].out.encoding_name
                                  ? entries[k].out.encoding_name
                                  : amn_dtype_name(entries[k].dtype));
            free(entries);
            return rc;
        }
    amn_out_tensor *outs = calloc(n_out ? n_out : 1, sizeof *outs);
    size_t *order = calloc(n_out ? n_out : 1, sizeof *order);
    unsigned threads = o->threads ? o->threads : default_threads();
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    /* Big enough for one round of every worker, and at least one output row. */
    size_t buf_size = (size_t)CHUNK_BYTES * threads;
    for (size_t g = 0; g < p->cs.n_groups; g++) {
        const uint64_t rb = p->cs.groups[g].spec.row_elems * amn_dtype_size(out);
        if (p->cs.groups[g].spec.out_name && rb > buf_size) buf_size = (size_t)rb;
    }
    uint8_t *buf = malloc(buf_size);
    if (!outs || !order || !buf) {
        free(entries), free(outs), free(order), free(buf);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < n_out; k++) outs[k] = entries[k].out, order[k] = k;
    const char *inputs[1] = {amn_model_path(m)};
    amn_sink *sink = NULL;
    void *state = NULL;
    rc = amn_sink_open(o->output, o->overwrite, inputs, inputs[0] ? 1 : 0, &sink, err);
    amn_write_args wa = {.path = o->output,
                         .sink = sink,
                         .tensors = outs,
                         .n_tensors = n_out,
                         .source = m,
                         .kv_overrides = o->kv_overrides,
                         .n_kv_overrides = o->n_kv_overrides,
                         .metadata_file = o->metadata_file};
    bool begun = false;
    if (!rc) rc = f->writer->begin(&wa, &state, order, err);
    if (!rc) begun = true;
    for (size_t k = 0; !rc && k < n_out; k++) {
        const size_t idx = order[k];
        if (idx >= n_out) {
            rc = amn_error_set(err, AMN_E_INVALID, "writer %s returned a bad order", target);
            break;
        }
        const out_entry *e = &entries[idx];
        if (f->writer->tensor_begin && (rc = f->writer->tensor_begin(state, idx, err))) break;
        const uint64_t before = amn_sink_tell(sink);
        if (e->group >= 0) {
            rc = write_group(m, &p->cs.groups[e->group], out, threads, buf, buf_size, sink, err);
            st.dequantized++;
        } else {
            const amn_tensor *t = amn_model_tensor(m, e->tensor);
            rc = write_plain(t, e->dtype, buf, buf_size, sink, err);
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
    if (begun) f->writer->abort(state);
    if (!rc) {
        st.bytes_written = amn_sink_tell(sink);
        rc = amn_sink_commit(sink, err);
    } else {
        amn_sink_abort(sink);
    }
    for (size_t i = 0; i < p->cs.n_tensors; i++)
        if (p->cs.role[i] == AMN_ROLE_ACT_SCALE) st.dropped++;
    free(entries), free(outs), free(order), free(buf);
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
