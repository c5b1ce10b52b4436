/* hf_vocab.h — the tokenizer half of the Hugging Face folder -> GGUF path:
 * every tokenizer.ggml.* key llama.cpp's convert_hf_to_gguf.py writes, and
 * what gguf-py's SpecialVocab adds (merges, special token ids, add_*_token,
 * chat template), in the converter's order, types and values.
 *
 * Sources read from the model folder (each optional unless the family needs
 * it): tokenizer.model (SentencePiece ModelProto), tokenizer.json,
 * tokenizer_config.json, added_tokens.json, config.json, chat_template.jinja,
 * chat_template.json. Every file is capped by the amn_limits given; a
 * malformed one is AMN_E_PARSE naming it, a cap AMN_E_LIMIT, and a BPE
 * pre-tokenizer whose check-text hash the converter does not know
 * AMN_E_UNSUPPORTED (as the converter's NotImplementedError). */
#ifndef AMN_PLUGIN_HF_VOCAB_H
#define AMN_PLUGIN_HF_VOCAB_H

#include <stdint.h>

#include "amn/error.h"
#include "amn/format.h"
#include "amn/model.h"

/* Append the vocabulary key/values to kv, exactly where the converter calls
 * set_vocab(). `family` names the converter's set_vocab variant:
 *   "llama"  LlamaModel.set_vocab: add_space_prefix from tokenizer_config's
 *            add_prefix_space, then SentencePiece, else tokenizer.json (gpt2);
 *            CodeLlama's (vocab 32016) FIM ids; granite-small's add_bos false
 *   "qwen2"  Qwen2Model.set_vocab: SentencePiece, else gpt2 (Qwen2, Qwen3)
 *   "gpt2"   _set_vocab_gpt2 only
 *   "gemma"  GemmaModel: SentencePiece + CodeGemma FIM ids + add_space_prefix false
 *   "gemma2" Gemma2Model: SentencePiece + add_space_prefix false
 *   "gemma3" Gemma3Model: as gemma2 if tokenizer.model exists, else gpt2
 *   "phi3"   Phi3MiniModel: its own SentencePiece variant (or gpt2 for
 *            tokenizer_class GPT2Tokenizer)
 * vocab_size is the hparams' vocab_size (0: absent). Keys already in kv are
 * replaced in place, as GGUFWriter.add_key_value does. On error kv keeps
 * whatever it had before the call (nothing of the vocabulary is added).
 * lim NULL: amn_limits_default(). A folder with neither tokenizer.model nor
 * tokenizer.json gets no key at all (AMN_OK). */
int hf_vocab_add(amn_model *kv, const char *dir, const char *family, uint64_t vocab_size,
                 const amn_limits *lim, amn_error *err);

/* Rows of token_embd Gemma3Model.modify_tensors keeps: vocab_size (or the
 * SentencePiece model's size when 0) with tokenizer.model, else
 * len(tokenizer.json model.vocab) + len(added_tokens). */
int hf_vocab_real_count(const char *dir, uint64_t vocab_size, const amn_limits *lim, uint64_t *out,
                        amn_error *err);

#endif
