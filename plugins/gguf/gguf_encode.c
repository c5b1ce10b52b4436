/* The encode direction of the "gguf" scheme: `amn forget model.gguf --to
 * Q4_K_M` writes the file llama-quantize writes without an importance matrix.
 *
 * begin() runs llama-quantize's per-tensor rule (gguf_qpolicy_choose) over
 * the input model's metadata and tensors, so every refusal it would make
 * (importance matrix, requantizing, no fallback) happens before any output
 * exists; tensor() declares each tensor at its chosen type (a tensor kept at
 * its own type, norms among them, passes through unchanged); fill() quantizes
 * whole rows with gguf_quantize_tensor_rows, which reads the stored tensor
 * exactly as llama-quantize does (F16/BF16 widened to f32). The writer is
 * asked, through writer_options, for what llama-quantize does to the file
 * itself: its tensor order and the general.file_type /
 * general.quantization_version keys (llama_ftype=N, see gguf_writer.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/checked.h"
#include "gguf_dequant.h"
#include "gguf_encode.h"
#include "gguf_qpolicy.h"
#include "gguf_quant_model.h"
#include "gguf_types.h"

/* llama-quantize's QUANT_OPTIONS names (matched case-insensitively by the
 * core). The importance-matrix types are listed so that asking for one gets
 * llama-quantize's own refusal rather than "no plugin encodes it". */
static const char *const targets[] = {
    "Q4_0",   "Q4_1",   "Q5_0",      "Q5_1",   "Q8_0",  "Q2_K",    "Q3_K_S", "Q3_K_M", "Q3_K_L",
    "Q4_K_S", "Q4_K_M", "Q5_K_S",    "Q5_K_M", "Q6_K",  "IQ4_NL",  "IQ4_XS", "IQ3_S",  "IQ3_M",
    "TQ1_0",  "TQ2_0",  "MXFP4_MOE", "F16",    "BF16",  "F32",     "Q1_0",   "Q2_0",   "IQ2_XXS",
    "IQ2_XS", "IQ2_S",  "IQ2_M",     "IQ1_S",  "IQ1_M", "IQ3_XXS", "IQ3_XS", "Q2_K_S", NULL};

typedef struct enc_model {
    const amn_model *m;
    uint32_t *types;   /* per model tensor: llama-quantize's type */
    size_t *tensor_of; /* per source: its model tensor */
    const amn_encode_source *src;
    size_t n_src;
    char opt[32]; /* "llama_ftype=N" */
    const char *opts[1];
} enc_model;

typedef struct enc_tensor {
    const amn_tensor *t;
    uint32_t type;
    uint64_t ne0, row_bytes;
} enc_tensor;

static void enc_end(void *state) {
    enc_model *mm = state;
    if (!mm) return;
    free(mm->types);
    free(mm->tensor_of);
    free(mm);
}

/* Source i's tensor in the model, by name: sources follow the model's order,
 * so the search starts where the last one matched. */
static bool find_tensor(const amn_model *m, const char *name, size_t from, size_t *out) {
    const size_t n = amn_model_tensor_count(m);
    for (size_t k = 0; k < n; k++) {
        const size_t j = (from + k) % n;
        if (strcmp(amn_model_tensor(m, j)->name, name) == 0) {
            *out = j;
            return true;
        }
    }
    return false;
}

static int enc_begin(const amn_encode_options *o, const amn_encode_source *src, size_t n,
                     void **state, amn_error *err) {
    *state = NULL;
    int ftype;
    if (!gguf_ftype_parse(o->target, &ftype))
        return amn_error_set(err, AMN_E_INVALID, "unknown GGUF file type %s", o->target);
    if (o->block_size)
        return amn_error_set(err, AMN_E_INVALID,
                             "GGUF file type %s has fixed block sizes (no --block-size)",
                             gguf_ftype_name(ftype));
    const amn_model *m =
        o->struct_size >= offsetof(amn_encode_options, model) + sizeof o->model ? o->model : NULL;
    if (!m || strcmp(amn_model_format(m), "gguf") != 0)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: GGUF file type %s needs a GGUF input (llama-quantize's "
                             "per-tensor rule reads GGUF tensor names and metadata); convert to "
                             "GGUF first",
                             gguf_ftype_name(ftype));
    gguf_qpolicy_model pm;
    gguf_qpolicy_tensor *ts = NULL;
    int rc = gguf_qpolicy_read_model(m, &pm, &ts, err);
    if (rc) return rc;
    const size_t nt = amn_model_tensor_count(m);
    enc_model *mm = calloc(1, sizeof *mm);
    size_t *order = calloc(nt ? nt : 1, sizeof *order);
    if (mm) {
        mm->types = calloc(nt ? nt : 1, sizeof *mm->types);
        mm->tensor_of = calloc(n ? n : 1, sizeof *mm->tensor_of);
    }
    if (!mm || !order || !mm->types || !mm->tensor_of) {
        free(ts);
        free(order);
        enc_end(mm);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    const gguf_qpolicy_options opt = gguf_qpolicy_defaults(ftype);
    rc = gguf_qpolicy_choose(&pm, ts, nt, &opt, order, mm->types, err);
    free(ts);
    free(order);
    for (size_t i = 0, at = 0; !rc && i < n; i++) {
        if (!find_tensor(m, src[i].name, at, &mm->tensor_of[i]))
            rc = amn_error_set(err, AMN_E_INVALID, "tensor %s: not in the input", src[i].name);
        at = mm->tensor_of[i] + 1;
    }
    if (rc) {
        enc_end(mm);
        return rc;
    }
    mm->m = m;
    mm->src = src;
    mm->n_src = n;
    snprintf(mm->opt, sizeof mm->opt, "llama_ftype=%d", ftype);
    mm->opts[0] = mm->opt;
    *state = mm;
    return AMN_OK;
}

static int enc_tensor_plan(void *state, size_t i, amn_encode_out *outs, size_t *n_outs,
                           void **tstate, amn_error *err) {
    const enc_model *mm = state;
    *n_outs = 0;
    *tstate = NULL;
    if (i >= mm->n_src) return amn_error_set(err, AMN_E_INVALID, "gguf encoder: bad tensor index");
    const amn_encode_source *s = &mm->src[i];
    const size_t j = mm->tensor_of[i];
    const amn_tensor *t = amn_model_tensor(mm->m, j);
    uint32_t type = mm->types[j];
    const uint32_t own = t->dtype == AMN_DTYPE_BLOCK  ? t->encoding
                         : t->dtype == AMN_DTYPE_F32  ? GGUF_TYPE_F32
                         : t->dtype == AMN_DTYPE_F16  ? GGUF_TYPE_F16
                         : t->dtype == AMN_DTYPE_BF16 ? GGUF_TYPE_BF16
                                                      : GGUF_TYPE_COUNT;
    /* Kept at its own type (llama-quantize copies the bytes), or kept by
     * the user: written as stored. A block input tensor reaches the encoder
     * dequantized, so it is "encoded" at its own type, which copies it. */
    if (s->keep && own != GGUF_TYPE_COUNT) type = own;
    if (type == own && !s->dequantized) return AMN_OK;
    const gguf_type_traits *tr = gguf_type_traits_get(type);
    if (!tr || t->ndim == 0)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "tensor %s: cannot write GGUF type %u",
                             t->name, type);
    enc_tensor *et = calloc(1, sizeof *et);
    if (!et) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    et->t = t;
    et->type = type;
    et->ne0 = t->shape[t->ndim - 1];
    uint64_t numel = 1;
    for (uint32_t d = 0; d < t->ndim; d++) numel *= t->shape[d]; /* checked by the reader */
    const uint64_t rows = et->ne0 ? numel / et->ne0 : 0;
    amn_encode_out *e = &outs[0];
    if (!gguf_quant_row_bytes(type, et->ne0, &et->row_bytes) ||
        !amn_mul_u64(rows, et->row_bytes, &e->nbytes)) {
        const uint64_t ne0 = et->ne0;
        free(et);
        return amn_error_set(err, AMN_E_INVALID, "tensor %s: rows of %llu do not fit %s", t->name,
                             (unsigned long long)ne0, tr->name);
    }
    e->name = s->name;
    e->dtype = tr->kind == GGUF_KIND_PLAIN ? tr->plain : AMN_DTYPE_BLOCK;
    e->ndim = t->ndim;
    memcpy(e->shape, t->shape, sizeof e->shape);
    e->unit_bytes = et->row_bytes ? et->row_bytes : 1;
    e->encoding = e->dtype == AMN_DTYPE_BLOCK ? type : 0;
    e->encoding_name = e->dtype == AMN_DTYPE_BLOCK ? tr->name : NULL;
    *n_outs = 1;
    *tstate = et;
    return AMN_OK;
}

/* Sum of |x - decode(q)| over rows [row0, row0 + n) just written to q. */
static int abs_error(const enc_tensor *et, const amn_values *v, uint64_t row0, uint64_t n,
                     const uint8_t *q, double *acc, amn_error *err) {
    const gguf_type_traits *tr = gguf_type_traits_get(et->type);
    float *x = malloc(2 * GGUF_QCHUNK * sizeof *x);
    if (!x) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    float *y = x + GGUF_QCHUNK;
    int rc = AMN_OK;
    double sum = 0;
    for (uint64_t r = 0; !rc && r < n; r++)
        for (uint64_t e0 = 0; !rc && e0 < et->ne0; e0 += GGUF_QCHUNK) {
            const uint64_t cnt = et->ne0 - e0 < GGUF_QCHUNK ? et->ne0 - e0 : GGUF_QCHUNK;
            const uint8_t *blocks = q + r * et->row_bytes + e0 / tr->block_elems * tr->block_bytes;
            rc = v->read(v->ctx, (row0 + r) * et->ne0 + e0, cnt, x, err);
            if (rc) break;
            if (tr->kind == GGUF_KIND_PLAIN)
                rc = amn_convert_elems(tr->plain, blocks, AMN_DTYPE_F32, y, (size_t)cnt);
            else
                rc = gguf_dequantize(et->type, blocks, cnt, AMN_DTYPE_F32, y);
            if (rc) {
                rc = amn_error_set(err, AMN_E_UNSUPPORTED, "%s: cannot decode %s", et->t->name,
                                   tr->name);
                break;
            }
            for (uint64_t k = 0; k < cnt; k++) sum += fabs((double)x[k] - (double)y[k]);
        }
    free(x);
    *acc += sum;
    return rc;
}

static int enc_fill(const void *tstate, size_t out, uint64_t row0, uint64_t n, const amn_values *v,
                    void *dst, double *abs_err, amn_error *err) {
    const enc_tensor *et = tstate;
    if (out != 0) return amn_error_set(err, AMN_E_INVALID, "gguf encoder: bad output");
    int rc = gguf_quantize_tensor_rows(et->t, et->type, row0, n, dst, err);
    if (!rc && abs_err) rc = abs_error(et, v, row0, n, dst, abs_err, err);
    return rc;
}

static void tensor_free(void *tstate) {
    free(tstate);
}

static int enc_writer_options(void *state, const char *const **options, size_t *n, amn_error *err) {
    (void)err;
    enc_model *mm = state;
    *options = mm->opts;
    *n = 1;
    return AMN_OK;
}

const amn_encoder gguf_encoder = {
    .struct_size = sizeof(amn_encoder),
    .targets = targets,
    .begin = enc_begin,
    .tensor = enc_tensor_plan,
    .fill = enc_fill,
    .tensor_free = tensor_free,
    .end = enc_end,
    .writer_options = enc_writer_options,
};
