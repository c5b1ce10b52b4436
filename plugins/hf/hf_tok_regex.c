/* A backtracking matcher for the pre-tokenizer regexes (hf_tok_regex.h).
 * Patterns are compiled to a tree; matching walks it with an explicit stack
 * of continuations, so alternation and quantifiers backtrack as Oniguruma's
 * leftmost-first search does. A step budget bounds the work on any input. */
#include <stdlib.h>
#include <string.h>

#include "hf_tok_int.h"
#include "hf_tok_regex.h"

enum { N_CHAR, N_ANY, N_CLASS, N_GROUP, N_REPEAT, N_LOOK };

typedef struct item { /* one member of a bracket class or an escape */
    int kind;         /* 0 range, 1 category prefix, 2 space, 3 digit, 4 word */
    bool neg;
    uint32_t lo, hi;
    char cat[3];
} item;

typedef struct node node;
struct node {
    int kind;
    node *next; /* the rest of the sequence */
    uint32_t ch;
    bool icase;
    item *items; /* N_CLASS */
    size_t n_items;
    bool neg;
    node **alts; /* N_GROUP: sequences */
    size_t n_alts;
    node *sub; /* N_REPEAT, N_LOOK */
    uint32_t min, max;
    bool greedy;
    bool look_neg;
};

struct hf_re {
    node **all;
    size_t n_all, cap_all;
    node *root;
};

typedef struct parser {
    const uint32_t *p;
    size_t i, n;
    hf_re *re;
    int depth;
    const char *err;
} parser;

static node *new_node(parser *ps, int kind) {
    hf_re *re = ps->re;
    if (re->n_all == re->cap_all) {
        size_t nc = re->cap_all ? re->cap_all * 2 : 32;
        node **na = realloc(re->all, nc * sizeof *na);
        if (!na) return ps->err = "out of memory", NULL;
        re->all = na;
        re->cap_all = nc;
    }
    node *nd = calloc(1, sizeof *nd);
    if (!nd) return ps->err = "out of memory", NULL;
    nd->kind = kind;
    re->all[re->n_all++] = nd;
    return nd;
}

static bool at(parser *ps, uint32_t c) {
    return ps->i < ps->n && ps->p[ps->i] == c;
}

/* \p{Xx} / \p{X} / \pL: the category name into it->cat */
static bool parse_prop(parser *ps, item *it) {
    if (at(ps, '{')) {
        ps->i++;
        size_t k = 0;
        while (ps->i < ps->n && ps->p[ps->i] != '}' && k < 2) it->cat[k++] = (char)ps->p[ps->i++];
        if (!at(ps, '}') || k == 0) return false;
        ps->i++;
    } else if (ps->i < ps->n) {
        it->cat[0] = (char)ps->p[ps->i++];
    } else {
        return false;
    }
    it->kind = 1;
    return strchr("LMNPSZC", it->cat[0]) != NULL;
}

static uint32_t simple_escape(uint32_t c) {
    switch (c) {
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    case 'f':
        return '\f';
    case 'v':
        return '\v';
    case '0':
        return 0;
    default:
        return c;
    }
}

/* After a backslash: a class-like escape into *it (true) or a literal *lit. */
static bool parse_escape(parser *ps, item *it, uint32_t *lit, bool *is_item) {
    if (ps->i >= ps->n) return false;
    uint32_t c = ps->p[ps->i++];
    memset(it, 0, sizeof *it);
    *is_item = true;
    switch (c) {
    case 's':
    case 'S':
        it->kind = 2;
        it->neg = c == 'S';
        return true;
    case 'd':
    case 'D':
        it->kind = 3;
        it->neg = c == 'D';
        return true;
    case 'w':
    case 'W':
        it->kind = 4;
        it->neg = c == 'W';
        return true;
    case 'p':
    case 'P':
        it->neg = c == 'P';
        return parse_prop(ps, it);
    default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            if (!strchr("nrtfv", (int)c)) return false; /* unsupported escape */
        }
        *is_item = false;
        *lit = simple_escape(c);
        return true;
    }
}

static bool parse_class(parser *ps, node *nd) {
    nd->kind = N_CLASS;
    if (at(ps, '^')) nd->neg = true, ps->i++;
    size_t cap = 8;
    nd->items = calloc(cap, sizeof *nd->items);
    if (!nd->items) return false;
    bool first = true;
    while (ps->i < ps->n && (first || ps->p[ps->i] != ']')) {
        first = false;
        item it = {0};
        uint32_t lit = ps->p[ps->i++];
        bool is_item = false;
        if (lit == '\\' && !parse_escape(ps, &it, &lit, &is_item)) return false;
        if (lit == '[') return false; /* nested classes: not used by tokenizers */
        if (!is_item) {
            it.kind = 0;
            it.lo = it.hi = lit;
            if (at(ps, '-') && ps->i + 1 < ps->n && ps->p[ps->i + 1] != ']') {
                ps->i++;
                uint32_t hi = ps->p[ps->i++];
                bool hi_item = false;
                item tmp;
                if (hi == '\\' && (!parse_escape(ps, &tmp, &hi, &hi_item) || hi_item)) return false;
                if (hi < lit) return false;
                it.hi = hi;
            }
        }
        if (nd->n_items == cap) {
            item *ni = realloc(nd->items, cap * 2 * sizeof *ni);
            if (!ni) return false;
            nd->items = ni;
            cap *= 2;
        }
        nd->items[nd->n_items++] = it;
    }
    if (!at(ps, ']')) return false;
    ps->i++;
    return true;
}

static node *parse_alt(parser *ps, bool icase);

static bool parse_uint(parser *ps, uint32_t *v) {
    size_t start = ps->i;
    uint64_t r = 0;
    while (ps->i < ps->n && ps->p[ps->i] >= '0' && ps->p[ps->i] <= '9') {
        r = r * 10 + (ps->p[ps->i++] - '0');
        if (r > 100000) return false;
    }
    *v = (uint32_t)r;
    return ps->i > start;
}

/* One atom and its quantifier, or NULL (ps->err set) */
static node *parse_atom(parser *ps, bool icase) {
    uint32_t c = ps->p[ps->i++];
    node *nd;
    if (c == '(') {
        if (++ps->depth > 32) return ps->err = "groups nest too deep", NULL;
        bool look = false, look_neg = false, sub_icase = icase;
        if (at(ps, '?')) {
            ps->i++;
            if (at(ps, ':'))
                ps->i++;
            else if (at(ps, '='))
                look = true, ps->i++;
            else if (at(ps, '!'))
                look = look_neg = true, ps->i++;
            else if (at(ps, 'i') && ps->i + 1 < ps->n && ps->p[ps->i + 1] == ':')
                sub_icase = true, ps->i += 2;
            else
                return ps->err = "unsupported group", NULL;
        }
        node *inner = parse_alt(ps, sub_icase);
        if (!inner) return NULL;
        if (!at(ps, ')')) return ps->err = "unbalanced parenthesis", NULL;
        ps->i++;
        ps->depth--;
        if (look) {
            nd = new_node(ps, N_LOOK);
            if (!nd) return NULL;
            nd->sub = inner;
            nd->look_neg = look_neg;
            return nd; /* look-aheads take no quantifier */
        }
        nd = inner;
    } else if (c == '[') {
        nd = new_node(ps, N_CLASS);
        if (!nd || !parse_class(ps, nd)) return ps->err = "bad character class", NULL;
        nd->icase = icase;
    } else if (c == '.') {
        nd = new_node(ps, N_ANY);
        if (!nd) return NULL;
    } else if (c == '\\') {
        item it;
        uint32_t lit = 0;
        bool is_item;
        if (!parse_escape(ps, &it, &lit, &is_item)) return ps->err = "unsupported escape", NULL;
        nd = new_node(ps, is_item ? N_CLASS : N_CHAR);
        if (!nd) return NULL;
        if (is_item) {
            nd->items = malloc(sizeof *nd->items);
            if (!nd->items) return ps->err = "out of memory", NULL;
            nd->items[0] = it;
            nd->n_items = 1;
        }
        nd->ch = lit;
        nd->icase = icase;
    } else if (c == ')' || c == '|' || c == '*' || c == '+' || c == '?' || c == '{') {
        return ps->err = "misplaced operator", NULL;
    } else if (c == '^' || c == '$') {
        return ps->err = "anchors are not supported", NULL;
    } else {
        nd = new_node(ps, N_CHAR);
        if (!nd) return NULL;
        nd->ch = c;
        nd->icase = icase;
    }
    uint32_t mn = 1, mx = 1;
    if (at(ps, '?'))
        mn = 0, mx = 1;
    else if (at(ps, '*'))
        mn = 0, mx = UINT32_MAX;
    else if (at(ps, '+'))
        mn = 1, mx = UINT32_MAX;
    else if (at(ps, '{')) {
        ps->i++;
        if (!parse_uint(ps, &mn)) return ps->err = "bad {m,n}", NULL;
        mx = mn;
        if (at(ps, ',')) {
            ps->i++;
            mx = UINT32_MAX;
            if (!at(ps, '}') && !parse_uint(ps, &mx)) return ps->err = "bad {m,n}", NULL;
        }
        if (!at(ps, '}') || mx < mn) return ps->err = "bad {m,n}", NULL;
    } else {
        return nd;
    }
    ps->i++;
    node *rep = new_node(ps, N_REPEAT);
    if (!rep) return NULL;
    rep->sub = nd;
    rep->min = mn;
    rep->max = mx;
    rep->greedy = true;
    if (at(ps, '?'))
        rep->greedy = false, ps->i++;
    else if (at(ps, '+'))
        return ps->err = "possessive quantifiers are not supported", NULL;
    return rep;
}

/* A sequence up to '|' or ')' as a linked list (NULL: empty sequence) */
static bool parse_seq(parser *ps, bool icase, node **out) {
    node *head = NULL, **tail = &head;
    while (ps->i < ps->n && ps->p[ps->i] != '|' && ps->p[ps->i] != ')') {
        node *a = parse_atom(ps, icase);
        if (!a) return false;
        *tail = a; /* each atom is a fresh node: its `next` is free */
        tail = &a->next;
    }
    *out = head;
    return true;
}

static node *parse_alt(parser *ps, bool icase) {
    node *g = new_node(ps, N_GROUP);
    if (!g) return NULL;
    size_t cap = 0;
    for (;;) {
        node *seq;
        if (!parse_seq(ps, icase, &seq)) return NULL;
        if (g->n_alts == cap) {
            cap = cap ? cap * 2 : 4;
            node **na = realloc(g->alts, cap * sizeof *na);
            if (!na) return ps->err = "out of memory", NULL;
            g->alts = na;
        }
        g->alts[g->n_alts++] = seq;
        if (!at(ps, '|')) break;
        ps->i++;
    }
    return g;
}

int hf_re_compile(const char *pattern, hf_re **out, amn_error *err) {
    *out = NULL;
    size_t len = strlen(pattern);
    if (len > 65536) return amn_error_set(err, AMN_E_LIMIT, "regex: pattern too long");
    uint32_t *cps = malloc((len + 1) * sizeof *cps);
    hf_re *re = calloc(1, sizeof *re);
    if (!cps || !re) {
        free(cps);
        free(re);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    /* the pattern is UTF-8 (validated by the caller's JSON parser) */
    size_t n = hf_utf8_decode(pattern, len, cps, len);
    parser ps = {cps, 0, n, re, 0, NULL};
    re->root = parse_alt(&ps, false);
    if (re->root && ps.i != n) ps.err = "unbalanced parenthesis";
    free(cps);
    if (ps.err || !re->root) {
        const char *why = ps.err ? ps.err : "malformed";
        hf_re_free(re);
        return amn_error_set(err, AMN_E_UNSUPPORTED, "pre-tokenizer regex: %s", why);
    }
    *out = re;
    return AMN_OK;
}

void hf_re_free(hf_re *re) {
    if (!re) return;
    for (size_t i = 0; i < re->n_all; i++) {
        free(re->all[i]->items);
        free(re->all[i]->alts);
        free(re->all[i]);
    }
    free(re->all);
    free(re);
}

enum { F_NODE, F_REPEAT, F_ACCEPT, F_LOOK };

typedef struct frame {
    int kind;
    const node *n;
    uint32_t count;
    size_t start;
    const struct frame *up;
} frame;

typedef struct mctx {
    const uint32_t *t;
    size_t len, end;
    uint64_t *budget; /* steps left, shared by every search of one encoding */
    unsigned depth;
    bool over;
} mctx;

/* Recursion depth grows with the characters one match consumes; the known
 * tokenizers' regexes reach 41 on the check text. The cap bounds the C stack
 * to well under 1 MB (about 230 bytes a level; 1 KB with AddressSanitizer). */
#define MAX_DEPTH 2000u

static uint32_t fold(uint32_t c) {
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static bool cat_is(uint32_t c, const char *want) {
    const char *cat = hf_tok_ucat(c);
    if (!cat) return false;
    return want[1] ? strcmp(cat, want) == 0 : cat[0] == want[0];
}

static bool item_match(const item *it, uint32_t c, bool icase) {
    bool r;
    switch (it->kind) {
    case 0:
        r = (c >= it->lo && c <= it->hi) ||
            (icase && ((fold(c) >= it->lo && fold(c) <= it->hi) ||
                       (c >= 'a' && c <= 'z' && c - 32 >= it->lo && c - 32 <= it->hi)));
        break;
    case 1:
        r = cat_is(c, it->cat);
        break;
    case 2:
        r = hf_tok_is_space(c);
        break;
    case 3:
        r = cat_is(c, "Nd");
        break;
    default:
        r = cat_is(c, "L") || cat_is(c, "M") || cat_is(c, "Nd") || cat_is(c, "Pc");
        break;
    }
    return r != it->neg;
}

static bool class_match(const node *n, uint32_t c) {
    bool r = false;
    for (size_t i = 0; i < n->n_items && !r; i++) r = item_match(&n->items[i], c, n->icase);
    return r != n->neg;
}

static bool match(mctx *m, const node *n, size_t pos, const frame *k);

static bool rep(mctx *m, const node *n, uint32_t count, size_t pos, const frame *k) {
    frame f = {F_REPEAT, n, count, pos, k};
    if (n->greedy) {
        if (count < n->max && match(m, n->sub, pos, &f)) return true;
        return count >= n->min && !m->over && match(m, n->next, pos, k);
    }
    if (count >= n->min && match(m, n->next, pos, k)) return true;
    return count < n->max && !m->over && match(m, n->sub, pos, &f);
}

static bool cont(mctx *m, size_t pos, const frame *k) {
    switch (k->kind) {
    case F_NODE:
        return match(m, k->n, pos, k->up);
    case F_REPEAT:
        /* an empty iteration ends the loop (no progress is possible) */
        if (pos == k->start) return k->count + 1 >= k->n->min && match(m, k->n->next, pos, k->up);
        return rep(m, k->n, k->count + 1, pos, k->up);
    case F_ACCEPT:
        m->end = pos;
        return true;
    default:
        return true; /* F_LOOK */
    }
}

static bool match(mctx *m, const node *n, size_t pos, const frame *k) {
    if (*m->budget == 0 || m->depth > MAX_DEPTH) {
        m->over = true;
        return false;
    }
    --*m->budget;
    if (!n) return cont(m, pos, k);
    bool r = false;
    m->depth++;
    switch (n->kind) {
    case N_CHAR:
        r = pos < m->len && (m->t[pos] == n->ch || (n->icase && fold(m->t[pos]) == fold(n->ch))) &&
            match(m, n->next, pos + 1, k);
        break;
    case N_ANY:
        r = pos < m->len && m->t[pos] != '\n' && match(m, n->next, pos + 1, k);
        break;
    case N_CLASS:
        r = pos < m->len && class_match(n, m->t[pos]) && match(m, n->next, pos + 1, k);
        break;
    case N_GROUP: {
        frame f = {F_NODE, n->next, 0, 0, k};
        for (size_t i = 0; i < n->n_alts && !r && !m->over; i++) r = match(m, n->alts[i], pos, &f);
        break;
    }
    case N_REPEAT:
        r = rep(m, n, 0, pos, k);
        break;
    default: { /* N_LOOK */
        frame f = {F_LOOK, NULL, 0, 0, NULL};
        bool hit = match(m, n->sub, pos, &f);
        r = !m->over && hit != n->look_neg && match(m, n->next, pos, k);
        break;
    }
    }
    m->depth--;
    return r && !m->over;
}

int hf_re_find(const hf_re *re, const uint32_t *text, size_t n, size_t from, size_t *s, size_t *e,
               uint64_t *budget, amn_error *err) {
    mctx m = {text, n, 0, budget, 0, false};
    frame accept = {F_ACCEPT, NULL, 0, 0, NULL};
    for (size_t start = from; start <= n; start++) {
        if (match(&m, re->root, start, &accept)) {
            *s = start;
            *e = m.end;
            return 1;
        }
        if (m.over) break;
    }
    if (m.over)
        return amn_error_set(err, AMN_E_LIMIT,
                             "pre-tokenizer regex: step or depth budget exceeded"),
               -1;
    return 0;
}
