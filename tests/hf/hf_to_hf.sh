#!/usr/bin/env bash
# GGUF -> Hugging Face folder: each fixture folder of fixtures/hf made an F32
# GGUF (`--to gguf --out-dtype f32`), that GGUF made a folder again (`--to
# hf`, F32 as the GGUF is): its tensors equal the original folder's values
# byte for byte and its config.json's fields the original's
# (hf_compare.py), and the written folder made a GGUF again equals the first
# GGUF byte for byte (Qwen2.5-Tiny-Instruct's model card lists too: base
# models, datasets, tags, languages come back in the written README.md's
# front matter). Two are compared
# by the GGUF made again only: gemma-tiny-it (F16 weights: Gemma's norm + 1
# was rounded to F16, which a minus one does not undo exactly) and
# gemma-3-tiny-mm (the multimodal wrapper comes back as the text model).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init hf2 "$1" "$2"
need_plugin hf "scheme hfdir "
need_python torch
for c in qwen2-tiny Qwen2.5-Tiny-Instruct qwen3-tiny-noindex Qwen3-Tiny-Base Mistral-Tiny-v0.3 \
    Mixtral-Tiny-4x1K Phi-3-mini-4k-instruct Phi-3-mini-128k-instruct TinyLlama-1.1B-Chat-v1.0 \
    Llama-3.1-8B-Instruct \
    Gemma-2-Tiny-2B Gemma-3-Tiny-it gemma-tiny-it gemma-3-tiny-mm; do
  mkdir -p "$work/$c/out"
  a=$work/$c/a.gguf b=$work/$c/b.gguf out=$work/$c/out/$c
  if ! "$amn" convert "$src/fixtures/hf/$c" --to gguf --out-dtype f32 -o "$a" --quiet >"$work/log" 2>&1; then
    fail "$c: to gguf"; indent "$work/log"; continue
  fi
  if ! "$amn" convert "$a" --to hf -o "$out/" --quiet >"$work/log" 2>&1; then
    fail "$c: to hf"; indent "$work/log"; continue
  fi
  case $c in
  gemma-tiny-it | gemma-3-tiny-mm) ;;
  *) if /usr/bin/python3 "$src/tests/hf/hf_compare.py" "$src/fixtures/hf/$c" "$out"; then
       pass
     else
       fail "$c: the written folder differs from the original"
     fi ;;
  esac
  if ! "$amn" convert "$out" --to gguf --out-dtype f32 -o "$b" --quiet >"$work/log" 2>&1; then
    fail "$c: back to gguf"; indent "$work/log"; continue
  fi
  cmp -s "$a" "$b" && pass || fail "$c: the GGUF made again differs"
done
# A BF16 GGUF of BF16 weights (and F16 of F16) comes back in that dtype (the
# default: the GGUF's float type), its tensors the original's bytes.
for ct in qwen2-tiny/bf16 Mistral-Tiny-v0.3/f16 Mixtral-Tiny-4x1K/bf16; do
  c=${ct%/*} t=${ct#*/}
  a=$work/$c-$t.gguf out=$work/$c/same/$c
  mkdir -p "$work/$c/same"
  if "$amn" convert "$src/fixtures/hf/$c" --to gguf --out-dtype "$t" -o "$a" --quiet >"$work/log" 2>&1 &&
      "$amn" convert "$a" --to hf -o "$out/" --quiet >>"$work/log" 2>&1; then
    /usr/bin/python3 "$src/tests/hf/hf_compare.py" --same-dtype "$src/fixtures/hf/$c" "$out" &&
      pass || fail "$c $t: not the original tensors"
  else
    fail "$c $t: amn failed"; indent "$work/log"
  fi
done
finish hf_to_hf need-passes
