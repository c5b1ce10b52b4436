/* Shards of a weight index: inside the model folder (amn/kit/shard_path.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
