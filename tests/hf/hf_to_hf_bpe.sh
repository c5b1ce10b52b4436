#!/usr/bin/env bash
# GGUF -> Hugging Face folder with a BPE (gpt2) vocabulary: the Llama 3, 3.1 and
# Qwen3 tokenizers of fixtures/hf/vocab (unpacked by CMake into the build
# tree) with seeded random weights (hf_make_weights.py) made a GGUF, that
# GGUF made a folder with tokenizer.json, and the folder made a GGUF again:
# it equals the first byte for byte, so the written tokenizer.json splits
# text as the original does (the converter recognises the tokenizer by the
# hash of how it tokenizes a test text) and holds the same vocabulary,
# merges and added tokens.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init hf2-bpe "$1" "$2"
bpe=$build/tests/hf/vocab-bpe
need_plugin hf "scheme hfdir "
need_python torch
[ -d "$bpe/llama3" ] || skip "$bpe not unpacked"
for t in llama3 llama3_1 qwen3; do
  d=$work/$t
  cp -r "$bpe/$t" "$d"
  $py "$src/tests/hf/hf_make_weights.py" "$d" || { fail "$t: no weights"; continue; }
  mkdir -p "$work/out"
  a=$work/$t-a.gguf b=$work/$t-b.gguf out=$work/out/$t
  if ! "$amn" convert "$d" --to gguf --out-dtype f32 -o "$a" --quiet >"$work/log" 2>&1 ||
      ! "$amn" convert "$a" --to hf -o "$out/" --quiet >>"$work/log" 2>&1 ||
      ! "$amn" convert "$out" --to gguf --out-dtype f32 -o "$b" --quiet >>"$work/log" 2>&1; then
    fail "$t: amn failed"; indent "$work/log"; continue
  fi
  [ -f "$out/tokenizer.json" ] || fail "$t: no tokenizer.json"
  cmp -s "$a" "$b" && pass || fail "$t: the GGUF made again differs"
done
finish hf_to_hf_bpe need-passes
