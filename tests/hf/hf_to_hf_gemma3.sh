#!/usr/bin/env bash
# GGUF -> Hugging Face folder for a vocabulary llama.cpp tokenizes as BPE on
# raw UTF-8 with spaces as U+2581 (tokenizer.ggml.pre granite-embed-multi-311m,
# Gemma 3's tokenizer.json-only folders): hf_to_hf_gemma3.py.
set -uo pipefail
build=$1 src=$2
amn=$(cd "$build" && pwd)/bin/amn
bpe=$build/tests/hf/vocab-bpe
"$amn" plugins 2>/dev/null | grep -q "scheme hfdir " ||
  { echo "SKIP: needs the hf plugin, not built"; exit 77; }
/usr/bin/python3 -c "import numpy" 2>/dev/null || { echo "SKIP: needs python3-numpy"; exit 77; }
[ -d "$bpe/gemma3" ] || { echo "SKIP: $bpe/gemma3 not unpacked"; exit 77; }
work=$(mktemp -d /tmp/amn-hf2-gemma3.XXXXXX)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$src/tests/hf/hf_to_hf_gemma3.py" "$amn" "$src" "$bpe/gemma3" "$work"
