#!/usr/bin/env bash
# GGUF -> Hugging Face folder: the BPE pre-tokenizer written per
# tokenizer.ggml.pre name (hf_pre_tokenizers.py).
set -uo pipefail
build=$1 src=$2
amn=$(cd "$build" && pwd)/bin/amn
bpe=$build/tests/hf/vocab-bpe
"$amn" plugins 2>/dev/null | grep -q "scheme hfdir " ||
  { echo "SKIP: needs the hf plugin, not built"; exit 77; }
[ -d "$bpe/llama3_1" ] || { echo "SKIP: $bpe not unpacked"; exit 77; }
work=$(mktemp -d /tmp/amn-hf-pre.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 "$src/tests/hf/hf_pre_tokenizers.py" "$amn" "$src" "$bpe" "$work"
