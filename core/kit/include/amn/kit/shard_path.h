/* amn/kit/shard_path.h — plugin kit: the shards a weight index names
 * (model.safetensors.index.json, pytorch_model.bin.index.json) must be files
 * inside the model folder. */
#ifndef AMN_KIT_SHARD_PATH_H
#define AMN_KIT_SHARD_PATH_H

#include <stdbool.h>

#include "amn/error.h"

/* A shard name an index may hold: one plain file name ending in suffix
 * (no '/', not "." or ".."). */
bool amn_kit_shard_name_ok(const char *name, const char *suffix);

/* dir/file must exist, and a symlink must lead inside dir — or, for a
 * Hugging Face cache snapshot (models--X/snapshots/REV), inside models--X,
 * where its blobs are. AMN_E_PARSE: "<dir>: shard <file> does not exist",
 * "... is a broken symlink", "... is a symlink leading outside the model
 * folder (to <target>)". */
int amn_kit_check_shard(const char *dir, const char *file, amn_error *err);

#endif
