#!/usr/bin/env bash
# The amn command line: help, exit codes per error class, output naming,
# refusal to overwrite, JSON output, and a full remember/convert round.
set -uo pipefail
build=$1 src=$2
amn=$(cd "$build" && pwd)/bin/amn
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

# Everything below reads or writes safetensors: a build without that plugin
# (AMN_PLUGINS) reports this test as skipped (exit 77) after the checks above.
if ! "$amn" plugins | grep -q "format safetensors"; then
  echo "$passes passed, $fails failed; SKIP: the rest needs the safetensors plugin, not built"
  [ "$fails" -eq 0 ] || exit 1
  exit 77
fi
printf '\x10\x00\x00\x00\x00\x00\x00\x00{"a":{"dtype":' >"$work/cut.safetensors"
check "malformed" 1 "$amn" parse "$work/cut.safetensors"
contains "malformed message" "cut.safetensors: unrecognised file format"
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
contains "unknown target" "install the amn-plugin-nosuchformat package"
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
# GGUF: inspect, remember, convert to and from, and ollama: names.
if "$amn" plugins | grep -q "format gguf"; then
  g=$src/fixtures/gguf/tiny-quant.gguf
  check "inspect gguf" 0 "$amn" inspect "$g"
  contains "gguf label" "^Format: *GGUF v3"
  contains "gguf arch" "^Arch: *llama"
  contains "gguf scheme" "^Scheme: *GGUF Q8_0"
  check "remember gguf" 0 "$amn" remember "$g" -o "$work/q.safetensors"
  check "parse remembered" 0 "$amn" parse "$work/q.safetensors"
  contains "dequantized" " BF16 "
  check "remembered metadata" 0 "$amn" inspect --json "$work/q.safetensors"
  contains "gguf metadata in __metadata__" '"general.architecture": "llama"'
  check "gguf to gguf" 0 "$amn" convert "$g" --to gguf -o "$work/q2.gguf"
  check "gguf to gguf metadata" 0 "$amn" inspect --json "$work/q2.gguf"
  contains "architecture kept" '"general.architecture": "llama"'
  # FP8 weights need the fp8 plugin; without it, a plain file.
  st_in=$ex/tiny-fp8.safetensors
  "$amn" plugins | grep -q "scheme fp8" || st_in=$ex/tiny-f32.safetensors
  check "safetensors to gguf" 0 "$amn" convert "$st_in" --to gguf -o "$work/f.gguf" --gguf-kv general.name=tiny
  check "parse written gguf" 0 "$amn" inspect --json "$work/f.gguf"
  contains "kv override" '"general.name": "tiny"'
  # --opt is the generic spelling; --gguf-kv / --gguf-metadata are GGUF's.
  printf '{"general.author": "amn"}' >"$work/meta.json"
  check "--opt to gguf" 0 "$amn" convert "$st_in" --to gguf -o "$work/o.gguf" \
    --opt kv=general.name=opt --opt "metadata=$work/meta.json"
  check "parse --opt gguf" 0 "$amn" inspect --json "$work/o.gguf"
  contains "--opt kv" '"general.name": "opt"'
  contains "--opt metadata" '"general.author": "amn"'
  check "unknown --opt" 2 "$amn" convert "$ex/tiny-fp8.safetensors" --to gguf -o "$work/u.gguf" --opt level=9
  contains "unknown --opt named" "unknown option 'level' for format gguf (it accepts kv, metadata, llama_ftype, llama_kv, endian, tensor_order, split)"
  check "bad llama_ftype" 2 "$amn" convert "$ex/tiny-fp8.safetensors" --to gguf -o "$work/u.gguf" \
    --opt llama_ftype=x
  contains "bad llama_ftype named" "option llama_ftype x: not a file type"
  check "gguf option to safetensors" 2 "$amn" convert "$ex/tiny-fp8.safetensors" --to safetensors \
    -o "$work/u.safetensors" --gguf-kv general.name=x
  contains "gguf option refused" "unknown option 'kv' for format safetensors (it accepts none)"
  check "plugins list writer options" 0 "$amn" plugins
  contains "writer options listed" "writer options (--opt): kv, metadata"
  check "--opt without =" 2 "$amn" convert "$ex/tiny-fp8.safetensors" --to gguf --opt bare
  [ ! -e "$work/u.gguf" ] && [ ! -e "$work/u.safetensors" ] && passes=$((passes + 1)) \
    || { echo "FAIL: a refused option left an output"; fails=$((fails + 1)); }
  # ollama: a fake store, resolved by name; outputs go to the current directory.
  digest=$(sha256sum "$g" | cut -d' ' -f1)
  mkdir -p "$work/ollama/blobs" "$work/ollama/manifests/registry.ollama.ai/library/tiny" "$work/cwd"
  cp "$g" "$work/ollama/blobs/sha256-$digest"
  printf '{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s","size":%s}]}' \
    "$digest" "$(stat -c %s "$g")" >"$work/ollama/manifests/registry.ollama.ai/library/tiny/latest"
  export OLLAMA_MODELS=$work/ollama
  check "inspect ollama:" 0 "$amn" inspect ollama:tiny
  contains "ollama resolved" "^Format: *GGUF v3"
  check "remember ollama:" 0 bash -c "cd '$work/cwd' && '$amn' remember ollama:tiny"
  [ -f "$work/cwd/tiny-bf16.safetensors" ] && passes=$((passes + 1)) \
    || { echo "FAIL: ollama output not in the current directory:"; ls -R "$work/cwd"; fails=$((fails + 1)); }
  check "unknown ollama model" 6 "$amn" inspect ollama:nosuchmodel
  unset OLLAMA_MODELS
fi
check "plugins" 0 "$amn" plugins
contains "plugins" "safetensors .*ABI 2\\."
if "$amn" plugins | grep -q "safetensors .*(built-in)"; then
  # AMN_STATIC_PLUGINS: a module of a built-in plugin's name is shadowed.
  check "built-in shadows a module" 0 env AMN_PLUGIN_PATH="$build/test-plugins/s" "$amn" plugins
  contains "module shadowed" "safetensors  *shadowed .*test-plugins/s/amn-safetensors.so"
fi

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
