/* llama-quantize's file-shaping options: see gguf_qopts.h. */
#include "gguf_qopts.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf_qpolicy.h"

/* llama_model_kv_override holds a key of char[128] and a str of char[128]. */
#define KV_MAX        127
#define TYPE_FILE_MAX (16u << 20)

typedef struct kv_spec {
    const char *key_end; /* the '=' */
    char tag;            /* 'i', 'f', 'b', 's' */
    const char *value;
} kv_spec;

static bool parse_i64(const char *s, int64_t *out) {
    if (!*s) return false;
    char *end;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (*end || errno || s[0] == ' ' || s[0] == '+') return false;
    *out = v;
    return true;
}

static bool parse_f64(const char *s, double *out) {
    if (!*s) return false;
    char *end;
    errno = 0;
    const double v = strtod(s, &end);
    if (*end || (errno && isinf(v)) || s[0] == ' ') return false;
    *out = v;
    return true;
}

static int split_kv(const char *spec, kv_spec *k, amn_error *err) {
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || eq - spec > KV_MAX)
        return amn_error_set(err, AMN_E_INVALID,
                             "--override-kv %s: want KEY=TYPE:VALUE (a key of 1 to %d bytes; "
                             "TYPE int, float, bool or str)",
                             spec, KV_MAX);
    static const struct {
        const char *prefix;
        char tag;
    } tags[] = {{"int:", 'i'}, {"float:", 'f'}, {"bool:", 'b'}, {"str:", 's'}};
    for (size_t t = 0; t < sizeof tags / sizeof *tags; t++) {
        const size_t n = strlen(tags[t].prefix);
        if (strncmp(eq + 1, tags[t].prefix, n) == 0) {
            *k = (kv_spec){eq, tags[t].tag, eq + 1 + n};
            return AMN_OK;
        }
    }
    return amn_error_set(err, AMN_E_INVALID,
                         "--override-kv %s: invalid type (want KEY=int:N, KEY=float:X, "
                         "KEY=bool:true|false or KEY=str:TEXT)",
                         spec);
}

int gguf_qopts_check_kv(const char *spec, amn_error *err) {
    kv_spec k;
    int rc = split_kv(spec, &k, err);
    if (rc) return rc;
    int64_t i;
    double f;
    switch (k.tag) {
    case 'i':
        if (!parse_i64(k.value, &i) || i == INT64_MIN)
            return amn_error_set(err, AMN_E_INVALID, "--override-kv %s: '%s' is not an integer",
                                 spec, k.value);
        break;
    case 'f':
        if (!parse_f64(k.value, &f))
            return amn_error_set(err, AMN_E_INVALID, "--override-kv %s: '%s' is not a number", spec,
                                 k.value);
        break;
    case 'b':
        if (strcmp(k.value, "true") != 0 && strcmp(k.value, "false") != 0)
            return amn_error_set(err, AMN_E_INVALID,
                                 "--override-kv %s: invalid boolean value (true or false)", spec);
        break;
    default:
        if (strlen(k.value) > KV_MAX)
            return amn_error_set(err, AMN_E_INVALID,
                                 "--override-kv %.160s...: value cannot exceed %d chars", spec,
                                 KV_MAX);
    }
    return AMN_OK;
}

int gguf_qopts_apply_kv(const char *spec, gguf_kvlist *l, amn_error *err) {
    kv_spec k;
    int rc = gguf_qopts_check_kv(spec, err);
    if (!rc) rc = split_kv(spec, &k, err);
    if (rc) return rc;
    const size_t klen = (size_t)(k.key_end - spec);
    char *key = amn_model_alloc(l->arena, klen + 1);
    void *data = amn_model_alloc(l->arena, sizeof(amn_str) > 8 ? sizeof(amn_str) : 8);
    if (!key || !data) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    memcpy(key, spec, klen);
    key[klen] = '\0';
    amn_kv kv = {.key = key, .data = data};
    int64_t i = 0;
    double f = 0;
    switch (k.tag) {
    case 'i': { /* (uint32_t)std::abs(val_i64): see llama.cpp PR 14182 */
        parse_i64(k.value, &i);
        const uint64_t mag = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
        const uint32_t v = (uint32_t)(mag & 0xffffffffu);
        memcpy(data, &v, 4);
        kv.type = AMN_KV_U32;
        break;
    }
    case 'f': {
        parse_f64(k.value, &f);
        const float v = (float)f;
        memcpy(data, &v, 4);
        kv.type = AMN_KV_F32;
        break;
    }
    case 'b':
        *(uint8_t *)data = strcmp(k.value, "true") == 0;
        kv.type = AMN_KV_BOOL;
        break;
    default: {
        const size_t n = strlen(k.value);
        char *text = amn_model_alloc(l->arena, n + 1);
        if (!text) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        memcpy(text, k.value, n + 1);
        *(amn_str *)data = (amn_str){text, n};
        kv.type = AMN_KV_STRING;
    }
    }
    const ptrdiff_t at = gguf_kvlist_find(l, key); /* gguf_set_val_*: remove, append */
    if (at >= 0) gguf_kvlist_remove(l, (size_t)at);
    return gguf_kvlist_set(l, &kv, err);
}

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int gguf_qopts_parse_prune(const char *list, int32_t **out, size_t *n, amn_error *err) {
    *out = NULL;
    *n = 0;
    size_t cap = 1;
    for (const char *c = list; *c; c++) cap += *c == ',';
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    size_t k = 0;
    for (const char *p = list;; p++) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        char word[24];
        bool ok = len > 0 && len < sizeof word;
        if (ok) {
            memcpy(word, p, len);
            word[len] = '\0';
            for (size_t d = 0; d < len; d++) ok &= word[d] >= '0' && word[d] <= '9';
        }
        long long id = ok ? strtoll(word, NULL, 10) : -1;
        if (!ok || id > INT32_MAX) {
            free(v);
            return amn_error_set(err, AMN_E_INVALID,
                                 "--prune-layers %s: invalid layer id '%.*s' (want L0,L1,... "
                                 "with layer numbers >= 0)",
                                 list, (int)(len > 40 ? 40 : len), p);
        }
        v[k++] = (int32_t)id;
        if (!end) break;
        p = end;
    }
    qsort(v, k, sizeof *v, cmp_i32);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || v[u - 1] != v[i]) v[u++] = v[i];
    *out = v;
    *n = u;
    return AMN_OK;
}

/* The first "blk.N." in name (std::regex_search of blk\.(\d+)\.): N's
 * offset and length, false when there is none. */
static bool find_layer(const char *name, size_t *at, size_t *len) {
    for (const char *p = strstr(name, "blk."); p; p = strstr(p + 1, "blk.")) {
        const char *d = p + 4, *e = d;
        while (*e >= '0' && *e <= '9') e++;
        if (e > d && *e == '.') {
            *at = (size_t)(d - name);
            *len = (size_t)(e - d);
            return true;
        }
    }
    return false;
}

typedef struct layer_map {
    int64_t from, to; /* to < 0: pruned */
} layer_map;

int gguf_qopts_prune(const char *const *names, size_t n, const int32_t *prune, size_t n_prune,
                     char **renamed, uint32_t *n_layers, amn_error *err) {
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    layer_map *map = malloc((n ? n : 1) * sizeof *map);
    int rc = order && map && gguf_qpolicy_walk_order(names, n, order)
                 ? AMN_OK
                 : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    size_t n_map = 0;
    int64_t next = 0;
    for (size_t i = 0; i < n; i++) renamed[i] = NULL;
    for (size_t k = 0; !rc && k < n; k++) {
        const char *name = names[order[k]];
        size_t at, len;
        if (!find_layer(name, &at, &len)) {
            if (!(renamed[order[k]] = strdup(name)))
                rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
            continue;
        }
        if (len > 9) {
            rc = amn_error_set(err, AMN_E_INVALID, "tensor %s: layer number out of range", name);
            break;
        }
        const int64_t blk = strtoll(name + at, NULL, 10);
        size_t m = 0;
        while (m < n_map && map[m].from != blk) m++;
        if (m == n_map) { /* first sight of this layer: remap_layer's three cases */
            bool pruned = false;
            for (size_t p = 0; p < n_prune; p++) pruned |= prune[p] == blk;
            map[m].from = blk;
            if (pruned)
                map[m].to = -1;
            else if (n_prune && blk < prune[0])
                map[m].to = blk, next = blk + 1;
            else
                map[m].to = next++;
            n_map++;
        }
        if (map[m].to < 0) continue;
        char num[24];
        const int w = snprintf(num, sizeof num, "%lld", (long long)map[m].to);
        const size_t total = strlen(name) - len + (size_t)w + 1;
        char *s = malloc(total);
        if (!s) {
            rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
            break;
        }
        snprintf(s, total, "%.*s%s%s", (int)at, name, num, name + at + len);
        renamed[order[k]] = s;
    }
    if (rc)
        for (size_t i = 0; i < n; i++) free(renamed[i]), renamed[i] = NULL;
    *n_layers = (uint32_t)next;
    free(order);
    free(map);
    return rc;
}

int gguf_qopts_read_type_file(const char *path, char ***words, size_t *n, amn_error *err) {
    *words = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return amn_error_set(err, AMN_E_IO, "--tensor-type-file %s: cannot open: %s", path,
                             strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || st.st_size > TYPE_FILE_MAX) {
        fclose(f);
        return amn_error_set(err, AMN_E_LIMIT,
                             "--tensor-type-file %s: not a regular file of at most %u bytes", path,
                             TYPE_FILE_MAX);
    }
    const size_t size = (size_t)st.st_size;
    /* The pointers first, then the text: at most one word per two bytes. */
    const size_t max_words = size / 2 + 1;
    char **w = malloc(max_words * sizeof *w + size + 1);
    if (!w) {
        fclose(f);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    char *text = (char *)(w + max_words);
    const size_t got = fread(text, 1, size, f);
    const bool bad = ferror(f) || got != size;
    fclose(f);
    if (bad || memchr(text, '\0', size)) {
        free(w);
        return amn_error_set(err, bad ? AMN_E_IO : AMN_E_PARSE, "--tensor-type-file %s: %s", path,
                             bad ? "read failed" : "holds a NUL byte (not a text file)");
    }
    text[size] = '\0';
    size_t k = 0;
    /* std::ifstream >> std::string: words split at isspace() in the C locale. */
    for (char *p = text; *p;) {
        while (*p == ' ' || (*p >= '\t' && *p <= '\r')) *p++ = '\0';
        if (!*p) break;
        w[k++] = p;
        while (*p && !(*p == ' ' || (*p >= '\t' && *p <= '\r'))) p++;
    }
    *words = w;
    *n = k;
    return AMN_OK;
}

bool gguf_qopts_imatrix_keeps(const char *name, const char *const *include, size_t n_include,
                              const char *const *exclude, size_t n_exclude) {
    for (size_t i = 0; i < n_exclude; i++)
        if (strstr(name, exclude[i])) return false;
    if (!n_include) return true;
    for (size_t i = 0; i < n_include; i++)
        if (strstr(name, include[i])) return true;
    return false;
}

static bool key_is(const char *p, const char *key, const char **value) {
    const size_t n = strlen(key);
    if (strncmp(p, key, n) != 0 || p[n] != '=') return false;
    *value = p + n + 1;
    return true;
}

/* Append a copy of s to (*list)[*n]. */
static int push_copy(char ***list, size_t *n, const char *s, amn_error *err) {
    char **grown =
        *n < SIZE_MAX / sizeof **list - 1 ? realloc(*list, (*n + 1) * sizeof **list) : NULL;
    char *c = grown ? strdup(s) : NULL;
    if (grown) *list = grown;
    if (!c) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    (*list)[(*n)++] = c;
    return AMN_OK;
}

static int add_file(gguf_qopts_enc *q, size_t i, const char *path, amn_error *err) {
    gguf_qopts_file f = {.param = i};
    int rc = gguf_qopts_read_type_file(path, &f.words, &f.n, err);
    if (rc) return rc;
    gguf_qopts_file *grown = realloc(q->files, (q->n_files + 1) * sizeof *grown);
    if (!grown || asprintf(&f.what, "--tensor-type-file %s", path) < 0) {
        if (grown) q->files = grown;
        free(f.words);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    q->files = grown;
    q->files[q->n_files++] = f;
    q->n_file_words += f.n;
    for (size_t k = 0; k < f.n; k++) q->file_bytes += strlen(f.words[k]) + 1;
    return AMN_OK;
}

int gguf_qopts_enc_param(gguf_qopts_enc *q, size_t i, const char *p, bool *taken, amn_error *err) {
    const char *v;
    *taken = true;
    if (key_is(p, "override_kv", &v)) {
        int rc = gguf_qopts_check_kv(v, err);
        return rc ? rc : push_copy(&q->kv, &q->n_kv, v, err);
    }
    if (key_is(p, "prune_layers", &v)) {
        int32_t *list;
        size_t n;
        int rc = gguf_qopts_parse_prune(v, &list, &n, err);
        if (rc) return rc;
        /* quantize.cpp appends every --prune-layers to one sorted list */
        int32_t *all = realloc(q->prune, (q->n_prune + n) * sizeof *all);
        if (!all) {
            free(list);
            return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        }
        memcpy(all + q->n_prune, list, n * sizeof *list);
        free(list);
        q->prune = all;
        q->n_prune += n;
        qsort(all, q->n_prune, sizeof *all, cmp_i32);
        size_t u = 0;
        for (size_t k = 0; k < q->n_prune; k++)
            if (u == 0 || all[u - 1] != all[k]) all[u++] = all[k];
        q->n_prune = u;
        return AMN_OK;
    }
    if (key_is(p, "tensor_type_file", &v)) return add_file(q, i, v, err);
    if (key_is(p, "include_weights", &v)) return push_copy(&q->include, &q->n_include, v, err);
    if (key_is(p, "exclude_weights", &v)) return push_copy(&q->exclude, &q->n_exclude, v, err);
    if (key_is(p, "dry_run", &v)) {
        q->dry_run = true;
        return AMN_OK;
    }
    *taken = false;
    return AMN_OK;
}

int gguf_qopts_enc_check(const gguf_qopts_enc *q, amn_error *err) {
    if (q->n_include && q->n_exclude)
        return amn_error_set(err, AMN_E_INVALID,
                             "--include-weights and --exclude-weights cannot be used together");
    return AMN_OK;
}

void gguf_qopts_enc_free(gguf_qopts_enc *q) {
    for (size_t i = 0; i < q->n_kv; i++) free(q->kv[i]);
    for (size_t i = 0; i < q->n_include; i++) free(q->include[i]);
    for (size_t i = 0; i < q->n_exclude; i++) free(q->exclude[i]);
    for (size_t i = 0; i < q->n_files; i++) free(q->files[i].words), free(q->files[i].what);
    free(q->kv);
    free(q->include);
    free(q->exclude);
    free(q->files);
    free(q->prune);
    memset(q, 0, sizeof *q);
}

int gguf_qopts_prune_view(const gguf_qopts_enc *q, gguf_qpolicy_tensor *ts, size_t *n,
                          size_t *index, char **renamed, uint32_t *n_layers, amn_error *err) {
    const size_t nt = *n;
    const char **names = calloc(nt ? nt : 1, sizeof *names);
    if (!names) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < nt; i++) names[i] = ts[i].name;
    int rc = gguf_qopts_prune(names, nt, q->prune, q->n_prune, renamed, n_layers, err);
    free(names);
    if (rc) return rc;
    size_t k = 0;
    for (size_t i = 0; i < nt; i++) {
        if (!renamed[i]) continue;
        ts[k] = ts[i];
        ts[k].name = renamed[i];
        index[k++] = i;
    }
    *n = k;
    return AMN_OK;
}

void gguf_qopts_free_strings(char **s, size_t n) {
    for (size_t i = 0; s && i < n; i++) free(s[i]);
    free(s);
}

int gguf_qopts_writer_options(const gguf_qopts_enc *q, int ftype, const char *arch, bool pruned,
                              uint32_t n_layers, char ***opts, size_t *n, amn_error *err) {
    const size_t total = 1 + q->n_kv + (pruned ? 1 : 0);
    char **o = calloc(total, sizeof *o);
    if (!o) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    size_t k = 0;
    bool ok = asprintf(&o[k++], "llama_ftype=%d", ftype) >= 0;
    for (size_t i = 0; ok && i < q->n_kv; i++) ok = asprintf(&o[k++], "llama_kv=%s", q->kv[i]) >= 0;
    if (ok && pruned)
        ok = asprintf(&o[k++], "llama_kv=%s.block_count=int:%u", arch, (unsigned)n_layers) >= 0;
    if (!ok) {
        o[k - 1] = NULL; /* asprintf leaves it undefined on failure */
        gguf_qopts_free_strings(o, total);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    *opts = o;
    *n = total;
    return AMN_OK;
}

int gguf_qopts_policy_overrides(const gguf_qopts_enc *q, gguf_qpolicy_model *pm, amn_error *err) {
    static const char *const suffix[4] = {".block_count", ".attention.head_count",
                                          ".attention.head_count_kv", ".expert_count"};
    uint32_t *field[4] = {&pm->n_layer, &pm->n_head, &pm->n_head_kv, &pm->n_expert};
    const size_t alen = strlen(pm->arch);
    for (size_t i = 0; i < q->n_kv; i++) {
        kv_spec k;
        int rc = split_kv(q->kv[i], &k, err);
        if (rc) return rc;
        const size_t klen = (size_t)(k.key_end - q->kv[i]);
        for (int f = 0; f < 4; f++) {
            if (klen != alen + strlen(suffix[f]) || strncmp(q->kv[i], pm->arch, alen) != 0 ||
                strncmp(q->kv[i] + alen, suffix[f], klen - alen) != 0)
                continue;
            if (k.tag != 'i') continue; /* the loader warns and reads the file's value */
            int64_t v = 0;
            parse_i64(k.value, &v);
            *field[f] = (uint32_t)(uint64_t)v;
        }
    }
    return AMN_OK;
}
