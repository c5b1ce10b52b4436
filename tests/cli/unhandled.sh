#!/usr/bin/env bash
# Issue 18: a quantized tensor is never copied through as a plain one. For
# each known quantized layout, with the plugin that reads it absent (a plugin
# directory holding every other built plugin), `remember` and `convert` exit 3
# naming the layout, the tensors and the plugin to install, and `inspect`
# lists the tensors as unhandled. A model whose config.json declares a method
# no plugin knows is refused the same way; a plain model beside a config that
# declares quantization (a remembered output) still converts.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init unhandled "$1"
# Every check here reads or writes safetensors: a build without that plugin
# (AMN_PLUGINS) reports the test as skipped.
need_plugin safetensors
plugdir=$build/lib/amn/plugins
# Each temporary plugin folder gets its own registry cache: keep them in $work.
export AMN_REGISTRY_CACHE_DIR=$work/registry-cache

t() { # t NAME DTYPE SHAPE START END -> one header entry
  printf '"%s":{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}' "$1" "$2" "$3" "$4" "$5"
}
# A failure shows the output of the command checked last.
fail_out() { fail "$*"; indent "$work/out"; }

# without PLUGIN: a plugin directory with every built plugin but that one.
without() {
  local dir=$work/without-$1
  if [ ! -d "$dir" ]; then
    mkdir -p "$dir"
    for f in "$plugdir"/amn-*.so; do [ "${f##*/}" = "amn-$1.so" ] || cp "$f" "$dir/"; done
  fi
  echo "$dir"
}

# expect_refused CASE PLUGIN WORDS...: remember and convert exit 3 with every
# word in the message; inspect says "Unhandled" and parse marks the tensors.
expect_refused() {
  local case=$1 plugin=$2; shift 2
  local file=$work/$case/model.safetensors
  export AMN_PLUGIN_SYSTEM_PATH=$(without "$plugin")
  for cmd in remember convert; do
    local extra=()
    [ $cmd = convert ] && extra=(--to safetensors)
    "$amn" $cmd "$file" "${extra[@]}" -o "$work/$case/out.safetensors" >"$work/out" 2>&1
    local rc=$? ok=1
    [ $rc -eq 3 ] || ok=0
    for w in "$@"; do grep -qF -- "$w" "$work/out" || ok=0; done
    [ -e "$work/$case/out.safetensors" ] && ok=0
    if [ $ok = 1 ]; then pass; else fail_out "$case: $cmd without amn-$plugin: exit $rc, expected 3 and: $*"; fi
  done
  "$amn" inspect "$file" >"$work/out" 2>&1
  if grep -q "^Unhandled:" "$work/out"; then pass; else fail_out "$case: inspect lists no unhandled tensor"; fi
  "$amn" parse "$file" >"$work/out" 2>&1
  if grep -q "unhandled (" "$work/out"; then pass; else fail_out "$case: parse marks no tensor unhandled"; fi
  unset AMN_PLUGIN_SYSTEM_PATH
}

mkcase() { mkdir -p "$work/$1"; mkst "$work/$1/model.safetensors" "{$2}" "$3"; }

# gpt-oss MXFP4 (no config: the names and dtypes alone).
mkcase mxfp4 "$(t l.experts.gate_up_proj_blocks U8 '[1,2,1,16]' 0 32),$(t l.experts.gate_up_proj_scales U8 '[1,2,1]' 32 34)" 34
expect_refused mxfp4 mxfp4 "MXFP4 (gpt-oss)" "l.experts.gate_up_proj_blocks (U8)" "install the amn-plugin-mxfp4 package"
# ... and with its config.json.
mkcase mxfp4cfg "$(t l.experts.down_proj_blocks U8 '[1,2,1,16]' 0 32),$(t l.experts.down_proj_scales U8 '[1,2,1]' 32 34)" 34
echo '{"quantization_config":{"quant_method":"mxfp4"}}' >"$work/mxfp4cfg/config.json"
expect_refused mxfp4cfg mxfp4 'config.json declares quant_method "mxfp4"' "l.experts.down_proj_blocks"

# compressed-tensors pack-quantized int4.
mkcase pack "$(t l.weight_packed I32 '[2,1]' 0 8),$(t l.weight_shape I64 '[2]' 8 24),$(t l.weight_scale BF16 '[2,1]' 24 28)" 28
echo '{"quantization_config":{"quant_method":"compressed-tensors","format":"pack-quantized"}}' >"$work/pack/config.json"
expect_refused pack ctensors "compressed-tensors pack-quantized" "l.weight_packed (I32)" 'format "pack-quantized"' "install the amn-plugin-ctensors package"

# compressed-tensors int-quantized (int8 weight + scale), no config.
mkcase int8 "$(t l.weight I8 '[2,4]' 0 8),$(t l.weight_scale BF16 '[2,1]' 8 12),$(t l.bias BF16 '[2]' 12 16)" 16
expect_refused int8 ctensors "compressed-tensors int-quantized" "l.weight (I8)" "install the amn-plugin-ctensors package"

# compressed-tensors nvfp4-pack-quantized.
mkcase ctnvfp4 "$(t l.weight_packed U8 '[2,8]' 0 16),$(t l.weight_scale F8_E4M3 '[2,1]' 16 18),$(t l.weight_global_scale F32 '[1]' 18 22)" 22
expect_refused ctnvfp4 nvfp4 "compressed-tensors nvfp4-pack-quantized" "l.weight_packed (U8)" "install the amn-plugin-nvfp4 package"

# ModelOpt NVFP4 with its hf_quant_config.json.
mkcase modelopt "$(t l.weight U8 '[2,8]' 0 16),$(t l.weight_scale F8_E4M3 '[2,1]' 16 18),$(t l.weight_scale_2 F32 '[]' 18 22),$(t l.input_scale F32 '[]' 22 26)" 26
echo '{"quantization":{"quant_algo":"NVFP4","group_size":16}}' >"$work/modelopt/hf_quant_config.json"
expect_refused modelopt nvfp4 "ModelOpt NVFP4" "l.weight (U8)" 'hf_quant_config.json declares quant_method "modelopt", format "nvfp4"' "install the amn-plugin-nvfp4 package"

# ModelOpt NVFP4 fused 3-D experts (names only, no config).
mkcase fused "$(t l.experts.up_proj U8 '[2,2,8]' 0 32),$(t l.experts.up_proj_weight_scale F8_E4M3 '[2,2,1]' 32 36),$(t l.experts.up_proj_weight_scale_2 F32 '[2]' 36 44)" 44
expect_refused fused nvfp4 "ModelOpt NVFP4 fused experts" "l.experts.up_proj (U8)" "install the amn-plugin-nvfp4 package"

# FP8 beside its scale is quantized ...
mkcase fp8 "$(t l.weight F8_E4M3 '[2,2]' 0 4),$(t l.weight_scale_inv F32 '[1,1]' 4 8)" 8
expect_refused fp8 fp8 "FP8" "l.weight (F8_E4M3)" "install the amn-plugin-fp8 package"
# ... a lone FP8 tensor (no scale, no quantization config) is plain data:
# remember copies it, convert --out-dtype keep keeps its bytes, inspect lists
# nothing unhandled (with or without the fp8 plugin).
mkcase fp8plain "$(t x F8_E4M3 '[4]' 0 4),$(t y F8_E5M2 '[2,2]' 4 8)" 8
for p in fp8 none; do
  if [ $p = none ]; then export AMN_PLUGIN_SYSTEM_PATH=$plugdir; else export AMN_PLUGIN_SYSTEM_PATH=$(without $p); fi
  f=$work/fp8plain/model.safetensors
  if "$amn" remember "$f" -o "$work/fp8plain/r.safetensors" --force >"$work/out" 2>&1 &&
    "$amn" parse "$work/fp8plain/r.safetensors" >"$work/out" 2>&1 &&
    grep -q "x *F8_E4M3 *\[4\]" "$work/out" && grep -q "y *F8_E5M2 *\[2, 2\]" "$work/out"
  then pass; else fail_out "lone FP8 tensors (without $p): remember"; fi
  if "$amn" convert "$f" --to safetensors --out-dtype keep -o "$work/fp8plain/k.safetensors" --force >"$work/out" 2>&1 &&
    cmp -s <(tail -c 8 "$f") <(tail -c 8 "$work/fp8plain/k.safetensors")
  then pass; else fail_out "lone FP8 tensors (without $p): convert --out-dtype keep"; fi
  "$amn" inspect "$f" >"$work/out" 2>&1
  if grep -q "Unhandled" "$work/out"; then fail_out "lone FP8 tensors (without $p) listed as unhandled"; else pass; fi
  unset AMN_PLUGIN_SYSTEM_PATH
done

# A method no amn plugin knows, declared in config.json: integer tensors refused.
mkcase hqq "$(t l.W_q U8 '[4,4]' 0 16),$(t l.meta.scale F16 '[4]' 16 24)" 24
echo '{"quantization_config":{"quant_method":"hqq","nbits":4}}' >"$work/hqq/config.json"
expect_refused hqq none "of hqq (l.W_q (U8)" "no amn plugin dequantizes this method"
# The same declaration over tensors shaped like compressed-tensors'
# int-quantized layout: the declared method is the reason, not the layout
# (amn-ctensors, which follows the declaration, would not read them either).
mkcase hqqint "$(t l.weight I8 '[4,4]' 0 16),$(t l.weight_scale F16 '[4,1]' 16 24)" 24
echo '{"quantization_config":{"quant_method":"hqq","nbits":8}}' >"$work/hqqint/config.json"
expect_refused hqqint none "of hqq (l.weight (I8), l.weight_scale (F16)" \
  "no amn plugin dequantizes this method"

# A plain model beside a config that declares quantization (what `remember`
# leaves next to its input) converts: only integer / FP8 tensors are suspect.
mkcase plain "$(t l.weight BF16 '[2,2]' 0 8),$(t pos_ids I32 '[2]' 8 16)" 16
echo '{"quantization_config":{"quant_method":"mxfp4"}}' >"$work/plain/config.json"
if "$amn" remember "$work/plain/model.safetensors" -o "$work/plain/out.safetensors" >"$work/out" 2>&1; then pass; else fail_out "plain model beside a quantized config refused"; fi
"$amn" inspect "$work/plain/model.safetensors" >"$work/out" 2>&1
if grep -q "Unhandled" "$work/out"; then fail_out "plain model listed as unhandled"; else pass; fi

finish unhandled
