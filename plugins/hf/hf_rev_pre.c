/* tokenizer.ggml.pre -> the pre-tokenizer of the tokenizer.json written for
 * a BPE (gpt2) GGUF (hf_rev.h): the splitting llama.cpp applies for that
 * name, as Hugging Face tokenizers' Sequence of Split (Isolated: matches
 * and the text between them both kept, as llama.cpp's unicode_regex_split
 * keeps them) followed by ByteLevel without its own regex, the form of the
 * upstream tokenizer.json files. The names llama.cpp tokenizes as Gemma's
 * BPE on raw UTF-8 get the Gemma 3 tokenizer.json's form instead: spaces
 * escaped as U+2581 by the normalizer, no splitting (its Split on " " finds
 * none left), BPE with byte fallback (hf_rev_files.c writes that model).
 *
 * Data carried over from llama.cpp's src/llama-vocab.cpp (commit 3af988fab):
 * the regex_exprs of each LLAMA_VOCAB_PRE_TYPE_* in llm_tokenizer_bpe, and
 * which tokenizer.ggml.pre names load() maps to each type, with the names
 * it sets ignore_merges for. Where llama.cpp rewrote an upstream regex
 * (case-insensitive groups spelled out, \p{Lu}-style classes emulated by
 * lookaheads) and kept the upstream one in a comment, the upstream regex is
 * written: Hugging Face tokenizers reads it and splits alike. Types that
 * llama.cpp splits with code rather than regexes, or whose BPE works on
 * raw UTF-8 instead of GPT-2's byte mapping, have no entry form here and
 * are refused. */
#include <json-c/json.h>
#include <string.h>

#include "hf_rev.h"

enum { PRE_SPLITS, PRE_GPT2, PRE_ESCAPED, PRE_REFUSED };

typedef struct pre_type {
    const char *type; /* llama.cpp's LLAMA_VOCAB_PRE_TYPE_* */
    int form;         /* PRE_SPLITS, PRE_GPT2: ByteLevel with GPT-2's regex,
                       * PRE_ESCAPED: spaces as U+2581, BPE with byte fallback */
    const char *regex[6];
} pre_type;

#define LLAMA3_RE                                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "                     \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_RE                                                                                   \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "                          \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define GPT4O_RE                                                                                   \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?"  \
    "i:'"                                                                                          \
    "s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}" \
    "\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "                            \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define DEEPSEEK3_RE                                                                               \
    "[!\"#$%&'()*+,\\-./"                                                                          \
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}"                   \
    "]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
#define ADAPTED_CASES "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

enum {
    T_DEFAULT,
    T_LLAMA3,
    T_JAIS2,
    T_DEEPSEEK_LLM,
    T_DEEPSEEK3_LLM,
    T_YOUTU,
    T_DEEPSEEK_CODER,
    T_FALCON,
    T_STARCODER,
    T_GPT2,
    T_QWEN2,
    T_QWEN35,
    T_PORO,
    T_CHATGLM4,
    T_VIKING,
    T_TEKKEN,
    T_CHAMELEON,
    T_GPT4O,
    T_GRANITE_EMB_MULTI,
    T_TINY_AYA,
    T_SUPERBPE,
    T_BAILINGMOE,
    T_SEED_CODER,
    T_LAGUNA,
    T_EXAONE_MOE,
    T_MINICPM5,
    T_KIMI_K2,
    T_AFMOE,
    T_GEMMA4,
    T_SARVAM_MOE,
    T_WHITESPACE,
};

static const pre_type types[] = {
    [T_DEFAULT] = {"DEFAULT",
                   PRE_SPLITS,
                   {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_RE, "\\p{N}+", "[0-9][0-9][0-9]"}},
    /* also DBRX, SMAUG: the same regex */
    [T_LLAMA3] = {"LLAMA3", PRE_SPLITS, {LLAMA3_RE}},
    [T_JAIS2] = {"JAIS2",
                 PRE_SPLITS,
                 {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                  "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|"
                  "\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|"
                  "\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"}},
    [T_DEEPSEEK_LLM] =
        {"DEEPSEEK_LLM",
         PRE_SPLITS,
         {"[\r\n]",
          "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆ"
          "Έ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷ"
          "ᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐ"
          "ῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄ"
          "Ⰰ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-"
          "Ｚａ-"
          "ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
          "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"}},
    /* also HUNYUAN_DENSE, JOYAI_LLM */
    [T_DEEPSEEK3_LLM] = {"DEEPSEEK3_LLM",
                         PRE_SPLITS,
                         {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", DEEPSEEK3_RE}},
    [T_YOUTU] =
        {"YOUTU",
         PRE_SPLITS,
         {"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-"
          "龥぀-"
          "ゟ゠-"
          "ヿ]"
          "+",
          "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}"
          "\\p{M}]+" ADAPTED_CASES
          "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}"
          "\\p{M}]*" ADAPTED_CASES "?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|"
          "\\s+(?!\\S)|\\s+"}},
    [T_DEEPSEEK_CODER] = {"DEEPSEEK_CODER",
                          PRE_SPLITS,
                          {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+",
                           "\\p{N}"}},
    [T_FALCON] = {"FALCON", PRE_SPLITS, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_RE, "[0-9][0-9][0-9]"}},
    /* also REFACT, COMMAND_R, SMOLLM, CODESHELL, EXAONE, MINERVA, MELLUM2 */
    [T_STARCODER] = {"STARCODER", PRE_SPLITS, {"\\p{N}", GPT2_RE}},
    /* also MPT, OLMO, JAIS, TRILLION, GRANITE_DOCLING: GPT-2's own regex */
    [T_GPT2] = {"GPT2", PRE_GPT2, {GPT2_RE}},
    /* also STABLELM2, HUNYUAN, SOLAR_OPEN, GROK_2 (its regex is Qwen 2's) */
    [T_QWEN2] = {"QWEN2", PRE_SPLITS, {QWEN2_RE}},
    [T_QWEN35] = {"QWEN35",
                  PRE_SPLITS,
                  {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
                   "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    /* also BLOOM, GPT3_FINNISH */
    [T_PORO] = {"PORO", PRE_SPLITS, {" ?[^(\\s|.,!?…。，、।۔،)]+"}},
    [T_CHATGLM4] = {"CHATGLM4",
                    PRE_SPLITS,
                    {ADAPTED_CASES "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                   "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    [T_VIKING] = {"VIKING", PRE_SPLITS, {" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"}},
    [T_TEKKEN] =
        {"TEKKEN",
         PRE_SPLITS,
         {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}"
          "\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}"
          "\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|"
          "\\s+"}},
    [T_CHAMELEON] = {"CHAMELEON",
                     PRE_SPLITS,
                     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                      "([\\t\\n]|    |  )", "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", GPT2_RE}},
    /* also MINIMAX_M2 */
    [T_GPT4O] = {"GPT4O", PRE_SPLITS, {GPT4O_RE}},
    [T_GRANITE_EMB_MULTI] = {"GRANITE_EMB_MULTI",
                             PRE_SPLITS,
                             {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}"
                              "])([^A-Z]))+" ADAPTED_CASES
                              "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{"
                              "M}])([^A-Z]))*" ADAPTED_CASES
                              "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!"
                              "\\S)|\\s+"}},
    [T_TINY_AYA] = {"TINY_AYA", PRE_SPLITS, {"\\d{1,3}(?=(?:\\d{3})*\\b)", GPT4O_RE}},
    [T_SUPERBPE] = {"SUPERBPE", PRE_SPLITS, {"\\p{N}+", "(?=(\\d{3})+(?!\\d))"}},
    /* upstream's possessive quantifiers made greedy by llama.cpp */
    [T_BAILINGMOE] = {"BAILINGMOE",
                      PRE_SPLITS,
                      {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                       "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    [T_SEED_CODER] = {"SEED_CODER",
                      PRE_SPLITS,
                      {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| "
                       "?[^\\s\\p{L}\\p{N}\r\n]+|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
    [T_LAGUNA] = {"LAGUNA",
                  PRE_SPLITS,
                  {"[^\\n]+|[\\n]+", ADAPTED_CASES "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                                                   "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                                                   "\\s+(?!\\S)|\\s+"}},
    [T_EXAONE_MOE] =
        {"EXAONE_MOE",
         PRE_SPLITS,
         {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: "
          "\\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!"
          "\\S)|\\s+"}},
    [T_MINICPM5] = {"MINICPM5",
                    PRE_SPLITS,
                    {"\\p{N}{1,3}",
                     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| "
                     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    /* split by code in llama.cpp's unicode.cpp, not by these regexes */
    [T_KIMI_K2] = {"KIMI_K2", PRE_REFUSED, {NULL}},
    [T_AFMOE] = {"AFMOE", PRE_REFUSED, {NULL}},
    /* BPE on raw UTF-8 (spaces as U+2581), not GPT-2's byte mapping: the
     * Gemma 3 tokenizer.json's form (granite-embed-multi-311m is the hash
     * of that file). Sarvam's is the same kind in llama.cpp, but its
     * upstream file, which may split otherwise, is not known here. */
    [T_GEMMA4] = {"GEMMA4", PRE_ESCAPED, {NULL}},
    [T_SARVAM_MOE] = {"SARVAM_MOE", PRE_REFUSED, {NULL}},
    [T_WHITESPACE] = {"WHITESPACE", PRE_REFUSED, {NULL}},
};

enum { F_IGNORE_MERGES = 1, F_NFC = 2 };

/* llama_vocab::impl::load's names and flags, but for smaug-bpe: the
 * tokenizer.json known to hash to that name (Meta's first Llama 3 upload)
 * ignores merges, which llama.cpp does not do for it; the folder encodes
 * as that file does. F_NFC where the upstream tokenizer.json
 * normalizes to NFC (Qwen's), which llama.cpp does not do but which
 * changes nothing for text already in NFC. */
static const struct {
    const char *name;
    uint8_t type, flags;
} names[] = {
    {"default", T_DEFAULT, 0},
    {"minicpm5", T_MINICPM5, F_IGNORE_MERGES},
    {"llama3", T_LLAMA3, F_IGNORE_MERGES},
    {"llama-v3", T_LLAMA3, F_IGNORE_MERGES},
    {"llama-bpe", T_LLAMA3, F_IGNORE_MERGES},
    {"falcon3", T_LLAMA3, F_IGNORE_MERGES},
    {"falcon-h1", T_LLAMA3, F_IGNORE_MERGES},
    {"pixtral", T_LLAMA3, F_IGNORE_MERGES},
    {"midm-2.0", T_LLAMA3, F_IGNORE_MERGES},
    {"lfm2", T_LLAMA3, F_IGNORE_MERGES},
    {"jina-v5-nano", T_LLAMA3, F_IGNORE_MERGES},
    {"deepseek-llm", T_DEEPSEEK_LLM, 0},
    {"deepseek-coder", T_DEEPSEEK_CODER, 0},
    {"deepseek-v3", T_DEEPSEEK3_LLM, 0},
    {"youtu", T_YOUTU, F_IGNORE_MERGES},
    {"falcon", T_FALCON, 0},
    {"mpt", T_GPT2, 0},
    {"starcoder", T_STARCODER, 0},
    {"gpt-2", T_GPT2, 0},
    {"phi-2", T_GPT2, 0},
    {"jina-es", T_GPT2, 0},
    {"jina-de", T_GPT2, 0},
    {"gigachat", T_GPT2, 0},
    {"jina-v2-es", T_GPT2, 0},
    {"jina-v2-de", T_GPT2, 0},
    {"a.x-4.0", T_GPT2, 0},
    {"mellum", T_GPT2, 0},
    {"modern-bert", T_GPT2, 0},
    {"jais-2", T_JAIS2, 0},
    {"gemma4", T_GEMMA4, 0},
    {"granite-embed-multi-311m", T_GEMMA4, 0},
    {"sarvam-moe", T_SARVAM_MOE, 0},
    {"jina-v1-en", T_GPT2, 0},
    {"jina-v2-code", T_GPT2, 0},
    {"roberta-bpe", T_GPT2, 0},
    {"whitespace", T_WHITESPACE, 0},
    {"refact", T_STARCODER, 0},
    {"command-r", T_STARCODER, 0},
    {"qwen2", T_QWEN2, F_NFC},
    {"deepseek-r1-qwen", T_QWEN2, F_NFC},
    {"kormo", T_QWEN2, 0},
    {"f2llmv2", T_QWEN2, 0},
    {"qwen35", T_QWEN35, F_NFC},
    {"stablelm2", T_QWEN2, 0},
    {"olmo", T_GPT2, 0},
    {"dbrx", T_LLAMA3, 0},
    {"smaug-bpe", T_LLAMA3, F_IGNORE_MERGES}, /* not in llama.cpp: see below */
    {"poro-chat", T_PORO, 0},
    {"glm4", T_CHATGLM4, 0},
    {"chatglm-bpe", T_CHATGLM4, 0},
    {"viking", T_VIKING, 0},
    {"jais", T_GPT2, 0},
    {"tekken", T_TEKKEN, F_IGNORE_MERGES},
    {"smollm", T_STARCODER, 0},
    {"codeshell", T_STARCODER, 0},
    {"bloom", T_PORO, 0},
    {"gpt3-finnish", T_PORO, 0},
    {"exaone", T_STARCODER, 0},
    {"exaone4", T_GPT2, 0},
    {"exaone-moe", T_EXAONE_MOE, 0},
    {"chameleon", T_CHAMELEON, 0},
    {"minerva-7b", T_STARCODER, 0},
    {"megrez", T_QWEN2, 0},
    {"gpt-4o", T_GPT4O, 0},
    {"llama4", T_GPT4O, 0},
    {"kanana2", T_GPT4O, 0},
    {"talkie", T_GPT4O, 0},
    {"granite-embed-multi-97m", T_GRANITE_EMB_MULTI, F_IGNORE_MERGES},
    {"tiny_aya", T_TINY_AYA, 0},
    {"cohere2moe", T_TINY_AYA, 0},
    {"superbpe", T_SUPERBPE, 0},
    {"trillion", T_GPT2, 0},
    {"granite-docling", T_GPT2, 0},
    {"bailingmoe", T_BAILINGMOE, 0},
    {"bailingmoe2", T_BAILINGMOE, 0},
    {"llada-moe", T_BAILINGMOE, 0},
    {"seed-coder", T_SEED_CODER, 0},
    {"hunyuan", T_QWEN2, 0},
    {"hunyuan-dense", T_DEEPSEEK3_LLM, 0},
    {"joyai-llm", T_DEEPSEEK3_LLM, 0},
    {"kimi-k2", T_KIMI_K2, 0},
    {"grok-2", T_QWEN2, 0},
    {"afmoe", T_AFMOE, 0},
    {"laguna", T_LAGUNA, 0},
    {"minimax-m2", T_GPT4O, 0},
    {"solar-open", T_QWEN2, 0},
    {"mellum2", T_STARCODER, 0},
};

/* The GGUF's pre name; a GGUF without one is llama.cpp's "default". */
static int find(const amn_model *m, amn_error *err) {
    const amn_kv *kv = amn_model_find_kv(m, "tokenizer.ggml.pre");
    const amn_str *pre = kv && kv->type == AMN_KV_STRING ? kv->data : NULL;
    const char *p = pre ? pre->ptr : "default";
    const size_t n = pre ? pre->len : strlen(p);
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (strlen(names[k].name) == n && memcmp(names[k].name, p, n) == 0) {
            if (types[names[k].type].form != PRE_REFUSED) return (int)k;
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "unsupported: BPE pre-tokenizer '%s' (llama.cpp's %s) to "
                                 "tokenizer.json: llama.cpp splits it %s",
                                 names[k].name, types[names[k].type].type,
                                 names[k].type <= T_AFMOE
                                     ? "by code, not by regexes"
                                     : "on raw UTF-8 as a tokenizer.json of unknown form");
        }
    return amn_error_set(err, AMN_E_UNSUPPORTED,
                         "unsupported: BPE pre-tokenizer '%.*s' to tokenizer.json (not one "
                         "llama.cpp knows)",
                         (int)(n > 64 ? 64 : n), p);
}

/* The escaped form writes merges as pairs: each must split where
 * llama.cpp splits it, at a space after its first byte, into two parts. */
static int check_merges(const amn_model *m, amn_error *err) {
    const amn_kv *kv = amn_model_find_kv(m, "tokenizer.ggml.merges");
    if (!kv) return AMN_OK;
    if (kv->type != AMN_KV_ARRAY || kv->elem_type != AMN_KV_STRING)
        return amn_error_set(err, AMN_E_PARSE, "GGUF: tokenizer.ggml.merges is not strings");
    const amn_str *s = kv->data;
    for (uint64_t i = 0; i < kv->count; i++) {
        const char *sp = s[i].len > 2 ? memchr(s[i].ptr + 1, ' ', s[i].len - 2) : NULL;
        if (!sp)
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "unsupported: merge %llu of tokenizer.ggml.merges is not two "
                                 "tokens split by a space",
                                 (unsigned long long)i);
    }
    return AMN_OK;
}

int hf_rev_pre_check(const amn_model *m, amn_error *err) {
    const int k = find(m, err);
    if (k < 0) return k;
    return types[names[k].type].form == PRE_ESCAPED ? check_merges(m, err) : AMN_OK;
}

/* ByteLevel pre-tokenizer / decoder. */
json_object *hf_rev_byte_level(bool prefix, bool use_regex) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "type", json_object_new_string("ByteLevel"));
    json_object_object_add(o, "add_prefix_space", json_object_new_boolean(prefix));
    json_object_object_add(o, "trim_offsets", json_object_new_boolean(true));
    json_object_object_add(o, "use_regex", json_object_new_boolean(use_regex));
    return o;
}

static json_object *split(const char *regex) {
    json_object *s = json_object_new_object(), *pat = json_object_new_object();
    json_object_object_add(s, "type", json_object_new_string("Split"));
    json_object_object_add(pat, "Regex", json_object_new_string(regex));
    json_object_object_add(s, "pattern", pat);
    json_object_object_add(s, "behavior", json_object_new_string("Isolated"));
    json_object_object_add(s, "invert", json_object_new_boolean(false));
    return s;
}

static json_object *replace(const char *from, const char *to) {
    json_object *r = json_object_new_object(), *pat = json_object_new_object();
    json_object_object_add(r, "type", json_object_new_string("Replace"));
    json_object_object_add(pat, "String", json_object_new_string(from));
    json_object_object_add(r, "pattern", pat);
    json_object_object_add(r, "content", json_object_new_string(to));
    return r;
}

/* Gemma 3's tokenizer.json: Replace " " -> U+2581, then a Split on " "
 * (merged with the previous piece) that finds nothing left to split. */
static void escaped_form(hf_rev_pre_out *out) {
    out->normalizer = replace(" ", HF_REV_SPACE);
    json_object *s = json_object_new_object(), *pat = json_object_new_object();
    json_object_object_add(s, "type", json_object_new_string("Split"));
    json_object_object_add(pat, "String", json_object_new_string(" "));
    json_object_object_add(s, "pattern", pat);
    json_object_object_add(s, "behavior", json_object_new_string("MergedWithPrevious"));
    json_object_object_add(s, "invert", json_object_new_boolean(false));
    out->pre_tokenizer = s;
}

/* Its decoder: U+2581 back to spaces, <0xXX> pieces to bytes, joined. */
json_object *hf_rev_escaped_decoder(void) {
    json_object *d = json_object_new_object(), *list = json_object_new_array();
    json_object *fb = json_object_new_object(), *fuse = json_object_new_object();
    json_object_object_add(fb, "type", json_object_new_string("ByteFallback"));
    json_object_object_add(fuse, "type", json_object_new_string("Fuse"));
    json_object_array_add(list, replace(HF_REV_SPACE, " "));
    json_object_array_add(list, fb);
    json_object_array_add(list, fuse);
    json_object_object_add(d, "type", json_object_new_string("Sequence"));
    json_object_object_add(d, "decoders", list);
    return d;
}

int hf_rev_pre(const amn_model *m, hf_rev_pre_out *out, amn_error *err) {
    const int k = find(m, err);
    if (k < 0) return k;
    const pre_type *t = &types[names[k].type];
    out->ignore_merges = names[k].flags & F_IGNORE_MERGES;
    out->escaped = t->form == PRE_ESCAPED;
    out->normalizer = NULL;
    if (out->escaped) {
        escaped_form(out);
        return AMN_OK;
    }
    if (names[k].flags & F_NFC) {
        out->normalizer = json_object_new_object();
        json_object_object_add(out->normalizer, "type", json_object_new_string("NFC"));
    }
    if (t->form == PRE_GPT2) {
        out->pre_tokenizer = hf_rev_byte_level(false, true);
        return AMN_OK;
    }
    json_object *seq = json_object_new_object(), *list = json_object_new_array();
    for (size_t r = 0; r < sizeof t->regex / sizeof *t->regex && t->regex[r]; r++)
        json_object_array_add(list, split(t->regex[r]));
    json_object_array_add(list, hf_rev_byte_level(false, false));
    json_object_object_add(seq, "type", json_object_new_string("Sequence"));
    json_object_object_add(seq, "pretokenizers", list);
    out->pre_tokenizer = seq;
    return AMN_OK;
}
