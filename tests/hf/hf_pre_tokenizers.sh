#!/usr/bin/env bash
# GGUF -> Hugging Face folder: the BPE pre-tokenizer written per
# tokenizer.ggml.pre name (hf_pre_tokenizers.py).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init hf-pre "$1" "$2"
bpe=$build/tests/hf/vocab-bpe
need_plugin hf "scheme hfdir "
[ -d "$bpe/llama3_1" ] || skip "$bpe not unpacked"
python3 "$src/tests/hf/hf_pre_tokenizers.py" "$amn" "$src" "$bpe" "$work"
