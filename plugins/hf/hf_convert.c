/* Planning a model folder's conversion (hf_convert.h): the converter's
 * tensor order, names, types and transforms, checked against config.json,
 * and its key/values. */
#include "hf_convert.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "amn/checked.h"
#include "amn/kit/json_file.h"
#include "hf_config.h"
#include "hf_kv.h"
#include "hf_meta.h"
#include "hf_params.h"
#if !defined(HF_NO_VOCAB) && __has_include("hf_vocab.h")
#include "hf_vocab.h"
#define HF_HAVE_VOCAB 1
#endif

#define CONFIG_MAX_BYTES (16u << 20)
#define HEADER_MAX_BYTES (100u << 20)
#define MAX_PARTS        4096

/* llama_ftype of each --outtype (llama.h). */
static uint32_t ftype_of(hf_outtype t) {
    switch (t) {
    case HF_OUT_F32:
        return 0;
    case HF_OUT_F16:
        return 1;
    case HF_OUT_Q8_0:
        return 7;
    default:
        return 32;
    }
}

void hf_conv_free(hf_conv *c) {
    if (!c) return;
    amn_model_free(c->kv);
    free(c->outs);
    free(c->rope);
    free(c->order);
    free(c);
}

static int read_json(const char *dir, const char *file, bool required, json_object **out,
                     amn_error *err) {
    char path[4096];
    *out = NULL;
    if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path)
        return amn_error_set(err, AMN_E_INVALID, "%s: path too long", dir);
    struct stat st;
    if (stat(path, &st) != 0) {
        if (!required) return AMN_OK;
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: %s has no %s: not a Hugging Face model folder", dir,
                             file);
    }
    const amn_kit_json_caps caps = {
        .max_bytes = CONFIG_MAX_BYTES, .max_depth = 64, .bad_code = AMN_E_PARSE};
    return amn_kit_json_read_object(path, NULL, &caps, out, err);
}

/* ---- the converter's tensor order ---- */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

typedef struct names {
    char **v;
    size_t n, cap;
} names;

static void names_free(names *s) {
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    *s = (names){0};
}

static int names_add(names *s, const char *x, amn_error *err) {
    if (s->n == s->cap) {
        const size_t cap = s->cap ? s->cap * 2 : 64;
        char **p = realloc(s->v, cap * sizeof *p);
        if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        s->v = p;
        s->cap = cap;
    }
    if (!(s->v[s->n] = strdup(x))) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    s->n++;
    return AMN_OK;
}

/* The shard files, as index_tensors lists them: the index's files (sorted),
 * else every model*.safetensors of the folder (sorted). */
static int part_names(const char *dir, names *parts, amn_error *err) {
    json_object *index = NULL;
    int rc = read_json(dir, "model.safetensors.index.json", false, &index, err);
    if (rc) return rc;
    if (index) {
        json_object *wm;
        if (!json_object_object_get_ex(index, "weight_map", &wm) ||
            !json_object_is_type(wm, json_type_object)) {
            json_object_put(index);
            return amn_error_set(err, AMN_E_PARSE,
                                 "model.safetensors.index.json: no weight_map object");
        }
        json_object_object_foreach(wm, key, val) {
            (void)key;
            if (!json_object_is_type(val, json_type_string)) {
                rc = amn_error_set(err, AMN_E_PARSE,
                                   "model.safetensors.index.json: %s: file is not a string", key);
                break;
            }
            const char *f = json_object_get_string(val);
            bool seen = false;
            for (size_t i = 0; i < parts->n && !seen; i++) seen = strcmp(parts->v[i], f) == 0;
            if (!seen && (rc = names_add(parts, f, err))) break;
            if (parts->n > MAX_PARTS) {
                rc = amn_error_set(err, AMN_E_LIMIT, "more than %d shard files", MAX_PARTS);
                break;
            }
        }
        json_object_put(index);
    } else {
        DIR *d = opendir(dir);
        if (!d) return amn_error_set(err, AMN_E_IO, "%s: %s", dir, strerror(errno));
        for (struct dirent *e; !rc && (e = readdir(d));) {
            const size_t n = strlen(e->d_name);
            if (strncmp(e->d_name, "model", 5) == 0 && n >= 12 &&
                strcmp(e->d_name + n - 12, ".safetensors") == 0)
                rc = names_add(parts, e->d_name, err);
            if (!rc && parts->n > MAX_PARTS)
                rc = amn_error_set(err, AMN_E_LIMIT, "more than %d shard files", MAX_PARTS);
        }
        closedir(d);
    }
    if (!rc && !parts->n)
        rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                           "unsupported: %s holds no model*.safetensors to convert", dir);
    if (!rc) qsort(parts->v, parts->n, sizeof *parts->v, cmp_str);
    return rc;
}

/* One shard's tensor names, sorted (gguf-py's SafetensorsLocal). */
static int part_tensors(const char *dir, const char *part, names *out, amn_error *err) {
    char path[4096];
    if (strchr(part, '/') || snprintf(path, sizeof path, "%s/%s", dir, part) >= (int)sizeof path)
        return amn_error_set(err, AMN_E_PARSE, "shard name %s: not a file of the folder", part);
    FILE *f = fopen(path, "rb");
    if (!f) return amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(errno));
    uint8_t len8[8];
    uint64_t len = 0;
    int rc = AMN_OK;
    if (fread(len8, 1, 8, f) != 8)
        rc = amn_error_set(err, AMN_E_PARSE, "%s: truncated safetensors header", path);
    for (int i = 7; !rc && i >= 0; i--) len = len << 8 | len8[i];
    if (!rc && len > HEADER_MAX_BYTES)
        rc = amn_error_set(err, AMN_E_LIMIT, "%s: header of %llu bytes exceeds the cap", path,
                           (unsigned long long)len);
    char *text = rc ? NULL : malloc(len ? (size_t)len : 1);
    if (!rc && !text) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc && fread(text, 1, (size_t)len, f) != len)
        rc = amn_error_set(err, AMN_E_PARSE, "%s: truncated safetensors header", path);
    fclose(f);
    json_object *h = NULL;
    const amn_kit_json_caps caps = {
        .max_bytes = HEADER_MAX_BYTES, .max_depth = 64, .bad_code = AMN_E_PARSE};
    if (!rc) rc = amn_kit_json_parse_object(path, text, (size_t)len, &caps, &h, err);
    free(text);
    const size_t first = out->n;
    if (!rc) {
        json_object_object_foreach(h, key, val) {
            (void)val;
            if (strcmp(key, "__metadata__") != 0 && (rc = names_add(out, key, err))) break;
        }
    }
    json_object_put(h);
    if (!rc) qsort(out->v + first, out->n - first, sizeof *out->v, cmp_str);
    return rc;
}

/* ---- outputs ---- */

typedef struct by_name {
    const char *name;
    size_t i;
} by_name;

static int cmp_by_name(const void *a, const void *b) {
    return strcmp(((const by_name *)a)->name, ((const by_name *)b)->name);
}

static bool ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* prepare_tensors' choice of type: F32 for 1-D tensors, norms, routers
 * and non-weights; else the outtype, Q8_0 falling back to F16 when rows do
 * not split into blocks of 32. */
static void choose_type(hf_out *o, hf_outtype t) {
    const bool f32 = o->ndim <= 1 || ends_with(o->name, "_norm.weight") ||
                     strstr(o->name, ".ffn_gate_inp.weight") || !ends_with(o->name, ".weight");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < o->ndim; d++) numel *= o->shape[d];
    if (f32 || t == HF_OUT_F32) {
        o->dtype = AMN_DTYPE_F32;
    } else if (t == HF_OUT_BF16) {
        o->dtype = AMN_DTYPE_BF16;
    } else if (t == HF_OUT_Q8_0 && o->shape[o->ndim - 1] % 32 == 0) {
        o->dtype = AMN_DTYPE_BLOCK;
        o->nbytes = numel / 32 * 34;
        return;
    } else {
        o->dtype = AMN_DTYPE_F16;
    }
    o->nbytes = numel * amn_dtype_size(o->dtype);
}

uint64_t hf_unit_bytes(const hf_out *t) {
    return t->nbytes / t->rows;
}

/* The permutation's head count, checked against the tensor's rows. */
static int check_permute(hf_out *o, const char *hf_name, const hf_params *p, amn_error *err) {
    if (o->xform != HF_X_PERMUTE_Q && o->xform != HF_X_PERMUTE_K) return AMN_OK;
    const uint32_t nh =
        o->xform == HF_X_PERMUTE_K && p->n_head_kv != p->n_head ? p->n_head_kv : p->n_head;
    if (!nh || o->rows % (2ull * nh) != 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "config.json says %u %s heads but %s has %llu rows (not a multiple "
                             "of 2 x heads)",
                             nh, o->xform == HF_X_PERMUTE_K ? "key/value" : "attention", hf_name,
                             (unsigned long long)o->rows);
    o->n_head = nh;
    return AMN_OK;
}

static int map_source(hf_conv *c, size_t i, const amn_encode_source *s, const hf_params *p,
                      amn_error *err) {
    hf_out *o = &c->outs[i];
    if (!hf_arch_map(c->arch, s->name, o->name, sizeof o->name, &o->xform))
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: tensor %s has no GGUF name in llama.cpp's %s mapping",
                             s->name, c->arch->gguf_arch);
    if (s->dtype != AMN_DTYPE_F32 && s->dtype != AMN_DTYPE_F16 && s->dtype != AMN_DTYPE_BF16)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: tensor %s is %s (the converter takes F32, F16, BF16)",
                             s->name, amn_dtype_name(s->dtype));
    if (s->ndim == 0 || s->ndim > 4)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "unsupported: tensor %s has %u dimensions",
                             s->name, s->ndim);
    o->src = s->dtype;
    o->ndim = s->ndim;
    uint64_t numel = 1;
    for (uint32_t d = 0; d < s->ndim; d++) {
        o->shape[d] = s->shape[d];
        if (!amn_mul_u64(numel, s->shape[d], &numel))
            return amn_error_set(err, AMN_E_PARSE, "tensor %s: shape overflows", s->name);
    }
    if (numel == 0) return amn_error_set(err, AMN_E_PARSE, "tensor %s: no elements", s->name);
    o->rows = s->shape[0];
    o->cols = numel / o->rows;
    choose_type(o, c->outtype);
    int rc = check_permute(o, s->name, p, err);
    if (!rc && strcmp(o->name, "token_embd.weight") == 0 && p->has_embd &&
        (s->ndim != 2 || s->shape[1] != p->n_embd))
        rc = amn_error_set(err, AMN_E_PARSE,
                           "config.json says hidden_size %u but %s has %llu columns", p->n_embd,
                           s->name, (unsigned long long)(s->ndim == 2 ? s->shape[1] : 0));
    return rc;
}

/* The converter's order (shards sorted, names sorted within each) as the
 * writer's tensor_order option; every source tensor is in it exactly once. */
static int plan_order(hf_conv *c, const char *dir, const amn_encode_source *src, size_t n,
                      const hf_params *p, amn_error *err) {
    names parts = {0}, order = {0};
    by_name *idx = malloc((n ? n : 1) * sizeof *idx);
    bool *seen = calloc(n ? n : 1, 1);
    int rc = idx && seen ? part_names(dir, &parts, err)
                         : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t k = 0; !rc && k < parts.n; k++) rc = part_tensors(dir, parts.v[k], &order, err);
    for (size_t i = 0; !rc && i < n; i++) idx[i] = (by_name){src[i].name, i};
    if (!rc) qsort(idx, n, sizeof *idx, cmp_by_name);
    size_t len = 0;
    for (size_t k = 0; !rc && k < order.n; k++) {
        const by_name key = {order.v[k], 0};
        const by_name *hit = bsearch(&key, idx, n, sizeof *idx, cmp_by_name);
        if (!hit || seen[hit->i]) {
            rc = amn_error_set(err, AMN_E_PARSE, "tensor %s of the folder's shards is %s",
                               order.v[k], hit ? "listed twice" : "not in the model opened");
            break;
        }
        seen[hit->i] = true;
        rc = map_source(c, hit->i, &src[hit->i], p, err);
        len += strlen(c->outs[hit->i].name) + 1;
    }
    for (size_t i = 0; !rc && i < n; i++)
        if (!seen[i])
            rc = amn_error_set(err, AMN_E_PARSE, "tensor %s is in no shard the folder lists",
                               src[i].name);
    if (!rc && c->has_extra) len += strlen(c->extra.name) + 1;
    if (!rc && !(c->order = malloc(len + 32)))
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc) {
        char *w = c->order;
        w += sprintf(w, "tensor_order=");
        if (c->has_extra) w += sprintf(w, "%s,", c->extra.name);
        for (size_t k = 0; k < order.n; k++) {
            const by_name key = {order.v[k], 0};
            const by_name *hit = bsearch(&key, idx, n, sizeof *idx, cmp_by_name);
            w += sprintf(w, "%s,", c->outs[hit->i].name);
            if (k == 0 && c->has_extra) {
                c->extra_host = hit->i;
                c->outs[hit->i].extra = &c->extra;
            }
        }
        if (w > c->order && w[-1] == ',') w[-1] = '\0';
        c->writer_opts[0] = c->order;
    }
    /* a duplicate output name (two sources mapped to one) is the writer's
     * duplicate check; say it here with both names */
    free(idx);
    free(seen);
    names_free(&parts);
    names_free(&order);
    return rc;
}

static int parse_outtype(const char *target, hf_outtype *t, amn_error *err) {
    static const struct {
        const char *name;
        hf_outtype t;
    } types[] = {{"hf-f32", HF_OUT_F32},
                 {"hf-f16", HF_OUT_F16},
                 {"hf-bf16", HF_OUT_BF16},
                 {"hf-q8_0", HF_OUT_Q8_0}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (strcmp(target, types[i].name) == 0) {
            *t = types[i].t;
            return AMN_OK;
        }
    return amn_error_set(err, AMN_E_INVALID, "hf: unknown target %s", target);
}

static int find_arch(hf_conv *c, json_object *cfg, amn_error *err) {
    json_object *a, *first;
    if (!json_object_object_get_ex(cfg, "architectures", &a) ||
        !json_object_is_type(a, json_type_array) || json_object_array_length(a) < 1 ||
        !(first = json_object_array_get_idx(a, 0)) || !json_object_is_type(first, json_type_string))
        return amn_error_set(err, AMN_E_PARSE, "config.json: no \"architectures\" list of names");
    const char *name = json_object_get_string(first);
    if ((c->arch = hf_arch_find(name))) return AMN_OK;
    char list[1024];
    hf_arch_list(list, sizeof list);
    return amn_error_set(err, AMN_E_UNSUPPORTED,
                         "unsupported: architecture %.200s has no table in amn-hf (supported: %s)",
                         name, list);
}

/* The key/values in the order ModelBase.write() sets them. */
static int plan_kv(hf_conv *c, const char *dir, json_object *cfg, const hf_params *p,
                   amn_error *err) {
    uint64_t total = 0;
    for (size_t i = 0; i < c->n_src; i++) {
        uint64_t numel = 1;
        for (uint32_t d = 0; d < c->outs[i].ndim; d++) numel *= c->outs[i].shape[d];
        total += numel;
    }
    if (c->has_extra) total += c->extra.shape[0];
    json_object *gen = NULL;
    int rc = read_json(dir, "generation_config.json", false, &gen, err);
    if (rc) { /* the converter ignores an unreadable generation_config.json */
        gen = NULL;
        rc = AMN_OK;
    }
    if (!(c->kv = amn_model_new("hf"))) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    hf_kvs l;
    if (!rc) rc = hf_kvs_init(&l, c->kv, err);
    if (rc) {
        json_object_put(gen);
        return rc;
    }
    l.arch = c->arch->gguf_arch;
    rc = hf_kv_str(&l, "general.architecture", c->arch->gguf_arch, err);
    if (!rc) rc = hf_kv_str(&l, "general.type", "model", err);
    if (!rc) rc = hf_meta_general(&l, dir, cfg, gen, total, err);
    if (!rc) rc = hf_params_kv(&l, c->arch, cfg, p, ftype_of(c->outtype), err);
    if (!rc) rc = hf_kv_u32(&l, "general.quantization_version", 2, err);
    if (!rc) rc = hf_kvs_flush(&l, c->kv, err);
#ifdef HF_HAVE_VOCAB
    if (!rc) rc = hf_vocab_add(c->kv, dir, c->arch->vocab_family, p->vocab_size, NULL, err);
#endif
    hf_kvs_free(&l);
    json_object_put(gen);
    return rc;
}

int hf_conv_new(const amn_encode_options *o, const amn_encode_source *src, size_t n, hf_conv **out,
                amn_error *err) {
    *out = NULL;
    const char *dir = o->model ? amn_model_path(o->model) : NULL;
    struct stat st;
    if (!dir || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: %s converts a Hugging Face model folder, not %s",
                             o->target, dir ? dir : "a stream");
    hf_conv *c = calloc(1, sizeof *c);
    if (!c) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    c->n_src = n;
    json_object *cfg = NULL;
    hf_params p = {0};
    int rc = parse_outtype(o->target, &c->outtype, err);
    if (!rc && !(c->outs = calloc(n ? n : 1, sizeof *c->outs)))
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc) rc = read_json(dir, "config.json", true, &cfg, err);
    if (!rc) rc = find_arch(c, cfg, err);
    if (!rc) rc = hf_params_read(cfg, c->arch, &p, err);
    if (!rc) rc = hf_params_extra(c->arch, &p, &c->extra, &c->rope, err);
    if (!rc) c->has_extra = c->rope != NULL;
    if (!rc) rc = plan_order(c, dir, src, n, &p, err);
    if (!rc) rc = plan_kv(c, dir, p.cfg, &p, err);
    json_object_put(cfg);
    hf_params_free(&p);
    if (rc) {
        hf_conv_free(c);
        return rc;
    }
    *out = c;
    return AMN_OK;
}
