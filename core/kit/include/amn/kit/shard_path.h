/* amn/kit/shard_path.h — plugin kit: the shards a weight index names
 * (model.safetensors.index.json, pytorch_model.bin.index.json) must be files
 * inside the model folder. */
#ifndef AMN_KIT_SHARD_PATH_H
#define AMN_KIT_SHARD_PATH_H

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "amn/error.h"
#include "amn/format.h"
#include "amn/model.h"

/* A shard name an index may hold: one plain file name ending in suffix
 * (no '/', not "." or ".."). */
bool amn_kit_shard_name_ok(const char *name, const char *suffix);

/* dir/file must exist, and a symlink must lead inside dir — or, for a
 * Hugging Face cache snapshot (models--X/snapshots/REV), inside models--X,
 * where its blobs are. AMN_E_PARSE: "<dir>: shard <file> does not exist",
 * "... is a broken symlink", "... is a symlink leading outside the model
 * folder (to <target>)". */
int amn_kit_check_shard(const char *dir, const char *file, amn_error *err);

/* A weight index read and checked: its weight_map (tensor name -> shard
 * file) and the distinct shard files it names, in order of first mention,
 * each a plain name ending in the format's suffix and passing
 * amn_kit_check_shard — all before the caller reads any shard. */
typedef struct amn_kit_index {
    json_object *root;   /* owns map */
    json_object *map;    /* weight_map */
    char dir[4096];      /* the index's folder */
    const char **shards; /* strings of map */
    size_t n_shards;
} amn_kit_index;

/* AMN_E_PARSE: "<path>: no weight_map object", "<path>: weight_map entry
 * <name> names a bad shard (not a <suffix> file inside the model folder)",
 * or amn_kit_check_shard's errors. On failure nothing is left to free. */
int amn_kit_index_open(const char *path, const char *suffix, const amn_limits *lim,
                       amn_kit_index *ix, amn_error *err);
/* Every name of the weight_map is a tensor of m, once the shards are read:
 * AMN_E_PARSE "<path>: weight_map names <name>, no shard holds it". */
int amn_kit_index_check_held(const amn_kit_index *ix, const char *path, const amn_model *m,
                             amn_error *err);
void amn_kit_index_free(amn_kit_index *ix);

#endif
