/* --dedup-tied: save_pretrained leaves out the tensors a model declares tied
 * (_tied_weights_keys, "lm_head.weight" for the *ForCausalLM classes) when
 * they share storage with another tensor, which they do when config.json
 * says "tie_word_embeddings": true. amn has no model classes: it drops
 * lm_head.weight when config.json says so explicitly (the default differs
 * between architectures, so a missing key keeps it) and the input's
 * lm_head.weight holds the same dtype, shape and bytes as the input
 * embeddings under one of the names transformers' architectures give them. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "folder.h"

#define CONFIG_MAX (4u << 20)

/* get_input_embeddings() of the common causal LMs: Llama, Mistral, Qwen2,
 * Gemma, Phi-3 (model.embed_tokens), GPT-2, GPT-J (transformer.wte), OPT
 * (model.decoder.embed_tokens), BLOOM, Falcon (transformer.word_embeddings),
 * multimodal wrappers (model.language_model.embed_tokens), T5 (shared). */
static const char *const embeddings[] = {"model.embed_tokens.weight",
                                         "transformer.wte.weight",
                                         "model.decoder.embed_tokens.weight",
                                         "transformer.word_embeddings.weight",
                                         "model.language_model.embed_tokens.weight",
                                         "shared.weight"};

static bool config_ties(const char *in_dir) {
    char path[PATH_MAX + 16];
    struct stat st;
    if (!in_dir || (size_t)snprintf(path, sizeof path, "%s/config.json", in_dir) >= sizeof path ||
        stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > CONFIG_MAX)
        return false;
    json_object *root = json_object_from_file(path), *tie;
    const bool ties = root && json_object_is_type(root, json_type_object) &&
                      json_object_object_get_ex(root, "tie_word_embeddings", &tie) &&
                      json_object_is_type(tie, json_type_boolean) && json_object_get_boolean(tie);
    json_object_put(root);
    return ties;
}

static bool same_shape(const amn_tensor *a, const amn_tensor *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes) return false;
    for (uint32_t i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

/* Byte for byte, a chunk at a time through amn_model_fetch (no copy of a
 * whole tensor); one storage under two names (.pth) is equal at once. */
static bool same_bytes(const amn_model *m, const amn_tensor *a, const amn_tensor *b) {
    if (!a->data || !b->data || !amn_tensor_is_plain(a) || !amn_tensor_is_plain(b) ||
        a->extent < a->nbytes || b->extent < b->nbytes)
        return false;
    if (a->data == b->data) return true;
    const size_t chunk = 1u << 20;
    for (uint64_t off = 0; off < a->nbytes; off += chunk) {
        const size_t n = a->nbytes - off < chunk ? (size_t)(a->nbytes - off) : chunk;
        amn_error e = {0};
        const void *x = amn_model_fetch(m, (const char *)a->data + off, n, 0, &e);
        const void *y = x ? amn_model_fetch(m, (const char *)b->data + off, n, 1, &e) : NULL;
        if (!y || memcmp(x, y, n) != 0) return false;
    }
    return true;
}

bool cli_tied_embeddings(const amn_model *m, const char *in_dir, char *name, size_t size) {
    name[0] = '\0';
    const int64_t head = amn_model_find(m, CLI_TIED_HEAD);
    if (head < 0) {
        fprintf(stderr, "amn: note: --dedup-tied: the input has no plain %s; nothing dropped\n",
                CLI_TIED_HEAD);
        return false;
    }
    if (!config_ties(in_dir)) {
        fprintf(stderr,
                "amn: note: --dedup-tied: config.json does not say \"tie_word_embeddings\": "
                "true; %s kept\n",
                CLI_TIED_HEAD);
        return false;
    }
    const amn_tensor *h = amn_model_tensor(m, (size_t)head);
    for (size_t i = 0; i < sizeof embeddings / sizeof *embeddings; i++) {
        const int64_t e = amn_model_find(m, embeddings[i]);
        if (e < 0) continue;
        const amn_tensor *t = amn_model_tensor(m, (size_t)e);
        if (same_shape(h, t) && same_bytes(m, h, t)) {
            snprintf(name, size, "%s", embeddings[i]);
            return true;
        }
        fprintf(stderr, "amn: note: --dedup-tied: %s differs from %s; kept\n", CLI_TIED_HEAD,
                embeddings[i]);
        return false;
    }
    fprintf(stderr, "amn: note: --dedup-tied: no input embeddings found; %s kept\n", CLI_TIED_HEAD);
    return false;
}
