/* pickle_scan.c — the opcode walk of the pickle scanner: a symbolic stack
 * and memo, findings aggregated by name. */
#include "amn/kit/pickle_scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/kit/pickle_allow.h"

#define LINE_MAX_LEN   256
#define NAME_MAX_LEN   (2 * LINE_MAX_LEN + 2)
#define MAX_NESTED     4
#define MAX_AGGREGATES 4096
#define MAX_NAMES      65536      /* globals kept by name; later ones print as "?" */
#define MAX_STACK      (1u << 22) /* real pickles keep a few thousand values on the stack */

typedef enum sk {
    S_OTHER,
    S_NONE,
    S_STR,    /* text or bytes: s, len */
    S_GLOBAL, /* name (allowed or not) */
    S_OBJ,    /* the result of calling name */
    S_TUPLE,  /* pid_ok: a ('storage', <storage class>, key, ...) persistent id */
} sk;

typedef struct sitem {
    uint8_t kind;
    uint8_t allowed; /* S_GLOBAL / S_OBJ: the name is on the allowlist */
    uint8_t pid_ok;  /* S_TUPLE */
    uint8_t is_storage;
    uint32_t name; /* S_GLOBAL / S_OBJ: index into the name table */
    const uint8_t *s;
    size_t len; /* S_STR; S_TUPLE: key */
} sitem;

/* An aggregated finding: kind letter + name, with a count. */
typedef struct agg {
    char *key; /* "g:torch.Size" */
    uint64_t count, first;
} agg;

typedef struct scanner {
    const uint8_t *p;
    size_t n, pos;
    const amn_limits *lim;
    const pk_scan_opts *o;
    amn_scan_report *r;
    amn_error *err;
    unsigned depth;
    sitem *stack;
    size_t sp, cap;
    size_t *marks;
    size_t n_marks;
    /* memo: open addressing on u32 keys */
    uint32_t *mkeys;
    sitem *mvals;
    uint8_t *mused;
    size_t m_n, m_cap;
    /* names of globals seen (index = sitem.name) */
    char **names;
    size_t n_names, names_cap;
    /* aggregates, in first-seen order, with a hash index */
    agg *aggs;
    size_t n_aggs;
    size_t *agg_index; /* slots: index + 1, 0 empty */
    size_t agg_slots;
    uint64_t agg_overflow;
    int oom;
} scanner;

static int scan_buffer(const uint8_t *p, size_t n, const amn_limits *lim, const pk_scan_opts *o,
                       unsigned depth, uint64_t base, amn_scan_report *r, amn_error *err);

int pk_looks_like_pickle(const uint8_t *p, size_t n) {
    return n >= 3 && p[0] == 0x80 && p[1] >= 2 && p[1] <= 5;
}

static uint64_t rd_le(const uint8_t *p, size_t k) {
    uint64_t v = 0;
    for (size_t i = 0; i < k; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int add(scanner *s, bool unsafe, const char *kind, uint64_t off, const char *fmt,
               const char *arg) {
    int rc = amn_scan_add(s->r, unsafe, kind, s->o->where, off, s->err, fmt, arg);
    if (rc != AMN_OK) s->oom = 1;
    return rc;
}

static uint64_t hash_str(const char *k) {
    uint64_t h = 1469598103934665603ull;
    for (; *k; k++) h = (h ^ (uint8_t)*k) * 1099511628211ull;
    return h;
}

/* Count one safe occurrence of kind:name; the report gets one line each. */
static void aggregate(scanner *s, char kind, const char *name, uint64_t off) {
    char key[NAME_MAX_LEN + 4];
    snprintf(key, sizeof key, "%c:%s", kind, name);
    if (s->agg_slots == 0 || (s->n_aggs + 1) * 2 > s->agg_slots) {
        if (s->n_aggs >= MAX_AGGREGATES) {
            s->agg_overflow++;
            return;
        }
        size_t slots = s->agg_slots ? s->agg_slots * 2 : 64;
        size_t *idx = calloc(slots, sizeof *idx);
        agg *a = realloc(s->aggs, slots / 2 * sizeof *a);
        if (!idx || !a) {
            free(idx);
            if (a) s->aggs = a;
            s->oom = 1;
            return;
        }
        s->aggs = a;
        for (size_t i = 0; i < s->n_aggs; i++) {
            size_t h = (size_t)hash_str(s->aggs[i].key) & (slots - 1);
            while (idx[h]) h = (h + 1) & (slots - 1);
            idx[h] = i + 1;
        }
        free(s->agg_index);
        s->agg_index = idx;
        s->agg_slots = slots;
    }
    size_t h = (size_t)hash_str(key) & (s->agg_slots - 1);
    while (s->agg_index[h]) {
        agg *a = &s->aggs[s->agg_index[h] - 1];
        if (strcmp(a->key, key) == 0) {
            a->count++;
            return;
        }
        h = (h + 1) & (s->agg_slots - 1);
    }
    size_t n = strlen(key) + 1;
    char *k = malloc(n);
    if (!k) {
        s->oom = 1;
        return;
    }
    memcpy(k, key, n);
    s->aggs[s->n_aggs] = (agg){k, 1, off};
    s->agg_index[h] = ++s->n_aggs;
}

static void emit_aggregates(scanner *s) {
    for (size_t i = 0; i < s->n_aggs && !s->oom; i++) {
        const agg *a = &s->aggs[i];
        const char *name = a->key + 2;
        char what[NAME_MAX_LEN + 64];
        const char *kind = "global";
        switch (a->key[0]) {
        case 'g':
            snprintf(what, sizeof what, "%s (allowed; %llu reference%s)", name,
                     (unsigned long long)a->count, a->count == 1 ? "" : "s");
            break;
        case 'c':
            kind = "call";
            snprintf(what, sizeof what, "REDUCE/NEWOBJ of %s (allowed; %llu time%s)", name,
                     (unsigned long long)a->count, a->count == 1 ? "" : "s");
            break;
        case 'b':
            kind = "build";
            snprintf(what, sizeof what, "BUILD on %s (allowed; %llu time%s)", name,
                     (unsigned long long)a->count, a->count == 1 ? "" : "s");
            break;
        default:
            kind = "persid";
            snprintf(what, sizeof what, "persistent id %s (%llu time%s)", name,
                     (unsigned long long)a->count, a->count == 1 ? "" : "s");
            break;
        }
        if (amn_scan_add(s->r, false, kind, s->o->where, a->first, s->err, "%s", what) != AMN_OK)
            s->oom = 1;
    }
    if (s->agg_overflow && !s->oom)
        add(s, true, "malformed", AMN_SCAN_NO_OFFSET, "%s",
            "more than 4096 distinct allowed names (not a checkpoint pickle)");
}

/* ---- stack and memo ------------------------------------------------------ */

static size_t base(const scanner *s) {
    return s->n_marks ? s->marks[s->n_marks - 1] : 0;
}

static bool push(scanner *s, sitem it) {
    if (s->sp == s->cap) {
        if (s->cap >= s->lim->max_array || s->cap >= MAX_STACK) return false;
        size_t cap = s->cap ? s->cap * 2 : 64;
        sitem *st = realloc(s->stack, cap * sizeof *st);
        if (!st) {
            s->oom = 1;
            return false;
        }
        s->stack = st;
        s->cap = cap;
    }
    s->stack[s->sp++] = it;
    return true;
}

static bool pop(scanner *s, sitem *out) {
    if (s->sp <= base(s)) return false;
    *out = s->stack[--s->sp];
    return true;
}

static bool pop_mark(scanner *s, size_t *first, size_t *count) {
    if (!s->n_marks) return false;
    size_t b = s->marks[--s->n_marks];
    *first = b;
    *count = s->sp - b;
    s->sp = b;
    return true;
}

static size_t memo_slot(const scanner *s, uint32_t key) {
    size_t mask = s->m_cap - 1, i = (key * 2654435761u) & mask;
    while (s->mused[i] && s->mkeys[i] != key) i = (i + 1) & mask;
    return i;
}

static bool memo_put(scanner *s, uint64_t key) {
    if (s->sp <= base(s) || key > UINT32_MAX) return false;
    if (s->m_cap == 0 || (s->m_n + 1) * 2 > s->m_cap) {
        if (s->m_n >= s->lim->max_array) return false;
        size_t cap = s->m_cap ? s->m_cap * 2 : 256;
        uint32_t *k = calloc(cap, sizeof *k);
        sitem *v = calloc(cap, sizeof *v);
        uint8_t *u = calloc(cap, 1);
        if (!k || !v || !u) {
            free(k);
            free(v);
            free(u);
            s->oom = 1;
            return false;
        }
        uint32_t *ok = s->mkeys;
        sitem *ov = s->mvals;
        uint8_t *ou = s->mused;
        size_t ocap = s->m_cap;
        s->mkeys = k;
        s->mvals = v;
        s->mused = u;
        s->m_cap = cap;
        for (size_t i = 0; i < ocap; i++) {
            if (!ou[i]) continue;
            size_t sl = memo_slot(s, ok[i]);
            s->mkeys[sl] = ok[i];
            s->mvals[sl] = ov[i];
            s->mused[sl] = 1;
        }
        free(ok);
        free(ov);
        free(ou);
    }
    size_t sl = memo_slot(s, (uint32_t)key);
    if (!s->mused[sl]) s->m_n++;
    s->mused[sl] = 1;
    s->mkeys[sl] = (uint32_t)key;
    s->mvals[sl] = s->stack[s->sp - 1];
    return true;
}

static bool memo_get(scanner *s, uint64_t key) {
    if (key > UINT32_MAX || s->m_cap == 0) return false;
    size_t sl = memo_slot(s, (uint32_t)key);
    return s->mused[sl] && push(s, s->mvals[sl]);
}

/* ---- names ------------------------------------------------------------------ */

static const char *name_of(const scanner *s, const sitem *it) {
    return it->name < s->n_names ? s->names[it->name] : "?";
}

/* A global by module and name: recorded (never looked up but in the
 * allowlist) and pushed. */
static bool global(scanner *s, const char *mod, size_t ml, const char *nm, size_t nl,
                   uint64_t off) {
    char full[NAME_MAX_LEN];
    size_t k = 0;
    for (size_t i = 0; i < ml + 1 + nl && k + 1 < sizeof full; i++) {
        char c = i < ml ? mod[i] : i == ml ? '.' : nm[i - ml - 1];
        full[k++] = (c >= 0x20 && c < 0x7f) ? c : '?';
    }
    full[k] = '\0';
    const pk_allowed *a = pk_allow_find(mod, ml, nm, nl);
    sitem it = {.kind = S_GLOBAL, .allowed = a != NULL};
    it.is_storage = a && a->id == PG_STORAGE;
    if (a)
        aggregate(s, 'g', full, off);
    else
        add(s, true, "global", off, "%s (not on torch's weights-only allowlist)", full);
    if (s->n_names >= MAX_NAMES) {
        it.name = UINT32_MAX;
        return push(s, it);
    }
    if (s->n_names == s->names_cap) {
        size_t cap = s->names_cap ? s->names_cap * 2 : 32;
        if (cap > s->lim->max_array) return false;
        char **nn = realloc(s->names, cap * sizeof *nn);
        if (!nn) {
            s->oom = 1;
            return false;
        }
        s->names = nn;
        s->names_cap = cap;
    }
    char *d = malloc(k + 1);
    if (!d) {
        s->oom = 1;
        return false;
    }
    memcpy(d, full, k + 1);
    s->names[s->n_names] = d;
    it.name = (uint32_t)s->n_names++;
    return push(s, it);
}

static bool read_line(scanner *s, const char **out, size_t *len) {
    size_t avail = s->n - s->pos, lim = avail < LINE_MAX_LEN ? avail : LINE_MAX_LEN;
    const uint8_t *nl = memchr(s->p + s->pos, '\n', lim);
    if (!nl) return false;
    *out = (const char *)s->p + s->pos;
    *len = (size_t)(nl - (s->p + s->pos));
    s->pos += *len + 1;
    return true;
}

/* A string or bytes argument: a pickle inside it is scanned in turn. Under
 * protocol 2 bytes travel as latin-1 text (UTF-8 in the pickle). */
static void check_nested(scanner *s, const uint8_t *b, size_t len, uint64_t off) {
    bool raw = pk_looks_like_pickle(b, len);
    bool latin = len >= 4 && b[0] == 0xc2 && b[1] == 0x80 && b[2] >= 2 && b[2] <= 5;
    if (!raw && !latin) return;
    add(s, true, "nested-pickle", off, "%s", "a pickle inside a string or bytes value");
    if (s->depth + 1 >= MAX_NESTED) return;
    uint8_t *dec = NULL;
    size_t dn = len;
    if (latin) {
        dec = malloc(len);
        if (!dec) {
            s->oom = 1;
            return;
        }
        dn = 0;
        for (size_t i = 0; i < len; i++) {
            if (b[i] < 0x80) {
                dec[dn++] = b[i];
            } else if ((b[i] == 0xc2 || b[i] == 0xc3) && i + 1 < len) {
                dec[dn++] = (uint8_t)((b[i] & 1) << 6 | (b[i + 1] & 0x3f));
                i++;
            } else {
                break;
            }
        }
    }
    pk_scan_opts inner = {.where = s->o->where}; /* its storage keys reference nothing */
    if (scan_buffer(dec ? dec : b, dn, s->lim, &inner, s->depth + 1, off, s->r, s->err) != AMN_OK)
        s->oom = 1;
    free(dec);
}

/* BINPERSID: torch's persistent ids are ('storage', <storage class>, key,
 * location, numel[, view]); anything else goes to a persistent_load that
 * is not torch's. */
static void persid(scanner *s, const sitem *pid, uint64_t off) {
    if (pid->kind == S_TUPLE && pid->pid_ok) {
        aggregate(s, 'p', "('storage', <storage class>, key, ...)", off);
        if (s->o->on_storage_key && pid->s)
            s->o->on_storage_key(s->o->key_ctx, (const char *)pid->s, pid->len);
        return;
    }
    add(s, true, "persid", off, "%s", "BINPERSID of an unexpected shape (not a torch storage)");
}

static void make_tuple(scanner *s, size_t first, size_t count) {
    sitem t = {.kind = S_TUPLE};
    const sitem *a = s->stack + first;
    if (count >= 5 && count <= 6 && a[0].kind == S_STR && a[0].len == 7 &&
        memcmp(a[0].s, "storage", 7) == 0 && a[1].kind == S_GLOBAL && a[1].is_storage) {
        t.pid_ok = 1;
        if (a[2].kind == S_STR) {
            t.s = a[2].s;
            t.len = a[2].len;
        }
    }
    s->sp = first;
    push(s, t);
}

/* REDUCE / NEWOBJ: a call of fn. */
static void call(scanner *s, const sitem *fn, const char *op, uint64_t off) {
    sitem res = {.kind = S_OBJ};
    if (fn->kind == S_GLOBAL && fn->allowed) {
        aggregate(s, 'c', name_of(s, fn), off);
        res.allowed = 1;
        res.name = fn->name;
    } else {
        char what[NAME_MAX_LEN + 64];
        snprintf(what, sizeof what, "%s of %s", op,
                 fn->kind == S_GLOBAL ? name_of(s, fn) : "a value that is not a global");
        add(s, true, "call", off, "%s", what);
        res.name = fn->kind == S_GLOBAL ? fn->name : UINT32_MAX;
    }
    push(s, res);
}

/* ---- the walk ------------------------------------------------------------ */

#define MALFORMED(msg)                                                                             \
    do {                                                                                           \
        add(s, true, "malformed", op_off, "%s", msg);                                              \
        return false;                                                                              \
    } while (0)

/* One opcode; false stops the walk (STOP, or a finding that ends it). */
static bool step(scanner *s, bool *stopped) {
    uint64_t op_off = s->pos;
    uint8_t op = s->p[s->pos++];
    sitem a, b, c;
    size_t first, count, k;
    const char *l1, *l2;
    size_t n1, n2;
#define NEED(k_)                                                                                   \
    if (s->n - s->pos < (k_)) MALFORMED("truncated opcode argument")
#define PUSH(it_)                                                                                  \
    if (!push(s, it_)) MALFORMED("value stack deeper than the limit")
    sitem other = {.kind = S_OTHER};
    switch (op) {
    case 0x80: /* PROTO */
        NEED(1);
        if (s->p[s->pos] > 5) MALFORMED("pickle protocol above 5");
        s->pos++;
        return true;
    case 0x95: /* FRAME */
        NEED(8);
        s->pos += 8;
        return true;
    case '.':
        if (s->sp <= base(s)) MALFORMED("STOP on an empty stack");
        *stopped = true;
        return false;
    case '(':
        if (s->n_marks >= s->lim->max_depth) MALFORMED("MARKs nested deeper than the limit");
        s->marks[s->n_marks++] = s->sp;
        return true;
    case '0':
        if (!pop(s, &a)) MALFORMED("stack underflow");
        return true;
    case '1':
        if (!pop_mark(s, &first, &count)) MALFORMED("POP_MARK without a MARK");
        return true;
    case '2':
        if (s->sp <= base(s)) MALFORMED("stack underflow");
        PUSH(s->stack[s->sp - 1]);
        return true;
    case 'N':
        PUSH(((sitem){.kind = S_NONE}));
        return true;
    case 0x88:
    case 0x89:
    case ')':
    case ']':
    case '}':
    case 0x8f:
        PUSH(op == ')' ? ((sitem){.kind = S_TUPLE}) : other);
        return true;
    case 'J':
    case 'K':
    case 'M':
    case 'G':
        k = op == 'J' ? 4 : op == 'K' ? 1 : op == 'M' ? 2 : 8;
        NEED(k);
        s->pos += k;
        PUSH(other);
        return true;
    case 0x8a: /* LONG1 */
        NEED(1);
        k = s->p[s->pos];
        NEED(1 + k);
        s->pos += 1 + k;
        PUSH(other);
        return true;
    case 0x8b: /* LONG4 */
        NEED(4);
        k = (size_t)rd_le(s->p + s->pos, 4);
        if (k > s->n - s->pos - 4) MALFORMED("truncated opcode argument");
        s->pos += 4 + k;
        PUSH(other);
        return true;
    case 'I':
    case 'L':
    case 'F':
    case 'S':
    case 'V':
        if (!read_line(s, &l1, &n1)) MALFORMED("unterminated text argument");
        PUSH(other);
        return true;
    case 'X':
    case 0x8c:
    case 0x8d:
    case 'T':
    case 'U':
    case 'B':
    case 'C':
    case 0x8e:
    case 0x96: {
        size_t w = (op == 0x8c || op == 'U' || op == 'C')     ? 1
                   : (op == 0x8d || op == 0x8e || op == 0x96) ? 8
                                                              : 4;
        NEED(w);
        uint64_t len = rd_le(s->p + s->pos, w);
        s->pos += w;
        if (len > s->n - s->pos) MALFORMED("string runs past the end of the pickle");
        if (len > s->lim->max_string) MALFORMED("string longer than the limit");
        sitem it = {.kind = S_STR, .s = s->p + s->pos, .len = (size_t)len};
        check_nested(s, it.s, it.len, s->pos);
        s->pos += (size_t)len;
        PUSH(it);
        return true;
    }
    case 0x85:
    case 0x86:
    case 0x87:
        k = (size_t)(op - 0x84);
        if (s->sp - base(s) < k) MALFORMED("stack underflow");
        make_tuple(s, s->sp - k, k);
        return true;
    case 't':
        if (!pop_mark(s, &first, &count)) MALFORMED("TUPLE without a MARK");
        s->sp = first + count; /* the items are still there: fold them */
        make_tuple(s, first, count);
        return true;
    case 'l':
    case 0x91:
    case 'd':
        if (!pop_mark(s, &first, &count)) MALFORMED("container without a MARK");
        PUSH(other);
        return true;
    case 'a':
    case 's':
        k = op == 'a' ? 1 : 2;
        if (s->sp - base(s) < k + 1) MALFORMED("stack underflow");
        s->sp -= k;
        return true;
    case 'e':
    case 0x90:
    case 'u':
        if (!pop_mark(s, &first, &count)) MALFORMED("APPENDS/SETITEMS without a MARK");
        if (s->sp <= base(s)) MALFORMED("stack underflow");
        return true;
    case 'c':
        if (!read_line(s, &l1, &n1) || !read_line(s, &l2, &n2))
            MALFORMED("GLOBAL without two text lines");
        if (!global(s, l1, n1, l2, n2, op_off)) MALFORMED("too many globals");
        return true;
    case 0x93: /* STACK_GLOBAL */
        if (!pop(s, &b) || !pop(s, &a)) MALFORMED("stack underflow");
        if (a.kind != S_STR || b.kind != S_STR) {
            add(s, true, "global", op_off, "%s", "STACK_GLOBAL of names that are not strings");
            PUSH(((sitem){.kind = S_GLOBAL, .name = UINT32_MAX}));
            return true;
        }
        if (!global(s, (const char *)a.s, a.len, (const char *)b.s, b.len, op_off))
            MALFORMED("too many globals");
        return true;
    case 'R':
    case 0x81:
        if (!pop(s, &b) || !pop(s, &a)) MALFORMED("stack underflow");
        call(s, &a, op == 'R' ? "REDUCE" : "NEWOBJ", op_off);
        return true;
    case 0x92:
        if (!pop(s, &c) || !pop(s, &b) || !pop(s, &a)) MALFORMED("stack underflow");
        call(s, &a, "NEWOBJ_EX", op_off);
        return true;
    case 'b': /* BUILD */
        if (!pop(s, &b) || s->sp <= base(s)) MALFORMED("stack underflow");
        a = s->stack[s->sp - 1];
        if (b.kind == S_NONE) return true;
        if (a.kind == S_OBJ && a.allowed) {
            aggregate(s, 'b', name_of(s, &a), op_off);
        } else {
            char what[NAME_MAX_LEN + 64];
            snprintf(what, sizeof what, "BUILD with state on %s",
                     a.kind == S_OBJ ? name_of(s, &a) : "a value that is not an allowed object");
            add(s, true, "build", op_off, "%s", what);
        }
        return true;
    case 'Q': /* BINPERSID */
        if (!pop(s, &a)) MALFORMED("stack underflow");
        persid(s, &a, op_off);
        PUSH(other);
        return true;
    case 'P': /* PERSID */
        if (!read_line(s, &l1, &n1)) MALFORMED("unterminated text argument");
        add(s, true, "persid", op_off, "%s", "text persistent id (PERSID): not a torch storage");
        PUSH(other);
        return true;
    case 'i': /* INST */
        if (!read_line(s, &l1, &n1) || !read_line(s, &l2, &n2))
            MALFORMED("INST without two text lines");
        if (!pop_mark(s, &first, &count)) MALFORMED("INST without a MARK");
        if (!global(s, l1, n1, l2, n2, op_off)) MALFORMED("too many globals");
        add(s, true, "object", op_off, "%s", "INST: builds an object by calling a class");
        s->stack[s->sp - 1].kind = S_OBJ;
        s->stack[s->sp - 1].allowed = 0;
        return true;
    case 'o': /* OBJ */
        if (!pop_mark(s, &first, &count) || count < 1) MALFORMED("OBJ without a MARK and class");
        add(s, true, "object", op_off, "%s", "OBJ: builds an object by calling a class");
        PUSH(((sitem){.kind = S_OBJ, .name = UINT32_MAX}));
        return true;
    case 0x82:
    case 0x83:
    case 0x84:
        k = op == 0x82 ? 1 : op == 0x83 ? 2 : 4;
        NEED(k);
        s->pos += k;
        add(s, true, "extension", op_off, "%s",
            "EXT1/EXT2/EXT4: a global named by a copyreg extension code");
        PUSH(((sitem){.kind = S_GLOBAL, .name = UINT32_MAX}));
        return true;
    case 0x97:
    case 0x98:
        add(s, true, "object", op_off, "%s", "out-of-band buffer (NEXT_BUFFER/READONLY_BUFFER)");
        if (op == 0x97) PUSH(other);
        return true;
    case 'q':
    case 'r':
    case 0x94:
        k = op == 'q' ? 1 : op == 'r' ? 4 : 0;
        NEED(k);
        {
            uint64_t key = op == 0x94 ? s->m_n : rd_le(s->p + s->pos, k);
            s->pos += k;
            if (!memo_put(s, key)) MALFORMED("bad memo PUT");
        }
        return true;
    case 'h':
    case 'j':
        k = op == 'h' ? 1 : 4;
        NEED(k);
        {
            uint64_t key = rd_le(s->p + s->pos, k);
            s->pos += k;
            if (!memo_get(s, key)) MALFORMED("memo reference to a missing key");
        }
        return true;
    case 'p':
    case 'g': {
        if (!read_line(s, &l1, &n1) || n1 == 0 || n1 > 10) MALFORMED("bad memo key");
        uint64_t key = 0;
        for (size_t i = 0; i < n1; i++) {
            if (l1[i] < '0' || l1[i] > '9') MALFORMED("bad memo key");
            key = key * 10 + (uint64_t)(l1[i] - '0');
        }
        if (op == 'p' ? !memo_put(s, key) : !memo_get(s, key)) MALFORMED("bad memo key");
        return true;
    }
    default: {
        char msg[48];
        snprintf(msg, sizeof msg, "unknown opcode 0x%02x", op);
        add(s, true, "malformed", op_off, "%s", msg);
        return false;
    }
    }
#undef NEED
#undef PUSH
}

static int scan_buffer(const uint8_t *p, size_t n, const amn_limits *lim, const pk_scan_opts *o,
                       unsigned depth, uint64_t base_off, amn_scan_report *r, amn_error *err) {
    (void)base_off; /* offsets of nested pickles are those of their string */
    scanner s = {.p = p, .n = n, .lim = lim, .o = o, .r = r, .err = err, .depth = depth};
    s.marks = calloc(lim->max_depth ? lim->max_depth : 1, sizeof *s.marks);
    if (!s.marks) return amn_error_set(err, AMN_E_NOMEM, "scan: out of memory");
    bool stopped = false;
    while (!s.oom) {
        if (s.pos >= s.n) {
            add(&s, true, "malformed", s.pos, "%s", "no STOP opcode (truncated pickle)");
            break;
        }
        if (!step(&s, &stopped)) break;
    }
    if (depth == 0 && o->consumed) *o->consumed = s.pos;
    if (stopped && s.pos < s.n && !s.oom && !(depth == 0 && o->stop_at_stop)) {
        char what[96];
        snprintf(what, sizeof what, "%zu bytes after the STOP opcode", s.n - s.pos);
        add(&s, true, "trailing", s.pos, "%s", what);
        if (pk_looks_like_pickle(p + s.pos, n - s.pos)) {
            add(&s, true, "nested-pickle", s.pos, "%s", "a second pickle after STOP");
            pk_scan_opts inner = {.where = o->where};
            if (depth + 1 < MAX_NESTED &&
                scan_buffer(p + s.pos, n - s.pos, lim, &inner, depth + 1, s.pos, r, err) != AMN_OK)
                s.oom = 1;
        }
    }
    emit_aggregates(&s);
    for (size_t i = 0; i < s.n_aggs; i++) free(s.aggs[i].key);
    for (size_t i = 0; i < s.n_names; i++) free(s.names[i]);
    free(s.aggs);
    free(s.agg_index);
    free(s.names);
    free(s.stack);
    free(s.marks);
    free(s.mkeys);
    free(s.mvals);
    free(s.mused);
    return s.oom ? (err && err->code ? err->code : AMN_E_NOMEM) : AMN_OK;
}

int pk_scan(const uint8_t *p, size_t n, const amn_limits *lim, const pk_scan_opts *o,
            amn_scan_report *r, amn_error *err) {
    return scan_buffer(p, n, lim, o, 0, 0, r, err);
}
