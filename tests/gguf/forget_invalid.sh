#!/usr/bin/env bash
# llama-quantize refuses a file whose data ggml_validate_row_data rejects:
# a NaN or an infinity in any tensor it loads (also one it only copies),
# or a quantized block whose scale overflowed. amn's GGUF file types refuse
# it too (exit 1, the tensor and the value named as llama-quantize names
# them, no output), a dry run reads no data and passes, and the one pass
# from a folder refuses what llama-quantize would refuse of the converter's
# file. The cases were checked against llama-quantize (llama.cpp 3af988f).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init gguf-invalid "$1" "$2"
need_plugin gguf "scheme gguf "
need_plugin hf "scheme hf "
py=/usr/bin/python3
hf=$src/fixtures/hf
# edited NAME FIXTURE PYTHON-EDIT: a copy of the fixture folder whose
# shards the statement edits (tests/hf/hf_st_edit.py), made a GGUF at F32
# (the F32 fixture) or F16 by amn (the converter's file, tests/hf).
edited() {
  local d=$work/$1
  cp -r "$hf/$2" "$d"
  $py "$src/tests/hf/hf_st_edit.py" "$d" "import struct
$3"
  "$amn" convert "$d" --to gguf --out-dtype "${4:-f16}" -o "$work/$1.gguf" --quiet ||
    fail "$1: the GGUF was not made"
}
# refused NAME INPUT TYPE WORDS...: forget INPUT --to TYPE exits 1, naming WORDS, no output.
refused() {
  local name=$1 in=$2 type=$3
  shift 3
  expect_fail 1 "$@" "llama-quantize refuses" -- convert "$in" --to "gguf-$type" --threads 1 \
    -o "$work/bad-$name.gguf"
  nothing_left "$name"
}

# a NaN in an F32 norm llama-quantize copies as it is (blk.1.attn_norm,
# value 3: "found nan value at block 3")
edited nan-norm Mistral-Tiny-v0.3 "k = 'model.layers.1.input_layernorm.weight'
dt, sh, b = t[k]; b = bytearray(b); b[6:8] = b'\x00\x7e'; t[k] = [dt, sh, bytes(b)]"
refused nan-norm "$work/nan-norm.gguf" Q8_0 "blk.1.attn_norm.weight holds NaN (value 3)"
refused nan-norm-k "$work/nan-norm.gguf" Q4_K_M "blk.1.attn_norm.weight holds NaN"
# --dry-run reads no tensor's data, as llama-quantize's
expect "dry run" 0 convert "$work/nan-norm.gguf" --to gguf-Q8_0 --dry-run -o "$work/bad-dry.gguf"
nothing_left "dry run"

# an infinity in a weight it quantizes (the permuted attn_k: value 1212)
edited inf-k TriLM-Tiny-Ternary "pass"
refused inf-k "$work/inf-k.gguf" Q4_K_M "holds"
refused inf-k-q8 "$work/inf-k.gguf" Q8_0 "holds"

# finite values beyond what Q8_0's F16 scale holds: "quantized data
# validation failed" (blk.0.ffn_up, block 0)
edited big Llama-3.1-8B-Instruct "k = 'model.layers.0.mlp.up_proj.weight'
dt, sh, b = t[k]; b = bytearray(b); b[40:44] = struct.pack('<f', 1e9); t[k] = [dt, sh, bytes(b)]" f32
refused big "$work/big.gguf" Q8_0 "blk.0.ffn_up.weight quantized to Q8_0 holds infinity (value 0)" \
  "validation failed"
# ... and F16 (value 10 is 1e9); BF16 holds it: the same file converts
refused big-f16 "$work/big.gguf" F16 "quantized to F16 holds infinity (value 10)"
expect "big BF16" 0 convert "$work/big.gguf" --to gguf-BF16 -o "$work/big-bf16.gguf" --quiet

# the one pass: llama-quantize refuses the converter's f16 of this folder
refused onepass "$hf/TriLM-Tiny-Ternary" Q4_K_M "holds"
# and the folder's own GGUF types (the converter's) still convert
expect "folder f16" 0 convert "$hf/TriLM-Tiny-Ternary" --to gguf -o "$work/tri.gguf" --quiet
finish gguf-invalid need-passes
