#!/usr/bin/env bash
# The amn command line: help, exit codes per error class, output naming,
# refusal to overwrite, JSON output, and a full remember/convert round.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init cli "$1" "$2"

ex=$src/fixtures/example
expect "version" 0 --version;              matches "version" "^amn [0-9]"
expect "help" 0 --help;                    matches "help" "remember FILE"
expect "command help" 0 remember --help;   matches "command help" "usage: amn remember"
expect "unknown command" 2 frobnicate
expect "missing file argument" 2 inspect
expect "unknown option" 2 inspect "$ex/tiny-f32.safetensors" --bogus
expect "bad dtype" 2 remember "$ex/tiny-f32.safetensors" --to f8
expect "no such file" 6 inspect "$work/nope.safetensors"
printf 'garbage!' >"$work/junk.dat"
expect "unrecognised" 1 inspect "$work/junk.dat"

# Everything below reads or writes safetensors: a build without that plugin
# (AMN_PLUGINS) reports this test as skipped (exit 77) after the checks above.
if ! have "format safetensors"; then
  echo "$passes passed, $fails failed; SKIP: the rest needs the safetensors plugin, not built"
  [ "$fails" -eq 0 ] || exit 1
  exit 77
fi
printf '\x10\x00\x00\x00\x00\x00\x00\x00{"a":{"dtype":' >"$work/cut.safetensors"
expect "malformed" 1 parse "$work/cut.safetensors"
matches "malformed message" "cut.safetensors: unrecognised file format"
expect "alias info" 0 info "$ex/tiny-f32.safetensors"

expect "inspect" 0 inspect "$ex/tiny-f32.safetensors"
matches "inspect format" "^Format: *safetensors"
matches "inspect count" "^Tensors: *4"
matches "inspect dtypes" "^Dtypes: *I64, F32, BF16"
expect "inspect json" 0 inspect --json "$ex/tiny-f32.safetensors"
matches "inspect json" '"tensor_count": 4'
expect "parse" 0 parse "$ex/tiny-f32.safetensors"
matches "parse listing" "^  embed.weight  *F32  *\[32, 16\]  *2.05 KB"
expect "parse json" 0 parse --json "$ex/tiny-f32.safetensors"
matches "parse json tensors" '"name": "layers.0.proj.weight"'

# Output naming: next to the input, quantization suffix stripped, dtype added.
cp "$ex/tiny-f32.safetensors" "$work/model-GPTQ-Int4.safetensors"
expect "convert default name" 0 convert "$work/model-GPTQ-Int4.safetensors" --to safetensors
[ -f "$work/model-bf16.safetensors" ] && pass || fail "model-bf16.safetensors missing"
expect "convert output exists" 2 convert "$work/model-GPTQ-Int4.safetensors" --to safetensors
matches "exists message" "pass --force"
expect "convert --force" 0 convert "$work/model-GPTQ-Int4.safetensors" --to safetensors --force
expect "never the input" 2 remember "$work/model-GPTQ-Int4.safetensors" -o "$work/./model-GPTQ-Int4.safetensors" --force
ln -s "$work/model-GPTQ-Int4.safetensors" "$work/link.safetensors"
expect "never the input via a link" 2 remember "$work/model-GPTQ-Int4.safetensors" -o "$work/link.safetensors" --force
expect "f32 name" 0 convert "$work/model-GPTQ-Int4.safetensors" --to safetensors --out-dtype f32
[ -f "$work/model-f32.safetensors" ] && pass || fail "model-f32.safetensors missing"
expect "parse converted" 0 parse "$work/model-bf16.safetensors"
matches "floats cast" "^  embed.weight  *BF16"
matches "ints kept" "^  steps  *I64  *\[\]"
expect "remember keeps dtypes" 0 remember "$work/model-GPTQ-Int4.safetensors" -o "$work/same.safetensors"
cmp -s "$work/same.safetensors" "$ex/tiny-f32.safetensors" && pass \
  || fail "remember of an unquantized file changed it"
expect "unknown target" 3 convert "$ex/tiny-f32.safetensors" --to nosuchformat -o "$work/x"
matches "unknown target" "install the amn-plugin-nosuchformat package"
ls -a "$work" | grep -q '\.amn-' && fail "temporary file left behind" || pass
# Full-precision checkpoints convert losslessly unless a dtype is asked for.
if have "format npz"; then
  cp "$src/fixtures/npz/stored.npz" "$work/arrays.npz"
  expect "convert npz" 0 convert "$work/arrays.npz" --to safetensors
  expect "parse lossless" 0 parse "$work/arrays.safetensors"
  matches "f64 kept" "^  f64  *F64  *\[5\]"
  expect "convert npz --out-dtype" 0 convert "$work/arrays.npz" --to safetensors --out-dtype bf16
  expect "parse cast" 0 parse "$work/arrays-bf16.safetensors"
  matches "f64 cast" "^  f64  *BF16  *\[5\]"
  matches "ints kept" "^  i64  *I64"
  # One byte of a stored member's data changed: Python's zipfile (numpy's
  # reader) names the member by its CRC-32, and amn refuses it too.
  /usr/bin/python3 - "$work/arrays.npz" "$work/bad-crc.npz" <<'PY'
import struct, sys, zipfile
b = bytearray(open(sys.argv[1], "rb").read())
i = zipfile.ZipFile(sys.argv[1]).infolist()[0]
n, x = struct.unpack_from("<HH", b, i.header_offset + 26)
b[i.header_offset + 30 + n + x + i.file_size - 1] ^= 1
open(sys.argv[2], "wb").write(b)
PY
  [ "$(/usr/bin/python3 -c 'import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).testzip())' \
    "$work/bad-crc.npz")" = f16.npy ] && pass || fail "zipfile does not see the damaged member"
  expect_fail 1 "bad-crc.npz: entry 'f16.npy': CRC-32 mismatch" -- convert "$work/bad-crc.npz" \
    --to safetensors -o "$work/bad-crc.safetensors"
  absent "a damaged npz left an output" "$work/bad-crc.safetensors"
  expect "inspect of a damaged npz (headers only)" 0 inspect "$work/bad-crc.npz"
fi
# GGUF: inspect, remember, convert to and from, and ollama: names.
if have "format gguf"; then
  g=$src/fixtures/gguf/tiny-quant.gguf
  expect "inspect gguf" 0 inspect "$g"
  matches "gguf label" "^Format: *GGUF v3"
  matches "gguf arch" "^Arch: *llama"
  matches "gguf scheme" "^Scheme: *GGUF Q8_0"
  expect "remember gguf" 0 remember "$g" -o "$work/q.safetensors"
  expect "parse remembered" 0 parse "$work/q.safetensors"
  matches "dequantized" " BF16 "
  expect "remembered metadata" 0 inspect --json "$work/q.safetensors"
  matches "gguf metadata in __metadata__" '"general.architecture": "llama"'
  expect "gguf to gguf" 0 convert "$g" --to gguf -o "$work/q2.gguf"
  expect "gguf to gguf metadata" 0 inspect --json "$work/q2.gguf"
  matches "architecture kept" '"general.architecture": "llama"'
  # FP8 weights need the fp8 plugin; without it, a plain file.
  st_in=$ex/tiny-fp8.safetensors
  have "scheme fp8" || st_in=$ex/tiny-f32.safetensors
  expect "safetensors to gguf" 0 convert "$st_in" --to gguf -o "$work/f.gguf" --gguf-kv general.name=tiny
  expect "parse written gguf" 0 inspect --json "$work/f.gguf"
  matches "kv override" '"general.name": "tiny"'
  # --opt is the generic spelling; --gguf-kv / --gguf-metadata are GGUF's.
  printf '{"general.author": "amn"}' >"$work/meta.json"
  expect "--opt to gguf" 0 convert "$st_in" --to gguf -o "$work/o.gguf" \
    --opt kv=general.name=opt --opt "metadata=$work/meta.json"
  expect "parse --opt gguf" 0 inspect --json "$work/o.gguf"
  matches "--opt kv" '"general.name": "opt"'
  matches "--opt metadata" '"general.author": "amn"'
  expect "unknown --opt" 2 convert "$ex/tiny-fp8.safetensors" --to gguf -o "$work/u.gguf" --opt level=9
  matches "unknown --opt named" "unknown option 'level' for format gguf (it accepts kv, metadata, llama_ftype, llama_kv, endian, tensor_order, split)"
  expect "bad llama_ftype" 2 convert "$ex/tiny-fp8.safetensors" --to gguf -o "$work/u.gguf" \
    --opt llama_ftype=x
  matches "bad llama_ftype named" "option llama_ftype x: not a file type"
  expect "gguf option to safetensors" 2 convert "$ex/tiny-fp8.safetensors" --to safetensors \
    -o "$work/u.safetensors" --gguf-kv general.name=x
  matches "gguf option refused" "unknown option 'kv' for format safetensors (it accepts none)"
  expect "plugins list writer options" 0 plugins
  matches "writer options listed" "writer options (--opt): kv, metadata"
  expect "--opt without =" 2 convert "$ex/tiny-fp8.safetensors" --to gguf --opt bare
  [ ! -e "$work/u.gguf" ] && [ ! -e "$work/u.safetensors" ] && pass \
    || fail "a refused option left an output"
  # ollama: a fake store, resolved by name; outputs go to the current directory.
  digest=$(sha256sum "$g" | cut -d' ' -f1)
  mkdir -p "$work/ollama/blobs" "$work/ollama/manifests/registry.ollama.ai/library/tiny" "$work/cwd"
  cp "$g" "$work/ollama/blobs/sha256-$digest"
  printf '{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s","size":%s}]}' \
    "$digest" "$(stat -c %s "$g")" >"$work/ollama/manifests/registry.ollama.ai/library/tiny/latest"
  export OLLAMA_MODELS=$work/ollama
  expect "inspect ollama:" 0 inspect ollama:tiny
  matches "ollama resolved" "^Format: *GGUF v3"
  run_rc "remember ollama:" 0 bash -c "cd '$work/cwd' && '$amn' remember ollama:tiny"
  [ -f "$work/cwd/tiny-bf16.safetensors" ] && pass \
    || { fail "ollama output not in the current directory:"; ls -R "$work/cwd"; }
  expect "unknown ollama model" 6 inspect ollama:nosuchmodel
  unset OLLAMA_MODELS
fi
expect "plugins" 0 plugins
matches "plugins" "safetensors .*ABI 2\\."
if have "safetensors .*(built-in)"; then
  # AMN_STATIC_PLUGINS: a module of a built-in plugin's name is shadowed.
  run_rc "built-in shadows a module" 0 env AMN_PLUGIN_PATH="$build/test-plugins/s" "$amn" plugins
  matches "module shadowed" "safetensors  *shadowed .*test-plugins/s/amn-safetensors.so"
fi

finish cli
