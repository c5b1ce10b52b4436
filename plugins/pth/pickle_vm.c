/* pickle_vm.c — the opcode loop, the memo, and the allowlist handlers. */
#include "pickle_vm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/checked.h"

#define ARENA_CHUNK     (64u * 1024u)
#define GLOBAL_LINE_MAX 256

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    max_align_t data[];
} arena_chunk;

struct pk_vm {
    const uint8_t *p;
    size_t n, pos;
    const amn_limits *lim;
    amn_error *err;
    /* arena of every value, string and item array */
    arena_chunk *chunks;
    uint64_t arena_bytes, arena_cap;
    /* value stack, and the stack heights MARK recorded */
    pv **stack;
    size_t sp, stack_cap;
    size_t *marks;
    size_t n_marks;
    /* memo: open addressing on u32 keys */
    uint32_t *memo_keys;
    pv **memo_vals;
    size_t memo_n, memo_cap;
    const pv *root;
    /* storage keys named by persistent ids */
    const char **keys;
    size_t n_keys, keys_cap;
};

/* ---- arena ------------------------------------------------------------- */

static void *arena_alloc(pk_vm *vm, size_t n) {
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    arena_chunk *c = vm->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        if (vm->arena_bytes + cap > vm->arena_cap) {
            amn_error_set(vm->err, AMN_E_LIMIT, "pickle needs more than %llu bytes of objects",
                          (unsigned long long)vm->arena_cap);
            return NULL;
        }
        c = malloc(sizeof *c + cap);
        if (!c) {
            amn_error_set(vm->err, AMN_E_NOMEM, "pickle: out of memory");
            return NULL;
        }
        c->next = vm->chunks;
        c->used = 0;
        c->cap = cap;
        vm->chunks = c;
        vm->arena_bytes += cap;
    }
    void *r = (uint8_t *)c->data + c->used;
    c->used += n;
    return r;
}

static pv *new_pv(pk_vm *vm, pv_kind k) {
    pv *v = arena_alloc(vm, sizeof *v);
    if (v) {
        memset(v, 0, sizeof *v);
        v->kind = k;
    }
    return v;
}

static const char *arena_strdup(pk_vm *vm, const void *s, size_t n) {
    char *d = arena_alloc(vm, n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Grow an item array held in the arena (the old one is left behind: at most
 * as much again as the final arrays). */
static bool grow_items(pk_vm *vm, pv ***items, size_t n, size_t *cap, size_t extra) {
    if (*cap - n >= extra) return true;
    size_t want = *cap ? *cap * 2 : 8;
    while (want - n < extra) want *= 2;
    if (want > vm->lim->max_array) {
        if (n + extra > vm->lim->max_array) {
            amn_error_set(vm->err, AMN_E_LIMIT, "pickle container of more than %llu items",
                          (unsigned long long)vm->lim->max_array);
            return false;
        }
        want = (size_t)vm->lim->max_array;
    }
    pv **a = arena_alloc(vm, want * sizeof *a);
    if (!a) return false;
    if (n) memcpy(a, *items, n * sizeof *a);
    *items = a;
    *cap = want;
    return true;
}

/* ---- errors, reading ------------------------------------------------------ */

static int perr(pk_vm *vm, int code, const char *what) {
    return amn_error_set(vm->err, code, "pickle: %s at offset %zu", what, vm->pos);
}

static bool need(pk_vm *vm, size_t k) {
    return vm->n - vm->pos >= k;
}

static int truncated(pk_vm *vm) {
    return perr(vm, AMN_E_PARSE, "truncated data");
}

static uint64_t rd_le(const uint8_t *p, size_t k) {
    uint64_t v = 0;
    for (size_t i = 0; i < k; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A text line for the protocol-0 opcodes; *len excludes the newline. */
static int read_line(pk_vm *vm, const char **s, size_t *len) {
    const uint8_t *start = vm->p + vm->pos;
    size_t avail = vm->n - vm->pos;
    size_t lim = avail < GLOBAL_LINE_MAX ? avail : GLOBAL_LINE_MAX;
    const uint8_t *nl = memchr(start, '\n', lim);
    if (!nl) return perr(vm, AMN_E_PARSE, "unterminated or overlong text argument");
    *s = (const char *)start;
    *len = (size_t)(nl - start);
    vm->pos += *len + 1;
    return AMN_OK;
}

/* ---- stack -------------------------------------------------------------- */

static size_t mark_base(const pk_vm *vm) {
    return vm->n_marks ? vm->marks[vm->n_marks - 1] : 0;
}

static int push(pk_vm *vm, pv *v) {
    if (!v) return vm->err ? vm->err->code : AMN_E_NOMEM;
    if (vm->sp == vm->stack_cap) {
        if (vm->stack_cap >= vm->lim->max_array)
            return perr(vm, AMN_E_LIMIT, "value stack too deep");
        size_t cap = vm->stack_cap ? vm->stack_cap * 2 : 64;
        pv **s = realloc(vm->stack, cap * sizeof *s);
        if (!s) return perr(vm, AMN_E_NOMEM, "out of memory");
        vm->stack = s;
        vm->stack_cap = cap;
    }
    vm->stack[vm->sp++] = v;
    return AMN_OK;
}

static pv *pop(pk_vm *vm) {
    if (vm->sp <= mark_base(vm)) {
        perr(vm, AMN_E_PARSE, "stack underflow");
        return NULL;
    }
    return vm->stack[--vm->sp];
}

static pv *top(pk_vm *vm) {
    if (vm->sp <= mark_base(vm)) {
        perr(vm, AMN_E_PARSE, "stack underflow");
        return NULL;
    }
    return vm->stack[vm->sp - 1];
}

/* Items from the last MARK to the top (in *items, *n); the mark is popped. */
static int pop_mark(pk_vm *vm, pv ***items, size_t *n) {
    if (!vm->n_marks) return perr(vm, AMN_E_PARSE, "no MARK on the stack");
    size_t base = vm->marks[--vm->n_marks];
    *n = vm->sp - base;
    *items = *n ? vm->stack + base : NULL; /* no stack yet before the first push */
    vm->sp = base;
    return AMN_OK;
}

static pv *make_seq(pk_vm *vm, pv_kind k, pv **items, size_t n) {
    pv *v = new_pv(vm, k);
    if (!v) return NULL;
    if (n) {
        if (!grow_items(vm, &v->u.seq.items, 0, &v->u.seq.cap, n)) return NULL;
        memcpy(v->u.seq.items, items, n * sizeof *items);
    }
    v->u.seq.n = n;
    return v;
}

static int seq_append(pk_vm *vm, pv *list, pv **items, size_t n) {
    if (!list || (list->kind != PV_LIST && list->kind != PV_SET))
        return perr(vm, AMN_E_PARSE, "APPEND to something that is not a list");
    if (!grow_items(vm, &list->u.seq.items, list->u.seq.n, &list->u.seq.cap, n))
        return vm->err ? vm->err->code : AMN_E_NOMEM;
    if (n) memcpy(list->u.seq.items + list->u.seq.n, items, n * sizeof *items);
    list->u.seq.n += n;
    return AMN_OK;
}

static int dict_set(pk_vm *vm, pv *d, pv **kv, size_t n) {
    if (!d || d->kind != PV_DICT) return perr(vm, AMN_E_PARSE, "SETITEM on something not a dict");
    if (n % 2) return perr(vm, AMN_E_PARSE, "SETITEMS with an odd number of items");
    size_t pairs = n / 2, cap_k = d->u.dict.cap, cap_v = d->u.dict.cap;
    if (!grow_items(vm, &d->u.dict.keys, d->u.dict.n, &cap_k, pairs) ||
        !grow_items(vm, &d->u.dict.vals, d->u.dict.n, &cap_v, pairs))
        return vm->err ? vm->err->code : AMN_E_NOMEM;
    d->u.dict.cap = cap_k < cap_v ? cap_k : cap_v;
    for (size_t i = 0; i < pairs; i++) {
        d->u.dict.keys[d->u.dict.n] = kv[2 * i];
        d->u.dict.vals[d->u.dict.n] = kv[2 * i + 1];
        d->u.dict.n++;
    }
    return AMN_OK;
}

/* ---- memo ------------------------------------------------------------------ */

static size_t memo_slot(const pk_vm *vm, uint32_t key) {
    size_t mask = vm->memo_cap - 1, i = (key * 2654435761u) & mask;
    while (vm->memo_vals[i] && vm->memo_keys[i] != key) i = (i + 1) & mask;
    return i;
}

static int memo_put(pk_vm *vm, uint64_t key, pv *v) {
    if (!v) return perr(vm, AMN_E_PARSE, "PUT with an empty stack");
    if (key > UINT32_MAX) return perr(vm, AMN_E_PARSE, "memo key out of range");
    if (vm->memo_cap == 0 || (vm->memo_n + 1) * 2 > vm->memo_cap) {
        if (vm->memo_n >= vm->lim->max_array) return perr(vm, AMN_E_LIMIT, "memo too large");
        size_t cap = vm->memo_cap ? vm->memo_cap * 2 : 256;
        uint32_t *k = calloc(cap, sizeof *k);
        pv **vals = calloc(cap, sizeof *vals);
        if (!k || !vals) {
            free(k);
            free(vals);
            return perr(vm, AMN_E_NOMEM, "out of memory");
        }
        uint32_t *ok = vm->memo_keys;
        pv **ov = vm->memo_vals;
        size_t ocap = vm->memo_cap;
        vm->memo_keys = k;
        vm->memo_vals = vals;
        vm->memo_cap = cap;
        for (size_t i = 0; i < ocap; i++) {
            if (!ov[i]) continue;
            size_t s = memo_slot(vm, ok[i]);
            vm->memo_keys[s] = ok[i];
            vm->memo_vals[s] = ov[i];
        }
        free(ok);
        free(ov);
    }
    size_t s = memo_slot(vm, (uint32_t)key);
    if (!vm->memo_vals[s]) vm->memo_n++;
    vm->memo_keys[s] = (uint32_t)key;
    vm->memo_vals[s] = v;
    return AMN_OK;
}

static int memo_get(pk_vm *vm, uint64_t key) {
    if (key > UINT32_MAX || vm->memo_cap == 0) goto missing;
    size_t s = memo_slot(vm, (uint32_t)key);
    if (!vm->memo_vals[s]) goto missing;
    return push(vm, vm->memo_vals[s]);
missing:
    return amn_error_set(vm->err, AMN_E_PARSE,
                         "pickle: memo reference to missing key %llu at "
                         "offset %zu",
                         (unsigned long long)key, vm->pos);
}

/* ---- the allowlist ---------------------------------------------------------- */

static int resolve_global(pk_vm *vm, const char *mod, size_t mlen, const char *name, size_t nlen) {
    const pk_allowed *a = pk_allow_find(mod, mlen, name, nlen);
    if (a) {
        pv *v = new_pv(vm, PV_GLOBAL);
        if (!v) return vm->err->code;
        char full[2 * GLOBAL_LINE_MAX + 2];
        snprintf(full, sizeof full, "%s.%s", a->module, a->name);
        v->u.global.id = a->id;
        v->u.global.dtype = a->dtype;
        v->u.global.untyped = a->untyped;
        v->u.global.name = arena_strdup(vm, full, strlen(full));
        if (!v->u.global.name) return vm->err->code;
        return push(vm, v);
    }
    /* The name is printed, never looked up: cap it and keep it printable. */
    char shown[160];
    size_t k = 0;
    for (size_t i = 0; i < mlen + 1 + nlen && k + 1 < sizeof shown; i++) {
        char c = i < mlen ? mod[i] : i == mlen ? '.' : name[i - mlen - 1];
        shown[k++] = (c >= 0x20 && c < 0x7f) ? c : '?';
    }
    shown[k] = '\0';
    return amn_error_set(vm->err, AMN_E_DISALLOWED,
                         "pickle global '%s' is not allowed (offset %zu); only tensor data is "
                         "loaded",
                         shown, vm->pos);
}

static bool as_u64(const pv *v, uint64_t *out) {
    if (!v) return false;
    if (v->kind == PV_INT && v->u.i >= 0) {
        *out = (uint64_t)v->u.i;
        return true;
    }
    if (v->kind == PV_BOOL) {
        *out = v->u.b;
        return true;
    }
    return false;
}

static bool is_seq(const pv *v) {
    return v && (v->kind == PV_TUPLE || v->kind == PV_LIST);
}

/* _rebuild_tensor*(storage, offset, size, stride, ...) -> a tensor value. */
static int rebuild_tensor(pk_vm *vm, pk_global_id id, pv **a, size_t n, pv **out) {
    size_t need_args = id == PG_REBUILD_TENSOR_V3 ? 7 : 4;
    if (n < need_args) return perr(vm, AMN_E_PARSE, "tensor rebuild with too few arguments");
    if (!a[0] || a[0]->kind != PV_STORAGE)
        return perr(vm, AMN_E_PARSE, "tensor rebuild without a storage");
    pv *t = new_pv(vm, PV_TENSOR);
    if (!t) return vm->err->code;
    pv_tensor *x = &t->u.tensor;
    x->storage = a[0];
    x->dtype = a[0]->u.storage.dtype;
    if (id == PG_REBUILD_TENSOR_V3) {
        if (!a[6] || a[6]->kind != PV_GLOBAL || a[6]->u.global.id != PG_DTYPE)
            return perr(vm, AMN_E_PARSE, "_rebuild_tensor_v3 without a dtype");
        x->dtype = a[6]->u.global.dtype;
    } else if (a[0]->u.storage.untyped) {
        return perr(vm, AMN_E_PARSE, "untyped storage without a dtype");
    }
    if (!as_u64(a[1], &x->offset)) return perr(vm, AMN_E_PARSE, "bad tensor storage offset");
    if (!is_seq(a[2]) || !is_seq(a[3]) || a[2]->u.seq.n != a[3]->u.seq.n)
        return perr(vm, AMN_E_PARSE, "tensor size and stride differ in rank");
    if (a[2]->u.seq.n > AMN_MAX_DIMS)
        return perr(vm, AMN_E_UNSUPPORTED, "tensor with more than 8 dimensions");
    x->ndim = (uint32_t)a[2]->u.seq.n;
    for (uint32_t i = 0; i < x->ndim; i++) {
        uint64_t s, st;
        if (!as_u64(a[2]->u.seq.items[i], &s) || !as_u64(a[3]->u.seq.items[i], &st) ||
            st > (uint64_t)INT64_MAX)
            return perr(vm, AMN_E_PARSE, "bad tensor size or stride");
        x->shape[i] = s;
        x->stride[i] = (int64_t)st;
    }
    *out = t;
    return AMN_OK;
}

static pv *make_str(pk_vm *vm, const uint8_t *s, uint64_t n);

/* Python's latin-1 encoding of a UTF-8 string: its code points, each below
 * 256 (bytes under protocol 2 are _codecs.encode(str, 'latin1')). */
static int latin1_len(pk_vm *vm, const pv *str, const pv *enc, uint64_t *out) {
    if (!str || str->kind != PV_STR || !enc || enc->kind != PV_STR ||
        (strcmp(enc->u.str.s, "latin1") != 0 && strcmp(enc->u.str.s, "latin-1") != 0))
        return perr(vm, AMN_E_PARSE, "bytes encoded other than as (str, 'latin1')");
    const uint8_t *s = (const uint8_t *)str->u.str.s;
    uint64_t n = 0;
    for (size_t i = 0; i < str->u.str.len; n++) {
        if (s[i] < 0x80) {
            i++;
        } else if ((s[i] == 0xc2 || s[i] == 0xc3) && i + 1 < str->u.str.len &&
                   (s[i + 1] & 0xc0) == 0x80) {
            i += 2;
        } else {
            return perr(vm, AMN_E_PARSE, "latin-1 bytes with a character above U+00FF");
        }
    }
    *out = n;
    return AMN_OK;
}

static pv *make_opaque(pk_vm *vm, const char *text) {
    pv *v = new_pv(vm, PV_OPAQUE);
    if (v && !(v->u.text = arena_strdup(vm, text, strlen(text)))) return NULL;
    return v;
}

static bool is_number(const pv *v) {
    return v && (v->kind == PV_INT || v->kind == PV_FLOAT || v->kind == PV_BOOL);
}

static double number(const pv *v) {
    return v->kind == PV_FLOAT ? v->u.f : v->kind == PV_INT ? (double)v->u.i : v->u.b;
}

/* torch.serialization._get_layout(name): only torch's layouts exist. */
static int get_layout(pk_vm *vm, pv **a, size_t n, pv **out) {
    static const char *layouts[] = {"torch.strided",    "torch.sparse_coo", "torch.sparse_csr",
                                    "torch.sparse_csc", "torch.sparse_bsr", "torch.sparse_bsc",
                                    "torch._mkldnn",    "torch.jagged"};
    if (n == 1 && a[0]->kind == PV_STR)
        for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++)
            if (strcmp(a[0]->u.str.s, layouts[i]) == 0) {
                *out = make_opaque(vm, layouts[i]);
                return *out ? AMN_OK : vm->err->code;
            }
    return perr(vm, AMN_E_PARSE, "_get_layout of an unknown layout");
}

/* _rebuild_sparse_tensor(layout, data) and the CSR one of torch < 2.0:
 * accepted as a value (listed, not converted), its parts checked. */
static int rebuild_sparse(pk_vm *vm, pv **a, size_t n, pv **out) {
    if (n != 2 || a[0]->kind != PV_OPAQUE || strncmp(a[0]->u.text, "torch.sparse_", 13) != 0 ||
        a[1]->kind != PV_TUPLE || a[1]->u.seq.n < 3)
        return perr(vm, AMN_E_PARSE, "sparse tensor rebuild with unexpected arguments");
    const pv *size = NULL;
    for (size_t i = 0; i < a[1]->u.seq.n; i++) {
        const pv *x = a[1]->u.seq.items[i];
        if (x->kind == PV_TUPLE && !size)
            size = x;
        else if (x->kind != PV_TENSOR && x->kind != PV_BOOL)
            return perr(vm, AMN_E_PARSE, "sparse tensor part that is not a tensor");
    }
    char text[160];
    int k = snprintf(text, sizeof text, "<%s tensor", a[0]->u.text + 6);
    for (size_t i = 0; size && i < size->u.seq.n && k > 0 && (size_t)k + 24 < sizeof text; i++)
        if (size->u.seq.items[i]->kind == PV_INT)
            k += snprintf(text + k, sizeof text - (size_t)k, "%s%lld", i ? ", " : " [",
                          (long long)size->u.seq.items[i]->u.i);
    snprintf(text + k, sizeof text - (size_t)k, "%s>", size && size->u.seq.n ? "]" : "");
    *out = make_opaque(vm, text);
    return *out ? AMN_OK : vm->err->code;
}

/* REDUCE / NEWOBJ of a plain Python type on the allowlist. */
static int call_python_type(pk_vm *vm, pk_global_id id, pv **a, size_t n, pv **out) {
    uint64_t len = 0;
    int rc;
    switch (id) {
    case PG_COUNTER:
        if (n == 0) {
            *out = new_pv(vm, PV_DICT);
            return *out ? AMN_OK : vm->err->code;
        }
        if (n != 1 || a[0]->kind != PV_DICT) return perr(vm, AMN_E_PARSE, "Counter of a non-dict");
        *out = a[0];
        return AMN_OK;
    case PG_ENCODE:
    case PG_BYTEARRAY:
        if (id == PG_BYTEARRAY && n <= 1) {
            if (n == 1 && a[0]->kind != PV_BYTES)
                return perr(vm, AMN_E_PARSE, "bytearray of something not bytes");
            len = n ? a[0]->u.bytes_len : 0;
        } else {
            if (n != 2) return perr(vm, AMN_E_PARSE, "bytes encoded with unexpected arguments");
            rc = latin1_len(vm, a[0], a[1], &len);
            if (rc != AMN_OK) return rc;
        }
        *out = new_pv(vm, PV_BYTES);
        if (*out) (*out)->u.bytes_len = len;
        return *out ? AMN_OK : vm->err->code;
    case PG_SET:
        if (n == 0) {
            *out = new_pv(vm, PV_SET);
            return *out ? AMN_OK : vm->err->code;
        }
        if (n != 1 || !(is_seq(a[0]) || a[0]->kind == PV_SET))
            return perr(vm, AMN_E_PARSE, "set of something not a list");
        *out = make_seq(vm, PV_SET, a[0]->u.seq.items, a[0]->u.seq.n);
        return *out ? AMN_OK : vm->err->code;
    case PG_COMPLEX:
        if (n < 1 || n > 2 || !is_number(a[0]) || (n == 2 && !is_number(a[1])))
            return perr(vm, AMN_E_PARSE, "complex of something not a number");
        *out = new_pv(vm, PV_COMPLEX);
        if (*out) {
            (*out)->u.cplx.re = number(a[0]);
            (*out)->u.cplx.im = n == 2 ? number(a[1]) : 0.0;
        }
        return *out ? AMN_OK : vm->err->code;
    case PG_DEVICE: {
        if (n < 1 || n > 2 || a[0]->kind != PV_STR || (n == 2 && a[1]->kind != PV_INT))
            return perr(vm, AMN_E_PARSE, "torch.device without a name");
        if (n == 1) {
            *out = a[0];
            return AMN_OK;
        }
        char buf[96];
        snprintf(buf, sizeof buf, "%.64s:%lld", a[0]->u.str.s, (long long)a[1]->u.i);
        *out = make_str(vm, (const uint8_t *)buf, strlen(buf));
        return *out ? AMN_OK : vm->err->code;
    }
    default:
        return perr(vm, AMN_E_DISALLOWED, "call of a global that is not callable");
    }
}

/* REDUCE / NEWOBJ: apply an allowlisted callable to an argument tuple. */
static int call_global(pk_vm *vm, pv *fn, pv *args, pv **out, int depth) {
    if (!fn || fn->kind != PV_GLOBAL)
        return perr(vm, AMN_E_DISALLOWED, "call of something that is not an allowed global");
    if (!args || args->kind != PV_TUPLE) return perr(vm, AMN_E_PARSE, "call without an args tuple");
    pv **a = args->u.seq.items;
    size_t n = args->u.seq.n;
    switch (fn->u.global.id) {
    case PG_ORDERED_DICT: {
        pv *d = new_pv(vm, PV_DICT);
        if (!d) return vm->err->code;
        if (n >= 1 && is_seq(a[0])) {
            for (size_t i = 0; i < a[0]->u.seq.n; i++) {
                pv *pair = a[0]->u.seq.items[i];
                if (!is_seq(pair) || pair->u.seq.n != 2)
                    return perr(vm, AMN_E_PARSE, "OrderedDict item is not a pair");
                int rc = dict_set(vm, d, pair->u.seq.items, 2);
                if (rc != AMN_OK) return rc;
            }
        } else if (n != 0) {
            return perr(vm, AMN_E_PARSE, "OrderedDict with unexpected arguments");
        }
        *out = d;
        return AMN_OK;
    }
    case PG_REBUILD_TENSOR:
    case PG_REBUILD_TENSOR_V2:
    case PG_REBUILD_TENSOR_V3:
        return rebuild_tensor(vm, fn->u.global.id, a, n, out);
    case PG_REBUILD_PARAMETER:
    case PG_PARAMETER:
        if (n < 1 || !a[0] || a[0]->kind != PV_TENSOR)
            return perr(vm, AMN_E_PARSE, "Parameter without tensor data");
        *out = a[0];
        return AMN_OK;
    case PG_REBUILD_FROM_TYPE_V2: {
        /* (func, type, args, state): the type only re-labels the result. */
        if (n < 3 || !a[1] || a[1]->kind != PV_GLOBAL ||
            (a[1]->u.global.id != PG_TENSOR_TYPE && a[1]->u.global.id != PG_PARAMETER))
            return perr(vm, AMN_E_DISALLOWED, "_rebuild_from_type_v2 of a type not allowed");
        if (depth > 4) return perr(vm, AMN_E_LIMIT, "nested _rebuild_from_type_v2");
        return call_global(vm, a[0], a[2], out, depth + 1);
    }
    case PG_SIZE:
        if (n != 1 || !is_seq(a[0])) return perr(vm, AMN_E_PARSE, "torch.Size without a tuple");
        *out = a[0];
        return AMN_OK;
    case PG_DEVICE:
    case PG_COUNTER:
    case PG_ENCODE:
    case PG_BYTEARRAY:
    case PG_SET:
    case PG_COMPLEX:
        return call_python_type(vm, fn->u.global.id, a, n, out);
    case PG_GET_LAYOUT:
        return get_layout(vm, a, n, out);
    case PG_REBUILD_SPARSE:
    case PG_REBUILD_SPARSE_CSR:
        return rebuild_sparse(vm, a, n, out);
    case PG_REBUILD_QTENSOR: {
        /* (storage, offset, size, stride, qparams, ...): a tensor amn
         * cannot represent; refused by name when it is converted. */
        int rc = rebuild_tensor(vm, PG_REBUILD_TENSOR, a, n, out);
        if (rc == AMN_OK) (*out)->u.tensor.dtype = AMN_DTYPE_INVALID;
        return rc;
    }
    case PG_REBUILD_META:
        *out = make_opaque(vm, "<meta tensor>");
        return *out ? AMN_OK : vm->err->code;
    case PG_REBUILD_FROM_CPU:
        if (n < 1 || a[0]->kind != PV_TENSOR)
            return perr(vm, AMN_E_PARSE, "device tensor rebuild without a tensor");
        *out = a[0];
        return AMN_OK;
    case PG_REBUILD_OTHER:
    case PG_TENSOR_CLASS:
        return amn_error_set(vm->err, AMN_E_UNSUPPORTED,
                             "pickle: %s (nested, subclass or list-built tensors) is not supported "
                             "(offset %zu)",
                             fn->u.global.name, vm->pos);
    default:
        return amn_error_set(vm->err, AMN_E_DISALLOWED,
                             "pickle: '%s' is not callable here (offset %zu)", fn->u.global.name,
                             vm->pos);
    }
}

/* BINPERSID: ('storage', storage_type, key, location, numel[, None]). */
static int persistent_load(pk_vm *vm, pv *pid, pv **out) {
    if (!pid || pid->kind != PV_TUPLE || pid->u.seq.n < 5 || pid->u.seq.n > 6)
        return perr(vm, AMN_E_PARSE, "unknown persistent id");
    pv **a = pid->u.seq.items;
    if (a[0]->kind != PV_STR || strcmp(a[0]->u.str.s, "storage") != 0)
        return perr(vm, AMN_E_PARSE, "persistent id is not a storage");
    if (a[1]->kind != PV_GLOBAL || a[1]->u.global.id != PG_STORAGE)
        return perr(vm, AMN_E_PARSE, "persistent id without a storage type");
    if (pid->u.seq.n == 6 && a[5]->kind != PV_NONE)
        return perr(vm, AMN_E_UNSUPPORTED, "storage views (legacy checkpoints)");
    pv *s = new_pv(vm, PV_STORAGE);
    if (!s) return vm->err->code;
    if (a[2]->kind == PV_STR) {
        s->u.storage.key = a[2]->u.str.s;
    } else if (a[2]->kind == PV_INT) {
        char buf[24];
        int k = snprintf(buf, sizeof buf, "%lld", (long long)a[2]->u.i);
        s->u.storage.key = arena_strdup(vm, buf, (size_t)k);
        if (!s->u.storage.key) return vm->err->code;
    } else {
        return perr(vm, AMN_E_PARSE, "storage key is not a string");
    }
    if (!as_u64(a[4], &s->u.storage.numel)) return perr(vm, AMN_E_PARSE, "bad storage size");
    if (vm->n_keys == vm->keys_cap) {
        if (vm->keys_cap >= vm->lim->max_array) return perr(vm, AMN_E_LIMIT, "too many storages");
        size_t cap = vm->keys_cap ? vm->keys_cap * 2 : 64;
        const char **k = realloc(vm->keys, cap * sizeof *k);
        if (!k) return perr(vm, AMN_E_NOMEM, "out of memory");
        vm->keys = k;
        vm->keys_cap = cap;
    }
    vm->keys[vm->n_keys++] = s->u.storage.key;
    s->u.storage.dtype = a[1]->u.global.untyped ? AMN_DTYPE_INVALID : a[1]->u.global.dtype;
    s->u.storage.untyped = a[1]->u.global.untyped;
    s->u.storage.type_name = a[1]->u.global.name;
    *out = s;
    return AMN_OK;
}

/* ---- the opcode loop ---------------------------------------------------------- */

static pv *make_int(pk_vm *vm, int64_t i) {
    pv *v = new_pv(vm, PV_INT);
    if (v) v->u.i = i;
    return v;
}

static pv *make_str(pk_vm *vm, const uint8_t *s, uint64_t n) {
    if (n > vm->lim->max_string) {
        amn_error_set(vm->err, AMN_E_LIMIT, "pickle: string of %llu bytes exceeds %llu",
                      (unsigned long long)n, (unsigned long long)vm->lim->max_string);
        return NULL;
    }
    pv *v = new_pv(vm, PV_STR);
    if (!v) return NULL;
    v->u.str.s = arena_strdup(vm, s, (size_t)n);
    v->u.str.len = (size_t)n;
    return v->u.str.s ? v : NULL;
}

/* Two's-complement little-endian integer of k bytes (LONG1 / LONG4). */
static pv *make_long(pk_vm *vm, const uint8_t *b, size_t k) {
    if (k > 8) {
        pv *v = new_pv(vm, PV_BIGINT);
        return v;
    }
    if (k == 0) return make_int(vm, 0);
    uint64_t u = rd_le(b, k);
    if (k < 8 && (b[k - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * k);
    return make_int(vm, (int64_t)u);
}

static int text_int(pk_vm *vm, pv **out) {
    const char *s = NULL;
    size_t len = 0;
    int rc = read_line(vm, &s, &len);
    if (rc != AMN_OK) return rc;
    if (len && (s[len - 1] == 'L')) len--;
    char buf[32];
    if (len == 0 || len >= sizeof buf) return perr(vm, AMN_E_PARSE, "bad text integer");
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (strcmp(buf, "01") == 0 || strcmp(buf, "00") == 0) {
        *out = new_pv(vm, PV_BOOL);
        if (*out) (*out)->u.b = buf[1] == '1';
        return *out ? AMN_OK : vm->err->code;
    }
    char *end;
    long long v = strtoll(buf, &end, 10);
    if (*end) return perr(vm, AMN_E_PARSE, "bad text integer");
    *out = make_int(vm, v);
    return *out ? AMN_OK : vm->err->code;
}

static int op_global(pk_vm *vm) {
    const char *mod = NULL, *name = NULL;
    size_t ml = 0, nl = 0;
    int rc = read_line(vm, &mod, &ml);
    if (rc == AMN_OK) rc = read_line(vm, &name, &nl);
    if (rc != AMN_OK) return rc;
    return resolve_global(vm, mod, ml, name, nl);
}

static int op_stack_global(pk_vm *vm) {
    pv *name = pop(vm), *mod = name ? pop(vm) : NULL;
    if (!mod) return vm->err->code;
    if (mod->kind != PV_STR || name->kind != PV_STR)
        return perr(vm, AMN_E_PARSE, "STACK_GLOBAL needs two strings");
    return resolve_global(vm, mod->u.str.s, mod->u.str.len, name->u.str.s, name->u.str.len);
}

static int step(pk_vm *vm, uint8_t op, bool *stop) {
    const uint8_t *p = vm->p;
    pv *v = NULL, *w = NULL;
    pv **items = NULL;
    size_t n = 0;
    int rc;
    switch (op) {
    case 0x80: /* PROTO */
        if (!need(vm, 1)) return truncated(vm);
        if (p[vm->pos] > 5) return perr(vm, AMN_E_UNSUPPORTED, "pickle protocol above 5");
        vm->pos++;
        return AMN_OK;
    case 0x95: /* FRAME: a length hint only */
        if (!need(vm, 8)) return truncated(vm);
        vm->pos += 8;
        return AMN_OK;
    case '.': /* STOP */
        v = top(vm);
        if (!v) return vm->err->code;
        vm->root = v;
        *stop = true;
        return AMN_OK;
    case '(': /* MARK */
        if (vm->n_marks >= vm->lim->max_depth)
            return perr(vm, AMN_E_LIMIT, "nesting deeper than the limit");
        vm->marks[vm->n_marks++] = vm->sp;
        return AMN_OK;
    case '0': /* POP */
        return pop(vm) ? AMN_OK : vm->err->code;
    case '1': /* POP_MARK */
        return pop_mark(vm, &items, &n);
    case '2': /* DUP */
        v = top(vm);
        return v ? push(vm, v) : vm->err->code;
    case 'N':
        return push(vm, new_pv(vm, PV_NONE));
    case 0x88: /* NEWTRUE */
    case 0x89: /* NEWFALSE */
        v = new_pv(vm, PV_BOOL);
        if (v) v->u.b = op == 0x88;
        return push(vm, v);
    case 'J': /* BININT */
        if (!need(vm, 4)) return truncated(vm);
        v = make_int(vm, (int32_t)(uint32_t)rd_le(p + vm->pos, 4));
        vm->pos += 4;
        return push(vm, v);
    case 'K': /* BININT1 */
        if (!need(vm, 1)) return truncated(vm);
        v = make_int(vm, p[vm->pos++]);
        return push(vm, v);
    case 'M': /* BININT2 */
        if (!need(vm, 2)) return truncated(vm);
        v = make_int(vm, (int64_t)rd_le(p + vm->pos, 2));
        vm->pos += 2;
        return push(vm, v);
    case 0x8a: /* LONG1 */
        if (!need(vm, 1) || !need(vm, 1 + (size_t)p[vm->pos])) return truncated(vm);
        n = p[vm->pos];
        v = make_long(vm, p + vm->pos + 1, n);
        vm->pos += 1 + n;
        return push(vm, v);
    case 0x8b: { /* LONG4 */
        if (!need(vm, 4)) return truncated(vm);
        uint64_t k = rd_le(p + vm->pos, 4);
        if (k > vm->n - vm->pos - 4) return truncated(vm);
        v = make_long(vm, p + vm->pos + 4, (size_t)k);
        vm->pos += 4 + (size_t)k;
        return push(vm, v);
    }
    case 'I': /* INT (text) */
    case 'L': /* LONG (text) */
        rc = text_int(vm, &v);
        return rc == AMN_OK ? push(vm, v) : rc;
    case 'G': { /* BINFLOAT: big-endian double */
        if (!need(vm, 8)) return truncated(vm);
        uint64_t u = 0;
        for (int i = 0; i < 8; i++) u = u << 8 | p[vm->pos + (size_t)i];
        vm->pos += 8;
        v = new_pv(vm, PV_FLOAT);
        if (v) memcpy(&v->u.f, &u, 8);
        return push(vm, v);
    }
    case 'F': { /* FLOAT (text) */
        const char *s = NULL;
        size_t len = 0;
        rc = read_line(vm, &s, &len);
        if (rc != AMN_OK) return rc;
        char buf[64];
        if (len == 0 || len >= sizeof buf) return perr(vm, AMN_E_PARSE, "bad text float");
        memcpy(buf, s, len);
        buf[len] = '\0';
        char *end;
        double d = strtod(buf, &end);
        if (*end) return perr(vm, AMN_E_PARSE, "bad text float");
        v = new_pv(vm, PV_FLOAT);
        if (v) v->u.f = d;
        return push(vm, v);
    }
    case 'X':    /* BINUNICODE */
    case 0x8c:   /* SHORT_BINUNICODE */
    case 0x8d:   /* BINUNICODE8 */
    case 'T':    /* BINSTRING (Python 2 str) */
    case 'U':    /* SHORT_BINSTRING */
    case 'B':    /* BINBYTES */
    case 'C':    /* SHORT_BINBYTES */
    case 0x8e:   /* BINBYTES8 */
    case 0x96: { /* BYTEARRAY8 */
        size_t w_len = (op == 0x8c || op == 'U' || op == 'C')     ? 1
                       : (op == 0x8d || op == 0x8e || op == 0x96) ? 8
                                                                  : 4;
        if (!need(vm, w_len)) return truncated(vm);
        uint64_t k = rd_le(p + vm->pos, w_len);
        if (op == 'T' && (k & 0x80000000u)) return perr(vm, AMN_E_PARSE, "negative string size");
        vm->pos += w_len;
        if (k > vm->n - vm->pos) return truncated(vm);
        bool bytes = op == 'B' || op == 'C' || op == 0x8e || op == 0x96;
        if (bytes) {
            v = new_pv(vm, PV_BYTES);
            if (v) v->u.bytes_len = k;
        } else {
            v = make_str(vm, p + vm->pos, k);
        }
        vm->pos += (size_t)k;
        return push(vm, v);
    }
    case ')': /* EMPTY_TUPLE */
        return push(vm, make_seq(vm, PV_TUPLE, NULL, 0));
    case 0x85: /* TUPLE1 */
    case 0x86: /* TUPLE2 */
    case 0x87: /* TUPLE3 */ {
        size_t k = (size_t)(op - 0x84);
        if (vm->sp - mark_base(vm) < k) return perr(vm, AMN_E_PARSE, "stack underflow");
        vm->sp -= k;
        return push(vm, make_seq(vm, PV_TUPLE, vm->stack + vm->sp, k));
    }
    case 't':  /* TUPLE */
    case 'l':  /* LIST */
    case 0x91: /* FROZENSET */
        rc = pop_mark(vm, &items, &n);
        if (rc != AMN_OK) return rc;
        return push(vm, make_seq(vm,
                                 op == 't'   ? PV_TUPLE
                                 : op == 'l' ? PV_LIST
                                             : PV_SET,
                                 items, n));
    case ']': /* EMPTY_LIST */
        return push(vm, new_pv(vm, PV_LIST));
    case 0x8f: /* EMPTY_SET */
        return push(vm, new_pv(vm, PV_SET));
    case '}': /* EMPTY_DICT */
        return push(vm, new_pv(vm, PV_DICT));
    case 'd': /* DICT */
        rc = pop_mark(vm, &items, &n);
        if (rc != AMN_OK) return rc;
        v = new_pv(vm, PV_DICT);
        if (!v) return vm->err->code;
        rc = dict_set(vm, v, items, n);
        return rc == AMN_OK ? push(vm, v) : rc;
    case 'a': /* APPEND */
        w = pop(vm);
        v = w ? top(vm) : NULL;
        if (!v) return vm->err->code;
        return seq_append(vm, v, &w, 1);
    case 'e':  /* APPENDS */
    case 0x90: /* ADDITEMS */
        rc = pop_mark(vm, &items, &n);
        if (rc != AMN_OK) return rc;
        v = top(vm);
        if (!v) return vm->err->code;
        if ((op == 0x90) != (v->kind == PV_SET))
            return perr(vm, AMN_E_PARSE, "APPENDS / ADDITEMS on the wrong container");
        return seq_append(vm, v, items, n);
    case 's': { /* SETITEM */
        pv *kv[2];
        kv[1] = pop(vm);
        kv[0] = kv[1] ? pop(vm) : NULL;
        v = kv[0] ? top(vm) : NULL;
        if (!v) return vm->err->code;
        return dict_set(vm, v, kv, 2);
    }
    case 'u': /* SETITEMS */
        rc = pop_mark(vm, &items, &n);
        if (rc != AMN_OK) return rc;
        v = top(vm);
        if (!v) return vm->err->code;
        return dict_set(vm, v, items, n);
    case 'c': /* GLOBAL */
        return op_global(vm);
    case 0x93: /* STACK_GLOBAL */
        return op_stack_global(vm);
    case 'R':    /* REDUCE */
    case 0x81: { /* NEWOBJ */
        pv *args = pop(vm), *fn = args ? pop(vm) : NULL;
        if (!fn) return vm->err->code;
        rc = call_global(vm, fn, args, &v, 0);
        return rc == AMN_OK ? push(vm, v) : rc;
    }
    case 0x92: { /* NEWOBJ_EX: cls, args, kwargs */
        pv *kw = pop(vm), *args = kw ? pop(vm) : NULL, *fn = args ? pop(vm) : NULL;
        if (!fn) return vm->err->code;
        if (kw->kind != PV_DICT || kw->u.dict.n)
            return perr(vm, AMN_E_UNSUPPORTED, "NEWOBJ_EX with keyword arguments");
        rc = call_global(vm, fn, args, &v, 0);
        return rc == AMN_OK ? push(vm, v) : rc;
    }
    case 'b': /* BUILD: __setstate__ of an allowed object; the state is dropped */
        w = pop(vm);
        v = w ? top(vm) : NULL;
        return v ? AMN_OK : vm->err->code;
    case 'Q': /* BINPERSID */
        w = pop(vm);
        if (!w) return vm->err->code;
        rc = persistent_load(vm, w, &v);
        return rc == AMN_OK ? push(vm, v) : rc;
    case 'q': /* BINPUT */
        if (!need(vm, 1)) return truncated(vm);
        n = p[vm->pos++];
        return memo_put(vm, n, top(vm));
    case 'r': /* LONG_BINPUT */
        if (!need(vm, 4)) return truncated(vm);
        n = (size_t)rd_le(p + vm->pos, 4);
        vm->pos += 4;
        return memo_put(vm, n, top(vm));
    case 0x94: /* MEMOIZE */
        return memo_put(vm, vm->memo_n, top(vm));
    case 'h': /* BINGET */
        if (!need(vm, 1)) return truncated(vm);
        return memo_get(vm, p[vm->pos++]);
    case 'j': /* LONG_BINGET */
        if (!need(vm, 4)) return truncated(vm);
        n = (size_t)rd_le(p + vm->pos, 4);
        vm->pos += 4;
        return memo_get(vm, n);
    case 'p':   /* PUT (text) */
    case 'g': { /* GET (text) */
        const char *s = NULL;
        size_t len = 0;
        rc = read_line(vm, &s, &len);
        if (rc != AMN_OK) return rc;
        uint64_t k = 0;
        if (len == 0 || len > 10) return perr(vm, AMN_E_PARSE, "bad memo key");
        for (size_t i = 0; i < len; i++) {
            if (s[i] < '0' || s[i] > '9') return perr(vm, AMN_E_PARSE, "bad memo key");
            k = k * 10 + (uint64_t)(s[i] - '0');
        }
        return op == 'p' ? memo_put(vm, k, top(vm)) : memo_get(vm, k);
    }
    case 'i': /* INST: instantiates a class by name */
    case 'o': /* OBJ */
        return perr(vm, AMN_E_DISALLOWED, "INST/OBJ object construction is not allowed");
    case 0x82:
    case 0x83:
    case 0x84:
        return perr(vm, AMN_E_DISALLOWED, "copyreg extension codes are not allowed");
    case 'P':
        return perr(vm, AMN_E_UNSUPPORTED, "text persistent ids (PERSID)");
    case 0x97:
    case 0x98:
        return perr(vm, AMN_E_UNSUPPORTED, "out-of-band pickle buffers");
    case 'S':
    case 'V':
        return perr(vm, AMN_E_UNSUPPORTED, "protocol-0 quoted strings");
    default: {
        char msg[48];
        snprintf(msg, sizeof msg, "unknown opcode 0x%02x", op);
        vm->pos--; /* report the opcode's own offset */
        return perr(vm, AMN_E_PARSE, msg);
    }
    }
}

int pk_run(const uint8_t *p, size_t n, const amn_limits *lim, pk_vm **out, amn_error *err) {
    *out = NULL;
    pk_vm *vm = calloc(1, sizeof *vm);
    if (!vm) return amn_error_set(err, AMN_E_NOMEM, "pickle: out of memory");
    vm->p = p;
    vm->n = n;
    vm->lim = lim;
    vm->err = err;
    /* Objects per pickle byte are bounded; so is this, generously. */
    uint64_t cap = (uint64_t)n * 64 + (16u << 20);
    vm->arena_cap = cap < lim->max_alloc ? cap : lim->max_alloc;
    vm->marks = calloc(lim->max_depth ? lim->max_depth : 1, sizeof *vm->marks);
    if (!vm->marks) {
        pk_free(vm);
        return amn_error_set(err, AMN_E_NOMEM, "pickle: out of memory");
    }
    amn_error local;
    if (!err) vm->err = &local; /* handlers read back the code */
    vm->err->code = AMN_OK;
    bool stop = false;
    int rc = AMN_OK;
    while (!stop) {
        if (vm->pos >= vm->n) {
            rc = perr(vm, AMN_E_PARSE, "no STOP opcode (truncated)");
            break;
        }
        uint8_t op = p[vm->pos++];
        rc = step(vm, op, &stop);
        if (rc != AMN_OK) break;
    }
    if (rc == AMN_OK && vm->pos != vm->n)
        rc = amn_error_set(vm->err, AMN_E_DISALLOWED,
                           "pickle: %zu bytes after the STOP opcode at offset %zu (a second "
                           "pickle or hidden data)",
                           vm->n - vm->pos, vm->pos - 1);
    free(vm->stack);
    vm->stack = NULL;
    free(vm->memo_keys);
    free(vm->memo_vals);
    vm->memo_keys = NULL;
    vm->memo_vals = NULL;
    free(vm->marks);
    vm->marks = NULL;
    vm->err = NULL;
    if (rc != AMN_OK) {
        pk_free(vm);
        return rc;
    }
    *out = vm;
    return AMN_OK;
}

const pv *pk_root(const pk_vm *vm) {
    return vm->root;
}

size_t pk_storage_count(const pk_vm *vm) {
    return vm->n_keys;
}

const char *pk_storage_key(const pk_vm *vm, size_t i) {
    return i < vm->n_keys ? vm->keys[i] : NULL;
}

void pk_free(pk_vm *vm) {
    if (!vm) return;
    arena_chunk *c = vm->chunks;
    while (c) {
        arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(vm->stack);
    free(vm->memo_keys);
    free(vm->memo_vals);
    free(vm->marks);
    free(vm->keys);
    free(vm);
}
