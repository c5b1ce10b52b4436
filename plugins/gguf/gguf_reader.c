/* GGUF v1-v3 reader.
 *
 * Layout: "GGUF", u32 version, tensor count, key/value count, the key/values,
 * the tensor infos, padding to general.alignment, then the data section that
 * each tensor's offset points into. Version 1 stores every count, string
 * length, array length and dimension as u32; versions 2 and 3 as u64.
 *
 * The same parser serves open() (the whole file mapped: strings and tensor
 * data are read in place) and header-only inspect() (a read callback, through
 * a small window so that a vocabulary of 150 000 strings is not 300 000
 * callbacks). Every count read from the file is checked against the bytes
 * that remain and against the amn_limits caps before anything is allocated
 * from it; the header as a whole must fit max_header_bytes.
 *
 * Byte order is detected as gguf-py's GGUFReader does: a version whose low
 * 16 bits are zero when read little-endian is a big-endian file (llama.cpp's
 * files on s390x). Its numbers are read most significant byte first and its
 * key/values stored in host order; its tensors carry AMN_TENSOR_BIG_ENDIAN
 * (the core swaps plain elements; the gguf scheme swaps block fields).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/checked.h"
#include "gguf_endian.h"
#include "gguf_format.h"
#include "gguf_types.h"

#define WINDOW      (64u << 10)
#define ARENA_CHUNK (64u << 10)
/* The core deep-copies metadata recursively and refuses more than this. */
#define MAX_NESTING 64u

/* ---- a bump allocator for values on their way into the model ------------- */

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    _Alignas(16) uint8_t mem[];
} chunk;

typedef struct arena {
    chunk *head;
    uint64_t total; /* bytes held, checked against max_alloc */
} arena;

static void arena_reset(arena *a) {
    while (a->head) {
        chunk *c = a->head;
        a->head = c->next;
        free(c);
    }
    a->total = 0;
}

/* ---- the reader ------------------------------------------------------------ */

typedef struct reader {
    const amn_source *src;
    const uint8_t *map; /* whole file (open), or NULL (inspect) */
    uint64_t size;      /* file size, or UINT64_MAX when the source does not know */
    uint64_t pos;
    uint8_t *win; /* read window over src */
    uint64_t win_off;
    size_t win_len;
    const amn_limits *lim;
    const char *name;
    uint32_t version;
    bool big_endian; /* the file's byte order */
    bool swap;       /* the file's byte order is not the host's */
    unsigned max_depth;
    arena values;         /* one key/value at a time */
    arena names;          /* tensor names, until the model has copied them */
    uint64_t fixed_alloc; /* tensor-info table, also under max_alloc */
    int fail;             /* why arena_alloc last returned NULL */
    amn_error *err;
} reader;

typedef struct tinfo {
    const char *name;
    uint32_t ndim;
    uint64_t ne[GGUF_MAX_DIMS];
    uint32_t type;
    uint64_t offset; /* relative to the data section */
    uint64_t nbytes;
    amn_dtype dtype;
    const char *encoding_name; /* block types only */
} tinfo;

static void *arena_alloc(reader *r, arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!a->head || a->head->cap - a->head->used < n) {
        size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        uint64_t total;
        if (!amn_add_u64(r->values.total + r->names.total + r->fixed_alloc, cap, &total) ||
            total > r->lim->max_alloc) {
            r->fail =
                amn_error_set(r->err, AMN_E_LIMIT, "%s: metadata needs more than the %llu-byte cap",
                              r->name, (unsigned long long)r->lim->max_alloc);
            return NULL;
        }
        chunk *c = malloc(sizeof *c + cap);
        if (!c) {
            r->fail = amn_error_set(r->err, AMN_E_NOMEM, "%s: out of memory", r->name);
            return NULL;
        }
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
        a->total += cap;
    }
    void *p = a->head->mem + a->head->used;
    a->head->used += n;
    return p;
}

static int arena_fail(const reader *r) {
    return r->fail;
}

/* Check that n more bytes exist at the current position, before reading or
 * allocating for them. */
static int need(reader *r, uint64_t n, const char *what) {
    uint64_t end;
    if (!amn_add_u64(r->pos, n, &end) || (r->size != UINT64_MAX && end > r->size))
        return amn_error_set(r->err, AMN_E_PARSE,
                             "%s: truncated: %s at offset %llu runs past the end of the file",
                             r->name, what, (unsigned long long)r->pos);
    if (end > r->lim->max_header_bytes)
        return amn_error_set(r->err, AMN_E_LIMIT,
                             "%s: header exceeds the %llu-byte cap (at %s, offset %llu)", r->name,
                             (unsigned long long)r->lim->max_header_bytes, what,
                             (unsigned long long)r->pos);
    return AMN_OK;
}

/* Raw read from the source; *got short only at its end. */
static int src_read(reader *r, uint64_t off, void *dst, size_t n, size_t *got) {
    *got = 0;
    if (r->size != UINT64_MAX) { /* read_at may not see a range past the source */
        if (off >= r->size) return AMN_OK;
        if (r->size - off < n) n = (size_t)(r->size - off);
    }
    while (*got < n) {
        size_t k = 0;
        int rc = r->src->read_at(r->src->ctx, off + *got, (uint8_t *)dst + *got, n - *got, &k);
        if (rc)
            return amn_error_set(r->err, rc < 0 ? rc : AMN_E_IO, "%s: read failed at offset %llu",
                                 r->name, (unsigned long long)(off + *got));
        if (k == 0 || k > n - *got) break;
        *got += k;
    }
    return AMN_OK;
}

static int rd(reader *r, void *dst, size_t n, const char *what) {
    int rc = need(r, n, what);
    if (rc) return rc;
    if (r->map) {
        if (n) memcpy(dst, r->map + r->pos, n);
        r->pos += n;
        return AMN_OK;
    }
    uint8_t *out = dst;
    while (n) {
        if (r->pos >= r->win_off && r->pos < r->win_off + r->win_len) {
            size_t at = (size_t)(r->pos - r->win_off), k = r->win_len - at;
            if (k > n) k = n;
            memcpy(out, r->win + at, k);
            out += k;
            n -= k;
            r->pos += k;
            continue;
        }
        size_t got;
        if (n >= WINDOW) { /* a long string: straight into place */
            if ((rc = src_read(r, r->pos, out, n, &got))) return rc;
            if (got < n) break;
            r->pos += n;
            return AMN_OK;
        }
        if ((rc = src_read(r, r->pos, r->win, WINDOW, &got))) return rc;
        r->win_off = r->pos;
        r->win_len = got;
        if (got == 0) break;
    }
    if (n)
        return amn_error_set(r->err, AMN_E_PARSE,
                             "%s: truncated: %s at offset %llu runs past the end of the file",
                             r->name, what, (unsigned long long)r->pos);
    return AMN_OK;
}

/* An unsigned number of n bytes in the file's byte order. */
static uint64_t load_uint(const reader *r, const uint8_t *b, int n) {
    uint64_t v = 0;
    if (r->big_endian)
        for (int i = 0; i < n; i++) v = v << 8 | b[i];
    else
        for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

static int rd_u32(reader *r, uint32_t *v, const char *what) {
    uint8_t b[4];
    int rc = rd(r, b, 4, what);
    if (!rc) *v = (uint32_t)load_uint(r, b, 4);
    return rc;
}

static int rd_u64(reader *r, uint64_t *v, const char *what) {
    uint8_t b[8];
    int rc = rd(r, b, 8, what);
    if (!rc) *v = load_uint(r, b, 8);
    return rc;
}

/* n scalar values of sz bytes, read in the file's order, stored in the
 * host's (amn_kv values are host numbers). */
static int rd_scalars(reader *r, void *dst, uint64_t n, size_t sz, const char *what) {
    int rc = rd(r, dst, (size_t)(n * sz), what);
    if (!rc && r->swap) gguf_swap_elems(dst, (size_t)n, sz);
    return rc;
}

/* Counts, lengths and dimensions: u32 in version 1, u64 after. */
static int rd_count(reader *r, uint64_t *v, const char *what) {
    if (r->version != 1) return rd_u64(r, v, what);
    uint32_t u = 0;
    int rc = rd_u32(r, &u, what);
    if (!rc) *v = u;
    return rc;
}

static unsigned count_size(const reader *r) {
    return r->version == 1 ? 4 : 8;
}

/* A string. Keys and names (`cstr`) are copied NUL-terminated and must not
 * contain NUL; values from a mapping point into it. */
static int rd_str(reader *r, arena *a, amn_str *out, bool cstr, const char *what) {
    uint64_t len;
    int rc = rd_count(r, &len, what);
    if (rc) return rc;
    if (len > r->lim->max_string)
        return amn_error_set(r->err, AMN_E_LIMIT,
                             "%s: %s: string of %llu bytes exceeds the %llu-byte cap", r->name,
                             what, (unsigned long long)len, (unsigned long long)r->lim->max_string);
    if ((rc = need(r, len, what))) return rc;
    out->len = len;
    if (r->map && !cstr) {
        out->ptr = (const char *)r->map + r->pos;
        r->pos += len;
        /* Some version 1 writers counted a terminating NUL in the length. */
        if (r->version == 1 && len && out->ptr[len - 1] == '\0') out->len--;
        return AMN_OK;
    }
    char *p = arena_alloc(r, a, (size_t)len + 1);
    if (!p) return arena_fail(r);
    if ((rc = rd(r, p, (size_t)len, what))) return rc;
    p[len] = '\0';
    if (r->version == 1 && len && p[len - 1] == '\0') out->len = --len;
    if (cstr && memchr(p, '\0', (size_t)len))
        return amn_error_set(r->err, AMN_E_PARSE, "%s: %s contains a NUL byte", r->name, what);
    out->ptr = p;
    return AMN_OK;
}

static int rd_value(reader *r, uint32_t type, unsigned depth, amn_kv *out, const char *key) {
    out->type = (amn_kv_type)type;
    size_t sz = gguf_scalar_size(type);
    if (sz) {
        void *p = arena_alloc(r, &r->values, sz);
        if (!p) return arena_fail(r);
        out->data = p;
        return rd_scalars(r, p, 1, sz, key);
    }
    if (type == AMN_KV_STRING) {
        amn_str *s = arena_alloc(r, &r->values, sizeof *s);
        if (!s) return arena_fail(r);
        out->data = s;
        return rd_str(r, &r->values, s, false, key);
    }
    if (type != AMN_KV_ARRAY)
        return amn_error_set(r->err, AMN_E_PARSE, "%s: key %s: unknown value type %u", r->name, key,
                             type);
    if (depth >= r->max_depth)
        return amn_error_set(r->err, AMN_E_LIMIT, "%s: key %s: arrays nested deeper than %u",
                             r->name, key, r->max_depth);
    uint32_t et;
    uint64_t count;
    int rc = rd_u32(r, &et, key);
    if (!rc) rc = rd_count(r, &count, key);
    if (rc) return rc;
    if (et > AMN_KV_F64)
        return amn_error_set(r->err, AMN_E_PARSE, "%s: key %s: unknown array element type %u",
                             r->name, key, et);
    if (count > r->lim->max_array)
        return amn_error_set(r->err, AMN_E_LIMIT,
                             "%s: key %s: array of %llu elements exceeds the cap of %llu", r->name,
                             key, (unsigned long long)count, (unsigned long long)r->lim->max_array);
    /* Fewest bytes one element takes in the file, to refuse an impossible
     * count before allocating for it. */
    const size_t esz = gguf_scalar_size(et);
    const uint64_t min_elem = esz ? esz : et == AMN_KV_STRING ? count_size(r) : 4 + count_size(r);
    uint64_t span, bytes;
    if (!amn_mul_u64(count, min_elem, &span))
        return amn_error_set(r->err, AMN_E_PARSE, "%s: key %s: array length overflows", r->name,
                             key);
    if ((rc = need(r, span, key))) return rc;
    const size_t slot = esz ? esz : et == AMN_KV_STRING ? sizeof(amn_str) : sizeof(amn_kv);
    if (!amn_mul_u64(count, slot, &bytes) || bytes > SIZE_MAX)
        return amn_error_set(r->err, AMN_E_LIMIT, "%s: key %s: array too large", r->name, key);
    void *p = arena_alloc(r, &r->values, (size_t)bytes);
    if (!p) return arena_fail(r);
    out->elem_type = (amn_kv_type)et;
    out->count = count;
    out->data = p;
    if (esz) return rd_scalars(r, p, count, esz, key);
    for (uint64_t i = 0; i < count; i++) {
        if (et == AMN_KV_STRING)
            rc = rd_str(r, &r->values, &((amn_str *)p)[i], false, key);
        else {
            amn_kv *inner = &((amn_kv *)p)[i];
            memset(inner, 0, sizeof *inner);
            rc = rd_value(r, AMN_KV_ARRAY, depth + 1, inner, key);
        }
        if (rc) return rc;
    }
    return AMN_OK;
}

/* ---- duplicate keys: open addressing over the model's key/values --------- */

typedef struct keyset {
    size_t *slot; /* index + 1, 0 = empty */
    size_t cap, n;
} keyset;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* True when key is already among the model's key/values. */
static bool keyset_has(const keyset *ks, const amn_model *m, const char *key) {
    if (!ks->cap) return false;
    for (size_t i = hash_str(key) & (ks->cap - 1); ks->slot[i]; i = (i + 1) & (ks->cap - 1))
        if (strcmp(amn_model_kv(m, ks->slot[i] - 1)->key, key) == 0) return true;
    return false;
}

static bool keyset_add(keyset *ks, const amn_model *m, size_t idx) {
    if ((ks->n + 1) * 2 > ks->cap) {
        size_t cap = ks->cap ? ks->cap * 2 : 64;
        size_t *s = calloc(cap, sizeof *s);
        if (!s) return false;
        for (size_t i = 0; i < ks->cap; i++)
            if (ks->slot[i]) {
                size_t j = hash_str(amn_model_kv(m, ks->slot[i] - 1)->key) & (cap - 1);
                while (s[j]) j = (j + 1) & (cap - 1);
                s[j] = ks->slot[i];
            }
        free(ks->slot);
        ks->slot = s;
        ks->cap = cap;
    }
    size_t j = hash_str(amn_model_kv(m, idx)->key) & (ks->cap - 1);
    while (ks->slot[j]) j = (j + 1) & (ks->cap - 1);
    ks->slot[j] = idx + 1;
    ks->n++;
    return true;
}

/* ---- sections ---------------------------------------------------------------- */

static int read_header(reader *r, uint64_t *n_tensors, uint64_t *n_kv) {
    uint8_t magic[4];
    uint32_t v;
    int rc = rd(r, magic, 4, "magic");
    if (rc) return rc;
    if (memcmp(magic, GGUF_MAGIC, 4) != 0)
        return amn_error_set(r->err, AMN_E_PARSE, "%s: not a GGUF file (bad magic)", r->name);
    if ((rc = rd_u32(r, &v, "version"))) return rc;
    if (v != 0 && (v & 0xffffu) == 0) { /* gguf-py's test: a big-endian file */
        r->big_endian = true;
        v = v >> 24 | (v >> 8 & 0xff00u) | (v << 8 & 0xff0000u) | v << 24;
    }
    r->swap = r->big_endian != gguf_host_big_endian();
    if (v == 0 || v > 0xffffu)
        return amn_error_set(r->err, AMN_E_PARSE, "%s: bad GGUF version %u", r->name, v);
    if (v > 3)
        return amn_error_set(r->err, AMN_E_UNSUPPORTED,
                             "unsupported: %s: GGUF version %u (this reader knows 1 to 3)", r->name,
                             v);
    r->version = v;
    if ((rc = rd_count(r, n_tensors, "tensor count"))) return rc;
    return rd_count(r, n_kv, "key/value count");
}

static int read_kvs(reader *r, uint64_t n_kv, amn_model *m) {
    /* key length, value type and at least one byte of value */
    uint64_t span;
    if (!amn_mul_u64(n_kv, count_size(r) + 5, &span))
        return amn_error_set(r->err, AMN_E_PARSE, "%s: key/value count %llu is impossible", r->name,
                             (unsigned long long)n_kv);
    int rc = need(r, span, "key/values");
    if (rc) return rc;
    if (n_kv > r->lim->max_tensors) /* a count the file can hold, over --max-items */
        return amn_error_set(r->err, AMN_E_LIMIT, "%s: %llu key/values exceed the cap of %llu",
                             r->name, (unsigned long long)n_kv,
                             (unsigned long long)r->lim->max_tensors);
    keyset ks = {0};
    char what[64];
    for (uint64_t i = 0; !rc && i < n_kv; i++) {
        snprintf(what, sizeof what, "key %llu", (unsigned long long)i);
        amn_str key;
        uint32_t type;
        amn_kv kv = {0};
        if ((rc = rd_str(r, &r->values, &key, true, what))) break;
        if (key.len == 0) {
            rc = amn_error_set(r->err, AMN_E_PARSE, "%s: key %llu is empty", r->name,
                               (unsigned long long)i);
            break;
        }
        if (keyset_has(&ks, m, key.ptr)) {
            rc = amn_error_set(r->err, AMN_E_PARSE, "%s: duplicate key %s", r->name, key.ptr);
            break;
        }
        kv.key = key.ptr;
        if ((rc = rd_u32(r, &type, key.ptr))) break;
        if ((rc = rd_value(r, type, 0, &kv, key.ptr))) break;
        if ((rc = amn_model_add_kv(m, &kv, r->err))) break;
        if (!keyset_add(&ks, m, amn_model_kv_count(m) - 1))
            rc = amn_error_set(r->err, AMN_E_NOMEM, "%s: out of memory", r->name);
        arena_reset(&r->values);
    }
    free(ks.slot);
    return rc;
}

static int alignment_of(reader *r, const amn_model *m, uint32_t *out) {
    const amn_kv *kv = amn_model_find_kv(m, GGUF_KEY_ALIGNMENT);
    *out = GGUF_DEFAULT_ALIGNMENT;
    if (!kv) return AMN_OK;
    if (kv->type != AMN_KV_U32)
        return amn_error_set(r->err, AMN_E_PARSE, "%s: %s must be a u32", r->name,
                             GGUF_KEY_ALIGNMENT);
    uint32_t a;
    memcpy(&a, kv->data, 4);
    if (a == 0 || (a & (a - 1)))
        return amn_error_set(r->err, AMN_E_PARSE, "%s: %s = %u is not a power of two", r->name,
                             GGUF_KEY_ALIGNMENT, a);
    *out = a;
    return AMN_OK;
}

/* dtype, byte size and encoding name of a tensor from its ggml type. */
static int classify(reader *r, tinfo *t) {
    const gguf_type_traits *tr = gguf_type_traits_get(t->type);
    if (t->type > INT32_MAX) /* ggml keeps the type in an int32 enum */
        return amn_error_set(r->err, AMN_E_PARSE, "%s: tensor %s: invalid ggml type %u", r->name,
                             t->name, t->type);
    if (!tr || tr->kind == GGUF_KIND_RETIRED) {
        /* Parsed so that inspect can list it; no size is known, so nothing
         * of it is read and the gguf scheme refuses it at conversion. */
        char buf[64];
        if (tr)
            snprintf(buf, sizeof buf, "type %u (retired %s)", t->type, tr->name);
        else
            snprintf(buf, sizeof buf, "type %u (unknown)", t->type);
        char *p = arena_alloc(r, &r->names, strlen(buf) + 1);
        if (!p) return arena_fail(r);
        strcpy(p, buf);
        t->dtype = AMN_DTYPE_BLOCK;
        t->encoding_name = p;
        t->nbytes = 0;
        return AMN_OK;
    }
    if (t->ne[0] % tr->block_elems)
        return amn_error_set(r->err, AMN_E_PARSE,
                             "%s: tensor %s: rows of %llu elements are not a multiple of the %s "
                             "block (%u)",
                             r->name, t->name, (unsigned long long)t->ne[0], tr->name,
                             tr->block_elems);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) numel *= t->ne[d]; /* checked by the caller */
    if (!gguf_type_nbytes(tr, numel, &t->nbytes))
        return amn_error_set(r->err, AMN_E_PARSE, "%s: tensor %s: byte size overflows", r->name,
                             t->name);
    t->dtype = tr->kind == GGUF_KIND_PLAIN ? tr->plain : AMN_DTYPE_BLOCK;
    t->encoding_name = t->dtype == AMN_DTYPE_BLOCK ? tr->name : NULL;
    return AMN_OK;
}

static int read_tensor_info(reader *r, uint64_t i, uint32_t align, tinfo *t) {
    char what[64];
    snprintf(what, sizeof what, "tensor info %llu", (unsigned long long)i);
    amn_str name;
    int rc = rd_str(r, &r->names, &name, true, what);
    if (rc) return rc;
    if (name.len == 0)
        return amn_error_set(r->err, AMN_E_PARSE, "%s: tensor %llu has an empty name", r->name,
                             (unsigned long long)i);
    t->name = name.ptr;
    if ((rc = rd_u32(r, &t->ndim, t->name))) return rc;
    if (t->ndim > GGUF_MAX_DIMS)
        return amn_error_set(r->err, AMN_E_PARSE, "%s: tensor %s: %u dimensions (GGUF allows %u)",
                             r->name, t->name, t->ndim, GGUF_MAX_DIMS);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d < t->ndim && (rc = rd_count(r, &t->ne[d], t->name))) return rc;
        if (t->ne[d] > INT64_MAX)
            return amn_error_set(r->err, AMN_E_PARSE, "%s: tensor %s: dimension %u is negative",
                                 r->name, t->name, d);
        if (!amn_mul_u64(numel, t->ne[d], &numel) || numel > INT64_MAX)
            return amn_error_set(r->err, AMN_E_PARSE, "%s: tensor %s: element count overflows",
                                 r->name, t->name);
    }
    if ((rc = rd_u32(r, &t->type, t->name))) return rc;
    if ((rc = rd_u64(r, &t->offset, t->name))) return rc;
    if (t->offset % align)
        return amn_error_set(r->err, AMN_E_PARSE,
                             "%s: tensor %s: offset %llu is not a multiple of the alignment %u",
                             r->name, t->name, (unsigned long long)t->offset, align);
    return classify(r, t);
}

static int cmp_offset(const void *a, const void *b) {
    const tinfo *x = *(const tinfo *const *)a, *y = *(const tinfo *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* Every tensor inside the file, none overlapping another. */
static int check_layout(reader *r, tinfo *ti, size_t n, uint64_t data_start) {
    if (n == 0) return AMN_OK;
    if (r->size != UINT64_MAX && data_start > r->size)
        return amn_error_set(r->err, AMN_E_PARSE,
                             "%s: data section starts at %llu, past the end of the file (%llu "
                             "bytes)",
                             r->name, (unsigned long long)data_start, (unsigned long long)r->size);
    const uint64_t avail = r->size == UINT64_MAX ? UINT64_MAX - data_start : r->size - data_start;
    for (size_t i = 0; i < n; i++)
        if (!amn_range_ok(avail, ti[i].offset, ti[i].nbytes))
            return amn_error_set(r->err, AMN_E_PARSE,
                                 "%s: tensor %s: %llu bytes at data offset %llu run past the end "
                                 "of the file",
                                 r->name, ti[i].name, (unsigned long long)ti[i].nbytes,
                                 (unsigned long long)ti[i].offset);
    const tinfo **by = malloc(n * sizeof *by);
    if (!by) return amn_error_set(r->err, AMN_E_NOMEM, "%s: out of memory", r->name);
    for (size_t i = 0; i < n; i++) by[i] = &ti[i];
    qsort(by, n, sizeof *by, cmp_offset);
    int rc = AMN_OK;
    const tinfo *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        if (by[i]->nbytes == 0) continue;
        if (prev && prev->offset + prev->nbytes > by[i]->offset) {
            rc = amn_error_set(r->err, AMN_E_PARSE, "%s: tensors %s and %s overlap at offset %llu",
                               r->name, prev->name, by[i]->name,
                               (unsigned long long)(data_start + by[i]->offset));
            break;
        }
        prev = by[i];
    }
    free(by);
    return rc;
}

static int add_tensors(reader *r, const tinfo *ti, size_t n, uint64_t data_start, amn_model *m) {
    for (size_t i = 0; i < n; i++) {
        const tinfo *t = &ti[i];
        amn_tensor at = {
            .struct_size = sizeof at,
            .name = t->name,
            .dtype = t->dtype,
            .ndim = t->ndim,
            .nbytes = t->nbytes,
            .file_offset = data_start + t->offset,
            .encoding = t->dtype == AMN_DTYPE_BLOCK ? t->type : 0,
            .encoding_name = t->encoding_name,
            /* Plain elements and block fields most significant byte first;
             * a one-byte type reads the same either way. */
            .flags = r->big_endian && (t->dtype == AMN_DTYPE_BLOCK || amn_dtype_size(t->dtype) > 1)
                         ? AMN_TENSOR_BIG_ENDIAN
                         : 0,
        };
        for (uint32_t d = 0; d < t->ndim; d++) at.shape[d] = t->ne[t->ndim - 1 - d];
        if (r->map) {
            at.data = r->map + at.file_offset;
            at.extent = t->nbytes;
        }
        int rc = amn_model_add_tensor(m, &at, r->err);
        if (rc) return amn_error_prefix(r->err, "%s: ", r->name);
    }
    return AMN_OK;
}

int gguf_read(const amn_source *src, const uint8_t *map, const amn_limits *lim, amn_model *m,
              amn_error *err) {
    reader r = {
        .src = src,
        .map = map,
        .size = src->size,
        .lim = lim,
        .name = src->name ? src->name : "GGUF",
        .max_depth = lim->max_depth < MAX_NESTING ? lim->max_depth : MAX_NESTING,
        .err = err,
    };
    if (!map && !(r.win = malloc(WINDOW)))
        return amn_error_set(err, AMN_E_NOMEM, "%s: out of memory", r.name);
    uint64_t n_tensors = 0, n_kv = 0;
    uint32_t align = GGUF_DEFAULT_ALIGNMENT;
    tinfo *ti = NULL;
    char label[32];
    int rc = read_header(&r, &n_tensors, &n_kv);
    if (!rc) rc = read_kvs(&r, n_kv, m);
    if (!rc) rc = alignment_of(&r, m, &align);
    if (!rc && n_tensors > lim->max_tensors)
        rc = amn_error_set(err, AMN_E_LIMIT, "%s: %llu tensors exceed the cap of %llu", r.name,
                           (unsigned long long)n_tensors, (unsigned long long)lim->max_tensors);
    if (!rc) {
        /* name length, n_dims, type and offset */
        uint64_t span = 0;
        if (!amn_mul_u64(n_tensors, count_size(&r) + 16, &span))
            rc = amn_error_set(err, AMN_E_PARSE, "%s: tensor count %llu is impossible", r.name,
                               (unsigned long long)n_tensors);
        if (!rc) rc = need(&r, span, "tensor infos");
    }
    if (!rc) {
        if (!amn_mul_u64(n_tensors, sizeof *ti, &r.fixed_alloc) || r.fixed_alloc > lim->max_alloc)
            rc = amn_error_set(err, AMN_E_LIMIT, "%s: tensor table exceeds the allocation cap",
                               r.name);
        else if (!(ti = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *ti)))
            rc = amn_error_set(err, AMN_E_NOMEM, "%s: out of memory", r.name);
    }
    for (uint64_t i = 0; !rc && i < n_tensors; i++) rc = read_tensor_info(&r, i, align, &ti[i]);
    uint64_t data_start = 0;
    if (!rc && !amn_add_u64(r.pos, (align - r.pos % align) % align, &data_start))
        rc = amn_error_set(err, AMN_E_PARSE, "%s: data section offset overflows", r.name);
    if (!rc) rc = check_layout(&r, ti, (size_t)n_tensors, data_start);
    if (!rc) rc = add_tensors(&r, ti, (size_t)n_tensors, data_start, m);
    if (!rc) {
        snprintf(label, sizeof label, "GGUF v%u%s", r.version, r.big_endian ? " big-endian" : "");
        rc = amn_model_set_label(m, label, err);
    }
    free(ti);
    free(r.win);
    arena_reset(&r.values);
    arena_reset(&r.names);
    return rc;
}
