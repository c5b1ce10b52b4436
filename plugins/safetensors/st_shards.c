/* Sharded models: a model.safetensors.index.json whose weight_map names the
 * shard of every tensor, or a directory of shards. Either opens as one model. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "amn/kit/json_file.h"
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

/* A shard name from an index must stay inside the index's directory. */
static bool safe_shard_name(const char *s) {
    return amn_kit_shard_name_ok(s, ".safetensors");
}

static int add_shard_file(const char *path, bool header_only, const amn_limits *lim, amn_model *m,
                          amn_error *err);

static int add_shard(const char *dir, const char *file, bool header_only, const amn_limits *lim,
                     amn_model *m, amn_error *err) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >= sizeof path)
        return amn_error_set(err, AMN_E_INVALID, "%s/%s: path too long", dir, file);
    int rc = amn_kit_check_shard(dir, file, err);
    if (rc) return rc;
    rc = add_shard_file(path, header_only, lim, m, err);
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

static int read_json_file(const char *path, const amn_limits *lim, json_object **out,
                          amn_error *err) {
    const amn_kit_json_caps caps = {.max_bytes = lim->max_header_bytes,
                                    .max_depth = lim->max_depth < 32 ? (int)lim->max_depth : 32,
                                    .bad_code = AMN_E_PARSE};
    return amn_kit_json_read_object(path, NULL, &caps, out, err);
}

static int open_index(const char *path, bool header_only, const amn_limits *lim, amn_model *m,
                      amn_error *err) {
    json_object *root = NULL, *map = NULL;
    int rc = read_json_file(path, lim, &root, err);
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
    /* Shards in order of first mention; each opened once. */
    const char **seen = NULL;
    size_t n_seen = 0;
    json_object_object_foreach(map, name, file) {
        if (!json_object_is_type(file, json_type_string) ||
            !safe_shard_name(json_object_get_string(file))) {
            rc = amn_error_set(err, AMN_E_PARSE,
                               "%s: weight_map entry %s names a bad shard (not a .safetensors "
                               "file inside the model folder)",
                               path, name);
            break;
        }
        const char *f = json_object_get_string(file);
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
        if ((rc = add_shard(dir, f, header_only, lim, m, err))) break;
    }
    free(seen);
    if (!rc) {
        json_object_object_foreach(map, name2, file2) {
            (void)file2;
            if (amn_model_find(m, name2) < 0) {
                rc = amn_error_set(err, AMN_E_PARSE, "%s: weight_map names %s, no shard holds it",
                                   path, name2);
                break;
            }
        }
    }
    json_object_put(root);
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
        for (size_t i = 0; !rc && i < n; i++)
            rc = add_shard(dir, names[i], header_only, lim, m, err);
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
