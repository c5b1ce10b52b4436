/* Sharded PyTorch checkpoints (private to the pth plugin). */
#ifndef PTH_SHARDS_H
#define PTH_SHARDS_H

#include <stdbool.h>
#include <stdint.h>

#include "amn/plugin.h"

/* One checkpoint from src (map: its mapping, NULL for header-only). */
int pth_run(const amn_source *src, const amn_map *map, const char *path, const amn_limits *lim,
            amn_model **out, amn_error *err);
/* path ends with .bin.index.json */
bool pth_is_index_path(const char *path);
/* What a model folder with no .safetensors file holds, in the order
 * transformers' from_pretrained looks for it: pytorch_model.bin first, then
 * pytorch_model.bin.index.json; else shards (pytorch_model*.bin) without
 * their index, all read in name order as llama.cpp's converter reads them
 * (and as a folder of .safetensors files without an index is read).
 * Safetensors, where present, is what transformers loads, so such a folder
 * is the safetensors plugin's. */
typedef enum pth_dir_kind {
    PTH_DIR_NONE,
    PTH_DIR_SINGLE,
    PTH_DIR_INDEX,
    PTH_DIR_PARTS
} pth_dir_kind;
pth_dir_kind pth_dir_weights(const char *path);
/* A pytorch_model.bin.index.json as one model: every shard it names, in
 * order of first mention, opened as a checkpoint. A folder (pth_dir_weights
 * not NONE) opens its pytorch_model.bin, its index or its shards. */
int pth_open_sharded(const char *path, bool header_only, const amn_limits *lim, amn_model **out,
                     amn_error *err);

#endif
