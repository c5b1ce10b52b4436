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

/* One shard's tensors into m (checked by amn_kit_index_open); the shard's
 * model and mapping then belong to m. */
static int add_shard(const char *dir, const char *file, bool header_only, const amn_limits *lim,
                     amn_model *m, amn_error *err) {
    int rc;
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
    amn_kit_index ix;
    int rc = amn_kit_index_open(path, ".bin", lim, &ix, err);
    if (rc) return rc;
    for (size_t i = 0; !rc && i < ix.n_shards; i++)
        rc = add_shard(ix.dir, ix.shards[i], header_only, lim, m, err);
    if (!rc) rc = amn_kit_index_check_held(&ix, path, m, err);
    amn_kit_index_free(&ix);
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
