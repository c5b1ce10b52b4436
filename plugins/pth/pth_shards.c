/* Sharded PyTorch checkpoints: pytorch_model.bin.index.json, whose
 * weight_map names the shard (pytorch_model-0000K-of-0000N.bin) of every
 * tensor, read as one model. Each shard is opened as a checkpoint of its
 * own and its tensors moved into the whole model, which keeps the shard's
 * mapping and model (tensors point into them). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "amn/kit/json_file.h"
#include "amn/kit/shard_path.h"
#include "amn/kit/zip_reader.h"
#include "pth_shards.h"

#define INDEX_SUFFIX ".bin.index.json"
#define INDEX_NAME   "pytorch_model.bin.index.json"

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

bool pth_is_index_path(const char *path) {
    return path && ends_with(path, INDEX_SUFFIX);
}

bool pth_is_sharded_dir(const char *path) {
    char idx[4096];
    struct stat st;
    if (!path || (size_t)snprintf(idx, sizeof idx, "%s/%s", path, INDEX_NAME) >= sizeof idx ||
        stat(idx, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    DIR *d = opendir(path);
    if (!d) return false;
    bool st_found = false;
    struct dirent *e;
    while (!st_found && (e = readdir(d))) st_found = ends_with(e->d_name, ".safetensors");
    closedir(d);
    return !st_found; /* safetensors, where both are, is what transformers loads */
}

/* One shard's tensors into m; the shard's model and mapping then belong to m. */
static int add_shard(const char *dir, const char *file, bool header_only, const amn_limits *lim,
                     amn_model *m, amn_error *err) {
    int rc = amn_kit_check_shard(dir, file, err);
    if (rc) return rc;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >= sizeof path)
        return amn_error_set(err, AMN_E_INVALID, "%s/%s: path too long", dir, file);
    amn_model *part = NULL;
    if (header_only) {
        amn_source src;
        if ((rc = amn_source_file_open(path, &src, err))) return rc;
        rc = pth_run(&src, NULL, path, lim, &part, err);
        amn_source_file_close(&src);
    } else {
        amn_map *map;
        if ((rc = amn_map_open(path, &map, err))) return rc;
        if ((rc = amn_model_adopt(m, map, amn_map_release, err))) return rc;
        zip_memsrc ms;
        zip_memsrc_init(&ms, amn_map_data(map), amn_map_size(map), path);
        rc = pth_run(&ms.src, amn_map_data(map), path, lim, &part, err);
    }
    if (rc) return rc;
    if ((rc = amn_model_adopt(m, part, (void (*)(void *))amn_model_free, err))) return rc;
    for (size_t i = 0; i < amn_model_tensor_count(part); i++) {
        const amn_tensor *t = amn_model_tensor(part, i);
        if (amn_model_find(m, t->name) >= 0)
            return amn_error_set(err, AMN_E_PARSE,
                                 "%s: tensor %s is in two shards (%s and an earlier one)", dir,
                                 t->name, file);
        if ((rc = amn_model_add_tensor(m, t, err))) return rc;
    }
    return AMN_OK;
}

static int open_index(const char *path, bool header_only, const amn_limits *lim, amn_model *m,
                      amn_error *err) {
    const amn_kit_json_caps caps = {.max_bytes = lim->max_header_bytes,
                                    .max_depth = lim->max_depth < 32 ? (int)lim->max_depth : 32,
                                    .bad_code = AMN_E_PARSE};
    json_object *root = NULL, *map = NULL;
    int rc = amn_kit_json_read_object(path, NULL, &caps, &root, err);
    if (rc) return rc;
    if (!json_object_object_get_ex(root, "weight_map", &map) ||
        !json_object_is_type(map, json_type_object)) {
        json_object_put(root);
        return amn_error_set(err, AMN_E_PARSE, "%s: no weight_map object", path);
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");
    const char **seen = NULL;
    size_t n_seen = 0;
    json_object_object_foreach(map, name, file) {
        const char *f =
            json_object_is_type(file, json_type_string) ? json_object_get_string(file) : NULL;
        if (!f || !amn_kit_shard_name_ok(f, ".bin")) {
            rc = amn_error_set(err, AMN_E_PARSE,
                               "%s: weight_map entry %s names a bad shard (not a .bin file "
                               "inside the model folder)",
                               path, name);
            break;
        }
        bool dup = false;
        for (size_t i = 0; i < n_seen && !dup; i++) dup = strcmp(seen[i], f) == 0;
        if (dup) continue;
        const char **p = realloc(seen, (n_seen + 1) * sizeof *p);
        if (!p) {
            rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
            break;
        }
        seen = p;
        seen[n_seen++] = f;
    }
    /* Every shard checked before any is read. */
    for (size_t i = 0; !rc && i < n_seen; i++) rc = amn_kit_check_shard(dir, seen[i], err);
    for (size_t i = 0; !rc && i < n_seen; i++)
        rc = add_shard(dir, seen[i], header_only, lim, m, err);
    free(seen);
    if (!rc) {
        json_object_object_foreach(map, name2, file2) {
            const int64_t at = amn_model_find(m, name2);
            (void)file2;
            if (at < 0) {
                rc = amn_error_set(err, AMN_E_PARSE, "%s: weight_map names %s, no shard holds it",
                                   path, name2);
                break;
            }
        }
    }
    json_object_put(root);
    return rc;
}

int pth_open_sharded(const char *path, bool header_only, const amn_limits *lim, amn_model **out,
                     amn_error *err) {
    *out = NULL;
    amn_model *m = amn_model_new("pth");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    char idx[4096];
    struct stat st;
    int rc = AMN_OK;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        if ((size_t)snprintf(idx, sizeof idx, "%s/%s", path, INDEX_NAME) >= sizeof idx)
            rc = amn_error_set(err, AMN_E_INVALID, "%s: path too long", path);
    } else {
        snprintf(idx, sizeof idx, "%s", path);
    }
    if (!rc) rc = open_index(idx, header_only, lim, m, err);
    if (!rc) rc = amn_model_set_label(m, "PyTorch state_dict (sharded)", err);
    if (rc) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}
