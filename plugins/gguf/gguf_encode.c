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
#include "gguf_imatrix.h"
#include "gguf_qopts.h"
#include "gguf_qpolicy.h"
#include "gguf_quant.h"
#include "gguf_quant_model.h"
#include "gguf_types.h"
#include "gguf_validate.h"

/* llama-quantize's QUANT_OPTIONS names (matched case-insensitively by the
 * core). The importance-matrix types are listed so that asking for one gets
 * llama-quantize's own refusal rather than "no plugin encodes it". */
static const char *const targets[] = {
    "Q4_0",    "Q4_1",   "Q5_0",    "Q5_1",   "Q8_0",      "Q2_K",  "Q3_K_S", "Q3_K_M",
    "Q3_K_L",  "Q4_K_S", "Q4_K_M",  "Q5_K_S", "Q5_K_M",    "Q6_K",  "IQ4_NL", "IQ4_XS",
    "IQ3_S",   "IQ3_M",  "TQ1_0",   "TQ2_0",  "MXFP4_MOE", "F16",   "BF16",   "F32",
    "Q1_0",    "Q2_0",   "IQ2_XXS", "IQ2_XS", "IQ2_S",     "IQ2_M", "IQ1_S",  "IQ1_M",
    "IQ3_XXS", "IQ3_XS", "Q2_K_S",  "Q3_K",   "Q4_K",      "Q5_K",  "COPY",   NULL};

typedef struct enc_model {
    const amn_model *m;
    uint32_t *types;   /* per model tensor: llama-quantize's type */
    size_t *tensor_of; /* per source: its model tensor */
    const amn_encode_source *src;
    size_t n_src;
    bool gguf_input; /* llama-quantize's rule; else one type for every weight */
    bool chained;    /* the sources are a GGUF-to-be (see choose_chained) */
    int ftype;
    gguf_imatrix *im;  /* --imatrix, NULL without */
    const float **qw;  /* per source: its importance-matrix weights, or NULL */
    gguf_qopts_enc q;  /* gguf_qopts.h: the file-shaping options */
    char **renamed;    /* with --prune-layers: per model tensor, NULL = pruned */
    uint32_t n_layers; /* with --prune-layers: the block count written */
    char arch[64];
    char **wopts; /* gguf_qopts_writer_options, then the quantize.imatrix.* keys */
    size_t n_wopts;
} enc_model;

typedef struct enc_tensor {
    const amn_tensor *t;
    uint32_t type;
    const char *name;
    uint64_t ne0, ne1, row_bytes;
    const float *qw;  /* importance-matrix weights (ne0 per matrix), or NULL */
    bool from_values; /* quantize the core's f32 values (non-GGUF input) */
} enc_tensor;

static void enc_end(void *state) {
    enc_model *mm = state;
    if (!mm) return;
    free(mm->types);
    free(mm->tensor_of);
    free(mm->qw);
    gguf_imatrix_free(mm->im);
    if (mm->renamed) gguf_qopts_free_strings(mm->renamed, amn_model_tensor_count(mm->m));
    gguf_qopts_free_strings(mm->wopts, mm->n_wopts);
    gguf_qopts_enc_free(&mm->q);
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
/* COPY writes the file type llama.cpp's loader reads from the input:
 * general.file_type (a u32, else the loader's "wrong type" error), or the
 * one it guesses from the tensors' types (with the GUESSED bit). */
static int loader_ftype(const amn_model *m, const gguf_qpolicy_tensor *ts, size_t n, int *ftype,
                        amn_error *err) {
    const amn_kv *kv = amn_model_find_kv(m, "general.file_type");
    if (kv && kv->type != AMN_KV_U32)
        return amn_error_set(err, AMN_E_PARSE,
                             "key general.file_type has a wrong type: expected u32");
    uint32_t v = 0;
    if (kv)
        memcpy(&v, kv->data, sizeof v);
    else
        v = gguf_qpolicy_guess_ftype(ts, n);
    if (!kv && v == GGUF_TYPE_COUNT) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    *ftype = (int)v;
    return AMN_OK;
}

static int choose_gguf(enc_model *mm, const gguf_qpolicy_options *opt, amn_error *err) {
    gguf_qpolicy_model pm;
    gguf_qpolicy_tensor *ts = NULL;
    int rc = gguf_qpolicy_read_model(mm->m, &pm, &ts, err);
    if (!rc) rc = gguf_qopts_policy_overrides(&mm->q, &pm, err);
    if (rc) {
        free(ts);
        return rc;
    }
    snprintf(mm->arch, sizeof mm->arch, "%s", pm.arch);
    const size_t nt = amn_model_tensor_count(mm->m);
    if (opt->only_copy) rc = loader_ftype(mm->m, ts, nt, &mm->ftype, err);
    size_t nv = nt; /* --prune-layers: the kept tensors, renamed; types via index */
    size_t *order = calloc(nt ? nt : 1, sizeof *order), *index = NULL;
    uint32_t *types = mm->types;
    if (!order)
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    else if (mm->q.n_prune) {
        mm->renamed = calloc(nt ? nt : 1, sizeof *mm->renamed);
        index = calloc(nt ? nt : 1, sizeof *index);
        types = calloc(nt ? nt : 1, sizeof *types);
        rc = mm->renamed && index && types
                 ? gguf_qopts_prune_view(&mm->q, ts, &nv, index, mm->renamed, &mm->n_layers, err)
                 : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    if (!rc) rc = gguf_qpolicy_choose(&pm, ts, nv, opt, order, types, err);
    for (size_t k = 0; !rc && index && k < nv; k++) mm->types[index[k]] = types[k];
    if (types != mm->types) free(types);
    free(index);
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
    if (!rc && opt->only_copy) rc = loader_ftype(mm->m, ts, n, &mm->ftype, err);
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

/* One --tensor-type PATTERN=TYPE (what names where it came from) into
 * *x, the pattern copied to *text (the policy lowers it). */
static int add_override(const char *what, const char *v, gguf_qpolicy_override *x, char **text,
                        amn_error *err) {
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || !eq[1])
        return amn_error_set(err, AMN_E_INVALID, "%s %s: want PATTERN=TYPE", what, v);
    int rc = param_type(what, eq + 1, &x->type, err);
    memcpy(*text, v, (size_t)(eq - v));
    (*text)[eq - v] = '\0';
    x->pattern = *text;
    *text += eq - v + 1;
    return rc;
}

/* llama-quantize's options from the target's parameters (tools/quantize/
 * quantize.cpp: --pure, --leave-output-tensor, --allow-requantize,
 * --output-tensor-type, --token-embedding-type, --tensor-type P=T with P
 * lowered by parse_tensor_type, and those of gguf_qopts.h into *q, a
 * --tensor-type-file's words taking its place among the --tensor-type);
 * *ov (malloc'd) holds the --tensor-type pairs, their patterns pointing
 * into it. */
static int parse_params(const amn_encode_options *o, gguf_qpolicy_options *opt,
                        gguf_qpolicy_override **ov, gguf_qopts_enc *q, const char **imatrix,
                        amn_error *err) {
    *ov = NULL;
    *imatrix = NULL;
    const bool has = o->struct_size >= offsetof(amn_encode_options, n_params) + sizeof o->n_params;
    const size_t n = has ? o->n_params : 0;
    if (!n) return AMN_OK;
    bool *taken = calloc(n, sizeof *taken);
    if (!taken) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = AMN_OK;
    for (size_t i = 0; !rc && i < n; i++)
        if (!o->params[i])
            rc = amn_error_set(err, AMN_E_INVALID, "GGUF file type %s: bad parameter", o->target);
        else
            rc = gguf_qopts_enc_param(q, i, o->params[i], &taken[i], err);
    if (!rc) rc = gguf_qopts_enc_check(q, err);
    /* the pairs, then a copy of the patterns */
    size_t bytes = (n + q->n_file_words) * sizeof **ov + q->file_bytes;
    for (size_t i = 0; !rc && i < n; i++)
        if (strlen(o->params[i]) >= SIZE_MAX / 2 - bytes)
            rc = amn_error_set(err, AMN_E_INVALID, "GGUF file type %s: bad parameter", o->target);
        else
            bytes += strlen(o->params[i]) + 1;
    if (!rc && !(*ov = calloc(1, bytes))) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    char *text = rc ? NULL : (char *)(*ov + n + q->n_file_words);
    for (size_t i = 0, f = 0; !rc && i < n; i++) {
        const char *p = o->params[i], *v;
        if (taken[i]) { /* a --tensor-type-file's words, in its place */
            for (; !rc && f < q->n_files && q->files[f].param == i; f++)
                for (size_t k = 0; !rc && k < q->files[f].n; k++)
                    rc = add_override(q->files[f].what, q->files[f].words[k],
                                      &(*ov)[opt->n_overrides++], &text, err);
            continue;
        }
        if (param_is(p, "pure", &v))
            opt->pure = true;
        else if (param_is(p, "leave_output_tensor", &v))
            opt->leave_output_tensor = true;
        else if (param_is(p, "allow_requantize", &v))
            opt->allow_requantize = true;
        else if (param_is(p, "keep_split", &v))
            opt->input_order = true;
        else if (param_is(p, "imatrix", &v)) {
            if (!*v) rc = amn_error_set(err, AMN_E_INVALID, "--imatrix needs a file");
            *imatrix = v;
        } else if (param_is(p, "output_tensor_type", &v))
            rc = param_type("--output-tensor-type", v, &opt->output_tensor_type, err);
        else if (param_is(p, "token_embedding_type", &v))
            rc = param_type("--token-embedding-type", v, &opt->token_embedding_type, err);
        else if (param_is(p, "tensor_type", &v))
            rc = add_override("--tensor-type", v, &(*ov)[opt->n_overrides++], &text, err);
        else
            rc = amn_error_set(err, AMN_E_INVALID, "GGUF file type %s: unknown parameter '%s'",
                               o->target, p);
    }
    free(taken);
    if (rc) {
        free(*ov);
        *ov = NULL;
        return rc;
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

/* ---- importance matrix ---------------------------------------------------- */

static bool source_type(const enc_model *mm, size_t i, bool rename, uint32_t *out,
                        uint32_t *own_out);
static const char *source_name(const enc_model *mm, size_t i);

static bool is_token_embd(const char *n) {
    return strcmp(n, "token_embd.weight") == 0 || strcmp(n, "per_layer_token_embd.weight") == 0;
}

/* Each encoded source's weights, checked as llama_model_quantize_impl checks
 * them when it reaches the tensor (lq:1199-1227), but all before any
 * output exists: an entry of the wrong length is an error (token_embd's is
 * ignored); a tensor without an entry is quantized without weights unless
 * its type needs them (tensor_requires_imatrix: llama-quantize stops
 * halfway, leaving a partial file; IQ2_XXS / IQ2_XS / IQ1_S: ggml aborts). */
static int imatrix_weights(enc_model *mm, amn_error *err) {
    if (mm->im && !(mm->qw = calloc(mm->n_src ? mm->n_src : 1, sizeof *mm->qw)))
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < mm->n_src; i++) {
        const amn_encode_source *s = &mm->src[i];
        const char *name = source_name(mm, i);
        uint32_t type, own;
        if (!name || !source_type(mm, i, strcmp(name, s->name) != 0, &type, &own) || s->ndim == 0)
            continue;
        if (type == own) continue; /* a block tensor copied at its own type */
        const float *w = NULL;
        uint64_t n = 0;
        if (mm->im) w = gguf_imatrix_find(mm->im, s->name, &n);
        if (w) {
            const uint64_t ne0 = s->shape[s->ndim - 1];
            const uint64_t ne2 = s->ndim >= 3 ? s->shape[s->ndim - 3] : 1;
            if (s->ndim == 4 && s->shape[0] > 1)
                return amn_error_set(err, AMN_E_UNSUPPORTED,
                                     "tensor %s: importance-matrix weights for a 4-D tensor",
                                     s->name);
            if (n != ne0 * ne2) {
                if (!is_token_embd(s->name))
                    return amn_error_set(err, AMN_E_INVALID,
                                         "imatrix size %llu is different from tensor size %llu "
                                         "for %s",
                                         (unsigned long long)n, (unsigned long long)(ne0 * ne2),
                                         s->name);
                w = NULL; /* llama-quantize: "imatrix size ... is different", then none */
            }
        }
        if (!w && mm->im && gguf_qpolicy_requires_imatrix(s->name, type, mm->ftype))
            return amn_error_set(err, AMN_E_INVALID,
                                 "missing importance matrix for tensor %s in a very low-bit "
                                 "quantization (%s); nothing was written",
                                 s->name, gguf_type_traits_get(type)->name);
        if (!w && gguf_type_needs_imatrix(type))
            return amn_error_set(err, AMN_E_INVALID,
                                 "tensor %s: %s needs importance-matrix data for it (ggml "
                                 "aborts without); nothing was written",
                                 s->name, gguf_type_traits_get(type)->name);
        if (!gguf_type_can_quantize_rows(type, w != NULL))
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "tensor %s: amn does not make %s yet; nothing was written",
                                 s->name, gguf_type_traits_get(type)->name);
        if (mm->qw) mm->qw[i] = w;
    }
    return AMN_OK;
}

/* "llama_kv=KEY=TYPE:VALUE" among the writer's options: after the
 * --override-kv ones, as quantize.cpp appends these to its overrides, and
 * before the block count of --prune-layers, which llama_model_quantize_impl
 * sets after every override. */
static int im_option(enc_model *mm, const char *key, const char *type, const char *v,
                     amn_error *err) {
    char **grown = realloc(mm->wopts, (mm->n_wopts + 1) * sizeof *grown);
    if (!grown) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    mm->wopts = grown;
    /* strings cut at 127 bytes, as the override's buffer cuts them */
    const size_t len = strlen("llama_kv==:") + strlen(key) + strlen(type) + strnlen(v, 127) + 1;
    char *opt = malloc(len);
    if (!opt) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    snprintf(opt, len, "llama_kv=%s=%s:%.127s", key, type, v);
    const size_t at = mm->renamed && mm->n_wopts ? mm->n_wopts - 1 : mm->n_wopts;
    memmove(grown + at + 1, grown + at, (mm->n_wopts - at) * sizeof *grown);
    grown[at] = opt;
    mm->n_wopts++;
    return AMN_OK;
}

static bool imatrix_keeps(const char *name, void *q_) {
    const gguf_qopts_enc *q = q_;
    return gguf_qopts_imatrix_keeps(name, (const char *const *)q->include, q->n_include,
                                    (const char *const *)q->exclude, q->n_exclude);
}

/* The keys llama-quantize adds for an importance matrix, in its order
 * (quantize.cpp main): the file name as given and the first dataset (each
 * cut to 127 bytes by its kv-override buffer), the entry count, and the
 * chunk count when positive. */
static int imatrix_keys(enc_model *mm, const char *path, amn_error *err) {
    char num[32];
    int rc = im_option(mm, "quantize.imatrix.file", "str", path, err);
    const char *ds = gguf_imatrix_dataset(mm->im);
    if (!rc && ds) rc = im_option(mm, "quantize.imatrix.dataset", "str", ds, err);
    snprintf(num, sizeof num, "%zu", gguf_imatrix_count(mm->im));
    if (!rc) rc = im_option(mm, "quantize.imatrix.entries_count", "int", num, err);
    snprintf(num, sizeof num, "%lld", (long long)gguf_imatrix_chunks(mm->im));
    if (!rc && gguf_imatrix_chunks(mm->im) > 0)
        rc = im_option(mm, "quantize.imatrix.chunks_count", "int", num, err);
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
    gguf_qopts_enc q = {0};
    const char *imatrix;
    int rc = parse_params(o, &opt, &ov, &q, &imatrix, err);
    opt.only_copy = strcasecmp(o->target, "COPY") == 0;
    if (rc) {
        gguf_qopts_enc_free(&q);
        return rc;
    }
    enc_model *mm = calloc(1, sizeof *mm);
    if (mm)
        mm->q = q;
    else
        gguf_qopts_enc_free(&q);
    if (mm && imatrix) {
        rc = gguf_imatrix_load(imatrix, &mm->im, err);
        if (rc) {
            free(ov);
            enc_end(mm);
            return rc;
        }
        /* prepare_imatrix: --exclude-weights / --include-weights drop
         * entries; a matrix left without entries is no importance matrix. */
        gguf_imatrix_filter(mm->im, imatrix_keeps, &mm->q);
        opt.has_imatrix = gguf_imatrix_count(mm->im) > 0;
        if (!opt.has_imatrix) {
            gguf_imatrix_free(mm->im);
            mm->im = NULL;
        }
    }
    const size_t nt = amn_model_tensor_count(m);
    if (mm) {
        mm->m = m;
        mm->ftype = ftype;
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
    if (mm->q.n_prune && !mm->gguf_input)
        rc = amn_error_set(err, AMN_E_INVALID, "--prune-layers needs a GGUF input");
    else if (opt.only_copy && !mm->gguf_input && !mm->chained)
        rc = amn_error_set(err, AMN_E_INVALID,
                           "COPY copies a GGUF's tensors as they are: it needs a GGUF input "
                           "(convert --to gguf writes other inputs unquantized)");
    else
        rc = mm->gguf_input ? choose_gguf(mm, &opt, err)
             : mm->chained  ? choose_chained(mm, &opt, err)
                            : choose_plain(mm, &opt, err);
    free(ov);
    if (!rc) rc = imatrix_weights(mm, err);
    if (!rc)
        rc = gguf_qopts_writer_options(&mm->q, mm->ftype, mm->arch, mm->renamed != NULL,
                                       mm->n_layers, &mm->wopts, &mm->n_wopts, err);
    if (!rc && mm->im) rc = imatrix_keys(mm, imatrix, err);
    if (rc) {
        enc_end(mm);
        return rc;
    }
    *state = mm;
    return AMN_OK;
}

static uint32_t plain_type(amn_dtype d) {
    return d == AMN_DTYPE_F32    ? GGUF_TYPE_F32
           : d == AMN_DTYPE_F16  ? GGUF_TYPE_F16
           : d == AMN_DTYPE_BF16 ? GGUF_TYPE_BF16
                                 : GGUF_TYPE_COUNT;
}

/* Source i's type in the output; false when it is written as stored (no
 * encoding). rename: its name changes (--prune-layers), so it is written
 * anew even at its own type. */
static bool source_type(const enc_model *mm, size_t i, bool rename, uint32_t *out,
                        uint32_t *own_out) {
    const amn_encode_source *s = &mm->src[i];
    uint32_t type, own;
    if (mm->gguf_input) {
        const amn_tensor *t = amn_model_tensor(mm->m, mm->tensor_of[i]);
        type = mm->types[mm->tensor_of[i]];
        own = t->dtype == AMN_DTYPE_BLOCK ? t->encoding : plain_type(t->dtype);
    } else if (mm->chained) { /* a GGUF's tensor, as the first step wrote it */
        type = mm->types[i];
        own = plain_type(s->dtype);
    } else {
        type = mm->types[i];
        own = s->dequantized ? GGUF_TYPE_COUNT : plain_type(s->dtype);
        if (type == GGUF_TYPE_COUNT) return false; /* not offered: written as it is */
    }
    /* Kept at its own type (llama-quantize copies the bytes), or kept by
     * the user: written as stored. A block input tensor reaches the encoder
     * dequantized, so it is "encoded" at its own type, which copies it. */
    if (s->keep && own != GGUF_TYPE_COUNT) type = own;
    if (s->keep && !mm->gguf_input && !mm->chained) return false;
    if (type == own && !s->dequantized && !rename) return false;
    *out = type;
    *own_out = own;
    return true;
}

/* Source i's name in the output (--prune-layers renumbers layers); NULL
 * when it is pruned. */
static const char *source_name(const enc_model *mm, size_t i) {
    const amn_encode_source *s = &mm->src[i];
    return mm->gguf_input && mm->renamed ? mm->renamed[mm->tensor_of[i]] : s->name;
}

static int enc_tensor_plan(void *state, size_t i, amn_encode_out *outs, size_t *n_outs,
                           void **tstate, amn_error *err) {
    const enc_model *mm = state;
    *n_outs = 0;
    *tstate = NULL;
    if (i >= mm->n_src) return amn_error_set(err, AMN_E_INVALID, "gguf encoder: bad tensor index");
    const amn_encode_source *s = &mm->src[i];
    const char *name = source_name(mm, i);
    if (!name) {
        *n_outs = AMN_ENCODE_DROP;
        return AMN_OK;
    }
    const amn_tensor *t = mm->gguf_input ? amn_model_tensor(mm->m, mm->tensor_of[i]) : NULL;
    uint32_t type, own;
    if (!source_type(mm, i, strcmp(name, s->name) != 0, &type, &own))
        /* written as stored; llama-quantize checks it as it loads it */
        return t && !mm->q.dry_run ? gguf_check_tensor(t, err) : AMN_OK;
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
    et->qw = mm->qw ? mm->qw[i] : NULL;
    et->ne0 = s->shape[s->ndim - 1];
    et->ne1 = s->ndim >= 2 ? s->shape[s->ndim - 2] : 1;
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
    e->name = name;
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

/* The sum of |x[k] - y[k]| in binary64, in four running sums (elements k
 * mod 4) added in a fixed order: a chain of dependent additions, one per
 * value, would take longer than quantizing some types. The order depends
 * only on the piece, never on the thread count. */
static double abs_diff_sum(const float *x, const float *y, uint64_t n) {
    double s[4] = {0, 0, 0, 0};
    uint64_t k = 0;
    for (; k + 4 <= n; k += 4)
        for (int j = 0; j < 4; j++) s[j] += fabs((double)x[k + j] - (double)y[k + j]);
    for (; k < n; k++) s[0] += fabs((double)x[k] - (double)y[k]);
    return (s[0] + s[1]) + (s[2] + s[3]);
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
    *sum += abs_diff_sum(x, y, count);
    return AMN_OK;
}

/* Bytes just written for et, checked as llama-quantize checks what it
 * quantized ("quantized data validation failed"): a block's scale that
 * overflowed F16 (values beyond what the type holds), a value beyond F16.
 * first: the index of their first element in the tensor. */
static int check_written(const enc_tensor *et, const uint8_t *q, uint64_t nbytes, uint64_t first,
                         amn_error *err) {
    const gguf_type_traits *tr = gguf_type_traits_get(et->type);
    uint64_t at;
    const char *what;
    if (gguf_valid_bytes(et->type, q, nbytes, &at, &what)) return AMN_OK;
    return amn_error_set(err, AMN_E_PARSE,
                         "tensor %s quantized to %s holds %s (value %llu): llama-quantize "
                         "refuses it (quantized data validation failed); its values exceed "
                         "what %s holds",
                         et->name, tr->name, what,
                         (unsigned long long)(first + at * tr->block_elems), tr->name);
}

/* Values just read for et, checked as llama-quantize checks what it loads. */
static int check_read(const enc_tensor *et, const float *x, uint64_t n, uint64_t first,
                      amn_simd level, amn_error *err) {
    uint64_t at;
    const char *what;
    return gguf_valid_floats(x, n, level, &at, &what)
               ? AMN_OK
               : gguf_invalid_input(et->name, what, first + at, err);
}

/* Values read from the core per call: whole rows when they are short, as
 * many as make GGUF_QREAD, so that the checks of each read (the input's
 * size, against a file cut short underneath) are paid per 256 KiB of values,
 * not per row. A multiple of every block size. */
#define GGUF_QREAD 65536u

/* Rows [row0, row0 + n) from the core's f32 values (a non-GGUF input,
 * dequantized first when it was quantized, or another encoder's output),
 * GGUF_QREAD values at a time: blocks never straddle rows, and without
 * weights each block is quantized alone. With abs_err, the error of each
 * piece from the values just read (the sum abs_error makes, in its order,
 * without reading them twice). */
static int quantize_values(const enc_tensor *et, const amn_values *v, uint64_t row0, uint64_t n,
                           uint8_t *dst, double *abs_err, amn_error *err) {
    const gguf_type_traits *tr = gguf_type_traits_get(et->type);
    float *x = malloc(2 * GGUF_QREAD * sizeof *x);
    if (!x) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    float *y = x + GGUF_QREAD;
    const amn_simd level = amn_simd_level();
    const uint64_t total = n * et->ne0, base = row0 * et->ne0; /* within the tensor */
    double sum = 0;
    int rc = AMN_OK;
    for (uint64_t c = 0; !rc && c < total; c += GGUF_QREAD) {
        const uint64_t k = total - c < GGUF_QREAD ? total - c : GGUF_QREAD;
        rc = v->read(v->ctx, base + c, k, x, err);
        if (!rc) rc = check_read(et, x, k, base + c, level, err);
        if (rc) break;
        const uint64_t bytes = k / tr->block_elems * tr->block_bytes;
        if (gguf_quantize_simd(et->type, x, k, dst, level))
            rc = amn_error_set(err, AMN_E_UNSUPPORTED, "tensor %s: cannot quantize to %s", et->name,
                               tr->name);
        if (!rc) rc = check_written(et, dst, bytes, base + c, err);
        if (!rc && abs_err) rc = add_error(et, x, dst, k, y, &sum, err);
        dst += bytes;
    }
    free(x);
    if (abs_err) *abs_err += sum;
    return rc;
}

/* quantize_values with importance-matrix weights: whole rows (ggml's
 * legacy types weigh by the whole row), as many per read as make
 * GGUF_QREAD values, each quantized with its matrix's weights. */
static int quantize_values_w(const enc_tensor *et, const amn_values *v, uint64_t row0, uint64_t n,
                             uint8_t *dst, double *abs_err, amn_error *err) {
    const gguf_type_traits *tr = gguf_type_traits_get(et->type);
    if (et->ne0 > SIZE_MAX / (2 * sizeof(float)) - GGUF_QREAD || et->ne0 > INT64_MAX)
        return amn_error_set(err, AMN_E_INVALID, "tensor %s: rows too long", et->name);
    const uint64_t per = et->ne0 >= GGUF_QREAD ? 1 : GGUF_QREAD / et->ne0; /* rows a read */
    float *x = malloc((size_t)(per * et->ne0 + et->ne0) * sizeof *x);
    if (!x) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    float *y = x + per * et->ne0;
    const amn_simd level = amn_simd_level();
    double sum = 0;
    int rc = AMN_OK;
    for (uint64_t r = 0; !rc && r < n; r += per) {
        const uint64_t m = n - r < per ? n - r : per;
        rc = v->read(v->ctx, (row0 + r) * et->ne0, m * et->ne0, x, err);
        if (!rc) rc = check_read(et, x, m * et->ne0, (row0 + r) * et->ne0, level, err);
        for (uint64_t i = 0; !rc && i < m; i++, dst += et->row_bytes) {
            const uint64_t row = row0 + r + i;
            const float *xr = x + i * et->ne0;
            const float *w = et->qw ? et->qw + (et->ne1 ? row / et->ne1 : 0) * et->ne0 : NULL;
            if (gguf_quantize_rows(et->type, xr, 1, (int64_t)et->ne0, w, dst, level))
                rc = amn_error_set(err, AMN_E_UNSUPPORTED, "tensor %s: cannot quantize to %s",
                                   et->name, tr->name);
            if (!rc) rc = check_written(et, dst, et->row_bytes, row * et->ne0, err);
            if (!rc && abs_err) rc = add_error(et, xr, dst, et->ne0, y, &sum, err);
        }
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
            sum += abs_diff_sum(x, y, cnt);
        }
    free(x);
    *acc += sum;
    return rc;
}

static int enc_fill(const void *tstate, size_t out, uint64_t row0, uint64_t n, const amn_values *v,
                    void *dst, double *abs_err, amn_error *err) {
    const enc_tensor *et = tstate;
    if (out != 0) return amn_error_set(err, AMN_E_INVALID, "gguf encoder: bad output");
    if (et->from_values)
        return et->qw || gguf_type_needs_rows(et->type)
                   ? quantize_values_w(et, v, row0, n, dst, abs_err, err)
                   : quantize_values(et, v, row0, n, dst, abs_err, err);
    int rc = gguf_quantize_tensor_rows_w(et->t, et->type, row0, n, et->qw, dst, err);
    if (!rc) rc = check_written(et, dst, n * et->row_bytes, row0 * et->ne0, err);
    if (!rc && abs_err) rc = abs_error(et, v, row0, n, dst, abs_err, err);
    return rc;
}

static void tensor_free(void *tstate) {
    free(tstate);
}

static int enc_writer_options(void *state, const char *const **options, size_t *n, amn_error *err) {
    (void)err;
    enc_model *mm = state;
    *options = (const char *const *)mm->wopts;
    *n = mm->n_wopts;
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
