#!/usr/bin/env bash
# A GGUF that cannot become a Hugging Face folder is refused before any
# output exists: an architecture without a table (unsupported, exit 3,
# naming the supported ones), a GGUF lacking its head counts (a parse
# error, exit 1), a tensor the family has no name for and a vocabulary type
# without tokenizer files (unsupported), an
# output dtype a folder does not take (usage, exit 2). The bad GGUFs are a
# converted fixture with names patched in place (same lengths).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init hf2-bad "$1" "$2"
need_plugin hf "scheme hfdir "
good=$work/good.gguf
"$amn" convert "$src/fixtures/hf/qwen2-tiny" --to gguf --out-dtype f32 -o "$good" --quiet ||
  { echo "FAIL: cannot make the base GGUF"; exit 1; }
# patch NAME FROM TO: a copy of the good GGUF with every FROM replaced by TO.
patch() {
  /usr/bin/python3 - "$good" "$work/$1.gguf" "$2" "$3" <<'PY'
import sys
src, dst, a, b = sys.argv[1:5]
assert len(a) == len(b)
data = open(src, "rb").read()
assert a.encode() in data
open(dst, "wb").write(data.replace(a.encode(), b.encode()))
PY
}
# refused NAME RC PATTERN [ARGS...]: exit RC, PATTERN in stderr, no output folder.
refused() {
  local name=$1 want=$2 pat=$3
  shift 3
  local out=$work/out-$name
  "$amn" convert "$work/$name.gguf" --to hf -o "$out/" "$@" >"$work/log" 2>&1
  local rc=$?
  if [ $rc -ne "$want" ]; then
    fail "$name: exit $rc, want $want"; indent "$work/log"
  elif ! grep -q -- "$pat" "$work/log"; then
    fail "$name: stderr lacks '$pat'"; indent "$work/log"
  elif [ -e "$out" ] || ls -a "$work" | grep -q "^\.out-$name"; then
    fail "$name: output left behind"
  else
    pass
  fi
}
patch arch qwen2 qwfoo && refused arch 3 "supported: llama, smollm3, granite, qwen2, qwen3, qwen2moe, qwen3moe, phi3, gemma, gemma2, gemma3, olmo2, deepseek2"
patch heads attention.head_count attention.heXd_count && refused heads 1 "head_count"
patch tensor ffn_down ffn_dowX && refused tensor 3 "no Hugging Face name"
# A vocabulary type without tokenizer files: Llama-2-Tiny-SPM's GGUF with
# tokenizer.ggml.model "llama" made "llamb".
"$amn" convert "$src/fixtures/hf/Llama-2-Tiny-SPM" --to gguf --out-dtype f32 -o "$work/spm.gguf" \
  --quiet && /usr/bin/python3 - "$work/spm.gguf" "$work/vocab.gguf" <<'PY' && refused vocab 3 "'llamb' vocabulary"
import struct, sys
data = open(sys.argv[1], "rb").read()
key = b"tokenizer.ggml.model"
old = key + struct.pack("<IQ", 8, 5) + b"llama"
assert data.count(old) == 1
open(sys.argv[2], "wb").write(data.replace(old, key + struct.pack("<IQ", 8, 5) + b"llamb"))
PY
cp "$good" "$work/dtype.gguf" && refused dtype 2 "f32, f16 or bf16" --out-dtype q8_0
# DeepSeek's kv_b_proj needs both halves: its attn_v_b renamed away.
"$amn" convert "$src/fixtures/hf/DeepSeek-V2-Lite-Tiny-Chat" --to gguf --out-dtype f32 \
  -o "$work/ds.gguf" --quiet && /usr/bin/python3 - "$work/ds.gguf" "$work/mla.gguf" <<'PY' &&
import sys
data = open(sys.argv[1], "rb").read()
assert data.count(b"attn_v_b") == 2
open(sys.argv[2], "wb").write(data.replace(b"attn_v_b", b"attn_v_c"))
PY
  refused mla 1 "blk.0.attn_k_b.weight without blk.0.attn_v_b.weight"
# Stacked experts split back count against --max-items: the Qwen3-MoE
# GGUF's 27 tensors open within 40, its 45 outputs do not fit.
"$amn" convert "$src/fixtures/hf/Qwen3-MoE-Tiny-Instruct" --to gguf --out-dtype f32 \
  -o "$work/moe.gguf" --quiet && refused moe 4 "more than 40 tensors to write" --max-items 40
# The good one, for contrast, makes a folder.
cp "$good" "$work/ok.gguf"
if "$amn" convert "$work/ok.gguf" --to hf -o "$work/out-ok/" --quiet >"$work/log" 2>&1 &&
    [ -f "$work/out-ok/config.json" ] && [ -f "$work/out-ok/model.safetensors" ]; then
  pass
else
  fail "ok: no folder"; indent "$work/log"
fi
finish hf_to_hf_bad need-passes
