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
 * place. general.file_type is recomputed from what is written, unless every
 * tensor keeps its source's type (a copy). The split.*
 * keys of a split source (the model's are its shard 1's): with llama_ftype
 * dropped, as llama-quantize drops them; otherwise kept, split.count set to
 * 0 and moved last, as llama-gguf-split --merge leaves them in the file it
 * merges. split=NO/COUNT/TENSORS writes shard NO (from 0) of a split output
 * instead (see split_keys below).
 *
 * endian=big writes the file as gguf-py does with GGUFEndian.BIG (llama.cpp
 * on s390x): every number of the header and the key/values most significant
 * byte first, plain tensor elements swapped, and inside blocks the fields
 * gguf_convert_endian.py swaps; the core hands such tensors' bytes to
 * write_data() (amn_writer.filters), which swaps them on the way out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/checked.h"
#include "gguf_endian.h"
#include "gguf_format.h"
#include "gguf_qopts.h"
#include "gguf_qpolicy.h"
#include "gguf_types.h"

/* llama_ftype values for unquantized files (llama.h). */
#define FTYPE_ALL_F32     0u
#define FTYPE_MOSTLY_F16  1u
#define FTYPE_MOSTLY_BF16 32u

/* Bytes of tensor data swapped per write in a big-endian file. */
#define STAGE_BYTES (64u << 10)
/* The largest ggml block (Q8_K: 292 bytes) and element fit. */
#define CARRY_MAX 512u

typedef struct wstate {
    amn_sink *sink;
    uint64_t data_start; /* absolute offset of the data section */
    uint64_t *offsets;   /* per tensor, relative to data_start */
    uint32_t *types;     /* per tensor, its ggml type */
    size_t n;
    uint32_t align;
    bool big_endian;
    bool ggml_dims;           /* written as ggml writes (llama-quantize, llama-gguf-split) */
    uint8_t *stage;           /* big-endian: STAGE_BYTES being swapped */
    uint8_t carry[CARRY_MAX]; /* an element or block split between two pieces */
    size_t carry_n;
} wstate;

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
    bool swap; /* numbers go out in the other byte order than the host's */
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

/* n scalars of es bytes from host order into the file's. */
static void put_scalars(buf *b, const void *src, size_t n, size_t es) {
    const size_t at = b->n;
    put(b, src, n * es);
    if (b->swap && !b->oom) gguf_swap_elems(b->p + at, n, es);
}

static void put_u32(buf *b, uint32_t v) {
    put_scalars(b, &v, 1, 4);
}

static void put_u64(buf *b, uint64_t v) {
    put_scalars(b, &v, 1, 8);
}

static void put_str(buf *b, const char *s, uint64_t n) {
    put_u64(b, n);
    put(b, s, (size_t)n);
}

/* The value of kv without its type tag (an array: item type, count, items). */
static int put_value(buf *b, const amn_kv *kv, unsigned depth, const char *key, amn_error *err) {
    const size_t sz = gguf_scalar_size(kv->type);
    if (sz) {
        put_scalars(b, kv->data, 1, sz);
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
        put_scalars(b, kv->data, (size_t)kv->count, esz);
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

/* Every output has the dtype (and block type) of the source tensor of its
 * name: a copy (llama-gguf-split), whose general.file_type stays. */
static bool same_types(const amn_write_args *a, const amn_model *src) {
    for (size_t i = 0; i < a->n_tensors; i++) {
        const amn_out_tensor *t = a->tensors[i];
        const int64_t at = amn_model_find(src, t->name);
        if (at < 0) return false;
        const amn_tensor *s = amn_model_tensor(src, (size_t)at);
        if (s->dtype != t->dtype || (t->dtype == AMN_DTYPE_BLOCK && s->encoding != t->encoding))
            return false;
    }
    return true;
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

/* The value of writer option key (the last one given), or NULL. */
static const char *option_of(const amn_write_args *a, const char *key) {
    const char *v = NULL;
    for (size_t i = 0; i < a->n_options; i++)
        if (strcmp(a->option_keys[i], key) == 0) v = a->option_values[i];
    return v;
}

/* split=NO/COUNT/TENSORS: shard NO (from 0) of COUNT, the whole model
 * TENSORS tensors. */
typedef struct split_spec {
    uint16_t no, count;
    int32_t tensors;
} split_spec;

static int parse_split(const char *v, split_spec *out, amn_error *err) {
    unsigned long no, count, tensors;
    char tail;
    if (sscanf(v, "%lu/%lu/%lu%c", &no, &count, &tensors, &tail) != 3 || count < 1 ||
        count > UINT16_MAX || no >= count || tensors > INT32_MAX || v[0] == '-' || strchr(v, '-') ||
        strchr(v, '+') || strchr(v, ' '))
        return amn_error_set(err, AMN_E_INVALID,
                             "option split %s: expected NO/COUNT/TENSORS (NO below COUNT, "
                             "COUNT at most 65535)",
                             v);
    *out = (split_spec){(uint16_t)no, (uint16_t)count, (int32_t)tensors};
    return AMN_OK;
}

/* A u16 / i32 metadata value owned by the list's arena. */
static int set_int(gguf_kvlist *l, const char *key, amn_kv_type type, int64_t v, amn_error *err) {
    void *p = amn_model_alloc(l->arena, 4);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (type == AMN_KV_U16) {
        const uint16_t u = (uint16_t)v;
        memcpy(p, &u, 2);
    } else {
        const int32_t i = (int32_t)v;
        memcpy(p, &i, 4);
    }
    const ptrdiff_t at = gguf_kvlist_find(l, key);
    if (at >= 0) gguf_kvlist_remove(l, (size_t)at); /* ggml's gguf_set_val_*: removed, appended */
    const amn_kv kv = {.key = key, .type = type, .data = p};
    return gguf_kvlist_set(l, &kv, err);
}

/* A split source merged into one file: split.count = 0, moved last
 * (llama-gguf-split --merge's gguf_set_val_u16, which keeps the merge from
 * being taken for a split). A source of one file keeps its keys as they are. */
static int merged_split_count(gguf_kvlist *l, amn_error *err) {
    const ptrdiff_t at = gguf_kvlist_find(l, "split.count");
    uint16_t count = 0;
    if (at < 0 || l->items[at].type != AMN_KV_U16) return AMN_OK;
    memcpy(&count, l->items[at].data, 2);
    return count > 1 ? set_int(l, "split.count", AMN_KV_U16, 0, err) : AMN_OK;
}

/* A shard's split keys, appended last. Shard 1 keeps the whole metadata,
 * every other shard holds these three keys alone (both tools start the
 * other shards from gguf_init_empty). The order is the tool's: llama-quantize
 * --keep-split (llama_ftype) sets no, count, tensors.count, and none at all
 * for a model of one file; llama-gguf-split sets no, count (a placeholder),
 * tensors.count, then count again, which moves it last. */
static int split_keys(gguf_kvlist *l, const split_spec *sp, bool quantize, amn_error *err) {
    if (quantize && sp->count == 1) return AMN_OK;
    if (sp->no > 0) l->n = 0;
    int rc = set_int(l, "split.no", AMN_KV_U16, sp->no, err);
    if (!rc && quantize) rc = set_int(l, "split.count", AMN_KV_U16, sp->count, err);
    if (!rc) rc = set_int(l, "split.tensors.count", AMN_KV_I32, sp->tensors, err);
    if (!rc && !quantize) rc = set_int(l, "split.count", AMN_KV_U16, sp->count, err);
    return rc;
}

static int gather_metadata(const amn_write_args *a, const split_spec *split, gguf_kvlist *l,
                           amn_error *err) {
    const amn_model *src = a->source;
    int rc = AMN_OK;
    /* "hf": the key/values the hf plugin derives from a model folder, in
     * llama.cpp's converter's order, general.file_type included. */
    const bool from_gguf = src && strcmp(amn_model_format(src), "gguf") == 0;
    if (from_gguf || (src && strcmp(amn_model_format(src), "hf") == 0)) {
        const bool drop_split = split || option_of(a, "llama_ftype");
        for (size_t i = 0; !rc && i < amn_model_kv_count(src); i++) {
            const amn_kv *kv = amn_model_kv(src, i);
            if (!drop_split || !is_split_key(kv->key)) rc = gguf_kvlist_set(l, kv, err);
        }
        if (!rc && !drop_split) rc = merged_split_count(l, err);
        ptrdiff_t ft = gguf_kvlist_find(l, "general.file_type");
        bool known;
        uint32_t v = file_type_of(a, &known);
        if (!rc && from_gguf && ft >= 0 && l->items[ft].type == AMN_KV_U32 && known &&
            !same_types(a, src)) {
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
    for (size_t i = 0; !rc && i < a->n_options; i++) /* --override-kv, in order */
        if (strcmp(a->option_keys[i], "llama_kv") == 0)
            rc = gguf_qopts_apply_kv(a->option_values[i], l, err);
    for (size_t i = 0; !rc && i < a->n_options; i++)
        if (strcmp(a->option_keys[i], "metadata") == 0)
            rc = gguf_metadata_load(a->option_values[i], l, err);
    for (size_t i = 0; !rc && i < a->n_options; i++)
        if (strcmp(a->option_keys[i], "kv") == 0)
            rc = gguf_metadata_override(a->option_values[i], l, err);
    if (!rc && split) rc = split_keys(l, split, option_of(a, "llama_ftype") != NULL, err);
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
    free(s->types);
    free(s->stage);
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
        if (s->big_endian && !gguf_endian_defined(type))
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "unsupported: tensor %s: GGUF type %s has no big-endian layout "
                                 "(gguf_convert_endian.py does not convert it)",
                                 t->name, gguf_type_traits_get(type)->name);
        s->types[i] = type;
        if (t->ndim > GGUF_MAX_DIMS)
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "unsupported: tensor %s has %u dimensions; GGUF holds at most %u",
                                 t->name, t->ndim, GGUF_MAX_DIMS);
        /* ggml's gguf writer counts dimensions as ggml_n_dims does: outer
         * ones of size 1 (trailing ne) are not written; gguf-py writes
         * every one (the converter's [1, n] stays 2-D) */
        uint32_t first = 0;
        while (s->ggml_dims && first + 1 < t->ndim && t->shape[first] == 1) first++;
        put_str(b, t->name, strlen(t->name));
        put_u32(b, t->ndim - first);
        for (uint32_t d = t->ndim; d-- > first;) {
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

static int cmp_index_name(const void *x, const void *y, void *ctx) {
    const amn_out_tensor *const *t = ctx;
    return strcmp(t[*(const size_t *)x]->name, t[*(const size_t *)y]->name);
}

/* tensor_order=NAME,NAME,...: those tensors first, in that order, then the
 * others in the input's order. Every name must be an output, listed once. */
static int listed_order(const amn_write_args *a, const char *list, size_t *order, amn_error *err) {
    const size_t n = a->n_tensors;
    size_t *by = malloc((n ? n : 1) * sizeof *by);
    bool *used = calloc(n ? n : 1, sizeof *used);
    char *text = strdup(list);
    int rc = by && used && text ? AMN_OK : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    size_t k = 0;
    if (!rc) {
        for (size_t i = 0; i < n; i++) by[i] = i;
        qsort_r(by, n, sizeof *by, cmp_index_name, (void *)a->tensors);
    }
    for (char *p = text; !rc && p && *p;) {
        char *end = strchr(p, ',');
        if (end) *end = '\0';
        size_t lo = 0, hi = n; /* the first name >= p */
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2;
            if (strcmp(a->tensors[by[mid]]->name, p) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == n || strcmp(a->tensors[by[lo]]->name, p) != 0)
            rc = amn_error_set(err, AMN_E_INVALID, "option tensor_order: no tensor %.200s", p);
        else if (used[by[lo]])
            rc = amn_error_set(err, AMN_E_INVALID, "option tensor_order: %.200s listed twice", p);
        else
            used[by[lo]] = true, order[k++] = by[lo];
        p = end ? end + 1 : NULL;
    }
    for (size_t i = 0; !rc && i < n; i++)
        if (!used[i]) order[k++] = i;
    free(by);
    free(used);
    free(text);
    return rc;
}

/* The input's order, or with llama_ftype llama-quantize's (its loader's
 * weights map, sorted by layer then name), or the list tensor_order gives. */
static int tensor_order(const amn_write_args *a, size_t *order, amn_error *err) {
    bool llama = false;
    const char *list = NULL;
    for (size_t i = 0; i < a->n_options; i++) {
        llama |= strcmp(a->option_keys[i], "llama_ftype") == 0;
        if (strcmp(a->option_keys[i], "tensor_order") == 0) list = a->option_values[i];
    }
    for (size_t i = 0; i < a->n_tensors; i++) order[i] = i;
    if (list) return listed_order(a, list, order, err);
    /* A shard keeps the input's order (llama-quantize --keep-split sorts by
     * shard and offset; llama-gguf-split copies in order). */
    if (!llama || !a->n_tensors || option_of(a, "split")) return AMN_OK;
    const char **names = malloc(a->n_tensors * sizeof *names);
    if (!names) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < a->n_tensors; i++) names[i] = a->tensors[i]->name;
    const bool ok = gguf_qpolicy_walk_order(names, a->n_tensors, order);
    free(names);
    return ok ? AMN_OK : amn_error_set(err, AMN_E_NOMEM, "out of memory");
}

static int check_option(const char *key, const char *value, amn_error *err);

static int begin(const amn_write_args *a, void **state, size_t *order, amn_error *err) {
    *state = NULL;
    gguf_kvlist l;
    int rc = gguf_kvlist_init(&l, err);
    if (rc) return rc;
    wstate *s = calloc(1, sizeof *s);
    buf b = {0};
    const size_t nt = a->n_tensors ? a->n_tensors : 1;
    if (!s || !(s->offsets = calloc(nt, sizeof *s->offsets)) ||
        !(s->types = calloc(nt, sizeof *s->types)))
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < a->n_options; i++)
        if (strcmp(a->option_keys[i], "endian") == 0 &&
            !(rc = check_option("endian", a->option_values[i], err)))
            s->big_endian = strcmp(a->option_values[i], "big") == 0;
    if (!rc && s->big_endian && !(s->stage = malloc(STAGE_BYTES)))
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    b.swap = s && s->big_endian != gguf_host_big_endian();
    split_spec split;
    const char *sv = option_of(a, "split");
    if (s) s->ggml_dims = sv || option_of(a, "llama_ftype");
    if (!rc && sv) rc = parse_split(sv, &split, err);
    if (!rc) rc = gather_metadata(a, sv ? &split : NULL, &l, err);
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

/* Bytes of one element or block of a tensor's type. */
static size_t unit_of(uint32_t type) {
    const gguf_type_traits *tr = gguf_type_traits_get(type);
    return tr->kind == GGUF_KIND_PLAIN ? amn_dtype_size(tr->plain) : tr->block_bytes;
}

/* A big-endian file's tensors whose bytes differ from the little-endian
 * ones the core streams. */
static bool filters(void *state, size_t index) {
    const wstate *s = state;
    if (!s->big_endian || index >= s->n) return false;
    const gguf_type_traits *tr = gguf_type_traits_get(s->types[index]);
    return tr->kind == GGUF_KIND_PLAIN ? amn_dtype_size(tr->plain) > 1
                                       : gguf_endian_block_swaps(tr->id);
}

/* n bytes of whole units, little-endian, to the sink most significant byte
 * first (p is the writer's own memory). */
static int put_swapped(wstate *s, uint32_t type, uint8_t *p, size_t n, amn_error *err) {
    const gguf_type_traits *tr = gguf_type_traits_get(type);
    if (tr->kind == GGUF_KIND_PLAIN) {
        const size_t es = amn_dtype_size(tr->plain);
        gguf_swap_elems(p, n / es, es);
    } else {
        gguf_endian_swap_blocks(type, p, n);
    }
    return amn_sink_write(s->sink, p, n, err);
}

/* Pieces of any length, in order: whole units go out through the stage, a
 * unit split between two pieces waits in carry. */
static int write_data(void *state, size_t index, const void *data, size_t n, amn_error *err) {
    wstate *s = state;
    if (index >= s->n) return amn_error_set(err, AMN_E_INVALID, "GGUF writer: bad tensor index");
    const uint32_t type = s->types[index];
    const size_t unit = unit_of(type);
    const uint8_t *p = data;
    int rc = AMN_OK;
    while (!rc && n) {
        if (s->carry_n || n < unit) {
            const size_t k = unit - s->carry_n < n ? unit - s->carry_n : n;
            memcpy(s->carry + s->carry_n, p, k);
            s->carry_n += k, p += k, n -= k;
            if (s->carry_n == unit) {
                rc = put_swapped(s, type, s->carry, unit, err);
                s->carry_n = 0;
            }
            continue;
        }
        const size_t whole = (n < STAGE_BYTES ? n : STAGE_BYTES) / unit * unit;
        memcpy(s->stage, p, whole);
        rc = put_swapped(s, type, s->stage, whole, err);
        p += whole, n -= whole;
    }
    return rc;
}

/* kv=KEY=VALUE sets one metadata key (--gguf-kv), metadata=FILE.json merges
 * a JSON object of keys (--gguf-metadata), llama_ftype=N writes the file as
 * llama-quantize writes one of file type N (what the gguf encoder asks for):
 * general.quantization_version and general.file_type set, tensors in its
 * order; endian=big|little the byte order of the file (default little);
 * tensor_order=NAME,NAME,... writes those tensors first, in that order (the
 * hf encoder gives llama.cpp's converter's order); llama_kv=KEY=TYPE:VALUE
 * sets a key as llama-quantize's --override-kv does (gguf_qopts.h), after
 * llama_ftype's keys and before kv / metadata (the gguf encoder's
 * --override-kv, then its quantize.imatrix.* keys); split=NO/COUNT/TENSORS
 * writes shard NO (from 0) of a split model of COUNT files and TENSORS
 * tensors, in the input's order, its split.* keys last (shard 1) or alone
 * (the others), as llama-quantize --keep-split (with llama_ftype) or
 * llama-gguf-split --split (without) write them. */
static const char *const gguf_writer_options[] = {
    "kv", "metadata", "llama_ftype", "llama_kv", "endian", "tensor_order", "split", NULL};

/* What can be checked before the metadata exists: the shape of a kv value
 * (its type follows from the key already set), and that a metadata file is
 * named. */
static int check_option(const char *key, const char *value, amn_error *err) {
    if (strcmp(key, "kv") == 0 && (value[0] == '=' || !strchr(value, '=')))
        return amn_error_set(err, AMN_E_INVALID, "option kv (--gguf-kv) %s: expected KEY=VALUE",
                             value);
    if (strcmp(key, "llama_ftype") == 0 && (value[0] < '0' || value[0] > '9'))
        return amn_error_set(err, AMN_E_INVALID, "option llama_ftype %s: not a file type", value);
    if (strcmp(key, "llama_kv") == 0) return gguf_qopts_check_kv(value, err);
    if (strcmp(key, "endian") == 0 && strcmp(value, "big") != 0 && strcmp(value, "little") != 0)
        return amn_error_set(err, AMN_E_INVALID, "option endian %s: expected big or little", value);
    if (strcmp(key, "split") == 0) {
        split_spec sp;
        return parse_split(value, &sp, err);
    }
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
    .filters = filters,
    .write_data = write_data,
};
