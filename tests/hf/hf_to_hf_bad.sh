#!/usr/bin/env bash
# A GGUF that cannot become a Hugging Face folder is refused before any
# output exists: an architecture without a table (unsupported, exit 3,
# naming the supported ones), a GGUF lacking its head counts (a parse
# error, exit 1), a tensor the family has no name for and a vocabulary type
# without tokenizer files (unsupported), an
# output dtype a folder does not take (usage, exit 2). The bad GGUFs are a
# converted fixture with names patched in place (same lengths).
set -uo pipefail
build=$1 src=$2
amn=$(cd "$build" && pwd)/bin/amn
"$amn" plugins 2>/dev/null | grep -q "scheme hfdir " ||
  { echo "SKIP: needs the hf plugin, not built"; exit 77; }
work=$(mktemp -d /tmp/amn-hf2-bad.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0 passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
good=$work/good.gguf
"$amn" convert "$src/fixtures/hf/qwen2-tiny" --to gguf --out-dtype f32 -o "$good" --quiet ||
  { echo "FAIL: cannot make the base GGUF"; exit 1; }
# patch NAME FROM TO: a copy of the good GGUF with every FROM replaced by TO.
patch() {
  /usr/bin/python3 - "$good" "$work/$1.gguf" "$2" "$3" <<'PY'
import sys
src, dst, a, b = sys.argv[1:5]
assert len(a) == len(b)
data = open(src, "rb").read()
assert a.encode() in data
open(dst, "wb").write(data.replace(a.encode(), b.encode()))
PY
}
# expect NAME RC PATTERN [ARGS...]: exit RC, PATTERN in stderr, no output folder.
expect() {
  local name=$1 want=$2 pat=$3
  shift 3
  local out=$work/out-$name
  "$amn" convert "$work/$name.gguf" --to hf -o "$out/" "$@" >"$work/log" 2>&1
  local rc=$?
  if [ $rc -ne "$want" ]; then
    fail "$name: exit $rc, want $want"; sed 's/^/    /' "$work/log"
  elif ! grep -q -- "$pat" "$work/log"; then
    fail "$name: stderr lacks '$pat'"; sed 's/^/    /' "$work/log"
  elif [ -e "$out" ] || ls -a "$work" | grep -q "^\.out-$name"; then
    fail "$name: output left behind"
  else
    passes=$((passes + 1))
  fi
}
patch arch qwen2 qwfoo && expect arch 3 "supported: llama, qwen2, qwen3, phi3, gemma, gemma2, gemma3"
patch heads attention.head_count attention.heXd_count && expect heads 1 "head_count"
patch tensor ffn_down ffn_dowX && expect tensor 3 "no Hugging Face name"
# A vocabulary type without tokenizer files: Llama-2-Tiny-SPM's GGUF with
# tokenizer.ggml.model "llama" made "llamb".
"$amn" convert "$src/fixtures/hf/Llama-2-Tiny-SPM" --to gguf --out-dtype f32 -o "$work/spm.gguf" \
  --quiet && /usr/bin/python3 - "$work/spm.gguf" "$work/vocab.gguf" <<'PY' && expect vocab 3 "'llamb' vocabulary"
import struct, sys
data = open(sys.argv[1], "rb").read()
key = b"tokenizer.ggml.model"
old = key + struct.pack("<IQ", 8, 5) + b"llama"
assert data.count(old) == 1
open(sys.argv[2], "wb").write(data.replace(old, key + struct.pack("<IQ", 8, 5) + b"llamb"))
PY
cp "$good" "$work/dtype.gguf" && expect dtype 2 "f32, f16 or bf16" --out-dtype q8_0
# The good one, for contrast, makes a folder.
cp "$good" "$work/ok.gguf"
if "$amn" convert "$work/ok.gguf" --to hf -o "$work/out-ok/" --quiet >"$work/log" 2>&1 &&
    [ -f "$work/out-ok/config.json" ] && [ -f "$work/out-ok/model.safetensors" ]; then
  passes=$((passes + 1))
else
  fail "ok: no folder"; sed 's/^/    /' "$work/log"
fi
echo "hf_to_hf_bad: $passes passed, $fails failed"
[ $fails -eq 0 ] && [ $passes -gt 0 ]
