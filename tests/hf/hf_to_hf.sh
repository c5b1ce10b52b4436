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
    Llama-3.1-8B-Instruct Qwen3-MoE-Tiny-Instruct Qwen1.5-MoE-Tiny-Chat Qwen3-MoE-Tiny-Fused SmolLM3-Tiny \
    Granite-3.3-Tiny-Instruct OLMo-2-Tiny-Instruct Olmo-3-Tiny-Think DeepSeek-V3-Tiny \
    DeepSeek-V2-Lite-Tiny-Chat Gemma-2-Tiny-2B Gemma-3-Tiny-it gemma-tiny-it gemma-3-tiny-mm; do
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
for ct in qwen2-tiny/bf16 Mistral-Tiny-v0.3/f16 Mixtral-Tiny-4x1K/bf16 Qwen3-MoE-Tiny-Instruct/bf16 \
    Qwen1.5-MoE-Tiny-Chat/f16 Qwen3-MoE-Tiny-Fused/f16 SmolLM3-Tiny/bf16 \
    Granite-3.3-Tiny-Instruct/f16 Olmo-3-Tiny-Think/bf16 DeepSeek-V3-Tiny/bf16 \
    DeepSeek-V2-Lite-Tiny-Chat/f16; do
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
# More experts per layer than an encoder's outputs once were (8): the Qwen3-MoE
# folder with its four experts repeated to 20 (a real Qwen3-30B-A3B has 128).
c=Qwen3-MoE-20x
mkdir -p "$work/$c/out" && cp -r "$src/fixtures/hf/Qwen3-MoE-Tiny-Instruct" "$work/$c/in"
$py "$src/tests/hf/hf_st_edit.py" "$work/$c/in" '
for k in [k for k in t if re.match(r".*[.]experts[.]0[.]", k)]:
    for x in range(4, 20):
        t[k.replace(".experts.0.", ".experts.%d." % x)] = t[k.replace(".experts.0.", ".experts.%d." % (x % 4))]'
$py - "$work/$c/in/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["num_experts"] = 20
json.dump(c, open(sys.argv[1], "w"))
PY
if "$amn" convert "$work/$c/in" --to gguf --out-dtype f32 -o "$work/$c/a.gguf" --quiet >"$work/log" 2>&1 &&
    "$amn" convert "$work/$c/a.gguf" --to hf -o "$work/$c/out/$c/" --quiet >>"$work/log" 2>&1; then
  /usr/bin/python3 "$src/tests/hf/hf_compare.py" "$work/$c/in" "$work/$c/out/$c" >"$work/log" &&
    grep -q "^in: 1[0-9][0-9] tensors compared" "$work/log" && pass ||
    { fail "$c: not the original tensors"; indent "$work/log"; }
else
  fail "$c: amn failed"; indent "$work/log"
fi
finish hf_to_hf need-passes
