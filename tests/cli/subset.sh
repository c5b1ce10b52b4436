#!/usr/bin/env bash
# A distro ships only some plugins: remove each plugin in turn from the
# plugin directory; the others keep working and its files give the clear
# "install the amn-plugin-X package" error (exit 3).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init subset "$1" "$2"
plugdir=$build/lib/amn/plugins
# Each temporary plugin folder gets its own registry cache: keep them in $work.
export AMN_REGISTRY_CACHE_DIR=$work/registry-cache

# One sample file per plugin, made here (no reference corpus needed).
declare -A sample cmd real
# A valid file of each format, for "the others keep working".
real[safetensors]=$src/fixtures/example/tiny-f32.safetensors
real[npz]=$src/fixtures/npz/stored.npz
real[pth]=$src/fixtures/pth/checkpoint.pth
real[gguf]=$src/fixtures/gguf/tiny-v3.gguf
sample[safetensors]=$src/fixtures/example/tiny-f32.safetensors; cmd[safetensors]=inspect
sample[fp8]=$src/fixtures/example/tiny-fp8.safetensors;          cmd[fp8]=remember
printf 'GGUF\x03\x00\x00\x00' >"$work/m.gguf";                   sample[gguf]=$work/m.gguf; cmd[gguf]=inspect
printf 'PK\x03\x04\x14\x00' >"$work/w.npz";                      sample[npz]=$work/w.npz; cmd[npz]=inspect
printf 'PK\x03\x04\x14\x00' >"$work/w.pth";                      sample[pth]=$work/w.pth; cmd[pth]=inspect
mkst "$work/gptq.safetensors" '{"l.qweight":{"dtype":"I32","shape":[4,8],"data_offsets":[0,128]},"l.qzeros":{"dtype":"I32","shape":[1,1],"data_offsets":[128,132]},"l.scales":{"dtype":"F16","shape":[1,8],"data_offsets":[132,148]}}' 148
sample[gptq]=$work/gptq.safetensors; cmd[gptq]=remember
mkst "$work/awq.safetensors" '{"l.qweight":{"dtype":"I32","shape":[32,1],"data_offsets":[0,128]},"l.qzeros":{"dtype":"I32","shape":[1,1],"data_offsets":[128,132]},"l.scales":{"dtype":"F16","shape":[1,8],"data_offsets":[132,148]}}' 148
sample[awq]=$work/awq.safetensors; cmd[awq]=remember
mkst "$work/bnb.safetensors" '{"l.weight":{"dtype":"U8","shape":[32,1],"data_offsets":[0,32]},"l.weight.absmax":{"dtype":"F32","shape":[1],"data_offsets":[32,36]}}' 36
sample[bnb]=$work/bnb.safetensors; cmd[bnb]=remember
sample[mxfp4]=$src/fixtures/mxfp4/moe/model.safetensors;           cmd[mxfp4]=remember
sample[ctensors]=$src/fixtures/ctensors/w4_group_bf16/model.safetensors; cmd[ctensors]=remember
sample[nvfp4]=$src/fixtures/nvfp4/modelopt/model.safetensors;      cmd[nvfp4]=remember

shopt -s nullglob
plugins=()
for f in "$plugdir"/amn-*.so; do p=${f##*/amn-}; plugins+=("${p%.so}"); done
[ ${#plugins[@]} -gt 0 ] || { echo "no plugins built in $plugdir"; exit 1; }
for gone in "${plugins[@]}"; do
  dir=$work/plugins-without-$gone
  mkdir -p "$dir"
  for p in "${plugins[@]}"; do [ "$p" = "$gone" ] || cp "$plugdir/amn-$p.so" "$dir/"; done
  export AMN_PLUGIN_SYSTEM_PATH=$dir
  "$amn" plugins >"$work/out" 2>&1
  if grep -q "^  $gone " "$work/out"; then fail "$gone still listed"; else pass; fi
  # The removed plugin's files: exit 3 and a message naming it.
  if [ -n "${sample[$gone]:-}" ]; then
    if [ "${cmd[$gone]}" = inspect ]; then
      "$amn" inspect "${sample[$gone]}" >"$work/out" 2>&1
    else
      "$amn" "${cmd[$gone]}" "${sample[$gone]}" -o "$work/out.safetensors" >"$work/out" 2>&1
    fi
    rc=$?
    if [ $rc -eq 3 ] && grep -qE "install the (amn-plugin-[a-z0-9]+ or )?amn-plugin-$gone( or amn-plugin-[a-z0-9]+)? package" "$work/out"; then pass; else
      fail "without $gone: exit $rc"; indent "$work/out"; fi
  fi
  # The others keep working: each remaining format reads its own file, and
  # (with safetensors built) a conversion runs.
  for p in "${plugins[@]}"; do
    [ "$p" != "$gone" ] && [ -n "${real[$p]:-}" ] || continue
    if "$amn" inspect "${real[$p]}" >"$work/out" 2>&1; then pass; else
      fail "without $gone, inspect of ${real[$p]} broke"; cat "$work/out"; fi
  done
  if [ "$gone" != safetensors ] && [ -f "$plugdir/amn-safetensors.so" ]; then
    if "$amn" convert "${sample[safetensors]}" --to safetensors -o "$work/ok.safetensors" --force >"$work/out" 2>&1; then
      pass; else fail "without $gone, convert broke"; cat "$work/out"; fi
  fi
done
unset AMN_PLUGIN_SYSTEM_PATH
finish subset
