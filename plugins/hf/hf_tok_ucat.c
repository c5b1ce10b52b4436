/* Unicode general categories for ASCII and the non-ASCII code points of
 * convert_hf_to_gguf.py's check text, from the Unicode Character Database
 * 14.0 (as Python 3.11's unicodedata.category reports them). The pre-
 * tokenizer regexes only ever run on that text here, so this small table is
 * exactly the data they consult. */
#include <stddef.h>

#include "hf_tok_regex.h"

static const struct {
    uint32_t cp;
    const char cat[3];
} table[] = {
    {0x411, "Lu"},   {0x430, "Ll"},   {0x433, "Ll"},   {0x435, "Ll"},   {0x438, "Ll"},
    {0x43a, "Ll"},   {0x43b, "Ll"},   {0x43d, "Ll"},   {0x43e, "Ll"},   {0x440, "Ll"},
    {0x441, "Ll"},   {0x449, "Ll"},   {0x44a, "Ll"},   {0x1780, "Lo"},  {0x1785, "Lo"},
    {0x178f, "Lo"},  {0x1793, "Lo"},  {0x1796, "Lo"},  {0x179f, "Lo"},  {0x17a2, "Lo"},
    {0x17b6, "Mc"},  {0x17b7, "Mn"},  {0x17c1, "Mc"},  {0x17c2, "Mc"},  {0x17cb, "Mn"},
    {0x200d, "Cf"},  {0x2705, "So"},  {0x4f5c, "Lo"},  {0x5728, "Lo"},  {0x5929, "Lo"},
    {0x5de5, "Lo"},  {0x60f3, "Lo"},  {0x6211, "Lo"},  {0xfe0f, "Mn"},  {0xff5e, "Sm"},
    {0x1f32b, "So"}, {0x1f601, "So"}, {0x1f636, "So"}, {0x1f680, "So"}, {0x1f999, "So"},
};

static const char *ascii(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return "Lu";
    if (c >= 'a' && c <= 'z') return "Ll";
    if (c >= '0' && c <= '9') return "Nd";
    if (c < 0x20 || c == 0x7f) return "Cc";
    if (c == ' ') return "Zs";
    switch (c) {
    case '$':
        return "Sc";
    case '+':
    case '<':
    case '=':
    case '>':
    case '|':
    case '~':
        return "Sm";
    case '^':
    case '`':
        return "Sk";
    case '(':
    case '[':
    case '{':
        return "Ps";
    case ')':
    case ']':
    case '}':
        return "Pe";
    case '-':
        return "Pd";
    case '_':
        return "Pc";
    default:
        return "Po"; /* ! " # % & ' * , . / : ; ? @ \ */
    }
}

const char *hf_tok_ucat(uint32_t cp) {
    if (cp < 0x80) return ascii(cp);
    size_t lo = 0, hi = sizeof table / sizeof *table;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (table[mid].cp == cp) return table[mid].cat;
        if (table[mid].cp < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

bool hf_tok_is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
           c == 0x205f || c == 0x3000;
}
