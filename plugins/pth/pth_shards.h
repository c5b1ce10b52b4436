/* Sharded PyTorch checkpoints (private to the pth plugin). */
#ifndef PTH_SHARDS_H
#define PTH_SHARDS_H

#include <stdbool.h>
#include <stdint.h>

#include "amn/plugin.h"

/* One checkpoint from src (map: its bytes, NULL for header-only). */
int pth_run(const amn_source *src, const uint8_t *map, const char *path, const amn_limits *lim,
            amn_model **out, amn_error *err);
/* path ends with .bin.index.json */
bool pth_is_index_path(const char *path);
/* A folder holding pytorch_model.bin.index.json and no .safetensors file. */
bool pth_is_sharded_dir(const char *path);
/* A pytorch_model.bin.index.json (or the folder holding it) as one model:
 * every shard it names, in order of first mention, opened as a checkpoint. */
int pth_open_sharded(const char *path, bool header_only, const amn_limits *lim, amn_model **out,
                     amn_error *err);

#endif
