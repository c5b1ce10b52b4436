/* Shards of a weight index: inside the model folder (amn/kit/shard_path.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "amn/kit/json_file.h"
#include "amn/kit/shard_path.h"

bool amn_kit_shard_name_ok(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 && n > k &&
           strcmp(s + n - k, suffix) == 0;
}

int amn_kit_check_shard(const char *dir, const char *file, amn_error *err) {
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >= sizeof path)
        return amn_error_set(err, AMN_E_INVALID, "%s/%s: path too long", dir, file);
    struct stat st;
    if (lstat(path, &st) != 0)
        return amn_error_set(err, AMN_E_PARSE, "%s: shard %s does not exist", dir, file);
    if (!S_ISLNK(st.st_mode)) return AMN_OK;
    char root[PATH_MAX], target[PATH_MAX];
    if (!realpath(dir, root) || !realpath(path, target))
        return amn_error_set(err, AMN_E_PARSE, "%s: shard %s is a broken symlink", dir, file);
    /* .../models--X/snapshots/REV: the repository is the allowed root. */
    char up[PATH_MAX];
    snprintf(up, sizeof up, "%s", root);
    char *rev = strrchr(up, '/'), *snap = NULL, *repo = NULL;
    if (rev && rev > up) *rev = '\0', snap = strrchr(up, '/');
    if (snap && snap > up && strcmp(snap + 1, "snapshots") == 0)
        *snap = '\0', repo = strrchr(up, '/');
    if (repo && strncmp(repo + 1, "models--", 8) == 0) snprintf(root, sizeof root, "%s", up);
    const size_t n = strlen(root);
    if (!n || strncmp(target, root, n) != 0 || target[n] != '/')
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: shard %s is a symlink leading outside the model folder (to %s)",
                             dir, file, target);
    return AMN_OK;
}

void amn_kit_index_free(amn_kit_index *ix) {
    free(ix->shards);
    json_object_put(ix->root);
    memset(ix, 0, sizeof *ix);
}

/* The distinct shard files of the weight_map, in order of first mention. */
static int collect_shards(amn_kit_index *ix, const char *path, const char *suffix, amn_error *err) {
    json_object_object_foreach(ix->map, name, file) {
        const char *f =
            json_object_is_type(file, json_type_string) ? json_object_get_string(file) : NULL;
        if (!f || !amn_kit_shard_name_ok(f, suffix))
            return amn_error_set(err, AMN_E_PARSE,
                                 "%s: weight_map entry %s names a bad shard (not a %s file "
                                 "inside the model folder)",
                                 path, name, suffix);
        bool dup = false;
        for (size_t i = 0; i < ix->n_shards && !dup; i++) dup = strcmp(ix->shards[i], f) == 0;
        if (dup) continue;
        const char **p = realloc(ix->shards, (ix->n_shards + 1) * sizeof *p);
        if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        ix->shards = p;
        ix->shards[ix->n_shards++] = f;
    }
    return AMN_OK;
}

int amn_kit_index_open(const char *path, const char *suffix, const amn_limits *lim,
                       amn_kit_index *ix, amn_error *err) {
    memset(ix, 0, sizeof *ix);
    const amn_kit_json_caps caps = {.max_bytes = lim->max_header_bytes,
                                    .max_depth = lim->max_depth < 32 ? (int)lim->max_depth : 32,
                                    .bad_code = AMN_E_PARSE};
    int rc = amn_kit_json_read_object(path, NULL, &caps, &ix->root, err);
    if (rc) return rc;
    if (!json_object_object_get_ex(ix->root, "weight_map", &ix->map) ||
        !json_object_is_type(ix->map, json_type_object))
        rc = amn_error_set(err, AMN_E_PARSE, "%s: no weight_map object", path);
    if (!rc) {
        snprintf(ix->dir, sizeof ix->dir, "%s", path);
        char *slash = strrchr(ix->dir, '/');
        if (slash)
            *slash = '\0';
        else
            strcpy(ix->dir, ".");
        rc = collect_shards(ix, path, suffix, err);
    }
    for (size_t i = 0; !rc && i < ix->n_shards; i++)
        rc = amn_kit_check_shard(ix->dir, ix->shards[i], err);
    if (rc) amn_kit_index_free(ix);
    return rc;
}

int amn_kit_index_check_held(const amn_kit_index *ix, const char *path, const amn_model *m,
                             amn_error *err) {
    json_object_object_foreach(ix->map, name, file) {
        (void)file;
        if (amn_model_find(m, name) < 0)
            return amn_error_set(err, AMN_E_PARSE, "%s: weight_map names %s, no shard holds it",
                                 path, name);
    }
    return AMN_OK;
}
