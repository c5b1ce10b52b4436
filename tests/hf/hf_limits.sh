#!/usr/bin/env bash
# The limits given on the command line (--max-header, --max-depth,
# --max-alloc, --max-total, --max-items) reach the folder's tokenizer files:
# Qwen3's 11 MB tokenizer.json (fixtures/hf/vocab, unpacked by CMake) with
# seeded random weights converts under the defaults, and each limit below
# what it needs refuses it (exit 4, the file or the vocabulary named) with
# no output, though the weights alone are within every one of them.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init hf-limits "$1" "$2"
bpe=$build/tests/hf/vocab-bpe
need_plugin hf "scheme hf "
need_python torch
[ -d "$bpe/qwen3" ] || skip "$bpe not unpacked"
d=$work/qwen3
cp -r "$bpe/qwen3" "$d"
$py "$src/tests/hf/hf_make_weights.py" "$d" || { echo "FAIL: no weights"; exit 1; }

"$amn" convert "$d" --to gguf -o "$work/ok.gguf" --quiet >"$work/log" 2>&1 && [ -s "$work/ok.gguf" ] &&
  pass || { fail "defaults: refused"; indent "$work/log"; }

# limit NAME PATTERN ARGS...: exit 4, PATTERN in the message, no output.
limit() {
  local name=$1 pat=$2
  shift 2
  expect "$name" 4 convert "$d" --to gguf -o "$work/$name.gguf" --quiet "$@"
  matches "$name" "$pat"
  absent "$name: output left behind" "$work/$name.gguf"
}
limit header "tokenizer.json: .* bytes exceed" --max-header 8M
limit depth "tokenizer.json: JSON nests deeper" --max-depth 4
limit alloc "tokenizer.json" --max-alloc 4M
limit total "vocabulary: .* exceed the allocation cap" --max-total 6M
limit items "vocabulary: 151936 tokens exceed" --max-items 1000
# a limit the tokenizer is within changes nothing
"$amn" convert "$d" --to gguf -o "$work/within.gguf" --quiet --max-header 16M --max-depth 8 \
  >"$work/log" 2>&1 && cmp -s "$work/ok.gguf" "$work/within.gguf" && pass ||
  { fail "within the limits: refused or different"; indent "$work/log"; }
finish hf_limits
