/* general.* naming (hf_meta.h): Metadata.get_model_id_components,
 * id_to_title and model_weight_count_rounded_notation of gguf-py, in C. */
#include "hf_meta.h"

#include <stddef.h>

#include "hf_card.h"

#include <ctype.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARTS 32
#define PART_LEN  128

enum { T_BASENAME = 1, T_SIZE = 2, T_FINETUNE = 4, T_VERSION = 8, T_TYPE = 16 };

typedef struct parts {
    char s[MAX_PARTS][PART_LEN];
    unsigned t[MAX_PARTS];
    size_t n;
} parts;

static bool full_match(const char *re, const char *s) {
    regex_t r;
    if (regcomp(&r, re, REG_EXTENDED | REG_ICASE | REG_NOSUB)) return false;
    const bool ok = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

static bool all_alpha(const char *s) {
    for (; *s; s++)
        if (!isalpha((unsigned char)*s)) return false;
    return true;
}

static bool any_digit(const char *s) {
    for (; *s; s++)
        if (isdigit((unsigned char)*s)) return true;
    return false;
}

static void upper(char *s) {
    for (; *s; s++) *s = (char)toupper((unsigned char)*s);
}

/* A size part ("7B", "8x7b", "3.8k"): normalised, and marked a finetune
 * (a context length) when far from the model's size. */
static void size_part(parts *p, size_t i, uint64_t total) {
    char *s = p->s[i];
    for (char *c = s; *c; c++)
        if (*c == '_') *c = '.';
    size_t n = strlen(s);
    if (isdigit((unsigned char)s[n - 1]) && n >= 2) { /* bloom-7b1 -> 7.1b */
        char last = s[n - 1], unit = s[n - 2];
        s[n - 2] = '.';
        s[n - 1] = last;
        s[n] = unit;
        s[n + 1] = '\0';
        n++;
    }
    if (n > 1 && isdigit((unsigned char)s[n - 2]) && strchr("kmbt", s[n - 1]))
        s[n - 1] = (char)toupper((unsigned char)s[n - 1]);
    if (total) {
        char num[PART_LEN];
        snprintf(num, sizeof num, "%.*s", (int)(n - 1), s);
        char *end;
        const double v = strtod(num, &end);
        /* Python's float(): the whole text a number ("8x7" is not) */
        if (*num && !*end && !isspace((unsigned char)num[0])) {
            const char *units = " KMBT";
            const char *u = strchr(units, s[n - 1]);
            const double scale = u && s[n - 1] ? pow(1000, (double)(u - units)) : 0.001;
            const double label = v * scale;
            if (fabs(label - (double)total) > (double)(7 * total / 8)) {
                p->t[i] |= T_FINETUNE;
                s[n - 1] = (char)tolower((unsigned char)s[n - 1]);
            }
        }
    }
    if (!p->t[i]) p->t[i] |= T_SIZE;
}

static void annotate(parts *p, uint64_t total) {
    for (size_t i = 0; i < p->n; i++) {
        char *s = p->s[i];
        if (full_match("^(v|iter)?[0-9]+([.][0-9]+)*$", s)) {
            p->t[i] |= T_VERSION;
        } else if (full_match("^(i?q[0-9](_[A-Za-z0-9_])*|b?fp?(16|32))$", s)) {
            p->t[i] |= T_TYPE;
            upper(s);
        } else if (i > 0 &&
                   full_match("^(([a]|[0-9]+[x])?[0-9]+([._][0-9]+)?[kmbt][0-9]?|small|mini|"
                              "medium|large|x?xl)$",
                              s)) {
            size_part(p, i, total);
        } else if (i > 0 && full_match("^(chat|instruct|vision|lora)$", s)) {
            p->t[i] |= T_FINETUNE;
        }
    }
    bool numbered = false;
    for (size_t i = 0; i < p->n; i++)
        if ((p->t[i] & T_SIZE) && any_digit(p->s[i])) numbered = true;
    if (numbered)
        for (size_t i = 0; i < p->n; i++)
            if ((p->t[i] & T_SIZE) && all_alpha(p->s[i])) p->t[i] &= ~(unsigned)T_SIZE;
    bool at_start = true;
    for (size_t i = 0; i < p->n; i++) {
        if (at_start &&
            ((!p->t[i] && isalpha((unsigned char)p->s[i][0])) || (p->t[i] & T_VERSION))) {
            p->t[i] |= T_BASENAME;
        } else {
            at_start = false;
            if (!p->t[i]) p->t[i] |= T_FINETUNE;
        }
    }
    for (size_t i = p->n; i-- > 0;) {
        if ((p->t[i] & T_BASENAME) && (p->t[i] & ~(unsigned)T_BASENAME))
            p->t[i] &= ~(unsigned)T_BASENAME;
        else
            break;
    }
}

/* "-".join of the parts with (and, for version, without) a tag; "" if none. */
static void join(const parts *p, unsigned with, unsigned without, bool dedup, char *out,
                 size_t size) {
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < p->n; i++) {
        if (!(p->t[i] & with) || (p->t[i] & without)) continue;
        bool seen = false;
        for (size_t j = 0; dedup && j < i; j++)
            seen |= (p->t[j] & with) && !(p->t[j] & without) && strcmp(p->s[j], p->s[i]) == 0;
        if (seen) continue;
        int w = snprintf(out + at, size - at, "%s%s", at ? "-" : "", p->s[i]);
        if (w < 0 || (size_t)w >= size - at) return;
        at += (size_t)w;
    }
}

typedef struct components {
    char full[512], org[256], basename[512], finetune[512], version[256], size_label[256];
    bool has_full, has_org;
} components;

static void id_components(const char *id, uint64_t total, components *c) {
    memset(c, 0, sizeof *c);
    if (strchr(id, ' ')) {
        snprintf(c->full, sizeof c->full, "%s", id);
        c->has_full = true;
        return;
    }
    const char *slash = strchr(id, '/');
    const char *name = slash ? slash + 1 : id;
    if (slash && slash > id && id[0] != '.') {
        snprintf(c->org, sizeof c->org, "%.*s", (int)(slash - id), id);
        c->has_org = true;
    } else if (slash && slash == id) {
        c->has_org = false; /* "" org: Python keeps "", whose title is "" */
    }
    snprintf(c->full, sizeof c->full, "%s", name);
    c->has_full = true;
    parts p = {0};
    for (const char *s = name; *s;) {
        const char *dash = strchr(s, '-');
        const size_t len = dash ? (size_t)(dash - s) : strlen(s);
        if (len && p.n < MAX_PARTS && len < PART_LEN - 2)
            snprintf(p.s[p.n++], PART_LEN, "%.*s", (int)len, s);
        if (!dash) break;
        s = dash + 1;
    }
    annotate(&p, total);
    join(&p, T_BASENAME, 0, false, c->basename, sizeof c->basename);
    join(&p, T_SIZE, 0, true, c->size_label, sizeof c->size_label);
    join(&p, T_FINETUNE, 0, false, c->finetune, sizeof c->finetune);
    join(&p, T_VERSION, T_BASENAME, false, c->version, sizeof c->version);
    if (!c->size_label[0] && !c->finetune[0] && !c->version[0]) c->basename[0] = '\0';
}

/* Metadata.id_to_title: words of lower-case letters title-cased unless they
 * look like a version or start with a digit. */
static void id_to_title(const char *s, char *out, size_t size) {
    size_t at = 0;
    out[0] = '\0';
    char word[512];
    for (const char *p = s;;) {
        while (*p == ' ' || *p == '-' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        size_t n = 0;
        while (p[n] && p[n] != ' ' && p[n] != '-' && p[n] != '\t' && p[n] != '\n') n++;
        snprintf(word, sizeof word, "%.*s", (int)n, p);
        p += n;
        bool cased = false, lower = true;
        for (const char *c = word; *c; c++) {
            if (isupper((unsigned char)*c)) lower = false;
            if (isalpha((unsigned char)*c)) cased = true;
        }
        if (cased && lower && !full_match("^(v[0-9]+([.][0-9]+)*|[0-9].*)$", word) &&
            !(word[0] == 'v' && full_match("^v[0-9]+([.][0-9]+)*", word) && false)) {
            bool prev_alpha = false;
            for (char *c = word; *c; c++) {
                const bool a = isalpha((unsigned char)*c);
                if (a)
                    *c = (char)(prev_alpha ? tolower((unsigned char)*c)
                                           : toupper((unsigned char)*c));
                prev_alpha = a;
            }
        }
        int w = snprintf(out + at, size - at, "%s%s", at ? " " : "", word);
        if (w < 0 || (size_t)w >= size - at) return;
        at += (size_t)w;
    }
}

void hf_meta_size_label(uint64_t params, char *buf, size_t size) {
    const double n = (double)params;
    double scaled;
    char suffix;
    if (n > 1e12)
        scaled = n * 1e-12, suffix = 'T';
    else if (n > 1e9)
        scaled = n * 1e-9, suffix = 'B';
    else if (n > 1e6)
        scaled = n * 1e-6, suffix = 'M';
    else
        scaled = n * 1e-3, suffix = 'K';
    char digits[64];
    snprintf(digits, sizeof digits, "%.0f", nearbyint(scaled));
    const char *d = digits;
    while (*d == '0') d++;
    const int len = (int)strlen(d);
    const int fix = 2 - len > 0 ? 2 - len : 0;
    snprintf(buf, size, "%.*f%c", fix, scaled, suffix);
}

typedef struct ident {
    char name[512], author[512], org[512], basename[512], finetune[512], version[256],
        size_label[256], description[1024], source_url[1024], source_doi[256], source_uuid[256],
        source_repo_url[1024];
} ident;

/* Fill the fields still empty from one model id. */
static void apply(ident *m, const char *id, uint64_t total) {
    components c;
    id_components(id, total, &c);
    if (!m->name[0] && c.has_full) id_to_title(c.full, m->name, sizeof m->name);
    if (!m->org[0] && c.has_org) id_to_title(c.org, m->org, sizeof m->org);
    if (!m->basename[0]) snprintf(m->basename, sizeof m->basename, "%s", c.basename);
    if (!m->finetune[0]) snprintf(m->finetune, sizeof m->finetune, "%s", c.finetune);
    if (!m->version[0]) snprintf(m->version, sizeof m->version, "%s", c.version);
    if (!m->size_label[0]) snprintf(m->size_label, sizeof m->size_label, "%s", c.size_label);
}

/* use_model_card_metadata: a string scalar of the card, when the field is
 * still unset. */
static void from_card(const hf_card *card, const char *key, char *field, size_t size) {
    const hf_card_val *v = hf_card_get(card, key);
    if (!field[0] && v && !v->is_list && v->n == 1) snprintf(field, size, "%s", v->items[0]);
}

static void card_fields(ident *m, const hf_card *card) {
    static const struct {
        const char *key;
        size_t off, size;
    } map[] = {
#define F(k, f) {k, offsetof(ident, f), sizeof(((ident *)0)->f)}
        F("name", name),
        F("author", author),
        F("version", version),
        F("organization", org),
        F("description", description),
        F("finetune", finetune),
        F("basename", basename),
        F("size_label", size_label),
        F("url", source_url),
        F("doi", source_doi),
        F("uuid", source_uuid),
        F("repo_url", source_repo_url),
        F("model_name", name),
        F("model_author", author),
        F("model_version", version),
        F("model_organization", org),
        F("model_description", description),
        F("model_finetune", finetune),
        F("model_basename", basename),
        F("model_size_label", size_label),
        F("model_url", source_url),
        F("model_doi", source_doi),
        F("model_uuid", source_uuid),
        F("model_repo_url", source_repo_url),
        F("model_creator", author),
        F("model_type", basename),
#undef F
    };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        from_card(card, map[i].key, (char *)m + map[i].off, map[i].size);
}

/* base_model / datasets entries given as ids or URLs: general.<what>.count
 * and each entry's name, version, organization, repo_url. */
static int card_sources(hf_kvs *l, const hf_card *card, const char *const *keys, const char *what,
                        uint64_t total, amn_error *err) {
    const hf_card_val *v = NULL;
    for (size_t k = 0; keys[k] && !v; k++) {
        v = hf_card_get(card, keys[k]);
        if (!v) {
            bool present = false;
            for (size_t i = 0; i < card->n; i++) present |= strcmp(card->v[i].key, keys[k]) == 0;
            if (present) return AMN_OK; /* not strings: left out (see hf_card.h) */
        }
    }
    if (!v) return AMN_OK;
    char key[128], buf[1024];
    snprintf(key, sizeof key, "general.%s.count", what);
    int rc = hf_kv_u32(l, key, (uint32_t)v->n, err);
    for (size_t i = 0; !rc && i < v->n; i++) {
        const char *id = v->items[i];
        char name[512] = "", org[512] = "", version[256] = "", repo[1024] = "";
        const bool url = strncmp(id, "http://", 7) == 0 || strncmp(id, "https://", 8) == 0 ||
                         strncmp(id, "ssh://", 6) == 0;
        components c;
        if (url) {
            snprintf(repo, sizeof repo, "%s", id);
            const char *p = strstr(id, "huggingface.co") ? strstr(id, "://") + 3 : NULL;
            if (p && strncmp(p, "huggingface.co/", 15) == 0) {
                p += 15;
                const char *slash = strchr(p, '/');
                if (slash && slash > p && slash[1] && !strchr(slash + 1, '/')) {
                    id_components(p, total, &c);
                    if (c.has_full) id_to_title(c.full, name, sizeof name);
                    if (c.has_org) id_to_title(c.org, org, sizeof org);
                    snprintf(version, sizeof version, "%s", c.version);
                }
            }
        } else {
            id_components(id, total, &c);
            if (c.has_full) id_to_title(c.full, name, sizeof name);
            if (c.has_org) id_to_title(c.org, org, sizeof org);
            snprintf(version, sizeof version, "%s", c.version);
            if (c.has_org && c.has_full)
                snprintf(repo, sizeof repo, "https://huggingface.co/%s/%s", c.org, c.full);
        }
        static const char *const fields[] = {"name", "version", "organization", "repo_url"};
        const char *vals[] = {name, version, org, repo};
        for (int f = 0; !rc && f < 4; f++) {
            if (!vals[f][0]) continue;
            snprintf(buf, sizeof buf, "general.%s.%zu.%s", what, i, fields[f]);
            rc = hf_kv_str(l, buf, vals[f], err);
        }
    }
    return rc;
}

/* use_array_model_card_metadata over several keys, appended in order. */
static int card_array(hf_kvs *l, const hf_card *card, const char *const *keys, const char *gkey,
                      amn_error *err) {
    char *items[4096];
    size_t n = 0;
    bool any = false;
    for (size_t k = 0; keys[k]; k++) {
        const hf_card_val *v = hf_card_get(card, keys[k]);
        if (!v) continue;
        any = true;
        for (size_t i = 0; i < v->n && n < 4096; i++) items[n++] = v->items[i];
    }
    return any ? hf_kv_strs(l, gkey, items, n, err) : AMN_OK;
}

/* generation_config.json's sampling keys, in set_gguf_meta_model's order. */
static int sampling(hf_kvs *l, json_object *gen, amn_error *err) {
    static const struct {
        const char *json, *key;
        char type; /* s string, i int32, f float32 */
    } keys[] = {
        {"sequence", "general.sampling.sequence", 's'},
        {"top_k", "general.sampling.top_k", 'i'},
        {"top_p", "general.sampling.top_p", 'f'},
        {"min_p", "general.sampling.min_p", 'f'},
        {"xtc_probability", "general.sampling.xtc_probability", 'f'},
        {"xtc_threshold", "general.sampling.xtc_threshold", 'f'},
        {"temperature", "general.sampling.temp", 'f'},
        {"penalty_last_n", "general.sampling.penalty_last_n", 'i'},
        {"penalty_repeat", "general.sampling.penalty_repeat", 'f'},
        {"mirostat", "general.sampling.mirostat", 'i'},
        {"mirostat_tau", "general.sampling.mirostat_tau", 'f'},
        {"mirostat_eta", "general.sampling.mirostat_eta", 'f'},
    };
    if (!gen) return AMN_OK;
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        json_object *v;
        if (!json_object_object_get_ex(gen, keys[k].json, &v) || !v) continue;
        int rc;
        if (keys[k].type == 's') {
            if (!json_object_is_type(v, json_type_string))
                return amn_error_set(err, AMN_E_PARSE, "generation_config.json: %s is not a string",
                                     keys[k].json);
            rc = hf_kv_str(l, keys[k].key, json_object_get_string(v), err);
        } else if (json_object_is_type(v, json_type_int) ||
                   json_object_is_type(v, json_type_double)) {
            if (keys[k].type == 'i' && !json_object_is_type(v, json_type_int))
                return amn_error_set(err, AMN_E_PARSE,
                                     "generation_config.json: %s is not an integer", keys[k].json);
            rc = keys[k].type == 'i'
                     ? hf_kv_i32(l, keys[k].key, (int32_t)json_object_get_int64(v), err)
                     : hf_kv_f32(l, keys[k].key, (float)json_object_get_double(v), err);
        } else {
            return amn_error_set(err, AMN_E_PARSE, "generation_config.json: %s is not a number",
                                 keys[k].json);
        }
        if (rc) return rc;
    }
    return AMN_OK;
}

int hf_meta_general(hf_kvs *l, const char *dir, json_object *cfg, json_object *gen,
                    uint64_t total_params, const char *size_label, amn_error *err) {
    ident m;
    memset(&m, 0, sizeof m);
    hf_card card;
    int rc = hf_card_read(dir, &card, err);
    if (rc) return rc;
    card_fields(&m, &card);
    json_object *np;
    if (json_object_object_get_ex(cfg, "_name_or_path", &np) &&
        json_object_is_type(np, json_type_string)) {
        const char *id = json_object_get_string(np);
        size_t slashes = 0;
        for (const char *c = id; *c; c++) slashes += *c == '/';
        if (slashes <= 1) apply(&m, id, total_params);
    }
    /* the folder's own name (Path.name: the last component) */
    char base[512];
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t s = n;
    while (s > 0 && dir[s - 1] != '/') s--;
    snprintf(base, sizeof base, "%.*s", (int)(n - s), dir + s);
    apply(&m, base, total_params);
    if (!m.name[0]) snprintf(m.name, sizeof m.name, "%s", base);
    if (!m.size_label[0] && total_params > 0)
        snprintf(m.size_label, sizeof m.size_label, "%s", size_label);
    rc = sampling(l, gen, err);
    if (!rc) rc = hf_kv_str(l, "general.name", m.name, err);
    if (!rc) rc = hf_kv_str(l, "general.author", m.author, err);
    if (!rc) rc = hf_kv_str(l, "general.version", m.version, err);
    if (!rc) rc = hf_kv_str(l, "general.organization", m.org, err);
    if (!rc) rc = hf_kv_str(l, "general.finetune", m.finetune, err);
    if (!rc) rc = hf_kv_str(l, "general.basename", m.basename, err);
    if (!rc) rc = hf_kv_str(l, "general.description", m.description, err);
    if (!rc) rc = hf_kv_str(l, "general.size_label", m.size_label, err);
    const hf_card_val *lic = hf_card_get(&card, "license");
    if (!rc && lic) { /* a list is joined with commas */
        char buf[2048];
        size_t at = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < lic->n && at < sizeof buf; i++)
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", i ? "," : "", lic->items[i]);
        rc = hf_kv_str(l, "general.license", buf, err);
    }
    char field[1024] = "";
    if (!rc) from_card(&card, "license_name", field, sizeof field);
    if (!rc) rc = hf_kv_str(l, "general.license.name", field, err);
    field[0] = '\0';
    if (!rc) from_card(&card, "license_link", field, sizeof field);
    if (!rc) rc = hf_kv_str(l, "general.license.link", field, err);
    if (!rc) rc = hf_kv_str(l, "general.source.url", m.source_url, err);
    if (!rc) rc = hf_kv_str(l, "general.source.doi", m.source_doi, err);
    if (!rc) rc = hf_kv_str(l, "general.source.uuid", m.source_uuid, err);
    if (!rc) rc = hf_kv_str(l, "general.source.repo_url", m.source_repo_url, err);
    if (!rc)
        rc = card_sources(
            l, &card,
            (const char *const[]){"base_model", "base_models", "base_model_sources", NULL},
            "base_model", total_params, err);
    if (!rc)
        rc = card_sources(l, &card,
                          (const char *const[]){"datasets", "dataset", "dataset_sources", NULL},
                          "dataset", total_params, err);
    if (!rc)
        rc = card_array(l, &card, (const char *const[]){"tags", "pipeline_tag", NULL},
                        "general.tags", err);
    if (!rc)
        rc = card_array(l, &card, (const char *const[]){"languages", "language", NULL},
                        "general.languages", err);
    hf_card_free(&card);
    return rc;
}
