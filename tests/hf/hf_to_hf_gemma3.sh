#!/usr/bin/env bash
# GGUF -> Hugging Face folder for a vocabulary llama.cpp tokenizes as BPE on
# raw UTF-8 with spaces as U+2581 (tokenizer.ggml.pre granite-embed-multi-311m,
# Gemma 3's tokenizer.json-only folders): hf_to_hf_gemma3.py.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init hf2-gemma3 "$1" "$2"
bpe=$build/tests/hf/vocab-bpe
need_plugin hf "scheme hfdir "
need_python numpy
[ -d "$bpe/gemma3" ] || skip "$bpe/gemma3 not unpacked"
/usr/bin/python3 "$src/tests/hf/hf_to_hf_gemma3.py" "$amn" "$src" "$bpe/gemma3" "$work"
