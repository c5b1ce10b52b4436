/* amn-gguf: GGUF block-quant dequantization (scheme "gguf"). */
#include "amn/plugin.h"
#include "gguf_scheme.h"

static int gguf_plugin_init(amn_registrar *r) {
    int rc = amn_register_scheme(r, &gguf_block_scheme);
    /* The GGUF container adds: if (rc == AMN_OK) rc = amn_register_format(r, &gguf_format); */
    return rc;
}

AMN_PLUGIN_DEFINE(gguf, "0.1.0", "GGUF block-quant dequantization", "MIT", gguf_plugin_init);
