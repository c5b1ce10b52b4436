/* hf_tok_regex.h — the regular expressions of Hugging Face pre-tokenizers
 * (Oniguruma syntax as the tokenizers library uses it), matched by a small
 * backtracking engine over code points: literals (escaped symbols, \n \t
 * ... \xHH \x{H..} \uHHHH), '.', classes with ranges, \s \S \d \D \w \W \h
 * \H \p{..} \P{..} (general categories), groups ( ) (?: ) (?<name> ) (?i: ),
 * atomic groups (?> ), look-aheads (?= ) (?! ), the assertions ^ $ \A \z \Z
 * \b \B, alternation, greedy, lazy and possessive ? * + and {m,n}.
 * Anything else (look-behinds, back-references, inline options, nested
 * classes, scripts) is refused, never read another way.
 * Unicode general categories are known for ASCII and for the code points of
 * the converter's check text only (hf_tok_ucat): enough to reproduce
 * tokenizer.encode(chktxt), which is all this engine is for. */
#ifndef AMN_PLUGIN_HF_TOK_REGEX_H
#define AMN_PLUGIN_HF_TOK_REGEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/error.h"

typedef struct hf_re hf_re;

int hf_re_compile(const char *pattern, hf_re **out, amn_error *err);
void hf_re_free(hf_re *re);
/* Leftmost-first match in text[from, n): 1 with [*s, *e), 0 for none; -1
 * (AMN_E_LIMIT in err) when *budget (steps left, decremented) ran out or the
 * backtracking went too deep. */
int hf_re_find(const hf_re *re, const uint32_t *text, size_t n, size_t from, size_t *s, size_t *e,
               uint64_t *budget, amn_error *err);

/* General category ("Lu", "Nd", ...) of a code point, NULL when unknown. */
const char *hf_tok_ucat(uint32_t cp);
bool hf_tok_is_space(uint32_t cp); /* Unicode White_Space */

#endif
