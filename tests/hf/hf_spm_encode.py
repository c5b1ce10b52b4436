#!/usr/bin/env python3
"""The tokenizer.model written from a GGUF loads in sentencepiece and
encodes like the original tokenizer.model. What a GGUF does not keep is not
asked for: user-defined pieces (the converter makes them normal tokens) and
runs of spaces (remove_extra_whitespaces, written false as llama.cpp and
transformers' fast tokenizers treat spaces). Usage: hf_spm_encode.py
ORIGINAL.model WRITTEN.model. Exit 77 without sentencepiece."""
import sys

try:
    import sentencepiece as spm
except ImportError:
    print("SKIP: needs python3-sentencepiece")
    sys.exit(77)

TEXTS = [
    "high",
    "Hello world",
    "Hello there, world.",
    "The quick brown fox jumps over the lazy dog",
    "naïve café 日本語 🙂",
    "<ctrl> inline, <s> and </s>",
    "tabs\tand\nnewlines",
    "",
    "x" * 50,
]


def main():
    a = spm.SentencePieceProcessor(model_file=sys.argv[1])
    b = spm.SentencePieceProcessor(model_file=sys.argv[2])
    bad = 0
    if a.get_piece_size() != b.get_piece_size():
        print("pieces: original %d, written %d" % (a.get_piece_size(), b.get_piece_size()))
        bad += 1
    for name in ("unk_id", "bos_id", "eos_id"):
        if getattr(a, name)() != getattr(b, name)():
            print("%s: original %d, written %d" % (name, getattr(a, name)(), getattr(b, name)()))
            bad += 1
    for t in TEXTS:
        ea, eb = a.encode(t), b.encode(t)
        if ea != eb:
            print("encode %r: original %s, written %s" % (t, ea, eb))
            bad += 1
        elif b.decode(eb) != a.decode(ea):
            print("decode %r differs" % t)
            bad += 1
    print("hf_spm_encode: %d strings, %d problems" % (len(TEXTS), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
