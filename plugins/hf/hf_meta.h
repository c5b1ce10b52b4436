/* hf_meta.h — general.* keys as gguf-py's metadata.py derives them. */
#ifndef HF_META_H
#define HF_META_H

#include <json-c/json.h>

#include "hf_kv.h"

/* The model-identity keys set_gguf_meta_model writes (sampling keys from
 * generation_config.json, general.name, organization, finetune, basename,
 * version, size_label), from config.json's _name_or_path and the folder's
 * name; total_params weighs a size in a name, size_label (gguf.size_label
 * of the tensors) is used when the names give none. gen may be NULL. */
int hf_meta_general(hf_kvs *l, const char *dir, json_object *cfg, json_object *gen,
                    uint64_t total_params, const char *size_label, amn_error *err);

/* gguf.size_label for a model without experts ("134K", "7.2B"), into buf. */
void hf_meta_size_label(uint64_t params, char *buf, size_t size);

#endif
