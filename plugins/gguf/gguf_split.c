/* Split GGUF files (llama-gguf-split --split, llama-quantize --keep-split,
 * Hugging Face GGUF repositories): NAME-0000K-of-0000N.gguf, each file a
 * GGUF of its own whose split.no (u16, from 0), split.count (u16) and
 * split.tensors.count (i32) keys say which part of the model it is.
 *
 * As llama.cpp's loader does (src/llama-model-loader.cpp), the model's
 * metadata is shard 1's, every shard's tensors follow in shard order, and the
 * other shards are found by name beside the one opened: the prefix is what
 * precedes -%05d-of-%05d.gguf (on disk, or among the members of the folder
 * an archive packs, through amn_open_args.siblings). Unlike it, any shard opens the whole model
 * (llama.cpp wants the first), and every shard is checked before the model
 * exists: its split.no, a split.count equal to shard 1's, a split.tensors.count
 * equal to shard 1's where present, no tensor name in two shards, and the
 * total tensor count. A model of one file (no split.count, or one of 0, as
 * llama-gguf-split --merge leaves it, or 1) is returned as it was read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_format.h"

#define KEY_NO      "split.no"
#define KEY_COUNT   "split.count"
#define KEY_TENSORS "split.tensors.count"

typedef struct split_keys {
    bool has_count, has_no, has_tensors;
    uint16_t count, no;
    int32_t tensors;
} split_keys;

/* One split key of the type llama.cpp's loader requires (it refuses any
 * other): *has false when absent. */
static int key_of(const amn_model *m, const char *key, amn_kv_type type, void *out, bool *has,
                  const char *name, amn_error *err) {
    const amn_kv *kv = amn_model_find_kv(m, key);
    *has = kv != NULL;
    if (!kv) return AMN_OK;
    if (kv->type != type)
        return amn_error_set(err, AMN_E_PARSE, "%s: %s must be a%s %s", name, key,
                             type == AMN_KV_I32 ? "n" : "", type == AMN_KV_I32 ? "i32" : "u16");
    memcpy(out, kv->data, amn_kv_type_size(type));
    return AMN_OK;
}

static int read_keys(const amn_model *m, const char *name, split_keys *k, amn_error *err) {
    memset(k, 0, sizeof *k);
    int rc = key_of(m, KEY_COUNT, AMN_KV_U16, &k->count, &k->has_count, name, err);
    if (!rc) rc = key_of(m, KEY_NO, AMN_KV_U16, &k->no, &k->has_no, name, err);
    if (!rc) rc = key_of(m, KEY_TENSORS, AMN_KV_I32, &k->tensors, &k->has_tensors, name, err);
    return rc;
}

/* The prefix of path before -%05d-of-%05d.gguf for shard `no` of `count`
 * (llama_split_prefix), in prefix; false when the name does not end so. */
static bool split_prefix(const char *path, unsigned no, unsigned count, char *prefix, size_t size) {
    char tail[32];
    snprintf(tail, sizeof tail, "-%05u-of-%05u.gguf", no + 1, count);
    const size_t n = strlen(path), k = strlen(tail);
    if (n <= k || strcmp(path + n - k, tail) != 0 || n - k >= size) return false;
    memcpy(prefix, path, n - k);
    prefix[n - k] = '\0';
    return true;
}

/* One shard read on its own: mapped and adopted by `owner` (open), or its
 * header only (inspect). */
static int read_shard(const char *path, bool header_only, const amn_limits *lim, amn_model *owner,
                      amn_model **out, amn_error *err) {
    amn_model *m = amn_model_new("gguf");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    amn_source src;
    int rc;
    if (header_only) {
        if (!(rc = amn_source_file_open(path, &src, err))) {
            rc = gguf_read(&src, NULL, lim, m, err);
            amn_source_file_close(&src);
        }
    } else {
        amn_map *map = NULL;
        if (!(rc = amn_map_open(path, &map, err)) &&
            !(rc = amn_model_adopt(owner, map, amn_map_release, err))) {
            const uint64_t size = amn_map_size(map);
            if (size > SIZE_MAX)
                rc = amn_error_set(err, AMN_E_LIMIT, "%s: file too large", path);
            else {
                amn_source_memory(&src, amn_map_data(map), (size_t)size, path);
                rc = gguf_read(&src, amn_map_data(map), lim, m, err);
            }
        }
    }
    if (rc) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}

/* One shard the core holds (sib: a member of a packed folder), read as
 * read_shard reads a file; its bytes live as long as the model does. */
static int read_sibling(const amn_sibling *s, const char *path, bool header_only,
                        const amn_limits *lim, amn_model **out, amn_error *err) {
    if (!header_only && !s->data)
        return amn_error_set(err, AMN_E_INVALID, "%s: the shard's bytes are not held", path);
    amn_model *m = amn_model_new("gguf");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    amn_source src = s->src;
    if (!src.name) src.name = path;
    int rc = gguf_read(&src, header_only ? NULL : s->data, lim, m, err);
    if (rc) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}

/* Shard i's keys against shard 1's. */
static int check_shard(const amn_model *s, const char *path, unsigned i, const split_keys *first,
                       amn_error *err) {
    split_keys k;
    int rc = read_keys(s, path, &k, err);
    if (rc) return rc;
    if (!k.has_no || !k.has_count)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: not a shard of a split GGUF (no %s / %s key), though named as "
                             "shard %u of %u",
                             path, KEY_NO, KEY_COUNT, i + 1, first->count);
    if (k.count != first->count)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: a shard of a split in %u files, not %u (%s differs: a shard of "
                             "another model?)",
                             path, k.count, first->count, KEY_COUNT);
    if (k.no != i)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: %s is %u, but the file is named as shard %u (%s %u)", path,
                             KEY_NO, k.no, i + 1, KEY_NO, i);
    if (k.has_tensors && k.tensors != first->tensors)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: %s is %d, shard 1's is %d (a shard of another model?)", path,
                             KEY_TENSORS, k.tensors, first->tensors);
    return AMN_OK;
}

/* Shard i's tensors appended to the model, each marked with its shard. */
static int add_shard_tensors(amn_model *m, const amn_model *s, const char *path, unsigned i,
                             const amn_limits *lim, amn_error *err) {
    for (size_t j = 0; j < amn_model_tensor_count(s); j++) {
        amn_tensor t = *amn_model_tensor(s, j);
        t.struct_size = sizeof t;
        t.shard = i;
        const int64_t dup = amn_model_find(m, t.name);
        if (dup >= 0)
            return amn_error_set(err, AMN_E_PARSE,
                                 "%s: tensor %s is also in shard %u of the split GGUF", path,
                                 t.name, amn_model_tensor(m, (size_t)dup)->shard + 1);
        if (amn_model_tensor_count(m) >= lim->max_tensors)
            return amn_error_set(err, AMN_E_LIMIT, "%s: the shards hold more than %llu tensors",
                                 path, (unsigned long long)lim->max_tensors);
        int rc = amn_model_add_tensor(m, &t, err);
        if (rc) return rc;
    }
    return AMN_OK;
}

/* Every shard of the split `given` (shard first->no, read from path) is
 * part of, into a new model. */
static int open_all(const char *path, const amn_siblings *sib, amn_model *given,
                    const split_keys *gk, bool header_only, const amn_limits *lim, amn_model **out,
                    amn_error *err) {
    char prefix[4096], shard[4096 + 32];
    if (!split_prefix(path, gk->no, gk->count, prefix, sizeof prefix))
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: shard %u of a split GGUF of %u files, but not named "
                             "NAME-%05u-of-%05u.gguf (the other shards are found by that name)",
                             path, gk->no + 1, gk->count, gk->no + 1, gk->count);
    amn_model *m = amn_model_new("gguf");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    split_keys first = *gk;
    int rc = AMN_OK;
    for (unsigned i = 0; !rc && i < gk->count; i++) {
        snprintf(shard, sizeof shard, "%s-%05u-of-%05u.gguf", prefix, i + 1, gk->count);
        amn_model *s = given;
        if (i != gk->no) {
            amn_sibling sf = {.struct_size = sizeof sf};
            const char *base = strrchr(shard, '/') ? strrchr(shard, '/') + 1 : shard;
            FILE *f = sib ? NULL : fopen(shard, "rb");
            if (sib ? !sib->find(sib->ctx, base, &sf) : !f) {
                rc = amn_error_set(err, AMN_E_PARSE,
                                   "%s: shard %u of the split GGUF is missing (no %s)", path, i + 1,
                                   shard);
                break;
            }
            if (f) fclose(f);
            rc = sib ? read_sibling(&sf, shard, header_only, lim, &s, err)
                     : read_shard(shard, header_only, lim, m, &s, err);
            if (rc) break;
        }
        if (i == 0) { /* shard 1: the model's metadata, its split keys the reference */
            if (!(rc = read_keys(s, shard, &first, err)) && !first.has_tensors)
                rc = amn_error_set(err, AMN_E_PARSE, "%s: no %s key (llama.cpp requires it)", shard,
                                   KEY_TENSORS);
            first.count = gk->count; /* compared by check_shard below */
            for (size_t k = 0; !rc && k < amn_model_kv_count(s); k++)
                rc = amn_model_add_kv(m, amn_model_kv(s, k), err);
        }
        if (!rc) rc = check_shard(s, shard, i, &first, err);
        if (!rc) rc = add_shard_tensors(m, s, shard, i, lim, err);
        if (s != given) amn_model_free(s);
    }
    if (!rc && (first.tensors < 0 || amn_model_tensor_count(m) != (size_t)first.tensors))
        rc = amn_error_set(err, AMN_E_PARSE,
                           "%s: %s is %d, but the %u shards hold %zu tensors (a shard missing "
                           "or of another model?)",
                           path, KEY_TENSORS, first.tensors, gk->count, amn_model_tensor_count(m));
    char label[64];
    snprintf(label, sizeof label, "%s, split in %u files", amn_model_label(given), gk->count);
    if (!rc) rc = amn_model_set_label(m, label, err);
    if (rc) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}

int gguf_split_resolve(const char *path, const amn_siblings *sib, amn_model *m, bool header_only,
                       const amn_limits *lim, amn_model **out, amn_error *err) {
    split_keys k;
    const char *name = path ? path : "GGUF";
    int rc = read_keys(m, name, &k, err);
    if (!rc && k.has_count && k.count > 1) {
        if (!k.has_no)
            rc = amn_error_set(err, AMN_E_PARSE, "%s: %s is %u but there is no %s", name, KEY_COUNT,
                               k.count, KEY_NO);
        else if (k.no >= k.count)
            rc = amn_error_set(err, AMN_E_PARSE, "%s: %s %u is not below %s %u", name, KEY_NO, k.no,
                               KEY_COUNT, k.count);
        else if (!path)
            rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                               "unsupported: a shard of a split GGUF read from a stream (open it "
                               "by its file name, beside the other shards)");
        else
            rc = open_all(path, sib, m, &k, header_only, lim, out, err);
        amn_model_free(m);
        return rc;
    }
    if (rc) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}
