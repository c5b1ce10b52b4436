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
#include <strings.h>

#include "amn/byteorder.h"
#include "amn/checked.h"
#include "gguf_dequant.h"
#include "gguf_encode.h"
#include "gguf_qpolicy.h"
#include "gguf_quant.h"
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
    bool gguf_input; /* llama-quantize's rule; else one type for every weight */
    bool chained;    /* the sources are a GGUF-to-be (see choose_chained) */
    char opt[32];    /* "llama_ftype=N" */
    const char *opts[1];
} enc_model;

typedef struct enc_tensor {
    const amn_tensor *t;
    uint32_t type;
    const char *name;
    uint64_t ne0, row_bytes;
    bool from_values; /* quantize the core's f32 values (non-GGUF input) */
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

/* Types for a GGUF input: llama-quantize's rule over the model's
 * metadata and tensors; each source's model tensor by name. */
static int choose_gguf(enc_model *mm, const gguf_qpolicy_options *opt, amn_error *err) {
    gguf_qpolicy_model pm;
    gguf_qpolicy_tensor *ts = NULL;
    int rc = gguf_qpolicy_read_model(mm->m, &pm, &ts, err);
    if (rc) return rc;
    const size_t nt = amn_model_tensor_count(mm->m);
    size_t *order = calloc(nt ? nt : 1, sizeof *order);
    if (!order)
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    else
        rc = gguf_qpolicy_choose(&pm, ts, nt, opt, order, mm->types, err);
    free(ts);
    free(order);
    for (size_t i = 0, at = 0; !rc && i < mm->n_src; i++) {
        if (!find_tensor(mm->m, mm->src[i].name, at, &mm->tensor_of[i]))
            rc = amn_error_set(err, AMN_E_INVALID, "tensor %s: not in the input", mm->src[i].name);
        at = mm->tensor_of[i] + 1;
    }
    return rc;
}

/* Sources that are another encoder's GGUF output (amn_convert_options.
 * encode_then: a model folder made an F16 GGUF by the converter's rules),
 * the model being that output's key/values and no tensors: llama-quantize's
 * rule over those keys and the sources as the GGUF tensors they are, one
 * type per source. */
static int choose_chained(enc_model *mm, const gguf_qpolicy_options *opt, amn_error *err) {
    gguf_qpolicy_model pm;
    gguf_qpolicy_tensor *ts = NULL;
    int rc = gguf_qpolicy_read_model(mm->m, &pm, &ts, err); /* keys only: no tensors */
    free(ts);
    if (rc) return rc;
    const size_t n = mm->n_src;
    ts = calloc(n ? n : 1, sizeof *ts);
    size_t *order = calloc(n ? n : 1, sizeof *order);
    if (!ts || !order) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        const amn_encode_source *s = &mm->src[i];
        ts[i].name = s->name;
        ts[i].type = s->dtype == AMN_DTYPE_F32    ? GGUF_TYPE_F32
                     : s->dtype == AMN_DTYPE_F16  ? GGUF_TYPE_F16
                     : s->dtype == AMN_DTYPE_BF16 ? GGUF_TYPE_BF16
                                                  : GGUF_TYPE_COUNT;
        if (ts[i].type == GGUF_TYPE_COUNT || s->ndim == 0 || s->ndim > 4)
            rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                               "tensor %s: %s with %u dimensions cannot be quantized", s->name,
                               amn_dtype_name(s->dtype), s->ndim);
        for (int d = 0; d < 4; d++)
            ts[i].ne[d] = d < (int)s->ndim ? (int64_t)s->shape[s->ndim - 1 - d] : 1;
    }
    if (!rc) rc = gguf_qpolicy_choose(&pm, ts, n, opt, order, mm->types, err);
    free(ts);
    free(order);
    return rc;
}

/* A model of key/values without tensors: another encoder's GGUF output. */
static bool is_chained(const amn_model *m) {
    return amn_model_tensor_count(m) == 0 && amn_model_find_kv(m, "general.architecture");
}

/* A ggml type by name, as llama-quantize's parse_ggml_type takes it
 * (ggml_type_name, case-insensitive). */
static bool parse_type(const char *name, uint32_t *type) {
    for (uint32_t t = 0; t < GGUF_TYPE_COUNT; t++) {
        const gguf_type_traits *tr = gguf_type_traits_get(t);
        if (tr && tr->kind != GGUF_KIND_RETIRED && strcasecmp(tr->name, name) == 0) {
            *type = t;
            return true;
        }
    }
    return false;
}

static bool param_is(const char *p, const char *key, const char **value) {
    const size_t n = strlen(key);
    if (strncmp(p, key, n) != 0 || p[n] != '=') return false;
    *value = p + n + 1;
    return true;
}

static int param_type(const char *key, const char *v, uint32_t *type, amn_error *err) {
    if (!parse_type(v, type))
        return amn_error_set(err, AMN_E_INVALID, "%s: invalid ggml_type '%s'", key, v);
    return AMN_OK;
}

/* llama-quantize's options from the target's parameters (tools/quantize/
 * quantize.cpp: --pure, --leave-output-tensor, --allow-requantize,
 * --output-tensor-type, --token-embedding-type, --tensor-type P=T with P
 * lowered by parse_tensor_type); *ov (malloc'd) holds the --tensor-type
 * pairs, their patterns pointing into the parameters. */
static int parse_params(const amn_encode_options *o, gguf_qpolicy_options *opt,
                        gguf_qpolicy_override **ov, amn_error *err) {
    *ov = NULL;
    const bool has = o->struct_size >= offsetof(amn_encode_options, n_params) + sizeof o->n_params;
    const size_t n = has ? o->n_params : 0;
    if (!n) return AMN_OK;
    size_t bytes = n * sizeof **ov; /* then a copy of the patterns */
    for (size_t i = 0; i < n; i++)
        if (!o->params[i] || strlen(o->params[i]) >= SIZE_MAX / 2 - bytes)
            return amn_error_set(err, AMN_E_INVALID, "GGUF file type %s: bad parameter", o->target);
        else
            bytes += strlen(o->params[i]) + 1;
    *ov = calloc(1, bytes);
    if (!*ov) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    char *text = (char *)(*ov + n);
    for (size_t i = 0; i < n; i++) {
        const char *p = o->params[i] ? o->params[i] : "", *v;
        int rc = AMN_OK;
        if (param_is(p, "pure", &v))
            opt->pure = true;
        else if (param_is(p, "leave_output_tensor", &v))
            opt->leave_output_tensor = true;
        else if (param_is(p, "allow_requantize", &v))
            opt->allow_requantize = true;
        else if (param_is(p, "output_tensor_type", &v))
            rc = param_type("--output-tensor-type", v, &opt->output_tensor_type, err);
        else if (param_is(p, "token_embedding_type", &v))
            rc = param_type("--token-embedding-type", v, &opt->token_embedding_type, err);
        else if (param_is(p, "tensor_type", &v)) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1])
                rc = amn_error_set(err, AMN_E_INVALID, "--tensor-type %s: want PATTERN=TYPE", v);
            else {
                gguf_qpolicy_override *x = &(*ov)[opt->n_overrides++];
                rc = param_type("--tensor-type", eq + 1, &x->type, err);
                memcpy(text, v, (size_t)(eq - v));
                text[eq - v] = '\0';
                x->pattern = text;
                text += eq - v + 1;
            }
        } else
            rc = amn_error_set(err, AMN_E_INVALID, "GGUF file type %s: unknown parameter '%s'",
                               o->target, p);
        if (rc) {
            free(*ov);
            *ov = NULL;
            return rc;
        }
    }
    opt->overrides = *ov;
    return AMN_OK;
}

/* A non-GGUF input's view for the policy: the float sources, names as they
 * are, none of the name-based rules (pure), norms kept. *keep[i] says
 * source i is not offered. */
static int read_sources(const amn_encode_source *src, size_t n, gguf_qpolicy_tensor **out,
                        size_t **index, size_t *n_out, amn_error *err) {
    *out = calloc(n ? n : 1, sizeof **out);
    *index = calloc(n ? n : 1, sizeof **index);
    if (!*out || !*index) {
        free(*out), free(*index);
        *out = NULL, *index = NULL;
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const amn_encode_source *s = &src[i];
        const uint32_t type = s->dequantized               ? GGUF_TYPE_F32
                              : s->dtype == AMN_DTYPE_F32  ? GGUF_TYPE_F32
                              : s->dtype == AMN_DTYPE_F16  ? GGUF_TYPE_F16
                              : s->dtype == AMN_DTYPE_BF16 ? GGUF_TYPE_BF16
                                                           : GGUF_TYPE_COUNT;
        /* Not a float, no GGUF shape, or a norm: written as it is. */
        if (type == GGUF_TYPE_COUNT || s->ndim > 4 || s->ndim == 0 || strstr(s->name, "norm"))
            continue;
        gguf_qpolicy_tensor *t = &(*out)[k];
        t->name = s->name;
        t->type = type;
        for (int d = 0; d < 4; d++)
            t->ne[d] = d < (int)s->ndim ? (int64_t)s->shape[s->ndim - 1 - d] : 1;
        (*index)[k++] = i;
    }
    *n_out = k;
    return AMN_OK;
}

/* Types for a non-GGUF input: every float source offered to the policy in
 * pure mode (the file type's default type, --tensor-type overrides, the
 * fallback for rows that do not divide the block), others kept. */
static int choose_plain(enc_model *mm, gguf_qpolicy_options *opt, amn_error *err) {
    if (opt->output_tensor_type != GGUF_TYPE_COUNT ||
        opt->token_embedding_type != GGUF_TYPE_COUNT || opt->leave_output_tensor)
        return amn_error_set(err, AMN_E_INVALID,
                             "--output-tensor-type, --token-embedding-type and "
                             "--leave-output-tensor need a GGUF input (they name llama.cpp's "
                             "output.weight and token_embd.weight)");
    gguf_qpolicy_tensor *ts = NULL;
    size_t *index = NULL, nt = 0;
    int rc = read_sources(mm->src, mm->n_src, &ts, &index, &nt, err);
    if (rc) return rc;
    size_t *order = calloc(nt ? nt : 1, sizeof *order);
    uint32_t *types = calloc(nt ? nt : 1, sizeof *types);
    gguf_qpolicy_model pm = {.arch = ""};
    opt->pure = true;
    if (!order || !types)
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    else
        rc = gguf_qpolicy_choose(&pm, ts, nt, opt, order, types, err);
    for (size_t k = 0; !rc && k < nt; k++) mm->types[index[k]] = types[k];
    free(ts), free(index), free(order), free(types);
    return rc;
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
    if (!m) return amn_error_set(err, AMN_E_INVALID, "gguf encoder: no input model");
    gguf_qpolicy_options opt = gguf_qpolicy_defaults(ftype);
    gguf_qpolicy_override *ov;
    int rc = parse_params(o, &opt, &ov, err);
    if (rc) return rc;
    enc_model *mm = calloc(1, sizeof *mm);
    const size_t nt = amn_model_tensor_count(m);
    if (mm) {
        mm->m = m;
        mm->src = src;
        mm->n_src = n;
        mm->gguf_input = strcmp(amn_model_format(m), "gguf") == 0;
        mm->chained = !mm->gguf_input && is_chained(m);
        /* per model tensor for a GGUF input, per source otherwise */
        const size_t nty = mm->gguf_input ? nt : n;
        mm->types = malloc((nty ? nty : 1) * sizeof *mm->types);
        for (size_t i = 0; mm->types && i < nty; i++) mm->types[i] = GGUF_TYPE_COUNT;
        mm->tensor_of = calloc(n ? n : 1, sizeof *mm->tensor_of);
    }
    if (!mm || !mm->types || !mm->tensor_of) {
        free(ov);
        enc_end(mm);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    rc = mm->gguf_input ? choose_gguf(mm, &opt, err)
         : mm->chained  ? choose_chained(mm, &opt, err)
                        : choose_plain(mm, &opt, err);
    free(ov);
    if (rc) {
        enc_end(mm);
        return rc;
    }
    snprintf(mm->opt, sizeof mm->opt, "llama_ftype=%d", ftype);
    mm->opts[0] = mm->opt;
    *state = mm;
    return AMN_OK;
}

static uint32_t plain_type(amn_dtype d) {
    return d == AMN_DTYPE_F32    ? GGUF_TYPE_F32
           : d == AMN_DTYPE_F16  ? GGUF_TYPE_F16
           : d == AMN_DTYPE_BF16 ? GGUF_TYPE_BF16
                                 : GGUF_TYPE_COUNT;
}

static int enc_tensor_plan(void *state, size_t i, amn_encode_out *outs, size_t *n_outs,
                           void **tstate, amn_error *err) {
    const enc_model *mm = state;
    *n_outs = 0;
    *tstate = NULL;
    if (i >= mm->n_src) return amn_error_set(err, AMN_E_INVALID, "gguf encoder: bad tensor index");
    const amn_encode_source *s = &mm->src[i];
    const amn_tensor *t = NULL;
    uint32_t type, own;
    if (mm->gguf_input) {
        t = amn_model_tensor(mm->m, mm->tensor_of[i]);
        type = mm->types[mm->tensor_of[i]];
        own = t->dtype == AMN_DTYPE_BLOCK ? t->encoding : plain_type(t->dtype);
    } else if (mm->chained) { /* a GGUF's tensor, as the first step wrote it */
        type = mm->types[i];
        own = plain_type(s->dtype);
    } else {
        type = mm->types[i];
        own = s->dequantized ? GGUF_TYPE_COUNT : plain_type(s->dtype);
        if (type == GGUF_TYPE_COUNT) return AMN_OK; /* not offered: written as it is */
    }
    /* Kept at its own type (llama-quantize copies the bytes), or kept by
     * the user: written as stored. A block input tensor reaches the encoder
     * dequantized, so it is "encoded" at its own type, which copies it. */
    if (s->keep && own != GGUF_TYPE_COUNT) type = own;
    if (s->keep && !mm->gguf_input && !mm->chained) return AMN_OK;
    if (type == own && !s->dequantized) return AMN_OK;
    const gguf_type_traits *tr = gguf_type_traits_get(type);
    if (!tr || s->ndim == 0)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "tensor %s: cannot write GGUF type %u",
                             s->name, type);
    enc_tensor *et = calloc(1, sizeof *et);
    if (!et) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    et->t = t;
    et->name = s->name;
    et->from_values = !mm->gguf_input;
    et->type = type;
    et->ne0 = s->shape[s->ndim - 1];
    uint64_t numel = 1;
    for (uint32_t d = 0; d < s->ndim; d++) numel *= s->shape[d]; /* checked by the reader */
    const uint64_t rows = et->ne0 ? numel / et->ne0 : 0;
    amn_encode_out *e = &outs[0];
    if (!gguf_quant_row_bytes(type, et->ne0, &et->row_bytes) ||
        !amn_mul_u64(rows, et->row_bytes, &e->nbytes)) {
        const uint64_t ne0 = et->ne0;
        free(et);
        return amn_error_set(err, AMN_E_INVALID, "tensor %s: rows of %llu do not fit %s", s->name,
                             (unsigned long long)ne0, tr->name);
    }
    e->name = s->name;
    e->dtype = tr->kind == GGUF_KIND_PLAIN ? tr->plain : AMN_DTYPE_BLOCK;
    e->ndim = s->ndim;
    memcpy(e->shape, s->shape, sizeof e->shape);
    e->unit_bytes = et->row_bytes ? et->row_bytes : 1;
    e->encoding = e->dtype == AMN_DTYPE_BLOCK ? type : 0;
    e->encoding_name = e->dtype == AMN_DTYPE_BLOCK ? tr->name : NULL;
    *n_outs = 1;
    *tstate = et;
    return AMN_OK;
}

/* The |x - decode(q)| of count values x just quantized to q, added to *sum. */
static int add_error(const enc_tensor *et, const float *x, const uint8_t *q, uint64_t count,
                     float *y, double *sum, amn_error *err) {
    const gguf_type_traits *tr = gguf_type_traits_get(et->type);
    const int rc = tr->kind == GGUF_KIND_PLAIN
                       ? amn_convert_elems(tr->plain, q, AMN_DTYPE_F32, y, (size_t)count)
                       : gguf_dequantize(et->type, q, count, AMN_DTYPE_F32, y);
    if (rc)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "%s: cannot decode %s", et->name, tr->name);
    amn_le_to_host_n(y, 4, (size_t)count); /* bytes to host floats, as x */
    for (uint64_t k = 0; k < count; k++) *sum += fabs((double)x[k] - (double)y[k]);
    return AMN_OK;
}

/* Rows [row0, row0 + n) from the core's f32 values (a non-GGUF input,
 * dequantized first when it was quantized, or another encoder's output),
 * GGUF_QCHUNK values at a time; with abs_err, the error of each chunk
 * from the values just read (the sum abs_error makes, in its order, without
 * reading them twice). */
static int quantize_values(const enc_tensor *et, const amn_values *v, uint64_t row0, uint64_t n,
                           uint8_t *dst, double *abs_err, amn_error *err) {
    const gguf_type_traits *tr = gguf_type_traits_get(et->type);
    float *x = malloc(2 * GGUF_QCHUNK * sizeof *x);
    if (!x) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    float *y = x + GGUF_QCHUNK;
    double sum = 0;
    int rc = AMN_OK;
    for (uint64_t r = 0; !rc && r < n; r++)
        for (uint64_t c = 0; !rc && c < et->ne0; c += GGUF_QCHUNK) {
            const uint64_t k = et->ne0 - c < GGUF_QCHUNK ? et->ne0 - c : GGUF_QCHUNK;
            rc = v->read(v->ctx, (row0 + r) * et->ne0 + c, k, x, err);
            if (rc) break;
            if (gguf_quantize(et->type, x, k, dst))
                rc = amn_error_set(err, AMN_E_UNSUPPORTED, "tensor %s: cannot quantize to %s",
                                   et->name, tr->name);
            if (!rc && abs_err) rc = add_error(et, x, dst, k, y, &sum, err);
            dst += k / tr->block_elems * tr->block_bytes;
        }
    free(x);
    if (abs_err) *abs_err += sum;
    return rc;
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
            amn_le_to_host_n(y, 4, (size_t)cnt); /* bytes to host floats */
            if (rc) {
                rc = amn_error_set(err, AMN_E_UNSUPPORTED, "%s: cannot decode %s", et->name,
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
    if (et->from_values) return quantize_values(et, v, row0, n, dst, abs_err, err);
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
