#!/usr/bin/env bash
# `amn convert DIR --to gguf-TYPE [--via T]` (one pass) must write the bytes
# of the two-step pipeline it stands for: `amn convert DIR --to gguf
# --out-dtype T` (llama.cpp's convert_hf_to_gguf.py --outtype T, proven by
# hf_gguf) then `amn forget OUT.gguf --to TYPE` (llama-quantize, proven by
# the gguf suites). Several file types (mixtures whose rules read the
# hyperparameters among them), architectures, --via dtypes, threads 1 and 3;
# then requests refused before any output exists.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init onepass "$1" "$2"
need_plugin hf "scheme hf "
run() { "$@" --quiet >"$work/log" 2>&1 || { indent "$work/log"; return 1; }; }

# check FOLDER VIA TYPE [llama-quantize options...]
check() {
  local c=$1 via=$2 type=$3; shift 3
  local dir=$src/fixtures/hf/$c step1=$work/$c-$via.gguf ref=$work/ref.gguf
  if [ ! -e "$step1" ] && ! run "$amn" convert "$dir" --to gguf --out-dtype "$via" -o "$step1"; then
    fail "$c: step one (--out-dtype $via) failed"; return
  fi
  "$amn" forget "$step1" --to "$type" "$@" -o "$ref" --force --quiet >"$work/log" 2>&1
  local want=$?
  if [ $want -ne 0 ]; then # llama-quantize refuses: so must the one pass, before any output
    rm -f "$work/one.gguf"
    "$amn" convert "$dir" --to "gguf-$type" --via "$via" "$@" -o "$work/one.gguf" --quiet \
      >"$work/log2" 2>&1
    local got=$?
    [ $got = $want ] && [ ! -e "$work/one.gguf" ] && cmp -s "$work/log" "$work/log2" &&
      pass ||
      fail "$c $via $type $*: step two refuses (exit $want), the one pass gives exit $got"
    return
  fi
  for threads in 1 3; do
    local out=$work/one.gguf
    if ! run "$amn" convert "$dir" --to "gguf-$type" --via "$via" "$@" --threads "$threads" \
        -o "$out" --force; then
      fail "$c $via $type $* (threads $threads): one pass failed"; continue
    fi
    cmp -s "$ref" "$out" && pass ||
      fail "$c $via $type $* (threads $threads): one pass differs from the two steps ($(cmp "$ref" "$out" | head -1))"
  done
}

for type in Q4_K_M Q8_0 Q6_K IQ4_XS Q4_0 Q3_K_M Q5_K_M; do
  check TinyLlama-1.1B-Chat-v1.0 f16 "$type" # llama, BF16, two shards
  check qwen2-tiny f16 "$type" # rows of 40: Q8_0 / Q4_0 have no fallback (refused)
  check Qwen2.5-Tiny-Instruct f16 "$type"
  check gemma-tiny-it f16 "$type"
  check Mixtral-Tiny-4x1K f16 "$type" # experts stacked
  check Qwen3-MoE-Tiny-Instruct bf16 "$type" # experts stacked down, gate, up
  check Qwen1.5-MoE-Tiny-Chat f16 "$type"    # and a shared expert
done
for type in IQ2_XXS Q2_K Q3_K_S Q4_K_S Q5_0 Q5_1 Q4_1 IQ4_NL IQ3_S IQ3_M TQ1_0 TQ2_0 MXFP4_MOE BF16 F16; do
  check Mixtral-Tiny-4x1K f16 "$type"
done
check Llama-3.1-8B-Instruct f32 Q4_K_M # rope_freqs, F32 input
check Llama-3.1-8B-Instruct bf16 Q4_K_M
check Gemma-2-Tiny-2B bf16 Q5_K_M
check Gemma-2-Tiny-2B f32 Q6_K
check Qwen3-Tiny-Base bf16 Q3_K_M
check Phi-3-mini-4k-instruct f16 Q4_K_M
check Mistral-Tiny-v0.3 f16 Q4_K_M --pure
check qwen2-tiny f16 Q4_K_M --output-tensor-type q8_0 --tensor-type attn_v=q5_0
check Llama-2-Tiny-SPM f16 COPY # the first step's tensors and general.file_type kept
check Llama-3.1-8B-Instruct bf16 COPY
check Qwen3-Tiny-Base f32 Q4_K # an alias of Q4_K_M
check TinyLlama-1.1B-Chat-v1.0 auto Q4_K_M # the converter's guess: bf16 here
check qwen2-tiny-bin auto Q6_K             # pytorch_model*.bin shards; f16 here

# A quantized folder (made here by amn's bnb encoder) is dequantized on the
# way as `remember` dequantizes it: the reference is `amn remember --to
# f32` into a folder of the same name, then the two steps.
qcheck() { # qcheck FOLDER BNB_TARGET TYPE
  local c=$1 bnb=$2 type=$3 q=$work/q-$2/$1 deq=$work/deq-$2/$1
  mkdir -p "$work/q-$bnb" "$work/deq-$bnb"
  if [ ! -e "$deq" ] && ! { run "$amn" forget "$src/fixtures/hf/$c" --to "$bnb" -o "$q/" &&
      run "$amn" remember "$q" --to f32 -o "$deq/"; }; then
    fail "$c $bnb: making the quantized and dequantized folders failed"; return
  fi
  run "$amn" convert "$deq" --to gguf -o "$work/deq.gguf" --force &&
    run "$amn" forget "$work/deq.gguf" --to "$type" -o "$work/ref.gguf" --force &&
    run "$amn" convert "$q" --to gguf -o "$work/q.gguf" --force &&
    run "$amn" convert "$q" --to "gguf-$type" -o "$work/one.gguf" --force --threads 3 ||
    { fail "$c $bnb $type: a step failed"; return; }
  cmp -s "$work/deq.gguf" "$work/q.gguf" && cmp -s "$work/ref.gguf" "$work/one.gguf" &&
    pass || fail "$c $bnb $type: the quantized folder converts otherwise"
}
if have "scheme bnb "; then
  qcheck TinyLlama-1.1B-Chat-v1.0 bnb-nf4 Q4_K_M
  qcheck TinyLlama-1.1B-Chat-v1.0 bnb-int8 Q6_K
  qcheck Mixtral-Tiny-4x1K bnb-nf4 Q4_K_M
  qcheck gemma-tiny-it bnb-fp4 Q8_0
fi

# Refused before any output exists.
refuse() { # refuse WANT_EXIT ARGS...
  local want=$1; shift
  rm -f "$work/bad.gguf"
  "$amn" convert "$@" -o "$work/bad.gguf" --quiet >"$work/log" 2>&1
  local got=$?
  [ "$got" = "$want" ] && [ ! -e "$work/bad.gguf" ] && pass ||
    fail "convert $* gave exit $got (want $want) or left an output"
}
dir=$src/fixtures/hf/qwen2-tiny
refuse 2 "$dir" --to gguf-Q4_K_M --via q8_0
refuse 2 "$dir" --to gguf-Q4_K_M --out-dtype f16
refuse 2 "$dir" --to gguf --via f16
refuse 2 "$dir" --to gguf-Q4_K_M --tensor-type attn_v=nonsense
mkdir -p "$work/unknown" && cp "$dir"/*.safetensors "$dir"/config.json "$work/unknown/" &&
  sed -i 's/Qwen2ForCausalLM/NoSuchForCausalLM/' "$work/unknown/config.json"
refuse 3 "$work/unknown" --to gguf-Q4_K_M

finish hf_onepass need-passes
