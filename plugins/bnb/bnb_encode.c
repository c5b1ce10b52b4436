/* The encode direction: tensors as transformers + bitsandbytes save a model
 * quantized with load_in_4bit / load_in_8bit, computed with the arithmetic
 * of bitsandbytes' CUDA kernels (bnb_kernels.c).
 *
 * What is quantized is what transformers quantizes: 2-D "*.weight" tensors of
 * linear layers (F32, F16, BF16 values); embeddings and lm_head stay (its
 * default modules-not-to-convert), as does anything the user keeps; for 4-bit
 * a tensor whose element count is not a multiple of the block size passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "amn/byteorder.h"
#include "amn/checked.h"
#include "amn/simd.h"
#include "bnb_encode.h"
#include "bnb_kernels.h"

#define NESTED_BLOCK 256
#define READ_ELEMS   16384 /* values read per step: cache-sized */

enum { OUT_WEIGHT, OUT_ABSMAX, OUT_QMAP, OUT_NABSMAX, OUT_NQMAP, OUT_BLOB, OUT_SCB, OUT_FORMAT };

typedef struct enc_model {
    bnb_kind kind;
    bool dq;
    uint64_t block;
    const amn_encode_source *src;
    size_t n;
    uint8_t *encode; /* per source: 1 when encoded */
    const char *compute_dtype;
} enc_model;

typedef struct enc_tensor {
    bnb_kind kind;
    bool dq;
    uint64_t n, rows, cols, block, blocks, nblocks;
    float offset;
    const char *dtype_name;
    int role[AMN_ENCODE_MAX_OUTS];
    char *names[AMN_ENCODE_MAX_OUTS];
    size_t n_outs;
    uint64_t blob_len;
} enc_tensor;

static const char *const targets[] = {"bnb-nf4",    "bnb-nf4-dq", "bnb-fp4",
                                      "bnb-fp4-dq", "bnb-int8",   NULL};

static const char *torch_dtype(amn_dtype d) {
    return d == AMN_DTYPE_BF16 ? "bfloat16" : d == AMN_DTYPE_F16 ? "float16" : "float32";
}

/* Modules transformers never converts by default. */
static bool never_converted(const char *name) {
    static const char *const parts[] = {"lm_head", "embed", "wte", "wpe", "word_embeddings"};
    for (size_t k = 0; k < sizeof parts / sizeof *parts; k++)
        if (strstr(name, parts[k])) return true;
    return false;
}

static bool ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool is_linear_weight(const amn_encode_source *s) {
    return s->ndim == 2 && ends_with(s->name, ".weight") &&
           (s->dtype == AMN_DTYPE_F32 || s->dtype == AMN_DTYPE_F16 || s->dtype == AMN_DTYPE_BF16);
}

static int enc_begin(const amn_encode_options *o, const amn_encode_source *src, size_t n,
                     void **state, amn_error *err) {
    *state = NULL;
    if (o->struct_size >= offsetof(amn_encode_options, n_params) + sizeof o->n_params &&
        o->n_params)
        return amn_error_set(err, AMN_E_INVALID, "%s takes no parameters (got %s)", o->target,
                             o->params[0]);
    enc_model *mm = calloc(1, sizeof *mm);
    if (!mm) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    const char *t = o->target;
    mm->kind = strncmp(t, "bnb-fp4", 7) == 0 ? BNB_FP4
               : strcmp(t, "bnb-int8") == 0  ? BNB_INT8
                                             : BNB_NF4;
    mm->dq = ends_with(t, "-dq");
    mm->block = o->block_size ? o->block_size : 64;
    if (mm->kind == BNB_INT8 && o->block_size) {
        free(mm);
        return amn_error_set(err, AMN_E_INVALID,
                             "bnb-int8 quantizes whole rows; --block-size applies to 4-bit only");
    }
    if (mm->kind != BNB_INT8 &&
        (mm->block < 32 || mm->block > 4096 || (mm->block & (mm->block - 1)))) {
        free(mm);
        return amn_error_set(err, AMN_E_INVALID,
                             "block size %llu: bitsandbytes takes a power of two from 32 to 4096",
                             (unsigned long long)o->block_size);
    }
    mm->src = src;
    mm->n = n;
    mm->encode = calloc(n ? n : 1, 1);
    if (!mm->encode) {
        free(mm);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const amn_encode_source *s = &src[i];
        if (!is_linear_weight(s) || s->keep || never_converted(s->name)) continue;
        const uint64_t numel = s->shape[0] * s->shape[1]; /* the core checked the shape */
        if (numel == 0 || (mm->kind != BNB_INT8 && numel % mm->block)) continue;
        mm->encode[i] = 1;
        if (!mm->compute_dtype) mm->compute_dtype = torch_dtype(s->dtype);
    }
    *state = mm;
    return AMN_OK;
}

static void enc_end(void *state) {
    enc_model *mm = state;
    if (!mm) return;
    free(mm->encode);
    free(mm);
}

static void tensor_free(void *state) {
    enc_tensor *t = state;
    if (!t) return;
    for (size_t k = 0; k < t->n_outs; k++) free(t->names[k]);
    free(t);
}

/* The quant_state blob: the keys of QuantState.as_dict(packed=True) in its
 * order, as json.dumps writes them. The nested offset is only known after
 * stats(), so it is written with a fixed width ("%.9e": ten significant
 * digits, enough to give the float32 back) and the size is known upfront. */
static int format_blob(const enc_tensor *t, char *buf, size_t size) {
    int n = snprintf(buf, size,
                     "{\"quant_type\": \"%s\", \"blocksize\": %llu, \"dtype\": \"%s\", "
                     "\"shape\": [%llu, %llu]",
                     t->kind == BNB_FP4 ? "fp4" : "nf4", (unsigned long long)t->block,
                     t->dtype_name, (unsigned long long)t->rows, (unsigned long long)t->cols);
    if (t->dq)
        n += snprintf(buf + n, size - (size_t)n,
                      ", \"nested_blocksize\": %d, \"nested_dtype\": \"float32\", "
                      "\"nested_offset\": %.9e",
                      NESTED_BLOCK, (double)t->offset);
    n += snprintf(buf + n, size - (size_t)n, "}");
    return n;
}

static int add_out(enc_tensor *t, amn_encode_out *o, int role, const char *base, const char *suffix,
                   amn_dtype dtype, uint32_t ndim, uint64_t d0, uint64_t d1, uint64_t unit) {
    const size_t k = t->n_outs;
    const size_t len = strlen(base) + strlen(suffix) + 1;
    if (!(t->names[k] = malloc(len))) return AMN_E_NOMEM;
    snprintf(t->names[k], len, "%s%s", base, suffix);
    t->role[k] = role;
    t->n_outs++;
    o[k].name = t->names[k];
    o[k].dtype = dtype;
    o[k].ndim = ndim;
    o[k].shape[0] = d0;
    o[k].shape[1] = d1;
    uint64_t numel = ndim == 0 ? 1 : ndim == 1 ? d0 : d0 * d1;
    o[k].nbytes = numel * amn_dtype_size(dtype);
    o[k].unit_bytes = unit;
    return AMN_OK;
}

static int enc_tensor_plan(void *state, size_t i, amn_encode_out *outs, size_t *n_outs,
                           void **tstate, amn_error *err) {
    enc_model *mm = state;
    *n_outs = 0;
    *tstate = NULL;
    if (i >= mm->n || !mm->encode[i]) return AMN_OK;
    const amn_encode_source *s = &mm->src[i];
    enc_tensor *t = calloc(1, sizeof *t);
    if (!t) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    t->kind = mm->kind;
    t->dq = mm->dq;
    t->rows = s->shape[0];
    t->cols = s->shape[1];
    t->n = t->rows * t->cols;
    t->block = mm->block;
    t->blocks = t->n / t->block;
    t->nblocks = (t->blocks + NESTED_BLOCK - 1) / NESTED_BLOCK;
    t->dtype_name = torch_dtype(s->dtype);
    const char *w = s->name;
    int rc = AMN_OK;
    if (t->kind == BNB_INT8) {
        const size_t plen = strlen(w) - strlen(".weight");
        char *prefix = malloc(plen + 1);
        if (!prefix) rc = AMN_E_NOMEM;
        if (!rc) {
            memcpy(prefix, w, plen);
            prefix[plen] = '\0';
            rc = add_out(t, outs, OUT_WEIGHT, w, "", AMN_DTYPE_I8, 2, t->rows, t->cols, t->cols);
            if (!rc)
                rc = add_out(t, outs, OUT_SCB, prefix, ".SCB", AMN_DTYPE_F32, 1, t->rows, 0, 4);
            if (!rc) rc = add_out(t, outs, OUT_FORMAT, w, "_format", AMN_DTYPE_U8, 0, 0, 0, 1);
            free(prefix);
        }
    } else {
        char blob[512];
        t->blob_len = (uint64_t)format_blob(t, blob, sizeof blob);
        rc = add_out(t, outs, OUT_WEIGHT, w, "", AMN_DTYPE_U8, 2, t->n / 2, 1, t->block / 2);
        if (!rc && t->dq)
            rc = add_out(t, outs, OUT_ABSMAX, w, ".absmax", AMN_DTYPE_U8, 1, t->blocks, 0, 1);
        else if (!rc)
            rc = add_out(t, outs, OUT_ABSMAX, w, ".absmax", AMN_DTYPE_F32, 1, t->blocks, 0, 4);
        if (!rc) rc = add_out(t, outs, OUT_QMAP, w, ".quant_map", AMN_DTYPE_F32, 1, 16, 0, 64);
        if (!rc && t->dq)
            rc = add_out(t, outs, OUT_NABSMAX, w, ".nested_absmax", AMN_DTYPE_F32, 1, t->nblocks, 0,
                         4);
        if (!rc && t->dq)
            rc =
                add_out(t, outs, OUT_NQMAP, w, ".nested_quant_map", AMN_DTYPE_F32, 1, 256, 0, 1024);
        if (!rc)
            rc = add_out(t, outs, OUT_BLOB, w,
                         t->kind == BNB_FP4 ? ".quant_state.bitsandbytes__fp4"
                                            : ".quant_state.bitsandbytes__nf4",
                         AMN_DTYPE_U8, 1, t->blob_len, 0, t->blob_len);
    }
    if (rc) {
        tensor_free(t);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    *n_outs = t->n_outs;
    *tstate = t;
    return AMN_OK;
}

/* absmax of blocks [b0, b0 + nb) into a (f32 each), reading the values in
 * cache-sized steps through buf (READ_ELEMS floats, or one block). */
static int block_absmax(const enc_tensor *t, const amn_values *v, uint64_t b0, uint64_t nb,
                        float *a, float *buf, amn_error *err) {
    const uint64_t per = t->block >= READ_ELEMS ? 1 : READ_ELEMS / t->block;
    for (uint64_t b = b0; b < b0 + nb; b += per) {
        const uint64_t k = b0 + nb - b < per ? b0 + nb - b : per;
        int rc = v->read(v->ctx, b * t->block, k * t->block, buf, err);
        if (rc) return rc;
        const amn_simd lv = amn_simd_level();
        for (uint64_t j = 0; j < k; j++) {
            const float *x = buf + j * t->block;
            a[b - b0 + j] =
                AMN_SIMD_X86 && lv >= AMN_SIMD_AVX512 ? bnb_absmax_avx512(x, (size_t)t->block)
                : AMN_SIMD_X86 && lv >= AMN_SIMD_AVX2 ? bnb_absmax_avx2(x, (size_t)t->block)
                                                      : bnb_absmax(x, (size_t)t->block);
        }
    }
    return AMN_OK;
}

static float *value_buf(const enc_tensor *t) {
    const uint64_t n = t->kind == BNB_INT8     ? t->cols
                       : t->block > READ_ELEMS ? t->block
                                               : READ_ELEMS;
    return malloc((size_t)n * sizeof(float));
}

/* Double quant's offset: the mean of every block's absmax (summed in binary64
 * in block order, then rounded once to binary32). */
static int enc_stats(void *state, const amn_values *v, amn_error *err) {
    enc_tensor *t = state;
    if (!t->dq) return AMN_OK;
    float *buf = value_buf(t);
    float a[256];
    if (!buf) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    double sum = 0;
    int rc = AMN_OK;
    for (uint64_t b = 0; !rc && b < t->blocks; b += 256) {
        const uint64_t k = t->blocks - b < 256 ? t->blocks - b : 256;
        rc = block_absmax(t, v, b, k, a, buf, err);
        for (uint64_t j = 0; !rc && j < k; j++) sum += a[j];
    }
    free(buf);
    if (rc) return rc;
    t->offset = (float)(sum / (double)t->blocks);
    if (!isfinite(t->offset))
        return amn_error_set(err, AMN_E_INVALID,
                             "%s: values are not finite; double quant needs a finite mean absmax",
                             t->names[0]);
    return AMN_OK;
}

/* Nested block j: its blocks' absmax (a, up to 256) and max |absmax - offset|. */
static int nested_block(const enc_tensor *t, const amn_values *v, uint64_t j, float *a, float *na,
                        float *buf, amn_error *err) {
    const uint64_t b0 = j * NESTED_BLOCK;
    const uint64_t k = t->blocks - b0 < NESTED_BLOCK ? t->blocks - b0 : NESTED_BLOCK;
    int rc = block_absmax(t, v, b0, k, a, buf, err);
    if (rc) return rc;
    float m = 0.0f;
    for (uint64_t i = 0; i < k; i++) {
        a[i] = a[i] - t->offset;
        m = fmaxf(m, fabsf(a[i]));
    }
    *na = m;
    return AMN_OK;
}

static int fill_4bit_weight(const enc_tensor *t, uint64_t b0, uint64_t nb, const amn_values *v,
                            uint8_t *dst, double *abs_err, float *buf, amn_error *err) {
    const uint64_t per = t->block >= READ_ELEMS ? 1 : READ_ELEMS / t->block;
    float cb[16];
    bnb4_codebook(t->kind == BNB_FP4 ? bnb_fp4_map : bnb_nf4_map, cb);
    double e = 0;
    const amn_simd lv = amn_simd_level(); /* blocks are multiples of 16 */
    for (uint64_t b = b0; b < b0 + nb; b += per) {
        const uint64_t k = b0 + nb - b < per ? b0 + nb - b : per;
        int rc = v->read(v->ctx, b * t->block, k * t->block, buf, err);
        if (rc) return rc;
        for (uint64_t j = 0; j < k; j++) {
            const float *x = buf + j * t->block;
            uint8_t *d = dst + (b - b0 + j) * (t->block / 2);
            if (AMN_SIMD_X86 && lv >= AMN_SIMD_AVX512) {
                const float am = bnb_absmax_avx512(x, (size_t)t->block);
                bnb4_encode_avx512(t->kind, x, (size_t)t->block, am, d, cb, abs_err ? &e : NULL);
                continue;
            }
            if (AMN_SIMD_X86 && lv >= AMN_SIMD_AVX2) {
                const float am = bnb_absmax_avx2(x, (size_t)t->block);
                bnb4_encode_avx2(t->kind, x, (size_t)t->block, am, d, cb, abs_err ? &e : NULL);
                continue;
            }
            const float am = bnb_absmax(x, t->block);
            bnb4_encode(t->kind, x, (size_t)t->block, am, 0, d);
            if (abs_err)
                for (uint64_t i = 0; i < t->block; i++) {
                    const uint8_t q = i & 1 ? d[i / 2] & 15 : d[i / 2] >> 4;
                    e += fabs((double)x[i] - (double)(cb[q] * am));
                }
        }
    }
    if (abs_err) *abs_err += e;
    return AMN_OK;
}

static int fill_4bit_absmax(const enc_tensor *t, int role, uint64_t u0, uint64_t n,
                            const amn_values *v, uint8_t *dst, float *buf, amn_error *err) {
    float a[NESTED_BLOCK], na;
    if (!t->dq) { /* plain absmax, f32 per block */
        for (uint64_t b = u0; b < u0 + n;) {
            const uint64_t k = u0 + n - b < NESTED_BLOCK ? u0 + n - b : NESTED_BLOCK;
            int rc = block_absmax(t, v, b, k, a, buf, err);
            if (rc) return rc;
            for (uint64_t i = 0; i < k; i++) amn_store_le_f32(dst + (b - u0 + i) * 4, a[i]);
            b += k;
        }
        return AMN_OK;
    }
    if (role == OUT_NABSMAX) {
        for (uint64_t j = u0; j < u0 + n; j++) {
            int rc = nested_block(t, v, j, a, &na, buf, err);
            if (rc) return rc;
            amn_store_le_f32(dst + (j - u0) * 4, na);
        }
        return AMN_OK;
    }
    /* the u8 codes of blocks [u0, u0 + n): quantize_blockwise of absmax -
     * offset with the dynamic map, in blocks of 256 */
    for (uint64_t b = u0; b < u0 + n;) {
        const uint64_t j = b / NESTED_BLOCK;
        int rc = nested_block(t, v, j, a, &na, buf, err);
        if (rc) return rc;
        const float inv = 1.0f / na;
        const uint64_t end = (j + 1) * NESTED_BLOCK < u0 + n ? (j + 1) * NESTED_BLOCK : u0 + n;
        for (; b < end; b++)
            dst[b - u0] = bnb_dynamic_code(bnb_dynamic_map, a[b - j * NESTED_BLOCK] * inv);
    }
    return AMN_OK;
}

/* Rows [r0, r0 + n) of the int8 weight or of its SCB. The input goes to
 * F16 first, as bitsandbytes' int8 layer takes it; the row's values are
 * rounded there through amn_convert_elems (F16C where the CPU has it, the
 * same bits as amn_f32_to_f16: a scalar round trip per value was 60 % of
 * the encode's time). */
static int fill_int8(const enc_tensor *t, int role, uint64_t r0, uint64_t n, const amn_values *v,
                     uint8_t *dst, double *abs_err, float *buf, amn_error *err) {
    float c;
    const uint32_t cbits = BNB_INT8_C_BITS;
    memcpy(&c, &cbits, 4);
    float *x16 = malloc((size_t)t->cols * sizeof *x16);
    uint16_t *h = malloc((size_t)t->cols * sizeof *h);
    int rc = x16 && h ? AMN_OK : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    double e = 0;
    for (uint64_t r = r0; !rc && r < r0 + n; r++) {
        if ((rc = v->read(v->ctx, r * t->cols, t->cols, buf, err))) break;
        amn_store_f32(buf, AMN_DTYPE_F16, h, (size_t)t->cols);
        amn_convert_elems(AMN_DTYPE_F16, h, AMN_DTYPE_F32, x16, (size_t)t->cols);
        amn_le_to_host_n(x16, 4, (size_t)t->cols); /* bytes to host floats */
        float scb = 0.0f; /* the row's max |x| in F16; a NaN is passed over, as fmaxf does */
        for (uint64_t i = 0; i < t->cols; i++) {
            const float a = fabsf(x16[i]);
            if (a > scb) scb = a;
        }
        if (role == OUT_SCB) {
            amn_store_le_f32(dst + (r - r0) * 4, scb);
            continue;
        }
        int8_t *q = (int8_t *)dst + (r - r0) * t->cols;
        bnb8_encode_row(x16, (size_t)t->cols, scb, q);
        if (abs_err)
            for (uint64_t i = 0; i < t->cols; i++) {
                const float p = (float)q[i] * scb;
                e += fabs((double)buf[i] - (double)(p * c));
            }
    }
    free(x16);
    free(h);
    if (!rc && abs_err) *abs_err += e;
    return rc;
}

static int enc_fill(const void *state, size_t out, uint64_t u0, uint64_t n, const amn_values *v,
                    void *dst, double *abs_err, amn_error *err) {
    const enc_tensor *t = state;
    if (out >= t->n_outs) return amn_error_set(err, AMN_E_INVALID, "bnb: no output %zu", out);
    const int role = t->role[out];
    uint8_t *d = dst;
    switch (role) {
    case OUT_QMAP:
        for (int k = 0; k < 16; k++)
            amn_store_le_f32(d + 4 * k, (t->kind == BNB_FP4 ? bnb_fp4_map : bnb_nf4_map)[k]);
        return AMN_OK;
    case OUT_NQMAP:
        for (int k = 0; k < 256; k++) amn_store_le_f32(d + 4 * k, bnb_dynamic_map[k]);
        return AMN_OK;
    case OUT_FORMAT:
        d[0] = 0; /* row-major */
        return AMN_OK;
    case OUT_BLOB: {
        char blob[512];
        const int len = format_blob(t, blob, sizeof blob);
        if ((uint64_t)len != t->blob_len)
            return amn_error_set(err, AMN_E_INVALID, "%s: quant_state changed size", t->names[out]);
        memcpy(d, blob, (size_t)len);
        return AMN_OK;
    }
    default:
        break;
    }
    float *buf = value_buf(t);
    if (!buf) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc;
    if (t->kind == BNB_INT8)
        rc = fill_int8(t, role, u0, n, v, d, role == OUT_WEIGHT ? abs_err : NULL, buf, err);
    else if (role == OUT_WEIGHT)
        rc = fill_4bit_weight(t, u0, n, v, d, abs_err, buf, err);
    else
        rc = fill_4bit_absmax(t, role, u0, n, v, d, buf, err);
    free(buf);
    return rc;
}

/* transformers' BitsAndBytesConfig as config.json keeps it; the modules
 * left unquantized (2-D weights kept, embeddings, lm_head) are listed. */
static int enc_config(void *state, char **out, amn_error *err) {
    const enc_model *mm = state;
    *out = NULL;
    json_object *o = json_object_new_object(), *skip = json_object_new_array();
    if (!o || !skip) {
        json_object_put(o);
        json_object_put(skip);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    const bool four = mm->kind != BNB_INT8;
    json_object_object_add(o, "quant_method", json_object_new_string("bitsandbytes"));
    json_object_object_add(o, "load_in_4bit", json_object_new_boolean(four));
    json_object_object_add(o, "load_in_8bit", json_object_new_boolean(!four));
    json_object_object_add(o, "bnb_4bit_quant_type",
                           json_object_new_string(mm->kind == BNB_FP4 ? "fp4" : "nf4"));
    json_object_object_add(o, "bnb_4bit_use_double_quant", json_object_new_boolean(mm->dq));
    json_object_object_add(
        o, "bnb_4bit_compute_dtype",
        json_object_new_string(mm->compute_dtype ? mm->compute_dtype : "float32"));
    json_object_object_add(o, "bnb_4bit_quant_storage", json_object_new_string("uint8"));
    json_object_object_add(o, "llm_int8_threshold", json_object_new_double(6.0));
    json_object_object_add(o, "llm_int8_has_fp16_weight", json_object_new_boolean(false));
    json_object_object_add(o, "llm_int8_enable_fp32_cpu_offload", json_object_new_boolean(false));
    for (size_t i = 0; i < mm->n; i++) {
        const amn_encode_source *s = &mm->src[i];
        if (mm->encode[i] || !is_linear_weight(s)) continue;
        const size_t len = strlen(s->name) - strlen(".weight");
        json_object_array_add(skip, json_object_new_string_len(s->name, (int)len));
    }
    json_object_object_add(o, "llm_int8_skip_modules", skip);
    const char *txt = json_object_to_json_string_ext(o, JSON_C_TO_STRING_SPACED);
    *out = txt ? strdup(txt) : NULL;
    json_object_put(o);
    return *out ? AMN_OK : amn_error_set(err, AMN_E_NOMEM, "out of memory");
}

const amn_encoder bnb_encoder = {
    .struct_size = sizeof(amn_encoder),
    .targets = targets,
    .begin = enc_begin,
    .tensor = enc_tensor_plan,
    .stats = enc_stats,
    .fill = enc_fill,
    .tensor_free = tensor_free,
    .config = enc_config,
    .end = enc_end,
};
