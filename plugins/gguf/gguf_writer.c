/* Streaming GGUF v3 writer.
 *
 * begin() writes the header, the key/values and the tensor infos, then pads
 * to general.alignment; the core then streams each tensor's bytes in the
 * order given, tensor_begin() padding before each one, and finish() pads the
 * end as llama.cpp's own writer does, so every tensor starts at an aligned
 * offset and the offsets are exactly the running padded sizes llama.cpp
 * expects.
 *
 * Metadata: the source model's key/values when it is a GGUF file, then
 * --gguf-metadata, then --gguf-kv, later values replacing earlier ones in
 * place. Keys that describe the source file rather than the model are not
 * carried over: split.* (the output is one file) and general.file_type when
 * the tensors' types changed (recomputed from what is written).
 */
#include <stdlib.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/checked.h"
#include "gguf_format.h"
#include "gguf_qpolicy.h"
#include "gguf_types.h"

/* llama_ftype values for unquantized files (llama.h). */
#define FTYPE_ALL_F32     0u
#define FTYPE_MOSTLY_F16  1u
#define FTYPE_MOSTLY_BF16 32u

typedef struct wstate {
    amn_sink *sink;
    uint64_t data_start; /* absolute offset of the data section */
    uint64_t *offsets;   /* per tensor, relative to data_start */
    size_t n;
    uint32_t align;
} wstate;

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->oom || n == 0) return;
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->n < n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u32(buf *b, uint32_t v) {
    uint8_t le[4];
    amn_store_le32(le, v);
    put(b, le, 4);
}

static void put_u64(buf *b, uint64_t v) {
    uint8_t le[8];
    amn_store_le64(le, v);
    put(b, le, 8);
}

/* n metadata values of sz bytes each, from host order to the file's. */
static void put_scalars(buf *b, const void *data, size_t sz, size_t n) {
    if (!AMN_HOST_BIG_ENDIAN || sz == 1) {
        put(b, data, sz * n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t v[8];
        memcpy(v, (const uint8_t *)data + i * sz, sz);
        amn_le_to_host_n(v, sz, 1);
        put(b, v, sz);
    }
}

static void put_str(buf *b, const char *s, uint64_t n) {
    put_u64(b, n);
    put(b, s, (size_t)n);
}

/* The value of kv without its type tag (an array: item type, count, items). */
static int put_value(buf *b, const amn_kv *kv, unsigned depth, const char *key, amn_error *err) {
    const size_t sz = gguf_scalar_size(kv->type);
    if (sz) {
        put_scalars(b, kv->data, sz, 1);
        return AMN_OK;
    }
    if (kv->type == AMN_KV_STRING) {
        const amn_str *s = kv->data;
        put_str(b, s->ptr, s->len);
        return AMN_OK;
    }
    if (kv->type != AMN_KV_ARRAY || depth > 64)
        return amn_error_set(err, AMN_E_INVALID, "metadata %s: invalid value", key);
    const size_t esz = gguf_scalar_size(kv->elem_type);
    put_u32(b, (uint32_t)kv->elem_type);
    put_u64(b, kv->count);
    if (esz) {
        uint64_t bytes;
        if (!amn_mul_u64(kv->count, esz, &bytes) || bytes > SIZE_MAX)
            return amn_error_set(err, AMN_E_LIMIT, "metadata %s: array too large", key);
        put_scalars(b, kv->data, esz, (size_t)kv->count);
    } else if (kv->elem_type == AMN_KV_STRING) {
        const amn_str *s = kv->data;
        for (uint64_t i = 0; i < kv->count; i++) put_str(b, s[i].ptr, s[i].len);
    } else if (kv->elem_type == AMN_KV_ARRAY) {
        const amn_kv *inner = kv->data;
        for (uint64_t i = 0; i < kv->count; i++) {
            if (inner[i].type != AMN_KV_ARRAY)
                return amn_error_set(err, AMN_E_INVALID, "metadata %s: invalid nested array", key);
            int rc = put_value(b, &inner[i], depth + 1, key, err);
            if (rc) return rc;
        }
    } else {
        return amn_error_set(err, AMN_E_INVALID, "metadata %s: invalid array type", key);
    }
    return AMN_OK;
}

static bool ggml_type_of(amn_dtype d, uint32_t *out) {
    switch (d) {
    case AMN_DTYPE_F32:
        *out = GGUF_TYPE_F32;
        return true;
    case AMN_DTYPE_F16:
        *out = GGUF_TYPE_F16;
        return true;
    case AMN_DTYPE_BF16:
        *out = GGUF_TYPE_BF16;
        return true;
    case AMN_DTYPE_F64:
        *out = GGUF_TYPE_F64;
        return true;
    case AMN_DTYPE_I8:
        *out = GGUF_TYPE_I8;
        return true;
    case AMN_DTYPE_I16:
        *out = GGUF_TYPE_I16;
        return true;
    case AMN_DTYPE_I32:
        *out = GGUF_TYPE_I32;
        return true;
    case AMN_DTYPE_I64:
        *out = GGUF_TYPE_I64;
        return true;
    default:
        return false;
    }
}

/* A block output's ggml type: its encoding, when the encoding name says it
 * is that ggml type (a block tensor of another scheme is not storable). */
static bool block_type_of(const amn_out_tensor *t, uint32_t *out) {
    const gguf_type_traits *tr = gguf_type_traits_get(t->encoding);
    if (t->dtype != AMN_DTYPE_BLOCK || !tr || !t->encoding_name ||
        strcmp(tr->name, t->encoding_name) != 0)
        return false;
    uint64_t nb, numel = 1;
    for (uint32_t d = 0; d < t->ndim; d++)
        if (!amn_mul_u64(numel, t->shape[d], &numel)) return false;
    if (!gguf_type_nbytes(tr, numel, &nb) || nb != t->nbytes) return false;
    *out = t->encoding;
    return true;
}

static bool is_split_key(const char *k) {
    return strncmp(k, "split.", 6) == 0;
}

/* general.file_type names the type most 2-D+ weights have: after
 * dequantization that is F32, F16 or BF16. */
static uint32_t file_type_of(const amn_write_args *a, bool *known) {
    size_t counts[3] = {0}; /* F32, F16, BF16 */
    for (size_t i = 0; i < a->n_tensors; i++) {
        const amn_out_tensor *t = a->tensors[i];
        if (t->ndim < 2) continue;
        if (t->dtype == AMN_DTYPE_F32) counts[0]++;
        if (t->dtype == AMN_DTYPE_F16) counts[1]++;
        if (t->dtype == AMN_DTYPE_BF16) counts[2]++;
    }
    *known = counts[0] + counts[1] + counts[2] > 0;
    if (counts[2] > counts[1] && counts[2] > counts[0]) return FTYPE_MOSTLY_BF16;
    if (counts[1] > counts[0]) return FTYPE_MOSTLY_F16;
    return FTYPE_ALL_F32;
}

/* general.quantization_version = 2 (GGML_QNT_VERSION) and general.file_type
 * as llama-quantize writes them: ggml's gguf_set_val_u32 removes a key and
 * appends it, so both end the list in this order. */
static int set_llama_ftype(gguf_kvlist *l, const char *value, amn_error *err) {
    char *end;
    const unsigned long v = strtoul(value, &end, 10);
    if (!*value || *end || v > UINT32_MAX)
        return amn_error_set(err, AMN_E_INVALID, "option llama_ftype %s: not a file type", value);
    static const char *const keys[2] = {"general.quantization_version", "general.file_type"};
    const uint32_t vals[2] = {2, (uint32_t)v};
    for (int k = 0; k < 2; k++) {
        const ptrdiff_t at = gguf_kvlist_find(l, keys[k]);
        if (at >= 0) gguf_kvlist_remove(l, (size_t)at);
        uint32_t *p = amn_model_alloc(l->arena, sizeof *p);
        if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        *p = vals[k];
        const amn_kv kv = {.key = keys[k], .type = AMN_KV_U32, .data = p};
        int rc = gguf_kvlist_set(l, &kv, err);
        if (rc) return rc;
    }
    return AMN_OK;
}

static int gather_metadata(const amn_write_args *a, gguf_kvlist *l, amn_error *err) {
    const amn_model *src = a->source;
    int rc = AMN_OK;
    if (src && strcmp(amn_model_format(src), "gguf") == 0) {
        for (size_t i = 0; !rc && i < amn_model_kv_count(src); i++) {
            const amn_kv *kv = amn_model_kv(src, i);
            if (!is_split_key(kv->key)) rc = gguf_kvlist_set(l, kv, err);
        }
        ptrdiff_t ft = gguf_kvlist_find(l, "general.file_type");
        bool known;
        uint32_t v = file_type_of(a, &known);
        if (!rc && ft >= 0 && l->items[ft].type == AMN_KV_U32 && known) {
            uint32_t *p = amn_model_alloc(l->arena, sizeof *p);
            if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
            *p = v;
            l->items[ft].data = p;
        }
    }
    /* llama_ftype first, as llama-quantize sets its keys before applying
     * --override-kv; then every metadata file (in order), then every key: a
     * key given on the command line wins over a file, whatever their order. */
    for (size_t i = 0; !rc && i < a->n_options; i++)
        if (strcmp(a->option_keys[i], "llama_ftype") == 0)
            rc = set_llama_ftype(l, a->option_values[i], err);
    for (size_t i = 0; !rc && i < a->n_options; i++)
        if (strcmp(a->option_keys[i], "metadata") == 0)
            rc = gguf_metadata_load(a->option_values[i], l, err);
    for (size_t i = 0; !rc && i < a->n_options; i++)
        if (strcmp(a->option_keys[i], "kv") == 0)
            rc = gguf_metadata_override(a->option_values[i], l, err);
    return rc;
}

static int alignment_of(const gguf_kvlist *l, uint32_t *out, amn_error *err) {
    ptrdiff_t i = gguf_kvlist_find(l, GGUF_KEY_ALIGNMENT);
    *out = GGUF_DEFAULT_ALIGNMENT;
    if (i < 0) return AMN_OK;
    uint32_t v = 0;
    if (l->items[i].type == AMN_KV_U32) memcpy(&v, l->items[i].data, 4);
    if (v == 0 || (v & (v - 1)))
        return amn_error_set(err, AMN_E_INVALID, "%s must be a u32 power of two",
                             GGUF_KEY_ALIGNMENT);
    *out = v;
    return AMN_OK;
}

static bool align_up(uint64_t v, uint32_t align, uint64_t *out) {
    return amn_add_u64(v, (align - v % align) % align, out);
}

static void free_state(wstate *s) {
    if (!s) return;
    free(s->offsets);
    free(s);
}

/* Tensor infos and data follow perm: perm[k] is the k-th tensor written. */
static int build(const amn_write_args *a, const gguf_kvlist *l, const size_t *perm, wstate *s,
                 buf *b, amn_error *err) {
    put(b, GGUF_MAGIC, 4);
    put_u32(b, 3);
    put_u64(b, a->n_tensors);
    put_u64(b, l->n);
    for (size_t i = 0; i < l->n; i++) {
        const amn_kv *kv = &l->items[i];
        put_str(b, kv->key, strlen(kv->key));
        put_u32(b, (uint32_t)kv->type);
        int rc = put_value(b, kv, 0, kv->key, err);
        if (rc) return rc;
    }
    uint64_t off = 0;
    for (size_t k = 0; k < a->n_tensors; k++) {
        const size_t i = perm[k];
        const amn_out_tensor *t = a->tensors[i];
        uint32_t type;
        if (!ggml_type_of(t->dtype, &type) && !block_type_of(t, &type))
            return amn_error_set(
                err, AMN_E_UNSUPPORTED, "unsupported: GGUF cannot store tensor %s (%s)", t->name,
                t->dtype == AMN_DTYPE_BLOCK && t->encoding_name ? t->encoding_name
                                                                : amn_dtype_name(t->dtype));
        if (t->ndim > GGUF_MAX_DIMS)
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "unsupported: tensor %s has %u dimensions; GGUF holds at most %u",
                                 t->name, t->ndim, GGUF_MAX_DIMS);
        put_str(b, t->name, strlen(t->name));
        put_u32(b, t->ndim);
        for (uint32_t d = t->ndim; d-- > 0;) {
            if (t->shape[d] > INT64_MAX)
                return amn_error_set(err, AMN_E_UNSUPPORTED, "tensor %s: dimension too large",
                                     t->name);
            put_u64(b, t->shape[d]); /* ne[0] is the fastest-varying (last) dimension */
        }
        put_u32(b, type);
        put_u64(b, off);
        s->offsets[i] = off;
        if (!amn_add_u64(off, t->nbytes, &off) || !align_up(off, s->align, &off))
            return amn_error_set(err, AMN_E_LIMIT, "output larger than 2^64 bytes");
    }
    if (b->oom) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    return AMN_OK;
}

/* The input's order, or with llama_ftype llama-quantize's (its loader's
 * weights map, sorted by layer then name). */
static int tensor_order(const amn_write_args *a, size_t *order, amn_error *err) {
    bool llama = false;
    for (size_t i = 0; i < a->n_options; i++)
        llama |= strcmp(a->option_keys[i], "llama_ftype") == 0;
    for (size_t i = 0; i < a->n_tensors; i++) order[i] = i;
    if (!llama || !a->n_tensors) return AMN_OK;
    const char **names = malloc(a->n_tensors * sizeof *names);
    if (!names) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < a->n_tensors; i++) names[i] = a->tensors[i]->name;
    const bool ok = gguf_qpolicy_walk_order(names, a->n_tensors, order);
    free(names);
    return ok ? AMN_OK : amn_error_set(err, AMN_E_NOMEM, "out of memory");
}

static int begin(const amn_write_args *a, void **state, size_t *order, amn_error *err) {
    *state = NULL;
    gguf_kvlist l;
    int rc = gguf_kvlist_init(&l, err);
    if (rc) return rc;
    wstate *s = calloc(1, sizeof *s);
    buf b = {0};
    if (!s || !(s->offsets = calloc(a->n_tensors ? a->n_tensors : 1, sizeof *s->offsets)))
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc) rc = gather_metadata(a, &l, err);
    if (!rc) rc = alignment_of(&l, &s->align, err);
    if (!rc) rc = tensor_order(a, order, err);
    if (!rc) {
        s->sink = a->sink;
        s->n = a->n_tensors;
        rc = build(a, &l, order, s, &b, err);
    }
    const uint64_t base = amn_sink_tell(a->sink);
    if (!rc && !align_up(base + b.n, s->align, &s->data_start))
        rc = amn_error_set(err, AMN_E_LIMIT, "output larger than 2^64 bytes");
    if (!rc) rc = amn_sink_write(a->sink, b.p, b.n, err);
    if (!rc) rc = amn_sink_pad(a->sink, (size_t)(s->data_start - base - b.n), err);
    free(b.p);
    gguf_kvlist_free(&l);
    if (rc) {
        free_state(s);
        return rc;
    }
    *state = s;
    return AMN_OK;
}

static int tensor_begin(void *state, size_t index, amn_error *err) {
    wstate *s = state;
    if (index >= s->n) return amn_error_set(err, AMN_E_INVALID, "GGUF writer: bad tensor index");
    const uint64_t at = amn_sink_tell(s->sink), want = s->data_start + s->offsets[index];
    if (at > want)
        return amn_error_set(err, AMN_E_INVALID,
                             "GGUF writer: tensor %zu would start at %llu, past its offset %llu",
                             index, (unsigned long long)at, (unsigned long long)want);
    return amn_sink_pad(s->sink, (size_t)(want - at), err);
}

static int finish(void *state, amn_error *err) {
    wstate *s = state;
    const uint64_t at = amn_sink_tell(s->sink);
    uint64_t end = at;
    int rc = align_up(at, s->align, &end) ? amn_sink_pad(s->sink, (size_t)(end - at), err)
                                          : amn_error_set(err, AMN_E_LIMIT, "output too large");
    free_state(s);
    return rc;
}

static void abort_write(void *state) {
    free_state(state);
}

/* kv=KEY=VALUE sets one metadata key (--gguf-kv), metadata=FILE.json merges
 * a JSON object of keys (--gguf-metadata), llama_ftype=N writes the file as
 * llama-quantize writes one of file type N (what the gguf encoder asks for):
 * general.quantization_version and general.file_type set, tensors in its
 * order. */
static const char *const gguf_writer_options[] = {"kv", "metadata", "llama_ftype", NULL};

/* What can be checked before the metadata exists: the shape of a kv value
 * (its type follows from the key already set), and that a metadata file is
 * named. */
static int check_option(const char *key, const char *value, amn_error *err) {
    if (strcmp(key, "kv") == 0 && (value[0] == '=' || !strchr(value, '=')))
        return amn_error_set(err, AMN_E_INVALID, "option kv (--gguf-kv) %s: expected KEY=VALUE",
                             value);
    if (strcmp(key, "llama_ftype") == 0 && (value[0] < '0' || value[0] > '9'))
        return amn_error_set(err, AMN_E_INVALID, "option llama_ftype %s: not a file type", value);
    if (strcmp(key, "metadata") == 0 && !value[0])
        return amn_error_set(err, AMN_E_INVALID, "option metadata (--gguf-metadata): no file");
    return AMN_OK;
}

const amn_writer gguf_writer = {
    .struct_size = sizeof(amn_writer),
    .dtypes = (1ull << AMN_DTYPE_F32) | (1ull << AMN_DTYPE_F16) | (1ull << AMN_DTYPE_BF16) |
              (1ull << AMN_DTYPE_F64) | (1ull << AMN_DTYPE_I8) | (1ull << AMN_DTYPE_I16) |
              (1ull << AMN_DTYPE_I32) | (1ull << AMN_DTYPE_I64) | (1ull << AMN_DTYPE_BLOCK),
    .begin = begin,
    .tensor_begin = tensor_begin,
    .finish = finish,
    .abort = abort_write,
    .options = gguf_writer_options,
    .check_option = check_option,
};
