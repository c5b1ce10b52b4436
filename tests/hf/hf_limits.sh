#!/usr/bin/env bash
# The limits given on the command line (--max-header, --max-depth,
# --max-alloc, --max-total, --max-items) reach the folder's tokenizer files:
# Qwen3's 11 MB tokenizer.json (fixtures/hf/vocab, unpacked by CMake) with
# seeded random weights converts under the defaults, and each limit below
# what it needs refuses it (exit 4, the file or the vocabulary named) with
# no output, though the weights alone are within every one of them.
set -uo pipefail
build=$1 src=$2
amn=$(cd "$build" && pwd)/bin/amn
py=/usr/bin/python3
bpe=$build/tests/hf/vocab-bpe
"$amn" plugins 2>/dev/null | grep -q "scheme hf " ||
  { echo "SKIP: needs the hf plugin, not built"; exit 77; }
$py -c "import torch" 2>/dev/null || { echo "SKIP: needs python3-torch"; exit 77; }
[ -d "$bpe/qwen3" ] || { echo "SKIP: $bpe not unpacked"; exit 77; }
work=$(mktemp -d /tmp/amn-hf-limits.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0 passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { passes=$((passes + 1)); }
d=$work/qwen3
cp -r "$bpe/qwen3" "$d"
$py "$src/tests/hf/hf_make_weights.py" "$d" || { echo "FAIL: no weights"; exit 1; }

"$amn" convert "$d" --to gguf -o "$work/ok.gguf" --quiet >"$work/log" 2>&1 && [ -s "$work/ok.gguf" ] &&
  ok || { fail "defaults: refused"; sed 's/^/    /' "$work/log"; }

# limit NAME PATTERN ARGS...: exit 4, PATTERN in the message, no output.
limit() {
  local name=$1 pat=$2
  shift 2
  "$amn" convert "$d" --to gguf -o "$work/$name.gguf" --quiet "$@" >"$work/log" 2>&1
  local rc=$?
  [ $rc -eq 4 ] && ok || { fail "$name: exit $rc, wanted 4"; sed 's/^/    /' "$work/log"; }
  grep -q -- "$pat" "$work/log" && ok || { fail "$name: no '$pat' in:"; sed 's/^/    /' "$work/log"; }
  [ ! -e "$work/$name.gguf" ] && ok || fail "$name: output left behind"
}
limit header "tokenizer.json: .* bytes exceed" --max-header 8M
limit depth "tokenizer.json: JSON nests deeper" --max-depth 4
limit alloc "tokenizer.json" --max-alloc 4M
limit total "vocabulary: .* exceed the allocation cap" --max-total 6M
limit items "vocabulary: 151936 tokens exceed" --max-items 1000
# a limit the tokenizer is within changes nothing
"$amn" convert "$d" --to gguf -o "$work/within.gguf" --quiet --max-header 16M --max-depth 8 \
  >"$work/log" 2>&1 && cmp -s "$work/ok.gguf" "$work/within.gguf" && ok ||
  { fail "within the limits: refused or different"; sed 's/^/    /' "$work/log"; }
echo "hf_limits: $passes passed, $fails failed"
[ $fails -eq 0 ]
