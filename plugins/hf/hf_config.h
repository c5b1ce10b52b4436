/* hf_config.h — config.json values as the converter's find_hparam reads them. */
#ifndef HF_CONFIG_H
#define HF_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "amn/error.h"

/* The value of the first of keys (NULL-terminated) the object holds, or
 * NULL (a JSON null counts as absent, as `is not None` tests skip it). */
json_object *hf_find(json_object *o, const char *const *keys);
/* An integer hparam in [0, 2^32): 1 found, 0 absent, else an AMN_E_* code (< 0). */
int hf_get_u32(json_object *o, const char *const *keys, uint32_t *v, amn_error *err);
/* A number (int or float) as float: 1 found, 0 absent, else an AMN_E_* code (< 0). */
int hf_get_f32(json_object *o, const char *const *keys, float *v, amn_error *err);

#endif
