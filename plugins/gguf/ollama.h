/* ollama:<model>[:<tag>] -> the GGUF blob a local Ollama store holds for it. */
#ifndef AMN_GGUF_OLLAMA_H
#define AMN_GGUF_OLLAMA_H

#include <stddef.h>

#include "amn/error.h"
#include "amn/plugin.h"

/* spec is what follows "ollama:": "llama3.2", "llama3.2:1b",
 * "namespace/model:tag" or "host/namespace/model:tag" (tag defaults to
 * "latest", namespace to "library", host to "registry.ollama.ai"). The store
 * is $OLLAMA_MODELS, else ~/.ollama/models. Reads one manifest
 * (<store>/manifests/<host>/<namespace>/<model>/<tag>) and writes the path of
 * its model layer's blob (<store>/blobs/sha256-<hex>) into path. No network.
 * Errors: AMN_E_INVALID (a malformed name), AMN_E_IO (no such model, or its
 * blob is missing), AMN_E_PARSE (a malformed manifest), AMN_E_LIMIT. */
int amn_ollama_resolve(const char *spec, char *path, size_t path_size, amn_error *err);

/* The same as an input resolver for amn_register_resolver. */
extern const amn_resolver amn_ollama_resolver;

#endif
