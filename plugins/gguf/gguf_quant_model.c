/* Whole-model quantization inputs and per-tensor row production (see
 * gguf_quant_model.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/checked.h"
#include "gguf_dequant.h"
#include "gguf_endian.h"
#include "gguf_quant.h"
#include "gguf_quant_model.h"
#include "gguf_types.h"
#include "gguf_validate.h"

/* ---- metadata ------------------------------------------------------------- */

static bool kv_int(const amn_kv *kv, uint64_t *out) {
    amn_kv_type t = kv->type;
    const void *p = kv->data;
    if (t == AMN_KV_ARRAY) { /* per-layer arrays: layer 0 */
        if (kv->count == 0) return false;
        t = kv->elem_type;
    }
    int64_t v;
    switch (t) {
    case AMN_KV_U8:
        v = *(const uint8_t *)p;
        break;
    case AMN_KV_I8:
        v = *(const int8_t *)p;
        break;
    case AMN_KV_U16: {
        uint16_t x;
        memcpy(&x, p, 2);
        v = x;
        break;
    }
    case AMN_KV_I16: {
        int16_t x;
        memcpy(&x, p, 2);
        v = x;
        break;
    }
    case AMN_KV_U32: {
        uint32_t x;
        memcpy(&x, p, 4);
        v = x;
        break;
    }
    case AMN_KV_I32: {
        int32_t x;
        memcpy(&x, p, 4);
        v = x;
        break;
    }
    case AMN_KV_U64: {
        uint64_t x;
        memcpy(&x, p, 8);
        if (x > INT64_MAX) return false;
        v = (int64_t)x;
        break;
    }
    case AMN_KV_I64:
        memcpy(&v, p, 8);
        break;
    default:
        return false;
    }
    if (v < 0 || v > UINT32_MAX) return false;
    *out = (uint64_t)v;
    return true;
}

/* {arch}.suffix as a u32: *found false when absent (then *v untouched). */
static int arch_u32(const amn_model *m, const char *arch, const char *suffix, uint32_t *v,
                    bool *found, amn_error *err) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const amn_kv *kv = amn_model_find_kv(m, key);
    *found = kv != NULL;
    if (!kv) return AMN_OK;
    uint64_t x;
    if (!kv_int(kv, &x))
        return amn_error_set(err, AMN_E_PARSE, "metadata %s: not a non-negative 32-bit integer",
                             key);
    *v = (uint32_t)x;
    return AMN_OK;
}

static uint32_t ggml_type_of(const amn_tensor *t) {
    switch (t->dtype) {
    case AMN_DTYPE_F32:
        return GGUF_TYPE_F32;
    case AMN_DTYPE_F16:
        return GGUF_TYPE_F16;
    case AMN_DTYPE_BF16:
        return GGUF_TYPE_BF16;
    case AMN_DTYPE_BLOCK:
        return t->encoding;
    default:
        return GGUF_TYPE_COUNT;
    }
}

int gguf_qpolicy_read_model(const amn_model *m, gguf_qpolicy_model *pm,
                            gguf_qpolicy_tensor **tensors, amn_error *err) {
    *tensors = NULL;
    memset(pm, 0, sizeof *pm);
    const amn_kv *a = amn_model_find_kv(m, "general.architecture");
    if (!a || a->type != AMN_KV_STRING)
        return amn_error_set(err, AMN_E_PARSE,
                             "metadata general.architecture: missing or not a "
                             "string");
    const amn_str *as = a->data;
    /* The architecture names keys: keep it short. */
    char *arch = pm->arch_buf;
    if (as->len == 0 || as->len >= sizeof pm->arch_buf || memchr(as->ptr, 0, as->len))
        return amn_error_set(err, AMN_E_PARSE, "metadata general.architecture: bad value");
    memcpy(arch, as->ptr, as->len);
    arch[as->len] = 0;
    pm->arch = arch;
    bool found;
    int rc = arch_u32(m, arch, "block_count", &pm->n_layer, &found, err);
    if (!rc && !found)
        rc = amn_error_set(err, AMN_E_PARSE, "metadata %s.block_count: missing", arch);
    if (!rc) rc = arch_u32(m, arch, "attention.head_count", &pm->n_head, &found, err);
    if (!rc) rc = arch_u32(m, arch, "attention.head_count_kv", &pm->n_head_kv, &found, err);
    if (!rc && !found) pm->n_head_kv = pm->n_head;
    if (!rc) rc = arch_u32(m, arch, "expert_count", &pm->n_expert, &found, err);
    if (rc) return rc;

    const size_t n = amn_model_tensor_count(m);
    gguf_qpolicy_tensor *ts = calloc(n ? n : 1, sizeof *ts);
    if (!ts) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        ts[i].name = t->name;
        ts[i].type = ggml_type_of(t);
        if (ts[i].type >= GGUF_TYPE_COUNT || t->ndim > 4) {
            free(ts);
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "tensor %s: %s with %u dimensions cannot be quantized", t->name,
                                 amn_dtype_name(t->dtype), t->ndim);
        }
        for (int d = 0; d < 4; d++) ts[i].ne[d] = 1;
        for (uint32_t d = 0; d < t->ndim; d++) {
            if (t->shape[t->ndim - 1 - d] > INT64_MAX) {
                free(ts);
                return amn_error_set(err, AMN_E_PARSE, "tensor %s: dimension too large", t->name);
            }
            ts[i].ne[d] = (int64_t)t->shape[t->ndim - 1 - d];
        }
    }
    *tensors = ts;
    return AMN_OK;
}

/* ---- rows ----------------------------------------------------------------- */

bool gguf_quant_row_bytes(uint32_t type, uint64_t ne0, uint64_t *out) {
    return gguf_type_nbytes(gguf_type_traits_get(type), ne0, out);
}

/* n elements from element e of t as f32 into y (n <= GGUF_QCHUNK, whole
 * source blocks). */
static int read_le_f32(const amn_tensor *t, uint32_t src_type, uint64_t e, size_t n, float *y,
                       amn_error *err);

/* ... as host floats: tensors and kernels give little-endian bytes. */
/* Values [e, e + n) of t as host floats, each finite (llama-quantize's
 * check of what it loads). */
static int read_f32(const amn_tensor *t, uint32_t src_type, uint64_t e, size_t n, float *y,
                    amn_simd level, amn_error *err) {
    const int rc = read_le_f32(t, src_type, e, n, y, err);
    if (rc) return rc;
    amn_le_to_host_n(y, 4, n);
    uint64_t at;
    const char *what;
    return gguf_valid_floats(y, n, level, &at, &what)
               ? AMN_OK
               : gguf_invalid_input(t->name, what, e + at, err);
}

int gguf_invalid_input(const char *name, const char *what, uint64_t at, amn_error *err) {
    return amn_error_set(err, AMN_E_PARSE,
                         "tensor %s holds %s (value %llu): llama-quantize refuses such a file "
                         "(ggml_validate_row_data)",
                         name, what, (unsigned long long)at);
}

static int read_le_f32(const amn_tensor *t, uint32_t src_type, uint64_t e, size_t n, float *y,
                       amn_error *err) {
    const gguf_type_traits *tr = gguf_type_traits_get(src_type);
    if (tr->kind == GGUF_KIND_PLAIN) {
        const size_t es = amn_dtype_size(t->dtype);
        if (t->dtype == AMN_DTYPE_F32) return amn_tensor_read(t, e * 4, y, n * 4, err);
        /* Where amn_tensor_read would memcpy (contiguous bytes in memory),
         * widen them in place: the copy was a pass over the input as long
         * as the widening. */
        const uint8_t *src = NULL;
        uint16_t raw[GGUF_QCHUNK];
        if (t->data && amn_tensor_is_plain(t) && /* (a big-endian file's bytes are not) */
            e <= t->nbytes / es && n <= t->nbytes / es - e) {
            src = (const uint8_t *)t->data + e * es;
        } else {
            int rc = amn_tensor_read(t, e * es, raw, n * es, err);
            if (rc) return rc;
            src = (const uint8_t *)raw;
        }
        if (amn_convert_elems(t->dtype, src, AMN_DTYPE_F32, y, n) != 0)
            return amn_error_set(err, AMN_E_UNSUPPORTED, "tensor %s: cannot widen %s", t->name,
                                 amn_dtype_name(t->dtype));
        return AMN_OK;
    }
    uint64_t off, len;
    if (!gguf_type_nbytes(tr, e, &off) || !gguf_type_nbytes(tr, n, &len) || off > t->extent ||
        len > t->extent - off || !t->data)
        return amn_error_set(err, AMN_E_PARSE, "tensor %s: data out of range", t->name);
    const uint8_t *blocks = (const uint8_t *)t->data + off;
    uint8_t swapped[GGUF_QCHUNK * 2]; /* a big-endian file's blocks, in the kernels' order */
    if (t->flags & AMN_TENSOR_BIG_ENDIAN && gguf_endian_block_swaps(src_type)) {
        if (len > sizeof swapped)
            return amn_error_set(err, AMN_E_INVALID, "tensor %s: run too long", t->name);
        memcpy(swapped, blocks, (size_t)len);
        gguf_endian_swap_blocks(src_type, swapped, (size_t)len);
        blocks = swapped;
    }
    const int rc = gguf_dequantize(src_type, blocks, n, AMN_DTYPE_F32, y);
    if (rc) return amn_error_set(err, rc, "tensor %s: cannot dequantize %s", t->name, tr->name);
    return AMN_OK;
}

static int copy_rows(const amn_tensor *t, const gguf_type_traits *tr, uint64_t e0, uint64_t n,
                     void *dst, amn_error *err) {
    uint64_t off, len;
    if (!gguf_type_nbytes(tr, e0, &off) || !gguf_type_nbytes(tr, n, &len))
        return amn_error_set(err, AMN_E_INVALID, "tensor %s: rows out of range", t->name);
    if (tr->kind == GGUF_KIND_PLAIN) return amn_tensor_read(t, off, dst, len, err);
    if (!t->data || off > t->extent || len > t->extent - off)
        return amn_error_set(err, AMN_E_PARSE, "tensor %s: data out of range", t->name);
    memcpy(dst, (const uint8_t *)t->data + off, (size_t)len);
    /* Written little-endian, as every block the core streams. */
    if (t->flags & AMN_TENSOR_BIG_ENDIAN) gguf_endian_swap_blocks(tr->id, dst, (size_t)len);
    return AMN_OK;
}

/* copy_rows, and the check llama-quantize makes of what it copies. */
static int copy_checked(const amn_tensor *t, const gguf_type_traits *tr, uint64_t e0, uint64_t n,
                        void *dst, amn_error *err) {
    int rc = copy_rows(t, tr, e0, n, dst, err); /* little-endian bytes, whatever the file's */
    uint64_t len = 0, at;
    const char *what;
    if (!rc && gguf_type_nbytes(tr, n, &len) && !gguf_valid_bytes(tr->id, dst, len, &at, &what))
        rc = gguf_invalid_input(t->name, what, (e0 / tr->block_elems + at) * tr->block_elems, err);
    return rc;
}

int gguf_check_tensor(const amn_tensor *t, amn_error *err) {
    const uint32_t type = ggml_type_of(t);
    const gguf_type_traits *tr = gguf_type_traits_get(type);
    uint64_t numel;
    if (!tr || !gguf_type_can_dequantize(tr) || !amn_tensor_numel(t, &numel)) return AMN_OK;
    if (t->flags & AMN_TENSOR_BIG_ENDIAN && !gguf_endian_defined(type)) return AMN_OK;
    float y[GGUF_QCHUNK];
    const amn_simd level = amn_simd_level();
    int rc = AMN_OK;
    for (uint64_t c = 0; !rc && c < numel; c += GGUF_QCHUNK)
        rc = read_f32(t, type, c, (size_t)(numel - c < GGUF_QCHUNK ? numel - c : GGUF_QCHUNK), y,
                      level, err);
    return rc;
}

/* Rows with weights (or of a row-level type): each row read whole, then
 * quantized with its matrix's weights (rows of one matrix are ne1 apart in
 * the tensor). */
static int weighted_rows(const amn_tensor *t, uint32_t src_type, const gguf_type_traits *out,
                         uint64_t ne0, uint64_t row0, uint64_t nrows, const float *qw, uint8_t *d,
                         amn_error *err) {
    const uint64_t ne1 = t->ndim >= 2 ? t->shape[t->ndim - 2] : 1;
    uint64_t row_bytes;
    if (ne0 > SIZE_MAX / sizeof(float) || ne0 > INT64_MAX ||
        !gguf_quant_row_bytes(out->id, ne0, &row_bytes))
        return amn_error_set(err, AMN_E_INVALID, "tensor %s: rows too long", t->name);
    float *y = malloc((size_t)ne0 * sizeof *y);
    if (!y) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    const amn_simd level = amn_simd_level();
    int rc = AMN_OK;
    for (uint64_t r = 0; !rc && r < nrows; r++, d += row_bytes) {
        const uint64_t row = row0 + r;
        for (uint64_t c = 0; !rc && c < ne0; c += GGUF_QCHUNK) {
            const size_t k = (size_t)(ne0 - c < GGUF_QCHUNK ? ne0 - c : GGUF_QCHUNK);
            rc = read_f32(t, src_type, row * ne0 + c, k, y + c, level, err);
        }
        if (rc) break;
        const float *w = qw ? qw + (ne1 ? row / ne1 : 0) * ne0 : NULL;
        rc = gguf_quantize_rows(out->id, y, 1, (int64_t)ne0, w, d, level);
        if (rc) rc = amn_error_set(err, rc, "tensor %s: cannot quantize to %s", t->name, out->name);
    }
    free(y);
    return rc;
}

int gguf_quantize_tensor_rows(const amn_tensor *t, uint32_t dst_type, uint64_t row0, uint64_t nrows,
                              void *dst, amn_error *err) {
    return gguf_quantize_tensor_rows_w(t, dst_type, row0, nrows, NULL, dst, err);
}

int gguf_quantize_tensor_rows_w(const amn_tensor *t, uint32_t dst_type, uint64_t row0,
                                uint64_t nrows, const float *qw, void *dst, amn_error *err) {
    const uint32_t src_type = ggml_type_of(t);
    const gguf_type_traits *src = gguf_type_traits_get(src_type);
    const gguf_type_traits *out = gguf_type_traits_get(dst_type);
    if (!src || !gguf_type_can_dequantize(src))
        return amn_error_set(err, AMN_E_UNSUPPORTED, "tensor %s: cannot read %s", t->name,
                             src ? src->name : amn_dtype_name(t->dtype));
    if (t->flags & AMN_TENSOR_BIG_ENDIAN && !gguf_endian_defined(src_type))
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: tensor %s: GGUF type %s has no big-endian layout "
                             "(gguf_convert_endian.py does not convert it)",
                             t->name, src->name);
    if (!out || (dst_type != src_type && !gguf_type_can_quantize_rows(dst_type, qw != NULL)))
        return amn_error_set(err, AMN_E_UNSUPPORTED, "cannot quantize to %s (type %u)",
                             out ? out->name : "?", dst_type);
    const uint64_t ne0 = t->ndim ? t->shape[t->ndim - 1] : 1;
    uint64_t numel, row_bytes, e0, n;
    if (!amn_tensor_numel(t, &numel) || ne0 == 0)
        return nrows == 0 ? AMN_OK
                          : amn_error_set(err, AMN_E_INVALID, "tensor %s: no rows", t->name);
    if (row0 > numel / ne0 || nrows > numel / ne0 - row0)
        return amn_error_set(err, AMN_E_INVALID, "tensor %s: rows out of range", t->name);
    if (!gguf_quant_row_bytes(dst_type, ne0, &row_bytes) || ne0 % src->block_elems != 0)
        return amn_error_set(err, AMN_E_INVALID,
                             "tensor %s: rows of %llu values are not whole %s blocks", t->name,
                             (unsigned long long)ne0, out->name);
    e0 = row0 * ne0;
    n = nrows * ne0;
    if (dst_type == src_type) return copy_checked(t, src, e0, n, dst, err);
    if (qw && t->ndim == 4 && t->shape[0] > 1)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "tensor %s: importance-matrix weights for a 4-D tensor", t->name);
    if (qw || gguf_type_needs_rows(dst_type))
        return weighted_rows(t, src_type, out, ne0, row0, nrows, qw, dst, err);
    /* Runs of at most GGUF_QCHUNK values; every block size divides it, so
     * runs never split a block of either type (a row is whole blocks of
     * both). */
    float y[GGUF_QCHUNK];
    const amn_simd level = amn_simd_level();
    uint8_t *d = dst;
    for (uint64_t r = 0; r < nrows; r++)
        for (uint64_t c = 0; c < ne0; c += GGUF_QCHUNK) {
            const size_t k = (size_t)(ne0 - c < GGUF_QCHUNK ? ne0 - c : GGUF_QCHUNK);
            int rc = read_f32(t, src_type, e0 + r * ne0 + c, k, y, level, err);
            if (rc) return rc;
            rc = gguf_quantize_simd(dst_type, y, k, d, level);
            if (rc)
                return amn_error_set(err, rc, "tensor %s: cannot quantize to %s", t->name,
                                     out->name);
            d += k / out->block_elems * out->block_bytes;
        }
    return AMN_OK;
}
