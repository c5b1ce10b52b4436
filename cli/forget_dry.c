/* `amn forget FILE.gguf --to TYPE --dry-run`: the sizes llama-quantize's
 * --dry-run prints (src/llama-quant.cpp llama_model_quantize_impl at
 * llama.cpp 3af988fab), from the outputs the encoder plans
 * (amn_convert_outputs), nothing written: a line per tensor in its walk
 * order, then the model and quant sizes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct dry_pair {
    const amn_tensor *in;
    amn_out_tensor out; /* name copied below */
    char *name;
    char type[32]; /* the output's type, ggml's spelling */
    int layer;     /* weight_name_comparer: sscanf "blk.%d." of the input name */
} dry_pair;

typedef struct dry_list {
    dry_pair *p;
    size_t n, cap;
    bool oom;
} dry_list;

/* ggml_type_name's spelling of a type amn names "Q4_K" / "F16". */
static void ggml_name(const char *amn, char *buf, size_t size) {
    size_t n = 0;
    for (; amn[n] && n + 1 < size; n++)
        buf[n] = (char)(amn[n] >= 'A' && amn[n] <= 'Z' ? amn[n] + 32 : amn[n]);
    buf[n] = '\0';
    if (n >= 2 && buf[n - 2] == '_' && buf[n - 1] == 'k') buf[n - 1] = 'K';
}

static void collect(void *user, const amn_out_tensor *t) {
    dry_list *l = user;
    if (l->oom) return;
    if (l->n == l->cap) {
        const size_t cap = l->cap ? l->cap * 2 : 64;
        dry_pair *p = realloc(l->p, cap * sizeof *p);
        if (!p) {
            l->oom = true;
            return;
        }
        l->p = p;
        l->cap = cap;
    }
    dry_pair *d = &l->p[l->n];
    memset(d, 0, sizeof *d);
    d->out = *t;
    d->name = strdup(t->name);
    if (!d->name) {
        l->oom = true;
        return;
    }
    d->out.name = d->name;
    d->out.encoding_name = NULL; /* not kept past the call: its spelling is in type */
    ggml_name(t->dtype == AMN_DTYPE_BLOCK && t->encoding_name ? t->encoding_name
                                                              : amn_dtype_name(t->dtype),
              d->type, sizeof d->type);
    l->n++;
}

static const char *in_type(const amn_tensor *t, char *buf, size_t size) {
    ggml_name(t->dtype == AMN_DTYPE_BLOCK && t->encoding_name ? t->encoding_name
                                                              : amn_dtype_name(t->dtype),
              buf, size);
    return buf;
}

static int layer_of(const char *name) {
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) < 1) l = -1;
    return l;
}

static int cmp_pairs(const void *x, const void *y) {
    const dry_pair *a = x, *b = y;
    if (a->layer != b->layer) return a->layer < b->layer ? -1 : 1;
    return strcmp(a->in->name, b->in->name);
}

/* Layers named by the prune_layers= parameters: an input tensor whose first
 * "blk.N." has N among them has no output. */
static bool pruned(const cli_args *a, const char *name) {
    const char *p = strstr(name, "blk.");
    for (; p; p = strstr(p + 1, "blk.")) {
        const char *d = p + 4, *e = d;
        while (*e >= '0' && *e <= '9') e++;
        if (e > d && *e == '.') break;
    }
    if (!p) return false;
    const long blk = strtol(p + 4, NULL, 10);
    for (size_t i = 0; i < a->n_enc_params; i++) {
        if (strncmp(a->enc_params[i], "prune_layers=", 13) != 0) continue;
        for (const char *c = a->enc_params[i] + 13; *c;) {
            char *end;
            if (strtol(c, &end, 10) == blk && end > c) return true;
            c = *end ? end + 1 : end;
        }
    }
    return false;
}

bool cli_dry_run(const cli_args *a) {
    for (size_t i = 0; i < a->n_enc_params; i++)
        if (strcmp(a->enc_params[i], "dry_run=1") == 0) return true;
    return false;
}

/* Pair the outputs (model order, pruned ones absent) with their inputs. */
static int pair(const amn_model *m, const cli_args *a, dry_list *l, uint64_t *n_elements,
                amn_error *err) {
    const size_t nt = amn_model_tensor_count(m);
    size_t k = 0;
    *n_elements = 0;
    for (size_t j = 0; j < nt; j++) {
        const amn_tensor *t = amn_model_tensor(m, j);
        uint64_t ne = 0;
        amn_tensor_numel(t, &ne);
        *n_elements += ne;
        if (pruned(a, t->name)) continue;
        if (k == l->n)
            return amn_error_set(err, AMN_E_INVALID, "dry run: tensor %s has no output", t->name);
        l->p[k].in = t;
        l->p[k].layer = layer_of(t->name);
        k++;
    }
    if (k != l->n) return amn_error_set(err, AMN_E_INVALID, "dry run: outputs and inputs differ");
    return AMN_OK;
}

static void print_line(const dry_pair *d, size_t idx, size_t n_tensors, uint64_t *org,
                       uint64_t *new_) {
    char shape[256], ti[32];
    const amn_tensor *t = d->in;
    int w = 0;
    for (int i = 0; i < 4; i++) { /* llama_format_tensor_shape: ne[0] first, 4 dims */
        const uint64_t ne = i < (int)t->ndim ? t->shape[t->ndim - 1 - i] : 1;
        w += snprintf(shape + w, sizeof shape - (size_t)w, i ? ", %6" PRIu64 : "%6" PRIu64, ne);
    }
    printf("[%4zu/%4zu] %-36s - [%s], type = %6s, ", idx, n_tensors, d->out.name, shape,
           in_type(t, ti, sizeof ti));
    const bool same =
        d->out.dtype == t->dtype && (t->dtype != AMN_DTYPE_BLOCK || d->out.encoding == t->encoding);
    if (same)
        printf("size = %8.3f MiB\n", t->nbytes / 1024.0 / 1024.0);
    else
        printf("size = %8.2f MiB -> %8.2f MiB (%s)\n", t->nbytes / 1024.0 / 1024.0,
               d->out.nbytes / 1024.0 / 1024.0, d->type);
    *org += t->nbytes;
    *new_ += same ? t->nbytes : d->out.nbytes;
}

int cli_forget_dry_run(const amn_ctx *ctx, const cli_args *a, const cli_input *in,
                       const amn_convert_options *o) {
    dry_list l = {0};
    amn_error err = {0};
    if (strcmp(amn_model_format(in->m), "gguf") != 0 || o->encode_then) {
        amn_error_set(&err, AMN_E_INVALID,
                      "--dry-run needs a GGUF input (it prints llama-quantize's sizes)");
        return cli_fail(&err);
    }
    amn_convert_options oo = *o;
    oo.output = NULL;
    int rc = amn_convert_outputs(ctx, in->m, in->p, &oo, collect, &l, &err);
    if (!rc && l.oom) rc = amn_error_set(&err, AMN_E_NOMEM, "out of memory");
    uint64_t n_elements = 0, org = 0, new_ = 0;
    if (!rc) rc = pair(in->m, a, &l, &n_elements, &err);
    if (!rc) {
        qsort(l.p, l.n, sizeof *l.p, cmp_pairs);
        for (size_t k = 0; k < l.n; k++)
            print_line(&l.p[k], k + 1, amn_model_tensor_count(in->m), &org, &new_);
        const double elems = n_elements ? (double)n_elements : 1.0;
        printf("llama_model_quantize_impl: model size  = %8.2f MiB (%.2f BPW)\n",
               org / 1024.0 / 1024.0, org * 8.0 / elems);
        printf("llama_model_quantize_impl: quant size  = %8.2f MiB (%.2f BPW)\n",
               new_ / 1024.0 / 1024.0, new_ * 8.0 / elems);
    }
    for (size_t k = 0; k < l.n; k++) free(l.p[k].name);
    free(l.p);
    return rc ? cli_fail(&err) : EXIT_OK;
}
