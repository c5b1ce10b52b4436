#!/usr/bin/env bash
# Every folder of fixtures/hf converted with `amn convert DIR --to gguf
# --out-dtype T` must have the sha256 llama.cpp's convert_hf_to_gguf.py
# --outtype T output has (fixtures/hf/expected.sha256), with one thread and
# with several; no --out-dtype is f16, as the converter's default.
set -uo pipefail
build=$1 src=$2
amn=$(cd "$build" && pwd)/bin/amn
"$amn" plugins 2>/dev/null | grep -q "scheme hf " ||
  { echo "SKIP: needs the hf plugin, not built"; exit 77; }
work=$(mktemp -d /tmp/amn-hf.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0 passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
while read -r want case_type; do
  c=${case_type%/*} t=${case_type#*/}
  for threads in 1 3; do
    out=$work/$c-$t-$threads.gguf
    if ! "$amn" convert "$src/fixtures/hf/$c" --to gguf --out-dtype "$t" --threads "$threads" \
        -o "$out" --quiet >"$work/log" 2>&1; then
      fail "$c $t (threads $threads): amn failed"; sed 's/^/    /' "$work/log"; continue
    fi
    got=$(sha256sum "$out" | cut -d' ' -f1)
    [ "$got" = "$want" ] && passes=$((passes + 1)) ||
      fail "$c $t (threads $threads): sha256 $got, the converter's $want"
  done
  if [ "$t" = f16 ]; then
    "$amn" convert "$src/fixtures/hf/$c" --to gguf -o "$work/default.gguf" --force --quiet >/dev/null 2>&1
    got=$(sha256sum "$work/default.gguf" 2>/dev/null | cut -d' ' -f1)
    [ "$got" = "$want" ] && passes=$((passes + 1)) || fail "$c: the default is not f16"
  fi
done <"$src/fixtures/hf/expected.sha256"
echo "hf_gguf: $passes passed, $fails failed"
[ $fails -eq 0 ] && [ $passes -gt 0 ]
