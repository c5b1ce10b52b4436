/* gguf-py's SpecialVocab (vocab.py): merges, special token ids, add_*_token,
 * chat template and normalizer flags, resolved from tokenizer.json,
 * tokenizer_config.json, chat_template.{jinja,json}, config.json and
 * merges.txt exactly as it resolves them, and added in add_to_gguf's order. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_vocab_int.h"

#define MAX_TYPES 16

typedef struct named_int {
    const char *typ;
    int64_t v;
} named_int;

typedef struct sv {
    const char *types[MAX_TYPES];
    size_t n_types;
    named_int ids[MAX_TYPES];
    size_t n_ids;
    named_int adds[MAX_TYPES]; /* v: 0/1 */
    size_t n_adds;
    amn_str *merges;
    uint64_t n_merges;
    json_object *chat_template;   /* a string, a list of named ones, or NULL */
    int lowercase, strip_accents; /* -1 unset */
    uint64_t n_vocab;             /* 0: None */
} sv;

static bool has_type(const sv *s, const char *t) {
    for (size_t i = 0; i < s->n_types; i++)
        if (strcmp(s->types[i], t) == 0) return true;
    return false;
}

static void set_add(sv *s, const char *typ, bool v) {
    for (size_t i = 0; i < s->n_adds; i++)
        if (strcmp(s->adds[i].typ, typ) == 0) {
            s->adds[i].v = v; /* a dict update keeps the key's place */
            return;
        }
    if (s->n_adds < MAX_TYPES) s->adds[s->n_adds++] = (named_int){typ, v};
}

/* _set_special_token */
static int set_special(sv *s, const char *typ, json_object *tid, amn_error *err) {
    /* isinstance(tid, int): Python's bools are ints too */
    if (!tid ||
        !(json_object_is_type(tid, json_type_int) || json_object_is_type(tid, json_type_boolean)))
        return AMN_OK;
    int64_t id = json_object_get_int64(tid);
    if (id < 0)
        return amn_error_set(err, AMN_E_PARSE, "invalid value for special token type %s: %lld", typ,
                             (long long)id);
    if (s->n_vocab && (uint64_t)id >= s->n_vocab) return AMN_OK; /* out of range: skipped */
    for (size_t i = 0; i < s->n_ids; i++)
        if (strcmp(s->ids[i].typ, typ) == 0) return AMN_OK;
    if (s->n_ids < MAX_TYPES) s->ids[s->n_ids++] = (named_int){typ, id};
    return AMN_OK;
}

/* Python ==, for the JSON values the templates compare (None == None). */
static bool eq(json_object *a, json_object *b) {
    return json_object_equal(a, b) != 0;
}

/* item.get('SpecialToken', {}).get('id') / item.get('Sequence', {}).get('id') */
static json_object *tmpl_id(json_object *item, const char *kind) {
    return hf_json_get(hf_json_get(item, kind), "id");
}

static bool is_str(json_object *o, const char *s) {
    return o && json_object_is_type(o, json_type_string) &&
           strcmp(json_object_get_string(o), s) == 0;
}

/* tokenizer_config[key] = value (sharing value) */
static void tc_set(json_object *tc, const char *key, json_object *value) {
    json_object_object_add(tc, key, json_object_get(value));
}

typedef struct specials {
    json_object *bos, *cls, *eos, *sep;
} specials;

static void roberta(sv *s, json_object *proc, json_object *tc, specials *sp) {
    set_add(s, "bos", true);
    set_add(s, "eos", true);
    set_add(s, "sep", true);
    if (!hf_json_truthy(sp->cls) && hf_json_truthy(tc)) {
        json_object *cls = hf_json_get(proc, "cls");
        sp->cls = cls && json_object_is_type(cls, json_type_array) && json_object_array_length(cls)
                      ? json_object_array_get_idx(cls, 0)
                      : sp->bos;
        tc_set(tc, "cls_token", sp->cls);
        sp->cls = hf_json_get(tc, "cls_token");
    }
    if (!hf_json_truthy(sp->sep) && hf_json_truthy(tc)) {
        json_object *sep = hf_json_get(proc, "sep");
        sp->sep = sep && json_object_is_type(sep, json_type_array) && json_object_array_length(sep)
                      ? json_object_array_get_idx(sep, 0)
                      : sp->eos;
        tc_set(tc, "sep_token", sp->sep);
        sp->sep = hf_json_get(tc, "sep_token");
    }
}

static size_t arr_len(json_object *a) {
    return a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
}

static void template_pair(sv *s, json_object *pair, json_object *first, json_object *last,
                          json_object *tc, specials *sp) {
    size_t n = arr_len(pair);
    if (!n) return;
    size_t start = hf_json_truthy(first) &&
                           eq(tmpl_id(json_object_array_get_idx(pair, 0), "SpecialToken"), first)
                       ? 1
                       : 0;
    size_t stop = hf_json_truthy(last) &&
                          eq(tmpl_id(json_object_array_get_idx(pair, n - 1), "SpecialToken"), last)
                      ? n - 1
                      : n;
    if (stop <= start) return;
    json_object *a = tmpl_id(json_object_array_get_idx(pair, start), "Sequence");
    json_object *b = tmpl_id(json_object_array_get_idx(pair, stop - 1), "Sequence");
    /* A [sep] [eos] B: the inner part tmpl_pair[1:-1] */
    if (!is_str(a, "A") || !is_str(b, "B") || stop - start < 3) return;
    size_t inner = stop - start - 2;
    bool add_sep = false;
    json_object *e = tmpl_id(json_object_array_get_idx(pair, start + 1), "SpecialToken");
    if (hf_json_truthy(e) && (eq(e, sp->sep) || eq(e, sp->eos)) && !hf_json_truthy(last))
        add_sep = true;
    if (inner == 2) {
        e = tmpl_id(json_object_array_get_idx(pair, start + 2), "SpecialToken");
        if (hf_json_truthy(e) && (eq(e, sp->sep) || eq(e, sp->eos))) add_sep = true;
    }
    set_add(s, "sep", add_sep);
    if (add_sep && !hf_json_truthy(sp->sep) && hf_json_truthy(tc)) {
        tc_set(tc, "sep_token", sp->eos);
        sp->sep = hf_json_get(tc, "sep_token");
    }
}

static void template_proc(sv *s, json_object *proc, json_object *tc, specials *sp) {
    json_object *single = hf_json_get(proc, "single");
    size_t n = arr_len(single);
    json_object *first = NULL, *last = NULL;
    bool have_tc = hf_json_truthy(tc);
    if (n > 1) {
        first = tmpl_id(json_object_array_get_idx(single, 0), "SpecialToken");
        if (hf_json_truthy(first)) {
            if (!have_tc) {
                sp->bos = first;
            } else if (!eq(first, sp->bos) && !eq(first, sp->cls)) {
                if (!hf_json_truthy(sp->bos)) {
                    tc_set(tc, "bos_token", first);
                    sp->bos = first;
                }
                if (!hf_json_truthy(sp->cls)) {
                    tc_set(tc, "cls_token", first);
                    sp->cls = first;
                }
            }
            set_add(s, "bos", eq(first, sp->bos) || eq(first, sp->cls));
        } else {
            first = NULL;
        }
        last = tmpl_id(json_object_array_get_idx(single, n - 1), "SpecialToken");
        if (hf_json_truthy(last)) {
            if (!have_tc) {
                sp->eos = last;
            } else if (!eq(last, sp->eos)) {
                if (!has_type(s, "eot")) {
                    s->types[s->n_types++] = "eot";
                    tc_set(tc, "eot_token", sp->eos);
                } else if (!has_type(s, "eom")) {
                    s->types[s->n_types++] = "eom";
                    tc_set(tc, "eom_token", sp->eos);
                }
                tc_set(tc, "eos_token", last);
                sp->eos = last;
            }
            set_add(s, "eos", eq(last, sp->eos));
        } else {
            last = NULL;
        }
    }
    template_pair(s, hf_json_get(proc, "pair"), first, last, tc, sp);
}

static int post_processor(sv *s, json_object *pp, json_object *tc, amn_error *err) {
    specials sp = {hf_json_get(tc, "bos_token"), hf_json_get(tc, "cls_token"),
                   hf_json_get(tc, "eos_token"), hf_json_get(tc, "sep_token")};
    bool have_tc = hf_json_truthy(tc);
    if (!hf_json_truthy(sp.bos) && hf_json_truthy(sp.cls) && have_tc) {
        tc_set(tc, "bos_token", sp.cls);
        sp.bos = sp.cls;
    }
    if (!hf_json_truthy(sp.eos) && hf_json_truthy(sp.sep) && have_tc) {
        tc_set(tc, "eos_token", sp.sep);
        sp.eos = sp.sep;
    }
    if (!hf_json_truthy(pp)) return AMN_OK; /* absent, null or empty */
    if (!json_object_is_type(pp, json_type_object))
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: post_processor is not an object");
    json_object *procs = hf_json_get(pp, "processors");
    size_t n = procs ? arr_len(procs) : 1;
    if (procs && !json_object_is_type(procs, json_type_array))
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: processors is not a list");
    for (size_t i = 0; i < n; i++) {
        json_object *p = procs ? json_object_array_get_idx(procs, i) : pp;
        json_object *type = hf_json_get(p, "type");
        if (is_str(type, "RobertaProcessing"))
            roberta(s, p, tc, &sp);
        else if (is_str(type, "TemplateProcessing"))
            template_proc(s, p, tc, &sp);
    }
    return AMN_OK;
}

static void parse_normalizer(sv *s, json_object *norm, int depth) {
    json_object *type = hf_json_get(norm, "type");
    if (is_str(type, "Lowercase")) {
        s->lowercase = 1;
    } else if (is_str(type, "StripAccents")) {
        s->strip_accents = 1;
    } else if (is_str(type, "BertNormalizer")) {
        json_object *v;
        if ((v = hf_json_get(norm, "lowercase"))) s->lowercase = hf_json_truthy(v);
        if ((v = hf_json_get(norm, "strip_accents"))) s->strip_accents = hf_json_truthy(v);
    } else if (is_str(type, "Sequence") && depth < 64) {
        json_object *list = hf_json_get(norm, "normalizers");
        for (size_t i = 0; i < arr_len(list); i++)
            parse_normalizer(s, json_object_array_get_idx(list, i), depth + 1);
    }
}

static bool has_space(const char *p, size_t n) {
    return memchr(p, ' ', n) != NULL;
}

/* "a b" strings as they are, [a, b] pairs joined with spaces written U+0120 */
static int load_merges(sv *s, hf_vctx *c, json_object *merges, amn_error *err) {
    size_t n = arr_len(merges);
    if (!n) return AMN_OK;
    json_object *m0 = json_object_array_get_idx(merges, 0);
    bool strings = json_object_is_type(m0, json_type_string);
    if (!strings && !(arr_len(m0) == 2 &&
                      json_object_is_type(json_object_array_get_idx(m0, 0), json_type_string)))
        return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: unknown merges format");
    amn_str *out = hf_alloc(c->arena, n, sizeof *out, err);
    if (!out) return err ? err->code : AMN_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(merges, i);
        if (strings) {
            if (!json_object_is_type(m, json_type_string))
                return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: merge %zu is not a string",
                                     i);
            size_t len = (size_t)json_object_get_string_len(m);
            char *copy = hf_strdup(c->arena, json_object_get_string(m), len, err);
            if (!copy) return err ? err->code : AMN_E_NOMEM;
            out[i] = (amn_str){copy, len};
            continue;
        }
        json_object *a = json_object_array_get_idx(m, 0), *b = json_object_array_get_idx(m, 1);
        if (arr_len(m) != 2 || !json_object_is_type(a, json_type_string) ||
            !json_object_is_type(b, json_type_string))
            return amn_error_set(err, AMN_E_PARSE, "tokenizer.json: merge %zu is not a pair", i);
        const char *parts[2] = {json_object_get_string(a), json_object_get_string(b)};
        size_t lens[2] = {(size_t)json_object_get_string_len(a),
                          (size_t)json_object_get_string_len(b)};
        size_t total = 1;
        for (int j = 0; j < 2; j++) total += has_space(parts[j], lens[j]) ? lens[j] * 2 : lens[j];
        char *p = hf_alloc(c->arena, total + 1, 1, err);
        if (!p) return err ? err->code : AMN_E_NOMEM;
        size_t o = 0;
        for (int j = 0; j < 2; j++) {
            if (j) p[o++] = ' ';
            for (size_t k = 0; k < lens[j]; k++) {
                if (parts[j][k] == ' ') { /* chr(ord(' ') + 256) = U+0120 */
                    p[o++] = (char)0xC4;
                    p[o++] = (char)0xA0;
                } else {
                    p[o++] = parts[j][k];
                }
            }
        }
        out[i] = (amn_str){p, o};
    }
    s->merges = out;
    s->n_merges = n;
    return AMN_OK;
}

static int merges_txt(sv *s, hf_vctx *c, amn_error *err) {
    if (!hf_file_exists(c->dir, "merges.txt")) return AMN_OK;
    char *buf;
    size_t n;
    int rc = hf_file_load(c->arena, c->dir, "merges.txt", c->lim->max_header_bytes, &buf, &n, err);
    if (rc) return rc;
    uint64_t lines = 1;
    for (size_t i = 0; i < n; i++) lines += buf[i] == '\n';
    amn_str *out = hf_alloc(c->arena, lines, sizeof *out, err);
    if (!out) return err ? err->code : AMN_E_NOMEM;
    uint64_t m = 0;
    bool first = true;
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && buf[e] != '\n') e++;
        size_t a = i, b = e;
        i = e + 1;
        /* str.strip() / split(): ASCII white space is what these files hold */
        while (a < b && (buf[a] == ' ' || buf[a] == '\t' || buf[a] == '\r')) a++;
        while (b > a && (buf[b - 1] == ' ' || buf[b - 1] == '\t' || buf[b - 1] == '\r')) b--;
        if (first) {
            first = false;
            if (b > a && buf[a] == '#') continue; /* a "#version" header line */
        }
        if (a == b) continue;
        size_t sp = a;
        while (sp < b && buf[sp] != ' ' && buf[sp] != '\t') sp++;
        size_t t = sp;
        while (t < b && (buf[t] == ' ' || buf[t] == '\t')) t++;
        size_t u = t;
        while (u < b && buf[u] != ' ' && buf[u] != '\t') u++;
        if (sp == b || u != b) continue; /* not exactly two parts: ignored */
        char *p = hf_alloc(c->arena, (sp - a) + (b - t) + 2, 1, err);
        if (!p) return err ? err->code : AMN_E_NOMEM;
        memcpy(p, buf + a, sp - a);
        p[sp - a] = ' ';
        memcpy(p + (sp - a) + 1, buf + t, b - t);
        out[m++] = (amn_str){p, (sp - a) + 1 + (b - t)};
    }
    s->merges = out;
    s->n_merges = m;
    return AMN_OK;
}

static int read_text(hf_vctx *c, const char *name, json_object **out, amn_error *err) {
    char *buf;
    size_t n;
    int rc = hf_file_load(c->arena, c->dir, name, c->lim->max_string, &buf, &n, err);
    if (rc) return rc;
    if (!hf_utf8_valid(buf, n)) return amn_error_set(err, AMN_E_PARSE, "%s: not UTF-8", name);
    *out = json_object_new_string_len(buf, (int)n);
    return *out ? AMN_OK : amn_error_set(err, AMN_E_NOMEM, "out of memory");
}

/* chat_template.jinja plus the .jinja files of additional_chat_templates: the list
 * [{name: default, template}, {name: stem, template}...] vocab.py builds, in
 * directory order as its glob returns them; *out stays the plain string when
 * there is no additional template. */
static int additional_templates(hf_vctx *c, json_object **out, amn_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/additional_chat_templates", c->dir);
    DIR *d = opendir(path);
    if (!d) return AMN_OK;
    json_object *list = NULL;
    int rc = AMN_OK;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 6, ".jinja") != 0 || e->d_name[0] == '.') continue;
        char name[512];
        if (snprintf(name, sizeof name, "additional_chat_templates/%s", e->d_name) >=
            (int)sizeof name)
            continue;
        if (!hf_file_exists(c->dir, name)) continue;
        if (!list) { /* the first one turns the default into a list entry */
            list = json_object_new_array();
            json_object *def = json_object_new_object();
            json_object_object_add(def, "name", json_object_new_string("default"));
            json_object_object_add(def, "template", *out);
            *out = list;
            json_object_array_add(list, def);
        }
        json_object *t;
        rc = read_text(c, name, &t, err);
        if (rc) break;
        json_object *entry = json_object_new_object();
        json_object_object_add(entry, "name", json_object_new_string_len(e->d_name, (int)n - 6));
        json_object_object_add(entry, "template", t);
        json_object_array_add(list, entry);
    }
    closedir(d);
    return rc;
}

static int chat_template(sv *s, hf_vctx *c, json_object *tc, json_object **owned, amn_error *err) {
    json_object *alt = NULL;
    int rc = AMN_OK;
    if (hf_file_exists(c->dir, "chat_template.jinja")) {
        rc = read_text(c, "chat_template.jinja", &alt, err);
        if (!rc) rc = additional_templates(c, &alt, err);
    } else if (hf_file_exists(c->dir, "chat_template.json")) {
        json_object *root;
        rc = hf_json_load(c->dir, "chat_template.json", c->lim, &root, err);
        if (!rc && root) {
            alt = json_object_get(hf_json_get(root, "chat_template"));
            json_object_put(root);
        }
    }
    if (rc) return rc;
    *owned = alt;
    json_object *ct = alt, *v;
    if (json_object_object_get_ex(tc, "chat_template", &v)) ct = v;
    if (!ct || json_object_is_type(ct, json_type_string) ||
        json_object_is_type(ct, json_type_array))
        s->chat_template = ct;
    return AMN_OK;
}

static int config_tokens(sv *s, hf_vctx *c, amn_error *err) {
    json_object *cfg;
    int rc = hf_json_load(c->dir, "config.json", c->lim, &cfg, err);
    if (rc || !cfg) return rc;
    char key[64];
    for (size_t i = 0; i < s->n_types && !rc; i++) {
        snprintf(key, sizeof key, "%s_token_id", s->types[i]);
        json_object *id = NULL;
        json_object_object_get_ex(cfg, key, &id);
        json_object *text = hf_json_get(cfg, "text_config");
        if (!id && text) id = hf_json_get(text, key);
        rc = set_special(s, s->types[i], id, err);
    }
    json_object_put(cfg);
    return rc;
}

static int tokenizer_config_tokens(sv *s, json_object *tc, json_object *added, amn_error *err) {
    char key[64];
    int rc = AMN_OK;
    for (size_t i = 0; i < s->n_types && !rc; i++) {
        const char *typ = s->types[i];
        snprintf(key, sizeof key, "add_%s_token", typ);
        json_object *a = hf_json_get(tc, key);
        if (a && json_object_is_type(a, json_type_boolean))
            set_add(s, typ, json_object_get_boolean(a));
        snprintf(key, sizeof key, "%s_token", typ);
        json_object *e = hf_json_get(tc, key);
        if (e && json_object_is_type(e, json_type_object)) e = hf_json_get(e, "content");
        if (!e || !json_object_is_type(e, json_type_string)) continue;
        json_object *tid = NULL;
        for (size_t j = 0; j < arr_len(added); j++) {
            json_object *t = json_object_array_get_idx(added, j);
            if (eq(hf_json_get(t, "content"), e)) {
                tid = hf_json_get(t, "id");
                break;
            }
        }
        rc = set_special(s, typ, tid, err);
    }
    return rc;
}

static const char *id_key(const char *typ) {
    static const char *const map[][2] = {
        {"bos", "tokenizer.ggml.bos_token_id"},     {"eos", "tokenizer.ggml.eos_token_id"},
        {"unk", "tokenizer.ggml.unknown_token_id"}, {"sep", "tokenizer.ggml.seperator_token_id"},
        {"pad", "tokenizer.ggml.padding_token_id"}, {"mask", "tokenizer.ggml.mask_token_id"},
        {"eot", "tokenizer.ggml.eot_token_id"},     {"eom", "tokenizer.ggml.eom_token_id"}};
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (strcmp(map[i][0], typ) == 0) return map[i][1];
    return NULL; /* GGUFWriter has no add_<typ>_token_id: skipped */
}

static const char *add_key(const char *typ) {
    if (strcmp(typ, "bos") == 0) return "tokenizer.ggml.add_bos_token";
    if (strcmp(typ, "eos") == 0) return "tokenizer.ggml.add_eos_token";
    if (strcmp(typ, "sep") == 0) return "tokenizer.ggml.add_sep_token";
    return NULL;
}

/* GGUFWriter.add_chat_template: a string, or a list of {name, template} where
 * "default" is the template and every other (valid) name its own key, listed
 * in tokenizer.chat_templates. The converter keeps those names in a Python
 * set, so with more than one its order is the interpreter's hash order; amn
 * lists them in file order. */
static int add_chat_template(hf_vctx *c, json_object *ct, amn_error *err) {
    if (json_object_is_type(ct, json_type_string))
        return hf_vkv_str(c->kvs, "tokenizer.chat_template", json_object_get_string(ct),
                          (size_t)json_object_get_string_len(ct), err);
    size_t n = json_object_array_length(ct), n_names = 0;
    json_object *def = NULL;
    amn_str *names = hf_alloc(c->arena, n ? n : 1, sizeof *names, err);
    if (!names) return err ? err->code : AMN_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        json_object *choice = json_object_array_get_idx(ct, i);
        if (!json_object_is_type(choice, json_type_object))
            return amn_error_set(err, AMN_E_PARSE, "chat_template: entry %zu is not an object", i);
        json_object *nm = hf_json_get(choice, "name"), *tp = NULL;
        bool has_tp = json_object_object_get_ex(choice, "template", &tp) && tp;
        const char *raw =
            nm && json_object_is_type(nm, json_type_string) ? json_object_get_string(nm) : "";
        if (nm && !json_object_is_type(nm, json_type_string))
            return amn_error_set(err, AMN_E_PARSE, "chat_template: entry %zu has a bad name", i);
        /* one '_' per code point outside [A-Za-z0-9] */
        size_t rl = strlen(raw), o = 0;
        char *name = hf_alloc(c->arena, rl + 1, 1, err);
        if (!name) return err ? err->code : AMN_E_NOMEM;
        for (size_t k = 0; k < rl; k++) {
            unsigned char ch = (unsigned char)raw[k];
            if ((ch & 0xC0) == 0x80) continue; /* UTF-8 continuation byte */
            bool ok =
                (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
            name[o++] = ok ? (char)ch : '_';
        }
        if (!o || !has_tp) continue;
        if (!json_object_is_type(tp, json_type_string))
            return amn_error_set(err, AMN_E_PARSE, "chat_template: template %s is not a string",
                                 name);
        if (strcmp(name, "default") == 0) {
            def = tp;
            continue;
        }
        char *key = hf_alloc(c->arena, o + 32, 1, err);
        if (!key) return err ? err->code : AMN_E_NOMEM;
        snprintf(key, o + 32, "tokenizer.chat_template.%s", name);
        int rc = hf_vkv_str(c->kvs, key, json_object_get_string(tp),
                            (size_t)json_object_get_string_len(tp), err);
        if (rc) return rc;
        bool seen = false;
        for (size_t j = 0; j < n_names && !seen; j++) seen = strcmp(names[j].ptr, name) == 0;
        if (!seen) names[n_names++] = (amn_str){name, o};
    }
    int rc = hf_vkv_array(c->kvs, "tokenizer.chat_templates", AMN_KV_STRING, n_names, names, err);
    if (rc || !def) return rc;
    return hf_vkv_str(c->kvs, "tokenizer.chat_template", json_object_get_string(def),
                      (size_t)json_object_get_string_len(def), err);
}

static int add_to_gguf(sv *s, hf_vctx *c, amn_error *err) {
    hf_vkvs *k = c->kvs;
    int rc = hf_vkv_array(k, "tokenizer.ggml.merges", AMN_KV_STRING, s->n_merges, s->merges, err);
    for (size_t i = 0; i < s->n_ids && !rc; i++) {
        const char *key = id_key(s->ids[i].typ);
        if (s->ids[i].v > UINT32_MAX)
            return amn_error_set(err, AMN_E_PARSE, "special token %s id %lld does not fit uint32",
                                 s->ids[i].typ, (long long)s->ids[i].v);
        if (key) rc = hf_vkv_u32(k, key, (uint32_t)s->ids[i].v, err);
    }
    for (size_t i = 0; i < s->n_adds && !rc; i++) {
        const char *key = add_key(s->adds[i].typ);
        if (key) rc = hf_vkv_bool(k, key, s->adds[i].v != 0, err);
    }
    if (!rc && s->chat_template) rc = add_chat_template(c, s->chat_template, err);
    if (!rc && s->lowercase >= 0)
        rc = hf_vkv_bool(k, "tokenizer.ggml.normalizer.lowercase", s->lowercase, err);
    if (!rc && s->strip_accents >= 0)
        rc = hf_vkv_bool(k, "tokenizer.ggml.normalizer.strip_accents", s->strip_accents, err);
    return rc;
}

static int load_all(sv *s, hf_vctx *c, const hf_special_opts *o, json_object *tok, json_object *tc,
                    json_object **owned_ct, amn_error *err) {
    int rc = AMN_OK;
    json_object *added = NULL;
    if (tok) {
        if (o->load_merges)
            rc = load_merges(s, c, hf_json_get(hf_json_get(tok, "model"), "merges"), err);
        json_object *norm = hf_json_get(tok, "normalizer");
        if (!rc && hf_json_truthy(norm)) parse_normalizer(s, norm, 0);
        added = hf_json_get(tok, "added_tokens");
        if (!rc && hf_json_truthy(tok))
            rc = post_processor(s, hf_json_get(tok, "post_processor"), tc, err);
    }
    if (!rc && hf_json_truthy(tc)) {
        rc = chat_template(s, c, tc, owned_ct, err);
        if (!rc) rc = tokenizer_config_tokens(s, tc, added, err);
    }
    if (!rc) rc = config_tokens(s, c, err);
    if (!rc && o->load_merges && !s->n_merges) rc = merges_txt(s, c, err);
    for (size_t i = 0; o->fixed_types && o->fixed_types[i] && !rc; i++) {
        json_object *id = json_object_new_int64(o->fixed_ids[i]);
        rc = set_special(s, o->fixed_types[i], id, err);
        json_object_put(id);
    }
    if (o->chat_template_none) s->chat_template = NULL;
    return rc ? rc : add_to_gguf(s, c, err);
}

int hf_special_vocab(hf_vctx *c, const hf_special_opts *o, amn_error *err) {
    static const char *const defaults[] = {"bos", "eos", "unk", "sep", "pad", "cls", "mask", NULL};
    sv s = {.lowercase = -1, .strip_accents = -1, .n_vocab = o->n_vocab};
    for (const char *const *t = o->types ? o->types : defaults; *t && s.n_types < MAX_TYPES - 2;
         t++)
        s.types[s.n_types++] = *t;
    json_object *tok = NULL, *tc = NULL, *owned_ct = NULL;
    int rc = hf_json_load(c->dir, "tokenizer.json", c->lim, &tok, err);
    if (!rc) rc = hf_json_load(c->dir, "tokenizer_config.json", c->lim, &tc, err);
    if (!rc) rc = load_all(&s, c, o, tok, tc, &owned_ct, err);
    json_object_put(owned_ct);
    json_object_put(tok);
    json_object_put(tc);
    return rc;
}
