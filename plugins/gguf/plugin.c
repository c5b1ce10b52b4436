/* amn-gguf: GGUF files (format "gguf"), their block-quant types (scheme
 * "gguf"), and ollama:<model>[:<tag>] inputs (resolver "ollama"). */
#include "amn/plugin.h"
#include "gguf_format.h"
#include "gguf_scheme.h"
#include "ollama.h"

static int gguf_plugin_init(amn_registrar *r) {
    int rc = amn_register_format(r, &amn_gguf_format);
    if (rc == AMN_OK) rc = amn_register_scheme(r, &gguf_block_scheme);
    if (rc == AMN_OK) rc = amn_register_resolver(r, &amn_ollama_resolver);
    return rc;
}

AMN_PLUGIN_DEFINE(gguf, AMN_VERSION_STRING,
                  "GGUF files, ggml block-quant dequantization, ollama: inputs", "MIT",
                  gguf_plugin_init);
