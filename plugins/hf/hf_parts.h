/* The model files of a Hugging Face folder and their tensors, in the order
 * llama.cpp's converter reads them (ModelBase.index_tensors). */
#ifndef AMN_HF_PARTS_H
#define AMN_HF_PARTS_H

#include <stddef.h>

#include "amn/format.h"
#include "amn/kit/json_file.h"
#include "amn/model.h"

typedef struct hf_names {
    char **v;
    size_t n, cap;
} hf_names;

void hf_names_free(hf_names *s);

/* The caps of one JSON file of the folder: the file's own cap, lowered by
 * the user's limits. */
amn_kit_json_caps hf_json_caps(const amn_limits *lim, uint64_t cap);

/* Every tensor name of the folder's model files, file by file: the files
 * named model*.safetensors (or, where there is none, pytorch_model*.bin),
 * sorted, or those model.safetensors.index.json (pytorch_model.bin.index
 * .json) maps to, sorted; within a safetensors file its names sorted (gguf-py's
 * SafetensorsLocal), within a .bin file in the order its pickle holds them
 * (torch.load's dict), taken from m, the model the core opened from the
 * folder. Several pytorch_model*.bin files without their index are
 * unsupported (the core opens no such folder). A packed folder's
 * (amn_model_archive) files are those the core holds. */
int hf_tensor_order(const amn_model *m, const char *dir, const amn_limits *lim, hf_names *out,
                    amn_error *err);

#endif
