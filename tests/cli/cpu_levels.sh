#!/usr/bin/env bash
# The same bytes at every kernel level, the level chosen the way a user's CPU
# chooses it: every conversion below runs natively (the CPU's best level),
# with AMN_SIMD=avx2 and AMN_SIMD=scalar, and, where qemu-x86_64 is
# installed, under `qemu-x86_64 -cpu Nehalem` (no AVX at all: the real CPUID
# makes the kernels pick their scalar paths) and `-cpu Haswell` (AVX2, no
# AVX-512); every output must equal the native one byte for byte.
# usage: cpu_levels.sh BUILD SRC [--no-qemu]   (no qemu under sanitizers)
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init levels "$1" "$2"
use_qemu=1
[ "${3:-}" = "--no-qemu" ] && use_qemu=0

qemu=$(command -v qemu-x86_64 || true)
case "$(uname -m)" in x86_64) ;; *) qemu="" ;; esac
# A cross build (amn itself runs under qemu-user, AMN_TEST_EMULATOR) has the
# scalar path only, and qemu-x86_64 cannot run it: each conversion runs once.
levels=(avx2 scalar)
if [ -n "${AMN_TEST_EMULATOR:-}" ]; then
  levels=()
  use_qemu=0
fi
if [ "$use_qemu" = 1 ] && [ -z "$qemu" ]; then
  if [ -n "${CI:-}" ]; then
    echo "FAIL: qemu-x86_64 not found (apt-get install qemu-user)"; exit 1
  fi
  echo "note: qemu-x86_64 not found; native levels only"
fi
[ "$use_qemu" = 1 ] || qemu=""

ref=${AMN_REFERENCE_DIR:-$src/../shared/fixtures}

# run NAME OUTEXT ARGS...: ARGS with OUT standing for the output path, in
# every way; outputs compared with the native run's.
run() {
  local name=$1 ext=$2
  shift 2
  local ways=(native "${levels[@]}")
  [ -n "$qemu" ] && ways+=(nehalem haswell)
  local base="" way
  for way in "${ways[@]}"; do
    local out=$work/$name-$way.$ext args=() a
    for a in "$@"; do [ "$a" = OUT ] && args+=("$out") || args+=("$a"); done
    local cmd=("$amn" "${args[@]}" --force --quiet)
    case $way in
      avx2 | scalar) cmd=(env AMN_SIMD=$way "${cmd[@]}") ;;
      nehalem) cmd=("$qemu" -cpu Nehalem "${cmd[@]}") ;;
      haswell) cmd=("$qemu" -cpu Haswell "${cmd[@]}") ;;
    esac
    "${cmd[@]}" >"$work/log" 2>&1
    local rc=$?
    if [ "$rc" -ne 0 ]; then
      fail "$name ($way): exit $rc"; grep -v "TCG doesn't support" "$work/log" | indent
      continue
    fi
    local sum
    sum=$(find "$out" -type f -print0 | sort -z | xargs -0 sha256sum | sed "s|$out||" | sha256sum)
    if [ -z "$base" ]; then base=$sum; pass
    elif [ "$sum" = "$base" ]; then pass
    else fail "$name ($way): output differs from the native run's"; fi
  done
}

ex=$src/fixtures/example
if have "format safetensors"; then
  run fp8-bf16 safetensors remember "$ex/tiny-fp8.safetensors" -o OUT
  run fp8-f32 safetensors remember "$ex/tiny-fp8.safetensors" --to f32 -o OUT
  run f32-bf16 safetensors convert "$ex/tiny-f32.safetensors" --to safetensors -o OUT
  run f32-f16 safetensors convert "$ex/tiny-f32.safetensors" --to safetensors --out-dtype f16 -o OUT
  have "format npz" && run f32-npz npz convert "$ex/tiny-fp8.safetensors" --to npz -o OUT
  have "format pth" && run f32-pth pth convert "$ex/tiny-fp8.safetensors" --to pth -o OUT
  if have "scheme bnb"; then
    for t in bnb-nf4 bnb-fp4-dq bnb-int8; do
      run "forget-$t" safetensors forget "$src/fixtures/bnb/model/model.safetensors" --to "$t" -o OUT
    done
    run bnb-remember safetensors remember "$src/fixtures/bnb/expect-bnb-nf4-dq.safetensors" -o OUT
  fi
  for d in ctensors/w4_block ctensors/w4_actorder ctensors/int8 mxfp4/moe fp8/ct_channel_bf16; do
    have "scheme ${d%%/*}" || continue
    run "${d//\//-}" safetensors remember "$src/fixtures/$d/model.safetensors" --to f32 -o OUT
  done
  for d in nvfp4/modelopt nvfp4/ctensors; do
    have "scheme nvfp4" && [ -f "$src/fixtures/$d/model.safetensors" ] || continue
    run "${d//\//-}" safetensors remember "$src/fixtures/$d/model.safetensors" -o OUT
  done
fi
if have "format gguf"; then
  # The decoded blocks, written as safetensors where that plugin is built,
  # else as npz (a plugin subset build).
  q=$src/fixtures/gguf/tiny-quant.gguf
  if have "format safetensors"; then
    run gguf-bf16 safetensors remember "$q" -o OUT
    run gguf-f32 safetensors remember "$q" --to f32 -o OUT
  elif have "format npz"; then
    run gguf-npz-f32 npz convert "$q" --to npz --out-dtype f32 -o OUT
  fi
  model=$ref/gguf_quant_reference/model_l4_f16.gguf
  if [ -f "$model" ]; then
    for t in Q4_K_M IQ4_XS IQ3_S; do
      run "forget-$t" gguf forget "$model" --to "$t" -o OUT
    done
  elif [ -n "${CI:-}" ]; then
    fail "reference corpus missing ($model)"
  fi
fi

finish cpu_levels skip-if-none
