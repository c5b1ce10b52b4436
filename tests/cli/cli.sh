#!/usr/bin/env bash
# The amn command line: help, exit codes per error class, output naming,
# refusal to overwrite, JSON output, and a full remember/convert round.
set -uo pipefail
build=$1 src=$2
amn=$build/bin/amn
work=$(mktemp -d /tmp/amn-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0 passes=0
check() { # check DESCRIPTION EXPECTED_RC COMMAND... (stdout+stderr in $work/out)
  local what=$1 want=$2
  shift 2
  "$@" >"$work/out" 2>&1
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: $what: exit $rc, wanted $want"; sed 's/^/    /' "$work/out"; fails=$((fails + 1))
  else
    passes=$((passes + 1))
  fi
}
contains() { # contains DESCRIPTION PATTERN (in $work/out)
  if grep -q -- "$2" "$work/out"; then passes=$((passes + 1)); else
    echo "FAIL: $1: no '$2' in:"; sed 's/^/    /' "$work/out"; fails=$((fails + 1)); fi
}

ex=$src/fixtures/example
check "version" 0 "$amn" --version;              contains "version" "^amn [0-9]"
check "help" 0 "$amn" --help;                    contains "help" "remember FILE"
check "command help" 0 "$amn" remember --help;   contains "command help" "usage: amn remember"
check "unknown command" 2 "$amn" frobnicate
check "missing file argument" 2 "$amn" inspect
check "unknown option" 2 "$amn" inspect "$ex/tiny-f32.safetensors" --bogus
check "bad dtype" 2 "$amn" remember "$ex/tiny-f32.safetensors" --to f8
check "no such file" 6 "$amn" inspect "$work/nope.safetensors"
printf 'garbage!' >"$work/junk.dat"
check "unrecognised" 1 "$amn" inspect "$work/junk.dat"
printf '\x10\x00\x00\x00\x00\x00\x00\x00{"a":{"dtype":' >"$work/cut.safetensors"
check "malformed" 1 "$amn" parse "$work/cut.safetensors"
check "alias info" 0 "$amn" info "$ex/tiny-f32.safetensors"

check "inspect" 0 "$amn" inspect "$ex/tiny-f32.safetensors"
contains "inspect format" "^Format: *safetensors"
contains "inspect count" "^Tensors: *4"
contains "inspect dtypes" "^Dtypes: *I64, F32, BF16"
check "inspect json" 0 "$amn" inspect --json "$ex/tiny-f32.safetensors"
contains "inspect json" '"tensor_count": 4'
check "parse" 0 "$amn" parse "$ex/tiny-f32.safetensors"
contains "parse listing" "^  embed.weight  *F32  *\[32, 16\]  *2.05 KB"
check "parse json" 0 "$amn" parse --json "$ex/tiny-f32.safetensors"
contains "parse json tensors" '"name": "layers.0.proj.weight"'

# Output naming: next to the input, quantization suffix stripped, dtype added.
cp "$ex/tiny-f32.safetensors" "$work/model-GPTQ-Int4.safetensors"
check "convert default name" 0 "$amn" convert "$work/model-GPTQ-Int4.safetensors" --to safetensors
[ -f "$work/model-bf16.safetensors" ] && passes=$((passes + 1)) || { echo "FAIL: model-bf16.safetensors missing"; fails=$((fails + 1)); }
check "convert output exists" 2 "$amn" convert "$work/model-GPTQ-Int4.safetensors" --to safetensors
contains "exists message" "pass --force"
check "convert --force" 0 "$amn" convert "$work/model-GPTQ-Int4.safetensors" --to safetensors --force
check "never the input" 2 "$amn" remember "$work/model-GPTQ-Int4.safetensors" -o "$work/./model-GPTQ-Int4.safetensors" --force
ln -s "$work/model-GPTQ-Int4.safetensors" "$work/link.safetensors"
check "never the input via a link" 2 "$amn" remember "$work/model-GPTQ-Int4.safetensors" -o "$work/link.safetensors" --force
check "f32 name" 0 "$amn" convert "$work/model-GPTQ-Int4.safetensors" --to safetensors --out-dtype f32
[ -f "$work/model-f32.safetensors" ] && passes=$((passes + 1)) || { echo "FAIL: model-f32.safetensors missing"; fails=$((fails + 1)); }
check "parse converted" 0 "$amn" parse "$work/model-bf16.safetensors"
contains "floats cast" "^  embed.weight  *BF16"
contains "ints kept" "^  steps  *I64  *\[\]"
check "remember keeps dtypes" 0 "$amn" remember "$work/model-GPTQ-Int4.safetensors" -o "$work/same.safetensors"
cmp -s "$work/same.safetensors" "$ex/tiny-f32.safetensors" && passes=$((passes + 1)) \
  || { echo "FAIL: remember of an unquantized file changed it"; fails=$((fails + 1)); }
check "unknown target" 3 "$amn" convert "$ex/tiny-f32.safetensors" --to nosuchformat -o "$work/x"
contains "unknown target" "install the amn-nosuchformat plugin"
ls -a "$work" | grep -q '\.amn-' && { echo "FAIL: temporary file left behind"; fails=$((fails + 1)); } || passes=$((passes + 1))
# Full-precision checkpoints convert losslessly unless a dtype is asked for.
if "$amn" plugins | grep -q "format npz"; then
  cp "$src/fixtures/npz/stored.npz" "$work/arrays.npz"
  check "convert npz" 0 "$amn" convert "$work/arrays.npz" --to safetensors
  check "parse lossless" 0 "$amn" parse "$work/arrays.safetensors"
  contains "f64 kept" "^  f64  *F64  *\[5\]"
  check "convert npz --out-dtype" 0 "$amn" convert "$work/arrays.npz" --to safetensors --out-dtype bf16
  check "parse cast" 0 "$amn" parse "$work/arrays-bf16.safetensors"
  contains "f64 cast" "^  f64  *BF16  *\[5\]"
  contains "ints kept" "^  i64  *I64"
fi
check "plugins" 0 "$amn" plugins
contains "plugins" "safetensors .*ABI 1.0"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
