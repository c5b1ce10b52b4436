#!/usr/bin/env python3
"""Writes the hand-built seed folders of fuzz_hf (tests/fuzz/fuzz_hf.c) that
fixtures/hf lacks: a byte-level BPE vocabulary (tokenizer.json in the layout
Hugging Face tokenizers writes, with Llama 3's pre-tokenizer regex and added
special tokens), its tokenizer_config.json with a chat template, and a model
card, beside the weights and config of fixtures/hf/Llama-2-Tiny-SPM (vocabulary
410), linked rather than copied. fuzz_hf packs the files the links name;
amn itself refuses such a folder (its links lead outside it). Run from
anywhere; writes next to itself.

The vocabulary is small on purpose: the 256 byte symbols, 40 merges and three
special tokens, so that each fuzzing run parses it fast. Its pre-tokenizer
hashes to no name llama.cpp knows, so a conversion ends at that check, after
the whole tokenizer (regex split, byte mapping, merges) has run on the
converter's check text."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
WEIGHTS = "../../../../../fixtures/hf/Llama-2-Tiny-SPM"


def bytes_to_unicode():
    # GPT-2's byte -> printable character table (tokenizers' ByteLevel).
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def bpe_folder(path):
    os.makedirs(path, exist_ok=True)
    sym = bytes_to_unicode()
    vocab = {sym[b]: b for b in range(256)}
    merges = []
    for word in ["Ġthe", "Ġand", "ing", "Ġto", "Ġof", "Ġin", "er", "on", "Ġis", "Ġa"]:
        cur = word[0]
        for ch in word[1:]:
            if cur + ch not in vocab:
                merges.append(f"{cur} {ch}")
                vocab[cur + ch] = len(vocab)
            cur += ch
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    added = [{"id": len(vocab) + i, "content": s, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True}
             for i, s in enumerate(specials)]
    regex = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
             " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True,
                           "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": merges}}
    with open(os.path.join(path, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    cfg = {"bos_token": specials[0], "eos_token": specials[1],
           "clean_up_tokenization_spaces": True, "tokenizer_class": "PreTrainedTokenizerFast",
           "chat_template": "{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + "
                            "'<|end_header_id|>\\n\\n' + m['content'] + '<|eot_id|>' }}"
                            "{% endfor %}",
           "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"}
                                    for a in added}}
    with open(os.path.join(path, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(path, "README.md"), "w", encoding="utf-8") as f:
        f.write("---\nlicense: apache-2.0\nlanguage:\n- en\ntags:\n- text-generation\n"
                "base_model: meta-llama/Llama-3.1-8B\ndatasets:\n- tiny\n---\n# Tiny BPE\n")
    for name in ("config.json", "model.safetensors"):
        link = os.path.join(path, name)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(os.path.join(WEIGHTS, name), link)


if __name__ == "__main__":
    bpe_folder(os.path.join(HERE, "llama-bpe"))
