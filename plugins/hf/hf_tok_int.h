/* hf_tok_int.h — the check-text encoder's pieces of text (code points), shared
 * by the model side (hf_tok.c) and the normalizers / pre-tokenizers
 * (hf_tok_split.c). */
#ifndef AMN_PLUGIN_HF_TOK_INT_H
#define AMN_PLUGIN_HF_TOK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "amn/error.h"

#define HF_TOK_MAX_CP 1024 /* the check text is 350 code points; byte-level 3x that at most */

typedef struct hf_piece {
    uint32_t *cp;
    size_t n;
} hf_piece;

typedef struct hf_pieces {
    hf_piece *v;
    size_t n, cap;
    bool byte_level; /* code points are GPT-2's byte characters */
    uint64_t budget; /* regex steps left */
} hf_pieces;

/* Appends a copy of cp[0, n); an empty piece is dropped, as the tokenizers
 * library drops empty splits. */
int hf_push_piece(hf_pieces *ps, const uint32_t *cp, size_t n, amn_error *err);
void hf_free_pieces(hf_pieces *ps);
size_t hf_utf8_encode(uint32_t c, char *o);
/* At most cap code points of s[0, n) (valid UTF-8 assumed: json-c checked it). */
size_t hf_utf8_decode(const char *s, size_t n, uint32_t *out, size_t cap);

/* obj.type is the string t / the type's name ("?" when absent). */
bool hf_tok_is_type(json_object *o, const char *t);
const char *hf_tok_type_name(json_object *o);

/* The normalizer of tokenizer.json applied to every piece. */
int hf_tok_normalize(hf_pieces *ps, json_object *norm, amn_error *err);
/* The pre-tokenizer: every piece split into the pieces it makes. */
int hf_tok_pre_tokenize(hf_pieces *ps, json_object *pt, amn_error *err);

#endif
