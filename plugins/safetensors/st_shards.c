/* Sharded models: a model.safetensors.index.json whose weight_map names the
 * shard of every tensor, or a directory of shards. Either opens as one model. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "amn/kit/shard_path.h"
#include "st_internal.h"

#define INDEX_SUFFIX ".safetensors.index.json"

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

bool st_is_index_path(const char *path) {
    return path && ends_with(path, INDEX_SUFFIX);
}

static int add_shard_file(const char *path, bool header_only, const amn_limits *lim, amn_model *m,
                          amn_error *err);

static int add_shard(const char *dir, const char *file, bool header_only, const amn_limits *lim,
                     amn_model *m, amn_error *err) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >= sizeof path)
        return amn_error_set(err, AMN_E_INVALID, "%s/%s: path too long", dir, file);
    int rc = add_shard_file(path, header_only, lim, m, err);
    /* The model refuses a second tensor of a name: say it is two shards'. */
    static const char dup[] = "duplicate tensor name ";
    if (rc == AMN_E_PARSE && err && strncmp(err->msg, dup, sizeof dup - 1) == 0) {
        char name[256];
        snprintf(name, sizeof name, "%s", err->msg + sizeof dup - 1);
        rc = amn_error_set(err, AMN_E_PARSE,
                           "%s: tensor %s is in two shards (%s and an earlier one)", dir, name,
                           file);
    }
    return rc;
}

static int add_shard_file(const char *path, bool header_only, const amn_limits *lim, amn_model *m,
                          amn_error *err) {
    int rc;
    if (header_only) {
        amn_source src;
        if ((rc = amn_source_file_open(path, &src, err))) return rc;
        rc = st_read_header(&src, NULL, lim, m, err);
        amn_source_file_close(&src);
        return rc;
    }
    amn_map *map;
    if ((rc = amn_map_open(path, &map, err))) return rc;
    if ((rc = amn_model_adopt(m, map, amn_map_release, err))) return rc;
    amn_source src;
    amn_source_memory(&src, amn_map_data(map), (size_t)amn_map_size(map), amn_map_path(map));
    return st_read_header(&src, amn_map_data(map), lim, m, err);
}

static int open_index(const char *path, bool header_only, const amn_limits *lim, amn_model *m,
                      amn_error *err) {
    amn_kit_index ix;
    int rc = amn_kit_index_open(path, ".safetensors", lim, &ix, err);
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

static int open_dir(const char *dir, bool header_only, const amn_limits *lim, amn_model *m,
                    amn_error *err) {
    DIR *d = opendir(dir);
    if (!d) return amn_error_set(err, AMN_E_IO, "%s: cannot read directory", dir);
    char **names = NULL, *index = NULL;
    size_t n = 0;
    int rc = AMN_OK;
    struct dirent *e;
    while ((e = readdir(d)) && !rc) {
        if (e->d_name[0] == '.') continue;
        if (ends_with(e->d_name, INDEX_SUFFIX)) {
            if (index)
                rc = amn_error_set(err, AMN_E_PARSE, "%s: more than one index file", dir);
            else if (!(index = strdup(e->d_name)))
                rc = amn_error_set(err, AMN_E_NOMEM, "oom");
            continue;
        }
        if (!ends_with(e->d_name, ".safetensors")) continue;
        char **p = realloc(names, (n + 1) * sizeof *p);
        if (!p || !(p[n] = strdup(e->d_name))) {
            if (p) names = p;
            rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
            break;
        }
        names = p;
        n++;
    }
    closedir(d);
    if (!rc && index) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, index);
        rc = open_index(path, header_only, lim, m, err);
    } else if (!rc) {
        if (n == 0) rc = amn_error_set(err, AMN_E_PARSE, "%s: no .safetensors files", dir);
        qsort(names, n, sizeof *names, cmp_str);
        for (size_t i = 0; !rc && i < n; i++) {
            rc = amn_kit_check_shard(dir, names[i], err);
            if (!rc) rc = add_shard(dir, names[i], header_only, lim, m, err);
        }
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    free(index);
    return rc;
}

int st_open_sharded(const char *path, bool header_only, const amn_limits *lim, amn_model **out,
                    amn_error *err) {
    amn_model *m = amn_model_new("safetensors");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    struct stat st;
    int rc = stat(path, &st) != 0  ? amn_error_set(err, AMN_E_IO, "%s: no such file", path)
             : S_ISDIR(st.st_mode) ? open_dir(path, header_only, lim, m, err)
                                   : open_index(path, header_only, lim, m, err);
    if (!rc) rc = amn_model_set_label(m, "safetensors (sharded)", err);
    if (rc) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}
