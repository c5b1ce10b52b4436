/* npz_writer.c — `convert --to npz`: what numpy.savez writes, streamed.
 *
 * One stored member "<name>.npy" per tensor, in the order of the input.
 * Each NPY header is byte-identical to NumPy's (format.py
 * _write_array_header: sorted dict keys, the 21-digit growth room after the
 * first dimension, padded with spaces to a multiple of 64 and a newline;
 * version 1.0 unless the header needs 2.0). Member data (and so every array)
 * starts at a multiple of 64 in the file: an Android-zipalign padding extra
 * (0xD935) in the local header, which readers skip.
 *
 * BF16 has no NumPy type code: it is written as the 2-byte void '|V2' that
 * np.save writes for ml_dtypes.bfloat16 (JAX checkpoints hold it), which
 * numpy.load returns as raw 2-byte records (view them as ml_dtypes.bfloat16
 * or uint16). FP8 has none either and its void ('|V1') would not say which
 * FP8 it is, so FP8 tensors are refused: convert them with --out-dtype.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/checked.h"
#include "amn/kit/zip_writer.h"
#include "npy_header.h"

#define NPY_ALIGN     64
#define GROWTH_DIGITS 21 /* NumPy's GROWTH_AXIS_MAX_DIGITS */
#define HEADER_MAX    (NPY_ALIGN * 8 + 64 * AMN_MAX_DIMS)

typedef struct npz_state {
    amn_sink *sink;
    const amn_out_tensor *const *t; /* the core's array of pointers */
    zipw *z;
} npz_state;

static const char *descr_of(amn_dtype d) {
    switch (d) {
    case AMN_DTYPE_BOOL:
        return "|b1";
    case AMN_DTYPE_U8:
        return "|u1";
    case AMN_DTYPE_I8:
        return "|i1";
    case AMN_DTYPE_U16:
        return "<u2";
    case AMN_DTYPE_I16:
        return "<i2";
    case AMN_DTYPE_U32:
        return "<u4";
    case AMN_DTYPE_I32:
        return "<i4";
    case AMN_DTYPE_U64:
        return "<u8";
    case AMN_DTYPE_I64:
        return "<i8";
    case AMN_DTYPE_F16:
        return "<f2";
    case AMN_DTYPE_BF16:
        return "|V2";
    case AMN_DTYPE_F32:
        return "<f4";
    case AMN_DTYPE_F64:
        return "<f8";
    case AMN_DTYPE_C64:
        return "<c8";
    case AMN_DTYPE_C128:
        return "<c16";
    default:
        return NULL;
    }
}

/* The NPY preamble and header of t into buf (HEADER_MAX bytes); its length. */
static size_t npy_header_bytes(const amn_out_tensor *t, uint8_t *buf) {
    char dict[HEADER_MAX];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr_of(t->dtype));
    for (uint32_t d = 0; d < t->ndim; d++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%" PRIu64, d ? ", " : "", t->shape[d]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", t->ndim == 1 ? "," : "");
    if (t->ndim) {
        char first[24];
        int w = snprintf(first, sizeof first, "%" PRIu64, t->shape[0]);
        for (int k = w; k < GROWTH_DIGITS; k++) dict[n++] = ' ';
    }
    /* hlen counts the final newline; v1 stores it in 2 bytes, v2 in 4. */
    const size_t hlen = (size_t)n + 1;
    size_t pre = 10, pad = NPY_ALIGN - (pre + hlen) % NPY_ALIGN;
    unsigned major = 1;
    if (hlen + pad > 0xffff) {
        pre = 12;
        pad = NPY_ALIGN - (pre + hlen) % NPY_ALIGN;
        major = 2;
    }
    const size_t total = hlen + pad;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    for (size_t k = 0; k < pre - 8; k++) buf[8 + k] = (uint8_t)(total >> (8 * k));
    memcpy(buf + pre, dict, (size_t)n);
    memset(buf + pre + n, ' ', pad);
    buf[pre + total - 1] = '\n';
    return pre + total;
}

static int npz_begin(const amn_write_args *a, void **state, size_t *order, amn_error *err) {
    *state = NULL;
    for (size_t i = 0; i < a->n_tensors; i++) {
        const amn_out_tensor *t = a->tensors[i];
        if (!descr_of(t->dtype))
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "npz cannot store tensor %s (%s: NumPy has no such dtype)",
                                 t->name, amn_dtype_name(t->dtype));
        const char *why = zip_name_problem(t->name, strlen(t->name), NPZ_NAME_MAX - 5);
        if (why)
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "tensor name is not a valid npz member name (%s): '%s'", why,
                                 t->name);
        order[i] = i;
    }
    npz_state *s = calloc(1, sizeof *s);
    if (!s) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    s->sink = a->sink;
    s->t = a->tensors;
    const zipw_options zo = {.align = NPY_ALIGN, .pad_id = 0xD935, .pad_has_align = true};
    int rc = zipw_new(a->sink, &zo, &s->z, err);
    if (rc) {
        free(s);
        return rc;
    }
    *state = s;
    return AMN_OK;
}

static int npz_tensor_begin(void *state, size_t index, amn_error *err) {
    npz_state *s = state;
    const amn_out_tensor *t = s->t[index];
    uint8_t hdr[HEADER_MAX + 16];
    const size_t hn = npy_header_bytes(t, hdr);
    char member[NPZ_NAME_MAX];
    snprintf(member, sizeof member, "%s.npy", t->name); /* length checked in begin */
    uint64_t size;
    if (!amn_add_u64(t->nbytes, hn, &size))
        return amn_error_set(err, AMN_E_LIMIT, "tensor %s: too large", t->name);
    int rc = zipw_member_begin(s->z, member, size, err);
    if (!rc) rc = amn_sink_write(s->sink, hdr, hn, err);
    return rc;
}

static int npz_finish(void *state, amn_error *err) {
    npz_state *s = state;
    int rc = zipw_finish(s->z, err);
    zipw_free(s->z);
    free(s);
    return rc;
}

static void npz_abort(void *state) {
    npz_state *s = state;
    if (!s) return;
    zipw_free(s->z);
    free(s);
}

const amn_writer npz_writer = {
    .struct_size = sizeof(amn_writer),
    .dtypes = (1ull << AMN_DTYPE_BOOL) | (1ull << AMN_DTYPE_U8) | (1ull << AMN_DTYPE_I8) |
              (1ull << AMN_DTYPE_U16) | (1ull << AMN_DTYPE_I16) | (1ull << AMN_DTYPE_U32) |
              (1ull << AMN_DTYPE_I32) | (1ull << AMN_DTYPE_U64) | (1ull << AMN_DTYPE_I64) |
              (1ull << AMN_DTYPE_F16) | (1ull << AMN_DTYPE_BF16) | (1ull << AMN_DTYPE_F32) |
              (1ull << AMN_DTYPE_F64) | (1ull << AMN_DTYPE_C64) | (1ull << AMN_DTYPE_C128),
    .begin = npz_begin,
    .tensor_begin = npz_tensor_begin,
    .finish = npz_finish,
    .abort = npz_abort,
};
