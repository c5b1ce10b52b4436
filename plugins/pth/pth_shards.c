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
#define SINGLE_NAME  "pytorch_model.bin"
#define PART_PREFIX  "pytorch_model"
#define MAX_PARTS    65536 /* shards of a folder without an index */

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

bool pth_is_index_path(const char *path) {
    return path && ends_with(path, INDEX_SUFFIX);
}

static bool is_regular(const char *dir, const char *name) {
    char path[4096];
    struct stat st;
    return (size_t)snprintf(path, sizeof path, "%s/%s", dir, name) < sizeof path &&
           stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A shard of a folder without an index: what the converter's
 * get_model_part_names("pytorch_model", ".bin") takes. */
static bool is_part_name(const char *name) {
    return strncmp(name, PART_PREFIX, sizeof PART_PREFIX - 1) == 0 && ends_with(name, ".bin");
}

pth_dir_kind pth_dir_weights(const char *path) {
    if (!path) return PTH_DIR_NONE;
    pth_dir_kind kind = is_regular(path, SINGLE_NAME)  ? PTH_DIR_SINGLE
                        : is_regular(path, INDEX_NAME) ? PTH_DIR_INDEX
                                                       : PTH_DIR_NONE;
    DIR *d = opendir(path);
    if (!d) return PTH_DIR_NONE;
    bool st_found = false, part_found = false;
    struct dirent *e;
    while (!st_found && (e = readdir(d))) {
        st_found = ends_with(e->d_name, ".safetensors");
        part_found = part_found || (e->d_name[0] != '.' && is_part_name(e->d_name) &&
                                    is_regular(path, e->d_name));
    }
    closedir(d);
    if (kind == PTH_DIR_NONE && part_found) kind = PTH_DIR_PARTS;
    return st_found ? PTH_DIR_NONE : kind;
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
        rc = pth_run(&ms.src, map, path, lim, &part, err);
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

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The shards of a folder without an index, sorted by name (*names owned by
 * the caller, each and the array). */
static int list_parts(const char *dir, char ***names, size_t *n, amn_error *err) {
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return amn_error_set(err, AMN_E_IO, "%s: cannot read directory", dir);
    int rc = AMN_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !is_part_name(e->d_name)) continue;
        if (*n >= MAX_PARTS) {
            rc = amn_error_set(err, AMN_E_LIMIT, "%s: more than %d %s*.bin files", dir, MAX_PARTS,
                               PART_PREFIX);
            break;
        }
        char **p = realloc(*names, (*n + 1) * sizeof *p);
        if (p) *names = p;
        if (!p || !(p[*n] = strdup(e->d_name))) {
            rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (!rc && *n) qsort(*names, *n, sizeof **names, cmp_str);
    return rc;
}

static int open_parts(const char *dir, bool header_only, const amn_limits *lim, amn_model *m,
                      amn_error *err) {
    char **names;
    size_t n;
    int rc = list_parts(dir, &names, &n, err);
    for (size_t i = 0; !rc && i < n; i++) {
        rc = amn_kit_check_shard(dir, names[i], err);
        if (!rc) rc = add_shard(dir, names[i], header_only, lim, m, err);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* The model a folder holds: its single checkpoint, its index's shards, or
 * its shards without an index. */
static int open_folder(const char *dir, bool header_only, const amn_limits *lim, amn_model *m,
                       amn_error *err) {
    if (pth_dir_weights(dir) == PTH_DIR_SINGLE) {
        int rc = add_shard(dir, SINGLE_NAME, header_only, lim, m, err);
        return rc ? rc : amn_model_set_label(m, "PyTorch state_dict", err);
    }
    char idx[4096];
    if ((size_t)snprintf(idx, sizeof idx, "%s/%s", dir, INDEX_NAME) >= sizeof idx)
        return amn_error_set(err, AMN_E_INVALID, "%s: path too long", dir);
    int rc = pth_dir_weights(dir) == PTH_DIR_PARTS ? open_parts(dir, header_only, lim, m, err)
                                                   : open_index(idx, header_only, lim, m, err);
    return rc ? rc : amn_model_set_label(m, "PyTorch state_dict (sharded)", err);
}

int pth_open_sharded(const char *path, bool header_only, const amn_limits *lim, amn_model **out,
                     amn_error *err) {
    *out = NULL;
    amn_model *m = amn_model_new("pth");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    struct stat st;
    int rc;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        rc = open_folder(path, header_only, lim, m, err);
    } else {
        rc = open_index(path, header_only, lim, m, err);
        if (!rc) rc = amn_model_set_label(m, "PyTorch state_dict (sharded)", err);
    }
    if (rc) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}
