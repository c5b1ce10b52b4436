/* A backtracking matcher for the pre-tokenizer regexes (hf_tok_regex.h).
 * Patterns are compiled to a tree; matching walks it with an explicit stack
 * of continuations, so alternation and quantifiers backtrack as Oniguruma's
 * leftmost-first search does. A step budget bounds the work on any input. */
#include <stdlib.h>
#include <string.h>

#include "hf_tok_int.h"
#include "hf_tok_regex.h"

enum { N_CHAR, N_ANY, N_CLASS, N_GROUP, N_REPEAT, N_LOOK, N_ATOMIC, N_ASSERT };

typedef struct item { /* one member of a bracket class or an escape */
    int kind;         /* 0 range, 1 category prefix, 2 space, 3 digit, 4 word, 5 hex digit */
    bool neg;
    uint32_t lo, hi;
    char cat[3];
} item;

typedef struct node node;
struct node {
    int kind;
    node *next;  /* the rest of the sequence */
    uint32_t ch; /* N_CHAR; N_ASSERT: one of ^ $ A z Z b B */
    bool icase;
    item *items; /* N_CLASS */
    size_t n_items;
    bool neg;
    node **alts; /* N_GROUP: sequences */
    size_t n_alts;
    node *sub; /* N_REPEAT, N_LOOK, N_ATOMIC */
    uint32_t min, max;
    bool greedy;
    bool look_neg;
};

struct hf_re {
    node **all;
    size_t n_all, cap_all;
    node *root;
};

#define MAX_NEST 32 /* groups in groups */

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

/* The general categories and their one-letter groups, as \p{..} names them
 * (Oniguruma also takes long names and scripts: refused here). */
static const char *const categories[] = {
    "L",  "Lu", "Ll", "Lt", "Lm", "Lo", "M",  "Mn", "Mc", "Me", "N",  "Nd", "Nl",
    "No", "P",  "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S",  "Sm", "Sc", "Sk",
    "So", "Z",  "Zs", "Zl", "Zp", "C",  "Cc", "Cf", "Cs", "Co", "Cn",
};

/* \p{Xx} / \p{X}: the category name into it->cat. Oniguruma reads \pL
 * without braces otherwise than other engines: refused. */
static bool parse_prop(parser *ps, item *it) {
    if (!at(ps, '{')) return false;
    ps->i++;
    size_t k = 0;
    while (ps->i < ps->n && ps->p[ps->i] != '}' && k < 2) it->cat[k++] = (char)ps->p[ps->i++];
    if (!at(ps, '}') || k == 0) return false;
    ps->i++;
    it->kind = 1;
    for (size_t i = 0; i < sizeof categories / sizeof *categories; i++)
        if (strcmp(categories[i], it->cat) == 0) return true;
    return false;
}

/* n hex digits (n == 0: {1 to 8 digits}) as a code point */
static bool parse_hex(parser *ps, size_t n, uint32_t *out) {
    bool braced = n == 0 && at(ps, '{');
    if (n == 0 && !braced) n = 2; /* \xHH */
    if (braced) ps->i++, n = 8;
    uint32_t v = 0;
    size_t k = 0;
    for (; k < n && ps->i < ps->n; k++, ps->i++) {
        uint32_t c = ps->p[ps->i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if ((c | 32) >= 'a' && (c | 32) <= 'f')
            d = (c | 32) - 'a' + 10;
        else
            break;
        v = v << 4 | d;
    }
    if (braced) {
        if (k == 0 || !at(ps, '}')) return false;
        ps->i++;
    } else if (k != n) {
        return false;
    }
    *out = v;
    return v <= 0x10FFFF && !(v >= 0xD800 && v <= 0xDFFF);
}

/* The control characters Oniguruma's escapes name */
static bool control_escape(uint32_t c, uint32_t *out) {
    static const char names[] = "nrtfvae";
    static const uint32_t codes[] = {'\n', '\r', '\t', '\f', '\v', 0x07, 0x1B};
    const char *hit = c < 128 ? strchr(names, (int)c) : NULL;
    if (!hit || !c) return false;
    *out = codes[hit - names];
    return true;
}

enum { ESC_ITEM = 1, ESC_LITERAL, ESC_ASSERT };

/* After a backslash: a class-like escape into *it, a literal *lit, or
 * (outside a class) a zero-width assertion *lit (^ $ A z Z b B); 0 for an
 * escape this engine does not have (back-references, \G, \K, \Q, scripts,
 * octal, ...), which is refused rather than read some other way. */
static int parse_escape(parser *ps, item *it, uint32_t *lit, bool in_class) {
    if (ps->i >= ps->n) return 0;
    uint32_t c = ps->p[ps->i++];
    memset(it, 0, sizeof *it);
    switch (c) {
    case 's':
    case 'S':
        it->kind = 2;
        it->neg = c == 'S';
        return ESC_ITEM;
    case 'd':
    case 'D':
        it->kind = 3;
        it->neg = c == 'D';
        return ESC_ITEM;
    case 'w':
    case 'W':
        it->kind = 4;
        it->neg = c == 'W';
        return ESC_ITEM;
    case 'h':
    case 'H':
        it->kind = 5;
        it->neg = c == 'H';
        return ESC_ITEM;
    case 'p':
    case 'P':
        it->neg = c == 'P';
        return parse_prop(ps, it) ? ESC_ITEM : 0;
    case 'x':
        return parse_hex(ps, 0, lit) ? ESC_LITERAL : 0;
    case 'u':
        return parse_hex(ps, 4, lit) ? ESC_LITERAL : 0;
    case '0': /* NUL; \0 with octal digits after it is refused */
        *lit = 0;
        return ps->i < ps->n && ps->p[ps->i] >= '0' && ps->p[ps->i] <= '7' ? 0 : ESC_LITERAL;
    case 'b':
        if (in_class) return *lit = 0x08, ESC_LITERAL; /* backspace, as in Oniguruma */
        return *lit = 'b', ESC_ASSERT;
    case 'B':
    case 'A':
    case 'z':
    case 'Z':
        if (in_class) return 0;
        return *lit = c, ESC_ASSERT;
    default:
        if (control_escape(c, lit)) return ESC_LITERAL;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 0;
        *lit = c; /* an escaped symbol stands for itself: \- \[ \\ \] \$ ... */
        return ESC_LITERAL;
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
        int kind = ESC_LITERAL;
        /* unescaped: a nested class, POSIX bracket or && intersection, which
         * Oniguruma reads as set operations: not used by tokenizers */
        if (lit == '[' || (lit == '&' && at(ps, '&'))) return false;
        if (lit == '\\' && (kind = parse_escape(ps, &it, &lit, true)) == 0) return false;
        if (kind == ESC_ITEM && at(ps, '-') && ps->i + 1 < ps->n && ps->p[ps->i + 1] != ']')
            return false; /* a range from a set: an error in Oniguruma */
        if (kind == ESC_LITERAL) {
            it.kind = 0;
            it.lo = it.hi = lit;
            if (at(ps, '-') && ps->i + 1 < ps->n && ps->p[ps->i + 1] != ']') {
                ps->i++;
                uint32_t hi = ps->p[ps->i++];
                item tmp;
                if (hi == '[') return false;
                if (hi == '\\' && parse_escape(ps, &tmp, &hi, true) != ESC_LITERAL) return false;
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

static bool name_char(uint32_t c, bool digit_ok) {
    return ((c | 32) >= 'a' && (c | 32) <= 'z') || c == '_' || (digit_ok && c >= '0' && c <= '9');
}

/* After "(?": "<name>" of a named group (not "<=" / "<!", look-behinds) */
static bool skip_group_name(parser *ps) {
    if (!at(ps, '<')) return false;
    size_t j = ps->i + 1;
    while (j < ps->n && j - ps->i <= 64 && name_char(ps->p[j], j > ps->i + 1)) j++;
    if (j == ps->i + 1 || j >= ps->n || ps->p[j] != '>') return false;
    ps->i = j + 1;
    return true;
}

/* One atom and its quantifier, or NULL (ps->err set) */
static node *parse_atom(parser *ps, bool icase) {
    uint32_t c = ps->p[ps->i++];
    node *nd;
    if (c == '(') {
        if (++ps->depth > MAX_NEST) return ps->err = "groups nest too deep", NULL;
        bool look = false, look_neg = false, atomic = false, sub_icase = icase;
        if (at(ps, '?')) {
            ps->i++;
            if (at(ps, ':'))
                ps->i++;
            else if (at(ps, '='))
                look = true, ps->i++;
            else if (at(ps, '!'))
                look = look_neg = true, ps->i++;
            else if (at(ps, '>'))
                atomic = true, ps->i++;
            else if (at(ps, 'i') && ps->i + 1 < ps->n && ps->p[ps->i + 1] == ':')
                sub_icase = true, ps->i += 2;
            else if (!skip_group_name(ps)) /* (?<name> ...) captures like ( ... ) */
                return ps->err = "unsupported group (look-behind, inline option, ...)", NULL;
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
        if (atomic) {
            nd = new_node(ps, N_ATOMIC);
            if (!nd) return NULL;
            nd->sub = inner;
        } else {
            nd = inner;
        }
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
        int kind = parse_escape(ps, &it, &lit, false);
        if (!kind) return ps->err = "unsupported escape", NULL;
        nd = new_node(ps, kind == ESC_ITEM ? N_CLASS : kind == ESC_ASSERT ? N_ASSERT : N_CHAR);
        if (!nd) return NULL;
        if (kind == ESC_ASSERT) return nd->ch = lit, nd; /* no quantifier on an assertion */
        if (kind == ESC_ITEM) {
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
        nd = new_node(ps, N_ASSERT);
        if (!nd) return NULL;
        nd->ch = c;
        return nd;
    } else {
        nd = new_node(ps, N_CHAR);
        if (!nd) return NULL;
        nd->ch = c;
        nd->icase = icase;
    }
    uint32_t mn = 1, mx = 1;
    bool interval = at(ps, '{');
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
    if (at(ps, '?')) {
        rep->greedy = false, ps->i++;
    } else if (at(ps, '+')) { /* possessive: ?+ *+ ++ are (?>X?) (?>X*) (?>X+) */
        if (interval) return ps->err = "a quantifier on {m,n}", NULL; /* Ruby syntax nests it */
        ps->i++;
        node *at_ = new_node(ps, N_ATOMIC);
        if (!at_) return NULL;
        at_->sub = rep;
        rep = at_;
    }
    if (at(ps, '?') || at(ps, '*') || at(ps, '+') || at(ps, '{'))
        return ps->err = "a quantifier on a quantifier", NULL;
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

enum { F_NODE, F_REPEAT, F_ACCEPT, F_LOOK, F_ATOMIC };

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
    size_t atomic_end; /* where the last atomic group's match ended */
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

/* \w: Oniguruma's Unicode word characters (letters, marks, decimal digits,
 * connector punctuation) */
static bool is_word(uint32_t c) {
    return cat_is(c, "L") || cat_is(c, "M") || cat_is(c, "Nd") || cat_is(c, "Pc");
}

/* A zero-width assertion at pos, Oniguruma's Ruby syntax: ^ and $ at line
 * starts and ends (after / before any \n), \A \z the text's ends, \Z the
 * end or before a final \n, \b \B between word and non-word characters. */
static bool assert_at(const mctx *m, uint32_t what, size_t pos) {
    const uint32_t *t = m->t;
    size_t n = m->len;
    switch (what) {
    case '^':
        return pos == 0 || t[pos - 1] == '\n';
    case '$':
        return pos == n || t[pos] == '\n';
    case 'A':
        return pos == 0;
    case 'z':
        return pos == n;
    case 'Z':
        return pos == n || (pos + 1 == n && t[pos] == '\n');
    default: { /* b, B */
        bool before = pos > 0 && is_word(t[pos - 1]), after = pos < n && is_word(t[pos]);
        return (before != after) == (what == 'b');
    }
    }
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
    case 4:
        r = is_word(c);
        break;
    default:
        r = (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'f');
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
    case F_ATOMIC: /* read by the N_ATOMIC that set up this frame, right after */
        m->atomic_end = pos;
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
    case N_ASSERT:
        r = assert_at(m, n->ch, pos) && match(m, n->next, pos, k);
        break;
    case N_ATOMIC: { /* the first way the group matches, never backtracked into */
        frame f = {F_ATOMIC, NULL, 0, 0, NULL};
        r = match(m, n->sub, pos, &f) && !m->over && match(m, n->next, m->atomic_end, k);
        break;
    }
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
    mctx m = {text, n, 0, budget, 0, false, 0};
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
