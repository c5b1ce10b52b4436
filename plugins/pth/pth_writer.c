/* pth_writer.c — `convert --to pth`: what torch.save(state_dict) writes,
 * streamed, loadable by torch.load(weights_only=True).
 *
 * The archive, as torch.save lays it out (PyTorchStreamWriter, miniz):
 *   archive/data.pkl    protocol-2 pickle of an OrderedDict name -> tensor
 *   archive/byteorder   "little"
 *   archive/data/0..N-1 one storage per tensor, in the order of the input
 *   archive/version     "3\n"
 * every member stored, its data at a multiple of 64 in the file ("FB" extra
 * field padded with 'Z', as torch pads), sizes and CRC in data descriptors,
 * ZIP64 end records always (torch writes them always; per-member ZIP64
 * fields where a size or offset needs them).
 *
 * The pickle uses only the globals torch.save emits for plain tensors and
 * the weights-only unpickler allows: collections.OrderedDict,
 * torch._utils._rebuild_tensor_v2 and the typed storage classes
 * (torch.FloatStorage, ...) named in the persistent ids. Tensor names are
 * pickle strings (never member names), so any UTF-8 name is kept.
 *
 * Dtypes: what torch has a storage class for and PyTorch 1.13 loads: bool,
 * u8, i8, i16, i32, i64, f16, bf16, f32, f64. u16/u32/u64 and FP8 exist
 * only in newer PyTorch without a legacy storage class; they are refused.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/checked.h"
#include "amn/kit/zip_writer.h"
#include "pth_writer.h"

#define ROOT       "archive/"
#define ALIGN      64
#define SETITEMS_N 1000 /* items per SETITEMS, as pickle batches them */

typedef struct pk_buf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} pk_buf;

static void put(pk_buf *b, const void *s, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + n) nc *= 2;
        uint8_t *p = realloc(b->p, nc);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void op(pk_buf *b, uint8_t c) {
    put(b, &c, 1);
}

static void put_u32(pk_buf *b, uint32_t v) {
    const uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}

/* GLOBAL 'module\nname\n' */
static void global(pk_buf *b, const char *module, const char *name) {
    op(b, 'c');
    put(b, module, strlen(module));
    op(b, '\n');
    put(b, name, strlen(name));
    op(b, '\n');
}

/* BINUNICODE (the caller checked the length fits 32 bits). */
static void unicode(pk_buf *b, const char *s) {
    const size_t n = strlen(s);
    op(b, 'X');
    put_u32(b, (uint32_t)n);
    put(b, s, n);
}

/* A non-negative int the way pickle's save_long writes it in protocol 2. */
static void integer(pk_buf *b, uint64_t v) {
    if (v < 256) {
        op(b, 'K');
        op(b, (uint8_t)v);
    } else if (v < 65536) {
        op(b, 'M');
        op(b, (uint8_t)v);
        op(b, (uint8_t)(v >> 8));
    } else if (v < 0x80000000u) {
        op(b, 'J');
        put_u32(b, (uint32_t)v);
    } else {
        /* LONG1: little-endian two's complement, a 0 byte kept when the top
         * bit is set so the value stays positive. */
        uint8_t x[9];
        int k = 0;
        while (v) {
            x[k++] = (uint8_t)v;
            v >>= 8;
        }
        if (x[k - 1] & 0x80) x[k++] = 0;
        op(b, 0x8a);
        op(b, (uint8_t)k);
        put(b, x, (size_t)k);
    }
}

/* A tuple of n ints: TUPLE1/2/3 or MARK ... TUPLE, EMPTY_TUPLE for none. */
static void int_tuple(pk_buf *b, const uint64_t *v, uint32_t n) {
    if (n == 0) {
        op(b, ')');
        return;
    }
    if (n > 3) op(b, '(');
    for (uint32_t i = 0; i < n; i++) integer(b, v[i]);
    op(b, n == 1 ? 0x85 : n == 2 ? 0x86 : n == 3 ? 0x87 : 't');
}

static const char *storage_of(amn_dtype d) {
    switch (d) {
    case AMN_DTYPE_BOOL:
        return "BoolStorage";
    case AMN_DTYPE_U8:
        return "ByteStorage";
    case AMN_DTYPE_I8:
        return "CharStorage";
    case AMN_DTYPE_I16:
        return "ShortStorage";
    case AMN_DTYPE_I32:
        return "IntStorage";
    case AMN_DTYPE_I64:
        return "LongStorage";
    case AMN_DTYPE_F16:
        return "HalfStorage";
    case AMN_DTYPE_BF16:
        return "BFloat16Storage";
    case AMN_DTYPE_F32:
        return "FloatStorage";
    case AMN_DTYPE_F64:
        return "DoubleStorage";
    case AMN_DTYPE_C64:
        return "ComplexFloatStorage";
    case AMN_DTYPE_C128:
        return "ComplexDoubleStorage";
    default:
        return NULL;
    }
}

/* _rebuild_tensor_v2((storage pid), 0, shape, stride, False, OrderedDict()) */
static void tensor(pk_buf *b, const amn_out_tensor *t, size_t key) {
    char k[24];
    snprintf(k, sizeof k, "%zu", key);
    /* Contiguous strides as torch computes them (an empty dimension counts
     * as 1), and the element count; both bounded by the core's checks. */
    uint64_t numel = 1, step = 1, stride[AMN_MAX_DIMS];
    for (uint32_t d = t->ndim; d-- > 0;) {
        stride[d] = step;
        step *= t->shape[d] ? t->shape[d] : 1;
        numel *= t->shape[d];
    }
    global(b, "torch._utils", "_rebuild_tensor_v2");
    op(b, '(');
    op(b, '(');
    unicode(b, "storage");
    global(b, "torch", storage_of(t->dtype));
    unicode(b, k);
    unicode(b, "cpu");
    integer(b, numel);
    op(b, 't');
    op(b, 'Q'); /* BINPERSID */
    integer(b, 0);
    int_tuple(b, t->shape, t->ndim);
    int_tuple(b, stride, t->ndim);
    op(b, 0x89); /* requires_grad = False */
    global(b, "collections", "OrderedDict");
    op(b, ')');
    op(b, 'R'); /* backward hooks: an empty OrderedDict */
    op(b, 't');
    op(b, 'R');
}

static int build_pickle(const amn_write_args *a, pk_buf *b, amn_error *err) {
    op(b, 0x80);
    op(b, 2);
    global(b, "collections", "OrderedDict");
    op(b, ')');
    op(b, 'R');
    for (size_t i = 0; i < a->n_tensors; i++) {
        if (i % SETITEMS_N == 0) op(b, '(');
        unicode(b, a->tensors[i]->name);
        tensor(b, a->tensors[i], i);
        if (i % SETITEMS_N == SETITEMS_N - 1 || i + 1 == a->n_tensors) op(b, 'u');
    }
    op(b, '.');
    return b->oom ? amn_error_set(err, AMN_E_NOMEM, "out of memory") : AMN_OK;
}

typedef struct pth_state {
    amn_sink *sink;
    const amn_out_tensor *const *t;
    zipw *z;
} pth_state;

static int pth_begin(const amn_write_args *a, void **state, size_t *order, amn_error *err) {
    *state = NULL;
    for (size_t i = 0; i < a->n_tensors; i++) {
        const amn_out_tensor *t = a->tensors[i];
        if (!storage_of(t->dtype))
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "pth cannot store tensor %s (%s: no torch storage class)", t->name,
                                 amn_dtype_name(t->dtype));
        /* A pickle string must be UTF-8: torch decodes it. */
        const size_t len = strlen(t->name);
        if (len > 0xffffffffu || !zip_utf8_valid(t->name, len))
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "tensor name is not a valid pth key (%s): '%s'",
                                 len > 0xffffffffu ? "too long" : "not UTF-8", t->name);
        order[i] = i;
    }
    pth_state *s = calloc(1, sizeof *s);
    if (!s) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    s->sink = a->sink;
    s->t = a->tensors;
    const zipw_options zo = {
        .align = ALIGN, .pad_id = 'F' | 'B' << 8, .pad_byte = 'Z', .zip64_end_always = true};
    pk_buf b = {0};
    int rc = zipw_new(a->sink, &zo, &s->z, err);
    if (!rc) rc = build_pickle(a, &b, err);
    if (!rc) rc = zipw_add(s->z, ROOT "data.pkl", b.p, b.n, err);
    if (!rc) rc = zipw_add(s->z, ROOT "byteorder", "little", 6, err);
    free(b.p);
    if (rc) {
        zipw_free(s->z);
        free(s);
        return rc;
    }
    *state = s;
    return AMN_OK;
}

static int pth_tensor_begin(void *state, size_t index, amn_error *err) {
    pth_state *s = state;
    char name[48];
    snprintf(name, sizeof name, ROOT "data/%zu", index);
    return zipw_member_begin(s->z, name, s->t[index]->nbytes, err);
}

static int pth_finish(void *state, amn_error *err) {
    pth_state *s = state;
    int rc = zipw_member_end(s->z, err);
    if (!rc) rc = zipw_add(s->z, ROOT "version", "3\n", 2, err);
    if (!rc) rc = zipw_finish(s->z, err);
    zipw_free(s->z);
    free(s);
    return rc;
}

static void pth_abort(void *state) {
    pth_state *s = state;
    if (!s) return;
    zipw_free(s->z);
    free(s);
}

const amn_writer pth_writer = {
    .struct_size = sizeof(amn_writer),
    .dtypes = (1ull << AMN_DTYPE_BOOL) | (1ull << AMN_DTYPE_U8) | (1ull << AMN_DTYPE_I8) |
              (1ull << AMN_DTYPE_I16) | (1ull << AMN_DTYPE_I32) | (1ull << AMN_DTYPE_I64) |
              (1ull << AMN_DTYPE_F16) | (1ull << AMN_DTYPE_BF16) | (1ull << AMN_DTYPE_F32) |
              (1ull << AMN_DTYPE_F64) | (1ull << AMN_DTYPE_C64) | (1ull << AMN_DTYPE_C128),
    .begin = pth_begin,
    .tensor_begin = pth_tensor_begin,
    .finish = pth_finish,
    .abort = pth_abort,
};
