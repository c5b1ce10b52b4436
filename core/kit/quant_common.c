/* Shared by the quant-scheme plugins: settings stored beside a model, which
 * packing a qweight follows, and tensor helpers. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "amn/checked.h"
#include "amn/io.h"
#include "amn/kit/json_file.h"
#include "amn/kit/quant_common.h"

/* A config file is a few kilobytes; anything near this is not one. */
#define QC_MAX_FILE (4u << 20)

static void copy_lower(char *dst, size_t size, const char *src) {
    size_t i = 0;
    for (; src[i] && i + 1 < size; i++) dst[i] = (char)tolower((unsigned char)src[i]);
    dst[i] = '\0';
}

static const amn_kit_json_caps qc_caps = {
    .max_bytes = QC_MAX_FILE, .max_depth = 32, .bad_code = AMN_E_PARSE};

/* Errors are dropped: a config that cannot be read is skipped (see
 * quant_config_load). */
static json_object *read_json(const char *path) {
    json_object *root = NULL;
    amn_error ignored = {0};
    if (amn_kit_json_read_object(path, NULL, &qc_caps, &root, &ignored) != AMN_OK) return NULL;
    return root;
}

/* A settings file of m: the packed folder's own when m came from an
 * archive (never the files beside the archive, which are not the
 * model's), else dir/name. */
static json_object *settings_file(const amn_model *m, const char *dir, const char *name) {
    if (amn_model_archive(m)) {
        const uint8_t *data;
        uint64_t n;
        json_object *root = NULL;
        amn_error ignored = {0};
        if (!amn_model_archive_file(m, name, &data, &n) || n > QC_MAX_FILE ||
            amn_kit_json_parse_object(name, (const char *)data, (size_t)n, &qc_caps, &root,
                                      &ignored) != AMN_OK)
            return NULL;
        return root;
    }
    size_t n = strlen(dir) + strlen(name) + 2;
    char *path = malloc(n);
    if (!path) return NULL;
    snprintf(path, n, "%s/%s", dir, name);
    json_object *root = read_json(path);
    free(path);
    return root;
}

static bool get_int(json_object *o, const char *key, int *out) {
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v)) return false;
    if (json_object_is_type(v, json_type_int)) {
        int64_t x = json_object_get_int64(v);
        if (x < INT_MIN || x > INT_MAX) return false;
        *out = (int)x;
        return true;
    }
    if (json_object_is_type(v, json_type_boolean)) {
        *out = json_object_get_boolean(v) ? 1 : 0;
        return true;
    }
    return false;
}

static void get_str(json_object *o, const char *key, char *dst, size_t size) {
    json_object *v;
    if (dst[0] || !json_object_object_get_ex(o, key, &v)) return;
    if (json_object_is_type(v, json_type_string)) copy_lower(dst, size, json_object_get_string(v));
}

/* A [rows, cols] block size of positive ints under key, into block[2]
 * unless already set. */
static void get_block(json_object *o, const char *key, int block[2]) {
    json_object *bs;
    if (block[0] || !json_object_object_get_ex(o, key, &bs) ||
        !json_object_is_type(bs, json_type_array) || json_object_array_length(bs) != 2)
        return;
    int b[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        json_object *e = json_object_array_get_idx(bs, (size_t)k);
        if (e && json_object_is_type(e, json_type_int)) {
            int64_t v = json_object_get_int64(e);
            if (v > 0 && v <= INT_MAX) b[k] = (int)v;
        }
    }
    if (b[0] && b[1]) {
        block[0] = b[0];
        block[1] = b[1];
    }
}

/* Merge one settings object: fields already set win (earlier files rank higher). */
static void merge(quant_config *qc, json_object *o, const char *file) {
    int x;
    bool had_method = qc->method[0] != '\0';
    get_str(o, "quant_method", qc->method, sizeof qc->method);
    get_str(o, "method", qc->method, sizeof qc->method);
    if (!had_method && qc->method[0]) snprintf(qc->file, sizeof qc->file, "%s", file);
    if (!qc->bits && (get_int(o, "bits", &x) || get_int(o, "w_bit", &x))) qc->bits = x;
    if (!qc->group_size && (get_int(o, "group_size", &x) || get_int(o, "q_group_size", &x)))
        qc->group_size = x ? x : -1;
    if (qc->desc_act < 0 && get_int(o, "desc_act", &x)) qc->desc_act = x != 0;
    if (qc->sym < 0 && get_int(o, "sym", &x)) qc->sym = x != 0;
    get_str(o, "checkpoint_format", qc->checkpoint_format, sizeof qc->checkpoint_format);
    get_str(o, "version", qc->version, sizeof qc->version);
    get_str(o, "format", qc->format, sizeof qc->format);
    json_object *groups;
    if (json_object_object_get_ex(o, "config_groups", &groups) &&
        json_object_is_type(groups, json_type_object)) {
        /* compressed-tensors: the first group that says wins (the shapes
         * remain the authority; this settles only what they cannot). */
        json_object_object_foreach(groups, gname, grp) {
            (void)gname;
            json_object *w;
            if (!json_object_is_type(grp, json_type_object)) continue;
            get_str(grp, "format", qc->format, sizeof qc->format);
            if (!json_object_object_get_ex(grp, "weights", &w) ||
                !json_object_is_type(w, json_type_object))
                continue;
            if (!qc->num_bits && get_int(w, "num_bits", &x)) qc->num_bits = x;
            /* The block strategy's [rows, cols] (FP8 and int block models). */
            get_block(w, "block_structure", qc->block);
        }
    }
    if (qc->load_in_4bit < 0 && get_int(o, "load_in_4bit", &x)) qc->load_in_4bit = x != 0;
    if (qc->load_in_8bit < 0 && get_int(o, "load_in_8bit", &x)) qc->load_in_8bit = x != 0;
    if (qc->bnb_double_quant < 0 && get_int(o, "bnb_4bit_use_double_quant", &x))
        qc->bnb_double_quant = x != 0;
    get_str(o, "bnb_4bit_quant_type", qc->bnb_quant_type, sizeof qc->bnb_quant_type);
    get_block(o, "weight_block_size", qc->block);
    if (!qc->file[0]) snprintf(qc->file, sizeof qc->file, "%s", file);
    qc->present = true;
}

static void load_file(quant_config *qc, const amn_model *m, const char *dir, const char *name,
                      const char *sub) {
    json_object *root = settings_file(m, dir, name);
    if (!root) return;
    json_object *o = root;
    if (sub && !json_object_object_get_ex(root, sub, &o)) o = NULL;
    if (o && json_object_is_type(o, json_type_object)) merge(qc, o, name);
    json_object_put(root);
}

static int meta_int(const amn_model *m, const char *key, int *out) {
    const char *s = amn_model_get_meta(m, key);
    if (!s || !*s) return 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < INT_MIN || v > INT_MAX) return 0;
    *out = (int)v;
    return 1;
}

void quant_config_load(const amn_model *m, quant_config *qc) {
    memset(qc, 0, sizeof *qc);
    qc->desc_act = -1;
    qc->sym = -1;
    qc->load_in_4bit = qc->load_in_8bit = qc->bnb_double_quant = -1;
    const char *p = amn_model_path(m);
    if (p && *p) {
        char *dir;
        struct stat st;
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            dir = strdup(p);
        } else {
            const char *slash = strrchr(p, '/');
            dir = slash ? strndup(p, (size_t)(slash - p) + (slash == p)) : strdup(".");
        }
        if (dir) {
            /* transformers reads config.json; the tools' own files back it up. */
            load_file(qc, m, dir, "config.json", "quantization_config");
            load_file(qc, m, dir, "quantize_config.json", NULL);
            load_file(qc, m, dir, "quant_config.json", NULL);
            free(dir);
        }
    }
    int x;
    if (!qc->bits && meta_int(m, "gptq_bits", &x)) {
        qc->bits = x;
        qc->present = true;
    }
    if (!qc->group_size && meta_int(m, "gptq_group_size", &x)) {
        qc->group_size = x ? x : -1;
        qc->present = true;
    }
    if (!qc->file[0] && qc->present) snprintf(qc->file, sizeof qc->file, "__metadata__");
}

quant_kind quant_classify(const quant_config *qc, const amn_tensor *qweight,
                          const amn_tensor *scales, bool has_gidx) {
    if (strcmp(qc->method, "gptq") == 0 || strcmp(qc->method, "gptqmodel") == 0) return QUANT_GPTQ;
    if (strcmp(qc->method, "awq") == 0) return QUANT_AWQ;
    if (has_gidx) return QUANT_GPTQ;
    if (!scales || qweight->ndim != 2 || scales->ndim != 2) return QUANT_UNKNOWN;
    if (scales->shape[1] == qweight->shape[1]) return QUANT_GPTQ;
    uint64_t x;
    if (amn_mul_u64(qweight->shape[1], 8, &x) && scales->shape[1] == x) return QUANT_AWQ;
    return QUANT_UNKNOWN;
}

char *quant_join(const char *prefix, size_t prefix_len, const char *suffix) {
    const size_t sl = strlen(suffix);
    char *s = malloc(prefix_len + sl + 1);
    if (!s) return NULL;
    memcpy(s, prefix, prefix_len);
    memcpy(s + prefix_len, suffix, sl + 1);
    return s;
}

bool quant_suffix(const char *name, const char *suffix, size_t *prefix_len) {
    const size_t n = strlen(name), sl = strlen(suffix);
    if (n <= sl || memcmp(name + n - sl, suffix, sl) != 0) return false;
    *prefix_len = n - sl;
    return true;
}

const char *quant_shape(const amn_tensor *t, char *buf, size_t size) {
    return amn_shape_format(t, buf, size);
}

int quant_check_bytes(const amn_tensor *t, amn_error *err) {
    uint64_t n, bytes;
    if (!amn_tensor_numel(t, &n) || !amn_mul_u64(n, amn_dtype_size(t->dtype), &bytes) ||
        t->nbytes != bytes)
        return amn_error_set(err, AMN_E_PARSE, "%s: %llu bytes do not match its shape", t->name,
                             (unsigned long long)t->nbytes);
    return AMN_OK;
}

int quant_tensor_bytes(const amn_tensor *t, uint8_t **own, const uint8_t **bytes, amn_error *err) {
    *own = NULL;
    *bytes = NULL;
    if (!t->data) return AMN_OK;
    /* Kernels load through typed pointers: a plain tensor is used in place
     * only when it is aligned for its dtype (safetensors does not promise it). */
    const size_t align = amn_dtype_size(t->dtype);
    if (amn_tensor_is_plain(t) && (align < 2 || (uintptr_t)t->data % align == 0)) {
        *bytes = t->data;
        return AMN_OK;
    }
    if (t->nbytes > SIZE_MAX) return amn_error_set(err, AMN_E_LIMIT, "%s: too large", t->name);
    uint8_t *b = malloc(t->nbytes ? (size_t)t->nbytes : 1);
    if (!b) return amn_error_set(err, AMN_E_NOMEM, "%s: out of memory", t->name);
    int rc = amn_tensor_read(t, 0, b, t->nbytes, err);
    if (rc) {
        free(b);
        return rc;
    }
    *own = b;
    *bytes = b;
    return AMN_OK;
}

const uint8_t *quant_member(const amn_model *m, size_t i, const uint8_t *own, uint64_t nbytes) {
    if (own) return own;
    const amn_tensor *t = amn_model_tensor(m, i);
    return t && t->data && t->nbytes == nbytes ? t->data : NULL;
}

int quant_check_request(const char *name, uint64_t rows, uint64_t row0, uint64_t nrows,
                        amn_dtype out, amn_error *err) {
    if (out != AMN_DTYPE_F32 && out != AMN_DTYPE_F16 && out != AMN_DTYPE_BF16)
        return amn_error_set(err, AMN_E_INVALID, "%s: cannot dequantize to %s", name,
                             amn_dtype_name(out));
    if (row0 > rows || nrows > rows - row0)
        return amn_error_set(err, AMN_E_INVALID, "%s: rows %llu+%llu outside its %llu rows", name,
                             (unsigned long long)row0, (unsigned long long)nrows,
                             (unsigned long long)rows);
    return AMN_OK;
}

int64_t quant_find_companion(const amn_model *m, const char *prefix, size_t plen,
                             const char *suffix, int *rc, amn_error *err) {
    char *name = quant_join(prefix, plen, suffix);
    if (!name) {
        *rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
        return -1;
    }
    const int64_t i = amn_model_find(m, name);
    free(name);
    return i;
}

int quant_detect_layers(const amn_model *m, amn_claimset *cs, quant_claim_fn claim,
                        const char *const *orphans, size_t n_orphans, amn_error *err) {
    const size_t n = amn_model_tensor_count(m);
    quant_config qc;
    bool loaded = false;
    size_t claimed = 0;
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        size_t plen;
        if (!quant_suffix(t->name, ".qweight", &plen) || amn_claimset_is_claimed(cs, i)) continue;
        if (!loaded) {
            quant_config_load(m, &qc);
            loaded = true;
        }
        int rc = claim(m, cs, &qc, i, plen, err);
        if (rc) return rc;
        if (amn_claimset_is_claimed(cs, i)) claimed++;
    }
    if (!claimed) return AMN_OK;
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        size_t plen = 0;
        bool orphan = false;
        if (amn_claimset_is_claimed(cs, i)) continue;
        for (size_t k = 0; k < n_orphans && !orphan; k++)
            orphan = quant_suffix(t->name, orphans[k], &plen);
        if (!orphan) continue;
        int rc = AMN_OK;
        const int64_t q = quant_find_companion(m, t->name, plen, ".qweight", &rc, err);
        if (rc) return rc;
        if (q < 0)
            return amn_error_set(err, AMN_E_PARSE, "%s: no %.*s.qweight for it", t->name, (int)plen,
                                 t->name);
    }
    return AMN_OK;
}

int quant_qweight_companions(const amn_model *m, const amn_tensor *qw, size_t plen,
                             quant_qweight_layer *l, amn_error *err) {
    int rc = AMN_OK;
    l->scales = quant_find_companion(m, qw->name, plen, ".scales", &rc, err);
    l->qzeros = rc ? -1 : quant_find_companion(m, qw->name, plen, ".qzeros", &rc, err);
    l->g_idx = rc ? -1 : quant_find_companion(m, qw->name, plen, ".g_idx", &rc, err);
    l->weight = rc ? -1 : quant_find_companion(m, qw->name, plen, ".weight", &rc, err);
    return rc;
}

int quant_qweight_check(const amn_model *m, const amn_tensor *qw, size_t plen,
                        const quant_qweight_layer *l, const char *method, amn_error *err) {
    if (l->scales < 0 || l->qzeros < 0)
        return amn_error_set(err, AMN_E_PARSE, "%s: %s weight without its %.*s.%s", qw->name,
                             method, (int)plen, qw->name, l->scales < 0 ? "scales" : "qzeros");
    if (l->weight >= 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: %s already exists, so the dequantized weight "
                             "would have two tensors",
                             qw->name, amn_model_tensor(m, (size_t)l->weight)->name);
    return AMN_OK;
}

int quant_group_size(const quant_config *qc, const amn_tensor *sc, const amn_tensor *qw,
                     uint64_t in, uint64_t G, uint64_t *gs, amn_error *err) {
    if (qc->group_size > 0) {
        *gs = (uint64_t)qc->group_size;
        if (in % *gs != 0 || in / *gs != G)
            return amn_error_set(err, AMN_E_PARSE,
                                 "%s: %llu groups, but group_size %llu (from %s) over in_features "
                                 "%llu gives %s",
                                 sc->name, (unsigned long long)G, (unsigned long long)*gs, qc->file,
                                 (unsigned long long)in,
                                 in % *gs ? "a partial group" : "another count");
        return AMN_OK;
    }
    if (in % G != 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: %llu groups do not divide in_features %llu of %s", sc->name,
                             (unsigned long long)G, (unsigned long long)in, qw->name);
    *gs = in / G;
    return AMN_OK;
}
