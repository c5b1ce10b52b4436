/* hf_card.h — the model card's front matter (README.md between "---"
 * lines), read as gguf-py's Metadata.load_model_card reads it with
 * yaml.safe_load, for the subset model cards use: top-level keys whose value
 * is a scalar, a block list ("- item" lines) or a flow list ("[a, b]").
 * Anything else (nested maps, multi-line scalars) leaves that key out. */
#ifndef HF_CARD_H
#define HF_CARD_H

#include <stdbool.h>
#include <stddef.h>

#include "amn/error.h"

typedef struct hf_card_val {
    char *key;
    bool is_list; /* a list; else one scalar */
    bool all_str; /* every scalar is a YAML string (not null, a number, a bool, a date) */
    char **items; /* the scalar(s), unquoted */
    size_t n;
} hf_card_val;

typedef struct hf_card {
    hf_card_val *v;
    size_t n;
} hf_card;

/* dir/README.md's front matter; no README or none: an empty card. */
int hf_card_read(const char *dir, hf_card *c, amn_error *err);
void hf_card_free(hf_card *c);
/* The key's value when it is a string scalar or a list of strings, else NULL. */
const hf_card_val *hf_card_get(const hf_card *c, const char *key);

#endif
