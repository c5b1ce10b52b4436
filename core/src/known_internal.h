/* Private to core: what the project knows about quantized layouts, so that a
 * quantized tensor no loaded scheme claims is refused by name instead of
 * being copied through as if it were a plain one. */
#ifndef AMN_KNOWN_INTERNAL_H
#define AMN_KNOWN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "amn/model.h"

/* The quantization a model's settings files declare. */
typedef struct amni_quant_decl {
    char method[48]; /* "mxfp4", "compressed-tensors", "modelopt", ...; "" if none */
    char format[48]; /* compressed-tensors format, ModelOpt quant_algo; lower-case */
    char file[32];   /* "config.json" or "hf_quant_config.json" */
} amni_quant_decl;

/* Read config.json's quantization_config (or compression_config) and
 * hf_quant_config.json's quantization beside the model's path. Missing,
 * oversized or malformed files declare nothing. */
void amni_quant_decl_load(const amn_model *m, amni_quant_decl *d);

/* Why tensor i looks quantized: `what` names the layout or method
 * ("compressed-tensors pack-quantized", "MXFP4 (gpt-oss)"), `plugin` the
 * amn plugin that dequantizes it, NULL when no amn plugin does. */
typedef struct amni_unhandled {
    const char *what;
    const char *plugin;
} amni_unhandled;

/* True when tensor i (which no scheme claimed) matches a known quantized
 * layout by its name, dtype and companions, or has an integer / FP8 dtype
 * in a model whose settings declare a quantization method. */
bool amni_known_quantized_tensor(const amn_model *m, size_t i, const amni_quant_decl *d,
                                 amni_unhandled *out);

#endif
