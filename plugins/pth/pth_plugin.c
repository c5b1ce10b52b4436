/* pth_plugin.c — PyTorch ZIP checkpoints (torch.save since 1.6): .pth, .pt,
 * .bin. The archive holds <root>/data.pkl (the object tree, run through the
 * allowlisted pickle VM) and <root>/data/<key> (raw storage bytes). Tensors
 * become views into the mapped storages, strided when they are not
 * C-contiguous; nested dicts flatten to dotted names, and everything that
 * is not a tensor is recorded as a note.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/checked.h"
#include "amn/plugin.h"

#include "pickle_vm.h"
#include "pth_scan.h"
#include "pth_shards.h"
#include "pth_writer.h"
#include "amn/kit/zip_reader.h"

#define PTH_NAME_MAX 4096
#define NOTE_MAX     256
#define UNKNOWN_OFF  UINT64_MAX

/* Pre-1.6 torch.save starts with a pickle of the magic number
 * 0x1950a86a20f9469cfc6c: PROTO n, an optional FRAME (protocol 4+), then
 * LONG1 of these 10 bytes. */
static const uint8_t legacy_magic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
#define LEGACY_HEAD 32

bool pth_is_legacy(const uint8_t *p, uint64_t n) {
    if (n < 2 || p[0] != 0x80 || p[1] < 2 || p[1] > 5) return false;
    uint64_t i = 2;
    if (n > i && p[i] == 0x95) i += 9;
    return n >= i + 2 + sizeof legacy_magic && p[i] == 0x8a && p[i + 1] == sizeof legacy_magic &&
           memcmp(p + i + 2, legacy_magic, sizeof legacy_magic) == 0;
}

/* A pickle (PROTO 2-5) that ends the file, or one followed by a ZIP: what
 * torch.load would unpickle as a legacy file. Claimed so that it is
 * refused (and scanned) as a checkpoint rather than left unrecognised. */
static bool is_raw_pickle(const amn_probe_data *pd) {
    if (pd->head_size < 3 || pd->head[0] != 0x80 || pd->head[1] < 2 || pd->head[1] > 5)
        return false;
    if (pd->tail_size && pd->tail[pd->tail_size - 1] == '.') return true;
    for (size_t i = 0; i + 22 <= pd->tail_size; i++)
        if (memcmp(pd->tail + i, "PK\x05\x06", 4) == 0) return true;
    return false;
}

static int pth_probe(const amn_probe_data *pd) {
    /* A model folder of .bin weights, or an index (above the safetensors
     * plugin's "possible" for any folder). */
    if (pd->is_directory)
        return pth_dir_weights(pd->path) != PTH_DIR_NONE ? AMN_PROBE_LIKELY : AMN_PROBE_NONE;
    if (pth_is_index_path(pd->path) && pd->head_size > 0 && pd->head[0] == '{')
        return AMN_PROBE_LIKELY + 10;
    if (pth_is_legacy(pd->head, pd->head_size)) return AMN_PROBE_LIKELY;
    if (is_raw_pickle(pd)) return AMN_PROBE_POSSIBLE;
    zip_probe z;
    zip_probe_scan(pd, &z);
    if (!z.is_zip || z.empty) return AMN_PROBE_NONE;
    /* torch.save writes data.pkl first. */
    bool first = z.first_name && zip_name_is_pickle(z.first_name, z.first_len);
    if (first) return z.cd_pkl == 1 ? AMN_PROBE_MAX : AMN_PROBE_MAX - 5;
    if (z.cd_pkl == 1) return AMN_PROBE_LIKELY + 10;
    return AMN_PROBE_NONE;
}

typedef struct pth_ctx {
    const amn_source *src;
    const zip_dir *dir;
    const amn_map *amap; /* NULL for inspect: tensors get no data */
    const uint8_t *map;  /* its bytes */
    amn_model *m;
    const amn_limits *lim;
    bool big_endian;
    char prefix[PTH_NAME_MAX]; /* "archive/" */
    size_t *sorted;            /* entry indices by name */
    uint64_t *data_off;        /* per entry, UNKNOWN_OFF until read */
    const uint8_t **bytes;     /* per entry: its data in memory (open only) */
    uint64_t allocated;
    uint64_t visits, max_visits, tensors;
    bool nested;
    char name[PTH_NAME_MAX];
    amn_error *err;
} pth_ctx;

static int cmp_entry(const void *a, const void *b, void *dir) {
    const zip_dir *d = dir;
    return strcmp(d->entries[*(const size_t *)a].name, d->entries[*(const size_t *)b].name);
}

static const zip_entry *find_entry(const pth_ctx *c, const char *name, size_t *index) {
    size_t lo = 0, hi = c->dir->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const zip_entry *e = &c->dir->entries[c->sorted[mid]];
        int r = strcmp(e->name, name);
        if (r == 0) {
            *index = c->sorted[mid];
            return e;
        }
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- notes: a short Python-like rendering of non-tensor values ---------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n && b->n + 1 < b->cap; i++) b->p[b->n++] = s[i];
    b->p[b->n] = '\0';
}
static void sb_str(sbuf *b, const char *s) {
    sb_put(b, s, strlen(s));
}

/* Shortest text that reads back as the same double, like Python's repr. */
static void format_float(char *buf, size_t cap, double f) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, f);
        if (strtod(buf, NULL) == f || f != f) break;
    }
    if (!strpbrk(buf, ".eni")) strncat(buf, ".0", cap - strlen(buf) - 1);
}

static void render(sbuf *b, const pv *v, unsigned depth) {
    char tmp[64];
    if (b->n + 4 >= b->cap) return;
    switch (v->kind) {
    case PV_NONE:
        sb_str(b, "None");
        return;
    case PV_BOOL:
        sb_str(b, v->u.b ? "True" : "False");
        return;
    case PV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v->u.i);
        sb_str(b, tmp);
        return;
    case PV_BIGINT:
        sb_str(b, "<big integer>");
        return;
    case PV_FLOAT:
        format_float(tmp, sizeof tmp, v->u.f);
        sb_str(b, tmp);
        return;
    case PV_STR:
        sb_put(b, v->u.str.s, v->u.str.len);
        return;
    case PV_BYTES:
        snprintf(tmp, sizeof tmp, "<%llu bytes>", (unsigned long long)v->u.bytes_len);
        sb_str(b, tmp);
        return;
    case PV_GLOBAL:
        sb_str(b, v->u.global.name);
        return;
    case PV_STORAGE:
        sb_str(b, "<storage>");
        return;
    case PV_OPAQUE:
        sb_str(b, v->u.text);
        return;
    case PV_COMPLEX: /* like Python's repr: (1.5-2j), or 2j with no real part */
        if (v->u.cplx.re != 0.0 || signbit(v->u.cplx.re)) {
            format_float(tmp, sizeof tmp, v->u.cplx.re);
            if (strcmp(tmp + strlen(tmp) - 2, ".0") == 0) tmp[strlen(tmp) - 2] = '\0';
            sb_str(b, "(");
            sb_str(b, tmp);
            if (!signbit(v->u.cplx.im) || v->u.cplx.im != v->u.cplx.im) sb_str(b, "+");
        }
        format_float(tmp, sizeof tmp, v->u.cplx.im);
        if (strcmp(tmp + strlen(tmp) - 2, ".0") == 0) tmp[strlen(tmp) - 2] = '\0';
        sb_str(b, tmp);
        sb_str(b, "j");
        if (v->u.cplx.re != 0.0 || signbit(v->u.cplx.re)) sb_str(b, ")");
        return;
    case PV_TENSOR:
        sb_str(b, "<tensor>");
        return;
    case PV_DICT:
        snprintf(tmp, sizeof tmp, "<dict of %zu>", v->u.dict.n);
        sb_str(b, tmp);
        return;
    case PV_TUPLE:
    case PV_LIST:
    case PV_SET:
        if (depth > 4) {
            sb_str(b, "...");
            return;
        }
        sb_str(b, v->kind == PV_LIST ? "[" : v->kind == PV_SET ? "{" : "(");
        for (size_t i = 0; i < v->u.seq.n; i++) {
            if (i) sb_str(b, ", ");
            if (b->n + 8 >= b->cap) {
                sb_str(b, "...");
                break;
            }
            render(b, v->u.seq.items[i], depth + 1);
        }
        sb_str(b, v->kind == PV_LIST ? "]" : v->kind == PV_SET ? "}" : ")");
        return;
    }
}

/* ---- tensors ------------------------------------------------------------ */

/* The bytes of a storage member: mapped in place when stored, inflated into
 * model memory otherwise (torch stores; other writers may not). */
static int storage_data(pth_ctx *c, size_t idx, const char *tname, const uint8_t **data,
                        uint64_t *file_off) {
    const zip_entry *e = &c->dir->entries[idx];
    if (c->data_off[idx] == UNKNOWN_OFF) {
        uint64_t off;
        int rc = zip_entry_data_offset(c->src, c->dir, e, &off, c->err);
        if (rc != AMN_OK) return amn_error_prefix(c->err, "tensor '%s': ", tname);
        c->data_off[idx] = off;
        if (c->map) {
            if (e->method == ZIP_STORED) {
                c->bytes[idx] = c->map + off;
            } else {
                rc = zip_inflate_keep(e, c->amap, off, c->m, c->lim, &c->allocated, &c->bytes[idx],
                                      c->err);
                if (rc != AMN_OK) return amn_error_prefix(c->err, "tensor '%s': ", tname);
            }
        }
    }
    *data = c->bytes[idx];
    *file_off = c->data_off[idx];
    return AMN_OK;
}

static int add_tensor(pth_ctx *c, const pv_tensor *x, const char *tname) {
    if (++c->tensors > c->lim->max_tensors)
        return amn_error_set(c->err, AMN_E_LIMIT, "more than %llu tensors",
                             (unsigned long long)c->lim->max_tensors);
    const pv_storage *s = &x->storage->u.storage;
    if (x->dtype == AMN_DTYPE_INVALID)
        return amn_error_set(c->err, AMN_E_UNSUPPORTED,
                             "tensor '%s': storage type %s is not supported (amn has no complex "
                             "or quantized dtype, so no output format here can hold it)",
                             tname, s->type_name ? s->type_name : "?");
    char member[PTH_NAME_MAX];
    int k = snprintf(member, sizeof member, "%sdata/%s", c->prefix, s->key);
    size_t idx;
    const zip_entry *e = k > 0 && (size_t)k < sizeof member ? find_entry(c, member, &idx) : NULL;
    if (!e)
        return amn_error_set(c->err, AMN_E_PARSE, "tensor '%s': storage '%s' is not in the archive",
                             tname, s->key);
    const uint8_t *base = NULL;
    uint64_t file_off = 0;
    int rc = storage_data(c, idx, tname, &base, &file_off);
    if (rc != AMN_OK) return rc;

    size_t esize = amn_dtype_size(x->dtype);
    amn_tensor t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.name = tname;
    t.dtype = x->dtype;
    t.ndim = x->ndim;
    uint64_t numel = 1;
    bool contiguous = true;
    uint64_t expect = 1;
    for (int i = (int)x->ndim - 1; i >= 0; i--) {
        t.shape[i] = x->shape[i];
        t.strides[i] = x->stride[i];
        if (!amn_mul_u64(numel, x->shape[i], &numel))
            return amn_error_set(c->err, AMN_E_PARSE, "tensor '%s': shape overflows", tname);
        /* Dimensions of size 1 may carry any stride in a contiguous tensor. */
        if (x->shape[i] != 1 && (uint64_t)x->stride[i] != expect) contiguous = false;
        if (x->shape[i] > 1) expect *= x->shape[i]; /* <= numel: no overflow */
    }
    if (!amn_mul_u64(numel, esize, &t.nbytes))
        return amn_error_set(c->err, AMN_E_PARSE, "tensor '%s': size overflows", tname);
    uint64_t byte_off;
    if (!amn_mul_u64(x->offset, esize, &byte_off))
        return amn_error_set(c->err, AMN_E_PARSE, "tensor '%s': storage offset overflows", tname);
    if (byte_off > e->usize) {
        if (numel != 0)
            return amn_error_set(c->err, AMN_E_PARSE,
                                 "tensor '%s': storage offset %llu lies past storage '%s' (%llu "
                                 "bytes)",
                                 tname, (unsigned long long)x->offset, s->key,
                                 (unsigned long long)e->usize);
        byte_off = e->usize;
    }
    t.data = base ? base + byte_off : NULL;
    t.extent = base ? e->usize - byte_off : 0;
    t.file_offset = e->method == ZIP_STORED ? file_off + byte_off : file_off;
    if (!contiguous && numel > 1) t.flags |= AMN_TENSOR_STRIDED;
    if (c->big_endian && esize > 1) t.flags |= AMN_TENSOR_BIG_ENDIAN;
    /* For inspect there is no data to bound, but a view past its storage is
     * still worth reporting: check it against the member size here. */
    if (!base && numel) {
        uint64_t last = 0;
        for (uint32_t i = 0; i < x->ndim; i++) {
            uint64_t step;
            if (!amn_mul_u64(x->shape[i] - 1, (uint64_t)x->stride[i], &step) ||
                !amn_add_u64(last, step, &last))
                return amn_error_set(c->err, AMN_E_PARSE, "tensor '%s': strides overflow", tname);
        }
        uint64_t end;
        if (!amn_add_u64(last, 1, &end) || !amn_mul_u64(end, esize, &end) ||
            end > e->usize - byte_off)
            return amn_error_set(c->err, AMN_E_PARSE,
                                 "tensor '%s': view runs past storage '%s' (%llu bytes)", tname,
                                 s->key, (unsigned long long)e->usize);
    }
    return amn_model_add_tensor(c->m, &t, c->err);
}

/* Append ".key" (or "key" at the root) to c->name; returns the old length
 * to restore, or -1 on overflow (error set). */
static long push_name(pth_ctx *c, size_t len, const pv *key) {
    char tmp[NOTE_MAX];
    const char *s;
    size_t n;
    if (key->kind == PV_STR) {
        s = key->u.str.s;
        n = key->u.str.len;
        if (strlen(s) != n) {
            amn_error_set(c->err, AMN_E_PARSE, "checkpoint key with a NUL byte under '%s'",
                          c->name);
            return -1;
        }
    } else {
        sbuf b = {tmp, 0, sizeof tmp};
        tmp[0] = '\0';
        render(&b, key, 0);
        s = tmp;
        n = b.n;
    }
    size_t need = len + (len ? 1 : 0) + n;
    if (need >= sizeof c->name) {
        amn_error_set(c->err, AMN_E_LIMIT, "checkpoint name longer than %d bytes under '%s'",
                      PTH_NAME_MAX, c->name);
        return -1;
    }
    if (len) c->name[len++] = '.';
    memcpy(c->name + len, s, n);
    c->name[len + n] = '\0';
    return (long)(len + n);
}

static bool is_container(const pv *v) {
    return v->kind == PV_DICT || v->kind == PV_LIST || v->kind == PV_TUPLE;
}

static int flatten(pth_ctx *c, const pv *v, size_t len, unsigned depth) {
    if (depth > c->lim->max_depth)
        return amn_error_set(c->err, AMN_E_LIMIT,
                             "checkpoint nested deeper than %u levels (or cyclic) at '%.64s...'",
                             c->lim->max_depth, c->name);
    if (++c->visits > c->max_visits)
        return amn_error_set(c->err, AMN_E_LIMIT, "checkpoint holds more than %llu values",
                             (unsigned long long)c->max_visits);
    c->name[len] = '\0';
    if (v->kind == PV_TENSOR) {
        if (len == 0) strcpy(c->name, "tensor");
        if (depth > 1) c->nested = true;
        return add_tensor(c, &v->u.tensor, c->name);
    }
    if (v->kind == PV_DICT) {
        for (size_t i = 0; i < v->u.dict.n; i++) {
            long nl = push_name(c, len, v->u.dict.keys[i]);
            if (nl < 0) return c->err ? c->err->code : AMN_E_PARSE;
            int rc = flatten(c, v->u.dict.vals[i], (size_t)nl, depth + 1);
            if (rc != AMN_OK) return rc;
        }
        c->name[len] = '\0';
        return AMN_OK;
    }
    if (v->kind == PV_LIST || v->kind == PV_TUPLE) {
        bool deep = false;
        for (size_t i = 0; i < v->u.seq.n && !deep; i++)
            deep = v->u.seq.items[i]->kind == PV_TENSOR || is_container(v->u.seq.items[i]);
        if (deep) {
            for (size_t i = 0; i < v->u.seq.n; i++) {
                pv idx;
                idx.kind = PV_INT;
                idx.u.i = (int64_t)i;
                long nl = push_name(c, len, &idx);
                if (nl < 0) return c->err ? c->err->code : AMN_E_PARSE;
                int rc = flatten(c, v->u.seq.items[i], (size_t)nl, depth + 1);
                if (rc != AMN_OK) return rc;
            }
            c->name[len] = '\0';
            return AMN_OK;
        }
    }
    c->nested = true;
    char text[NOTE_MAX];
    sbuf b = {text, 0, sizeof text};
    text[0] = '\0';
    render(&b, v, 0);
    return amn_model_add_note(c->m, len ? c->name : "value", text, c->err);
}

/* ---- one pickle, one reading --------------------------------------------- */

static int check_members(pth_ctx *c, const zip_entry *pkl, const char *path) {
    size_t plen = strlen(c->prefix);
    for (size_t i = 0; i < c->dir->count; i++) {
        const zip_entry *e = &c->dir->entries[i];
        if (e == pkl) continue;
        /* PyTorch takes the root from the first member and finds records
         * under it; a member elsewhere is one it and amn might read apart. */
        if (e->name_len < plen || memcmp(e->name, c->prefix, plen) != 0)
            return amn_error_set(c->err, AMN_E_DISALLOWED,
                                 "%s: member '%s' lies outside the checkpoint's root '%s'", path,
                                 e->name, c->prefix);
        const char *why = pth_member_anomaly(e->name + plen, e->name_len - plen);
        if (why)
            return amn_error_set(c->err, AMN_E_DISALLOWED, "%s: member '%s': %s", path, e->name,
                                 why);
    }
    return AMN_OK;
}

/* A data/<key> record no persistent id names is never read by torch.load;
 * one that holds a pickle (or a ZIP) is there for another loader. */
static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int check_unreferenced(pth_ctx *c, const pk_vm *vm, const char *path) {
    size_t plen = strlen(c->prefix), nk = pk_storage_count(vm);
    const char **keys = malloc((nk ? nk : 1) * sizeof *keys);
    if (!keys) return amn_error_set(c->err, AMN_E_NOMEM, "out of memory");
    for (size_t k = 0; k < nk; k++) keys[k] = pk_storage_key(vm, k);
    qsort(keys, nk, sizeof *keys, cmp_str);
    int rc = AMN_OK;
    for (size_t i = 0; rc == AMN_OK && i < c->dir->count; i++) {
        const zip_entry *e = &c->dir->entries[i];
        if (e->name_len < plen + 5 || memcmp(e->name + plen, "data/", 5) != 0) continue;
        const char *key = e->name + plen + 5;
        if (bsearch(&key, keys, nk, sizeof *keys, cmp_str)) continue;
        uint8_t head[4] = {0};
        size_t got = 0;
        rc = zip_inflate_prefix(c->src, e, e->data_off, head, sizeof head, &got, c->err);
        if (rc != AMN_OK) break;
        bool pickle = got >= 2 && head[0] == 0x80 && head[1] <= 5;
        bool zip = got >= 4 && zip_is_local_header(head, got);
        if (pickle || zip)
            rc = amn_error_set(c->err, AMN_E_DISALLOWED,
                               "%s: record '%s' is referenced by no tensor and holds %s", path,
                               e->name, pickle ? "a pickle" : "a ZIP archive");
    }
    free(keys);
    return rc;
}

/* ---- open / inspect ------------------------------------------------------- */

static int legacy_error(const char *path, amn_error *err) {
    return amn_error_set(err, AMN_E_UNSUPPORTED,
                         "%s: legacy (pre-1.6, non-ZIP) PyTorch checkpoint; re-save it with a "
                         "current PyTorch: torch.save(torch.load(f), out)",
                         path ? path : "input");
}

static int load(pth_ctx *c, const char *path) {
    const zip_dir *d = c->dir;
    const zip_entry *pkl = NULL;
    for (size_t i = 0; i < d->count; i++) {
        const zip_entry *e = &d->entries[i];
        if (!zip_name_is_pickle(e->name, e->name_len)) continue;
        if (pkl)
            return amn_error_set(c->err, AMN_E_PARSE, "%s: more than one data.pkl in the archive",
                                 path ? path : "pth");
        pkl = e;
    }
    if (!pkl)
        return amn_error_set(c->err, AMN_E_PARSE,
                             "%s: ZIP archive without <root>/data.pkl: not a PyTorch checkpoint",
                             path ? path : "pth");
    size_t plen = pkl->name_len - 8; /* keeps the '/' */
    memcpy(c->prefix, pkl->name, plen);
    c->prefix[plen] = '\0';
    int rc = check_members(c, pkl, path ? path : "pth");
    if (rc != AMN_OK) return rc;

    c->sorted = malloc((d->count ? d->count : 1) * sizeof *c->sorted);
    c->data_off = malloc((d->count ? d->count : 1) * sizeof *c->data_off);
    c->bytes = calloc(d->count ? d->count : 1, sizeof *c->bytes);
    if (!c->sorted || !c->data_off || !c->bytes)
        return amn_error_set(c->err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < d->count; i++) {
        c->sorted[i] = i;
        c->data_off[i] = UNKNOWN_OFF;
    }
    qsort_r(c->sorted, d->count, sizeof *c->sorted, cmp_entry, (void *)d);

    char rec[PTH_NAME_MAX + 16];
    snprintf(rec, sizeof rec, "%sbyteorder", c->prefix);
    size_t idx;
    const zip_entry *bo = find_entry(c, rec, &idx);
    if (bo) {
        uint8_t *txt;
        int rc = zip_read_member(c->src, d, bo, 16, &txt, c->err);
        if (rc != AMN_OK) return rc;
        if (strcmp((char *)txt, "big") == 0)
            c->big_endian = true;
        else if (strcmp((char *)txt, "little") != 0) {
            free(txt);
            return amn_error_set(c->err, AMN_E_PARSE,
                                 "%s: byteorder record is neither little "
                                 "nor big",
                                 path ? path : "pth");
        }
        free(txt);
    }

    uint8_t *pickle;
    rc = zip_read_member(c->src, d, pkl, c->lim->max_header_bytes, &pickle, c->err);
    if (rc != AMN_OK) return rc;
    pk_vm *vm;
    rc = pk_run(pickle, (size_t)pkl->usize, c->lim, &vm, c->err);
    if (rc != AMN_OK) {
        free(pickle);
        return amn_error_prefix(c->err, "%s: data.pkl: ", path ? path : "pth");
    }
    rc = check_unreferenced(c, vm, path ? path : "pth");
    if (rc != AMN_OK) {
        pk_free(vm);
        free(pickle);
        return rc;
    }
    c->name[0] = '\0';
    /* The walk re-enters a memoized container at every reference to it, so a
     * few hundred bytes of nested shared lists would unfold into 2^n values
     * (and as many rendered notes). Every value or reference costs the pickle
     * at least one byte, so a checkpoint that shares no containers visits at
     * most one value per byte: allow twice that. */
    uint64_t budget = pkl->usize * 2 + 1024; /* usize <= max_header_bytes */
    c->max_visits = budget < c->lim->max_array ? budget : c->lim->max_array;
    const pv *root = pk_root(vm);
    rc = flatten(c, root, 0, 0);
    if (rc == AMN_OK)
        rc = amn_model_set_label(c->m,
                                 root->kind == PV_TENSOR ? "PyTorch tensor"
                                 : c->nested             ? "PyTorch checkpoint"
                                                         : "PyTorch state_dict",
                                 c->err);
    pk_free(vm);
    free(pickle);
    return rc;
}

int pth_run(const amn_source *src, const amn_map *map, const char *path, const amn_limits *lim,
            amn_model **out, amn_error *err) {
    *out = NULL;
    uint8_t head[LEGACY_HEAD];
    size_t got = 0;
    /* read_at must not see a range past the source (a memory source does
     * not bound it): clip to a file shorter than the head. */
    const size_t want = src->size < sizeof head ? (size_t)src->size : sizeof head;
    int rc = want ? src->read_at(src->ctx, 0, head, want, &got) : AMN_OK;
    if (rc != AMN_OK) return amn_error_set(err, rc, "%s: read failed", path ? path : "pth");
    if (pth_is_legacy(head, got)) return legacy_error(path, err);
    /* torch.load decides by the first four bytes: without a local header
     * there it unpickles the file's front, whatever ZIP follows. */
    if (!zip_is_local_header(head, got))
        return amn_error_set(
            err, got && head[0] == 0x80 ? AMN_E_DISALLOWED : AMN_E_PARSE,
            "%s: does not start with a ZIP local header (PK\\3\\4)%s", path ? path : "pth",
            got && head[0] == 0x80 ? ": it starts with a pickle, which torch.load would run as a "
                                     "legacy checkpoint whatever follows (a raw pickle, or a "
                                     "pickle/ZIP polyglot)"
                                   : "; not a PyTorch checkpoint");
    zip_dir d;
    rc = zip_dir_read(src, lim, &d, err);
    if (rc != AMN_OK) return rc;
    pth_ctx *c = calloc(1, sizeof *c);
    amn_model *m = amn_model_new("pth");
    if (!c || !m) {
        free(c);
        amn_model_free(m);
        zip_dir_free(&d);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    c->src = src;
    c->dir = &d;
    c->amap = map;
    c->map = map ? amn_map_data(map) : NULL;
    c->m = m;
    c->lim = lim;
    c->err = err;
    amn_error local;
    if (!err) c->err = &local; /* flatten reads the code back */
    rc = load(c, path);
    free(c->sorted);
    free(c->data_off);
    free(c->bytes);
    free(c);
    zip_dir_free(&d);
    if (rc != AMN_OK) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}

static int pth_open(const amn_open_args *a, amn_model **out, amn_error *err) {
    *out = NULL;
    if (pth_is_index_path(a->path) || (!a->map && pth_dir_weights(a->path) != PTH_DIR_NONE))
        return pth_open_sharded(a->path, false, a->limits, out, err);
    if (!a->map) return amn_error_set(err, AMN_E_INVALID, "pth: a directory is not a checkpoint");
    zip_memsrc ms;
    zip_memsrc_init(&ms, amn_map_data(a->map), amn_map_size(a->map), a->path);
    return pth_run(&ms.src, a->map, a->path, a->limits, out, err);
}

static int pth_inspect(const amn_inspect_args *a, amn_model **out, amn_error *err) {
    if (!a->src || pth_is_index_path(a->path))
        return pth_open_sharded(a->path, true, a->limits, out, err);
    return pth_run(a->src, NULL, a->path ? a->path : a->src->name, a->limits, out, err);
}

/* probe() scores above WEAK only a sharded folder, an index ('{'), a pickle
 * (PROTO opcode 0x80) or a ZIP at the start. */
static const amn_probe_sig pth_sigs[] = {
    {.flags = AMN_PROBE_SIG_DIRECTORY},
    {.offset = 0, .length = 1, .bytes = "{"},
    {.offset = 0, .length = 1, .bytes = "\x80"},
    {.offset = 0, .length = 4, .bytes = "PK\x03\x04"},
    {.offset = 0, .length = 4, .bytes = "PK\x05\x06"},
    {0},
};

static const amn_format pth_format = {
    .struct_size = sizeof(amn_format),
    .name = "pth",
    .description = "PyTorch checkpoint (torch.save ZIP)",
    .extensions = "pth,pt,bin,ckpt,json",
    .probe = pth_probe,
    .open = pth_open,
    .inspect = pth_inspect,
    .writer = &pth_writer,
    .flags = AMN_FORMAT_LOSSLESS,
    .scan = pth_scan,
    .probe_sigs = pth_sigs,
};

static int pth_init(amn_registrar *r) {
    return amn_register_format(r, &pth_format);
}

AMN_PLUGIN_DEFINE(pth, AMN_VERSION_STRING,
                  "PyTorch checkpoints (.pth/.pt/.bin) through an allowlisted pickle VM", "MIT",
                  pth_init);
