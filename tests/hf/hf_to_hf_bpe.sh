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
build=$1 src=$2
amn=$(cd "$build" && pwd)/bin/amn
py=/usr/bin/python3
bpe=$build/tests/hf/vocab-bpe
"$amn" plugins 2>/dev/null | grep -q "scheme hfdir " ||
  { echo "SKIP: needs the hf plugin, not built"; exit 77; }
$py -c "import torch" 2>/dev/null || { echo "SKIP: needs python3-torch"; exit 77; }
[ -d "$bpe/llama3" ] || { echo "SKIP: $bpe not unpacked"; exit 77; }
work=$(mktemp -d /tmp/amn-hf2-bpe.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0 passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
for t in llama3 llama3_1 qwen3; do
  d=$work/$t
  cp -r "$bpe/$t" "$d"
  $py "$src/tests/hf/hf_make_weights.py" "$d" || { fail "$t: no weights"; continue; }
  mkdir -p "$work/out"
  a=$work/$t-a.gguf b=$work/$t-b.gguf out=$work/out/$t
  if ! "$amn" convert "$d" --to gguf --out-dtype f32 -o "$a" --quiet >"$work/log" 2>&1 ||
      ! "$amn" convert "$a" --to hf -o "$out/" --quiet >>"$work/log" 2>&1 ||
      ! "$amn" convert "$out" --to gguf --out-dtype f32 -o "$b" --quiet >>"$work/log" 2>&1; then
    fail "$t: amn failed"; sed 's/^/    /' "$work/log"; continue
  fi
  [ -f "$out/tokenizer.json" ] || fail "$t: no tokenizer.json"
  cmp -s "$a" "$b" && passes=$((passes + 1)) || fail "$t: the GGUF made again differs"
done
echo "hf_to_hf_bpe: $passes passed, $fails failed"
[ $fails -eq 0 ] && [ $passes -gt 0 ]
